//! `remat::vmap` against JAX itself: each case of `crates/trace/tests/data/vmap_oracle.json`
//! (written by `gen_vmap.py` from JAX 0.10.2) is `jax.vmap(fn, in_axes, out_axes)` of a
//! small program; its Rust twin here (same name) must print the same jaxpr character for
//! character and evaluate to the same outputs. Together they exercise every batching rule
//! remat writes. The errors (a primitive without a rule, axes that do not fit) are located
//! trace errors.

use std::collections::BTreeMap;

use remat::ir::Primitive;
use remat::lax::{ConvOptions, Padding};
use remat::numpy::Sections;
use remat::run::{Backend, Program, RunOptions};
use remat::{checkpoint, grad, ix, lax, make_jaxpr, nn, numpy, random, scan, vmap, Array, Aval, DType, Nans, Tensor};
use remat_testkit::{arrays, check_close, read_json};

type Program1 = Box<dyn Fn(&[Tensor]) -> Vec<Tensor>>;

fn programs() -> BTreeMap<&'static str, Program1> {
    let mut m: BTreeMap<&'static str, Program1> = BTreeMap::new();
    let mut add = |name: &'static str, f: Program1| {
        m.insert(name, f);
    };
    add("sin_mul_same_axes", Box::new(|a| vec![a[0].sin() * &a[1]]));
    add("mul_unbatched_vector", Box::new(|a| vec![&a[0] * &a[1] + 1.0]));
    add("mul_unbatched_scalar", Box::new(|a| vec![&a[0] * &a[1]]));
    add("batched_scalar_times_matrix", Box::new(|a| vec![&a[0] * &a[1]]));
    add("mixed_axes", Box::new(|a| vec![&a[0] - &a[1]]));
    add("in_axis_1_out_axis_1", Box::new(|a| vec![a[0].tanh().powi(3)]));
    add("out_axis_moved", Box::new(|a| vec![&a[0] * 2.0]));
    add("unbatched_output_broadcast", Box::new(|a| vec![a[0].sum(), &a[1] * 2.0]));
    add("compare_select", Box::new(|a| vec![numpy::where_(&a[0].gt(&a[1]), &a[0], &a[1])]));
    add(
        "reduce_sum_max_argmax",
        Box::new(|a| vec![a[0].sum_axes(&[1], false), a[0].max_axes(&[0], false), a[0].argmax(1)]),
    );
    add("cumsum", Box::new(|a| vec![lax::cumsum(&a[0], 0, false)]));
    add("matvec_unbatched_matrix", Box::new(|a| vec![a[0].matmul(&a[1])]));
    add("matvec_batched_matrix", Box::new(|a| vec![a[0].matmul(&a[1])]));
    add("matmul_both_batched", Box::new(|a| vec![a[0].matmul(&a[1])]));
    add("broadcast_to", Box::new(|a| vec![a[0].broadcast_to(&[2, 3])]));
    add("reshape_transpose", Box::new(|a| vec![a[0].reshape(&[-1]), a[0].t()]));
    add(
        "squeeze_rev_slice",
        Box::new(|a| {
            vec![a[0].squeeze(&[0]), a[0].apply(Primitive::Rev { dimensions: vec![1] }), a[0].slice(&[0, 1], &[1, 3])]
        }),
    );
    add("concatenate_unbatched", Box::new(|a| vec![numpy::concatenate(&[&a[0], &a[1]], 0)]));
    add("pad", Box::new(|a| vec![a[0].pad(0.0, &[(1, 2, 0)])]));
    add("convert", Box::new(|a| vec![(&a[0] * 3.0).astype(DType::I32)]));
    add(
        "jit_body",
        Box::new(|a| {
            vec![remat::trace::jit(|(x, w): (Tensor, Tensor)| x.sin().matmul(&w)).call((a[0].clone(), a[1].clone()))]
        }),
    );
    add("checkpoint_body", Box::new(|a| vec![checkpoint(|x: Tensor| x.sin().sin()).call(a[0].clone())]));
    add("grad_inside", Box::new(|a| vec![grad(|x: Tensor| (x.sin() * &x).sum()).trace_tree(&a[0])]));
    add(
        "nested_vmap",
        Box::new(|a| {
            let w = a[1].clone();
            vec![vmap(move |r: Tensor| r * &w, &[Some(0)], &[Some(0)]).trace(a[0].clone())]
        }),
    );
    add("clamp_scalar_bounds", Box::new(|a| vec![a[0].clamp(0.0, 1.0)]));
    add("clamp_unbatched_bound", Box::new(|a| vec![a[0].clamp(&a[1], 1.0)]));
    add(
        "sort_split_top_k",
        Box::new(|a| {
            let mut outs = vec![a[0].sort(0)];
            outs.extend(a[0].split(Sections::Count(2), 1));
            let (v, i) = a[0].top_k(2);
            outs.extend([v, i]);
            outs
        }),
    );
    add("relu_custom_jvp", Box::new(|a| vec![nn::relu(&a[0])]));
    add(
        "cond_unbatched_predicate",
        Box::new(|a| {
            let y = a[2].clone();
            vec![lax::cond(&a[0], |x: Tensor| x.sin() * &y, |x: Tensor| x.cos(), a[1].clone())]
        }),
    );
    add(
        "scan_carry_becomes_batched",
        Box::new(|a| {
            let (c, ys) = scan(|c: Tensor, x: Tensor| (&c * &x + 1.0, c.sin()), a[0].clone(), a[1].clone());
            vec![c, ys]
        }),
    );
    add("random_uniform_per_key", Box::new(|a| vec![random::uniform(&a[0], &[3], DType::F32, 0.0, 1.0)]));
    add("random_fold_in_batched_data", Box::new(|a| vec![random::fold_in(&a[0], &a[1])]));
    add(
        "dynamic_slice_batched_index",
        Box::new(|a| vec![lax::dynamic_slice(&a[0], &[(&a[1]).into(), 0.into()], &[2, 3])]),
    );
    add(
        "dynamic_slice_batched_operand",
        Box::new(|a| vec![lax::dynamic_slice(&a[0], &[(&a[1]).into(), 1.into()], &[2, 2])]),
    );
    add(
        "dynamic_slice_both_batched",
        Box::new(|a| vec![lax::dynamic_slice(&a[0], &[(&a[1]).into(), (&a[2]).into()], &[2, 2])]),
    );
    let dus: fn(&[Tensor]) -> Vec<Tensor> = |a| vec![a[0].dynamic_update_slice(&a[1], &[(&a[2]).into(), 0.into()])];
    add("dynamic_update_slice_batched_operand", Box::new(dus));
    add("dynamic_update_slice_batched_update", Box::new(dus));
    add("dynamic_update_slice_batched_index", Box::new(dus));
    add("gather_batched_indices", Box::new(|a| vec![a[0].index_array(&a[1])]));
    add("gather_batched_operand", Box::new(|a| vec![a[0].index_array(&a[1])]));
    add("take_both_batched", Box::new(|a| vec![a[0].take(&a[1], Some(1))]));
    add("take_along_axis_both_batched", Box::new(|a| vec![a[0].take_along_axis(&a[1], 1)]));
    add("scatter_add_batched_operand", Box::new(|a| vec![a[0].at(&a[1]).add(&a[2])]));
    add("scatter_set_batched_indices", Box::new(|a| vec![a[0].at(&a[1]).set(&a[2])]));
    add("scatter_add_all_batched", Box::new(|a| vec![a[0].at(&a[1]).add(&a[2])]));
    add(
        "cond_batched_predicate",
        Box::new(|a| {
            let y = a[2].clone();
            vec![lax::cond(&a[0], |x: Tensor| x.sin() * &y, |x: Tensor| x.cos(), a[1].clone())]
        }),
    );
    add(
        "cond_batched_predicate_scalar",
        Box::new(|a| vec![lax::cond(&a[0].gt(0.0), |s: Tensor| s * 2.0, |s: Tensor| s + 1.0, a[1].clone())]),
    );
    add(
        "while_batched_carry",
        Box::new(|a| {
            let (n, x) = (a[0].clone(), a[1].clone());
            let (i, c) = lax::while_loop(
                |(i, _): (Tensor, Tensor)| i.lt(&n),
                |(i, c): (Tensor, Tensor)| (i + 1, c * &x),
                (numpy::int32(0), a[2].clone()),
            );
            vec![i, c]
        }),
    );
    add(
        "fori_loop_batched_const",
        Box::new(|a| {
            let x = a[0].clone();
            vec![lax::fori_loop(0, 3, |_, c: Tensor| c * 0.5 + &x, a[1].clone())]
        }),
    );
    let nhwc = || ConvOptions::default().dimension_numbers("NHWC", "HWIO", "NHWC");
    add(
        "conv_batched_lhs",
        Box::new(|a| vec![lax::conv_general_dilated(&a[0], &a[1], &[1], Padding::Same, ConvOptions::default())]),
    );
    add(
        "conv_both_batched_nhwc",
        Box::new(move |a| vec![lax::conv_general_dilated(&a[0], &a[1], &[1, 1], Padding::Valid, nhwc())]),
    );
    add(
        "conv_batched_rhs_depthwise",
        Box::new(move |a| {
            let options = ConvOptions { feature_group_count: 3, ..nhwc() };
            vec![lax::conv_general_dilated(&a[0], &a[1], &[1, 1], Padding::Same, options)]
        }),
    );
    add(
        "conv_batched_lhs_batch_groups",
        Box::new(|a| {
            let options = ConvOptions { batch_group_count: 2, ..ConvOptions::default() };
            vec![lax::conv_general_dilated(&a[0], &a[1], &[1], Padding::Valid, options)]
        }),
    );
    add("reduce_window_sum_same", Box::new(|a| vec![lax::reduce_window_sum(&a[0], &[3, 3], &[2, 2], Padding::Same)]));
    add(
        "grad_of_reduce_window_max",
        Box::new(|a| {
            vec![grad(|x: Tensor| lax::reduce_window_max(&x, &[2, 2], &[1, 1], Padding::Valid).sum()).trace_tree(&a[0])]
        }),
    );
    add("pad_batched_value", Box::new(|a| vec![a[0].pad(&a[1], &[(1, 2, 1)])]));
    add("pad_both_batched", Box::new(|a| vec![a[0].pad(&a[1], &[(1, 2, 1)])]));
    add(
        "switch_batched_index",
        Box::new(|a| {
            let branches: [&dyn Fn(Tensor) -> Tensor; 3] = [&|x| x.sin(), &|x| x.cos(), &|x| x.tanh()];
            vec![lax::switch(&a[0], branches, a[1].clone())]
        }),
    );
    let doubling = |c: Tensor| lax::while_loop(|c: Tensor| c.sum().lt(10.0), |c: Tensor| c * 2.0, c);
    add("while_batched_predicate", Box::new(move |a| vec![doubling(a[0].clone())]));
    add(
        "while_batched_bound",
        Box::new(|a| {
            let (n, x) = (a[0].clone(), a[1].clone());
            let (i, c) = lax::while_loop(
                |(i, _): (Tensor, Tensor)| i.lt(&n),
                |(i, c): (Tensor, Tensor)| (i + 1, c * &x),
                (numpy::int32(0), a[1].clone()),
            );
            vec![i, c]
        }),
    );
    add(
        "while_batched_bound_unbatched_carry",
        Box::new(|a| {
            let (n, w) = (a[0].clone(), a[2].clone());
            let (i, c) = lax::while_loop(
                |(i, _): (Tensor, Tensor)| i.lt(&n),
                |(i, c): (Tensor, Tensor)| (i + 1, c * 0.5 + &w),
                (numpy::int32(0), a[1].clone()),
            );
            vec![i, c]
        }),
    );
    add(
        "while_batched_predicate_nested_vmap",
        Box::new(move |a| vec![vmap(doubling, &[Some(0)], &[Some(0)]).trace(a[0].clone())]),
    );
    add("dynamic_slice_rank0", Box::new(|a| vec![lax::dynamic_slice(&a[0], &[], &[])]));
    add("dynamic_update_slice_rank0_batched_update", Box::new(|a| vec![a[0].dynamic_update_slice(&a[1], &[])]));
    add(
        "dynamic_update_slice_rank0_batched_operand",
        Box::new(|a| vec![a[0].dynamic_update_slice(&a[1], &[]) * &a[0]]),
    );
    add(
        "jit_dynamic_slice_rank0",
        Box::new(|a| vec![remat::trace::jit(|y: Tensor| lax::dynamic_slice(&y, &[], &[]) + 1.0).call(a[0].clone())]),
    );
    add(
        "checkpoint_dynamic_slice_rank0",
        Box::new(|a| vec![checkpoint(|y: Tensor| lax::dynamic_slice(&y, &[], &[]) * 2.0).call(a[0].clone())]),
    );
    add(
        "cond_batched_predicate_constant_branches",
        Box::new(|a| {
            // One constant array both branches close over (JAX's `jnp.asarray` of one NumPy
            // array: one const, an operand of the cond).
            let c = numpy::constant(Array::F32(ndarray::arr1(&[-1.0f32, 0.0, 1.0]).into_dyn()));
            vec![lax::cond(&a[0], |x: Tensor| x * &c, |x: Tensor| x + &c, a[1].clone())]
        }),
    );
    add(
        "while_inner_batched_predicate_outer_body",
        Box::new(|a| {
            let w = a[2].clone();
            let inner = move |(m, r): (Tensor, Tensor)| {
                let w = w.clone();
                lax::while_loop(
                    move |(i, _): (Tensor, Tensor)| i.lt(&m),
                    move |(i, c): (Tensor, Tensor)| (i + 1, c * &w),
                    (numpy::int32(0), r),
                )
                .1
            };
            vec![vmap(inner, &[Some(0)], &[Some(0)]).trace((a[0].clone(), a[1].clone()))]
        }),
    );
    add("index_col_batched_indices", Box::new(|a| vec![a[0].index_with(ix![.., &a[1]])]));
    add("index_two_batched_operand", Box::new(|a| vec![a[0].index_with(ix![&a[1], 1..3, &a[2]])]));
    add("at_max_two_all_batched", Box::new(|a| vec![a[0].at_with(ix![&a[1], .., &a[2]]).max(&a[3])]));
    m
}

