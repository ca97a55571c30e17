//! Seeded pseudo-random arrays: the same seed gives the same arrays on every machine.

use ndarray::{ArrayD, IxDyn};
use remat_ir::{Array, Aval, DType};

/// Deterministic pseudo-random values in [-1, 1] (a 64-bit LCG).
#[derive(Debug)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }

    /// An array of `aval`: floats in [-1, 1], integers in -4..=4 (0..=4 unsigned),
    /// booleans, keys of random words, complex numbers with both parts in [-1, 1].
    pub fn array(&mut self, aval: &Aval) -> Array {
        let shape = IxDyn(&aval.shape);
        match aval.dtype {
            DType::F32 => Array::F32(ArrayD::from_shape_fn(shape, |_| self.next_f64() as f32)),
            DType::F64 => Array::F64(ArrayD::from_shape_fn(shape, |_| self.next_f64())),
            DType::I32 => Array::I32(ArrayD::from_shape_fn(shape, |_| (self.next_f64() * 5.0) as i32)),
            DType::BF16 => Array::BF16(ArrayD::from_shape_fn(shape, |_| remat_ir::bf16::from_f64(self.next_f64()))),
            DType::F16 => Array::F16(ArrayD::from_shape_fn(shape, |_| remat_ir::f16::from_f64(self.next_f64()))),
            DType::I8 => Array::I8(ArrayD::from_shape_fn(shape, |_| (self.next_f64() * 5.0) as i8)),
            DType::I16 => Array::I16(ArrayD::from_shape_fn(shape, |_| (self.next_f64() * 5.0) as i16)),
            DType::I64 => Array::I64(ArrayD::from_shape_fn(shape, |_| (self.next_f64() * 5.0) as i64)),
            DType::U8 => Array::U8(ArrayD::from_shape_fn(shape, |_| (self.next_f64().abs() * 5.0) as u8)),
            DType::U32 => Array::U32(ArrayD::from_shape_fn(shape, |_| (self.next_f64().abs() * 5.0) as u32)),
            DType::Bool => Array::Bool(ArrayD::from_shape_fn(shape, |_| self.next_f64() > 0.0)),
            DType::Key => Array::Key(ArrayD::from_shape_fn(shape, |_| {
                let word = |r: &mut Rng| (r.next_f64().abs() * u32::MAX as f64) as u32;
                remat_ir::PrngKey([word(self), word(self)])
            })),
            DType::C64 => Array::C64(ArrayD::from_shape_fn(shape, |_| {
                remat_ir::c64::new(self.next_f64() as f32, self.next_f64() as f32)
            })),
            DType::C128 => {
                Array::C128(ArrayD::from_shape_fn(shape, |_| remat_ir::c128::new(self.next_f64(), self.next_f64())))
            }
        }
    }
}
