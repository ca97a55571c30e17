//! Fuzzes the text boundaries of remat (issue 22): the jaxpr parser and the JSON input
//! reader, on mutations of the programs and inputs in `tests/data` and on generated texts.
//!
//! ```text
//! cargo run --release -p remat --example fuzz_text -- --target parser --seconds 600 [--seed 1] [--count N]
//! cargo run --release -p remat --example fuzz_text -- --target json --seconds 600
//! ```
//!
//! Prints the inputs tried and every finding (a panic, a hang, an accepted input that does
//! not round-trip, an error that does not say where), each with its shrunk input; exits
//! with 1 if there is any. A program that parses and verifies is also taken through what
//! the command line does with it: differentiated (`residuals`, `fwd-bwd`, `grad`) and, when
//! its values are small, evaluated by the interpreter with its vjp.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use remat_testkit::fuzz::{self, Config, Target};

mod deep;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let Some(target) = value("--target").as_deref().and_then(Target::from_name) else {
        eprintln!("usage: fuzz_text --target parser|json [--seconds N] [--count N] [--seed S]");
        return ExitCode::FAILURE;
    };
    let number = |flag: &str, default: f64| value(flag).and_then(|v| v.parse::<f64>().ok()).unwrap_or(default);
    let config = Config {
        target,
        seconds: number("--seconds", 60.0),
        max_inputs: number("--count", u64::MAX as f64) as u64,
        seed: number("--seed", 1.0) as u64,
        time_limit: Duration::from_secs(10),
    };
    let deep: Option<Arc<fuzz::Deep>> = match target {
        Target::Parser => Some(Arc::new(deep::deep_check)),
        Target::Json => None,
    };
    let report = fuzz::run(&config, deep, Some(Duration::from_secs(30)));
    println!(
        "target {}: seed {}, {} inputs tried ({} accepted) in {:.1} s, {} findings",
        target.name(),
        config.seed,
        report.tried,
        report.accepted,
        report.elapsed.as_secs_f64(),
        report.findings.len()
    );
    for f in &report.findings {
        println!("{f}");
    }
    if report.findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
