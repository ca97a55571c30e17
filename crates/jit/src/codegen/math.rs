//! Inline f32 transcendentals: `exp`, `log`, `log1p`, `expm1`, `sin`, `cos`, `tan`, `tanh`,
//! `logistic` and `pow`, on `f32` scalars or `f32x4` vectors.
//!
//! Each f32 lane is widened to f64 (two `f64x2` halves of a vector), the function is
//! computed there to about 1e-14 relative error with classic range reductions and
//! polynomials, and the result is rounded once to f32. That keeps every result within
//! 1 ulp of the correctly rounded value over the whole f32 range, and makes the edges
//! fall out of f64 arithmetic: f32 overflow and underflow (including subnormal results)
//! happen in the final rounding (which FTZ flushes, as XLA's), and an f32 subnormal input
//! widens to 0 (DAZ), as XLA's code reads it; `math_f32` returns the operand itself where
//! XLA's code does. NaN, the infinities and -0.0 follow C99/libm, by explicit selects where
//! the formulas would not.
//! `sin`/`cos`/`tan` of |x| >= 2^18 (where two-part Cody-Waite reduction is not exact
//! enough) call the platform's libm for the vector, on a branch taken only for such inputs.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, ConstantData, InstBuilder, Type, Value};
use remat_ir::UnaryOp;

use super::eval::little;
use super::Fx;
use crate::native::vmath::TANH_IDENTITY_BELOW;
use crate::native::Import;

const MAGIC: f64 = 6755399441055744.0; // 1.5 * 2^52: adding it rounds to an integer
const LOG2E: f64 = std::f64::consts::LOG2_E;
const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000); // 32 significant bits: k * LN2_HI is exact
const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
const PIO2_1: f64 = f64::from_bits(0x3FF9_21FB_5440_0000); // 33 significant bits: n * PIO2_1 is exact
const PIO2_1T: f64 = f64::from_bits(0x3DD0_B461_1A62_6331);
const BIG_TRIG: f32 = 262144.0; // 2^18
/// The NaN an invalid operation makes on x86 (`0xFFF8...`, negative, "the default NaN"):
/// what glibc's `log`/`pow`, and XLA on x86 CPU, return for `log(-1)` or `pow(-1, 0.5)`.
/// The inline functions materialise this one (its f32 rounding is `0xFFC00000`), so that
/// a NaN's bits, visible through `bitcast_convert_type`, are the interpreter's.
const DEFAULT_NAN: f64 = f64::from_bits(0xFFF8_0000_0000_0000);

// Polynomial lengths, chosen for a relative error below 1e-10 before the final rounding to
// f32 (which then stays within 0.51 ulp of the correctly rounded result):
// e^r on |r| <= 0.35: Taylor to r^10, truncation 0.35^11/11! < 1e-12;
// ln m = 2 atanh(s) on s^2 <= 0.0295: terms to s^13/13, truncation 0.0295^7/15 < 1e-11;
// sin/cos on |r| <= pi/4: to r^13 and r^12, truncation 0.79^15/15! < 2e-14.
const EXP_DEGREE: u32 = 10;
const LOG_TERMS: u32 = 6;
const SIN_TERMS: u32 = 6;

/// Lane types of one computation: `f64`/`i64` scalars or `f64x2`/`i64x2` vectors.
#[derive(Clone, Copy)]
struct Lanes {
    f: Type,
    i: Type,
}

impl Fx<'_, '_> {
    /// A vector constant straight from the constant pool (one load that the backend can
    /// fold into its user), instead of a scalar constant and a splat.
    fn vconst_bits(&mut self, ty: Type, bits: u64) -> Value {
        let bytes: Vec<u8> = bits.to_le_bytes().iter().chain(bits.to_le_bytes().iter()).copied().collect();
        let c = self.b.func.dfg.constants.insert(ConstantData::from(bytes));
        self.b.ins().vconst(ty, c)
    }

    fn fc(&mut self, l: Lanes, x: f64) -> Value {
        if l.f.is_vector() {
            self.vconst_bits(l.f, x.to_bits())
        } else {
            self.b.ins().f64const(x)
        }
    }

    fn ic(&mut self, l: Lanes, x: i64) -> Value {
        if l.i.is_vector() {
            self.vconst_bits(l.i, x as u64)
        } else {
            self.b.ins().iconst(types::I64, x)
        }
    }

