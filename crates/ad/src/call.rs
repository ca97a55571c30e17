//! The call primitives that partial evaluation and transposition treat alike (`jit`,
//! `closed_call` and `remat2`): their body, and the same call with a new body.

use std::sync::Arc;

use remat_ir::{ClosedJaxpr, Jaxpr, Policy, Primitive};

use crate::AdError;

/// A `jit`, `closed_call` or `remat2` equation's primitive, seen as a call of a body.
pub(crate) enum Call<'a> {
    Jit { name: &'a str, closed: &'a ClosedJaxpr, keep_unused: bool },
    Closed { closed: &'a ClosedJaxpr },
    Remat { jaxpr: &'a Arc<Jaxpr>, prevent_cse: bool, differentiated: bool, policy: Option<&'a Policy> },
}

impl<'a> Call<'a> {
    pub fn of(prim: &'a Primitive) -> Result<Call<'a>, AdError> {
        if let Primitive::Jit { name, jaxpr, options } = prim {
            Ok(Call::Jit { name, closed: jaxpr, keep_unused: options.keep_unused })
        } else if let Primitive::ClosedCall { call_jaxpr } = prim {
            Ok(Call::Closed { closed: call_jaxpr })
        } else if let Primitive::Remat2 { jaxpr, prevent_cse, differentiated, policy } = prim {
            Ok(Call::Remat {
                jaxpr,
                prevent_cse: *prevent_cse,
                differentiated: *differentiated,
                policy: policy.as_ref(),
            })
        } else {
            Err(AdError::Internal(format!("{} is not a call", prim.name())))
        }
    }

    pub fn body(&self) -> &'a Jaxpr {
        match self {
            Call::Jit { closed, .. } | Call::Closed { closed } => &closed.jaxpr,
            Call::Remat { jaxpr, .. } => jaxpr,
        }
    }

    /// The same call of `body` (which keeps the consts if it has constvars);
    /// `differentiated` overrides a `remat2`'s flag.
    pub fn with_body(&self, body: Jaxpr, differentiated: Option<bool>) -> Primitive {
        match self {
            // A new call of a transformed body: its operands differ, so nothing is donated.
            Call::Jit { name, closed, keep_unused } => Primitive::Jit {
                name: name.to_string(),
                jaxpr: ClosedJaxpr {
                    consts: if body.constvars.is_empty() { Vec::new() } else { closed.consts.clone() },
                    jaxpr: Arc::new(body),
                },
                options: remat_ir::JitOptions { keep_unused: *keep_unused, ..Default::default() },
            },
            Call::Closed { closed } => Primitive::ClosedCall {
                call_jaxpr: ClosedJaxpr {
                    consts: if body.constvars.is_empty() { Vec::new() } else { closed.consts.clone() },
                    jaxpr: Arc::new(body),
                },
            },
            Call::Remat { prevent_cse, differentiated: d, policy, .. } => Primitive::Remat2 {
                jaxpr: Arc::new(body),
                prevent_cse: *prevent_cse,
                differentiated: differentiated.unwrap_or(*d),
                policy: policy.cloned(),
            },
        }
    }
}
