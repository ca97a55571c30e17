//! Owning compiled code: the JIT module whose memory holds a program's machine code, its
//! entry point, and the call that enters it.

use cranelift_jit::JITModule;
use cranelift_module::FuncId;

use super::cpu::clear_upper_vector_state;

/// Finished machine code and its entry point `fn(arena, table)`.
pub(crate) struct NativeCode {
    module: Option<JITModule>,
    entry: extern "C" fn(*mut u8, *const usize),
}

impl std::fmt::Debug for NativeCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NativeCode")
    }
}

// SAFETY: the module is only touched again to free its memory in `drop`, which takes
// `&mut self`; the finished code is plain machine code that any thread may run.
unsafe impl Sync for NativeCode {}

impl NativeCode {
    pub fn new(module: JITModule, entry: FuncId) -> NativeCode {
        let ptr = module.get_finalized_function(entry);
        // SAFETY: `entry` was defined with the signature `fn(i64, i64)` in the platform's
        // default (System V) calling convention, which is `extern "C" fn(ptr, ptr)`.
        let entry = unsafe { std::mem::transmute::<*const u8, extern "C" fn(*mut u8, *const usize)>(ptr) };
        NativeCode { module: Some(module), entry }
    }

    /// Runs the program.
    ///
    /// The caller guarantees (and `Compiled::run` checks) that `arena` has the planned
    /// size and `table` holds one pointer per argument, constant and output, each to an
    /// array of the dtype and shape the program was compiled for.
    ///
    /// The program runs on this thread; its split products and loops hand parts to the
    /// helper threads (`pool`).
    pub fn call(&self, arena: &mut [u8], table: &[usize]) {
        // XLA's float environment while the program runs on this thread (its helpers have
        // it always): subnormal operands and results are zeros, as in JAX on CPU.
        let _env = remat_math::XlaFloatEnv::enter();
        clear_upper_vector_state();
        (self.entry)(arena.as_mut_ptr(), table.as_ptr());
    }
}

impl Drop for NativeCode {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the code is unreachable once `self` goes: the entry pointer lives only
            // here, and `call` borrows `self`.
            unsafe { m.free_memory() };
        }
    }
}
