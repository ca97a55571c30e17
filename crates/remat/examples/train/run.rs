//! What `cargo run --release --example train` does and prints (see `main.rs`), shared with
//! `crates/remat/tests/train.rs`, which runs it with the README's arguments and compares
//! the output with the README's and `docs/training.md`'s.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Parser;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use remat::run::{Program, RunOptions};
use remat::{Array, CseScope, Options};

use crate::data::{self, Digits};
use crate::model::{self, Hyper, Params, PolicyChoice};
use crate::state::{self, scalar_i32, Batches, State};
use remat::ClosedJaxpr;

/// Train a CNN on the 8x8 digits with remat, and compare checkpoint policies.
#[derive(Debug, Parser)]
pub struct Args {
    /// The checkpoint policy of the training run: nothing, dots, names, everything, or
    /// planner (the memory planner's choice at `--budget`).
    #[arg(long, default_value = "dots")]
    policy: Choice,
    /// The planner's byte budget for the loss's whole vjp (units as `remat plan`:
    /// `300KiB`, `1MB`); default: halfway between the smallest and the largest peak of the
    /// plans it evaluates.
    #[arg(long)]
    budget: Option<remat::plan::Budget>,
    /// Training steps.
    #[arg(long, default_value_t = 1500)]
    steps: usize,
    /// Images per batch.
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// The seed of the data split, the initialisation and the shuffling.
    #[arg(long, default_value_t = 0)]
    seed: i32,
    /// Steps timed per policy for the table (0: no table).
    #[arg(long, default_value_t = 50)]
    table_steps: usize,
    /// Where to write the loss curve (SVG).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Also print every policy's saved residuals, in JAX's words.
    #[arg(long)]
    residuals: bool,
    /// Print no times (the table's step time, the run's seconds and steps per second), so
    /// that the output is the same on every run; the table's steps are not run.
    #[arg(long)]
    no_times: bool,
}

const HELD_OUT: usize = 360;

/// What the train step saves: a `jax.checkpoint` policy, or the memory planner's plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    Policy(PolicyChoice),
    Planner,
}

impl Choice {
    const ALL: [Choice; 5] = [
        Choice::Policy(PolicyChoice::ALL[0]),
        Choice::Policy(PolicyChoice::ALL[1]),
        Choice::Policy(PolicyChoice::ALL[2]),
        Choice::Policy(PolicyChoice::ALL[3]),
        Choice::Planner,
    ];

    fn name(self) -> &'static str {
        match self {
            Choice::Policy(p) => p.name(),
            Choice::Planner => "planner",
        }
    }
}

impl std::str::FromStr for Choice {
    type Err = String;

    fn from_str(s: &str) -> Result<Choice, String> {
        if s == "planner" {
            return Ok(Choice::Planner);
        }
        s.parse().map(Choice::Policy).map_err(|e| format!("{e}, planner"))
    }
}

/// The step's `(params..., images, labels) -> (loss, grads...)` program, and the residuals
/// the loss's forward pass saves, for `choice`.
fn loss_and_grad(args: &Args, choice: Choice) -> Result<(ClosedJaxpr, Vec<remat::Residual>), remat::Error> {
    match choice {
        Choice::Policy(policy) => {
            let residuals = remat::saved_residuals(model::checkpointed_loss(policy), &model::loss_avals(args.batch))?;
            Ok((model::loss_and_grad_program(policy, args.batch)?, residuals))
        }
        Choice::Planner => {
            let (program, plan) = model::planned_loss_and_grad(args.batch, args.budget.map(|b| b.bytes_value()))?;
            Ok((program, plan.saved))
        }
    }
}

/// Trains and writes what the example prints to `out` (the progress bar goes to stderr).
pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), String> {
    if args.batch == 0 || args.steps == 0 {
        return Err("--batch and --steps must be positive".into());
    }
    let all = data::load(&data::default_path())?;
    let (train, held_out) = data::split(&all, args.seed, HELD_OUT).map_err(err)?;
    writeln!(
        out,
        "digits: {} images ({} for training, {} held out), batch {}, {} steps",
        all.len(),
        train.len(),
        held_out.len(),
        args.batch,
        args.steps
    )
    .map_err(io)?;
    if args.batch > train.len() {
        return Err(format!("--batch {} is larger than the training set ({})", args.batch, train.len()));
    }
    let params = state::init_params(args.seed).map_err(err)?;
    if args.residuals {
        print_residuals(args.batch, out)?;
    }
    if args.table_steps > 0 {
        print_table(args, &params, &train, out)?;
    }
    let started = Instant::now();
    let (trained, losses) = train_run(args, params, &train)?;
    let elapsed = started.elapsed();
    let (held_loss, accuracy) = evaluate(&trained, &held_out).map_err(err)?;
    let tail = &losses[losses.len().saturating_sub(50)..];
    let tail_mean = tail.iter().sum::<f32>() / tail.len() as f32;
    let time = if args.no_times {
        String::new()
    } else {
        let seconds = elapsed.as_secs_f64();
        format!(" in {seconds:.1} s ({:.0} steps/s)", args.steps as f64 / seconds)
    };
    writeln!(
        out,
        "policy {}: training loss {:.4} (mean of the last {} steps, from {:.4}) after {} steps{time}",
        args.policy.name(),
        tail_mean,
        tail.len(),
        losses[0],
        args.steps,
    )
    .map_err(io)?;
    writeln!(out, "held out: loss {held_loss:.4}, accuracy {:.2}% ({} images)", 100.0 * accuracy, held_out.len())
        .map_err(io)?;
    let plot = args.plot.clone().unwrap_or_else(default_plot_path);
    write_plot(&plot, &losses, args.policy)?;
    writeln!(out, "loss curve: {}", plot.display()).map_err(io)?;
    Ok(())
}

