//! The `remat` binary end to end: `print` reproduces every conformance case's jaxpr text
//! and every benchmark program, `eval` reproduces every case's outputs, and bad input
//! gives a located error on stderr with a non-zero exit.

use std::process::{Command, Output};

use remat::json::ArrayJson;
use remat_testkit::{conformance_cases, data_dir, data_files, within};
use serde_json::Value;

fn remat(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_remat")).args(args).output().expect("run remat")
}

fn close(got: f64, want: f64) -> bool {
    within(got, want, 1e-4, 1e-5) || (got.is_nan() && want.is_nan())
}

#[test]
fn print_and_eval_reproduce_every_conformance_case() {
    let dir = tempdir("cases");
    let cases = conformance_cases();
    assert_eq!(cases.len(), 32);
    for (name, case) in &cases {
        let jaxpr_path = dir.path().join(format!("{name}.jaxpr"));
        std::fs::write(&jaxpr_path, case["jaxpr"].as_str().unwrap()).unwrap();

        let printed = remat(&["print", jaxpr_path.to_str().unwrap()]);
        assert!(printed.status.success(), "{name}: {}", String::from_utf8_lossy(&printed.stderr));
        let text = String::from_utf8(printed.stdout).unwrap();
        assert_eq!(text.trim_end_matches('\n'), case["jaxpr"].as_str().unwrap(), "{name}: print differs");

        let inputs = dir.path().join(format!("{name}.in.json"));
        std::fs::write(&inputs, case["args"].to_string()).unwrap();
        let out = dir.path().join(format!("{name}.out.json"));
        let run = remat(&[
            "eval",
            jaxpr_path.to_str().unwrap(),
            "--inputs",
            inputs.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(run.status.success(), "{name}: {}", String::from_utf8_lossy(&run.stderr));
        let result: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let got = result["outputs"].as_array().unwrap();
        let want = case["outputs"].as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{name}: number of outputs");
        for (g, w) in got.iter().zip(want) {
            assert_eq!(g["dtype"], w["dtype"], "{name}");
            assert_eq!(g["shape"], w["shape"], "{name}");
            for (x, y) in g["data"].as_array().unwrap().iter().zip(w["data"].as_array().unwrap()) {
                let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                assert!(close(x, y), "{name}: got {x}, JAX gave {y}");
            }
        }
    }
}

#[test]
fn print_round_trips_every_benchmark_program() {
    let mut n = 0;
    for path in data_files("bench", "jaxpr") {
        n += 1;
        let printed = remat(&["print", path.to_str().unwrap()]);
        assert!(printed.status.success(), "{}: {}", path.display(), String::from_utf8_lossy(&printed.stderr));
        let (got, want) = (String::from_utf8(printed.stdout).unwrap(), std::fs::read_to_string(&path).unwrap());
        assert_eq!(got, want, "{}", path.display());
    }
    assert_eq!(n, 25);
}

#[test]
fn eval_reads_a_conformance_case_as_inputs_and_writes_to_stdout() {
    let case = data_dir().join("conformance/seed_chain_sin8.json");
    let dir = tempdir("stdout");
    let jaxpr = dir.path().join("chain.jaxpr");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&case).unwrap()).unwrap();
    std::fs::write(&jaxpr, v["jaxpr"].as_str().unwrap()).unwrap();
    let run = remat(&["eval", jaxpr.to_str().unwrap(), "--inputs", case.to_str().unwrap()]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let result: Value = serde_json::from_slice(&run.stdout).unwrap();
    let got = result["outputs"][0]["data"][0].as_f64().unwrap();
    let want = v["outputs"][0]["data"][0].as_f64().unwrap();
    assert!(close(got, want), "{got} vs {want}");
}

fn expect_failure(args: &[&str], needle: &str) {
    let run = remat(args);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "expected exit 1 for {args:?}, stderr: {stderr}");
    assert!(stderr.contains(needle), "stderr for {args:?} lacks {needle:?}:\n{stderr}");
}

