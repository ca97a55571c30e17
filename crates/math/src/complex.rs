//! Complex numbers (`c64`, `c128`): what JAX's operations mean on them, for both backends.
//! The interpreter evaluates its complex equations here, and the JIT runs each equation
//! that computes on complex values as a native step calling the same functions on its
//! buffers (its generated code only moves complex elements, as the bits of their parts), so
//! the two agree bit for bit.
//!
//! Values compute in `num_complex` at the parts' precision (`c64` in `f32`), with its
//! formulas; XLA's CPU code uses the same ones for `+`, `-` and `*`, scales by the larger
//! part first in `/` (which differs in the last bits only where `c² + d²` over- or
//! underflows) and close formulas for the transcendentals, within the conformance tests'
//! tolerance. Sums fold in [`arrays::fold_axes`]' order, products with
//! [`arrays::matmul_loop`], integer powers in [`arrays::integer_pow`]'s order.

use ndarray::ArrayD;
use num_complex::Complex;
use num_traits::Float;
use remat_ir::{c128, c64, Array, BinaryOp, CompareOp, DType, FftType, ReduceOp, UnaryOp};

use crate::arrays::{self, broadcast_shapes, zip_with, ProductLayout};
use crate::element::Element;
use crate::fft::{transform, Kind};
use crate::with_dtype;

/// A complex element type: its `num_complex` form and its arithmetic.
pub trait ComplexElement: Element {
    /// The parts' type.
    type Part: Float;
    const ZERO: Self;
    const ONE: Self;
    fn num(self) -> Complex<Self::Part>;
    fn from_num(z: Complex<Self::Part>) -> Self;
    fn add(self, o: Self) -> Self {
        Self::from_num(self.num() + o.num())
    }
    fn sub(self, o: Self) -> Self {
        Self::from_num(self.num() - o.num())
    }
    fn mul(self, o: Self) -> Self {
        Self::from_num(self.num() * o.num())
    }
    fn div(self, o: Self) -> Self {
        Self::from_num(self.num() / o.num())
    }
}

impl ComplexElement for c64 {
    type Part = f32;
    const ZERO: c64 = c64::new(0.0, 0.0);
    const ONE: c64 = c64::new(1.0, 0.0);
    fn num(self) -> Complex<f32> {
        c64::num(self)
    }
    fn from_num(z: Complex<f32>) -> c64 {
        c64::from_num(z)
    }
}

impl ComplexElement for c128 {
    type Part = f64;
    const ZERO: c128 = c128::new(0.0, 0.0);
    const ONE: c128 = c128::new(1.0, 0.0);
    fn num(self) -> Complex<f64> {
        c128::num(self)
    }
    fn from_num(z: Complex<f64>) -> c128 {
        c128::from_num(z)
    }
}

/// Runs `$body` with `$a` bound to the `ArrayD` of a complex `$x` and `$T` its element
/// type; `$other` for any other array.
macro_rules! with_complex {
    ($x:expr, $a:ident: $T:ident => $body:expr, _ => $other:expr) => {
        match $x {
            Array::C64($a) => {
                type $T = c64;
                $body
            }
            Array::C128($a) => {
                type $T = c128;
                $body
            }
            _ => $other,
        }
    };
}

fn not_complex(what: &str, x: &Array) -> String {
    format!("{what} needs a complex operand, found {}", x.aval())
}

