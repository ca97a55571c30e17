//! Concrete values: an `ndarray` array of one of the four dtypes. Its JSON form lives in
//! `remat-json`.

use ndarray::{ArrayD, IxDyn};

use crate::types::{Aval, DType};

/// A dense array of any supported dtype.
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    F32(ArrayD<f32>),
    F64(ArrayD<f64>),
    I32(ArrayD<i32>),
    Bool(ArrayD<bool>),
}

impl Array {
    pub fn dtype(&self) -> DType {
        match self {
            Array::F32(_) => DType::F32,
            Array::F64(_) => DType::F64,
            Array::I32(_) => DType::I32,
            Array::Bool(_) => DType::Bool,
        }
    }

    pub fn shape(&self) -> &[usize] {
        match self {
            Array::F32(a) => a.shape(),
            Array::F64(a) => a.shape(),
            Array::I32(a) => a.shape(),
            Array::Bool(a) => a.shape(),
        }
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

    /// A zero-filled array of the given aval.
    pub fn zeros(aval: &Aval) -> Array {
        let shape = IxDyn(&aval.shape);
        match aval.dtype {
            DType::F32 => Array::F32(ArrayD::zeros(shape)),
            DType::F64 => Array::F64(ArrayD::zeros(shape)),
            DType::I32 => Array::I32(ArrayD::zeros(shape)),
            DType::Bool => Array::Bool(ArrayD::from_elem(shape, false)),
        }
    }

    /// The index of the first NaN in row-major order, if any (integers and booleans have
    /// none).
    pub fn first_nan(&self) -> Option<Vec<usize>> {
        fn first<T: Copy>(a: &ArrayD<T>, is_nan: impl Fn(T) -> bool) -> Option<Vec<usize>> {
            a.indexed_iter().find(|&(_, &x)| is_nan(x)).map(|(i, _)| ndarray::Dimension::slice(&i).to_vec())
        }
        match self {
            Array::F32(a) => first(a, f32::is_nan),
            Array::F64(a) => first(a, f64::is_nan),
            Array::I32(_) | Array::Bool(_) => None,
        }
    }

    /// Whether any element is a NaN (a quicker [`Array::first_nan`]`().is_some()`).
    pub fn has_nan(&self) -> bool {
        match self {
            Array::F32(a) => a.iter().any(|x| x.is_nan()),
            Array::F64(a) => a.iter().any(|x| x.is_nan()),
            Array::I32(_) | Array::Bool(_) => false,
        }
    }

    /// The first of `arrays` that holds a NaN: its place among them and the element's index.
    pub fn first_nan_among<'a>(arrays: impl IntoIterator<Item = &'a Array>) -> Option<(usize, Vec<usize>)> {
        let (i, a) = arrays.into_iter().enumerate().find(|(_, a)| a.has_nan())?;
        a.first_nan().map(|position| (i, position))
    }

    /// Elements in row-major order, as `f64` (booleans are 0 or 1).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self {
            Array::F32(a) => a.iter().map(|&x| x as f64).collect(),
            Array::F64(a) => a.iter().copied().collect(),
            Array::I32(a) => a.iter().map(|&x| x as f64).collect(),
            Array::Bool(a) => a.iter().map(|&x| x as u8 as f64).collect(),
        }
    }
}
