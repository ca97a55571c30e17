//! The JAX texts the IR tests run over: every jaxpr of the conformance cases (`jaxpr`,
//! `jax_fwd_jaxpr`, `jax_bwd_jaxpr`), the benchmark programs, and the extra oracle texts,
//! each as `(name, text)` with the file's trailing newline removed.

// Each test binary compiles this module and uses part of it.
#![allow(dead_code)]

use std::path::PathBuf;

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data")
}

/// Files of `dir` (under `tests/data`) with extension `ext`, sorted by name.
fn files(dir: &str, ext: &str) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(data_dir().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    paths.sort();
    paths
}

/// `case.field` and its text for every conformance case and jaxpr field.
pub fn conformance_texts() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for path in files("conformance", "json") {
        let case: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        for field in ["jaxpr", "jax_fwd_jaxpr", "jax_bwd_jaxpr"] {
            out.push((format!("{stem}.{field}"), case[field].as_str().unwrap().to_string()));
        }
    }
    out
}

/// `*.jaxpr` files of `tests/data/{dir}` as `(file name, text)`.
pub fn jaxpr_files(dir: &str) -> Vec<(String, String)> {
    files(dir, "jaxpr")
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p.file_name().unwrap().to_string_lossy().into_owned(), text.trim_end_matches('\n').to_string())
        })
        .collect()
}
