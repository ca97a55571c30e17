//! `remat_trace::numpy::einsum` against JAX itself (`tests/data/einsum_oracle.json`,
//! recorded by `gen_einsum.py` from JAX 0.10.2 and the opt_einsum it imports):
//!
//! - every recorded case has a Rust twin here of the same name and subscripts; its traced
//!   jaxpr must print as JAX's, character for character, evaluate with the interpreter to
//!   JAX's output and (where recorded) have JAX's gradient of the output's sum;
//! - so must the recorded random einsums (text and values);
//! - for hundreds of random contractions, `einsum_path` must choose opt_einsum's path and
//!   steps under every `optimize` JAX accepts;
//! - random einsums evaluate to the Einstein sum computed by definition;
//! - bad subscripts, operand counts and sizes are located errors.

use std::collections::BTreeMap;

use remat_interp::eval_jaxpr;
use remat_ir::{Array, Aval, DType};
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
        ("repeated_size_one_diagonal", "ii->i", auto),
        ("repeated_size_one_squeezed", "ij,jj->i", auto),
        ("repeated_against_size_one", "ij,jj->i", auto),
        ("repeated_size_one_hadamard", "ii,i->i", auto),
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

/// `optimize` as the oracle writes it (`false` for JAX's `Unoptimized`).
fn optimize_of(v: &serde_json::Value) -> Optimize {
    match v {
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
    }
}

#[test]
fn random_einsums_print_and_evaluate_as_jax_does() {
    let oracle = oracle();
    let cases = oracle["random_cases"].as_array().unwrap();
    assert!(cases.len() >= 50, "{} random cases", cases.len());
    let mut failures = Vec::new();
    for case in cases {
        let spec = case["spec"].as_str().unwrap();
        let options = opts(optimize_of(&case["optimize"]));
        let args = arrays(case, "args");
        let traced = make_jaxpr(|a: Vec<Tensor>| einsum_with(spec, &a.iter().collect::<Vec<_>>(), options), &args);
        let traced = match traced {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!("{spec}: trace error: {e}"));
                continue;
            }
        };
        let (text, want) = (traced.to_string(), case["jaxpr"].as_str().unwrap());
        if text != want {
            failures.push(format!("{spec} {options:?}: printed\n{text}\nJAX printed\n{want}"));
            continue;
        }
        let got = eval_jaxpr(&traced.jaxpr.jaxpr, &traced.jaxpr.consts, &args).unwrap();
        if let Err(e) = check_close(spec, &got, &arrays(case, "outputs"), 1e-4, 1e-5) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{} of {} differ:\n{}", failures.len(), cases.len(), failures.join("\n\n"));
}

