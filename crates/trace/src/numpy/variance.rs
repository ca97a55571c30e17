//! `jnp.var` and `jnp.std` with `ddof` and `keepdims`, recorded as JAX 0.10.2 records them:
//! `jit[name=_var]` taking `x` and `ddof` as a traced `i32[]` (the mean with kept axes, the
//! squared deviations summed and divided by `count - ddof`, `nan` where that is not
//! positive, through `jit[name=_where]`), and `jit[name=_std]` around `_var` and `sqrt`.

use std::panic::Location;

use remat_ir::{BinaryOp, CompareOp, DType, ReduceOp, UnaryOp};

use crate::elementwise::{binary_at, compare_at, unary_at, Arg};
use crate::tensor::Tensor;
use crate::transforms::library_jit;

impl Tensor {
    /// `jnp.var(x, axis=axes)` (`ddof=0`, no kept axes) of a float tensor; see
    /// [`Tensor::var_with`].
    #[track_caller]
    pub fn var_axes(&self, axes: &[isize]) -> Tensor {
        self.var_at(Some(axes), Arg::Scalar(0.0, DType::I32), false, Location::caller())
    }

    /// `jnp.var(x, axis=axes, ddof=ddof, keepdims=keepdims)` (`axes` `None`: all): the sum
    /// of squared deviations from the mean divided by `count - ddof` (`nan` if that is not
    /// positive), over a float tensor.
    #[track_caller]
    pub fn var_with(&self, axes: Option<&[isize]>, ddof: usize, keepdims: bool) -> Tensor {
        self.var_at(axes, Arg::Scalar(ddof as f64, DType::I32), keepdims, Location::caller())
    }

    /// `jnp.std(x, axis=axes, ddof=ddof, keepdims=keepdims)`: the square root of
    /// [`Tensor::var_with`], as `jit[name=_std]` around `_var` and `sqrt`.
    #[track_caller]
    pub fn std_with(&self, axes: Option<&[isize]>, ddof: usize, keepdims: bool) -> Tensor {
        let loc = Location::caller();
        if self.axes_or_all("std", axes, loc).is_none() || !self.float_for("std", loc) {
            return Tensor::placeholder(self.aval().clone());
        }
        library_jit(
            "_std",
            &[self.into(), Arg::Scalar(ddof as f64, DType::I32)],
            |inner| {
                let [x, ddof]: [Tensor; 2] = inner.try_into().expect("two inputs");
                let var = x.var_at(axes, ddof.into(), keepdims, loc);
                unary_at(UnaryOp::Sqrt, var.into(), loc)
            },
            loc,
        )
    }

    fn float_for(&self, what: &str, loc: &'static Location<'static>) -> bool {
        if !self.dtype().is_float() {
            crate::trace::record_error(
                loc,
                format!("{what}: {} is not a float tensor (not supported yet)", self.aval()),
            );
        }
        self.dtype().is_float()
    }

    fn var_at(&self, axes: Option<&[isize]>, ddof: Arg, keepdims: bool, loc: &'static Location<'static>) -> Tensor {
        let Some(resolved) = self.axes_or_all("var", axes, loc) else {
            return Tensor::placeholder(self.aval().clone());
        };
        if !self.float_for("var", loc) {
            return Tensor::placeholder(self.aval().clone());
        }
        let count: usize = resolved.iter().map(|&a| self.shape()[a]).product();
        let dtype = self.dtype();
        library_jit(
            "_var",
            &[self.into(), ddof],
            |inner| {
                let [x, ddof]: [Tensor; 2] = inner.try_into().expect("two inputs");
                let mean = x.mean_at(axes, true, loc);
                let centered = binary_at(BinaryOp::Sub, x.clone().into(), mean.into(), loc);
                let squared = unary_at(UnaryOp::Square, centered.into(), loc);
                let ddof = ddof.to_type(dtype, false, loc);
                let normalizer = binary_at(BinaryOp::Sub, Arg::Scalar(count as f64, dtype), ddof.into(), loc);
                let sum = squared.reduce_at(ReduceOp::Sum, axes, keepdims, loc);
                let var = binary_at(BinaryOp::Div, sum.into(), normalizer.clone().into(), loc);
                let positive = compare_at(CompareOp::Gt, normalizer.into(), 0.0.into(), loc);
                super::where_at(&positive, var.into(), f64::NAN.into(), loc)
            },
            loc,
        )
    }
}
