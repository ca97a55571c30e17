//! Reductions: `sum`, `mean`, `max`, `min`, `prod`, `all`, `any` over all axes or some
//! (negative axes count from the end), with `keepdims`, and `argmax`; recorded as `jnp`'s
//! (`reduce_sum[axes=...]` with the axes in the order given, `keepdims` as a
//! `broadcast_in_dim`, `mean` as a sum divided by the count, `all`/`any` as `reduce_and`/
//! `reduce_or` of the operand converted to `bool`).

use std::panic::Location;

use remat_ir::{BinaryOp, DType, Primitive, ReduceOp};

use super::normalize_axes;
use crate::elementwise::{binary_at, Arg};
use crate::tensor::Tensor;

impl Tensor {
    /// Reduces over `axes` (`None`: all), keeping them as size-1 axes if `keepdims`.
    pub(crate) fn reduce_at(
        &self,
        op: ReduceOp,
        axes: Option<&[isize]>,
        keepdims: bool,
        loc: &'static Location<'static>,
    ) -> Tensor {
        let what = match op {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Prod => "prod",
            ReduceOp::And => "all",
            ReduceOp::Or => "any",
            ReduceOp::Xor => "reduce_xor",
        };
        let Some(axes) = self.axes_or_all(what, axes, loc) else {
            return Tensor::placeholder(self.aval().clone());
        };
        // `jnp.sum` and `jnp.prod` take booleans as integers; `jnp.all` and `jnp.any` take
        // anything as booleans.
        let x = match op {
            ReduceOp::Sum | ReduceOp::Prod if self.dtype() == DType::Bool => self.to_type(DType::I32, false, loc),
            ReduceOp::And | ReduceOp::Or if self.dtype() != DType::Bool => self.to_type(DType::Bool, false, loc),
            _ => self.clone(),
        };
        let r = x.apply_at(Primitive::Reduce { op, axes: axes.clone() }, loc);
        if keepdims {
            let mut kept = axes;
            kept.sort_unstable();
            r.expand_dims_at(&kept, loc)
        } else {
            r
        }
    }

    pub(crate) fn axes_or_all(
        &self,
        what: &str,
        axes: Option<&[isize]>,
        loc: &'static Location<'static>,
    ) -> Option<Vec<usize>> {
        match axes {
            Some(axes) => normalize_axes(what, self, axes, loc),
            None => Some((0..self.ndim()).collect()),
        }
    }

    pub(crate) fn reduce_sum_at(&self, axes: &[usize], loc: &'static Location<'static>) -> Tensor {
        self.apply_at(Primitive::Reduce { op: ReduceOp::Sum, axes: axes.to_vec() }, loc)
    }

    /// `jnp.sum(x)`: the sum of all elements.
    #[track_caller]
    pub fn sum(&self) -> Tensor {
        self.reduce_at(ReduceOp::Sum, None, false, Location::caller())
    }

    /// `jnp.sum(x, axis=axes, keepdims=keepdims)`.
    #[track_caller]
    pub fn sum_axes(&self, axes: &[isize], keepdims: bool) -> Tensor {
        self.reduce_at(ReduceOp::Sum, Some(axes), keepdims, Location::caller())
    }

    /// `jnp.max(x)`: the largest element.
    #[track_caller]
    pub fn max(&self) -> Tensor {
        self.reduce_at(ReduceOp::Max, None, false, Location::caller())
    }

    /// `jnp.max(x, axis=axes, keepdims=keepdims)`.
    #[track_caller]
    pub fn max_axes(&self, axes: &[isize], keepdims: bool) -> Tensor {
        self.reduce_at(ReduceOp::Max, Some(axes), keepdims, Location::caller())
    }

    /// `jnp.min(x)`: the smallest element.
    #[track_caller]
    pub fn min(&self) -> Tensor {
        self.reduce_at(ReduceOp::Min, None, false, Location::caller())
    }

    /// `jnp.min(x, axis=axes, keepdims=keepdims)`.
    #[track_caller]
    pub fn min_axes(&self, axes: &[isize], keepdims: bool) -> Tensor {
        self.reduce_at(ReduceOp::Min, Some(axes), keepdims, Location::caller())
    }