fn io(e: std::io::Error) -> String {
    format!("writing the output: {e}")
}

fn err(e: remat::Error) -> String {
    e.to_string()
}

fn default_plot_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/train_loss.svg")
}

fn f32_value(a: &Array) -> f32 {
    a.to_f64_vec()[0] as f32
}

fn print_residuals(batch: usize, out: &mut dyn Write) -> Result<(), String> {
    for policy in PolicyChoice::ALL {
        writeln!(out, "\n# policy {}: what the forward pass saves", policy.name()).map_err(io)?;
        let text =
            remat::saved_residuals_text(model::checkpointed_loss(policy), &model::loss_avals(batch)).map_err(err)?;
        write!(out, "{text}").map_err(io)?;
    }
    writeln!(out).map_err(io)?;
    Ok(())
}

/// One row of the policy table.
struct Row {
    policy: Choice,
    residuals: usize,
    residual_bytes: usize,
    /// The compiled step's arena, with the JIT's default CSE (`Auto`: a checkpoint's
    /// recompute merged with the forward pass when that does not raise the peak).
    peak_bytes: usize,
    /// Whether `Auto` merged the recompute.
    merged: bool,
    /// The arena when the step is compiled as the policy says (`WithinCheckpoints`).
    peak_as_written: usize,
    /// The mean time of a step (`None` with `--no-times`).
    step_time: Option<Duration>,
}

fn print_table(args: &Args, params: &Params<Array>, train: &Digits, out: &mut dyn Write) -> Result<(), String> {
    let mut rows = Vec::new();
    for choice in Choice::ALL {
        rows.push(policy_row(args, choice, params, train).map_err(err)?);
    }
    let kib = |b: usize| format!("{:.1} KiB", b as f64 / 1024.0);
    let (time_head, time_rule) = if args.no_times { ("", "") } else { (" step time |", "---:|") };
    writeln!(
        out,
        "\n| policy | residuals | residual bytes | planned peak | recompute merged | peak as written |{time_head}"
    )
    .map_err(io)?;
    writeln!(out, "|---|---:|---:|---:|:---:|---:|{time_rule}").map_err(io)?;
    for r in &rows {
        let time = r.step_time.map_or(String::new(), |t| format!(" {:.3} ms |", t.as_secs_f64() * 1e3));
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |{time}",
            r.policy.name(),
            r.residuals,
            kib(r.residual_bytes),
            kib(r.peak_bytes),
            if r.merged { "yes" } else { "no" },
            kib(r.peak_as_written),
        )
        .map_err(io)?;
    }
    let time = if args.no_times { String::new() } else { format!("; step time: mean of {} steps", args.table_steps) };
    writeln!(
        out,
        "\n(batch {}; residuals: what the loss's forward pass saves, arguments included (planner: at a budget \
         of {} for the loss's vjp); planned peak: the \
         arena of the compiled train step (Compiled::plan().peak_bytes), whose default CSE merges a \
         checkpoint's recompute with the forward pass when that does not raise the peak; as written: \
         compiled with CseScope::WithinCheckpoints{time})\n",
        args.batch,
        args.budget.map_or("halfway between its smallest and largest peak".to_string(), |b| format!(
            "{} bytes",
            b.bytes_value()
        )),
    )
    .map_err(io)?;
    Ok(())
}

/// The planned arena peak of a compiled program, and the CSE scope its compiler chose.
fn plan_of(program: &Program) -> (usize, Option<CseScope>) {
    program.compiled().map_or((0, None), |c| (c.plan().peak_bytes, Some(c.plan().cse)))
}

