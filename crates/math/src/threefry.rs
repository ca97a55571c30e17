//! Threefry-2x32, the block cipher behind JAX's default PRNG (`impl=fry`), shared by the
//! interpreter and the JIT's runtime so both compute the same bits.

use ndarray::{ArrayD, ArrayViewD, IxDyn, Zip};

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

/// `threefry2x32 k1 k2 x1 x2` with its operands broadcast to `shape` (rank-0 operands and
/// extents of 1 stretch): the two words of `threefry2x32([k1, k2], [x1, x2])` at each element.
pub fn threefry2x32_arrays(shape: &[usize], operands: [ArrayViewD<'_, u32>; 4]) -> Result<[ArrayD<u32>; 2], String> {
    let stretch = |a: &ArrayViewD<'_, u32>| -> Result<ArrayD<u32>, String> {
        let b = a.broadcast(IxDyn(shape));
        b.map(|b| b.to_owned())
            .ok_or_else(|| format!("threefry2x32: an operand of shape {:?} does not broadcast to {shape:?}", a.shape()))
    };
    let [k1, k2, x1, x2] = &operands;
    let (k1, k2, x1, x2) = (stretch(k1)?, stretch(k2)?, stretch(x1)?, stretch(x2)?);
    let mut y0 = ArrayD::zeros(IxDyn(shape));
    let mut y1 = ArrayD::zeros(IxDyn(shape));
    Zip::from(&mut y0).and(&mut y1).and(&k1).and(&k2).and(&x1).and(&x2).for_each(|y0, y1, &k1, &k2, &x1, &x2| {
        [*y0, *y1] = threefry2x32([k1, k2], [x1, x2]);
    });
    Ok([y0, y1])
}

/// `iota_2x32_shape[shape]`: the row-major index of each element as a 64-bit count, in two
/// arrays (the high words, the low words).
pub fn iota_2x32(shape: &[usize]) -> [ArrayD<u32>; 2] {
    let n: usize = shape.iter().product();
    let words: Vec<[u32; 2]> = (0..n).map(threefry_counter).collect();
    let part =
        |w: usize| ArrayD::from_shape_vec(IxDyn(shape), words.iter().map(|c| c[w]).collect()).expect("n elements");
    [part(0), part(1)]
}
