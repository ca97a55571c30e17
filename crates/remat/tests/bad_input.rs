//! Bad input to the facade (issue 22): one table of cases, each run on both backends —
//! wrong argument counts, dtypes and shapes, empty arrays and zero-size dimensions,
//! non-contiguous and negative-stride arrays. Each gives a clear error or the right
//! answer (the interpreter's on a standard-layout copy), never a panic. docs/reliability.md
//! ("Bad input") lists the table.

use std::sync::Arc;

use ndarray::{s, ArrayD, IxDyn};
use remat::run::{Program, RunOptions};
use remat::{Array, Backend, ClosedJaxpr, Tensor};

/// `sin(a) * b + 1` over `f32[2,3]`.
const PROGRAM: &str = "{ lambda ; a:f32[2,3] b:f32[2,3]. let c:f32[2,3] = sin a; d:f32[2,3] = mul c b; e:f32[2,3] = add d 1.0:f32[] in (e,) }";
/// The same over `f32[0,3]`.
const EMPTY_PROGRAM: &str = "{ lambda ; a:f32[0,3] b:f32[0,3]. let c:f32[0,3] = sin a; d:f32[0,3] = mul c b in (d,) }";

fn f32s(shape: &[usize], offset: f32) -> ArrayD<f32> {
    let n: usize = shape.iter().product();
    ArrayD::from_shape_vec(IxDyn(shape), (0..n).map(|i| i as f32 * 0.25 + offset).collect()).unwrap()
}

/// What a case must give.
enum Want {
    /// The interpreter's answer on standard-layout copies of the arguments.
    Right,
    /// An error whose text holds this.
    Error(&'static str),
}

struct Case {
    what: &'static str,
    program: &'static str,
    args: fn() -> Vec<Array>,
    want: Want,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            what: "right arguments",
            program: PROGRAM,
            args: || vec![Array::F32(f32s(&[2, 3], 0.0)), Array::F32(f32s(&[2, 3], 1.0))],
            want: Want::Right,
        },
        Case {
            what: "one argument too few",
            program: PROGRAM,
            args: || vec![Array::F32(f32s(&[2, 3], 0.0))],
            want: Want::Error("2"),
        },
        Case {
            what: "one argument too many",
            program: PROGRAM,
            args: || vec![Array::F32(f32s(&[2, 3], 0.0)); 3],
            want: Want::Error("2"),
        },
        Case { what: "no arguments", program: PROGRAM, args: Vec::new, want: Want::Error("2") },
        Case {
            what: "f64 for f32",
            program: PROGRAM,
            args: || vec![Array::F64(f32s(&[2, 3], 0.0).mapv(f64::from)), Array::F32(f32s(&[2, 3], 1.0))],
            want: Want::Error("f64"),
        },
        Case {
            what: "i32 for f32",
            program: PROGRAM,
            args: || vec![Array::F32(f32s(&[2, 3], 0.0)), Array::I32(ArrayD::zeros(IxDyn(&[2, 3])))],
            want: Want::Error("i32"),
        },
        Case {
            what: "shape [3,2] for [2,3]",
            program: PROGRAM,
            args: || vec![Array::F32(f32s(&[3, 2], 0.0)), Array::F32(f32s(&[2, 3], 1.0))],
            want: Want::Error("[3,2]"),
        },
        Case {
            what: "rank 1 for rank 2",
            program: PROGRAM,
            args: || vec![Array::F32(f32s(&[6], 0.0)), Array::F32(f32s(&[2, 3], 1.0))],
            want: Want::Error("[6]"),
        },
        Case {
            what: "a scalar for [2,3]",
            program: PROGRAM,
            args: || vec![Array::F32(f32s(&[], 0.0)), Array::F32(f32s(&[2, 3], 1.0))],
            want: Want::Error("f32[]"),
        },
        Case {
            what: "an empty array for [2,3]",
            program: PROGRAM,
            args: || vec![Array::F32(f32s(&[0, 3], 0.0)), Array::F32(f32s(&[2, 3], 1.0))],
            want: Want::Error("[0,3]"),
        },
        Case {
            what: "transposed (column-major) arrays",
            program: PROGRAM,
            args: || {
                vec![Array::F32(f32s(&[3, 2], 0.0).reversed_axes()), Array::F32(f32s(&[3, 2], 1.0).reversed_axes())]
            },
            want: Want::Right,
        },
        Case {
            what: "negative strides (both axes reversed)",
            program: PROGRAM,
            args: || {
                let rev = |a: ArrayD<f32>| {
                    a.into_dimensionality::<ndarray::Ix2>().unwrap().slice_move(s![..;-1, ..;-1]).into_dyn()
                };
                vec![Array::F32(rev(f32s(&[2, 3], 0.0))), Array::F32(rev(f32s(&[2, 3], 1.0)))]
            },
            want: Want::Right,
        },
        Case {
            what: "a strided view (every other column, copied out with its strides)",
            program: PROGRAM,
            args: || {
                let every_other = |a: ArrayD<f32>| {
                    a.into_dimensionality::<ndarray::Ix2>().unwrap().slice_move(s![.., ..;2]).into_dyn()
                };
                vec![Array::F32(every_other(f32s(&[2, 6], 0.0))), Array::F32(every_other(f32s(&[2, 6], 1.0)))]
            },
            want: Want::Right,
        },
        Case {
            what: "zero-size dimension",
            program: EMPTY_PROGRAM,
            args: || vec![Array::F32(f32s(&[0, 3], 0.0)), Array::F32(f32s(&[0, 3], 0.0))],
            want: Want::Right,
        },
        Case {
            what: "zero-size, wrong other extent",
            program: EMPTY_PROGRAM,
            args: || vec![Array::F32(f32s(&[0, 2], 0.0)), Array::F32(f32s(&[0, 3], 0.0))],
            want: Want::Error("[0,2]"),
        },
    ]
}

