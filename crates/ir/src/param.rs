//! Parameter values as JAX prints them: a small tree of Python reprs (`None`, `True`, `3`,
//! `np.int64(3)`, `(0, 1)`, `[2]`, `'device'`, `frozenset({'a'})`, `float32`,
//! `MemorySpace.Host`, `DotsSaveable(only_if_no_batch_dims=True)`, `<function f at 0xXX>`,
//! nested jaxprs). The printer renders primitives through this tree and the parser reads
//! into it, so both directions share one description of every parameter.

use std::fmt::{self, Write};
use std::sync::Arc;

use crate::jaxpr::Jaxpr;

/// One parameter value.
#[derive(Clone, Debug)]
pub enum Param {
    None,
    Bool(bool),
    Int(i64),
    /// A Python float that is not an integer literal: `1.5`, `-inf` (`nan` reads as a word).
    Float(f64),
    /// A quoted Python string: `'device'`.
    Str(String),
    /// An unquoted word: a name (`relu`, `_where`), a dtype (`float32`), or a dotted
    /// enum member (`MemorySpace.Host`).
    Word(String),
    Tuple(Vec<Param>),
    List(Vec<Param>),
    /// `frozenset({'a', 'b'})`, elements in the order they were written.
    FrozenSet(Vec<String>),
    /// `Name(arg, key=value, ...)`: policy reprs and `np.int64(3)`.
    Call {
        func: String,
        args: Vec<Param>,
        kwargs: Vec<(String, Param)>,
    },
    /// An opaque repr in angle brackets, `<function nothing_saveable at 0xXXXXXXXXXXXX>`.
    Opaque(String),
    /// A nested jaxpr (printed by the jaxpr printer, which owns variable naming).
    Jaxpr(Arc<Jaxpr>),
}

impl Param {
    pub fn ints<I: IntoIterator<Item = usize>>(xs: I) -> Param {
        Param::Tuple(xs.into_iter().map(|x| Param::Int(x as i64)).collect())
    }

    pub fn int_list<I: IntoIterator<Item = usize>>(xs: I) -> Param {
        Param::List(xs.into_iter().map(|x| Param::Int(x as i64)).collect())
    }

    /// A short description of the value's kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Param::None => "None",
            Param::Bool(_) => "a boolean",
            Param::Int(_) => "an integer",
            Param::Float(_) => "a float",
            Param::Str(_) => "a string",
            Param::Word(_) => "a name",
            Param::Tuple(_) => "a tuple",
            Param::List(_) => "a list",
            Param::FrozenSet(_) => "a frozenset",
            Param::Call { .. } => "a call",
            Param::Opaque(_) => "an opaque value",
            Param::Jaxpr(_) => "a jaxpr",
        }
    }

    /// The integer, accepting `np.int64(3)` and its kin as well as `3`.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Param::Int(x) => Some(*x),
            Param::Call { func, args, kwargs } if is_numpy_int(func) && args.len() == 1 && kwargs.is_empty() => {
                args[0].as_int()
            }
            _ => None,
        }
    }

    /// The elements of a tuple or list.
    pub fn as_seq(&self) -> Option<&[Param]> {
        match self {
            Param::Tuple(xs) | Param::List(xs) => Some(xs),
            _ => None,
        }
    }

    /// Writes the Python repr. Nested jaxprs cannot be written without a naming context and
    /// are written as `{...}`; the jaxpr printer handles them itself.
    pub fn write_repr(&self, out: &mut String) {
        match self {
            Param::None => out.push_str("None"),
            Param::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
            Param::Int(x) => write!(out, "{x}").unwrap(),
            Param::Float(x) => out.push_str(&py_float_repr(*x)),
            Param::Str(s) => write_py_str(s, out),
            Param::Word(w) => out.push_str(w),
            Param::Tuple(xs) => {
                out.push('(');
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    x.write_repr(out);
                }
                if xs.len() == 1 {
                    out.push(',');
                }
                out.push(')');
            }
            Param::List(xs) => {
                out.push('[');
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    x.write_repr(out);
                }
                out.push(']');
            }
            Param::FrozenSet(xs) => {
                if xs.is_empty() {
                    out.push_str("frozenset()");
                } else {
                    out.push_str("frozenset({");
                    for (i, x) in xs.iter().enumerate() {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        write_py_str(x, out);
                    }
                    out.push_str("})");
                }
            }
            Param::Call { func, args, kwargs } => {
                out.push_str(func);
                out.push('(');
                let mut first = true;
                for a in args {
                    if !first {
                        out.push_str(", ");
                    }
                    first = false;
                    a.write_repr(out);
                }
                for (k, v) in kwargs {
                    if !first {
                        out.push_str(", ");
                    }
                    first = false;
                    out.push_str(k);
                    out.push('=');
                    v.write_repr(out);
                }
                out.push(')');
            }
            Param::Opaque(s) => out.push_str(s),
            Param::Jaxpr(_) => out.push_str("{...}"),
        }
    }

    pub fn repr(&self) -> String {
        let mut s = String::new();
        self.write_repr(&mut s);
        s
    }
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repr())
    }
}

