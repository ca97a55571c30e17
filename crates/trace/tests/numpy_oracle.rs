//! The `jnp`/`nn`/`lax` surface against JAX itself: each program of
//! `tests/data/jnp_oracle.json` (recorded by `jnp_oracle.py` from JAX 0.10.2) has a Rust
//! twin here of the same name, and both must print the same jaxpr.

use std::collections::BTreeMap;

use remat_ir::{Aval, DType};
use remat_trace::numpy::{self as jnp, einsum};
use remat_trace::{checkpoint, idx, jit, make_jaxpr, nn, Arg, Idx, Tensor, ELLIPSIS, NEW_AXIS};

type Program = Box<dyn Fn(&[Tensor]) -> Tensor>;

fn p(f: impl Fn(&[Tensor]) -> Tensor + 'static) -> Program {
    Box::new(f)
}

/// The Rust twin of each oracle program.
fn programs() -> BTreeMap<String, Program> {
    let mut m: BTreeMap<String, Program> = BTreeMap::new();
    let mut add = |name: &str, f: Program| {
        assert!(m.insert(name.to_string(), f).is_none(), "{name} twice");
    };
    // Products
    for name in ["dot_1d_1d", "dot_2d_1d", "dot_1d_2d", "dot_3d_3d", "dot_scalar"] {
        add(name, p(|a| a[0].dot(&a[1])));
    }
    for name in [
        "matmul_2d_2d",
        "matmul_3d_2d",
        "matmul_2d_3d",
        "matmul_batched",
        "matmul_broadcast",
        "matmul_both_one",
        "matmul_4d_3d",
        "matmul_1d_3d",
        "matmul_int_float",
    ] {
        add(name, p(|a| a[0].matmul(&a[1])));
    }
    for (spec, a, b) in [
        ("ij,jk->ik", "[2, 3]", "[3, 4]"),
        ("ij,jk->ki", "[2, 3]", "[3, 4]"),
        ("ij,kj->ik", "[2, 3]", "[4, 3]"),
        ("i,i->", "[3]", "[3]"),
        ("i,j->ij", "[3]", "[4]"),
        ("ij,ij->i", "[3, 4]", "[3, 4]"),
        ("ijk,jl->il", "[2, 3, 5]", "[3, 4]"),
        ("bij,bjk->bik", "[2, 3, 4]", "[2, 4, 5]"),
        ("bij,bjk->bki", "[2, 3, 4]", "[2, 4, 5]"),
        ("ij,jk", "[2, 3]", "[3, 4]"),
        ("bqd,bkd->bqk", "[2, 3, 4]", "[2, 5, 4]"),
        ("bij,bjk->bik", "[1, 3, 4]", "[2, 4, 5]"),
    ] {
        add(&format!("einsum {spec} {a} {b}"), p(move |a| einsum(spec, &[&a[0], &a[1]])));
    }
    add("einsum ij->ji", p(|a| einsum("ij->ji", &[&a[0]])));
    add("einsum ijk->ki", p(|a| einsum("ijk->ki", &[&a[0]])));

    // Reductions
    add("sum", p(|a| a[0].sum()));
    add("sum_axes_unsorted", p(|a| a[0].sum_axes(&[2, 0], false)));
    add("sum_keepdims", p(|a| a[0].sum_axes(&[0, 2], true)));
    add("sum_bool", p(|a| a[0].sum()));
    add("sum_int", p(|a| a[0].sum()));
    add("max_keepdims", p(|a| a[0].max_axes(&[-1], true)));
    add("min", p(|a| a[0].min()));
    add("mean", p(|a| a[0].mean()));
    add("mean_axes", p(|a| a[0].mean_axes(&[0, 2], false)));
    add("mean_keepdims", p(|a| a[0].mean_axes(&[-1], true)));
    add("mean_int", p(|a| a[0].mean()));
    add("argmax", p(|a| a[0].argmax(1)));
    add("argmax_flat", p(|a| a[0].argmax_flat()));

    // Layout
    add("reshape", p(|a| a[0].reshape(&[-1, 2])));
    add("reshape_same", p(|a| a[0].reshape(&[2, 3, 4])));
    add("transpose", p(|a| a[0].transpose(&[2, 0, 1])));
    add("transpose_identity", p(|a| a[0].transpose(&[0, 1])));
    add("T", p(|a| a[0].t()));
    add("broadcast_to", p(|a| a[0].broadcast_to(&[2, 4, 3])));
    add("broadcast_to_same", p(|a| a[0].broadcast_to(&[2, 3])));
    add("broadcast_add", p(|a| &a[0] + &a[1]));
    add("squeeze", p(|a| a[0].squeeze(&[1])));
    add("squeeze_all", p(|a| a[0].squeeze_all()));
    add("expand_dims", p(|a| a[0].expand_dims(&[0, 2])));
    add("concatenate", p(|a| jnp::concatenate(&[&a[0], &a[1]], 0)));
    add("concatenate_last", p(|a| jnp::concatenate(&[&a[0], &a[1]], -1)));
    add("pad", p(|a| a[0].pad(0.0, &[(1, 2, 0), (0, 0, 1)])));

    // Indexing
    add("index_range", p(|a| a[0].index(idx![1..4])));
    add("index_int", p(|a| a[0].index(idx![1])));
    add("index_negative", p(|a| a[0].index(idx![-1])));
    add("index_column", p(|a| a[0].index(idx![.., 2])));
    add("index_strided", p(|a| a[0].index(&[Idx::from(1..3), Idx::slice(None, None, 2)])));
    add("index_new_axis", p(|a| a[0].index(&[NEW_AXIS])));
    add("index_middle_new_axis", p(|a| a[0].index(idx![.., NEW_AXIS])));
    add("index_ellipsis_new_axis", p(|a| a[0].index(&[ELLIPSIS, NEW_AXIS])));
    add("index_mixed", p(|a| a[0].index(idx![1.., NEW_AXIS, 2])));
    add("index_full", p(|a| a[0].index(idx![..])));
    add("index_traced", p(|a| a[0].dynamic_slice(&[Arg::from(&a[1]), Arg::from(0)], &[2, 4])));
    add("dynamic_update_slice", p(|a| a[0].dynamic_update_slice(&a[1], &[Arg::from(&a[2]), Arg::from(0)])));

    // Creation
    add("zeros", p(|a| &a[0] + jnp::zeros(&[2, 3], DType::F32)));
    add("ones_int", p(|_| jnp::ones(&[2, 3], DType::I32)));
    add("full", p(|a| &a[0] * jnp::full(&[2, 3], 7.0, DType::F32)));
    add("arange", p(|_| jnp::arange(5, DType::I32)));
    add("arange_float", p(|_| jnp::arange(2, DType::F32)));
    add("arange_from", p(|_| jnp::arange_from(1.0, 3.0, DType::F32)));
    add("arange_step", p(|_| jnp::arange_step(1.0, 7.0, 2.0, DType::I32)));
    add("arange_float_step", p(|_| jnp::arange_step(0.0, 2.0, 0.5, DType::F32)));

    // Elementwise, promotion, weak types
    add(
        "unary_zoo",
        p(|a| {
            let x = &a[0];
            x.tan() + x.log1p() + x.expm1() + x.sign() + x.rsqrt() + x.square()
        }),
    );
    add("exp_int", p(|a| a[0].exp()));
    add("abs_int", p(|a| a[0].abs()));
    add("neg", p(|a| -&a[0]));
    add(
        "powers",
        p(|a| {
            let (x, y) = (&a[0], &a[1]);
            x.powi(2) + x.powi(-1) + x.pow(2.5) + x.pow(y) + jnp::power(2.0, x) + x.pow(3)
        }),
    );
    add("scalar_ops", p(|a| 1.0 - &a[0] * 2 / 3.0 + 1));
    add("weak_tensor", p(|a| &a[0] / jnp::sqrt(4.0)));
    add("weak_chain", p(|a| &a[0] * (jnp::sqrt(4.0) * 2.0)));
    add("int_plus_float", p(|a| &a[0] + 1.5));
    add("int_times_float", p(|a| &a[0] * &a[1]));
    add("comparisons", p(|a| a[0].gt(0.0).eq(a[1].le(&a[0])).ne(a[0].ge(1.0))));
    add("maximum_minimum", p(|a| jnp::maximum(&a[0], &a[1]) + jnp::minimum(&a[0], 0.5)));
    add("where", p(|a| jnp::where_(&a[0].gt(0.0), &a[0], &a[1])));
    add("where_scalar", p(|a| jnp::where_(&a[0].gt(0.0), &a[0], 0.0)));
    add("where_scalars", p(|a| jnp::where_(&a[0].gt(0.0), 1.0, 0.0)));
    add("where_broadcast", p(|a| jnp::where_(&a[0].gt(0.0), &a[0], &a[1])));
    add(
        "where_twice",
        p(|a| {
            let x = &a[0];
            jnp::where_(&x.gt(0.0), x, -x) + jnp::where_(&x.gt(0.0), x, -x)
        }),
    );
    add("clip", p(|a| a[0].clip(0.0, 1.0)));
    add("clamp", p(|a| a[0].clamp(0.0, 1.0)));
    add("reduce_precision", p(|a| a[0].reduce_precision(5, 10)));
    add("astype", p(|a| a[0].astype(DType::I32)));

    // jax.nn
    add("relu", p(|a| nn::relu(&a[0])));
    add("relu_twice", p(|a| nn::relu(&nn::relu(&a[0]))));
    add("sigmoid", p(|a| nn::sigmoid(&a[0])));
    add("silu", p(|a| nn::silu(&a[0])));
    add("gelu", p(|a| nn::gelu(&a[0])));
    add("softmax", p(|a| nn::softmax(&a[0], -1)));
    add("softmax_axis0", p(|a| nn::softmax(&a[0], 0)));
    add("log_softmax", p(|a| nn::log_softmax(&a[0], 0)));
    add("logsumexp", p(|a| nn::logsumexp(&a[0], Some(&[-1]), false)));
    add("one_hot", p(|a| nn::one_hot(&a[0], 3, DType::F32)));

    // More promotion and broadcasting through the library
    add("where_float_condition", p(|a| jnp::where_(&a[0], &a[1], 1.0)));
    add("concatenate_mixed", p(|a| jnp::concatenate(&[&a[0], &a[1]], 0)));
    add("clip_tensor_bounds", p(|a| a[0].clip(&a[1], 2.0)));
    add("one_hot_2d", p(|a| nn::one_hot(&a[0], 4, DType::F32)));
    add("softmax_3d", p(|a| nn::softmax(&a[0], 1)));
    add("mean_bool", p(|a| a[0].mean()));
    add("matmul_vec_vec", p(|a| a[0].matmul(&a[1])));

    // Calls
    add(
        "jit_twice",
        p(|a| {
            let sin = jit(|x: Tensor| x.sin()).name("sin");
            sin.call(sin.call(a[0].clone()))
        }),
    );
    add(
        "checkpoint_twice",
        p(|a| {
            let g = checkpoint(|x: Tensor| x.sin());
            g.call(g.call(a[0].clone()))
        }),
    );
    m
}

