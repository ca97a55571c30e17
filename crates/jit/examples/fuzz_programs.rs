//! Fuzzing the JIT against the interpreter (issue 22, target b): random well-typed programs
//! over every primitive and dtype (the generator of `tests/random_programs`), each compiled
//! under every CSE scope and compared with the interpreter, bit for bit where the
//! operations are exact and within the bounds `generator::close` documents where not.
//!
//! ```text
//! cargo run --release -p remat-jit --example fuzz_programs -- --seconds 60 [--seed S]
//! cargo run --release -p remat-jit --example fuzz_programs -- --program SEED
//! ```
//!
//! Runs programs until the time budget ends, then prints the number of programs, the CPU
//! time, how often each primitive ran on each dtype, and every finding (the program's seed,
//! the disagreement and the printed program). Exits with status 1 if anything was found.
//! `--seed` fixes the run's sequence of programs (by default it is drawn from the clock and
//! printed); `--only PRIMITIVE` checks only the programs that use that primitive (by its
//! JAX name); `--program SEED` checks one program and prints it; `--trace` prints each
//! program's seed before it runs, which names the culprit if the process aborts;
//! `--file PROGRAM.jaxpr` checks a program written as text (arguments drawn from `--seed`,
//! 0 by default), which is how a finding is cut down to its regression test.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/random_programs/generator.rs"]
mod generator;

use std::process::ExitCode;
use std::time::{Duration, Instant};

struct Args {
    seconds: f64,
    seed: Option<u64>,
    program: Option<u64>,
    only: Option<String>,
    trace: bool,
    file: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { seconds: 10.0, seed: None, program: None, only: None, trace: false, file: None };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "--seconds" => args.seconds = value("--seconds")?.parse().map_err(|e| format!("--seconds: {e}"))?,
            "--seed" => args.seed = Some(value("--seed")?.parse().map_err(|e| format!("--seed: {e}"))?),
            "--program" => args.program = Some(value("--program")?.parse().map_err(|e| format!("--program: {e}"))?),
            "--only" => args.only = Some(value("--only")?),
            "--trace" => args.trace = true,
            "--file" => args.file = Some(value("--file")?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

/// The CPU time this process has used (user + system), where Linux reports it.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name (which is in parentheses and may hold spaces).
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ, 100 on every Linux configuration this runs on.
    Some(Duration::from_millis(ticks * 10))
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("fuzz_programs: {e}");
            return ExitCode::from(2);
        }
    };
    let one = match (&args.file, args.program) {
        (Some(path), _) => {
            let text = match std::fs::read_to_string(path) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("fuzz_programs: {path}: {e}");
                    return ExitCode::from(2);
                }
            };
            match remat_ir::parse_jaxpr(&text, path) {
                Ok(j) => Some((j, args.seed.unwrap_or(0))),
                Err(e) => {
                    eprintln!("fuzz_programs: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        (None, Some(seed)) => {
            let (jaxpr, differentiated) = generator::made(seed);
            if differentiated {
                println!("seed {seed}: a value-and-grad program, made by remat-ad");
            }
            Some((jaxpr, seed))
        }
        (None, None) => None,
    };
    if let Some((jaxpr, seed)) = one {
        println!("{}", remat_ir::pp_jaxpr(&jaxpr));
        return match generator::check_jaxpr(&jaxpr, seed) {
            Ok(generator::Verdict::Agrees) => {
                println!("seed {seed}: the JIT agrees with the interpreter");
                ExitCode::SUCCESS
            }
            Ok(generator::Verdict::WithinBounds(why)) => {
                println!("seed {seed}: the JIT differs from the interpreter within the documented bounds:\n{why}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                println!("{e}");
                ExitCode::FAILURE
            }
        };
    }
    let run = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
    });
    println!("fuzz_programs: run seed {run}, budget {} s", args.seconds);
    // Panics are reported as findings; their default message would be printed twice.
    std::panic::set_hook(Box::new(|_| {}));
    let (start, budget) = (Instant::now(), Duration::from_secs_f64(args.seconds));
    let report = generator::fuzz(run, args.only.as_deref(), args.trace, |_| start.elapsed() < budget);
    let elapsed = start.elapsed();
    println!("\ncoverage (primitive, dtype: equations):");
    for ((prim, dtype), n) in &report.coverage {
        println!("  {prim} {dtype}: {n}");
    }
    for (seed, why) in &report.within_bounds {
        println!("\nwithin bounds: seed {seed}:\n{why}");
    }
    for (seed, e) in &report.findings {
        println!("\nFINDING seed {seed} (rerun: --program {seed}):\n{e}");
    }
    let cpu = cpu_time().map_or("unknown".to_string(), |c| format!("{:.1} s", c.as_secs_f64()));
    println!(
        "\n{} programs in {:.1} s (CPU {cpu}), {} primitive/dtype pairs, {} within documented bounds, {} findings",
        report.programs,
        elapsed.as_secs_f64(),
        report.coverage.len(),
        report.within_bounds.len(),
        report.findings.len()
    );
    if report.findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
