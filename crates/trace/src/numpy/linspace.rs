//! `jnp.linspace`, recorded as JAX 0.10.2's `_linspace` records it: a `jit[name=_linspace]`
//! taking `start` and `stop` (Python floats) that converts them to the computation dtype
//! (`f32`), then for `num > 1` interpolates `start * (1 - t) + stop * t` over an `iota`
//! (appending `stop` with the endpoint), for `num = 1` reshapes `start`, for `num = 0`
//! makes an empty array; an integer `dtype` takes the `floor` and converts.

use std::panic::Location;

use remat_ir::{Aval, BinaryOp, DType, LitValue, Primitive};

use crate::elementwise::{binary_at, Arg};
use crate::tensor::Tensor;
use crate::trace::{bind, record_error};
use crate::transforms::library_jit;

/// `jnp.linspace(start, stop, num, endpoint=endpoint)` in `f32`: `num` evenly spaced
/// values from `start` to `stop` (included if `endpoint`).
#[track_caller]
pub fn linspace(start: f64, stop: f64, num: usize, endpoint: bool) -> Tensor {
    linspace_at(start, stop, num, endpoint, DType::F32, Location::caller())
}

/// `jnp.linspace(start, stop, num, endpoint=endpoint, dtype=dtype)` for `f32` or an
/// integer `dtype` (computed in `f32`, then `floor`ed and converted, as JAX does).
#[track_caller]
pub fn linspace_dtype(start: f64, stop: f64, num: usize, endpoint: bool, dtype: DType) -> Tensor {
    linspace_at(start, stop, num, endpoint, dtype, Location::caller())
}

fn linspace_at(
    start: f64,
    stop: f64,
    num: usize,
    endpoint: bool,
    dtype: DType,
    loc: &'static Location<'static>,
) -> Tensor {
    if !(dtype == DType::F32 || dtype.is_integer()) {
        record_error(loc, format!("linspace: dtype {dtype} is not supported (f32 or an integer dtype)"));
        return Tensor::placeholder(Aval::new(dtype, vec![num]));
    }
    let f32 = DType::F32;
    let args = [Arg::Scalar(start, f32), Arg::Scalar(stop, f32)];
    library_jit(
        "_linspace",
        &args,
        |inner| {
            let [start, stop]: [Tensor; 2] = inner.try_into().expect("two inputs");
            let (start, stop) = (start.to_type(f32, false, loc), stop.to_type(f32, false, loc));
            let steps = if endpoint { num.saturating_sub(1) } else { num };
            let out = if num > 1 {
                let divisor = Arg::Scalar(steps as f64, f32);
                // JAX computes the step and does not use it; the equation stays in its jaxpr.
                let delta = binary_at(BinaryOp::Sub, (&stop).into(), (&start).into(), loc);
                binary_at(BinaryOp::Div, delta.into(), divisor.clone(), loc);
                let iota = bind(Primitive::Iota { dtype: f32, shape: vec![steps], dimension: 0 }, &[], false, loc);
                let t = binary_at(BinaryOp::Div, iota[0].clone().into(), divisor, loc);
                let start = start.reshape_at(&[1], loc);
                let from = binary_at(BinaryOp::Sub, 1.0.into(), (&t).into(), loc);
                let from = binary_at(BinaryOp::Mul, start.into(), from.into(), loc);
                let to = binary_at(BinaryOp::Mul, stop.reshape_at(&[1], loc).into(), t.into(), loc);
                let values = binary_at(BinaryOp::Add, from.into(), to.into(), loc);
                if endpoint {
                    let last = Primitive::BroadcastInDim { shape: vec![1], broadcast_dimensions: vec![] };
                    let last = bind(last, &[stop.into()], false, loc).remove(0);
                    bind(Primitive::Concatenate { dimension: 0 }, &[values.into(), last.into()], false, loc).remove(0)
                } else {
                    values
                }
            } else if num == 1 {
                if !endpoint {
                    // The step `stop - start`, computed and not used.
                    binary_at(BinaryOp::Sub, (&stop).into(), (&start).into(), loc);
                }
                start.reshape_at(&[1], loc)
            } else {
                // `jnp.empty` is zeros, made in the output dtype.
                return super::full_at(&[0], LitValue::from_f64(dtype, 0.0), loc);
            };
            if dtype == f32 {
                return out;
            }
            let floored = crate::elementwise::unary_at(remat_ir::UnaryOp::Floor, out.into(), loc);
            floored.to_type(dtype, false, loc)
        },
        loc,
    )
}
