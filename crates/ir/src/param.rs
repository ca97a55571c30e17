//! Parameter values as JAX prints them: a small tree of Python reprs (`None`, `True`, `3`,
//! `np.int64(3)`, `(0, 1)`, `[2]`, `'device'`, `frozenset({'a'})`, `float32`,
//! `MemorySpace.Host`, `DotsSaveable(only_if_no_batch_dims=True)`, `<function f at 0xXX>`,
//! nested jaxprs). The printer renders primitives through this tree and the parser reads
//! into it, so both directions share one description of every parameter.
//!
//! [`Param`] itself is declared with the jaxpr (`jaxpr.rs`), since a parameter value may
//! be a jaxpr and a jaxpr's primitives hold parameter values; this module is its text
//! form: Python's reprs, and a remat [`Policy`] as one.

use std::fmt::{self, Write};

pub use crate::jaxpr::Param;
use crate::policy::Policy;

impl Param {
    pub fn ints<I: IntoIterator<Item = usize>>(xs: I) -> Param {
        Param::Tuple(xs.into_iter().map(|x| Param::Int(x as i64)).collect())
    }

    pub fn int_list<I: IntoIterator<Item = usize>>(xs: I) -> Param {
        Param::List(xs.into_iter().map(|x| Param::Int(x as i64)).collect())
    }

    /// A short description of the value's kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Param::None => "None",
            Param::Bool(_) => "a boolean",
            Param::Int(_) => "an integer",
            Param::Float(_) => "a float",
            Param::Str(_) => "a string",
            Param::Word(_) => "a name",
            Param::Tuple(_) => "a tuple",
            Param::List(_) => "a list",
            Param::FrozenSet(_) => "a frozenset",
            Param::Entry(..) => "a key: value entry",
            Param::Call { .. } => "a call",
            Param::Opaque(_) => "an opaque value",
            Param::Jaxpr(_) => "a jaxpr",
        }
    }

    /// The integer, accepting `np.int64(3)` and its kin as well as `3`.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Param::Int(x) => Some(*x),
            Param::Call { func, args, kwargs } if is_numpy_int(func) && args.len() == 1 && kwargs.is_empty() => {
                args[0].as_int()
            }
            _ => None,
        }
    }

    /// The elements of a tuple or list.
    pub fn as_seq(&self) -> Option<&[Param]> {
        match self {
            Param::Tuple(xs) | Param::List(xs) => Some(xs),
            _ => None,
        }
    }

    /// Writes the Python repr. Nested jaxprs cannot be written without a naming context and
    /// are written as `{...}`; the jaxpr printer handles them itself.
    pub fn write_repr(&self, out: &mut String) {
        match self {
            Param::None => out.push_str("None"),
            Param::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
            Param::Int(x) => write!(out, "{x}").unwrap(),
            Param::Float(x) => out.push_str(&py_float_repr(*x)),
            Param::Str(s) => write_py_str(s, out),
            Param::Word(w) => out.push_str(w),
            Param::Tuple(xs) => {
                out.push('(');
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    x.write_repr(out);
                }
                if xs.len() == 1 {
                    out.push(',');
                }
                out.push(')');
            }
            Param::List(xs) => {
                out.push('[');
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    x.write_repr(out);
                }
                out.push(']');
            }
            Param::FrozenSet(xs) => {
                if xs.is_empty() {
                    out.push_str("frozenset()");
                } else {
                    out.push_str("frozenset({");
                    for (i, x) in xs.iter().enumerate() {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        x.write_repr(out);
                    }
                    out.push_str("})");
                }
            }
            Param::Entry(k, v) => {
                k.write_repr(out);
                out.push_str(": ");
                v.write_repr(out);
            }
            Param::Call { func, args, kwargs } => {
                out.push_str(func);
                out.push('(');
                let mut first = true;
                for a in args {
                    if !first {
                        out.push_str(", ");
                    }
                    first = false;
                    a.write_repr(out);
                }
                for (k, v) in kwargs {
                    if !first {
                        out.push_str(", ");
                    }
                    first = false;
                    out.push_str(k);
                    out.push('=');
                    v.write_repr(out);
                }
                out.push(')');
            }
            Param::Opaque(s) => out.push_str(s),
            Param::Jaxpr(_) => out.push_str("{...}"),
        }
    }

    pub fn repr(&self) -> String {
        let mut s = String::new();
        self.write_repr(&mut s);
        s
    }
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repr())
    }
}

pub(crate) fn is_numpy_int(func: &str) -> bool {
    matches!(func, "np.int64" | "np.int32" | "np.int8" | "np.int16" | "np.uint32" | "np.uint64")
}

