//! `remat_trace::numpy::einsum` against JAX itself (`tests/data/einsum_oracle.json`,
//! recorded by `gen_einsum.py` from JAX 0.10.2 and the opt_einsum it imports):
//!
//! - every recorded case has a Rust twin here of the same name and subscripts; its traced
//!   jaxpr must print as JAX's, character for character, evaluate with the interpreter to
//!   JAX's output and (where recorded) have JAX's gradient of the output's sum;
//! - for hundreds of random contractions, `einsum_path` must choose opt_einsum's path and
//!   steps under every `optimize` JAX accepts;
//! - bad subscripts, operand counts and sizes are located errors.

use std::collections::BTreeMap;

use remat_interp::eval_jaxpr;
use remat_ir::{Aval, DType};
use remat_testkit::{arrays, check_close, read_json};
use remat_trace::make_jaxpr;
use remat_trace::numpy::{einsum, einsum_path, einsum_with, EinsumOptions, Optimize};
use remat_trace::Tensor;

fn oracle() -> serde_json::Value {
    read_json(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/einsum_oracle.json"))
}

fn opts(optimize: Optimize) -> EinsumOptions {
    EinsumOptions { optimize, ..Default::default() }
}

fn preferred(dtype: DType) -> EinsumOptions {
    EinsumOptions { preferred_element_type: Some(dtype), ..Default::default() }
}

/// The Rust twin of each case: its subscripts and options (`jnp.einsum(spec, *args, **kw)`).
fn twins() -> BTreeMap<&'static str, (&'static str, EinsumOptions)> {
    let auto = EinsumOptions::default();
    let cases = [
        ("chain3_cheap_end_first", "ij,jk,kl->il", auto),
        ("chain3_cheap_start_first", "ij,jk,kl->il", auto),
        ("chain3_square_tie", "ij,jk,kl->il", auto),
        ("chain4_docstring", "ij,jk,kl,lm->im", auto),
        ("chain4_square_tie", "ij,jk,kl,lm->im", auto),
        ("chain5_branch_all", "ab,bc,cd,de,ef->af", auto),
        ("chain6_branch_all", "ab,bc,cd,de,ef,fg->ag", auto),
        ("chain7_branch_2", "ab,bc,cd,de,ef,fg,gh->ah", auto),
        ("chain8_branch_2", "ab,bc,cd,de,ef,fg,gh,hi->ai", auto),
        ("zoo_three_operands", "ij,jk,kl->il", auto),
        ("attention_scores", "bhqd,bhkd->bhqk", auto),
        ("attention_three", "bhqd,bhkd,bhkv->bhqv", auto),
        ("batched_chain", "bij,bjk,bkl->bil", auto),
        ("batched_chain4", "bij,bjk,bkl,blm->bmi", auto),
        ("ellipsis_chain", "...ij,...jk,...kl->...il", auto),
        ("ellipsis_broadcast", "...ij,jk,...kl", auto),
        ("implicit_output", "ij,jk,kl", auto),
        ("implicit_output_sorted", "zb,ba,ac", auto),
        ("output_permuted", "ij,jk,kl->li", auto),
        ("summed_in_one_operand", "ijx,jk,kly->il", auto),
        ("diagonal_in_chain", "ii,ij,jk->k", auto),
        ("trace_of_product", "ij,jk,ki->", auto),
        ("repeated_kept", "iij,jk,kl->il", auto),
        ("triple_diagonal", "iii->i", auto),
        ("repeated_across_operands", "iji,jk,k->i", auto),
        ("outer3", "i,j,k->ijk", auto),
        ("hadamard_then_contract", "ij,ij,jk->ik", auto),
        ("scalar_operand", ",ij,j->i", auto),
        ("size_one_broadcast", "ij,jk,kl->il", auto),
        ("many_contracted", "ijk,jkl,klm->im", auto),
        ("docstring_five", "ea,fb,abcd,gc,hd->efgh", auto),
        ("int_chain", "ij,jk,kl->il", auto),
        ("int_preferred_f32", "ij,jk,kl->il", preferred(DType::F32)),
        ("int_sum_preferred_f32", "ij,ik,kl->l", preferred(DType::F32)),
        ("mixed_int_float", "ij,jk,kl->il", auto),
        ("bf16_preferred_f32", "ij,jk,kl->il", preferred(DType::F32)),
        ("bf16_sum_preferred_f32", "ij,ik,kl->l", preferred(DType::F32)),
        ("mixed_bf16_f32", "ij,jk,kl->il", auto),
        ("greedy_four", "ab,cd,bc,de->ae", opts(Optimize::Greedy)),
        ("greedy_six", "ab,bc,cd,de,ef,fg->ag", opts(Optimize::Greedy)),
        ("optimal_five", "ab,bc,cd,de,ef->af", opts(Optimize::Optimal)),
        ("unoptimized_four", "ij,jk,kl,lm->im", opts(Optimize::Unoptimized)),
        ("unoptimized_three", "ij,jk,kl->il", opts(Optimize::Unoptimized)),
    ];
    let mut m = BTreeMap::new();
    for (name, spec, options) in cases {
        assert!(m.insert(name, (spec, options)).is_none(), "{name} twice");
    }
    m
}

