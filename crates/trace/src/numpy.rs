//! A `jax.numpy`-like surface over [`Tensor`], decomposing into the same primitives as
//! JAX's (`jnp.dot` is `dot_general` with `preferred_element_type`, `jnp.mean` is
//! `reduce_sum` then `div`, `keepdims` is a `broadcast_in_dim`, ...), so traced programs
//! print as JAX's do.

use std::panic::Location;

use remat_ir::{DType, DotDimensionNumbers, Primitive, ReduceOp, UnaryOp};

use crate::tensor::{binary, promote, Arg, Tensor};
use crate::trace::{bind, record_error, Operand};

/// Resolves possibly negative axes against `ndim`; records an error if one is out of range.
fn axes(x: &Tensor, axes: &[isize], loc: &'static Location<'static>) -> Option<Vec<usize>> {
    let n = x.ndim() as isize;
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let r = if a < 0 { a + n } else { a };
        if r < 0 || r >= n {
            record_error(loc, format!("axis {a} is out of range for {}", x.aval()));
            return None;
        }
        if out.contains(&(r as usize)) {
            record_error(loc, format!("axis {a} is repeated"));
            return None;
        }
        out.push(r as usize);
    }
    Some(out)
}

fn dot_general(a: &Tensor, b: &Tensor, dn: DotDimensionNumbers, loc: &'static Location<'static>) -> Tensor {
    // Dot products take no rank promotion; only the dtypes are unified.
    let dtype = if rank_of(a.dtype()) >= rank_of(b.dtype()) { a.dtype() } else { b.dtype() };
    let prim = Primitive::DotGeneral { dimension_numbers: dn, preferred_element_type: Some(dtype) };
    let (a, b) = (a.astype_at(dtype, loc), b.astype_at(dtype, loc));
    bind(prim, &[a.into(), b.into()], false, loc).remove(0)
}

fn rank_of(d: DType) -> u8 {
    match d {
        DType::Bool => 0,
        DType::I32 => 1,
        DType::F32 => 2,
        DType::F64 => 3,
    }
}

impl Tensor {
    fn astype_at(&self, dtype: DType, loc: &'static Location<'static>) -> Tensor {
        if self.dtype() == dtype {
            self.clone()
        } else {
            self.convert_at(dtype, loc)
        }
    }

    /// `jnp.dot(a, b)`: the sum product over the last axis of `a` and the second-to-last
    /// axis of `b` (the only axis of a 1-D `b`).
    #[track_caller]
    pub fn dot(&self, b: &Tensor) -> Tensor {
        let loc = Location::caller();
        if self.ndim() == 0 || b.ndim() == 0 {
            return binary(remat_ir::BinaryOp::Mul, self, b);
        }
        let lc = self.ndim() - 1;
        let rc = if b.ndim() >= 2 { b.ndim() - 2 } else { 0 };
        let dn = DotDimensionNumbers { lhs_contracting: vec![lc], rhs_contracting: vec![rc], ..Default::default() };
        dot_general(self, b, dn, loc)
    }

    /// `a @ b` (`jnp.matmul`): like `dot` for 1-D and 2-D operands; for 3-D and more, the
    /// leading axes are batch axes, and a 2-D `b` applies to every row of `a`.
    #[track_caller]
    pub fn matmul(&self, b: &Tensor) -> Tensor {
        let loc = Location::caller();
        let (ra, rb) = (self.ndim(), b.ndim());
        if ra == 0 || rb == 0 {
            record_error(loc, "matmul: operands must have at least one dimension".into());
            return Tensor::placeholder(self.aval().clone());
        }
        if rb <= 2 || ra == 1 {
            return dot_general(
                self,
                b,
                DotDimensionNumbers {
                    lhs_contracting: vec![ra - 1],
                    rhs_contracting: vec![rb.saturating_sub(2)],
                    ..Default::default()
                },
                loc,
            );
        }
        if ra != rb {
            record_error(loc, format!("matmul: batch ranks of {} and {} differ", self.aval(), b.aval()));
            return Tensor::placeholder(self.aval().clone());
        }
        let batch: Vec<usize> = (0..ra - 2).collect();
        let dn = DotDimensionNumbers {
            lhs_contracting: vec![ra - 1],
            rhs_contracting: vec![rb - 2],
            lhs_batch: batch.clone(),
            rhs_batch: batch,
        };
        dot_general(self, b, dn, loc)
    }

