//! The Cranelift JIT: jaxprs compiled to native code.
