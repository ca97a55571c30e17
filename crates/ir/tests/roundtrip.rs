//! Round trip: every jaxpr JAX printed in the conformance cases and benchmark programs
//! parses and prints back character for character.

use remat_ir::{parse_jaxpr, pp_jaxpr};

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

/// Checks every `(name, text)` and asserts how many there were and that all passed.
fn check_all(texts: Vec<(String, String)>, expected: impl Fn(usize) -> bool, what: &str) {
    let n = texts.len();
    assert!(expected(n), "{what}: found {n}");
    let failures: Vec<String> = texts.iter().filter_map(|(name, text)| check(name, text).err()).collect();
    assert!(failures.is_empty(), "{} of {n} failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn conformance_jaxprs_round_trip() {
    check_all(remat_testkit::conformance_texts(), |n| n == 96, "expected 32 cases with 3 jaxprs each");
}

#[test]
fn benchmark_programs_round_trip() {
    check_all(remat_testkit::jaxpr_files("bench"), |n| n == 12, "expected 12 benchmark programs");
}

#[test]
fn extra_jax_texts_round_trip() {
    check_all(remat_testkit::jaxpr_files("jax_extra"), |n| n >= 4, "expected the extra JAX texts");
}

/// The real-model cases whose every primitive is known here: their program, forward half
/// and backward half (gather, scatter-add, sort, top_k, split, the cumulative ops).
/// `scans_and_sorts`'s two halves hold `u32` values (sort's jvp), a dtype still to come.
#[test]
fn zoo_indexing_and_sorting_texts_round_trip() {
    let mut texts = Vec::new();
    for (name, case) in remat_testkit::zoo_cases() {
        if !matches!(name.as_str(), "scans_and_sorts" | "embedding_grad") {
            continue;
        }
        let fields: &[&str] =
            if name == "scans_and_sorts" { &["jaxpr"] } else { &["jaxpr", "jax_fwd_jaxpr", "jax_bwd_jaxpr"] };
        for field in fields {
            let text = case[*field].as_str().expect("a jaxpr text").to_string();
            texts.push((format!("{name}.{field}"), text));
        }
    }
    check_all(texts, |n| n == 4, "expected 2 zoo cases' 4 jaxprs");
}