    fn bits(&mut self, l: Lanes, x: Value) -> Value {
        self.b.ins().bitcast(l.i, little(), x)
    }

    fn of_bits(&mut self, l: Lanes, x: Value) -> Value {
        self.b.ins().bitcast(l.f, little(), x)
    }

    /// `a * b + c`, fused where the ISA has FMA.
    fn mul_add(&mut self, a: Value, b: Value, c: Value) -> Value {
        if self.fma_available() {
            self.b.ins().fma(a, b, c)
        } else {
            let p = self.b.ins().fmul(a, b);
            self.b.ins().fadd(p, c)
        }
    }

    /// Horner's rule: `coeffs[0] * x^(n-1) + ... + coeffs[n-1]`.
    fn horner(&mut self, l: Lanes, x: Value, coeffs: &[f64]) -> Value {
        let mut acc = self.fc(l, coeffs[0]);
        for &c in &coeffs[1..] {
            let cv = self.fc(l, c);
            acc = self.mul_add(acc, x, cv);
        }
        acc
    }

    /// The same polynomial by Estrin's scheme: pairs, then pairs of pairs, so the
    /// dependency chain is logarithmic in the degree instead of linear (the loops are
    /// latency-bound otherwise). `coeffs` run from the highest power down, as for `horner`.
    fn estrin(&mut self, l: Lanes, x: Value, coeffs: &[f64]) -> Value {
        let mut terms: Vec<Value> = Vec::new();
        let low_first: Vec<f64> = coeffs.iter().rev().copied().collect();
        for pair in low_first.chunks(2) {
            let c0 = self.fc(l, pair[0]);
            terms.push(match pair.get(1) {
                Some(&c1) => {
                    let c1 = self.fc(l, c1);
                    self.mul_add(c1, x, c0)
                }
                None => c0,
            });
        }
        let mut power = self.b.ins().fmul(x, x);
        while terms.len() > 1 {
            let mut next = Vec::with_capacity(terms.len().div_ceil(2));
            for pair in terms.chunks(2) {
                next.push(match pair.get(1) {
                    Some(&hi) => self.mul_add(hi, power, pair[0]),
                    None => pair[0],
                });
            }
            terms = next;
            if terms.len() > 1 {
                power = self.b.ins().fmul(power, power);
            }
        }
        terms[0]
    }

    fn fcmp_l(&mut self, cc: FloatCC, a: Value, b: Value) -> Value {
        self.b.ins().fcmp(cc, a, b)
    }

    /// `sel` for lane values: masks from `fcmp`/`icmp` of the same lane width.
    fn lsel(&mut self, mask: Value, a: Value, b: Value) -> Value {
        let ty = self.b.func.dfg.value_type(a);
        if !ty.is_vector() {
            return self.b.ins().select(mask, a, b);
        }
        let mty = self.b.func.dfg.value_type(mask);
        let m = if mty == ty { mask } else { self.b.ins().bitcast(ty, little(), mask) };
        self.b.ins().bitselect(m, a, b)
    }

    /// `x` clamped into `[lo, hi]`; NaN becomes a bound, so callers restore NaN themselves.
    /// (Compare-and-select lowers to `maxpd`/`minpd`; `fmax`/`fmin` to ~8 instructions.)
    fn clamp_l(&mut self, l: Lanes, x: Value, lo: f64, hi: f64) -> Value {
        let lo = self.fc(l, lo);
        let hi = self.fc(l, hi);
        let below = self.fcmp_l(FloatCC::LessThan, x, lo);
        let t = self.lsel(below, lo, x);
        let above = self.fcmp_l(FloatCC::GreaterThan, t, hi);
        self.lsel(above, hi, t)
    }

    /// e^x for x in [-200, 200] (or NaN).
    fn exp_core(&mut self, l: Lanes, x: Value) -> Value {
        let (log2e, magic) = (self.fc(l, LOG2E), self.fc(l, MAGIC));
        let kb = self.mul_add(x, log2e, magic);
        let kf = self.b.ins().fsub(kb, magic);
        let (hi, lo) = (self.fc(l, LN2_HI), self.fc(l, LN2_LO));
        let t = self.b.ins().fmul(kf, hi);
        let r = self.b.ins().fsub(x, t);
        let t = self.b.ins().fmul(kf, lo);
        let r = self.b.ins().fsub(r, t);
        let coeffs: Vec<f64> = (0..=EXP_DEGREE).rev().map(|n| 1.0 / factorial(n)).collect();
        let p = self.estrin(l, r, &coeffs);
        let kbits = self.bits(l, kb);
        let mbits = self.ic(l, MAGIC.to_bits() as i64);
        let k = self.b.ins().isub(kbits, mbits);
        let k = {
            let c = self.ic(l, 1023);
            self.b.ins().iadd(k, c)
        };
        let sbits = self.b.ins().ishl_imm_s(k, 52);
        let scale = self.of_bits(l, sbits);
        self.b.ins().fmul(p, scale)
    }

