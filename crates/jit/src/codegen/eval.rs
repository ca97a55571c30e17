//! Expression evaluation at one point of a loop nest, as scalars or as `f32x4` vectors,
//! with the interpreter's semantics for every elementwise primitive and dtype.
//!
//! Registers hold each dtype as `codegen::clif_type` says (16-bit floats in `f32`, rounded
//! after every narrow node by `narrow.rs`; integers in their width, `int.rs`; `bool` as an
//! `i8` 0/1) in scalar code; in vector code `f32x4` values and `bool` as an `i32x4` mask
//! (all ones or zeros), f32 only. Integer arithmetic wraps; `x / 0` is all ones and
//! `MIN / -1 = MIN` as XLA defines them, so no instruction traps. `max`/`min` are XLA's
//! (NaN first, `-0 < +0`, subnormals as zeros). Float arithmetic runs in XLA's float
//! environment (FTZ and DAZ, set around every native call): what is not one arithmetic
//! instruction applies DAZ on bits itself (`daz`). f32 transcendentals (and the 16-bit
//! floats') are inline code (`math`); f64 ones call `remat_math::elementary`.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, InstBuilder, Type, Value};
use remat_ir::{BinaryOp, CompareOp, DType, LitValue, ReduceOp, UnaryOp};

use super::{clif_type, mem, Fx};
use crate::expr::Expr;
use crate::native::Import;

/// Whether `e` can be evaluated on `f32x4` vectors: f32 values and bool masks only.
pub(crate) fn vectorizable(e: &Expr) -> bool {
    e.vectorizable()
}

impl Fx<'_, '_> {
    /// A literal as a register value (splat in vector mode, which holds only `f32`).
    pub(crate) fn lit(&mut self, l: LitValue, vector: bool) -> Value {
        let s = match l {
            LitValue::F32(x) => self.b.ins().f32const(x),
            LitValue::F64(x) => self.b.ins().f64const(x),
            LitValue::BF16(x) => self.b.ins().f32const(x.to_f32()),
            LitValue::F16(x) => self.b.ins().f32const(x.to_f32()),
            LitValue::I8(x) => self.int_const(types::I8, x as i64),
            LitValue::I16(x) => self.int_const(types::I16, x as i64),
            LitValue::I32(x) => self.int_const(types::I32, x as i64),
            LitValue::I64(x) => self.int_const(types::I64, x),
            LitValue::U8(x) => self.int_const(types::I8, x as i64),
            LitValue::U32(x) => self.int_const(types::I32, x as i64),
            LitValue::Bool(x) => self.int_const(types::I8, x as i64),
            // A complex literal is the bits of its parts, the real part at the lower address
            // (the lowering materializes it into a buffer for a native step).
            LitValue::C64(z) => {
                let bits = u64::from(z.re.to_bits()) | (u64::from(z.im.to_bits()) << 32);
                self.int_const(types::I64, bits as i64)
            }
            LitValue::C128(z) => {
                let lo = self.int_const(types::I64, z.re.to_bits() as i64);
                let hi = self.int_const(types::I64, z.im.to_bits() as i64);
                self.b.ins().iconcat(lo, hi)
            }
        };
        if vector {
            self.b.ins().splat(types::F32X4, s)
        } else {
            s
        }
    }

    /// Evaluates `e`; `offs[u]` is the element offset of user `u` (0 is the destination),
    /// `inner[u]` its stride along the vectorized dimension. `next` walks the leaves.
    /// Evaluation starts afresh at each point: shared subexpressions are computed once here.
    pub(super) fn eval(&mut self, e: &Expr, vector: bool, offs: &[Value], inner: &[i64], next: &mut usize) -> Value {
        self.shared.clear();
        self.eval_node(e, vector, offs, inner, next)
    }

