//! `exp` and `tanh` natively on `f32x4` (four lanes per instruction instead of
//! the two of the f64 path in `math`), for the vector loops; scalar tails keep the f64 path.
//!
//! `exp` is Cephes' `expf`: Cody–Waite reduction by ln 2, a degree-6 polynomial (about
//! 1 ulp; its inner degree-5 part by Estrin's scheme, as these loops are bound by the length
//! of their dependency chains, not by instruction count), and a two-step scale
//! `p * 2^k1 * 2^k2` whose first product is exact, so subnormal results and overflow round
//! once, as libm's do. `tanh` is `e / (e + 2)` with `e = expm1(2|x|)`, one formula for
//! every `x` as `expm1` has no cancellation near 0 (its polynomial fitted for this project),
//! `2|x|` capped at 20 (where `tanh` has long rounded to 1; one `minps`), and `x`'s sign bit
//! or'ed in at the end (which also gives `tanh(-0) = -0`): fewer operations and a shorter
//! dependency chain than the two-branch Cephes form it replaced (`exp` and a polynomial,
//! both computed for every lane). NaN passes through by a final select.
//! `tests/libm_sweep.rs` holds `exp` within 2 ulp of libm and `tanh` within 2 ulp of the
//! correctly rounded result (glibc's `tanhf` is itself up to 2 ulp off) over the whole f32
//! range (checked once with `REMAT_SWEEP_STRIDE=7`, 613 million inputs).
//! `logistic` stays on the f64 path: `e/(1 + e)` in f32 reached 3 ulp.

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use remat_ir::UnaryOp;

use super::eval::little;
use super::Fx;

use crate::native::vmath::{C1, C2, EXPM1_P, EXP_HI, EXP_LO, EXP_P, MAGIC, TANH_CAP};

impl Fx<'_, '_> {
    fn c4(&mut self, x: f32) -> Value {
        let c = self.b.ins().f32const(x);
        self.b.ins().splat(types::F32X4, c)
    }

    fn i4(&mut self, x: i32) -> Value {
        let c = self.b.ins().iconst(types::I32, x as i64);
        self.b.ins().splat(types::I32X4, c)
    }

    fn fma4(&mut self, a: Value, b: Value, c: Value) -> Value {
        if self.fma_available() {
            self.b.ins().fma(a, b, c)
        } else {
            let p = self.b.ins().fmul(a, b);
            self.b.ins().fadd(p, c)
        }
    }

    fn sel4(&mut self, mask: Value, a: Value, b: Value) -> Value {
        let m = self.b.ins().bitcast(types::F32X4, little(), mask);
        self.b.ins().bitselect(m, a, b)
    }

    /// Cody–Waite reduction `x = k ln 2 + r`, `|r| <= ln 2 / 2`: returns `k + MAGIC` (whose
    /// bits are MAGIC's plus k) and `r`, with `k ln 2` subtracted in two parts (`k * C1` exact).
    fn reduce_ln2(&mut self, x: Value) -> (Value, Value) {
        let (log2e, magic) = (self.c4(std::f32::consts::LOG2_E), self.c4(MAGIC));
        let kb = self.fma4(x, log2e, magic);
        let kf = self.b.ins().fsub(kb, magic);
        let nkf = self.b.ins().fneg(kf);
        let c1 = self.c4(C1);
        let r = self.fma4(nkf, c1, x);
        let c2 = self.c4(C2);
        (kb, self.fma4(nkf, c2, r))
    }

    /// e^x on f32x4, NaN excepted (callers select it back). The result is scaled by 2^k in
    /// two steps, which subnormal results need.
    fn exp4(&mut self, x: Value) -> Value {
        let (lo, hi) = (self.c4(EXP_LO), self.c4(EXP_HI));
        let below = self.b.ins().fcmp(FloatCC::LessThan, x, lo);
        let x = self.sel4(below, lo, x);
        let above = self.b.ins().fcmp(FloatCC::GreaterThan, x, hi);
        let x = self.sel4(above, hi, x);
        let (kb, r) = self.reduce_ln2(x);
        // The degree-5 polynomial by Estrin's scheme (three pairs, then r^2 and r^4): half
        // the dependent steps of Horner's, which this loop's speed is bound by.
        let r2 = self.b.ins().fmul(r, r);
        let r4 = self.b.ins().fmul(r2, r2);
        let pair = |fx: &mut Self, hi: f32, lo: f32| {
            let (h, l) = (fx.c4(hi), fx.c4(lo));
            fx.fma4(h, r, l)
        };
        let a = pair(self, EXP_P[0], EXP_P[1]);
        let b = pair(self, EXP_P[2], EXP_P[3]);
        let c = pair(self, EXP_P[4], EXP_P[5]);
        let bc = self.fma4(b, r2, c);
        let p = self.fma4(a, r4, bc);
        let one = self.c4(1.0);
        let t = self.b.ins().fadd(r, one);
        let p = self.fma4(p, r2, t);
        let kbits = self.b.ins().bitcast(types::I32X4, little(), kb);
        let mbits = self.i4(MAGIC.to_bits() as i32);
        let k = self.b.ins().isub(kbits, mbits);
        let bias = self.i4(127);
        // 2^k as 2^k1 * 2^k2 with k1 = k >> 1: both factors are normal for k in [-151, 129].
        let k1 = self.b.ins().sshr_imm_s(k, 1);
        let k2 = self.b.ins().isub(k, k1);
        let e1 = self.b.ins().iadd(k1, bias);
        let e1 = self.b.ins().ishl_imm_s(e1, 23);
        let e2 = self.b.ins().iadd(k2, bias);
        let e2 = self.b.ins().ishl_imm_s(e2, 23);
        let s1 = self.b.ins().bitcast(types::F32X4, little(), e1);
        let s2 = self.b.ins().bitcast(types::F32X4, little(), e2);
        let p = self.b.ins().fmul(p, s1);
        self.b.ins().fmul(p, s2)
    }