/// The complex forms of the unary ops (`abs` is real-valued: [`unary`] handles it).
fn unary_fn<P: Float>(op: UnaryOp) -> Option<fn(Complex<P>) -> Complex<P>> {
    Some(match op {
        UnaryOp::Neg => |z| -z,
        UnaryOp::Sign => |z| {
            let r = z.norm();
            if r == P::zero() {
                Complex::new(P::zero(), P::zero())
            } else {
                z / r
            }
        },
        UnaryOp::Exp => |z| z.exp(),
        UnaryOp::Log => |z| z.ln(),
        // log(1 + z), with the small-|z| accuracy of the real part's log1p.
        UnaryOp::Log1p => |z| {
            let w = Complex::new(P::one() + z.re, z.im);
            let re = (z.re * (P::one() + P::one()) + z.re * z.re + z.im * z.im).ln_1p() / (P::one() + P::one());
            Complex::new(re, w.arg())
        },
        // exp(z) - 1 = (e^x cos y - 1) + i e^x sin y, with e^x cos y - 1 = expm1(x) cos y - 2 sin²(y/2).
        UnaryOp::Expm1 => |z| {
            let two = P::one() + P::one();
            let s = (z.im / two).sin();
            let re = z.re.exp_m1() * z.im.cos() - two * s * s;
            Complex::new(re, z.re.exp() * z.im.sin())
        },
        UnaryOp::Sin => |z| z.sin(),
        UnaryOp::Cos => |z| z.cos(),
        UnaryOp::Tan => |z| z.tan(),
        UnaryOp::Tanh => |z| z.tanh(),
        UnaryOp::Sqrt => |z| z.sqrt(),
        UnaryOp::Rsqrt => |z| z.sqrt().inv(),
        UnaryOp::Square => |z| z * z,
        UnaryOp::StopGradient | UnaryOp::Copy => |z| z,
        UnaryOp::Abs
        | UnaryOp::Not
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::IsFinite
        | UnaryOp::PopulationCount
        | UnaryOp::Clz
        | UnaryOp::Cbrt
        | UnaryOp::Exp2
        | UnaryOp::Asin
        | UnaryOp::Acos
        | UnaryOp::Atan
        | UnaryOp::Sinh
        | UnaryOp::Cosh
        | UnaryOp::Asinh
        | UnaryOp::Acosh
        | UnaryOp::Atanh
        | UnaryOp::Erf
        | UnaryOp::Erfc
        | UnaryOp::ErfInv
        | UnaryOp::Lgamma
        | UnaryOp::Logistic
        | UnaryOp::Digamma
        | UnaryOp::BesselI0e
        | UnaryOp::BesselI1e => return None,
    })
}

/// A unary op on a complex operand; `abs` is the magnitude `hypot(re, im)`, a real number.
pub fn unary(op: UnaryOp, x: &Array) -> Result<Array, String> {
    let undefined = || format!("{} is not defined on {}", op.name(), x.dtype());
    Ok(match x {
        Array::C64(a) if op == UnaryOp::Abs => Array::F32(a.mapv(|z| z.re.hypot(z.im))),
        Array::C128(a) if op == UnaryOp::Abs => Array::F64(a.mapv(|z| z.re.hypot(z.im))),
        _ => with_complex!(x, a: T => {
            let f = unary_fn(op).ok_or_else(undefined)?;
            Element::wrap(a.mapv(|z: T| T::from_num(f(z.num()))))
        }, _ => return Err(not_complex(op.name(), x))),
    })
}

/// A binary function of complex numbers with parts of `P`.
type Binary<P> = fn(Complex<P>, Complex<P>) -> Complex<P>;

fn binary_fn<P: Float>(op: BinaryOp) -> Option<Binary<P>> {
    Some(match op {
        BinaryOp::Add | BinaryOp::AddAny => |x, y| x + y,
        BinaryOp::Sub => |x, y| x - y,
        BinaryOp::Mul => |x, y| x * y,
        BinaryOp::Div => |x, y| x / y,
        // x^y = exp(y log x), with 0^0 = 1 and 0^y = 0 for Re y > 0 (XLA's rule).
        BinaryOp::Pow => |x, y| {
            let zero = P::zero();
            if x.re == zero && x.im == zero {
                if y.re == zero && y.im == zero {
                    return Complex::new(P::one(), zero);
                }
                if y.im == zero && y.re > zero {
                    return Complex::new(zero, zero);
                }
            }
            (y * x.ln()).exp()
        },
        BinaryOp::Max
        | BinaryOp::Min
        | BinaryOp::Rem
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
        | BinaryOp::Mulhi => return None,
    })
}

/// A binary op on complex operands (`pow` also with an integer exponent), broadcasting a
/// rank-0 operand.
pub fn binary(op: BinaryOp, x: &Array, y: &Array) -> Result<Array, String> {
    let shape = broadcast_shapes(x, y)?;
    let undefined = || format!("{} is not defined on {}", op.name(), x.dtype());
    Ok(match (x, y) {
        (Array::C64(a), Array::C64(b)) => {
            let f = binary_fn::<f32>(op).ok_or_else(undefined)?;
            Array::C64(zip_with(a, b, &shape, |p: c64, q: c64| c64::from_num(f(p.num(), q.num())))?)
        }
        (Array::C128(a), Array::C128(b)) => {
            let f = binary_fn::<f64>(op).ok_or_else(undefined)?;
            Array::C128(zip_with(a, b, &shape, |p: c128, q: c128| c128::from_num(f(p.num(), q.num())))?)
        }
        _ if op == BinaryOp::Pow && x.dtype().is_complex() && y.dtype().is_integer() => {
            let exponent = convert(x.dtype(), y)?;
            return binary(op, x, &exponent);
        }
        _ => return Err(format!("operands have different dtypes: {} and {}", x.aval(), y.aval())),
    })
}

