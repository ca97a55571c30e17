//! The facade over whole closures: `jit` compiles once per signature, `grad` and
//! `value_and_grad` agree across backends and policies, `vjp` halves compile, bad
//! arguments are errors, and `run` runs parsed programs and their vjps with located NaNs.

use remat::run::{Half, Program, RunOptions, VjpRunner};
use remat::{
    checkpoint, named, Array, Aval, Backend, ClosedJaxpr, CseScope, DType, Error, EvalError, Options, Policy, Tensor,
};
use remat_testkit::within;

fn f32s(shape: &[usize]) -> Aval {
    Aval::new(DType::F32, shape.to_vec())
}

fn array(shape: &[usize], offset: f32) -> Array {
    let n: usize = shape.iter().product();
    let data = (0..n).map(|i| ((i as f32 * 0.37 + offset).sin()) * 0.5).collect();
    Array::F32(ndarray::ArrayD::from_shape_vec(shape.to_vec(), data).unwrap())
}

fn mlp((w1, w2, x): (Tensor, Tensor, Tensor)) -> Tensor {
    w2.dot(&w1.dot(&x).tanh()).sin().powi(2).sum()
}

fn args() -> (Array, Array, Array) {
    (array(&[6, 4], 0.1), array(&[5, 6], 0.2), array(&[4], 0.3))
}

fn assert_close(a: &[Array], b: &[Array]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.aval(), y.aval());
        for (p, q) in x.to_f64_vec().into_iter().zip(y.to_f64_vec()) {
            assert!(within(p, q, 1e-4, 1e-5), "{p} vs {q}");
        }
    }
}

#[test]
fn jit_compiles_once_per_signature_and_matches_the_interpreter() {
    let f = remat::jit(mlp);
    let native = f.call(&args()).unwrap();
    f.call(&args()).unwrap();
    assert_eq!(f.compiled_signatures(), 1);
    let other = (array(&[6, 3], 0.1), array(&[5, 6], 0.2), array(&[3], 0.3));
    f.call(&other).unwrap();
    assert_eq!(f.compiled_signatures(), 2);
    let reference = remat::jit(mlp).backend(Backend::Interp).call(&args()).unwrap();
    assert_close(&native, &reference);
}

#[test]
fn gradients_do_not_depend_on_backend_or_policy() {
    let reference = remat::value_and_grad(mlp).backend(Backend::Interp).call(&args()).unwrap();
    assert_eq!(reference.len(), 4);
    let policies = [
        None,
        Some(Policy::EverythingSaveable),
        Some(Policy::NothingSaveable),
        Some(Policy::DotsSaveable { only_if_no_batch_dims: true }),
    ];
    for policy in policies {
        let mut ck = checkpoint(mlp);
        if let Some(p) = policy {
            ck = ck.policy(p);
        }
        let native = remat::value_and_grad(|a| ck.call(a)).call(&args()).unwrap();
        assert_close(&native, &reference);
        // Whether the checkpoint's recompute merges with the forward pass changes neither.
        for cse in [CseScope::Off, CseScope::WithinCheckpoints, CseScope::AcrossCheckpoints] {
            let options = Options { cse, ..Options::default() };
            let native = remat::value_and_grad(|a| ck.call(a)).options(options.clone()).call(&args()).unwrap();
            assert_close(&native, &reference);
            let jitted = remat::jit(|a| ck.call(a)).options(options).call(&args()).unwrap();
            assert_close(&jitted, &reference[..1]);
        }
    }
}

#[test]
fn grad_argnums_selects_flattened_arguments() {
    let all = remat::grad(mlp).call(&args()).unwrap();
    let only_x = remat::grad(mlp).argnums(&[2]).call(&args()).unwrap();
    assert_eq!(only_x.len(), 1);
    assert_close(&only_x, &all[2..]);
}