    fn reduce(
        &self,
        op: ReduceOp,
        axes_arg: Option<&[isize]>,
        keepdims: bool,
        loc: &'static Location<'static>,
    ) -> Tensor {
        let all: Vec<isize> = (0..self.ndim() as isize).collect();
        let Some(ax) = axes(self, axes_arg.unwrap_or(&all), loc) else {
            return Tensor::placeholder(self.aval().clone());
        };
        let mut sorted = ax.clone();
        sorted.sort_unstable();
        let r = self.apply_at(Primitive::Reduce { op, axes: sorted.clone() }, loc);
        if keepdims {
            let shape: Vec<usize> =
                self.shape().iter().enumerate().map(|(i, &d)| if sorted.contains(&i) { 1 } else { d }).collect();
            let kept: Vec<usize> = (0..self.ndim()).filter(|i| !sorted.contains(i)).collect();
            r.apply_at(Primitive::BroadcastInDim { shape, broadcast_dimensions: kept }, loc)
        } else {
            r
        }
    }

    fn apply_at(&self, prim: Primitive, loc: &'static Location<'static>) -> Tensor {
        let weak = self.is_weak();
        bind(prim, &[self.into()], weak, loc).remove(0)
    }

    /// `jnp.sum(x)` over every axis.
    #[track_caller]
    pub fn sum(&self) -> Tensor {
        self.reduce(ReduceOp::Sum, None, false, Location::caller())
    }

    /// `jnp.sum(x, axis=axes, keepdims=keepdims)`; negative axes count from the end.
    #[track_caller]
    pub fn sum_axes(&self, axes: &[isize], keepdims: bool) -> Tensor {
        self.reduce(ReduceOp::Sum, Some(axes), keepdims, Location::caller())
    }

    /// `jnp.max(x, axis=axes, keepdims=keepdims)`.
    #[track_caller]
    pub fn max_axes(&self, axes: &[isize], keepdims: bool) -> Tensor {
        self.reduce(ReduceOp::Max, Some(axes), keepdims, Location::caller())
    }

    /// `jnp.min(x, axis=axes, keepdims=keepdims)`.
    #[track_caller]
    pub fn min_axes(&self, axes: &[isize], keepdims: bool) -> Tensor {
        self.reduce(ReduceOp::Min, Some(axes), keepdims, Location::caller())
    }

    /// `jnp.max(x)` over every axis.
    #[track_caller]
    pub fn max(&self) -> Tensor {
        self.reduce(ReduceOp::Max, None, false, Location::caller())
    }

    /// `jnp.min(x)` over every axis.
    #[track_caller]
    pub fn min(&self) -> Tensor {
        self.reduce(ReduceOp::Min, None, false, Location::caller())
    }

    /// `jnp.mean(x, axis=axes, keepdims=keepdims)`: a sum divided by the count.
    #[track_caller]
    pub fn mean_axes(&self, axes_arg: &[isize], keepdims: bool) -> Tensor {
        let loc = Location::caller();
        let Some(ax) = axes(self, axes_arg, loc) else {
            return Tensor::placeholder(self.aval().clone());
        };
        let count: usize = ax.iter().map(|&a| self.shape()[a]).product();
        let s = self.reduce(ReduceOp::Sum, Some(axes_arg), keepdims, loc);
        div_at(&s, count as f64, loc)
    }

    /// `jnp.mean(x)` over every axis.
    #[track_caller]
    pub fn mean(&self) -> Tensor {
        let loc = Location::caller();
        let s = self.reduce(ReduceOp::Sum, None, false, loc);
        div_at(&s, self.size() as f64, loc)
    }

    /// `jnp.reshape(x, shape)` (row-major; one `-1` is inferred).
    #[track_caller]
    pub fn reshape(&self, shape: &[isize]) -> Tensor {
        let loc = Location::caller();
        let known: usize = shape.iter().filter(|&&d| d >= 0).map(|&d| d as usize).product();
        let unknown = shape.iter().filter(|&&d| d < 0).count();
        let new_sizes: Option<Vec<usize>> = match unknown {
            0 => Some(shape.iter().map(|&d| d as usize).collect()),
            1 if known > 0 && self.size().is_multiple_of(known) => {
                Some(shape.iter().map(|&d| if d < 0 { self.size() / known } else { d as usize }).collect())
            }
            _ => None,
        };
        match new_sizes {
            Some(new_sizes) => self.apply_at(Primitive::Reshape { new_sizes }, loc),
            None => {
                record_error(loc, format!("reshape: cannot reshape {} to {shape:?}", self.aval()));
                Tensor::placeholder(self.aval().clone())
            }
        }
    }

