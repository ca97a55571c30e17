//! Random programs, most of them ill-typed, never make the tracer panic: each traces either
//! to a jaxpr that verifies and evaluates, or to an error located in this file.

use proptest::prelude::*;
use remat_ir::{Array, Aval, DType};
use remat_trace::numpy as jnp;
use remat_trace::{checkpoint, idx, jit, make_jaxpr, nn, scan, Tensor};

/// One operation on a pool of tensors: the operands are pool indices (taken modulo the
/// pool's size) and the parameters are arbitrary, so most choices are ill-typed.
#[derive(Clone, Debug)]
enum Op {
    Add(usize, usize),
    Mul(usize, f32),
    Dot(usize, usize),
    Matmul(usize, usize),
    Einsum(usize, usize),
    Sum(usize, Vec<isize>, bool),
    Mean(usize, isize),
    Reshape(usize, Vec<isize>),
    Transpose(usize, Vec<isize>),
    BroadcastTo(usize, Vec<usize>),
    Index(usize, i32),
    Slice(usize, i32, i32),
    Where(usize, usize, usize),
    Softmax(usize, isize),
    Concat(usize, usize, isize),
    Jit(usize),
    Checkpoint(usize, usize),
    Scan(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    let i = 0..8usize;
    let axis = -4..4isize;
    prop_oneof![
        (i.clone(), i.clone()).prop_map(|(a, b)| Op::Add(a, b)),
        (i.clone(), -2.0..2.0f32).prop_map(|(a, s)| Op::Mul(a, s)),
        (i.clone(), i.clone()).prop_map(|(a, b)| Op::Dot(a, b)),
        (i.clone(), i.clone()).prop_map(|(a, b)| Op::Matmul(a, b)),
        (i.clone(), i.clone()).prop_map(|(a, b)| Op::Einsum(a, b)),
        (i.clone(), prop::collection::vec(axis.clone(), 0..3), any::<bool>()).prop_map(|(a, x, k)| Op::Sum(a, x, k)),
        (i.clone(), axis.clone()).prop_map(|(a, x)| Op::Mean(a, x)),
        (i.clone(), prop::collection::vec(-1..7isize, 0..4)).prop_map(|(a, s)| Op::Reshape(a, s)),
        (i.clone(), prop::collection::vec(axis.clone(), 0..4)).prop_map(|(a, p)| Op::Transpose(a, p)),
        (i.clone(), prop::collection::vec(1..4usize, 0..4)).prop_map(|(a, s)| Op::BroadcastTo(a, s)),
        (i.clone(), -4..4i32).prop_map(|(a, k)| Op::Index(a, k)),
        (i.clone(), -4..4i32, -4..5i32).prop_map(|(a, b, e)| Op::Slice(a, b, e)),
        (i.clone(), i.clone(), i.clone()).prop_map(|(c, a, b)| Op::Where(c, a, b)),
        (i.clone(), axis.clone()).prop_map(|(a, x)| Op::Softmax(a, x)),
        (i.clone(), i.clone(), axis).prop_map(|(a, b, x)| Op::Concat(a, b, x)),
        i.clone().prop_map(Op::Jit),
        (i.clone(), i.clone()).prop_map(|(a, b)| Op::Checkpoint(a, b)),
        (i.clone(), i).prop_map(|(a, b)| Op::Scan(a, b)),
    ]
}

/// Applies `op` to the pool and appends its result.
fn apply(pool: &mut Vec<Tensor>, op: &Op) {
    let n = pool.len();
    let t = |i: &usize| pool[i % n].clone();
    let out = match op {
        Op::Add(a, b) => t(a) + t(b),
        Op::Mul(a, s) => t(a) * *s,
        Op::Dot(a, b) => t(a).dot(&t(b)),
        Op::Matmul(a, b) => t(a).matmul(&t(b)),
        Op::Einsum(a, b) => jnp::einsum("ij,jk->ki", &[&t(a), &t(b)]),
        Op::Sum(a, axes, keep) => t(a).sum_axes(axes, *keep),
        Op::Mean(a, axis) => t(a).mean_axes(&[*axis], false),
        Op::Reshape(a, shape) => t(a).reshape(shape),
        Op::Transpose(a, perm) => t(a).transpose(perm),
        Op::BroadcastTo(a, shape) => t(a).broadcast_to(shape),
        Op::Index(a, k) => t(a).index(idx![*k]),
        Op::Slice(a, b, e) => t(a).index(idx![*b..*e]),
        Op::Where(c, a, b) => jnp::where_(&t(c).gt(0.0), t(a), t(b)),
        Op::Softmax(a, axis) => nn::softmax(&t(a), *axis),
        Op::Concat(a, b, axis) => jnp::concatenate(&[&t(a), &t(b)], *axis),
        Op::Jit(a) => jit(|x: Tensor| nn::relu(&x).sin()).call(t(a)),
        Op::Checkpoint(a, b) => {
            let (x, y) = (t(a), t(b));
            checkpoint(|x: Tensor| &x * &y).call(x)
        }
        Op::Scan(a, b) => {
            let (init, xs) = (t(a), t(b));
            scan(|c: Tensor, x: Tensor| (&c + &x, c.clone()), init, xs).0
        }
    };
    pool.push(out);
}

fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1..4usize, 0..4)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_programs_trace_or_fail_cleanly(shapes in prop::collection::vec(shape(), 1..4), ops in prop::collection::vec(op(), 1..8)) {
        let avals: Vec<Aval> = shapes.iter().map(|s| Aval::new(DType::F32, s.clone())).collect();
        let result = make_jaxpr(
            |inputs: Vec<Tensor>| {
                let mut pool = inputs;
                for op in &ops {
                    apply(&mut pool, op);
                }
                pool.pop().expect("at least one tensor")
            },
            &avals,
        );
        match result {
            Ok(traced) => {
                prop_assert!(remat_ir::verify_closed(&traced.jaxpr).is_ok(), "does not verify:\n{traced}");
                let args: Vec<Array> = avals.iter().map(Array::zeros).collect();
                let out = remat_interp::eval_jaxpr(&traced.jaxpr.jaxpr, &traced.jaxpr.consts, &args);
                prop_assert!(out.is_ok(), "does not evaluate: {:?}\n{traced}", out.err());
            }
            Err(e) => prop_assert_eq!(e.location.file.as_ref(), file!(), "{}", e),
        }
    }
}
