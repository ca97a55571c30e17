//! What the shape rules share: [`ShapeError`], the `bail!`/`ensure!` macros, and the
//! checks every family of rules uses (arity, dtypes, broadcasting, axes).
//!
//! The rules themselves sit with their primitives, each in its family module
//! (`primitive/elementwise.rs`, `structural.rs`, `reduction.rs`, `memory.rs`, `call.rs`,
//! ...), and [`shape_rule`](crate::shape_rule) (in `primitive/mod.rs`) dispatches to them;
//! this module is below all of them and knows no primitive.

use std::collections::HashSet;
use std::fmt;

use crate::types::{Aval, DType, Shape};

/// Why an equation's operands do not fit its primitive.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ShapeError {
    pub message: String,
}

impl ShapeError {
    /// `prim: message`.
    pub(crate) fn new(prim: &str, message: impl fmt::Display) -> ShapeError {
        ShapeError { message: format!("{prim}: {message}") }
    }
}

/// Returns a [`ShapeError`] for primitive `$prim` with a formatted message.
macro_rules! bail {
    ($prim:expr, $($fmt:tt)*) => {
        return Err($crate::shape::ShapeError::new($prim, format!($($fmt)*)))
    };
}

/// `bail!` unless `$cond` holds.
macro_rules! ensure {
    ($cond:expr, $prim:expr, $($fmt:tt)*) => {
        if !$cond {
            $crate::shape::bail!($prim, $($fmt)*);
        }
    };
}

pub(crate) use {bail, ensure};

/// One result of `dtype` and `shape`, in device memory.
pub(crate) fn device(dtype: DType, shape: Shape) -> Vec<Aval> {
    vec![Aval::new(dtype, shape)]
}

/// The operands as an array of exactly `N`, or an error naming the count.
pub(crate) fn arity<'a, const N: usize>(name: &str, in_avals: &'a [Aval]) -> Result<&'a [Aval; N], ShapeError> {
    <&[Aval; N]>::try_from(in_avals).map_err(|_| {
        let plural = if N == 1 { "" } else { "s" };
        ShapeError::new(name, format!("expected {N} operand{plural}, found {}", in_avals.len()))
    })
}

pub(crate) fn same_dtype(name: &str, x: &Aval, y: &Aval) -> Result<(), ShapeError> {
    ensure!(x.dtype == y.dtype, name, "operand dtypes differ: {x} and {y}");
    Ok(())
}

/// JAX's `broadcasting_shape_rule`: a rank-0 operand broadcasts against anything; other
/// operands have one rank, and in each dimension their sizes are equal or 1.
pub(crate) fn broadcast_shapes(name: &str, x: &Aval, y: &Aval) -> Result<Shape, ShapeError> {
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

/// Axes that must be distinct and within the operand's rank.
pub(crate) fn distinct_axes(name: &str, what: &str, axes: &[usize], x: &Aval) -> Result<(), ShapeError> {
    for &a in axes {
        ensure!(a < x.rank(), name, "{what} {axes:?} include axis {a}, out of range for {x}");
    }
    let set: HashSet<usize> = axes.iter().copied().collect();
    ensure!(set.len() == axes.len(), name, "{what} {axes:?} are not distinct");
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::array::Array;
    use crate::jaxpr::{ClosedJaxpr, Jaxpr, Var};
    use crate::parse::parse_jaxpr;
    use crate::primitive::{
        shape_rule, BinaryOp, CompareOp, CopySemantics, DotDimensionNumbers, Primitive, ReduceOp, UnaryOp,
    };
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
        let shape: Vec<usize> = dims.split(',').filter(|d| !d.is_empty()).map(|d| d.parse().unwrap()).collect();
        Aval::new(DType::from_short_name(dtype).expect("a dtype"), shape).with_memory_space(memory_space)
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
        check(&un(UnaryOp::Sin), "i32[3]", "sin: operand must be a float or complex, found i32[3]");
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
        check(&rp, "i32[5]", "reduce_precision: operand must be a float or complex, found i32[5]");
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
        let reshape = |s: &[usize]| Primitive::Reshape { new_sizes: s.to_vec(), dimensions: None };
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
        Primitive::DotGeneral { dimension_numbers, preferred_element_type: Some(DType::F32), precision: None }
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
        let no_preference =
            Primitive::DotGeneral { dimension_numbers: dn, preferred_element_type: None, precision: None };
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
        // Mixed operand dtypes need an accumulation type (the transpose of a bf16 product
        // multiplies an f32 cotangent by a bf16 operand); without one they are an error.
        check(&dot(&[1], &[0], &[], &[]), "f32[3,4] i32[4,5]", "-> f32[3,5]");
        let untyped = Primitive::DotGeneral {
            dimension_numbers: DotDimensionNumbers {
                lhs_contracting: vec![1],
                rhs_contracting: vec![0],
                lhs_batch: vec![],
                rhs_batch: vec![],
            },
            preferred_element_type: None,
            precision: None,
        };
        check(
            &untyped,
            "f32[3,4] i32[4,5]",
            "operand dtypes differ: f32[3,4] and i32[4,5] (without a preferred_element_type)",
        );
    }

    #[test]
    fn name_and_device_put() {
        check(&Primitive::Name { name: "a".into() }, "f32[5]", "-> f32[5]");
        let put = |devices: Vec<Option<MemorySpace>>| Primitive::DevicePut {
            copy_semantics: vec![CopySemantics::AlwaysCopy; devices.len()],
            devices,
        };
        let (host, device) = (Some(MemorySpace::Host), Some(MemorySpace::Device));
        check(&put(vec![host]), "f32[5]", "-> f32<host>[5]");
        check(&put(vec![device, host]), "f32<host>[5] i32[]", "-> f32[5] i32<host>[]");
        check(&put(vec![None, None]), "f32<host>[5] i32[]", "-> f32<host>[5] i32[]");
        check(&put(vec![host]), "f32[5] f32[5]", "device_put: 2 operands for 1 devices");
    }

    const INNER: &str = "{ lambda ; a:f32[3] b:f32[]. let c:f32[3] = mul a b in (c, b) }";

    #[test]
    fn calls_match_their_inner_jaxpr() {
        let inner = jaxpr(INNER);
        let jit =
            Primitive::Jit { name: "f".into(), jaxpr: ClosedJaxpr::new(inner.clone()), options: Default::default() };
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
        check(&Primitive::Jit { name: "g".into(), jaxpr: closed, options: Default::default() }, "f32[3]", "-> f32[3]");
        let unclosed =
            Primitive::Jit { name: "g".into(), jaxpr: ClosedJaxpr::new(with_consts), options: Default::default() };
        check(&unclosed, "f32[3]", "jit: the closed jaxpr has 0 consts for 1 constvars");
    }

    #[test]
    fn malformed_inner_jaxprs_are_errors_not_panics() {
        let mut broken = (*jaxpr(INNER)).clone();
        broken.invars.push(Var(99));
        let jit =
            Primitive::Jit { name: "f".into(), jaxpr: ClosedJaxpr::new(Arc::new(broken)), options: Default::default() };
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