#[test]
fn every_einsum_case_prints_evaluates_and_differentiates_as_jax_does() {
    let oracle = oracle();
    let cases = oracle["cases"].as_object().unwrap();
    let twins = twins();
    assert_eq!(
        cases.keys().map(String::as_str).collect::<Vec<_>>(),
        twins.keys().copied().collect::<Vec<_>>(),
        "the oracle and the Rust twins name the same cases"
    );
    let mut failures = Vec::new();
    for (name, case) in cases {
        let (spec, options) = twins[name.as_str()];
        assert_eq!(case["spec"].as_str().unwrap(), spec, "{name}: the twin's subscripts");
        let args = arrays(case, "args");
        let f = move |a: &[Tensor]| einsum_with(spec, &a.iter().collect::<Vec<_>>(), options);
        let traced = match make_jaxpr(|a: Vec<Tensor>| f(&a), &args) {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!("{name}: trace error: {e}"));
                continue;
            }
        };
        if let Err(e) = remat_ir::verify_closed(&traced.jaxpr) {
            failures.push(format!("{name}: does not verify: {e}"));
        }
        let text = traced.to_string();
        let want = case["jaxpr"].as_str().unwrap();
        if text != want {
            failures.push(format!("{name}: printed\n{text}\nJAX printed\n{want}"));
            continue;
        }
        let got = eval_jaxpr(&traced.jaxpr.jaxpr, &traced.jaxpr.consts, &args).unwrap();
        if let Err(e) = check_close(&format!("{name}: outputs"), &got, &arrays(case, "outputs"), 1e-4, 1e-5) {
            failures.push(e);
        }
        if case.get("grads").is_none() {
            continue;
        }
        let summed = make_jaxpr(|a: Vec<Tensor>| f(&a).sum(), &args).unwrap();
        let argnums: Vec<usize> = (0..args.len()).collect();
        match remat_ad::grad(&summed.jaxpr.jaxpr, &argnums) {
            Err(e) => failures.push(format!("{name}: grad failed: {e}")),
            Ok(g) => {
                let got = eval_jaxpr(&g, &summed.jaxpr.consts, &args).unwrap();
                if let Err(e) = check_close(&format!("{name}: grads"), &got, &arrays(case, "grads"), 1e-4, 1e-5) {
                    failures.push(e);
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n\n"));
}

#[test]
fn every_random_contraction_takes_opt_einsums_path() {
    let oracle = oracle();
    let paths = oracle["paths"].as_array().unwrap();
    assert!(paths.len() > 500, "{} recorded paths", paths.len());
    let mut failures = Vec::new();
    for p in paths {
        let spec = p["spec"].as_str().unwrap();
        let optimize = match &p["optimize"] {
            serde_json::Value::Bool(false) => Optimize::Unoptimized,
            v => match v.as_str().unwrap() {
                "auto" => Optimize::Auto,
                "greedy" => Optimize::Greedy,
                "optimal" => Optimize::Optimal,
                "branch-all" => Optimize::BranchAll,
                "branch-2" => Optimize::Branch2,
                "branch-1" => Optimize::Branch1,
                other => panic!("optimize={other}"),
            },
        };
        let shapes: Vec<Vec<usize>> = p["shapes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect())
            .collect();
        let shapes: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
        let want_path: Vec<Vec<usize>> = p["path"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect())
            .collect();
        let want_steps: Vec<&str> = p["steps"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
        let got = einsum_path(spec, &shapes, optimize).unwrap_or_else(|e| panic!("{spec}: {e}"));
        let got_steps: Vec<&str> = got.steps.iter().map(|s| s.equation.as_str()).collect();
        if got.path != want_path || got_steps != want_steps {
            failures.push(format!(
                "{spec} {shapes:?} optimize={optimize:?}:\n  got  {:?} {got_steps:?}\n  want {want_path:?} {want_steps:?}",
                got.path
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} paths differ:\n{}", failures.len(), paths.len(), failures.join("\n"));
}

#[test]
fn einsum_path_reports_the_steps() {
    // `jnp.einsum_path`'s docstring: `ij,jk,kl` on (2, 3), (3, 100), (100, 5).
    let p = einsum_path("ij,jk,kl", &[&[2, 3], &[3, 100], &[100, 5]], Optimize::Optimal).unwrap();
    assert_eq!(p.path, vec![vec![1, 2], vec![0, 1]]);
    let eqs: Vec<&str> = p.steps.iter().map(|s| s.equation.as_str()).collect();
    assert_eq!(eqs, ["kl,jk->lj", "lj,ij->il"]);
    assert_eq!((p.steps[0].operands.clone(), p.steps[0].summed.clone()), (vec![2, 1], vec!['k']));
}

fn trace_error(spec: &str, shapes: &[&[usize]]) -> String {
    let avals: Vec<Aval> = shapes.iter().map(|s| Aval::new(DType::F32, s.to_vec())).collect();
    let e = make_jaxpr(|a: Vec<Tensor>| einsum(spec, &a.iter().collect::<Vec<_>>()), &avals)
        .map(|t| t.to_string())
        .expect_err("a tracing error")
        .to_string();
    // Every error is located at the user's call, not inside the library.
    assert!(e.starts_with("crates/trace/tests/einsum.rs:"), "{e}");
    e
}

#[test]
fn bad_einsums_are_located_errors() {
    let e = trace_error("ij,jk,kl->il", &[&[2, 3], &[3, 4]]);
    assert!(e.ends_with("einsum \"ij,jk,kl->il\": 3 operand subscripts for 2 operands"), "{e}");
    let e = trace_error("ij,jk,kl->il", &[&[2, 3], &[3, 4], &[5, 6]]);
    assert!(e.ends_with("subscript 'k' has size 4 in an earlier operand but 5 in operand 2"), "{e}");
    let e = trace_error("ij,jk->iq", &[&[2, 3], &[3, 4]]);
    assert!(e.ends_with("output subscript 'q' is not in any operand's subscripts"), "{e}");
    let e = trace_error("ij,jkl->il", &[&[2, 3], &[3, 4]]);
    assert!(e.ends_with("operand 1 has 2 axes [3, 4] but subscripts \"jkl\""), "{e}");
    let e = trace_error("i$,jk->ik", &[&[2, 3], &[3, 4]]);
    assert!(e.contains("subscripts must be letters"), "{e}");
    let e = trace_error("ij", &[]);
    assert!(e.ends_with("einsum \"ij\": no operands"), "{e}");
    let e = make_jaxpr(
        |a: Vec<Tensor>| einsum("ij,jk->ik", &[&a[0].gt(0.0), &a[1]]),
        &vec![Aval::new(DType::F32, vec![2, 3]), Aval::new(DType::F32, vec![3, 4])],
    )
    .map(|t| t.to_string())
    .expect_err("bool operands")
    .to_string();
    assert!(e.ends_with("operands must be numbers, found bool[2,3]"), "{e}");
}