    /// ln x for every x (NaN, negative, zero and infinity as libm).
    fn log_core(&mut self, l: Lanes, x: Value) -> Value {
        let i = self.bits(l, x);
        let c = self.ic(l, 0x3FE6_A09E_667F_3BCD);
        let t = self.b.ins().isub(i, c);
        let e = self.b.ins().sshr_imm_s(t, 52);
        let e_sh = self.b.ins().ishl_imm_s(e, 52);
        let mb = self.b.ins().isub(i, e_sh);
        let m = self.of_bits(l, mb);
        let one = self.fc(l, 1.0);
        let num = self.b.ins().fsub(m, one);
        let den = self.b.ins().fadd(m, one);
        let s = self.b.ins().fdiv(num, den);
        let z = self.b.ins().fmul(s, s);
        let coeffs: Vec<f64> = (0..=LOG_TERMS).rev().map(|k| 1.0 / (2 * k + 1) as f64).collect();
        let p = self.estrin(l, z, &coeffs);
        let s2 = self.b.ins().fadd(s, s);
        let lm = self.b.ins().fmul(s2, p);
        let magic_bits = self.ic(l, MAGIC.to_bits() as i64);
        let eb = self.b.ins().iadd(magic_bits, e);
        let ef = self.of_bits(l, eb);
        let magic = self.fc(l, MAGIC);
        let ef = self.b.ins().fsub(ef, magic);
        let (hi, lo) = (self.fc(l, LN2_HI), self.fc(l, LN2_LO));
        let a = self.mul_add(ef, lo, lm);
        let r = self.mul_add(ef, hi, a);
        // Specials: ln 0 = -inf, ln(x < 0) = NaN, ln inf = inf, ln NaN = NaN.
        let zero = self.fc(l, 0.0);
        let inf = self.fc(l, f64::INFINITY);
        let is_zero = self.fcmp_l(FloatCC::Equal, x, zero);
        let neg = self.fcmp_l(FloatCC::LessThan, x, zero);
        let is_inf = self.fcmp_l(FloatCC::Equal, x, inf);
        let nan = self.fc(l, DEFAULT_NAN);
        let minf = self.fc(l, f64::NEG_INFINITY);
        let r = self.lsel(is_inf, inf, r);
        let r = self.lsel(neg, nan, r);
        let r = self.lsel(is_zero, minf, r);
        let xnan = self.fcmp_l(FloatCC::Unordered, x, x);
        self.lsel(xnan, x, r)
    }

    /// e^x - 1, accurate for small |x| (x already clamped or NaN).
    fn expm1_core(&mut self, l: Lanes, x: Value) -> Value {
        let e = self.exp_core(l, x);
        let one = self.fc(l, 1.0);
        let big = self.b.ins().fsub(e, one);
        // |x| < 1e-5: x + x^2/2 + x^3/6 is exact to f64 precision.
        let coeffs = [1.0 / 6.0, 0.5, 1.0];
        let p = self.horner(l, x, &coeffs);
        let small_v = self.b.ins().fmul(p, x);
        let ax = self.b.ins().fabs(x);
        let lim = self.fc(l, 1e-5);
        let small = self.fcmp_l(FloatCC::LessThan, ax, lim);
        self.lsel(small, small_v, big)
    }

    /// sin and cos of a reduced argument |r| <= pi/4 (Taylor series to r^15 and r^16).
    fn sincos_poly(&mut self, l: Lanes, r: Value) -> (Value, Value) {
        let z = self.b.ins().fmul(r, r);
        let sc: Vec<f64> = (0..=SIN_TERMS).rev().map(|k| sign(k) / factorial(2 * k + 1)).collect();
        let ps = self.estrin(l, z, &sc);
        let s = self.b.ins().fmul(ps, r);
        let cc: Vec<f64> = (0..=SIN_TERMS + 1).rev().map(|k| sign(k) / factorial(2 * k)).collect();
        let c = self.estrin(l, z, &cc);
        (s, c)
    }

