//! The parameters of a `scan` equation, shared by scan's rule in every transformation:
//! jvp (`jvp.rs`, a fixpoint over which carries have nonzero tangents), dead code
//! elimination (`dce.rs`, a fixpoint over used carries), partial evaluation
//! (`partial_eval/scan.rs`, a fixpoint over unknown carries) and transpose
//! (`transpose.rs`, a scan in the other direction). Each rule lives with the
//! transformation it belongs to, because it recurses into that transformation's driver on
//! the body.
//!
//! Operands are `consts ++ carries ++ xs`, results `carries ++ ys`; the body maps
//! `(consts, carries, x slices) -> (carries, y slices)` (see `remat_ir::shape_rule`).
//! Scan bodies are closed jaxprs; partial evaluation and transposition need them without
//! constvars (the tracer passes captured values as `num_consts` operands).

use std::sync::Arc;

use remat_ir::{ClosedJaxpr, Eqn, Jaxpr, Primitive};

use crate::AdError;

/// The parameters of a scan equation.
pub(crate) struct ScanParams<'a> {
    pub body: &'a ClosedJaxpr,
    pub length: usize,
    pub reverse: bool,
    pub num_consts: usize,
    pub num_carry: usize,
    pub unroll: usize,
}

impl ScanParams<'_> {
    pub fn of(eqn: &Eqn) -> Result<ScanParams<'_>, AdError> {
        let Primitive::Scan { jaxpr, length, reverse, num_consts, num_carry, unroll } = &eqn.primitive else {
            return Err(AdError::Internal(format!("a scan rule on {}", eqn.primitive.name())));
        };
        Ok(ScanParams {
            body: jaxpr,
            length: *length,
            reverse: *reverse,
            num_consts: *num_consts,
            num_carry: *num_carry,
            unroll: *unroll,
        })
    }

    pub fn num_ys(&self) -> usize {
        self.body.jaxpr.outvars.len() - self.num_carry
    }

    pub fn prim(
        &self,
        body: Jaxpr,
        consts: Vec<remat_ir::Array>,
        num_consts: usize,
        num_carry: usize,
        reverse: bool,
    ) -> Primitive {
        Primitive::Scan {
            jaxpr: ClosedJaxpr { jaxpr: Arc::new(body), consts },
            length: self.length,
            reverse,
            num_consts,
            num_carry,
            unroll: self.unroll,
        }
    }
}
