//! Shape rules: the output avals of one equation from its input avals, with JAX's typing
//! rules (`jax/_src/lax/lax.py`, `slicing.py`, `control_flow/loops.py`).
//!
//! [`shape_rule`] is one exhaustive match over [`Primitive`]. What it keeps true:
//! - it never panics, whatever the avals and parameters (a malformed nested jaxpr is an
//!   error, not an out-of-bounds index);
//! - every error message starts with the primitive's name: `add: operand shapes f32[3] and
//!   f32[4] differ`;
//! - results are in device memory except `device_put`'s, which land in the memory space
//!   it names, and a call's, which are its inner jaxpr's output avals. Whether an operand
//!   may live in host memory is the verifier's question, not this module's.

use std::collections::HashSet;
use std::fmt;

use crate::jaxpr::{Atom, ClosedJaxpr, Jaxpr, Var};
use crate::primitive::{BinaryOp, CompareOp, DotDimensionNumbers, Primitive, ReduceOp, UnaryOp};
use crate::types::{Aval, DType, Shape};

/// Why an equation's operands do not fit its primitive.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ShapeError {
    pub message: String,
}

impl ShapeError {
    fn new(prim: &str, message: impl fmt::Display) -> ShapeError {
        ShapeError { message: format!("{prim}: {message}") }
    }
}

macro_rules! bail {
    ($prim:expr, $($fmt:tt)*) => {
        return Err(ShapeError::new($prim, format!($($fmt)*)))
    };
}

macro_rules! ensure {
    ($cond:expr, $prim:expr, $($fmt:tt)*) => {
        if !$cond {
            bail!($prim, $($fmt)*);
        }
    };
}

/// The output avals of `prim` applied to operands of types `in_avals`.
pub fn shape_rule(prim: &Primitive, in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = prim.name();
    let out = match prim {
        Primitive::Unary(op) => {
            let [x] = arity(name, in_avals)?;
            unary(*op, x)?
        }
        Primitive::Binary(op) => {
            let [x, y] = arity(name, in_avals)?;
            binary(*op, x, y)?
        }
        Primitive::Compare(op) => {
            let [x, y] = arity(name, in_avals)?;
            compare(*op, x, y)?
        }
        Primitive::IntegerPow { y } => {
            let [x] = arity(name, in_avals)?;
            ensure!(x.dtype != DType::Bool, name, "operand must be a number, found {x}");
            ensure!(x.dtype.is_float() || *y >= 0, name, "integers cannot be raised to negative powers (y={y})");
            device(x.dtype, x.shape.clone())
        }
        Primitive::SelectN => select_n(in_avals)?,
        Primitive::Clamp => {
            let [lo, x, hi] = arity(name, in_avals)?;
            for (what, bound) in [("lo", lo), ("hi", hi)] {
                ensure!(bound.dtype == x.dtype, name, "{what} {bound} and operand {x} have different dtypes");
                ensure!(
                    bound.rank() == 0 || bound.shape == x.shape,
                    name,
                    "{what} {bound} must be a scalar or have the operand's shape {x}"
                );
            }
            device(x.dtype, x.shape.clone())
        }
        Primitive::ConvertElementType { new_dtype, .. } => {
            let [x] = arity(name, in_avals)?;
            device(*new_dtype, x.shape.clone())
        }
        Primitive::ReducePrecision { exponent_bits, .. } => {
            let [x] = arity(name, in_avals)?;
            ensure!(x.dtype.is_float(), name, "operand must be a float, found {x}");
            ensure!(*exponent_bits >= 1, name, "exponent_bits must be at least 1");
            device(x.dtype, x.shape.clone())
        }
        Primitive::BroadcastInDim { shape, broadcast_dimensions } => {
            let [x] = arity(name, in_avals)?;
            broadcast_in_dim(x, shape, broadcast_dimensions)?
        }
        Primitive::Reshape { new_sizes } => {
            let [x] = arity(name, in_avals)?;
            let (from, to) = (element_count(&x.shape), element_count(new_sizes));
            let count = |n: Option<usize>| n.map_or("too many".to_string(), |n| n.to_string());
            ensure!(
                from.is_some() && from == to,
                name,
                "cannot reshape {x} ({} elements) to new_sizes {new_sizes:?} ({} elements)",
                count(from),
                count(to)
            );
            device(x.dtype, new_sizes.clone())
        }
        Primitive::Transpose { permutation } => {
            let [x] = arity(name, in_avals)?;
            ensure!(
                is_permutation(permutation, x.rank()),
                name,
                "permutation {permutation:?} is not a permutation of the {} axes of {x}",
                x.rank()
            );
            device(x.dtype, permutation.iter().map(|&p| x.shape[p]).collect())
        }
        Primitive::Squeeze { dimensions } => {
            let [x] = arity(name, in_avals)?;
            distinct_axes(name, "dimensions", dimensions, x)?;
            for &d in dimensions {
                ensure!(x.shape[d] == 1, name, "dimension {d} of {x} has size {}, not 1", x.shape[d]);
            }
            let shape = (0..x.rank()).filter(|d| !dimensions.contains(d)).map(|d| x.shape[d]).collect();
            device(x.dtype, shape)
        }
        Primitive::ExpandDims { dimensions } => {
            let [x] = arity(name, in_avals)?;
            let out_rank = x.rank() + dimensions.len();
            let set: HashSet<usize> = dimensions.iter().copied().collect();
            ensure!(set.len() == dimensions.len(), name, "dimensions {dimensions:?} are not distinct");
            ensure!(
                dimensions.iter().all(|&d| d < out_rank),
                name,
                "dimensions {dimensions:?} must be positions in the output rank {out_rank}"
            );
            let mut rest = x.shape.iter();
            let shape = (0..out_rank).map(|d| if set.contains(&d) { 1 } else { *rest.next().unwrap_or(&1) }).collect();
            device(x.dtype, shape)
        }
        Primitive::Slice { start_indices, limit_indices, strides } => {
            let [x] = arity(name, in_avals)?;
            slice(x, start_indices, limit_indices, strides.as_deref())?
        }
        Primitive::Pad { padding_config } => {
            let [x, padding_value] = arity(name, in_avals)?;
            pad(x, padding_value, padding_config)?
        }
        Primitive::Concatenate { dimension } => concatenate(in_avals, *dimension)?,
        Primitive::DynamicSlice { slice_sizes } => {
            let Some((x, indices)) = in_avals.split_first() else {
                bail!(name, "expected an operand and start indices")
            };
            start_indices(name, x, indices)?;
            ensure!(
                slice_sizes.len() == x.rank(),
                name,
                "slice_sizes {slice_sizes:?} must have one entry per axis of {x}"
            );
            for (d, (&size, &dim)) in slice_sizes.iter().zip(&x.shape).enumerate() {
                ensure!(size <= dim, name, "slice size {size} exceeds dimension {d} of {x}");
            }
            device(x.dtype, slice_sizes.clone())
        }
        Primitive::DynamicUpdateSlice => {
            let [x, update, indices @ ..] = in_avals else {
                bail!(name, "expected an operand, an update and start indices")
            };
            ensure!(update.dtype == x.dtype, name, "update {update} and operand {x} have different dtypes");
            ensure!(update.rank() == x.rank(), name, "update {update} and operand {x} have different ranks");
            for (d, (&u, &dim)) in update.shape.iter().zip(&x.shape).enumerate() {
                ensure!(u <= dim, name, "update {update} is larger than operand {x} in dimension {d}");
            }
            start_indices(name, x, indices)?;
            device(x.dtype, x.shape.clone())
        }
        Primitive::Iota { dtype, shape, dimension } => {
            let [] = arity(name, in_avals)?;
            ensure!(*dimension < shape.len(), name, "dimension {dimension} is out of range for shape {shape:?}");
            device(*dtype, shape.clone())
        }
        Primitive::Reduce { op, axes } => {
            let [x] = arity(name, in_avals)?;
            match op {
                ReduceOp::Sum => ensure!(x.dtype != DType::Bool, name, "operand must be a number, found {x}"),
                ReduceOp::Max | ReduceOp::Min => {}
            }
            distinct_axes(name, "axes", axes, x)?;
            device(x.dtype, remove_axes(&x.shape, axes))
        }
        Primitive::Argmax { axes, index_dtype } => {
            let [x] = arity(name, in_avals)?;
            ensure!(*index_dtype == DType::I32, name, "index_dtype must be int32, found {}", index_dtype.numpy_name());
            let [axis] = axes.as_slice() else { bail!(name, "expects exactly one axis, found axes {axes:?}") };
            ensure!(*axis < x.rank(), name, "axis {axis} is out of range for {x}");
            ensure!(x.shape[*axis] > 0, name, "the reduced dimension {axis} of {x} is empty");
            device(*index_dtype, remove_axes(&x.shape, axes))
        }
        Primitive::DotGeneral { dimension_numbers, preferred_element_type } => {
            let [lhs, rhs] = arity(name, in_avals)?;
            dot_general(lhs, rhs, dimension_numbers, *preferred_element_type)?
        }
        Primitive::Name { .. } => {
            let [x] = arity(name, in_avals)?;
            device(x.dtype, x.shape.clone())
        }
        Primitive::DevicePut { devices, .. } => {
            ensure!(
                in_avals.len() == devices.len(),
                name,
                "{} operands for {} devices; device_put takes one device per operand",
                in_avals.len(),
                devices.len()
            );
            in_avals
                .iter()
                .zip(devices)
                .map(|(x, &ms)| Aval::new(x.dtype, x.shape.clone()).with_memory_space(ms))
                .collect()
        }
        Primitive::Jit { jaxpr, .. } => call(name, in_avals, jaxpr)?,
        Primitive::CustomJvpCall { call_jaxpr, num_consts, .. } => {
            ensure!(
                *num_consts <= in_avals.len(),
                name,
                "num_consts={num_consts} but only {} operands",
                in_avals.len()
            );
            call(name, in_avals, call_jaxpr)?
        }
        Primitive::Remat2 { jaxpr, .. } => {
            ensure!(
                jaxpr.constvars.is_empty(),
                name,
                "the inner jaxpr has {} constvars; remat2 takes a jaxpr whose constants are invars",
                jaxpr.constvars.len()
            );
            check_operands(name, in_avals, &inner_avals(name, jaxpr, &jaxpr.invars)?)?;
            inner_out_avals(name, jaxpr)?
        }
        Primitive::Scan { jaxpr, length, num_consts, num_carry, .. } => {
            scan(in_avals, jaxpr, *length, *num_consts, *num_carry)?
        }
    };
    Ok(out)
}

