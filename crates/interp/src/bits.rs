//! The integer side of the elementwise ops and the bit-level ones: `not`, `and`, `or`,
//! `xor`, the three shifts, `rem`, `population_count`, `clz` and `mulhi` on integers (with XLA's out-of-range rules), and
//! `bitcast_convert_type` between dtypes of any widths.
//!
//! XLA's rules, which no operation here panics on: a shift amount at or above the bit
//! width (a negative one read as unsigned) gives 0 for `shift_left` and
//! `shift_right_logical` and the sign fill for `shift_right_arithmetic`; `x rem 0 = x`
//! and `MIN rem -1 = 0`. An integer dtype joins by one line of `int_impls!` and a
//! bit-castable one by one line of `bits_impls!`.

use std::ops::{BitAnd, BitOr, BitXor, Not};

use ndarray::{ArrayD, IxDyn};
use remat_ir::{bf16, c128, c64, f16, Array, DType};

use crate::elem::{num_dtype, operands, typed, Num};
use remat_math::element::Element;

/// The integer dtypes: bitwise operations, shifts and XLA's remainder.
pub(crate) trait Int:
    Num + Not<Output = Self> + BitAnd<Output = Self> + BitOr<Output = Self> + BitXor<Output = Self>
{
    fn shift_left(self, y: Self) -> Self;
    fn shift_right_logical(self, y: Self) -> Self;
    fn shift_right_arithmetic(self, y: Self) -> Self;
    /// Truncated remainder (the dividend's sign); `x rem 0 = x`, `MIN rem -1 = 0`.
    fn rem(self, y: Self) -> Self;
    /// `population_count`: the number of set bits.
    fn population_count(self) -> Self;
    /// `clz`: the number of leading zero bits (the width for 0).
    fn clz(self) -> Self;
    /// `mulhi`: the high half of the double-width product (signed for signed dtypes).
    fn mulhi(self, y: Self) -> Self;
}

/// `int_impls!(T: S, U)` implements [`Int`] for `T`, whose signed and unsigned twins of the
/// same width are `S` and `U`.
macro_rules! int_impls {
    ($($t:ident: $s:ident, $u:ident;)+) => {$(
        impl Int for $t {
            fn shift_left(self, y: $t) -> $t {
                if (y as $u) >= <$u>::BITS as $u { 0 } else { ((self as $u) << (y as $u)) as $t }
            }
            fn shift_right_logical(self, y: $t) -> $t {
                if (y as $u) >= <$u>::BITS as $u { 0 } else { ((self as $u) >> (y as $u)) as $t }
            }
            fn shift_right_arithmetic(self, y: $t) -> $t {
                let y = (y as $u).min(<$u>::BITS as $u - 1);
                ((self as $s) >> y) as $t
            }
            fn rem(self, y: $t) -> $t {
                if y == 0 { self } else { self.wrapping_rem(y) }
            }
            fn population_count(self) -> $t {
                self.count_ones() as $t
            }
            fn clz(self) -> $t {
                self.leading_zeros() as $t
            }
            fn mulhi(self, y: $t) -> $t {
                // `as i128` sign-extends a signed dtype and zero-extends an unsigned one.
                ((self as i128 * y as i128) >> <$t>::BITS) as $t
            }
        }
    )+};
}

int_impls! {
    i8: i8, u8;
    i16: i16, u16;
    i32: i32, u32;
    i64: i64, u64;
    u8: i8, u8;
    u32: i32, u32;
}

/// The function of a bitwise or shift op on an integer dtype, `None` for the others.
pub(crate) fn int_bit_op<T: Int>(op: remat_ir::BinaryOp) -> Option<fn(T, T) -> T> {
    use remat_ir::BinaryOp as B;
    match op {
        B::And => Some(|x, y| x & y),
        B::Or => Some(|x, y| x | y),
        B::Xor => Some(|x, y| x ^ y),
        B::ShiftLeft => Some(T::shift_left),
        B::ShiftRightLogical => Some(T::shift_right_logical),
        B::ShiftRightArithmetic => Some(T::shift_right_arithmetic),
        B::Rem => Some(T::rem),
        B::Mulhi => Some(T::mulhi),
        B::Add
        | B::AddAny
        | B::Sub
        | B::Mul
        | B::Div
        | B::Pow
        | B::Max
        | B::Min
        | B::Atan2
        | B::Nextafter
        | B::Polygamma
        | B::Igamma
        | B::Igammac
        | B::IgammaGradA
        | B::Zeta => None,
    }
}

/// Element types with a bit pattern: little-endian bytes out and in.
pub(crate) trait Bits: Copy {
    const BYTES: usize;
    fn put_le(self, out: &mut Vec<u8>);
    /// `bytes` has exactly `BYTES` bytes.
    fn from_le(bytes: &[u8]) -> Self;
}

macro_rules! bits_impls {
    ($($t:ident),+) => {$(
        impl Bits for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            fn put_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn from_le(bytes: &[u8]) -> $t {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(bytes);
                <$t>::from_le_bytes(b)
            }
        }
    )+};
}

