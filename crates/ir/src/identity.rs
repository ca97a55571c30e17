//! The equations XLA's algebraic simplifier deletes under `jit`: arithmetic whose other
//! operand is an identity constant (`x + 0.0`, `x * 1.0`, `max(x, -inf)`, ...), and
//! reductions over extents of 1. XLA never computes them, so their result is the operand's
//! bits (a subnormal passes through, which `x * 1.0` computed under DAZ would flush), and
//! `x * -1.0` or `x / -1.0` is a sign flip. Every backend asks [`identities`] and evaluates
//! such an equation as the operand it names, so that all of them give JAX's bits.
//!
//! What it keeps true: an equation is an identity only where XLA's rule makes it one on
//! every value (its output is a float, the constant is exactly the identity: a zero of
//! either sign for `add` and `sub`, one for `mul`, `div` and `pow`, an infinity for `max`
//! and `min`), so deleting it changes no normal number's result. A constant is a literal,
//! or the output of `broadcast_in_dim` or `convert_element_type` of one in the same jaxpr
//! (XLA folds those); a constvar's value, or a literal passed into a nested jaxpr, is not
//! followed.

use crate::jaxpr::{Atom, Jaxpr, LitValue};
use crate::primitive::{BinaryOp, Primitive};

/// What an equation XLA deletes computes instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identity {
    /// Output 0 is operand `k`'s elements unchanged: broadcast to the output's shape, or,
    /// for a reduction over extents of 1, reshaped to it.
    Operand(usize),
    /// Output 0 is operand `k` negated (its sign bit flipped), broadcast as above.
    Negated(usize),
}

/// The constants the rules look for, exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Special {
    /// `0.0` or `-0.0` (or an integer or `false` 0).
    Zero,
    One,
    MinusOne,
    PosInf,
    NegInf,
}

impl Special {
    /// The special value of a literal, read from its bits (no float compare, which a
    /// caller's DAZ would make `1e-40 == 0`).
    fn of_literal(v: LitValue) -> Option<Special> {
        let float = |bits: u64, sign: u64, one: u64, inf: u64| {
            Some(match bits {
                b if b & !sign == 0 => Special::Zero,
                b if b == one => Special::One,
                b if b == one | sign => Special::MinusOne,
                b if b == inf => Special::PosInf,
                b if b == inf | sign => Special::NegInf,
                _ => return None,
            })
        };
        let int = |x: i64| match x {
            0 => Some(Special::Zero),
            1 => Some(Special::One),
            -1 => Some(Special::MinusOne),
            _ => None,
        };
        match v {
            LitValue::F32(x) => float(x.to_bits().into(), 1 << 31, 0x3F80_0000, 0x7F80_0000),
            LitValue::F64(x) => float(x.to_bits(), 1 << 63, 0x3FF0_0000_0000_0000, 0x7FF0_0000_0000_0000),
            LitValue::BF16(x) => float(x.to_bits().into(), 1 << 15, 0x3F80, 0x7F80),
            LitValue::F16(x) => float(x.to_bits().into(), 1 << 15, 0x3C00, 0x7C00),
            LitValue::I8(x) => int(x.into()),
            LitValue::I16(x) => int(x.into()),
            LitValue::I32(x) => int(x.into()),
            LitValue::I64(x) => int(x),
            LitValue::U8(x) => int(x.into()),
            LitValue::U32(x) => int(x.into()),
            LitValue::Bool(b) => int(b.into()),
            // Complex outputs are never deleted (the rules hold for real floats only).
            LitValue::C64(_) | LitValue::C128(_) => None,
        }
    }

    /// The value after `convert_element_type` to a dtype of the given kind, if still special.
    fn converted(self, to: crate::types::DType) -> Option<Special> {
        if to.is_float() {
            return Some(self);
        }
        match (self, to) {
            (Special::Zero, _) => Some(Special::Zero),
            (_, crate::types::DType::Bool) => Some(Special::One),
            (Special::One, _) => Some(Special::One),
            (Special::MinusOne, d) if !d.is_unsigned() => Some(Special::MinusOne),
            // Infinities saturate, -1 wraps: no longer special.
            _ => None,
        }
    }
}

/// For each equation of `jaxpr`, what it computes if XLA's simplifier deletes it (the
/// module's rules), or `None` where it is computed.
pub fn identities(jaxpr: &Jaxpr) -> Vec<Option<Identity>> {
    let mut constant: Vec<Option<Special>> = vec![None; jaxpr.vars.len()];
    let special = |constant: &[Option<Special>], a: &Atom| match a {
        Atom::Lit(l) => Special::of_literal(l.value),
        Atom::Var(v) => constant.get(v.index()).copied().flatten(),
    };
    let mut out = Vec::with_capacity(jaxpr.eqns.len());
    for eqn in &jaxpr.eqns {
        let Some(&result) = eqn.outvars.first() else {
            out.push(None);
            continue;
        };
        let out_dtype = jaxpr.aval(result).dtype;
        // Constants XLA folds: broadcasts and conversions of constants.
        if let Primitive::BroadcastInDim { .. } = eqn.primitive {
            constant[result.index()] = eqn.invars.first().and_then(|a| special(&constant, a));
        }
        if let Primitive::ConvertElementType { new_dtype, .. } = eqn.primitive {
            constant[result.index()] =
                eqn.invars.first().and_then(|a| special(&constant, a)).and_then(|s| s.converted(new_dtype));
        }
        let identity = if let Primitive::Binary(op) = &eqn.primitive {
            let operand = |k: usize| eqn.invars.get(k).and_then(|a| special(&constant, a));
            (out_dtype.is_float() && eqn.invars.len() == 2)
                .then(|| binary_identity(*op, operand(0), operand(1)))
                .flatten()
        } else if let Primitive::Reduce { axes, .. } = &eqn.primitive {
            let shape = &jaxpr.atom_aval(&eqn.invars[0]).shape;
            let reduced: usize = axes.iter().map(|&a| shape.get(a).copied().unwrap_or(0)).product();
            (!axes.is_empty() && reduced == 1).then_some(Identity::Operand(0))
        } else {
            None
        };
        out.push(identity);
    }
    out
}