#[test]
fn vjp_halves_compile_and_give_the_gradient() {
    let avals = (named("W1", f32s(&[6, 4])), named("W2", f32s(&[5, 6])), named("x", f32s(&[4])));
    let ck = checkpoint(mlp).policy(Policy::NothingSaveable);
    let v = remat::vjp_program(|a| ck.call(a), &avals).unwrap();
    let names: Vec<String> = v.residuals().iter().map(|r| r.to_string()).collect();
    assert_eq!(names, ["f32[6,4] from the argument W1", "f32[5,6] from the argument W2", "f32[4] from the argument x"]);
    let (fwd, bwd) = v.compile().unwrap();
    let (w1, w2, x) = args();
    let out = fwd.run(&[w1, w2, x]).unwrap();
    let mut bwd_args = out[1..].to_vec();
    bwd_args.push(Array::F32(ndarray::ArrayD::from_elem(vec![], 1.0)));
    let grads = bwd.run(&bwd_args).unwrap();
    let expected = remat::grad(mlp).backend(Backend::Interp).call(&args()).unwrap();
    assert_close(&grads, &expected);
}

#[test]
fn a_policy_changes_what_is_saved() {
    let avals = (named("W1", f32s(&[6, 4])), named("W2", f32s(&[5, 6])), named("x", f32s(&[4])));
    let plain = remat::saved_residuals(mlp, &avals).unwrap();
    let ck = checkpoint(mlp).policy(Policy::NothingSaveable);
    let nothing = remat::saved_residuals(|a| ck.call(a), &avals).unwrap();
    assert!(plain.len() > nothing.len());
    let text = remat::saved_residuals_text(mlp, &avals).unwrap();
    assert!(text.contains("output of tanh from crates/remat/tests/api.rs"), "{text}");
}

#[test]
fn bad_arguments_are_errors() {
    let g = remat::grad(mlp);
    let wrong = (array(&[6, 4], 0.1), array(&[5, 7], 0.2), array(&[4], 0.3));
    let err = g.call(&wrong).unwrap_err().to_string();
    assert!(err.contains("tracing failed") && err.contains("api.rs"), "{err}");
    let not_scalar = remat::grad(|(w, x): (Tensor, Tensor)| w.dot(&x));
    let err = not_scalar.call(&(array(&[2, 3], 0.0), array(&[3], 0.0))).unwrap_err().to_string();
    assert!(err.contains("scalar"), "{err}");
    let abstract_args = (f32s(&[6, 4]), f32s(&[5, 6]), f32s(&[4]));
    let err = remat::jit(mlp).call(&abstract_args).unwrap_err().to_string();
    assert!(err.contains("abstract"), "{err}");
}

#[test]
fn functions_that_use_constant_arrays_differentiate_and_compile() {
    // sum(sin(x) * c) for a constant c: the gradient is c * cos(x), and the forward half
    // saves the constant, as JAX does.
    let c = Array::F32(ndarray::arr1(&[1.0f32, 2.0, 3.0]).into_dyn());
    let f = |x: Tensor| (x.sin() * remat::numpy::constant(c.clone())).sum();
    let x = Array::F32(ndarray::arr1(&[0.1f32, 0.2, 0.3]).into_dyn());
    let want: Vec<f64> = (1..=3).map(|i| i as f64 * (0.1 * i as f64).cos()).collect();
    for backend in [Backend::Jit, Backend::Interp] {
        let g = remat::grad(f).backend(backend).call(&x).unwrap();
        for (got, want) in g[0].to_f64_vec().iter().zip(&want) {
            assert!((got - want).abs() < 1e-5, "{backend:?}: {got} vs {want}");
        }
    }
    let v = remat::vjp_program(f, &named("x", f32s(&[3]))).unwrap();
    assert_eq!(v.residuals()[0].to_string(), "f32[3] from a constant");
    let (fwd, bwd) = v.compile().unwrap();
    let mut res = fwd.run(&[x]).unwrap().split_off(1);
    res.push(Array::F32(ndarray::arr0(1.0f32).into_dyn()));
    let g = bwd.run(&res).unwrap();
    for (got, want) in g[0].to_f64_vec().iter().zip(&want) {
        assert!((got - want).abs() < 1e-5, "vjp: {got} vs {want}");
    }
}

