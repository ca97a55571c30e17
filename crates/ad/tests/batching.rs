//! `batch_jaxpr` on jaxprs read from text, for the batching rules of primitives no Rust
//! function traces: `select_and_gather_add` (JAX's jvp of a max pool; remat's `jvp` runs at
//! top level only) against JAX 0.10.2's `make_jaxpr(vmap(..))` of the same program, and
//! `expand_dims` (remat's own primitive), and a `cond` with a batched index whose branches
//! hold constants (which a traced program never has). Each batched program must also
//! compute, example by example, what the unbatched one computes.

use ndarray::{ArrayD, Axis, Dimension};
use remat_ad::batch_jaxpr;
use remat_interp::eval_jaxpr;
use std::sync::Arc;

use remat_ir::{parse_jaxpr, Array, ClosedJaxpr, Jaxpr};

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
    let closed = ClosedJaxpr::new(Arc::new(jaxpr.clone()));
    let batched = batch_jaxpr(&closed, 4, &[Some(1), None], &[Some(0), Some(0)]).unwrap().jaxpr;
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
    let batched = batch_jaxpr(&ClosedJaxpr::new(Arc::new(jaxpr.clone())), 4, &[Some(2)], &[Some(0)]).unwrap().jaxpr;
    let want = "{ lambda ; a:f32[3,2,4]. let
    b:f32[4,3,2] = transpose[permutation=(2, 0, 1)] a
    c:f32[4,1,3,2,1] = expand_dims[dimensions=(1, 4)] b
  in (c,) }";
    assert_eq!(batched.to_string(), want);
    check_per_example(&jaxpr, &batched, &f32s(&[3, 2, 4], 3), 2, &[]);
}

/// A `cond` whose index is batched and whose branches close over constant arrays (a
/// `ClosedJaxpr` with consts, as a transformation may leave them): every branch runs on
/// every example with its constants as constants of the batched program, and each
/// example gets its own branch's result.
#[test]
fn cond_with_a_batched_index_keeps_its_branches_constants() {
    let mut top = parse_jaxpr(
        "{ lambda ; a:i32[] b:f32[3]. let
    c:f32[3] = cond[
      branches=(
        { lambda ; d:f32[3]. let  in (d,) }
        { lambda ; e:f32[3]. let  in (e,) }
      )
    ] a b
  in (c,) }",
        "cond",
    )
    .unwrap();
    let branch = |op: &str, k: f32| {
        let text = format!("{{ lambda a:f32[3]; b:f32[3]. let c:f32[3] = {op} b a in (c,) }}");
        let consts = vec![Array::F32(ArrayD::from_shape_vec(vec![3], vec![k, 2.0 * k, -k]).unwrap())];
        ClosedJaxpr { jaxpr: Arc::new(parse_jaxpr(&text, "branch").unwrap()), consts }
    };
    top.eqns[0].primitive =
        remat_ir::Primitive::Cond { branches: vec![branch("mul", 3.0), branch("add", 0.5)], branches_platforms: None };
    remat_ir::verify(&top).unwrap();
    let batched = batch_jaxpr(&ClosedJaxpr::new(Arc::new(top.clone())), 4, &[Some(0), Some(0)], &[Some(0)]).unwrap();
    assert_eq!(batched.consts.len(), 2, "both branches' constants: {}", batched.jaxpr);
    let index = ArrayD::from_shape_vec(vec![4], vec![1, 0, 0, 1]).unwrap();
    let x = f32s(&[4, 3], 4);
    let outs =
        eval_jaxpr(&batched.jaxpr, &batched.consts, &[Array::I32(index.clone()), Array::F32(x.clone())]).unwrap();
    for j in 0..4 {
        let args =
            [Array::I32(index.index_axis(Axis(0), j).to_owned()), Array::F32(x.index_axis(Axis(0), j).to_owned())];
        let want = eval_jaxpr(&top, &[], &args).unwrap();
        assert_eq!(&f32_of(&outs[0]).index_axis(Axis(0), j).to_owned(), f32_of(&want[0]), "example {j}");
    }
}

