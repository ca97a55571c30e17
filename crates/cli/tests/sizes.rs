//! Issue 22's reproducers 1-4: a program whose shapes overflow or exceed the limit on one
//! value's bytes (`REMAT_MAX_VALUE_BYTES`, 64 GiB by default) is rejected by the verifier
//! with the size, a non-zero exit and no panic, on every command and backend; it used to
//! panic, abort on allocation, or (the JIT, on a wrapped size) print a wrong result.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `remat` with `REMAT_MAX_VALUE_BYTES` set to `limit` (or unset).
fn remat(args: &[&str], limit: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_remat"));
    cmd.args(args).env_remove("REMAT_MAX_VALUE_BYTES").env("RUST_BACKTRACE", "0");
    if let Some(limit) = limit {
        cmd.env("REMAT_MAX_VALUE_BYTES", limit);
    }
    cmd.output().expect("run remat")
}

struct Files {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Files {
    fn new(tag: &str) -> Files {
        let dir = tempfile::Builder::new().prefix(&format!("remat-cli-sizes-{tag}-")).tempdir().unwrap();
        let path = dir.path().to_path_buf();
        std::fs::write(path.join("scalar.json"), r#"[{"dtype":"f32","shape":[],"data":[1.0]}]"#).unwrap();
        std::fs::write(path.join("one.json"), r#"[{"dtype":"f32","shape":[1],"data":[1.0]}]"#).unwrap();
        Files { _dir: dir, path }
    }

    fn write(&self, name: &str, text: &str) -> String {
        let p = self.path.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    }

    fn get(&self, name: &str) -> String {
        Path::new(&self.path).join(name).to_str().unwrap().to_string()
    }
}

/// A program that broadcasts a scalar to `shape` and sums it.
fn broadcast_sum(shape: &str) -> String {
    let dims = shape.split(',').collect::<Vec<_>>();
    let axes = (0..dims.len()).map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
    format!(
        "{{ lambda ; a:f32[]. let b:f32[{shape}] = broadcast_in_dim[broadcast_dimensions=() shape=({}{}) sharding=None] a; c:f32[] = reduce_sum[axes=({axes}{})] b in (c,) }}",
        dims.join(", "),
        if dims.len() == 1 { "," } else { "" },
        if dims.len() == 1 { "," } else { "" },
    )
}

/// A non-zero exit (not a panic's 101 or an abort's signal) whose stderr has `want`.
fn assert_rejected(out: &Output, want: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(want), "wanted {want:?} in:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn an_input_whose_element_count_overflows_is_rejected_by_eval_and_grad() {
    // Reproducer 1: an input of 2^64 elements.
    let f = Files::new("input");
    let jaxpr = f.write(
        "r1.jaxpr",
        "{ lambda ; a:f32[4294967296,4294967296]. let b:f32[] = reduce_sum[axes=(0, 1)] a in (b,) }",
    );
    let want = "invars: variable %0:f32[4294967296,4294967296] needs more than 2^63 bytes; the limit is 64.0 GiB (REMAT_MAX_VALUE_BYTES)";
    for backend in ["interp", "jit"] {
        let out = remat(&["eval", &jaxpr, "--inputs", &f.get("one.json"), "--backend", backend], None);
        assert_rejected(&out, want);
        let out = remat(
            &[
                "grad",
                &jaxpr,
                "--inputs",
                &f.get("one.json"),
                "--cotangents",
                &f.get("scalar.json"),
                "--backend",
                backend,
            ],
            None,
        );
        assert_rejected(&out, want);
    }
    assert_rejected(&remat(&["bench", &jaxpr, "--runs", "1"], None), want);
}

#[test]
fn a_binder_beyond_the_limit_is_rejected_by_bench_before_allocating() {
    // Reproducer 2: a binder of 10^15 bytes (909.5 TiB) aborted `bench` on allocation.
    let f = Files::new("bench");
    let jaxpr = f.write("r2.jaxpr", &broadcast_sum("250000000000000"));
    let out = remat(&["bench", &jaxpr, "--runs", "1"], None);
    assert_rejected(
        &out,
        "r2.jaxpr:1:25: variable %1:f32[250000000000000] needs 909.5 TiB; the limit is 64.0 GiB (REMAT_MAX_VALUE_BYTES)",
    );
}

#[test]
fn an_output_too_large_is_an_error_not_a_panic_in_the_jit() {
    // Reproducer 3: the JIT panicked allocating an output of 10^15 bytes.
    let f = Files::new("output");
    let text = "{ lambda ; a:f32[]. let b:f32[250000000000000] = broadcast_in_dim[broadcast_dimensions=() shape=(250000000000000,) sharding=None] a in (b,) }";
    let jaxpr = f.write("r3.jaxpr", text);
    let args = ["eval", &jaxpr, "--inputs", &f.get("scalar.json"), "--backend", "jit"];
    assert_rejected(&remat(&args, None), "needs 909.5 TiB; the limit is 64.0 GiB (REMAT_MAX_VALUE_BYTES)");
    // With the limit raised past it, the allocator's refusal is an error too.
    assert_rejected(
        &remat(&args, Some("1000000000000000")),
        "cannot allocate 1000000000000000 bytes for an output f32[250000000000000]: out of memory",
    );
}

#[test]
fn a_wrapped_size_is_rejected_instead_of_a_wrong_result() {
    // Reproducer 4: the JIT printed 0.0 and 4.0 with exit 0; the interpreter rejected both.
    let f = Files::new("wrapped");
    for (name, shape) in [("r4a", "1099511627776,1099511627776"), ("r4b", "4611686018427387905,4")] {
        let jaxpr = f.write(&format!("{name}.jaxpr"), &broadcast_sum(shape));
        let want = format!("variable %1:f32[{shape}] needs more than 2^63 bytes; the limit is 64.0 GiB");
        for backend in ["jit", "interp"] {
            let out = remat(&["eval", &jaxpr, "--inputs", &f.get("scalar.json"), "--backend", backend], None);
            assert_rejected(&out, &want);
        }
    }
}

#[test]
fn the_limit_is_set_by_remat_max_value_bytes() {
    let f = Files::new("limit");
    let jaxpr = f.write("small.jaxpr", &broadcast_sum("1000"));
    let args = ["eval", &jaxpr, "--inputs", &f.get("scalar.json"), "--backend", "jit"];
    let out = remat(&args, Some("4000"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_rejected(
        &remat(&args, Some("3999")),
        "variable %1:f32[1000] needs 4000 bytes; the limit is 3999 bytes (REMAT_MAX_VALUE_BYTES)",
    );
    assert_rejected(
        &remat(&args, Some("lots")),
        "REMAT_MAX_VALUE_BYTES: REMAT_MAX_VALUE_BYTES=\"lots\" is not a byte count (a non-negative integer)",
    );
}
