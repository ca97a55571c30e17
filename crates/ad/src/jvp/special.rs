//! The jvp rules of real programs' other elementwise ops: bit operations and rounding
//! (zero tangents), `copy` (linear), the inverse and hyperbolic trigonometric functions,
//! `erf`/`erfc`/`erf_inv`, `lgamma`/`digamma`/`polygamma`, `bessel_i0e`/`bessel_i1e`,
//! `igamma`/`igammac` (whose derivative in `a` is `igamma_grad_a`), `cbrt`, `exp2`, `rem` and
//! `atan2`, each emitting the equations of JAX 0.10.2's rule (`lax.py`, `special.py`) in
//! its order: `digamma`'s tangent is `mul g (polygamma 1.0 x)` with the order a float
//! literal, `exp2`'s multiplies by `log 2.0` (an equation, as JAX leaves it), `rem`
//! divides `x / y` twice.

use remat_ir::{Atom, BinaryOp, CompareOp, DType, Eqn, Jaxpr, UnaryOp};

use super::{linear, standard, zero, JvpOut, Tangent};
use crate::builder::{lit, Builder};
use crate::AdError;

/// `2 / √π`, the derivative of `erf` at 0.
const TWO_OVER_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

/// The jvp of a unary op of this family.
pub(super) fn unary(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    op: UnaryOp,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let x = primals[0];
    let dt = b.aval(&x).dtype;
    let one = lit(dt, 1.0);
    match op {
        UnaryOp::Not | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::IsFinite | UnaryOp::PopulationCount | UnaryOp::Clz => {
            zero(b, old, eqn, primals)
        }
        UnaryOp::Copy => linear(b, old, eqn, primals, tangents),
        UnaryOp::Cbrt => standard(b, old, eqn, primals, tangents, |b, _, g, ans| {
            // g * (1/3 * ans**-2)
            let p = b.integer_pow(ans, -2)?;
            let m = b.mul(lit(dt, 1.0 / 3.0), p)?;
            b.mul(g, m)
        }),
        UnaryOp::Exp2 => standard(b, old, eqn, primals, tangents, |b, _, g, ans| {
            // log(2) * (g * ans)
            let ln2 = b.unary(UnaryOp::Log, lit(dt, 2.0))?;
            let m = b.mul(g, ans)?;
            b.mul(ln2, m)
        }),
        UnaryOp::Asin | UnaryOp::Acos => standard(b, old, eqn, primals, tangents, |b, _, g, _| {
            // g * rsqrt(1 - x²), negated for acos
            let sq = b.unary(UnaryOp::Square, x)?;
            let d = b.sub(one, sq)?;
            let r = b.unary(UnaryOp::Rsqrt, d)?;
            let r = if op == UnaryOp::Acos { b.neg(r)? } else { r };
            b.mul(g, r)
        }),
        UnaryOp::Atan => standard(b, old, eqn, primals, tangents, |b, _, g, _| {
            let sq = b.unary(UnaryOp::Square, x)?;
            let d = b.add(one, sq)?;
            b.div(g, d)
        }),
        UnaryOp::Sinh | UnaryOp::Cosh => standard(b, old, eqn, primals, tangents, |b, _, g, _| {
            let other = if op == UnaryOp::Sinh { UnaryOp::Cosh } else { UnaryOp::Sinh };
            let c = b.unary(other, x)?;
            b.mul(g, c)
        }),
        UnaryOp::Asinh | UnaryOp::Acosh => standard(b, old, eqn, primals, tangents, |b, _, g, _| {
            // g * rsqrt(x² + 1), or rsqrt(x² - 1) for acosh
            let sq = b.unary(UnaryOp::Square, x)?;
            let d = if op == UnaryOp::Asinh { b.add(sq, one)? } else { b.sub(sq, one)? };
            let r = b.unary(UnaryOp::Rsqrt, d)?;
            b.mul(g, r)
        }),
        UnaryOp::Atanh => standard(b, old, eqn, primals, tangents, |b, _, g, _| {
            // (1 + x)**-1 * (g / (1 - x))
            let a = b.add(one, x)?;
            let r = b.integer_pow(a, -1)?;
            let s = b.sub(one, x)?;
            let q = b.div(g, s)?;
            b.mul(r, q)
        }),
        UnaryOp::Erf | UnaryOp::Erfc => standard(b, old, eqn, primals, tangents, |b, _, g, _| {
            // ±2/√π * (g * exp(-x²))
            let sq = b.unary(UnaryOp::Square, x)?;
            let n = b.neg(sq)?;
            let e = b.unary(UnaryOp::Exp, n)?;
            let m = b.mul(g, e)?;
            let c = if op == UnaryOp::Erf { TWO_OVER_SQRT_PI } else { -TWO_OVER_SQRT_PI };
            b.mul(lit(dt, c), m)
        }),
        UnaryOp::ErfInv => standard(b, old, eqn, primals, tangents, |b, _, g, ans| {
            // √π/2 * (g * exp(ans²))
            let sq = b.unary(UnaryOp::Square, ans)?;
            let e = b.unary(UnaryOp::Exp, sq)?;
            let m = b.mul(g, e)?;
            b.mul(lit(dt, std::f64::consts::PI.sqrt() / 2.0), m)
        }),
        UnaryOp::Lgamma => standard(b, old, eqn, primals, tangents, |b, _, g, _| {
            let d = b.unary(UnaryOp::Digamma, x)?;
            b.mul(g, d)
        }),
        UnaryOp::Digamma => standard(b, old, eqn, primals, tangents, |b, _, g, _| {
            let p = b.binary(BinaryOp::Polygamma, one, x)?;
            b.mul(g, p)
        }),
        UnaryOp::BesselI0e => standard(b, old, eqn, primals, tangents, |b, _, g, ans| {
            // g * (bessel_i1e(x) - sign(x) * ans)
            let i1 = b.unary(UnaryOp::BesselI1e, x)?;
            let s = b.unary(UnaryOp::Sign, x)?;
            let m = b.mul(s, ans)?;
            let d = b.sub(i1, m)?;
            b.mul(g, d)
        }),
        UnaryOp::BesselI1e => standard(b, old, eqn, primals, tangents, |b, _, g, ans| {
            // `_bessel_i1e_jvp`: at x = safe_x (|x| > eps, else eps) the derivative
            // bessel_i0e(safe_x) - ans * (sign(safe_x) + 1 / safe_x), and 0.5 where |x| <= eps.
            let aval = b.aval(&x);
            let eps = lit(dt, dtype_eps(dt));
            let a = b.unary(UnaryOp::Abs, x)?;
            let not_tiny = b.compare(CompareOp::Gt, a, eps)?;
            let eps_full = b.full(&aval, dtype_eps(dt))?;
            let safe = b.select_n(not_tiny, vec![eps_full, x])?;
            let i0 = b.unary(UnaryOp::BesselI0e, safe)?;
            let s = b.unary(UnaryOp::Sign, safe)?;
            let r = b.integer_pow(safe, -1)?;
            let t = b.add(s, r)?;
            let p = b.mul(ans, t)?;
            let d = b.sub(i0, p)?;
            let half = b.full(&aval, 0.5)?;
            let d = b.select_n(not_tiny, vec![half, d])?;
            b.mul(g, d)
        }),
        UnaryOp::Neg
        | UnaryOp::Sign
        | UnaryOp::Abs
        | UnaryOp::Exp
        | UnaryOp::Log
        | UnaryOp::Log1p
        | UnaryOp::Expm1
        | UnaryOp::Sin
        | UnaryOp::Cos
        | UnaryOp::Tan
        | UnaryOp::Tanh
        | UnaryOp::Logistic
        | UnaryOp::Sqrt
        | UnaryOp::Rsqrt
        | UnaryOp::Square
        | UnaryOp::StopGradient => Err(not_here(op.name())),
    }
}