/// Complex values and `fft` under `vmap`: `rfft`, `irfft` and a 2-d `fft` keep the batch
/// axis in front of the transformed ones; `complex`, `real`, `imag`, `conj` and `abs` are
/// elementwise. The batched program computes each example's results bit for bit.
#[test]
fn complex_values_and_ffts_batch_example_by_example() {
    let jaxpr = parse_jaxpr(
        "{ lambda ; a:f32[3,8]. let
    b:c64[3,5] = fft[fft_lengths=(8,) fft_type=2] a
    c:c64[3,5] = conj[input_dtype=complex64] b
    d:c64[3,5] = mul b c
    e:f32[3,8] = fft[fft_lengths=(8,) fft_type=3] d
    f:f32[3,5] = imag b
    g:f32[3,5] = real b
    h:c64[3,5] = complex g f
    i:c64[3,5] = fft[fft_lengths=(3, 5) fft_type=0] h
    j:f32[3,5] = abs i
  in (e, j) }",
        "complex_vmap",
    )
    .unwrap();
    let closed = ClosedJaxpr::new(Arc::new(jaxpr.clone()));
    let batched = batch_jaxpr(&closed, 4, &[Some(1)], &[Some(0), Some(0)]).unwrap().jaxpr;
    check_per_example(&jaxpr, &batched, &f32s(&[3, 4, 8], 5), 1, &[]);
}

/// Runs `batched` on `args` and `jaxpr` on each example (each argument with an `in_dims`
/// axis indexed there, the others as they are); every output of `batched` is batched at
/// axis 0 and must equal the example's output bit for bit.
fn check_examples(jaxpr: &Jaxpr, batched: &Jaxpr, args: &[ArrayD<f32>], in_dims: &[Option<usize>]) {
    let all: Vec<Array> = args.iter().map(|a| Array::F32(a.clone())).collect();
    let outs = eval_jaxpr(batched, &[], &all).unwrap();
    let size = args.iter().zip(in_dims).find_map(|(a, d)| d.map(|d| a.shape()[d])).unwrap();
    for j in 0..size {
        let example: Vec<Array> = args
            .iter()
            .zip(in_dims)
            .map(|(a, d)| Array::F32(d.map_or(a.clone(), |d| a.index_axis(Axis(d), j).to_owned())))
            .collect();
        let want = eval_jaxpr(jaxpr, &[], &example).unwrap();
        for (k, (o, w)) in outs.iter().zip(&want).enumerate() {
            assert_eq!(&f32_of(o).index_axis(Axis(0), j).to_owned(), f32_of(w), "output {k}, example {j}");
        }
    }
}

/// A batch of well-conditioned lower-triangular (and symmetric positive definite) matrices.
fn spd(shape: &[usize], seed: usize) -> ArrayD<f32> {
    let n = shape[shape.len() - 1];
    let mut a = f32s(shape, seed).mapv(|x| x / 50.0);
    for (idx, x) in a.indexed_iter_mut() {
        let s = idx.slice();
        let (i, j) = (s[s.len() - 2], s[s.len() - 1]);
        if i == j {
            *x += n as f32 + 1.0;
        }
    }
    a
}

/// `lax.linalg.triangular_solve(a, b, left_side=True, lower=True)`, batched two ways below.
const LEFT_LOWER_SOLVE: &str = "{ lambda ; a:f32[3,3] b:f32[3,2]. let
    c:f32[3,2] = triangular_solve[
      conjugate_a=False
      left_side=True
      lower=True
      transpose_a=False
      unit_diagonal=False
    ] a b
  in (c,) }";

/// `lax.linalg.tridiagonal_solve(dl, d, du, b)`, batched two ways below.
const TRIDIAGONAL_SOLVE: &str = "{ lambda ; a:f32[3] b:f32[3] c:f32[3] d:f32[3,2]. let
    e:f32[3,2] = tridiagonal_solve[perturb_singular=False] a b c d
  in (e,) }";

/// A program, its `in_axes`, JAX's batched text and the batched arguments.
type LinalgCase = (&'static str, Vec<Option<usize>>, &'static str, Vec<ArrayD<f32>>);

