//! The import table: the runtime functions JIT code calls, registered as symbols of the
//! JIT module (name, Cranelift signature, address), and the scalar libm wrappers among them
//! (the f64 functions and `remat-math`'s, as the interpreter computes them).

use remat_ir::{BinaryOp, UnaryOp};
use remat_math::elementary;

use super::gemm::remat_dot;
use super::parallel::{remat_pair, remat_parallel_for};
use super::{indexing, vmath};

/// The runtime functions JIT code may call, registered as symbols of the JIT module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Import {
    Dot,
    ParallelFor,
    Pair,
    ExpF64,
    LogF64,
    Log1pF64,
    Expm1F64,
    SinF64,
    CosF64,
    TanF64,
    TanhF64,
    PowF64,
    SinF32,
    CosF32,
    TanF32,
    /// `exp` in place over a contiguous run of f32 (`vmath`).
    ExpF32Slice,
    /// `tanh` in place over a contiguous run of f32 (`vmath`).
    TanhF32Slice,
    /// `exp(x + row)` over contiguous rows of f32 (`vmath::add_row_fn`).
    ExpAddRowF32,
    /// `tanh(x + row)` over contiguous rows of f32 (`vmath::add_row_fn`).
    TanhAddRowF32,
    /// A gather, scatter, sort, ... over whole buffers (`indexing`).
    Native,
    /// `remat-math`'s unary functions: `(op index in UnaryOp::ALL, x)`.
    MathUnaryF32,
    MathUnaryF64,
    /// `remat-math`'s binary functions: `(op index in BinaryOp::ALL, x, y)`.
    MathBinaryF32,
    MathBinaryF64,
}

/// The Cranelift signature shape of an import.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ImportSig {
    F32ToF32,
    F64ToF64,
    F64F64ToF64,
    /// `(desc, lhs, rhs, out)`, all pointers.
    Dot,
    /// `(range function, bases, total, grain)`.
    ParallelFor,
    /// `(site, step function, bases, step function, bases)`.
    Pair,
    /// `(ptr, len)` of a run of f32 changed in place.
    Slice,
    /// `(dst, src, row, len, width)`: rows of f32 plus a broadcast row, mapped.
    AddRow,
    /// `(desc, bases)`, both pointers.
    Native,
    /// `(op, x)` with an `i32` op index.
    OpF32ToF32,
    OpF64ToF64,
    /// `(op, x, y)` with an `i32` op index.
    OpF32F32ToF32,
    OpF64F64ToF64,
}

// The f64 functions as the interpreter computes them (`remat_math::elementary`: XLA's
// treatment of subnormals made explicit).
extern "C" fn exp_f64(x: f64) -> f64 {
    elementary::exp(x)
}
extern "C" fn log_f64(x: f64) -> f64 {
    elementary::log(x)
}
extern "C" fn log1p_f64(x: f64) -> f64 {
    elementary::log1p(x)
}
extern "C" fn expm1_f64(x: f64) -> f64 {
    elementary::expm1(x)
}
extern "C" fn sin_f64(x: f64) -> f64 {
    elementary::sin(x)
}
extern "C" fn cos_f64(x: f64) -> f64 {
    elementary::cos(x)
}
extern "C" fn tan_f64(x: f64) -> f64 {
    elementary::tan(x)
}
extern "C" fn tanh_f64(x: f64) -> f64 {
    elementary::tanh(x)
}
extern "C" fn pow_f64(x: f64, y: f64) -> f64 {
    elementary::pow(x, y)
}
/// The function of `UnaryOp::ALL[op]` from `remat-math`; NaN for an op it does not define
/// (the lowering passes only ops it does).
extern "C" fn math_unary<T: remat_math::MathFloat + From<f32>>(op: i32, x: T) -> T {
    match UnaryOp::ALL.get(op as usize).and_then(|&op| T::unary(op)) {
        Some(f) => f(x),
        None => T::from(f32::NAN),
    }
}

/// The function of `BinaryOp::ALL[op]` from `remat-math`, as [`math_unary`].
extern "C" fn math_binary<T: remat_math::MathFloat + From<f32>>(op: i32, x: T, y: T) -> T {
    match BinaryOp::ALL.get(op as usize).and_then(|&op| T::binary(op)) {
        Some(f) => f(x, y),
        None => T::from(f32::NAN),
    }
}

extern "C" fn sin_f32(x: f32) -> f32 {
    x.sin()
}
extern "C" fn cos_f32(x: f32) -> f32 {
    x.cos()
}
extern "C" fn tan_f32(x: f32) -> f32 {
    x.tan()
}