    fn eval_node(&mut self, e: &Expr, vector: bool, offs: &[Value], inner: &[i64], next: &mut usize) -> Value {
        match e {
            Expr::Load(v) => {
                let u = *next;
                *next += 1;
                let size = v.dtype.size_in_bytes() as i64;
                let addr = self.element_address(v.buf, offs[u], size);
                let ty = clif_type(v.dtype);
                if !vector {
                    return self.load_elem(v.dtype, addr, 0);
                }
                match inner[u] {
                    1 => self.b.ins().load(types::F32X4, mem(), addr, 0),
                    0 => {
                        let x = self.b.ins().load(ty, mem(), addr, 0);
                        self.b.ins().splat(types::F32X4, x)
                    }
                    s => {
                        let x = self.b.ins().load(ty, mem(), addr, 0);
                        let mut vec = self.b.ins().splat(types::F32X4, x);
                        for lane in 1..4u8 {
                            let x = self.b.ins().load(ty, mem(), addr, (lane as i64 * s * size) as i32);
                            vec = self.b.ins().insertlane(vec, x, lane);
                        }
                        vec
                    }
                }
            }
            Expr::Lit(l) => self.lit(*l, vector),
            Expr::Iota(d, _) => {
                let u = *next;
                *next += 1;
                let i = offs[u];
                if d.is_integer() {
                    // The interpreter's `from_f64(index)` saturates at the dtype's maximum.
                    let hi = self.iconst(super::convert::int_range(*d).1);
                    let i = self.b.ins().smin(i, hi);
                    return self.convert(DType::I64, *d, i);
                }
                self.convert(DType::I64, *d, i)
            }
            Expr::Unary(op, d, x) => {
                let x = self.eval_node(x, vector, offs, inner, next);
                let r = self.unary(*op, *d, x, vector);
                // `is_finite`'s result is a bool, not the operand's 16-bit float.
                if *op == UnaryOp::IsFinite {
                    r
                } else {
                    self.round_narrow(*d, r)
                }
            }
            Expr::Binary(op, d, xe, ye) => {
                let yd = ye.dtype();
                let x = self.eval_node(xe, vector, offs, inner, next);
                let mut y = self.eval_node(ye, vector, offs, inner, next);
                if yd != *d {
                    y = self.convert(yd, *d, y); // pow's integer exponent
                }
                let r = if matches!(op, BinaryOp::Max | BinaryOp::Min) && d.is_float() {
                    self.max_min(*op, *d, (x, literal(xe)), (y, literal(ye)))
                } else {
                    self.binary(*op, *d, x, y)
                };
                self.round_narrow(*d, r)
            }
            Expr::Compare(op, d, x, y) => {
                let x = self.eval_node(x, vector, offs, inner, next);
                let y = self.eval_node(y, vector, offs, inner, next);
                self.compare(*op, *d, x, y)
            }
            Expr::IntegerPow(y, d, x) => {
                let x = self.eval_node(x, vector, offs, inner, next);
                self.integer_pow(*y, *d, x, vector)
            }
            Expr::Select(_, p, cases) => {
                let pd = p.dtype();
                let p = self.eval_node(p, vector, offs, inner, next);
                let cs: Vec<Value> = cases.iter().map(|c| self.eval_node(c, vector, offs, inner, next)).collect();
                if vector {
                    let mask = self.b.ins().bitcast(types::F32X4, little(), p);
                    return self.b.ins().bitselect(mask, cs[1], cs[0]);
                }
                let mut r = cs[0];
                for (k, &c) in cs.iter().enumerate().skip(1) {
                    let take = match pd {
                        DType::Bool => self.b.ins().icmp_imm_s(IntCC::NotEqual, p, 0),
                        _ => self.b.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, p, k as i64),
                    };
                    r = self.b.ins().select(take, c, r);
                }
                r
            }
            Expr::Clamp(d, loe, xe, hie) => {
                let lo = self.eval_node(loe, vector, offs, inner, next);
                let x = self.eval_node(xe, vector, offs, inner, next);
                let hi = self.eval_node(hie, vector, offs, inner, next);
                if !d.is_float() {
                    let m = self.binary(BinaryOp::Max, *d, x, lo);
                    return self.binary(BinaryOp::Min, *d, m, hi);
                }
                let m = self.max_min(BinaryOp::Max, *d, (x, literal(xe)), (lo, literal(loe)));
                self.max_min(BinaryOp::Min, *d, (m, None), (hi, literal(hie)))
            }
            Expr::Convert { from, to, x } => {
                let x = self.eval_node(x, vector, offs, inner, next);
                self.convert(*from, *to, x)
            }
            Expr::ReducePrecision { dtype, exponent_bits, mantissa_bits, x } => {
                let x = self.eval_node(x, vector, offs, inner, next);
                let r = self.reduce_precision(*dtype, *exponent_bits, *mantissa_bits, x);
                self.round_narrow(*dtype, r)
            }
            Expr::Round(method, d, x) => {
                let x = self.eval_node(x, vector, offs, inner, next);
                self.round(*method, *d, x)
            }
            Expr::Bitcast { from: _, to, x } => {
                let x = self.eval_node(x, vector, offs, inner, next);
                self.bitcast(*to, x)
            }
            Expr::Shared(id, x) => {
                // A later occurrence reuses the value (its leaves are skipped, not reloaded).
                // The first occurrence dominates the later ones: evaluation is straight-line
                // code in operand order.
                if let Some(&(v, leaves)) = self.shared.get(id) {
                    *next += leaves;
                    return v;
                }
                let first = *next;
                let v = self.eval_node(x, vector, offs, inner, next);
                self.shared.insert(*id, (v, *next - first));
                v
            }
        }
    }

    fn float_const(&mut self, d: DType, x: f64, vector: bool) -> Value {
        let l = LitValue::from_f64(d, x);
        self.lit(l, vector)
    }

    /// Selects `a` where `mask` holds, else `b` (scalar `i8` condition or vector mask).
    pub(super) fn sel(&mut self, mask: Value, a: Value, b: Value) -> Value {
        let ty = self.b.func.dfg.value_type(a);
        if ty.is_vector() {
            let m = self.b.ins().bitcast(ty, little(), mask);
            self.b.ins().bitselect(m, a, b)
        } else {
            self.b.ins().select(mask, a, b)
        }
    }

    fn unary(&mut self, op: UnaryOp, d: DType, x: Value, vector: bool) -> Value {
        if d.is_integer() {
            return self.int_unary(op, d, x);
        }
        if d == DType::Key {
            return x;
        }
        if d == DType::Bool {
            return if op == UnaryOp::Not { self.unary_more(op, d, x) } else { x };
        }
        match op {
            UnaryOp::Neg => self.b.ins().fneg(x),
            UnaryOp::Abs => self.b.ins().fabs(x),
            UnaryOp::Square => self.b.ins().fmul(x, x),
            UnaryOp::StopGradient => x,
            UnaryOp::Sign => {
                let zero = self.float_const(d, 0.0, vector);
                let one = self.float_const(d, 1.0, vector);
                let m1 = self.float_const(d, -1.0, vector);
                // Compares read a subnormal as 0 (DAZ); its sign is then a zero of its sign.
                let gt = self.b.ins().fcmp(FloatCC::GreaterThan, x, zero);
                let lt = self.b.ins().fcmp(FloatCC::LessThan, x, zero);
                let z = self.daz(d, x);
                let r = self.sel(lt, m1, z);
                self.sel(gt, one, r)
            }
            UnaryOp::Sqrt => self.b.ins().sqrt(x),
            UnaryOp::Rsqrt => {
                let one = self.float_const(d, 1.0, vector);
                let s = self.b.ins().sqrt(x);
                self.b.ins().fdiv(one, s)
            }
            UnaryOp::Exp
            | UnaryOp::Log
            | UnaryOp::Log1p
            | UnaryOp::Expm1
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Tan
            | UnaryOp::Tanh
            | UnaryOp::Logistic => {
                if d != DType::F64 {
                    self.math_f32(op, x)
                } else {
                    self.libm_f64(op, x)
                }
            }
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
            | UnaryOp::BesselI1e => self.unary_more(op, d, x),
            // Integer-only ops (the verifier's rule).
            UnaryOp::PopulationCount | UnaryOp::Clz => x,
        }
    }

    fn libm_f64(&mut self, op: UnaryOp, x: Value) -> Value {
        let imp = match op {
            UnaryOp::Exp => Import::ExpF64,
            UnaryOp::Log => Import::LogF64,
            UnaryOp::Log1p => Import::Log1pF64,
            UnaryOp::Expm1 => Import::Expm1F64,
            UnaryOp::Sin => Import::SinF64,
            UnaryOp::Cos => Import::CosF64,
            UnaryOp::Tan => Import::TanF64,
            UnaryOp::Tanh => Import::TanhF64,
            UnaryOp::Logistic => {
                let n = self.b.ins().fneg(x);
                let e = self.call(Import::ExpF64, &[n]).expect("exp returns");
                let one = self.b.ins().f64const(1.0);
                let den = self.b.ins().fadd(one, e);
                return self.b.ins().fdiv(one, den);
            }
            UnaryOp::Neg
            | UnaryOp::Sign
            | UnaryOp::Abs
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt
            | UnaryOp::Square
            | UnaryOp::StopGradient => return x,
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
            | UnaryOp::BesselI1e => return self.unary_more(op, DType::F64, x),
            UnaryOp::PopulationCount | UnaryOp::Clz => return x,
        };
        self.call(imp, &[x]).expect("libm functions return")
    }

    pub(super) fn binary(&mut self, op: BinaryOp, d: DType, x: Value, y: Value) -> Value {
        match d {
            DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 | DType::U32 => self.int_binary(op, d, x, y),
            DType::Key | DType::C64 | DType::C128 => x,
            DType::Bool => match op {
                BinaryOp::Max => self.b.ins().bor(x, y),
                BinaryOp::Min => self.b.ins().band(x, y),
                BinaryOp::Add | BinaryOp::AddAny | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Pow => x,
                BinaryOp::Rem
                | BinaryOp::Atan2
                | BinaryOp::Nextafter
                | BinaryOp::Polygamma
                | BinaryOp::Igamma
                | BinaryOp::Igammac
                | BinaryOp::IgammaGradA
                | BinaryOp::Zeta
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor
                | BinaryOp::ShiftLeft
                | BinaryOp::ShiftRightLogical
                | BinaryOp::ShiftRightArithmetic
                | BinaryOp::Mulhi => self.binary_more(op, d, x, y),
            },
            DType::F32 | DType::F64 | DType::BF16 | DType::F16 => match op {
                BinaryOp::Add | BinaryOp::AddAny => self.b.ins().fadd(x, y),
                BinaryOp::Sub => self.b.ins().fsub(x, y),
                BinaryOp::Mul => self.b.ins().fmul(x, y),
                BinaryOp::Div => self.b.ins().fdiv(x, y),
                BinaryOp::Pow => {
                    if d != DType::F64 {
                        self.pow_f32(x, y)
                    } else {
                        self.call(Import::PowF64, &[x, y]).expect("pow returns")
                    }
                }
                BinaryOp::Max | BinaryOp::Min => self.max_min(op, d, (x, None), (y, None)),
                BinaryOp::Rem
                | BinaryOp::Atan2
                | BinaryOp::Nextafter
                | BinaryOp::Polygamma
                | BinaryOp::Igamma
                | BinaryOp::Igammac
                | BinaryOp::IgammaGradA
                | BinaryOp::Zeta
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor
                | BinaryOp::ShiftLeft
                | BinaryOp::ShiftRightLogical
                | BinaryOp::ShiftRightArithmetic
                | BinaryOp::Mulhi => self.binary_more(op, d, x, y),
            },
        }
    }

    /// XLA's `max`/`min` of floats (`remat_math::maximum`/`minimum`): `llvm.maximum` on
    /// DAZ'd operands, so NaN first, `-0 < +0`, never a subnormal. Compares read subnormals
    /// as zeros (every native call runs under DAZ, `remat_math::fenv`); where both sides
    /// compare equal the result is their bits and'ed (`max`: `+0` unless both are `-0`) or
    /// or'ed (`min`), and the result is DAZ'd on its bits. An operand that is a literal
    /// neither NaN nor subnormal, and on the side that wins ties of zeros (`max(x, c)` with
    /// `c > 0` or `+0`, `min(x, c)` with `c < 0` or `-0`: relu, a clamp's lower bound),
    /// needs only `x <= c ? c : x`: a subnormal `x` compares as 0 and loses, and a NaN `x`
    /// fails the compare.
    pub(super) fn max_min(
        &mut self,
        op: BinaryOp,
        d: DType,
        (x, xl): (Value, Option<LitValue>),
        (y, yl): (Value, Option<LitValue>),
    ) -> Value {
        let is_max = op == BinaryOp::Max;
        // Positive literals win ties of zeros for `max`, negative ones for `min`.
        let wins_ties = |l: Option<LitValue>| l.and_then(float_class) == Some(is_max);
        let fast = if wins_ties(yl) {
            Some((x, y))
        } else if wins_ties(xl) {
            Some((y, x)) // the rule is symmetric but for NaN, which a literal here is not
        } else {
            None
        };
        if let Some((v, c)) = fast {
            let cc = if is_max { FloatCC::LessThanOrEqual } else { FloatCC::GreaterThanOrEqual };
            let take_c = self.b.ins().fcmp(cc, v, c);
            return self.sel(take_c, c, v);
        }
        let cc = if is_max { FloatCC::GreaterThan } else { FloatCC::LessThan };
        let better = self.b.ins().fcmp(cc, y, x);
        let r = self.sel(better, y, x);
        let eq = self.b.ins().fcmp(FloatCC::Equal, x, y);
        let tie = if is_max { self.b.ins().band(x, y) } else { self.b.ins().bor(x, y) };
        let r = self.sel(eq, tie, r);
        let r = self.daz(d, r);
        let ynan = self.b.ins().fcmp(FloatCC::Unordered, y, y);
        let r = self.sel(ynan, y, r);
        let xnan = self.b.ins().fcmp(FloatCC::Unordered, x, x);
        self.sel(xnan, x, r)
    }

    /// A subnormal read as a zero of its sign, on the bits of a float register (scalar or
    /// `f32x4`; 16-bit floats are `f32` there): `remat_math::flush`'s DAZ.
    pub(super) fn daz(&mut self, d: DType, x: Value) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let (ity, lane, exp, sign) = match (d, ty.is_vector()) {
            (DType::F64, _) => (types::I64, types::I64, 0x7FF0_0000_0000_0000u64 as i64, i64::MIN),
            (_, true) => (types::I32X4, types::I32, 0x7F80_0000, 0x8000_0000u32 as i32 as i64),
            (_, false) => (types::I32, types::I32, 0x7F80_0000, 0x8000_0000u32 as i32 as i64),
        };
        let konst = |fx: &mut Self, c: i64| {
            let v = fx.b.ins().iconst(lane, c);
            if ity.is_vector() {
                fx.b.ins().splat(ity, v)
            } else {
                v
            }
        };
        let bits = self.b.ins().bitcast(ity, little(), x);
        let exp = konst(self, exp);
        let e = self.b.ins().band(bits, exp);
        let zero = konst(self, 0);
        let flush = self.b.ins().icmp(IntCC::Equal, e, zero);
        let sign = konst(self, sign);
        let z = self.b.ins().band(bits, sign);
        let r =
            if ity.is_vector() { self.b.ins().bitselect(flush, z, bits) } else { self.b.ins().select(flush, z, bits) };
        self.b.ins().bitcast(ty, little(), r)
    }

    fn compare(&mut self, op: CompareOp, d: DType, x: Value, y: Value) -> Value {
        if matches!(op, CompareOp::EqTo | CompareOp::LeTo | CompareOp::LtTo) {
            return self.total_order_compare(op, d, x, y);
        }
        match d {
            DType::F32 | DType::F64 | DType::BF16 | DType::F16 => {
                let cc = match op {
                    CompareOp::Eq => FloatCC::Equal,
                    CompareOp::Ne => FloatCC::NotEqual,
                    CompareOp::Lt => FloatCC::LessThan,
                    CompareOp::Le => FloatCC::LessThanOrEqual,
                    CompareOp::Gt => FloatCC::GreaterThan,
                    CompareOp::Ge => FloatCC::GreaterThanOrEqual,
                    CompareOp::EqTo | CompareOp::LeTo | CompareOp::LtTo => FloatCC::Equal,
                };
                self.b.ins().fcmp(cc, x, y)
            }
            DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
            | DType::U8
            | DType::U32
            | DType::Bool
            | DType::Key
            | DType::C64
            | DType::C128 => {
                let (x, y) = if d == DType::Key {
                    // A key orders by its first word, then its second (the high half).
                    (self.b.ins().rotl_imm_u(x, 32), self.b.ins().rotl_imm_u(y, 32))
                } else {
                    (x, y)
                };
                let signed = super::convert::is_signed(d);
                let cc = match (op, signed) {
                    (CompareOp::Eq, _) => IntCC::Equal,
                    (CompareOp::Ne, _) => IntCC::NotEqual,
                    (CompareOp::Lt, true) => IntCC::SignedLessThan,
                    (CompareOp::Le, true) => IntCC::SignedLessThanOrEqual,
                    (CompareOp::Gt, true) => IntCC::SignedGreaterThan,
                    (CompareOp::Ge, true) => IntCC::SignedGreaterThanOrEqual,
                    (CompareOp::Lt, false) => IntCC::UnsignedLessThan,
                    (CompareOp::Le, false) => IntCC::UnsignedLessThanOrEqual,
                    (CompareOp::Gt, false) => IntCC::UnsignedGreaterThan,
                    (CompareOp::Ge, false) => IntCC::UnsignedGreaterThanOrEqual,
                    (CompareOp::EqTo | CompareOp::LeTo | CompareOp::LtTo, _) => IntCC::Equal,
                };
                self.b.ins().icmp(cc, x, y)
            }
        }
    }

    /// `eq_to`, `le_to`, `lt_to`: XLA's `TOTALORDER` compares (scalar code). Integers and
    /// `bool` compare by value; a float (a 16-bit one widened exactly to `f32`) by its bits
    /// read as sign and magnitude: a negative value's magnitude bits flipped, then a signed
    /// compare (`remat_math`'s `Element::total_order_key`).
    fn total_order_compare(&mut self, op: CompareOp, d: DType, x: Value, y: Value) -> Value {
        let (x, y, signed) = if d.is_float() {
            let ity = if d == DType::F64 { types::I64 } else { types::I32 };
            let key = |fx: &mut Self, v: Value| {
                let bits = fx.b.ins().bitcast(ity, little(), v);
                let sign = fx.b.ins().sshr_imm_s(bits, i64::from(ity.bits() - 1));
                let mag = fx.b.ins().ushr_imm_s(sign, 1);
                fx.b.ins().bxor(bits, mag)
            };
            (key(self, x), key(self, y), true)
        } else {
            (x, y, super::convert::is_signed(d))
        };
        let cc = match (op, signed) {
            (CompareOp::LtTo, true) => IntCC::SignedLessThan,
            (CompareOp::LeTo, true) => IntCC::SignedLessThanOrEqual,
            (CompareOp::LtTo, false) => IntCC::UnsignedLessThan,
            (CompareOp::LeTo, false) => IntCC::UnsignedLessThanOrEqual,
            (
                CompareOp::EqTo
                | CompareOp::Eq
                | CompareOp::Ne
                | CompareOp::Lt
                | CompareOp::Le
                | CompareOp::Gt
                | CompareOp::Ge,
                _,
            ) => IntCC::Equal,
        };
        self.b.ins().icmp(cc, x, y)
    }

    /// Repeated squaring in JAX's multiplication order; `1 / x^-y` for negative `y`.
    fn integer_pow(&mut self, y: i32, d: DType, x: Value, vector: bool) -> Value {
        // A narrow float rounds after every multiplication, as the interpreter's.
        let mul = |fx: &mut Self, a: Value, b: Value| {
            if d.is_integer() {
                fx.b.ins().imul(a, b)
            } else {
                let p = fx.b.ins().fmul(a, b);
                fx.round_narrow(d, p)
            }
        };
        let mut n = y.unsigned_abs();
        let mut base = x;
        let mut acc: Option<Value> = None;
        while n > 0 {
            if n & 1 == 1 {
                acc = Some(match acc {
                    Some(a) => mul(self, a, base),
                    None => base,
                });
            }
            n >>= 1;
            if n > 0 {
                base = mul(self, base, base);
            }
        }
        let acc = match acc {
            Some(a) => a,
            None => self.lit(LitValue::from_f64(d, 1.0), vector),
        };
        if y >= 0 {
            return acc;
        }
        if d.is_integer() {
            let one = self.int_const(clif_type(d), 1);
            return self.int_div(d, one, acc);
        }
        let one = self.lit(LitValue::from_f64(d, 1.0), vector);
        let q = self.b.ins().fdiv(one, acc);
        self.round_narrow(d, q)
    }

    /// XLA's `ReducePrecision`, bit for bit (scalar code).
    fn reduce_precision(&mut self, d: DType, exp_bits: u32, man_bits: u32, x: Value) -> Value {
        // Narrow floats are `f32` registers: the `f32` rule, rounded by the caller.
        let (ity, width, src_exp, src_man): (Type, u32, u32, u32) = match d {
            DType::F64 => (types::I64, 64, 11, 52),
            DType::F32
            | DType::BF16
            | DType::F16
            | DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
            | DType::U8
            | DType::U32
            | DType::Bool
            | DType::Key
            | DType::C64
            | DType::C128 => (types::I32, 32, 8, 23),
        };
        // Constants as the immediates of a `width`-bit integer (sign-extended).
        let k = |c: i64| if width == 32 { c as i32 as i64 } else { c };
        let mut bits = self.b.ins().bitcast(ity, little(), x);
        if man_bits < src_man {
            let last = 1i64 << (src_man - man_bits);
            let base_bias = (last >> 1) - 1;
            let t = self.b.ins().band_imm_s(bits, last);
            let x_last = self.b.ins().ushr_imm_s(t, (src_man - man_bits) as i64);
            let bias = self.b.ins().iadd_imm_s(x_last, base_bias);
            let sum = self.b.ins().iadd(bits, bias);
            bits = self.b.ins().band_imm_s(sum, k(!(last - 1)));
        }
        if exp_bits < src_exp {
            let sign_mask = 1i64 << (width - 1);
            let exp_mask = ((1i64 << src_exp) - 1) << src_man;
            let bias = (1i64 << (src_exp - 1)) - 1;
            let rbias = (1i64 << (exp_bits - 1)) - 1;
            let (max_e, min_e) = ((bias + rbias) << src_man, (bias - rbias) << src_man);
            let xe = self.b.ins().band_imm_s(bits, k(exp_mask));
            let over = self.b.ins().icmp_imm_s(IntCC::UnsignedGreaterThan, xe, max_e);
            let under = self.b.ins().icmp_imm_s(IntCC::UnsignedLessThanOrEqual, xe, min_e);
            let signed_zero = self.b.ins().band_imm_s(bits, k(sign_mask));
            let signed_inf = self.b.ins().bor_imm_s(signed_zero, k(exp_mask));
            let r = self.b.ins().select(over, signed_inf, bits);
            bits = self.b.ins().select(under, signed_zero, r);
        }
        let r = self.b.ins().bitcast(if width == 64 { types::F64 } else { types::F32 }, little(), bits);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, x, x);
        let keep = if man_bits > 0 {
            x
        } else if d == DType::F64 {
            self.b.ins().f64const(f64::INFINITY)
        } else {
            self.b.ins().f32const(f32::INFINITY)
        };
        self.b.ins().select(nan, keep, r)
    }

    /// `acc op x` for a reduction (`max`/`min` with XLA's NaN rule).
    pub(super) fn combine(&mut self, op: ReduceOp, d: DType, acc: Value, x: Value) -> Value {
        let bop = crate::lower::reduce_binary(op);
        if d == DType::Bool {
            return match op {
                ReduceOp::Max | ReduceOp::Or => self.b.ins().bor(acc, x),
                ReduceOp::Min | ReduceOp::Sum | ReduceOp::Prod | ReduceOp::And => self.b.ins().band(acc, x),
                ReduceOp::Xor => self.b.ins().bxor(acc, x),
            };
        }
        self.binary(bop, d, acc, x)
    }

    /// Whether `v` replaces `best` in `argmax`: `best` is not NaN and `v` is NaN or larger.
    pub(super) fn argmax_better(&mut self, d: DType, v: Value, best: Value) -> Value {
        match d {
            DType::F32 | DType::F64 | DType::BF16 | DType::F16 => {
                let best_ok = self.b.ins().fcmp(FloatCC::Ordered, best, best);
                let vnan = self.b.ins().fcmp(FloatCC::Unordered, v, v);
                let gt = self.b.ins().fcmp(FloatCC::GreaterThan, v, best);
                let either = self.b.ins().bor(vnan, gt);
                self.b.ins().band(best_ok, either)
            }
            DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
            | DType::U8
            | DType::U32
            | DType::Bool
            | DType::Key
            | DType::C64
            | DType::C128 => self.compare(CompareOp::Gt, d, v, best),
        }
    }
}

