//! Scans and sorts: `jnp.cumsum`/`cumprod`, `jnp.sort`/`argsort` and `lax.top_k`, recorded
//! as JAX 0.10.2 records them (the `jnp` ones as calls named after the function).

use std::panic::Location;

use remat_ir::{CumulativeOp, DType, Primitive};

use crate::numpy::normalize_axes;
use crate::tensor::Tensor;
use crate::trace::{bind, bind_n, record_error};
use crate::transforms::library_jit;

impl Tensor {
    pub(crate) fn cumulative_at(
        &self,
        op: CumulativeOp,
        name: &'static str,
        axis: Option<isize>,
        reverse: bool,
        loc: &'static Location<'static>,
    ) -> Tensor {
        let axis = match axis {
            None => None,
            Some(a) => match normalize_axes(name, self, &[a], loc) {
                Some(a) => Some(a[0]),
                None => return Tensor::placeholder(self.aval().clone()),
            },
        };
        library_jit(
            name,
            &[self.into()],
            |inner| {
                let x = &inner[0];
                let (x, axis) = match axis {
                    Some(a) => (x.clone(), a),
                    None => (x.reshape_at(&[x.size()], loc), 0),
                };
                // `jnp.cumsum` converts to its result dtype, which is not weakly typed.
                let x = x.to_type(x.dtype(), false, loc);
                x.apply_at(Primitive::Cumulative { op, axis, reverse }, loc)
            },
            loc,
        )
    }

    /// `jnp.cumsum(x, axis=axis)` (`None`: of the flattened `x`); `reverse` sums from the
    /// end (`lax.cumsum`'s `reverse`). Recorded as `jit[name=cumsum]`.
    #[track_caller]
    pub fn cumsum(&self, axis: Option<isize>, reverse: bool) -> Tensor {
        self.cumulative_at(CumulativeOp::Sum, "cumsum", axis, reverse, Location::caller())
    }

    /// `jnp.cumprod(x, axis=axis)`, as [`Tensor::cumsum`]; `jit[name=cumprod]`.
    #[track_caller]
    pub fn cumprod(&self, axis: Option<isize>, reverse: bool) -> Tensor {
        self.cumulative_at(CumulativeOp::Prod, "cumprod", axis, reverse, Location::caller())
    }

    /// `jnp.sort(x, axis=axis)`: ascending along `axis` (stable; NaNs last). Recorded as
    /// `jit[name=sort]` around `sort[num_keys=1]`.
    #[track_caller]
    pub fn sort(&self, axis: isize) -> Tensor {
        let loc = Location::caller();
        let Some(axes) = normalize_axes("sort", self, &[axis], loc) else {
            return Tensor::placeholder(self.aval().clone());
        };
        library_jit(
            "sort",
            &[self.into()],
            |inner| inner[0].apply_at(Primitive::Sort { dimension: axes[0], is_stable: true, num_keys: 1 }, loc),
            loc,
        )
    }

    /// `jnp.argsort(x, axis=axis)`: the `i32` indices that sort `x` along `axis` (stable).
    /// Recorded as `jit[name=argsort]`: a `sort` of `x` with an `iota` along.
    #[track_caller]
    pub fn argsort(&self, axis: isize) -> Tensor {
        let loc = Location::caller();
        let Some(axes) = normalize_axes("argsort", self, &[axis], loc) else {
            return Tensor::placeholder(remat_ir::Aval::new(DType::I32, self.shape().to_vec()));
        };
        library_jit(
            "argsort",
            &[self.into()],
            |inner| {
                let x = &inner[0];
                let iota = Primitive::Iota { dtype: DType::I32, shape: x.shape().to_vec(), dimension: axes[0] };
                let iota = bind(iota, &[], false, loc).remove(0);
                let sort = Primitive::Sort { dimension: axes[0], is_stable: true, num_keys: 1 };
                match bind_n(sort, &[x.into(), iota.into()], &[x.is_weak(), false], loc) {
                    Some(mut outs) => outs.remove(1),
                    None => Tensor::placeholder(remat_ir::Aval::new(DType::I32, x.shape().to_vec())),
                }
            },
            loc,
        )
    }

    /// `lax.top_k(x, k)`: the `k` largest entries along the last axis, in descending order,
    /// and their `i32` indices.
    #[track_caller]
    pub fn top_k(&self, k: usize) -> (Tensor, Tensor) {
        let loc = Location::caller();
        let placeholders = || {
            let mut shape = self.shape().to_vec();
            if let Some(last) = shape.last_mut() {
                *last = k;
            }
            let values = Tensor::placeholder(remat_ir::Aval::new(self.dtype(), shape.clone()));
            (values, Tensor::placeholder(remat_ir::Aval::new(DType::I32, shape)))
        };
        let fail = |message: String| {
            record_error(loc, format!("top_k: {message}"));
            placeholders()
        };
        let Some(&n) = self.shape().last() else {
            return fail(format!("{} has no axes", self.aval()));
        };
        if k > n {
            return fail(format!("k = {k} is more than the last axis of {} has", self.aval()));
        }
        let prim = Primitive::TopK { axis: self.ndim() - 1, k };
        match bind_n(prim, &[self.into()], &[self.is_weak(), false], loc) {
            Some(outs) => (outs[0].clone(), outs[1].clone()),
            None => placeholders(),
        }
    }
}