/// `symmetric_product`, `cholesky`, `triangular_solve`, `tridiagonal_solve`, `householder_product` and `ormqr` under `jax.vmap`: JAX 0.10.2's `make_jaxpr(vmap(f,
/// in_axes))` texts (`jax/_src/lax/linalg.py`'s batchers: the batch axis to the front, or
/// folded into the columns or rows of one solve when only `b` is batched).
#[test]
fn linear_algebra_batches_as_jax_does() {
    let cases: [LinalgCase; 9] = [
        (
            "{ lambda ; a:f32[3,2] b:f32[3,3]. let
    c:f32[3,3] = symmetric_product[alpha=2.0 beta=0.5] a b
  in (c,) }",
            vec![Some(1), None],
            "{ lambda ; a:f32[3,4,2] b:f32[3,3]. let
    c:f32[4,3,2] = transpose[permutation=(1, 0, 2)] a
    d:f32[4,3,3] = broadcast_in_dim[
      broadcast_dimensions=(np.int64(1), np.int64(2))
    ] b
    e:f32[4,3,3] = symmetric_product[alpha=2.0 beta=0.5] c d
  in (e,) }",
            vec![f32s(&[3, 4, 2], 8), f32s(&[3, 3], 9)],
        ),
        (
            "{ lambda ; a:f32[3,3]. let
    b:f32[3,3] = cholesky a
    c:i32[3,3] = iota[dimension=0 dtype=int32 shape=(3, 3) sharding=None] 
    d:i32[3,3] = add c 0:i32[]
    e:i32[3,3] = iota[dimension=1 dtype=int32 shape=(3, 3) sharding=None] 
    f:bool[3,3] = ge d e
    g:f32[3,3] = broadcast_in_dim 0.0:f32[]
    h:f32[3,3] = select_n f g b
  in (h,) }",
            vec![Some(1)],
            "{ lambda ; a:f32[3,4,3]. let
    b:f32[4,3,3] = transpose[permutation=(1, 0, 2)] a
    c:f32[4,3,3] = cholesky b
    d:i32[3,3] = iota[dimension=0 dtype=int32 shape=(3, 3) sharding=None] 
    e:i32[3,3] = add d 0:i32[]
    f:i32[3,3] = iota[dimension=1 dtype=int32 shape=(3, 3) sharding=None] 
    g:bool[3,3] = ge e f
    h:f32[3,3] = broadcast_in_dim 0.0:f32[]
    i:bool[4,3,3] = broadcast_in_dim[
      broadcast_dimensions=(np.int64(1), np.int64(2))
    ] g
    j:f32[4,3,3] = broadcast_in_dim[
      broadcast_dimensions=(np.int64(1), np.int64(2))
    ] h
    k:f32[4,3,3] = select_n i j c
  in (k,) }",
            vec![spd(&[4, 3, 3], 1).permuted_axes(vec![1, 0, 2]).as_standard_layout().to_owned()],
        ),
        (
            LEFT_LOWER_SOLVE,
            vec![None, Some(2)],
            "{ lambda ; a:f32[3,3] b:f32[3,2,4]. let
    c:f32[3,8] = reshape[dimensions=None new_sizes=(3, 8) sharding=None] b
    d:f32[3,8] = triangular_solve[
      conjugate_a=False
      left_side=True
      lower=True
      transpose_a=False
      unit_diagonal=False
    ] a c
    e:f32[3,2,4] = reshape[dimensions=None new_sizes=(3, 2, 4) sharding=None] d
    f:f32[4,3,2] = transpose[permutation=(2, 0, 1)] e
  in (f,) }",
            vec![spd(&[3, 3], 2), f32s(&[3, 2, 4], 3)],
        ),
        (
            "{ lambda ; a:f32[3,3] b:f32[2,3]. let
    c:f32[2,3] = triangular_solve[
      conjugate_a=False
      left_side=False
      lower=False
      transpose_a=True
      unit_diagonal=False
    ] a b
  in (c,) }",
            vec![None, Some(0)],
            "{ lambda ; a:f32[3,3] b:f32[4,2,3]. let
    c:f32[2,4,3] = transpose[permutation=(1, 0, 2)] b
    d:f32[8,3] = reshape[dimensions=None new_sizes=(8, 3) sharding=None] c
    e:f32[8,3] = triangular_solve[
      conjugate_a=False
      left_side=False
      lower=False
      transpose_a=True
      unit_diagonal=False
    ] a d
    f:f32[2,4,3] = reshape[dimensions=None new_sizes=(2, 4, 3) sharding=None] e
    g:f32[4,2,3] = transpose[permutation=(1, 0, 2)] f
  in (g,) }",
            vec![spd(&[3, 3], 4), f32s(&[4, 2, 3], 5)],
        ),
        (
            LEFT_LOWER_SOLVE,
            vec![Some(2), None],
            "{ lambda ; a:f32[3,3,4] b:f32[3,2]. let
    c:f32[4,3,3] = transpose[permutation=(2, 0, 1)] a
    d:f32[4,3,2] = broadcast_in_dim[
      broadcast_dimensions=(np.int64(1), np.int64(2))
    ] b
    e:f32[4,3,2] = triangular_solve[
      conjugate_a=False
      left_side=True
      lower=True
      transpose_a=False
      unit_diagonal=False
    ] c d
  in (e,) }",
            vec![spd(&[4, 3, 3], 6).permuted_axes(vec![1, 2, 0]).as_standard_layout().to_owned(), f32s(&[3, 2], 7)],
        ),
        (
            TRIDIAGONAL_SOLVE,
            vec![None, None, None, Some(2)],
            "{ lambda ; a:f32[3] b:f32[3] c:f32[3] d:f32[3,2,4]. let
    e:f32[3,4,2] = transpose[permutation=(0, 2, 1)] d
    f:f32[3,8] = reshape[dimensions=None new_sizes=(3, 8) sharding=None] e
    g:f32[3,8] = tridiagonal_solve[perturb_singular=False] a b c f
    h:f32[3,4,2] = reshape[dimensions=None new_sizes=(3, 4, 2) sharding=None] g
    i:f32[4,3,2] = transpose[permutation=(1, 0, 2)] h
  in (i,) }",
            vec![f32s(&[3], 14), f32s(&[3], 15).mapv(|x| x + 8.0), f32s(&[3], 16), f32s(&[3, 2, 4], 17)],
        ),
        (
            TRIDIAGONAL_SOLVE,
            vec![Some(0), None, Some(1), None],
            "{ lambda ; a:f32[4,3] b:f32[3] c:f32[3,4] d:f32[3,2]. let
    e:f32[4,3] = broadcast_in_dim[broadcast_dimensions=(np.int64(1),)] b
    f:f32[4,3] = transpose[permutation=(1, 0)] c
    g:f32[4,3,2] = broadcast_in_dim[
      broadcast_dimensions=(np.int64(1), np.int64(2))
    ] d
    h:f32[4,3,2] = tridiagonal_solve[perturb_singular=False] a e f g
  in (h,) }",
            vec![f32s(&[4, 3], 18), f32s(&[3], 19).mapv(|x| x + 8.0), f32s(&[3, 4], 20), f32s(&[3, 2], 21)],
        ),
        (
            "{ lambda ; a:f32[3,2] b:f32[2]. let
    c:f32[3,2] = householder_product a b
  in (c,) }",
            vec![Some(1), None],
            "{ lambda ; a:f32[3,4,2] b:f32[2]. let
    c:f32[4,3,2] = transpose[permutation=(1, 0, 2)] a
    d:f32[4,2] = broadcast_in_dim[broadcast_dimensions=(np.int64(1),)] b
    e:f32[4,3,2] = householder_product c d
  in (e,) }",
            vec![f32s(&[3, 4, 2], 23), f32s(&[2], 24).mapv(|x| x.abs() + 0.5)],
        ),
        (
            "{ lambda ; a:f32[3,2] b:f32[2] c:f32[5,3]. let
    d:f32[5,3] = ormqr[left=False transpose=False] a b c
  in (d,) }",
            vec![None, None, Some(0)],
            "{ lambda ; a:f32[3,2] b:f32[2] c:f32[4,5,3]. let
    d:f32[4,3,2] = broadcast_in_dim[
      broadcast_dimensions=(np.int64(1), np.int64(2))
    ] a
    e:f32[4,2] = broadcast_in_dim[broadcast_dimensions=(np.int64(1),)] b
    f:f32[4,5,3] = ormqr[left=False transpose=False] d e c
  in (f,) }",
            vec![f32s(&[3, 2], 26), f32s(&[2], 27).mapv(|x| x.abs() + 0.5), f32s(&[4, 5, 3], 28)],
        ),
    ];
    for (text, in_dims, want, args) in cases {
        let jaxpr = parse_jaxpr(text, "linalg").unwrap();
        let closed = ClosedJaxpr::new(Arc::new(jaxpr.clone()));
        let batched = batch_jaxpr(&closed, 4, &in_dims, &[Some(0)]).unwrap().jaxpr;
        assert_eq!(batched.to_string(), want, "{in_dims:?}");
        check_examples(&jaxpr, &batched, &args, &in_dims);
    }
}

