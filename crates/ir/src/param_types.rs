//! The types of primitives' parameters that hold no jaxpr: the op enums (`UnaryOp`,
//! `BinaryOp`, `ReduceOp`, ...), dimension numbers, windows and the other values a
//! [`Primitive`](crate::Primitive) variant carries. They sit below the jaxpr (which holds
//! primitives) and know nothing of text: each family module of `primitive/` writes and
//! reads its own parameters (`elementwise.rs` the unary ops' names, `indexing.rs` the
//! dimension numbers, ...), next to their shape rules.
//!
//! Parameter values that may hold a jaxpr ([`Param`](crate::Param), and `ConvParams` and
//! `JitOptions`, which keep some values as written) are part of the jaxpr's own recursive
//! definition, in `jaxpr.rs`.

/// Declares a field-less enum from one list of `Variant = "jax_name"` pairs, with `ALL`
/// (every value, in the list's order), `name()` and `from_name()`, so that the list is the
/// only place a value or its name is written.
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        pub enum $Enum:ident { $($(#[$vmeta:meta])* $Variant:ident = $name:literal,)+ }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $Enum {
            $($(#[$vmeta])* $Variant,)+
        }

        impl $Enum {
            /// Every value, in declaration order.
            pub const ALL: [$Enum; [$($name),+].len()] = [$($Enum::$Variant),+];

            /// The name as JAX prints it.
            pub fn name(self) -> &'static str {
                match self {
                    $($Enum::$Variant => $name,)+
                }
            }

            /// The value JAX prints as `name`, if there is one.
            pub fn from_name(name: &str) -> Option<$Enum> {
                $Enum::ALL.into_iter().find(|v| v.name() == name)
            }
        }
    };
}

named_enum! {
    /// `lax.Precision`, one per operand of `dot_general` (`precision=(Precision.HIGHEST,
    /// Precision.HIGHEST)`, what JAX's linear-algebra rules ask for): how an accelerator may
    /// round the operands. XLA's CPU backend computes every precision alike, and so does remat.
    pub enum Precision {
        Default = "Precision.DEFAULT",
        High = "Precision.HIGH",
        Highest = "Precision.HIGHEST",
    }
}

named_enum! {
    /// `lax.RandomAlgorithm`, `rng_bit_generator`'s `algorithm` (`RNG_DEFAULT` is Philox on
    /// CPU).
    pub enum RngAlgorithm {
        Default = "RNG_DEFAULT",
        ThreeFry = "RNG_THREE_FRY",
        Philox = "RNG_PHILOX",
    }
}

// Linear algebra (`primitive/linalg.rs`).

/// `triangular_solve`'s parameters, as JAX names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TriangularSolve {
    /// Solve `op(a) x = b` (true) or `x op(a) = b` (false).
    pub left_side: bool,
    /// `a` is lower (true) or upper (false) triangular; its other part is not read.
    pub lower: bool,
    /// `op(a)` is `a`'s transpose.
    pub transpose_a: bool,
    /// `op(a)` conjugates `a` (no effect on real dtypes).
    pub conjugate_a: bool,
    /// `a`'s diagonal is taken to be ones (not read).
    pub unit_diagonal: bool,
}

/// `qr`'s parameters, as JAX names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Qr {
    /// `q` is `m x m` and `r` `m x n` (true), or `m x k` and `k x n` with `k = min(m, n)`.
    pub full_matrices: bool,
    /// Column pivoting (LAPACK's `geqp3`): a third result, the `i32` column permutation.
    pub pivoting: bool,
    /// JAX's GPU backend choice, printed and kept (`None`, `True` or `False`); CPU ignores it.
    pub use_magma: Option<bool>,
}

/// `eigh`'s parameters, as JAX names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Eigh {
    /// The triangle read (true: lower).
    pub lower: bool,
    /// Eigenvalues ascending (CPU always sorts).
    pub sort_eigenvalues: bool,
    /// `(start, end)`: the eigenvalues of these indices only (CPU: the whole range only).
    pub subset_by_index: Option<(usize, usize)>,
    /// `EighImplementation.QR` or `None` (CPU runs LAPACK's `syevd` for both; JAX refuses
    /// the others on CPU).
    pub algorithm: Option<EighAlgorithm>,
}

named_enum! {
    /// `jax.lax.linalg.EighImplementation`, as JAX prints it.
    pub enum EighAlgorithm {
        Qr = "EighImplementation.QR",
        Jacobi = "EighImplementation.JACOBI",
        Qdwh = "EighImplementation.QDWH",
    }
}

