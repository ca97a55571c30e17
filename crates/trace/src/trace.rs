//! The trace: a thread-local stack of frames, one per jaxpr being built.
//!
//! `make_jaxpr` pushes the root frame; `jit`, `checkpoint`, `scan` and the library's named
//! calls push a frame for their body and pop it into one equation of the frame below.
//! Every operation records into the innermost frame. What this module keeps true:
//! - an equation is recorded only if `shape_rule` accepts its operands, so a trace never
//!   produces a malformed jaxpr; a rejected operation records a located [`TraceError`]
//!   (the first one wins) and returns a placeholder, and the entry point returns the error;
//!   once an error is recorded, later operations record nothing;
//! - a tensor of an enclosing frame used in an inner one is lifted: each frame in between
//!   gets an extra input for it, which the caller passes first (as JAX's closure
//!   conversion does); a tensor of a frame that has finished is an error;
//! - constants (concrete arrays) live in the root frame as constvars and are lifted like
//!   any outer tensor;
//! - the state is cleared when the root frame is popped, even if the user's function
//!   panics (the frame guards pop their frames on unwinding).

use std::cell::RefCell;
use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use remat_ir::{
    pp_jaxpr, shape_rule, Array, Atom, Aval, DType, Eqn, Jaxpr, LitValue, Literal, Primitive, SourceInfo, Var,
};

use crate::tensor::Tensor;

/// A located error from tracing a user's function.
///
/// `location` is the line of the user's code that made the failing call (every operation is
/// `#[track_caller]`); `message` says what is wrong, with the types involved.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub struct TraceError {
    /// Where in the user's source the failing operation was called.
    pub location: SourceInfo,
    /// What went wrong, naming the shapes and dtypes involved.
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.location.is_unknown() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.location, self.message)
        }
    }
}

/// One jaxpr under construction.
struct Frame {
    id: u64,
    jaxpr: Jaxpr,
    /// The function's own inputs, in order.
    explicit_invars: Vec<Var>,
    /// Inputs added for tensors of the enclosing frame: (parent's var, our var).
    captures: Vec<(Var, Var)>,
    /// Constant values, for the root frame's constvars.
    consts: Vec<Array>,
}

/// Which function a traced body belongs to, for sharing identical bodies (see
/// [`share_jaxpr`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CallKey {
    /// One `jit(f)` or `checkpoint(f)` value (and its clones).
    Instance(u64),
    /// A library function such as `relu` or `_where`.
    Library(&'static str),
}

/// Frame ids are unique across threads and never reused, so a tensor moved to another
/// thread, or kept from an earlier trace, is recognized as foreign rather than mistaken for
/// a variable of the current trace.
static NEXT_FRAME: AtomicU64 = AtomicU64::new(1);

struct TraceState {
    frames: Vec<Frame>,
    error: Option<TraceError>,
    /// The user's function names, innermost last (see [`crate::in_function`]).
    functions: Vec<Arc<str>>,
    /// Bodies traced so far in this trace, by function and printed text.
    shared: Vec<(CallKey, String, Arc<Jaxpr>)>,
}

thread_local! {
    static STATE: RefCell<TraceState> = const {
        RefCell::new(TraceState { frames: Vec::new(), error: None, functions: Vec::new(), shared: Vec::new() })
    };
}

/// An operand: a traced tensor or a literal (a Rust scalar already converted to the dtype
/// its operation needs: `x * 2.0` records `mul x 2.0:f32[]`).
#[derive(Clone, Debug)]
pub enum Operand {
    /// A traced value.
    Tensor(Tensor),
    /// A scalar literal.
    Literal(LitValue),
}

impl From<&Tensor> for Operand {
    fn from(t: &Tensor) -> Operand {
        Operand::Tensor(t.clone())
    }
}

impl From<Tensor> for Operand {
    fn from(t: Tensor) -> Operand {
        Operand::Tensor(t)
    }
}

