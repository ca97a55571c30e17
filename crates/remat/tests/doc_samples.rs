//! Every Rust sample of the documentation is a doctest: each file of `README.md` and
//! `docs/*.md` with a ```` ```rust ```` block is included by `src/lib.rs`'s `doc_samples`
//! (whose blocks `cargo test --doc -p remat` compiles and runs), and no block opts out
//! (`rust,ignore`, `no_run`, `compile_fail` or a bare `rs`).

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
