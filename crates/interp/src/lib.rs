//! The reference interpreter: evaluates a jaxpr on `ndarray` arrays. It defines what a
//! program means; every later backend is tested against it.
//!
//! Architecture invariant: the interpreter never panics, whatever jaxpr it is given (it may
//! be unverified). Inputs are checked against the jaxpr's binders before evaluation, every
//! primitive checks its operands and parameters, and every result is checked against the
//! dtype and shape its binder declares; any mismatch is an [`EvalError`] that names the
//! equation (index, primitive, source location) and what is wrong.
//!
//! Values follow JAX/XLA semantics in each dtype's own precision (`f32` math in `f32`).
//! Memory spaces (`f32<host>[6]`) are ignored: they do not change values.
//!
//! Files: `elem` (the dtypes as Rust types), `elementwise`, `structural` (layout ops),
//! `random` (threefry keys and bits), `reduce`, `dot` (`dot_general`), `indexing` (`split`,
//! `gather`, scatters), `sorting` (`sort`, `top_k`, `argmin`, cumulative reductions),
//! `window` (convolutions and windowed reductions) and `control` (calls and `scan`); this
//! file holds the
//! evaluation loop and the one `match` over [`Primitive`].

mod bits;
mod control;
mod dot;
mod elem;
mod elementwise;
mod indexing;
mod linalg;
mod random;
mod reduce;
mod sharded;
mod sorting;
mod structural;
mod window;

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use remat_ir::{Array, Atom, Aval, ClosedJaxpr, Eqn, Jaxpr, LitValue, Primitive, SourceInfo, Var};