    fn trig_lanes(&mut self, l: Lanes, op: UnaryOp, x: Value) -> Value {
        let (tpi, magic) = (self.fc(l, std::f64::consts::FRAC_2_PI), self.fc(l, MAGIC));
        let nb = self.mul_add(x, tpi, magic);
        let nf = self.b.ins().fsub(nb, magic);
        let (p1, p1t) = (self.fc(l, PIO2_1), self.fc(l, PIO2_1T));
        let t = self.b.ins().fmul(nf, p1);
        let r = self.b.ins().fsub(x, t);
        let t = self.b.ins().fmul(nf, p1t);
        let r = self.b.ins().fsub(r, t);
        let (s, c) = self.sincos_poly(l, r);
        let nbits = self.bits(l, nb);
        let mbits = self.ic(l, MAGIC.to_bits() as i64);
        let q = self.b.ins().isub(nbits, mbits);
        let zero_i = self.ic(l, 0);
        let q1 = {
            let c = self.ic(l, 1);
            self.b.ins().band(q, c)
        };
        let swap = self.b.ins().icmp(IntCC::NotEqual, q1, zero_i);
        match op {
            UnaryOp::Tan => {
                let t_even = self.b.ins().fdiv(s, c);
                let cs = self.b.ins().fdiv(c, s);
                let t_odd = self.b.ins().fneg(cs);
                self.lsel(swap, t_odd, t_even)
            }
            UnaryOp::Cos => {
                let v = self.lsel(swap, s, c);
                let q1p = {
                    let c = self.ic(l, 1);
                    self.b.ins().iadd(q, c)
                };
                let q2 = {
                    let c = self.ic(l, 2);
                    self.b.ins().band(q1p, c)
                };
                let neg = self.b.ins().icmp(IntCC::NotEqual, q2, zero_i);
                let nv = self.b.ins().fneg(v);
                self.lsel(neg, nv, v)
            }
            _ => {
                let v = self.lsel(swap, c, s);
                let q2 = {
                    let c = self.ic(l, 2);
                    self.b.ins().band(q, c)
                };
                let neg = self.b.ins().icmp(IntCC::NotEqual, q2, zero_i);
                let nv = self.b.ins().fneg(v);
                self.lsel(neg, nv, v)
            }
        }
    }

    /// One function on f64 lanes holding widened f32 values.
    fn unary_lanes(&mut self, l: Lanes, op: UnaryOp, x: Value) -> Value {
        let r = match op {
            UnaryOp::Exp => {
                let t = self.clamp_l(l, x, -200.0, 200.0);
                self.exp_core(l, t)
            }
            UnaryOp::Log => self.log_core(l, x),
            UnaryOp::Log1p => {
                let one = self.fc(l, 1.0);
                let u = self.b.ins().fadd(one, x);
                let big = self.log_core(l, u);
                let coeffs = [1.0 / 3.0, -0.5, 1.0];
                let p = self.horner(l, x, &coeffs);
                let small_v = self.b.ins().fmul(p, x);
                let ax = self.b.ins().fabs(x);
                let lim = self.fc(l, 1e-5);
                let small = self.fcmp_l(FloatCC::LessThan, ax, lim);
                self.lsel(small, small_v, big)
            }
            UnaryOp::Expm1 => {
                let t = self.clamp_l(l, x, -200.0, 200.0);
                self.expm1_core(l, t)
            }
            UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Tan => self.trig_lanes(l, op, x),
            UnaryOp::Tanh => {
                let ax = self.b.ins().fabs(x);
                let t = self.clamp_l(l, ax, 0.0, 20.0);
                let t2 = self.b.ins().fadd(t, t);
                let e = self.expm1_core(l, t2);
                let two = self.fc(l, 2.0);
                let den = self.b.ins().fadd(e, two);
                let th = self.b.ins().fdiv(e, den);
                let lim = self.fc(l, 1e-5);
                let small = self.fcmp_l(FloatCC::LessThan, ax, lim);
                let th = self.lsel(small, ax, th);
                let zero = self.fc(l, 0.0);
                let neg = self.fcmp_l(FloatCC::LessThan, x, zero);
                let nth = self.b.ins().fneg(th);
                self.lsel(neg, nth, th)
            }
            UnaryOp::Logistic => {
                let n = self.b.ins().fneg(x);
                let t = self.clamp_l(l, n, -200.0, 200.0);
                let e = self.exp_core(l, t);
                let one = self.fc(l, 1.0);
                let den = self.b.ins().fadd(one, e);
                self.b.ins().fdiv(one, den)
            }
            UnaryOp::Neg
            | UnaryOp::Sign
            | UnaryOp::Abs
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt
            | UnaryOp::Square
            | UnaryOp::StopGradient => x,
            // Scalar library calls (`bits.rs`), never lanes.
            UnaryOp::Not
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::IsFinite
            | UnaryOp::Copy
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
            | UnaryOp::BesselI1e
            | UnaryOp::PopulationCount
            | UnaryOp::Clz => x,
        };
        match op {
            // Odd functions with f(±0) = ±0 keep the zero's sign.
            UnaryOp::Sin | UnaryOp::Tan | UnaryOp::Tanh | UnaryOp::Expm1 | UnaryOp::Log1p => {
                let zero = self.fc(l, 0.0);
                let is_zero = self.fcmp_l(FloatCC::Equal, x, zero);
                let r = self.lsel(is_zero, x, r);
                let nan = self.fcmp_l(FloatCC::Unordered, x, x);
                self.lsel(nan, x, r)
            }
            _ => {
                let nan = self.fcmp_l(FloatCC::Unordered, x, x);
                self.lsel(nan, x, r)
            }
        }
    }

