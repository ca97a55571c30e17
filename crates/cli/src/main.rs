//! `remat`: the command-line tool. Each subcommand lives in `commands/`; this file only
//! parses the command line and turns errors into a message on stderr and exit code 1.

mod commands;
mod io;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Print, evaluate, differentiate and benchmark jaxprs (including the text
/// `jax.make_jaxpr` prints), and show what their vjp saves and its two halves.
#[derive(Debug, Parser)]
#[command(name = "remat", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Parse, verify and print a jaxpr back in JAX's text form.
    Print {
        /// The jaxpr text file (`-` for standard input).
        file: PathBuf,
    },
    /// Evaluate a jaxpr on inputs and write `{"outputs": [...]}`.
    Eval {
        /// The jaxpr text file (`-` for standard input).
        file: PathBuf,
        /// A JSON array of input arrays (`{"dtype": "f32", "shape": [5, 4], "data": [...]}`),
        /// or a conformance case (its `args` are used).
        #[arg(long)]
        inputs: PathBuf,
        /// Where to write the result (default: standard output).
        #[arg(long)]
        out: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = Backend::Interp)]
        backend: Backend,
        /// What NaNs do.
        #[arg(long, value_enum, default_value_t = Nans::RejectInputs)]
        nans: Nans,
    },
    /// Print what the vjp of a jaxpr saves for its backward pass, one line per residual,
    /// as `jax.ad_checkpoint.print_saved_residuals` prints it.
    Residuals {
        /// The jaxpr text file (`-` for standard input).
        file: PathBuf,
        #[command(flatten)]
        policy_names: PolicyNamesArg,
        /// The arguments' names (`W1,W2,W3,x`); default: the file's binder names.
        #[arg(long)]
        arg_names: Option<String>,
        /// Also say what one device holds of each residual (a sharded program: `jit` with
        /// shardings, `shard_map`), and the total per device.
        #[arg(long)]
        per_device: bool,
    },
    /// Print the forward and backward jaxprs of the vjp side by side.
    FwdBwd {
        /// The jaxpr text file (`-` for standard input).
        file: PathBuf,
        #[command(flatten)]
        policy_names: PolicyNamesArg,
        /// Write the two halves and their residual edges as a Graphviz DOT graph instead.
        #[arg(long)]
        dot: bool,
    },
    /// Differentiate a jaxpr (vjp at the inputs, applied to the cotangents) and write
    /// `{"outputs": [...], "grads": [...]}`, one gradient per input.
    Grad {
        /// The jaxpr text file (`-` for standard input).
        file: PathBuf,
        #[command(flatten)]
        policy_names: PolicyNamesArg,
        /// Input arrays as for `eval` (or a conformance case: its `args`).
        #[arg(long)]
        inputs: PathBuf,
        /// One cotangent per output, a JSON array of arrays (or a conformance case: its
        /// `cotangents`).
        #[arg(long)]
        cotangents: PathBuf,
        /// Where to write the result (default: standard output).
        #[arg(long)]
        out: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = Backend::Interp)]
        backend: Backend,
        /// What NaNs do.
        #[arg(long, value_enum, default_value_t = Nans::RejectInputs)]
        nans: Nans,
    },
    /// Plan the memory of a scalar loss's value-and-grad: choose what the forward half
    /// saves so that the whole program's planned peak fits the budget and the backward
    /// half recomputes the least (docs/planner.md).
    Plan {
        /// The jaxpr text file of the loss (the primal function, as `residuals` takes it).
        file: PathBuf,
        #[command(flatten)]
        policy_names: PolicyNamesArg,
        /// Device bytes the whole program may use: `64MiB`, `1.5GB`, `1000000`.
        #[arg(long)]
        budget: Option<String>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Choose only among values named with `checkpoint_name`, and print the
        /// `jax.checkpoint_policies.save_only_these_names(...)` call that reproduces the plan
        /// (with `--host-budget`, `save_and_offload_only_these_names(...)`).
        #[arg(long)]
        names_only: bool,
        /// Print the Pareto frontier of peak bytes against recompute FLOPs, with the
        /// built-in policies on the same axes.
        #[arg(long)]
        frontier: bool,
        /// Write the planned whole program (forward then backward), which `remat bench` runs.
        #[arg(short = 'o', long = "out")]
        out: Option<PathBuf>,
        /// The inputs differentiated (`0-15`, `0,2`); default: every float input.
        #[arg(long)]
        argnums: Option<String>,
        /// Host memory the plan may keep residuals in (offloaded between the halves): `1GiB`;
        /// an error if nothing can be offloaded within it
        #[arg(long)]
        host_budget: Option<String>,
    },
    /// The residual ledger: plan the vjp of a jaxpr as one program (forward then backward,
    /// as `bench` plans a value-and-grad program) and say, per saved residual, its bytes,
    /// name, source, lifetime, why it is saved and what recomputing it would cost, then
    /// which buffers make up the planned peak.
    Explain {
        /// The jaxpr text file (`-` for standard input).
        file: PathBuf,
        #[command(flatten)]
        policy_names: PolicyNamesArg,
        /// Explain the vjp with every checkpoint under this policy (without one, the whole
        /// function checkpointed), in `remat report --policy`'s words: `everything`,
        /// `nothing`, `dots`, `dots_no_batch`, `names:a+b`, `as-written`.
        #[arg(long, conflicts_with_all = ["budget", "no_split"])]
        policy: Option<String>,
        /// Explain the memory planner's plan for this many bytes (as `remat plan --budget`,
        /// every float input differentiated): `64MiB`, `1.5GB`, `1000000`. Each row then
        /// says it is saved by the planner's decision.
        #[arg(long, conflicts_with = "no_split")]
        budget: Option<String>,
        /// The program is already differentiated (a value-and-grad jaxpr): explain its
        /// buffers as it is, without a residual split.
        #[arg(long)]
        no_split: bool,
        /// Write the ledger as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Write the report of a jaxpr's vjp: one self-contained HTML file with the memory over
    /// program order, the split (residuals as edges from forward to backward), the frontier
    /// of the built-in policies and the planner's plans, and the ledger; or one figure as
    /// SVG. The program is reported as written, under one policy (`--policy`), under the
    /// memory planner's plan for a budget (`--budget`), or several of these side by side
    /// (`--compare`); several files are compared in one report.
    Report {
        /// The jaxpr text files (`-` for standard input).
        #[arg(required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        policy_names: PolicyNamesArg,
        /// Report the program with every checkpoint under this policy (without one, the
        /// whole function checkpointed): `everything`, `nothing`, `dots`, `dots_no_batch`
        /// (or JAX's names, `dots_saveable`...), `names:a+b` (`save_only_these_names('a',
        /// 'b')`), `as-written`.
        #[arg(long, conflicts_with_all = ["budget", "compare"])]
        policy: Option<String>,
        /// Report the memory planner's plan for this many bytes (as `remat plan --budget`):
        /// `64MiB`, `1.5GB`, `1000000`.
        #[arg(long, conflicts_with = "compare")]
        budget: Option<String>,
        /// Compare sides: a comma-separated list of `--policy` words and `budget:BYTES`,
        /// such as `nothing,dots,names:attn_out,budget:64MiB` (at most 6).
        #[arg(long)]
        compare: Option<String>,
        /// The program is already differentiated: report it as it is, without a split.
        #[arg(long)]
        no_split: bool,
        /// Where to write (default: standard output).
        #[arg(short = 'o', long)]
        out: Option<PathBuf>,
        /// `html` (the whole report) or `svg` (one figure, `--figure`). Default: what the
        /// `-o` file's extension says (`.svg`, `.html`/`.htm`), else `html`; a format that
        /// contradicts the extension is an error.
        #[arg(long, value_enum)]
        format: Option<Format>,
        /// The figure an SVG holds (`memory` draws every side, side by side); default
        /// `memory`. Only for SVG output.
        #[arg(long, value_enum)]
        figure: Option<FigureArg>,
    },
    /// Compile a jaxpr with the JIT, run it N times, and report compile time, median run
    /// time and the planned peak bytes.
    Bench {
        /// The jaxpr text file (`-` for standard input).
        file: PathBuf,
        /// Input arrays as for `eval`; without it, deterministic pseudo-random inputs in
        /// [-1, 1] of the right avals.
        #[arg(long)]
        inputs: Option<PathBuf>,
        /// How many timed runs (after one warm-up run): 1 or more.
        #[arg(long, default_value_t = 10, value_parser = at_least_one)]
        runs: usize,
        /// End with one JSON line `{"compile_ms": ..., "run_median_ms": ..., "peak_bytes": ...}`.
        #[arg(long)]
        json: bool,
        /// Where the JIT merges equal equations: `auto` merges a checkpoint's recompute
        /// with the forward pass when the planned peak memory does not grow;
        /// `within-checkpoints` always does the recompute a `prevent_cse` checkpoint asks for
        /// (JAX's meaning); `across-checkpoints` always merges, as XLA does on CPU; `off`
        /// compiles the program as written.
        #[arg(long, value_enum, default_value_t = Cse::Auto)]
        cse: Cse,
        /// What NaNs do (`debug` checks the warm-up run's results).
        #[arg(long, value_enum, default_value_t = Nans::RejectInputs)]
        nans: Nans,
    },
}