/// Why a jaxpr could not be evaluated.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("expected {expected} arguments, got {given}")]
    ArgCount { expected: usize, given: usize },
    #[error("argument {index}: expected {expected}, got {given}")]
    ArgType { index: usize, expected: Aval, given: Aval },
    #[error("expected {expected} constants, got {given}")]
    ConstCount { expected: usize, given: usize },
    #[error("constant {index}: expected {expected}, got {given}")]
    ConstType { index: usize, expected: Aval, given: Aval },
    /// The jaxpr itself is malformed (a variable read before it has a value, or not declared).
    #[error("{0}")]
    Malformed(String),
    /// An error in equation `index` of a jaxpr: `equation 3 (add at f.jaxpr:5:4): ...`.
    #[error("equation {index} ({primitive}{}): {error}", Location(.location))]
    Equation { index: usize, primitive: &'static str, location: SourceInfo, error: Box<EvalError> },
    /// A primitive's operands or parameters are wrong. (The message does not repeat the
    /// primitive's name, which the enclosing [`EvalError::Equation`] prints.)
    #[error("{message}")]
    Invalid { primitive: &'static str, message: String },
    #[error("computed {computed} results, but the equation declares {declared}")]
    ResultCount { primitive: &'static str, computed: usize, declared: usize },
    #[error("result {index} is {computed}, but the equation declares {declared}")]
    ResultType { primitive: &'static str, index: usize, computed: Aval, declared: Aval },
    /// An error inside a jaxpr called by `primitive`; `context` names the call, such as
    /// ``jit `log_softmax` `` or `scan iteration 3 of 8`.
    #[error("{context}: {error}")]
    Nested { primitive: &'static str, context: String, error: Box<EvalError> },
    /// An argument holds a NaN ([`eval_closed_checking_nans`]).
    #[error("argument {index} holds NaN at {position:?}")]
    NanArgument { index: usize, position: Vec<usize> },
    /// An equation's result holds a NaN though none of its operands passed in or computed
    /// does ([`eval_closed_checking_nans`]; the enclosing [`EvalError::Equation`] names it).
    #[error("result {result} holds the first NaN, at {position:?}: no operand passed in or computed holds one")]
    NanProduced { result: usize, position: Vec<usize> },
    /// With infinities checked too ([`eval_jaxpr_checking`], JAX's `jax_debug_infs`): an
    /// equation's result holds an infinity though none of its operands passed in or
    /// computed holds a NaN or an infinity.
    #[error("result {result} holds the first inf, at {position:?}: no operand passed in or computed holds one")]
    InfProduced { result: usize, position: Vec<usize> },
}

/// Prints ` at file:line:col`, or nothing when the location is unknown.
struct Location<'a>(&'a SourceInfo);

impl fmt::Display for Location<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_unknown() {
            Ok(())
        } else {
            write!(f, " at {}", self.0)
        }
    }
}

/// Evaluates `jaxpr` with `consts` bound to its constvars and `args` to its invars, in XLA's
/// float environment (subnormal operands read and results written as zeros,
/// `remat_math::fenv`), as JAX on CPU computes.
pub fn eval_jaxpr(jaxpr: &Jaxpr, consts: &[Array], args: &[Array]) -> Result<Vec<Array>, EvalError> {
    let _env = remat_math::XlaFloatEnv::enter();
    let consts: Vec<&Array> = consts.iter().collect();
    let args: Vec<&Array> = args.iter().collect();
    eval_jaxpr_refs(jaxpr, &consts, &args)
}

/// Evaluates a closed jaxpr on `args`.
pub fn eval_closed(closed: &ClosedJaxpr, args: &[Array]) -> Result<Vec<Array>, EvalError> {
    eval_jaxpr(&closed.jaxpr, &closed.consts, args)
}

thread_local! {
    /// Whether the evaluation running on this thread checks every equation for NaNs it
    /// produces ([`eval_closed_checking_nans`]); nested jaxprs see it too.
    static CHECKING_NANS: Cell<bool> = const { Cell::new(false) };
    /// Whether it also checks for infinities (JAX's `jax_debug_infs`).
    static CHECKING_INFS: Cell<bool> = const { Cell::new(false) };
}

/// [`eval_closed`] as JAX's `jax_debug_nans` debugs: fails with
/// [`EvalError::NanArgument`] when an argument holds a NaN, and otherwise with the first
/// equation (inside called jaxprs and scan iterations too) whose result holds a NaN though
/// none of its operands passed in or computed does, which is where a NaN that the outputs
/// show came from (`equation 4 (log at src/model.rs:12:9): result 0 holds the first NaN, at
/// [3]: ...`). A NaN constant or literal counts as new where an equation first reads it;
/// the equations that merely carry a NaN along are not blamed.
pub fn eval_closed_checking_nans(closed: &ClosedJaxpr, args: &[Array]) -> Result<Vec<Array>, EvalError> {
    eval_jaxpr_checking_nans(&closed.jaxpr, &closed.consts, args)
}

/// [`eval_closed_checking_nans`] with the constants given apart, as [`eval_jaxpr`] takes
/// them.
pub fn eval_jaxpr_checking_nans(jaxpr: &Jaxpr, consts: &[Array], args: &[Array]) -> Result<Vec<Array>, EvalError> {
    eval_jaxpr_checking(jaxpr, consts, args, false)
}

/// [`eval_jaxpr_checking_nans`], and with `infs` also JAX's `jax_debug_infs`: the first
/// equation whose result holds an infinity though no operand holds a NaN or an infinity
/// fails with [`EvalError::InfProduced`] (arguments may hold infinities).
pub fn eval_jaxpr_checking(
    jaxpr: &Jaxpr,
    consts: &[Array],
    args: &[Array],
    infs: bool,
) -> Result<Vec<Array>, EvalError> {
    if let Some((index, position)) = Array::first_nan_among(args) {
        return Err(EvalError::NanArgument { index, position });
    }
    // Restores the flags however the evaluation ends.
    struct Reset(bool, bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            CHECKING_NANS.with(|c| c.set(self.0));
            CHECKING_INFS.with(|c| c.set(self.1));
        }
    }
    let _reset = Reset(CHECKING_NANS.with(|c| c.replace(true)), CHECKING_INFS.with(|c| c.replace(infs)));
    eval_jaxpr(jaxpr, consts, args)
}

