//! `convert_element_type` between every pair of dtypes, in scalar code, with the
//! interpreter's semantics bit for bit.
//!
//! Integers to integers wrap (two's complement: `ireduce`, or `sextend`/`uextend` by the
//! source's signedness); floats to integers truncate toward zero and saturate, NaN gives 0;
//! numbers to `bool` are `x != 0` (NaN gives `true`); `bool` to numbers is 0 or 1. Integers
//! become floats through `f64` (exact for 32 bits and less; an `i64` rounds once to `f64`,
//! then to the target, as the interpreter's `x as f64 as T`), and every value becomes a
//! 16-bit float by way of `f32`: the `f32` value, rounded to nearest even once more.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, InstBuilder, Type, Value};
use remat_ir::DType;

use super::{clif_type, Fx};

/// Whether `d` is an integer whose instructions read the sign (`i8` .. `i64`).
pub(crate) fn is_signed(d: DType) -> bool {
    matches!(d, DType::I8 | DType::I16 | DType::I32 | DType::I64)
}

/// The smallest and largest values of an integer dtype (`bool`: 0 and 1).
pub(crate) fn int_range(d: DType) -> (i64, i64) {
    match d {
        DType::I8 => (i8::MIN as i64, i8::MAX as i64),
        DType::I16 => (i16::MIN as i64, i16::MAX as i64),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::I64 => (i64::MIN, i64::MAX),
        DType::U8 => (0, u8::MAX as i64),
        DType::U32 => (0, u32::MAX as i64),
        DType::Bool => (0, 1),
        DType::F32 | DType::F64 | DType::BF16 | DType::F16 | DType::Key | DType::C64 | DType::C128 => (0, 0),
    }
}

impl Fx<'_, '_> {
    /// An integer constant of register type `ty`, `x` truncated to its width.
    pub(crate) fn int_const(&mut self, ty: Type, x: i64) -> Value {
        let bits = ty.bits();
        let x = if bits >= 64 { x } else { x & ((1i64 << bits) - 1) };
        self.b.ins().iconst(ty, x)
    }

    /// `convert_element_type` in scalar code (the header's rules).
    pub(crate) fn convert(&mut self, from: DType, to: DType, x: Value) -> Value {
        if from == to || from == DType::Key || to == DType::Key {
            // Keys never convert (the shape rules reject it); equal dtypes are the identity.
            return x;
        }
        if to.is_narrow_float() {
            let f = self.convert(from, DType::F32, x);
            return self.round_narrow(to, f);
        }
        let to_ty = clif_type(to);
        let from_ty = clif_type(from);
        if from.is_float() {
            // Narrow floats are f32 registers already.
            let from_ty = if from.is_narrow_float() { types::F32 } else { from_ty };
            return match to {
                DType::F32 | DType::F64 => match (from_ty, to_ty) {
                    (types::F32, types::F64) => self.b.ins().fpromote(types::F64, x),
                    (types::F64, types::F32) => self.b.ins().fdemote(types::F32, x),
                    _ => x,
                },
                DType::Bool => {
                    let zero =
                        if from_ty == types::F64 { self.b.ins().f64const(0.0) } else { self.b.ins().f32const(0.0) };
                    self.b.ins().fcmp(FloatCC::NotEqual, x, zero)
                }
                DType::I64 => self.b.ins().fcvt_to_sint_sat(types::I64, x),
                DType::I32 => self.b.ins().fcvt_to_sint_sat(types::I32, x),
                DType::U32 => self.b.ins().fcvt_to_uint_sat(types::I32, x),
                DType::I8 | DType::I16 | DType::U8 => {
                    // Saturate in i32 (NaN gives 0), clamp to the target's range, narrow.
                    let i = self.b.ins().fcvt_to_sint_sat(types::I32, x);
                    let (lo, hi) = int_range(to);
                    let lo = self.b.ins().iconst(types::I32, lo);
                    let hi = self.b.ins().iconst(types::I32, hi);
                    let i = self.b.ins().smax(i, lo);
                    let i = self.b.ins().smin(i, hi);
                    self.b.ins().ireduce(to_ty, i)
                }
                DType::BF16 | DType::F16 | DType::Key | DType::C64 | DType::C128 => x,
            };
        }
        // From an integer or bool.
        match to {
            DType::Bool => self.b.ins().icmp_imm_s(IntCC::NotEqual, x, 0),
            DType::F32 | DType::F64 => {
                let wide = self.int_to_i64(from, x);
                // Every integer fits an i64 exactly (`u32` too), and converts with one rounding.
                let f = self.b.ins().fcvt_from_sint(types::F64, wide);
                if to == DType::F32 {
                    self.b.ins().fdemote(types::F32, f)
                } else {
                    f
                }
            }
            DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 | DType::U32 => {
                let (fb, tb) = (from_ty.bits(), to_ty.bits());
                if tb < fb {
                    self.b.ins().ireduce(to_ty, x)
                } else if tb > fb {
                    if is_signed(from) {
                        self.b.ins().sextend(to_ty, x)
                    } else {
                        self.b.ins().uextend(to_ty, x)
                    }
                } else {
                    x
                }
            }
            DType::BF16 | DType::F16 | DType::Key | DType::C64 | DType::C128 => x,
        }
    }

    /// An integer or `bool` register widened to `i64` by its signedness (exact).
    fn int_to_i64(&mut self, from: DType, x: Value) -> Value {
        if clif_type(from) == types::I64 {
            x
        } else if is_signed(from) {
            self.b.ins().sextend(types::I64, x)
        } else {
            self.b.ins().uextend(types::I64, x)
        }
    }
}
