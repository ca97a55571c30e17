//! Integer arithmetic of every width and signedness, in scalar code, as XLA defines it.
//!
//! `+`, `-`, `*`, `neg` and `abs` wrap (`abs(MIN) = MIN`); division truncates, and `x / 0`
//! is all ones (`-1` signed, the maximum unsigned) while `MIN / -1 = MIN`, so no
//! instruction traps. `max`, `min`, `sign` and division read the sign only for `i8` ..
//! `i64`; `u8` and `u32` use the unsigned instructions on the same registers.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value};
use remat_ir::{BinaryOp, DType, UnaryOp};

use super::convert::{int_range, is_signed};
use super::{clif_type, Fx};

impl Fx<'_, '_> {
    pub(super) fn int_unary(&mut self, op: UnaryOp, d: DType, x: Value) -> Value {
        let ty = clif_type(d);
        let signed = is_signed(d);
        match op {
            UnaryOp::Neg => self.b.ins().ineg(x),
            UnaryOp::Sign if signed => {
                let one = self.int_const(ty, 1);
                let m1 = self.int_const(ty, -1);
                let t = self.b.ins().smin(x, one);
                self.b.ins().smax(t, m1)
            }
            UnaryOp::Sign => {
                let one = self.int_const(ty, 1);
                self.b.ins().umin(x, one)
            }
            UnaryOp::Abs if signed => {
                // `x < 0 ? -x : x`, wrapping (`iabs` is not defined on every width).
                let n = self.b.ins().ineg(x);
                let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, x, 0);
                self.b.ins().select(neg, n, x)
            }
            UnaryOp::Abs => x,
            UnaryOp::Square => self.b.ins().imul(x, x),
            // Transcendentals are defined on floats only (the verifier's rule).
            UnaryOp::StopGradient
            | UnaryOp::Exp
            | UnaryOp::Log
            | UnaryOp::Log1p
            | UnaryOp::Expm1
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Tan
            | UnaryOp::Tanh
            | UnaryOp::Logistic
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt => x,
            UnaryOp::Not | UnaryOp::Copy => self.unary_more(op, d, x),
            UnaryOp::PopulationCount | UnaryOp::Clz => {
                // On at least 32 bits (a narrower integer zero-extended, `clz` less the
                // extension's zeros), the count then narrowed to the operand's width.
                let bits = ty.bits();
                let wide_ty = if bits < 32 { cranelift_codegen::ir::types::I32 } else { ty };
                let wide = if bits < 32 { self.b.ins().uextend(wide_ty, x) } else { x };
                let r = if op == UnaryOp::PopulationCount {
                    self.b.ins().popcnt(wide)
                } else {
                    let c = self.b.ins().clz(wide);
                    self.b.ins().iadd_imm_s(c, -i64::from(wide_ty.bits() - bits))
                };
                if bits < 32 {
                    self.b.ins().ireduce(ty, r)
                } else {
                    r
                }
            }
            // Float-only ops (the verifier's rule).
            UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::IsFinite
            | UnaryOp::Cbrt
            | UnaryOp::Exp2
            | UnaryOp::Asin
            | UnaryOp::Acos
            | UnaryOp::Atan
            | UnaryOp::Sinh
            | UnaryOp::Cosh
            | UnaryOp::Asinh
            | UnaryOp::Acosh
            | UnaryOp::Atanh
            | UnaryOp::Erf
            | UnaryOp::Erfc
            | UnaryOp::ErfInv
            | UnaryOp::Lgamma
            | UnaryOp::Digamma
            | UnaryOp::BesselI0e
            | UnaryOp::BesselI1e => x,
        }
    }

    pub(super) fn int_binary(&mut self, op: BinaryOp, d: DType, x: Value, y: Value) -> Value {
        let signed = is_signed(d);
        match op {
            BinaryOp::Add | BinaryOp::AddAny => self.b.ins().iadd(x, y),
            BinaryOp::Sub => self.b.ins().isub(x, y),
            BinaryOp::Mul => self.b.ins().imul(x, y),
            BinaryOp::Div | BinaryOp::Pow => self.int_div(d, x, y),
            BinaryOp::Max if signed => self.b.ins().smax(x, y),
            BinaryOp::Max => self.b.ins().umax(x, y),
            BinaryOp::Min if signed => self.b.ins().smin(x, y),
            BinaryOp::Min => self.b.ins().umin(x, y),
            BinaryOp::Rem
            | BinaryOp::And
            | BinaryOp::Or
            | BinaryOp::Xor
            | BinaryOp::ShiftLeft
            | BinaryOp::ShiftRightLogical
            | BinaryOp::ShiftRightArithmetic => self.binary_more(op, d, x, y),
            BinaryOp::Mulhi => {
                // The double-width product: narrower integers in 64 bits, 64-bit ones by
                // the high-half instructions.
                let ty = clif_type(d);
                let bits = ty.bits();
                if bits == 64 {
                    return if signed { self.b.ins().smulhi(x, y) } else { self.b.ins().umulhi(x, y) };
                }
                let i64t = cranelift_codegen::ir::types::I64;
                let (wx, wy) = if signed {
                    (self.b.ins().sextend(i64t, x), self.b.ins().sextend(i64t, y))
                } else {
                    (self.b.ins().uextend(i64t, x), self.b.ins().uextend(i64t, y))
                };
                let p = self.b.ins().imul(wx, wy);
                let h = self.b.ins().sshr_imm_s(p, i64::from(bits));
                self.b.ins().ireduce(ty, h)
            }
            // Float-only ops (the verifier's rule).
            BinaryOp::Atan2
            | BinaryOp::Nextafter
            | BinaryOp::Polygamma
            | BinaryOp::Igamma
            | BinaryOp::Igammac
            | BinaryOp::IgammaGradA
            | BinaryOp::Zeta => x,
        }
    }

    /// XLA's integer division: truncating, `x / 0` all ones, `MIN / -1 = MIN`.
    pub(super) fn int_div(&mut self, d: DType, x: Value, y: Value) -> Value {
        let ty = clif_type(d);
        let zero = self.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
        let one = self.int_const(ty, 1);
        let all_ones = self.int_const(ty, -1);
        let q = if is_signed(d) {
            let min = int_range(d).0;
            let xmin = self.b.ins().icmp_imm_s(IntCC::Equal, x, min);
            let ym1 = self.b.ins().icmp_imm_s(IntCC::Equal, y, -1);
            let overflow = self.b.ins().band(xmin, ym1);
            let bad = self.b.ins().bor(zero, overflow);
            // `MIN / 1 = MIN`, the result of `MIN / -1`.
            let safe = self.b.ins().select(bad, one, y);
            self.b.ins().sdiv(x, safe)
        } else {
            let safe = self.b.ins().select(zero, one, y);
            self.b.ins().udiv(x, safe)
        };
        self.b.ins().select(zero, all_ones, q)
    }
}
