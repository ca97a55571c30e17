//! Dtypes, shapes and abstract values (`f32[5,4]`, `f32<host>[6]`), printed as JAX prints them.

use std::fmt;

/// An element type. Closed: every rule matches on it exhaustively.
///
/// `BF16` and `F16` are stored in their own width; arithmetic on them computes in `f32` and
/// rounds to the storage type at each primitive's output, as XLA does on CPU. `Key` is a
/// threefry PRNG key (`key<fry>[...]`): two `u32` words per element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F64,
    BF16,
    F16,
    I8,
    I16,
    I32,
    I64,
    U8,
    U32,
    Bool,
    Key,
    /// `complex64`: two `f32` (real, imaginary), 8 bytes.
    C64,
    /// `complex128`: two `f64`, 16 bytes.
    C128,
}

impl DType {
    pub const ALL: [DType; 14] = [
        DType::F32,
        DType::F64,
        DType::BF16,
        DType::F16,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U32,
        DType::Bool,
        DType::Key,
        DType::C64,
        DType::C128,
    ];

    /// The short name used in avals: `f32`, `bf16`, `u32`, `bool`, `key<fry>`.
    pub fn short_name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::BF16 => "bf16",
            DType::F16 => "f16",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U32 => "u32",
            DType::Bool => "bool",
            DType::Key => "key<fry>",
            DType::C64 => "c64",
            DType::C128 => "c128",
        }
    }

    /// The NumPy name used in parameters: `float32`, `bfloat16`, `uint32`, `bool`
    /// (`key<fry>` for keys, as JAX prints a key dtype).
    pub fn numpy_name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::BF16 => "bfloat16",
            DType::F16 => "float16",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U32 => "uint32",
            DType::Bool => "bool",
            DType::Key => "key<fry>",
            DType::C64 => "complex64",
            DType::C128 => "complex128",
        }
    }

    pub fn from_short_name(s: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.short_name() == s)
    }

    pub fn from_numpy_name(s: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.numpy_name() == s)
    }

    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::I8 | DType::U8 | DType::Bool => 1,
            DType::BF16 | DType::F16 | DType::I16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::Key | DType::C64 => 8,
            DType::C128 => 16,
        }
    }

    /// Whether `reduce_precision[exponent_bits mantissa_bits]` leaves every value of this
    /// dtype as it is: widths at or above the dtype's own (f32's (8, 23) for the others).
    /// A bf16 value is exact at (8, 7); an f16 one is not at (5, 10), whose rule flushes
    /// f16's subnormals to zero.
    pub fn reduce_precision_is_identity(self, exponent_bits: u32, mantissa_bits: u32) -> bool {
        let (e, m) = match self {
            DType::F64 | DType::C128 => (11, 52),
            DType::BF16 => (8, 7),
            DType::F32
            | DType::F16
            | DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
            | DType::U8
            | DType::U32
            | DType::Bool
            | DType::Key
            | DType::C64 => (8, 23),
        };
        exponent_bits >= e && mantissa_bits >= m
    }

    /// Real floating dtypes (not complex).
    pub fn is_float(self) -> bool {
        match self {
            DType::F32 | DType::F64 | DType::BF16 | DType::F16 => true,
            DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
            | DType::U8
            | DType::U32
            | DType::Bool
            | DType::Key
            | DType::C64
            | DType::C128 => false,
        }
    }

    /// `c64` and `c128`.
    pub fn is_complex(self) -> bool {
        matches!(self, DType::C64 | DType::C128)
    }

    /// The inexact dtypes, real or complex: the ones that carry tangents.
    pub fn is_inexact(self) -> bool {
        self.is_float() || self.is_complex()
    }

    /// A complex dtype's parts (`c64` -> `f32`, `c128` -> `f64`); a real dtype itself.
    pub fn real_dtype(self) -> DType {
        match self {
            DType::C64 => DType::F32,
            DType::C128 => DType::F64,
            other => other,
        }
    }

    /// The complex dtype whose parts are this real float (`f32` -> `c64`, `f64` -> `c128`);
    /// `None` for the others (JAX has no complex of 16-bit floats).
    pub fn complex_dtype(self) -> Option<DType> {
        match self {
            DType::F32 | DType::C64 => Some(DType::C64),
            DType::F64 | DType::C128 => Some(DType::C128),
            _ => None,
        }
    }

    /// The 16-bit floats, which compute in `f32` and round at each primitive's output.
    pub fn is_narrow_float(self) -> bool {
        matches!(self, DType::BF16 | DType::F16)
    }

    /// Signed and unsigned integers (not `bool`).
    pub fn is_integer(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 | DType::U32)
    }

    pub fn is_unsigned(self) -> bool {
        matches!(self, DType::U8 | DType::U32)
    }

    /// Numbers: floats, complex and integers (arithmetic is defined on them).
    pub fn is_numeric(self) -> bool {
        self.is_float() || self.is_complex() || self.is_integer()
    }

    /// The width in bits of one element (a key's is 64: two `u32` words).
    pub fn bits(self) -> usize {
        8 * self.size_in_bytes()
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short_name())
    }
}