    /// x^y for f64 lanes of widened f32 values, with C99's special cases and glibc's
    /// `powf` NaNs (which XLA on x86 CPU returns too): a NaN `x` comes back (quieted by the
    /// widening), its sign flipped if it is negative and `y` an odd integer (`powf`
    /// computes `-(x * x)` there); else a NaN `y` comes back; a negative finite `x` with a
    /// non-integer `y` is the default NaN. `pow_f32` adds the signaling-NaN cases.
    fn pow_lanes(&mut self, l: Lanes, x: Value, y: Value) -> Value {
        let ax = self.b.ins().fabs(x);
        let lx = self.log_core(l, ax);
        let t = self.b.ins().fmul(y, lx);
        let t = self.clamp_l(l, t, -200.0, 200.0);
        let r = self.exp_core(l, t);
        // A NaN `x`, then its sign flip below with the other negative bases.
        let xnan = self.fcmp_l(FloatCC::Unordered, x, x);
        let r = self.lsel(xnan, x, r);
        let one = self.fc(l, 1.0);
        let half = self.fc(l, 0.5);
        let yt = self.b.ins().trunc(y);
        let yint = self.fcmp_l(FloatCC::Equal, yt, y);
        let yh = self.b.ins().fmul(y, half);
        let yht = self.b.ins().trunc(yh);
        let yh_frac = self.fcmp_l(FloatCC::NotEqual, yht, yh);
        let yodd = self.b.ins().band(yint, yh_frac);
        let xb = self.bits(l, x);
        let zero_i = self.ic(l, 0);
        let xsign = self.b.ins().icmp(IntCC::SignedLessThan, xb, zero_i);
        let flip = self.b.ins().band(xsign, yodd);
        let nr = self.b.ins().fneg(r);
        let r = self.lsel(flip, nr, r);
        // x < 0 finite and y not an integer: the default NaN.
        let nan = self.fc(l, DEFAULT_NAN);
        let zero = self.fc(l, 0.0);
        let inf = self.fc(l, f64::INFINITY);
        let xneg = self.fcmp_l(FloatCC::LessThan, x, zero);
        let xfin = self.fcmp_l(FloatCC::LessThan, ax, inf);
        let bad = self.b.ins().band(xneg, xfin);
        let ynotint = self.fcmp_l(FloatCC::NotEqual, yt, y);
        let bad = self.b.ins().band(bad, ynotint);
        let yordered = self.fcmp_l(FloatCC::Ordered, y, y);
        let bad = self.b.ins().band(bad, yordered);
        let r = self.lsel(bad, nan, r);
        // |x| = 1 and y = ±inf: 1.
        let ax1 = self.fcmp_l(FloatCC::Equal, ax, one);
        let ay = self.b.ins().fabs(y);
        let yinf = self.fcmp_l(FloatCC::Equal, ay, inf);
        let c1 = self.b.ins().band(ax1, yinf);
        let r = self.lsel(c1, one, r);
        // A NaN `y` and a number `x`: y.
        let ynan = self.fcmp_l(FloatCC::Unordered, y, y);
        let y_or_x = self.lsel(xnan, r, y);
        let r = self.lsel(ynan, y_or_x, r);
        // y = 0: 1. x = 1: 1 (even for a NaN on the other side).
        let y0 = self.fcmp_l(FloatCC::Equal, y, zero);
        let x1 = self.fcmp_l(FloatCC::Equal, x, one);
        let c2 = self.b.ins().bor(y0, x1);
        self.lsel(c2, one, r)
    }

