//! Fuzzing the text boundaries (issue 22): (a) the jaxpr parser and (c) the JSON input
//! reader, on mutations of the real programs and inputs in `tests/data` and on generated
//! texts. Stable Rust, no instrumentation: a seeded mutator, a time or count budget, and
//! four kinds of finding:
//!
//! - a panic (caught with `catch_unwind`, with its message and location);
//! - a hang (one input taking longer than the time limit; the run stops there);
//! - an accepted input that does not round-trip: a jaxpr that verifies must print, parse
//!   back and print the same text; an array read from JSON must write JSON that reads back
//!   to the same JSON;
//! - an error that does not say where: a parse error's line and column must lie in the
//!   text, a verifier error must name its equation, a JSON error its field or element.
//!
//! The targets' checks need only the IR and its JSON form; a caller may add deeper checks
//! of accepted programs ([`Deep`]: the facade's example differentiates and evaluates them).
//! `cargo run --release -p remat --example fuzz_text -- --target parser --seconds 60` runs
//! a target; `crates/remat/tests/fuzz_smoke.rs` runs each one for a fixed count in CI.

pub mod mutate;

use std::cell::RefCell;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use remat_ir::{parse_jaxpr, pp_jaxpr, verify, Jaxpr};
use remat_json::ArrayJson;
use serde_json::Value;

use mutate::Prng;

/// The text a fuzz target reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `remat_ir::parse_jaxpr`, then (as the command line does) the verifier and the
    /// printer, and a caller's [`Deep`] checks.
    Parser,
    /// The command line's input reader: JSON text to a list of `remat_json` arrays.
    Json,
}

impl Target {
    pub fn from_name(name: &str) -> Option<Target> {
        match name {
            "parser" => Some(Target::Parser),
            "json" => Some(Target::Json),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Target::Parser => "parser",
            Target::Json => "json",
        }
    }
}

/// Deeper checks of a program the parser accepted and the verifier passed (for example
/// differentiating and evaluating it): an `Err` is a finding.
pub type Deep = dyn Fn(&Jaxpr) -> Result<(), String> + Send + Sync;

/// What went wrong with one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FindingKind {
    Panic,
    Hang,
    RoundTrip,
    Unlocated,
    Deep,
}

/// One finding: its kind, what happened, and the (smallest found) input.
#[derive(Clone, Debug)]
pub struct Finding {
    pub kind: FindingKind,
    pub detail: String,
    pub input: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}\n  input ({} bytes): {:?}", self.kind, self.detail, self.input.len(), self.input)
    }
}

/// A run's budget and seed.
#[derive(Clone, Debug)]
pub struct Config {
    pub target: Target,
    /// Stop after this long (wall clock)...
    pub seconds: f64,
    /// ... or after this many inputs, whichever comes first.
    pub max_inputs: u64,
    pub seed: u64,
    /// One input taking longer than this is a hang.
    pub time_limit: Duration,
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Report {
    pub tried: u64,
    /// Inputs the target accepted (parsed and verified; read as arrays).
    pub accepted: u64,
    /// Distinct findings (by kind and first line of detail), each with its smallest input.
    pub findings: Vec<Finding>,
    pub elapsed: Duration,
}

/// The outcome of one input, short of a panic or a hang.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Accepted,
    Rejected,
    Found(FindingKind, String),
}