/// `lu`, `lu_pivots_to_permutation`, `qr`, `geqrf`, `eigh` and `svd` under `jax.vmap(f, in_axes=1)`: JAX 0.10.2's
/// texts (`expand_dims_batcher`: the batch axis to the front, every result batched there),
/// and each example's results equal to the unbatched program's.
#[test]
fn lu_qr_and_eigh_batch_as_jax_does() {
    let cases: [(&str, &str, Array); 6] = [
        (
            "{ lambda ; a:f32[3,2]. let b:f32[3,2] c:f32[2] = geqrf a in (b, c) }",
            "{ lambda ; a:f32[3,4,2]. let
    b:f32[4,3,2] = transpose[permutation=(1, 0, 2)] a
    c:f32[4,3,2] d:f32[4,2] = geqrf b
  in (c, d) }",
            Array::F32(f32s(&[3, 4, 2], 25)),
        ),
        (
            "{ lambda ; a:f32[3,2]. let
    b:f32[2] c:f32[3,2] d:f32[2,2] = svd[
      algorithm=None
      compute_uv=True
      full_matrices=False
      subset_by_index=None
    ] a
  in (b, c, d) }",
            "{ lambda ; a:f32[3,4,2]. let
    b:f32[4,3,2] = transpose[permutation=(1, 0, 2)] a
    c:f32[4,2] d:f32[4,3,2] e:f32[4,2,2] = svd[
      algorithm=None
      compute_uv=True
      full_matrices=False
      subset_by_index=None
    ] b
  in (c, d, e) }",
            Array::F32(f32s(&[3, 4, 2], 22)),
        ),
        (
            "{ lambda ; a:f32[3,3]. let
    b:f32[3,3] c:f32[3] = eigh[
      algorithm=None
      lower=True
      sort_eigenvalues=True
      subset_by_index=None
    ] a
  in (b, c) }",
            "{ lambda ; a:f32[3,4,3]. let
    b:f32[4,3,3] = transpose[permutation=(1, 0, 2)] a
    c:f32[4,3,3] d:f32[4,3] = eigh[
      algorithm=None
      lower=True
      sort_eigenvalues=True
      subset_by_index=None
    ] b
  in (c, d) }",
            Array::F32(f32s(&[3, 4, 3], 13)),
        ),
        (
            "{ lambda ; a:f32[3,2]. let
    b:f32[3,2] c:f32[2,2] = qr[
      full_matrices=False
      pivoting=False
      use_magma=None
    ] a
  in (b, c) }",
            "{ lambda ; a:f32[3,4,2]. let
    b:f32[4,3,2] = transpose[permutation=(1, 0, 2)] a
    c:f32[4,3,2] d:f32[4,2,2] = qr[
      full_matrices=False
      pivoting=False
      use_magma=None
    ] b
  in (c, d) }",
            Array::F32(f32s(&[3, 4, 2], 12)),
        ),
        (
            "{ lambda ; a:f32[3,3]. let b:f32[3,3] c:i32[3] d:i32[3] = lu a in (b, c, d) }",
            "{ lambda ; a:f32[3,4,3]. let
    b:f32[4,3,3] = transpose[permutation=(1, 0, 2)] a
    c:f32[4,3,3] d:i32[4,3] e:i32[4,3] = lu b
  in (c, d, e) }",
            Array::F32(f32s(&[3, 4, 3], 11)),
        ),
        (
            "{ lambda ; a:i32[2]. let
    b:i32[3] = lu_pivots_to_permutation[permutation_size=3] a
  in (b,) }",
            "{ lambda ; a:i32[2,4]. let
    b:i32[4,2] = transpose[permutation=(1, 0)] a
    c:i32[4,3] = lu_pivots_to_permutation[permutation_size=3] b
  in (c,) }",
            Array::I32(ArrayD::from_shape_vec(vec![2, 4], vec![0, 2, 1, 2, 1, 2, 2, 2]).unwrap()),
        ),
    ];
    for (text, want, arg) in cases {
        let jaxpr = parse_jaxpr(text, "lu").unwrap();
        let closed = ClosedJaxpr::new(Arc::new(jaxpr.clone()));
        let out_axes = vec![Some(0); jaxpr.outvars.len()];
        let batched = batch_jaxpr(&closed, 4, &[Some(1)], &out_axes).unwrap().jaxpr;
        assert_eq!(batched.to_string(), want);
        let outs = eval_jaxpr(&batched, &[], std::slice::from_ref(&arg)).unwrap();
        for j in 0..4 {
            let example = match &arg {
                Array::F32(a) => Array::F32(a.index_axis(Axis(1), j).to_owned()),
                Array::I32(a) => Array::I32(a.index_axis(Axis(1), j).to_owned()),
                other => panic!("an f32 or i32 argument, found {:?}", other.aval()),
            };
            let want = eval_jaxpr(&jaxpr, &[], &[example]).unwrap();
            for (k, (o, w)) in outs.iter().zip(&want).enumerate() {
                let got = match o {
                    Array::F32(x) => Array::F32(x.index_axis(Axis(0), j).to_owned()),
                    Array::I32(x) => Array::I32(x.index_axis(Axis(0), j).to_owned()),
                    other => panic!("an f32 or i32 result, found {:?}", other.aval()),
                };
                assert_eq!(got.aval(), w.aval(), "output {k}, example {j}");
                assert_eq!(got.to_f64_vec(), w.to_f64_vec(), "output {k}, example {j}");
            }
        }
    }
}

