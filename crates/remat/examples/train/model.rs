//! The digits CNN and its training step, as traced code: the model, the cross-entropy loss
//! under a `jax.checkpoint` policy, and one train step (the loss's value and gradient,
//! clipping by global norm, a warmup + cosine learning rate, AdamW) that `remat::jit`
//! compiles whole.
//!
//! Written as the JAX program in `train_jax.py` is, line for line, so that both record the
//! same equations and save the same residuals. Shared by the `train` example and
//! `crates/remat/tests/train.rs`.

use std::collections::BTreeMap;
use std::f64::consts::PI;

use remat::lax::{self, ConvOptions, Padding};
use remat::{
    checkpoint, checkpoint_name, function_scope, named, nn, numpy, random, Aval, ClosedJaxpr, DType, Policy, Tensor,
};

use remat::trace::Named;

use crate::data::{CLASSES, PIXELS};

/// Parameters by name: a pytree whose leaves flatten in key order, as JAX sorts a dict.
pub type Params<T> = BTreeMap<String, T>;

/// Each parameter's shape: two `3x3` convolutions (`HWIO`) and two dense layers.
pub fn param_shapes() -> Params<Vec<usize>> {
    [
        ("conv1_w", vec![3, 3, 1, 16]),
        ("conv1_b", vec![16]),
        ("conv2_w", vec![3, 3, 16, 32]),
        ("conv2_b", vec![32]),
        ("dense1_w", vec![2 * 2 * 32, 64]),
        ("dense1_b", vec![64]),
        ("dense2_w", vec![64, CLASSES]),
        ("dense2_b", vec![CLASSES]),
    ]
    .into_iter()
    .map(|(k, s)| (k.to_string(), s))
    .collect()
}

/// The parameters' avals.
pub fn param_avals() -> Params<Aval> {
    param_shapes().into_iter().map(|(k, s)| (k, Aval::new(DType::F32, s))).collect()
}

/// `init(key)`: He-normal weights (one key per parameter, `fold_in(key, i)`), zero biases.
pub fn init(key: &Tensor) -> Params<Tensor> {
    param_shapes()
        .into_iter()
        .enumerate()
        .map(|(i, (name, shape))| {
            let value = if name.ends_with("_w") {
                nn::initializers::he_normal(&random::fold_in(key, i as i32), &shape, DType::F32)
            } else {
                numpy::zeros(&shape, DType::F32)
            };
            (name, value)
        })
        .collect()
}

/// A `3x3` `SAME` convolution, bias, relu (named, for the `names` policy) and a `2x2` max
/// pool.
fn conv_block(x: &Tensor, w: &Tensor, b: &Tensor, name: &str) -> Tensor {
    let _scope = function_scope!();
    let dn = ConvOptions::default().dimension_numbers("NHWC", "HWIO", "NHWC");
    let y = lax::conv_general_dilated(x, w, &[1, 1], Padding::Same, dn);
    let h = checkpoint_name(&nn::relu(&(y + b)), name);
    lax::max_pool(&h, &[2, 2], Some(&[2, 2]), Padding::Valid)
}

/// The logits `f32[n,10]` of images `f32[n,64]` (pixel values 0..16).
pub fn logits(p: &Params<Tensor>, images: &Tensor) -> Tensor {
    let _scope = function_scope!();
    let x = images.reshape(&[-1, 8, 8, 1]) / 16.0;
    let h = conv_block(&x, &p["conv1_w"], &p["conv1_b"], "conv1"); // n,4,4,16
    let h = conv_block(&h, &p["conv2_w"], &p["conv2_b"], "conv2"); // n,2,2,32
    let h = h.reshape(&[-1, 2 * 2 * 32]);
    let h = checkpoint_name(&nn::relu(&(h.dot(&p["dense1_w"]) + &p["dense1_b"])), "dense1");
    h.dot(&p["dense2_w"]) + &p["dense2_b"]
}

/// The mean cross-entropy of integer labels `i32[n]`.
pub fn loss(p: &Params<Tensor>, images: &Tensor, labels: &Tensor) -> Tensor {
    let _scope = function_scope!();
    let logp = nn::log_softmax(&logits(p, images), -1);
    -logp.take_along_axis(&labels.expand_dims(&[-1]), -1).mean()
}

/// Which values the forward pass may save for the backward pass: the `--policy` flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyChoice {
    /// `nothing_saveable`: save only the arguments, recompute every activation.
    Nothing,
    /// `dots_saveable`: save the outputs of convolutions and matrix products.
    Dots,
    /// `save_only_these_names("conv1", "conv2", "dense1")`: the named activations.
    Names,
    /// `everything_saveable`: what plain reverse mode saves.
    Everything,
}

impl PolicyChoice {
    pub const ALL: [PolicyChoice; 4] =
        [PolicyChoice::Nothing, PolicyChoice::Dots, PolicyChoice::Names, PolicyChoice::Everything];

