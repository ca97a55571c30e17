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
        LitValue::C64(z) => py_complex_repr(z.re as f64, z.im as f64),
        LitValue::C128(z) => py_complex_repr(z.re, z.im),
    }
}

/// Python's repr of `complex(re, im)`: `1j`, `(2+1j)`, `(-0-1j)`, `(nan+infj)`. Each part
/// is a float's repr without a trailing `.0`; a real part that is `+0.0` is left out.
pub(crate) fn py_complex_repr(re: f64, im: f64) -> String {
    fn part(x: f64) -> String {
        let s = py_float_repr(x);
        match s.strip_suffix(".0") {
            Some(short) => short.to_string(),
            None => s,
        }
    }
    if re == 0.0 && re.is_sign_positive() {
        return format!("{}j", part(im));
    }
    let sign = if !im.is_nan() && im.is_sign_negative() { "-" } else { "+" };
    format!("({}{sign}{}j)", part(re), part(im.abs()))
}

/// The complex number a Python repr spells ([`py_complex_repr`]'s inverse), also reading
/// parts with a `.0` (`(1.0+2.0j)`); `None` if `text` is not one.
pub(crate) fn parse_py_complex(text: &str) -> Option<(f64, f64)> {
    fn part(t: &str) -> Option<f64> {
        match t {
            "inf" | "+inf" => Some(f64::INFINITY),
            "-inf" => Some(f64::NEG_INFINITY),
            "nan" | "+nan" | "-nan" => Some(f64::NAN),
            t if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || "+-.eE".contains(c)) => t.parse().ok(),
            _ => None,
        }
    }
    match text.strip_prefix('(').and_then(|t| t.strip_suffix(')')) {
        None => Some((0.0, part(text.strip_suffix('j')?)?)),
        Some(inner) => {
            let inner = inner.strip_suffix('j')?;
            // The imaginary part's sign: the last `+`/`-` that is not the first character
            // and not an exponent's.
            let bytes = inner.as_bytes();
            let split = (1..bytes.len())
                .rev()
                .find(|&i| matches!(bytes[i], b'+' | b'-') && !matches!(bytes[i - 1], b'e' | b'E'))?;
            Some((part(&inner[..split])?, part(&inner[split..])?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Python's `repr(complex(re, im))` for each pair (checked with CPython 3).
    #[test]
    fn complex_literals_are_spelled_as_python_repr_and_read_back() {
        let nan = f64::NAN;
        let cases: [(f64, f64, &str); 11] = [
            (0.0, 1.0, "1j"),
            (2.0, 1.0, "(2+1j)"),
            (0.0, 0.0, "0j"),
            (-0.0, -1.0, "(-0-1j)"),
            (1.5, -2.0, "(1.5-2j)"),
            (nan, nan, "(nan+nanj)"),
            (0.0, f64::INFINITY, "infj"),
            (1e20, 1.0, "(1e+20+1j)"),
            (123456.0, 0.1, "(123456+0.1j)"),
            (1.0, -0.0, "(1-0j)"),
            (0.10000000149011612, 0.20000000298023224, "(0.10000000149011612+0.20000000298023224j)"),
        ];
        for (re, im, text) in cases {
            assert_eq!(py_complex_repr(re, im), text);
            let (r, i) = parse_py_complex(text).unwrap();
            assert_eq!(format!("{r:?} {i:?}"), format!("{re:?} {im:?}"), "{text}");
        }
        assert_eq!(parse_py_complex("(1.0+2.0j)"), Some((1.0, 2.0)));
        assert_eq!(parse_py_complex("(1e-05-3e+10j)"), Some((1e-5, -3e10)));
        for bad in ["", "j", "(1+2)", "1+2j", "(1+2j", "(+j)", "(1+xj)"] {
            assert_eq!(parse_py_complex(bad), None, "{bad}");
        }
    }
}