/// Programs whose JAX text uses what the IR cannot express, with the reason.
const KNOWN_DIFFERENT: &[(&str, &str)] = &[];

fn oracle() -> BTreeMap<String, serde_json::Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jnp_oracle.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn aval(spec: &serde_json::Value) -> Aval {
    let dtype = DType::from_short_name(spec[0].as_str().unwrap()).unwrap();
    let shape = spec[1].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect::<Vec<_>>();
    Aval::new(dtype, shape)
}

#[test]
fn every_oracle_program_prints_as_jax_does() {
    let oracle = oracle();
    let programs = programs();
    let names: Vec<&String> = oracle.keys().collect();
    assert_eq!(names, programs.keys().collect::<Vec<_>>(), "the oracle and the Rust twins name the same programs");
    let mut failures = Vec::new();
    for (name, case) in &oracle {
        let avals: Vec<Aval> = case["args"].as_array().unwrap().iter().map(aval).collect();
        let f = &programs[name];
        let text = match make_jaxpr(|args: Vec<Tensor>| f(&args), &avals) {
            Ok(t) => {
                if let Err(e) = remat_ir::verify_closed(&t.jaxpr) {
                    failures.push(format!("{name}: does not verify: {e}"));
                }
                t.to_string()
            }
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let want = case["jaxpr"].as_str().unwrap();
        let known = KNOWN_DIFFERENT.iter().any(|(n, _)| n == name);
        match (text == want, known) {
            (true, false) | (false, true) => {}
            (false, false) => failures.push(format!("{name}:\n--- JAX\n{want}\n--- Rust\n{text}")),
            (true, true) => failures.push(format!("{name} now matches JAX; remove it from KNOWN_DIFFERENT")),
        }
    }
    assert!(failures.is_empty(), "{} of {} differ:\n{}", failures.len(), oracle.len(), failures.join("\n\n"));
}

/// `logsumexp`'s values, including rows that are all `-inf`, where JAX's shift by a
/// non-finite max becomes 0.
#[test]
fn logsumexp_values() {
    let traced =
        make_jaxpr(|x: Tensor| nn::logsumexp(&x, Some(&[-1]), false), &Aval::new(DType::F32, vec![2, 3])).unwrap();
    let inf = f32::NEG_INFINITY;
    let x = remat_ir::Array::F32(ndarray::arr2(&[[1.0f32, 2.0, 3.0], [inf, inf, inf]]).into_dyn());
    let out = remat_interp::eval_jaxpr(&traced.jaxpr.jaxpr, &traced.jaxpr.consts, &[x]).unwrap().remove(0).to_f64_vec();
    let want = (1f64.exp() + 2f64.exp() + 3f64.exp()).ln();
    assert!((out[0] - want).abs() < 1e-5, "{out:?}");
    assert_eq!(out[1], f64::NEG_INFINITY);
}