/// A training loop's step: `call_into` writes the value and gradients into the arrays an
/// earlier call returned, on both backends, and refuses arrays of the wrong type.
#[test]
fn call_into_reuses_the_callers_arrays() {
    for backend in [Backend::Jit, Backend::Interp] {
        let vg = remat::value_and_grad(mlp).backend(backend);
        let want = vg.call(&args()).unwrap();
        let mut outs: Vec<Array> = want.iter().map(|a| Array::zeros(&a.aval())).collect();
        vg.call_into(&args(), &mut outs).unwrap();
        assert_eq!(outs, want);
        let jitted = remat::jit(mlp).backend(backend);
        let mut value = vec![Array::zeros(&f32s(&[]))];
        jitted.call_into(&args(), &mut value).unwrap();
        assert_close(&value, &want[..1]);
        let mut wrong = vec![Array::zeros(&f32s(&[2]))];
        let err = jitted.call_into(&args(), &mut wrong).unwrap_err();
        assert!(err.to_string().contains("output 0"), "{err}");
        assert!(jitted.call_into(&args(), &mut []).is_err());
    }
}

// ---- NaNs ----

fn f32_array(shape: &[usize], data: &[f32]) -> Array {
    Array::F32(ndarray::ArrayD::from_shape_vec(shape.to_vec(), data.to_vec()).unwrap())
}

/// `sum(sqrt(x) * w)`: a NaN where `x` is negative.
fn sqrt_weighted((x, w): (Tensor, Tensor)) -> Tensor {
    (x.sqrt() * w).sum()
}

#[test]
fn an_argument_holding_nan_is_an_error_unless_nans_may_propagate() {
    let args = (f32_array(&[3], &[1., 4., 9.]), f32_array(&[3], &[1., f32::NAN, 1.]));
    for backend in [Backend::Jit, Backend::Interp] {
        let f = remat::jit(sqrt_weighted).backend(backend);
        let e = f.call(&args).unwrap_err().to_string();
        assert_eq!(e, "NaN check: argument 1 holds NaN at [1]");
        let g = remat::grad(sqrt_weighted).backend(backend);
        assert_eq!(g.call(&args).unwrap_err().to_string(), e);
        let mut outs = vec![f32_array(&[3], &[0.; 3]), f32_array(&[3], &[0.; 3])];
        assert_eq!(g.call_into(&args, &mut outs).unwrap_err().to_string(), e);

        // JAX's behaviour when asked for: the NaN flows through.
        let out = remat::jit(sqrt_weighted).backend(backend).nans(remat::Nans::Propagate).call(&args).unwrap();
        assert!(out[0].has_nan());
    }
}

#[test]
fn debug_nans_names_the_equation_and_the_line_that_made_the_first_nan() {
    let args = (f32_array(&[3], &[1., -4., 9.]), f32_array(&[3], &[1., 1., 1.]));
    // The line of `x.sqrt()` in `sqrt_weighted`.
    let line = 1 + include_str!("api.rs").lines().position(|l| l.trim() == "(x.sqrt() * w).sum()").unwrap();
    for backend in [Backend::Jit, Backend::Interp] {
        // Without the check, the value is NaN and nothing says why.
        assert!(remat::jit(sqrt_weighted).backend(backend).call(&args).unwrap()[0].has_nan());
        let f = remat::jit(sqrt_weighted).backend(backend).nans(remat::Nans::Debug);
        let e = f.call(&args).unwrap_err().to_string();
        assert!(e.starts_with("NaN check: equation 0 (sqrt at "), "{e}");
        assert!(e.contains(&format!("api.rs:{line}:")), "{e}");
        assert!(e.ends_with("result 0 holds the first NaN, at [1]: no operand passed in or computed holds one"), "{e}");

        // In the gradient program: the forward `sqrt` again, not the backward's division
        // that carries its NaN along.
        let g = remat::value_and_grad(sqrt_weighted).backend(backend).nans(remat::Nans::Debug);
        let e = g.call(&args).unwrap_err().to_string();
        assert!(e.contains("(sqrt at ") && e.contains(&format!("api.rs:{line}:")), "{e}");
        let mut outs = vec![f32_array(&[], &[0.]), f32_array(&[3], &[0.; 3]), f32_array(&[3], &[0.; 3])];
        assert_eq!(g.call_into(&args, &mut outs).unwrap_err().to_string(), e);

        // Without NaNs, the debug mode returns the values.
        let fine = (f32_array(&[3], &[1., 4., 9.]), f32_array(&[3], &[1., 1., 1.]));
        assert_eq!(f.call(&fine).unwrap()[0].to_f64_vec(), vec![6.0]);
    }
}

// ---- run: programs given as jaxprs ----

