//! The `train` example's model and train step (`examples/train/`), checked against the
//! interpreter and against JAX:
//! - a few jitted steps give the interpreter's losses and parameters, under every policy
//!   and under the memory planner's plan;
//! - the loss saves, under every policy, exactly the residuals JAX 0.10.2 saves for the
//!   same program (`examples/train_jax.txt`, written by `examples/train_jax.py`), up to
//!   source locations;
//! - the first steps of the example's run (its data split, initialisation, shuffling and
//!   optimizer) give JAX's losses;
//! - the example, run with the README's arguments, prints the README's block and draws the
//!   README's figure, and `docs/training.md`'s run and residual lists are its output (the
//!   times of that run aside).

#[path = "../examples/train/data.rs"]
mod data;
// The example's evaluation and table helpers are not used here.
#[allow(dead_code)]
#[path = "../examples/train/model.rs"]
mod model;
#[path = "../examples/train/run.rs"]
mod run;
#[path = "../examples/train/state.rs"]
mod state;

use std::path::{Path, PathBuf};

use clap::Parser;
use remat_testkit::docs::{code_blocks, repo_root, CodeBlock};

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

fn doc_blocks_of(file: &str) -> Vec<CodeBlock> {
    let text = std::fs::read_to_string(repo_root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    code_blocks(file, &text)
}

/// The block of `file` whose first line starts with `first`, and the block after it.
fn block_and_next(file: &str, first: &str) -> (CodeBlock, Option<CodeBlock>) {
    let blocks = doc_blocks_of(file);
    let i =
        blocks.iter().position(|b| b.first_line().starts_with(first)).unwrap_or_else(|| panic!("{file}: {first:?}"));
    (blocks[i].clone(), blocks.get(i + 1).cloned())
}

/// The arguments after ` -- ` of a `cargo run --release --example train -- ...` line.
fn example_args(line: &str) -> Vec<String> {
    let line = line.trim().trim_start_matches("$ ");
    assert!(line.starts_with("cargo run --release --example train"), "{line}");
    line.split_once(" -- ").map_or(vec![], |(_, a)| a.split_whitespace().map(str::to_string).collect())
}

/// The example's output without its times: the table's step time column, the note's
/// "; step time: mean of N steps", the run's " in S s (N steps/s)".
fn without_times(text: &str) -> String {
    let timed = text.lines().any(|l| l.starts_with('|') && l.ends_with(" step time |"));
    let mut out = String::new();
    for line in text.lines() {
        let line = if timed && line.starts_with('|') {
            let cells = line.trim_end_matches('|');
            format!("{}|", cells.rsplit_once('|').expect("a table row").0)
        } else if let Some((head, _)) = line.split_once("; step time: mean of ") {
            format!("{head})")
        } else if line.starts_with("policy ") && line.ends_with(" steps/s)") {
            line.rsplit_once(" in ").expect("the run's time").0.to_string()
        } else {
            line.to_string()
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[test]
fn without_times_removes_exactly_the_times() {
    let timed =
        "| a | step time |\n|---|---:|\n| x | 1.0 ms |\n\n(batch 64; as written: x; step time: mean of 50 steps)\n\
                 policy dots: training loss 0.1 (from 2.7) after 9 steps in 1.9 s (790 steps/s)\n";
    assert_eq!(
        without_times(timed),
        "| a |\n|---|\n| x |\n\n(batch 64; as written: x)\npolicy dots: training loss 0.1 (from 2.7) after 9 steps\n"
    );
    // An output without times is left as it is.
    let plain = "| policy | step time |\n";
    assert_eq!(without_times("| policy | x |\nheld out: loss 0.0448\n"), "| policy | x |\nheld out: loss 0.0448\n");
    assert_eq!(without_times(plain), "| policy |\n");
}

/// Runs the example (`examples/train/run.rs`) with `args`, its plot written to `plot`
/// instead of the `--plot` the arguments give; its output, with that path as given.
fn run_example(args: &[String], plot: &Path) -> String {
    let given = args.iter().position(|a| a == "--plot").map(|i| args[i + 1].clone()).expect("--plot");
    let mut args: Vec<String> = args.to_vec();
    let at = args.iter().position(|a| a == "--plot").unwrap() + 1;
    args[at] = plot.display().to_string();
    let parsed = run::Args::try_parse_from(std::iter::once("train".to_string()).chain(args)).expect("the arguments");
    let mut out = Vec::new();
    run::run(&parsed, &mut out).expect("the example runs");
    String::from_utf8(out).expect("UTF-8").replace(&plot.display().to_string(), &given)
}

#[test]
fn the_readme_and_docs_show_what_the_example_prints_and_draws() {
    // README.md: the command, then its output, whole.
    let (command, output) = block_and_next("README.md", "cargo run --release --example train");
    let output = output.expect("the output block");
    let args = example_args(command.first_line());
    assert!(args.contains(&"--no-times".to_string()), "the README shows a run without times: {args:?}");
    let dir = std::env::temp_dir().join(format!("remat-train-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plot: PathBuf = dir.join("train_loss.svg");
    let got = run_example(&args, &plot);
    assert_eq!(got, output.text, "README.md's block at line {} is not what the example prints", output.line);
    // The figure the README shows is the one this run draws.
    let at = args.iter().position(|a| a == "--plot").unwrap() + 1;
    let drawn = std::fs::read(&plot).expect("the plot");
    let shown = std::fs::read(repo_root().join(&args[at])).expect("the README's figure");
    assert!(drawn == shown, "{} is not what the run draws (written to {})", args[at], plot.display());
    assert!(std::fs::read_to_string(repo_root().join("README.md")).unwrap().contains(&format!("]({})", args[at])));
    std::fs::remove_dir_all(&dir).ok();

    // docs/training.md's run: the README's arguments (a run with times: but --no-times),
    // and the same output (the times of a run with them aside).
    let (run_block, _) = block_and_next("docs/training.md", "$ cargo run --release --example train");
    let (first, printed) = run_block.text.split_once('\n').unwrap();
    let doc_args = example_args(first);
    let untimed: Vec<String> = doc_args.iter().cloned().chain(["--no-times".to_string()]).collect();
    assert!(
        doc_args == args || (untimed.iter().all(|a| args.contains(a)) && args.len() == untimed.len()),
        "docs/training.md's run {doc_args:?} and the README's {args:?} differ in more than --no-times"
    );
    assert_eq!(without_times(printed), got, "docs/training.md's run (line {}), without its times", run_block.line);
}

#[test]
fn the_training_docs_residual_lists_are_remats_and_jaxs() {
    // This test includes model.rs as `tests/../examples/train/model.rs`; the example's
    // lines name `examples/train/model.rs`.
    let ours = |policy: PolicyChoice| {
        remat::saved_residuals_text(model::checkpointed_loss(policy), &model::loss_avals(64))
            .expect("vjp")
            .replace("crates/remat/tests/../examples/", "crates/remat/examples/")
    };
    let text = jax_output();
    let header = |p: PolicyChoice| format!("# policy {}:", p.name());
    let jax = |p: PolicyChoice| -> Vec<String> {
        let start = text.lines().position(|l| l.starts_with(&header(p))).expect("the policy's list");
        text.lines().skip(start + 1).take_while(|l| !l.is_empty()).map(str::to_string).collect()
    };
    let blocks = doc_blocks_of("docs/training.md");
    let find = |first: &str, nth: usize| -> &CodeBlock {
        blocks
            .iter()
            .filter(|b| b.first_line().starts_with(first))
            .nth(nth)
            .unwrap_or_else(|| panic!("{first:?} #{nth}"))
    };
    // `everything`, whole: remat's (--residuals) then JAX's (train_jax.txt).
    let lines = |b: &CodeBlock| -> Vec<String> { b.text.lines().map(str::to_string).collect() };
    let everything = ours(PolicyChoice::Everything);
    assert_eq!(lines(find("f32[3,3,1,16] from the argument", 0)), everything.lines().collect::<Vec<_>>());
    assert_eq!(lines(find("f32[3,3,1,16] from the argument", 1)), jax(PolicyChoice::Everything));
    // `dots` and `names` after the argument lines: remat's lines, then JAX's.
    for (first, policy) in
        [("f32[64,8,8,16] output of", PolicyChoice::Dots), ("f32[64,8,8,16] named", PolicyChoice::Names)]
    {
        let shown = lines(find(first, 0));
        let (remat_lines, jax_lines): (Vec<String>, Vec<String>) = (
            ours(policy).lines().filter(|l| !l.contains("from the argument")).map(str::to_string).collect(),
            jax(policy).into_iter().filter(|l| !l.contains("from the argument")).collect(),
        );
        let want: Vec<String> = remat_lines.into_iter().chain(jax_lines).collect();
        assert_eq!(shown, want, "docs/training.md: {first}");
    }
}

#[test]
fn the_training_docs_step_is_the_examples() {
    // docs/training.md's sample (a doctest, with the rest of model.rs stubbed in hidden
    // lines) shows train_step's first lines: they are model.rs's, in order.
    let block = doc_blocks_of("docs/training.md").into_iter().find(|b| b.lang == "rust").expect("the Rust block");
    let source = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/train/model.rs"))
        .expect("model.rs");
    let shown: Vec<&str> = block
        .text
        .lines()
        .filter(|l| !l.trim_start().starts_with("# ") && *l != "#")
        .take_while(|l| !l.trim_start().starts_with("// ..."))
        .collect();
    assert!(shown.len() >= 6, "{shown:?}");
    let mut rest = source.lines();
    for line in &shown {
        assert!(rest.any(|l| l == *line), "docs/training.md: {line:?} is not (in order) in model.rs");
    }
}