fn axes(case: &serde_json::Value, key: &str) -> Vec<Option<usize>> {
    case[key].as_array().unwrap().iter().map(|v| v.as_u64().map(|d| d as usize)).collect()
}

#[test]
fn every_vmap_case_prints_and_evaluates_as_jax_does() {
    let oracle =
        read_json(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../trace/tests/data/vmap_oracle.json"));
    let oracle = oracle.as_object().unwrap();
    let programs = programs();
    assert_eq!(
        oracle.keys().map(String::as_str).collect::<Vec<_>>(),
        programs.keys().copied().collect::<Vec<_>>(),
        "the oracle and the Rust twins name the same cases"
    );
    let mut failures = Vec::new();
    for (name, case) in oracle {
        let args = arrays(case, "args");
        let f = &programs[name.as_str()];
        let v = vmap(|a: Vec<Tensor>| f(&a), &axes(case, "in_axes"), &axes(case, "out_axes"));
        let traced = match make_jaxpr(|a: Vec<Tensor>| v.trace(a), &args) {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!("{name}: trace error: {e}"));
                continue;
            }
        };
        let text = traced.to_string();
        let want_text = case["jaxpr"].as_str().unwrap();
        if text != want_text {
            failures.push(format!("{name}: printed\n{text}\nJAX printed\n{want_text}"));
            continue;
        }
        for backend in [Backend::Interp, Backend::Jit] {
            let options = RunOptions { backend, nans: Nans::Propagate, ..RunOptions::default() };
            let p = Program::new(traced.jaxpr.clone(), &options).unwrap();
            let got = p.run(&args.iter().collect::<Vec<_>>()).unwrap();
            let what = format!("{name}: outputs ({backend:?})");
            if let Err(e) = check_close(&what, &got, &arrays(case, "outputs"), 1e-4, 1e-5) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), oracle.len(), failures.join("\n\n"));
}