impl Import {
    pub const ALL: [Import; 24] = [
        Import::Dot,
        Import::ParallelFor,
        Import::Pair,
        Import::ExpF64,
        Import::LogF64,
        Import::Log1pF64,
        Import::Expm1F64,
        Import::SinF64,
        Import::CosF64,
        Import::TanF64,
        Import::TanhF64,
        Import::PowF64,
        Import::SinF32,
        Import::CosF32,
        Import::TanF32,
        Import::ExpF32Slice,
        Import::TanhF32Slice,
        Import::ExpAddRowF32,
        Import::TanhAddRowF32,
        Import::Native,
        Import::MathUnaryF32,
        Import::MathUnaryF64,
        Import::MathBinaryF32,
        Import::MathBinaryF64,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Import::Dot => "remat_dot",
            Import::ParallelFor => "remat_parallel_for",
            Import::Pair => "remat_pair",
            Import::ExpF64 => "remat_exp_f64",
            Import::LogF64 => "remat_log_f64",
            Import::Log1pF64 => "remat_log1p_f64",
            Import::Expm1F64 => "remat_expm1_f64",
            Import::SinF64 => "remat_sin_f64",
            Import::CosF64 => "remat_cos_f64",
            Import::TanF64 => "remat_tan_f64",
            Import::TanhF64 => "remat_tanh_f64",
            Import::PowF64 => "remat_pow_f64",
            Import::SinF32 => "remat_sin_f32",
            Import::CosF32 => "remat_cos_f32",
            Import::TanF32 => "remat_tan_f32",
            Import::ExpF32Slice => "remat_exp_f32_slice",
            Import::TanhF32Slice => "remat_tanh_f32_slice",
            Import::ExpAddRowF32 => "remat_exp_add_row_f32",
            Import::TanhAddRowF32 => "remat_tanh_add_row_f32",
            Import::Native => "remat_native",
            Import::MathUnaryF32 => "remat_math_unary_f32",
            Import::MathUnaryF64 => "remat_math_unary_f64",
            Import::MathBinaryF32 => "remat_math_binary_f32",
            Import::MathBinaryF64 => "remat_math_binary_f64",
        }
    }

    pub fn signature(self) -> ImportSig {
        match self {
            Import::Dot => ImportSig::Dot,
            Import::Native => ImportSig::Native,
            Import::ParallelFor => ImportSig::ParallelFor,
            Import::Pair => ImportSig::Pair,
            Import::PowF64 => ImportSig::F64F64ToF64,
            Import::SinF32 | Import::CosF32 | Import::TanF32 => ImportSig::F32ToF32,
            Import::ExpF32Slice | Import::TanhF32Slice => ImportSig::Slice,
            Import::ExpAddRowF32 | Import::TanhAddRowF32 => ImportSig::AddRow,
            Import::MathUnaryF32 => ImportSig::OpF32ToF32,
            Import::MathUnaryF64 => ImportSig::OpF64ToF64,
            Import::MathBinaryF32 => ImportSig::OpF32F32ToF32,
            Import::MathBinaryF64 => ImportSig::OpF64F64ToF64,
            Import::ExpF64
            | Import::LogF64
            | Import::Log1pF64
            | Import::Expm1F64
            | Import::SinF64
            | Import::CosF64
            | Import::TanF64
            | Import::TanhF64 => ImportSig::F64ToF64,
        }
    }

    pub fn address(self) -> *const u8 {
        match self {
            Import::Dot => remat_dot as *const u8,
            Import::ParallelFor => remat_parallel_for as *const u8,
            Import::Pair => remat_pair as *const u8,
            Import::ExpF64 => exp_f64 as *const u8,
            Import::LogF64 => log_f64 as *const u8,
            Import::Log1pF64 => log1p_f64 as *const u8,
            Import::Expm1F64 => expm1_f64 as *const u8,
            Import::SinF64 => sin_f64 as *const u8,
            Import::CosF64 => cos_f64 as *const u8,
            Import::TanF64 => tan_f64 as *const u8,
            Import::TanhF64 => tanh_f64 as *const u8,
            Import::PowF64 => pow_f64 as *const u8,
            Import::SinF32 => sin_f32 as *const u8,
            Import::CosF32 => cos_f32 as *const u8,
            Import::TanF32 => tan_f32 as *const u8,
            Import::ExpF32Slice => vmath::slice_fn(vmath::SliceOp::Exp, vmath::width()) as *const u8,
            Import::TanhF32Slice => vmath::slice_fn(vmath::SliceOp::Tanh, vmath::width()) as *const u8,
            Import::ExpAddRowF32 => vmath::add_row_fn(vmath::SliceOp::Exp, vmath::width()) as *const u8,
            Import::TanhAddRowF32 => vmath::add_row_fn(vmath::SliceOp::Tanh, vmath::width()) as *const u8,
            Import::Native => indexing::remat_native as *const u8,
            Import::MathUnaryF32 => math_unary::<f32> as *const u8,
            Import::MathUnaryF64 => math_unary::<f64> as *const u8,
            Import::MathBinaryF32 => math_binary::<f32> as *const u8,
            Import::MathBinaryF64 => math_binary::<f64> as *const u8,
        }
    }
}
