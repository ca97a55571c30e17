//! Every Rust sample of the documentation is a doctest: each file of `README.md` and
//! `docs/*.md` with a ```` ```rust ```` block is included by `src/lib.rs`'s `doc_samples`
//! (whose blocks `cargo test --doc -p remat` compiles and runs), and no block opts out
//! (`rust,ignore`, `no_run`, `compile_fail` or a bare `rs`). And the README's counts of
//! recorded programs are the test data's.

use remat_testkit::docs::{doc_blocks, repo_root};

/// The files `src/lib.rs` includes as doctests: `include_str!("../../../FILE")`.
fn included() -> Vec<String> {
    let lib = std::fs::read_to_string(repo_root().join("crates/remat/src/lib.rs")).expect("lib.rs");
    let start = lib.find("mod doc_samples {").expect("lib.rs has the doc_samples module");
    let module = &lib[start..start + lib[start..].find("\n}").expect("its end")];
    module
        .split("include_str!(\"../../../")
        .skip(1)
        .map(|rest| rest.split_once('"').expect("a closing quote").0.to_string())
        .collect()
}

#[test]
fn every_file_with_a_rust_block_is_a_doctest() {
    let blocks = doc_blocks();
    let mut with_rust: Vec<String> = blocks.iter().filter(|b| b.lang == "rust").map(|b| b.file.clone()).collect();
    with_rust.dedup();
    let mut included = included();
    included.sort();
    with_rust.sort();
    assert_eq!(included, with_rust, "src/lib.rs's doc_samples and the files with Rust blocks");
    for b in &blocks {
        let rust_like = b.lang.starts_with("rust") || b.lang == "rs";
        assert!(!rust_like || b.lang == "rust", "{b}: a Rust block that is not run ({})", b.lang);
    }
}

/// The number of files in `tests/data/DIR` whose name ends with `ext`.
fn count(dir: &str, ext: &str) -> usize {
    std::fs::read_dir(repo_root().join("tests/data").join(dir))
        .expect("the data directory")
        .filter(|e| e.as_ref().expect("an entry").file_name().to_string_lossy().ends_with(ext))
        .count()
}

#[test]
fn the_readmes_counts_are_the_test_datas() {
    // "How close to JAX it is" counts the recorded programs (the tests behind each claim,
    // crates/ir/tests/roundtrip.rs and the conformance tests, run every one of them): the
    // counts follow the data. Its speed and memory figures are computed from
    // docs/benchmarks.md's tables by readme_numbers.rs.
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let readme = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let (cases, bench) = (count("conformance", ".json"), count("bench", ".jaxpr"));
    for claim in [
        format!("every jaxpr in the {cases} conformance cases"),
        format!("all {bench} benchmark programs"),
        format!("on {cases} of {cases} cases"),
        format!("match JAX's on {cases} of {cases}"),
        format!("the {cases} programs written in Rust"),
    ] {
        assert!(readme.contains(&claim), "README.md does not say {claim:?}");
    }
}