#[test]
fn every_random_contraction_takes_opt_einsums_path() {
    let oracle = oracle();
    let paths = oracle["paths"].as_array().unwrap();
    assert!(paths.len() > 500, "{} recorded paths", paths.len());
    let mut failures = Vec::new();
    for p in paths {
        let spec = p["spec"].as_str().unwrap();
        let optimize = optimize_of(&p["optimize"]);
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

#[test]
fn einsum_path_rejects_what_it_cannot_plan() {
    // `...` over 129 axes and `i`: 130 letters, more than an index set holds.
    let shape = [1; 130];
    let e = einsum_path("...i", &[&shape], Optimize::Auto).unwrap_err();
    assert_eq!(e, "130 distinct subscripts; at most 128 are supported");
    let e = einsum_path("ij,jk", &[&[2, 3]], Optimize::Auto).unwrap_err();
    assert_eq!(e, "2 operand subscripts for 1 operands");
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

/// A small deterministic generator (64-bit LCG), so failures reproduce.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// Einstein summation by definition: every assignment of the letters, the operands'
/// product added into the output element it names (a size-1 axis reads element 0).
fn reference(inputs: &[Vec<char>], output: &[char], sizes: &BTreeMap<char, usize>, args: &[Array]) -> Vec<f64> {
    let letters: Vec<char> = sizes.keys().copied().collect();
    let total: usize = letters.iter().map(|c| sizes[c]).product();
    let out_len: usize = output.iter().map(|c| sizes[c]).product();
    let values: Vec<Vec<f64>> = args.iter().map(Array::to_f64_vec).collect();
    let mut out = vec![0.0; out_len];
    for flat in 0..total {
        let mut rest = flat;
        let mut at = BTreeMap::new();
        for c in letters.iter().rev() {
            at.insert(*c, rest % sizes[c]);
            rest /= sizes[c];
        }
        let mut product = 1.0;
        for ((names, arg), vals) in inputs.iter().zip(args).zip(&values) {
            let mut offset = 0;
            for (c, &d) in names.iter().zip(arg.shape()) {
                offset = offset * d + if d == 1 { 0 } else { at[c] };
            }
            product *= vals[offset];
        }
        let o = output.iter().fold(0, |acc, c| acc * sizes[c] + at[c]);
        out[o] += product;
    }
    out
}

#[test]
fn random_einsums_compute_einstein_sums() {
    let mut rng = Lcg(7);
    let optimizers = [
        Optimize::Auto,
        Optimize::Greedy,
        Optimize::Optimal,
        Optimize::BranchAll,
        Optimize::Branch2,
        Optimize::Branch1,
        Optimize::Unoptimized,
    ];
    let mut failures = Vec::new();
    for case in 0..300 {
        let sizes: BTreeMap<char, usize> = "abcdef".chars().map(|c| (c, 1 + rng.below(3))).collect();
        let letters: Vec<char> = sizes.keys().copied().collect();
        let n = 1 + rng.below(5);
        let mut inputs: Vec<Vec<char>> = Vec::new();
        let mut args: Vec<Array> = Vec::new();
        for _ in 0..n {
            let names: Vec<char> = (0..rng.below(4)).map(|_| letters[rng.below(letters.len())]).collect();
            // A letter seen once in this operand may have size 1 here (it broadcasts).
            let shape: Vec<usize> = names
                .iter()
                .map(|c| if names.iter().filter(|&d| d == c).count() == 1 && rng.below(6) == 0 { 1 } else { sizes[c] })
                .collect();
            let len: usize = shape.iter().product();
            let data: Vec<f32> = (0..len).map(|_| rng.below(200) as f32 / 50.0 - 2.0).collect();
            args.push(Array::F32(ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), data).unwrap()));
            inputs.push(names);
        }
        let used: Vec<char> = letters.iter().copied().filter(|c| inputs.iter().any(|t| t.contains(c))).collect();
        let explicit = rng.below(4) != 0;
        let output: Vec<char> = if explicit {
            let mut pool = used.clone();
            (0..rng.below(pool.len() + 1).min(3)).map(|_| pool.remove(rng.below(pool.len()))).collect()
        } else {
            let all: Vec<char> = inputs.concat();
            used.iter().copied().filter(|c| all.iter().filter(|&d| d == c).count() == 1).collect()
        };
        let terms: Vec<String> = inputs.iter().map(|t| t.iter().collect()).collect();
        let spec = if explicit {
            format!("{}->{}", terms.join(","), output.iter().collect::<String>())
        } else {
            terms.join(",")
        };
        let optimize = optimizers[rng.below(optimizers.len())];
        // The letters' sizes as the operands have them (size 1 where no operand has more).
        let mut actual: BTreeMap<char, usize> = BTreeMap::new();
        for (names, arg) in inputs.iter().zip(&args) {
            for (c, &d) in names.iter().zip(arg.shape()) {
                let s = actual.entry(*c).or_insert(1);
                *s = (*s).max(d);
            }
        }
        let traced =
            make_jaxpr(|a: Vec<Tensor>| einsum_with(&spec, &a.iter().collect::<Vec<_>>(), opts(optimize)), &args);
        let traced = match traced {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!("case {case}: {spec} {optimize:?}: {e}"));
                continue;
            }
        };
        if let Err(e) = remat_ir::verify_closed(&traced.jaxpr) {
            failures.push(format!("case {case}: {spec}: does not verify: {e}"));
            continue;
        }
        let got = eval_jaxpr(&traced.jaxpr.jaxpr, &traced.jaxpr.consts, &args).unwrap()[0].to_f64_vec();
        let want = reference(&inputs, &output, &actual, &args);
        let close =
            got.len() == want.len() && got.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 1e-3 * (1.0 + w.abs()));
        if !close {
            failures.push(format!("case {case}: {spec} {optimize:?}: got {got:?}, want {want:?}"));
        }
    }
    assert!(failures.is_empty(), "{} of 300 differ:\n{}", failures.len(), failures.join("\n"));
}