/// The first element of `a` that is an infinity, if any.
pub fn first_inf(a: &Array) -> Option<Vec<usize>> {
    if !a.dtype().is_float() {
        return None;
    }
    let flat = a.to_f64_vec().iter().position(|x| x.is_infinite())?;
    let mut position = vec![0; a.shape().len()];
    let mut rest = flat;
    for (p, &n) in position.iter_mut().zip(a.shape()).rev() {
        *p = rest % n;
        rest /= n;
    }
    Some(position)
}

/// Whether an error reports a NaN (or an infinity) that [`eval_jaxpr_checking`] found,
/// possibly inside a called jaxpr.
pub fn is_nan_error(e: &EvalError) -> bool {
    match e {
        EvalError::NanArgument { .. } | EvalError::NanProduced { .. } | EvalError::InfProduced { .. } => true,
        EvalError::Equation { error, .. } | EvalError::Nested { error, .. } => is_nan_error(error),
        _ => false,
    }
}

/// The NaN check of one equation (any backend's values may be checked so): its first result that holds a NaN, when no operand
/// passed in or computed (a variable other than a constvar) does; with `infs`, then its
/// first result that holds an infinity, when no such operand holds a NaN or an infinity.
pub fn produced_nan(jaxpr: &Jaxpr, eqn: &Eqn, operands: &[&Array], results: &[Array], infs: bool) -> Option<EvalError> {
    let computed = |atom: &Atom| match atom {
        Atom::Var(v) => !jaxpr.constvars.contains(v),
        Atom::Lit(..) => false,
    };
    let operands = || eqn.invars.iter().zip(operands).filter(|(atom, _)| computed(atom)).map(|(_, value)| value);
    if operands().any(|value| value.has_nan()) {
        return None;
    }
    let nan = results
        .iter()
        .enumerate()
        .find_map(|(result, a)| a.first_nan().map(|position| EvalError::NanProduced { result, position }));
    if nan.is_some() || !infs || operands().any(|value| first_inf(value).is_some()) {
        return nan;
    }
    results
        .iter()
        .enumerate()
        .find_map(|(result, a)| first_inf(a).map(|position| EvalError::InfProduced { result, position }))
}

/// Evaluates one equation: `prim` applied to `args`, whose results must have `out_avals`.
pub fn eval_primitive(prim: &Primitive, args: &[Array], out_avals: &[Aval]) -> Result<Vec<Array>, EvalError> {
    let _env = remat_math::XlaFloatEnv::enter();
    let args: Vec<&Array> = args.iter().collect();
    eval_primitive_refs(prim, &args, out_avals)
}

