//! Bad programs give located errors: `make_jaxpr` returns a `TraceError` naming the line
//! of the user's code that failed and the types involved. Nothing panics, and the next
//! trace starts clean.

use std::cell::RefCell;

use remat_ir::{Array, Aval, DType};
use remat_trace::numpy as jnp;
use remat_trace::{jit, make_jaxpr, named, nn, scan, Tensor, TraceError};

fn f32s(shape: &[usize]) -> Aval {
    Aval::new(DType::F32, shape.to_vec())
}

/// The error is located at `line` of this file and its message contains every one of
/// `parts`.
fn assert_error(err: &TraceError, line: u32, parts: &[&str]) {
    assert_eq!((err.location.file.as_ref(), err.location.line), (file!(), line), "wrong location: {err}");
    for p in parts {
        assert!(err.message.contains(p), "{p:?} missing from: {err}");
    }
}

#[test]
fn shape_mismatch_in_add() {
    let line = line!() + 1;
    let err = make_jaxpr(|(a, b): (Tensor, Tensor)| &a + &b, &(f32s(&[3]), f32s(&[4]))).unwrap_err();
    assert_error(&err, line, &["add", "f32[3]", "f32[4]", "do not broadcast"]);
    // The location prints as `file:line:col` before the message.
    assert!(err.to_string().starts_with(&format!("{}:{line}:", file!())), "{err}");
}

#[test]
fn dot_with_wrong_contracting_size() {
    let f = |(w, x): (Tensor, Tensor)| {
        let h = w.dot(&x).sin();
        h.sum()
    };
    let err = make_jaxpr(f, &(f32s(&[5, 4]), f32s(&[5]))).unwrap_err();
    assert_error(&err, line!() - 4, &["dot", "f32[5,4]", "f32[5]", "size 4", "size 5"]);
}

#[test]
fn matmul_and_einsum_with_wrong_sizes() {
    let err = make_jaxpr(|(a, b): (Tensor, Tensor)| a.matmul(&b), &(f32s(&[2, 3]), f32s(&[4, 5]))).unwrap_err();
    assert_error(&err, line!() - 1, &["f32[2,3]", "f32[4,5]"]);
    let err =
        make_jaxpr(|(a, b): (Tensor, Tensor)| jnp::einsum("ij,jk->ik", &[&a, &b]), &(f32s(&[2, 3]), f32s(&[4, 5])))
            .unwrap_err();
    assert_error(&err, line!() - 2, &["einsum", "'j'", "size 3", "but 4"]);
}

#[test]
fn reduce_over_a_missing_axis() {
    let err = make_jaxpr(|x: Tensor| x.sum_axes(&[2], false), &f32s(&[3, 4])).unwrap_err();
    assert_error(&err, line!() - 1, &["sum", "axis 2", "f32[3,4]"]);
    let err = make_jaxpr(|x: Tensor| x.mean_axes(&[-3], true), &f32s(&[3, 4])).unwrap_err();
    assert_error(&err, line!() - 1, &["mean", "axis -3", "f32[3,4]"]);
    let err = make_jaxpr(|x: Tensor| nn::softmax(&x, 1), &f32s(&[3])).unwrap_err();
    assert_error(&err, line!() - 1, &["softmax", "axis 1", "f32[3]"]);
}

