//! XLA's CPU float environment, which every remat backend computes in.
//!
//! While XLA's CPU runtime runs a compiled program (JAX 0.10.2 on CPU), every thread doing
//! the work has the x86 MXCSR's FTZ (flush to zero: a subnormal *result* of a floating-point
//! instruction is written as a zero of its sign) and DAZ (denormals are zero: a subnormal
//! *operand* is read as a zero of its sign) both on, rounding to nearest (`tsl::port::
//! ScopedFlushDenormal` around each execution in `xla/pjrt/cpu/cpu_client.cc`, and for the
//! whole life of each thread of XLA's pools, `xla/tsl/platform/threadpool.cc`;
//! docs/jit.md, "XLA's float environment"). The rule is the hardware's, per instruction:
//! arithmetic (add, mul, div, sqrt, FMA, min/max, compares, conversions between f32 and
//! f64 and with integers) flushes; moves, selects, sign-bit operations and bit casts keep
//! the bits.
//!
//! remat runs its interpreter, its compiler and its native code under the same setting
//! ([`XlaFloatEnv`] on the calling thread, [`set_for_thread`] on the JIT's helper threads),
//! so that both backends give JAX's bits where values underflow, and run at full speed
//! there (an x86 core takes a microcode assist of ~100 cycles per subnormal it computes;
//! XLA's results are zero there). The caller's environment is restored afterwards.
//!
//! On other architectures the setting is left as it is (remat computes subnormals there,
//! which JAX on those machines may not).
//!
//! The one module of this crate with `unsafe` code: reading and writing MXCSR.
#![allow(unsafe_code)]

/// MXCSR's flush-to-zero bit.
const FTZ: u32 = 1 << 15;
/// MXCSR's denormals-are-zero bit.
const DAZ: u32 = 1 << 6;
/// MXCSR's rounding-control bits (00: to nearest).
const ROUNDING: u32 = 0b11 << 13;

#[cfg(target_arch = "x86_64")]
fn read() -> u32 {
    let mut csr: u32 = 0;
    // SAFETY: `stmxcsr` stores the 32-bit MXCSR into the local it is given; SSE is part of
    // x86-64's baseline.
    unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack, preserves_flags)) };
    csr
}

#[cfg(target_arch = "x86_64")]
fn write(csr: u32) {
    // SAFETY: `ldmxcsr` loads MXCSR from the local; the values written are ones read from
    // MXCSR with only the FTZ, DAZ and rounding bits changed, which are always valid.
    unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &csr, options(nostack, preserves_flags)) };
}

/// XLA's setting of `csr`: FTZ and DAZ on, rounding to nearest, the rest as it was.
fn xla(csr: u32) -> u32 {
    (csr | FTZ | DAZ) & !ROUNDING
}

/// XLA's float environment on this thread while the value lives; the previous setting is
/// restored when it is dropped. Nesting is free.
#[derive(Debug)]
#[must_use = "the environment is restored when the guard is dropped"]
pub struct XlaFloatEnv {
    #[cfg(target_arch = "x86_64")]
    saved: u32,
}

impl XlaFloatEnv {
    pub fn enter() -> XlaFloatEnv {
        #[cfg(target_arch = "x86_64")]
        {
            let saved = read();
            if xla(saved) != saved {
                write(xla(saved));
            }
            XlaFloatEnv { saved }
        }
        #[cfg(not(target_arch = "x86_64"))]
        XlaFloatEnv {}
    }
}

impl Drop for XlaFloatEnv {
    fn drop(&mut self) {
        #[cfg(target_arch = "x86_64")]
        if read() != self.saved {
            write(self.saved);
        }
    }
}

/// XLA's float environment on this thread for the rest of its life: for threads that only
/// ever run remat's work (the JIT's helper threads), as XLA's pool threads do.
pub fn set_for_thread() {
    #[cfg(target_arch = "x86_64")]
    write(xla(read()));
}

/// Whether this thread computes in XLA's float environment now (FTZ and DAZ on).
pub fn is_set() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        read() & (FTZ | DAZ) == FTZ | DAZ
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Opaque to the optimiser, so that the arithmetic below happens at run time.
    fn keep<T>(x: T) -> T {
        std::hint::black_box(x)
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn inside_the_guard_subnormals_flush_and_outside_they_do_not() {
        let (a, b) = (keep(1.5e-38f32), keep(-1.4e-38f32));
        let tiny = keep(1e-40f32);
        assert!((a + b) != 0.0, "IEEE outside");
        {
            let _env = XlaFloatEnv::enter();
            assert!(is_set());
            assert_eq!((keep(a) + keep(b)).to_bits(), 0, "FTZ: the subnormal sum is +0");
            let order = keep(tiny).partial_cmp(&0.0);
            assert_eq!(order, Some(std::cmp::Ordering::Equal), "DAZ: a subnormal operand compares as zero");
            assert_eq!((keep(1e-160f64) * keep(1e-160f64)).to_bits(), 0, "f64 flushes too");
            // Moves keep the bits.
            assert_eq!(keep(tiny).to_bits(), 1e-40f32.to_bits());
            {
                let _nested = XlaFloatEnv::enter();
            }
            assert!(is_set(), "a nested guard restores its caller's setting: still on");
        }
        assert!(!is_set());
        assert!(keep(tiny) > 0.0);
    }
}
