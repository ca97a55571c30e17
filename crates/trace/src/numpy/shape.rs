//! Layout operations: `reshape`, `transpose`, `broadcast_to`, `squeeze`, `expand_dims`,
//! `slice`, `pad`, `dynamic_slice` and `dynamic_update_slice`, plus `concatenate` and
//! `stack`. Each records what `jnp`/`lax` records, including nothing at all where JAX
//! records nothing (a reshape to the same shape, an identity permutation).

use std::panic::Location;

use remat_ir::{BinaryOp, CompareOp, DType, LitValue, Primitive};

use super::normalize_axes;
use crate::elementwise::{result_type, Arg};
use crate::tensor::Tensor;
use crate::trace::{bind, record_error, Operand};

impl Tensor {
    pub(crate) fn reshape_at(&self, new_sizes: &[usize], loc: &'static Location<'static>) -> Tensor {
        if new_sizes == self.shape() {
            return self.clone();
        }
        self.apply_at(Primitive::Reshape { new_sizes: new_sizes.to_vec(), dimensions: None }, loc)
    }

    pub(crate) fn transpose_at(&self, permutation: &[usize], loc: &'static Location<'static>) -> Tensor {
        if permutation.iter().enumerate().all(|(i, &p)| i == p) && permutation.len() == self.ndim() {
            return self.clone();
        }
        self.apply_at(Primitive::Transpose { permutation: permutation.to_vec() }, loc)
    }

    pub(crate) fn squeeze_at(&self, dimensions: &[usize], loc: &'static Location<'static>) -> Tensor {
        if dimensions.is_empty() {
            return self.clone();
        }
        self.apply_at(Primitive::Squeeze { dimensions: dimensions.to_vec() }, loc)
    }

    /// `lax.expand_dims`: a `broadcast_in_dim` with size-1 axes at `positions` (sorted
    /// positions in the result).
    pub(crate) fn expand_dims_at(&self, positions: &[usize], loc: &'static Location<'static>) -> Tensor {
        let rank = self.ndim() + positions.len();
        let mut shape = Vec::with_capacity(rank);
        let mut dims = Vec::with_capacity(self.ndim());
        let mut src = self.shape().iter();
        for i in 0..rank {
            if positions.contains(&i) {
                shape.push(1);
            } else {
                shape.push(*src.next().unwrap_or(&1));
                dims.push(i);
            }
        }
        self.apply_at(Primitive::BroadcastInDim { shape, broadcast_dimensions: dims }, loc)
    }

    /// `jnp.broadcast_to`: trailing axes align; size-1 axes stretch.
    pub(crate) fn broadcast_to_at(&self, shape: &[usize], loc: &'static Location<'static>) -> Tensor {
        if shape == self.shape() {
            return self.clone();
        }
        let fits = shape.len() >= self.ndim()
            && self.shape().iter().zip(&shape[shape.len() - self.ndim()..]).all(|(&d, &s)| d == 1 || d == s);
        if !fits {
            record_error(loc, format!("broadcast_to: cannot broadcast {} to shape {shape:?}", self.aval()));
            return Tensor::placeholder(self.aval().clone());
        }
        let lead = shape.len() - self.ndim();
        let prim =
            Primitive::BroadcastInDim { shape: shape.to_vec(), broadcast_dimensions: (lead..shape.len()).collect() };
        self.apply_at(prim, loc)
    }

