//! `Tensor`: a traced value, with JAX's elementwise semantics — NumPy rank promotion
//! (`broadcast_in_dim` to leading 1s; size-1 dims are left to the primitive), dtype
//! promotion (bool < i32 < f32 < f64, weak values and Rust scalars take the other side's
//! dtype), and operators on owned values, references and Rust scalars.

use std::ops;
use std::panic::Location;

use remat_ir::{Aval, BinaryOp, CompareOp, DType, LitValue, Primitive, UnaryOp, Var};

use crate::trace::{bind, Operand};

/// A value being traced: an abstract value (dtype, shape) bound to a variable of the
/// jaxpr under construction. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Tensor {
    pub(crate) frame: u64,
    pub(crate) var: Var,
    aval: Aval,
    weak: bool,
}

impl Tensor {
    pub(crate) fn new(frame: u64, var: Var, aval: Aval, weak: bool) -> Tensor {
        Tensor { frame, var, aval, weak }
    }

    /// A stand-in returned after a tracing error; it belongs to no frame.
    pub(crate) fn placeholder(aval: Aval) -> Tensor {
        Tensor { frame: 0, var: Var(0), aval, weak: false }
    }

    pub fn aval(&self) -> &Aval {
        &self.aval
    }

    pub fn shape(&self) -> &[usize] {
        &self.aval.shape
    }

    pub fn dtype(&self) -> DType {
        self.aval.dtype
    }

    pub fn ndim(&self) -> usize {
        self.aval.shape.len()
    }

    /// The number of elements.
    pub fn size(&self) -> usize {
        self.aval.size()
    }

    /// Whether the value is weakly typed (derived only from Rust scalars), so that it takes
    /// the dtype of what it is combined with, as in JAX.
    pub fn is_weak(&self) -> bool {
        self.weak
    }
}

/// Rust scalars usable as weakly typed operands.
pub trait Scalar: Copy {
    /// The literal of this value in `dtype`.
    fn literal(self, dtype: DType) -> LitValue;
    /// The dtype this scalar has on its own (`f32` for floats, `i32` for integers).
    fn natural_dtype() -> DType;
}

impl Scalar for f32 {
    fn literal(self, dtype: DType) -> LitValue {
        LitValue::from_f64(dtype, self as f64)
    }
    fn natural_dtype() -> DType {
        DType::F32
    }
}

impl Scalar for f64 {
    fn literal(self, dtype: DType) -> LitValue {
        LitValue::from_f64(dtype, self)
    }
    fn natural_dtype() -> DType {
        DType::F32
    }
}

impl Scalar for i32 {
    fn literal(self, dtype: DType) -> LitValue {
        LitValue::from_f64(dtype, self as f64)
    }
    fn natural_dtype() -> DType {
        DType::I32
    }
}

impl Scalar for bool {
    fn literal(self, dtype: DType) -> LitValue {
        LitValue::from_f64(dtype, self as u8 as f64)
    }
    fn natural_dtype() -> DType {
        DType::Bool
    }
}

/// One side of an elementwise operation before promotion.
#[derive(Clone, Debug)]
pub enum Arg {
    Tensor(Tensor),
    /// A Rust scalar: its value as `f64` and its natural dtype.
    Scalar(f64, DType),
}

impl From<&Tensor> for Arg {
    fn from(t: &Tensor) -> Arg {
        Arg::Tensor(t.clone())
    }
}

impl From<Tensor> for Arg {
    fn from(t: Tensor) -> Arg {
        Arg::Tensor(t)
    }
}

macro_rules! scalar_arg {
    ($($t:ty),*) => {$(
        impl From<$t> for Arg {
            fn from(x: $t) -> Arg {
                Arg::Scalar(x as f64, <$t as Scalar>::natural_dtype())
            }
        }
    )*};
}
scalar_arg!(f32, f64, i32);

impl From<bool> for Arg {
    fn from(x: bool) -> Arg {
        Arg::Scalar(x as u8 as f64, DType::Bool)
    }
}

fn rank(d: DType) -> u8 {
    match d {
        DType::Bool => 0,
        DType::I32 => 1,
        DType::F32 => 2,
        DType::F64 => 3,
    }
}