impl Operand {
    /// The operand's type and weak flag (literals are weakly typed, except booleans).
    pub(crate) fn typ(&self) -> (Aval, bool) {
        match self {
            Operand::Tensor(t) => (t.aval().clone(), t.is_weak()),
            Operand::Literal(v) => (Aval::scalar(v.dtype()), v.dtype() != DType::Bool),
        }
    }
}

pub(crate) fn source_info(loc: &'static Location<'static>) -> SourceInfo {
    let function = STATE.with(|s| s.borrow().functions.last().cloned());
    SourceInfo { file: Arc::from(loc.file()), line: loc.line(), column: loc.column(), function }
}

/// Records an error at `loc` unless an earlier one is already recorded.
pub(crate) fn record_error(loc: &'static Location<'static>, message: String) {
    let location = source_info(loc);
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if s.error.is_none() {
            s.error = Some(TraceError { location, message });
        }
    });
}

pub(crate) fn has_error() -> bool {
    STATE.with(|s| s.borrow().error.is_some())
}

/// While alive, the user's function name that recorded equations carry in their
/// [`SourceInfo::function`] (so that reports say `output of sin from model.rs:12:9 (g)`).
/// Scopes nest; the innermost wins. Create one with [`function_scope`] or the
/// [`function_scope!`](crate::function_scope!) macro.
#[derive(Debug)]
#[must_use = "the scope ends when this guard is dropped"]
pub struct FunctionScope {
    depth: usize,
}

impl Drop for FunctionScope {
    fn drop(&mut self) {
        STATE.with(|s| s.borrow_mut().functions.truncate(self.depth));
    }
}

/// Starts a [`FunctionScope`] named `name`:
///
/// ```
/// # use remat_trace::{function_scope, Tensor};
/// fn layer(w: &Tensor, x: &Tensor) -> Tensor {
///     let _scope = function_scope("layer");
///     w.dot(x).sin()
/// }
/// ```
pub fn function_scope(name: &str) -> FunctionScope {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let depth = s.functions.len();
        s.functions.push(Arc::from(name));
        FunctionScope { depth }
    })
}

/// Starts a [`FunctionScope`] named after the enclosing Rust function (closures count as
/// the function they are written in):
///
/// ```
/// # use remat_trace::Tensor;
/// fn layer(w: &Tensor, x: &Tensor) -> Tensor {
///     let _scope = remat_trace::function_scope!(); // equations below say `(layer)`
///     w.dot(x).sin()
/// }
/// ```
#[macro_export]
macro_rules! function_scope {
    () => {
        $crate::function_scope($crate::__enclosing_function_name(&|| {}))
    };
}

/// The name of the function a closure of type `T` is written in (for
/// [`function_scope!`](crate::function_scope!)).
#[doc(hidden)]
pub fn __enclosing_function_name<T>(_: &T) -> &'static str {
    let mut name = std::any::type_name::<T>();
    while let Some(outer) = name.strip_suffix("::{{closure}}") {
        name = outer;
    }
    name.rsplit("::").next().unwrap_or(name)
}

/// Runs `f` with `name` as the user's function name in recorded source locations (see
/// [`FunctionScope`]).
pub fn in_function<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let _scope = function_scope(name);
    f()
}

/// Pops the frame it was created for, even if the user's function panics.
pub(crate) struct FrameGuard {
    id: u64,
    done: bool,
}

impl Drop for FrameGuard {
    fn drop(&mut self) {
        if !self.done {
            STATE.with(|s| {
                let mut s = s.borrow_mut();
                if let Some(pos) = s.frames.iter().position(|f| f.id == self.id) {
                    s.frames.truncate(pos);
                }
                if s.frames.is_empty() {
                    s.clear();
                }
            });
        }
    }
}

impl TraceState {
    /// Forgets everything of the trace that just ended.
    fn clear(&mut self) {
        self.error = None;
        self.functions.clear();
        self.shared.clear();
    }
}

