//! remat's JSON boundary: the JSON form of an [`Array`]
//! (`{"dtype": "f32", "shape": [5, 4], "data": [...]}`, row-major; a key element is its two
//! words, a complex one its pair `[re, im]`), read and written by the
//! command-line tool and the conformance cases.
//!
//! Architecture invariant: `remat-ir` knows nothing of JSON; every JSON form of its data
//! lives here. [`ArrayJson`] adds `Array::to_json` and `Array::from_json` where it is in
//! scope.

use ndarray::{ArrayD, IxDyn};
use remat_ir::{bf16, c128, c64, f16, Array, DType, PrngKey};
use serde_json::{json, Value};

/// A malformed JSON array value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JsonArrayError(pub String);

/// The JSON form of an [`Array`].
pub trait ArrayJson: Sized {
    /// Writes the conformance JSON form. Non-finite floats are written as the strings
    /// `"nan"`, `"inf"` and `"-inf"`, which [`ArrayJson::from_json`] reads back.
    fn to_json(&self) -> Value;

    /// Reads the conformance JSON form.
    fn from_json(v: &Value) -> Result<Self, JsonArrayError>;
}

impl ArrayJson for Array {
    fn to_json(&self) -> Value {
        let data: Vec<Value> = match self {
            Array::F32(a) => a.iter().map(|&x| float_json(x as f64)).collect(),
            Array::F64(a) => a.iter().map(|&x| float_json(x)).collect(),
            Array::BF16(a) => a.iter().map(|&x| float_json(x.to_f64())).collect(),
            Array::F16(a) => a.iter().map(|&x| float_json(x.to_f64())).collect(),
            Array::I8(a) => a.iter().map(|&x| json!(x)).collect(),
            Array::I16(a) => a.iter().map(|&x| json!(x)).collect(),
            Array::I32(a) => a.iter().map(|&x| json!(x)).collect(),
            Array::I64(a) => a.iter().map(|&x| json!(x)).collect(),
            Array::U8(a) => a.iter().map(|&x| json!(x)).collect(),
            Array::U32(a) => a.iter().map(|&x| json!(x)).collect(),
            Array::Bool(a) => a.iter().map(|&x| json!(x)).collect(),
            // A key is its two words, as `random_unwrap` gives them.
            Array::Key(a) => a.iter().map(|k| json!(k.0)).collect(),
            // A complex number is its pair `[re, im]`.
            Array::C64(a) => a.iter().map(|z| json!([float_json(z.re as f64), float_json(z.im as f64)])).collect(),
            Array::C128(a) => a.iter().map(|z| json!([float_json(z.re), float_json(z.im)])).collect(),
        };
        json!({ "dtype": self.dtype().short_name(), "shape": self.shape(), "data": data })
    }