    /// Widens f32 (or f32x4) to f64 lanes, applies `f`, and rounds back.
    fn on_lanes(&mut self, xs: &[Value], f: &mut dyn FnMut(&mut Self, Lanes, &[Value]) -> Value) -> Value {
        let ty = self.b.func.dfg.value_type(xs[0]);
        if !ty.is_vector() {
            let l = Lanes { f: types::F64, i: types::I64 };
            let wide: Vec<Value> = xs.iter().map(|&x| self.b.ins().fpromote(types::F64, x)).collect();
            let r = f(self, l, &wide);
            return self.b.ins().fdemote(types::F32, r);
        }
        let l = Lanes { f: types::F64X2, i: types::I64X2 };
        let hi_mask: Vec<u8> = (8..16).chain(8..16).collect();
        let mut halves = [Vec::new(), Vec::new()];
        for &x in xs {
            halves[0].push(self.b.ins().fvpromote_low(x));
            let hi = self.shuffle_f32x4(x, x, &hi_mask);
            halves[1].push(self.b.ins().fvpromote_low(hi));
        }
        let lo = f(self, l, &halves[0]);
        let hi = f(self, l, &halves[1]);
        let lo = self.b.ins().fvdemote(lo);
        let hi = self.b.ins().fvdemote(hi);
        let join: Vec<u8> = (0..8).chain(16..24).collect();
        self.shuffle_f32x4(lo, hi, &join)
    }

    fn shuffle_f32x4(&mut self, a: Value, b: Value, mask: &[u8]) -> Value {
        let a8 = self.b.ins().bitcast(types::I8X16, little(), a);
        let b8 = self.b.ins().bitcast(types::I8X16, little(), b);
        let imm = self.b.func.dfg.immediates.push(ConstantData::from(mask));
        let s = self.b.ins().shuffle(a8, b8, imm);
        self.b.ins().bitcast(types::F32X4, little(), s)
    }

    /// An f32 (scalar or f32x4) transcendental, as XLA computes it where subnormals arise:
    /// the operand itself where XLA's code returns it for tiny `|x|` (`sin`, `tan`, `expm1`
    /// below the smallest normal, subnormals included; `tanh` below 4e-4, XLA's select),
    /// otherwise the function, whose f64 lanes read a subnormal operand as 0 (the widening
    /// `cvtps2pd` under DAZ) and whose f32 result is flushed by FTZ, as XLA's are.
    pub(super) fn math_f32(&mut self, op: UnaryOp, x: Value) -> Value {
        let r = self.math_f32_value(op, x);
        let limit = match op {
            UnaryOp::Sin | UnaryOp::Tan | UnaryOp::Expm1 => f32::MIN_POSITIVE,
            UnaryOp::Tanh => TANH_IDENTITY_BELOW,
            _ => return r,
        };
        // A compare under DAZ reads a subnormal |x| as 0: below either limit.
        let ty = self.b.func.dfg.value_type(x);
        let ax = self.b.ins().fabs(x);
        let lim = self.b.ins().f32const(limit);
        let lim = if ty.is_vector() { self.b.ins().splat(ty, lim) } else { lim };
        let tiny = self.b.ins().fcmp(FloatCC::LessThan, ax, lim);
        self.lsel(tiny, x, r)
    }