/// Pushes a frame with inputs of the given types (aval and weak flag) and returns its
/// guard and the input tensors.
pub(crate) fn push_frame(in_types: &[(Aval, bool)]) -> (FrameGuard, Vec<Tensor>) {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let id = NEXT_FRAME.fetch_add(1, Ordering::Relaxed);
        if s.frames.is_empty() {
            s.error = None;
            s.shared.clear();
        }
        let mut frame = Frame {
            id,
            jaxpr: Jaxpr::default(),
            explicit_invars: Vec::new(),
            captures: Vec::new(),
            consts: Vec::new(),
        };
        let tensors = in_types
            .iter()
            .map(|(aval, weak)| {
                let v = frame.jaxpr.new_var(aval.clone());
                frame.explicit_invars.push(v);
                Tensor::new(id, v, aval.clone(), *weak)
            })
            .collect();
        s.frames.push(frame);
        (FrameGuard { id, done: false }, tensors)
    })
}

/// A finished frame: its jaxpr (inputs are captures then explicit inputs), the tensors of
/// the enclosing frame that the captures stand for, and constants (root frame only).
pub(crate) struct Finished {
    pub jaxpr: Jaxpr,
    pub captured: Vec<Tensor>,
    pub consts: Vec<Array>,
}

/// Pops the frame of `guard` with `outputs` as its results.
pub(crate) fn pop_frame(
    mut guard: FrameGuard,
    outputs: &[Tensor],
    loc: &'static Location<'static>,
) -> Result<Finished, TraceError> {
    let atoms: Vec<Option<Atom>> = outputs.iter().map(|t| resolve(t, loc)).collect();
    guard.done = true;
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let pos = s.frames.iter().position(|f| f.id == guard.id).expect("frames are popped innermost first");
        let mut frame = s.frames.remove(pos);
        s.frames.truncate(pos);
        let error = s.error.clone();
        if s.frames.is_empty() {
            s.clear();
        }
        if let Some(e) = error {
            return Err(e);
        }
        let parent_id = s.frames.last().map(|f| f.id);
        let mut jaxpr = std::mem::take(&mut frame.jaxpr);
        jaxpr.outvars = atoms.into_iter().map(|a| a.expect("resolved without error")).collect();
        let (capture_parent, capture_inner): (Vec<Var>, Vec<Var>) = frame.captures.iter().copied().unzip();
        if parent_id.is_none() {
            // The root frame's captures are its constants.
            jaxpr.constvars = capture_inner;
        } else {
            jaxpr.invars = capture_inner;
        }
        jaxpr.invars.extend(frame.explicit_invars.iter().copied());
        let captured = match parent_id {
            Some(pid) => {
                let parent = s.frames.last().expect("parent frame");
                capture_parent.iter().map(|&v| Tensor::new(pid, v, parent.jaxpr.aval(v).clone(), false)).collect()
            }
            None => Vec::new(),
        };
        Ok(Finished { jaxpr, captured, consts: frame.consts })
    })
}

/// The atom for `t` in the innermost frame, lifting it through enclosing frames if needed.
/// `None` (with an error recorded) if `t` belongs to no live frame.
fn resolve(t: &Tensor, loc: &'static Location<'static>) -> Option<Atom> {
    if let Some(value) = t.literal {
        return Some(Atom::Lit(Literal::new(value)));
    }
    let found = STATE.with(|s| {
        let mut s = s.borrow_mut();
        let k = s.frames.iter().position(|f| f.id == t.frame)?;
        let mut var = t.var;
        let top = s.frames.len() - 1;
        for i in k + 1..=top {
            let aval = s.frames[i - 1].jaxpr.aval(var).clone();
            let frame = &mut s.frames[i];
            var = match frame.captures.iter().find(|(outer, _)| *outer == var) {
                Some(&(_, inner)) => inner,
                None => {
                    let inner = frame.jaxpr.new_var(aval);
                    frame.captures.push((var, inner));
                    inner
                }
            };
        }
        Some(Atom::Var(var))
    });
    if found.is_none() {
        record_error(
            loc,
            format!(
                "a tensor of type {} was used outside the trace that created it (a traced value escaped its \
                 function, e.g. through a captured variable)",
                t.aval()
            ),
        );
    }
    found
}

