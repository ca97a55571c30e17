//! The recorded data under the workspace's `tests/data`: conformance cases
//! (`conformance/*.json`, recorded from JAX), benchmark programs (`bench/*.jaxpr`) and extra
//! JAX texts (`jax_extra/*.jaxpr`), and the fields of a case. Everything is listed in file
//! name order, and a missing or malformed file panics with its path.

use std::path::{Path, PathBuf};

use remat_ir::{parse_jaxpr, Array, Jaxpr};
use remat_json::ArrayJson;
use serde_json::Value;

/// The workspace's `tests/data`.
pub fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data")
}

/// Files of `tests/data/{dir}` with extension `ext`, sorted by name.
pub fn data_files(dir: &str, ext: &str) -> Vec<PathBuf> {
    let dir = data_dir().join(dir);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    paths.sort();
    paths
}

/// A JSON file's value.
pub fn read_json(path: impl AsRef<Path>) -> Value {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every conformance case as `(name, case)`, in name order.
pub fn conformance_cases() -> Vec<(String, Value)> {
    data_files("conformance", "json")
        .into_iter()
        .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), read_json(&p)))
        .collect()
}

/// Every per-primitive case (`tests/data/primitives/*.json`, recorded from JAX 0.10.2 by
/// `gen_primitives.py` in the conformance format), as `(name, case)`, sorted by name: one
/// small program for each primitive the shared conformance set does not exercise.
pub fn primitive_cases() -> Vec<(String, Value)> {
    data_files("primitives", "json")
        .into_iter()
        .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), read_json(&p)))
        .collect()
}

/// Every real-model case (`tests/data/zoo/*.json`, copied from the shared conformance zoo:
/// ordinary training programs recorded from JAX 0.10.2, in the conformance format extended
/// with more dtypes, `forward_only`, `null` grads and cotangents and `reduced_precision`),
/// as `(name, case)`, sorted by name.
pub fn zoo_cases() -> Vec<(String, Value)> {
    data_files("zoo", "json")
        .into_iter()
        .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), read_json(&p)))
        .collect()
}

/// Every sharded case (`tests/data/sharded/*.json`, recorded from JAX 0.10.2 on 8 simulated
/// CPU devices by `gen_sharded.py`, issue 46): the conformance format plus `devices`,
/// `xla_memory` (XLA's per-device memory analysis of the compiled value-and-grad) and
/// `policies` (the program under two checkpoint policies, each with its jaxpr, JAX's saved
/// residuals and XLA's memory analysis), as `(name, case)`, sorted by name.
pub fn sharded_cases() -> Vec<(String, Value)> {
    data_files("sharded", "json")
        .into_iter()
        .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), read_json(&p)))
        .collect()
}

/// Every loop case (`tests/data/loops/*.json`, recorded from JAX 0.10.2 by `gen_loops.py`:
/// indices computed inside `fori_loop`/`scan` bodies, issue 40), as `(name, case)`, sorted
/// by name.
pub fn loop_cases() -> Vec<(String, Value)> {
    data_files("loops", "json")
        .into_iter()
        .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), read_json(&p)))
        .collect()
}

/// Whether benchmark program `name` is one of the realistic-size models of issues 21 and 26
/// (a CNN, a ResNet block, a GPT block, a deep gelu MLP and the RNN scans recorded by
/// `crates/jit/bench/gen_models.py`): each does 0.8-12 GFLOP a step, minutes in a debug build's interpreter, so the tests check them
/// at full size only structurally in debug builds, and compare their values with JAX's on
/// their reduced-size twins ([`reduced_bench_cases`]).
pub fn is_model_bench(name: &str) -> bool {
    ["cnn_", "resnet_", "gpt_", "gelu_", "scan_"].iter().any(|p| name.starts_with(p))
}

/// The reduced-size twins of the realistic-size benchmark programs
/// (`tests/data/bench/reduced/*.json`: the same model code at a few thousand parameters, with
/// `jaxpr`, `args` and JAX's `outputs`: the value, then the gradients), as `(name, case)`,
/// sorted by name.
pub fn reduced_bench_cases() -> Vec<(String, Value)> {
    data_files("bench/reduced", "json")
        .into_iter()
        .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), read_json(&p)))
        .collect()
}

/// The conformance case `name`.
pub fn conformance_case(name: &str) -> Value {
    read_json(data_dir().join(format!("conformance/{name}.json")))
}

/// `case.field` and its text for every conformance case and jaxpr field (`jaxpr`,
/// `jax_fwd_jaxpr`, `jax_bwd_jaxpr`).
pub fn conformance_texts() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, case) in conformance_cases() {
        for field in ["jaxpr", "jax_fwd_jaxpr", "jax_bwd_jaxpr"] {
            out.push((format!("{name}.{field}"), case[field].as_str().unwrap().to_string()));
        }
    }
    out
}

/// `*.jaxpr` files of `tests/data/{dir}` as `(file name, text)`, the file's trailing
/// newlines removed.
pub fn jaxpr_files(dir: &str) -> Vec<(String, String)> {
    data_files(dir, "jaxpr")
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p.file_name().unwrap().to_string_lossy().into_owned(), text.trim_end_matches('\n').to_string())
        })
        .collect()
}

/// A case's program (its `jaxpr` field), parsed.
pub fn case_jaxpr(case: &Value) -> Jaxpr {
    parse_jaxpr(case["jaxpr"].as_str().unwrap(), "case.jaxpr").unwrap()
}

/// The arrays of a case's list field (`args`, `outputs`, `cotangents`, `grads`).
pub fn arrays(case: &Value, field: &str) -> Vec<Array> {
    case[field].as_array().unwrap().iter().map(|v| Array::from_json(v).unwrap()).collect()
}

/// [`arrays`], with a malformed field as an error naming it.
pub fn try_arrays(case: &Value, field: &str) -> Result<Vec<Array>, String> {
    case[field]
        .as_array()
        .ok_or_else(|| format!("field {field:?} is not a list"))?
        .iter()
        .map(|v| Array::from_json(v).map_err(|e| format!("{field}: {e}")))
        .collect()
}

/// A case's argument names (`arg_names`), as JAX names them.
pub fn arg_names(case: &Value) -> Vec<String> {
    case["arg_names"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
}