#[test]
fn bad_input_gives_located_errors() {
    let dir = tempdir("errors");
    let bad = dir.path().join("bad.jaxpr");
    std::fs::write(&bad, "{ lambda ; a:f32[3]. let\n    b:f32[3] = sine a\n  in (b,) }").unwrap();
    expect_failure(&["print", bad.to_str().unwrap()], "bad.jaxpr: line 2, column 16: unknown primitive `sine`");

    let ill_typed = dir.path().join("ill_typed.jaxpr");
    std::fs::write(&ill_typed, "{ lambda ; a:f32[3] b:f32[4]. let\n    c:f32[3] = add a b\n  in (c,) }").unwrap();
    expect_failure(&["print", ill_typed.to_str().unwrap()], "not well-typed");

    expect_failure(&["print", dir.path().join("missing.jaxpr").to_str().unwrap()], "missing.jaxpr");

    let good = dir.path().join("good.jaxpr");
    std::fs::write(&good, "{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }").unwrap();
    let wrong_shape = dir.path().join("wrong_shape.json");
    std::fs::write(&wrong_shape, r#"[{"dtype": "f32", "shape": [4], "data": [1, 2, 3, 4]}]"#).unwrap();
    expect_failure(&["eval", good.to_str().unwrap(), "--inputs", wrong_shape.to_str().unwrap()], "f32[3]");

    let too_few = dir.path().join("too_few.json");
    std::fs::write(&too_few, "[]").unwrap();
    expect_failure(&["eval", good.to_str().unwrap(), "--inputs", too_few.to_str().unwrap()], "argument");

    let short_data = dir.path().join("short_data.json");
    std::fs::write(&short_data, r#"[{"dtype": "f32", "shape": [3], "data": [1, 2]}]"#).unwrap();
    expect_failure(&["eval", good.to_str().unwrap(), "--inputs", short_data.to_str().unwrap()], "input 0");

    let not_json = dir.path().join("not.json");
    std::fs::write(&not_json, "[{").unwrap();
    expect_failure(&["eval", good.to_str().unwrap(), "--inputs", not_json.to_str().unwrap()], "invalid JSON");
}

/// A fresh directory for a test's files, removed when the returned guard drops.
fn tempdir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("remat-cli-test-{tag}-")).tempdir().unwrap()
}

#[test]
fn eval_with_the_jit_backend_reproduces_every_conformance_case() {
    let dir = tempdir("jit_cases");
    for (name, case) in &conformance_cases() {
        let jaxpr = dir.path().join(format!("{name}.jaxpr"));
        std::fs::write(&jaxpr, case["jaxpr"].as_str().unwrap()).unwrap();
        let inputs = dir.path().join(format!("{name}.json"));
        std::fs::write(&inputs, serde_json::to_string(case).unwrap()).unwrap();
        let out = remat(&["eval", jaxpr.to_str().unwrap(), "--inputs", inputs.to_str().unwrap(), "--backend", "jit"]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let got: Value = serde_json::from_slice(&out.stdout).unwrap();
        for (g, w) in got["outputs"].as_array().unwrap().iter().zip(case["outputs"].as_array().unwrap()) {
            let (g, w) = (remat::Array::from_json(g).unwrap(), remat::Array::from_json(w).unwrap());
            for (a, b) in g.to_f64_vec().into_iter().zip(w.to_f64_vec()) {
                assert!(close(a, b), "{name}: got {a}, expected {b}");
            }
        }
    }
}

#[test]
fn bench_reports_compile_time_run_time_and_peak_bytes_as_json() {
    let file = data_dir().join("bench").join("mlp_small_dots.jaxpr");
    let out = remat(&["bench", file.to_str().unwrap(), "--runs", "3", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert!(last["compile_ms"].as_f64().unwrap() > 0.0);
    assert!(last["run_median_ms"].as_f64().unwrap() > 0.0);
    assert!(last["run_fresh_outputs_median_ms"].as_f64().unwrap() > 0.0);
    assert!(last["peak_bytes"].as_u64().unwrap() > 0);
    assert!(stdout.lines().last().unwrap().starts_with("{\"compile_ms\""));
}

/// Output into a pipe whose reader has gone (`remat print big.jaxpr | head`) ends quietly:
/// exit 0, no panic (`println!` panics on a closed pipe).
#[test]
fn a_closed_pipe_is_not_a_panic() {
    let dir = tempdir("pipe");
    // ~150 KB of text: more than a pipe holds, so the writer meets the closed end.
    let mut text = String::from("{ lambda ; a:f32[8]. let\n");
    for i in 0..4000 {
        let (x, y) = (if i == 0 { "a".to_string() } else { format!("v{}", i - 1) }, format!("v{i}"));
        text += &format!("    {y}:f32[8] = sin {x}\n");
    }
    text += "  in (v3999,) }";
    let path = dir.path().join("long.jaxpr");
    std::fs::write(&path, &text).unwrap();
    for command in ["print", "residuals", "fwd-bwd"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_remat"))
            .args([command, path.to_str().unwrap()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run remat");
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !stderr.contains("panicked"), "{command}: {:?} {stderr}", out.status);
    }
}