/// The identity of `x op y` whose operands are the constants `x` and `y` (`None` where an
/// operand is not one).
fn binary_identity(op: BinaryOp, x: Option<Special>, y: Option<Special>) -> Option<Identity> {
    use Identity::{Negated, Operand};
    use Special::{MinusOne, NegInf, One, PosInf, Zero};
    match op {
        BinaryOp::Add | BinaryOp::AddAny => match (x, y) {
            (_, Some(Zero)) => Some(Operand(0)),
            (Some(Zero), _) => Some(Operand(1)),
            _ => None,
        },
        BinaryOp::Sub => (y == Some(Zero)).then_some(Operand(0)),
        BinaryOp::Mul => match (x, y) {
            (_, Some(One)) => Some(Operand(0)),
            (Some(One), _) => Some(Operand(1)),
            (_, Some(MinusOne)) => Some(Negated(0)),
            (Some(MinusOne), _) => Some(Negated(1)),
            _ => None,
        },
        BinaryOp::Div => match y {
            Some(One) => Some(Operand(0)),
            Some(MinusOne) => Some(Negated(0)),
            _ => None,
        },
        BinaryOp::Pow => (y == Some(One)).then_some(Operand(0)),
        BinaryOp::Max => match (x, y) {
            (_, Some(NegInf)) => Some(Operand(0)),
            (Some(NegInf), _) => Some(Operand(1)),
            _ => None,
        },
        BinaryOp::Min => match (x, y) {
            (_, Some(PosInf)) => Some(Operand(0)),
            (Some(PosInf), _) => Some(Operand(1)),
            _ => None,
        },
        BinaryOp::Rem
        | BinaryOp::Atan2
        | BinaryOp::Nextafter
        | BinaryOp::Polygamma
        | BinaryOp::Igamma
        | BinaryOp::Igammac
        | BinaryOp::IgammaGradA
        | BinaryOp::Zeta
        | BinaryOp::And
        | BinaryOp::Or
        | BinaryOp::Xor
        | BinaryOp::ShiftLeft
        | BinaryOp::ShiftRightLogical
        | BinaryOp::ShiftRightArithmetic
        | BinaryOp::Mulhi => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_jaxpr;

    fn of(text: &str) -> Vec<Option<Identity>> {
        identities(&parse_jaxpr(text, "identity").expect("parses"))
    }

    #[test]
    fn literal_identities_are_deleted() {
        let ids = of("{ lambda ; a:f32[3]. let
            b:f32[3] = add a 0.0:f32[]
            c:f32[3] = add -0.0:f32[] a
            d:f32[3] = sub a 0.0:f32[]
            e:f32[3] = sub 0.0:f32[] a
            f:f32[3] = mul a 1.0:f32[]
            g:f32[3] = mul 2.0:f32[] a
            h:f32[3] = mul -1.0:f32[] a
            i:f32[3] = div a -1.0:f32[]
            j:f32[3] = div 1.0:f32[] a
            k:f32[3] = max a -inf:f32[]
            l:f32[3] = min inf:f32[] a
            m:f32[3] = max a inf:f32[]
            n:f32[3] = pow a 1.0:f32[]
            o:f32[3] = mul a 9.99994610111476e-41:f32[]
          in (b, c, d, e, f, g, h, i, j, k, l, m, n, o) }");
        use Identity::{Negated, Operand};
        assert_eq!(
            ids,
            [
                Some(Operand(0)),
                Some(Operand(1)),
                Some(Operand(0)),
                None,
                Some(Operand(0)),
                None,
                Some(Negated(1)),
                Some(Negated(0)),
                None,
                Some(Operand(0)),
                Some(Operand(1)),
                None,
                Some(Operand(0)),
                None,
            ]
        );
    }

    #[test]
    fn broadcasts_and_conversions_of_constants_are_constants() {
        // JAX's gradient of sum(x * y) with respect to x: the cotangent 1.0 broadcast.
        let ids = of("{ lambda ; a:f32[2] b:f32[2] c:i32[2]. let
            d:f32[2] = broadcast_in_dim[broadcast_dimensions=() shape=(2,) sharding=None] 1.0:f32[]
            e:f32[2] = mul d b
            f:f32[] = convert_element_type[new_dtype=float32 weak_type=False] 0:i32[]
            g:f32[2] = add a f
            h:i32[2] = mul c 1:i32[]
            i:f32[] = convert_element_type[new_dtype=float32 weak_type=False] 2:i32[]
            j:f32[2] = mul a i
          in (e, g, h, j) }");
        assert_eq!(ids[1], Some(Identity::Operand(1)));
        assert_eq!(ids[3], Some(Identity::Operand(0)));
        assert_eq!(ids[4], None, "integer arithmetic is exact anyway");
        assert_eq!(ids[6], None);
    }

    #[test]
    fn reductions_over_extents_of_one_are_reshapes() {
        let ids = of("{ lambda ; a:f32[3,1] b:f32[3,2]. let
            c:f32[3] = reduce_sum[axes=(1,) out_sharding=None] a
            d:f32[3] = reduce_max[axes=(1,)] b
          in (c, d) }");
        assert_eq!(ids, [Some(Identity::Operand(0)), None]);
    }
}
