//! Concrete values: an `ndarray` array of one of the dtypes. Its JSON form lives in
//! `remat-json`.

use half::{bf16, f16};
use ndarray::{ArrayD, IxDyn};

use crate::types::{Aval, DType};

/// A threefry PRNG key (`key<fry>[]` element): the two `u32` words JAX's `random_unwrap`
/// gives back.
/// `repr(transparent)`: 8 bytes, the first word at the lower address (the JIT moves a key
/// as one little-endian 8-byte word).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct PrngKey(pub [u32; 2]);

/// A `c64` element (`complex64`): real and imaginary `f32` parts, in that order in memory
/// (NumPy's layout). Its order (derived, lexicographic: real part first) is XLA's for
/// complex sorts; arithmetic goes through [`num_complex::Complex32`] (`num`, `from_num`).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
#[repr(C)]
pub struct c64 {
    pub re: f32,
    pub im: f32,
}

/// A `c128` element (`complex128`), as [`c64`] with `f64` parts.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
#[repr(C)]
pub struct c128 {
    pub re: f64,
    pub im: f64,
}

impl c64 {
    pub const fn new(re: f32, im: f32) -> c64 {
        c64 { re, im }
    }
    pub fn num(self) -> num_complex::Complex32 {
        num_complex::Complex32::new(self.re, self.im)
    }
    pub fn from_num(z: num_complex::Complex32) -> c64 {
        c64 { re: z.re, im: z.im }
    }
    pub fn is_nan(self) -> bool {
        self.re.is_nan() || self.im.is_nan()
    }
}

impl c128 {
    pub const fn new(re: f64, im: f64) -> c128 {
        c128 { re, im }
    }
    pub fn num(self) -> num_complex::Complex64 {
        num_complex::Complex64::new(self.re, self.im)
    }
    pub fn from_num(z: num_complex::Complex64) -> c128 {
        c128 { re: z.re, im: z.im }
    }
    pub fn is_nan(self) -> bool {
        self.re.is_nan() || self.im.is_nan()
    }
}

/// A dense array of any supported dtype.
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    F32(ArrayD<f32>),
    F64(ArrayD<f64>),
    BF16(ArrayD<bf16>),
    F16(ArrayD<f16>),
    I8(ArrayD<i8>),
    I16(ArrayD<i16>),
    I32(ArrayD<i32>),
    I64(ArrayD<i64>),
    U8(ArrayD<u8>),
    U32(ArrayD<u32>),
    Bool(ArrayD<bool>),
    Key(ArrayD<PrngKey>),
    C64(ArrayD<c64>),
    C128(ArrayD<c128>),
}

/// `for_each_array!(array, a => expr)`: `expr` with `a` bound to the inner `ArrayD` of
/// whichever variant `array` is (the expression is compiled once per element type).
#[macro_export]
macro_rules! for_each_array {
    ($array:expr, $a:ident => $body:expr) => {
        match $array {
            $crate::Array::F32($a) => $body,
            $crate::Array::F64($a) => $body,
            $crate::Array::BF16($a) => $body,
            $crate::Array::F16($a) => $body,
            $crate::Array::I8($a) => $body,
            $crate::Array::I16($a) => $body,
            $crate::Array::I32($a) => $body,
            $crate::Array::I64($a) => $body,
            $crate::Array::U8($a) => $body,
            $crate::Array::U32($a) => $body,
            $crate::Array::Bool($a) => $body,
            $crate::Array::Key($a) => $body,
            $crate::Array::C64($a) => $body,
            $crate::Array::C128($a) => $body,
        }
    };
}

/// `map_array!(array, a => expr)`: the same variant around `expr`, which maps the inner
/// `ArrayD` `a` to an `ArrayD` of the same element type.
#[macro_export]
macro_rules! map_array {
    ($array:expr, $a:ident => $body:expr) => {
        match $array {
            $crate::Array::F32($a) => $crate::Array::F32($body),
            $crate::Array::F64($a) => $crate::Array::F64($body),
            $crate::Array::BF16($a) => $crate::Array::BF16($body),
            $crate::Array::F16($a) => $crate::Array::F16($body),
            $crate::Array::I8($a) => $crate::Array::I8($body),
            $crate::Array::I16($a) => $crate::Array::I16($body),
            $crate::Array::I32($a) => $crate::Array::I32($body),
            $crate::Array::I64($a) => $crate::Array::I64($body),
            $crate::Array::U8($a) => $crate::Array::U8($body),
            $crate::Array::U32($a) => $crate::Array::U32($body),
            $crate::Array::Bool($a) => $crate::Array::Bool($body),
            $crate::Array::Key($a) => $crate::Array::Key($body),
            $crate::Array::C64($a) => $crate::Array::C64($body),
            $crate::Array::C128($a) => $crate::Array::C128($body),
        }
    };
}