    /// The flag's word.
    pub fn name(self) -> &'static str {
        match self {
            PolicyChoice::Nothing => "nothing",
            PolicyChoice::Dots => "dots",
            PolicyChoice::Names => "names",
            PolicyChoice::Everything => "everything",
        }
    }

    /// The checkpoint's policy.
    pub fn policy(self) -> Policy {
        match self {
            PolicyChoice::Nothing => Policy::NothingSaveable,
            PolicyChoice::Dots => Policy::DotsSaveable { only_if_no_batch_dims: false },
            PolicyChoice::Names => {
                Policy::SaveOnlyTheseNames { names: ["conv1", "conv2", "dense1"].map(String::from).to_vec() }
            }
            PolicyChoice::Everything => Policy::EverythingSaveable,
        }
    }
}

impl std::str::FromStr for PolicyChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<PolicyChoice, String> {
        PolicyChoice::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| {
            let words: Vec<&str> = PolicyChoice::ALL.iter().map(|p| p.name()).collect();
            format!("unknown policy {s:?}; expected one of {}", words.join(", "))
        })
    }
}

/// The loss's arguments: `(params, images, labels)` as traced.
pub type LossArgs = (Params<Tensor>, Tensor, Tensor);

/// The loss under `jax.checkpoint(loss, policy=...)`.
pub fn checkpointed_loss(policy: PolicyChoice) -> impl Fn(LossArgs) -> Tensor {
    let ck = checkpoint(|(p, images, labels): LossArgs| loss(&p, &images, &labels)).policy(policy.policy());
    move |args| ck.call(args)
}

/// The loss's argument avals for a batch of `batch` images, named as JAX names them
/// (`params['conv1_w']`, `images`, `labels`).
pub fn loss_avals(batch: usize) -> (Named<Params<Aval>>, Named<Aval>, Named<Aval>) {
    (
        named("params", param_avals()),
        named("images", Aval::new(DType::F32, vec![batch, PIXELS])),
        named("labels", Aval::new(DType::I32, vec![batch])),
    )
}

/// `jax.value_and_grad(checkpointed_loss)` with respect to the parameters, for batches of
/// `batch` images: `(params..., images, labels) -> (loss, grads...)`.
pub fn loss_and_grad_program(policy: PolicyChoice, batch: usize) -> Result<ClosedJaxpr, remat::Error> {
    let argnums: Vec<usize> = (0..param_shapes().len()).collect();
    remat::value_and_grad(checkpointed_loss(policy)).argnums(&argnums).jaxpr(&loss_avals(batch))
}

/// The optimizer's settings.
#[derive(Clone, Debug)]
pub struct Hyper {
    pub peak_lr: f64,
    pub warmup_steps: usize,
    pub total_steps: usize,
    pub weight_decay: f64,
    pub clip_norm: f64,
    pub b1: f64,
    pub b2: f64,
    pub eps: f64,
}

impl Hyper {
    /// The example's settings for a run of `total_steps`.
    pub fn new(total_steps: usize) -> Hyper {
        Hyper {
            peak_lr: 3e-3,
            warmup_steps: (total_steps / 20).max(1),
            total_steps,
            weight_decay: 1e-4,
            clip_norm: 1.0,
            b1: 0.9,
            b2: 0.999,
            eps: 1e-8,
        }
    }
}

/// The train step's arguments: parameters, Adam's first and second moments, a batch of
/// images and labels, and the step number (`i32[]`, from 0).
pub type StepArgs = (Params<Tensor>, Params<Tensor>, Params<Tensor>, Tensor, Tensor, Tensor);

/// The step's results: new parameters and moments, and the batch's loss before the update.
pub type StepResults = (Params<Tensor>, Params<Tensor>, Params<Tensor>, Tensor);

/// `optax.warmup_cosine_decay_schedule(0, peak, warmup, total)` at `step` (from 0): a
/// linear ramp to `peak_lr` over `warmup_steps`, then a cosine down to 0 at `total_steps`.
pub fn learning_rate(step: &Tensor, h: &Hyper) -> Tensor {
    let _scope = function_scope!();
    let t = step.astype(DType::F32);
    let warmup = h.warmup_steps as f64;
    let ramp = &t * (h.peak_lr / warmup);
    let decay_steps = (h.total_steps as f64 - warmup).max(1.0);
    let progress = ((&t - warmup) / decay_steps).clip(0.0, 1.0);
    let cosine = ((progress * PI).cos() + 1.0) * (0.5 * h.peak_lr);
    numpy::where_(&t.lt(warmup), &ramp, &cosine)
}

