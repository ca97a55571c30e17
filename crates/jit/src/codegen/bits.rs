//! Scalar code for real programs' other elementwise ops: the integer bit operations and
//! `rem` with XLA's out-of-range rules (no instruction traps), `not`, `is_finite`, `floor`,
//! `ceil`, both `round`s, same-width `bitcast_convert_type`, and calls of `remat-math`'s
//! special functions, which are the interpreter's own, so both backends agree bit for bit.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, InstBuilder, Value};
use remat_ir::{BinaryOp, DType, RoundingMethod, UnaryOp};

use super::{clif_type, Fx};
use crate::native::Import;

impl Fx<'_, '_> {
    /// The new unary ops in scalar code (`vectorizable` keeps them out of vector code).
    pub(super) fn unary_more(&mut self, op: UnaryOp, d: DType, x: Value) -> Value {
        match (op, d) {
            (UnaryOp::Copy, _) => x,
            (UnaryOp::Not, DType::Bool) => self.b.ins().bxor_imm_u(x, 1),
            (UnaryOp::Not, _) => self.b.ins().bnot(x),
            (UnaryOp::IsFinite, _) => {
                // |x| < inf is false for NaN and ±inf.
                let ax = self.b.ins().fabs(x);
                let inf = if d == DType::F64 {
                    self.b.ins().f64const(f64::INFINITY)
                } else {
                    self.b.ins().f32const(f32::INFINITY)
                };
                self.b.ins().fcmp(FloatCC::LessThan, ax, inf)
            }
            (UnaryOp::Floor, _) => self.b.ins().floor(x),
            (UnaryOp::Ceil, _) => self.b.ins().ceil(x),
            _ => {
                let code = UnaryOp::ALL.iter().position(|&o| o == op).unwrap_or(usize::MAX);
                let code = self.b.ins().iconst(types::I32, code as i64);
                let imp = if d == DType::F64 { Import::MathUnaryF64 } else { Import::MathUnaryF32 };
                self.call(imp, &[code, x]).expect("math functions return")
            }
        }
    }

    /// The new binary ops in scalar code.
    pub(super) fn binary_more(&mut self, op: BinaryOp, d: DType, x: Value, y: Value) -> Value {
        if d.is_float() {
            let code = BinaryOp::ALL.iter().position(|&o| o == op).unwrap_or(usize::MAX);
            let code = self.b.ins().iconst(types::I32, code as i64);
            let imp = if d == DType::F64 { Import::MathBinaryF64 } else { Import::MathBinaryF32 };
            return self.call(imp, &[code, x, y]).expect("math functions return");
        }
        let bits = i64::from(clif_type(d).bits());
        match op {
            BinaryOp::And => self.b.ins().band(x, y),
            BinaryOp::Or => self.b.ins().bor(x, y),
            BinaryOp::Xor => self.b.ins().bxor(x, y),
            BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical => {
                // Cranelift takes the amount modulo the width; XLA gives 0 at or past it.
                let r = if op == BinaryOp::ShiftLeft { self.b.ins().ishl(x, y) } else { self.b.ins().ushr(x, y) };
                let out = self.b.ins().icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, y, bits);
                let zero = self.b.ins().iconst(clif_type(d), 0);
                self.b.ins().select(out, zero, r)
            }
            BinaryOp::ShiftRightArithmetic => {
                // Past the width: the sign fill, a shift by width - 1.
                let max = self.b.ins().iconst(clif_type(d), bits - 1);
                let amount = self.b.ins().umin(y, max);
                self.b.ins().sshr(x, amount)
            }
            BinaryOp::Rem if d.is_unsigned() => {
                // `x rem 0 = x`; otherwise urem never traps.
                let zero = self.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
                let one = self.b.ins().iconst(clif_type(d), 1);
                let safe = self.b.ins().select(zero, one, y);
                let r = self.b.ins().urem(x, safe);
                self.b.ins().select(zero, x, r)
            }
            BinaryOp::Rem => {
                // `x rem 0 = x`, `MIN rem -1 = 0`: divide by 1 instead where srem would trap.
                let zero = self.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
                let m1 = self.b.ins().icmp_imm_s(IntCC::Equal, y, -1);
                let bad = self.b.ins().bor(zero, m1);
                let one = self.b.ins().iconst(clif_type(d), 1);
                let safe = self.b.ins().select(bad, one, y);
                let r = self.b.ins().srem(x, safe);
                // x rem 1 = 0 = x rem -1, so only y == 0 needs its own value.
                self.b.ins().select(zero, x, r)
            }
            BinaryOp::Add
            | BinaryOp::AddAny
            | BinaryOp::Sub
            | BinaryOp::Mul
            | BinaryOp::Div
            | BinaryOp::Pow
            | BinaryOp::Max
            | BinaryOp::Min
            | BinaryOp::Atan2
            | BinaryOp::Nextafter
            | BinaryOp::Polygamma
            | BinaryOp::Igamma
            | BinaryOp::Igammac
            | BinaryOp::IgammaGradA
            | BinaryOp::Zeta
            | BinaryOp::Mulhi => x,
        }
    }

    /// `round` to nearest, halves away from zero (0) or to even (1).
    pub(super) fn round(&mut self, method: RoundingMethod, d: DType, x: Value) -> Value {
        match method {
            RoundingMethod::ToNearestEven => self.b.ins().nearest(x),
            RoundingMethod::AwayFromZero => {
                // t = trunc(x); |x - t| >= 0.5 steps one away from zero (x - t is exact).
                let t = self.b.ins().trunc(x);
                let frac = self.b.ins().fsub(x, t);
                let af = self.b.ins().fabs(frac);
                let (half, one) = if d == DType::F64 {
                    (self.b.ins().f64const(0.5), self.b.ins().f64const(1.0))
                } else {
                    (self.b.ins().f32const(0.5), self.b.ins().f32const(1.0))
                };
                let step = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, af, half);
                let signed_one = self.b.ins().fcopysign(one, x);
                let away = self.b.ins().fadd(t, signed_one);
                self.b.ins().select(step, away, t)
            }
        }
    }

    /// `bitcast_convert_type` between dtypes of one width.
    pub(super) fn bitcast(&mut self, to: DType, x: Value) -> Value {
        self.b.ins().bitcast(clif_type(to), super::eval::little(), x)
    }
}