/// `svd`'s parameters, as JAX names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Svd {
    /// `u` is `m x m` and `vt` `n x n` (else `m x k` and `k x n`, `k = min(m, n)`).
    pub full_matrices: bool,
    /// `u` and `vt` are results (else only the singular values).
    pub compute_uv: bool,
    /// `(start, end)`: the singular values of these indices only (CPU: the whole range only).
    pub subset_by_index: Option<(usize, usize)>,
    /// `None` or a `SvdAlgorithm` (CPU runs `gesdd` or `gesvd`; JAX refuses Jacobi and
    /// Polar on CPU).
    pub algorithm: Option<SvdAlgorithm>,
}

named_enum! {
    /// `jax.lax.linalg.SvdAlgorithm`, as JAX prints it.
    pub enum SvdAlgorithm {
        Default = "SvdAlgorithm.DEFAULT",
        Qr = "SvdAlgorithm.QR",
        Jacobi = "SvdAlgorithm.JACOBI",
        Polar = "SvdAlgorithm.POLAR",
        DivideAndConquer = "SvdAlgorithm.DIVIDE_AND_CONQUER",
    }
}

// Elementwise (`primitive/elementwise.rs`).

named_enum! {
    /// Elementwise functions of one operand.
    pub enum UnaryOp {
        Neg = "neg",
        Sign = "sign",
        Abs = "abs",
        Exp = "exp",
        Log = "log",
        Log1p = "log1p",
        Expm1 = "expm1",
        Sin = "sin",
        Cos = "cos",
        Tan = "tan",
        Tanh = "tanh",
        Logistic = "logistic",
        Sqrt = "sqrt",
        Rsqrt = "rsqrt",
        Square = "square",
        StopGradient = "stop_gradient",
        // Real programs' elementwise ops (REAL_MODELS_NOTES §4); `copy_p` prints `copy`.
        Not = "not",
        Floor = "floor",
        Ceil = "ceil",
        IsFinite = "is_finite",
        Copy = "copy",
        Cbrt = "cbrt",
        Exp2 = "exp2",
        Asin = "asin",
        Acos = "acos",
        Atan = "atan",
        Sinh = "sinh",
        Cosh = "cosh",
        Asinh = "asinh",
        Acosh = "acosh",
        Atanh = "atanh",
        Erf = "erf",
        Erfc = "erfc",
        ErfInv = "erf_inv",
        Lgamma = "lgamma",
        Digamma = "digamma",
        // Special functions (issue 45): exponentially scaled modified Bessel functions.
        BesselI0e = "bessel_i0e",
        BesselI1e = "bessel_i1e",
        // Bits of integers (issue 45).
        PopulationCount = "population_count",
        Clz = "clz",
    }
}

/// Which operands a unary op takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryDomain {
    /// Any dtype (`stop_gradient`, `copy`).
    Any,
    /// Numbers, not `bool`.
    Number,
    /// Integers and `bool` (`not`: bitwise, or logical on `bool`).
    IntOrBool,
    /// Integers only (`population_count`, `clz`).
    Int,
    /// Real floats only.
    Float,
    /// Real floats and complex numbers (JAX's `_float | _complex`).
    FloatOrComplex,
}

impl UnaryOp {
    /// Whether the operand must be inexact (transcendentals) rather than any number.
    pub fn float_only(self) -> bool {
        matches!(self.domain(), UnaryDomain::Float | UnaryDomain::FloatOrComplex)
    }

    /// The dtypes this op is defined on (JAX's `unop` dtype lists).
    pub fn domain(self) -> UnaryDomain {
        match self {
            UnaryOp::StopGradient | UnaryOp::Copy => UnaryDomain::Any,
            UnaryOp::Neg | UnaryOp::Sign | UnaryOp::Abs | UnaryOp::Square => UnaryDomain::Number,
            UnaryOp::Not => UnaryDomain::IntOrBool,
            UnaryOp::PopulationCount | UnaryOp::Clz => UnaryDomain::Int,
            // The complex forms remat computes (`remat-interp`'s `complex.rs`).
            UnaryOp::Exp
            | UnaryOp::Log
            | UnaryOp::Log1p
            | UnaryOp::Expm1
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Tan
            | UnaryOp::Tanh
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt => UnaryDomain::FloatOrComplex,
            UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::IsFinite
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
            | UnaryOp::Digamma
            | UnaryOp::BesselI0e
            | UnaryOp::BesselI1e
            | UnaryOp::Logistic => UnaryDomain::Float,
        }
    }
}

