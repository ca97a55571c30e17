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
            && text.contains("  f32<host>[4096] output of device_put from ")
            && text.contains(" (one of the offloaded values below)\n")
            && !text.contains(" from  ")
            && !text.contains(" from \n"),
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

fn plan_data(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../plan/tests/data").join(name).display().to_string()
}

/// Issue 43's reproducers through the CLI: each built-in policy's point in `plan
/// --frontier` is the peak `remat explain --policy` gives (the issue: every policy at
/// 11,520 bytes on a scanned RNN, against 5,184 and 9,408), a budget at that peak is
/// planned (the DAG at 8 KiB was refused) and its `-o` program benches at the plan's peak.
#[test]
fn builtin_policies_in_the_frontier_are_what_explain_says_and_their_peaks_are_planned() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("planned.jaxpr");
    let out_s = out.display().to_string();
    for file in ["dag.jaxpr", "sin_chain_8.jaxpr", "sin_chain_16.jaxpr", "rnn_scan.jaxpr"] {
        let path = plan_data(file);
        let frontier = json(&remat(&["plan", &path, "--frontier", "--json"]));
        let builtins = frontier["builtins"].as_array().unwrap();
        for (word, label) in [
            ("nothing", "nothing_saveable"),
            ("everything", "everything_saveable"),
            ("dots", "dots_saveable"),
            ("dots_no_batch", "dots_with_no_batch_dims_saveable"),
        ] {
            let explained: Value =
                serde_json::from_str(&stdout(&remat(&["explain", &path, "--policy", word, "--json"]))).unwrap();
            let peak = explained["peak"]["peak_bytes"].as_u64().unwrap();
            let point =
                builtins.iter().find(|b| b["policy"].as_str().unwrap().ends_with(&format!(".{label}"))).unwrap();
            assert_eq!(point["peak_bytes"].as_u64().unwrap(), peak, "{file}: {label}");
            let plan = json(&remat(&["plan", &path, "--budget", &peak.to_string(), "--json", "-o", &out_s]));
            let planned = plan["plan"]["peak_bytes"].as_u64().unwrap();
            assert!(planned <= peak, "{file}: {label}");
            assert!(plan["plan"]["recompute_flops"].as_u64() <= point["recompute_flops"].as_u64(), "{file}: {label}");
            let bench = json(&remat(&["bench", &out_s, "--runs", "1", "--json"]));
            assert_eq!(bench["peak_bytes"].as_u64().unwrap(), planned, "{file}: {label}");
        }
    }
    let dag = plan_data("dag.jaxpr");
    let text = stdout(&remat(&["plan", &dag, "--budget", "8192"]));
    assert!(text.contains("plan for a budget of 8192 bytes"), "{text}");
    // Which searches are exact, and which heuristic, is said.
    assert!(text.contains("  search: exhaustive (exact): "), "{text}");
    let names = plan_data("dag_names.jaxpr");
    let text = stdout(&remat(&["plan", &names, "--names-only", "--budget", "24576"]));
    assert!(text.contains("  search: every policy over the program's names (exact): "), "{text}");
    let text = stdout(&remat(&["plan", &names, "--budget", "24576"]));
    assert!(text.contains("  search: greedy with local refinement (greedy): "), "{text}");
    assert_eq!(json(&remat(&["plan", &names, "--budget", "24576", "--json"]))["exact"], false);
}

/// `  f32[16,3,12] output of closed_call from rnn_scan.jaxpr:2:5`: the bytes of its aval.
fn residual_bytes(line: &str) -> u64 {
    let aval = line.trim().split(' ').next().unwrap();
    let (dtype, dims) = aval.split_once('[').unwrap();
    let size: u64 = match dtype.trim_end_matches("<host>") {
        "f64" | "i64" | "u64" => 8,
        "f32" | "i32" | "u32" => 4,
        "bf16" | "f16" | "i16" | "u16" => 2,
        _ => 1,
    };
    dims.trim_end_matches(']').split(',').filter(|d| !d.is_empty()).map(|d| d.parse::<u64>().unwrap()).product::<u64>()
        * size
}

