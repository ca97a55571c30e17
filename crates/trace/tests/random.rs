//! `remat_trace::random` against JAX itself: each case of `tests/data/random_oracle.json`
//! (recorded by `gen_random.py` from JAX 0.10.2) has a Rust twin here of the same name.
//! The twin's traced jaxpr must print as JAX's, character for character, and evaluate
//! with the interpreter to JAX's outputs bit for bit (the same keys give the same words,
//! floats and permutations). Two kinds of case are within a few ulps instead, because
//! the interpreter's arithmetic is not XLA's there (not because of what is traced):
//! `erf_inv` (remat-math's, in `normal`) and `x * range + min` (`uniform` with a range
//! other than 1), which XLA on CPU contracts into one fused multiply-add.

use std::collections::BTreeMap;

use remat_ir::{Array, Aval, DType};
use remat_testkit::{arrays, read_json};
use remat_trace::{make_jaxpr, random, Tensor};

type Program = Box<dyn Fn(&[Tensor]) -> Tensor>;

fn p(f: impl Fn(&[Tensor]) -> Tensor + 'static) -> Program {
    Box::new(f)
}

/// The Rust twin of each oracle case.
fn programs() -> BTreeMap<String, Program> {
    let mut m: BTreeMap<String, Program> = BTreeMap::new();
    let mut add = |name: String, f: Program| {
        assert!(m.insert(name.clone(), f).is_none(), "{name} twice");
    };
    for seed in [0, 42, -1] {
        add(format!("PRNGKey {seed}"), p(|a| random::prng_key(&a[0])));
    }
    add("key_data(key) 7".into(), p(|a| random::key_data(&random::key(&a[0]))));
    for kn in ["k0", "k42"] {
        add(format!("split {kn}"), p(|a| random::split(&a[0], 2)));
        add(format!("split3 {kn}"), p(|a| random::split(&a[0], 3)));
        add(format!("fold_in {kn}"), p(|a| random::fold_in(&a[0], 7)));
        add(format!("clone {kn}"), p(|a| random::clone(&a[0])));
        add(format!("bits {kn}"), p(|a| random::bits(&a[0], &[2, 3])));
        add(format!("uniform {kn}"), p(|a| random::uniform(&a[0], &[3], DType::F32, 0.0, 1.0)));
        add(format!("uniform_scalar {kn}"), p(|a| random::uniform(&a[0], &[], DType::F32, 0.0, 1.0)));
        add(format!("uniform_minmax {kn}"), p(|a| random::uniform(&a[0], &[2, 3], DType::F32, -1.0, 2.0)));
        add(format!("normal {kn}"), p(|a| random::normal(&a[0], &[3], DType::F32)));
        add(format!("normal_2d {kn}"), p(|a| random::normal(&a[0], &[4, 5], DType::F32)));
        add(format!("bernoulli {kn}"), p(|a| random::bernoulli(&a[0], 0.5, Some(&[6]))));
        add(format!("bernoulli_p {kn}"), p(|a| random::bernoulli(&a[0], &a[1], None)));
        add(format!("categorical {kn}"), p(|a| random::categorical(&a[0], &a[1], -1)));
        add(format!("categorical_axis0 {kn}"), p(|a| random::categorical(&a[0], &a[1], 0)));
        add(format!("randint {kn}"), p(|a| random::randint(&a[0], &[4], 0, 10)));
        add(format!("randint_2d {kn}"), p(|a| random::randint(&a[0], &[2, 3], -5, 1000)));
        add(format!("permutation {kn}"), p(|a| random::permutation(&a[0], 5)));
        add(format!("permutation_array {kn}"), p(|a| random::permute(&a[0], &a[1])));
    }
    add("randint_traced_bounds".into(), p(|a| random::randint(&a[0], &[5], &a[1], &a[2])));
    add("split_shape".into(), p(|a| random::split_shape(&a[0], &[2, 3])));
    add("bits_u8".into(), p(|a| random::bits_of(&a[0], &[5], DType::U8)));
    add("uniform_unrounded_bounds".into(), p(|a| random::uniform(&a[0], &[2], DType::F32, 0.1, 0.7)));
    add(
        "split_then_uniform".into(),
        p(|a| random::uniform(&random::split(&a[0], 2).index_row(1), &[2], DType::F32, 0.0, 1.0)),
    );
    add("typed_split".into(), p(|a| random::key_data(&random::split(&random::key(&a[0]), 4))));
    add("typed_uniform".into(), p(|a| random::uniform(&random::key(&a[0]), &[3], DType::F32, 0.0, 1.0)));
    add("exponential".into(), p(|a| random::exponential(&a[0], &[2, 3], DType::F32)));
    add("exponential_scalar".into(), p(|a| random::exponential(&a[0], &[], DType::F32)));
    add("choice_rows".into(), p(|a| random::choice(&a[0], &a[1], &[3])));
    add("permutation_rows".into(), p(|a| random::permute(&a[0], &a[1])));
    add("choice_matrix_rows".into(), p(|a| random::choice(&a[0], &a[1], &[2, 2])));
    m
}

/// `keys[i]` as JAX's `split(k)[i]` records it on a legacy key: `slice` then `squeeze`.
trait IndexRow {
    fn index_row(&self, i: usize) -> Tensor;
}