named_enum! {
    /// Elementwise arithmetic of two operands of one dtype (a scalar operand broadcasts).
    pub enum BinaryOp {
        Add = "add",
        AddAny = "add_any",
        Sub = "sub",
        Mul = "mul",
        Div = "div",
        Pow = "pow",
        Max = "max",
        Min = "min",
        // Real programs' elementwise ops (REAL_MODELS_NOTES §4).
        Rem = "rem",
        Atan2 = "atan2",
        Nextafter = "nextafter",
        Polygamma = "polygamma",
        And = "and",
        Or = "or",
        Xor = "xor",
        ShiftLeft = "shift_left",
        ShiftRightLogical = "shift_right_logical",
        ShiftRightArithmetic = "shift_right_arithmetic",
        /// The high half of the double-width product of two integers (issue 45).
        Mulhi = "mulhi",
        // Special functions of two floats (issue 45): the regularized incomplete gamma
        // functions P(a, x) and Q(a, x), P's derivative in `a`, and the Hurwitz zeta ζ(s, q).
        Igamma = "igamma",
        Igammac = "igammac",
        IgammaGradA = "igamma_grad_a",
        Zeta = "zeta",
    }
}

named_enum! {
    /// Elementwise comparisons; the result is `bool`.
    pub enum CompareOp {
        Eq = "eq",
        Ne = "ne",
        Lt = "lt",
        Le = "le",
        Gt = "gt",
        Ge = "ge",
        /// The total-order comparisons of JAX's sort comparators (`searchsorted`): on
        /// floats `-NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN`, as XLA's
        /// `TOTALORDER` compares.
        EqTo = "eq_to",
        LeTo = "le_to",
        LtTo = "lt_to",
    }
}

/// `fft`'s `fft_type` (JAX's `jax.lax.FftType`, printed as its number).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FftType {
    /// `0`: complex to complex, forward.
    Fft = 0,
    /// `1`: complex to complex, inverse (scaled by `1 / n`).
    Ifft = 1,
    /// `2`: real to complex, the last axis's first `n / 2 + 1` terms.
    Rfft = 2,
    /// `3`: complex to real, the inverse of `Rfft`.
    Irfft = 3,
}

impl FftType {
    pub fn from_int(x: i64) -> Option<FftType> {
        Some(match x {
            0 => FftType::Fft,
            1 => FftType::Ifft,
            2 => FftType::Rfft,
            3 => FftType::Irfft,
            _ => return None,
        })
    }
}

/// `round`'s `rounding_method` (JAX's `RoundingMethod`, printed as its integer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RoundingMethod {
    /// `0`: halves go away from zero (`lax.round`'s default).
    AwayFromZero = 0,
    /// `1`: halves go to the even neighbour (`jnp.round`).
    ToNearestEven = 1,
}

// Indexing (`primitive/indexing.rs`).

named_enum! {
    /// How `gather` and the scatters treat out-of-bounds indices
    /// (`GatherScatterMode.CLIP`, ...).
    pub enum GatherScatterMode {
        /// Indices are clamped so that the whole slice is in bounds.
        Clip = "GatherScatterMode.CLIP",
        /// An out-of-bounds slice gathers `fill_value`; an out-of-bounds update is dropped.
        FillOrDrop = "GatherScatterMode.FILL_OR_DROP",
        /// The caller promises indices are in bounds; XLA clamps (gather) or drops (scatter).
        PromiseInBounds = "GatherScatterMode.PROMISE_IN_BOUNDS",
    }
}

named_enum! {
    /// The scatters, by how an update combines with the operand element it lands on.
    pub enum ScatterOp {
        /// `.at[].set`: the update replaces the element.
        Set = "scatter",
        Add = "scatter-add",
        /// `.at[].subtract`: the update subtracted from the element.
        Sub = "scatter-sub",
        Mul = "scatter-mul",
        Min = "scatter-min",
        Max = "scatter-max",
    }
}

/// `gather`'s `fill_value` as JAX prints it: the Python int or float it was given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FillValue {
    Int(i64),
    Float(f64),
}

impl FillValue {
    pub fn to_f64(self) -> f64 {
        match self {
            FillValue::Int(x) => x as f64,
            FillValue::Float(x) => x,
        }
    }
}

/// `GatherDimensionNumbers(offset_dims=..., collapsed_slice_dims=..., start_index_map=...,
/// operand_batching_dims=..., start_indices_batching_dims=...)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct GatherDimensionNumbers {
    /// Output axes that index into a slice (the others are batch axes, one per leading axis
    /// of the indices).
    pub offset_dims: Vec<usize>,
    /// Operand axes whose slice size is 1 and that the output does not keep.
    pub collapsed_slice_dims: Vec<usize>,
    /// The operand axis each entry of an index vector starts.
    pub start_index_map: Vec<usize>,
    pub operand_batching_dims: Vec<usize>,
    pub start_indices_batching_dims: Vec<usize>,
}

