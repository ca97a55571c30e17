//! Subnormal numbers as XLA's CPU float environment treats them, on bit patterns: the one
//! home of remat's DAZ and FTZ outside the hardware's (`fenv`).
//!
//! [`Flush::daz`] reads a subnormal operand as a zero of its sign (MXCSR's DAZ),
//! [`Flush::ftz`] writes a subnormal result as one (FTZ). Code whose arithmetic is one
//! hardware instruction (an add, a compare) gets both from MXCSR; code that is not — bit
//! manipulation in libm's functions, a select, an optimiser that folds `x * 1.0` away —
//! does not, so it says where an operand is read and a result written with these.
//! [`maximum`] and [`minimum`] are XLA's `max` and `min` (`llvm.maximum`/`llvm.minimum`
//! on DAZ'd operands); the conversions between `f32` and `bf16` are XLA's integer ones,
//! which keep subnormals.

/// The float dtypes' subnormal handling, on bits.
pub trait Flush: Copy + PartialOrd {
    /// Whether the value is subnormal: not zero, its exponent field zero.
    fn is_subnormal(self) -> bool;
    /// Whether the value is NaN.
    fn is_nan_value(self) -> bool;
    /// Whether the sign bit is set (`-0.0` included).
    fn sign_bit(self) -> bool;
    /// DAZ: a subnormal operand read as a zero of its sign; every other value unchanged.
    fn daz(self) -> Self;
    /// FTZ: a subnormal result written as a zero of its sign; every other value unchanged.
    fn ftz(self) -> Self {
        self.daz()
    }
}

macro_rules! flush_impl {
    ($t:ty, $bits:ty, $exponent:expr, $sign:expr) => {
        impl Flush for $t {
            fn is_subnormal(self) -> bool {
                let b = self.to_bits();
                b & $exponent == 0 && b & !$sign != 0
            }
            fn is_nan_value(self) -> bool {
                self.is_nan()
            }
            fn sign_bit(self) -> bool {
                self.to_bits() & $sign != 0
            }
            fn daz(self) -> $t {
                let b: $bits = self.to_bits();
                if b & $exponent == 0 {
                    <$t>::from_bits(b & $sign)
                } else {
                    self
                }
            }
        }
    };
}

flush_impl!(f32, u32, 0x7F80_0000, 0x8000_0000);
flush_impl!(f64, u64, 0x7FF0_0000_0000_0000, 0x8000_0000_0000_0000);

/// XLA's `max` on CPU (`llvm.maximum` on DAZ'd operands, as JAX compiles it): NaN if either
/// operand is (the first NaN), `-0 < +0`, and never a subnormal: a subnormal operand takes
/// part as a zero of its sign.
pub fn maximum<T: Flush>(x: T, y: T) -> T {
    if x.is_nan_value() {
        return x;
    }
    if y.is_nan_value() {
        return y;
    }
    let (a, b) = (x.daz(), y.daz());
    if a > b || (a == b && !a.sign_bit()) {
        a
    } else {
        b
    }
}

/// XLA's `min` on CPU, as [`maximum`]: NaN first, `-0 < +0`, subnormals as zeros.
pub fn minimum<T: Flush>(x: T, y: T) -> T {
    if x.is_nan_value() {
        return x;
    }
    if y.is_nan_value() {
        return y;
    }
    let (a, b) = (x.daz(), y.daz());
    if a < b || (a == b && a.sign_bit()) {
        a
    } else {
        b
    }
}

/// XLA's `f32 -> bf16`: round to nearest even on the bits (no DAZ or FTZ: an `f32`
/// subnormal becomes the nearest `bf16` subnormal); a NaN keeps its sign and top payload
/// bits and becomes quiet.
pub fn f32_to_bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    if b & 0x7FFF_FFFF > 0x7F80_0000 {
        return ((b >> 16) | 0x0040) as u16;
    }
    let lsb = (b >> 16) & 1;
    (b.wrapping_add(0x7FFF + lsb) >> 16) as u16
}