    /// `jnp.prod(x)`: the product of all elements (`reduce_prod`; booleans as `i32`).
    #[track_caller]
    pub fn prod(&self) -> Tensor {
        self.reduce_at(ReduceOp::Prod, None, false, Location::caller())
    }

    /// `jnp.prod(x, axis=axes, keepdims=keepdims)`.
    #[track_caller]
    pub fn prod_axes(&self, axes: &[isize], keepdims: bool) -> Tensor {
        self.reduce_at(ReduceOp::Prod, Some(axes), keepdims, Location::caller())
    }

    /// `jnp.all(x)`: whether every element is true (nonzero): `reduce_and` of `bool`s.
    #[track_caller]
    pub fn all(&self) -> Tensor {
        self.reduce_at(ReduceOp::And, None, false, Location::caller())
    }

    /// `jnp.all(x, axis=axes, keepdims=keepdims)`.
    #[track_caller]
    pub fn all_axes(&self, axes: &[isize], keepdims: bool) -> Tensor {
        self.reduce_at(ReduceOp::And, Some(axes), keepdims, Location::caller())
    }

    /// `jnp.any(x)`: whether some element is true (nonzero): `reduce_or` of `bool`s.
    #[track_caller]
    pub fn any(&self) -> Tensor {
        self.reduce_at(ReduceOp::Or, None, false, Location::caller())
    }

    /// `jnp.any(x, axis=axes, keepdims=keepdims)`.
    #[track_caller]
    pub fn any_axes(&self, axes: &[isize], keepdims: bool) -> Tensor {
        self.reduce_at(ReduceOp::Or, Some(axes), keepdims, Location::caller())
    }

    /// `jnp.mean(x)`: the mean of all elements (integers are averaged as `f32`).
    #[track_caller]
    pub fn mean(&self) -> Tensor {
        self.mean_at(None, false, Location::caller())
    }

    /// `jnp.mean(x, axis=axes, keepdims=keepdims)`: `reduce_sum`, then `div` by the count.
    #[track_caller]
    pub fn mean_axes(&self, axes: &[isize], keepdims: bool) -> Tensor {
        self.mean_at(Some(axes), keepdims, Location::caller())
    }

    pub(crate) fn mean_at(&self, axes: Option<&[isize]>, keepdims: bool, loc: &'static Location<'static>) -> Tensor {
        let Some(resolved) = self.axes_or_all("mean", axes, loc) else {
            return Tensor::placeholder(self.aval().clone());
        };
        let count: usize = resolved.iter().map(|&a| self.shape()[a]).product();
        // Booleans go through `i32` first, as JAX converts them.
        let x = if self.dtype() == DType::Bool { self.to_type(DType::I32, false, loc) } else { self.clone() };
        let x = if x.dtype().is_float() { x } else { x.to_type(DType::F32, false, loc) };
        let sum = x.reduce_at(ReduceOp::Sum, axes, keepdims, loc);
        binary_at(BinaryOp::Div, sum.into(), Arg::Scalar(count as f64, DType::F32), loc)
    }

    /// `jnp.argmax(x, axis=axis)`: the index (`i32`) of the largest element along `axis`
    /// (the first one on ties).
    #[track_caller]
    pub fn argmax(&self, axis: isize) -> Tensor {
        let loc = Location::caller();
        match normalize_axes("argmax", self, &[axis], loc) {
            Some(axes) => self.apply_at(Primitive::Argmax { axes, index_dtype: DType::I32 }, loc),
            None => Tensor::placeholder(self.aval().clone()),
        }
    }

    /// `jnp.argmax(x)`: the index of the largest element of the flattened tensor.
    #[track_caller]
    pub fn argmax_flat(&self) -> Tensor {
        let loc = Location::caller();
        let flat = self.reshape_at(&[self.size()], loc);
        flat.apply_at(Primitive::Argmax { axes: vec![0], index_dtype: DType::I32 }, loc)
    }
}