/// `eq` or `ne` of complex operands: both parts compared as IEEE numbers.
pub fn compare(op: CompareOp, x: &Array, y: &Array) -> Result<Array, String> {
    let shape = broadcast_shapes(x, y)?;
    let equal = match op {
        CompareOp::Eq => true,
        CompareOp::Ne => false,
        CompareOp::Lt
        | CompareOp::Le
        | CompareOp::Gt
        | CompareOp::Ge
        | CompareOp::EqTo
        | CompareOp::LeTo
        | CompareOp::LtTo => return Err(format!("{} is not defined on {}", op.name(), x.dtype())),
    };
    Ok(Array::Bool(match (x, y) {
        (Array::C64(a), Array::C64(b)) => zip_with(a, b, &shape, |p, q| (p == q) == equal)?,
        (Array::C128(a), Array::C128(b)) => zip_with(a, b, &shape, |p, q| (p == q) == equal)?,
        _ => return Err(format!("operands have different dtypes: {} and {}", x.aval(), y.aval())),
    }))
}

/// `integer_pow[y]` of a complex operand: [`arrays::integer_pow`]'s multiplications.
pub fn integer_pow(y: i32, x: &Array) -> Result<Array, String> {
    with_complex!(x, a: T => Ok(Element::wrap(a.mapv(|z: T| arrays::integer_pow(z, y, T::ONE, T::mul, T::div)))),
        _ => Err(not_complex("integer_pow", x)))
}

/// `reduce_sum` or `reduce_prod` of a complex operand over the ascending, distinct axes.
pub fn reduce(op: ReduceOp, axes: &[usize], x: &Array) -> Result<Array, String> {
    let sum = match op {
        ReduceOp::Sum => true,
        ReduceOp::Prod => false,
        ReduceOp::Max | ReduceOp::Min | ReduceOp::And | ReduceOp::Or | ReduceOp::Xor => {
            return Err(format!("{} is not defined on {}", op.name(), x.dtype()))
        }
    };
    with_complex!(x, a: T => Ok(Element::wrap(match sum {
        true => arrays::fold_axes(a, axes, T::ZERO, T::add),
        false => arrays::fold_axes(a, axes, T::ONE, T::mul),
    })), _ => Err(not_complex(op.name(), x)))
}

/// `dot_general` of complex operands of one dtype, laid out by `layout`: each result
/// element a multiply-add loop over the contracted extent ([`arrays::matmul_loop`]).
pub fn dot_general(layout: &ProductLayout, lhs: &Array, rhs: &Array) -> Result<Array, String> {
    match (lhs, rhs) {
        (Array::C64(l), Array::C64(r)) => Ok(Array::C64(
            layout.product(l, r, |l, r| arrays::matmul_loop(l, r, c64::ZERO, |acc, x, y| acc.add(x.mul(y))))?,
        )),
        (Array::C128(l), Array::C128(r)) => Ok(Array::C128(
            layout.product(l, r, |l, r| arrays::matmul_loop(l, r, c128::ZERO, |acc, x, y| acc.add(x.mul(y))))?,
        )),
        _ => Err(format!(
            "dot_general of complex numbers needs two operands of one complex dtype, found {} and {}",
            lhs.aval(),
            rhs.aval()
        )),
    }
}

/// `complex x y`: `x + i y`.
pub fn complex(x: &Array, y: &Array) -> Result<Array, String> {
    let shape = broadcast_shapes(x, y)?;
    Ok(match (x, y) {
        (Array::F32(a), Array::F32(b)) => Array::C64(zip_with(a, b, &shape, c64::new)?),
        (Array::F64(a), Array::F64(b)) => Array::C128(zip_with(a, b, &shape, c128::new)?),
        _ => return Err(format!("complex needs two f32 or two f64 operands, found {} and {}", x.aval(), y.aval())),
    })
}

