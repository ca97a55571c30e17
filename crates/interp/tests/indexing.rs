//! Indexing, sorting and cumulative primitives against JAX 0.10.2
//! (`tests/data/indexing/cases.json`, from `gen_indexing.py`): each recorded program
//! parses, prints back as JAX printed it, and evaluates to JAX's outputs — out-of-bounds
//! indices under each mode, NaNs sorting last, ties kept in order, `top_k`, `argmin`,
//! `split` and the cumulative reductions.

use remat_interp::eval_jaxpr;
use remat_ir::{parse_jaxpr, pp_jaxpr};
use remat_testkit::{check_close, read_json, try_arrays};

#[test]
fn indexing_cases_match_jax() {
    let path = remat_testkit::data_dir().join("indexing/cases.json");
    let cases = read_json(&path);
    let cases = cases.as_array().expect("a list of cases");
    assert_eq!(cases.len(), 22, "expected the 22 recorded cases");
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().expect("a name");
        let text = case["jaxpr"].as_str().expect("a jaxpr");
        let result = (|| -> Result<(), String> {
            let jaxpr = parse_jaxpr(text, name).map_err(|e| e.to_string())?;
            if pp_jaxpr(&jaxpr) != text {
                return Err("does not print back as JAX printed it".into());
            }
            let args = try_arrays(case, "args")?;
            let want = try_arrays(case, "outputs")?;
            let got = eval_jaxpr(&jaxpr, &[], &args).map_err(|e| e.to_string())?;
            check_close(name, &got, &want, 1e-6, 1e-6)
        })();
        if let Err(e) = result {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
