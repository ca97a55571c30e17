//! `remat plan` end to end: the plan's text, `-o`'s program measured by `remat bench`,
//! `--json`, `--frontier`, `--names-only`, and the errors.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn remat(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_remat")).args(args).output().expect("run remat")
}

fn primal(name: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../plan/tests/data/primal");
    root.join(format!("{name}.jaxpr")).display().to_string()
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "remat failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn json(o: &Output) -> Value {
    serde_json::from_str(stdout(o).lines().last().unwrap()).unwrap()
}

#[test]
fn the_planned_program_benches_at_the_reported_peak() {
    let file = primal("transformer_reduced");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("planned.jaxpr");
    let out_s = out.display().to_string();
    let frontier = json(&remat(&["plan", &file, "--argnums", "0-15", "--frontier", "--json"]));
    let points = frontier["frontier"].as_array().unwrap();
    assert!(points.len() >= 2, "{frontier}");
    assert_eq!(frontier["builtins"].as_array().unwrap().len(), 5);
    // A budget between the two smallest peaks of the frontier chooses the smallest.
    let (p0, p1) = (points[0]["peak_bytes"].as_u64().unwrap(), points[1]["peak_bytes"].as_u64().unwrap());
    let budget = ((p0 + p1) / 2).to_string();
    let plan = json(&remat(&["plan", &file, "--argnums", "0-15", "--budget", &budget, "--json", "-o", &out_s]));
    let peak = plan["plan"]["peak_bytes"].as_u64().unwrap();
    assert_eq!(peak, p0);
    assert_eq!(plan["plan"]["recompute_flops"], points[0]["recompute_flops"]);
    let bench = json(&remat(&["bench", &out_s, "--runs", "1", "--json"]));
    assert_eq!(bench["peak_bytes"].as_u64().unwrap(), peak, "remat bench measures the plan's peak");
    // The text form says the same.
    let text = stdout(&remat(&["plan", &file, "--argnums", "0-15", "--budget", &budget]));
    assert!(text.contains(&format!("peak: {peak} bytes")), "{text}");
    assert!(text.contains("saved (") && text.contains("recomputed ("), "{text}");
    assert!(text.contains(" output of ") && text.contains(" from the argument "), "{text}");
}

#[test]
fn names_only_prints_the_jax_policy() {
    let file = primal("gpt_names_reduced");
    let text = stdout(&remat(&["plan", &file, "--argnums", "0-13", "--names-only", "--budget", "1GiB"]));
    assert!(text.contains("policy: jax.checkpoint_policies.save_only_these_names("), "{text}");
}

#[test]
fn plan_errors_are_clear() {
    let file = primal("transformer_reduced");
    let small = remat(&["plan", &file, "--budget", "1KiB"]);
    assert!(!small.status.success());
    let err = String::from_utf8_lossy(&small.stderr);
    assert!(err.contains("no plan fits the budget of 1024 bytes: the smallest peak reachable is"), "{err}");
    let offload = remat(&["plan", &file, "--budget", "1MiB", "--host-budget", "a lot"]);
    assert!(String::from_utf8_lossy(&offload.stderr).contains("expected a number of bytes"));
    let bad = remat(&["plan", &file, "--budget", "lots"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("expected a number of bytes"));
    let none = remat(&["plan", &file]);
    assert!(String::from_utf8_lossy(&none.stderr).contains("give --budget BYTES"));
    let argnums = remat(&["plan", &file, "--budget", "1MiB", "--argnums", "3-1"]);
    assert!(String::from_utf8_lossy(&argnums.stderr).contains("--argnums `3-1`"));
}

/// `--host-budget`: the tightest budget is met by moving residuals to host memory instead
/// of recomputing them, and the plan says what moves.
#[test]
fn a_host_budget_offloads_instead_of_recomputing() {
    let chain = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../plan/tests/data/chain.jaxpr");
    let file = chain.to_str().unwrap();
    let plain = stdout(&remat(&["plan", file, "--argnums", "0", "--budget", "32KiB"]));
    assert!(plain.contains("recompute: 8192 FLOPs") && !plain.contains("offloaded"), "{plain}");
    let text = stdout(&remat(&["plan", file, "--argnums", "0", "--budget", "32KiB", "--host-budget", "1MiB"]));
    assert!(text.contains("recompute: 0 FLOPs"), "{text}");
    assert!(
        text.contains("offloaded (4, 65536 bytes (64.00 KiB) of host memory; each moved to host memory after"),
        "{text}"
    );
    assert!(
        text.contains("  f32[4096] output of cos from ") && text.contains("  f32<host>[4096] output of device_put"),
        "{text}"
    );
}
