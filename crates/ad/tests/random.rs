//! PRNG primitives under autodiff, as JAX 0.10.2 treats them: keys and random bits have no
//! tangents (`ad.defjvp_zero`, float0), so they are known values of the forward pass, and
//! only what the float computation needs from them is saved.

mod common;

use common::vjp_values;
use remat_ad::{grad, jvp};
use remat_interp::eval_jaxpr;
use remat_ir::{parse_jaxpr, Array};
use remat_testkit::check_close;

/// `jax.make_jaxpr` of `sum(x * (random_bits(split(fold_in(wrap(raw), 3), 2), 32, (4,)) <
/// 2**31))`: a dropout-like mask from a raw key.
const MASKED: &str = "{ lambda ; a:f32[2,4] b:u32[2]. let
    c:key<fry>[] = random_wrap[impl=fry] b
    d:key<fry>[] = random_fold_in c 3:u32[]
    e:key<fry>[2] = random_split[shape=(2,)] d
    f:u32[2,4] = random_bits[bit_width=32 shape=(4,)] e
    g:bool[2,4] = lt f 2147483648:u32[]
    h:f32[2,4] = convert_element_type[new_dtype=float32 weak_type=False] g
    i:f32[2,4] = mul a h
    j:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] i
  in (j,) }";

fn args() -> Vec<Array> {
    let x = Array::F32(ndarray::Array::from_shape_fn((2, 4), |(i, j)| (4 * i + j) as f32).into_dyn());
    let raw = Array::U32(ndarray::arr1(&[0u32, 42]).into_dyn());
    vec![x, raw]
}

#[test]
fn random_values_have_zero_tangents() {
    let jaxpr = parse_jaxpr(MASKED, "masked.jaxpr").unwrap();
    let jv = jvp(&jaxpr).unwrap();
    assert_eq!(jv.out_nonzeros, [true]);
    // No equation of the tangent computation reads a key: the random equations appear
    // once each, as primal equations.
    let text = remat_ir::pp_jaxpr(&jv.jaxpr);
    for prim in ["random_wrap", "random_fold_in", "random_split", "random_bits"] {
        assert_eq!(text.matches(&format!(" {prim}")).count(), 1, "{prim} in\n{text}");
    }
}

#[test]
fn gradients_and_residuals_match_jax() {
    let jaxpr = parse_jaxpr(MASKED, "masked.jaxpr").unwrap();
    let v = remat_ad::vjp(&jaxpr, &[]).unwrap();
    // JAX's print_saved_residuals: `f32[2,4] output of convert_element_type`, nothing of
    // the keys or bits.
    let saved: Vec<String> =
        v.residuals.iter().map(|r| format!("{} {} of {}", r.aval, r.kind.kind_name(), r.kind.what())).collect();
    assert_eq!(saved, ["f32[2,4] output of convert_element_type"]);
    let one = Array::F32(ndarray::arr0(1.0f32).into_dyn());
    let (outs, grads) = vjp_values(&v, &args(), &[one]).unwrap();
    // jax.grad(f)(x, raw) and f(x, raw), printed by JAX.
    let mask =
        Array::F32(ndarray::arr1(&[1.0f32, 1., 1., 0., 0., 0., 1., 1.]).into_shape_with_order(vec![2, 4]).unwrap());
    check_close("grad", &grads[..1], std::slice::from_ref(&mask), 0.0, 0.0).unwrap();
    check_close("value", &outs, &[Array::F32(ndarray::arr0(16.0f32).into_dyn())], 0.0, 0.0).unwrap();
    let g = grad(&jaxpr, &[0]).unwrap();
    check_close("grad", &eval_jaxpr(&g, &[], &args()).unwrap(), &[mask], 0.0, 0.0).unwrap();
}