    /// tanh on f32x4, NaN excepted (the caller selects it back): `e / (e + 2)` with
    /// `e = expm1(2|x|)`, and `x`'s sign bit or'ed in (tanh(|x|) >= 0, +0 for x = ±0).
    ///
    /// `expm1(y) = 2^k expm1(r) + (2^k - 1)` with `y = k ln 2 + r`, `|r| <= ln 2 / 2`, and
    /// `expm1(r) = r + r^2 (1/2 + r P(r))`: no cancellation anywhere, so small `x` needs no
    /// second formula (for `k = 0` the sum is `expm1(r)` itself). `2|x|` is capped at 20,
    /// where tanh has long rounded to 1; up to there `2^k` is one exponent add and
    /// `2^k - 1` is exact for the `k <= 24` that matter.
    fn tanh4(&mut self, x: Value) -> Value {
        let sign_bit = self.i4(i32::MIN);
        let sign_bit = self.b.ins().bitcast(types::F32X4, little(), sign_bit);
        let sign = self.b.ins().band(x, sign_bit);
        let ax = self.b.ins().fabs(x);
        let y = self.b.ins().fadd(ax, ax);
        let cap = self.c4(TANH_CAP);
        let below = self.b.ins().fcmp(FloatCC::LessThan, y, cap);
        let y = self.sel4(below, y, cap); // one `minps`
        let (kb, r) = self.reduce_ln2(y);
        // P(r) by Estrin's scheme over r^2, which expm1's last step needs anyway.
        let r2 = self.b.ins().fmul(r, r);
        let (p0, p1, p2, p3) = (self.c4(EXPM1_P[0]), self.c4(EXPM1_P[1]), self.c4(EXPM1_P[2]), self.c4(EXPM1_P[3]));
        let lo = self.fma4(p1, r, p0);
        let hi = self.fma4(p3, r, p2);
        let p = self.fma4(hi, r2, lo);
        let half = self.c4(0.5);
        let h = self.fma4(p, r, half);
        let em = self.fma4(h, r2, r);
        // 2^k: kb's bits are MAGIC's plus k, and MAGIC's bits shifted left by 23 are 0 mod
        // 2^32, so (bits(kb) + 127) << 23 is k + 127 in the exponent field.
        let kbits = self.b.ins().bitcast(types::I32X4, little(), kb);
        let bias = self.i4(127);
        let e = self.b.ins().iadd(kbits, bias);
        let e = self.b.ins().ishl_imm_s(e, 23);
        let scale = self.b.ins().bitcast(types::F32X4, little(), e);
        let one = self.c4(1.0);
        let scale_m1 = self.b.ins().fsub(scale, one);
        let e = self.fma4(scale, em, scale_m1);
        // e / (e + 2): the rounding of e + 2 (up to 2^-24 relative) is most of the error,
        // which stays within 2 ulp of the true tanh. Compensating it (one FMA remainder and
        // the exact error of the sum) brings the rare 2-ulp results down to 1 but lengthens
        // the dependency chain these loops are bound by: mlp_small's step 86.8 -> 92.9 us.
        let two = self.c4(2.0);
        let den = self.b.ins().fadd(e, two);
        let t = self.b.ins().fdiv(e, den);
        self.b.ins().bor(t, sign)
    }

    /// `exp` or `tanh` of an f32x4 vector, if this module implements it.
    pub(super) fn math_f32x4(&mut self, op: UnaryOp, x: Value) -> Option<Value> {
        let r = match op {
            UnaryOp::Exp => self.exp4(x),
            UnaryOp::Tanh => self.tanh4(x),
            _ => return None,
        };
        let nan = self.b.ins().fcmp(FloatCC::Unordered, x, x);
        Some(self.sel4(nan, x, r))
    }
}
