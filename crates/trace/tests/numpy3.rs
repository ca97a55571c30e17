//! `remat_trace::numpy`'s `pad` modes, `var`/`std` with `ddof`, `round` with `decimals`,
//! descending and flattened sorts, batched `tril`/`triu`, `linspace` edge cases,
//! `array_split` and `repeat` of a scalar against JAX itself: each case of
//! `tests/data/numpy3_oracle.json` (recorded by `gen_numpy3.py` from JAX 0.10.2) has a Rust
//! twin here of the same name. The twin's traced jaxpr must print as JAX's, character for
//! character, evaluate with the interpreter to JAX's outputs, and (where JAX differentiates
//! it) have JAX's gradient of its first output's sum, through remat-ad's `grad`, within
//! rel 1e-4 / abs 1e-5.

mod oracle;

use oracle::{check_oracle, p, Program};

use std::collections::BTreeMap;

use remat_ir::{Aval, DType};
use remat_trace::numpy::{self, PadMode};
use remat_trace::{make_jaxpr, Tensor};

/// The Rust twin of each oracle case.
fn programs() -> BTreeMap<&'static str, Program> {
    let mut m: BTreeMap<&'static str, Program> = BTreeMap::new();
    let mut add = |name: &'static str, f: Program| {
        assert!(m.insert(name, f).is_none(), "{name} twice");
    };
    use PadMode::*;
    add("pad_constant_default", p(|a| numpy::pad(&a[0], &[(1, 2), (2, 1)], Constant(0.into()))));
    add("pad_constant_scalar", p(|a| numpy::pad(&a[0], &[(0, 2), (1, 0)], Constant(1.5.into()))));
    add(
        "pad_constant_per_axis",
        p(|a| numpy::pad(&a[0], &[(1, 2), (0, 1)], ConstantPerAxis(vec![(1.0, 2.0), (3.0, 4.0)]))),
    );
    add("pad_constant_int_one_width", p(|a| numpy::pad(&a[0], &[(1, 1)], Constant(0.into()))));
    add("pad_constant_traced", p(|a| numpy::pad(&a[0], &[(1, 0), (0, 2)], Constant((&a[1]).into()))));
    add("pad_constant_one_pair_int", p(|a| numpy::pad(&a[0], &[(1, 1), (0, 1)], ConstantPerAxis(vec![(1.0, 2.0)]))));
    add("pad_constant_one_pair_1d", p(|a| numpy::pad(&a[0], &[(2, 1)], ConstantPerAxis(vec![(-1.0, 5.0)]))));
    add("pad_scalar", p(|a| numpy::pad(&a[0], &[(2, 2)], Constant(0.into()))));
    add("pad_symmetric_size_one", p(|a| numpy::pad(&a[0], &[(1, 2)], Symmetric)));
    add("pad_reflect", p(|a| numpy::pad(&a[0], &[(1, 2), (2, 1)], Reflect)));
    add("pad_reflect_wide", p(|a| numpy::pad(&a[0], &[(5, 0), (0, 7)], Reflect)));
    add("pad_reflect_size_one", p(|a| numpy::pad(&a[0], &[(2, 1), (1, 1)], Reflect)));
    add("pad_symmetric", p(|a| numpy::pad(&a[0], &[(1, 2), (2, 1)], Symmetric)));
    add("pad_symmetric_wide", p(|a| numpy::pad(&a[0], &[(0, 4), (5, 0)], Symmetric)));
    add("pad_edge", p(|a| numpy::pad(&a[0], &[(0, 2), (1, 0)], Edge)));
    add("pad_edge_3d", p(|a| numpy::pad(&a[0], &[(1, 1), (0, 0), (2, 0)], Edge)));
    add("pad_wrap", p(|a| numpy::pad(&a[0], &[(1, 2), (2, 1)], Wrap)));
    add("pad_wrap_wide", p(|a| numpy::pad(&a[0], &[(0, 0), (6, 9)], Wrap)));
    add("pad_maximum", p(|a| numpy::pad(&a[0], &[(1, 2), (2, 1)], Maximum)));
    add("pad_minimum_int", p(|a| numpy::pad(&a[0], &[(1, 0)], Minimum)));
    add("pad_mean", p(|a| numpy::pad(&a[0], &[(1, 2), (0, 1)], Mean)));
    add(
        "pad_twice",
        p(|a| {
            let inner = numpy::pad(&a[0], &[(1, 1), (0, 0)], Reflect);
            numpy::pad(&inner, &[(1, 1), (0, 0)], Edge) + numpy::pad(&a[0], &[(2, 2), (0, 0)], Reflect)
        }),
    );
    add("var_ddof_keepdims", p(|a| a[0].var_with(Some(&[1]), 1, true)));
    add("var_all", p(|a| a[0].var_with(None, 0, false)));
    add("var_axis0", p(|a| a[0].var_with(Some(&[0]), 2, false)));
    add("var_ddof_too_large", p(|a| a[0].var_with(Some(&[0]), 3, false)));
    add("std_ddof", p(|a| a[0].std_with(Some(&[0, 1]), 1, false)));
    add("std_keepdims", p(|a| a[0].std_with(Some(&[-1]), 0, true)));
    add("std_all", p(|a| a[0].std_with(None, 0, false)));
    add("round_decimals", p(|a| numpy::round_decimals(&a[0], 2)));
    add("round_negative_decimals", p(|a| numpy::round_decimals(&a[0], -1)));
    add("round_int", p(|a| numpy::round_decimals(&a[0], 1)));
    add("round_grad", p(|a| numpy::round_decimals(&a[0], 1) * &a[0]));
    add("sort_flat", p(|a| a[0].sort_with(None, false)));
    add("sort_descending", p(|a| a[0].sort_with(Some(0), true)));
    add("sort_flat_descending", p(|a| a[0].sort_with(None, true)));
    add("argsort_descending", p(|a| a[0].argsort_with(Some(1), true)));
    add("argsort_flat", p(|a| a[0].argsort_with(None, false)));
    add("argsort_descending_ties", p(|a| a[0].argsort_with(Some(-1), true)));
    add("tril_batched", p(|a| a[0].tril(1)));
    add("triu_batched", p(|a| a[0].triu(-1)));
    add("triu_batched_int", p(|a| a[0].triu(0)));
    add("linspace_one", p(|_| numpy::linspace(0.0, 1.0, 1, true)));
    add("linspace_one_no_endpoint", p(|_| numpy::linspace(2.0, 1.0, 1, false)));
    add("linspace_zero", p(|_| numpy::linspace(0.0, 1.0, 0, true)));
    add("linspace_int", p(|_| numpy::linspace_dtype(0.0, 10.0, 4, true, DType::I32)));
    add("linspace_int_no_endpoint", p(|_| numpy::linspace_dtype(-3.0, 4.0, 5, false, DType::I32)));
    add("linspace_int_one", p(|_| numpy::linspace_dtype(-2.0, 5.0, 1, false, DType::I32)));
    add("linspace_int_zero", p(|_| numpy::linspace_dtype(0.0, 1.0, 0, true, DType::I32)));
    add("array_split_uneven", Box::new(|a| a[0].array_split(3, 1)));
    add("array_split_rows", Box::new(|a| a[0].array_split(3, 0)));
    add("array_split_more_than_size", Box::new(|a| a[0].array_split(4, -1)));
    add("repeat_scalar", p(|a| a[0].repeat(3, None)));
    add("repeat_scalar_axis0", p(|a| a[0].repeat(4, Some(0))));
    add("repeat_scalar_zero", p(|a| a[0].repeat(0, Some(0))));
    add("bfloat16_scalar", p(|a| &a[0] * numpy::bfloat16(2.5) + numpy::bfloat16(1.0)));
    add("float16_scalar", p(|a| &a[0] * numpy::float16(2.5) - numpy::float16(0.125)));
    add("int8_scalar", p(|a| &a[0] * numpy::int8(3) + numpy::int8(-2)));
    add("int16_scalar", p(|a| &a[0] - numpy::int16(300)));
    add("uint8_scalar", p(|a| &a[0] + numpy::uint8(7)));
    add("uint32_scalar", p(|a| &a[0] * numpy::uint32(3)));
    add("bool_scalar", p(|a| &a[0] & numpy::bool_(true)));
    add("prod_axes_keepdims", p(|a| a[0].prod_axes(&[1, 0], true)));
    add("prod_all", p(|a| a[0].prod()));
    add("prod_bool", p(|a| a[0].prod_axes(&[0], false)));
    add("stack_promoted", p(|a| numpy::stack(&[&a[0], &a[1], &(&a[0] * 2.0)], -1)));
    add("unstack_axis1", Box::new(|a| numpy::unstack(&a[0], 1)));
    add("tile_fewer_reps", p(|a| numpy::tile(&a[0], &[2])));
    add("tile_more_reps", p(|a| numpy::tile(&a[0], &[2, 1, 3])));
    add("all_any", Box::new(|a| vec![a[0].gt(0.0).all_axes(&[1], false), a[0].any_axes(&[0], true), a[0].all()]));
    m
}