/// The small primitives of issue 45 under `vmap` (JAX's `defreducer` and
/// `defvectorized`/`defbroadcasting` rules: the batch axis stays where it is): the
/// reductions `reduce_prod`, `reduce_and`, `reduce_or`, `reduce_xor` (on `i32` and
/// `bool`), the bit counts, `mulhi` and the total-order compares, with the batch axis in
/// the middle of the operand.
#[test]
fn small_primitives_batch_example_by_example() {
    let text = "{ lambda ; a:f32[3,4]. let
    b:f32[4] = reduce_prod[axes=(0,)] a
    c:f32[3,4] = mul a 1000.0:f32[]
    d:i32[3,4] = convert_element_type[new_dtype=int32 weak_type=False] c
    e:i32[3] = reduce_and[axes=(1,)] d
    f:i32[4] = reduce_or[axes=(0,)] d
    g:i32[] = reduce_xor[axes=(0, 1)] d
    h:i32[3,4] = population_count d
    i:i32[3,4] = clz d
    j:i32[3,4] = mulhi d c2
    k:bool[3,4] = lt_to a 0.0:f32[]
    l:bool[3,4] = le_to d i
    m:bool[3,4] = eq_to a b2
    n:bool[3] = reduce_and[axes=(1,)] k
    o:bool[4] = reduce_xor[axes=(0,)] l
    p:f32[3] = convert_element_type[new_dtype=float32 weak_type=False] e
    q:f32[4] = convert_element_type[new_dtype=float32 weak_type=False] f
    r:f32[] = convert_element_type[new_dtype=float32 weak_type=False] g
    s:i32[3,4] = add h i
    t:i32[3,4] = add s j
    u:f32[3,4] = convert_element_type[new_dtype=float32 weak_type=False] t
    v:f32[3,4] = select_n m a u
    w:f32[3] = convert_element_type[new_dtype=float32 weak_type=False] n
    x:f32[4] = convert_element_type[new_dtype=float32 weak_type=False] o
  in (b, p, q, r, v, w, x) }";
    // `c2`: `d` scaled past 2^16, so that the high half of the product is not all sign;
    // `b2`: `a` times 0.0 negated, zeros of the other sign (eq_to tells -0.0 from 0.0).
    let text = text
        .replace("    j:i32[3,4] = mulhi d c2\n", "    c2:i32[3,4] = mul d 70001:i32[]\n    j:i32[3,4] = mulhi d c2\n")
        .replace(
            "    m:bool[3,4] = eq_to a b2\n",
            "    z:f32[3,4] = mul a 0.0:f32[]\n    b2:f32[3,4] = neg z\n    m:bool[3,4] = eq_to z b2\n",
        );
    let jaxpr = parse_jaxpr(&text, "small_primitives").unwrap();
    let closed = ClosedJaxpr::new(Arc::new(jaxpr.clone()));
    let outs = [Some(0); 7];
    let batched = batch_jaxpr(&closed, 5, &[Some(1)], &outs).unwrap().jaxpr;
    check_per_example(&jaxpr, &batched, &f32s(&[3, 5, 4], 4), 1, &[]);
}