    /// `jnp.reshape(x, shape)` (row-major); one entry may be `-1`, inferred from the size.
    /// Reshaping to the same shape records nothing.
    #[track_caller]
    pub fn reshape(&self, shape: &[isize]) -> Tensor {
        let loc = Location::caller();
        let known: usize = shape.iter().filter(|&&d| d >= 0).map(|&d| d as usize).product();
        let unknown = shape.iter().filter(|&&d| d < 0).count();
        let new_sizes: Option<Vec<usize>> = match unknown {
            0 if known == self.size() => Some(shape.iter().map(|&d| d as usize).collect()),
            1 if shape.iter().all(|&d| d >= -1) && known > 0 && self.size().is_multiple_of(known) => {
                Some(shape.iter().map(|&d| if d < 0 { self.size() / known } else { d as usize }).collect())
            }
            _ => None,
        };
        match new_sizes {
            Some(new_sizes) => self.reshape_at(&new_sizes, loc),
            None => {
                record_error(
                    loc,
                    format!("reshape: cannot reshape {} ({} elements) to {shape:?}", self.aval(), self.size()),
                );
                Tensor::placeholder(self.aval().clone())
            }
        }
    }

    /// `x.T` (`jnp.transpose(x)`): reverses the axes.
    #[track_caller]
    pub fn t(&self) -> Tensor {
        let permutation: Vec<usize> = (0..self.ndim()).rev().collect();
        self.transpose_at(&permutation, Location::caller())
    }

    /// `jnp.transpose(x, axes)`: axis `i` of the result is axis `axes[i]` of `x` (negative
    /// axes count from the end).
    #[track_caller]
    pub fn transpose(&self, axes: &[isize]) -> Tensor {
        let loc = Location::caller();
        match normalize_axes("transpose", self, axes, loc) {
            Some(p) if p.len() == self.ndim() => self.transpose_at(&p, loc),
            Some(_) => {
                record_error(
                    loc,
                    format!("transpose: axes {axes:?} are not a permutation of the axes of {}", self.aval()),
                );
                Tensor::placeholder(self.aval().clone())
            }
            None => Tensor::placeholder(self.aval().clone()),
        }
    }

    /// `jnp.broadcast_to(x, shape)`: NumPy broadcasting (trailing axes align; size-1 axes
    /// stretch), one `broadcast_in_dim`.
    #[track_caller]
    pub fn broadcast_to(&self, shape: &[usize]) -> Tensor {
        self.broadcast_to_at(shape, Location::caller())
    }

    /// `jnp.squeeze(x, axes)`: removes the given size-1 axes.
    #[track_caller]
    pub fn squeeze(&self, axes: &[isize]) -> Tensor {
        let loc = Location::caller();
        match normalize_axes("squeeze", self, axes, loc) {
            Some(mut dims) => {
                dims.sort_unstable();
                self.squeeze_at(&dims, loc)
            }
            None => Tensor::placeholder(self.aval().clone()),
        }
    }

    /// `jnp.squeeze(x)`: removes every size-1 axis.
    #[track_caller]
    pub fn squeeze_all(&self) -> Tensor {
        let dims: Vec<usize> = (0..self.ndim()).filter(|&i| self.shape()[i] == 1).collect();
        self.squeeze_at(&dims, Location::caller())
    }

    /// `jnp.expand_dims(x, axes)` (like `x[:, None]`): inserts size-1 axes at `axes`, which
    /// are positions in the result (negative ones count from its end). Records a
    /// `broadcast_in_dim`, as JAX does.
    #[track_caller]
    pub fn expand_dims(&self, axes: &[isize]) -> Tensor {
        let loc = Location::caller();
        let rank = (self.ndim() + axes.len()) as isize;
        let mut positions = Vec::with_capacity(axes.len());
        for &a in axes {
            let p = if a < 0 { a + rank } else { a };
            if p < 0 || p >= rank || positions.contains(&(p as usize)) {
                record_error(
                    loc,
                    format!("expand_dims: axes {axes:?} do not fit the result rank {rank} for {}", self.aval()),
                );
                return Tensor::placeholder(self.aval().clone());
            }
            positions.push(p as usize);
        }
        positions.sort_unstable();
        self.expand_dims_at(&positions, loc)
    }

    /// `lax.slice(x, starts, limits)`: the elements from `starts` (inclusive) to `limits`
    /// (exclusive) on every axis. For NumPy-style `x[1:4]` see [`Tensor::index`].
    #[track_caller]
    pub fn slice(&self, starts: &[usize], limits: &[usize]) -> Tensor {
        let prim = Primitive::Slice { start_indices: starts.to_vec(), limit_indices: limits.to_vec(), strides: None };
        self.apply_at(prim, Location::caller())
    }

