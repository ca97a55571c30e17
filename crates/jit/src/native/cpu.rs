//! The CPU's vector state between Rust and JIT code: whether it has AVX, and `vzeroupper`
//! after code that may leave the upper halves of the vector registers dirty.

use std::sync::OnceLock;

fn has_avx() -> bool {
    static AVX: OnceLock<bool> = OnceLock::new();
    *AVX.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// `vzeroupper`: Cranelift mixes legacy-SSE and VEX encodings, which run ~250x slower when
/// the upper halves of the vector registers are dirty (see CRANELIFT_NOTES.md), as the
/// GEMM's AVX2 and AVX-512 kernels leave them.
pub(super) fn clear_upper_vector_state() {
    #[cfg(target_arch = "x86_64")]
    if has_avx() {
        // SAFETY: `vzeroupper` only zeroes the upper halves of the vector registers (bits 128
        // and up of ymm0-15/zmm0-15), which no Rust code keeps live across this point; the
        // CPU supports it (AVX was detected).
        unsafe { std::arch::asm!("vzeroupper", options(nomem, nostack, preserves_flags)) };
    }
}