/// Where a value lives. `Host` is the second memory space that offloading policies move
/// residuals to; JAX prints it as `f32<host>[6]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum MemorySpace {
    #[default]
    Device,
    Host,
}

impl MemorySpace {
    /// The name inside `MemorySpace.X` parameter values.
    pub fn param_name(self) -> &'static str {
        match self {
            MemorySpace::Device => "Device",
            MemorySpace::Host => "Host",
        }
    }
}

/// The default of [`max_value_bytes`]: 64 GiB. Every real program's values are far below it
/// (the benchmark models' largest is a few MiB), and it is a size a machine with tens of GiB
/// can attempt when a user means it, while a shape product that wrapped around or a typo
/// (`f32[1000000000000]`) is well above it and is rejected by the verifier instead of
/// aborting the process on allocation or running on a wrapped size.
pub const DEFAULT_MAX_VALUE_BYTES: usize = 64 << 30;

/// The environment variable that replaces [`DEFAULT_MAX_VALUE_BYTES`]: a byte count
/// (`REMAT_MAX_VALUE_BYTES=137438953472`), read once per process.
pub const MAX_VALUE_BYTES_VAR: &str = "REMAT_MAX_VALUE_BYTES";

/// The most bytes one value (an input, constant, equation binder, or the JIT's arena) may
/// take: [`MAX_VALUE_BYTES_VAR`] if it is set, else [`DEFAULT_MAX_VALUE_BYTES`]. An error
/// if the variable is set but is not a byte count.
pub fn max_value_bytes() -> Result<usize, String> {
    static LIMIT: std::sync::OnceLock<Result<usize, String>> = std::sync::OnceLock::new();
    LIMIT
        .get_or_init(|| match std::env::var(MAX_VALUE_BYTES_VAR) {
            Err(std::env::VarError::NotPresent) => Ok(DEFAULT_MAX_VALUE_BYTES),
            Ok(text) => text
                .trim()
                .parse::<usize>()
                .map_err(|_| format!("{MAX_VALUE_BYTES_VAR}={text:?} is not a byte count (a non-negative integer)")),
            Err(std::env::VarError::NotUnicode(text)) => {
                Err(format!("{MAX_VALUE_BYTES_VAR}={text:?} is not a byte count (a non-negative integer)"))
            }
        })
        .clone()
}

/// `the limit is 64.0 GiB (REMAT_MAX_VALUE_BYTES)`.
pub fn limit_words(limit: usize) -> String {
    format!("the limit is {} ({MAX_VALUE_BYTES_VAR})", format_bytes(limit as u128))
}

/// A byte count in binary units: `512 B`, `1.5 KiB`, `64.0 GiB`, `909.5 TiB`.
pub fn format_bytes(bytes: u128) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A static shape: one extent per dimension.
pub type Shape = Vec<usize>;

/// The mesh axes a value varies over inside a `shard_map` body (JAX's varying manual axes,
/// `aval.mat.varying`): printed after the shape as `{V:model}` or `{V:(data,model)}`.
/// Empty outside `shard_map` and for values that are the same on every device of the mesh.
///
/// JAX keeps a set and prints it in the order of the mesh's axes; remat keeps the order it
/// read or made (a body's avals are printed as JAX printed them) and compares as sets. (One
/// pointer wide, so that an aval outside `shard_map` stays as small as it was.)
#[derive(Clone, Debug, Default)]
pub struct Vma(Option<std::sync::Arc<Vec<String>>>);

impl Vma {
    pub fn new<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Vma {
        let mut v = Vma::default();
        for n in names {
            v.insert(n.into());
        }
        v
    }

    pub fn is_empty(&self) -> bool {
        self.names().is_empty()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names().iter().any(|n| n == name)
    }

    /// The axes, in the order read or made.
    pub fn names(&self) -> &[String] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }

    fn insert(&mut self, name: String) {
        if !self.contains(&name) {
            std::sync::Arc::make_mut(self.0.get_or_insert_with(Default::default)).push(name);
        }
    }

    /// These axes and `other`'s, in the order `order` gives (the mesh's axis names); names
    /// not in `order` go last, in the order they come.
    pub fn union_in(&self, other: &Vma, order: &[String]) -> Vma {
        let mut all = self.clone();
        for n in other.names() {
            all.insert(n.clone());
        }
        all.ordered(order)
    }

    /// These axes without `names`.
    pub fn without(&self, names: &[String]) -> Vma {
        Vma::new(self.names().iter().filter(|n| !names.contains(n)).cloned())
    }

    /// The same axes in the order of `order` (the mesh's axis names), the others after.
    pub fn ordered(&self, order: &[String]) -> Vma {
        let first = order.iter().filter(|n| self.contains(n)).cloned();
        Vma::new(first.chain(self.names().iter().filter(|n| !order.contains(n)).cloned()))
    }
}

