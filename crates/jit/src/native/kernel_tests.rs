//! The runtime kernels called on plain Rust buffers, without generated code, so that Miri
//! can run them (`cargo +nightly miri test -p remat-jit --lib native::`): each native step
//! (`remat_native`: gather, the scatters, sort, `top_k`, `argmin`, the cumulative
//! reductions, the PRNG) gets its operands' and results' base addresses as the JIT's step
//! would give them, and must agree with the interpreter. Miri checks the raw views and
//! pointer arithmetic behind them for undefined behaviour; the sizes are small so that it
//! finishes in minutes.

use remat_ir::{for_each_array, parse_jaxpr, Array};
use remat_testkit::Rng;

use super::indexing::remat_native;
use crate::program::NativeDesc;

/// Runs the one equation of `text` as a native step on `args`, and checks it against the
/// interpreter bit for bit (the kernels are the interpreter's semantics, in the same order).
fn agrees(text: &str, args: &[Array]) {
    let jaxpr = parse_jaxpr(text, "kernel").expect("parses");
    assert_eq!(jaxpr.eqns.len(), 1, "one equation");
    let desc = NativeDesc {
        prim: jaxpr.eqns[0].primitive.clone(),
        in_avals: jaxpr.in_avals(),
        out_avals: jaxpr.out_avals(),
        slots: (0..jaxpr.invars.len() + jaxpr.outvars.len()).collect(),
    };
    // Operands are read-only: copies, so that a stray write would show as a difference.
    let ins: Vec<Array> = args.to_vec();
    let mut outs: Vec<Array> = desc.out_avals.iter().map(Array::zeros).collect();
    let mut bases: Vec<usize> = ins.iter().map(|a| for_each_array!(a, x => x.as_ptr() as usize)).collect();
    bases.extend(outs.iter_mut().map(|a| for_each_array!(a, x => x.as_mut_ptr() as usize)));
    remat_native(&desc, bases.as_ptr());
    assert_eq!(ins, args, "{text}: an operand changed");
    let want = remat_interp::eval_jaxpr(&jaxpr, &[], args).expect("the interpreter runs it");
    for (k, (g, w)) in outs.iter().zip(&want).enumerate() {
        let same = g.aval() == w.aval()
            && g.to_f64_vec()
                .iter()
                .zip(w.to_f64_vec())
                .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
        assert!(same, "{text}: result {k} is {g:?}, the interpreter's {w:?}");
    }
}

fn random_args(text: &str, seed: u64) -> Vec<Array> {
    let jaxpr = parse_jaxpr(text, "kernel").expect("parses");
    let mut rng = Rng(seed);
    jaxpr.in_avals().iter().map(|a| rng.array(a)).collect()
}

fn i32s(shape: &[usize], xs: &[i32]) -> Array {
    Array::I32(ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(shape), xs.to_vec()).expect("shape"))
}

#[test]
fn gather_whole_rows_and_elements_clamped_and_filled() {
    let rows = "{ lambda ; a:f32[5,3] b:i32[4,1]. let
    c:f32[4,3] = gather[dimension_numbers=GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,), operand_batching_dims=(), start_indices_batching_dims=()) fill_value=None indices_are_sorted=False mode=GatherScatterMode.CLIP slice_sizes=(1, 3) unique_indices=False] a b
  in (c,) }";
    let a = random_args(rows, 1).remove(0);
    agrees(rows, &[a.clone(), i32s(&[4, 1], &[0, 4, -3, 9])]);
    let fill = rows.replace("CLIP", "FILL_OR_DROP");
    agrees(&fill, &[a, i32s(&[4, 1], &[0, 4, -3, 9])]);
    let elems = "{ lambda ; a:i32[4,6] b:i32[3,2]. let
    c:i32[3] = gather[dimension_numbers=GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0, 1), start_index_map=(0, 1), operand_batching_dims=(), start_indices_batching_dims=()) fill_value=None indices_are_sorted=False mode=GatherScatterMode.FILL_OR_DROP slice_sizes=(1, 1) unique_indices=False] a b
  in (c,) }";
    let a = random_args(elems, 2).remove(0);
    agrees(elems, &[a, i32s(&[3, 2], &[1, 5, 3, 6, -1, 0])]);
}

#[test]
fn scatters_add_and_replace_clipped_and_dropped() {
    for (prim, mode) in [("scatter-add", "CLIP"), ("scatter-add", "FILL_OR_DROP"), ("scatter", "FILL_OR_DROP")] {
        let text = format!(
            "{{ lambda ; a:f32[5,3] b:i32[4,1] c:f32[4,3]. let
    d:f32[5,3] = {prim}[dimension_numbers=ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), scatter_indices_batching_dims=()) indices_are_sorted=False mode=GatherScatterMode.{mode} unique_indices=False update_consts=() update_jaxpr=None] a b c
  in (d,) }}"
        );
        let mut args = random_args(&text, 3);
        args[1] = i32s(&[4, 1], &[2, 0, 7, 2]);
        agrees(&text, &args);
    }
}

#[test]
fn sorts_top_k_argmin_and_cumulative_reductions() {
    let texts = [
        "{ lambda ; a:f32[3,5] b:i32[3,5]. let
    c:f32[3,5] d:i32[3,5] = sort[dimension=1 is_stable=True num_keys=1] a b
  in (c, d) }",
        "{ lambda ; a:f32[2,6]. let b:f32[2,3] c:i32[2,3] = top_k[axis=1 k=3] a in (b, c) }",
        "{ lambda ; a:f64[4,3]. let b:i32[3] = argmin[axes=(0,) index_dtype=int32] a in (b,) }",
        "{ lambda ; a:f32[3,4]. let b:f32[3,4] = cumsum[axis=1 reverse=False] a in (b,) }",
        "{ lambda ; a:f32[3,4]. let b:f32[3,4] = cumlogsumexp[axis=0 reverse=True] a in (b,) }",
        "{ lambda ; a:i32[5]. let b:i32[5] = cummax[axis=0 reverse=False] a in (b,) }",
    ];
    for (k, text) in texts.iter().enumerate() {
        agrees(text, &random_args(text, 10 + k as u64));
    }
}

#[test]
fn prng_steps() {
    let texts = [
        "{ lambda ; a:i32[]. let b:key<fry>[] = random_seed[impl=fry] a in (b,) }",
        "{ lambda ; a:key<fry>[]. let b:key<fry>[3] = random_split[shape=(3,)] a in (b,) }",
        "{ lambda ; a:key<fry>[] b:i32[]. let c:key<fry>[] = random_fold_in a b in (c,) }",
        "{ lambda ; a:key<fry>[]. let b:u32[2,3] = random_bits[bit_width=32 shape=(2, 3)] a in (b,) }",
        "{ lambda ; a:key<fry>[2]. let b:u32[2,2] = random_unwrap a in (b,) }",
    ];
    for (k, text) in texts.iter().enumerate() {
        agrees(text, &random_args(text, 20 + k as u64));
    }
}
