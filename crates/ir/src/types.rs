//! Dtypes, shapes and abstract values (`f32[5,4]`, `f32<host>[6]`), printed as JAX prints them.

use std::fmt;

/// An element type. Closed: every rule matches on it exhaustively.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F64,
    I32,
    Bool,
}

impl DType {
    pub const ALL: [DType; 4] = [DType::F32, DType::F64, DType::I32, DType::Bool];

    /// The short name used in avals: `f32`, `f64`, `i32`, `bool`.
    pub fn short_name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::Bool => "bool",
        }
    }

    /// The NumPy name used in parameters: `float32`, `float64`, `int32`, `bool`.
    pub fn numpy_name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::I32 => "int32",
            DType::Bool => "bool",
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
            DType::F32 | DType::I32 => 4,
            DType::F64 => 8,
            DType::Bool => 1,
        }
    }

    pub fn is_float(self) -> bool {
        match self {
            DType::F32 | DType::F64 => true,
            DType::I32 | DType::Bool => false,
        }
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

/// A static shape: one extent per dimension.
pub type Shape = Vec<usize>;

/// An abstract value: dtype, shape and memory space.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Aval {
    pub dtype: DType,
    pub shape: Shape,
    pub memory_space: MemorySpace,
}

impl Aval {
    pub fn new(dtype: DType, shape: impl Into<Shape>) -> Aval {
        Aval { dtype, shape: shape.into(), memory_space: MemorySpace::Device }
    }

    pub fn scalar(dtype: DType) -> Aval {
        Aval::new(dtype, Vec::new())
    }

    pub fn with_memory_space(mut self, memory_space: MemorySpace) -> Aval {
        self.memory_space = memory_space;
        self
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn size(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn size_in_bytes(&self) -> usize {
        self.size() * self.dtype.size_in_bytes()
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
        f.write_str("]")
    }
}
