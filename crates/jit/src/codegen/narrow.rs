//! Storage and rounding of the dtypes whose register form differs from their memory form.
//!
//! `bf16` and `f16` are stored in 16 bits and computed in `f32` registers: a load widens
//! exactly, every elementwise node of a narrow dtype rounds its `f32` result to the narrow
//! type (to nearest even, NaN kept and quieted as the `half` crate's `from_f32` does, which
//! is what the interpreter uses), and a store narrows a value that is already exact. Loads
//! and stores move the bits of every value they can represent unchanged, so copies are
//! exact, and use no float arithmetic that XLA's float environment (FTZ, DAZ) would flush:
//! an `f16` subnormal is a normal `f32`, as XLA's F16C conversions keep it. Keys are 8-byte opaque words (`i64` registers); `u8`/`u32` share the registers
//! of `i8`/`i32` and differ only in the instructions that read the sign.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use remat_ir::DType;

use super::eval::little;
use super::{clif_type, mem, Fx};

/// The `f32` bits of `2^24` and `2^-24`: the unit of `f16`'s subnormals.
const TWO_POW_24: u32 = (127 + 24) << 23;
const TWO_POW_M24: u32 = (127 - 24) << 23;

impl Fx<'_, '_> {
    /// Loads one element of `d` at `addr + offset` as its register value.
    pub(crate) fn load_elem(&mut self, d: DType, addr: Value, offset: i32) -> Value {
        match d {
            DType::BF16 => {
                let h = self.b.ins().load(types::I16, mem(), addr, offset);
                let w = self.b.ins().uextend(types::I32, h);
                let bits = self.b.ins().ishl_imm_u(w, 16);
                self.b.ins().bitcast(types::F32, little(), bits)
            }
            DType::F16 => {
                let h = self.b.ins().load(types::I16, mem(), addr, offset);
                let w = self.b.ins().uextend(types::I32, h);
                self.f16_bits_to_f32(w)
            }
            DType::F32
            | DType::F64
            | DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
            | DType::U8
            | DType::U32
            | DType::Bool
            | DType::Key
            | DType::C64
            | DType::C128 => self.b.ins().load(clif_type(d), mem(), addr, offset),
        }
    }

    /// Stores the register value `x` of `d` as one element at `addr + offset`.
    pub(crate) fn store_elem(&mut self, d: DType, x: Value, addr: Value, offset: i32) {
        let x = match d {
            DType::BF16 => {
                let bits = self.b.ins().bitcast(types::I32, little(), x);
                let hi = self.b.ins().ushr_imm_u(bits, 16);
                self.b.ins().ireduce(types::I16, hi)
            }
            DType::F16 => {
                let bits = self.f32_to_f16_bits(x);
                self.b.ins().ireduce(types::I16, bits)
            }
            DType::F32
            | DType::F64
            | DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
            | DType::U8
            | DType::U32
            | DType::Bool
            | DType::Key
            | DType::C64
            | DType::C128 => x,
        };
        self.b.ins().store(mem(), x, addr, offset);
    }