/// Python's repr of a `str`: single quotes unless the text holds a single quote and no
/// double quote.
fn write_py_str(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// Rewrites `np.int64(3)` (and the other NumPy integer spellings) to `3`, leaving the rest
/// of the text alone: the canonical form two spellings of one parameter value share.
pub(crate) fn strip_numpy_ints(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("np.") {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let open = tail.find('(');
        let ok = open.and_then(|o| {
            let func = &tail[..o];
            let close = tail[o..].find(')')? + o;
            let inner = &tail[o + 1..close];
            (is_numpy_int(func) && inner.parse::<i64>().is_ok()).then_some((inner, close))
        });
        match ok {
            Some((inner, close)) => {
                out.push_str(inner);
                rest = &tail[close + 1..];
            }
            None => {
                out.push_str("np.");
                rest = &tail[3..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Python's `repr(float)`: the shortest digits that round-trip, in fixed notation when the
/// decimal exponent is in [-4, 16), otherwise in exponent notation (`1e-05`, `1e+16`).
pub fn py_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    // `{:e}` gives the shortest round-trip digits: "d.ddddde-N".
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent digits");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if x < 0.0 { "-" } else { "" };
    let ndigits = digits.len() as i32;
    if (-4..16).contains(&exp) {
        let s = if exp >= 0 {
            let int_len = exp + 1;
            if ndigits <= int_len {
                format!("{digits}{}.0", "0".repeat((int_len - ndigits) as usize))
            } else {
                format!("{}.{}", &digits[..int_len as usize], &digits[int_len as usize..])
            }
        } else {
            format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
        };
        format!("{sign}{s}")
    } else {
        let m = if digits.len() == 1 { digits.clone() } else { format!("{}.{}", &digits[..1], &digits[1..]) };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{esign}{:02}", exp.abs())
    }
}

// Remat policies' text form: JAX's reprs (`DotsSaveable(only_if_no_batch_dims=True)`,
// `SaveOnlyTheseNames(saveable_names=frozenset({'a'}))`, `<function f at 0xXX>`), as the
// `policy` parameter of `remat2` holds them.

impl Policy {
    /// The policy as JAX prints it.
    pub fn to_param(&self) -> Param {
        let call = |func: &str, kwargs: Vec<(&str, Param)>| Param::Call {
            func: func.to_string(),
            args: Vec::new(),
            kwargs: kwargs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        };
        let set = |names: &[String]| Param::FrozenSet(names.iter().map(|n| Param::Str(n.clone())).collect());
        match self {
            Policy::EverythingSaveable => call("EverythingSaveable", vec![]),
            Policy::NothingSaveable => call("NothingSaveable", vec![]),
            Policy::DotsSaveable { only_if_no_batch_dims } => {
                call("DotsSaveable", vec![("only_if_no_batch_dims", Param::Bool(*only_if_no_batch_dims))])
            }
            Policy::SaveOnlyTheseNames { names } => call("SaveOnlyTheseNames", vec![("saveable_names", set(names))]),
            Policy::SaveAnyNamesButThese { names } => call("SaveAnyNamesButThese", vec![("names", set(names))]),
            Policy::SaveAnythingExceptTheseNames { names } => {
                call("SaveAnythingExceptTheseNames", vec![("names", set(names))])
            }
            Policy::SaveFromBothPolicies { policy_1, policy_2 } => {
                call("SaveFromBothPolicies", vec![("policy_1", policy_1.to_param()), ("policy_2", policy_2.to_param())])
            }
            Policy::SaveAndOffloadOnlyTheseNames { saved, offloaded, offload_src, offload_dst } => call(
                "SaveAndOffloadOnlyTheseNames",
                vec![
                    ("names_which_can_be_saved", set(saved)),
                    ("names_which_can_be_offloaded", set(offloaded)),
                    ("offload_src", Param::Str(offload_src.clone())),
                    ("offload_dst", Param::Str(offload_dst.clone())),
                ],
            ),
            Policy::OffloadDotWithNoBatchDims { offload_src, offload_dst } => call(
                "OffloadDotWithNoBatchDims",
                vec![
                    ("offload_src", Param::Str(offload_src.clone())),
                    ("offload_dst", Param::Str(offload_dst.clone())),
                ],
            ),
            Policy::Function { repr, .. } | Policy::Opaque { repr, .. } => Param::Opaque(repr.clone()),
        }
    }

    /// Reads a policy from its parameter form; `Ok(None)` for `None`.
    pub fn from_param(p: &Param) -> Result<Option<Policy>, String> {
        match p {
            Param::None => Ok(None),
            Param::Opaque(repr) => {
                let name = repr
                    .strip_prefix("<function ")
                    .and_then(|r| r.split_whitespace().next())
                    .ok_or_else(|| format!("expected a policy, found {repr}"))?;
                // A closure (`f.<locals>.policy`) or a lambda is not known by its name.
                if name.contains('<') {
                    return Ok(Some(Policy::Opaque { repr: repr.clone(), meaning: None }));
                }
                Ok(Some(Policy::Function { name: name.to_string(), repr: repr.clone() }))
            }
            Param::Call { func, args, kwargs } => {
                if !args.is_empty() {
                    return Err(format!("policy {func} takes keyword arguments only"));
                }
                let mut kw = Kwargs { func, kwargs, used: Vec::new() };
                let policy = match func.as_str() {
                    "EverythingSaveable" => Policy::EverythingSaveable,
                    "NothingSaveable" => Policy::NothingSaveable,
                    "DotsSaveable" => Policy::DotsSaveable { only_if_no_batch_dims: kw.bool("only_if_no_batch_dims")? },
                    "SaveOnlyTheseNames" => Policy::SaveOnlyTheseNames { names: kw.set("saveable_names")? },
                    "SaveAnyNamesButThese" => Policy::SaveAnyNamesButThese { names: kw.set("names")? },
                    "SaveAnythingExceptTheseNames" => Policy::SaveAnythingExceptTheseNames { names: kw.set("names")? },
                    "SaveFromBothPolicies" => Policy::SaveFromBothPolicies {
                        policy_1: Box::new(kw.policy("policy_1")?),
                        policy_2: Box::new(kw.policy("policy_2")?),
                    },
                    "SaveAndOffloadOnlyTheseNames" => Policy::SaveAndOffloadOnlyTheseNames {
                        saved: kw.set("names_which_can_be_saved")?,
                        offloaded: kw.set("names_which_can_be_offloaded")?,
                        offload_src: kw.str("offload_src")?,
                        offload_dst: kw.str("offload_dst")?,
                    },
                    "OffloadDotWithNoBatchDims" => Policy::OffloadDotWithNoBatchDims {
                        offload_src: kw.str("offload_src")?,
                        offload_dst: kw.str("offload_dst")?,
                    },
                    other => return Err(format!("unknown policy {other}")),
                };
                kw.finish()?;
                Ok(Some(policy))
            }
            other => Err(format!("expected a policy, found {}", other.kind())),
        }
    }
}

struct Kwargs<'a> {
    func: &'a str,
    kwargs: &'a [(String, Param)],
    used: Vec<&'a str>,
}

impl<'a> Kwargs<'a> {
    fn get(&mut self, key: &'a str) -> Result<&'a Param, String> {
        self.used.push(key);
        self.kwargs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .ok_or_else(|| format!("policy {} is missing {key}=", self.func))
    }

    fn bool(&mut self, key: &'a str) -> Result<bool, String> {
        match self.get(key)? {
            Param::Bool(b) => Ok(*b),
            other => Err(format!("{}: {key} must be True or False, found {}", self.func, other.kind())),
        }
    }

    fn set(&mut self, key: &'a str) -> Result<Vec<String>, String> {
        match self.get(key)? {
            Param::FrozenSet(xs) => xs
                .iter()
                .map(|x| match x {
                    Param::Str(s) => Ok(s.clone()),
                    other => Err(format!("{}: {key} must hold names, found {}", self.func, other.kind())),
                })
                .collect(),
            other => Err(format!("{}: {key} must be a frozenset, found {}", self.func, other.kind())),
        }
    }

    fn str(&mut self, key: &'a str) -> Result<String, String> {
        match self.get(key)? {
            Param::Str(s) => Ok(s.clone()),
            other => Err(format!("{}: {key} must be a string, found {}", self.func, other.kind())),
        }
    }

    fn policy(&mut self, key: &'a str) -> Result<Policy, String> {
        Policy::from_param(self.get(key)?)?.ok_or_else(|| format!("{}: {key} must be a policy, not None", self.func))
    }

    fn finish(self) -> Result<(), String> {
        for (k, _) in self.kwargs {
            if !self.used.contains(&k.as_str()) {
                return Err(format!("policy {} has no parameter {k}", self.func));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        let cases: [(f64, &str); 12] = [
            (1.0, "1.0"),
            (-0.5, "-0.5"),
            (0.1f32 as f64, "0.10000000149011612"),
            (1e-5f32 as f64, "9.999999747378752e-06"),
            (1048576.0, "1048576.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456789012345.0, "123456789012345.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-0.0, "-0.0"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (x, want) in cases {
            assert_eq!(py_float_repr(x), want, "repr of {x:?}");
        }
    }

    #[test]
    fn numpy_ints_are_stripped() {
        assert_eq!(strip_numpy_ints("((1, np.int64(2), 0),)"), "((1, 2, 0),)");
        assert_eq!(strip_numpy_ints("(np.int64(0), np.int64(1))"), "(0, 1)");
        assert_eq!(strip_numpy_ints("np.float32(1.0)"), "np.float32(1.0)");
    }

    #[test]
    fn tuples_print_like_python() {
        assert_eq!(Param::ints([]).repr(), "()");
        assert_eq!(Param::ints([0]).repr(), "(0,)");
        assert_eq!(Param::ints([0, 1]).repr(), "(0, 1)");
        assert_eq!(
            Param::FrozenSet(vec![Param::Str("c".into()), Param::Str("a".into())]).repr(),
            "frozenset({'c', 'a'})"
        );
    }
}
