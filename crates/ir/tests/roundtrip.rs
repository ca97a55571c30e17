//! Round trip: every jaxpr JAX printed in the conformance cases and benchmark programs
//! parses and prints back character for character.

use std::path::PathBuf;

use remat_ir::{parse_jaxpr, pp_jaxpr};

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data")
}

fn check(name: &str, text: &str) -> Result<(), String> {
    let j = parse_jaxpr(text, name).map_err(|e| format!("{name}: parse error: {e}"))?;
    let printed = pp_jaxpr(&j);
    if printed != text {
        let (i, (a, b)) = printed
            .lines()
            .zip(text.lines())
            .enumerate()
            .find(|(_, (a, b))| a != b)
            .unwrap_or((0, ("<length differs>", "")));
        return Err(format!("{name}: line {}:\n  printed: {a}\n  jax:     {b}", i + 1));
    }
    Ok(())
}

#[test]
fn conformance_jaxprs_round_trip() {
    let mut failures = Vec::new();
    let mut n = 0;
    for entry in std::fs::read_dir(data_dir().join("conformance")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let case: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        for field in ["jaxpr", "jax_fwd_jaxpr", "jax_bwd_jaxpr"] {
            n += 1;
            let text = case[field].as_str().unwrap();
            if let Err(e) = check(&format!("{stem}.{field}"), text) {
                failures.push(e);
            }
        }
    }
    assert_eq!(n, 96, "expected 32 cases with 3 jaxprs each");
    assert!(failures.is_empty(), "{} of {n} failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn benchmark_programs_round_trip() {
    let mut failures = Vec::new();
    let mut n = 0;
    for entry in std::fs::read_dir(data_dir().join("bench")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "jaxpr") {
            continue;
        }
        n += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text.strip_suffix('\n').unwrap_or(&text);
        if let Err(e) = check(&path.file_name().unwrap().to_string_lossy(), text) {
            failures.push(e);
        }
    }
    assert_eq!(n, 12);
    assert!(failures.is_empty(), "{} of {n} failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn extra_jax_texts_round_trip() {
    let mut failures = Vec::new();
    let mut n = 0;
    for entry in std::fs::read_dir(data_dir().join("jax_extra")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "jaxpr") {
            continue;
        }
        n += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        if let Err(e) = check(&path.file_name().unwrap().to_string_lossy(), text.trim_end_matches('\n')) {
            failures.push(e);
        }
    }
    assert!(n >= 4, "expected the extra JAX texts");
    assert!(failures.is_empty(), "{} of {n} failed:\n{}", failures.len(), failures.join("\n"));
}
