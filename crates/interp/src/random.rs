//! The PRNG primitives on threefry keys, bit for bit as JAX 0.10.2 computes them with its
//! defaults (`jax_threefry_partitionable=True`; `jax/_src/random/threefry2x32.py`).
//!
//! Every primitive applies per key: a key array's dimensions lead the result's, and each
//! key's block of results follows in row-major order. The element at row-major index `i` of
//! a block hashes the 64-bit counter `i` as the pair `(i >> 32, i & 0xFFFFFFFF)`
//! (`prng.iota_2x32_shape`).

use ndarray::{ArrayD, IxDyn};
use remat_ir::{Array, DType, PrngKey};
use remat_math::arrays::broadcast;
pub use remat_math::threefry2x32;
use remat_math::{threefry_counter, threefry_seed};

use crate::elem::{checked_size, operands, typed, Elem};
use remat_math::with_dtype;

/// The counter pair of the 64-bit row-major index `i`.
fn counter(i: usize) -> [u32; 2] {
    threefry_counter(i)
}

/// `random_seed`: JAX's `threefry_seed`, `[seed >> 32, seed & 0xFFFFFFFF]` in the seed's
/// own dtype. A shift by 32 of a 32-bit or narrower integer is 0 in XLA, so such a seed
/// gives `[0, seed mod 2^32]` (negative seeds sign-extended: `-1` gives `[0, 4294967295]`).
pub(crate) fn random_seed(args: &[&Array]) -> Result<Array, String> {
    let [seeds] = operands(args)?;
    let dtype = seeds.dtype();
    if !dtype.is_integer() {
        return Err(format!("seeds must be integers, got {}", seeds.aval()));
    }
    with_dtype!(dtype, T => {
        let xs = typed::<T>(seeds)?;
        Ok(Array::Key(xs.mapv(|s| {
            PrngKey(threefry_seed(s.to_i128().unwrap_or(0), dtype.bits()))
        })))
    })
}

/// `random_wrap`: `u32[K,2]` to `key<fry>[K]`.
pub(crate) fn random_wrap(args: &[&Array]) -> Result<Array, String> {
    let [data] = operands(args)?;
    let words = typed::<u32>(data)?;
    let Some((&2, keys)) = words.shape().split_last() else {
        return Err(format!("key data must have a last dimension of size 2, got {}", data.aval()));
    };
    let flat: Vec<u32> = words.iter().copied().collect();
    let keys_flat = flat.chunks_exact(2).map(|w| PrngKey([w[0], w[1]])).collect();
    from_vec(keys, keys_flat)
}

/// `random_unwrap`: `key<fry>[K]` to `u32[K,2]`.
pub(crate) fn random_unwrap(args: &[&Array]) -> Result<Array, String> {
    let [keys] = operands(args)?;
    let keys = typed::<PrngKey>(keys)?;
    let shape = [keys.shape(), &[2]].concat();
    from_vec(&shape, keys.iter().flat_map(|k| k.0).collect())
}

/// `random_split[shape=S]`: key `i` of a key's block is `threefry2x32(key, counter(i))`
/// (`_threefry_split_foldlike`).
pub(crate) fn random_split(shape: &[usize], args: &[&Array]) -> Result<Array, String> {
    let [keys] = operands(args)?;
    let keys = typed::<PrngKey>(keys)?;
    let n = checked_size(shape)?;
    let out_shape = [keys.shape(), shape].concat();
    checked_size(&out_shape)?;
    let out = keys.iter().flat_map(|k| (0..n).map(move |i| PrngKey(threefry2x32(k.0, counter(i))))).collect();
    from_vec(&out_shape, out)
}

/// `random_fold_in keys msgs`: `threefry2x32(key, (0, msg))` per broadcast pair, the message
/// taken as a `u32` (`threefry_fold_in` hashes `threefry_seed(uint32(msg))`).
pub(crate) fn random_fold_in(args: &[&Array]) -> Result<Array, String> {
    let [keys, msgs] = operands(args)?;
    let keys = typed::<PrngKey>(keys)?;
    if !msgs.dtype().is_integer() {
        return Err(format!("the message must be an integer, got {}", msgs.aval()));
    }
    let msgs: ArrayD<u32> = with_dtype!(msgs.dtype(), T => typed::<T>(msgs)?.mapv(|m| m.to_i128().unwrap_or(0) as u32));
    let shape = broadcast(keys.shape(), msgs.shape())
        .ok_or_else(|| format!("key shape {:?} and message shape {:?} do not broadcast", keys.shape(), msgs.shape()))?;
    let (Some(k), Some(m)) = (keys.broadcast(IxDyn(&shape)), msgs.broadcast(IxDyn(&shape))) else {
        return Err(format!("key shape {:?} and message shape {:?} do not broadcast", keys.shape(), msgs.shape()));
    };
    let out = k.iter().zip(m.iter()).map(|(k, &m)| PrngKey(threefry2x32(k.0, [0, m]))).collect();
    from_vec(&shape, out)
}

