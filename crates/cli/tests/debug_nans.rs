//! `--nans debug` and `--nans debug-infs` end to end on both backends: the first equation
//! whose result holds a NaN (or an infinity) is named, also when the value never reaches
//! an output, in the same words on both backends.

use std::process::Command;

/// Runs `remat eval f.jaxpr --inputs in.json --backend BACKEND --nans NANS` and returns
/// whether it succeeded, its stdout and its stderr.
fn eval(program: &str, inputs: &str, backend: &str, nans: &str) -> (bool, String, String) {
    let dir = tempfile::Builder::new().prefix("remat-cli-debug-nans-").tempdir().unwrap();
    let file = dir.path().join("f.jaxpr");
    std::fs::write(&file, program).unwrap();
    let inp = dir.path().join("in.json");
    std::fs::write(&inp, inputs).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_remat"))
        .args(["eval", file.to_str().unwrap(), "--inputs", inp.to_str().unwrap(), "--backend", backend, "--nans", nans])
        .output()
        .expect("run remat");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The error of both backends (without the file's directory), checked equal.
fn error_on_both(program: &str, inputs: &str, nans: &str) -> String {
    let mut errors = Vec::new();
    for backend in ["jit", "interp"] {
        let (ok, out, err) = eval(program, inputs, backend, nans);
        assert!(!ok, "{backend} {nans}: no error, {out}");
        // The file's directory is a fresh temporary one per run.
        errors.push(match (err.find(" at /"), err.find("f.jaxpr")) {
            (Some(a), Some(b)) if a < b => format!("{} at {}", &err[..a], &err[b..]),
            _ => err,
        });
    }
    assert_eq!(errors[0], errors[1]);
    errors.remove(0)
}

const ONE_INPUT: &str = r#"[{"dtype": "f32", "shape": [3], "data": [1, -1, 0]}]"#;

/// `log(2 a) + 1`: a NaN made in the middle, carried to the output.
const LOG_IN_THE_MIDDLE: &str = "{ lambda ; a:f32[3]. let
    b:f32[3] = mul a 2.0:f32[]
    c:f32[3] = log b
    d:f32[3] = add c 1.0:f32[]
  in (d,) }";

/// `(a - a) / (a - a)`: `0/0`.
const ZERO_BY_ZERO: &str = "{ lambda ; a:f32[3]. let
    b:f32[3] = sub a a
    c:f32[3] = div b b
  in (c,) }";

/// `log a` where `a > 0`, else `a`: the NaN never reaches the output.
const MASKED: &str = "{ lambda ; a:f32[3]. let
    b:f32[3] = log a
    c:bool[3] = gt a 0.0:f32[]
    d:f32[3] = select_n c a b
  in (d,) }";

/// `2 / a`: an infinity where `a` is 0.
const RECIPROCAL: &str = "{ lambda ; a:f32[3]. let
    b:f32[3] = div 2.0:f32[] a
  in (b,) }";

#[test]
fn debug_names_a_nan_made_in_the_middle() {
    let err = error_on_both(LOG_IN_THE_MIDDLE, ONE_INPUT, "debug");
    assert!(
        err.contains(
            "NaN check: equation 1 (log at f.jaxpr:3:5): result 0 holds the first NaN, at [1]: \
             no operand passed in or computed holds one"
        ),
        "{err}"
    );
    let err = error_on_both(ZERO_BY_ZERO, ONE_INPUT, "debug");
    assert!(err.contains("NaN check: equation 1 (div at f.jaxpr:3:5): result 0 holds the first NaN, at [0]"), "{err}");
}

#[test]
fn debug_names_a_nan_that_never_reaches_an_output() {
    for backend in ["jit", "interp"] {
        let (ok, out, err) = eval(MASKED, ONE_INPUT, backend, "propagate");
        assert!(ok && !out.contains("nan"), "{backend}: {out} {err}");
    }
    let err = error_on_both(MASKED, ONE_INPUT, "debug");
    assert!(err.contains("NaN check: equation 0 (log at f.jaxpr:2:5): result 0 holds the first NaN, at [1]"), "{err}");
}

#[test]
fn debug_infs_names_an_inf_and_debug_lets_it_through() {
    for backend in ["jit", "interp"] {
        let (ok, out, err) = eval(RECIPROCAL, ONE_INPUT, backend, "debug");
        assert!(ok && out.contains("\"inf\""), "{backend}: {out} {err}");
    }
    let err = error_on_both(RECIPROCAL, ONE_INPUT, "debug-infs");
    assert!(err.contains("NaN check: equation 0 (div at f.jaxpr:2:5): result 0 holds the first inf, at [2]"), "{err}");
}