/// An element type whose values have a fixed little-endian byte form: what a NumPy
/// buffer of the dtype holds on the machines remat runs on.
trait LeBytes: Copy + Default {
    const SIZE: usize;
    fn read(b: &[u8]) -> Self;
    /// Writes the element's bytes into `out`, exactly `SIZE` long.
    fn write(self, out: &mut [u8]);
}

macro_rules! le_bytes {
    ($($t:ty),*) => {$(
        impl LeBytes for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn read(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().expect("a chunk of the element's size"))
            }
            fn write(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
le_bytes!(f32, f64, i8, i16, i32, i64, u8, u32);

impl LeBytes for bf16 {
    const SIZE: usize = 2;
    fn read(b: &[u8]) -> Self {
        bf16::from_bits(u16::from_le_bytes([b[0], b[1]]))
    }
    fn write(self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_bits().to_le_bytes());
    }
}

impl LeBytes for f16 {
    const SIZE: usize = 2;
    fn read(b: &[u8]) -> Self {
        f16::from_bits(u16::from_le_bytes([b[0], b[1]]))
    }
    fn write(self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_bits().to_le_bytes());
    }
}

impl LeBytes for bool {
    const SIZE: usize = 1;
    fn read(b: &[u8]) -> Self {
        b[0] != 0
    }
    fn write(self, out: &mut [u8]) {
        out[0] = u8::from(self);
    }
}

impl LeBytes for c64 {
    const SIZE: usize = 8;
    fn read(b: &[u8]) -> Self {
        c64::new(f32::read(&b[..4]), f32::read(&b[4..]))
    }
    fn write(self, out: &mut [u8]) {
        self.re.write(&mut out[..4]);
        self.im.write(&mut out[4..]);
    }
}

impl LeBytes for c128 {
    const SIZE: usize = 16;
    fn read(b: &[u8]) -> Self {
        c128::new(f64::read(&b[..8]), f64::read(&b[8..]))
    }
    fn write(self, out: &mut [u8]) {
        self.re.write(&mut out[..8]);
        self.im.write(&mut out[8..]);
    }
}

impl LeBytes for PrngKey {
    const SIZE: usize = 8;
    fn read(b: &[u8]) -> Self {
        PrngKey([u32::read(&b[..4]), u32::read(&b[4..])])
    }
    fn write(self, out: &mut [u8]) {
        self.0[0].write(&mut out[..4]);
        self.0[1].write(&mut out[4..]);
    }
}

fn from_le<T: LeBytes>(shape: &[usize], bytes: &[u8]) -> ArrayD<T> {
    let data: Vec<T> = bytes.chunks_exact(T::SIZE).map(T::read).collect();
    ArrayD::from_shape_vec(IxDyn(shape), data).expect("the caller checked the element count")
}

/// Writes `a`'s elements in row-major order into `out` (`a.len() * T::SIZE` bytes): from
/// the contiguous slice where `a` is in standard layout (a loop the compiler vectorizes;
/// a dynamic-dimension iterator costs several times more per element).
fn write_le<T: LeBytes>(a: &ArrayD<T>, out: &mut [u8]) {
    match a.as_slice() {
        Some(slice) => out.chunks_exact_mut(T::SIZE).zip(slice).for_each(|(o, &x)| x.write(o)),
        None => out.chunks_exact_mut(T::SIZE).zip(a.iter()).for_each(|(o, &x)| x.write(o)),
    }
}

/// Whether any element of `a` is a NaN: over the contiguous memory in blocks whose test
/// the compiler vectorizes (no early exit inside a block), where `a` has one; element by
/// element otherwise. (A dynamic-dimension iterator with `any` took 12 ms on 8 MB, most of
/// a Python call's time.)
fn any_nan<T: Copy>(a: &ArrayD<T>, is_nan: impl Fn(T) -> bool) -> bool {
    match a.as_slice_memory_order() {
        Some(slice) => slice.chunks(256).any(|block| block.iter().fold(false, |acc, &x| acc | is_nan(x))),
        None => a.iter().any(|&x| is_nan(x)),
    }
}

fn to_le<T: LeBytes>(a: &ArrayD<T>) -> Vec<u8> {
    let mut out = vec![0; a.len() * T::SIZE];
    write_le(a, &mut out);
    out
}

impl Array {
    /// An array of `dtype` and `shape` from its elements' bytes in row-major order,
    /// little-endian (a C-contiguous NumPy buffer; a key is its two `u32` words, as
    /// `jax.random.key_data` gives them). An error says what does not fit.
    pub fn from_le_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Array, String> {
        let n = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
        let want = n.and_then(|n| n.checked_mul(dtype.size_in_bytes()));
        match want {
            Some(w) if w == bytes.len() => {}
            Some(w) => {
                return Err(format!("{} bytes for {}{shape:?}, which needs {w}", bytes.len(), dtype.short_name()))
            }
            None => return Err(format!("shape {shape:?} has more elements than this machine can address")),
        }
        Ok(match dtype {
            DType::F32 => Array::F32(from_le(shape, bytes)),
            DType::F64 => Array::F64(from_le(shape, bytes)),
            DType::BF16 => Array::BF16(from_le(shape, bytes)),
            DType::F16 => Array::F16(from_le(shape, bytes)),
            DType::I8 => Array::I8(from_le(shape, bytes)),
            DType::I16 => Array::I16(from_le(shape, bytes)),
            DType::I32 => Array::I32(from_le(shape, bytes)),
            DType::I64 => Array::I64(from_le(shape, bytes)),
            DType::U8 => Array::U8(from_le(shape, bytes)),
            DType::U32 => Array::U32(from_le(shape, bytes)),
            DType::Bool => Array::Bool(from_le(shape, bytes)),
            DType::Key => Array::Key(from_le(shape, bytes)),
            DType::C64 => Array::C64(from_le(shape, bytes)),
            DType::C128 => Array::C128(from_le(shape, bytes)),
        })
    }

    /// The elements' bytes in row-major order, little-endian ([`Array::from_le_bytes`]'s
    /// form).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        crate::for_each_array!(self, a => to_le(a))
    }

    /// The bytes [`Array::to_le_bytes`] gives, written into `out`, which must be exactly
    /// that long (a buffer the caller owns, such as a Python `bytearray`).
    pub fn write_le_bytes(&self, out: &mut [u8]) -> Result<(), String> {
        let want = self.len() * self.dtype().size_in_bytes();
        if out.len() != want {
            return Err(format!("{} bytes for {}, which has {want}", out.len(), self.aval()));
        }
        crate::for_each_array!(self, a => write_le(a, out));
        Ok(())
    }

    pub fn dtype(&self) -> DType {
        match self {
            Array::F32(_) => DType::F32,
            Array::F64(_) => DType::F64,
            Array::BF16(_) => DType::BF16,
            Array::F16(_) => DType::F16,
            Array::I8(_) => DType::I8,
            Array::I16(_) => DType::I16,
            Array::I32(_) => DType::I32,
            Array::I64(_) => DType::I64,
            Array::U8(_) => DType::U8,
            Array::U32(_) => DType::U32,
            Array::Bool(_) => DType::Bool,
            Array::Key(_) => DType::Key,
            Array::C64(_) => DType::C64,
            Array::C128(_) => DType::C128,
        }
    }

    pub fn shape(&self) -> &[usize] {
        for_each_array!(self, a => a.shape())
    }

    pub fn aval(&self) -> Aval {
        Aval::new(self.dtype(), self.shape().to_vec())
    }

    pub fn len(&self) -> usize {
        self.shape().iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A zero-filled array of the given aval (`false` for `bool`, the all-zero key for keys).
    pub fn zeros(aval: &Aval) -> Array {
        let shape = IxDyn(&aval.shape);
        match aval.dtype {
            DType::F32 => Array::F32(ArrayD::zeros(shape)),
            DType::F64 => Array::F64(ArrayD::zeros(shape)),
            DType::BF16 => Array::BF16(ArrayD::from_elem(shape, bf16::ZERO)),
            DType::F16 => Array::F16(ArrayD::from_elem(shape, f16::ZERO)),
            DType::I8 => Array::I8(ArrayD::zeros(shape)),
            DType::I16 => Array::I16(ArrayD::zeros(shape)),
            DType::I32 => Array::I32(ArrayD::zeros(shape)),
            DType::I64 => Array::I64(ArrayD::zeros(shape)),
            DType::U8 => Array::U8(ArrayD::zeros(shape)),
            DType::U32 => Array::U32(ArrayD::zeros(shape)),
            DType::Bool => Array::Bool(ArrayD::from_elem(shape, false)),
            DType::Key => Array::Key(ArrayD::from_elem(shape, PrngKey::default())),
            DType::C64 => Array::C64(ArrayD::from_elem(shape, c64::default())),
            DType::C128 => Array::C128(ArrayD::from_elem(shape, c128::default())),
        }
    }

    /// The index of the first NaN in row-major order, if any (integers, booleans and keys
    /// have none).
    pub fn first_nan(&self) -> Option<Vec<usize>> {
        fn first<T: Copy>(a: &ArrayD<T>, is_nan: impl Fn(T) -> bool) -> Option<Vec<usize>> {
            a.indexed_iter().find(|&(_, &x)| is_nan(x)).map(|(i, _)| ndarray::Dimension::slice(&i).to_vec())
        }
        match self {
            Array::F32(a) => first(a, f32::is_nan),
            Array::F64(a) => first(a, f64::is_nan),
            Array::BF16(a) => first(a, bf16::is_nan),
            Array::F16(a) => first(a, f16::is_nan),
            Array::C64(a) => first(a, c64::is_nan),
            Array::C128(a) => first(a, c128::is_nan),
            Array::I8(_)
            | Array::I16(_)
            | Array::I32(_)
            | Array::I64(_)
            | Array::U8(_)
            | Array::U32(_)
            | Array::Bool(_)
            | Array::Key(_) => None,
        }
    }

    /// Whether any element is a NaN (a quicker [`Array::first_nan`]`().is_some()`).
    pub fn has_nan(&self) -> bool {
        match self {
            Array::F32(a) => any_nan(a, f32::is_nan),
            Array::F64(a) => any_nan(a, f64::is_nan),
            Array::BF16(a) => any_nan(a, bf16::is_nan),
            Array::F16(a) => any_nan(a, f16::is_nan),
            Array::C64(a) => any_nan(a, c64::is_nan),
            Array::C128(a) => any_nan(a, c128::is_nan),
            Array::I8(_)
            | Array::I16(_)
            | Array::I32(_)
            | Array::I64(_)
            | Array::U8(_)
            | Array::U32(_)
            | Array::Bool(_)
            | Array::Key(_) => false,
        }
    }

    /// The first of `arrays` that holds a NaN: its place among them and the element's index.
    pub fn first_nan_among<'a>(arrays: impl IntoIterator<Item = &'a Array>) -> Option<(usize, Vec<usize>)> {
        let (i, a) = arrays.into_iter().enumerate().find(|(_, a)| a.has_nan())?;
        a.first_nan().map(|position| (i, position))
    }

    /// Elements in row-major order, as `f64` (booleans are 0 or 1; `i64` values beyond
    /// 2^53 round; a key gives its two words and a complex number its real and imaginary
    /// parts, so those arrays yield twice their length).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self {
            Array::F32(a) => a.iter().map(|&x| x as f64).collect(),
            Array::F64(a) => a.iter().copied().collect(),
            Array::BF16(a) => a.iter().map(|&x| x.to_f64()).collect(),
            Array::F16(a) => a.iter().map(|&x| x.to_f64()).collect(),
            Array::I8(a) => a.iter().map(|&x| x as f64).collect(),
            Array::I16(a) => a.iter().map(|&x| x as f64).collect(),
            Array::I32(a) => a.iter().map(|&x| x as f64).collect(),
            Array::I64(a) => a.iter().map(|&x| x as f64).collect(),
            Array::U8(a) => a.iter().map(|&x| x as f64).collect(),
            Array::U32(a) => a.iter().map(|&x| x as f64).collect(),
            Array::Bool(a) => a.iter().map(|&x| x as u8 as f64).collect(),
            Array::Key(a) => a.iter().flat_map(|k| k.0.map(f64::from)).collect(),
            Array::C64(a) => a.iter().flat_map(|z| [z.re as f64, z.im as f64]).collect(),
            Array::C128(a) => a.iter().flat_map(|z| [z.re, z.im]).collect(),
        }
    }
}