/// The seeds of `target`: every jaxpr text in `tests/data` (conformance cases with their
/// JAX halves, per-primitive cases, the zoo, benchmark and extra texts), or every JSON input
/// and cotangent list (and each array alone).
pub fn seeds(target: Target) -> Vec<String> {
    let cases: Vec<Value> = crate::conformance_cases()
        .into_iter()
        .chain(crate::primitive_cases())
        .chain(crate::zoo_cases())
        .map(|(_, case)| case)
        .collect();
    match target {
        Target::Parser => {
            let mut texts = Vec::new();
            for case in &cases {
                for field in ["jaxpr", "jax_fwd_jaxpr", "jax_bwd_jaxpr"] {
                    if let Some(t) = case[field].as_str() {
                        texts.push(t.to_string());
                    }
                }
            }
            for dir in ["bench", "jax_extra", "indexing"] {
                if crate::data_dir().join(dir).is_dir() {
                    texts.extend(crate::jaxpr_files(dir).into_iter().map(|(_, t)| t));
                }
            }
            texts
        }
        Target::Json => {
            let mut texts = Vec::new();
            for case in &cases {
                for field in ["args", "cotangents"] {
                    let Some(items) = case[field].as_array() else { continue };
                    let whole = Value::Array(items.clone()).to_string();
                    // Large inputs slow every mutation down without reaching new code.
                    if whole.len() <= 4096 {
                        texts.push(whole);
                    }
                    for item in items {
                        let one = Value::Array(vec![item.clone()]).to_string();
                        if one.len() <= 4096 {
                            texts.push(one);
                        }
                    }
                }
            }
            texts.sort();
            texts.dedup();
            texts
        }
    }
}

/// The name JAX's printer gives the `i`-th variable (`a`..`z`, `ba`, ...).
pub fn var_name(mut i: usize) -> String {
    let mut s = Vec::new();
    loop {
        s.push(b'a' + (i % 26) as u8);
        i /= 26;
        if i == 0 {
            break;
        }
    }
    s.reverse();
    String::from_utf8(s).unwrap_or_default()
}

/// Runs target (a), the parser, on one text.
pub fn check_parser(text: &str, deep: Option<&Deep>) -> Outcome {
    let jaxpr = match parse_jaxpr(text, "fuzz.jaxpr") {
        Ok(j) => j,
        Err(e) => {
            let lines: Vec<&str> = text.split('\n').collect();
            let line_ok = e.line >= 1 && e.line <= lines.len();
            let column_ok = line_ok && e.column >= 1 && e.column <= lines[e.line - 1].chars().count() + 1;
            return match line_ok && column_ok && !e.message.is_empty() {
                true => Outcome::Rejected,
                false => Outcome::Found(FindingKind::Unlocated, format!("parse error outside the text: {e}")),
            };
        }
    };
    // Printing never panics, even a jaxpr that does not verify.
    let printed = pp_jaxpr(&jaxpr);
    if let Err(e) = verify(&jaxpr) {
        return match !e.problems.is_empty() && e.problems.iter().all(|p| !p.path.is_empty() && !p.message.is_empty()) {
            true => Outcome::Rejected,
            false => Outcome::Found(FindingKind::Unlocated, format!("verifier error without a place: {e:?}")),
        };
    }
    match parse_jaxpr(&printed, "printed.jaxpr") {
        Err(e) => return Outcome::Found(FindingKind::RoundTrip, format!("the printed text does not parse: {e}")),
        Ok(back) => {
            let again = pp_jaxpr(&back);
            if again != printed {
                return Outcome::Found(
                    FindingKind::RoundTrip,
                    format!("printed twice differently:\n{printed}\n{again}"),
                );
            }
            if let Err(e) = verify(&back) {
                return Outcome::Found(FindingKind::RoundTrip, format!("the printed text does not verify: {e}"));
            }
        }
    }
    match deep.map_or(Ok(()), |d| d(&jaxpr)) {
        Ok(()) => Outcome::Accepted,
        Err(e) => Outcome::Found(FindingKind::Deep, e),
    }
}

