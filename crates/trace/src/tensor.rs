//! `Tensor`: a traced value's handle, the bottom of the tracer.
//!
//! A tensor is its abstract value (dtype, shape), its weak flag, and which variable of
//! which frame under construction it is (or a concrete scalar that belongs to no frame).
//! This module holds only that handle: the trace (`trace.rs`) makes tensors and reads
//! them, and the operations that record equations are methods defined above both
//! (`elementwise.rs` the elementwise ones with JAX's promotion, `numpy/`, `lax.rs`, ...).

use remat_ir::{Aval, DType, LitValue, Var};

/// A value being traced: an abstract value (dtype, shape) bound to a variable of the
/// jaxpr under construction. Cheap to clone. Operations on it record equations; see the
/// crate docs for the full surface.
#[derive(Clone, Debug)]
pub struct Tensor {
    pub(crate) frame: u64,
    pub(crate) var: Var,
    aval: Aval,
    weak: bool,
    /// A concrete scalar (`jnp.int32(0)`), which every equation that uses it receives as
    /// a literal operand; `frame` and `var` are unused then.
    pub(crate) literal: Option<LitValue>,
}

impl Tensor {
    pub(crate) fn new(frame: u64, var: Var, aval: Aval, weak: bool) -> Tensor {
        Tensor { frame, var, aval, weak, literal: None }
    }

    /// A stand-in returned after a tracing error; it belongs to no frame, and operations
    /// on it record nothing (the error is already recorded).
    pub(crate) fn placeholder(aval: Aval) -> Tensor {
        Tensor { frame: 0, var: Var(0), aval, weak: false, literal: None }
    }

    /// A concrete scalar of `value`'s dtype, not weakly typed: what `jnp.int32(0)` or
    /// `np.float32(0.5)` is in a JAX program. It belongs to no trace; an equation that uses
    /// it records it as a literal operand (`0:i32[]`), so a `while_loop` carry started
    /// from it prints as JAX's literal carry. (JAX computes operations between concrete
    /// values eagerly; here they are recorded, with the literal as operand.)
    pub fn literal(value: LitValue) -> Tensor {
        let aval = Aval::scalar(value.dtype());
        Tensor { frame: 0, var: Var(0), aval, weak: false, literal: Some(value) }
    }

    /// The abstract value: dtype and shape.
    pub fn aval(&self) -> &Aval {
        &self.aval
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.aval.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.aval.dtype
    }

    /// The number of axes.
    pub fn ndim(&self) -> usize {
        self.aval.shape.len()
    }

    /// The number of elements.
    pub fn size(&self) -> usize {
        self.aval.size()
    }

    /// Whether the value is weakly typed (derived only from Rust scalars), so that it takes
    /// the dtype of what it is combined with, as in JAX.
    pub fn is_weak(&self) -> bool {
        self.weak
    }
}