impl IndexRow for Tensor {
    #[track_caller]
    fn index_row(&self, i: usize) -> Tensor {
        self.index(remat_trace::idx![i as i64])
    }
}

#[test]
fn every_random_case_prints_and_evaluates_as_jax_does() {
    let oracle = read_json(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/random_oracle.json"));
    let oracle = oracle.as_object().unwrap();
    let programs = programs();
    assert_eq!(
        oracle.keys().collect::<Vec<_>>(),
        programs.keys().collect::<Vec<_>>(),
        "the oracle and the Rust twins name the same cases"
    );
    let mut failures = Vec::new();
    for (name, case) in oracle {
        let args: Vec<Array> = arrays(case, "args");
        let want: Vec<Array> = arrays(case, "outputs");
        let f = &programs[name];
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
        if text != case["jaxpr"].as_str().unwrap() {
            failures.push(format!("{name}: printed\n{text}\nJAX printed\n{}", case["jaxpr"].as_str().unwrap()));
            continue;
        }
        match remat_interp::eval_jaxpr(&traced.jaxpr.jaxpr, &traced.jaxpr.consts, &args) {
            Err(e) => failures.push(format!("{name}: evaluation failed: {e}")),
            Ok(got) => {
                let ulps = if name.starts_with("normal")
                    || name.starts_with("uniform_minmax")
                    || name == "uniform_unrounded_bounds"
                {
                    4
                } else {
                    0
                };
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    let close =
                        g.to_f64_vec().iter().zip(w.to_f64_vec()).all(|(&a, b)| a == b || ulp_distance(a, b) <= ulps);
                    if g.aval() != w.aval() || !close {
                        failures.push(format!("{name}: output {i} is {g:?}, JAX's is {w:?}"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), oracle.len(), failures.join("\n\n"));
}

/// How many `f32` values lie between `a` and `b` (0: the same bits).
fn ulp_distance(a: f64, b: f64) -> u64 {
    let ordered = |x: f64| {
        let bits = i64::from((x as f32).to_bits());
        if bits < 0x8000_0000 {
            bits
        } else {
            0x8000_0000 - bits
        }
    };
    (ordered(a) - ordered(b)).unsigned_abs()
}

fn trace_error(f: impl FnOnce(Tensor) -> Tensor, aval: Aval) -> String {
    let e = make_jaxpr(f, &aval).map(|t| t.to_string()).expect_err("a tracing error").to_string();
    // Every error is located at the user's call, not inside the library.
    assert!(e.starts_with("crates/trace/tests/random.rs:"), "{e}");
    e
}

#[test]
fn a_non_key_is_a_located_error() {
    let e = trace_error(|x| random::uniform(&x, &[3], DType::F32, 0.0, 1.0), Aval::new(DType::F32, vec![2]));
    assert!(e.starts_with("crates/trace/tests/random.rs:"), "{e}");
    assert!(
        e.ends_with(
            "uniform: expected a PRNG key (a legacy u32[2] key from prng_key, or a key<fry>[] from key), found f32[2]"
        ),
        "{e}"
    );
}

#[test]
fn a_key_array_where_one_key_is_wanted_is_an_error() {
    let e = trace_error(|k| random::normal(&k, &[3], DType::F32), Aval::new(DType::U32, vec![4, 2]));
    assert!(
        e.ends_with(
            "normal accepts a single key, but was given a key array of shape [4] != () (use vmap for batching)"
        ),
        "{e}"
    );
}

#[test]
fn unsupported_dtypes_and_seeds_are_errors() {
    let e = trace_error(|k| random::uniform(&k, &[3], DType::F64, 0.0, 1.0), Aval::new(DType::U32, vec![2]));
    assert!(e.ends_with("uniform: only float32 samples are supported, found dtype f64"), "{e}");
    let e = trace_error(|s| random::prng_key(&s), Aval::new(DType::F32, vec![]));
    assert!(e.ends_with("prng_key: the seed must be an integer scalar, found f32[]"), "{e}");
    let e = trace_error(|k| random::bits_of(&k, &[2], DType::I32), Aval::new(DType::U32, vec![2]));
    assert!(e.ends_with("bits: dtype must be an unsigned integer type remat has (u8, u32), found i32"), "{e}");
    let e = trace_error(|k| random::fold_in(&k, 2.5), Aval::new(DType::U32, vec![2]));
    assert!(e.ends_with("fold_in: the data must be an integer scalar, found the f32 scalar 2.5"), "{e}");
    let e = trace_error(|k| random::bernoulli(&k, &k, None), Aval::new(DType::U32, vec![2]));
    assert!(e.ends_with("bernoulli: p must be a float, found dtype u32"), "{e}");
    let e = trace_error(|k| random::choice(&k, &k.sum(), &[2]), Aval::new(DType::U32, vec![2]));
    assert!(e.ends_with("choice: a must be an array of rank 1 or more, found u32[]"), "{e}");
    let e = trace_error(|k| random::exponential(&k, &[2], DType::I32), Aval::new(DType::U32, vec![2]));
    assert!(e.contains("exponential"), "{e}");
}