impl PartialEq for Vma {
    fn eq(&self, other: &Vma) -> bool {
        self.names().len() == other.names().len() && self.names().iter().all(|n| other.contains(n))
    }
}

impl Eq for Vma {}

impl std::hash::Hash for Vma {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let mut names: Vec<&String> = self.names().iter().collect();
        names.sort();
        names.hash(state);
    }
}

impl fmt::Display for Vma {
    /// `{V:model}`, `{V:(data,model)}`; nothing when empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.names() {
            [] => Ok(()),
            [one] => write!(f, "{{V:{one}}}"),
            many => write!(f, "{{V:({})}}", many.join(",")),
        }
    }
}

/// An abstract value: dtype, shape, memory space and, inside `shard_map`, the mesh axes it
/// varies over.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Aval {
    pub dtype: DType,
    pub shape: Shape,
    pub memory_space: MemorySpace,
    pub vma: Vma,
}

impl Aval {
    pub fn new(dtype: DType, shape: impl Into<Shape>) -> Aval {
        Aval { dtype, shape: shape.into(), memory_space: MemorySpace::Device, vma: Vma::default() }
    }

    pub fn scalar(dtype: DType) -> Aval {
        Aval::new(dtype, Vec::new())
    }

    pub fn with_memory_space(mut self, memory_space: MemorySpace) -> Aval {
        self.memory_space = memory_space;
        self
    }

    pub fn with_vma(mut self, vma: Vma) -> Aval {
        self.vma = vma;
        self
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The element count. Unchecked: for an aval of a verified jaxpr (the verifier bounds
    /// every aval by [`max_value_bytes`]); anything else goes through
    /// [`Aval::checked_size`].
    pub fn size(&self) -> usize {
        self.shape.iter().product()
    }

    /// The byte size. Unchecked, as [`Aval::size`]; see [`Aval::checked_bytes`].
    pub fn size_in_bytes(&self) -> usize {
        self.size() * self.dtype.size_in_bytes()
    }

    /// The element count, or `None` if the shape cannot be addressed: its non-zero extents
    /// (and their bytes) multiply past `isize::MAX`. A zero extent does not excuse the
    /// others: `f32[0,9223372036854775808]` holds no element, but its strides overflow, and
    /// `ndarray` rejects it (issue 22's fuzzer found the JSON reader panicking on one).
    pub fn checked_size(&self) -> Option<usize> {
        let nonzero = self.shape.iter().filter(|&&d| d != 0).try_fold(1usize, |n, &d| n.checked_mul(d))?;
        let bytes = nonzero.checked_mul(self.dtype.size_in_bytes().max(1))?;
        match bytes <= isize::MAX as usize {
            true if self.shape.contains(&0) => Some(0),
            true => Some(nonzero),
            false => None,
        }
    }

    /// The byte size, or `None` if the shape cannot be addressed (see
    /// [`Aval::checked_size`]).
    pub fn checked_bytes(&self) -> Option<usize> {
        self.checked_size()?.checked_mul(self.dtype.size_in_bytes())
    }

    /// The byte size if it is within `limit` bytes (normally [`max_value_bytes`]);
    /// otherwise why not, in words:
    /// `needs 909.5 TiB; the limit is 64.0 GiB (REMAT_MAX_VALUE_BYTES)`.
    pub fn bytes_within(&self, limit: usize) -> Result<usize, String> {
        match self.checked_bytes() {
            Some(bytes) if bytes <= limit => Ok(bytes),
            Some(bytes) => {
                let (need, have) = (format_bytes(bytes as u128), format_bytes(limit as u128));
                if need == have {
                    Err(format!("needs {bytes} bytes; the limit is {limit} bytes ({MAX_VALUE_BYTES_VAR})"))
                } else {
                    Err(format!("needs {need}; {}", limit_words(limit)))
                }
            }
            None if self.shape.contains(&0) => Err(format!(
                "has no element, but its non-zero extents multiply past 2^63 bytes (its strides overflow); {}",
                limit_words(limit)
            )),
            None => Err(format!("needs more than 2^63 bytes; {}", limit_words(limit))),
        }
    }

    /// Same dtype and shape, ignoring the memory space.
    pub fn same_type(&self, other: &Aval) -> bool {
        self.dtype == other.dtype && self.shape == other.shape
    }
}

impl fmt::Display for Aval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.dtype.short_name())?;
        match self.memory_space {
            MemorySpace::Device => {}
            MemorySpace::Host => f.write_str("<host>")?,
        }
        f.write_str("[")?;
        for (i, d) in self.shape.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")?;
        write!(f, "{}", self.vma)
    }
}
