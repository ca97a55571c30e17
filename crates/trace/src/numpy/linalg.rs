//! Products: `dot` and `matmul`, decomposed exactly as `jnp`'s (one `dot_general`, with
//! the `squeeze` and `transpose` JAX adds around it). `einsum` has its own module.

use std::panic::Location;

use remat_ir::{DType, DotDimensionNumbers, Primitive};

use crate::elementwise::result_type;
use crate::tensor::Tensor;
use crate::trace::{bind, record_error};

impl Tensor {
    /// `lax.dot_general(a, b, dimension_numbers)`: contracts the paired contracting axes and
    /// batches over the paired batch axes; the result's axes are the batch axes, then `a`'s
    /// free axes, then `b`'s. Operands of different dtypes are converted to their common
    /// dtype first (JAX's `dot_general` takes mixed dtypes; the IR's does not).
    #[track_caller]
    pub fn dot_general(&self, b: &Tensor, dimension_numbers: DotDimensionNumbers) -> Tensor {
        dot_general_at(self, b, dimension_numbers, Location::caller())
    }

    /// `jnp.dot(a, b)`: for 1-D and 2-D operands the vector or matrix product; in general
    /// the sum product over the last axis of `a` and the second-to-last axis of `b` (the
    /// only axis of a 1-D `b`). A scalar operand multiplies.
    #[track_caller]
    pub fn dot(&self, b: &Tensor) -> Tensor {
        dot_general_at(self, b, dot_numbers(self, b), Location::caller())
    }

    /// `jnp.dot(a, b, preferred_element_type=dtype)`: as [`Tensor::dot`], accumulating and
    /// returning `dtype` (`bf16` operands with an `f32` result, for mixed precision).
    #[track_caller]
    pub fn dot_preferred(&self, b: &Tensor, preferred_element_type: DType) -> Tensor {
        dot_general_typed(self, b, dot_numbers(self, b), Some(preferred_element_type), Location::caller())
    }

    /// `a @ b` (`jnp.matmul`): the matrix product over the last two axes, with the leading
    /// axes as batch axes that broadcast against each other (size 1 stretches); a 1-D
    /// operand is a vector. Records `dot_general`, plus JAX's `squeeze` of size-1 batch axes
    /// and `transpose` into the batch-first order.
    #[track_caller]
    pub fn matmul(&self, b: &Tensor) -> Tensor {
        matmul_at(self, b, Location::caller())
    }
}

/// `jnp.dot`'s dimension numbers.
pub(crate) fn dot_numbers(a: &Tensor, b: &Tensor) -> DotDimensionNumbers {
    let (ra, rb) = (a.ndim(), b.ndim());
    if ra == 0 || rb == 0 {
        return DotDimensionNumbers::default();
    }
    let rc = if rb == 1 { 0 } else { rb - 2 };
    DotDimensionNumbers { lhs_contracting: vec![ra - 1], rhs_contracting: vec![rc], ..Default::default() }
}

pub(crate) fn dot_general_at(
    a: &Tensor,
    b: &Tensor,
    dn: DotDimensionNumbers,
    loc: &'static Location<'static>,
) -> Tensor {
    dot_general_typed(a, b, dn, None, loc)
}

/// `dot_general` of `a` and `b` converted to their common dtype, producing `preferred`
/// (by default that common dtype).
fn dot_general_typed(
    a: &Tensor,
    b: &Tensor,
    dn: DotDimensionNumbers,
    preferred: Option<DType>,
    loc: &'static Location<'static>,
) -> Tensor {
    let (dtype, _) = result_type(&[(a.dtype(), a.is_weak()), (b.dtype(), b.is_weak())]);
    for (&l, &r) in dn.lhs_contracting.iter().zip(&dn.rhs_contracting) {
        if let (Some(x), Some(y)) = (a.shape().get(l), b.shape().get(r)) {
            if x != y {
                record_error(
                    loc,
                    format!(
                        "dot: contracting axis {l} of {} has size {x} but axis {r} of {} has size {y}",
                        a.aval(),
                        b.aval()
                    ),
                );
                return Tensor::placeholder(a.aval().clone());
            }
        }
    }
    let prim = Primitive::DotGeneral {
        dimension_numbers: dn,
        preferred_element_type: Some(preferred.unwrap_or(dtype)),
        precision: None,
    };
    let (a, b) = (a.to_type(dtype, false, loc), b.to_type(dtype, false, loc));
    bind(prim, &[a.into(), b.into()], false, loc).remove(0)
}