fn device(dtype: DType, shape: Shape) -> Vec<Aval> {
    vec![Aval::new(dtype, shape)]
}

/// The operands as an array of exactly `N`, or an error naming the count.
fn arity<'a, const N: usize>(name: &str, in_avals: &'a [Aval]) -> Result<&'a [Aval; N], ShapeError> {
    <&[Aval; N]>::try_from(in_avals).map_err(|_| {
        let plural = if N == 1 { "" } else { "s" };
        ShapeError::new(name, format!("expected {N} operand{plural}, found {}", in_avals.len()))
    })
}

fn unary(op: UnaryOp, x: &Aval) -> Result<Vec<Aval>, ShapeError> {
    let name = op.name();
    match op {
        UnaryOp::StopGradient => {}
        UnaryOp::Neg | UnaryOp::Sign | UnaryOp::Abs | UnaryOp::Square => {
            ensure!(x.dtype != DType::Bool, name, "operand must be a number, found {x}");
        }
        UnaryOp::Exp
        | UnaryOp::Log
        | UnaryOp::Log1p
        | UnaryOp::Expm1
        | UnaryOp::Sin
        | UnaryOp::Cos
        | UnaryOp::Tan
        | UnaryOp::Tanh
        | UnaryOp::Logistic
        | UnaryOp::Sqrt
        | UnaryOp::Rsqrt => ensure!(x.dtype.is_float(), name, "operand must be a float, found {x}"),
    }
    Ok(device(x.dtype, x.shape.clone()))
}

fn binary(op: BinaryOp, x: &Aval, y: &Aval) -> Result<Vec<Aval>, ShapeError> {
    let name = op.name();
    match op {
        // JAX's pow takes a float base and a float exponent of the same dtype or an
        // integer exponent.
        BinaryOp::Pow => {
            ensure!(x.dtype.is_float(), name, "the base must be a float, found {x}");
            ensure!(
                y.dtype == x.dtype || y.dtype == DType::I32,
                name,
                "the exponent {y} must be an integer or have the base's dtype {}",
                x.dtype
            );
        }
        BinaryOp::Add | BinaryOp::AddAny | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => {
            same_dtype(name, x, y)?;
            ensure!(x.dtype != DType::Bool, name, "operands must be numbers, found {x} and {y}");
        }
        BinaryOp::Max | BinaryOp::Min => same_dtype(name, x, y)?,
    }
    Ok(device(x.dtype, broadcast_shapes(name, x, y)?))
}

fn compare(op: CompareOp, x: &Aval, y: &Aval) -> Result<Vec<Aval>, ShapeError> {
    same_dtype(op.name(), x, y)?;
    Ok(device(DType::Bool, broadcast_shapes(op.name(), x, y)?))
}