/// Traces, compiles and times the train step under `policy`.
fn policy_row(args: &Args, policy: Choice, params: &Params<Array>, train: &Digits) -> Result<Row, remat::Error> {
    let (grad, residuals) = loss_and_grad(args, policy)?;
    let hyper = Hyper::new(args.steps);
    let traced =
        remat::make_jaxpr(|a: model::StepArgs| model::train_step(&grad, &hyper, a), &model::step_avals(args.batch))?;
    let as_written =
        RunOptions { jit: Options { cse: CseScope::WithinCheckpoints, ..Options::default() }, ..RunOptions::default() };
    let peak_as_written = plan_of(&Program::new(traced.jaxpr.clone(), &as_written)?).0;
    let program = Program::new(traced.jaxpr, &RunOptions::default())?;
    let (peak_bytes, cse) = plan_of(&program);
    let step_time = if args.no_times { None } else { Some(time_steps(args, &program, params, train)?) };
    Ok(Row {
        policy,
        residuals: residuals.len(),
        residual_bytes: residuals.iter().map(|r| r.bytes).sum(),
        peak_bytes,
        merged: cse == Some(CseScope::AcrossCheckpoints),
        peak_as_written,
        step_time,
    })
}

/// The mean time of `args.table_steps` steps of `program` on the first batch.
fn time_steps(
    args: &Args,
    program: &Program,
    params: &Params<Array>,
    train: &Digits,
) -> Result<Duration, remat::Error> {
    let idx: Vec<usize> = (0..args.batch).collect();
    let (images, labels) = train.rows(&idx).arrays();
    let initial = State::new(params.clone());
    let mut state: Vec<Array> =
        [&initial.params, &initial.mu, &initial.nu].into_iter().flat_map(|m| m.values().cloned()).collect();
    let mut outs = Vec::new();
    let mut elapsed = Duration::ZERO;
    for step in 0..=args.table_steps {
        let step_arg = scalar_i32(step as i32);
        let mut refs: Vec<&Array> = state.iter().collect();
        refs.extend([&images, &labels, &step_arg]);
        let start = Instant::now();
        outs = program.run(&refs)?;
        // The first call pays for first-touch page faults; it is not timed.
        if step > 0 {
            elapsed += start.elapsed();
        }
        state = outs.drain(..state.len()).collect();
    }
    drop(outs);
    Ok(elapsed / args.table_steps as u32)
}

/// Trains with `remat::jit`: one compiled step, called once per batch.
fn train_run(args: &Args, params: Params<Array>, train: &Digits) -> Result<(Params<Array>, Vec<f32>), String> {
    let (grad, _) = loss_and_grad(args, args.policy).map_err(err)?;
    let hyper = Hyper::new(args.steps);
    let step_fn = remat::jit(|a: model::StepArgs| model::train_step(&grad, &hyper, a));
    let bar = ProgressBar::with_draw_target(Some(args.steps as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{bar:32} {pos}/{len} steps | loss {msg} | {per_sec} | eta {eta}")
            .map_err(|e| e.to_string())?,
    );
    let mut batches = Batches::new(train, args.seed, args.batch);
    let mut state = State::new(params);
    let mut losses = Vec::with_capacity(args.steps);
    for step in 0..args.steps {
        let (images, labels) = batches.get(step).map_err(err)?;
        let results = step_fn.call(&state.into_args(images, labels, step)).map_err(err)?;
        let loss;
        (state, loss) = State::from_results(results)?;
        if !loss.is_finite() {
            return Err(format!("the loss is {loss} at step {step}"));
        }
        losses.push(loss);
        if step % 10 == 0 || step + 1 == args.steps {
            bar.set_message(format!("{loss:.4}"));
        }
        bar.inc(1);
    }
    bar.finish();
    Ok((state.params, losses))
}

/// The held-out mean loss and accuracy.
fn evaluate(params: &Params<Array>, held_out: &Digits) -> Result<(f32, f32), remat::Error> {
    let (images, labels) = held_out.arrays();
    let out = remat::jit(model::evaluate).call(&(params.clone(), images, labels))?;
    let n = held_out.len() as f32;
    Ok((f32_value(&out[0]) / n, f32_value(&out[1]) / n))
}

fn write_plot(path: &Path, losses: &[f32], policy: Choice) -> Result<(), String> {
    use plotters::prelude::*;
    let fail = |e: &dyn std::fmt::Display| format!("writing {}: {e}", path.display());
    let root = SVGBackend::new(path, (720, 400)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let top = losses.iter().take(20).fold(0f32, |a, &b| a.max(b)).max(0.1);
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("digits CNN, remat, policy {}: training loss", policy.name()), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0..losses.len(), 0f32..top * 1.05)
        .map_err(|e| fail(&e))?;
    chart.configure_mesh().x_desc("step").y_desc("cross-entropy").draw().map_err(|e| fail(&e))?;
    chart
        .draw_series(LineSeries::new(losses.iter().enumerate().map(|(i, &l)| (i, l)), RGBColor(160, 190, 230)))
        .map_err(|e| fail(&e))?
        .label("batch loss")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], RGBColor(160, 190, 230)));
    let window = 25;
    let smooth =
        losses.windows(window).enumerate().map(|(i, w)| (i + window - 1, w.iter().sum::<f32>() / window as f32));
    chart
        .draw_series(LineSeries::new(smooth, BLUE.stroke_width(2)))
        .map_err(|e| fail(&e))?
        .label(format!("mean of {window} steps"))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLUE.stroke_width(2)));
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE).draw().map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))?;
    Ok(())
}