/// `threefry2x32 k1 k2 x1 x2`: the hash of the counters `(x1, x2)` under the keys
/// `(k1, k2)` at each element of the operands' broadcast shape (`remat_math`'s, which the
/// JIT runs too).
pub(crate) fn threefry2x32_eqn(args: &[&Array]) -> Result<Vec<Array>, String> {
    let ops: [&Array; 4] = operands(args)?;
    let mut shape: Vec<usize> = Vec::new();
    for a in ops {
        shape = broadcast(&shape, a.shape())
            .ok_or_else(|| format!("threefry2x32: operand shapes {:?} do not broadcast", ops.map(|a| a.aval())))?;
    }
    let words = ops.map(|a| typed::<u32>(a).map(|a| a.view()));
    let [k1, k2, x1, x2] = words;
    let [y0, y1] = remat_math::threefry2x32_arrays(&shape, [k1?, k2?, x1?, x2?])?;
    Ok(vec![Array::U32(y0), Array::U32(y1)])
}

/// `rng_bit_generator`: `remat_math`'s XLA bit generators (which the JIT runs too) on the
/// `u32[4]` key: the new key and the bits.
pub(crate) fn rng_bit_generator(
    algorithm: remat_ir::RngAlgorithm,
    dtype: DType,
    shape: &[usize],
    args: &[&Array],
) -> Result<Vec<Array>, String> {
    let [key] = operands(args)?;
    let words: Vec<u32> = typed::<u32>(key)?.iter().copied().collect();
    let key: [u32; 4] = words.try_into().map_err(|_| "rng_bit_generator: the key must be u32[4]".to_string())?;
    let (new_key, bits) = remat_math::rng_bit_generator_key(algorithm, key, shape, dtype.bits() as u32);
    let new_key = Array::U32(ArrayD::from_shape_vec(IxDyn(&[4]), new_key.to_vec()).map_err(|e| e.to_string())?);
    let bits = match dtype {
        DType::U8 => Array::U8(
            ArrayD::from_shape_vec(IxDyn(shape), bits.iter().map(|&b| b as u8).collect()).map_err(|e| e.to_string())?,
        ),
        _ => Array::U32(
            ArrayD::from_shape_vec(IxDyn(shape), bits.iter().map(|&b| b as u32).collect())
                .map_err(|e| e.to_string())?,
        ),
    };
    Ok(vec![new_key, bits])
}

/// `random_bits[bit_width=W shape=S]`: element `i` of a key's block is `y0 ^ y1` of
/// `threefry2x32(key, counter(i))`, truncated to its low `W` bits
/// (`_threefry_random_bits_partitionable`). remat has `u8` and `u32`, so `W` is 8 or 32.
pub(crate) fn random_bits(bit_width: u32, shape: &[usize], args: &[&Array]) -> Result<Array, String> {
    let [keys] = operands(args)?;
    let keys = typed::<PrngKey>(keys)?;
    let dtype = remat_ir::random_bits_dtype(bit_width).map_err(|e| e.message)?;
    let n = checked_size(shape)?;
    let out_shape = [keys.shape(), shape].concat();
    checked_size(&out_shape)?;
    let words = keys.iter().flat_map(|k| {
        (0..n).map(move |i| {
            let [y0, y1] = threefry2x32(k.0, counter(i));
            y0 ^ y1
        })
    });
    match dtype {
        DType::U8 => from_vec(&out_shape, words.map(|w| w as u8).collect()),
        _ => from_vec(&out_shape, words.collect::<Vec<u32>>()),
    }
}

fn from_vec<T: Elem>(shape: &[usize], data: Vec<T>) -> Result<Array, String> {
    ArrayD::from_shape_vec(IxDyn(shape), data).map(T::wrap).map_err(|e| e.to_string())
}
