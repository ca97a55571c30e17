//! XLA's `RngBitGenerator` on CPU (`lax.rng_bit_generator`): random bits from a `u64[2]`
//! state (JAX passes a `u32[4]` key, its words pairwise little-endian), by ThreeFry-2x32
//! or Philox-4x32-10, with the updated state. Shared by the interpreter and the JIT's runtime.
//!
//! What the algorithms compute, as XLA's `rng_bit_generator_expander` and its bit generators
//! define them (JAX 0.10.2's values are the tests'):
//! - the key is `state[0]`, kept in the new state;
//! - ThreeFry: the counter is `state[1]`; 32-bit (and narrower) bits halve the requested
//!   shape along its first even axis (else its longest) and encrypt the counters
//!   `state[1] + i` of the half shape in row-major order, the two output words interleaved
//!   along that axis; 64-bit bits encrypt one counter per element, low word first; the
//!   counter advances by the number of counters used;
//! - Philox: the 128-bit counter is `(state[1], state[0])` (low, high); each counter gives
//!   four 32-bit words in order, 64-bit bits pair them low word first; the new state's
//!   `state[1]` is the low 64 bits of the counter advanced by the number of blocks;
//! - 8- and 16-bit bits are the low bits of the 32-bit ones.

use remat_ir::RngAlgorithm;

use crate::threefry2x32;

/// The `u64[2]` state of a `u32[4]` key.
pub fn rbg_state_of_key(key: [u32; 4]) -> [u64; 2] {
    [u64::from(key[0]) | u64::from(key[1]) << 32, u64::from(key[2]) | u64::from(key[3]) << 32]
}

/// The `u32[4]` key of a `u64[2]` state.
pub fn rbg_key_of_state(state: [u64; 2]) -> [u32; 4] {
    [state[0] as u32, (state[0] >> 32) as u32, state[1] as u32, (state[1] >> 32) as u32]
}

fn halves(x: u64) -> [u32; 2] {
    [x as u32, (x >> 32) as u32]
}

fn join(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | u64::from(hi) << 32
}

/// `rng_bit_generator` of a `u32[4]` key: the new key and the bits (see
/// [`rng_bit_generator`]).
pub fn rng_bit_generator_key(
    algorithm: RngAlgorithm,
    key: [u32; 4],
    shape: &[usize],
    bits: u32,
) -> ([u32; 4], Vec<u64>) {
    let (state, out) = rng_bit_generator(algorithm, rbg_state_of_key(key), shape, bits);
    (rbg_key_of_state(state), out)
}

/// Random bits of `shape`, `bits` wide (8, 16, 32 or 64; each as a `u64`, row-major), from
/// `state` by `algorithm` (`RNG_DEFAULT` is Philox, as on XLA's CPU), and the new state.
pub fn rng_bit_generator(algorithm: RngAlgorithm, state: [u64; 2], shape: &[usize], bits: u32) -> ([u64; 2], Vec<u64>) {
    let philox = matches!(algorithm, RngAlgorithm::Default | RngAlgorithm::Philox);
    let (new_state, words) = match (philox, bits) {
        (false, 64) => threefry64(state, shape),
        (false, _) => threefry32(state, shape),
        (true, 64) => philox64(state, shape),
        (true, _) => philox32(state, shape),
    };
    let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
    (new_state, words.into_iter().map(|w| w & mask).collect())
}

fn threefry64(state: [u64; 2], shape: &[usize]) -> ([u64; 2], Vec<u64>) {
    let n: usize = shape.iter().product();
    let key = halves(state[0]);
    let out = (0..n)
        .map(|i| {
            let [y0, y1] = threefry2x32(key, halves(state[1].wrapping_add(i as u64)));
            join(y0, y1)
        })
        .collect();
    ([state[0], state[1].wrapping_add(n as u64)], out)
}