    fn from_json(v: &Value) -> Result<Array, JsonArrayError> {
        let err = |m: String| JsonArrayError(m);
        let obj = v.as_object().ok_or_else(|| err("an array must be a JSON object".into()))?;
        let dtype_s =
            obj.get("dtype").and_then(Value::as_str).ok_or_else(|| err("missing string field \"dtype\"".into()))?;
        // Dtypes are written as JAX prints them in avals (`f32`), and only so.
        let dtype = DType::from_short_name(dtype_s).ok_or_else(|| {
            let names: Vec<&str> = DType::ALL.iter().map(|d| d.short_name()).collect();
            let hint = DType::from_numpy_name(dtype_s).map_or(String::new(), |d| format!("; {dtype_s} is written {d}"));
            err(format!("unknown dtype {dtype_s:?} (expected one of {}{hint})", names.join(", ")))
        })?;
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
        // The one place element counts are checked (`Aval::checked_size`): a zero extent
        // does not make huge other extents addressable.
        let n = remat_ir::Aval::new(dtype, shape.clone())
            .checked_size()
            .ok_or_else(|| err(format!("shape {shape:?} has more elements than this machine can address")))?;
        // A key element is written as its two u32 words, a complex one as `[re, im]`.
        let per_element = if dtype == DType::Key || dtype.is_complex() { 2 } else { 1 };
        if flat.len() != n.saturating_mul(per_element) {
            let needs = n.saturating_mul(per_element);
            return Err(err(format!("\"data\" has {} elements but shape {:?} needs {needs}", flat.len(), shape)));
        }
        let bad = |i: usize| err(format!("element {i} of \"data\" is not a valid {dtype_s} value"));
        let ix = IxDyn(&shape);
        // `largest` is the dtype's largest finite value and its shortest spelling.
        let floats = |(largest, largest_text): (f64, String)| -> Result<Vec<f64>, JsonArrayError> {
            flat.iter()
                .enumerate()
                .map(|(i, e)| {
                    let x = json_float(e).ok_or_else(|| bad(i))?;
                    // A finite number beyond the dtype's range would silently become infinity.
                    if x.is_finite() && x.abs() > largest {
                        return Err(err(format!(
                            "element {i} of \"data\" is {x:e}, out of range for {dtype_s} (largest finite {largest_text})"
                        )));
                    }
                    Ok(x)
                })
                .collect()
        };
        Ok(match dtype {
            DType::F32 => Array::F32(from_vec(
                &ix,
                floats((f32::MAX as f64, format!("{:e}", f32::MAX)))?.into_iter().map(|x| x as f32),
            )),
            DType::F64 => Array::F64(from_vec(&ix, floats((f64::MAX, format!("{:e}", f64::MAX)))?)),
            DType::BF16 => Array::BF16(from_vec(
                &ix,
                floats((bf16::MAX.to_f64(), format!("{:e}", bf16::MAX.to_f32())))?.into_iter().map(bf16::from_f64),
            )),
            DType::F16 => Array::F16(from_vec(
                &ix,
                floats((f16::MAX.to_f64(), format!("{:e}", f16::MAX.to_f32())))?.into_iter().map(f16::from_f64),
            )),
            DType::I8 => Array::I8(from_vec(&ix, ints(&flat, &bad)?)),
            DType::I16 => Array::I16(from_vec(&ix, ints(&flat, &bad)?)),
            DType::I32 => Array::I32(from_vec(&ix, ints(&flat, &bad)?)),
            DType::I64 => Array::I64(from_vec(&ix, ints(&flat, &bad)?)),
            DType::U8 => Array::U8(from_vec(&ix, ints(&flat, &bad)?)),
            DType::U32 => Array::U32(from_vec(&ix, ints(&flat, &bad)?)),
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
                Array::Bool(from_vec(&ix, xs))
            }
            DType::Key => {
                // Each key is a pair of u32 words: `data` holds 2 numbers per element.
                let words: Vec<u32> = ints(&flat, &bad)?;
                Array::Key(from_vec(&ix, words.chunks_exact(2).map(|w| PrngKey([w[0], w[1]]))))
            }
            DType::C64 => {
                let parts = floats((f32::MAX as f64, format!("{:e}", f32::MAX)))?;
                Array::C64(from_vec(&ix, parts.chunks_exact(2).map(|p| c64::new(p[0] as f32, p[1] as f32))))
            }
            DType::C128 => {
                let parts = floats((f64::MAX, format!("{:e}", f64::MAX)))?;
                Array::C128(from_vec(&ix, parts.chunks_exact(2).map(|p| c128::new(p[0], p[1]))))
            }
        })
    }
}

fn from_vec<T>(ix: &IxDyn, xs: impl IntoIterator<Item = T>) -> ArrayD<T> {
    ArrayD::from_shape_vec(ix.clone(), xs.into_iter().collect())
        .expect("the element count was checked against the shape")
}