/// A closure is traced once per input signature; a second call of the same signature
/// reuses the cached program.
#[test]
fn jit_traces_once_per_input_signature() {
    let traces = std::sync::atomic::AtomicUsize::new(0);
    let f = remat::jit(|x: Tensor| {
        traces.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        x.sin()
    });
    let x3 = array(&[3], 0.0);
    assert_close(
        &f.call(&x3).unwrap(),
        &[Array::F32(x3.to_f64_vec().iter().map(|v| v.sin() as f32).collect::<ndarray::Array1<f32>>().into_dyn())],
    );
    f.call(&x3).unwrap();
    f.call(&array(&[5], 0.0)).unwrap();
    assert_eq!(traces.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert_eq!(f.compiled_signatures(), 2);
}

fn parsed(text: &str) -> ClosedJaxpr {
    ClosedJaxpr::new(std::sync::Arc::new(remat::ir::parse_jaxpr(text, "f.jaxpr").unwrap()))
}

/// `sum(sqrt(a) * b)` as a jaxpr file writes it.
const SQRT_WEIGHTED: &str = "{ lambda ; a:f32[3] b:f32[3]. let
    c:f32[3] = sqrt a
    d:f32[3] = mul c b
    e:f32[] = reduce_sum[axes=(0,) out_sharding=None] d
  in (e,) }";

/// A parsed program runs on either backend; its errors say which argument, cotangent or
/// half of a vjp holds or makes a NaN, in structured form.
#[test]
fn programs_and_vjps_run_on_both_backends_and_name_their_nans() {
    let (a, b) = (f32_array(&[3], &[1., 4., 9.]), f32_array(&[3], &[1., 1., 1.]));
    let nan_b = f32_array(&[3], &[1., f32::NAN, 1.]);
    let one = f32_array(&[], &[1.]);
    for backend in [Backend::Jit, Backend::Interp] {
        let options = RunOptions { backend, ..RunOptions::default() };
        let p = Program::new(parsed(SQRT_WEIGHTED), &options).unwrap();
        assert_eq!(p.compiled().is_some(), backend == Backend::Jit);
        assert_eq!(p.run(&[&a, &b]).unwrap()[0].to_f64_vec(), vec![6.0]);
        let mut outs = vec![f32_array(&[], &[0.])];
        p.run_into(&[&a, &b], &mut outs).unwrap();
        assert_eq!(outs[0].to_f64_vec(), vec![6.0]);
        let e = p.run(&[&a, &nan_b]).unwrap_err();
        assert!(matches!(&e, Error::Nan(EvalError::NanArgument { index: 1, position }) if position == &[1]), "{e}");

        let v = VjpRunner::new(&parsed(SQRT_WEIGHTED), &options).unwrap();
        let r = v.run(&[&a, &b], &[&one]).unwrap();
        assert_eq!(r.outputs[0].to_f64_vec(), vec![6.0]);
        assert_close(&r.grads, &[f32_array(&[3], &[0.5, 0.25, 1. / 6.]), f32_array(&[3], &[1., 2., 3.])]);
        let nan_ct = f32_array(&[], &[f32::NAN]);
        assert!(matches!(v.run(&[&a, &b], &[&nan_ct]), Err(Error::NanCotangent { index: 0, .. })));

        // At a = 0, b = 0 only the backward half makes a NaN (0 * 0.5 / sqrt(0)).
        let debug =
            VjpRunner::new(&parsed(SQRT_WEIGHTED), &RunOptions { nans: remat::Nans::Debug, ..options }).unwrap();
        let zeros = (f32_array(&[3], &[1., 0., 9.]), f32_array(&[3], &[1., 0., 1.]));
        let e = debug.run(&[&zeros.0, &zeros.1], &[&one]).unwrap_err();
        assert!(matches!(&e, Error::InHalf { half: Half::Backward, error } if matches!(**error, Error::Nan(_))), "{e}");
        assert!(e.to_string().starts_with("NaN check in the backward half: equation "), "{e}");
        let negative = f32_array(&[3], &[1., -4., 9.]);
        let e = debug.run(&[&negative, &b], &[&one]).unwrap_err().to_string();
        assert!(e.starts_with("NaN check in the forward half: equation 0 (sqrt at f.jaxpr:2:5)"), "{e}");
    }
}