fn same_dtype(name: &str, x: &Aval, y: &Aval) -> Result<(), ShapeError> {
    ensure!(x.dtype == y.dtype, name, "operand dtypes differ: {x} and {y}");
    Ok(())
}

/// JAX's `broadcasting_shape_rule`: a rank-0 operand broadcasts against anything; other
/// operands have one rank, and in each dimension their sizes are equal or 1.
fn broadcast_shapes(name: &str, x: &Aval, y: &Aval) -> Result<Shape, ShapeError> {
    match (x.rank(), y.rank()) {
        (0, _) => return Ok(y.shape.clone()),
        (_, 0) => return Ok(x.shape.clone()),
        _ => {}
    }
    let differ = || ShapeError::new(name, format!("operand shapes {x} and {y} differ"));
    if x.rank() != y.rank() {
        return Err(differ());
    }
    x.shape
        .iter()
        .zip(&y.shape)
        .map(|(&a, &b)| match (a, b) {
            _ if a == b => Ok(a),
            (1, _) => Ok(b),
            (_, 1) => Ok(a),
            _ => Err(differ()),
        })
        .collect()
}

/// `select_n pred case0 case1 ...`.
fn select_n(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "select_n";
    let Some((pred, cases)) = in_avals.split_first() else { bail!(name, "expected a predicate and at least one case") };
    let Some(first) = cases.first() else { bail!(name, "expected at least one case") };
    ensure!(matches!(pred.dtype, DType::Bool | DType::I32), name, "the predicate must be bool or i32, found {pred}");
    ensure!(
        pred.dtype != DType::Bool || cases.len() <= 2,
        name,
        "a bool predicate selects between at most 2 cases, found {}",
        cases.len()
    );
    for (i, case) in cases.iter().enumerate() {
        ensure!(case.same_type(first), name, "case {i} is {case} but case 0 is {first}; all cases must have one type");
    }
    ensure!(
        pred.rank() == 0 || pred.shape == first.shape,
        name,
        "the predicate {pred} must be a scalar or have the cases' shape {first}"
    );
    Ok(device(first.dtype, first.shape.clone()))
}

fn broadcast_in_dim(x: &Aval, shape: &[usize], dims: &[usize]) -> Result<Vec<Aval>, ShapeError> {
    let name = "broadcast_in_dim";
    ensure!(
        dims.len() == x.rank(),
        name,
        "operand {x} has rank {} but broadcast_dimensions {dims:?} has {} entries",
        x.rank(),
        dims.len()
    );
    ensure!(dims.windows(2).all(|w| w[0] < w[1]), name, "broadcast_dimensions {dims:?} must be strictly increasing");
    for (i, &bd) in dims.iter().enumerate() {
        ensure!(bd < shape.len(), name, "broadcast dimension {bd} is out of range for shape {shape:?}");
        ensure!(
            x.shape[i] == 1 || x.shape[i] == shape[bd],
            name,
            "operand dimension {i} of {x} has size {}, which is neither 1 nor the target size {} of dimension {bd}",
            x.shape[i],
            shape[bd]
        );
    }
    Ok(device(x.dtype, shape.to_vec()))
}

fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

fn is_permutation(p: &[usize], rank: usize) -> bool {
    let mut seen = vec![false; rank];
    p.len() == rank && p.iter().all(|&i| i < rank && !std::mem::replace(&mut seen[i], true))
}

/// Axes that must be distinct and within the operand's rank.
fn distinct_axes(name: &str, what: &str, axes: &[usize], x: &Aval) -> Result<(), ShapeError> {
    for &a in axes {
        ensure!(a < x.rank(), name, "{what} {axes:?} include axis {a}, out of range for {x}");
    }
    let set: HashSet<usize> = axes.iter().copied().collect();
    ensure!(set.len() == axes.len(), name, "{what} {axes:?} are not distinct");
    Ok(())
}

fn remove_axes(shape: &[usize], axes: &[usize]) -> Shape {
    shape.iter().enumerate().filter(|(d, _)| !axes.contains(d)).map(|(_, &n)| n).collect()
}

fn slice(x: &Aval, start: &[usize], limit: &[usize], strides: Option<&[usize]>) -> Result<Vec<Aval>, ShapeError> {
    let name = "slice";
    let r = x.rank();
    ensure!(
        start.len() == r && limit.len() == r,
        name,
        "start_indices and limit_indices need one entry per axis of {x}"
    );
    if let Some(s) = strides {
        ensure!(s.len() == r, name, "strides {s:?} need one entry per axis of {x}");
    }
    let mut shape = Vec::with_capacity(r);
    for d in 0..r {
        let stride = strides.map_or(1, |s| s[d]);
        ensure!(stride >= 1, name, "stride {stride} in dimension {d} must be at least 1");
        ensure!(
            start[d] <= limit[d] && limit[d] <= x.shape[d],
            name,
            "dimension {d}: need start <= limit <= size, found start {} limit {} size {}",
            start[d],
            limit[d],
            x.shape[d]
        );
        shape.push((limit[d] - start[d]).div_ceil(stride));
    }
    Ok(device(x.dtype, shape))
}

fn pad(x: &Aval, padding_value: &Aval, config: &[(i64, i64, i64)]) -> Result<Vec<Aval>, ShapeError> {
    let name = "pad";
    ensure!(
        padding_value.dtype == x.dtype,
        name,
        "operand {x} and padding value {padding_value} have different dtypes"
    );
    ensure!(padding_value.rank() == 0, name, "the padding value must be a scalar, found {padding_value}");
    ensure!(config.len() == x.rank(), name, "padding_config has {} entries for {x}", config.len());
    let mut shape = Vec::with_capacity(config.len());
    for (d, (&(lo, hi, interior), &n)) in config.iter().zip(&x.shape).enumerate() {
        ensure!(interior >= 0, name, "interior padding {interior} in dimension {d} is negative");
        let n = n as i128;
        let size = lo as i128 + hi as i128 + n + (n - 1).max(0) * interior as i128;
        ensure!(size >= 0, name, "dimension {d} of {x} padded by ({lo}, {hi}, {interior}) has negative size {size}");
        let size = usize::try_from(size).map_err(|_| ShapeError::new(name, format!("dimension {d} is too large")))?;
        shape.push(size);
    }
    Ok(device(x.dtype, shape))
}

fn concatenate(in_avals: &[Aval], dimension: usize) -> Result<Vec<Aval>, ShapeError> {
    let name = "concatenate";
    let Some(first) = in_avals.first() else { bail!(name, "expected at least one operand") };
    ensure!(dimension < first.rank(), name, "dimension {dimension} is out of range for {first}");
    let mut shape = first.shape.clone();
    for (i, x) in in_avals.iter().enumerate().skip(1) {
        ensure!(x.dtype == first.dtype, name, "operand {i} {x} and operand 0 {first} have different dtypes");
        let same_elsewhere = x.rank() == first.rank()
            && x.shape.iter().zip(&first.shape).enumerate().all(|(d, (a, b))| d == dimension || a == b);
        ensure!(same_elsewhere, name, "operand {i} {x} and operand 0 {first} differ outside dimension {dimension}");
        shape[dimension] += x.shape[dimension];
    }
    Ok(device(first.dtype, shape))
}