/// The meaning of the opaque remat policies a program holds, for every subcommand that
/// differentiates.
#[derive(Debug, clap::Args)]
struct PolicyNamesArg {
    /// What a `<function save_and_offload_only_these_names.<locals>.policy at 0x...>`
    /// policy saves (JAX prints it without its arguments): `save=a,b offload=c` means
    /// `save_and_offload_only_these_names(['a', 'b'], ['c'])`, offloading to pinned host.
    #[arg(long, num_args = 1.., value_name = "save=NAMES offload=NAMES")]
    policy_names: Vec<String>,
}

impl PolicyNamesArg {
    /// The meaning the words give, if any were given (each command gives it to the
    /// program it reads: `io::read_program`).
    fn parse(&self) -> Result<Option<remat::PolicyNames>, io::CliError> {
        if self.policy_names.is_empty() {
            return Ok(None);
        }
        Ok(Some(remat::PolicyNames::parse(&self.policy_names)?))
    }
}

/// `--runs`: a count of at least one.
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("`{s}` is not a count: {e}")),
    }
}

/// What `report` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Html,
    Svg,
}

/// `remat::report::Figure` on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FigureArg {
    Memory,
    Split,
    Frontier,
}

impl From<FigureArg> for remat::report::Figure {
    fn from(f: FigureArg) -> remat::report::Figure {
        match f {
            FigureArg::Memory => remat::report::Figure::Memory,
            FigureArg::Split => remat::report::Figure::Split,
            FigureArg::Frontier => remat::report::Figure::Frontier,
        }
    }
}