    /// `lax.slice(x, starts, limits, strides)`: every `strides[i]`-th element.
    #[track_caller]
    pub fn slice_strided(&self, starts: &[usize], limits: &[usize], strides: &[usize]) -> Tensor {
        let strides = if strides.iter().all(|&s| s == 1) { None } else { Some(strides.to_vec()) };
        let prim = Primitive::Slice { start_indices: starts.to_vec(), limit_indices: limits.to_vec(), strides };
        self.apply_at(prim, Location::caller())
    }

    /// `lax.pad(x, value, config)`: pads each axis with `(low, high, interior)` copies of
    /// `value` (negative `low`/`high` crop).
    #[track_caller]
    pub fn pad(&self, value: impl Into<Arg>, config: &[(i64, i64, i64)]) -> Tensor {
        let loc = Location::caller();
        let value = match value.into() {
            Arg::Scalar(v, _) => Operand::Literal(LitValue::from_f64(self.dtype(), v)),
            Arg::Tensor(t) => Operand::Tensor(t.to_type(self.dtype(), self.is_weak(), loc)),
        };
        let prim = Primitive::Pad { padding_config: config.to_vec() };
        bind(prim, &[self.into(), value], self.is_weak(), loc).remove(0)
    }

    /// `lax.dynamic_slice(x, starts, sizes)`: the block of `sizes` starting at `starts`,
    /// which may be traced `i32` scalars. As in JAX, a negative start counts from the end
    /// and starts are clamped so that the block fits.
    #[track_caller]
    pub fn dynamic_slice(&self, starts: &[Arg], sizes: &[usize]) -> Tensor {
        let loc = Location::caller();
        let Some(mut operands) = start_indices(self, starts, loc) else {
            return Tensor::placeholder(self.aval().clone());
        };
        operands.insert(0, self.into());
        bind(Primitive::DynamicSlice { slice_sizes: sizes.to_vec() }, &operands, self.is_weak(), loc).remove(0)
    }

    /// `lax.dynamic_update_slice(x, update, starts)`: `x` with the block at `starts`
    /// replaced by `update` (starts normalized and clamped as in [`Tensor::dynamic_slice`]).
    #[track_caller]
    pub fn dynamic_update_slice(&self, update: &Tensor, starts: &[Arg]) -> Tensor {
        let loc = Location::caller();
        let Some(mut operands) = start_indices(self, starts, loc) else {
            return Tensor::placeholder(self.aval().clone());
        };
        let update = update.to_type(self.dtype(), self.is_weak(), loc);
        operands.splice(0..0, [self.into(), update.into()]);
        bind(Primitive::DynamicUpdateSlice, &operands, self.is_weak(), loc).remove(0)
    }
}

/// JAX's `_dynamic_slice_indices`: a static start is normalized to a literal; a traced one
/// becomes `select_n(i < 0, i, i + size)`.
fn start_indices(x: &Tensor, starts: &[Arg], loc: &'static Location<'static>) -> Option<Vec<Operand>> {
    if starts.len() != x.ndim() {
        record_error(loc, format!("{} start indices for {}; expected one per axis", starts.len(), x.aval()));
        return None;
    }
    let mut out = Vec::with_capacity(starts.len());
    for (start, &size) in starts.iter().zip(x.shape()) {
        match start {
            Arg::Scalar(v, _) => {
                let i = *v as i64;
                let i = if i < 0 { i + size as i64 } else { i };
                out.push(Operand::Literal(LitValue::I32(i as i32)));
            }
            Arg::Tensor(t) if t.dtype() == DType::I32 && t.ndim() == 0 => {
                let negative = bind(
                    Primitive::Compare(CompareOp::Lt),
                    &[t.into(), Operand::Literal(LitValue::I32(0))],
                    false,
                    loc,
                )
                .remove(0);
                let wrapped = bind(
                    Primitive::Binary(BinaryOp::Add),
                    &[t.into(), Operand::Literal(LitValue::I32(size as i32))],
                    t.is_weak(),
                    loc,
                )
                .remove(0);
                let i = bind(Primitive::SelectN, &[negative.into(), t.into(), wrapped.into()], t.is_weak(), loc);
                out.extend(i.into_iter().map(Operand::Tensor));
            }
            Arg::Tensor(t) => {
                record_error(loc, format!("a start index must be a scalar i32, found {}", t.aval()));
                return None;
            }
        }
    }
    Some(out)
}

