//! `scan`: a loop over the leading axis of arrays, recorded as one `scan` equation, as
//! `jax.lax.scan` records it.
//!
//! The body is traced once on one slice of the scanned-over arrays. What this module
//! checks (each a located error, never a panic): the scanned-over arrays share a leading
//! axis, and the body returns a carry of the same structure and types as the one it
//! receives. Tensors the body captures become the scan's consts (`num_consts`).

use std::panic::Location;
use std::sync::Arc;

use remat_ir::{Aval, ClosedJaxpr, Primitive};

use crate::tensor::Tensor;
use crate::trace::{record_error, Operand};
use crate::traceable::ScanBody;
use crate::transforms::{bind_call, placeholders, trace_body};
use crate::tree::TensorTree;

/// `jax.lax.scan(body, init, xs)`: runs `body(carry, x) -> (carry, y)` over the leading
/// axis of every leaf of `xs`, returning the final carry and the `y`s stacked along a new
/// leading axis. Records one `scan` equation. `body` is a closure of two arguments, or a
/// [`Checkpoint`](crate::Checkpoint) of a function of the pair `(carry, x)` (JAX's
/// `scan(jax.checkpoint(body), ...)`).
///
/// ```
/// use remat_ir::{Aval, DType};
/// use remat_trace::{make_jaxpr, scan, Tensor};
///
/// // A running sum over the rows of `xs`.
/// let f = |(init, xs): (Tensor, Tensor)| scan(|c: Tensor, x: Tensor| (&c + &x, c), init, xs);
/// let traced = make_jaxpr(f, &(Aval::new(DType::F32, vec![3]), Aval::new(DType::F32, vec![5, 3]))).unwrap();
/// assert!(traced.to_string().contains("length=5"));
/// ```
#[track_caller]
pub fn scan<C, X, Y>(body: impl ScanBody<C, X, Y>, init: C, xs: X) -> (C, Y)
where
    C: TensorTree,
    X: TensorTree,
    Y: TensorTree,
{
    scan_at(body, init, xs, false, Location::caller())
}

/// [`scan`] from the last element of `xs` to the first (`reverse=True`); the stacked `y`s
/// stay in the order of `xs`.
#[track_caller]
pub fn scan_reverse<C, X, Y>(body: impl ScanBody<C, X, Y>, init: C, xs: X) -> (C, Y)
where
    C: TensorTree,
    X: TensorTree,
    Y: TensorTree,
{
    scan_at(body, init, xs, true, Location::caller())
}

pub(crate) fn scan_at<C, X, Y>(
    body: impl ScanBody<C, X, Y>,
    init: C,
    xs: X,
    reverse: bool,
    loc: &'static Location<'static>,
) -> (C, Y)
where
    C: TensorTree,
    X: TensorTree,
    Y: TensorTree,
{
    let carry_leaves = init.leaves();
    let x_leaves = xs.leaves();
    let Some(length) = x_leaves.first().and_then(|x| x.shape().first().copied()) else {
        record_error(loc, "scan needs at least one scanned-over array with a leading axis".into());
        return failed(&body, init, &xs, loc);
    };
    if let Some(bad) = x_leaves.iter().find(|x| x.shape().first() != Some(&length)) {
        record_error(loc, format!("scan: every scanned-over array needs leading axis {length}, found {}", bad.aval()));
        return failed(&body, init, &xs, loc);
    }
    let mut in_types: Vec<(Aval, bool)> = carry_leaves.iter().map(|t| (t.aval().clone(), t.is_weak())).collect();
    in_types.extend(x_leaves.iter().map(|x| (Aval::new(x.dtype(), x.shape()[1..].to_vec()), x.is_weak())));
    let n_carry = carry_leaves.len();
    let traced = trace_body(
        &in_types,
        |inner| {
            let mut it = inner.into_iter();
            let c = init.rebuild(&mut it);
            let x = xs.rebuild(&mut it);
            body.call_body(c, x, loc)
        },
        ("the scan body", std::any::type_name_of_val(&body)),
        loc,
    );
    let traced = match traced {
        Ok(t) => t,
        Err((_, y)) => return (init, placeholders(&y)),
    };
    let (carry_out, y) = &traced.out;
    let carry_out = carry_out.leaves();
    if carry_out.len() != n_carry {
        record_error(
            loc,
            format!("scan: the body receives a carry of {n_carry} arrays but returns one of {}", carry_out.len()),
        );
        return (init, placeholders(y));
    }
    for (i, (cin, cout)) in carry_leaves.iter().zip(&carry_out).enumerate() {
        if !cin.aval().same_type(cout.aval()) {
            record_error(
                loc,
                format!(
                    "scan: carry {i} enters the body as {} but leaves it as {}; a carry must keep its type",
                    cin.aval(),
                    cout.aval()
                ),
            );
            return (init, placeholders(y));
        }
    }
    let num_consts = traced.captured.len();
    let mut operands: Vec<Operand> = traced.captured.into_iter().map(Operand::Tensor).collect();
    operands.extend(carry_leaves.iter().cloned().map(Operand::Tensor));
    operands.extend(x_leaves.into_iter().map(Operand::Tensor));
    let prim = Primitive::Scan {
        jaxpr: ClosedJaxpr::new(Arc::new(traced.jaxpr)),
        length,
        reverse,
        num_consts,
        num_carry: n_carry,
        unroll: 1,
    };
    // The body returns (carry, y); the scan returns (carry, y stacked along a new axis 0).
    let stacked: Vec<Tensor> = y
        .leaves()
        .iter()
        .map(|t| {
            let mut shape = vec![length];
            shape.extend_from_slice(t.shape());
            Tensor::placeholder(Aval::new(t.dtype(), shape))
        })
        .collect();
    let template = (init.rebuild(&mut carry_out.into_iter()), y.rebuild(&mut stacked.into_iter()));
    bind_call(prim, &operands, &template, loc)
}

/// After a recorded error, a `(carry, y)` of the right structure: the body runs on
/// placeholder slices (operations record nothing once an error is recorded) only to build
/// `y`'s structure.
fn failed<C: TensorTree, X: TensorTree, Y: TensorTree>(
    body: &impl ScanBody<C, X, Y>,
    init: C,
    xs: &X,
    loc: &'static Location<'static>,
) -> (C, Y) {
    let sliced: Vec<Tensor> = xs
        .leaves()
        .into_iter()
        .map(|x| {
            let shape = x.shape().get(1..).map(<[usize]>::to_vec).unwrap_or_default();
            Tensor::placeholder(Aval::new(x.dtype(), shape))
        })
        .collect();
    let x = xs.rebuild(&mut sliced.into_iter());
    let (_, y) = body.call_body(placeholders(&init), x, loc);
    (init, placeholders(&y))
}