/// `stack` (batched with itself, and with an unbatched operand: JAX's moveaxis and
/// broadcast), `unstack` and `tile` under `vmap`, the batch axis in the middle.
#[test]
fn stack_unstack_and_tile_batch_example_by_example() {
    let text = "{ lambda ; a:f32[3,4] h:f32[3,4]. let
    b:f32[3,2,4] = stack[axis=1] a a
    c:f32[4] d:f32[4] e:f32[4] = unstack[axis=0] a
    f:f32[6,4] = tile[reps=(2, 1)] a
    g:f32[4,2] = stack[axis=1] c e
    i:f32[2,3,4] = stack[axis=0] h a
    j:f32[6] k:f32[6] l:f32[6] m:f32[6] = unstack[axis=1] f
  in (b, d, f, g, i, m) }";
    let jaxpr = parse_jaxpr(text, "stack_unstack_tile").unwrap();
    let closed = ClosedJaxpr::new(Arc::new(jaxpr.clone()));
    let batched = batch_jaxpr(&closed, 5, &[Some(1), None], &[Some(0); 6]).unwrap().jaxpr;
    check_per_example(&jaxpr, &batched, &f32s(&[3, 5, 4], 5), 1, &[Array::F32(f32s(&[3, 4], 6))]);
}

/// The special functions under `vmap` (JAX's `broadcast_batcher` for the naryops): with
/// the batch axes at 1 and 0 both operands go to the front, the unbatched scalar `b` of
/// `regularized_incomplete_beta` stays as it is. JAX 0.10.2's `make_jaxpr(vmap(f,
/// in_axes=(1, None, 0)))` text, and each example computes what the unbatched program does.
#[test]
fn special_functions_batch_as_jax_does() {
    let text = "{ lambda ; a:f32[3] b:f32[] c:f32[3]. let
    d:f32[3] = regularized_incomplete_beta a b c
    e:f32[3] = igamma a c
    f:f32[3] = bessel_i1e c
    g:f32[3] = mul e f
    h:f32[3] = add d g
    i:f32[3] = add a 1.5:f32[]
    j:f32[3] = zeta i c
    k:f32[3] = add h j
  in (k,) }";
    let want = "{ lambda ; a:f32[3,4] b:f32[] c:f32[4,3]. let
    d:f32[4,3] = transpose[permutation=(1, 0)] a
    e:f32[4,3] = regularized_incomplete_beta d b c
    f:f32[4,3] = transpose[permutation=(1, 0)] a
    g:f32[4,3] = igamma f c
    h:f32[4,3] = bessel_i1e c
    i:f32[4,3] = mul g h
    j:f32[4,3] = add e i
    k:f32[3,4] = add a 1.5:f32[]
    l:f32[4,3] = transpose[permutation=(1, 0)] k
    m:f32[4,3] = zeta l c
    n:f32[4,3] = add j m
  in (n,) }";
    let jaxpr = parse_jaxpr(text, "special").unwrap();
    let closed = ClosedJaxpr::new(Arc::new(jaxpr.clone()));
    let in_dims = [Some(1), None, Some(0)];
    let batched = batch_jaxpr(&closed, 4, &in_dims, &[Some(0)]).unwrap().jaxpr;
    assert_eq!(batched.to_string(), want);
    // a in (0.5, 2.5), b = 2, x in (0, 1).
    let a = f32s(&[3, 4], 8).mapv(|v| v.abs() + 0.5);
    let x = f32s(&[4, 3], 9).mapv(|v| 1.0 / (1.0 + (-v).exp()));
    let b = ndarray::arr0(2.0f32).into_dyn();
    check_examples(&jaxpr, &batched, &[a, b, x], &in_dims);
}