/// `dynamic_slice` and `dynamic_update_slice` start indices: one scalar i32 per axis.
fn start_indices(name: &str, x: &Aval, indices: &[Aval]) -> Result<(), ShapeError> {
    ensure!(indices.len() == x.rank(), name, "{} start indices for {x}; expected one per axis", indices.len());
    for (i, idx) in indices.iter().enumerate() {
        ensure!(idx.dtype == DType::I32 && idx.rank() == 0, name, "start index {i} must be a scalar i32, found {idx}");
    }
    Ok(())
}

/// JAX's `_dot_general_shape_rule`: batch dims pair up, contracting dims pair up, no dim
/// is used twice; the output is batch dims, then lhs free dims, then rhs free dims.
fn dot_general(
    lhs: &Aval,
    rhs: &Aval,
    dn: &DotDimensionNumbers,
    preferred: Option<DType>,
) -> Result<Vec<Aval>, ShapeError> {
    let name = "dot_general";
    ensure!(lhs.dtype == rhs.dtype, name, "operand dtypes differ: {lhs} and {rhs}");
    for (side, x, contracting, batch) in
        [("lhs", lhs, &dn.lhs_contracting, &dn.lhs_batch), ("rhs", rhs, &dn.rhs_contracting, &dn.rhs_batch)]
    {
        let mut used = HashSet::new();
        for &d in contracting.iter().chain(batch) {
            ensure!(d < x.rank(), name, "{side} dimension {d} is out of range for {x}");
            ensure!(used.insert(d), name, "{side} dimension {d} is used twice in dimension_numbers");
        }
    }
    for (kind, l, r) in
        [("contracting", &dn.lhs_contracting, &dn.rhs_contracting), ("batch", &dn.lhs_batch, &dn.rhs_batch)]
    {
        ensure!(l.len() == r.len(), name, "{} lhs {kind} dimensions but {} rhs {kind} dimensions", l.len(), r.len());
        for (&a, &b) in l.iter().zip(r) {
            ensure!(
                lhs.shape[a] == rhs.shape[b],
                name,
                "{kind} dimension sizes differ: lhs dim {a} has {}, rhs dim {b} has {}",
                lhs.shape[a],
                rhs.shape[b]
            );
        }
    }
    let free = |x: &Aval, contracting: &[usize], batch: &[usize]| {
        (0..x.rank()).filter(|d| !contracting.contains(d) && !batch.contains(d)).map(|d| x.shape[d]).collect::<Vec<_>>()
    };
    let mut shape: Shape = dn.lhs_batch.iter().map(|&d| lhs.shape[d]).collect();
    shape.extend(free(lhs, &dn.lhs_contracting, &dn.lhs_batch));
    shape.extend(free(rhs, &dn.rhs_contracting, &dn.rhs_batch));
    Ok(device(preferred.unwrap_or(lhs.dtype), shape))
}

/// The avals of `vars` in a nested jaxpr, or an error if one is out of range.
fn inner_avals(name: &str, j: &Jaxpr, vars: &[Var]) -> Result<Vec<Aval>, ShapeError> {
    vars.iter()
        .map(|v| match j.vars.get(v.index()) {
            Some(decl) => Ok(decl.aval.clone()),
            None => bail!(name, "the inner jaxpr's variable {v:?} is out of range"),
        })
        .collect()
}

fn inner_out_avals(name: &str, j: &Jaxpr) -> Result<Vec<Aval>, ShapeError> {
    j.outvars
        .iter()
        .map(|a| match a {
            Atom::Var(v) => inner_avals(name, j, &[*v]).map(|mut avals| avals.remove(0)),
            Atom::Lit(l) => Ok(l.aval()),
        })
        .collect()
}

/// A closed jaxpr's consts have its constvars' types.
fn check_consts(name: &str, c: &ClosedJaxpr) -> Result<(), ShapeError> {
    let const_avals = inner_avals(name, &c.jaxpr, &c.jaxpr.constvars)?;
    ensure!(
        c.consts.len() == const_avals.len(),
        name,
        "the closed jaxpr has {} consts for {} constvars",
        c.consts.len(),
        const_avals.len()
    );
    for (i, (value, aval)) in c.consts.iter().zip(&const_avals).enumerate() {
        ensure!(
            value.dtype() == aval.dtype && value.shape() == aval.shape.as_slice(),
            name,
            "const {i} is {} but its constvar is {aval}",
            Aval::new(value.dtype(), value.shape().to_vec())
        );
    }
    Ok(())
}

/// Operands against a nested jaxpr's invars: same count, and equal avals including the
/// memory space.
fn check_operands(name: &str, in_avals: &[Aval], invars: &[Aval]) -> Result<(), ShapeError> {
    ensure!(
        in_avals.len() == invars.len(),
        name,
        "{} operands for an inner jaxpr with {} invars",
        in_avals.len(),
        invars.len()
    );
    for (i, (x, want)) in in_avals.iter().zip(invars).enumerate() {
        ensure!(x == want, name, "operand {i} is {x} but the inner jaxpr's invar {i} is {want}");
    }
    Ok(())
}

/// `jit` and `custom_jvp_call`: operands match the invars, results are the outvars.
fn call(name: &str, in_avals: &[Aval], c: &ClosedJaxpr) -> Result<Vec<Aval>, ShapeError> {
    check_consts(name, c)?;
    check_operands(name, in_avals, &inner_avals(name, &c.jaxpr, &c.jaxpr.invars)?)?;
    inner_out_avals(name, &c.jaxpr)
}