/// The dtype two operands are computed in (JAX's promotion, restricted to our dtypes).
fn result_dtype(args: &[Arg]) -> DType {
    let strong = args.iter().filter_map(|a| match a {
        Arg::Tensor(t) if !t.weak => Some(t.dtype()),
        _ => None,
    });
    let weak = args.iter().map(|a| match a {
        Arg::Tensor(t) => t.dtype(),
        Arg::Scalar(_, d) => *d,
    });
    match strong.max_by_key(|d| rank(*d)) {
        // A weak value keeps the strong dtype unless it is of a higher kind (a float
        // scalar with an integer array gives a float, as in JAX).
        Some(s) => weak.fold(s, |acc, w| {
            if rank(w) > rank(acc) && (w.is_float() != acc.is_float() || acc == DType::Bool) {
                w
            } else {
                acc
            }
        }),
        None => weak.max_by_key(|d| rank(*d)).unwrap_or(DType::F32),
    }
}

/// Converts, rank-promotes and lowers each argument to an operand of `dtype` with the
/// broadcast result shape. Returns `None` (error recorded) if shapes do not broadcast.
#[track_caller]
pub(crate) fn promote(args: &[Arg], dtype: DType) -> Option<Vec<Operand>> {
    let loc = Location::caller();
    let shapes: Vec<&[usize]> = args
        .iter()
        .filter_map(|a| match a {
            Arg::Tensor(t) => Some(t.shape()),
            Arg::Scalar(..) => None,
        })
        .collect();
    let out_rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    // Check NumPy broadcasting compatibility, aligning trailing dims.
    for i in 0..out_rank {
        let mut size = 1;
        for s in &shapes {
            if s.len() + i >= out_rank {
                let d = s[s.len() + i - out_rank];
                if d != 1 && size != 1 && d != size {
                    let list: Vec<String> = shapes.iter().map(|s| format!("{s:?}")).collect();
                    crate::trace::record_error(loc, format!("shapes {} do not broadcast together", list.join(" and ")));
                    return None;
                }
                if d != 1 {
                    size = d;
                }
            }
        }
    }
    let mut out = Vec::with_capacity(args.len());
    for a in args {
        match a {
            Arg::Scalar(x, _) => out.push(Operand::Literal(LitValue::from_f64(dtype, *x))),
            Arg::Tensor(t) => {
                let mut t = t.clone();
                if t.dtype() != dtype {
                    t = t.convert_at(dtype, loc);
                }
                if t.ndim() != 0 && t.ndim() < out_rank {
                    let pad = out_rank - t.ndim();
                    let mut shape = vec![1; pad];
                    shape.extend_from_slice(t.shape());
                    let prim = Primitive::BroadcastInDim { shape, broadcast_dimensions: (pad..out_rank).collect() };
                    let weak = t.weak;
                    t = bind(prim, &[Operand::Tensor(t)], weak, loc).remove(0);
                }
                out.push(Operand::Tensor(t));
            }
        }
    }
    Some(out)
}

fn all_weak(args: &[Arg]) -> bool {
    args.iter().all(|a| match a {
        Arg::Tensor(t) => t.weak,
        Arg::Scalar(..) => true,
    })
}

/// An elementwise binary operation with promotion.
#[track_caller]
pub fn binary(op: BinaryOp, a: impl Into<Arg>, b: impl Into<Arg>) -> Tensor {
    let loc = Location::caller();
    let args = [a.into(), b.into()];
    let dtype = result_dtype(&args);
    match promote(&args, dtype) {
        Some(ops) => bind(Primitive::Binary(op), &ops, all_weak(&args), loc).remove(0),
        None => Tensor::placeholder(Aval::scalar(dtype)),
    }
}

/// An elementwise comparison with promotion; the result is `bool`.
#[track_caller]
pub fn compare(op: CompareOp, a: impl Into<Arg>, b: impl Into<Arg>) -> Tensor {
    let loc = Location::caller();
    let args = [a.into(), b.into()];
    let dtype = result_dtype(&args);
    match promote(&args, dtype) {
        Some(ops) => bind(Primitive::Compare(op), &ops, false, loc).remove(0),
        None => Tensor::placeholder(Aval::scalar(DType::Bool)),
    }
}

impl Tensor {
    #[track_caller]
    pub(crate) fn unary(&self, op: UnaryOp) -> Tensor {
        let loc = Location::caller();
        let x =
            if op.float_only() && !self.dtype().is_float() { self.convert_at(DType::F32, loc) } else { self.clone() };
        let weak = x.weak;
        bind(Primitive::Unary(op), &[Operand::Tensor(x)], weak, loc).remove(0)
    }

    pub(crate) fn convert_at(&self, dtype: DType, loc: &'static Location<'static>) -> Tensor {
        bind(Primitive::ConvertElementType { new_dtype: dtype, weak_type: false }, &[self.into()], false, loc).remove(0)
    }

