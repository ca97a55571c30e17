//! `remat explain`, `remat report` and `remat fwd-bwd --dot` end to end: the ledger's last
//! line is `remat bench`'s planned peak for the same program, `--json` carries the same
//! sum, the report is one HTML file (or one SVG figure), and the DOT graph has the
//! residual edges.

use std::process::{Command, Output};

use remat_testkit::data_dir;
use serde_json::Value;

fn remat(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_remat")).args(args).output().expect("run remat")
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

/// The `peak_bytes` of `remat bench --json` on a file.
fn bench_peak(file: &str) -> u64 {
    let text = stdout(&remat(&["bench", file, "--runs", "1", "--json"]));
    let line = text.lines().last().expect("a JSON line");
    serde_json::from_str::<Value>(line).expect("JSON")["peak_bytes"].as_u64().expect("peak_bytes")
}

#[test]
fn explain_no_split_ends_at_the_benchmark_peak() {
    let file = data_dir().join("bench/mlp_small_dots.jaxpr");
    let file = file.to_str().unwrap();
    let text = stdout(&remat(&["explain", file, "--no-split"]));
    let peak = bench_peak(file);
    let last = text.lines().last().expect("a sum");
    assert!(last.starts_with("peak: ") && last.contains(&format!("= {peak} bytes, the planned peak")), "{last}");
    let json: Value = serde_json::from_str(&stdout(&remat(&["explain", file, "--no-split", "--json"]))).expect("JSON");
    let p = &json["peak"];
    let sum = p["residual_bytes"].as_u64().unwrap()
        + p["other_bytes"].as_u64().unwrap()
        + p["unused_bytes"].as_u64().unwrap();
    assert_eq!((sum, p["peak_bytes"].as_u64().unwrap()), (peak, peak));
}

#[test]
fn explain_a_primal_program_has_a_row_per_residual() {
    let dir = tempfile::tempdir().unwrap();
    let case: Value =
        serde_json::from_str(&std::fs::read_to_string(data_dir().join("conformance/save_only_a_c.json")).unwrap())
            .unwrap();
    let file = dir.path().join("f.jaxpr");
    std::fs::write(&file, case["jaxpr"].as_str().unwrap()).unwrap();
    let file = file.to_str().unwrap();
    let json: Value = serde_json::from_str(&stdout(&remat(&["explain", file, "--json"]))).expect("JSON");
    let rows = json["residuals"].as_array().expect("rows");
    assert_eq!(rows.len(), case["saved_residuals"].as_array().unwrap().len());
    let named = rows.iter().find(|r| r["kind"] == "named").expect("the named residual");
    assert_eq!(named["what"], "a");
    // The report: one HTML file with the three figures, or one figure alone.
    let html = dir.path().join("r.html");
    stdout(&remat(&["report", file, "-o", html.to_str().unwrap()]));
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(text.starts_with("<!DOCTYPE html>") && text.matches("<svg ").count() == 3);
    let svg = stdout(&remat(&["report", file, "--format", "svg", "--figure", "split"]));
    assert!(svg.starts_with("<svg ") && svg.contains("class=\"edge\""));
    let dot = stdout(&remat(&["fwd-bwd", file, "--dot"]));
    assert!(dot.starts_with("digraph vjp {") && dot.contains("color=\"#d62728\""), "{dot}");
}

#[test]
fn report_errors_name_the_file() {
    let out = remat(&["report", "/nonexistent/x.jaxpr"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/x.jaxpr"));
}
