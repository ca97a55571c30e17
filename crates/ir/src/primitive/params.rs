//! Reading and writing a primitive's parameters through the [`Param`] tree: the
//! [`ParamReader`] the family modules parse from, and the small writers they print with.
//!
//! What it keeps true: a parameter the parser read but no family function took is an error
//! (`ParamReader::finish`), never silently dropped.

use std::sync::Arc;

use crate::jaxpr::Jaxpr;
use crate::param::Param;
use crate::types::DType;

/// A primitive's parameters in printing order, as [`super::Primitive::params`] gives them.
pub(crate) type Params = Vec<(&'static str, Param)>;

/// A dtype as a parameter value: `float32`.
pub(super) fn dtype_param(d: DType) -> Param {
    Param::Word(d.numpy_name().to_string())
}

pub(super) fn usizes_of(p: &Param) -> Option<Vec<usize>> {
    p.as_seq()?.iter().map(|x| x.as_int().and_then(|x| usize::try_from(x).ok())).collect()
}

/// Takes named parameters off a parsed list, remembering which were used so that an
/// unexpected parameter is an error rather than silently dropped.
pub(super) struct ParamReader<'a> {
    prim: &'a str,
    params: Vec<(String, Param)>,
    used: Vec<String>,
}

impl<'a> ParamReader<'a> {
    /// The parameters read for the primitive named `prim` (the name errors start with).
    pub(super) fn new(prim: &'a str, params: Vec<(String, Param)>) -> ParamReader<'a> {
        ParamReader { prim, params, used: Vec::new() }
    }

    /// The name of the primitive whose parameters these are.
    pub(super) fn prim(&self) -> &str {
        self.prim
    }

    pub(super) fn has(&self, key: &str) -> bool {
        self.params.iter().any(|(k, _)| k == key)
    }

    pub(super) fn take(&mut self, key: &str) -> Result<Param, String> {
        self.used.push(key.to_string());
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("{} is missing parameter `{key}`", self.prim))
    }

    pub(super) fn is_none(&self, key: &str) -> bool {
        self.params.iter().any(|(k, v)| k == key && matches!(v, Param::None))
    }

    /// A parameter JAX prints only when it is not `None`; only `None` is supported.
    pub(super) fn optional_none(&mut self, key: &str) -> Result<(), String> {
        if !self.has(key) {
            return Ok(());
        }
        match self.take(key)? {
            Param::None => Ok(()),
            other => Err(format!("{}: only {key}=None is supported, found {other}", self.prim)),
        }
    }

    fn wrong(&self, key: &str, want: &str, got: &Param) -> String {
        format!("{}: parameter `{key}` must be {want}, found {got}", self.prim)
    }

    pub(super) fn int(&mut self, key: &str) -> Result<i64, String> {
        let v = self.take(key)?;
        v.as_int().ok_or_else(|| self.wrong(key, "an integer", &v))
    }

    pub(super) fn usize(&mut self, key: &str) -> Result<usize, String> {
        let v = self.take(key)?;
        v.as_int().and_then(|x| usize::try_from(x).ok()).ok_or_else(|| self.wrong(key, "a non-negative integer", &v))
    }

    pub(super) fn usizes(&mut self, key: &str) -> Result<Vec<usize>, String> {
        let v = self.take(key)?;
        usizes_of(&v).ok_or_else(|| self.wrong(key, "a tuple of non-negative integers", &v))
    }

    pub(super) fn seq(&mut self, key: &str) -> Result<Vec<Param>, String> {
        let v = self.take(key)?;
        v.as_seq().map(<[Param]>::to_vec).ok_or_else(|| self.wrong(key, "a tuple", &v))
    }

    pub(super) fn bool(&mut self, key: &str) -> Result<bool, String> {
        match self.take(key)? {
            Param::Bool(b) => Ok(b),
            v => Err(self.wrong(key, "True or False", &v)),
        }
    }

    pub(super) fn word(&mut self, key: &str) -> Result<String, String> {
        match self.take(key)? {
            // `<lambda>` is how JAX names an anonymous Python function.
            Param::Word(w) | Param::Opaque(w) => Ok(w),
            Param::Str(s) => Ok(s),
            v => Err(self.wrong(key, "a name", &v)),
        }
    }

    pub(super) fn dtype(&mut self, key: &str) -> Result<DType, String> {
        match self.take(key)? {
            Param::Word(w) => DType::from_numpy_name(&w).ok_or_else(|| {
                format!("{}: unsupported dtype `{w}` for `{key}` (float32, float64, int32, bool)", self.prim)
            }),
            v => Err(self.wrong(key, "a dtype", &v)),
        }
    }

    pub(super) fn jaxpr(&mut self, key: &str) -> Result<Arc<Jaxpr>, String> {
        match self.take(key)? {
            Param::Jaxpr(j) => Ok(j),
            v => Err(self.wrong(key, "a jaxpr", &v)),
        }
    }

    pub(super) fn finish(self) -> Result<(), String> {
        for (k, _) in &self.params {
            if !self.used.iter().any(|u| u == k) {
                return Err(format!("{} has no parameter `{k}`", self.prim));
            }
        }
        Ok(())
    }
}
