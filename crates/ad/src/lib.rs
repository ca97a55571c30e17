//! Autodiff and rematerialization on jaxprs.