/// XLA's `bf16 -> f32`: the bits shifted into the top half (exact, subnormals kept).
pub fn bf16_bits_to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// `f32 -> f64` as `cvtss2sd` under DAZ: exact, but a subnormal reads as a zero.
pub fn f32_to_f64(x: f32) -> f64 {
    f64::from(x.daz())
}

/// `f64 -> f32` as `cvtsd2ss` under FTZ: to nearest even, a subnormal result as a zero
/// (and a subnormal `f64`, which rounds to a zero anyway, as one).
pub fn f64_to_f32(x: f64) -> f32 {
    (x.daz() as f32).ftz()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUB: f32 = 1e-40;

    #[test]
    fn daz_flushes_only_subnormals_and_keeps_the_sign() {
        assert_eq!(SUB.daz().to_bits(), 0);
        assert_eq!((-SUB).daz().to_bits(), 0x8000_0000);
        assert_eq!(f32::from_bits(1).daz().to_bits(), 0);
        for x in [0.0f32, -0.0, f32::MIN_POSITIVE, -1.5, f32::INFINITY, f32::MAX] {
            assert_eq!(x.daz().to_bits(), x.to_bits(), "{x:e}");
        }
        assert!(f32::NAN.daz().is_nan());
        assert_eq!((-1e-310f64).ftz().to_bits(), 0x8000_0000_0000_0000);
        assert!(SUB.is_subnormal() && !0.0f32.is_subnormal() && !f32::MIN_POSITIVE.is_subnormal());
    }

    #[test]
    fn maximum_and_minimum_are_llvms_on_dazd_operands() {
        let bits = |x: f32| x.to_bits();
        // -0 < +0, whichever side.
        assert_eq!(bits(maximum(-0.0, 0.0)), 0);
        assert_eq!(bits(maximum(0.0, -0.0)), 0);
        assert_eq!(bits(minimum(0.0, -0.0)), 0x8000_0000);
        // Subnormals take part as zeros of their sign: never a subnormal result.
        assert_eq!(bits(maximum(SUB, 0.0)), 0);
        assert_eq!(bits(maximum(SUB, -1.0)), 0);
        assert_eq!(bits(maximum(-SUB, -1.0)), 0x8000_0000);
        assert_eq!(bits(maximum(SUB, -SUB)), 0);
        assert_eq!(bits(minimum(SUB, -SUB)), 0x8000_0000);
        assert_eq!(bits(minimum(SUB, 2e-40)), 0);
        assert_eq!(maximum(SUB, 1.0), 1.0);
        // NaN propagates, the first one first.
        assert!(maximum(f32::NAN, 1.0).is_nan() && minimum(1.0, f32::NAN).is_nan());
        assert_eq!(maximum(f32::from_bits(0x7FC0_0001), f32::NAN).to_bits(), 0x7FC0_0001);
    }

    #[test]
    fn bf16_conversions_are_integer_and_keep_subnormals() {
        // The recorded case convert_f32_to_bf16: 1e-39 -> 0x000b, 1e-40 -> 0x0001.
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x000A_E398)), 0x000B);
        assert_eq!(f32_to_bf16_bits(SUB), 0x0001);
        assert_eq!(f32_to_bf16_bits(-SUB), 0x8001);
        assert_eq!(f32_to_bf16_bits(f32::from_bits(1)), 0);
        // Ties to even, and overflow to infinity.
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3F80_8000)), 0x3F80);
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3F81_8000)), 0x3F82);
        assert_eq!(f32_to_bf16_bits(f32::MAX), 0x7F80);
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x7F80_0001)), 0x7FC0);
        assert_eq!(bf16_bits_to_f32(0x0001).to_bits(), 0x0001_0000);
        assert_eq!(f32_to_f64(SUB), 0.0);
        assert_eq!(f64_to_f32(1e-40).to_bits(), 0);
        assert_eq!(f64_to_f32(1.2e-38).to_bits(), 0x0082_AB1E);
    }
}