/// [`eval_jaxpr`] on borrowed values, so that nothing is copied to call a jaxpr.
pub(crate) fn eval_jaxpr_refs(jaxpr: &Jaxpr, consts: &[&Array], args: &[&Array]) -> Result<Vec<Array>, EvalError> {
    check_inputs(jaxpr, &jaxpr.constvars, consts, true)?;
    check_inputs(jaxpr, &jaxpr.invars, args, false)?;
    let mut env: Vec<Option<Cow<Array>>> = vec![None; jaxpr.vars.len()];
    for (&v, &value) in jaxpr.constvars.iter().zip(consts).chain(jaxpr.invars.iter().zip(args)) {
        env[v.index()] = Some(Cow::Borrowed(value));
    }
    let last_use = last_uses(jaxpr);
    let identities = remat_ir::identities(jaxpr);

    for (index, eqn) in jaxpr.eqns.iter().enumerate() {
        let in_equation = |error: EvalError| EvalError::Equation {
            index,
            primitive: eqn.primitive.name(),
            location: eqn.source.clone(),
            error: Box::new(error),
        };
        let out_avals = eqn
            .outvars
            .iter()
            .map(|&v| declared(jaxpr, v).cloned())
            .collect::<Result<Vec<Aval>, EvalError>>()
            .map_err(in_equation)?;
        let results = {
            let operands = eqn
                .invars
                .iter()
                .map(|atom| read(jaxpr, &env, atom))
                .collect::<Result<Vec<Cow<Array>>, EvalError>>()
                .map_err(in_equation)?;
            let operands: Vec<&Array> = operands.iter().map(|c| c.as_ref()).collect();
            let results = match identities[index] {
                // XLA deletes the equation: the operand's bits, never computed.
                Some(identity) => elementwise::identity(identity, &operands, &out_avals[0])
                    .map(|a| vec![a])
                    .map_err(|message| EvalError::Invalid { primitive: eqn.primitive.name(), message })
                    .map_err(in_equation)?,
                None => eval_primitive_refs(&eqn.primitive, &operands, &out_avals).map_err(in_equation)?,
            };
            if CHECKING_NANS.with(Cell::get) {
                if let Some(error) = produced_nan(jaxpr, eqn, &operands, &results, CHECKING_INFS.with(Cell::get)) {
                    return Err(in_equation(error));
                }
            }
            results
        };
        // Keep only what a later equation or the outputs read, so big programs stay small.
        for (&v, value) in eqn.outvars.iter().zip(results) {
            if last_use.get(v.index()) != Some(&LastUse::Never) {
                env[v.index()] = Some(Cow::Owned(value));
            }
        }
        for v in eqn.invars.iter().filter_map(Atom::as_var) {
            if last_use.get(v.index()) == Some(&LastUse::Eqn(index)) {
                env[v.index()] = None;
            }
        }
    }

    jaxpr.outvars.iter().map(|atom| read(jaxpr, &env, atom).map(Cow::into_owned)).collect()
}

/// Checks the values given for `binders` (constvars or invars) against their avals.
fn check_inputs(jaxpr: &Jaxpr, binders: &[Var], values: &[&Array], consts: bool) -> Result<(), EvalError> {
    if binders.len() != values.len() {
        let (expected, given) = (binders.len(), values.len());
        return Err(if consts {
            EvalError::ConstCount { expected, given }
        } else {
            EvalError::ArgCount { expected, given }
        });
    }
    for (index, (&v, value)) in binders.iter().zip(values).enumerate() {
        let expected = declared(jaxpr, v)?;
        if value.dtype() != expected.dtype || value.shape() != expected.shape.as_slice() {
            let (expected, given) = (expected.clone(), value.aval());
            return Err(if consts {
                EvalError::ConstType { index, expected, given }
            } else {
                EvalError::ArgType { index, expected, given }
            });
        }
    }
    Ok(())
}

/// The aval `v` is declared with.
fn declared(jaxpr: &Jaxpr, v: Var) -> Result<&Aval, EvalError> {
    jaxpr.vars.get(v.index()).map(|d| &d.aval).ok_or_else(|| {
        EvalError::Malformed(format!("variable {v:?} is not declared (the jaxpr has {} variables)", jaxpr.vars.len()))
    })
}

