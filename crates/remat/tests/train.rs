//! The `train` example's model and train step (`examples/train/`), checked against the
//! interpreter and against JAX:
//! - a few jitted steps give the interpreter's losses and parameters, under every policy
//!   and under the memory planner's plan;
//! - the loss saves, under every policy, exactly the residuals JAX 0.10.2 saves for the
//!   same program (`examples/train_jax.txt`, written by `examples/train_jax.py`), up to
//!   source locations;
//! - the first steps of the example's run (its data split, initialisation, shuffling and
//!   optimizer) give JAX's losses.

#[path = "../examples/train/data.rs"]
mod data;
// The example's evaluation and table helpers are not used here.
#[allow(dead_code)]
#[path = "../examples/train/model.rs"]
mod model;
#[path = "../examples/train/state.rs"]
mod state;

use std::path::Path;

use model::{Hyper, PolicyChoice, StepArgs};
use remat::{Array, Backend, Nans};
use state::{Batches, State};

/// The training set and initial parameters of the example's seed 0.
fn setup() -> (data::Digits, model::Params<Array>) {
    let all = data::load(&data::default_path()).expect("the shipped data set loads");
    let (train, held_out) = data::split(&all, 0, 360).expect("split");
    assert_eq!((train.len(), held_out.len()), (1437, 360));
    (train, state::init_params(0).expect("init"))
}

/// Runs `steps` train steps at batch `batch` with `backend`; the losses and final state.
fn run_steps(policy: PolicyChoice, backend: Backend, batch: usize, steps: usize) -> (Vec<f32>, State) {
    let grad = model::loss_and_grad_program(policy, batch).expect("value_and_grad");
    run_program(&grad, backend, batch, steps)
}

/// Runs `steps` train steps whose loss and gradient are the program `grad`.
fn run_program(grad: &remat::ClosedJaxpr, backend: Backend, batch: usize, steps: usize) -> (Vec<f32>, State) {
    let (train, params) = setup();
    let hyper = Hyper::new(1500);
    let step_fn = remat::jit(|a: StepArgs| model::train_step(grad, &hyper, a)).backend(backend).nans(Nans::Propagate);
    let mut batches = Batches::new(&train, 0, batch);
    let mut state = State::new(params);
    let mut losses = Vec::new();
    for step in 0..steps {
        let (images, labels) = batches.get(step).expect("batch");
        let results = step_fn.call(&state.into_args(images, labels, step)).expect("train step");
        let loss;
        (state, loss) = State::from_results(results).expect("results");
        losses.push(loss);
    }
    (losses, state)
}

fn close(got: f64, want: f64, rel: f64, abs: f64) -> bool {
    (got - want).abs() <= (rel * want.abs()).max(abs)
}

#[test]
fn jitted_steps_give_the_interpreters_losses_under_every_policy() {
    let (want_losses, want_state) = run_steps(PolicyChoice::Dots, Backend::Interp, 8, 3);
    assert!(want_losses.iter().all(|l| l.is_finite() && *l > 0.0), "{want_losses:?}");
    let (planned, plan) = model::planned_loss_and_grad(8, None).expect("the planner's plan");
    assert!(plan.peak_bytes <= plan.budget, "the plan's peak {} is over its budget {}", plan.peak_bytes, plan.budget);
    let runs = PolicyChoice::ALL
        .into_iter()
        .map(|policy| (policy.name(), run_steps(policy, Backend::Jit, 8, 3)))
        .chain([("planner", run_program(&planned, Backend::Jit, 8, 3))]);
    for (name, (losses, state)) in runs {
        for (step, (got, want)) in losses.iter().zip(&want_losses).enumerate() {
            assert!(
                close(f64::from(*got), f64::from(*want), 1e-5, 1e-6),
                "{name}: step {step}: jit loss {got}, interpreter {want}"
            );
        }
        for (param, want) in &want_state.params {
            let (got, want) = (state.params[param].to_f64_vec(), want.to_f64_vec());
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(close(*g, *w, 1e-4, 1e-6), "{name}: {param}[{i}]: jit {g}, interpreter {w}");
            }
        }
    }
}

/// `train_jax.txt`: the residual lines under `# policy NAME: ...`, and the first losses.
fn jax_output() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/train_jax.txt");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn jax_residuals(text: &str, policy: PolicyChoice) -> Vec<String> {
    let header = format!("# policy {}:", policy.name());
    let start = text.lines().position(|l| l.starts_with(&header)).unwrap_or_else(|| panic!("no {header:?}"));
    text.lines().skip(start + 1).take_while(|l| !l.is_empty()).map(without_location).collect()
}

/// A residual line without the file, line and column of its source (kept: the function).
/// `f32[64,64] output of dot_general from train_jax.py:55:36 (logits)` becomes
/// `f32[64,64] output of dot_general from (logits)`.
fn without_location(line: &str) -> String {
    match line.rsplit_once(" from ") {
        Some((head, tail)) if !["the argument ", "a literal", "a constant"].iter().any(|w| tail.starts_with(w)) => {
            let function = tail.split_once(' ').map_or("", |(_, f)| f);
            format!("{head} from {function}")
        }
        _ => line.to_string(),
    }
}

#[test]
fn the_loss_saves_jaxs_residuals_under_every_policy() {
    let text = jax_output();
    for policy in PolicyChoice::ALL {
        let ours = remat::saved_residuals_text(model::checkpointed_loss(policy), &model::loss_avals(64)).expect("vjp");
        let ours: Vec<String> = ours.lines().map(without_location).collect();
        let jax = jax_residuals(&text, policy);
        assert!(!jax.is_empty());
        assert_eq!(ours, jax, "policy {}", policy.name());
    }
    // The locations are the program's own: the conv saved under `dots` is the conv line.
    let ours =
        remat::saved_residuals_text(model::checkpointed_loss(PolicyChoice::Dots), &model::loss_avals(64)).expect("vjp");
    // (This test includes the file as `tests/../examples/train/model.rs`.)
    assert!(ours.contains("output of conv_general_dilated from crates/remat/"), "{ours}");
    let source = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/train/model.rs"))
        .expect("model.rs");
    let line = 1 + source.lines().position(|l| l.contains("lax::conv_general_dilated(")).expect("the conv line");
    assert!(ours.contains(&format!("examples/train/model.rs:{line}:13 (conv_block)")), "{ours}");
}

#[test]
fn the_first_steps_give_jaxs_losses() {
    let text = jax_output();
    let jax: Vec<f64> =
        text.lines().filter_map(|l| l.strip_prefix("step ")?.split_once(": ")?.1.parse().ok()).collect();
    assert_eq!(jax.len(), 5, "train_jax.txt has the losses of steps 0 to 4");
    let (losses, _) = run_steps(PolicyChoice::Dots, Backend::Jit, 64, jax.len());
    for (step, (got, want)) in losses.iter().zip(&jax).enumerate() {
        // The initialisers' normal samples are within a few ulps of XLA's (docs/api.md).
        assert!(close(f64::from(*got), *want, 2e-5, 1e-6), "step {step}: remat {got}, JAX {want}");
    }
}

#[test]
fn a_bad_policy_word_is_an_error_naming_the_choices() {
    let err = "some".parse::<PolicyChoice>().unwrap_err();
    assert_eq!(err, "unknown policy \"some\"; expected one of nothing, dots, names, everything");
    assert_eq!("names".parse::<PolicyChoice>(), Ok(PolicyChoice::Names));
}
