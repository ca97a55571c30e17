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

/// The zoo's GPT block (a scalar loss with a named checkpoint) as a jaxpr file.
fn gpt_block_file(dir: &std::path::Path) -> String {
    zoo_file(dir, "gpt_block")
}

fn zoo_file(dir: &std::path::Path, name: &str) -> String {
    let case: Value =
        serde_json::from_str(&std::fs::read_to_string(data_dir().join(format!("zoo/{name}.json"))).unwrap()).unwrap();
    let file = dir.join(format!("{name}.jaxpr"));
    std::fs::write(&file, case["jaxpr"].as_str().unwrap()).unwrap();
    file.to_str().unwrap().to_string()
}

/// A `while_loop` has no vjp (JAX refuses it too): the report says so and points to
/// `--no-split`, which reports the program as it is.
#[test]
fn a_program_without_a_vjp_is_reported_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let file = zoo_file(dir.path(), "control_flow_while");
    let out = remat(&["report", &file, "-o", dir.path().join("r.html").to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("Reverse-mode differentiation does not work"), "{err}");
    assert!(err.contains("`remat report --no-split` reports the program as it is"), "{err}");
    let html = dir.path().join("n.html");
    let out = remat(&["report", &file, "--no-split", "-o", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(html).unwrap();
    assert!(html.contains("<h2>Memory over program order</h2>") && html.contains("while"));
}

#[test]
fn report_a_budget_a_policy_and_a_comparison() {
    let dir = tempfile::tempdir().unwrap();
    let file = gpt_block_file(dir.path());
    // The planner's smallest and largest peaks, from `remat plan --frontier --json`.
    let plan: Value = serde_json::from_str(&stdout(&remat(&["plan", &file, "--frontier", "--json"]))).unwrap();
    let peaks: Vec<u64> =
        plan["frontier"].as_array().unwrap().iter().map(|p| p["peak_bytes"].as_u64().unwrap()).collect();
    let budget = (peaks.iter().min().unwrap() + peaks.iter().max().unwrap()) / 2;
    let chosen: Value =
        serde_json::from_str(&stdout(&remat(&["plan", &file, "--budget", &budget.to_string(), "--json"]))).unwrap();
    let chosen_peak = chosen["plan"]["peak_bytes"].as_u64().unwrap();
    // --budget: the plan's ledger, its peak the planner's, the plans on the frontier.
    let html = stdout(&remat(&["report", &file, "--budget", &budget.to_string()]));
    assert!(html.contains(&format!("Planned peak {chosen_peak} bytes")), "the plan's peak {chosen_peak}");
    assert!(html.contains("why saved: planner decision"));
    assert!(html.contains("class=\"plan\""));
    let frontier =
        stdout(&remat(&["report", &file, "--budget", &budget.to_string(), "--format", "svg", "--figure", "frontier"]));
    assert!(frontier.starts_with("<svg ") && frontier.contains(&format!("plan for {}", human(budget))), "{frontier}");
    // --policy: the policy's ledger.
    let html = stdout(&remat(&["report", &file, "--policy", "dots"]));
    assert!(html.contains("why saved: dots_saveable"));
    // --compare: one memory panel per side, one split per side.
    let out = dir.path().join("c.html");
    let list = format!("nothing,dots,names:attn_out,budget:{budget}");
    stdout(&remat(&["report", &file, "--compare", &list, "-o", out.to_str().unwrap()]));
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.contains("same byte scale"));
    assert_eq!(html.matches("<svg x=\"").count(), 4);
    assert_eq!(html.matches("<pre id=\"detail-split").count(), 4);
    let svg = stdout(&remat(&["report", &file, "--compare", &list, "--format", "svg"]));
    assert_eq!(svg.matches("<svg x=\"").count(), 4);
    // Several files in one report.
    let two = stdout(&remat(&["report", &file, &file, "--policy", "nothing"]));
    assert!(two.contains("gpt_block.jaxpr: nothing_saveable"));
}

/// `12.00 KiB`, as the report labels a budget.
fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1048576.0 {
        format!("{:.2} MiB", b / 1048576.0)
    } else if b >= 1024.0 {
        format!("{:.2} KiB", b / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

#[test]
fn report_sides_are_parsed_strictly() {
    let dir = tempfile::tempdir().unwrap();
    let file = gpt_block_file(dir.path());
    let bench = data_dir().join("bench/mlp_small_dots.jaxpr");
    let bench = bench.to_str().unwrap();
    for (args, words) in [
        (vec!["report", &file, "--compare", "nothing,dotz"], "--compare entry 2: unknown policy `dotz`"),
        (vec!["report", &file, "--compare", "nothing,,dots"], "entry 2 is empty"),
        (vec!["report", &file, "--compare", "budget:12 parsecs"], "expected a number of bytes"),
        (vec!["report", &file, "--policy", "budget:1MiB"], "unknown policy `budget:1MiB`"),
        (vec!["report", &file, "--budget", "lots"], "budget `lots`"),
        (vec!["report", &file, "--budget", "1"], "no plan fits the budget of 1 bytes"),
        (vec!["report", &file, "--policy", "dots", "--budget", "1MiB"], "cannot be used with"),
        (vec!["report", bench, "--no-split", "--policy", "dots"], "need the primal function"),
        (vec!["report", &file, "--compare", "nothing,dots", "--format", "svg", "--figure", "split"], "draws one side"),
    ] {
        let out = remat(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(words), "{args:?}: {err}");
    }
}
