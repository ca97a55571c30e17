//! The tracer: Rust closures over tensors become jaxprs.