bits_impls!(f32, f64, bf16, f16, i8, i16, i32, i64, u8, u32);

macro_rules! complex_bits {
    ($t:ident, $part:ty) => {
        /// The real part's bytes, then the imaginary part's (NumPy's layout).
        impl Bits for $t {
            const BYTES: usize = 2 * std::mem::size_of::<$part>();
            fn put_le(self, out: &mut Vec<u8>) {
                self.re.put_le(out);
                self.im.put_le(out);
            }
            fn from_le(bytes: &[u8]) -> $t {
                let half = Self::BYTES / 2;
                <$t>::new(<$part>::from_le(&bytes[..half]), <$part>::from_le(&bytes[half..]))
            }
        }
    };
}

complex_bits!(c64, f32);
complex_bits!(c128, f64);

/// `bitcast_convert_type[new_dtype=D] x`: the same bytes read as `D`. A narrower `D` adds
/// a trailing axis of the width ratio (little-endian order); a wider one removes the last
/// axis, which must be the ratio.
pub(crate) fn bitcast_convert_type(new_dtype: DType, args: &[&Array]) -> Result<Array, String> {
    let [x] = operands(args)?;
    let no_bits = |d: DType| format!("bitcast_convert_type: {d} has no bit width to reinterpret");
    num_dtype!(x.dtype(), S => {
        let xs = typed::<S>(x)?;
        let mut bytes = Vec::with_capacity(xs.len() * S::BYTES);
        xs.iter().for_each(|&v| v.put_le(&mut bytes));
        num_dtype!(new_dtype, D => {
            let mut shape = xs.shape().to_vec();
            if S::BYTES > D::BYTES {
                shape.push(S::BYTES / D::BYTES);
            } else if S::BYTES < D::BYTES {
                if shape.last() != Some(&(D::BYTES / S::BYTES)) {
                    return Err(format!(
                        "bitcast_convert_type: bitcasting {} to the wider {new_dtype} needs a last axis of {}",
                        x.aval(),
                        D::BYTES / S::BYTES
                    ));
                }
                shape.pop();
            }
            let data: Vec<D> = bytes.chunks_exact(D::BYTES).map(<D as Bits>::from_le).collect();
            let out = ArrayD::from_shape_vec(IxDyn(&shape), data).map_err(|e| e.to_string())?;
            Ok(D::wrap(out))
        }, bool => Err(no_bits(new_dtype)))
    }, bool => Err(no_bits(DType::Bool)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifts_follow_xlas_out_of_range_rules() {
        assert_eq!(1i32.shift_left(31), i32::MIN);
        assert_eq!(1i32.shift_left(32), 0);
        assert_eq!(1i32.shift_left(-1), 0);
        assert_eq!((-8i32).shift_right_logical(1), 0x7FFF_FFFC);
        assert_eq!((-8i32).shift_right_logical(33), 0);
        assert_eq!((-8i32).shift_right_arithmetic(1), -4);
        assert_eq!((-8i32).shift_right_arithmetic(32), -1);
        assert_eq!(8i32.shift_right_arithmetic(-1), 0);
    }

    #[test]
    fn integer_rem_truncates_and_never_traps() {
        assert_eq!([(7, 2), (-7, 2), (7, -2), (-7, -2)].map(|(x, y): (i32, i32)| x.rem(y)), [1, -1, 1, -1]);
        assert_eq!(5i32.rem(0), 5);
        assert_eq!(i32::MIN.rem(-1), 0);
    }

    #[test]
    fn bitcast_reinterprets_the_bits() {
        let x = Array::F32(ndarray::arr1(&[1.0f32, -0.0]).into_dyn());
        let y = bitcast_convert_type(DType::I32, &[&x]).unwrap();
        assert_eq!(y, Array::I32(ndarray::arr1(&[1065353216, i32::MIN]).into_dyn()));
        let back = bitcast_convert_type(DType::F32, &[&y]).unwrap();
        let bits = |a: &Array| typed::<f32>(a).unwrap().mapv(f32::to_bits);
        assert_eq!(bits(&back), bits(&x));
        // f64 -> i32 splits each value into two words, low word first.
        let d = Array::F64(ndarray::arr1(&[1.0f64]).into_dyn());
        let w = bitcast_convert_type(DType::I32, &[&d]).unwrap();
        assert_eq!(w, Array::I32(ndarray::arr2(&[[0, 0x3FF0_0000]]).into_dyn()));
        assert_eq!(bitcast_convert_type(DType::F64, &[&w]).unwrap(), d);
        let three = Array::I32(ndarray::arr1(&[1, 2, 3]).into_dyn());
        assert!(bitcast_convert_type(DType::F64, &[&three]).unwrap_err().contains("needs a last axis of 2"));
        assert!(bitcast_convert_type(DType::Bool, &[&y]).is_err());
    }
}