/// `scan`: operands are consts, carries and xs; the body maps (consts, carries, x slices)
/// to (carries, y slices); the results are the final carries and the stacked ys.
fn scan(
    in_avals: &[Aval],
    body: &ClosedJaxpr,
    length: usize,
    num_consts: usize,
    num_carry: usize,
) -> Result<Vec<Aval>, ShapeError> {
    let name = "scan";
    check_consts(name, body)?;
    ensure!(
        num_consts + num_carry <= in_avals.len(),
        name,
        "num_consts={num_consts} and num_carry={num_carry} but only {} operands",
        in_avals.len()
    );
    let (consts_and_carries, xs) = in_avals.split_at(num_consts + num_carry);
    let carries = &consts_and_carries[num_consts..];
    let mut body_in = consts_and_carries.to_vec();
    for (i, x) in xs.iter().enumerate() {
        ensure!(
            x.shape.first() == Some(&length),
            name,
            "xs operand {i} is {x}; its leading dimension must be length={length}"
        );
        body_in.push(Aval { dtype: x.dtype, shape: x.shape[1..].to_vec(), memory_space: x.memory_space });
    }
    check_operands(name, &body_in, &inner_avals(name, &body.jaxpr, &body.jaxpr.invars)?)?;
    let body_out = inner_out_avals(name, &body.jaxpr)?;
    ensure!(body_out.len() >= num_carry, name, "the body has {} outputs for num_carry={num_carry}", body_out.len());
    let (carry_out, ys) = body_out.split_at(num_carry);
    for (i, (c_in, c_out)) in carries.iter().zip(carry_out).enumerate() {
        ensure!(c_in == c_out, name, "carry {i} enters the body as {c_in} but leaves it as {c_out}");
    }
    let mut out = carries.to_vec();
    out.extend(ys.iter().map(|y| {
        let mut shape = vec![length];
        shape.extend(&y.shape);
        Aval { dtype: y.dtype, shape, memory_space: y.memory_space }
    }));
    Ok(out)
}