/// `remat::CseScope` on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Cse {
    Off,
    WithinCheckpoints,
    Auto,
    AcrossCheckpoints,
}

impl From<Cse> for remat::CseScope {
    fn from(c: Cse) -> remat::CseScope {
        match c {
            Cse::Off => remat::CseScope::Off,
            Cse::WithinCheckpoints => remat::CseScope::WithinCheckpoints,
            Cse::Auto => remat::CseScope::Auto,
            Cse::AcrossCheckpoints => remat::CseScope::AcrossCheckpoints,
        }
    }
}

/// `remat::Nans` on the command line: what NaNs in the inputs, or made by the program, do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Nans {
    /// An input holding a NaN is an error naming the input and the element.
    RejectInputs,
    /// NaNs flow through the arithmetic, as in JAX.
    Propagate,
    /// JAX's `jax_debug_nans`: inputs are checked, and the first equation whose result
    /// holds a NaN is an error naming it (index, primitive, line), on either backend, also
    /// when the NaN does not reach a result.
    Debug,
    /// `debug` and JAX's `jax_debug_infs`: an equation whose result holds an infinity is an
    /// error too.
    DebugInfs,
}

impl From<Nans> for remat::Nans {
    fn from(n: Nans) -> remat::Nans {
        match n {
            Nans::RejectInputs => remat::Nans::RejectArguments,
            Nans::Propagate => remat::Nans::Propagate,
            Nans::Debug => remat::Nans::Debug,
            Nans::DebugInfs => remat::Nans::DebugInfs,
        }
    }
}

/// `remat::Backend` on the command line: how a program is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// The reference interpreter.
    Interp,
    /// The Cranelift JIT (compiled to native code, then run).
    Jit,
}

impl From<Backend> for remat::Backend {
    fn from(b: Backend) -> remat::Backend {
        match b {
            Backend::Interp => remat::Backend::Interp,
            Backend::Jit => remat::Backend::Jit,
        }
    }
}

fn run(command: Command) -> Result<(), io::CliError> {
    match command {
        Command::Print { file } => commands::print::run(&file),
        Command::Eval { file, inputs, out, backend, nans } => {
            commands::eval::run(&file, &inputs, out.as_deref(), backend.into(), nans.into())
        }
        Command::Bench { file, inputs, runs, json, cse, nans } => {
            commands::bench::run(&file, inputs.as_deref(), runs, json, cse.into(), nans.into())
        }
        Command::Plan { file, policy_names, budget, json, names_only, frontier, out, argnums, host_budget } => {
            commands::plan::run(&commands::plan::Request {
                file: &file,
                policy_names: policy_names.parse()?.as_ref(),
                budget: budget.as_deref(),
                json,
                names_only,
                frontier,
                out: out.as_deref(),
                argnums: argnums.as_deref(),
                host_budget: host_budget.as_deref(),
            })
        }
        Command::Residuals { file, policy_names, arg_names, per_device } => {
            commands::residuals::run(&file, policy_names.parse()?.as_ref(), arg_names.as_deref(), per_device)
        }
        Command::Explain { file, policy_names, policy, budget, no_split, json } => commands::explain::run(
            &file,
            policy_names.parse()?.as_ref(),
            policy.as_deref(),
            budget.as_deref(),
            no_split,
            json,
        ),
        Command::FwdBwd { file, policy_names, dot } => {
            commands::fwd_bwd::run(&file, policy_names.parse()?.as_ref(), dot)
        }
        Command::Report { files, policy_names, policy, budget, compare, no_split, out, format, figure } => {
            let svg = commands::report::output_form(out.as_deref(), format, figure)?;
            commands::report::run(&commands::report::Request {
                files: &files,
                policy_names: policy_names.parse()?.as_ref(),
                no_split,
                out: out.as_deref(),
                svg,
                policy: policy.as_deref(),
                budget: budget.as_deref(),
                compare: compare.as_deref(),
            })
        }
        Command::Grad { file, policy_names, inputs, cotangents, out, backend, nans } => commands::grad::run(
            &file,
            policy_names.parse()?.as_ref(),
            &inputs,
            &cotangents,
            out.as_deref(),
            backend.into(),
            nans.into(),
        ),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = run(cli.command);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