/// The value of an operand: a bound variable, or a literal as a rank-0 array.
fn read<'a>(jaxpr: &Jaxpr, env: &'a [Option<Cow<'a, Array>>], atom: &Atom) -> Result<Cow<'a, Array>, EvalError> {
    match atom {
        Atom::Lit(lit) => Ok(Cow::Owned(read_literal(lit))),
        Atom::Var(v) => {
            declared(jaxpr, *v)?;
            match env.get(v.index()) {
                Some(Some(value)) => Ok(Cow::Borrowed(value.as_ref())),
                Some(None) | None => Err(EvalError::Malformed(format!("variable {v:?} is read before it has a value"))),
            }
        }
    }
}

/// A literal as a rank-0 array.
fn read_literal(lit: &remat_ir::Literal) -> Array {
    match lit.value {
        LitValue::F32(x) => elem::scalar(x),
        LitValue::F64(x) => elem::scalar(x),
        LitValue::BF16(x) => elem::scalar(x),
        LitValue::F16(x) => elem::scalar(x),
        LitValue::I8(x) => elem::scalar(x),
        LitValue::I16(x) => elem::scalar(x),
        LitValue::I32(x) => elem::scalar(x),
        LitValue::I64(x) => elem::scalar(x),
        LitValue::U8(x) => elem::scalar(x),
        LitValue::U32(x) => elem::scalar(x),
        LitValue::Bool(x) => elem::scalar(x),
        LitValue::C64(x) => elem::scalar(x),
        LitValue::C128(x) => elem::scalar(x),
    }
}

/// The last reader of a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LastUse {
    Never,
    Eqn(usize),
    /// The jaxpr's outputs: the value lives to the end.
    Output,
}

fn last_uses(jaxpr: &Jaxpr) -> Vec<LastUse> {
    let mut last = vec![LastUse::Never; jaxpr.vars.len()];
    for (i, eqn) in jaxpr.eqns.iter().enumerate() {
        for v in eqn.invars.iter().filter_map(Atom::as_var) {
            if let Some(slot) = last.get_mut(v.index()) {
                *slot = LastUse::Eqn(i);
            }
        }
    }
    for v in jaxpr.outvars.iter().filter_map(Atom::as_var) {
        if let Some(slot) = last.get_mut(v.index()) {
            *slot = LastUse::Output;
        }
    }
    last
}