/// `expand_dims` is a primitive of remat only (JAX's `lax.expand_dims` is a
/// `broadcast_in_dim`), so it has no JAX twin: its batched program must compute what the
/// unbatched one computes row by row.
#[test]
fn vmap_of_expand_dims_moves_the_batch_axis_to_the_front() {
    let x = Array::F32(ndarray::ArrayD::from_shape_fn(vec![3, 4], |i| (i[0] * 4 + i[1]) as f32));
    let f = |x: Tensor| x.apply(Primitive::ExpandDims { dimensions: vec![0, 2] });
    let v = vmap(f, &[Some(1)], &[Some(0)]);
    let traced = make_jaxpr(|x: Tensor| v.trace(x), &Aval::new(DType::F32, vec![3, 4])).unwrap();
    let text = traced.to_string();
    assert!(text.contains("transpose[permutation=(1, 0)]"), "{text}");
    assert!(text.contains("f32[4,1,3,1] = expand_dims[dimensions=(1, 3)]"), "{text}");
    for backend in [Backend::Interp, Backend::Jit] {
        let options = RunOptions { backend, ..RunOptions::default() };
        let out = Program::new(traced.jaxpr.clone(), &options).unwrap().run(&[&x]).unwrap();
        let Array::F32(out) = &out[0] else { panic!("f32 result") };
        assert_eq!(out.shape(), &[4, 1, 3, 1], "{backend:?}");
        // Row `j` of the batch is column `j` of `x`, with size-1 axes around it.
        let want: Vec<f32> = (0..4).flat_map(|j| (0..3).map(move |i| (i * 4 + j) as f32)).collect();
        assert_eq!(out.iter().copied().collect::<Vec<_>>(), want, "{backend:?}");
    }
}