/// `real z` (`imag = false`) or `imag z`.
pub fn part(imag: bool, z: &Array) -> Result<Array, String> {
    Ok(match z {
        Array::C64(a) => Array::F32(a.mapv(|z| if imag { z.im } else { z.re })),
        Array::C128(a) => Array::F64(a.mapv(|z| if imag { z.im } else { z.re })),
        _ => return Err(not_complex(if imag { "imag" } else { "real" }, z)),
    })
}

/// `conj z`: the conjugate; a real operand becomes complex with imaginary part 0.
pub fn conj(z: &Array) -> Result<Array, String> {
    Ok(match z {
        Array::C64(a) => Array::C64(a.mapv(|z| c64::new(z.re, -z.im))),
        Array::C128(a) => Array::C128(a.mapv(|z| c128::new(z.re, -z.im))),
        Array::F32(_) => convert(DType::C64, z)?,
        Array::F64(_) => convert(DType::C128, z)?,
        _ => return Err(format!("conj needs a float or complex operand, found {}", z.aval())),
    })
}

/// `convert_element_type` where either side is complex: complex to complex rounds each
/// part; complex to real keeps the real part converted (as NumPy and JAX do); real to
/// complex has the value as its real part (rounded to the parts' dtype through `f64`, as the
/// real conversions are) and imaginary part 0.
pub fn convert(new_dtype: DType, x: &Array) -> Result<Array, String> {
    let real_of = |to: DType, a: &Array| -> Result<Array, String> {
        with_dtype!(a.dtype(), S => {
            let xs = S::get(a).ok_or_else(|| format!("expected {}, found {}", S::DTYPE.numpy_name(), a.aval()))?;
            with_dtype!(to, D => Ok(D::wrap(xs.mapv(|v| <D as Element>::from_f64(<S as Element>::to_f64(v))))))
        })
    };
    match (x.dtype().is_complex(), new_dtype.is_complex()) {
        (true, true) => {
            let p = new_dtype.real_dtype();
            complex(&real_of(p, &part(false, x)?)?, &real_of(p, &part(true, x)?)?)
        }
        (true, false) => real_of(new_dtype, &part(false, x)?),
        (false, true) => {
            let re = real_of(new_dtype.real_dtype(), x)?;
            let im = Array::zeros(&re.aval());
            complex(&re, &im)
        }
        (false, false) => Err(format!("{} to {} involves no complex value", x.aval(), new_dtype.numpy_name())),
    }
}

/// `fft[fft_type fft_lengths] x`: [`crate::fft::transform`] in `f64`, rounded once to the
/// result's dtype.
pub fn fft(fft_type: FftType, fft_lengths: &[usize], x: &Array) -> Result<Array, String> {
    let kind = match fft_type {
        FftType::Fft => Kind::Fft,
        FftType::Ifft => Kind::Ifft,
        FftType::Rfft => Kind::Rfft,
        FftType::Irfft => Kind::Irfft,
    };
    let wide: ArrayD<Complex<f64>> = match x {
        Array::C64(a) => a.mapv(|z| Complex::new(f64::from(z.re), f64::from(z.im))),
        Array::C128(a) => a.mapv(c128::num),
        Array::F32(a) => a.mapv(|v| Complex::new(f64::from(v), 0.0)),
        Array::F64(a) => a.mapv(|v| Complex::new(v, 0.0)),
        _ => return Err(format!("fft needs a float or complex operand, found {}", x.aval())),
    };
    if fft_lengths.is_empty() || fft_lengths.len() > wide.ndim() {
        return Err(format!("fft: fft_lengths {fft_lengths:?} do not fit the operand {}", x.aval()));
    }
    let out = transform(&wide, kind, fft_lengths);
    let single = matches!(x.dtype(), DType::C64 | DType::F32);
    Ok(match (fft_type, single) {
        (FftType::Irfft, true) => Array::F32(out.mapv(|z| z.re as f32)),
        (FftType::Irfft, false) => Array::F64(out.mapv(|z| z.re)),
        (_, true) => Array::C64(out.mapv(|z| c64::new(z.re as f32, z.im as f32))),
        (_, false) => Array::C128(out.mapv(c128::from_num)),
    })
}
