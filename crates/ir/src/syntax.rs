//! The lexical rules of JAX's jaxpr text that the printer and the parser share: which
//! characters make a name, and how a literal's value is spelled.
//!
//! Both directions of the text form read them here, so neither calls the other: the
//! printer names a hoisted jaxpr after a `jit` only if the parser reads that name back
//! ([`is_name_start`], [`is_name_char`]), and the parser keeps a literal's own spelling
//! only where it differs from the one the printer writes ([`literal_value_text`]).

use crate::jaxpr::LitValue;
use crate::param::py_float_repr;

/// Whether `c` may start a name (a variable, a hoisted jaxpr, a primitive, a parameter key).
pub(crate) fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

/// Whether `c` may continue a name.
pub(crate) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The text JAX prints for a literal's value: Python's repr of `np.asarray(v).item()`.
pub(crate) fn literal_value_text(v: LitValue) -> String {
    match v {
        LitValue::F32(x) => py_float_repr(x as f64),
        LitValue::F64(x) => py_float_repr(x),
        LitValue::BF16(x) => py_float_repr(x.to_f64()),
        LitValue::F16(x) => py_float_repr(x.to_f64()),
        LitValue::I8(x) => x.to_string(),
        LitValue::I16(x) => x.to_string(),
        LitValue::I32(x) => x.to_string(),
        LitValue::I64(x) => x.to_string(),
        LitValue::U8(x) => x.to_string(),
        LitValue::U32(x) => x.to_string(),
        LitValue::Bool(b) => (if b { "True" } else { "False" }).to_string(),
    }
}