#[test]
fn vmap_calls_at_top_level_with_the_jit_and_the_interpreter() {
    let x = Array::F32(ndarray::ArrayD::from_shape_fn(vec![3, 2], |i| (i[0] * 2 + i[1]) as f32));
    let w = Array::F32(ndarray::ArrayD::from_elem(vec![2], 0.5));
    for backend in [Backend::Interp, Backend::Jit] {
        let v = vmap(|(x, w): (Tensor, Tensor)| (&x * &w).sum(), &[Some(0), None], &[Some(0)]).backend(backend);
        let out = v.call(&(x.clone(), w.clone())).unwrap();
        let Array::F32(out) = &out[0] else { panic!("f32 result") };
        assert_eq!(out.as_slice().unwrap(), &[0.5, 2.5, 4.5], "{backend:?}");
    }
}

fn vmap_error(f: impl Fn(Tensor) -> Tensor, in_axes: &[Option<usize>], aval: Aval) -> String {
    let v = vmap(f, in_axes, &[Some(0)]);
    make_jaxpr(|x: Tensor| v.trace(x), &aval).expect_err("a vmap error").to_string()
}

#[test]
fn vmap_errors_are_located_and_say_what_is_wrong() {
    let aval = Aval::new(DType::F32, vec![4, 3]);
    let e = vmap_error(|x| x.sin(), &[Some(2)], aval.clone());
    assert!(e.contains("vmap: in_axes 2 is out of range for argument leaf 0 of type f32[4,3]"), "{e}");
    assert!(e.contains("tests/vmap.rs"), "located at the caller: {e}");
    let e = vmap_error(|x| x.sin(), &[None], aval.clone());
    assert!(e.contains("vmap must have at least one non-None value in in_axes"), "{e}");
    let v = vmap(|x: Tensor| x.sin(), &[Some(0)], &[None]);
    let e = make_jaxpr(|x: Tensor| v.trace(x), &aval).expect_err("a batched output with out_axes None").to_string();
    assert!(e.contains("output 0 is batched but its out_axes is None"), "{e}");
    let v = vmap(|(x, y): (Tensor, Tensor)| x + y, &[Some(0)], &[Some(0)]);
    let e = make_jaxpr(|(x, y): (Tensor, Tensor)| v.trace((x, y)), &(aval.clone(), Aval::new(DType::F32, vec![5, 3])))
        .expect_err("sizes that disagree")
        .to_string();
    assert!(e.contains("inconsistent sizes"), "{e}");
}