fn standard(a: &Array) -> Array {
    match a {
        Array::F32(x) => Array::F32(x.as_standard_layout().into_owned()),
        other => other.clone(),
    }
}

#[test]
fn every_bad_input_is_an_error_or_the_right_answer_on_both_backends() {
    let mut failures = Vec::new();
    for case in cases() {
        let jaxpr = remat::ir::parse_jaxpr(case.program, "bad_input.jaxpr").unwrap();
        let closed = ClosedJaxpr::new(Arc::new(jaxpr));
        let args = (case.args)();
        let refs: Vec<&Array> = args.iter().collect();
        for backend in [Backend::Interp, Backend::Jit] {
            let options = RunOptions { backend, ..RunOptions::default() };
            let got = Program::new(closed.clone(), &options).and_then(|p| p.run(&refs));
            let verdict = match (&case.want, got) {
                (Want::Right, Ok(outs)) => {
                    let std_args: Vec<Array> = args.iter().map(standard).collect();
                    let want = remat_interp_eval(&closed, &std_args);
                    (outs == want).then_some(()).ok_or(format!("wrong answer {outs:?}, want {want:?}"))
                }
                (Want::Right, Err(e)) => Err(format!("error {e}")),
                (Want::Error(w), Err(e)) => {
                    e.to_string().contains(w).then_some(()).ok_or(format!("error {e} lacks {w:?}"))
                }
                (Want::Error(w), Ok(outs)) => Err(format!("accepted ({outs:?}), want an error with {w:?}")),
            };
            if let Err(why) = verdict {
                failures.push(format!("{} on {backend:?}: {why}", case.what));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The reference answer, through the facade's interpreter path.
fn remat_interp_eval(closed: &ClosedJaxpr, args: &[Array]) -> Vec<Array> {
    let refs: Vec<&Array> = args.iter().collect();
    let options = RunOptions { backend: Backend::Interp, ..RunOptions::default() };
    Program::new(closed.clone(), &options).unwrap().run(&refs).unwrap()
}

/// The closure functions: a signature is traced per call, so any shape is right; grad of a
/// non-scalar, an empty argument list, and arguments of every layout.
#[test]
fn closure_functions_on_odd_arguments() {
    let f = |(a, b): (Tensor, Tensor)| (a.sin() * b).sum();
    let rev = Array::F32(
        f32s(&[2, 3], 0.0).into_dimensionality::<ndarray::Ix2>().unwrap().slice_move(s![..;-1, ..]).into_dyn(),
    );
    let plain = standard(&rev);
    let b = Array::F32(f32s(&[2, 3], 1.0));
    for backend in [Backend::Interp, Backend::Jit] {
        let g = remat::grad(f).backend(backend);
        assert_eq!(g.call(&(rev.clone(), b.clone())).unwrap(), g.call(&(plain.clone(), b.clone())).unwrap());
        let j = remat::jit(f).backend(backend);
        assert_eq!(j.call(&(rev.clone(), b.clone())).unwrap(), j.call(&(plain.clone(), b.clone())).unwrap());
        // Zero-size arguments: the sum of nothing.
        let empty = Array::F32(f32s(&[0, 3], 0.0));
        assert_eq!(j.call(&(empty.clone(), empty.clone())).unwrap()[0].to_f64_vec(), [0.0]);
        // Mismatched shapes inside the closure are a trace error, not a panic.
        let e = j.call(&(Array::F32(f32s(&[2, 3], 0.0)), Array::F32(f32s(&[3, 2], 0.0)))).unwrap_err();
        assert!(e.to_string().contains("mul"), "{e}");
        // grad of a non-scalar output.
        let e = remat::grad(|x: Tensor| x.sin()).backend(backend).call(&b).unwrap_err();
        assert!(e.to_string().contains("scalar"), "{e}");
    }
}