#[test]
fn every_numpy3_case_prints_evaluates_and_differentiates_as_jax_does() {
    check_oracle("numpy3_oracle.json", &programs());
}

fn trace_error(f: impl FnOnce(Vec<Tensor>) -> Tensor, avals: Vec<Aval>) -> String {
    let e = make_jaxpr(f, &avals).map(|t| t.to_string()).expect_err("a tracing error").to_string();
    // Every error is located at the user's call, not inside the library.
    assert!(e.starts_with("crates/trace/tests/numpy3.rs:"), "{e}");
    e
}

#[test]
fn wrong_inputs_are_located_errors() {
    let aval = |d: DType, s: &[usize]| Aval::new(d, s.to_vec());
    let f34 = || vec![aval(DType::F32, &[3, 4])];
    let e = trace_error(|a| numpy::pad(&a[0], &[(1, 1), (0, 0), (2, 2)], PadMode::Edge), f34());
    assert!(e.ends_with("pad: 3 (before, after) widths for f32[3,4], which has 2 axes"), "{e}");
    let e = trace_error(|a| numpy::pad(&a[0], &[(1, 1), (0, 0)], PadMode::Reflect), vec![aval(DType::F32, &[0, 4])]);
    assert!(e.ends_with("pad: cannot apply 'reflect' padding to empty axis 0 of f32[0,4]"), "{e}");
    let e = trace_error(|a| numpy::pad(&a[0], &[(1, 1)], PadMode::ConstantPerAxis(vec![(1.0, 2.0); 3])), f34());
    assert!(e.ends_with("pad: 3 (before, after) constant values for f32[3,4], which has 2 axes"), "{e}");
    let e = trace_error(|a| numpy::pad(&a[0], &[(1, 1)], PadMode::Mean), vec![aval(DType::I32, &[3])]);
    assert!(e.ends_with("pad: mode 'mean' of i32[3] is not supported (floats only)"), "{e}");
    let e = trace_error(|a| a[0].var_with(Some(&[2]), 1, false), f34());
    assert!(e.ends_with("var: axis 2 is out of bounds for f32[3,4], which has 2 axes"), "{e}");
    let e = trace_error(|a| a[0].std_with(Some(&[0, -2]), 0, true), f34());
    assert!(e.ends_with("std: axis -2 is repeated in [0, -2]"), "{e}");
    let e = trace_error(|a| a[0].var_with(None, 0, false), vec![aval(DType::I32, &[3])]);
    assert!(e.ends_with("var: i32[3] is not a float tensor (not supported yet)"), "{e}");
    let e = trace_error(|a| numpy::round_decimals(&a[0], -1), vec![aval(DType::I32, &[3])]);
    assert!(e.ends_with("round: decimals = -1 < 0 of the integer i32[3] is not implemented (as in JAX)"), "{e}");
    let e = trace_error(|a| a[0].argsort_with(Some(2), true), f34());
    assert!(e.ends_with("argsort: axis 2 is out of bounds for f32[3,4], which has 2 axes"), "{e}");
    let e = trace_error(|a| a[0].sort_with(Some(-3), true), f34());
    assert!(e.ends_with("sort: axis -3 is out of bounds for f32[3,4], which has 2 axes"), "{e}");
    let e = trace_error(|a| a[0].tril(0), vec![aval(DType::F32, &[4])]);
    assert!(e.ends_with("tril: f32[4] has fewer than 2 axes (it needs a matrix or a stack of them)"), "{e}");
    let e = trace_error(|_| numpy::linspace_dtype(0.0, 1.0, 3, true, DType::Bool), vec![]);
    assert!(e.ends_with("linspace: dtype bool is not supported (f32 or an integer dtype)"), "{e}");
    let e = trace_error(|a| a[0].array_split(0, 0)[0].clone(), f34());
    assert!(e.ends_with("array_split: the number of sections must be positive"), "{e}");
    let e = trace_error(|a| a[0].array_split(2, 2)[0].clone(), f34());
    assert!(e.ends_with("array_split: axis 2 is out of bounds for f32[3,4], which has 2 axes"), "{e}");
    let e = trace_error(|a| a[0].repeat(2, Some(1)), vec![aval(DType::F32, &[])]);
    assert!(e.ends_with("repeat: f32[] has no axis 1 (a scalar repeats along axis 0)"), "{e}");
}