    /// `x.T` / `jnp.transpose(x)`: reverses the axes.
    #[track_caller]
    pub fn t(&self) -> Tensor {
        let permutation = (0..self.ndim()).rev().collect();
        self.apply_at(Primitive::Transpose { permutation }, Location::caller())
    }

    /// `jnp.transpose(x, axes)`.
    #[track_caller]
    pub fn transpose(&self, permutation: &[usize]) -> Tensor {
        self.apply_at(Primitive::Transpose { permutation: permutation.to_vec() }, Location::caller())
    }

    /// `jnp.broadcast_to(x, shape)` (NumPy rules: trailing axes align).
    #[track_caller]
    pub fn broadcast_to(&self, shape: &[usize]) -> Tensor {
        let loc = Location::caller();
        if shape.len() < self.ndim() {
            record_error(loc, format!("broadcast_to: cannot broadcast {} to {shape:?}", self.aval()));
            return Tensor::placeholder(self.aval().clone());
        }
        let pad = shape.len() - self.ndim();
        // Size-1 axes that grow are dropped and re-created, as `jnp.broadcast_to` does.
        let squeeze: Vec<usize> = (0..self.ndim()).filter(|&i| self.shape()[i] == 1 && shape[pad + i] != 1).collect();
        let x = if squeeze.is_empty() {
            self.clone()
        } else {
            self.apply_at(Primitive::Squeeze { dimensions: squeeze.clone() }, loc)
        };
        let dims: Vec<usize> = (0..self.ndim()).filter(|i| !squeeze.contains(i)).map(|i| pad + i).collect();
        x.apply_at(Primitive::BroadcastInDim { shape: shape.to_vec(), broadcast_dimensions: dims }, loc)
    }

    /// `x[start:limit]` along axis 0 of a 1-D tensor, or `lax.slice` in general:
    /// `starts` and `limits` per axis.
    #[track_caller]
    pub fn slice(&self, starts: &[usize], limits: &[usize]) -> Tensor {
        let prim = Primitive::Slice { start_indices: starts.to_vec(), limit_indices: limits.to_vec(), strides: None };
        self.apply_at(prim, Location::caller())
    }

    /// `x[:, None]`-style insertion of size-1 axes at `positions` of the result.
    #[track_caller]
    pub fn expand_dims(&self, positions: &[usize]) -> Tensor {
        let loc = Location::caller();
        let rank = self.ndim() + positions.len();
        let mut shape = Vec::with_capacity(rank);
        let mut dims = Vec::with_capacity(self.ndim());
        let mut src = 0;
        for i in 0..rank {
            if positions.contains(&i) {
                shape.push(1);
            } else if src < self.ndim() {
                shape.push(self.shape()[src]);
                dims.push(i);
                src += 1;
            }
        }
        if shape.len() != rank {
            record_error(loc, format!("expand_dims: positions {positions:?} do not fit rank {rank}"));
            return Tensor::placeholder(self.aval().clone());
        }
        self.apply_at(Primitive::BroadcastInDim { shape, broadcast_dimensions: dims }, loc)
    }
}

fn div_at(x: &Tensor, d: f64, loc: &'static Location<'static>) -> Tensor {
    match promote(&[x.into(), Arg::Scalar(d, DType::F32)], x.dtype()) {
        Some(ops) => bind(Primitive::Binary(remat_ir::BinaryOp::Div), &ops, x.is_weak(), loc).remove(0),
        None => Tensor::placeholder(x.aval().clone()),
    }
}

