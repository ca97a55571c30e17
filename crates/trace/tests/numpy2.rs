//! `remat_trace::numpy`'s integer-array indexing, scans and sorts against JAX itself: each
//! case of `tests/data/numpy2_oracle.json` (recorded by `gen_numpy2.py` from JAX 0.10.2)
//! has a Rust twin here of the same name. The twin's traced jaxpr must print as JAX's,
//! character for character, evaluate with the interpreter to JAX's outputs, and (where JAX
//! differentiates it) have JAX's gradient of its first output's sum, through remat-ad's
//! `grad`, within rel 1e-4 / abs 1e-5.

mod oracle;

use oracle::{check_oracle, p, Program};

use std::collections::BTreeMap;

use remat_ir::{Aval, DType};
use remat_trace::numpy::{self, Repeats, Sections, TakeMode};
use remat_trace::{ix, make_jaxpr, ops, Idx, Tensor, ELLIPSIS, NEW_AXIS};

/// The Rust twin of each oracle case.
fn programs() -> BTreeMap<&'static str, Program> {
    let mut m: BTreeMap<&'static str, Program> = BTreeMap::new();
    let mut add = |name: &'static str, f: Program| {
        assert!(m.insert(name, f).is_none(), "{name} twice");
    };
    add("take_axis1", p(|a| a[0].take(&a[1], Some(1))));
    add("take_axis0_2d_indices", p(|a| a[0].take(&a[1], Some(0))));
    add("take_flat", p(|a| a[0].take(&a[1], None)));
    add("take_out_of_bounds", p(|a| a[0].take(&a[1], Some(0))));
    add("take_int", p(|a| a[0].take(&a[1], None)));
    add("take_u32", p(|a| a[0].take(&a[1], None)));
    add("index_array", p(|a| a[0].index_array(&a[1])));
    add("index_array_2d", p(|a| a[0].index_array(&a[1])));
    add("take_along_axis", p(|a| a[0].take_along_axis(&a[1], 1)));
    add("take_along_axis_3d", p(|a| a[0].take_along_axis(&a[1], 1)));
    add("at_set", p(|a| a[0].at(&a[1]).set(&a[2])));
    add("at_add", p(|a| a[0].at(&a[1]).add(&a[2])));
    add("at_add_twice", p(|a| a[0].at(&a[1]).add(&a[2]).at(&a[1]).add(&a[2])));
    add("at_add_dropped", p(|a| a[0].at(&a[1]).add(&a[2])));
    add("at_set_scalar", p(|a| a[0].at(&a[1]).set(2.0)));
    add("at_get", p(|a| a[0].at(&a[1]).get()));
    add("cumsum_axis1", p(|a| a[0].cumsum(Some(1), false)));
    add("cumsum_flat", p(|a| a[0].cumsum(None, false)));
    add("cumsum_reverse", p(|a| remat_trace::lax::cumsum(&a[0], 0, true)));
    add("cumprod_axis0", p(|a| a[0].cumprod(Some(0), false)));
    add("cumprod_reverse", p(|a| remat_trace::lax::cumprod(&a[0], 1, true)));
    add("sort_axis1", p(|a| a[0].sort(1)));
    add("sort_axis0", p(|a| a[0].sort(0)));
    add("argsort", p(|a| a[0].argsort(-1)));
    add("argmax", p(|a| a[0].argmax(1)));
    add("tril", p(|a| a[0].tril(0)));
    add("tril_k", p(|a| a[0].tril(-1)));
    add("triu", p(|a| a[0].triu(0)));
    add("triu_k", p(|a| a[0].triu(2)));
    add("split_count", Box::new(|a| a[0].split(Sections::Count(2), 1)));
    add("split_indices", Box::new(|a| a[0].split(Sections::Indices(vec![1, 3]), -1)));
    add("split_rows", Box::new(|a| a[0].split(Sections::Count(3), 0)));
    add("linspace", p(|_| numpy::linspace(0.0, 1.0, 5, true)));
    add("linspace_no_endpoint", p(|_| numpy::linspace(-1.0, 2.0, 4, false)));
    add(
        "top_k",
        Box::new(|a| {
            let (values, indices) = a[0].top_k(2);
            vec![values, indices]
        }),
    );
    add("take_along_axis_idx_broadcast", p(|a| a[0].take_along_axis(&a[1], 1)));
    add("take_along_axis_x_broadcast", p(|a| a[0].take_along_axis(&a[1], 1)));
    add("take_along_axis_u8", p(|a| a[0].take_along_axis(&a[1], 0)));
    add("repeat_axis1", p(|a| a[0].repeat(2, Some(1))));
    add("repeat_axis_neg", p(|a| a[0].repeat(3, Some(-1))));
    add("repeat_flat", p(|a| a[0].repeat(3, None)));
    add("repeat_total_count", p(|a| a[0].repeat_with_total(Repeats::Count(2), Some(0), 6)));
    add("repeat_total_traced", p(|a| a[0].repeat_with_total(Repeats::Traced(a[1].clone()), Some(0), 5)));
    add("repeat_total_short", p(|a| a[0].repeat_with_total(Repeats::Traced(a[1].clone()), Some(1), 4)));
    add("repeat_total_flat", p(|a| a[0].repeat_with_total(Repeats::Count(2), None, 10)));
    add("repeat_total_single", p(|a| a[0].repeat_with_total(Repeats::Count(2), Some(0), 2)));
    add("repeat_each", p(|a| a[0].repeat_each(&[1, 2, 0], Some(0))));
    add("segment_sum", p(|a| ops::segment_sum(&a[0], &a[1], 4)));
    add("segment_sum_1d", p(|a| ops::segment_sum(&a[0], &a[1], 3)));
    add("segment_max", p(|a| ops::segment_max(&a[0], &a[1], 3)));
    add("segment_min", p(|a| ops::segment_min(&a[0], &a[1], 3)));
    add("segment_prod", p(|a| ops::segment_prod(&a[0], &a[1], 3)));
    add("segment_sum_int", p(|a| ops::segment_sum(&a[0], &a[1], 3)));
    add("slice_reversed", p(|a| a[0].index(&[Idx::slice(None, None, -1)])));
    add("slice_negative_step", p(|a| a[0].index(&[Idx::slice(None, None, -2), Idx::slice(Some(5), Some(1), -1)])));
    add("slice_negative_step_squeezed", p(|a| a[0].index(&[Idx::At(1), Idx::slice(Some(6), None, -3)])));
    add("bool_operators", p(|a| (a[0].gt(0.0) & a[1].lt(0.0)) | (a[0].gt(&a[1]) ^ a[1].gt(1.0))));
    add("index_col", p(|a| a[0].index_with(ix![.., &a[1]])));
    add("index_two_broadcast", p(|a| a[0].index_with(ix![&a[1], &a[2]])));
    add("index_separated", p(|a| a[0].index_with(ix![&a[1], .., &a[2]])));
    add("index_slice_then_array", p(|a| a[0].index_with(ix![1..3, &a[1]])));
    add("index_array_then_int", p(|a| a[0].index_with(ix![.., &a[1], 2])));
    add("index_ellipsis", p(|a| a[0].index_with(ix![ELLIPSIS, &a[1]])));
    add("index_negative_int", p(|a| a[0].index_with(ix![&a[1], -1])));
    add("index_newaxis", p(|a| a[0].index_with(ix![NEW_AXIS, .., &a[1]])));
    add("at_set_col", p(|a| a[0].at_with(ix![.., &a[1]]).set(&a[2])));
    add("at_add_two_scalar", p(|a| a[0].at_with(ix![&a[1], &a[2]]).add(2.0)));
    add("at_mul_slice", p(|a| a[0].at_with(ix![1..3, &a[1]]).mul(3.0)));
    add("at_min_rows", p(|a| a[0].at(&a[1]).min(&a[2])));
    add("at_max_separated", p(|a| a[0].at_with(ix![&a[1], .., &a[2]]).max(&a[3])));
    add("at_mul_rows", p(|a| a[0].at(&a[1]).mul(2.0)));
    add("at_get_separated", p(|a| a[0].at_with(ix![&a[1], .., &a[2]]).get()));
    add("take_clip", p(|a| a[0].take_mode(&a[1], Some(1), TakeMode::Clip)));
    add("take_wrap", p(|a| a[0].take_mode(&a[1], Some(1), TakeMode::Wrap)));
    add("take_wrap_flat", p(|a| a[0].take_mode(&a[1], None, TakeMode::Wrap)));
    add("take_clip_u8", p(|a| a[0].take_mode(&a[1], Some(0), TakeMode::Clip)));
    add("remainder_float", p(|a| numpy::remainder(&a[0], &a[1])));
    add("index_strided_array", p(|a| a[0].index_with(ix![Idx::slice(None, None, 2), &a[1]])));
    add("index_reversed_array", p(|a| a[0].index_with(ix![Idx::slice(Some(3), Some(0), -1), &a[1]])));
    add("at_add_reversed", p(|a| a[0].at_with(ix![Idx::slice(Some(4), None, -2), &a[1]]).add(&a[2])));
    add("remainder_int_scalar", p(|a| numpy::remainder(&a[0], 3)));
    add("at_subtract", p(|a| a[0].at(&a[1]).subtract(&a[2])));
    add("at_subtract_separated", p(|a| a[0].at_with(ix![&a[1], .., &a[2]]).subtract(&a[3])));
    m
}

