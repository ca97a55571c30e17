//! The digits data set shipped beside this file (`data/digits.csv.gz`, see `data/README.md`):
//! read, checked, and split into a training and a held-out set by a `jax.random`
//! permutation of its rows.
//!
//! Shared by the `train` example and `crates/remat/tests/train.rs`.

use std::io::Read;
use std::path::{Path, PathBuf};

use remat::ndarray::{ArrayD, IxDyn};
use remat::{random, Array};

/// Pixels per image (8x8, row-major) and the number of classes.
pub const PIXELS: usize = 64;
pub const CLASSES: usize = 10;

/// Images as `f32` pixel values (0..16) and their classes.
#[derive(Clone, Debug)]
pub struct Digits {
    /// `rows * PIXELS` values, row-major.
    pub pixels: Vec<f32>,
    pub labels: Vec<i32>,
}

impl Digits {
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// The rows at `idx`, in that order.
    pub fn rows(&self, idx: &[usize]) -> Digits {
        let mut pixels = Vec::with_capacity(idx.len() * PIXELS);
        for &i in idx {
            pixels.extend_from_slice(&self.pixels[i * PIXELS..(i + 1) * PIXELS]);
        }
        Digits { pixels, labels: idx.iter().map(|&i| self.labels[i]).collect() }
    }

    /// `f32[n,64]` images and `i32[n]` labels.
    pub fn arrays(&self) -> (Array, Array) {
        let n = self.len();
        let images = ArrayD::from_shape_vec(IxDyn(&[n, PIXELS]), self.pixels.clone()).expect("n * 64 pixels");
        let labels = ArrayD::from_shape_vec(IxDyn(&[n]), self.labels.clone()).expect("n labels");
        (Array::F32(images), Array::I32(labels))
    }
}

/// Where the data file is, from this crate's directory.
pub fn default_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/train/data/digits.csv.gz")
}

/// Reads the gzipped CSV: every line 64 pixels in 0..=16 and a class in 0..=9.
pub fn load(path: &Path) -> Result<Digits, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: not a gzipped text: {e}", path.display()))?;
    let mut digits = Digits { pixels: Vec::new(), labels: Vec::new() };
    for (i, line) in text.lines().enumerate() {
        let at = |msg: String| format!("{}:{}: {msg}", path.display(), i + 1);
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() != PIXELS + 1 {
            return Err(at(format!("{} fields, expected {}", fields.len(), PIXELS + 1)));
        }
        for f in &fields[..PIXELS] {
            match f.trim().parse::<u8>() {
                Ok(v) if v <= 16 => digits.pixels.push(f32::from(v)),
                _ => return Err(at(format!("pixel {f:?} is not an integer in 0..=16"))),
            }
        }
        match fields[PIXELS].trim().parse::<i32>() {
            Ok(c) if (0..CLASSES as i32).contains(&c) => digits.labels.push(c),
            _ => return Err(at(format!("class {:?} is not an integer in 0..=9", fields[PIXELS]))),
        }
    }
    if digits.len() == 0 {
        return Err(format!("{}: no rows", path.display()));
    }
    Ok(digits)
}

/// A permutation of `0..n`: `jax.random.permutation(fold_in(PRNGKey(seed), fold), n)`
/// (traced and run natively; the same order JAX gives for the same key).
pub fn permutation(seed: i32, fold: i32, n: usize) -> Result<Vec<usize>, remat::Error> {
    let f =
        remat::jit(move |seed: remat::Tensor| random::permutation(&random::fold_in(&random::prng_key(&seed), fold), n));
    let out = f.call(&Array::I32(ArrayD::from_elem(IxDyn(&[]), seed)))?;
    Ok(out[0].to_f64_vec().into_iter().map(|i| i as usize).collect())
}

/// The data split by a permutation of seed `seed`: the first `held_out` rows of the
/// permuted order are the held-out set, the rest the training set.
pub fn split(all: &Digits, seed: i32, held_out: usize) -> Result<(Digits, Digits), remat::Error> {
    let order = permutation(seed, 0, all.len())?;
    Ok((all.rows(&order[held_out..]), all.rows(&order[..held_out])))
}