/// `jnp.where(cond, x, y)`: JAX records it as `jit[name=_where]` around `select_n`.
#[track_caller]
pub fn where_(cond: &Tensor, x: impl Into<Arg>, y: impl Into<Arg>) -> Tensor {
    let loc = Location::caller();
    let (x, y) = (x.into(), y.into());
    let jit = crate::transforms::jit(|(c, a, b): (Tensor, Tensor, Tensor)| {
        bind(Primitive::SelectN, &[Operand::Tensor(c), Operand::Tensor(b), Operand::Tensor(a)], false, loc).remove(0)
    })
    .name("_where");
    let dtype = match (&x, &y) {
        (Arg::Tensor(t), _) | (_, Arg::Tensor(t)) => t.dtype(),
        (Arg::Scalar(_, d), Arg::Scalar(..)) => *d,
    };
    let (Some(ops), Some(c)) = (promote(&[x, y], dtype), promote(&[cond.into()], DType::Bool)) else {
        return Tensor::placeholder(cond.aval().clone());
    };
    let as_tensor = |o: &Operand| match o {
        Operand::Tensor(t) => t.clone(),
        Operand::Literal(v) => full_at(cond.shape(), *v, loc),
    };
    let (Operand::Tensor(c), a, b) = (&c[0], as_tensor(&ops[0]), as_tensor(&ops[1])) else {
        return Tensor::placeholder(cond.aval().clone());
    };
    jit.call_at((c.clone(), a, b), loc)
}

fn full_at(shape: &[usize], value: remat_ir::LitValue, loc: &'static Location<'static>) -> Tensor {
    bind(
        Primitive::BroadcastInDim { shape: shape.to_vec(), broadcast_dimensions: vec![] },
        &[Operand::Literal(value)],
        false,
        loc,
    )
    .remove(0)
}

/// `jnp.full(shape, value, dtype)`: `broadcast_in_dim` of a literal.
#[track_caller]
pub fn full(shape: &[usize], value: f64, dtype: DType) -> Tensor {
    full_at(shape, remat_ir::LitValue::from_f64(dtype, value), Location::caller())
}

/// `jnp.zeros(shape, dtype)`.
#[track_caller]
pub fn zeros(shape: &[usize], dtype: DType) -> Tensor {
    full_at(shape, remat_ir::LitValue::from_f64(dtype, 0.0), Location::caller())
}

/// `jnp.ones(shape, dtype)`.
#[track_caller]
pub fn ones(shape: &[usize], dtype: DType) -> Tensor {
    full_at(shape, remat_ir::LitValue::from_f64(dtype, 1.0), Location::caller())
}

/// `jnp.arange(n)` as `dtype`: `iota`.
#[track_caller]
pub fn arange(n: usize, dtype: DType) -> Tensor {
    bind(Primitive::Iota { dtype, shape: vec![n], dimension: 0 }, &[], false, Location::caller()).remove(0)
}

/// An elementwise function of a tensor or a Rust scalar (`jnp.sqrt(4.0)` is `sqrt 4.0:f32[]`).
#[track_caller]
pub fn unary(op: UnaryOp, x: impl Into<Arg>) -> Tensor {
    let loc = Location::caller();
    match x.into() {
        Arg::Tensor(t) => {
            let weak = t.is_weak();
            bind(Primitive::Unary(op), &[Operand::Tensor(t)], weak, loc).remove(0)
        }
        Arg::Scalar(v, d) => {
            let dtype = if op.float_only() && !d.is_float() { DType::F32 } else { d };
            bind(Primitive::Unary(op), &[Operand::Literal(remat_ir::LitValue::from_f64(dtype, v))], true, loc).remove(0)
        }
    }
}

/// `jnp.sqrt(x)` for a tensor or a Rust scalar.
#[track_caller]
pub fn sqrt(x: impl Into<Arg>) -> Tensor {
    unary(UnaryOp::Sqrt, x)
}

/// `jnp.maximum(a, b)`.
#[track_caller]
pub fn maximum(a: impl Into<Arg>, b: impl Into<Arg>) -> Tensor {
    binary(remat_ir::BinaryOp::Max, a, b)
}

/// `jnp.minimum(a, b)`.
#[track_caller]
pub fn minimum(a: impl Into<Arg>, b: impl Into<Arg>) -> Tensor {
    binary(remat_ir::BinaryOp::Min, a, b)
}

/// A concrete array used inside a traced function (`jnp.asarray(a)`): it becomes a
/// constvar of the traced jaxpr, with `a` as its value.
#[track_caller]
pub fn constant(value: remat_ir::Array) -> Tensor {
    let aval = value.aval();
    crate::trace::constant(value, Location::caller()).unwrap_or_else(|| Tensor::placeholder(aval))
}