/// Adds a constant array to the root frame and returns it as a tensor of the root frame.
pub(crate) fn constant(value: Array, loc: &'static Location<'static>) -> Option<Tensor> {
    let aval = value.aval();
    let root = STATE.with(|s| {
        let mut s = s.borrow_mut();
        let root = s.frames.first_mut()?;
        // A root-frame constant is a "capture" of nothing: its outer var is a sentinel.
        let v = root.jaxpr.new_var(aval.clone());
        let sentinel = Var(u32::MAX - root.consts.len() as u32);
        root.captures.push((sentinel, v));
        root.consts.push(value);
        Some((root.id, v))
    });
    match root {
        Some((id, v)) => Some(Tensor::new(id, v, aval, false)),
        None => {
            record_error(loc, "a constant was created outside of any trace (use make_jaxpr)".into());
            None
        }
    }
}

/// The innermost frame's id, if tracing.
pub(crate) fn current_frame() -> Option<u64> {
    STATE.with(|s| s.borrow().frames.last().map(|f| f.id))
}

/// Returns a jaxpr equal to `jaxpr` that an earlier call of the same function recorded in
/// this trace, or records `jaxpr` for later calls. JAX caches traced functions, so a
/// function called twice on the same types shares one jaxpr, which its printer hoists
/// (`let relu = { ... } in`); sharing the `Arc` reproduces that.
pub(crate) fn share_jaxpr(key: CallKey, jaxpr: Jaxpr) -> Arc<Jaxpr> {
    share_jaxpr_typed(key, jaxpr, &[])
}

/// [`share_jaxpr`] for calls whose inputs' weak flags are part of JAX's cache key (which
/// keys on weak types, invisible in the text): equal bodies traced on differently weak
/// inputs are different jaxprs.
pub(crate) fn share_jaxpr_typed(key: CallKey, jaxpr: Jaxpr, in_weak: &[bool]) -> Arc<Jaxpr> {
    let mut text = pp_jaxpr(&jaxpr);
    if !in_weak.is_empty() {
        text.push_str(&format!(" weak={in_weak:?}"));
    }
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if let Some((_, _, j)) = s.shared.iter().find(|(k, t, _)| *k == key && *t == text) {
            return j.clone();
        }
        let j = Arc::new(jaxpr);
        s.shared.push((key, text, j.clone()));
        j
    })
}

/// Spells literal operands of the equation just recorded in the innermost frame as JAX
/// prints a Python float it never rounded (`1e-05:f32[]` rather than the `f32` value's
/// `9.999999747378752e-06`): `(operand index, value)`. Does nothing after an error.
pub(crate) fn spell_last_literals(literals: &[(usize, f64)]) {
    if literals.is_empty() || has_error() {
        return;
    }
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let Some(eqn) = s.frames.last_mut().and_then(|f| f.jaxpr.eqns.last_mut()) else { return };
        for &(i, x) in literals {
            if matches!(eqn.invars.get(i), Some(Atom::Lit(_))) {
                eqn.spelling.literals.push((i, remat_ir::param::py_float_repr(x)));
            }
        }
    });
}

/// Spells parameters of the equation just recorded in the innermost frame as JAX prints a
/// value it computed with NumPy (`sizes=(np.int64(2), np.int64(2))`): `(key, text)`, the
/// text equal to the parameter's own repr but for the NumPy spelling. Does nothing after
/// an error.
pub(crate) fn spell_last_params(params: &[(&str, String)]) {
    if has_error() {
        return;
    }
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let Some(eqn) = s.frames.last_mut().and_then(|f| f.jaxpr.eqns.last_mut()) else { return };
        for (key, text) in params {
            eqn.spelling.params.push((key.to_string(), text.clone()));
        }
    });
}

