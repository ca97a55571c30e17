//! The `random`, `lax` and `nn` surfaces through the facade and the JIT: a small CNN
//! training step written with them (keys, initializers, convolution, pooling, dropout,
//! `cond`, `fori_loop`) compiles, runs and differentiates to the interpreter's values, and
//! the PRNG's words come out of native code as JAX recorded them.

use remat::lax::{self, ConvOptions, Padding};
use remat::{nn, random, Array, Aval, Backend, DType, Tensor};
use remat_testkit::{arrays, check_close, read_json};

/// A program of one key, as the oracle's cases are.
type Sampler = fn(Tensor) -> Tensor;

fn array(shape: &[usize], offset: f32) -> Array {
    let n: usize = shape.iter().product();
    let data = (0..n).map(|i| ((i as f32 * 0.37 + offset).sin()) * 0.5).collect();
    Array::F32(ndarray::ArrayD::from_shape_vec(shape.to_vec(), data).unwrap())
}

fn key(seed: u32) -> Array {
    Array::U32(ndarray::ArrayD::from_shape_vec(vec![2], vec![0, seed]).unwrap())
}

/// A CNN's loss on a batch: the conv kernel is drawn in the program from `key` (as an
/// initializer would), then conv, relu, max pool, dropout, a dense layer and a `cond`
/// that picks the loss's form, the whole scaled by a `fori_loop`.
fn cnn_loss((k, w_dense, x): (Tensor, Tensor, Tensor)) -> Tensor {
    let keys = random::split(&k, 2);
    let (k_init, k_drop) = (keys.index(remat::trace::idx![0]), keys.index(remat::trace::idx![1]));
    let kernel = nn::initializers::he_normal(&k_init, &[3, 3, 2, 4], DType::F32);
    let options = ConvOptions::default().dimension_numbers("NHWC", "HWIO", "NHWC");
    let h = lax::conv_general_dilated(&x, &kernel, &[1, 1], Padding::Same, options);
    let h = lax::max_pool(&nn::relu(&h), &[2, 2], Some(&[2, 2]), Padding::Valid);
    let h = nn::dropout(&k_drop, &h, 0.25);
    let logits = h.reshape(&[2, -1]).matmul(&w_dense);
    let loss = lax::cond(
        &logits.sum().gt(0.0),
        |l: Tensor| nn::log_softmax(&l, -1).sum(),
        |l: Tensor| nn::softplus(&l).sum(),
        logits,
    );
    lax::fori_loop(0, 3, |_, acc: Tensor| acc * 0.5, loss)
}

fn cnn_args() -> (Array, Array, Array) {
    (key(7), array(&[16, 3], 0.2), array(&[2, 4, 4, 2], 0.1))
}

#[test]
fn a_cnn_step_runs_and_differentiates_in_native_code_as_in_the_interpreter() {
    let args = cnn_args();
    let native = remat::jit(cnn_loss).call(&args).unwrap();
    let interp = remat::jit(cnn_loss).backend(Backend::Interp).call(&args).unwrap();
    check_close("loss", &native, &interp, 1e-5, 1e-6).unwrap();
    assert!(native[0].to_f64_vec()[0].is_finite());

    let grad = remat::grad(cnn_loss).argnums(&[1, 2]);
    let g_native = grad.call(&args).unwrap();
    let g_interp = remat::grad(cnn_loss).argnums(&[1, 2]).backend(Backend::Interp).call(&args).unwrap();
    check_close("gradients", &g_native, &g_interp, 1e-4, 1e-5).unwrap();
    assert_eq!(g_native[0].aval(), Aval::new(DType::F32, vec![16, 3]));
    assert!(g_native[1].to_f64_vec().iter().any(|&v| v != 0.0), "the input gets a gradient through conv and pool");
}

#[test]
fn native_code_draws_jaxs_random_words_and_samples() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../trace/tests/data/random_oracle.json");
    let oracle = read_json(path);
    let cases: [(&str, Sampler); 8] = [
        ("split3 k42", |k| random::split(&k, 3)),
        ("bits k0", |k| random::bits(&k, &[2, 3])),
        ("uniform k42", |k| random::uniform(&k, &[3], DType::F32, 0.0, 1.0)),
        ("bernoulli k0", |k| random::bernoulli(&k, 0.5, Some(&[6]))),
        ("permutation k42", |k| random::permutation(&k, 5)),
        ("randint_2d k0", |k| random::randint(&k, &[2, 3], -5, 1000)),
        ("exponential", |k| random::exponential(&k, &[2, 3], DType::F32)),
        ("exponential_scalar", |k| random::exponential(&k, &[], DType::F32)),
    ];
    for (name, f) in cases {
        let case = &oracle[name];
        let got = remat::jit(f).call(&arrays(case, "args")[0]).unwrap();
        let want = arrays(case, "outputs");
        assert_eq!(got[0].aval(), want[0].aval(), "{name}");
        assert_eq!(got[0].to_f64_vec(), want[0].to_f64_vec(), "{name}: native code differs from JAX");
    }
}