    /// The `f32` value of the `f16` whose bits are the low 16 of the `i32` `h` (exact; a
    /// NaN keeps its payload). Only integer operations and normal floats, so the float
    /// environment's DAZ and FTZ never apply: XLA's `vcvtph2ps` is exact.
    fn f16_bits_to_f32(&mut self, h: Value) -> Value {
        let mag = self.b.ins().band_imm_u(h, 0x7FFF);
        let sign = self.b.ins().band_imm_u(h, 0x8000);
        let sign = self.b.ins().ishl_imm_u(sign, 16);
        // Normal halves: the exponent rebased by 127 - 15 = 112, as bits.
        let shifted = self.b.ins().ishl_imm_u(mag, 13);
        let normal = self.b.ins().iadd_imm_u(shifted, 112 << 23);
        // Subnormal halves (exponent field 0): the mantissa times 2^-24, an exact product
        // of normal numbers.
        let m = self.b.ins().fcvt_from_uint(types::F32, mag);
        let scale = self.b.ins().f32const(f32::from_bits(TWO_POW_M24));
        let sub = self.b.ins().fmul(m, scale);
        let sub = self.b.ins().bitcast(types::I32, little(), sub);
        let special = self.b.ins().bor_imm_u(shifted, 0x7F80_0000);
        let is_sub = self.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, mag, 0x0400);
        let is_special = self.b.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, mag, 0x7C00);
        let m = self.b.ins().select(is_sub, sub, normal);
        let m = self.b.ins().select(is_special, special, m);
        let bits = self.b.ins().bor(m, sign);
        self.b.ins().bitcast(types::F32, little(), bits)
    }

    /// The `f16` bits (in an `i32`) of an `f32` value that an `f16` represents exactly,
    /// without arithmetic that could flush: an `f16` subnormal is a normal `f32`.
    fn f32_to_f16_bits(&mut self, x: Value) -> Value {
        let bits = self.b.ins().bitcast(types::I32, little(), x);
        let sign = self.b.ins().ushr_imm_u(bits, 16);
        let sign = self.b.ins().band_imm_u(sign, 0x8000);
        let abs = self.b.ins().band_imm_u(bits, 0x7FFF_FFFF);
        // Normal halves: the exponent rebased by 112, the mantissa's top 10 bits.
        let rebased = self.b.ins().iadd_imm_s(abs, -(112i64 << 23));
        let normal = self.b.ins().ushr_imm_u(rebased, 13);
        // Below 2^-14 (subnormal halves and zero): the value in units of 2^-24, an integer.
        let a = self.b.ins().bitcast(types::F32, little(), abs);
        let scale = self.b.ins().f32const(f32::from_bits(TWO_POW_24));
        let units = self.b.ins().fmul(a, scale);
        let sub = self.b.ins().fcvt_to_uint_sat(types::I32, units);
        let man = self.b.ins().ushr_imm_u(abs, 13);
        let man = self.b.ins().band_imm_u(man, 0x3FF);
        let special = self.b.ins().bor_imm_u(man, 0x7C00);
        let is_sub = self.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, abs, 0x3880_0000);
        let is_special = self.b.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, abs, 0x7F80_0000);
        let m = self.b.ins().select(is_sub, sub, normal);
        let m = self.b.ins().select(is_special, special, m);
        self.b.ins().bor(m, sign)
    }

    /// Rounds the `f32` value `x` to the narrow float `d` (to nearest even; overflow to
    /// ±inf; `f16` subnormals kept; a NaN keeps its sign and top payload bits and becomes
    /// quiet). Any other dtype is returned unchanged.
    pub(crate) fn round_narrow(&mut self, d: DType, x: Value) -> Value {
        if !d.is_narrow_float() {
            return x;
        }
        let bits = self.b.ins().bitcast(types::I32, little(), x);
        let abs = self.b.ins().band_imm_u(bits, 0x7FFF_FFFF);
        let is_nan = self.b.ins().icmp_imm_u(IntCC::UnsignedGreaterThan, abs, 0x7F80_0000);
        let r = match d {
            DType::BF16 => {
                let quiet = self.b.ins().bor_imm_u(bits, 0x0040_0000);
                let nan = self.b.ins().band_imm_u(quiet, 0xFFFF_0000i64);
                let r = self.round_bits(bits, 16);
                self.b.ins().select(is_nan, nan, r)
            }
            DType::F16 => {
                let sign = self.b.ins().band_imm_u(bits, 0x8000_0000i64);
                // Normal range: round the mantissa to 10 bits; past 65504 is infinite.
                let r = self.round_bits(abs, 13);
                let inf = self.b.ins().iconst(types::I32, 0x7F80_0000);
                let over = self.b.ins().icmp_imm_u(IntCC::UnsignedGreaterThan, r, 0x477F_E000);
                let normal = self.b.ins().select(over, inf, r);
                // Subnormal range (below 2^-14): round to a multiple of 2^-24 by adding and
                // removing 0.5, whose ulp is 2^-24 (the hardware rounds to nearest even).
                let a = self.b.ins().bitcast(types::F32, little(), abs);
                let half = self.b.ins().f32const(0.5);
                let s = self.b.ins().fadd(a, half);
                let s = self.b.ins().fsub(s, half);
                let sub = self.b.ins().bitcast(types::I32, little(), s);
                let small = self.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, abs, 0x3880_0000);
                let m = self.b.ins().select(small, sub, normal);
                let quiet = self.b.ins().bor_imm_u(abs, 0x0040_0000);
                let nan = self.b.ins().band_imm_u(quiet, 0x7FFF_E000);
                let m = self.b.ins().select(is_nan, nan, m);
                self.b.ins().bor(m, sign)
            }
            DType::F32
            | DType::F64
            | DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
            | DType::U8
            | DType::U32
            | DType::Bool
            | DType::Key
            | DType::C64
            | DType::C128 => return x,
        };
        self.b.ins().bitcast(types::F32, little(), r)
    }

    /// `bits` rounded to nearest even at bit `shift` (the low `shift` bits cleared).
    fn round_bits(&mut self, bits: Value, shift: i64) -> Value {
        let lsb = self.b.ins().ushr_imm_u(bits, shift);
        let lsb = self.b.ins().band_imm_u(lsb, 1);
        let bias = self.b.ins().iadd_imm_u(lsb, (1 << (shift - 1)) - 1);
        let sum = self.b.ins().iadd(bits, bias);
        self.b.ins().band_imm_u(sum, (!((1u32 << shift) - 1)) as i64)
    }
}