    fn math_f32_value(&mut self, op: UnaryOp, x: Value) -> Value {
        if self.b.func.dfg.value_type(x).is_vector() {
            if let Some(r) = self.math_f32x4(op, x) {
                return r;
            }
        }
        let fast = self.on_lanes(&[x], &mut |fx, l, xs| fx.unary_lanes(l, op, xs[0]));
        let imp = match op {
            UnaryOp::Sin => Import::SinF32,
            UnaryOp::Cos => Import::CosF32,
            UnaryOp::Tan => Import::TanF32,
            _ => return fast,
        };
        // Huge arguments: libm, lane by lane, on a branch of its own.
        let ty = self.b.func.dfg.value_type(x);
        let ax = self.b.ins().fabs(x);
        let lim = self.b.ins().f32const(BIG_TRIG);
        let lim = if ty.is_vector() { self.b.ins().splat(ty, lim) } else { lim };
        let big = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, ax, lim);
        let any = if ty.is_vector() { self.b.ins().vany_true(big) } else { big };
        let slow = self.b.create_block();
        let merge = self.b.create_block();
        self.b.append_block_param(merge, ty);
        self.b.ins().brif(any, slow, &[], merge, &[fast.into()]);
        self.b.switch_to_block(slow);
        let r = if ty.is_vector() {
            let mut v = fast;
            for lane in 0..4u8 {
                let e = self.b.ins().extractlane(x, lane);
                let r = self.call(imp, &[e]).expect("libm returns");
                v = self.b.ins().insertlane(v, r, lane);
            }
            v
        } else {
            self.call(imp, &[x]).expect("libm returns")
        };
        self.b.ins().jump(merge, &[r.into()]);
        self.b.switch_to_block(merge);
        self.b.block_params(merge)[0]
    }

    /// f32 `pow` (scalar or f32x4), NaNs as glibc's `powf`: `pow_lanes`, and where the
    /// widening hid a signaling NaN, `powf`'s `x + y` for it: `pow(sNaN, 0)` and
    /// `pow(1, sNaN)` are the NaN quieted, not 1.
    pub(super) fn pow_f32(&mut self, x: Value, y: Value) -> Value {
        let r = self.on_lanes(&[x, y], &mut |fx, l, v| fx.pow_lanes(l, v[0], v[1]));
        let ty = self.b.func.dfg.value_type(x);
        let ity = if ty.is_vector() { types::I32X4 } else { types::I32 };
        let int = |fx: &mut Self, c: i64| {
            let v = fx.b.ins().iconst(types::I32, c);
            if ty.is_vector() {
                fx.b.ins().splat(ity, v)
            } else {
                v
            }
        };
        let float = |fx: &mut Self, c: f32| {
            let v = fx.b.ins().f32const(c);
            if ty.is_vector() {
                fx.b.ins().splat(ty, v)
            } else {
                v
            }
        };
        // Bits 0x7F800001..=0x7FBFFFFF of |v|: a signaling NaN. Quieting sets bit 22.
        let (inf_bits, quiet_bit, abs_mask) = (int(self, 0x7F80_0000), int(self, 0x0040_0000), int(self, 0x7FFF_FFFF));
        let snan_quieted = |fx: &mut Self, v: Value| {
            let b = fx.b.ins().bitcast(ity, little(), v);
            let a = fx.b.ins().band(b, abs_mask);
            let is_nan = fx.b.ins().icmp(IntCC::SignedGreaterThan, a, inf_bits);
            let q = fx.b.ins().band(a, quiet_bit);
            let zero = int(fx, 0);
            let is_sig = fx.b.ins().icmp(IntCC::Equal, q, zero);
            let snan = fx.b.ins().band(is_nan, is_sig);
            let quieted = fx.b.ins().bor(b, quiet_bit);
            (snan, fx.b.ins().bitcast(ty, little(), quieted))
        };
        let (x_snan, xq) = snan_quieted(self, x);
        let (y_snan, yq) = snan_quieted(self, y);
        let zero = float(self, 0.0);
        let one = float(self, 1.0);
        let y0 = self.b.ins().fcmp(FloatCC::Equal, y, zero);
        let x1 = self.b.ins().fcmp(FloatCC::Equal, x, one);
        let c = self.b.ins().band(y0, x_snan);
        let r = self.lsel(c, xq, r);
        let c = self.b.ins().band(x1, y_snan);
        self.lsel(c, yq, r)
    }
}

fn factorial(n: u32) -> f64 {
    (1..=n).map(f64::from).product()
}

fn sign(k: u32) -> f64 {
    if k.is_multiple_of(2) {
        1.0
    } else {
        -1.0
    }
}
