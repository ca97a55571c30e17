//! The callable `vjp`, `jvp` and `linearize` on closures and checkpoints: values against
//! central finite differences (in f64) and against the reference interpreter, the
//! inspection of the vjp's halves, and errors for cotangents and tangents of the wrong
//! type.

use remat::{checkpoint, named, Array, Aval, Backend, DType, Policy, RunOptions, Tensor};
use remat_testkit::within;

fn f64s(shape: &[usize], offset: f64) -> Array {
    let n: usize = shape.iter().product();
    let data = (0..n).map(|i| (i as f64 * 0.61 + offset).sin() * 0.8).collect();
    Array::F64(ndarray::ArrayD::from_shape_vec(shape.to_vec(), data).unwrap())
}

/// Two outputs: `sin(W @ tanh(x))` and `sum(x * x)`.
fn two_outputs((w, x): (Tensor, Tensor)) -> (Tensor, Tensor) {
    (w.dot(&x.tanh()).sin(), (&x * &x).sum())
}

fn args() -> (Array, Array) {
    (f64s(&[3, 4], 0.2), f64s(&[4], 0.7))
}

/// `args` with `eps * direction` added, leaf by leaf.
fn shifted(args: &(Array, Array), dir: &(Array, Array), eps: f64) -> (Array, Array) {
    let add = |a: &Array, d: &Array| {
        let v: Vec<f64> = a.to_f64_vec().iter().zip(d.to_f64_vec()).map(|(x, y)| x + eps * y).collect();
        Array::F64(ndarray::ArrayD::from_shape_vec(a.shape().to_vec(), v).unwrap())
    };
    (add(&args.0, &dir.0), add(&args.1, &dir.1))
}

/// `f`'s outputs, flattened to one vector, by the interpreter.
fn eval(args: &(Array, Array)) -> Vec<f64> {
    let outs = remat::jit(two_outputs).backend(Backend::Interp).call(args).unwrap();
    outs.iter().flat_map(|a| a.to_f64_vec()).collect()
}

/// The central difference of the outputs along `dir`.
fn finite_difference(args: &(Array, Array), dir: &(Array, Array)) -> Vec<f64> {
    let eps = 1e-6;
    let (hi, lo) = (eval(&shifted(args, dir, eps)), eval(&shifted(args, dir, -eps)));
    hi.iter().zip(&lo).map(|(h, l)| (h - l) / (2.0 * eps)).collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Equal up to the last bits that native code and the interpreter may round differently.
fn assert_close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!(within(*x, *y, 1e-12, 1e-12), "{x} vs {y}");
    }
}

fn flat(arrays: &[Array]) -> Vec<f64> {
    arrays.iter().flat_map(|a| a.to_f64_vec()).collect()
}

#[test]
fn vjp_gradients_match_finite_differences_on_both_backends() {
    let args = args();
    let cts = (f64s(&[3], 1.3), Array::F64(ndarray::arr0(0.75).into_dyn()));
    let dir = (f64s(&[3, 4], 2.1), f64s(&[4], 0.4));
    // <ct, J dir> = <J^T ct, dir>: the vjp against a directional finite difference.
    let fd = finite_difference(&args, &dir);
    let want = dot(&flat(&[cts.0.clone(), cts.1.clone()]), &fd);
    let mut per_backend = Vec::new();
    for backend in [Backend::Jit, Backend::Interp] {
        let options = RunOptions { backend, ..RunOptions::default() };
        let (outs, f_vjp) = remat::vjp_with(two_outputs, &args, &options).unwrap();
        assert_close(&flat(&outs), &eval(&args));
        // The gradients come back in the arguments' structure: a pair of arrays.
        let (gw, gx): (Array, Array) = f_vjp.call(&cts).unwrap();
        assert_eq!((gw.shape(), gx.shape()), (&[3usize, 4][..], &[4usize][..]));
        let got = dot(&gw.to_f64_vec(), &dir.0.to_f64_vec()) + dot(&gx.to_f64_vec(), &dir.1.to_f64_vec());
        assert!(within(got, want, 1e-6, 1e-7), "{backend:?}: {got} vs {want}");
        per_backend.push(flat(&[gw, gx]));
    }
    for (a, b) in per_backend[0].iter().zip(&per_backend[1]) {
        assert!(within(*a, *b, 1e-12, 1e-12), "jit {a} vs interpreter {b}");
    }
}

#[test]
fn the_callable_is_reusable_and_its_backend_can_change() {
    let args = args();
    let (_, f_vjp) = remat::vjp(two_outputs, &args).unwrap();
    let cts = |s: f64| (f64s(&[3], s), Array::F64(ndarray::arr0(s).into_dyn()));
    let (a, b) = (f_vjp.call_flat(&cts(0.5)).unwrap(), f_vjp.call_flat(&cts(1.5)).unwrap());
    assert_ne!(flat(&a), flat(&b));
    let on_interp = f_vjp.backend(Backend::Interp);
    let c = on_interp.call_flat(&cts(1.5)).unwrap();
    for (x, y) in flat(&b).iter().zip(flat(&c)) {
        assert!(within(*x, y, 1e-12, 1e-12), "{x} vs {y}");
    }
    // The gradient of a scalar function with cotangent 1 is `grad`'s.
    let scalar = |(w, x): (Tensor, Tensor)| w.dot(&x.tanh()).sin().sum();
    let (_, f_vjp) = remat::vjp(scalar, &args).unwrap();
    let g = f_vjp.call_flat(&Array::F64(ndarray::arr0(1.0).into_dyn())).unwrap();
    let want = remat::grad(scalar).backend(Backend::Interp).call(&args).unwrap();
    for (x, y) in flat(&g).iter().zip(flat(&want)) {
        assert!(within(*x, y, 1e-12, 1e-12), "{x} vs {y}");
    }
}