#[test]
fn wrong_argument_tree_shape() {
    let loss = |(params, x): (Vec<Tensor>, Tensor)| params.iter().fold(x, |x, w| w.dot(&x).tanh()).sum();
    let spec = (named("params", vec![f32s(&[4, 4]); 3]), named("x", f32s(&[4])));
    let traced = make_jaxpr(loss, &spec).unwrap();
    let zeros = |shape: &[usize]| Array::zeros(&f32s(shape));

    // One layer too few.
    let args = (named("params", vec![zeros(&[4, 4]); 2]), named("x", zeros(&[4])));
    let err = traced.flatten_args(&args).unwrap_err();
    assert_error(&err, line!() - 1, &["takes 4 arguments", "params[2]: f32[4,4]", "3 were given"]);

    // A matrix of the wrong shape.
    let args = (named("params", vec![zeros(&[4, 4]), zeros(&[4, 3]), zeros(&[4, 4])]), named("x", zeros(&[4])));
    let err = traced.flatten_args(&args).unwrap_err();
    assert_error(&err, line!() - 1, &["argument 1 (params[1])", "traced as f32[4,4]", "given as f32[4,3]"]);

    // Abstract values are not arguments.
    let err = traced.flatten_args(&spec).unwrap_err();
    assert_error(&err, line!() - 1, &["params[0]", "abstract"]);

    // The right tree flattens in JAX's order.
    let args = (named("params", vec![zeros(&[4, 4]); 3]), named("x", zeros(&[4])));
    assert_eq!(traced.flatten_args(&args).unwrap().len(), 4);
}

#[test]
fn a_tensor_escaping_its_trace() {
    let leaked = RefCell::new(None);
    make_jaxpr(
        |x: Tensor| {
            *leaked.borrow_mut() = Some(x.clone());
            x.sin()
        },
        &f32s(&[3]),
    )
    .unwrap();
    let leaked = leaked.into_inner().unwrap();
    let err = make_jaxpr(|y: Tensor| &y + &leaked, &f32s(&[3])).unwrap_err();
    assert_error(&err, line!() - 1, &["f32[3]", "outside the trace that created it"]);
}

#[test]
fn a_tensor_escaping_a_jit_body() {
    let inner = RefCell::new(None);
    let f = |x: Tensor| {
        let block = jit(|x: Tensor| {
            *inner.borrow_mut() = Some(x.cos());
            x.sin()
        });
        let y = block.call(x);
        let escaped = inner.borrow().clone().unwrap();
        y * escaped
    };
    let err = make_jaxpr(f, &f32s(&[2])).unwrap_err();
    assert_error(&err, line!() - 3, &["outside the trace that created it"]);
}

#[test]
fn scan_carry_changing_type() {
    let f = |(init, xs): (Tensor, Tensor)| {
        let (c, ys) = scan(|c: Tensor, x: Tensor| (c.sum_axes(&[0], true), x), init, xs);
        (c, ys)
    };
    let err = make_jaxpr(f, &(f32s(&[3]), f32s(&[5, 3]))).unwrap_err();
    assert_error(&err, line!() - 4, &["carry 0", "enters the body as f32[3]", "leaves it as f32[1]"]);

    // A carry tree of another length.
    let g = |(a, b, xs): (Tensor, Tensor, Tensor)| {
        scan(|c: Vec<Tensor>, x: Tensor| (vec![&c[0] + &x], x), vec![a, b], xs).1
    };
    let err = make_jaxpr(g, &(f32s(&[3]), f32s(&[3]), f32s(&[5, 3]))).unwrap_err();
    assert_error(&err, line!() - 3, &["carry of 2 arrays", "one of 1"]);

    // Scanned-over arrays of different lengths.
    let h = |(init, xs, ys): (Tensor, Tensor, Tensor)| {
        scan(|c: Tensor, (x, y): (Tensor, Tensor)| (&c + &x * &y, ()), init, (xs, ys)).0
    };
    let err = make_jaxpr(h, &(f32s(&[3]), f32s(&[5, 3]), f32s(&[4, 3]))).unwrap_err();
    assert_error(&err, line!() - 3, &["leading axis 5", "f32[4,3]"]);
}

#[test]
fn make_jaxpr_inside_a_trace() {
    let inner_error = RefCell::new(None);
    let f = |x: Tensor| {
        let nested = make_jaxpr(|y: Tensor| y.sin(), &f32s(&[2]));
        *inner_error.borrow_mut() = nested.err();
        x.cos()
    };
    let err = make_jaxpr(f, &f32s(&[2])).unwrap_err();
    let line = line!() - 5;
    assert_error(&err, line, &["make_jaxpr cannot be called while another function is being traced"]);
    assert_error(&inner_error.into_inner().unwrap(), line, &["make_jaxpr"]);
}