/// The text and JSON agree with themselves: "saved beyond the arguments" is the sum of the
/// listed residuals that are not arguments (the RNN at 20 KiB printed 0 bytes
/// beside four stacked scan outputs), segments' line ranges run forwards, and
/// `--names-only` on a program without names says it has none.
#[test]
fn the_plans_text_adds_up() {
    let rnn = plan_data("rnn_scan.jaxpr");
    for budget in ["20KiB", "1GiB"] {
        let text = stdout(&remat(&["plan", &rnn, "--budget", budget]));
        let said: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("  saved beyond the arguments: "))
            .and_then(|l| l.split(' ').next())
            .unwrap()
            .parse()
            .unwrap();
        let lines = text.split("saved (").nth(1).unwrap().split("recomputed (").next().unwrap();
        let listed: u64 =
            lines.lines().skip(1).filter(|l| !l.contains(" from the argument ")).map(residual_bytes).sum();
        assert_eq!(said, listed, "{text}");
        let plan = json(&remat(&["plan", &rnn, "--budget", budget, "--json"]));
        assert_eq!(plan["plan"]["residual_bytes"].as_u64().unwrap(), said);
    }
    let file = primal("transformer_reduced");
    let frontier = json(&remat(&["plan", &file, "--argnums", "0-15", "--frontier", "--json"]));
    let mut segmented = 0;
    for p in frontier["frontier"].as_array().unwrap() {
        let Some(rewrite) = p["rewrite"].as_str() else { continue };
        let Some((_, lines)) = rewrite.split_once(" lines ") else { continue };
        segmented += 1;
        for range in lines.split(", ") {
            if let Some((a, b)) = range.trim_end_matches(" (dots)").split_once('-') {
                assert!(a.parse::<usize>().unwrap() <= b.parse::<usize>().unwrap(), "{rewrite}");
            }
        }
    }
    assert!(segmented > 0, "{frontier}");
    let unnamed = remat(&["plan", &plan_data("dag.jaxpr"), "--names-only", "--budget", "1GiB"]);
    assert!(!unnamed.status.success());
    let err = String::from_utf8_lossy(&unnamed.stderr);
    assert!(err.contains("the program names none"), "{err}");
}

/// `remat plan --policy-names`: the zoo's `scan_of_blocks_offload` (a checkpoint inside a
/// scan's body under JAX's `save_and_offload_only_these_names` closure, which prints without
/// its arguments) is planned once its names' meaning is given, and `-o`'s program benches at
/// the plan's peak; without it, the error says what to give; `--names-only` says its names
/// are inside the scan's body. `explain` and `report` take the same words.
#[test]
fn plan_takes_policy_names() {
    let dir = tempfile::tempdir().unwrap();
    let zoo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/zoo/scan_of_blocks_offload.json");
    let case: Value = serde_json::from_str(&std::fs::read_to_string(zoo).unwrap()).unwrap();
    let file = dir.path().join("scan_of_blocks_offload.jaxpr");
    std::fs::write(&file, case["jaxpr"].as_str().unwrap()).unwrap();
    let file = file.display().to_string();
    let out = dir.path().join("planned.jaxpr").display().to_string();
    let without = remat(&["plan", &file, "--budget", "1GiB"]);
    assert!(!without.status.success());
    let err = String::from_utf8_lossy(&without.stderr);
    assert!(err.contains("give them with `--policy-names save=NAMES offload=NAMES`"), "{err}");
    let words = ["--policy-names", "save=attn", "offload=mlp_hidden"];
    let with = |args: &[&str]| remat(&[args, &words[..]].concat());
    let frontier = json(&with(&["plan", &file, "--frontier", "--json"]));
    let smallest = frontier["frontier"][0]["peak_bytes"].as_u64().unwrap().to_string();
    let plan = json(&with(&["plan", &file, "--budget", &smallest, "--json", "-o", &out]));
    assert_eq!(plan["plan"]["peak_bytes"].as_u64().unwrap().to_string(), smallest, "{plan}");
    let bench = json(&remat(&["bench", &out, "--runs", "1", "--json"]));
    assert_eq!(bench["peak_bytes"], plan["plan"]["peak_bytes"], "{plan}");
    // Its names sit inside the scan's body, which plans do not decide: said so.
    let names = with(&["plan", &file, "--names-only", "--frontier"]);
    assert!(!names.status.success());
    let err = String::from_utf8_lossy(&names.stderr);
    assert!(err.contains("its names (attn, mlp_hidden) are inside scan, cond or loop bodies"), "{err}");
    let explained = with(&["explain", &file, "--budget", "1GiB"]);
    assert!(explained.status.success(), "{}", String::from_utf8_lossy(&explained.stderr));
    let svg = dir.path().join("r.svg").display().to_string();
    let report = with(&["report", &file, "--budget", "1GiB", "-o", &svg]);
    assert!(report.status.success(), "{}", String::from_utf8_lossy(&report.stderr));
}
