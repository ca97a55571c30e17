//! The PRNG primitives in the runtime, over whole row-major buffers: the same threefry
//! (`remat_math`) as the interpreter's, element for element.

use ndarray::{ArrayViewD, IxDyn, Zip};
use remat_ir::{DType, PrngKey};
use remat_math::{threefry2x32, threefry_bits, threefry_counter, threefry_seed};

use super::step::Bases;

/// `random_seed`.
pub(super) fn seed(b: &Bases) {
    {
        {
            let d = b.in_aval(0).dtype;
            let mut out = b.view_mut::<PrngKey>(0);
            let seeds = integers(b, 0);
            Zip::from(&mut out).and(&seeds).for_each(|o, &s| *o = PrngKey(threefry_seed(s, d.bits())));
        }
    }
}

/// `random_wrap`.
pub(super) fn wrap(b: &Bases) {
    {
        {
            let words = b.view::<u32>(0);
            let mut out = b.view_mut::<PrngKey>(0);
            for (o, w) in out.iter_mut().zip(words.as_slice().unwrap_or(&[]).chunks_exact(2)) {
                *o = PrngKey([w[0], w[1]]);
            }
        }
    }
}

/// `random_unwrap`.
pub(super) fn unwrap(b: &Bases) {
    {
        {
            let keys = b.view::<PrngKey>(0);
            let mut out = b.view_mut::<u32>(0);
            for (o, k) in out.iter_mut().zip(keys.iter().flat_map(|k| k.0)) {
                *o = k;
            }
        }
    }
}

/// `random_split[shape=S]`.
pub(super) fn split(b: &Bases, shape: &[usize]) {
    {
        {
            let n: usize = shape.iter().product();
            let keys = b.view::<PrngKey>(0);
            let mut out = b.view_mut::<PrngKey>(0);
            let split = keys.iter().flat_map(|k| (0..n).map(move |i| PrngKey(threefry2x32(k.0, threefry_counter(i)))));
            for (o, k) in out.iter_mut().zip(split) {
                *o = k;
            }
        }
    }
}

/// `random_fold_in`.
pub(super) fn fold_in(b: &Bases) {
    {
        {
            let keys = b.view::<PrngKey>(0);
            let msgs = integers(b, 1);
            let mut out = b.view_mut::<PrngKey>(0);
            let shape = out.shape().to_vec();
            let (Some(k), Some(m)) = (keys.broadcast(IxDyn(&shape)), msgs.broadcast(IxDyn(&shape))) else {
                return; // the verifier checked that they broadcast
            };
            Zip::from(&mut out).and(&k).and(&m).for_each(|o, k, &m| *o = PrngKey(threefry2x32(k.0, [0, m as u32])));
        }
    }
}

/// `random_bits[bit_width=W shape=S]`.
pub(super) fn bits(b: &Bases, shape: &[usize]) {
    {
        {
            let n: usize = shape.iter().product();
            let keys = b.view::<PrngKey>(0);
            let words = keys.iter().flat_map(|k| (0..n).map(move |i| threefry_bits(k.0, i)));
            if b.out_aval(0).dtype == DType::U8 {
                let mut out = b.view_mut::<u8>(0);
                for (o, w) in out.iter_mut().zip(words) {
                    *o = w as u8;
                }
            } else {
                let mut out = b.view_mut::<u32>(0);
                for (o, w) in out.iter_mut().zip(words) {
                    *o = w;
                }
            }
        }
    }
}

/// Operand `i`, an integer array, as exact `i128`s.
fn integers(b: &Bases, i: usize) -> ndarray::ArrayD<i128> {
    fn of<T: Copy + Into<i128>>(v: ArrayViewD<'_, T>) -> ndarray::ArrayD<i128> {
        v.mapv(Into::into)
    }
    match b.in_aval(i).dtype {
        DType::I8 => of(b.view::<i8>(i)),
        DType::I16 => of(b.view::<i16>(i)),
        DType::I64 => of(b.view::<i64>(i)),
        DType::U8 => of(b.view::<u8>(i)),
        DType::U32 => of(b.view::<u32>(i)),
        DType::I32
        | DType::F32
        | DType::F64
        | DType::BF16
        | DType::F16
        | DType::Bool
        | DType::Key
        | DType::C64
        | DType::C128 => of(b.view::<i32>(i)),
    }
}

/// `threefry2x32 k1 k2 x1 x2`: `remat_math`'s, computed whole before either result is
/// written (a result may share a buffer with an operand).
pub(super) fn threefry(b: &Bases) {
    let shape = b.desc.out_avals[0].shape.clone();
    let [y0, y1] = remat_math::threefry2x32_arrays(&shape, [b.view(0), b.view(1), b.view(2), b.view(3)])
        .unwrap_or_else(|e| panic!("a verified threefry2x32: {e}"));
    b.view_mut::<u32>(0).assign(&y0);
    b.view_mut::<u32>(1).assign(&y1);
}

/// `iota_2x32_shape[shape=S]`.
pub(super) fn iota_2x32(b: &Bases, shape: &[usize]) {
    let [hi, lo] = remat_math::iota_2x32(shape);
    b.view_mut::<u32>(0).assign(&hi);
    b.view_mut::<u32>(1).assign(&lo);
}

/// `rng_bit_generator`: `remat_math`'s, computed whole before the results are written.
pub(super) fn rng_bit_generator(b: &Bases, algorithm: remat_ir::RngAlgorithm, dtype: DType, shape: &[usize]) {
    let words: Vec<u32> = b.view::<u32>(0).iter().copied().collect();
    let key: [u32; 4] = words.try_into().unwrap_or_else(|_| panic!("a verified rng_bit_generator has a u32[4] key"));
    let (new_key, bits) = remat_math::rng_bit_generator_key(algorithm, key, shape, dtype.bits() as u32);
    for (o, k) in b.view_mut::<u32>(0).iter_mut().zip(new_key) {
        *o = k;
    }
    match dtype {
        DType::U8 => b.view_mut::<u8>(1).iter_mut().zip(&bits).for_each(|(o, &w)| *o = w as u8),
        _ => b.view_mut::<u32>(1).iter_mut().zip(&bits).for_each(|(o, &w)| *o = w as u32),
    }
}