pub(crate) fn is_numpy_int(func: &str) -> bool {
    matches!(func, "np.int64" | "np.int32" | "np.int8" | "np.int16" | "np.uint32" | "np.uint64")
}

/// Python's repr of a `str`: single quotes unless the text holds a single quote and no
/// double quote.
fn write_py_str(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// Rewrites `np.int64(3)` (and the other NumPy integer spellings) to `3`, leaving the rest
/// of the text alone: the canonical form two spellings of one parameter value share.
pub(crate) fn strip_numpy_ints(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("np.") {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let open = tail.find('(');
        let ok = open.and_then(|o| {
            let func = &tail[..o];
            let close = tail[o..].find(')')? + o;
            let inner = &tail[o + 1..close];
            (is_numpy_int(func) && inner.parse::<i64>().is_ok()).then_some((inner, close))
        });
        match ok {
            Some((inner, close)) => {
                out.push_str(inner);
                rest = &tail[close + 1..];
            }
            None => {
                out.push_str("np.");
                rest = &tail[3..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Python's `repr(float)`: the shortest digits that round-trip, in fixed notation when the
/// decimal exponent is in [-4, 16), otherwise in exponent notation (`1e-05`, `1e+16`).
pub fn py_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    // `{:e}` gives the shortest round-trip digits: "d.ddddde-N".
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent digits");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if x < 0.0 { "-" } else { "" };
    let ndigits = digits.len() as i32;
    if (-4..16).contains(&exp) {
        let s = if exp >= 0 {
            let int_len = exp + 1;
            if ndigits <= int_len {
                format!("{digits}{}.0", "0".repeat((int_len - ndigits) as usize))
            } else {
                format!("{}.{}", &digits[..int_len as usize], &digits[int_len as usize..])
            }
        } else {
            format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
        };
        format!("{sign}{s}")
    } else {
        let m = if digits.len() == 1 { digits.clone() } else { format!("{}.{}", &digits[..1], &digits[1..]) };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{esign}{:02}", exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        let cases: [(f64, &str); 12] = [
            (1.0, "1.0"),
            (-0.5, "-0.5"),
            (0.1f32 as f64, "0.10000000149011612"),
            (1e-5f32 as f64, "9.999999747378752e-06"),
            (1048576.0, "1048576.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456789012345.0, "123456789012345.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-0.0, "-0.0"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (x, want) in cases {
            assert_eq!(py_float_repr(x), want, "repr of {x:?}");
        }
    }

    #[test]
    fn numpy_ints_are_stripped() {
        assert_eq!(strip_numpy_ints("((1, np.int64(2), 0),)"), "((1, 2, 0),)");
        assert_eq!(strip_numpy_ints("(np.int64(0), np.int64(1))"), "(0, 1)");
        assert_eq!(strip_numpy_ints("np.float32(1.0)"), "np.float32(1.0)");
    }

    #[test]
    fn tuples_print_like_python() {
        assert_eq!(Param::ints([]).repr(), "()");
        assert_eq!(Param::ints([0]).repr(), "(0,)");
        assert_eq!(Param::ints([0, 1]).repr(), "(0, 1)");
        assert_eq!(Param::FrozenSet(vec!["c".into(), "a".into()]).repr(), "frozenset({'c', 'a'})");
    }
}