/// `jnp.concatenate(xs, axis)`: joins tensors along an existing axis (negative counts from
/// the end); dtypes are promoted first.
#[track_caller]
pub fn concatenate(xs: &[&Tensor], axis: isize) -> Tensor {
    concatenate_at(xs, axis, Location::caller())
}

fn concatenate_at(xs: &[&Tensor], axis: isize, loc: &'static Location<'static>) -> Tensor {
    let Some(first) = xs.first() else {
        record_error(loc, "concatenate needs at least one tensor".into());
        return Tensor::placeholder(remat_ir::Aval::scalar(DType::F32));
    };
    let Some(axes) = normalize_axes("concatenate", first, &[axis], loc) else {
        return Tensor::placeholder(first.aval().clone());
    };
    if xs.len() == 1 {
        return (*first).clone();
    }
    let types: Vec<(DType, bool)> = xs.iter().map(|x| (x.dtype(), x.is_weak())).collect();
    let (dtype, weak) = result_type(&types);
    let operands: Vec<Operand> = xs.iter().map(|x| Operand::Tensor(x.to_type(dtype, weak, loc))).collect();
    bind(Primitive::Concatenate { dimension: axes[0] }, &operands, weak, loc).remove(0)
}

/// `jnp.stack(xs, axis)`: joins tensors of one shape along a new axis (negative counts
/// from the end of the result's axes); dtypes are promoted first, then one `stack`.
#[track_caller]
pub fn stack(xs: &[&Tensor], axis: isize) -> Tensor {
    let loc = Location::caller();
    let Some(first) = xs.first() else {
        record_error(loc, "stack needs at least one tensor".into());
        return Tensor::placeholder(remat_ir::Aval::scalar(DType::F32));
    };
    let rank = first.ndim() as isize + 1;
    let a = if axis < 0 { axis + rank } else { axis };
    if a < 0 || a >= rank {
        record_error(loc, format!("stack: axis {axis} is out of range for rank {rank}"));
        return Tensor::placeholder(first.aval().clone());
    }
    let types: Vec<(DType, bool)> = xs.iter().map(|x| (x.dtype(), x.is_weak())).collect();
    let (dtype, weak) = result_type(&types);
    let operands: Vec<Operand> = xs.iter().map(|x| Operand::Tensor(x.to_type(dtype, weak, loc))).collect();
    bind(Primitive::Stack { axis: a as usize }, &operands, weak, loc).remove(0)
}

/// `jnp.unstack(x, axis)`: the slices of `x` along `axis` (negative counts from the end),
/// that axis removed: one `unstack`.
#[track_caller]
pub fn unstack(x: &Tensor, axis: isize) -> Vec<Tensor> {
    let loc = Location::caller();
    let Some(axes) = normalize_axes("unstack", x, &[axis], loc) else {
        return vec![Tensor::placeholder(x.aval().clone())];
    };
    bind(Primitive::Unstack { axis: axes[0] }, &[x.into()], x.is_weak(), loc)
}