/// A shape rule's message, with the operand types appended unless it names them all.
fn with_operands(message: String, in_avals: &[Aval]) -> String {
    let types: Vec<String> = in_avals.iter().map(Aval::to_string).collect();
    if types.iter().all(|t| message.contains(t.as_str())) {
        message
    } else {
        format!("{message} (operands: {})", types.join(", "))
    }
}

/// Records a copy of `eqn` (a jaxpr made elsewhere, being inlined) over `operands` in the
/// innermost frame, keeping its source location and spelling, and returns its results
/// (strongly typed). The shape rule checks the operands, as for every recorded equation.
/// `None` if an error is (or was already) recorded.
pub(crate) fn bind_eqn(eqn: &Eqn, operands: &[Operand], loc: &'static Location<'static>) -> Option<Vec<Tensor>> {
    let n = eqn.outvars.len();
    let results = bind_n(eqn.primitive.clone(), operands, &vec![false; n.max(1)], loc)?;
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if let Some(last) = s.frames.last_mut().and_then(|f| f.jaxpr.eqns.last_mut()) {
            last.source = eqn.source.clone();
            last.spelling = eqn.spelling.clone();
        }
    });
    Some(results)
}

/// Records `prim` applied to `operands` in the innermost frame and returns its results,
/// weakly typed if `weak`. On error, records it and returns placeholders.
pub(crate) fn bind(prim: Primitive, operands: &[Operand], weak: bool, loc: &'static Location<'static>) -> Vec<Tensor> {
    bind_n(prim, operands, &[weak], loc).unwrap_or_else(|| {
        let aval = operands
            .iter()
            .find_map(|o| match o {
                Operand::Tensor(t) => Some(t.aval().clone()),
                Operand::Literal(_) => None,
            })
            .unwrap_or_else(|| Aval::scalar(DType::F32));
        vec![Tensor::placeholder(aval)]
    })
}

/// Like [`bind`] for a primitive with several results: `weak[i]` (or the last entry) is
/// result `i`'s weak flag. `None` if an error is (or was already) recorded.
pub(crate) fn bind_n(
    prim: Primitive,
    operands: &[Operand],
    weak: &[bool],
    loc: &'static Location<'static>,
) -> Option<Vec<Tensor>> {
    if has_error() {
        return None;
    }
    if current_frame().is_none() {
        record_error(loc, format!("`{}` was called outside of any trace (use make_jaxpr)", prim.name()));
        return None;
    }
    let mut atoms = Vec::with_capacity(operands.len());
    for o in operands {
        match o {
            Operand::Tensor(t) => atoms.push(resolve(t, loc)?),
            Operand::Literal(value) => atoms.push(Atom::Lit(Literal::new(*value))),
        }
    }
    let source = source_info(loc);
    let result = STATE.with(|s| {
        let mut s = s.borrow_mut();
        let frame = s.frames.last_mut().expect("a frame");
        let in_avals: Vec<Aval> = atoms.iter().map(|a| frame.jaxpr.atom_aval(a)).collect();
        let out_avals = shape_rule(&prim, &in_avals).map_err(|e| with_operands(e.message, &in_avals))?;
        let outvars: Vec<Var> = out_avals.iter().map(|a| frame.jaxpr.new_var(a.clone())).collect();
        let id = frame.id;
        let weak_of = |i: usize| weak.get(i).or(weak.last()).copied().unwrap_or(false);
        let tensors =
            outvars.iter().zip(&out_avals).enumerate().map(|(i, (v, a))| Tensor::new(id, *v, a.clone(), weak_of(i)));
        let tensors = tensors.collect();
        frame.jaxpr.eqns.push(Eqn::new(prim, atoms, outvars, source));
        Ok::<_, String>(tensors)
    });
    match result {
        Ok(t) => Some(t),
        Err(message) => {
            record_error(loc, message);
            None
        }
    }
}