/// Whether `prim` may read an operand that lives in host memory: only `device_put`, which
/// moves it, and calls, whose inner jaxpr then has an invar in host memory.
pub fn reads_host_memory(prim: &Primitive) -> bool {
    matches!(prim, Primitive::DevicePut { .. }) || !prim.subjaxprs().is_empty()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::array::Array;
    use crate::parse::parse_jaxpr;
    use crate::primitive::CopySemantics;
    use crate::types::MemorySpace;

    /// Avals as a jaxpr writes them, separated by spaces: `f32[3,4] i32[] f32<host>[5]`.
    fn avals(s: &str) -> Vec<Aval> {
        s.split_whitespace().map(aval).collect()
    }

    fn aval(s: &str) -> Aval {
        let (head, dims) = s.strip_suffix(']').and_then(|t| t.split_once('[')).expect("an aval");
        let (dtype, memory_space) = match head.strip_suffix("<host>") {
            Some(d) => (d, MemorySpace::Host),
            None => (head, MemorySpace::Device),
        };
        let shape = dims.split(',').filter(|d| !d.is_empty()).map(|d| d.parse().unwrap()).collect();
        Aval { dtype: DType::from_short_name(dtype).expect("a dtype"), shape, memory_space }
    }

    /// `prim` applied to operands `ins` gives `want`: `-> ` and the result avals, or an
    /// error containing `want`.
    #[track_caller]
    fn check(prim: &Primitive, ins: &str, want: &str) {
        let got = match shape_rule(prim, &avals(ins)) {
            Ok(out) => format!("-> {}", out.iter().map(Aval::to_string).collect::<Vec<_>>().join(" ")),
            Err(e) => e.message,
        };
        let ok = got == want || (!want.starts_with("->") && got.contains(want));
        assert!(ok, "{prim} on {ins}:\n  got  {got}\n  want {want}");
    }

    fn jaxpr(text: &str) -> Arc<Jaxpr> {
        Arc::new(parse_jaxpr(text, "test").unwrap())
    }

    #[test]
    fn unary_ops_keep_the_aval_in_device_memory() {
        let un = |op| Primitive::Unary(op);
        check(&un(UnaryOp::Sin), "f32[3,4]", "-> f32[3,4]");
        check(&un(UnaryOp::Sin), "f32<host>[3]", "-> f32[3]");
        check(&un(UnaryOp::Neg), "i32[2]", "-> i32[2]");
        check(&un(UnaryOp::StopGradient), "bool[2]", "-> bool[2]");
        check(&un(UnaryOp::Sin), "i32[3]", "sin: operand must be a float, found i32[3]");
        check(&un(UnaryOp::Neg), "bool[]", "neg: operand must be a number, found bool[]");
        check(&un(UnaryOp::Abs), "bool[]", "abs: operand must be a number");
        check(&un(UnaryOp::Exp), "f32[] f32[]", "exp: expected 1 operand, found 2");
    }

    #[test]
    fn binary_ops_broadcast_scalars_and_size_one_dims() {
        let add = Primitive::Binary(BinaryOp::Add);
        check(&add, "f32[3] f32[3]", "-> f32[3]");
        check(&add, "f32[3,4] f32[]", "-> f32[3,4]");
        check(&add, "f32[] f32[3,4]", "-> f32[3,4]");
        check(&add, "f32[2,6] f32[2,1]", "-> f32[2,6]");
        check(&add, "f32[1,6] f32[2,1]", "-> f32[2,6]");
        check(&add, "f32[3] f32[4]", "add: operand shapes f32[3] and f32[4] differ");
        check(&add, "f32[3] f32[2,3]", "add: operand shapes f32[3] and f32[2,3] differ");
        check(&add, "f32[3] i32[3]", "add: operand dtypes differ: f32[3] and i32[3]");
        check(&Primitive::Binary(BinaryOp::Mul), "bool[] bool[]", "mul: operands must be numbers");
        check(&Primitive::Binary(BinaryOp::Max), "bool[2] bool[2]", "-> bool[2]");
        let pow = Primitive::Binary(BinaryOp::Pow);
        check(&pow, "f32[2] i32[]", "-> f32[2]");
        check(&pow, "i32[] i32[]", "pow: the base must be a float");
        check(&pow, "f32[] f64[]", "pow: the exponent f64[] must be an integer");
    }

    #[test]
    fn comparisons_give_bool() {
        check(&Primitive::Compare(CompareOp::Lt), "f32[3] f32[]", "-> bool[3]");
        check(&Primitive::Compare(CompareOp::Eq), "bool[3] bool[3]", "-> bool[3]");
        check(&Primitive::Compare(CompareOp::Gt), "f32[3] i32[]", "gt: operand dtypes differ");
        check(&Primitive::Compare(CompareOp::Eq), "f32[3] f32[2]", "eq: operand shapes f32[3] and f32[2] differ");
    }

    #[test]
    fn integer_pow() {
        check(&Primitive::IntegerPow { y: 2 }, "i32[4]", "-> i32[4]");
        check(&Primitive::IntegerPow { y: -2 }, "f32[4]", "-> f32[4]");
        check(&Primitive::IntegerPow { y: 2 }, "bool[4]", "integer_pow: operand must be a number");
        check(&Primitive::IntegerPow { y: -1 }, "i32[4]", "integers cannot be raised to negative powers");
    }

    #[test]
    fn select_n() {
        let s = Primitive::SelectN;
        check(&s, "bool[3] f32[3] f32[3]", "-> f32[3]");
        check(&s, "bool[] f32[3] f32[3]", "-> f32[3]");
        check(&s, "i32[3] f32[3] f32[3] f32[3]", "-> f32[3]");
        check(&s, "i32[] f32[3]", "-> f32[3]");
        check(&s, "f32[3] f32[3] f32[3]", "select_n: the predicate must be bool or i32, found f32[3]");
        check(&s, "bool[2] f32[3] f32[3]", "the predicate bool[2] must be a scalar or have the cases' shape");
        check(&s, "bool[3] f32[3] i32[3]", "case 1 is i32[3] but case 0 is f32[3]");
        check(&s, "bool[3] f32[3] f32[4]", "case 1 is f32[4] but case 0 is f32[3]");
        check(&s, "bool[3]", "select_n: expected at least one case");
        check(&s, "", "select_n: expected a predicate");
        check(&s, "bool[] f32[] f32[] f32[]", "a bool predicate selects between at most 2 cases");
    }

    #[test]
    fn clamp() {
        let c = Primitive::Clamp;
        check(&c, "f32[] f32[3] f32[]", "-> f32[3]");
        check(&c, "f32[3] f32[3] f32[]", "-> f32[3]");
        check(&c, "f32[2] f32[3] f32[]", "clamp: lo f32[2] must be a scalar or have the operand's shape f32[3]");
        check(&c, "f32[] f32[3] i32[]", "clamp: hi i32[] and operand f32[3] have different dtypes");
        check(&c, "f32[] f32[3]", "clamp: expected 3 operands, found 2");
    }

    #[test]
    fn conversions() {
        let convert = Primitive::ConvertElementType { new_dtype: DType::F32, weak_type: false };
        check(&convert, "bool[2,6]", "-> f32[2,6]");
        let rp = Primitive::ReducePrecision { exponent_bits: 8, mantissa_bits: 23 };
        check(&rp, "f32[5]", "-> f32[5]");
        check(&rp, "i32[5]", "reduce_precision: operand must be a float, found i32[5]");
        let rp0 = Primitive::ReducePrecision { exponent_bits: 0, mantissa_bits: 23 };
        check(&rp0, "f32[5]", "exponent_bits must be at least 1");
    }

    #[test]
    fn broadcast_in_dim() {
        let b = |shape: &[usize], dims: &[usize]| Primitive::BroadcastInDim {
            shape: shape.to_vec(),
            broadcast_dimensions: dims.to_vec(),
        };
        check(&b(&[2, 6], &[1]), "f32[6]", "-> f32[2,6]");
        check(&b(&[3], &[]), "f32[]", "-> f32[3]");
        check(&b(&[4, 3], &[0, 1]), "f32[1,3]", "-> f32[4,3]");
        check(&b(&[2, 6], &[0, 1]), "f32[6]", "operand f32[6] has rank 1 but broadcast_dimensions [0, 1] has 2");
        check(&b(&[2, 6], &[1, 0]), "f32[6,2]", "broadcast_dimensions [1, 0] must be strictly increasing");
        check(&b(&[2, 6], &[2]), "f32[6]", "broadcast dimension 2 is out of range for shape [2, 6]");
        check(
            &b(&[2, 6], &[0]),
            "f32[6]",
            "dimension 0 of f32[6] has size 6, which is neither 1 nor the target size 2",
        );
    }

    #[test]
    fn reshape_and_transpose() {
        let reshape = |s: &[usize]| Primitive::Reshape { new_sizes: s.to_vec() };
        check(&reshape(&[6]), "f32[3,2]", "-> f32[6]");
        check(&reshape(&[1, 1]), "f32[]", "-> f32[1,1]");
        check(
            &reshape(&[5]),
            "f32[3,2]",
            "reshape: cannot reshape f32[3,2] (6 elements) to new_sizes [5] (5 elements)",
        );
        let transpose = |p: &[usize]| Primitive::Transpose { permutation: p.to_vec() };
        check(&transpose(&[1, 0]), "f32[4,3]", "-> f32[3,4]");
        check(&transpose(&[2, 0, 1]), "f32[2,3,4]", "-> f32[4,2,3]");
        check(&transpose(&[0, 0]), "f32[4,3]", "transpose: permutation [0, 0] is not a permutation of the 2 axes");
        check(&transpose(&[0]), "f32[4,3]", "is not a permutation");
        check(&transpose(&[0, 2]), "f32[4,3]", "is not a permutation");
    }

    #[test]
    fn squeeze_and_expand_dims() {
        let squeeze = |d: &[usize]| Primitive::Squeeze { dimensions: d.to_vec() };
        check(&squeeze(&[0, 2]), "f32[1,3,1]", "-> f32[3]");
        check(&squeeze(&[1]), "f32[1,3,1]", "squeeze: dimension 1 of f32[1,3,1] has size 3, not 1");
        check(&squeeze(&[3]), "f32[1,3,1]", "out of range");
        check(&squeeze(&[0, 0]), "f32[1,3,1]", "are not distinct");
        let expand = |d: &[usize]| Primitive::ExpandDims { dimensions: d.to_vec() };
        check(&expand(&[0]), "f32[3]", "-> f32[1,3]");
        check(&expand(&[3, 0]), "f32[3,4]", "-> f32[1,3,4,1]");
        check(&expand(&[1]), "f32[3,4]", "-> f32[3,1,4]");
        check(&expand(&[1, 1]), "f32[3]", "expand_dims: dimensions [1, 1] are not distinct");
        check(&expand(&[2]), "f32[3]", "expand_dims: dimensions [2] must be positions in the output rank 2");
    }

    #[test]
    fn slice() {
        let s = |start: &[usize], limit: &[usize], strides: Option<&[usize]>| Primitive::Slice {
            start_indices: start.to_vec(),
            limit_indices: limit.to_vec(),
            strides: strides.map(<[usize]>::to_vec),
        };
        check(&s(&[1], &[4], None), "f32[6]", "-> f32[3]");
        check(&s(&[1, 0], &[6, 3], Some(&[2, 1])), "f32[6,3]", "-> f32[3,3]");
        check(&s(&[2], &[2], None), "f32[6]", "-> f32[0]");
        check(&s(&[1], &[7], None), "f32[6]", "slice: dimension 0: need start <= limit <= size, found start 1 limit 7");
        check(&s(&[4], &[3], None), "f32[6]", "found start 4 limit 3");
        check(&s(&[0], &[6], Some(&[0])), "f32[6]", "slice: stride 0 in dimension 0 must be at least 1");
        check(&s(&[0], &[6], None), "f32[6,2]", "need one entry per axis");
    }

    #[test]
    fn pad() {
        let p = |cfg: &[(i64, i64, i64)]| Primitive::Pad { padding_config: cfg.to_vec() };
        check(&p(&[(1, 2, 0)]), "f32[3] f32[]", "-> f32[6]");
        check(&p(&[(0, 0, 2)]), "f32[3] f32[]", "-> f32[7]");
        check(&p(&[(-1, 0, 1)]), "f32[3] f32[]", "-> f32[4]");
        check(&p(&[(1, 1, 5)]), "f32[0] f32[]", "-> f32[2]");
        check(&p(&[(1, 2, 0)]), "f32[3] i32[]", "pad: operand f32[3] and padding value i32[] have different dtypes");
        check(
            &p(&[(-2, -2, 0)]),
            "f32[3] f32[]",
            "pad: dimension 0 of f32[3] padded by (-2, -2, 0) has negative size -1",
        );
        check(&p(&[(0, 0, 0)]), "f32[3] f32[1]", "the padding value must be a scalar");
        check(&p(&[]), "f32[3] f32[]", "padding_config has 0 entries for f32[3]");
    }

    #[test]
    fn concatenate() {
        let c = |d: usize| Primitive::Concatenate { dimension: d };
        check(&c(1), "f32[2,3] f32[2,4]", "-> f32[2,7]");
        check(&c(0), "f32[2]", "-> f32[2]");
        check(&c(0), "", "concatenate: expected at least one operand");
        check(&c(0), "f32[2] i32[2]", "concatenate: operand 1 i32[2] and operand 0 f32[2] have different dtypes");
        check(&c(1), "f32[2,3] f32[3,4]", "operand 1 f32[3,4] and operand 0 f32[2,3] differ outside dimension 1");
        check(&c(2), "f32[2,3]", "dimension 2 is out of range for f32[2,3]");
    }

    #[test]
    fn dynamic_slice() {
        let ds = |s: &[usize]| Primitive::DynamicSlice { slice_sizes: s.to_vec() };
        check(&ds(&[2, 3]), "f32[4,3] i32[] i32[]", "-> f32[2,3]");
        check(&ds(&[2, 3]), "f32[4,3] f32[] i32[]", "dynamic_slice: start index 0 must be a scalar i32, found f32[]");
        check(&ds(&[2, 3]), "f32[4,3] i32[1] i32[]", "start index 0 must be a scalar i32, found i32[1]");
        check(&ds(&[2, 3]), "f32[4,3] i32[]", "1 start indices for f32[4,3]; expected one per axis");
        check(&ds(&[5, 3]), "f32[4,3] i32[] i32[]", "slice size 5 exceeds dimension 0 of f32[4,3]");
        check(&ds(&[2]), "f32[4,3] i32[] i32[]", "slice_sizes [2] must have one entry per axis");
    }

    #[test]
    fn dynamic_update_slice() {
        let dus = Primitive::DynamicUpdateSlice;
        check(&dus, "f32[4,3] f32[2,3] i32[] i32[]", "-> f32[4,3]");
        check(&dus, "f32[4,3] f32[5,3] i32[] i32[]", "update f32[5,3] is larger than operand f32[4,3] in dimension 0");
        check(&dus, "f32[4,3] i32[2,3] i32[] i32[]", "update i32[2,3] and operand f32[4,3] have different dtypes");
        check(&dus, "f32[4,3] f32[3] i32[] i32[]", "have different ranks");
        check(&dus, "f32[4,3] f32[2,3] i32[]", "1 start indices for f32[4,3]");
        check(&dus, "f32[4,3] f32[2,3] i32[] f32[]", "start index 1 must be a scalar i32, found f32[]");
        check(&dus, "f32[4,3]", "expected an operand, an update and start indices");
    }

    #[test]
    fn iota() {
        let iota = |d: usize| Primitive::Iota { dtype: DType::I32, shape: vec![2, 3], dimension: d };
        check(&iota(1), "", "-> i32[2,3]");
        check(&iota(2), "", "iota: dimension 2 is out of range for shape [2, 3]");
        check(&iota(0), "f32[]", "iota: expected 0 operands, found 1");
    }

    #[test]
    fn reductions() {
        let r = |op: ReduceOp, axes: &[usize]| Primitive::Reduce { op, axes: axes.to_vec() };
        check(&r(ReduceOp::Sum, &[0, 2]), "f32[2,3,4]", "-> f32[3]");
        check(&r(ReduceOp::Max, &[]), "f32[2]", "-> f32[2]");
        check(&r(ReduceOp::Min, &[0]), "bool[2]", "-> bool[]");
        check(&r(ReduceOp::Sum, &[2]), "f32[2,3]", "reduce_sum: axes [2] include axis 2, out of range for f32[2,3]");
        check(&r(ReduceOp::Max, &[1, 1]), "f32[2,3]", "reduce_max: axes [1, 1] are not distinct");
        check(&r(ReduceOp::Sum, &[0]), "bool[2]", "reduce_sum: operand must be a number");
    }

    #[test]
    fn argmax() {
        let argmax = |axes: &[usize], t: DType| Primitive::Argmax { axes: axes.to_vec(), index_dtype: t };
        check(&argmax(&[1], DType::I32), "f32[2,3]", "-> i32[2]");
        check(&argmax(&[0, 1], DType::I32), "f32[2,3]", "argmax: expects exactly one axis, found axes [0, 1]");
        check(&argmax(&[1], DType::F32), "f32[2,3]", "argmax: index_dtype must be int32, found float32");
        check(&argmax(&[2], DType::I32), "f32[2,3]", "argmax: axis 2 is out of range for f32[2,3]");
        check(&argmax(&[1], DType::I32), "f32[2,0]", "the reduced dimension 1 of f32[2,0] is empty");
    }

    fn dot(lc: &[usize], rc: &[usize], lb: &[usize], rb: &[usize]) -> Primitive {
        let dimension_numbers = DotDimensionNumbers {
            lhs_contracting: lc.to_vec(),
            rhs_contracting: rc.to_vec(),
            lhs_batch: lb.to_vec(),
            rhs_batch: rb.to_vec(),
        };
        Primitive::DotGeneral { dimension_numbers, preferred_element_type: Some(DType::F32) }
    }

    #[test]
    fn dot_general() {
        check(&dot(&[1], &[0], &[], &[]), "f32[3,4] f32[4,5]", "-> f32[3,5]");
        check(&dot(&[], &[], &[], &[]), "f32[7] f32[6]", "-> f32[7,6]");
        check(&dot(&[0], &[0], &[], &[]), "f32[7] f32[7,6]", "-> f32[6]");
        // Batch dims first, then the lhs's free dims, then the rhs's.
        check(&dot(&[2], &[1], &[0], &[0]), "f32[2,3,5] f32[2,5,4]", "-> f32[2,3,4]");
        check(&dot(&[1], &[2], &[2], &[0]), "f32[3,5,2] f32[2,4,5]", "-> f32[2,3,4]");
        let dn = DotDimensionNumbers::default();
        let no_preference = Primitive::DotGeneral { dimension_numbers: dn, preferred_element_type: None };
        check(&no_preference, "i32[2] i32[3]", "-> i32[2,3]");
        check(
            &dot(&[1], &[0], &[], &[]),
            "f32[3,4] f32[5,6]",
            "dot_general: contracting dimension sizes differ: lhs dim 1 has 4, rhs dim 0 has 5",
        );
        let batch = "batch dimension sizes differ: lhs dim 0 has 2, rhs dim 0 has 3";
        check(&dot(&[2], &[1], &[0], &[0]), "f32[2,3,5] f32[3,5,4]", batch);
        check(&dot(&[0], &[0], &[0], &[1]), "f32[3,3] f32[3,3]", "dot_general: lhs dimension 0 is used twice");
        check(&dot(&[2], &[0], &[], &[]), "f32[3,4] f32[4,5]", "lhs dimension 2 is out of range for f32[3,4]");
        check(&dot(&[1], &[], &[], &[]), "f32[3,4] f32[4,5]", "1 lhs contracting dimensions but 0 rhs");
        check(&dot(&[1], &[0], &[], &[]), "f32[3,4] i32[4,5]", "operand dtypes differ: f32[3,4] and i32[4,5]");
    }

    #[test]
    fn name_and_device_put() {
        check(&Primitive::Name { name: "a".into() }, "f32[5]", "-> f32[5]");
        let put = |devices: Vec<MemorySpace>| Primitive::DevicePut {
            copy_semantics: vec![CopySemantics::AlwaysCopy; devices.len()],
            devices,
        };
        check(&put(vec![MemorySpace::Host]), "f32[5]", "-> f32<host>[5]");
        check(&put(vec![MemorySpace::Device, MemorySpace::Host]), "f32<host>[5] i32[]", "-> f32[5] i32<host>[]");
        check(&put(vec![MemorySpace::Host]), "f32[5] f32[5]", "device_put: 2 operands for 1 devices");
    }

    const INNER: &str = "{ lambda ; a:f32[3] b:f32[]. let c:f32[3] = mul a b in (c, b) }";

    #[test]
    fn calls_match_their_inner_jaxpr() {
        let inner = jaxpr(INNER);
        let jit = Primitive::Jit { name: "f".into(), jaxpr: ClosedJaxpr::new(inner.clone()) };
        check(&jit, "f32[3] f32[]", "-> f32[3] f32[]");
        check(&jit, "f32[4] f32[]", "jit: operand 0 is f32[4] but the inner jaxpr's invar 0 is f32[3]");
        check(&jit, "f32[3]", "jit: 1 operands for an inner jaxpr with 2 invars");
        check(&jit, "f32<host>[3] f32[]", "operand 0 is f32<host>[3] but the inner jaxpr's invar 0 is f32[3]");

        let call_jaxpr = ClosedJaxpr::new(inner.clone());
        let (name, jvp) = ("f".to_string(), "jvp".to_string());
        let cj = Primitive::CustomJvpCall { name, call_jaxpr, jvp, num_consts: 0, symbolic_zeros: false };
        check(&cj, "f32[3] f32[]", "-> f32[3] f32[]");

        let remat = |jaxpr| Primitive::Remat2 { jaxpr, prevent_cse: true, differentiated: false, policy: None };
        check(&remat(inner.clone()), "f32[3] f32[]", "-> f32[3] f32[]");
        check(&remat(inner), "f32[3] i32[]", "remat2: operand 1 is i32[] but the inner jaxpr's invar 1 is f32[]");
        let with_consts = jaxpr("{ lambda a:f32[3] ; b:f32[3]. let c:f32[3] = mul a b in (c,) }");
        check(&remat(with_consts.clone()), "f32[3]", "remat2: the inner jaxpr has 1 constvars");

        // A closed jaxpr's consts are bound to its constvars; operands match the invars.
        let consts = vec![Array::F32(ndarray::ArrayD::zeros(vec![3]))];
        let closed = ClosedJaxpr { jaxpr: with_consts.clone(), consts };
        check(&Primitive::Jit { name: "g".into(), jaxpr: closed }, "f32[3]", "-> f32[3]");
        let unclosed = Primitive::Jit { name: "g".into(), jaxpr: ClosedJaxpr::new(with_consts) };
        check(&unclosed, "f32[3]", "jit: the closed jaxpr has 0 consts for 1 constvars");
    }

    #[test]
    fn malformed_inner_jaxprs_are_errors_not_panics() {
        let mut broken = (*jaxpr(INNER)).clone();
        broken.invars.push(Var(99));
        let jit = Primitive::Jit { name: "f".into(), jaxpr: ClosedJaxpr::new(Arc::new(broken)) };
        check(&jit, "f32[3] f32[]", "jit: the inner jaxpr's variable %99 is out of range");
    }

    /// Body: (const w, carry c, x slice) -> (carry c + w * x, y = sin x).
    const BODY: &str = "{ lambda ; w:f32[] c:f32[3] x:f32[3]. let
        d:f32[3] = mul w x
        e:f32[3] = add c d
        y:f32[3] = sin x
      in (e, y) }";

    fn scan(length: usize, body: &str) -> Primitive {
        let jaxpr = ClosedJaxpr::new(jaxpr(body));
        Primitive::Scan { jaxpr, length, reverse: false, num_consts: 1, num_carry: 1, unroll: 1 }
    }

    #[test]
    fn scan_stacks_ys_and_keeps_carries() {
        check(&scan(5, BODY), "f32[] f32[3] f32[5,3]", "-> f32[3] f32[5,3]");
        check(
            &scan(4, BODY),
            "f32[] f32[3] f32[5,3]",
            "scan: xs operand 0 is f32[5,3]; its leading dimension must be length=4",
        );
        check(
            &scan(5, BODY),
            "f32[] f32[4] f32[5,3]",
            "scan: operand 1 is f32[4] but the inner jaxpr's invar 1 is f32[3]",
        );
        check(&scan(5, BODY), "f32[] f32[3]", "scan: 2 operands for an inner jaxpr with 3 invars");
        check(&scan(5, BODY), "", "scan: num_consts=1 and num_carry=1 but only 0 operands");
        let bad_carry = "{ lambda ; w:f32[] c:f32[3] x:f32[3]. let
            d:f32[] = reduce_sum[axes=(0,) out_sharding=None] x
          in (d, x) }";
        check(
            &scan(5, bad_carry),
            "f32[] f32[3] f32[5,3]",
            "scan: carry 0 enters the body as f32[3] but leaves it as f32[]",
        );
    }
}
