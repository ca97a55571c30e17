//! `Nans::Debug` and `Nans::DebugInfs` on both backends: the first equation whose result
//! holds a NaN (or an infinity) is named in the interpreter's words, whether or not the
//! value reaches a result, and the two backends say the same.

use std::sync::Arc;

use remat::run::{Program, RunOptions};
use remat::{Array, Backend, ClosedJaxpr, Error, Nans};

fn parsed(text: &str) -> ClosedJaxpr {
    ClosedJaxpr::new(Arc::new(remat::ir::parse_jaxpr(text, "f.jaxpr").unwrap()))
}

fn f32s(data: &[f32]) -> Array {
    Array::F32(ndarray::ArrayD::from_shape_vec(vec![data.len()], data.to_vec()).unwrap())
}

/// Runs `text` on `args` under `nans` on `backend`: the results, or the error's words.
fn run(text: &str, args: &[Array], backend: Backend, nans: Nans) -> Result<Vec<Array>, String> {
    let program = Program::new(parsed(text), &RunOptions { backend, nans, ..RunOptions::default() }).unwrap();
    let args: Vec<&Array> = args.iter().collect();
    let results = program.run(&args).map_err(|e| e.to_string());
    // `run_into` reports the same.
    let mut outs: Vec<Array> = parsed(text).jaxpr.out_avals().iter().map(Array::zeros).collect();
    let into = program.run_into(&args, &mut outs).map(|()| outs).map_err(|e| e.to_string());
    assert_eq!(format!("{results:?}"), format!("{into:?}"));
    results
}

/// The error both backends give, checked equal.
fn error_on_both(text: &str, args: &[Array], nans: Nans) -> String {
    let jit = run(text, args, Backend::Jit, nans).unwrap_err();
    let interp = run(text, args, Backend::Interp, nans).unwrap_err();
    assert_eq!(jit, interp);
    jit
}

/// `log` of a negative in the middle of a chain: the NaN reaches the result.
const LOG_IN_THE_MIDDLE: &str = "{ lambda ; a:f32[3]. let
    b:f32[3] = mul a 2.0:f32[]
    c:f32[3] = log b
    d:f32[3] = add c 1.0:f32[]
  in (d,) }";

#[test]
fn a_nan_made_in_the_middle_is_named_at_its_equation() {
    let args = [f32s(&[1., -1., 2.])];
    for backend in [Backend::Jit, Backend::Interp] {
        assert!(run(LOG_IN_THE_MIDDLE, &args, backend, Nans::RejectArguments).unwrap()[0].has_nan());
    }
    assert_eq!(
        error_on_both(LOG_IN_THE_MIDDLE, &args, Nans::Debug),
        "NaN check: equation 1 (log at f.jaxpr:3:5): result 0 holds the first NaN, at [1]: \
         no operand passed in or computed holds one"
    );
    // Without a NaN, the values.
    let fine = [f32s(&[1., 2., 3.])];
    let want = run(LOG_IN_THE_MIDDLE, &fine, Backend::Interp, Nans::RejectArguments).unwrap();
    for backend in [Backend::Jit, Backend::Interp] {
        assert_eq!(run(LOG_IN_THE_MIDDLE, &fine, backend, Nans::Debug).unwrap(), want);
    }
}

/// `0 / 0`, fused with the subtraction that makes the zeros.
const ZERO_BY_ZERO: &str = "{ lambda ; a:f32[3] b:f32[3]. let
    c:f32[3] = sub a a
    d:f32[3] = div c c
    e:f32[3] = mul d b
  in (e,) }";

#[test]
fn zero_by_zero_is_named_at_the_division() {
    let args = [f32s(&[1., 2., 3.]), f32s(&[1., 1., 1.])];
    assert_eq!(
        error_on_both(ZERO_BY_ZERO, &args, Nans::Debug),
        "NaN check: equation 1 (div at f.jaxpr:3:5): result 0 holds the first NaN, at [0]: \
         no operand passed in or computed holds one"
    );
}