/// The literal an expression is, if it is one.
fn literal(e: &Expr) -> Option<LitValue> {
    if let Expr::Lit(l) = e {
        Some(*l)
    } else {
        None
    }
}

/// How a float literal takes part in `max`/`min`, from its bits (no float compare, which
/// the compiling thread's DAZ would make `1e-40 == 0`): `Some(true)` for a positive number,
/// infinity or `+0`, `Some(false)` for a negative one or `-0`, `None` for NaN, subnormals
/// and non-floats.
fn float_class(l: LitValue) -> Option<bool> {
    let (bits, exp, sign): (u64, u64, u64) = match l {
        LitValue::F32(x) => (x.to_bits().into(), 0x7F80_0000, 1 << 31),
        LitValue::BF16(x) => (x.to_bits().into(), 0x7F80, 1 << 15),
        LitValue::F16(x) => (x.to_bits().into(), 0x7C00, 1 << 15),
        LitValue::F64(x) => (x.to_bits(), 0x7FF0_0000_0000_0000, 1 << 63),
        LitValue::I8(_)
        | LitValue::I16(_)
        | LitValue::I32(_)
        | LitValue::I64(_)
        | LitValue::U8(_)
        | LitValue::U32(_)
        | LitValue::Bool(_)
        | LitValue::C64(_)
        | LitValue::C128(_) => return None,
    };
    let magnitude = bits & !sign;
    let nan = magnitude & exp == exp && magnitude != exp;
    // An f16 subnormal is a normal f32 in the register, but keep the rule simple: none.
    let subnormal = magnitude & exp == 0 && magnitude != 0;
    (!nan && !subnormal).then_some(bits & sign == 0)
}

/// Flags for lane reinterpretation.
pub(super) fn little() -> cranelift_codegen::ir::MemFlagsData {
    cranelift_codegen::ir::MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little)
}