/// The generic `reduce` (one operand; two operands, one of them unbatched) under `vmap`
/// with the batch axis in the middle: JAX 0.10.2's `_reduce_batch_rule` moves the batch axis
/// to the front, broadcasts the unbatched operand and shifts `dimensions`
/// (`make_jaxpr(vmap(f, in_axes=(1, None)))`'s text); each example computes what the
/// unbatched program does.
#[test]
fn generic_reduce_batches_as_jax_does() {
    let text = "{ lambda ; a:f32[3,4] b:f32[3,4]. let
    c:f32[4] = reduce[
      computation=<function odot at 0xXXXXXXXXXXXX>
      dimensions=(0,)
      jaxpr={ lambda ; d:f32[] e:f32[]. let
          f:f32[] = mul d e
          g:f32[] = add f d
          h:f32[] = add g e
        in (h,) }
    ] a 0.0:f32[]
    i:f32[3] j:f32[3] = reduce[
      computation=<function pair at 0xXXXXXXXXXXXX>
      dimensions=(1,)
      jaxpr={ lambda ; k:f32[] l:f32[] m:f32[] n:f32[]. let
          o:bool[] = gt k m
          p:f32[] = select_n o m k
          q:f32[] = select_n o n l
        in (p, q) }
    ] a b -inf:f32[] 0.0:f32[]
  in (c, i, j) }";
    let want = "{ lambda ; a:f32[3,5,4] b:f32[3,4]. let
    c:f32[5,3,4] = transpose[permutation=(1, 0, 2)] a
    d:f32[5,4] = reduce[
      computation=<function odot at 0xXXXXXXXXXXXX>
      dimensions=(1,)
      jaxpr={ lambda ; e:f32[] f:f32[]. let
          g:f32[] = mul e f
          h:f32[] = add g e
          i:f32[] = add h f
        in (i,) }
    ] c 0.0:f32[]
    j:f32[5,3,4] = transpose[permutation=(1, 0, 2)] a
    k:f32[5,3,4] = broadcast_in_dim[
      broadcast_dimensions=(np.int64(1), np.int64(2))
    ] b
    l:f32[5,3] m:f32[5,3] = reduce[
      computation=<function pair at 0xXXXXXXXXXXXX>
      dimensions=(2,)
      jaxpr={ lambda ; n:f32[] o:f32[] p:f32[] q:f32[]. let
          r:bool[] = gt n p
          s:f32[] = select_n r p n
          t:f32[] = select_n r q o
        in (s, t) }
    ] j k -inf:f32[] 0.0:f32[]
  in (d, l, m) }";
    let jaxpr = parse_jaxpr(text, "generic_reduce").unwrap();
    let closed = ClosedJaxpr::new(Arc::new(jaxpr.clone()));
    let batched = batch_jaxpr(&closed, 5, &[Some(1), None], &[Some(0); 3]).unwrap().jaxpr;
    assert_eq!(batched.to_string(), want);
    check_per_example(&jaxpr, &batched, &f32s(&[3, 5, 4], 7), 1, &[Array::F32(f32s(&[3, 4], 8))]);
    // A batched init value: JAX's rule raises NotImplementedError.
    let text = "{ lambda ; a:f32[3] b:f32[]. let
    c:f32[] = reduce[
      computation=<function odot at 0xXXXXXXXXXXXX>
      dimensions=(0,)
      jaxpr={ lambda ; d:f32[] e:f32[]. let f:f32[] = mul d e in (f,) }
    ] a b
  in (c,) }";
    let closed = ClosedJaxpr::new(Arc::new(parse_jaxpr(text, "batched_init").unwrap()));
    let e = batch_jaxpr(&closed, 5, &[None, Some(0)], &[Some(0)]).unwrap_err().to_string();
    assert!(e.contains("a batched init value"), "{e}");
}