fn threefry32(state: [u64; 2], shape: &[usize]) -> ([u64; 2], Vec<u64>) {
    let key = halves(state[0]);
    let n: usize = shape.iter().product();
    if shape.is_empty() {
        let [y0, _] = threefry2x32(key, halves(state[1]));
        return ([state[0], state[1].wrapping_add(1)], vec![u64::from(y0)]);
    }
    // The split axis: the first even one, else the first longest.
    let split = match shape.iter().position(|d| d % 2 == 0) {
        Some(k) => k,
        None => (0..shape.len()).fold(0, |best, k| if shape[k] > shape[best] { k } else { best }),
    };
    let mut half = shape.to_vec();
    half[split] = shape[split].div_ceil(2);
    let half_n: usize = half.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut index = vec![0usize; shape.len()];
    for _ in 0..n {
        // The row-major position in the half shape, the word by the parity on the split axis.
        let mut flat = 0usize;
        for (k, &i) in index.iter().enumerate() {
            let i = if k == split { i / 2 } else { i };
            flat = flat * half[k] + i;
        }
        let y = threefry2x32(key, halves(state[1].wrapping_add(flat as u64)));
        out.push(u64::from(y[index[split] % 2]));
        for k in (0..shape.len()).rev() {
            index[k] += 1;
            if index[k] < shape[k] {
                break;
            }
            index[k] = 0;
        }
    }
    ([state[0], state[1].wrapping_add(half_n as u64)], out)
}

/// Philox-4x32 with 10 rounds of `counter` under `key`.
pub fn philox4x32(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    const W: [u32; 2] = [0x9E37_79B9, 0xBB67_AE85];
    const M: [u64; 2] = [0xD251_1F53, 0xCD9E_8D57];
    let (mut x, mut k) = (counter, key);
    for _ in 0..10 {
        let p0 = u64::from(x[0]) * M[0];
        let p1 = u64::from(x[2]) * M[1];
        x = [(p1 >> 32) as u32 ^ x[1] ^ k[0], p1 as u32, (p0 >> 32) as u32 ^ x[3] ^ k[1], p0 as u32];
        k = [k[0].wrapping_add(W[0]), k[1].wrapping_add(W[1])];
    }
    x
}

/// `blocks` Philox blocks from the counter `(state[1], state[0])`, and the new state.
fn philox_blocks(state: [u64; 2], blocks: usize) -> ([u64; 2], Vec<[u32; 4]>) {
    let key = halves(state[0]);
    let counter = u128::from(state[1]) | u128::from(state[0]) << 64;
    let out = (0..blocks)
        .map(|i| {
            let c = counter.wrapping_add(i as u128);
            philox4x32([c as u32, (c >> 32) as u32, (c >> 64) as u32, (c >> 96) as u32], key)
        })
        .collect();
    ([state[0], counter.wrapping_add(blocks as u128) as u64], out)
}

fn philox32(state: [u64; 2], shape: &[usize]) -> ([u64; 2], Vec<u64>) {
    let n: usize = shape.iter().product();
    let (new_state, blocks) = philox_blocks(state, n.div_ceil(4));
    (new_state, blocks.iter().flatten().take(n).map(|&w| u64::from(w)).collect())
}

fn philox64(state: [u64; 2], shape: &[usize]) -> ([u64; 2], Vec<u64>) {
    let n: usize = shape.iter().product();
    let (new_state, blocks) = philox_blocks(state, (2 * n).div_ceil(4));
    let out = blocks.iter().flat_map(|b| [join(b[0], b[1]), join(b[2], b[3])]).take(n).collect();
    (new_state, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// JAX 0.10.2 on CPU: `lax.rng_bit_generator(u32[1, 2, 3, 4], (4,), uint32, algorithm)`.
    #[test]
    fn jax_s_bits_and_states() {
        for algorithm in [RngAlgorithm::Default, RngAlgorithm::Philox] {
            let (s, b) = rng_bit_generator_key(algorithm, [1, 2, 3, 4], &[4], 32);
            assert_eq!(s, [1, 2, 4, 4]);
            assert_eq!(b, [512747620, 1298009047, 1267190206, 761827841]);
        }
        let (s, b) = rng_bit_generator_key(RngAlgorithm::ThreeFry, [1, 2, 3, 4], &[4], 32);
        assert_eq!(s, [1, 2, 5, 4]);
        assert_eq!(b, [1576285164, 2249660814, 740599976, 2425682526]);
    }
}