/// `ScatterDimensionNumbers(update_window_dims=..., inserted_window_dims=...,
/// scatter_dims_to_operand_dims=..., operand_batching_dims=...,
/// scatter_indices_batching_dims=...)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct ScatterDimensionNumbers {
    /// Update axes that index into a window (the others are scatter axes, one per leading
    /// axis of the indices).
    pub update_window_dims: Vec<usize>,
    /// Operand axes of window size 1 that the updates do not have.
    pub inserted_window_dims: Vec<usize>,
    /// The operand axis each entry of an index vector starts.
    pub scatter_dims_to_operand_dims: Vec<usize>,
    pub operand_batching_dims: Vec<usize>,
    pub scatter_indices_batching_dims: Vec<usize>,
}

// Reductions and contractions (`primitive/reduction.rs`).

named_enum! {
    /// Reductions across the devices of mesh axes inside `shard_map` (`axes=('model',)`):
    /// JAX's `psum` (what `lax.psum` binds with `check_vma=False`), `psum_invariant` (with
    /// `check_vma=True`: the result no longer varies over the axes), `pmax` and `pmin`.
    pub enum AllReduceOp {
        Psum = "psum",
        PsumInvariant = "psum_invariant",
        Pmax = "pmax",
        Pmin = "pmin",
    }
}

named_enum! {
    /// Reductions over a set of axes.
    pub enum ReduceOp {
        Sum = "reduce_sum",
        Max = "reduce_max",
        Min = "reduce_min",
        Prod = "reduce_prod",
        /// Bitwise on integers, logical on `bool`.
        And = "reduce_and",
        Or = "reduce_or",
        Xor = "reduce_xor",
    }
}

named_enum! {
    /// The reductions over windows that have their own primitive (`primitive/window.rs`).
    pub enum WindowOp {
        Sum = "reduce_window_sum",
        Max = "reduce_window_max",
        Min = "reduce_window_min",
    }
}

impl WindowOp {
    /// The reduction each window folds with.
    pub fn reduce_op(self) -> ReduceOp {
        match self {
            WindowOp::Sum => ReduceOp::Sum,
            WindowOp::Max => ReduceOp::Max,
            WindowOp::Min => ReduceOp::Min,
        }
    }
}

/// `dot_general`'s `dimension_numbers=((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct DotDimensionNumbers {
    pub lhs_contracting: Vec<usize>,
    pub rhs_contracting: Vec<usize>,
    pub lhs_batch: Vec<usize>,
    pub rhs_batch: Vec<usize>,
}

// Sorting and scans (`primitive/sorting.rs`).

named_enum! {
    /// Cumulative reductions along one axis.
    pub enum CumulativeOp {
        Sum = "cumsum",
        Prod = "cumprod",
        Max = "cummax",
        Min = "cummin",
        LogSumExp = "cumlogsumexp",
    }
}

// Control flow (`primitive/control.rs`).

/// `platform_index`'s `platforms` and `cond`'s `branches_platforms`: for each branch, the
/// platforms it is for, or `None` for the default branch (JAX's `BranchesPlatforms`).
pub type BranchesPlatforms = Vec<Option<Vec<String>>>;

/// The platform remat compiles for: JAX's name of the CPU backend.
pub const PLATFORM: &str = "cpu";

/// The index [`PLATFORM`] selects in `platforms`, as JAX's `_platform_index_lowering`
/// picks it: the first entry that names it, else the default (`None`) entry; `None` if
/// neither exists.
pub fn platform_index(platforms: &BranchesPlatforms) -> Option<usize> {
    platforms
        .iter()
        .position(|p| p.as_ref().is_some_and(|ps| ps.iter().any(|s| s == PLATFORM)))
        .or_else(|| platforms.iter().position(Option::is_none))
}

// Names and memory (`primitive/memory.rs`).

/// `device_put`'s `copy_semantics` entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopySemantics {
    AlwaysCopy,
    ReuseInput,
    DonateInput,
}

// Convolutions and windows (`primitive/window.rs`).

/// array axes of (batch, feature, spatial...) for the lhs and the output, and of
/// (out feature, in feature, spatial...) for the kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConvDimensionNumbers {
    pub lhs_spec: Vec<usize>,
    pub rhs_spec: Vec<usize>,
    pub out_spec: Vec<usize>,
}

impl ConvDimensionNumbers {
    /// The spec with its first two entries swapped (JAX's transposes use it).
    pub fn swap01(spec: &[usize]) -> Vec<usize> {
        let mut s = spec.to_vec();
        if s.len() >= 2 {
            s.swap(0, 1);
        }
        s
    }
}

/// A window over every axis of an operand: `reduce_window_*` and `select_and_gather_add`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Window {
    pub window_dimensions: Vec<usize>,
    pub window_strides: Vec<usize>,
    pub padding: Vec<(i64, i64)>,
    pub base_dilation: Vec<usize>,
    pub window_dilation: Vec<usize>,
}
