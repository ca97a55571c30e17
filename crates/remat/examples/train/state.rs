//! The host side of training: the parameters and Adam's moments between steps, their
//! initialisation, and the batches of each step (shuffled per epoch by a `jax.random`
//! permutation, as `train_jax.py` shuffles them).
//!
//! Shared by the `train` example and `crates/remat/tests/train.rs`.

use remat::ndarray::{ArrayD, IxDyn};
use remat::{random, Array, Tensor};

use crate::data::{self, Digits};
use crate::model::{self, Params};

/// A scalar `i32[]` array.
pub fn scalar_i32(v: i32) -> Array {
    Array::I32(ArrayD::from_elem(IxDyn(&[]), v))
}

/// The parameters `model::init` draws from `PRNGKey(seed)`.
pub fn init_params(seed: i32) -> Result<Params<Array>, remat::Error> {
    let init = remat::jit(|seed: Tensor| model::init(&random::prng_key(&seed)));
    let mut leaves = init.call(&scalar_i32(seed))?.into_iter();
    Ok(rebuild(&mut leaves))
}

/// A parameter map from its leaves in key order (`remat::jit` returns a map's leaves so).
fn rebuild(leaves: &mut impl Iterator<Item = Array>) -> Params<Array> {
    model::param_shapes().into_keys().zip(leaves).collect()
}

fn zeros_like(params: &Params<Array>) -> Params<Array> {
    params.iter().map(|(k, v)| (k.clone(), Array::zeros(&v.aval()))).collect()
}

/// The train step's arguments as arrays (what [`State::into_args`] gives `remat::jit`).
pub type StepArrays = (Params<Array>, Params<Array>, Params<Array>, Array, Array, Array);

/// Parameters and Adam's first and second moments.
#[derive(Clone, Debug)]
pub struct State {
    pub params: Params<Array>,
    pub mu: Params<Array>,
    pub nu: Params<Array>,
}

impl State {
    /// `params` with zero moments (`optax.adamw(...).init(params)`).
    pub fn new(params: Params<Array>) -> State {
        State { mu: zeros_like(&params), nu: zeros_like(&params), params }
    }

    /// The step's arguments, moving the state in (no copy).
    pub fn into_args(self, images: Array, labels: Array, step: usize) -> StepArrays {
        (self.params, self.mu, self.nu, images, labels, scalar_i32(step as i32))
    }

    /// The state and the loss from the step's flattened results (new parameters, moments,
    /// the loss).
    pub fn from_results(results: Vec<Array>) -> Result<(State, f32), String> {
        let n = model::param_shapes().len();
        if results.len() != 3 * n + 1 {
            return Err(format!("the train step returned {} arrays, expected {}", results.len(), 3 * n + 1));
        }
        let mut leaves = results.into_iter();
        let state = State { params: rebuild(&mut leaves), mu: rebuild(&mut leaves), nu: rebuild(&mut leaves) };
        let loss = leaves.next().map_or(f32::NAN, |l| l.to_f64_vec()[0] as f32);
        Ok((state, loss))
    }
}

/// The batches of a run: epoch `e` visits the training set in the order of the permutation
/// `fold_in(PRNGKey(seed), 1 + e)`, `batch` rows at a time (a last partial batch is
/// dropped).
#[derive(Debug)]
pub struct Batches<'a> {
    train: &'a Digits,
    seed: i32,
    batch: usize,
    order: Vec<usize>,
    epoch: Option<usize>,
}

impl<'a> Batches<'a> {
    pub fn new(train: &'a Digits, seed: i32, batch: usize) -> Batches<'a> {
        Batches { train, seed, batch, order: Vec::new(), epoch: None }
    }

    /// The images and labels of step `step`.
    pub fn get(&mut self, step: usize) -> Result<(Array, Array), remat::Error> {
        let per_epoch = (self.train.len() / self.batch).max(1);
        let (epoch, i) = (step / per_epoch, step % per_epoch);
        if self.epoch != Some(epoch) {
            self.order = data::permutation(self.seed, 1 + epoch as i32, self.train.len())?;
            self.epoch = Some(epoch);
        }
        Ok(self.train.rows(&self.order[i * self.batch..(i + 1) * self.batch]).arrays())
    }
}