#[test]
fn every_numpy2_case_prints_evaluates_and_differentiates_as_jax_does() {
    check_oracle("numpy2_oracle.json", &programs());
}

fn trace_error(f: impl FnOnce(Vec<Tensor>) -> Tensor, avals: Vec<Aval>) -> String {
    let e = make_jaxpr(f, &avals).map(|t| t.to_string()).expect_err("a tracing error").to_string();
    // Every error is located at the user's call, not inside the library.
    assert!(e.starts_with("crates/trace/tests/numpy2.rs:"), "{e}");
    e
}

#[test]
fn wrong_inputs_are_located_errors() {
    let aval = |d: DType, s: &[usize]| Aval::new(d, s.to_vec());
    let e = trace_error(|a| a[0].take(&a[1], Some(2)), vec![aval(DType::F32, &[3, 4]), aval(DType::I32, &[2])]);
    assert!(e.contains("take: axis 2 is out of bounds for f32[3,4], which has 2 axes"), "{e}");
    let e = trace_error(|a| a[0].take(&a[1], Some(0)), vec![aval(DType::F32, &[3, 4]), aval(DType::F32, &[2])]);
    assert!(e.contains("take: indices must be integers, found f32[2]"), "{e}");
    let e = trace_error(|a| a[0].index_array(&a[1]), vec![aval(DType::F32, &[]), aval(DType::I32, &[2])]);
    assert!(e.contains("index_array: cannot index f32[], which has no axes"), "{e}");
    let e = trace_error(|a| a[0].take_along_axis(&a[1], 0), vec![aval(DType::F32, &[3, 4]), aval(DType::I32, &[2, 3])]);
    assert!(e.contains("take_along_axis: indices i32[2,3] do not broadcast against f32[3,4] off axis 0"), "{e}");
    let e = trace_error(|a| a[0].take_along_axis(&a[1], 0), vec![aval(DType::F32, &[3, 4]), aval(DType::I32, &[2])]);
    assert!(e.contains("take_along_axis: indices i32[2] and array f32[3,4] must have the same rank"), "{e}");
    let e = trace_error(|a| ops::segment_sum(&a[0], &a[1], 3), vec![aval(DType::F32, &[5, 2]), aval(DType::I32, &[4])]);
    assert!(e.contains("segment_sum: data f32[5,2] needs a leading axis of the i32[4] segment ids' length"), "{e}");
    let e = trace_error(|a| ops::segment_max(&a[0], &a[1], 3), vec![aval(DType::F32, &[4]), aval(DType::F32, &[4])]);
    assert!(e.contains("segment_max: segment ids must be a vector of integers, found f32[4]"), "{e}");
    let e = trace_error(|a| a[0].repeat(2, Some(2)), vec![aval(DType::F32, &[3, 4])]);
    assert!(e.contains("repeat"), "{e}");
    let e = trace_error(|a| a[0].index(&[Idx::slice(None, None, 0)]), vec![aval(DType::F32, &[3])]);
    assert!(e.contains("slice step cannot be zero"), "{e}");
    let e = trace_error(
        |a| a[0].at(&a[1]).add(&a[2]),
        vec![aval(DType::F32, &[3, 4]), aval(DType::I32, &[2]), aval(DType::F32, &[3, 4])],
    );
    assert!(e.ends_with("at[i32[2]]: updates f32[3,4] do not broadcast to the rows' shape [2, 4]"), "{e}");
    let e = trace_error(|a| a[0].cumsum(Some(-3), false), vec![aval(DType::F32, &[3, 4])]);
    assert!(e.contains("cumsum: axis -3 is out of bounds"), "{e}");
    let e = trace_error(|a| a[0].sort(5), vec![aval(DType::F32, &[3, 4])]);
    assert!(e.contains("sort: axis 5 is out of bounds"), "{e}");
    let e = trace_error(|a| a[0].split(Sections::Count(3), 1)[0].clone(), vec![aval(DType::F32, &[3, 4])]);
    assert!(e.ends_with("split: axis 1 of f32[3,4] (size 4) does not split into 3 equal sections"), "{e}");
    let e = trace_error(|a| a[0].tril(0), vec![aval(DType::F32, &[4])]);
    assert!(e.contains("tril: f32[4] has fewer than 2 axes"), "{e}");
    let e = trace_error(|a| a[0].top_k(6).0, vec![aval(DType::F32, &[3, 5])]);
    assert!(e.ends_with("top_k: k = 6 is more than the last axis of f32[3,5] has"), "{e}");
    let (x, i) = (aval(DType::F32, &[3, 4]), aval(DType::I32, &[2]));
    let e = trace_error(|a| a[0].index_with(ix![.., &a[1]]), vec![x.clone(), aval(DType::F32, &[2])]);
    assert!(e.ends_with("index into f32[3,4]: index arrays must be integers, found f32[2]"), "{e}");
    let e = trace_error(|a| a[0].index_with(ix![Idx::slice(None, None, 0), &a[1]]), vec![x.clone(), i.clone()]);
    assert!(e.ends_with("index into f32[3,4]: slice step cannot be zero"), "{e}");
    let e = trace_error(|a| a[0].index_with(ix![1, 2]), vec![x.clone()]);
    assert!(e.contains("no index array of rank 1 or more"), "{e}");
    let e = trace_error(|a| a[0].index_with(ix![&a[1], 4]), vec![x.clone(), i.clone()]);
    assert!(e.ends_with("index 4 is out of bounds for axis 1 with size 4"), "{e}");
    let e = trace_error(|a| a[0].index_with(ix![&a[1], &a[2]]), vec![x.clone(), i.clone(), aval(DType::I32, &[3])]);
    assert!(e.ends_with("the index arrays of shapes [[2], [3]] do not broadcast together"), "{e}");
    let e = trace_error(|a| a[0].at_with(ix![.., &a[1]]).set(&a[2]), vec![x.clone(), i, aval(DType::F32, &[3])]);
    assert!(e.ends_with("at[...]: updates f32[3] do not broadcast to [3, 2]"), "{e}");
}
