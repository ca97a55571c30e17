//! `remat residuals`, `remat fwd-bwd` and `remat grad` end to end, on every conformance
//! case: the residual lines are JAX's (with source locations in the file), the split
//! prints, and the gradients are JAX's on both backends.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use remat_testkit::{conformance_cases, data_dir, within};
use serde_json::Value;

fn remat(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_remat")).args(args).output().expect("run remat")
}

/// Every conformance case as `(name, its file, case)`.
fn cases() -> Vec<(String, PathBuf, Value)> {
    let dir = data_dir().join("conformance");
    conformance_cases().into_iter().map(|(name, case)| (name.clone(), dir.join(format!("{name}.json")), case)).collect()
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

/// `--per-device` on every sharded case (issue 46): JAX's lines, each with what one device
/// holds of it, equal to JAX's residual arrays' shards (`residual_device_bytes`), and the
/// total per device.
#[test]
fn residuals_per_device_are_jaxs_shards_on_every_sharded_case() {
    let dir = tempdir("per-device");
    let cases = remat_testkit::sharded_cases();
    assert_eq!(cases.len(), 8);
    for (name, case) in &cases {
        let file = dir.path().join(format!("{name}.jaxpr"));
        std::fs::write(&file, case["jaxpr"].as_str().unwrap()).unwrap();
        let names: Vec<&str> = case["arg_names"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        let out = remat(&["residuals", file.to_str().unwrap(), "--arg-names", &names.join(","), "--per-device"]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let want: Vec<u64> =
            case["residual_device_bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap()).collect();
        assert_eq!(lines.len(), want.len() + 1, "{name}: {text}");
        for ((line, jax), &bytes) in lines.iter().zip(case["jax_saved_residuals_text"].as_array().unwrap()).zip(&want) {
            let (residual, share) = line.split_once("  [").unwrap_or_else(|| panic!("{name}: {line}"));
            assert_eq!(without_source(residual), without_source(jax.as_str().unwrap()), "{name}");
            let per_device = remat::ir::format_bytes(u128::from(bytes));
            assert!(share.starts_with(&format!("{per_device} per device")), "{name}: {line}: JAX's {bytes} bytes");
        }
        let total: u64 = want.iter().sum();
        let last = lines.last().unwrap();
        assert!(
            last.ends_with(&format!("{} on each device", remat::ir::format_bytes(u128::from(total)))),
            "{name}: {last}"
        );
    }
}

/// A sharded program runs in the JIT (`bench`, every device together), and the commands
/// that plan or profile memory do it per device: `explain` lists what one device holds of
/// each residual (JAX's per-device bytes), and `plan --budget` at the smallest per-device
/// peak of the frontier gives a plan that fits it, in words that say "per device".
#[test]
fn sharded_programs_bench_and_plan_per_device() {
    let dir = tempdir("sharded-cmds");
    for (name, case) in remat_testkit::sharded_cases() {
        let file = dir.path().join(format!("{name}.jaxpr"));
        std::fs::write(&file, case["jaxpr"].as_str().unwrap()).unwrap();
        let f = file.to_str().unwrap();
        if name == "tp_mlp_shard_map" {
            let bench = remat(&["bench", f, "--runs", "2"]);
            assert!(bench.status.success(), "{}", String::from_utf8_lossy(&bench.stderr));
        }
        let explain = remat(&["explain", f]);
        assert!(explain.status.success(), "{name}: {}", String::from_utf8_lossy(&explain.stderr));
        let text = String::from_utf8_lossy(&explain.stdout);
        assert!(text.contains("per device: every byte below is one device's"), "{name}: {text}");
        let want: Vec<u64> =
            case["residual_device_bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap()).collect();
        let got: Vec<u64> = text
            .lines()
            .filter_map(|l| l.split_once(" on each device").map(|(head, _)| head))
            .map(|head| head.rsplit(' ').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(got, want, "{name}: what one device holds of each residual\n{text}");
        let frontier = remat(&["plan", f, "--frontier", "--json"]);
        assert!(frontier.status.success(), "{name}: {}", String::from_utf8_lossy(&frontier.stderr));
        let fr: Value = serde_json::from_slice(&frontier.stdout).unwrap();
        let least = fr["frontier"].as_array().unwrap().iter().map(|p| p["peak_bytes"].as_u64().unwrap()).min().unwrap();
        let budget = least.to_string();
        let plan = remat(&["plan", f, "--budget", &budget]);
        assert!(plan.status.success(), "{name}: {}", String::from_utf8_lossy(&plan.stderr));
        let text = String::from_utf8_lossy(&plan.stdout);
        assert!(text.contains(&format!("({budget} B) per device")) || text.contains("per device\n"), "{name}: {text}");
        assert!(text.contains("one device's: the whole value-and-grad program as device 0 of the mesh runs it"));
        let json = remat(&["plan", f, "--budget", &budget, "--json"]);
        let p: Value = serde_json::from_slice(&json.stdout).unwrap();
        assert!(p["plan"]["peak_bytes"].as_u64().unwrap() <= least, "{name}: {p}");
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
                assert!(within(a, b, 1e-4, 1e-5), "{name}: {field}: got {a}, JAX gave {b}");
            }
        }
    }
}

/// `remat grad FILE` on `backend`, its inputs and cotangents from the case file `case` (its
/// `args` and `cotangents`); the result it writes (`{"outputs", "grads"}`), after checking it
/// succeeded.
fn grad_of(dir: &Path, file: &Path, case: &Path, backend: &str, what: &str) -> Value {
    let out_path = dir.join(format!("{what}.{backend}.out.json"));
    let case = case.to_str().unwrap();
    let out = remat(&[
        "grad",
        file.to_str().unwrap(),
        "--inputs",
        case,
        "--cotangents",
        case,
        "--backend",
        backend,
        "--out",
        out_path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{what} ({backend}): {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap()
}

#[test]
fn grad_gives_jaxs_gradients_for_every_case_on_both_backends() {
    let dir = tempdir("grad");
    for (name, path, case) in cases() {
        let file = dir.path().join(format!("{name}.jaxpr"));
        std::fs::write(&file, case["jaxpr"].as_str().unwrap()).unwrap();
        for backend in ["interp", "jit"] {
            let got = grad_of(dir.path(), &file, &path, backend, &name);
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

/// `sum(sqrt(a) * b)`, a NaN where `a` is negative.
const SQRT_WEIGHTED: &str = "{ lambda ; a:f32[3] b:f32[3]. let
    c:f32[3] = sqrt a
    d:f32[3] = mul c b
    e:f32[] = reduce_sum[axes=(0,) out_sharding=None] d
  in (e,) }";

/// Runs `remat COMMAND f.jaxpr --inputs in.json [--cotangents ct.json] EXTRA...` on
/// `SQRT_WEIGHTED` (the cotangent 1 for `grad`) and returns whether it succeeded, its stdout
/// and its stderr.
fn run_sqrt(command: &str, inputs: &str, extra: &[&str]) -> (bool, String, String) {
    run_sqrt_with(command, inputs, r#"[{"dtype": "f32", "shape": [], "data": [1]}]"#, extra)
}

fn run_sqrt_with(command: &str, inputs: &str, cotangents: &str, extra: &[&str]) -> (bool, String, String) {
    let dir = tempdir("nans");
    let file = dir.path().join("f.jaxpr");
    std::fs::write(&file, SQRT_WEIGHTED).unwrap();
    let inp = dir.path().join("in.json");
    std::fs::write(&inp, inputs).unwrap();
    let ct = dir.path().join("ct.json");
    std::fs::write(&ct, cotangents).unwrap();
    let mut args = vec![command, file.to_str().unwrap(), "--inputs", inp.to_str().unwrap()];
    if command == "grad" {
        args.extend(["--cotangents", ct.to_str().unwrap()]);
    }
    args.extend(extra);
    let out = remat(&args);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const NAN_INPUT: &str =
    r#"[{"dtype": "f32", "shape": [3], "data": [1, 4, 9]}, {"dtype": "f32", "shape": [3], "data": [1, "nan", 1]}]"#;
const NEGATIVE_INPUT: &str =
    r#"[{"dtype": "f32", "shape": [3], "data": [1, -4, 9]}, {"dtype": "f32", "shape": [3], "data": [1, 1, 1]}]"#;

#[test]
fn eval_and_grad_reject_nan_inputs_unless_told_to_propagate_them() {
    for command in ["eval", "grad"] {
        for backend in ["interp", "jit"] {
            let (ok, _, err) = run_sqrt(command, NAN_INPUT, &["--backend", backend]);
            assert!(!ok, "{command} {backend} accepted a NaN input");
            assert!(err.contains("in.json: input 1 holds NaN at [1] (`--nans propagate` computes with it"), "{err}");

            let (ok, out, err) = run_sqrt(command, NAN_INPUT, &["--backend", backend, "--nans", "propagate"]);
            assert!(ok, "{command} {backend}: {err}");
            assert!(out.contains("\"nan\""), "{command} {backend}: {out}");
        }
    }
}

#[test]
fn debug_nans_names_the_equation_that_made_the_first_nan() {
    for command in ["eval", "grad"] {
        for backend in ["interp", "jit"] {
            // By default a NaN made by the program is a result, as in JAX.
            let (ok, out, err) = run_sqrt(command, NEGATIVE_INPUT, &["--backend", backend]);
            assert!(ok && out.contains("\"nan\""), "{command} {backend}: {out} {err}");

            let (ok, _, err) = run_sqrt(command, NEGATIVE_INPUT, &["--backend", backend, "--nans", "debug"]);
            assert!(!ok, "{command} {backend}: the NaN went unreported");
            let part = if command == "grad" { " in the forward half" } else { "" };
            assert!(
                err.contains(&format!("error: NaN check{part}: equation 0 (sqrt at ")),
                "{command} {backend}: {err}"
            );
            assert!(
                err.contains(
                    "f.jaxpr:2:5): result 0 holds the first NaN, at [1]: no operand passed in or computed holds one"
                ),
                "{command} {backend}: {err}"
            );
        }
    }
}

#[test]
fn bench_rejects_nan_inputs_and_debug_locates_a_nan_its_run_makes() {
    let (ok, _, err) = run_sqrt("bench", NAN_INPUT, &["--runs", "1"]);
    assert!(!ok && err.contains("in.json: input 1 holds NaN at [1]"), "{err}");
    let (ok, out, err) = run_sqrt("bench", NAN_INPUT, &["--runs", "1", "--nans", "propagate"]);
    assert!(ok && out.contains("run: median"), "{out} {err}");
    let (ok, _, err) = run_sqrt("bench", NEGATIVE_INPUT, &["--runs", "1", "--nans", "debug"]);
    assert!(!ok && err.contains("NaN check: equation 0 (sqrt at "), "{err}");
}

#[test]
fn debug_nans_finds_a_nan_made_in_the_backward_half() {
    // At a = 0, b = 0 the forward half is NaN-free (sqrt(0) * 0 = 0), but the gradient in
    // `a` is b * 0.5 / sqrt(a) = 0 * inf: the backward half makes the NaN.
    let inputs =
        r#"[{"dtype": "f32", "shape": [3], "data": [1, 0, 9]}, {"dtype": "f32", "shape": [3], "data": [1, 0, 1]}]"#;
    let (ok, out, err) = run_sqrt("grad", inputs, &["--nans", "debug"]);
    assert!(!ok, "unreported: {out}");
    assert!(err.contains("NaN check in the backward half: equation "), "{err}");
    assert!(err.contains("holds the first NaN, at [1]"), "{err}");
}

#[test]
fn cotangents_holding_nan_are_rejected() {
    let inputs = NEGATIVE_INPUT.replace("-4", "4");
    let (ok, _, err) = run_sqrt_with("grad", &inputs, r#"[{"dtype": "f32", "shape": [], "data": ["nan"]}]"#, &[]);
    assert!(!ok);
    assert!(err.contains("ct.json: cotangent 0 holds NaN at []"), "{err}");
}

/// A checkpoint under JAX's `save_and_offload_only_these_names` closure, which prints
/// without its arguments (as in the zoo's `scan_of_blocks_offload`).
const OPAQUE_POLICY: &str = "{ lambda ; a:f32[3]. let
    b:f32[3] = remat2[
      differentiated=False
      jaxpr={ lambda ; c:f32[3]. let
          d:f32[3] = sin c
          e:f32[3] = name[name=attn] d
          f:f32[3] = sin e
          g:f32[3] = name[name=mlp_hidden] f
          h:f32[3] = sin g
        in (h,) }
      policy=<function save_and_offload_only_these_names.<locals>.policy at 0xXXXXXXXXXXXX>
      prevent_cse=True
    ] a
    i:f32[] = reduce_sum[axes=(0,) out_sharding=None] b
  in (i,) }";

#[test]
fn policy_names_give_an_opaque_policy_its_meaning() {
    let dir = tempdir("opaque-policy");
    let file = dir.path().join("opaque.jaxpr");
    std::fs::write(&file, OPAQUE_POLICY).unwrap();
    let file = file.to_str().unwrap();

    // Without a meaning, every differentiating command names the checkpoint's equation.
    for command in ["residuals", "fwd-bwd"] {
        let out = remat(&[command, file]);
        assert!(!out.status.success(), "{command} succeeded without --policy-names");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("remat2 at ") && err.contains("opaque.jaxpr:2:5"), "{command}: {err}");
        assert!(err.contains("--policy-names save=NAMES offload=NAMES"), "{command}: {err}");
    }

    let out = remat(&["residuals", file, "--policy-names", "save=attn", "offload=mlp_hidden"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().map(without_source).collect();
    assert_eq!(lines, ["f32[3] from the argument a", "f32[3] named 'attn'", "f32<host>[3] output of device_put"]);

    let out = remat(&["fwd-bwd", file, "--policy-names", "save=attn", "offload=mlp_hidden"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The opaque policy prints back as JAX printed it.
    assert!(String::from_utf8(out.stdout).unwrap().contains("policy=<function save_and_offload_only_these_names"));

    let out = remat(&["residuals", file, "--policy-names", "keep=attn"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected `save=` or `offload=`, found `keep=`"));
    let out = remat(&["residuals", file, "--policy-names", "save=attn", "offload=attn"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("both saveable and offloadable"));
}

/// `pbroadcast`'s transpose (JAX's `_pbroadcast_transpose_rule`: the cotangents summed
/// over the axis land on the source device, zeros elsewhere). JAX 0.10.2 cannot run
/// `pbroadcast` on CPU, so the oracle is the same function written with what it means,
/// `psum(select_n(axis_index == source, zeros, x))`, whose rules are checked against JAX:
/// both give the same gradients on both backends, with and without `check_vma`.
#[test]
fn pbroadcast_transposes_as_the_sum_it_means() {
    let dir = tempdir("pbroadcast");
    let body = |check: bool, inner: &str| {
        let v = if check { "{V:x}" } else { "" };
        format!(
            "{{ lambda ; a:f32[8,4]. let
    b:f32[8,4] = shard_map[
      check_vma={}
      in_specs=(P('x', None),)
      jaxpr={{ lambda ; c:f32[4,4]{v}. let
          d:f32[4,4]{v} = sin c
{inner}
          f:f32[4,4]{v} = mul e c
        in (f,) }}
      mesh=Mesh('x': 2, axis_types=(Auto,))
      newly_manual_axes=frozenset({{'x'}})
      out_specs=(P('x', None),)
    ] a
  in (b,) }}",
            if check { "True" } else { "False" }
        )
    };
    let pb = |check: bool| {
        let v = if check { "{V:x}" } else { "" };
        body(check, &format!("          e:f32[4,4]{v} = pbroadcast[axis_name=('x',) source=1] d"))
    };
    let meaning = body(
        false,
        "          g:i32[] = axis_index[axis_name=x]
          h:bool[] = eq g 1:i32[]
          z:f32[4,4] = broadcast_in_dim[broadcast_dimensions=() shape=(4, 4) sharding=None] 0.0:f32[]
          k:f32[4,4] = select_n h z d
          e:f32[4,4] = psum[axes=('x',) axis_index_groups=None] k",
    );
    let data: Vec<f64> = (0..32).map(|i| (i as f64 * 0.37).sin()).collect();
    let ct: Vec<f64> = (0..32).map(|i| (i as f64 * 0.11).cos()).collect();
    let case = serde_json::json!({
        "args": [{"shape": [8, 4], "dtype": "f32", "data": data}],
        "cotangents": [{"shape": [8, 4], "dtype": "f32", "data": ct}],
    });
    let case_path = dir.path().join("case.json");
    std::fs::write(&case_path, case.to_string()).unwrap();
    let grad = |name: &str, text: &str, backend: &str| -> Value {
        let file = dir.path().join(format!("{name}.jaxpr"));
        std::fs::write(&file, text).unwrap();
        grad_of(dir.path(), &file, &case_path, backend, name)
    };
    let want = grad("meaning", &meaning, "interp");
    let want: Vec<f64> = want["grads"][0]["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    for check in [false, true] {
        for backend in ["interp", "jit"] {
            let got = grad(&format!("pbroadcast_{check}"), &pb(check), backend);
            let got: Vec<f64> =
                got["grads"][0]["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
            assert_eq!(got.len(), want.len());
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!((g - w).abs() <= 1e-6 * (1.0 + w.abs()), "check_vma={check} ({backend}): {i}: {g} vs {w}");
            }
        }
    }
}

/// remat's own vjp of every sharded case, run by each backend (the JIT unrolls the
/// differentiated `shard_map`s), gives JAX's outputs and gradients (within twice JAX's own
/// f32 error against f64 where that is larger than 1e-5: `f32_error`).
#[test]
fn grad_gives_jaxs_gradients_for_every_sharded_case_on_both_backends() {
    let dir = tempdir("grad-sharded");
    let cases = remat_testkit::sharded_cases();
    assert_eq!(cases.len(), 8);
    for (name, case) in cases {
        let file = dir.path().join(format!("{name}.jaxpr"));
        std::fs::write(&file, case["jaxpr"].as_str().unwrap()).unwrap();
        let case_path = dir.path().join(format!("{name}.json"));
        std::fs::write(&case_path, case.to_string()).unwrap();
        for backend in ["interp", "jit"] {
            let got = grad_of(dir.path(), &file, &case_path, backend, &name);
            for field in ["outputs", "grads"] {
                let atol = case["f32_error"][field].as_f64().map_or(1e-5, |e| (2.0 * e).max(1e-5));
                let (g, w) = (got[field].as_array().unwrap(), case[field].as_array().unwrap());
                assert_eq!(g.len(), w.len(), "{name} ({backend}): {field}");
                for (gi, wi) in g.iter().zip(w) {
                    assert_eq!(gi["shape"], wi["shape"], "{name}: {field} shape");
                    for (a, b) in gi["data"].as_array().unwrap().iter().zip(wi["data"].as_array().unwrap()) {
                        let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
                        assert!(within(a, b, 1e-4, atol), "{name} ({backend}): {field}: got {a}, JAX gave {b}");
                    }
                }
            }
        }
    }
}