#[test]
fn a_checkpoint_is_passed_to_vjp_directly_and_its_halves_are_inspectable() {
    let f = |(w, x): (Tensor, Tensor)| w.dot(&x.tanh()).sin().sum();
    let ck = checkpoint(f).policy(Policy::NothingSaveable);
    let args = args();
    let (outs, f_vjp) = remat::vjp(&ck, &args).unwrap();
    let lines: Vec<String> = f_vjp.residuals().iter().map(|r| r.to_string()).collect();
    assert_eq!(lines, ["f64[3,4] from the argument args[0]", "f64[4] from the argument args[1]"]);
    assert_eq!(f_vjp.residual_values().len(), 2);
    assert_eq!(f_vjp.program().fwd().outvars.len(), 3); // the value and the two residuals
    assert_eq!(f_vjp.program().bwd().invars.len(), 3);
    let closure = remat::vjp_program(|a| ck.call(a), &args).unwrap();
    assert_eq!(closure.residuals().len(), 2);
    let g = f_vjp.call_flat(&Array::F64(ndarray::arr0(1.0).into_dyn())).unwrap();
    let want = remat::grad(f).backend(Backend::Interp).call(&args).unwrap();
    assert_eq!(outs[0].to_f64_vec().len(), 1);
    for (x, y) in flat(&g).iter().zip(flat(&want)) {
        assert!(within(*x, y, 1e-12, 1e-12), "{x} vs {y}");
    }
}

#[test]
fn cotangents_and_tangents_of_the_wrong_type_are_errors() {
    let args = args();
    let (_, f_vjp) = remat::vjp(two_outputs, &args).unwrap();
    let err = f_vjp.call_flat(&f64s(&[3], 0.0)).unwrap_err().to_string();
    assert_eq!(err, "differentiation failed: 1 cotangents given for 2 outputs");
    let wrong = (f64s(&[4], 0.0), Array::F64(ndarray::arr0(1.0).into_dyn()));
    let err = f_vjp.call_flat(&wrong).unwrap_err().to_string();
    assert_eq!(err, "differentiation failed: cotangent 0 is f64[4] but output 0 is f64[3]");
    let err = remat::jvp(two_outputs, &args, &(f64s(&[3, 4], 0.0),)).unwrap_err().to_string();
    assert_eq!(err, "differentiation failed: 1 tangents given for 2 primals");
    let abstract_args = (named("w", Aval::new(DType::F64, vec![3, 4])), Aval::new(DType::F64, vec![4]));
    let err = remat::vjp(two_outputs, &abstract_args).map(|_| ()).unwrap_err().to_string();
    assert!(err.contains("abstract"), "{err}");
    let ints = Array::I32(ndarray::arr1(&[1, 2]).into_dyn());
    let err = remat::jvp(|x: Tensor| x.sum(), &ints, &ints).unwrap_err().to_string();
    assert!(err.contains("primal 0 is i32[2]"), "{err}");
}

#[test]
fn jvp_and_linearize_match_finite_differences_and_each_other() {
    let args = args();
    let dir = (f64s(&[3, 4], 0.9), f64s(&[4], 1.7));
    let fd = finite_difference(&args, &dir);
    let (outs, touts) = remat::jvp(two_outputs, &args, &dir).unwrap();
    assert_close(&flat(&outs), &eval(&args));
    for (got, want) in flat(&touts).iter().zip(&fd) {
        assert!(within(*got, *want, 1e-6, 1e-7), "jvp {got} vs {want}");
    }
    for backend in [Backend::Jit, Backend::Interp] {
        let options = RunOptions { backend, ..RunOptions::default() };
        let (louts, f_jvp) = remat::linearize_with(two_outputs, &args, &options).unwrap();
        assert_close(&flat(&louts), &flat(&outs));
        let lin = f_jvp.call(&dir).unwrap();
        for (got, want) in flat(&lin).iter().zip(flat(&touts)) {
            assert!(within(*got, want, 1e-12, 1e-12), "{backend:?}: linearize {got} vs jvp {want}");
        }
        // Linear: twice the tangent gives twice the output tangent.
        let twice = f_jvp.call(&shifted(&dir, &dir, 1.0)).unwrap();
        for (a, b) in flat(&twice).iter().zip(flat(&lin)) {
            assert!(within(*a, 2.0 * b, 1e-12, 1e-12), "{a} vs 2 * {b}");
        }
        let (primal, tangent) = f_jvp.jaxprs();
        assert_eq!(primal.outvars.len(), 2 + f_jvp.residual_values().len());
        assert_eq!(tangent.outvars.len(), 2);
    }
}
