//! The jaxpr data structures: variables, literals, equations, jaxprs and closed jaxprs.
//!
//! Variables are dense `u32` indices into their jaxpr's `vars` table; a variable means
//! nothing outside the jaxpr that declares it. Nested jaxprs (parameters of `jit`,
//! `remat2`, `scan`, `custom_jvp_call`) are shared through `Arc`, and sharing is
//! meaningful: the printer hoists a jaxpr referenced twice as `let jaxpr = {...} in`.

use std::fmt;
use std::sync::Arc;

use crate::array::Array;
use crate::primitive::Primitive;
use crate::types::{Aval, DType};

/// A variable of one jaxpr: an index into [`Jaxpr::vars`]. Prints as `%N` in debug output;
/// the jaxpr printer gives it JAX's alphabetic name.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Var(pub u32);

impl Var {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Debug for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// What the `vars` table knows of a variable.
#[derive(Clone, Debug, PartialEq)]
pub struct VarDecl {
    pub aval: Aval,
    /// A binder JAX wrote as `_`: its value is never read.
    pub dropped: bool,
}

/// A scalar literal value. Floats keep their own precision; `f32` literals print through
/// `f64` exactly as Python prints `np.float32(x).item()`. There are no key literals.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LitValue {
    F32(f32),
    F64(f64),
    BF16(half::bf16),
    F16(half::f16),
    I8(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    U8(u8),
    U32(u32),
    Bool(bool),
}

impl LitValue {
    pub fn dtype(self) -> DType {
        match self {
            LitValue::F32(_) => DType::F32,
            LitValue::F64(_) => DType::F64,
            LitValue::BF16(_) => DType::BF16,
            LitValue::F16(_) => DType::F16,
            LitValue::I8(_) => DType::I8,
            LitValue::I16(_) => DType::I16,
            LitValue::I32(_) => DType::I32,
            LitValue::I64(_) => DType::I64,
            LitValue::U8(_) => DType::U8,
            LitValue::U32(_) => DType::U32,
            LitValue::Bool(_) => DType::Bool,
        }
    }

    /// The value as an `f64` (booleans are 0 or 1; `i64` beyond 2^53 rounds).
    pub fn as_f64(self) -> f64 {
        match self {
            LitValue::F32(x) => x as f64,
            LitValue::F64(x) => x,
            LitValue::BF16(x) => x.to_f64(),
            LitValue::F16(x) => x.to_f64(),
            LitValue::I8(x) => x as f64,
            LitValue::I16(x) => x as f64,
            LitValue::I32(x) => x as f64,
            LitValue::I64(x) => x as f64,
            LitValue::U8(x) => x as f64,
            LitValue::U32(x) => x as f64,
            LitValue::Bool(b) => b as u8 as f64,
        }
    }

    /// A literal of `dtype` holding `x` converted as `convert_element_type` would (floats
    /// round to nearest, integers truncate and saturate, NaN gives 0). `None` for keys.
    pub fn try_from_f64(dtype: DType, x: f64) -> Option<LitValue> {
        Some(match dtype {
            DType::F32 => LitValue::F32(x as f32),
            DType::F64 => LitValue::F64(x),
            DType::BF16 => LitValue::BF16(half::bf16::from_f64(x)),
            DType::F16 => LitValue::F16(half::f16::from_f64(x)),
            DType::I8 => LitValue::I8(x as i8),
            DType::I16 => LitValue::I16(x as i16),
            DType::I32 => LitValue::I32(x as i32),
            DType::I64 => LitValue::I64(x as i64),
            DType::U8 => LitValue::U8(x as u8),
            DType::U32 => LitValue::U32(x as u32),
            DType::Bool => LitValue::Bool(x != 0.0),
            DType::Key => return None,
        })
    }

    /// [`LitValue::try_from_f64`] for a dtype that has literals.
    ///
    /// # Panics
    /// On `DType::Key`, which has no literals: callers build literals of value dtypes.
    pub fn from_f64(dtype: DType, x: f64) -> LitValue {
        LitValue::try_from_f64(dtype, x).unwrap_or_else(|| panic!("no literal of dtype {dtype}"))
    }
}

/// A scalar literal operand, `2.0:f32[]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Literal {
    pub value: LitValue,
    /// Where the literal came from; not part of the text (the printer ignores it and the
    /// parser gives [`LitOrigin::Inline`]).
    pub origin: LitOrigin,
}

/// Where a literal came from. Only partial evaluation at the top of a linearization reads
/// it; every other pass treats a literal as its value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LitOrigin {
    /// Written in the program, or a constant a rule writes inline (a Python scalar in
    /// JAX's rule): inlined wherever it is read.
    #[default]
    Inline,
    /// A constant a jvp rule made on the primal side with `lax.full` or
    /// `instantiate_zeros`, which JAX stages as a value of the primal trace: a tangent
    /// equation that reads it under `linearize` makes it a residual (one per id, as JAX's
    /// tracer is one value however often it is read).
    Staged(u32),
}

impl Literal {
    /// A literal written in the program.
    pub fn new(value: LitValue) -> Literal {
        Literal { value, origin: LitOrigin::Inline }
    }

    /// The same value, inlined wherever it is read.
    pub fn inline(self) -> Literal {
        Literal::new(self.value)
    }

    pub fn aval(&self) -> Aval {
        Aval::scalar(self.value.dtype())
    }
}

/// An equation operand: a variable or a literal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Atom {
    Var(Var),
    Lit(Literal),
}

impl From<Var> for Atom {
    fn from(v: Var) -> Atom {
        Atom::Var(v)
    }
}

impl From<Literal> for Atom {
    fn from(l: Literal) -> Atom {
        Atom::Lit(l)
    }
}