/// The jvp of a binary op of this family.
pub(super) fn binary(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    op: BinaryOp,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    let (x, y) = (primals[0], primals[1]);
    match op {
        BinaryOp::And
        | BinaryOp::Or
        | BinaryOp::Xor
        | BinaryOp::ShiftLeft
        | BinaryOp::ShiftRightLogical
        | BinaryOp::ShiftRightArithmetic
        | BinaryOp::Mulhi => zero(b, old, eqn, primals),
        BinaryOp::Rem => standard(b, old, eqn, primals, tangents, |b, i, g, ans| {
            if i == 0 {
                // g, broadcast to the output's shape
                let shape = b.aval(&ans).shape;
                b.maybe_broadcast(&shape, g)
            } else {
                // -g * (sign(x / y) * floor(abs(x / y)))
                let ng = b.neg(g)?;
                let q = b.div(x, y)?;
                let s = b.unary(UnaryOp::Sign, q)?;
                let q = b.div(x, y)?;
                let a = b.unary(UnaryOp::Abs, q)?;
                let f = b.unary(UnaryOp::Floor, a)?;
                let m = b.mul(s, f)?;
                b.mul(ng, m)
            }
        }),
        BinaryOp::Atan2 => standard(b, old, eqn, primals, tangents, |b, i, g, _| {
            // g * (y / (x² + y²)), or g * (-x / (x² + y²))
            let num = if i == 0 { y } else { b.neg(x)? };
            let xx = b.unary(UnaryOp::Square, x)?;
            let yy = b.unary(UnaryOp::Square, y)?;
            let d = b.add(xx, yy)?;
            let q = b.div(num, d)?;
            b.mul(g, q)
        }),
        BinaryOp::Polygamma => {
            if let Tangent::Nz(_) = tangents[0] {
                return Err(AdError::Unsupported {
                    primitive: "polygamma",
                    message: "polygamma gradient with respect to m is not supported".to_string(),
                });
            }
            standard(b, old, eqn, primals, tangents, |b, _, g, _| {
                // g * polygamma(m + 1, x)
                let dt = b.aval(&x).dtype;
                let m1 = b.add(x, lit(dt, 1.0))?;
                let p = b.binary(BinaryOp::Polygamma, m1, y)?;
                b.mul(g, p)
            })
        }
        BinaryOp::Igamma | BinaryOp::Igammac => standard(b, old, eqn, primals, tangents, |b, i, g, _| {
            let d = if i == 0 {
                // igamma_grada: g * igamma_grad_a(a, x)
                let ga = b.binary(BinaryOp::IgammaGradA, x, y)?;
                b.mul(g, ga)?
            } else {
                // igamma_gradx: g * exp(-x + (a - 1) * log(x) - lgamma(a))
                let a_aval = b.aval(&x);
                let nx = b.neg(y)?;
                let ones = b.full(&a_aval, 1.0)?;
                let am1 = b.sub(x, ones)?;
                let lx = b.unary(UnaryOp::Log, y)?;
                let m = b.mul(am1, lx)?;
                let s = b.add(nx, m)?;
                let lg = b.unary(UnaryOp::Lgamma, x)?;
                let e = b.sub(s, lg)?;
                let e = b.unary(UnaryOp::Exp, e)?;
                b.mul(g, e)?
            };
            // igammac's rules are igamma's negated.
            if op == BinaryOp::Igammac {
                b.neg(d)
            } else {
                Ok(d)
            }
        }),
        BinaryOp::IgammaGradA | BinaryOp::Zeta => Err(AdError::Unsupported {
            primitive: op.name(),
            message: format!("Differentiation rule for '{}' not implemented (JAX 0.10.2 defines none)", op.name()),
        }),
        BinaryOp::Nextafter => Err(AdError::Unsupported {
            primitive: "nextafter",
            message: "JAX defines no derivative of nextafter".to_string(),
        }),
        BinaryOp::Add
        | BinaryOp::AddAny
        | BinaryOp::Sub
        | BinaryOp::Mul
        | BinaryOp::Div
        | BinaryOp::Pow
        | BinaryOp::Max
        | BinaryOp::Min => Err(not_here(op.name())),
    }
}