#[test]
fn errors_inside_calls_name_the_users_line() {
    let f = |(x, y): (Tensor, Tensor)| {
        let block = jit(|(x, y): (Tensor, Tensor)| x.matmul(&y)).name("block");
        block.call((x, y))
    };
    let err = make_jaxpr(f, &(f32s(&[2, 3]), f32s(&[2, 3]))).unwrap_err();
    assert_error(&err, line!() - 4, &["f32[2,3]"]);
    assert_eq!(err.location.function.as_deref(), Some("block"));

    let err = make_jaxpr(|(c, x): (Tensor, Tensor)| jnp::where_(&c, &x, 0.0), &(f32s(&[3]), f32s(&[4]))).unwrap_err();
    assert_error(&err, line!() - 1, &["where", "condition bool[3]", "x f32[4]"]);
}

#[test]
fn the_first_error_wins_and_the_next_trace_is_clean() {
    let f = |x: Tensor| {
        let a = x.reshape(&[5]);
        let b = x.transpose(&[0, 0]);
        &a + &b
    };
    let err = make_jaxpr(f, &f32s(&[2, 3])).unwrap_err();
    assert_error(&err, line!() - 5, &["reshape", "f32[2,3]", "[5]"]);
    let traced = make_jaxpr(|x: Tensor| x.sin(), &f32s(&[3])).unwrap();
    assert_eq!(traced.to_string(), "{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }");
}

#[test]
fn a_panic_inside_a_trace_is_an_error_and_leaves_no_state_behind() {
    let err = make_jaxpr(
        |x: Tensor| -> Tensor {
            let _y = jit(|x: Tensor| -> Tensor { panic!("user code panics: {}", x.aval()) }).call(x.clone());
            x
        },
        &f32s(&[3]),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("the jit closure `errors::"), "{text}");
    assert!(text.contains("panicked (called at crates/trace/tests/errors.rs:"), "{text}");
    assert!(text.ends_with("user code panics: f32[3]"), "{text}");
    let traced = make_jaxpr(|x: Tensor| x.cos(), &f32s(&[3])).unwrap();
    assert_eq!(traced.to_string(), "{ lambda ; a:f32[3]. let b:f32[3] = cos a in (b,) }");
}

#[test]
fn index_errors() {
    let err = make_jaxpr(|x: Tensor| x.index(remat_trace::idx![3]), &f32s(&[3, 4])).unwrap_err();
    assert_error(&err, line!() - 1, &["index 3 is out of bounds for axis 0 with size 3"]);
    let err = make_jaxpr(|x: Tensor| x.index(remat_trace::idx![0, 0, 0]), &f32s(&[3, 4])).unwrap_err();
    assert_error(&err, line!() - 1, &["too many indices"]);
}

#[test]
fn dtype_errors() {
    let err = make_jaxpr(|x: Tensor| x.powi(-1), &Aval::new(DType::I32, vec![3])).unwrap_err();
    assert_error(&err, line!() - 1, &["integer_pow", "negative"]);
    let idx = Aval::new(DType::F32, vec![]);
    let err =
        make_jaxpr(|(x, i): (Tensor, Tensor)| x.dynamic_slice(&[(&i).into()], &[2]), &(f32s(&[4]), idx)).unwrap_err();
    assert_error(&err, line!() - 1, &["start index must be a scalar i32", "f32[]"]);
}

#[test]
fn a_tensor_from_another_thread() {
    // Each thread traces independently; a tensor of one thread's trace is foreign to any
    // other trace, even one that started just as early.
    let leaked = std::thread::spawn(|| {
        let kept = RefCell::new(None);
        make_jaxpr(
            |x: Tensor| {
                *kept.borrow_mut() = Some(x.clone());
                x
            },
            &f32s(&[3]),
        )
        .unwrap();
        kept.into_inner().unwrap()
    })
    .join()
    .unwrap();
    let err = make_jaxpr(|y: Tensor| &y * &leaked, &f32s(&[3])).unwrap_err();
    assert_error(&err, line!() - 1, &["outside the trace that created it"]);
}