/// Forward mode through a `while` with a batched predicate (`jax.jvp(jax.vmap(f))`): the
/// tangent carries are updated by the same per-example selection as the primal ones, so
/// an example that doubled `k` times has the tangent `t * 2^k` (and `out = x * 2^k`).
#[test]
fn jvp_of_a_while_with_a_batched_predicate_stops_each_example_on_its_own() {
    let x = Array::F32(ndarray::ArrayD::from_shape_vec(vec![3, 2], vec![4.0, 1.0, 0.5, 0.25, 20.0, 1.0]).unwrap());
    let t = Array::F32(ndarray::ArrayD::from_shape_vec(vec![3, 2], vec![1.0, -1.0, 2.0, 0.5, 3.0, 1.0]).unwrap());
    let v =
        vmap(|c: Tensor| lax::while_loop(|c: Tensor| c.sum().lt(10.0), |c: Tensor| c * 2.0, c), &[Some(0)], &[Some(0)]);
    for backend in [Backend::Interp, Backend::Jit] {
        let options = RunOptions { backend, ..RunOptions::default() };
        let (outs, tangents) = remat::jvp_with(|c: Tensor| v.trace(c), &x, &t, &options).unwrap();
        let (Array::F32(out), Array::F32(dout)) = (&outs[0], &tangents[0]) else { panic!("f32 results") };
        // Rows double until their sum reaches 10: 5 -> 10 (once), 0.75 -> 12 (4 times), 21 (never).
        assert_eq!(out.as_slice().unwrap(), &[8.0, 2.0, 8.0, 4.0, 20.0, 1.0], "{backend:?}");
        assert_eq!(dout.as_slice().unwrap(), &[2.0, -2.0, 32.0, 8.0, 3.0, 1.0], "{backend:?}");
    }
}