/// The jvp of `regularized_incomplete_beta a b x`: JAX defines it in `x` only
/// (`betainc_gradx`: `exp((b - 1) log1p(-x) + (a - 1) log(x) - lbeta(a, b)) * g`) and raises
/// for a tangent of `a` or `b`.
pub(super) fn betainc(
    b: &mut Builder,
    old: &Jaxpr,
    eqn: &Eqn,
    primals: &[Atom],
    tangents: &[Tangent],
) -> Result<JvpOut, AdError> {
    if tangents[..2].iter().any(|t| matches!(t, Tangent::Nz(_))) {
        return Err(AdError::Unsupported {
            primitive: "regularized_incomplete_beta",
            message: "Betainc gradient with respect to a and b not supported.".to_string(),
        });
    }
    let (a, bb, x) = (primals[0], primals[1], primals[2]);
    standard(b, old, eqn, primals, tangents, |b, _, g, _| {
        let dt = b.aval(&x).dtype;
        let la = b.unary(UnaryOp::Lgamma, a)?;
        let lb = b.unary(UnaryOp::Lgamma, bb)?;
        let s = b.add(la, lb)?;
        let ab = b.add(a, bb)?;
        let lab = b.unary(UnaryOp::Lgamma, ab)?;
        let lbeta = b.sub(s, lab)?;
        let bm1 = b.sub(bb, lit(dt, 1.0))?;
        let nx = b.neg(x)?;
        let l1 = b.unary(UnaryOp::Log1p, nx)?;
        let t1 = b.mul(bm1, l1)?;
        let am1 = b.sub(a, lit(dt, 1.0))?;
        let lx = b.unary(UnaryOp::Log, x)?;
        let t2 = b.mul(am1, lx)?;
        let e = b.add(t1, t2)?;
        let e = b.sub(e, lbeta)?;
        let partial_x = b.unary(UnaryOp::Exp, e)?;
        b.mul(partial_x, g)
    })
}

/// `finfo(dtype).eps` of a float dtype (`_bessel_i1e_jvp`'s threshold).
fn dtype_eps(dt: DType) -> f64 {
    match dt {
        DType::F64 => f64::EPSILON,
        DType::BF16 => 0.0078125,
        DType::F16 => 0.0009765625,
        _ => f64::from(f32::EPSILON),
    }
}

/// The ops whose rules are in `rules.rs`, which never sends them here.
fn not_here(name: &str) -> AdError {
    AdError::Internal(format!("the jvp rule of {name} is in rules.rs"))
}