/// `jnp.matmul`, following `jax/_src/numpy/tensor_contractions.py` step for step so the
/// recorded equations are JAX's.
pub(crate) fn matmul_at(a: &Tensor, b: &Tensor, loc: &'static Location<'static>) -> Tensor {
    if a.ndim() == 0 || b.ndim() == 0 {
        record_error(loc, format!("matmul: operands must have at least one axis, found {} and {}", a.aval(), b.aval()));
        return Tensor::placeholder(a.aval().clone());
    }
    let (a_is_mat, b_is_mat) = (a.ndim() > 1, b.ndim() > 1);
    let batch_of = |x: &Tensor, is_mat: bool| if is_mat { x.shape()[..x.ndim() - 2].to_vec() } else { vec![] };
    let (a_dims, b_dims) = (batch_of(a, a_is_mat), batch_of(b, b_is_mat));
    let nb = a_dims.len().max(b_dims.len());
    let pad = |d: Vec<usize>| -> Vec<Option<usize>> {
        std::iter::repeat_n(None, nb - d.len()).chain(d.into_iter().map(Some)).collect()
    };
    let (a_dims, b_dims) = (pad(a_dims), pad(b_dims));
    let (mut a_squeeze, mut b_squeeze, mut both_squeeze) = (vec![], vec![], vec![]);
    let (mut a_batch, mut b_batch) = (vec![], vec![]);
    let (mut idx_batch, mut idx_a_other, mut idx_b_other) = (vec![], vec![], vec![]);
    for (i, (ba, bb)) in a_dims.iter().zip(&b_dims).enumerate() {
        match (*ba, *bb) {
            (None, _) => idx_b_other.push(i),
            (_, None) => idx_a_other.push(i),
            (Some(1), Some(1)) => {
                a_squeeze.push(idx_batch.len() + idx_a_other.len() + a_squeeze.len());
                b_squeeze.push(idx_batch.len() + idx_b_other.len() + b_squeeze.len());
                both_squeeze.push(i);
            }
            (Some(1), _) => {
                idx_b_other.push(i);
                a_squeeze.push(idx_batch.len() + idx_a_other.len() + a_squeeze.len());
            }
            (_, Some(1)) => {
                idx_a_other.push(i);
                b_squeeze.push(idx_batch.len() + idx_b_other.len() + b_squeeze.len());
            }
            (Some(x), Some(y)) if x == y => {
                a_batch.push(idx_batch.len() + idx_a_other.len());
                b_batch.push(idx_batch.len() + idx_b_other.len());
                idx_batch.push(i);
            }
            _ => {
                record_error(loc, format!("matmul: batch axes of {} and {} do not broadcast", a.aval(), b.aval()));
                return Tensor::placeholder(a.aval().clone());
            }
        }
    }
    if a_is_mat {
        idx_a_other.push(nb);
    }
    if b_is_mat {
        idx_b_other.push(nb + a_is_mat as usize);
    }
    let order: Vec<usize> = idx_batch.iter().chain(&idx_a_other).chain(&idx_b_other).copied().collect();
    let mut perm: Vec<usize> = (0..order.len()).collect();
    perm.sort_by_key(|&i| order[i]);
    let a = a.squeeze_at(&a_squeeze, loc);
    let b = b.squeeze_at(&b_squeeze, loc);
    let dn = DotDimensionNumbers {
        lhs_contracting: vec![a.ndim() - 1],
        rhs_contracting: vec![b.ndim() - 1 - b_is_mat as usize],
        lhs_batch: a_batch,
        rhs_batch: b_batch,
    };
    let out = dot_general_at(&a, &b, dn, loc).transpose_at(&perm, loc);
    if both_squeeze.is_empty() {
        out
    } else {
        out.expand_dims_at(&both_squeeze, loc)
    }
}