/// `lax.gather` and `lax.scatter*` with their own dimension numbers (windows of two axes,
/// points, batching dimensions, clipped and dropped indices) compile to native code that
/// agrees with the interpreter, and so do their gradients.
#[test]
fn lax_gathers_and_scatters_run_in_native_code_as_in_the_interpreter() {
    use remat::lax::{
        GatherDimensionNumbers, GatherOptions, GatherScatterMode, ScatterDimensionNumbers, ScatterOptions,
    };
    fn program((x, b, u, idx, pts): (Tensor, Tensor, Tensor, Tensor, Tensor)) -> Tensor {
        let windows = GatherDimensionNumbers {
            offset_dims: vec![1, 2],
            collapsed_slice_dims: vec![],
            start_index_map: vec![0, 1],
            operand_batching_dims: vec![],
            start_indices_batching_dims: vec![],
        };
        let w = lax::gather(&x, &idx, windows, &[2, 3], GatherOptions::default());
        let batched = GatherDimensionNumbers {
            offset_dims: vec![1],
            collapsed_slice_dims: vec![1],
            start_index_map: vec![1],
            operand_batching_dims: vec![0],
            start_indices_batching_dims: vec![0],
        };
        let rows = lax::gather(&b, &idx.slice(&[0, 0], &[3, 1]), batched, &[1, 1, 4], GatherOptions::default());
        let points = ScatterDimensionNumbers {
            update_window_dims: vec![],
            inserted_window_dims: vec![0, 1],
            scatter_dims_to_operand_dims: vec![0, 1],
            operand_batching_dims: vec![],
            scatter_indices_batching_dims: vec![],
        };
        let clip = ScatterOptions { mode: Some(GatherScatterMode::Clip), ..Default::default() };
        let added = lax::scatter_add(&x, &pts, &u, points.clone(), clip);
        let dropped = lax::scatter_max(&x, &pts, &(&u * 3.0), points, ScatterOptions::default());
        (w.sin().sum() + rows.tanh().sum()) * (added * dropped).sum()
    }
    let ints =
        |shape: &[usize], data: Vec<i32>| Array::I32(ndarray::ArrayD::from_shape_vec(shape.to_vec(), data).unwrap());
    let args = (
        array(&[5, 6], 0.3),
        array(&[3, 5, 4], 0.7),
        array(&[3], 0.9),
        ints(&[3, 2], vec![0, 1, 3, 2, 4, 4]),
        ints(&[3, 2], vec![0, 1, 2, 3, 7, 0]),
    );
    let native = remat::jit(program).call(&args).unwrap();
    let interp = remat::jit(program).backend(Backend::Interp).call(&args).unwrap();
    check_close("value", &native, &interp, 1e-5, 1e-6).unwrap();
    let g_native = remat::grad(program).argnums(&[0, 1, 2]).call(&args).unwrap();
    let g_interp = remat::grad(program).argnums(&[0, 1, 2]).backend(Backend::Interp).call(&args).unwrap();
    check_close("gradients", &g_native, &g_interp, 1e-4, 1e-5).unwrap();
    assert!(g_native.iter().all(|g| g.to_f64_vec().iter().any(|&v| v != 0.0)), "every input gets a gradient");
}

/// The numpy surface's padding modes, variance with `ddof`, rounding to decimals, sorts
/// (descending, flattened), batched triangles and uneven splits run in native code as in
/// the interpreter, gradients included.
#[test]
fn numpy_pads_sorts_and_statistics_run_in_native_code_as_in_the_interpreter() {
    use remat::numpy::{self, PadMode};
    fn program(x: Tensor) -> Tensor {
        let m = x.reshape(&[2, 3, 4]);
        let mut total = m.tril(-1).sum() + m.triu(1).sin().sum();
        for mode in [PadMode::Reflect, PadMode::Symmetric, PadMode::Edge, PadMode::Wrap, PadMode::Mean] {
            total = total + numpy::pad(&m, &[(0, 0), (1, 2), (2, 1)], mode).tanh().sum();
        }
        total = total + m.var_with(Some(&[2]), 1, true).sum() + m.std_with(None, 0, false);
        total = total + numpy::round_decimals(&m, 1).sum();
        let sorted = m.sort_with(Some(-1), true) + m.sort_with(None, false).reshape(&[2, 3, 4]);
        total = total + (sorted * m.cos()).sum();
        for part in m.array_split(3, 2) {
            total = total + part.exp().sum();
        }
        total
    }
    let x = array(&[24], 0.4);
    let native = remat::jit(program).call(&x).unwrap();
    let interp = remat::jit(program).backend(Backend::Interp).call(&x).unwrap();
    check_close("value", &native, &interp, 1e-5, 1e-6).unwrap();
    let g_native = remat::grad(program).call(&x).unwrap();
    let g_interp = remat::grad(program).backend(Backend::Interp).call(&x).unwrap();
    check_close("gradient", &g_native, &g_interp, 1e-4, 1e-5).unwrap();
    assert!(g_native[0].to_f64_vec().iter().all(|v| v.is_finite()));
}
