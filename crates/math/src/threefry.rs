//! Threefry-2x32, the block cipher behind JAX's default PRNG (`impl=fry`), shared by the
//! interpreter and the JIT's runtime so both compute the same bits.

/// The Threefry-2x32 block cipher with 20 rounds (Random123's `threefry2x32-20`, JAX's
/// `_threefry2x32_lowering`): the counter pair `x` encrypted under `key`, mod 2^32.
pub fn threefry2x32(key: [u32; 2], x: [u32; 2]) -> [u32; 2] {
    const ROTATIONS: [[u32; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];
    let ks = [key[0], key[1], key[0] ^ key[1] ^ 0x1BD1_1BDA];
    let (mut x0, mut x1) = (x[0].wrapping_add(ks[0]), x[1].wrapping_add(ks[1]));
    for i in 0..5 {
        for r in ROTATIONS[i % 2] {
            x0 = x0.wrapping_add(x1);
            x1 = x1.rotate_left(r) ^ x0;
        }
        x0 = x0.wrapping_add(ks[(i + 1) % 3]);
        x1 = x1.wrapping_add(ks[(i + 2) % 3]).wrapping_add(i as u32 + 1);
    }
    [x0, x1]
}

/// The counter pair of the 64-bit row-major index `i` (`prng.iota_2x32_shape`).
pub fn threefry_counter(i: usize) -> [u32; 2] {
    let i = i as u64;
    [(i >> 32) as u32, i as u32]
}

/// `random_seed` of one integer seed (as `i128`, exact) of a dtype `bits` wide: JAX's
/// `threefry_seed`, `[seed >> 32, seed & 0xFFFFFFFF]`; a shift by 32 of a 32-bit or
/// narrower integer is 0 in XLA, so such a seed gives `[0, seed mod 2^32]`.
pub fn threefry_seed(seed: i128, bits: usize) -> [u32; 2] {
    let hi = if bits > 32 { (seed as u64 >> 32) as u32 } else { 0 };
    [hi, seed as u32]
}

/// Word `i` of `random_bits` from `key`: `y0 ^ y1` of `threefry2x32(key, counter(i))`.
pub fn threefry_bits(key: [u32; 2], i: usize) -> u32 {
    let [y0, y1] = threefry2x32(key, threefry_counter(i));
    y0 ^ y1
}