/// `jnp.tile(x, reps)`: `x` repeated `reps[k]` times along each axis; fewer reps than
/// axes repeat the last axes, more give `x` leading axes of 1 first (a `broadcast_in_dim`).
#[track_caller]
pub fn tile(x: &Tensor, reps: &[usize]) -> Tensor {
    let loc = Location::caller();
    let extra = reps.len().saturating_sub(x.ndim());
    let x = if extra > 0 { x.expand_dims_at(&(0..extra).collect::<Vec<usize>>(), loc) } else { x.clone() };
    let mut all = vec![1; x.ndim() - reps.len().min(x.ndim())];
    all.extend(reps);
    x.apply_at(Primitive::Tile { reps: all }, loc)
}

/// How [`Tensor::split`] cuts an axis: into equal pieces, or before each index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sections {
    /// `jnp.split(x, n)`: `n` pieces of equal size (which must divide the axis).
    Count(usize),
    /// `jnp.split(x, [i, j, ...])`: pieces `[:i]`, `[i:j]`, ..., `[last:]` (indices clamp
    /// to the axis, as NumPy's do; negative ones count from the end).
    Indices(Vec<i64>),
}

impl Tensor {
    /// `jnp.split(x, sections, axis=axis)`: consecutive pieces along `axis`, recorded as
    /// one `split` whose sizes print as NumPy integers, as JAX's do.
    #[track_caller]
    pub fn split(&self, sections: Sections, axis: isize) -> Vec<Tensor> {
        let loc = Location::caller();
        let Some(axes) = normalize_axes("split", self, &[axis], loc) else {
            return vec![Tensor::placeholder(self.aval().clone())];
        };
        let (axis, n) = (axes[0], self.shape()[axes[0]]);
        let sizes: Vec<usize> = match sections {
            Sections::Count(0) => {
                record_error(loc, "split: the number of sections must be positive".into());
                return vec![Tensor::placeholder(self.aval().clone())];
            }
            Sections::Count(k) if n % k != 0 => {
                let message =
                    format!("split: axis {axis} of {} (size {n}) does not split into {k} equal sections", self.aval());
                record_error(loc, message);
                return vec![Tensor::placeholder(self.aval().clone())];
            }
            Sections::Count(k) => vec![n / k; k],
            Sections::Indices(indices) => {
                let clamp = |i: i64| if i < 0 { (i + n as i64).max(0) } else { i.min(n as i64) } as usize;
                let mut bounds: Vec<usize> = indices.iter().map(|&i| clamp(i)).collect();
                bounds.insert(0, 0);
                bounds.push(n);
                bounds.windows(2).map(|w| w[1].saturating_sub(w[0])).collect()
            }
        };
        self.split_sizes_at(axis, &sizes, loc)
    }

    /// `jnp.array_split(x, sections, axis=axis)`: `sections` consecutive pieces along
    /// `axis` that need not be equal: the first `n % sections` have one element more
    /// (NumPy's rule), recorded as one `split`.
    #[track_caller]
    pub fn array_split(&self, sections: usize, axis: isize) -> Vec<Tensor> {
        let loc = Location::caller();
        let Some(axes) = normalize_axes("array_split", self, &[axis], loc) else {
            return vec![Tensor::placeholder(self.aval().clone())];
        };
        if sections == 0 {
            record_error(loc, "array_split: the number of sections must be positive".into());
            return vec![Tensor::placeholder(self.aval().clone())];
        }
        let (axis, n) = (axes[0], self.shape()[axes[0]]);
        let (part, rest) = (n / sections, n % sections);
        let sizes: Vec<usize> = (0..sections).map(|i| if i < rest { part + 1 } else { part }).collect();
        self.split_sizes_at(axis, &sizes, loc)
    }

    /// One `split` into `sizes` along `axis`, the sizes printed as NumPy integers.
    fn split_sizes_at(&self, axis: usize, sizes: &[usize], loc: &'static Location<'static>) -> Vec<Tensor> {
        let spelled: Vec<String> = sizes.iter().map(|s| format!("np.int64({s})")).collect();
        let spelled =
            if spelled.len() == 1 { format!("({},)", spelled[0]) } else { format!("({})", spelled.join(", ")) };
        let prim = Primitive::Split { axis, sizes: sizes.to_vec() };
        match crate::trace::bind_n(prim, &[self.into()], &[self.is_weak()], loc) {
            Some(outs) => {
                crate::trace::spell_last_params(&[("sizes", spelled)]);
                outs
            }
            None => vec![Tensor::placeholder(self.aval().clone())],
        }
    }