/// `log a` where `a > 0`, else `a`: the NaN of `log` at a negative never reaches the result.
const MASKED: &str = "{ lambda ; a:f32[3]. let
    b:f32[3] = log a
    c:bool[3] = gt a 0.0:f32[]
    d:f32[3] = select_n c a b
  in (d,) }";

#[test]
fn a_nan_masked_by_select_n_is_still_named() {
    let args = [f32s(&[1., -1., 2.])];
    for backend in [Backend::Jit, Backend::Interp] {
        let out = run(MASKED, &args, backend, Nans::RejectArguments).unwrap();
        assert!(!out[0].has_nan(), "the NaN is masked");
    }
    assert_eq!(
        error_on_both(MASKED, &args, Nans::Debug),
        "NaN check: equation 0 (log at f.jaxpr:2:5): result 0 holds the first NaN, at [1]: \
         no operand passed in or computed holds one"
    );
}

/// `1 / a`, then doubled: an infinity where `a` is 0.
const RECIPROCAL: &str = "{ lambda ; a:f32[3]. let
    b:f32[3] = div 1.0:f32[] a
    c:f32[3] = mul b 2.0:f32[]
  in (c,) }";

#[test]
fn an_inf_is_named_only_when_infs_are_checked() {
    let args = [f32s(&[1., 0., 2.])];
    for backend in [Backend::Jit, Backend::Interp] {
        let out = run(RECIPROCAL, &args, backend, Nans::Debug).unwrap();
        assert_eq!(out[0].to_f64_vec(), vec![2., f64::INFINITY, 1.]);
    }
    assert_eq!(
        error_on_both(RECIPROCAL, &args, Nans::DebugInfs),
        "NaN check: equation 0 (div at f.jaxpr:2:5): result 0 holds the first inf, at [1]: \
         no operand passed in or computed holds one"
    );
    // An infinity passed in is carried, not made: no equation is blamed.
    let inf = [f32s(&[1., f32::INFINITY, 2.])];
    for backend in [Backend::Jit, Backend::Interp] {
        let out = run(RECIPROCAL, &inf, backend, Nans::DebugInfs).unwrap();
        assert_eq!(out[0].to_f64_vec(), vec![2., 0., 1.]);
    }
    // A NaN is still reported first under `DebugInfs`.
    let e = error_on_both(LOG_IN_THE_MIDDLE, &[f32s(&[1., -1., 0.])], Nans::DebugInfs);
    assert!(e.starts_with("NaN check: equation 1 (log at f.jaxpr:3:5): result 0 holds the first NaN, at [1]"), "{e}");
}

/// A NaN made inside a `scan` body: the JIT sees the scan's results, and the interpreter
/// names the equation inside the body.
const IN_A_SCAN: &str = "{ lambda ; a:f32[] b:f32[3]. let
    c:f32[] d:f32[3] = scan[
      jaxpr={ lambda ; e:f32[] f:f32[]. let
          g:f32[] = log f
          h:f32[] = add e g
        in (h, g) }
      length=3
      num_carry=1
      num_consts=0
      reverse=False
      unroll=1
    ] a b
  in (c, d) }";

#[test]
fn a_nan_inside_a_scan_body_is_named_inside_it() {
    let a = Array::F32(ndarray::arr0(0.0f32).into_dyn());
    let args = [a, f32s(&[1., -1., 2.])];
    let e = error_on_both(IN_A_SCAN, &args, Nans::Debug);
    assert!(e.starts_with("NaN check: equation 0 (scan at f.jaxpr:2:5): "), "{e}");
    assert!(e.contains("(log at f.jaxpr:"), "{e}");
    assert!(e.ends_with("result 0 holds the first NaN, at []: no operand passed in or computed holds one"), "{e}");
    assert!(matches!(
        Program::new(parsed(IN_A_SCAN), &RunOptions { nans: Nans::Debug, ..RunOptions::default() })
            .unwrap()
            .run(&args.iter().collect::<Vec<_>>()),
        Err(Error::Nan(_))
    ));
}