impl Atom {
    pub fn as_var(&self) -> Option<Var> {
        match self {
            Atom::Var(v) => Some(*v),
            Atom::Lit(_) => None,
        }
    }
}

/// Where an equation came from: a user's Rust source line, or a position in a parsed file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SourceInfo {
    pub file: Arc<str>,
    pub line: u32,
    pub column: u32,
    /// The user's function, where known: printed as `file:line:col (function)`.
    pub function: Option<Arc<str>>,
}

impl SourceInfo {
    pub fn unknown() -> SourceInfo {
        SourceInfo { file: Arc::from(""), line: 0, column: 0, function: None }
    }

    pub fn is_unknown(&self) -> bool {
        self.file.is_empty() && self.line == 0
    }
}

impl fmt::Display for SourceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_unknown() {
            return Ok(());
        }
        write!(f, "{}:{}:{}", self.file, self.line, self.column)?;
        if let Some(func) = &self.function {
            write!(f, " ({func})")?;
        }
        Ok(())
    }
}

/// One equation: `outvars = prim[params] invars`.
#[derive(Clone, Debug)]
pub struct Eqn {
    pub primitive: Primitive,
    pub invars: Vec<Atom>,
    pub outvars: Vec<Var>,
    pub source: SourceInfo,
    /// Text as it was read where it differs from the canonical spelling of the same value
    /// (see [`Spelling`]), so that a round trip is exact.
    pub spelling: Spelling,
}

/// How JAX wrote some values of one equation, where the text differs from the canonical
/// spelling of the same value. The printer uses a spelling only while it still denotes
/// the current value, so transformations may copy it freely.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Spelling {
    /// `(key, text)` of parameters that write integers as NumPy scalars: JAX prints
    /// `np.int64(0)` for `0` where it computed a parameter with NumPy.
    pub params: Vec<(String, String)>,
    /// `(operand index, value text)` of literal operands whose text is not the repr of
    /// their value in their dtype: a weak-typed Python float JAX never rounded, such as
    /// `0.1:f32[]` (the `f32` value's repr is `0.10000000149011612`).
    pub literals: Vec<(usize, String)>,
    /// Of a jaxpr read from text: jaxprs of one group were written identically (up to
    /// layout), which is how JAX prints distinct jaxprs that share their variables (a
    /// `jit`'s cached body under two calls whose outer jaxprs were rebuilt): JAX names a
    /// variable once per variable object, so the second prints with the first's names.
    /// The printer names the variables of a group's jaxprs alike; `None` elsewhere.
    pub var_group: Option<u32>,
}

impl Eqn {
    pub fn new(primitive: Primitive, invars: Vec<Atom>, outvars: Vec<Var>, source: SourceInfo) -> Eqn {
        Eqn { primitive, invars, outvars, source, spelling: Spelling::default() }
    }
}

/// A jaxpr: `{ lambda constvars ; invars . let eqns in (outvars) }`.
#[derive(Clone, Debug, Default)]
pub struct Jaxpr {
    /// Declarations of every variable used in this jaxpr, indexed by [`Var`].
    pub vars: Vec<VarDecl>,
    pub constvars: Vec<Var>,
    pub invars: Vec<Var>,
    pub eqns: Vec<Eqn>,
    pub outvars: Vec<Atom>,
    /// How the text this jaxpr was read from wrote its literal outputs, where not
    /// canonically (`in (0.1:f32[],)`: only [`Spelling::literals`] is used, by output index).
    pub spelling: Spelling,
}

impl Jaxpr {
    pub fn new_var(&mut self, aval: Aval) -> Var {
        let v = Var(u32::try_from(self.vars.len()).expect("more than u32::MAX variables"));
        self.vars.push(VarDecl { aval, dropped: false });
        v
    }

    pub fn aval(&self, v: Var) -> &Aval {
        &self.vars[v.index()].aval
    }

    pub fn atom_aval(&self, a: &Atom) -> Aval {
        match a {
            Atom::Var(v) => self.aval(*v).clone(),
            Atom::Lit(l) => l.aval(),
        }
    }

    /// The distinct names of the program's `checkpoint_name`s (`name[name=...]`
    /// equations), nested jaxprs included, in the order they first appear.
    pub fn checkpoint_names(&self) -> Vec<String> {
        fn walk(j: &Jaxpr, out: &mut Vec<String>) {
            for e in &j.eqns {
                if let Primitive::Name { name } = &e.primitive {
                    if !out.contains(name) {
                        out.push(name.clone());
                    }
                }
                e.primitive.subjaxprs().into_iter().for_each(|sub| walk(sub, out));
            }
        }
        let mut out = Vec::new();
        walk(self, &mut out);
        out
    }

    pub fn in_avals(&self) -> Vec<Aval> {
        self.invars.iter().map(|v| self.aval(*v).clone()).collect()
    }

    pub fn out_avals(&self) -> Vec<Aval> {
        self.outvars.iter().map(|a| self.atom_aval(a)).collect()
    }

    pub fn const_avals(&self) -> Vec<Aval> {
        self.constvars.iter().map(|v| self.aval(*v).clone()).collect()
    }
}

/// A jaxpr with values for its constvars.
#[derive(Clone, Debug)]
pub struct ClosedJaxpr {
    pub jaxpr: Arc<Jaxpr>,
    pub consts: Vec<Array>,
}

impl ClosedJaxpr {
    /// Closes a jaxpr that has no constvars.
    pub fn new(jaxpr: Arc<Jaxpr>) -> ClosedJaxpr {
        ClosedJaxpr { jaxpr, consts: Vec::new() }
    }
}
