//! The lowering's dtype rules: what 16-bit floats accumulate in, reduction identities of
//! every dtype, and dynamic indices of every integer dtype.
//!
//! A 16-bit float sum or product accumulates in `f32` and rounds once (XLA's CPU backend and
//! the interpreter); mixed operand dtypes of a product convert to the accumulation dtype.

use remat_ir::{Aval, BinaryOp, DType, DotDimensionNumbers, LitValue, ReduceOp};

use super::{Lowering, Val};
use crate::expr::Expr;
use crate::program::BufId;

impl Lowering {
    /// `reduce_*` of `x`; a 16-bit float sum through an f32 accumulator.
    pub(super) fn reduce_any(
        &mut self,
        op: ReduceOp,
        axes: &[usize],
        x: &Val,
        out: &Aval,
        target: Option<BufId>,
    ) -> Val {
        let d = x.aval.dtype;
        if !matches!(op, ReduceOp::Sum | ReduceOp::Prod) || !d.is_narrow_float() {
            return self.reduce(op, axes, x, out, target);
        }
        let wide = Val {
            expr: Expr::Convert { from: d, to: DType::F32, x: Box::new(x.expr.clone()) },
            aval: Aval::new(DType::F32, x.aval.shape.clone()),
        };
        let sum = self.reduce(op, axes, &wide, &Aval::new(DType::F32, out.shape.clone()), None);
        Val { expr: Expr::Convert { from: DType::F32, to: d, x: Box::new(sum.expr) }, aval: out.clone() }
    }

    /// `dot_general`: operands convert to the dtype the products accumulate in (the
    /// result's, or f32 for a 16-bit float result, which rounds once at the end).
    pub(super) fn dot_general(
        &mut self,
        lhs: &Val,
        rhs: &Val,
        dn: &DotDimensionNumbers,
        out: &Aval,
        target: Option<BufId>,
    ) -> Val {
        let compute = if out.dtype.is_narrow_float() { DType::F32 } else { out.dtype };
        let widen = |x: &Val| {
            if x.aval.dtype == compute {
                return x.clone();
            }
            let expr = Expr::Convert { from: x.aval.dtype, to: compute, x: Box::new(x.expr.clone()) };
            Val { expr, aval: Aval::new(compute, x.aval.shape.clone()) }
        };
        let (l, r) = (widen(lhs), widen(rhs));
        if compute == out.dtype {
            return self.dot(&l, &r, dn, out, target);
        }
        // The f32 product is a value of its own, converted afterwards. The buffer of a
        // transposing reader (`dot_dst`) waits for the 16-bit result and holds half its
        // bytes: the product must not be written there (it once was, past the buffer's end);
        // the transpose copies the converted result instead.
        self.dot_dst = None;
        let p = self.dot(&l, &r, dn, &Aval::new(compute, out.shape.clone()), None);
        Val { expr: Expr::Convert { from: compute, to: out.dtype, x: Box::new(p.expr) }, aval: out.clone() }
    }
}

/// The binary operation a reduction combines with (`max`/`min` with XLA's NaN rule).
pub(crate) fn reduce_binary(op: ReduceOp) -> BinaryOp {
    match op {
        ReduceOp::Sum => BinaryOp::Add,
        ReduceOp::Max => BinaryOp::Max,
        ReduceOp::Min => BinaryOp::Min,
        ReduceOp::Prod => BinaryOp::Mul,
        ReduceOp::And => BinaryOp::And,
        ReduceOp::Or => BinaryOp::Or,
        ReduceOp::Xor => BinaryOp::Xor,
    }
}

/// The identity of a reduction, for filling: 0 (`sum`, `or`, `xor`), 1 (`prod`), all ones
/// (`and`: -1, the maximum unsigned, `true`), the lowest value for `max` (`-inf`, `MIN`, 0
/// unsigned, `false`) and the highest for `min`. (Keys have no reductions; they get 0.)
pub(crate) fn reduce_identity(op: ReduceOp, dtype: DType) -> LitValue {
    let max = op == ReduceOp::Max;
    match (op, dtype) {
        // A key is one 8-byte word in registers.
        (_, DType::Key) => LitValue::I64(0),
        // Complex reductions are native steps, and `reduce_max` takes no complex.
        (_, DType::C64 | DType::C128) => LitValue::from_f64(dtype, 0.0),
        (ReduceOp::Sum | ReduceOp::Or | ReduceOp::Xor, _) => LitValue::from_f64(dtype, 0.0),
        (ReduceOp::Prod, _) => LitValue::from_f64(dtype, 1.0),
        (ReduceOp::And, DType::I8) => LitValue::I8(-1),
        (ReduceOp::And, DType::I16) => LitValue::I16(-1),
        (ReduceOp::And, DType::I32) => LitValue::I32(-1),
        (ReduceOp::And, DType::I64) => LitValue::I64(-1),
        (ReduceOp::And, DType::U8) => LitValue::U8(u8::MAX),
        (ReduceOp::And, DType::U32) => LitValue::U32(u32::MAX),
        // Floats have no `and` (the shape rule's).
        (ReduceOp::And, DType::Bool | DType::F32 | DType::F64 | DType::BF16 | DType::F16) => {
            LitValue::from_f64(dtype, 1.0)
        }
        (_, DType::F32 | DType::F64 | DType::BF16 | DType::F16) => {
            LitValue::from_f64(dtype, if max { f64::NEG_INFINITY } else { f64::INFINITY })
        }
        (_, DType::I8) => LitValue::I8(if max { i8::MIN } else { i8::MAX }),
        (_, DType::I16) => LitValue::I16(if max { i16::MIN } else { i16::MAX }),
        (_, DType::I32) => LitValue::I32(if max { i32::MIN } else { i32::MAX }),
        (_, DType::I64) => LitValue::I64(if max { i64::MIN } else { i64::MAX }),
        (_, DType::U8) => LitValue::U8(if max { 0 } else { u8::MAX }),
        (_, DType::U32) => LitValue::U32(if max { 0 } else { u32::MAX }),
        (_, DType::Bool) => LitValue::Bool(!max),
    }
}

/// A dynamic index of any integer dtype as an `i32` value that clamps the same way: an
/// index other than `i32` is clamped into `0..=max` in its own dtype first (the bound
/// saturated to what the dtype holds), which the `i32` value then keeps.
pub(super) fn index_i32(i: &Val, max: i64) -> Val {
    let d = i.aval.dtype;
    if d == DType::I32 {
        return i.clone();
    }
    let lit = |v: i64| match d {
        DType::I8 => LitValue::I8(v.min(i8::MAX as i64) as i8),
        DType::I16 => LitValue::I16(v.min(i16::MAX as i64) as i16),
        DType::U8 => LitValue::U8(v.min(u8::MAX as i64) as u8),
        DType::U32 => LitValue::U32(v.min(u32::MAX as i64) as u32),
        _ => LitValue::I64(v),
    };
    let clamped = Expr::Clamp(d, Box::new(Expr::Lit(lit(0))), Box::new(i.expr.clone()), Box::new(Expr::Lit(lit(max))));
    let expr = Expr::Convert { from: d, to: DType::I32, x: Box::new(clamped) };
    Val { expr, aval: Aval::new(DType::I32, i.aval.shape.clone()) }
}