    /// `x.astype(dtype)`: `convert_element_type`; the result is strongly typed.
    #[track_caller]
    pub fn astype(&self, dtype: DType) -> Tensor {
        self.convert_at(dtype, Location::caller())
    }

    /// Records `prim` with this tensor as the only operand (for primitives without a
    /// dedicated method).
    #[track_caller]
    pub fn apply(&self, prim: Primitive) -> Tensor {
        let weak = self.weak;
        bind(prim, &[self.into()], weak, Location::caller()).remove(0)
    }
}

macro_rules! unary_methods {
    ($($name:ident => $op:ident),* $(,)?) => {
        impl Tensor {
            $(
                #[doc = concat!("Elementwise `", stringify!($name), "` (records `", stringify!($name), "`).")]
                #[track_caller]
                pub fn $name(&self) -> Tensor {
                    self.unary(UnaryOp::$op)
                }
            )*
        }
    };
}

unary_methods!(
    sin => Sin, cos => Cos, tan => Tan, tanh => Tanh, exp => Exp, log => Log, log1p => Log1p,
    expm1 => Expm1, sqrt => Sqrt, rsqrt => Rsqrt, abs => Abs, sign => Sign, logistic => Logistic,
    square => Square,
);

impl Tensor {
    /// Elementwise negation (`neg`).
    #[track_caller]
    pub fn neg(&self) -> Tensor {
        self.unary(UnaryOp::Neg)
    }

    /// `stop_gradient`: the value, with no gradient flowing back.
    #[track_caller]
    pub fn stop_gradient(&self) -> Tensor {
        self.unary(UnaryOp::StopGradient)
    }

    /// `x ** n` for an integer `n`: `integer_pow[y=n]`.
    #[track_caller]
    pub fn powi(&self, n: i32) -> Tensor {
        let weak = self.weak;
        bind(Primitive::IntegerPow { y: n }, &[self.into()], weak, Location::caller()).remove(0)
    }

    /// `x ** y` elementwise (`pow`).
    #[track_caller]
    pub fn pow(&self, y: impl Into<Arg>) -> Tensor {
        binary(BinaryOp::Pow, self, y)
    }

    /// Elementwise maximum (`max`; NaN propagates).
    #[track_caller]
    pub fn maximum(&self, y: impl Into<Arg>) -> Tensor {
        binary(BinaryOp::Max, self, y)
    }

    /// Elementwise minimum (`min`; NaN propagates).
    #[track_caller]
    pub fn minimum(&self, y: impl Into<Arg>) -> Tensor {
        binary(BinaryOp::Min, self, y)
    }

    #[track_caller]
    pub fn eq(&self, y: impl Into<Arg>) -> Tensor {
        compare(CompareOp::Eq, self, y)
    }

    #[track_caller]
    pub fn ne(&self, y: impl Into<Arg>) -> Tensor {
        compare(CompareOp::Ne, self, y)
    }

    #[track_caller]
    pub fn lt(&self, y: impl Into<Arg>) -> Tensor {
        compare(CompareOp::Lt, self, y)
    }

    #[track_caller]
    pub fn le(&self, y: impl Into<Arg>) -> Tensor {
        compare(CompareOp::Le, self, y)
    }

    #[track_caller]
    pub fn gt(&self, y: impl Into<Arg>) -> Tensor {
        compare(CompareOp::Gt, self, y)
    }

    #[track_caller]
    pub fn ge(&self, y: impl Into<Arg>) -> Tensor {
        compare(CompareOp::Ge, self, y)
    }
}

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $op:ident) => {
        impl<R: Into<Arg>> ops::$trait<R> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: R) -> Tensor {
                binary(BinaryOp::$op, self, rhs)
            }
        }
        impl<R: Into<Arg>> ops::$trait<R> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: R) -> Tensor {
                binary(BinaryOp::$op, self, rhs)
            }
        }
        impl ops::$trait<Tensor> for f32 {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                binary(BinaryOp::$op, self, rhs)
            }
        }
        impl ops::$trait<&Tensor> for f32 {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                binary(BinaryOp::$op, self, rhs)
            }
        }
        impl ops::$trait<Tensor> for f64 {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                binary(BinaryOp::$op, self, rhs)
            }
        }
        impl ops::$trait<&Tensor> for f64 {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                binary(BinaryOp::$op, self, rhs)
            }
        }
    };
}

binary_operator!(Add, add, Add);
binary_operator!(Sub, sub, Sub);
binary_operator!(Mul, mul, Mul);
binary_operator!(Div, div, Div);

impl ops::Neg for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        self.unary(UnaryOp::Neg)
    }
}

impl ops::Neg for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        self.unary(UnaryOp::Neg)
    }
}
