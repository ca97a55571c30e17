//! `batch_jaxpr` on jaxprs read from text, for the batching rules of primitives no Rust
//! function traces: `select_and_gather_add` (JAX's jvp of a max pool; remat's `jvp` runs at
//! top level only) against JAX 0.10.2's `make_jaxpr(vmap(..))` of the same program, and
//! `expand_dims` (remat's own primitive). Each batched program must also compute, example
//! by example, what the unbatched one computes.

use ndarray::{ArrayD, Axis, Dimension};
use remat_ad::batch_jaxpr;
use remat_interp::eval_jaxpr;
use remat_ir::{parse_jaxpr, Array, Jaxpr};

fn f32s(shape: &[usize], seed: usize) -> ArrayD<f32> {
    ArrayD::from_shape_fn(shape, |i| {
        let k = i.as_array_view().iter().fold(seed, |acc, &x| acc * 31 + x);
        ((k * 7919 % 101) as f32 - 50.0) / 10.0
    })
}

fn f32_of(a: &Array) -> &ArrayD<f32> {
    match a {
        Array::F32(x) => x,
        other => panic!("an f32 result, found {:?}", other.aval()),
    }
}

/// Runs `batched` on the batch and `jaxpr` on each example (`x` batched at `in_axis`,
/// the other arguments as they are); every output of `batched` is batched at axis 0.
fn check_per_example(jaxpr: &Jaxpr, batched: &Jaxpr, x: &ArrayD<f32>, in_axis: usize, rest: &[Array]) {
    let mut args = vec![Array::F32(x.clone())];
    args.extend(rest.iter().cloned());
    let outs = eval_jaxpr(batched, &[], &args).unwrap();
    for j in 0..x.shape()[in_axis] {
        let mut args = vec![Array::F32(x.index_axis(Axis(in_axis), j).to_owned())];
        args.extend(rest.iter().cloned());
        let want = eval_jaxpr(jaxpr, &[], &args).unwrap();
        for (k, (o, w)) in outs.iter().zip(&want).enumerate() {
            let got = f32_of(o).index_axis(Axis(0), j).to_owned();
            assert_eq!(&got, f32_of(w), "output {k}, example {j}");
        }
    }
}

/// `jax.make_jaxpr(lambda x, t: jax.jvp(max_pool, (x,), (t,)))` with a 2x2 window.
const JVP_OF_MAX_POOL: &str = "{ lambda ; a:f32[5,4] b:f32[5,4]. let
    c:f32[4,3] = reduce_window_max[
      base_dilation=(1, 1)
      padding=((0, 0), (0, 0))
      window_dilation=(1, 1)
      window_dimensions=(2, 2)
      window_strides=(1, 1)
    ] a
    d:f32[4,3] = select_and_gather_add[
      base_dilation=(1, 1)
      padding=((0, 0), (0, 0))
      select_prim=ge
      window_dilation=(1, 1)
      window_dimensions=(2, 2)
      window_strides=(1, 1)
    ] b a
  in (c, d) }";

/// `jax.make_jaxpr(jax.vmap(<the same>, in_axes=(1, None)))` for a batch of 4.
const VMAP_JVP_OF_MAX_POOL: &str = "{ lambda ; a:f32[5,4,4] b:f32[5,4]. let
    c:f32[4,4,3] = reduce_window_max[
      base_dilation=(1, 1, 1)
      padding=((0, 0), (0, 0), (0, 0))
      window_dilation=(1, 1, 1)
      window_dimensions=(2, 1, 2)
      window_strides=(1, 1, 1)
    ] a
    d:f32[4,5,4] = broadcast_in_dim[
      broadcast_dimensions=(np.int64(1), np.int64(2))
    ] b
    e:f32[4,5,4] = transpose[permutation=(1, 0, 2)] a
    f:f32[4,4,3] = select_and_gather_add[
      base_dilation=(1, 1, 1)
      padding=((0, 0), (0, 0), (0, 0))
      select_prim=ge
      window_dilation=(1, 1, 1)
      window_dimensions=(1, 2, 2)
      window_strides=(1, 1, 1)
    ] d e
    g:f32[4,4,3] = transpose[permutation=(1, 0, 2)] c
  in (g, f) }";

#[test]
fn select_and_gather_add_batches_as_jax_does() {
    let jaxpr = parse_jaxpr(JVP_OF_MAX_POOL, "jvp_of_max_pool").unwrap();
    let batched = batch_jaxpr(&jaxpr, 4, &[Some(1), None], &[Some(0), Some(0)]).unwrap();
    assert_eq!(batched.to_string(), VMAP_JVP_OF_MAX_POOL);
    check_per_example(&jaxpr, &batched, &f32s(&[5, 4, 4], 1), 1, &[Array::F32(f32s(&[5, 4], 2))]);
}

#[test]
fn expand_dims_batches_with_the_batch_axis_in_front() {
    let jaxpr = parse_jaxpr(
        "{ lambda ; a:f32[3,2]. let b:f32[1,3,2,1] = expand_dims[dimensions=(0, 3)] a in (b,) }",
        "expand_dims",
    )
    .unwrap();
    let batched = batch_jaxpr(&jaxpr, 4, &[Some(2)], &[Some(0)]).unwrap();
    let want = "{ lambda ; a:f32[3,2,4]. let
    b:f32[4,3,2] = transpose[permutation=(2, 0, 1)] a
    c:f32[4,1,3,2,1] = expand_dims[dimensions=(1, 4)] b
  in (c,) }";
    assert_eq!(batched.to_string(), want);
    check_per_example(&jaxpr, &batched, &f32s(&[3, 2, 4], 3), 2, &[]);
}