/// `rng_bit_generator` under `vmap` as JAX 0.10.2's `_rng_bit_generator_batching_rule`: the
/// first key draws every example's bits in one `(3, 2)` draw and alone gets its new key
/// (JAX's values of `vmap(f)` on three keys).
#[test]
fn rng_bit_generator_batches_as_jax_does() {
    let text = "{ lambda ; a:u32[4]. let
    b:u32[4] c:u32[2] = rng_bit_generator[
      algorithm=RNG_DEFAULT
      dtype=uint32
      out_sharding=None
      shape=(2,)
    ] a
  in (b, c) }";
    let closed = ClosedJaxpr::new(Arc::new(parse_jaxpr(text, "rbg").unwrap()));
    let batched = batch_jaxpr(&closed, 3, &[Some(0)], &[Some(0), Some(0)]).unwrap().jaxpr;
    let printed = batched.to_string();
    assert!(printed.contains("shape=(3, 2)") && printed.contains("name=dynamic_update_index_in_dim"), "{printed}");
    let keys: Vec<u32> = (1..=12).collect();
    let keys = Array::U32(ArrayD::from_shape_vec(vec![3, 4], keys).unwrap());
    let outs = eval_jaxpr(&batched, &[], &[keys]).unwrap();
    assert_eq!(outs[0].to_f64_vec(), [1., 2., 5., 4., 5., 6., 7., 8., 9., 10., 11., 12.]);
    let bits = [512747620., 1298009047., 1267190206., 761827841., 1383286907., 1639995030.];
    assert_eq!(outs[1].to_f64_vec(), bits);
}

/// `approx_top_k` under `vmap` (JAX's `_approx_top_k_batch_rule`): the batch axis stays
/// where it is and `reduction_dimension` is renumbered past it; each example gets the
/// unbatched program's values and indices (the largest along the last axis, the smallest
/// along axis 0).
#[test]
fn approx_top_k_batches_example_by_example() {
    let text = "{ lambda ; a:f32[3,4]. let
    b:f32[3,2] c:i32[3,2] = approx_top_k[
      aggregate_to_topk=True
      is_max_k=True
      k=2
      recall_target=0.95
      reduction_dimension=-1
      reduction_input_size_override=-1
    ] a
    d:f32[2,4] e:i32[2,4] = approx_top_k[
      aggregate_to_topk=True
      is_max_k=False
      k=2
      recall_target=0.9
      reduction_dimension=0
      reduction_input_size_override=-1
    ] a
    f:f32[3,2] = convert_element_type[new_dtype=float32 weak_type=False] c
    g:f32[2,4] = convert_element_type[new_dtype=float32 weak_type=False] e
  in (b, f, d, g) }";
    let jaxpr = parse_jaxpr(text, "approx_top_k").unwrap();
    let closed = ClosedJaxpr::new(Arc::new(jaxpr.clone()));
    let batched = batch_jaxpr(&closed, 5, &[Some(1)], &[Some(0); 4]).unwrap().jaxpr;
    let printed = batched.to_string();
    assert!(printed.contains("reduction_dimension=2") && printed.contains("reduction_dimension=0"), "{printed}");
    check_per_example(&jaxpr, &batched, &f32s(&[3, 5, 4], 9), 1, &[]);
}