/// Integers of type `T`, each in `T`'s range (JSON integers only: `2.0` is not an integer).
fn ints<T: TryFrom<i64> + TryFrom<u64>>(
    flat: &[&Value],
    bad: &dyn Fn(usize) -> JsonArrayError,
) -> Result<Vec<T>, JsonArrayError> {
    flat.iter()
        .enumerate()
        .map(|(i, e)| {
            let x = match e {
                Value::Number(x) => x
                    .as_i64()
                    .and_then(|x| T::try_from(x).ok())
                    .or_else(|| x.as_u64().and_then(|x| T::try_from(x).ok())),
                _ => None,
            };
            x.ok_or_else(|| bad(i))
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read(v: Value) -> Result<Array, String> {
        Array::from_json(&v).map_err(|e| e.to_string())
    }

    #[test]
    fn every_dtype_round_trips_with_non_finite_floats_as_strings() {
        let f32s =
            Array::F32(ArrayD::from_shape_vec(IxDyn(&[2, 2]), vec![1.5, f32::NAN, f32::INFINITY, -0.25]).unwrap());
        let json = f32s.to_json();
        assert_eq!(json, json!({ "dtype": "f32", "shape": [2, 2], "data": [1.5, "nan", "inf", -0.25] }));
        let back = Array::from_json(&json).unwrap();
        assert_eq!(back.aval(), f32s.aval());
        assert_eq!(format!("{:?}", back.to_f64_vec()), format!("{:?}", f32s.to_f64_vec()));
        for a in [
            Array::F64(ArrayD::from_shape_vec(IxDyn(&[3]), vec![1e-300, f64::NEG_INFINITY, 2.0]).unwrap()),
            Array::I32(ArrayD::from_shape_vec(IxDyn(&[]), vec![-7]).unwrap()),
            Array::Bool(ArrayD::from_shape_vec(IxDyn(&[1, 2]), vec![true, false]).unwrap()),
            Array::F32(ArrayD::zeros(IxDyn(&[0, 3]))),
            Array::BF16(ArrayD::from_shape_vec(IxDyn(&[2]), vec![bf16::from_f32(0.1), bf16::INFINITY]).unwrap()),
            Array::F16(ArrayD::from_shape_vec(IxDyn(&[2]), vec![f16::from_f32(-0.1), f16::MAX]).unwrap()),
            Array::I8(ArrayD::from_shape_vec(IxDyn(&[2]), vec![i8::MIN, i8::MAX]).unwrap()),
            Array::I16(ArrayD::from_shape_vec(IxDyn(&[2]), vec![i16::MIN, i16::MAX]).unwrap()),
            Array::I64(ArrayD::from_shape_vec(IxDyn(&[2]), vec![i64::MIN, i64::MAX]).unwrap()),
            Array::U8(ArrayD::from_shape_vec(IxDyn(&[2]), vec![0, u8::MAX]).unwrap()),
            Array::U32(ArrayD::from_shape_vec(IxDyn(&[2]), vec![0, u32::MAX]).unwrap()),
            Array::Key(ArrayD::from_shape_vec(IxDyn(&[2]), vec![PrngKey([0, 42]), PrngKey([u32::MAX, 7])]).unwrap()),
            Array::C64(ArrayD::from_shape_vec(IxDyn(&[2]), vec![c64::new(1.5, -0.25), c64::new(0.0, 3e38)]).unwrap()),
            Array::C128(ArrayD::from_shape_vec(IxDyn(&[1]), vec![c128::new(-1e-300, 2.0)]).unwrap()),
        ] {
            assert_eq!(Array::from_json(&a.to_json()).unwrap(), a);
        }
    }

    #[test]
    fn complex_elements_are_pairs_of_parts() {
        let z = Array::C64(
            ArrayD::from_shape_vec(IxDyn(&[2]), vec![c64::new(1.5, f32::NAN), c64::new(-2.0, 0.5)]).unwrap(),
        );
        let json = z.to_json();
        assert_eq!(json, json!({ "dtype": "c64", "shape": [2], "data": [[1.5, "nan"], [-2.0, 0.5]] }));
        // Flat pairs read the same; a lone number per element is too few.
        let flat = read(json!({ "dtype": "c64", "shape": [2], "data": [1.5, "nan", -2.0, 0.5] })).unwrap();
        assert_eq!(format!("{:?}", flat.to_f64_vec()), format!("{:?}", z.to_f64_vec()));
        assert_eq!(
            read(json!({ "dtype": "c128", "shape": [2], "data": [1, 2] })).unwrap_err(),
            "\"data\" has 2 elements but shape [2] needs 4"
        );
    }

    #[test]
    fn nested_data_and_integer_booleans_are_read() {
        let a = read(json!({ "dtype": "f32", "shape": [2, 2], "data": [[1, 2], [3, "-Infinity"]] })).unwrap();
        assert_eq!(a.to_f64_vec(), [1.0, 2.0, 3.0, f64::NEG_INFINITY]);
        let b = read(json!({ "dtype": "bool", "shape": [3], "data": [0, 1, true] })).unwrap();
        assert_eq!(b.to_f64_vec(), [0.0, 1.0, 1.0]);
    }

    #[test]
    fn malformed_arrays_are_rejected_with_their_fault() {
        let cases = [
            (json!([1, 2]), "an array must be a JSON object"),
            (json!({ "shape": [1], "data": [1] }), "missing string field \"dtype\""),
            (
                json!({ "dtype": "f8", "shape": [1], "data": [1] }),
                "unknown dtype \"f8\" (expected one of f32, f64, bf16, f16, i8, i16, i32, i64, u8, u32, bool, key<fry>, c64, c128)",
            ),
            // numpy's names are not JSON dtypes (issue 22's reproducer 7): one spelling only.
            (
                json!({ "dtype": "float32", "shape": [1], "data": [1] }),
                "unknown dtype \"float32\" (expected one of f32, f64, bf16, f16, i8, i16, i32, i64, u8, u32, bool, key<fry>, c64, c128; float32 is written f32)",
            ),
            // Nor does a finite number become infinity on the way in (reproducer 7).
            (
                json!({ "dtype": "f32", "shape": [1], "data": [3.5e38] }),
                "element 0 of \"data\" is 3.5e38, out of range for f32 (largest finite 3.4028235e38)",
            ),
            (
                json!({ "dtype": "f32", "shape": [4294967296u64, 4294967296u64], "data": [] }),
                "shape [4294967296, 4294967296] has more elements than this machine can address",
            ),
            // Found by the fuzzer (issue 22): no element, but strides past isize::MAX.
            (
                json!({ "dtype": "u32", "shape": [0, 8446744073709551615u64, 3], "data": [] }),
                "shape [0, 8446744073709551615, 3] has more elements than this machine can address",
            ),
            (json!({ "dtype": "f32", "data": [1] }), "missing array field \"shape\""),
            (json!({ "dtype": "f32", "shape": [-1], "data": [] }), "\"shape\" must hold non-negative integers"),
            (json!({ "dtype": "f32", "shape": [1] }), "missing field \"data\""),
            (json!({ "dtype": "f32", "shape": [2], "data": [1] }), "\"data\" has 1 elements but shape [2] needs 2"),
            (json!({ "dtype": "f32", "shape": [1], "data": ["x"] }), "element 0 of \"data\" is not a valid f32 value"),
            (
                json!({ "dtype": "i32", "shape": [2], "data": [1, 1.5] }),
                "element 1 of \"data\" is not a valid i32 value",
            ),
            (json!({ "dtype": "bool", "shape": [1], "data": [2] }), "element 0 of \"data\" is not a valid bool value"),
            (json!({ "dtype": "u8", "shape": [1], "data": [256] }), "element 0 of \"data\" is not a valid u8 value"),
            (json!({ "dtype": "u32", "shape": [1], "data": [-1] }), "element 0 of \"data\" is not a valid u32 value"),
            (
                json!({ "dtype": "bf16", "shape": [1], "data": [1e39] }),
                "element 0 of \"data\" is 1e39, out of range for bf16 (largest finite 3.3895314e38)",
            ),
            (
                json!({ "dtype": "f16", "shape": [1], "data": [70000] }),
                "element 0 of \"data\" is 7e4, out of range for f16 (largest finite 6.5504e4)",
            ),
            (json!({ "dtype": "key<fry>", "shape": [1], "data": [1] }), "\"data\" has 1 elements but shape [1] needs 2"),
        ];
        for (json, message) in cases {
            assert_eq!(read(json.clone()).unwrap_err(), message, "{json}");
        }
    }
}