/// Runs target (c), the JSON input reader, on one text: as `remat eval --inputs` reads a
/// file (a list of arrays, or an object with an `args` list).
pub fn check_json(text: &str) -> Outcome {
    let Ok(value) = serde_json::from_str::<Value>(text) else { return Outcome::Rejected };
    let items = match &value {
        Value::Array(items) => items,
        Value::Object(obj) => match obj.get("args") {
            Some(Value::Array(items)) => items,
            _ => return Outcome::Rejected,
        },
        _ => return Outcome::Rejected,
    };
    for item in items {
        match remat_ir::Array::from_json(item) {
            Err(e) => {
                let m = e.to_string();
                let located = ["\"dtype\"", "\"shape\"", "\"data\"", "dtype ", "shape ", "element ", "a JSON object"]
                    .iter()
                    .any(|w| m.contains(w));
                return match located {
                    true => Outcome::Rejected,
                    false => Outcome::Found(FindingKind::Unlocated, format!("JSON error without its field: {m}")),
                };
            }
            Ok(a) => {
                let json = a.to_json();
                let back = match remat_ir::Array::from_json(&json) {
                    Ok(b) => b,
                    Err(e) => {
                        return Outcome::Found(FindingKind::RoundTrip, format!("written JSON does not read back: {e}"))
                    }
                };
                if back.to_json() != json {
                    return Outcome::Found(FindingKind::RoundTrip, format!("{json} reads back as {}", back.to_json()));
                }
            }
        }
    }
    Outcome::Accepted
}

