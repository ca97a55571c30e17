//! `remat residuals`, `remat fwd-bwd` and `remat grad` end to end, on every conformance
//! case: the residual lines are JAX's (with source locations in the file), the split
//! prints, and the gradients are JAX's on both backends.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn remat(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_remat")).args(args).output().expect("run remat")
}

fn cases() -> Vec<(String, PathBuf, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/conformance");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let case = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            out.push((path.file_stem().unwrap().to_string_lossy().into_owned(), path, case));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A fresh directory for a test's files, removed when the returned guard drops.
fn tempdir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("remat-ad-cli-{name}-")).tempdir().unwrap()
}

/// A residual line without its source location (JAX's point into the generator).
fn without_source(line: &str) -> &str {
    match line.find(" from ") {
        Some(i) if !line[i..].starts_with(" from the argument") => &line[..i],
        _ => line,
    }
}

#[test]
fn residuals_prints_jaxs_lines_for_every_case() {
    let dir = tempdir("residuals");
    let cases = cases();
    assert_eq!(cases.len(), 32);
    for (name, _, case) in &cases {
        let file = dir.path().join(format!("{name}.jaxpr"));
        std::fs::write(&file, case["jaxpr"].as_str().unwrap()).unwrap();
        let names: Vec<&str> = case["arg_names"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        let out = remat(&["residuals", file.to_str().unwrap(), "--arg-names", &names.join(",")]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let want: Vec<&str> = case["jax_saved_residuals_text"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| without_source(v.as_str().unwrap()))
            .collect();
        let got: Vec<&str> = text.lines().map(without_source).collect();
        assert_eq!(got, want, "{name}");
        for line in text.lines().filter(|l| l.contains(" output of ") || l.contains(" named ")) {
            let from_device_put = line.ends_with("output of device_put from ");
            assert!(from_device_put || line.contains(&format!("{name}.jaxpr:")), "{name}: {line}");
        }
    }
}

#[test]
fn residuals_names_arguments_by_the_files_binders_by_default() {
    let dir = tempdir("binders");
    let (_, _, case) = cases().into_iter().find(|(n, _, _)| n == "attention_dots_saveable").unwrap();
    let file = dir.path().join("attention.jaxpr");
    std::fs::write(&file, case["jaxpr"].as_str().unwrap()).unwrap();
    let out = remat(&["residuals", file.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    // The top-level binders follow the hoisted `let jaxpr = ...`: `t u v`.
    assert!(text.starts_with("f32[2,3,4] from the argument t\nf32[2,5,4] from the argument u\n"), "{text}");
    let bad = remat(&["residuals", file.to_str().unwrap(), "--arg-names", "q,k"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--arg-names gives 2 names for the 3 arguments"));
}

#[test]
fn fwd_bwd_prints_both_halves() {
    let dir = tempdir("fwdbwd");
    let (_, _, case) = cases().into_iter().find(|(n, _, _)| n == "seed_checkpoint_each_layer").unwrap();
    let file = dir.path().join("f.jaxpr");
    std::fs::write(&file, case["jaxpr"].as_str().unwrap()).unwrap();
    let out = remat(&["fwd-bwd", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text.lines().next().unwrap();
    assert!(first.starts_with("  forward computation:") && first.ends_with("backward computation:"), "{first}");
    assert!(text.contains("remat2[") && text.contains("differentiated=True"), "{text}");
}

fn check_grads(name: &str, got: &Value, case: &Value) {
    for field in ["outputs", "grads"] {
        let (g, w) = (got[field].as_array().unwrap(), case[field].as_array().unwrap());
        assert_eq!(g.len(), w.len(), "{name}: {field}");
        for (gi, wi) in g.iter().zip(w) {
            assert_eq!(gi["shape"], wi["shape"], "{name}: {field} shape");
            for (a, b) in gi["data"].as_array().unwrap().iter().zip(wi["data"].as_array().unwrap()) {
                let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
                assert!((a - b).abs() <= (1e-4 * b.abs()).max(1e-5), "{name}: {field}: got {a}, JAX gave {b}");
            }
        }
    }
}

#[test]
fn grad_gives_jaxs_gradients_for_every_case_on_both_backends() {
    let dir = tempdir("grad");
    for (name, path, case) in cases() {
        let file = dir.path().join(format!("{name}.jaxpr"));
        std::fs::write(&file, case["jaxpr"].as_str().unwrap()).unwrap();
        for backend in ["interp", "jit"] {
            let out_path = dir.path().join(format!("{name}.{backend}.json"));
            let case_path = path.to_str().unwrap();
            let out = remat(&[
                "grad",
                file.to_str().unwrap(),
                "--inputs",
                case_path,
                "--cotangents",
                case_path,
                "--backend",
                backend,
                "--out",
                out_path.to_str().unwrap(),
            ]);
            assert!(out.status.success(), "{name} ({backend}): {}", String::from_utf8_lossy(&out.stderr));
            let got: Value = serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap();
            check_grads(&format!("{name} ({backend})"), &got, &case);
        }
    }
}

#[test]
fn grad_rejects_cotangents_that_do_not_fit() {
    let dir = tempdir("badct");
    let (_, path, case) = cases().into_iter().find(|(n, _, _)| n == "seed_no_checkpoint").unwrap();
    let file = dir.path().join("f.jaxpr");
    std::fs::write(&file, case["jaxpr"].as_str().unwrap()).unwrap();
    let cts = dir.path().join("ct.json");
    std::fs::write(&cts, r#"[{"dtype": "f32", "shape": [3], "data": [1, 2, 3]}]"#).unwrap();
    let out = remat(&[
        "grad",
        file.to_str().unwrap(),
        "--inputs",
        path.to_str().unwrap(),
        "--cotangents",
        cts.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cotangent 0 is f32[3] but output 0 is f32[7]"), "{err}");
}
