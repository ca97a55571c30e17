//! Complex numbers (`c64`, `c128`): the elementwise functions JAX defines on them, the
//! parts (`complex`, `real`, `imag`, `conj`) and conversions to and from real dtypes. The
//! generic rules (moves, sums, products, scatters, and `eq`/`ne`, which compare both parts)
//! run on complex elements through `elem.rs`'s `Num` for `c64`/`c128`; this file holds what
//! has no real counterpart.
//!
//! Values compute in `num_complex` at the parts' precision (`c64` in `f32`), with its
//! formulas; XLA's CPU code uses the same ones for arithmetic and close ones for the
//! transcendentals, within the conformance tests' tolerance.

use ndarray::ArrayD;
use num_complex::Complex;
use num_traits::Float;
use remat_ir::{c128, c64, Array, BinaryOp, DType, FftType, UnaryOp};
use remat_math::fft::{transform, Kind};

use remat_math::element::Element;
use remat_math::with_dtype;

use crate::elem::{broadcast_shapes, typed, zip_with, Elem};

/// A complex element type and its `num_complex` form.
trait Cx: Copy {
    type P: Float;
    fn num(self) -> Complex<Self::P>;
    fn from_num(z: Complex<Self::P>) -> Self;
}

impl Cx for c64 {
    type P = f32;
    fn num(self) -> Complex<f32> {
        c64::num(self)
    }
    fn from_num(z: Complex<f32>) -> c64 {
        c64::from_num(z)
    }
}

impl Cx for c128 {
    type P = f64;
    fn num(self) -> Complex<f64> {
        c128::num(self)
    }
    fn from_num(z: Complex<f64>) -> c128 {
        c128::from_num(z)
    }
}

fn not_complex(what: &str, x: &Array) -> String {
    format!("{what} needs a complex operand, found {}", x.aval())
}

/// The complex forms of the unary ops (`abs` is real-valued: [`abs`]).
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

fn map<T: Cx>(a: &ArrayD<T>, f: fn(Complex<T::P>) -> Complex<T::P>) -> ArrayD<T> {
    a.mapv(|z| T::from_num(f(z.num())))
}

/// A unary op on a complex operand.
pub(crate) fn unary(op: UnaryOp, x: &Array) -> Result<Array, String> {
    let undefined = || format!("{} is not defined on {}", op.name(), x.dtype());
    Ok(match x {
        _ if op == UnaryOp::Abs => return abs(x),
        Array::C64(a) => Array::C64(map(a, unary_fn(op).ok_or_else(undefined)?)),
        Array::C128(a) => Array::C128(map(a, unary_fn(op).ok_or_else(undefined)?)),
        _ => return Err(not_complex(op.name(), x)),
    })
}

/// `abs z`: the magnitude `hypot(re, im)`, a real number.
fn abs(x: &Array) -> Result<Array, String> {
    Ok(match x {
        Array::C64(a) => Array::F32(a.mapv(|z| z.re.hypot(z.im))),
        Array::C128(a) => Array::F64(a.mapv(|z| z.re.hypot(z.im))),
        _ => return Err(not_complex("abs", x)),
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

fn zip<T: Cx>(a: &ArrayD<T>, b: &ArrayD<T>, shape: &[usize], f: Binary<T::P>) -> Result<ArrayD<T>, String> {
    zip_with(a, b, shape, |x: T, y: T| T::from_num(f(x.num(), y.num())))
}

/// A binary op on complex operands (`pow` also with an integer exponent).
pub(crate) fn binary(op: BinaryOp, x: &Array, y: &Array) -> Result<Array, String> {
    let shape = broadcast_shapes(x, y)?;
    let undefined = || format!("{} is not defined on {}", op.name(), x.dtype());
    Ok(match (x, y) {
        (Array::C64(a), Array::C64(b)) => Array::C64(zip(a, b, &shape, binary_fn(op).ok_or_else(undefined)?)?),
        (Array::C128(a), Array::C128(b)) => Array::C128(zip(a, b, &shape, binary_fn(op).ok_or_else(undefined)?)?),
        _ if op == BinaryOp::Pow && x.dtype().is_complex() && y.dtype().is_integer() => {
            let exponent = convert(x.dtype(), y)?;
            return binary(op, x, &exponent);
        }
        _ => return Err(format!("operands have different dtypes: {} and {}", x.aval(), y.aval())),
    })
}

/// `complex x y`: `x + i y`.
pub(crate) fn complex(x: &Array, y: &Array) -> Result<Array, String> {
    let shape = broadcast_shapes(x, y)?;
    Ok(match (x, y) {
        (Array::F32(a), Array::F32(b)) => Array::C64(zip_with(a, b, &shape, c64::new)?),
        (Array::F64(a), Array::F64(b)) => Array::C128(zip_with(a, b, &shape, c128::new)?),
        _ => return Err(format!("complex needs two f32 or two f64 operands, found {} and {}", x.aval(), y.aval())),
    })
}

/// `real z` (`imag = false`) or `imag z`.
pub(crate) fn part(imag: bool, z: &Array) -> Result<Array, String> {
    Ok(match z {
        Array::C64(a) => Array::F32(a.mapv(|z| if imag { z.im } else { z.re })),
        Array::C128(a) => Array::F64(a.mapv(|z| if imag { z.im } else { z.re })),
        _ => return Err(not_complex(if imag { "imag" } else { "real" }, z)),
    })
}

/// `conj z`: the conjugate; a real operand becomes complex with imaginary part 0.
pub(crate) fn conj(z: &Array) -> Result<Array, String> {
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
pub(crate) fn convert(new_dtype: DType, x: &Array) -> Result<Array, String> {
    let real_of = |to: DType, a: &Array| -> Result<Array, String> {
        with_dtype!(a.dtype(), S => {
            let xs = typed::<S>(a)?;
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

/// `fft[fft_type fft_lengths] x`: `remat_math::fft` in `f64`, rounded once to the result's
/// dtype (the JIT's native step is this function too).
pub(crate) fn fft(fft_type: FftType, fft_lengths: &[usize], x: &Array) -> Result<Array, String> {
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