    /// `list(x)`, `a, b = x`: the rows of `x` along axis 0, as iterating over a JAX array
    /// gives them: each a `slice` (with unit strides printed) and a `squeeze`. A scalar
    /// cannot be iterated (an error, as in JAX).
    #[track_caller]
    pub fn unstack(&self) -> Vec<Tensor> {
        let loc = Location::caller();
        let Some(&n) = self.shape().first() else {
            record_error(loc, format!("iteration over a 0-d tensor ({})", self.aval()));
            return vec![Tensor::placeholder(self.aval().clone())];
        };
        let rank = self.ndim();
        (0..n)
            .map(|i| {
                let mut starts = vec![0; rank];
                let mut limits = self.shape().to_vec();
                starts[0] = i;
                limits[0] = i + 1;
                let prim =
                    Primitive::Slice { start_indices: starts, limit_indices: limits, strides: Some(vec![1; rank]) };
                self.apply_at(prim, loc).apply_at(Primitive::Squeeze { dimensions: vec![0] }, loc)
            })
            .collect()
    }

    /// `jnp.tril(x, k)`: `x` with the elements above the `k`-th diagonal zeroed, for a
    /// matrix `x` or a stack of them (its last two axes). Recorded as `jit[name=tril]`: an
    /// `iota` mask of the last two axes (broadcast over the others) and a `select_n`.
    #[track_caller]
    pub fn tril(&self, k: i64) -> Tensor {
        self.triangle_at("tril", k, Location::caller())
    }

    /// `jnp.triu(x, k)`: `x` with the elements below the `k`-th diagonal zeroed, for a
    /// matrix `x` or a stack of them; `jit[name=triu]`.
    #[track_caller]
    pub fn triu(&self, k: i64) -> Tensor {
        self.triangle_at("triu", k, Location::caller())
    }

    fn triangle_at(&self, name: &'static str, k: i64, loc: &'static Location<'static>) -> Tensor {
        if self.ndim() < 2 {
            let message =
                format!("{name}: {} has fewer than 2 axes (it needs a matrix or a stack of them)", self.aval());
            record_error(loc, message);
            return Tensor::placeholder(self.aval().clone());
        }
        crate::transforms::library_jit(
            name,
            &[self.into()],
            |inner| {
                let x = &inner[0];
                let rank = x.ndim();
                let matrix = x.shape()[rank - 2..].to_vec();
                let iota = |dimension| {
                    let prim = Primitive::Iota { dtype: DType::I32, shape: matrix.clone(), dimension };
                    bind(prim, &[], false, loc).remove(0)
                };
                // The mask of `tri(k)`: row + k >= column (`triu` zeroes `tri(k - 1)`).
                let offset = if name == "tril" { k } else { k - 1 };
                let rows = crate::elementwise::binary_at(BinaryOp::Add, iota(0).into(), (offset as i32).into(), loc);
                let mask = crate::elementwise::compare_at(CompareOp::Ge, rows.into(), iota(1).into(), loc);
                let mask = if rank == 2 {
                    mask
                } else {
                    let prim = Primitive::BroadcastInDim {
                        shape: x.shape().to_vec(),
                        broadcast_dimensions: vec![rank - 2, rank - 1],
                    };
                    mask.apply_at(prim, loc)
                };
                let zeros = crate::numpy::full_at(x.shape(), LitValue::from_f64(x.dtype(), 0.0), loc);
                let (on_false, on_true) = if name == "tril" { (zeros, x.clone()) } else { (x.clone(), zeros) };
                bind(Primitive::SelectN, &[mask.into(), on_false.into(), on_true.into()], x.is_weak(), loc).remove(0)
            },
            loc,
        )
    }
}