thread_local! {
    /// The message and location of the last panic on this (fuzz worker) thread, which the
    /// panic hook runs on.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `config`'s target on mutated and generated inputs until its budget is spent or an
/// input hangs, printing progress every `progress` (if any) to standard error. Panics are
/// caught; the process's panic hook is silenced on fuzz worker threads for the run.
pub fn run(config: &Config, deep: Option<Arc<Deep>>, progress: Option<Duration>) -> Report {
    let seeds = seeds(config.target);
    let words = mutate::words(&seeds);
    let mut rng = Prng(config.seed);
    let start = Instant::now();
    let mut report = Report::default();
    let worker = Worker::spawn(config.target, deep);
    let previous_hook = panic::take_hook();
    panic::set_hook(Box::new(|info| {
        let on_worker = std::thread::current().name() == Some(WORKER);
        if on_worker {
            let at = info.location().map_or(String::new(), |l| format!(" at {}:{}", l.file(), l.line()));
            let message = panic_message(info.payload());
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{message}{at}")));
        } else {
            eprintln!("{info}");
        }
    }));
    let mut last_progress = Instant::now();
    while report.tried < config.max_inputs && start.elapsed().as_secs_f64() < config.seconds {
        let input = next_input(config.target, &mut rng, &seeds, &words);
        report.tried += 1;
        match worker.check(&input, config.time_limit) {
            Some(Outcome::Accepted) => report.accepted += 1,
            Some(Outcome::Rejected) => {}
            Some(Outcome::Found(kind, detail)) => {
                let minimal = minimize(&worker, &input, kind, &detail, config.time_limit);
                add_finding(&mut report.findings, Finding { kind, detail, input: minimal });
            }
            None => {
                add_finding(
                    &mut report.findings,
                    Finding { kind: FindingKind::Hang, detail: format!("over {:?}", config.time_limit), input },
                );
                break;
            }
        }
        if let Some(every) = progress {
            if last_progress.elapsed() >= every {
                last_progress = Instant::now();
                eprintln!(
                    "{}: {} inputs, {} accepted, {} findings, {:.0} s",
                    config.target.name(),
                    report.tried,
                    report.accepted,
                    report.findings.len(),
                    start.elapsed().as_secs_f64()
                );
            }
        }
    }
    panic::set_hook(previous_hook);
    report.elapsed = start.elapsed();
    report
}

fn next_input(target: Target, rng: &mut Prng, seeds: &[String], words: &[String]) -> String {
    // One input in eight is generated from scratch; the rest mutate a seed.
    if rng.chance(8) {
        return match target {
            Target::Parser => mutate::generate_jaxpr(rng, words),
            Target::Json => mutate::generate_json(rng),
        };
    }
    let seed = &seeds[rng.below(seeds.len())];
    mutate::mutate(rng, seed, seeds, words)
}

/// Keeps one finding per kind and first line of detail (a panic's message and place),
/// with the shortest input seen.
fn add_finding(findings: &mut Vec<Finding>, f: Finding) {
    let key = |f: &Finding| (f.kind, f.detail.lines().next().unwrap_or("").to_string());
    match findings.iter_mut().find(|g| key(g) == key(&f)) {
        Some(g) if f.input.len() < g.input.len() => *g = f,
        Some(_) => {}
        None => findings.push(f),
    }
}

/// A smaller input with the same finding (same kind, same first line of detail): chunks
/// deleted while the finding stays, within a budget of tries.
fn minimize(worker: &Worker, input: &str, kind: FindingKind, detail: &str, limit: Duration) -> String {
    let first = detail.lines().next().unwrap_or("").to_string();
    let same = |o: &Option<Outcome>| match o {
        Some(Outcome::Found(k, d)) => *k == kind && d.lines().next().unwrap_or("") == first,
        _ => false,
    };
    let mut best: Vec<char> = input.chars().collect();
    let mut chunk = best.len() / 2;
    let mut tries = 0;
    while chunk >= 1 && tries < 3000 {
        let mut i = 0;
        let mut removed = false;
        while i + chunk <= best.len() && tries < 3000 {
            let candidate: String = best[..i].iter().chain(&best[i + chunk..]).collect();
            tries += 1;
            if same(&worker.check(&candidate, limit)) {
                best.drain(i..i + chunk);
                removed = true;
            } else {
                i += chunk;
            }
        }
        if !removed {
            chunk /= 2;
        }
    }
    best.into_iter().collect()
}

const WORKER: &str = "remat-fuzz-worker";

/// The thread that runs the checks, so that a hang can be seen from outside it.
struct Worker {
    inputs: mpsc::Sender<String>,
    outcomes: mpsc::Receiver<Outcome>,
}

impl Worker {
    fn spawn(target: Target, deep: Option<Arc<Deep>>) -> Worker {
        let (in_tx, in_rx) = mpsc::channel::<String>();
        let (out_tx, out_rx) = mpsc::channel();
        // A deep recursion is a finding too, not a crash of the run: the worker's stack is
        // the main thread's usual 8 MiB.
        std::thread::Builder::new()
            .name(WORKER.into())
            .stack_size(8 << 20)
            .spawn(move || {
                for input in in_rx {
                    let outcome = panic::catch_unwind(AssertUnwindSafe(|| match target {
                        Target::Parser => check_parser(&input, deep.as_deref()),
                        Target::Json => check_json(&input),
                    }))
                    .unwrap_or_else(|_| {
                        let message = LAST_PANIC.with(|p| p.borrow_mut().take());
                        Outcome::Found(FindingKind::Panic, message.unwrap_or_else(|| "a panic".into()))
                    });
                    if out_tx.send(outcome).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn the fuzz worker");
        Worker { inputs: in_tx, outcomes: out_rx }
    }

    /// The outcome of `input`, or `None` if it takes longer than `limit` (the worker is
    /// then stuck, and the run ends).
    fn check(&self, input: &str, limit: Duration) -> Option<Outcome> {
        self.inputs.send(input.to_string()).ok()?;
        self.outcomes.recv_timeout(limit).ok()
    }
}

/// A panic payload's message.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variable_names_follow_jax() {
        assert_eq!([var_name(0), var_name(25), var_name(26), var_name(27)], ["a", "z", "ba", "bb"]);
    }

    #[test]
    fn a_round_trip_failure_and_an_unlocated_error_are_findings() {
        assert_eq!(check_parser("{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) }", None), Outcome::Accepted);
        assert_eq!(check_parser("{ lambda ; a:f32[]. let", None), Outcome::Rejected);
        let deep: &Deep = &|_| Err("deep".into());
        assert_eq!(
            check_parser("{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) }", Some(deep)),
            Outcome::Found(FindingKind::Deep, "deep".into())
        );
        assert_eq!(check_json(r#"[{"dtype":"f32","shape":[1],"data":[1]}]"#), Outcome::Accepted);
        assert_eq!(check_json(r#"[{"dtype":"f32","shape":[2],"data":[1]}]"#), Outcome::Rejected);
    }
}