/// `optax.clip_by_global_norm(max_norm)`: every gradient scaled by
/// `min(1, max_norm / global_norm)`. Returns the scaled gradients and the global norm.
pub fn clip_by_global_norm(grads: &[Tensor], max_norm: f64) -> (Vec<Tensor>, Tensor) {
    let _scope = function_scope!();
    let squares: Vec<Tensor> = grads.iter().map(|g| (g * g).sum()).collect();
    let total = squares.iter().skip(1).fold(squares[0].clone(), |acc, s| acc + s);
    let norm = total.sqrt();
    let scale = numpy::minimum(1.0, &(max_norm / numpy::maximum(&norm, 1e-12)));
    (grads.iter().map(|g| g * &scale).collect(), norm)
}

/// One train step, traced whole: the loss and its gradient (the closed program
/// `loss_and_grad`, called as a `jit`), gradient clipping, the learning rate at `step`,
/// and AdamW (decoupled weight decay on the weights, not the biases).
pub fn train_step(loss_and_grad: &ClosedJaxpr, h: &Hyper, args: StepArgs) -> StepResults {
    let _scope = function_scope!();
    let (params, mu, nu, images, labels, step) = args;
    let inputs: Vec<Tensor> = params.values().cloned().chain([images, labels]).collect();
    let outs = remat::trace::call_jaxpr("value_and_grad", loss_and_grad, &inputs);
    let (loss, grads) = (outs[0].clone(), &outs[1..]);
    let (grads, _norm) = clip_by_global_norm(grads, h.clip_norm);
    let lr = learning_rate(&step, h);
    // Adam's bias corrections at count = step + 1: 1 - b^count, as exp(count * ln b).
    let count = step.astype(DType::F32) + 1.0;
    let correction = |b: f64| 1.0 - (&count * b.ln()).exp();
    let (c1, c2) = (correction(h.b1), correction(h.b2));
    let (mut new_p, mut new_mu, mut new_nu) = (Params::new(), Params::new(), Params::new());
    for ((name, p), g) in params.iter().zip(&grads) {
        let m = &mu[name] * h.b1 + g * (1.0 - h.b1);
        let v = &nu[name] * h.b2 + (g * g) * (1.0 - h.b2);
        let mut update = (&m / &c1) / ((&v / &c2).sqrt() + h.eps);
        if p.ndim() > 1 {
            update = update + p * h.weight_decay;
        }
        new_p.insert(name.clone(), p - &lr * &update);
        new_mu.insert(name.clone(), m);
        new_nu.insert(name.clone(), v);
    }
    (new_p, new_mu, new_nu, loss)
}

/// The train step's argument avals for batches of `batch` images.
pub fn step_avals(batch: usize) -> (Params<Aval>, Params<Aval>, Params<Aval>, Aval, Aval, Aval) {
    (
        param_avals(),
        param_avals(),
        param_avals(),
        Aval::new(DType::F32, vec![batch, PIXELS]),
        Aval::new(DType::I32, vec![batch]),
        Aval::scalar(DType::I32),
    )
}

/// The held-out metrics: the summed loss and the number of correct predictions.
pub fn evaluate((p, images, labels): LossArgs) -> (Tensor, Tensor) {
    let _scope = function_scope!();
    let logits = logits(&p, &images);
    let logp = nn::log_softmax(&logits, -1);
    let loss_sum = -logp.take_along_axis(&labels.expand_dims(&[-1]), -1).sum();
    let correct = logits.argmax(-1).eq(&labels).astype(DType::I32).sum();
    (loss_sum, correct)
}

/// The memory planner's choice for the loss's value and gradient with respect to the
/// parameters (`remat::plan` on the loss without any checkpoint): the program
/// `(params..., images, labels) -> (loss, grads...)`, as `loss_and_grad_program` gives for
/// a policy, and the plan. `budget`: bytes for the whole vjp's planned peak; `None` takes
/// the budget halfway between the smallest peak any evaluated plan reaches and the largest
/// (saving everything), so that the planner has to trade recompute for memory.
pub fn planned_loss_and_grad(
    batch: usize,
    budget: Option<usize>,
) -> Result<(ClosedJaxpr, remat::plan::Plan), remat::Error> {
    let traced = remat::make_jaxpr(|(p, images, labels): LossArgs| loss(&p, &images, &labels), &loss_avals(batch))?;
    let options = remat::plan::PlanOptions { argnums: Some((0..param_shapes().len()).collect()), ..Default::default() };
    let planner = remat::plan::Planner::new(&traced.jaxpr, &traced.arg_names, &options)?;
    let budget = match budget {
        Some(b) => b,
        None => {
            let peaks: Vec<usize> = planner.frontier().iter().map(|p| p.peak_bytes).collect();
            let (lo, hi) = (peaks.iter().min().copied().unwrap_or(0), peaks.iter().max().copied().unwrap_or(0));
            lo + (hi - lo) / 2
        }
    };
    let plan = planner.plan(remat::plan::Budget::bytes(budget))?;
    let program = ClosedJaxpr { jaxpr: std::sync::Arc::new(plan.program.clone()), consts: traced.jaxpr.consts.clone() };
    Ok((program, plan))
}
