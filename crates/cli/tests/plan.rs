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
        text.contains("  f32[4096] output of cos from ")
            && text.contains("  f32<host>[4096] output of device_put (one of the offloaded values below)\n"),
        "{text}"
    );
}

/// `--names-only --host-budget`: the plan is a `save_and_offload_only_these_names` call
/// (JAX's keyword parameters), with the split of the names; `--json` carries both; a budget
/// only offloading meets gets an offloading split, a roomy one says it offloads nothing;
/// and offload that cannot be honoured is an error.
#[test]
fn names_only_with_a_host_budget_prints_the_offload_policy_and_the_split() {
    let file = primal("transformer_reduced");
    let base = ["plan", file.as_str(), "--argnums", "0-15", "--names-only"];
    let run = |extra: &[&str]| remat(&[&base[..], extra].concat());
    // Saving every name is the smallest names-only peak without a host budget.
    let save_only = json(&run(&["--frontier", "--json"]));
    let min_save_only = save_only["frontier"][0]["peak_bytes"].as_u64().unwrap();
    let tight = (min_save_only - 1).to_string();
    let text = stdout(&run(&["--budget", &tight, "--host-budget", "1MiB"]));
    assert!(
        text.contains("  policy: jax.checkpoint_policies.save_and_offload_only_these_names(names_which_can_be_saved=["),
        "{text}"
    );
    assert!(text.contains("], offload_src=\"device\", offload_dst=\"pinned_host\")\n"), "{text}");
    assert!(text.contains("  names saved on the device: ") && text.contains("; offloaded to host memory: "), "{text}");
    assert!(text.contains("offloaded (") && text.contains("f32<host>[2,8,"), "{text}");
    let plan = json(&run(&["--budget", &tight, "--host-budget", "1MiB", "--json"]))["plan"].clone();
    assert!(plan["peak_bytes"].as_u64().unwrap() < min_save_only, "{plan}");
    let names = &plan["names"];
    let offloaded = names["offloaded"].as_array().unwrap();
    assert!(!offloaded.is_empty(), "{plan}");
    let all: usize = ["saved", "offloaded", "recomputed"].iter().map(|k| names[k].as_array().unwrap().len()).sum();
    assert_eq!(all, 5, "{plan}");
    let call = plan["jax_policy"].as_str().unwrap();
    let listed: Vec<String> = offloaded.iter().map(|n| format!("'{}'", n.as_str().unwrap())).collect();
    assert!(call.contains(&format!("names_which_can_be_offloaded=[{}]", listed.join(", "))), "{call}");
    assert!(plan["host_bytes"].as_u64().unwrap() > 0 && !plan["offloaded"].as_array().unwrap().is_empty());
    // At a budget saving fits, offloading saves no recomputation: said, not hidden.
    let roomy = stdout(&run(&["--budget", "1GiB", "--host-budget", "1MiB"]));
    assert!(roomy.contains("names_which_can_be_offloaded=[]"), "{roomy}");
    assert!(roomy.contains("offloaded (0): offloading a named value saves no recomputation at this budget"), "{roomy}");
    // Without a host budget, save_only_these_names as before.
    let plain = json(&run(&["--budget", "1GiB", "--json"]))["plan"].clone();
    assert!(plain["jax_policy"].as_str().unwrap().starts_with("jax.checkpoint_policies.save_only_these_names("));
    assert_eq!(plain["names"]["offloaded"], Value::Null, "{plain}");
    // Nothing fits in no host memory; a program without names has nothing to offload.
    let none = run(&["--budget", "1GiB", "--host-budget", "0"]);
    assert!(!none.status.success());
    let err = String::from_utf8_lossy(&none.stderr);
    assert!(
        err.contains(
            "no plan offloads within the host budget of 0 bytes: the least host memory a names-only plan offloads is"
        ),
        "{err}"
    );
    let chain = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../plan/tests/data/chain.jaxpr");
    let unnamed = remat(&[
        "plan",
        chain.to_str().unwrap(),
        "--argnums",
        "0",
        "--names-only",
        "--budget",
        "1GiB",
        "--host-budget",
        "1MiB",
    ]);
    assert!(!unnamed.status.success());
    assert!(String::from_utf8_lossy(&unnamed.stderr).contains("the program names none"));
}

#[test]
fn explain_ledgers_a_plan_and_a_policy() {
    let file = primal("transformer_reduced");
    // `explain --budget` plans as `remat plan` does without `--argnums` (every float input).
    let frontier = json(&remat(&["plan", &file, "--frontier", "--json"]));
    let smallest = frontier["frontier"][0]["peak_bytes"].as_u64().unwrap().to_string();
    let plan = json(&remat(&["plan", &file, "--budget", &smallest, "--json"]));
    let peak = plan["plan"]["peak_bytes"].as_u64().unwrap();
    let text = stdout(&remat(&["explain", &file, "--budget", &smallest]));
    let last = text.lines().last().unwrap();
    assert!(last.contains(&format!("= {peak} bytes, the planned peak")), "{last}");
    assert!(
        text.contains(&format!("why saved: planner decision: the plan for a budget of {smallest} bytes")),
        "{text}"
    );
    // Under `nothing_saveable` the forward half keeps only the arguments.
    let json_nothing: Value =
        serde_json::from_str(&stdout(&remat(&["explain", &file, "--policy", "nothing", "--json"]))).unwrap();
    let rows = json_nothing["residuals"].as_array().unwrap();
    assert!(!rows.is_empty() && rows.iter().all(|r| r["kind"] == "argument"), "{rows:?}");
    // Bad requests say what is wrong.
    let err = |args: &[&str]| String::from_utf8_lossy(&remat(args).stderr).into_owned();
    assert!(err(&["explain", &file, "--budget", "100"]).contains("no plan fits the budget of 100 bytes"));
    assert!(err(&["explain", &file, "--policy", "bogus"]).contains("unknown policy `bogus`"));
    assert!(err(&["explain", &file, "--policy", "dots", "--budget", "1MiB"]).contains("cannot be used with"));
}