/// [`eval_primitive`] on borrowed operands: the one exhaustive `match` over primitives.
pub(crate) fn eval_primitive_refs(
    prim: &Primitive,
    args: &[&Array],
    out_avals: &[Aval],
) -> Result<Vec<Array>, EvalError> {
    let primitive = prim.name();
    let invalid = |message: String| EvalError::Invalid { primitive, message };
    let one = |r: Result<Array, String>| r.map(|a| vec![a]).map_err(invalid);
    let results = match prim {
        Primitive::Unary(op) => one(elementwise::unary(*op, args))?,
        Primitive::Binary(op) => one(elementwise::binary(*op, args))?,
        Primitive::Compare(op) => one(elementwise::compare(*op, args))?,
        Primitive::IntegerPow { y } => one(elementwise::integer_pow(*y, args))?,
        Primitive::SelectN => one(elementwise::select_n(args))?,
        Primitive::Clamp => one(elementwise::clamp(args))?,
        Primitive::RegularizedIncompleteBeta => one(elementwise::regularized_incomplete_beta(args))?,
        Primitive::Complex => one(elem::operands(args).and_then(|[x, y]| remat_math::complex::complex(x, y)))?,
        Primitive::Real => one(elem::operands(args).and_then(|[z]| remat_math::complex::part(false, z)))?,
        Primitive::Imag => one(elem::operands(args).and_then(|[z]| remat_math::complex::part(true, z)))?,
        Primitive::Conj { input_dtype: _ } => one(elem::operands(args).and_then(|[z]| remat_math::complex::conj(z)))?,
        Primitive::Fft { fft_type, fft_lengths } => {
            one(elem::operands(args).and_then(|[x]| remat_math::complex::fft(*fft_type, fft_lengths, x)))?
        }
        Primitive::ConvertElementType { new_dtype, weak_type: _ } => {
            one(elementwise::convert_element_type(*new_dtype, args))?
        }
        Primitive::Round { rounding_method } => one(elementwise::round(*rounding_method, args))?,
        Primitive::BitcastConvertType { new_dtype } => one(bits::bitcast_convert_type(*new_dtype, args))?,
        Primitive::ReducePrecision { exponent_bits, mantissa_bits } => {
            one(elementwise::reduce_precision(*exponent_bits, *mantissa_bits, args))?
        }
        Primitive::BroadcastInDim { shape, broadcast_dimensions } => {
            one(structural::broadcast_in_dim(shape, broadcast_dimensions, args))?
        }
        Primitive::Reshape { new_sizes, dimensions: None } => one(structural::reshape(new_sizes, args))?,
        Primitive::Reshape { new_sizes, dimensions: Some(d) } => {
            let t = structural::transpose(d, args).map_err(invalid)?;
            one(structural::reshape(new_sizes, &[&t]))?
        }
        Primitive::Transpose { permutation } => one(structural::transpose(permutation, args))?,
        Primitive::Rev { dimensions } => one(structural::rev(dimensions, args))?,
        Primitive::Squeeze { dimensions } => one(structural::squeeze(dimensions, args))?,
        Primitive::ExpandDims { dimensions } => one(structural::expand_dims(dimensions, args))?,
        Primitive::Slice { start_indices, limit_indices, strides } => {
            one(structural::slice(start_indices, limit_indices, strides.as_deref(), args))?
        }
        Primitive::Pad { padding_config } => one(structural::pad(padding_config, args))?,
        Primitive::Concatenate { dimension } => one(structural::concatenate(*dimension, args))?,
        Primitive::DynamicSlice { slice_sizes } => one(structural::dynamic_slice(slice_sizes, args))?,
        Primitive::DynamicUpdateSlice => one(structural::dynamic_update_slice(args))?,
        Primitive::Iota { dtype, shape, dimension } => one(structural::iota(*dtype, shape, *dimension, args))?,
        Primitive::Empty2 { dtype, memory_space: _ } => one(structural::empty2(*dtype, args))?,
        Primitive::Reduce { op, axes } => one(reduce::reduce(*op, axes, args))?,
        Primitive::Argmax { axes, index_dtype } => one(reduce::argmax(axes, *index_dtype, args))?,
        Primitive::GenericReduce { computation: _, dimensions, jaxpr } => {
            let in_avals: Vec<Aval> = args.iter().map(|a| a.aval()).collect();
            let scans =
                remat_ir::generic_reduce_as_scans(dimensions, jaxpr, &in_avals).map_err(|e| invalid(e.to_string()))?;
            control::call(primitive, "reduce's combiner".to_string(), &scans, &[], args)?
        }
        Primitive::GenericReduceWindow { jaxpr, window } => {
            let in_avals: Vec<Aval> = args.iter().map(|a| a.aval()).collect();
            let reduce = remat_ir::generic_reduce_window_as_reduce(window, jaxpr, &in_avals)
                .map_err(|e| invalid(e.to_string()))?;
            control::call(primitive, "reduce_window's combiner".to_string(), &reduce, &[], args)?
        }
        Primitive::DotGeneral { dimension_numbers, preferred_element_type, precision: _ } => {
            one(dot::dot_general(dimension_numbers, *preferred_element_type, args))?
        }
        Primitive::Name { name: _ } => control::identity(args, 1).map_err(invalid)?,
        Primitive::DevicePut { devices, copy_semantics: _ } => {
            control::identity(args, devices.len()).map_err(invalid)?
        }
        Primitive::RandomSeed => one(random::random_seed(args))?,
        Primitive::RandomWrap => one(random::random_wrap(args))?,
        Primitive::RandomUnwrap => one(random::random_unwrap(args))?,
        Primitive::RandomSplit { shape } => one(random::random_split(shape, args))?,
        Primitive::RandomFoldIn => one(random::random_fold_in(args))?,
        Primitive::RandomBits { bit_width, shape } => one(random::random_bits(*bit_width, shape, args))?,
        Primitive::RandomClone => control::identity(args, 1).map_err(invalid)?,
        Primitive::Threefry2x32 => random::threefry2x32_eqn(args).map_err(invalid)?,
        Primitive::Iota2x32Shape { shape } => remat_math::iota_2x32(shape).into_iter().map(Array::U32).collect(),
        Primitive::RngBitGenerator { algorithm, dtype, shape } => {
            random::rng_bit_generator(*algorithm, *dtype, shape, args).map_err(invalid)?
        }
        Primitive::Jit { name, jaxpr, options: _ } => {
            control::call(primitive, format!("jit `{name}`"), &jaxpr.jaxpr, &jaxpr.consts, args)?
        }
        Primitive::Composite { name, jaxpr, .. } => {
            control::call(primitive, format!("composite `{name}`"), &jaxpr.jaxpr, &jaxpr.consts, args)?
        }
        Primitive::ClosedCall { call_jaxpr } => {
            control::call(primitive, "closed_call".to_string(), &call_jaxpr.jaxpr, &call_jaxpr.consts, args)?
        }
        Primitive::CustomJvpCall { name, call_jaxpr, jvp: _, num_consts: _, symbolic_zeros: _ } => {
            control::call(primitive, format!("custom_jvp_call `{name}`"), &call_jaxpr.jaxpr, &call_jaxpr.consts, args)?
        }
        Primitive::Remat2 { jaxpr, prevent_cse: _, differentiated: _, policy: _ } => {
            control::call(primitive, "remat2".to_string(), jaxpr, &[], args)?
        }
        Primitive::Scan { jaxpr, length, reverse, num_consts, num_carry, unroll: _ } => control::scan(
            &control::Scan {
                body: jaxpr,
                length: *length,
                reverse: *reverse,
                num_consts: *num_consts,
                num_carry: *num_carry,
            },
            args,
        )?,
        Primitive::Split { axis, sizes } => indexing::split(*axis, sizes, args).map_err(invalid)?,
        Primitive::Stack { axis } => one(indexing::stack(*axis, args))?,
        Primitive::Unstack { axis } => indexing::unstack(*axis, args).map_err(invalid)?,
        Primitive::Tile { reps } => one(indexing::tile(reps, args))?,
        Primitive::Gather { dimension_numbers, fill_value, mode, slice_sizes, .. } => {
            one(indexing::gather(dimension_numbers, *fill_value, *mode, slice_sizes, prim, args))?
        }
        Primitive::Scatter { op, dimension_numbers, mode, .. } => {
            one(indexing::scatter(*op, dimension_numbers, *mode, prim, args))?
        }
        Primitive::Sort { dimension, is_stable, num_keys } => {
            sorting::sort(*dimension, *is_stable, *num_keys, args).map_err(invalid)?
        }
        Primitive::TopK { axis, k } => sorting::top_k(*axis, *k, args).map_err(invalid)?,
        Primitive::ApproxTopK { k, reduction_dimension, is_max_k, .. } => {
            let aval = args[0].aval();
            let axis = remat_ir::approx_top_k_axis(*reduction_dimension, aval.rank())
                .ok_or_else(|| invalid(format!("reduction_dimension {reduction_dimension} is out of range")))?;
            let j = remat_ir::approx_top_k_as_jaxpr(*k, axis, *is_max_k, &aval);
            control::call(primitive, "approx_top_k's exact CPU fallback".to_string(), &j, &[], args)?
        }
        Primitive::Cholesky => one(linalg::cholesky(args))?,
        Primitive::TriangularSolve(t) => one(linalg::triangular_solve(t, args))?,
        Primitive::Lu => linalg::lu(args).map_err(invalid)?,
        Primitive::Qr(q) => linalg::qr(q, args).map_err(invalid)?,
        Primitive::Eigh(e) => linalg::eigh(e, args).map_err(invalid)?,
        Primitive::Svd(v) => linalg::svd(v, args).map_err(invalid)?,
        Primitive::Geqrf => linalg::geqrf(args).map_err(invalid)?,
        Primitive::HouseholderProduct => one(linalg::householder_product(args))?,
        Primitive::Ormqr { left, transpose } => one(linalg::ormqr(*left, *transpose, args))?,
        Primitive::TridiagonalSolve { perturb_singular } => one(linalg::tridiagonal_solve(*perturb_singular, args))?,
        Primitive::SymmetricProduct { alpha, beta } => one(linalg::symmetric_product(*alpha, *beta, args))?,
        Primitive::LuPivotsToPermutation { permutation_size } => {
            one(linalg::lu_pivots_to_permutation(*permutation_size, args))?
        }
        Primitive::Argmin { axes, index_dtype } => one(sorting::argmin(axes, *index_dtype, args))?,
        Primitive::Cumulative { op, axis, reverse } => one(sorting::cumulative(*op, *axis, *reverse, args))?,
        Primitive::ConvGeneralDilated(c) => one(window::conv(c, args))?,
        Primitive::ReduceWindow { op, window } => one(window::reduce_window(*op, window, args))?,
        Primitive::SelectAndScatterAdd { select_prim, window_dimensions, window_strides, padding } => {
            let w = remat_ir::scatter_window(window_dimensions, window_strides, padding);
            one(window::select_and_scatter_add(*select_prim, &w, args))?
        }
        Primitive::SelectAndGatherAdd { select_prim, window } => {
            one(window::select_and_gather_add(*select_prim, window, args))?
        }
        Primitive::Cond { branches, .. } => control::cond(branches, args)?,
        Primitive::OptimizationBarrier => args.iter().map(|&a| a.clone()).collect(),
        Primitive::PlatformIndex { platforms } => {
            let i = remat_ir::platform_index(platforms)
                .ok_or_else(|| invalid(format!("no entry of {platforms:?} is for cpu and none is the default")))?;
            vec![Array::I32(ndarray::arr0(i as i32).into_dyn())]
        }
        Primitive::While { cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts } => control::while_loop(
            &control::While {
                cond: cond_jaxpr,
                body: body_jaxpr,
                cond_nconsts: *cond_nconsts,
                body_nconsts: *body_nconsts,
            },
            args,
        )?,
        Primitive::CustomVjpCall { name, call_jaxpr, fwd: _, bwd: _, num_consts: _, symbolic_zeros: _ } => {
            control::call(primitive, format!("custom_vjp_call `{name}`"), &call_jaxpr.jaxpr, &call_jaxpr.consts, args)?
        }
        // Shardings say where blocks live; values are the same.
        Primitive::ShardingConstraint(_) | Primitive::Reshard | Primitive::Pvary { .. } => {
            control::identity(args, 1).map_err(invalid)?
        }
        Primitive::ShardAlike => control::identity(args, 2).map_err(invalid)?,
        Primitive::ShardMap(sm) => sharded::shard_map(sm, args)?,
        // A collective exchanges blocks between the devices of a shard_map's mesh, which
        // `sharded::shard_map` runs side by side; alone it has none.
        Primitive::AllReduce { .. }
        | Primitive::AllGather { .. }
        | Primitive::ReduceScatter { .. }
        | Primitive::Ppermute { .. }
        | Primitive::AxisIndex { .. }
        | Primitive::AllToAll { .. }
        | Primitive::Pbroadcast { .. } => {
            return Err(invalid(format!(
                "{primitive} outside a shard_map body: there is no mesh axis to exchange over"
            )))
        }
    };
    check_results(primitive, &results, out_avals)?;
    Ok(results)
}

/// Results must have the dtypes and shapes the equation declares (memory spaces aside).
fn check_results(primitive: &'static str, results: &[Array], out_avals: &[Aval]) -> Result<(), EvalError> {
    if results.len() != out_avals.len() {
        return Err(EvalError::ResultCount { primitive, computed: results.len(), declared: out_avals.len() });
    }
    for (index, (r, declared)) in results.iter().zip(out_avals).enumerate() {
        if r.dtype() != declared.dtype || r.shape() != declared.shape.as_slice() {
            return Err(EvalError::ResultType { primitive, index, computed: r.aval(), declared: declared.clone() });
        }
    }
    Ok(())
}
