//! Concrete values: an `ndarray` array of one of the four dtypes, and its JSON form
//! (`{"dtype": "f32", "shape": [5, 4], "data": [...]}`, row-major) used by the
//! conformance cases and the command-line tool.

use ndarray::{ArrayD, IxDyn};
use serde_json::{json, Value};

use crate::types::{Aval, DType};

/// A dense array of any supported dtype.
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    F32(ArrayD<f32>),
    F64(ArrayD<f64>),
    I32(ArrayD<i32>),
    Bool(ArrayD<bool>),
}

/// A malformed JSON array value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JsonArrayError(pub String);

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

    /// Reads the conformance JSON form.
    pub fn from_json(v: &Value) -> Result<Array, JsonArrayError> {
        let err = |m: String| JsonArrayError(m);
        let obj = v.as_object().ok_or_else(|| err("an array must be a JSON object".into()))?;
        let dtype_s =
            obj.get("dtype").and_then(Value::as_str).ok_or_else(|| err("missing string field \"dtype\"".into()))?;
        let dtype = DType::from_short_name(dtype_s)
            .or_else(|| DType::from_numpy_name(dtype_s))
            .ok_or_else(|| err(format!("unknown dtype {dtype_s:?} (expected f32, f64, i32 or bool)")))?;
        let shape = obj
            .get("shape")
            .and_then(Value::as_array)
            .ok_or_else(|| err("missing array field \"shape\"".into()))?
            .iter()
            .map(|d| d.as_u64().map(|d| d as usize))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| err("\"shape\" must hold non-negative integers".into()))?;
        let data = obj.get("data").ok_or_else(|| err("missing field \"data\"".into()))?;
        let mut flat = Vec::new();
        flatten_json(data, &mut flat);
        let n: usize = shape.iter().product();
        if flat.len() != n {
            return Err(err(format!("\"data\" has {} elements but shape {:?} needs {n}", flat.len(), shape)));
        }
        let bad = |i: usize| err(format!("element {i} of \"data\" is not a valid {dtype_s} value"));
        let ix = IxDyn(&shape);
        Ok(match dtype {
            DType::F32 | DType::F64 => {
                let mut xs = Vec::with_capacity(n);
                for (i, e) in flat.iter().enumerate() {
                    xs.push(json_float(e).ok_or_else(|| bad(i))?);
                }
                if dtype == DType::F32 {
                    Array::F32(ArrayD::from_shape_vec(ix, xs.into_iter().map(|x| x as f32).collect()).unwrap())
                } else {
                    Array::F64(ArrayD::from_shape_vec(ix, xs).unwrap())
                }
            }
            DType::I32 => {
                let mut xs = Vec::with_capacity(n);
                for (i, e) in flat.iter().enumerate() {
                    let x = e.as_i64().and_then(|x| i32::try_from(x).ok()).ok_or_else(|| bad(i))?;
                    xs.push(x);
                }
                Array::I32(ArrayD::from_shape_vec(ix, xs).unwrap())
            }
            DType::Bool => {
                let mut xs = Vec::with_capacity(n);
                for (i, e) in flat.iter().enumerate() {
                    let x = match e {
                        Value::Bool(b) => *b,
                        Value::Number(x) if x.as_i64() == Some(0) => false,
                        Value::Number(x) if x.as_i64() == Some(1) => true,
                        _ => return Err(bad(i)),
                    };
                    xs.push(x);
                }
                Array::Bool(ArrayD::from_shape_vec(ix, xs).unwrap())
            }
        })
    }

    /// Writes the conformance JSON form. Non-finite floats are written as the strings
    /// `"nan"`, `"inf"` and `"-inf"`, which [`Array::from_json`] reads back.
    pub fn to_json(&self) -> Value {
        let data: Vec<Value> = match self {
            Array::F32(a) => a.iter().map(|&x| float_json(x as f64)).collect(),
            Array::F64(a) => a.iter().map(|&x| float_json(x)).collect(),
            Array::I32(a) => a.iter().map(|&x| json!(x)).collect(),
            Array::Bool(a) => a.iter().map(|&x| json!(x)).collect(),
        };
        json!({ "dtype": self.dtype().short_name(), "shape": self.shape(), "data": data })
    }
}

fn flatten_json<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    match v {
        Value::Array(xs) => xs.iter().for_each(|x| flatten_json(x, out)),
        other => out.push(other),
    }
}

fn json_float(v: &Value) -> Option<f64> {
    match v {
        Value::Number(x) => x.as_f64(),
        Value::String(s) => match s.as_str() {
            "nan" | "NaN" => Some(f64::NAN),
            "inf" | "Infinity" => Some(f64::INFINITY),
            "-inf" | "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        Value::Bool(b) => Some(*b as u8 as f64),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

fn float_json(x: f64) -> Value {
    if x.is_nan() {
        json!("nan")
    } else if x.is_infinite() {
        json!(if x > 0.0 { "inf" } else { "-inf" })
    } else {
        json!(x)
    }
}
