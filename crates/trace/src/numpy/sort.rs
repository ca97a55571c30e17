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
        self.sort_at(Some(axis), false, Location::caller())
    }

    /// `jnp.sort(x, axis=axis, descending=descending)`: `axis` `None` sorts the flattened
    /// `x` (a `reshape` first); descending order is the ascending sort then `rev`.
    #[track_caller]
    pub fn sort_with(&self, axis: Option<isize>, descending: bool) -> Tensor {
        self.sort_at(axis, descending, Location::caller())
    }

    /// The flattened `x` and axis 0 for `None`, else `x` and its normalized axis.
    fn sort_axis(
        x: &Tensor,
        what: &str,
        axis: Option<isize>,
        loc: &'static Location<'static>,
    ) -> Option<(Tensor, usize)> {
        match axis {
            None => Some((x.reshape_at(&[x.size()], loc), 0)),
            Some(a) => normalize_axes(what, x, &[a], loc).map(|axes| (x.clone(), axes[0])),
        }
    }

    fn sort_at(&self, axis: Option<isize>, descending: bool, loc: &'static Location<'static>) -> Tensor {
        if let Some(a) = axis {
            if normalize_axes("sort", self, &[a], loc).is_none() {
                return Tensor::placeholder(self.aval().clone());
            }
        }
        library_jit(
            "sort",
            &[self.into()],
            |inner| {
                let Some((x, axis)) = Tensor::sort_axis(&inner[0], "sort", axis, loc) else {
                    return Tensor::placeholder(inner[0].aval().clone());
                };
                let sorted = x.apply_at(Primitive::Sort { dimension: axis, is_stable: true, num_keys: 1 }, loc);
                if descending {
                    sorted.apply_at(Primitive::Rev { dimensions: vec![axis] }, loc)
                } else {
                    sorted
                }
            },
            loc,
        )
    }

    /// `jnp.argsort(x, axis=axis)`: the `i32` indices that sort `x` along `axis` (stable).
    /// Recorded as `jit[name=argsort]`: a `sort` of `x` with an `iota` along.
    #[track_caller]
    pub fn argsort(&self, axis: isize) -> Tensor {
        self.argsort_at(Some(axis), false, Location::caller())
    }

    /// `jnp.argsort(x, axis=axis, descending=descending)`: `axis` `None` sorts the
    /// flattened `x`; descending (still stable: equal elements keep their order) sorts the
    /// reversed `x` and `iota` and reverses the indices, as JAX does.
    #[track_caller]
    pub fn argsort_with(&self, axis: Option<isize>, descending: bool) -> Tensor {
        self.argsort_at(axis, descending, Location::caller())
    }

    fn argsort_at(&self, axis: Option<isize>, descending: bool, loc: &'static Location<'static>) -> Tensor {
        let out_shape = if axis.is_some() { self.shape().to_vec() } else { vec![self.size()] };
        let placeholder = || Tensor::placeholder(remat_ir::Aval::new(DType::I32, out_shape.clone()));
        if let Some(a) = axis {
            if normalize_axes("argsort", self, &[a], loc).is_none() {
                return placeholder();
            }
        }
        library_jit(
            "argsort",
            &[self.into()],
            |inner| {
                let Some((x, axis)) = Tensor::sort_axis(&inner[0], "argsort", axis, loc) else {
                    return placeholder();
                };
                let iota = Primitive::Iota { dtype: DType::I32, shape: x.shape().to_vec(), dimension: axis };
                let iota = bind(iota, &[], false, loc).remove(0);
                let rev = || Primitive::Rev { dimensions: vec![axis] };
                let (x, iota) =
                    if descending { (x.apply_at(rev(), loc), iota.apply_at(rev(), loc)) } else { (x, iota) };
                let sort = Primitive::Sort { dimension: axis, is_stable: true, num_keys: 1 };
                match bind_n(sort, &[(&x).into(), iota.into()], &[x.is_weak(), false], loc) {
                    Some(mut outs) if descending => outs.remove(1).apply_at(rev(), loc),
                    Some(mut outs) => outs.remove(1),
                    None => placeholder(),
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
