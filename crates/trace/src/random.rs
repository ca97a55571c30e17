//! `jax.random`: threefry keys and the samplers built on them, recorded as JAX 0.10.2
//! records them (`random_seed`, `random_wrap`/`random_unwrap` around legacy keys, the
//! samplers as `jit[name=_uniform]`, `jit[name=_normal]`, ...), so that a traced program
//! prints as JAX's and the interpreter computes JAX's bits for the same key.
//!
//! Keys come in JAX's two forms, and every function takes either:
//! - a *legacy* key, `u32[2]` (what [`prng_key`] returns, as `jax.random.PRNGKey`): each
//!   function wraps it (`random_wrap[impl=fry]`) and unwraps the keys it returns;
//! - a *typed* key, `key<fry>[]` (what [`key`] returns, as `jax.random.key`), used as is.
//!
//! Anything else is a located [`TraceError`](crate::TraceError), as is a key array where
//! JAX wants a single key. Only `float32` samples exist for now.

use std::panic::Location;

use remat_ir::{Aval, BinaryOp, CompareOp, DType, LitValue, Primitive, UnaryOp};

use crate::elementwise::{binary_at, compare_at, unary_at, Arg};
use crate::tensor::Tensor;
use crate::trace::{bind, bind_n, record_error, share_jaxpr_typed, spell_last_literals, CallKey, Operand};
use crate::transforms::{bind_call, placeholders, trace_body};

/// A key as the primitives take it (`key<fry>`), and whether the user's was a legacy
/// `u32[..., 2]` key (so that keys returned to the user are unwrapped again).
pub(crate) struct Checked {
    pub(crate) key: Tensor,
    legacy: bool,
}

/// JAX's `_check_prng_key`: a typed key as is, a legacy `u32[..., 2]` key wrapped.
/// `single`: JAX's "accepts a single key" check.
pub(crate) fn check_key(what: &str, key: &Tensor, single: bool, loc: &'static Location<'static>) -> Option<Checked> {
    let checked = match key.dtype() {
        DType::Key => Checked { key: key.clone(), legacy: false },
        DType::U32 if key.shape().last() == Some(&2) => {
            Checked { key: key.apply_at(Primitive::RandomWrap, loc), legacy: true }
        }
        _ => {
            record_error(
                loc,
                format!(
                    "{what}: expected a PRNG key (a legacy u32[2] key from prng_key, or a key<fry>[] from key), found {}",
                    key.aval()
                ),
            );
            return None;
        }
    };
    if single && checked.key.ndim() != 0 {
        record_error(
            loc,
            format!(
                "{what} accepts a single key, but was given a key array of shape {:?} != () (use vmap for batching)",
                checked.key.shape()
            ),
        );
        return None;
    }
    Some(checked)
}

impl Checked {
    /// Keys returned to the user, in the form the user's key had.
    fn out(&self, keys: Tensor, loc: &'static Location<'static>) -> Tensor {
        if self.legacy {
            keys.apply_at(Primitive::RandomUnwrap, loc)
        } else {
            keys
        }
    }
}

fn seed_of(what: &str, seed: Arg, loc: &'static Location<'static>) -> Option<Tensor> {
    let operand = match seed {
        Arg::Scalar(v, DType::I32) => Operand::Literal(LitValue::I32(v as i32)),
        Arg::Tensor(t) if t.ndim() == 0 && t.dtype().is_integer() => Operand::Tensor(t),
        other => {
            let found = match other {
                Arg::Tensor(t) => t.aval().to_string(),
                Arg::Scalar(v, d) => format!("the {d} scalar {v}"),
            };
            record_error(loc, format!("{what}: the seed must be an integer scalar, found {found}"));
            return None;
        }
    };
    Some(bind(Primitive::RandomSeed, &[operand], false, loc).remove(0))
}

/// `jax.random.PRNGKey(seed)`: a legacy key, `u32[2]` (`random_seed[impl=fry]` then
/// `random_unwrap`). The seed is an `i32` Rust integer or integer scalar tensor; the key
/// is `[0, seed mod 2^32]`, as JAX's with 64-bit types off.
#[track_caller]
pub fn prng_key(seed: impl Into<Arg>) -> Tensor {
    let loc = Location::caller();
    match seed_of("prng_key", seed.into(), loc) {
        Some(k) => k.apply_at(Primitive::RandomUnwrap, loc),
        None => Tensor::placeholder(Aval::new(DType::U32, vec![2])),
    }
}

/// `jax.random.key(seed)`: a typed key, `key<fry>[]` (`random_seed[impl=fry]`).
#[track_caller]
pub fn key(seed: impl Into<Arg>) -> Tensor {
    let loc = Location::caller();
    seed_of("key", seed.into(), loc).unwrap_or_else(|| Tensor::placeholder(Aval::scalar(DType::Key)))
}

/// `jax.random.key_data(keys)`: the `u32[..., 2]` words of typed keys (`random_unwrap`).
#[track_caller]
pub fn key_data(keys: &Tensor) -> Tensor {
    keys.apply_at(Primitive::RandomUnwrap, Location::caller())
}

/// `jax.random.wrap_key_data(data)`: typed keys from `u32[..., 2]` words (`random_wrap`).
#[track_caller]
pub fn wrap_key_data(data: &Tensor) -> Tensor {
    data.apply_at(Primitive::RandomWrap, Location::caller())
}

/// `jax.random.split(key, num)`: `num` new keys, stacked on a leading axis
/// (`random_split[shape=(num,)]`), in the key's form (`u32[num,2]` or `key<fry>[num]`).
#[track_caller]
pub fn split(key: &Tensor, num: usize) -> Tensor {
    let loc = Location::caller();
    let Some(k) = check_key("split", key, true, loc) else { return placeholder_keys(key, &[num]) };
    let keys = k.key.apply_at(Primitive::RandomSplit { shape: vec![num] }, loc);
    k.out(keys, loc)
}

/// `jax.random.split(key, shape)` with a shape: keys stacked on `shape`'s axes
/// (`random_split[shape=(2, 3)]`).
#[track_caller]
pub fn split_shape(key: &Tensor, shape: &[usize]) -> Tensor {
    let loc = Location::caller();
    let Some(k) = check_key("split", key, true, loc) else { return placeholder_keys(key, shape) };
    let keys = k.key.apply_at(Primitive::RandomSplit { shape: shape.to_vec() }, loc);
    k.out(keys, loc)
}

/// `jax.random.fold_in(key, data)`: a new key from `key` and an integer (`random_fold_in`;
/// a Rust integer is the literal `data:u32[]`, a tensor is converted to `u32`).
#[track_caller]
pub fn fold_in(key: &Tensor, data: impl Into<Arg>) -> Tensor {
    let loc = Location::caller();
    let Some(k) = check_key("fold_in", key, false, loc) else { return placeholder_keys(key, &[]) };
    let data = match data.into() {
        Arg::Scalar(v, DType::I32) => Operand::Literal(LitValue::U32(v as i64 as u32)),
        Arg::Tensor(t) if t.ndim() == 0 && t.dtype().is_integer() => Operand::Tensor(t.to_type(DType::U32, false, loc)),
        other => {
            let found = match other {
                Arg::Tensor(t) => t.aval().to_string(),
                Arg::Scalar(v, d) => format!("the {d} scalar {v}"),
            };
            record_error(loc, format!("fold_in: the data must be an integer scalar, found {found}"));
            return placeholder_keys(key, &[]);
        }
    };
    let keys = bind(Primitive::RandomFoldIn, &[k.key.clone().into(), data], false, loc).remove(0);
    k.out(keys, loc)
}

/// `jax.random.clone(key)`: the same key, as a copy JAX's optimizations keep
/// (`random_clone`, on a typed key array or on a legacy key's words).
#[track_caller]
pub fn clone(key: &Tensor) -> Tensor {
    let loc = Location::caller();
    // JAX binds it on the value as it is: a typed key array, or a legacy key's `u32[2]` words.
    let legacy = key.dtype() == DType::U32 && key.shape().last() == Some(&2);
    if key.dtype() != DType::Key && !legacy {
        record_error(
            loc,
            format!(
                "clone: expected a PRNG key (a legacy u32[2] key from prng_key, or a key<fry>[] from key), found {}",
                key.aval()
            ),
        );
        return placeholder_keys(key, &[]);
    }
    bind(Primitive::RandomClone, &[key.clone().into()], false, loc).remove(0)
}

fn placeholder_keys(key: &Tensor, shape: &[usize]) -> Tensor {
    if key.dtype() == DType::Key {
        Tensor::placeholder(Aval::new(DType::Key, shape.to_vec()))
    } else {
        Tensor::placeholder(Aval::new(DType::U32, [shape, &[2]].concat()))
    }
}

/// `jax.random.bits(key, shape)`: uniformly random `u32` words
/// (`random_bits[bit_width=32 shape=...]`).
#[track_caller]
pub fn bits(key: &Tensor, shape: &[usize]) -> Tensor {
    bits_of(key, shape, DType::U32)
}

/// `jax.random.bits(key, shape, dtype)` for an unsigned `dtype` (`u8` or `u32`):
/// `random_bits[bit_width=8 ...]` gives the low byte of each 32-bit word.
#[track_caller]
pub fn bits_of(key: &Tensor, shape: &[usize], dtype: DType) -> Tensor {
    let loc = Location::caller();
    let out = Tensor::placeholder(Aval::new(dtype, shape.to_vec()));
    let Some(k) = check_key("bits", key, true, loc) else { return out };
    let bit_width = match dtype {
        DType::U8 => 8,
        DType::U32 => 32,
        other => {
            record_error(
                loc,
                format!("bits: dtype must be an unsigned integer type remat has (u8, u32), found {other}"),
            );
            return out;
        }
    };
    k.key.apply_at(Primitive::RandomBits { bit_width, shape: shape.to_vec() }, loc)
}

pub(crate) fn random_bits(key: &Tensor, shape: &[usize], loc: &'static Location<'static>) -> Tensor {
    key.apply_at(Primitive::RandomBits { bit_width: 32, shape: shape.to_vec() }, loc)
}

pub(crate) fn check_float(what: &str, dtype: DType, loc: &'static Location<'static>) -> bool {
    if dtype != DType::F32 {
        record_error(loc, format!("{what}: only float32 samples are supported, found dtype {dtype}"));
    }
    dtype == DType::F32
}

/// An operand of a library call with its own weak flag: JAX passes Python floats as weak
/// literals and NumPy constants (`np.float32(...)`) as strong ones.
#[derive(Clone)]
pub(crate) struct CallArg {
    pub(crate) operand: Operand,
    pub(crate) weak: bool,
    /// A Rust float passed as JAX passes a Python float: never rounded, so it prints
    /// with its own digits (`0.1:f32[]`).
    python_float: Option<f64>,
}

impl CallArg {
    pub(crate) fn weak(x: f64) -> CallArg {
        CallArg { operand: Operand::Literal(LitValue::from_f64(DType::F32, x)), weak: true, python_float: Some(x) }
    }
    pub(crate) fn strong(x: f64) -> CallArg {
        CallArg { operand: Operand::Literal(LitValue::from_f64(DType::F32, x)), weak: false, python_float: None }
    }
    /// A tensor, or a Rust scalar as a weak literal of its own kind (`-1:i32[]`,
    /// `1.0:f32[]`), as JAX passes a Python number.
    pub(crate) fn of(a: Arg) -> CallArg {
        match a {
            Arg::Tensor(t) => CallArg::tensor(&t),
            Arg::Scalar(x, DType::F32) => CallArg::weak(x),
            Arg::Scalar(x, d) => CallArg {
                operand: Operand::Literal(LitValue::from_f64(d, x)),
                weak: d != DType::Bool,
                python_float: None,
            },
        }
    }

    pub(crate) fn tensor(t: &Tensor) -> CallArg {
        CallArg { operand: t.into(), weak: t.is_weak(), python_float: None }
    }
}

/// A library call `jit[name=...]` over operands with given weak flags (a strong literal
/// such as `np.float32(1.0)` prints as a weak one does, but its body converts nothing).
pub(crate) fn call<R: crate::TensorTree>(
    name: &'static str,
    args: &[CallArg],
    f: impl FnOnce(Vec<Tensor>) -> R,
    loc: &'static Location<'static>,
) -> R {
    let types: Vec<(Aval, bool)> = args.iter().map(|a| (a.operand.typ().0, a.weak)).collect();
    match trace_body(&types, f, ("the library function", name), loc) {
        Err(out) => placeholders(&out),
        Ok(body) => {
            let in_weak: Vec<bool> = args.iter().map(|a| a.weak).collect();
            let jaxpr = share_jaxpr_typed(CallKey::Library(name), body.jaxpr, &in_weak);
            let prim = Primitive::Jit {
                name: name.to_string(),
                jaxpr: remat_ir::ClosedJaxpr::new(jaxpr),
                options: Default::default(),
            };
            let n_captured = body.captured.len();
            let operands: Vec<Operand> =
                body.captured.into_iter().map(Operand::Tensor).chain(args.iter().map(|a| a.operand.clone())).collect();
            let out = bind_call(prim, &operands, &body.out, loc);
            let floats: Vec<(usize, f64)> =
                args.iter().enumerate().filter_map(|(i, a)| a.python_float.map(|x| (n_captured + i, x))).collect();
            spell_last_literals(&floats);
            out
        }
    }
}

/// `jit[name=_uniform]` on `(key, bounds[0], bounds[1])`, where `min_first` says which
/// bound is `minval` (JAX's keyword call from `_gumbel` passes `maxval` first).
pub(crate) fn uniform_call(
    key: &Tensor,
    shape: &[usize],
    bounds: [CallArg; 2],
    min_first: bool,
    loc: &'static Location<'static>,
) -> Tensor {
    let shape = shape.to_vec();
    let args = [CallArg { operand: key.into(), weak: false, python_float: None }, bounds[0].clone(), bounds[1].clone()];
    call(
        "_uniform",
        &args,
        |inner| {
            let key = &inner[0];
            let b0 = inner[1].to_type(DType::F32, false, loc);
            let b1 = inner[2].to_type(DType::F32, false, loc);
            let (lo, hi) = if min_first { (b0, b1) } else { (b1, b0) };
            let rank = shape.len();
            let to_rank = |b: Tensor| {
                if rank == 0 {
                    b
                } else {
                    b.apply_at(Primitive::BroadcastInDim { shape: vec![1; rank], broadcast_dimensions: vec![] }, loc)
                }
            };
            let (lo, hi) = (to_rank(lo), to_rank(hi));
            let bits = random_bits(key, &shape, loc);
            let u32_lit = |v: u32| Operand::Literal(LitValue::U32(v));
            let shifted =
                bind(Primitive::Binary(BinaryOp::ShiftRightLogical), &[bits.into(), u32_lit(32 - 23)], false, loc)
                    .remove(0);
            let one_bits =
                bind(Primitive::Binary(BinaryOp::Or), &[shifted.into(), u32_lit(0x3F80_0000)], false, loc).remove(0);
            let floats = one_bits.apply_at(Primitive::BitcastConvertType { new_dtype: DType::F32 }, loc);
            let floats = binary_at(BinaryOp::Sub, floats.into(), 1.0.into(), loc);
            let range = binary_at(BinaryOp::Sub, hi.into(), lo.clone().into(), loc);
            let scaled = binary_at(BinaryOp::Mul, floats.into(), range.into(), loc);
            let mut out = binary_at(BinaryOp::Add, scaled.into(), lo.clone().into(), loc);
            if rank == 0 {
                out = out.apply_at(Primitive::Reshape { new_sizes: vec![], dimensions: None }, loc);
            }
            binary_at(BinaryOp::Max, lo.into(), out.into(), loc)
        },
        loc,
    )
}

/// `jax.random.uniform(key, shape, dtype, minval, maxval)`: samples in `[minval, maxval)`,
/// recorded as `jit[name=_uniform]` (23 random mantissa bits of each `random_bits` word).
#[track_caller]
pub fn uniform(key: &Tensor, shape: &[usize], dtype: DType, minval: impl Into<Arg>, maxval: impl Into<Arg>) -> Tensor {
    let loc = Location::caller();
    let out = Tensor::placeholder(Aval::new(dtype, shape.to_vec()));
    let Some(k) = check_key("uniform", key, true, loc) else { return out };
    if !check_float("uniform", dtype, loc) {
        return out;
    }
    let bounds = [CallArg::of(minval.into()), CallArg::of(maxval.into())];
    for b in &bounds {
        let (aval, _) = b.operand.typ();
        if !aval.shape.is_empty() || !(aval.dtype.is_float() || aval.dtype.is_integer()) {
            record_error(loc, format!("uniform: minval and maxval must be numeric scalars, found {aval}"));
            return out;
        }
    }
    uniform_call(&k.key, shape, bounds, true, loc)
}

/// `jax.random.normal(key, shape, dtype)`: standard normal samples, recorded as
/// `jit[name=_normal]{ jit[name=_normal_real]{ sqrt(2) * erf_inv(uniform(-1+, 1)) } }`.
#[track_caller]
pub fn normal(key: &Tensor, shape: &[usize], dtype: DType) -> Tensor {
    let loc = Location::caller();
    let out = Tensor::placeholder(Aval::new(dtype, shape.to_vec()));
    let Some(k) = check_key("normal", key, true, loc) else { return out };
    if !check_float("normal", dtype, loc) {
        return out;
    }
    let key_arg = [CallArg { operand: k.key.into(), weak: false, python_float: None }];
    call(
        "_normal",
        &key_arg,
        |inner| {
            let key_arg = [CallArg { operand: inner[0].clone().into(), weak: false, python_float: None }];
            call(
                "_normal_real",
                &key_arg,
                |inner| {
                    // JAX's minval is `np.nextafter(-1, 0)` in float32, a strong constant.
                    let lo = f64::from(f32::from_bits(0xBF7F_FFFF));
                    let u = uniform_call(&inner[0], shape, [CallArg::strong(lo), CallArg::strong(1.0)], true, loc);
                    let e = unary_at(UnaryOp::ErfInv, u.into(), loc);
                    binary_at(BinaryOp::Mul, std::f64::consts::SQRT_2.into(), e.into(), loc)
                },
                loc,
            )
        },
        loc,
    )
}

/// `jax.random.exponential(key, shape, dtype)`: samples of the unit-rate exponential
/// distribution, `-log1p(-u)` for `u` uniform in `[0, 1)`, recorded as
/// `jit[name=_exponential]{ jit[name=_uniform] }`.
#[track_caller]
pub fn exponential(key: &Tensor, shape: &[usize], dtype: DType) -> Tensor {
    let loc = Location::caller();
    let out = Tensor::placeholder(Aval::new(dtype, shape.to_vec()));
    let Some(k) = check_key("exponential", key, true, loc) else { return out };
    if !check_float("exponential", dtype, loc) {
        return out;
    }
    let key_arg = [CallArg { operand: k.key.into(), weak: false, python_float: None }];
    call(
        "_exponential",
        &key_arg,
        |inner| {
            let bounds = [CallArg::of(Arg::from(0.0)), CallArg::of(Arg::from(1.0))];
            let u = uniform_call(&inner[0], shape, bounds, true, loc);
            let neg = unary_at(UnaryOp::Neg, u.into(), loc);
            let l = unary_at(UnaryOp::Log1p, neg.into(), loc);
            unary_at(UnaryOp::Neg, l.into(), loc)
        },
        loc,
    )
}

/// `jax.random.choice(key, a, shape)` with JAX's defaults `replace=True`, `p=None`,
/// `axis=0`: `shape` draws of `a`'s rows, recorded as JAX does (`randint(key, shape, 0, n)`
/// then `jnp.take(a, ind, axis=0)`). For a count `n` instead of an array, use
/// [`randint`]`(key, shape, 0, n)`.
#[track_caller]
pub fn choice(key: &Tensor, a: &Tensor, shape: &[usize]) -> Tensor {
    let loc = Location::caller();
    if a.ndim() == 0 {
        record_error(loc, format!("choice: a must be an array of rank 1 or more, found {}", a.aval()));
        return Tensor::placeholder(Aval::new(a.dtype(), shape.to_vec()));
    }
    let n = a.shape()[0];
    if n == 0 {
        record_error(loc, "choice: a cannot be empty when shape is not empty".to_string());
        return Tensor::placeholder(Aval::new(
            a.dtype(),
            shape.iter().chain(&a.shape()[1..]).copied().collect::<Vec<_>>(),
        ));
    }
    let Ok(n) = i32::try_from(n) else {
        record_error(loc, format!("choice: {n} rows do not fit int32"));
        return Tensor::placeholder(a.aval().clone());
    };
    let ind = randint_at(key, shape, Arg::from(0), Arg::from(n), loc);
    a.take_at(&ind, Some(0), crate::numpy::TakeMode::Fill, loc)
}

/// `jax.random.bernoulli(key, p, shape)`: `true` with probability `p`, recorded as
/// `jit[name=_bernoulli]{ uniform(key, shape) < p }`. `p` is a float scalar or a tensor
/// whose shape broadcasts to `shape`; `shape: None` is `p`'s shape.
#[track_caller]
pub fn bernoulli(key: &Tensor, p: impl Into<Arg>, shape: Option<&[usize]>) -> Tensor {
    let loc = Location::caller();
    let p = p.into();
    let p_shape: Vec<usize> = match &p {
        Arg::Tensor(t) => t.shape().to_vec(),
        Arg::Scalar(..) => vec![],
    };
    let shape = shape.map(<[usize]>::to_vec).unwrap_or(p_shape.clone());
    let out = Tensor::placeholder(Aval::new(DType::Bool, shape.clone()));
    let Some(k) = check_key("bernoulli", key, true, loc) else { return out };
    let p_dtype = p.typ().0;
    if !(p_dtype.is_float() || matches!(p, Arg::Scalar(..))) {
        record_error(loc, format!("bernoulli: p must be a float, found dtype {p_dtype}"));
        return out;
    }
    let fits = p_shape.len() <= shape.len() && p_shape.iter().rev().zip(shape.iter().rev()).all(|(a, b)| a == b);
    if !fits {
        record_error(loc, format!("bernoulli: p of shape {p_shape:?} does not broadcast to the shape {shape:?}"));
        return out;
    }
    let p = match p {
        Arg::Scalar(x, _) => CallArg::strong(x),
        Arg::Tensor(t) => CallArg { operand: Operand::Tensor(t), weak: false, python_float: None },
    };
    let args = [CallArg { operand: k.key.into(), weak: false, python_float: None }, p];
    call(
        "_bernoulli",
        &args,
        |inner| {
            let u = uniform_call(&inner[0], &shape, [CallArg::weak(0.0), CallArg::weak(1.0)], true, loc);
            compare_at(CompareOp::Lt, u.into(), inner[1].clone().into(), loc)
        },
        loc,
    )
}

/// `jax.random.gumbel(key, shape)`: standard Gumbel samples, `-log(-log(u))` for `u`
/// uniform in `[tiny, 1)`, recorded as `jit[name=_gumbel]`.
#[track_caller]
pub fn gumbel(key: &Tensor, shape: &[usize], dtype: DType) -> Tensor {
    let loc = Location::caller();
    let out = Tensor::placeholder(Aval::new(dtype, shape.to_vec()));
    let Some(k) = check_key("gumbel", key, true, loc) else { return out };
    if !check_float("gumbel", dtype, loc) {
        return out;
    }
    gumbel_at(&k.key, shape, loc)
}

fn gumbel_at(key: &Tensor, shape: &[usize], loc: &'static Location<'static>) -> Tensor {
    let args = [CallArg { operand: key.into(), weak: false, python_float: None }];
    call(
        "_gumbel",
        &args,
        |inner| {
            // `_uniform(key, shape, dtype, minval=finfo.tiny, maxval=1.)` by keyword: JAX's
            // jit orders keyword arguments by name, so `maxval` (weak) comes first.
            let tiny = f64::from(f32::MIN_POSITIVE);
            let u = uniform_call(&inner[0], shape, [CallArg::weak(1.0), CallArg::strong(tiny)], false, loc);
            let l = unary_at(UnaryOp::Log, u.into(), loc);
            let l = unary_at(UnaryOp::Neg, l.into(), loc);
            let l = unary_at(UnaryOp::Log, l.into(), loc);
            unary_at(UnaryOp::Neg, l.into(), loc)
        },
        loc,
    )
}

/// `jax.random.categorical(key, logits, axis)`: indices (`i32`) drawn from the softmax of
/// `logits` along `axis`, by the Gumbel-max trick: `argmax(gumbel(key, logits.shape) +
/// logits, axis)`.
#[track_caller]
pub fn categorical(key: &Tensor, logits: &Tensor, axis: isize) -> Tensor {
    let loc = Location::caller();
    let Some(k) = check_key("categorical", key, true, loc) else { return Tensor::placeholder(logits.aval().clone()) };
    let Some(axes) = crate::numpy::normalize_axes("categorical", logits, &[axis], loc) else {
        return Tensor::placeholder(logits.aval().clone());
    };
    if !check_float("categorical", logits.dtype(), loc) {
        return Tensor::placeholder(logits.aval().clone());
    }
    let g = gumbel_at(&k.key, logits.shape(), loc);
    let x = binary_at(BinaryOp::Add, g.into(), logits.into(), loc);
    x.apply_at(Primitive::Argmax { axes, index_dtype: DType::I32 }, loc)
}

/// `jax.random.permutation(key, n)`: a random permutation of `0..n` (`i32`), recorded as
/// `iota` then `jit[name=_shuffle]` (sorting by random keys, in as many rounds as JAX).
#[track_caller]
pub fn permutation(key: &Tensor, n: usize) -> Tensor {
    let loc = Location::caller();
    let Some(k) = check_key("permutation", key, true, loc) else {
        return Tensor::placeholder(Aval::new(DType::I32, vec![n]));
    };
    let x = bind(Primitive::Iota { dtype: DType::I32, shape: vec![n], dimension: 0 }, &[], false, loc).remove(0);
    shuffle(&k.key, &x, loc)
}

/// `jax.random.permutation(key, x)` for an array `x`: `x` with its leading axis shuffled
/// (`jit[name=_shuffle]`; JAX's `independent=False`): a vector directly, a larger array
/// by shuffling its row indices and taking the rows, as JAX does.
#[track_caller]
pub fn permute(key: &Tensor, x: &Tensor) -> Tensor {
    let loc = Location::caller();
    let Some(k) = check_key("permutation", key, true, loc) else { return Tensor::placeholder(x.aval().clone()) };
    match x.ndim() {
        0 => {
            record_error(loc, format!("permutation: x must be an array of rank 1 or more, found {}", x.aval()));
            Tensor::placeholder(x.aval().clone())
        }
        1 => shuffle(&k.key, x, loc),
        // JAX shuffles the indices of the leading axis and takes the rows, promising
        // unique indices.
        _ => {
            let n = x.shape()[0];
            let iota = bind(Primitive::Iota { dtype: DType::I32, shape: vec![n], dimension: 0 }, &[], false, loc);
            let ind = shuffle(&k.key, &iota[0], loc);
            x.take_unique_at(&ind, Some(0), crate::numpy::TakeMode::Fill, true, loc)
        }
    }
}

/// JAX's `_shuffle(key, x, axis=0)`: `ceil(3 ln(n) / ln(2^32 - 1))` rounds, each splitting
/// the key and sorting `x` by fresh random words.
fn shuffle(key: &Tensor, x: &Tensor, loc: &'static Location<'static>) -> Tensor {
    let n = x.size().max(1) as f64;
    let rounds = (3.0 * n.ln() / f64::from(u32::MAX).ln()).ceil() as usize;
    let args = [
        CallArg { operand: key.into(), weak: false, python_float: None },
        CallArg { operand: x.into(), weak: x.is_weak(), python_float: None },
    ];
    call(
        "_shuffle",
        &args,
        |inner| {
            let (mut key, mut x) = (inner[0].clone(), inner[1].clone());
            for _ in 0..rounds {
                let keys = key.apply_at(Primitive::RandomSplit { shape: vec![2] }, loc);
                let pick = |i: usize| {
                    let s =
                        Primitive::Slice { start_indices: vec![i], limit_indices: vec![i + 1], strides: Some(vec![1]) };
                    keys.apply_at(s, loc).apply_at(Primitive::Squeeze { dimensions: vec![0] }, loc)
                };
                let (next, sub) = (pick(0), pick(1));
                let words = random_bits(&sub, x.shape(), loc);
                let sort = Primitive::Sort { dimension: 0, is_stable: true, num_keys: 1 };
                x = match bind_n(sort, &[words.into(), x.clone().into()], &[false, x.is_weak()], loc) {
                    Some(mut out) => out.remove(1),
                    None => Tensor::placeholder(x.aval().clone()),
                };
                key = next;
            }
            x
        },
        loc,
    )
}

/// `jax.random.truncated_normal(key, lower, upper, shape, dtype)`: normal samples within
/// `(lower, upper)`, by inverting the normal CDF on a uniform sample between the bounds'
/// CDFs; recorded as `jit[name=_truncated_normal]` (bounds passed as JAX passes Python
/// numbers: `-2:i32[]`).
#[track_caller]
pub fn truncated_normal(
    key: &Tensor,
    lower: impl Into<Arg>,
    upper: impl Into<Arg>,
    shape: &[usize],
    dtype: DType,
) -> Tensor {
    let loc = Location::caller();
    let out = Tensor::placeholder(Aval::new(dtype, shape.to_vec()));
    let Some(k) = check_key("truncated_normal", key, true, loc) else { return out };
    if !check_float("truncated_normal", dtype, loc) {
        return out;
    }
    let args = [CallArg::tensor(&k.key), CallArg::of(lower.into()), CallArg::of(upper.into())];
    call(
        "_truncated_normal",
        &args,
        |inner| {
            let lo = inner[1].to_type(DType::F32, false, loc);
            let hi = inner[2].to_type(DType::F32, false, loc);
            let sqrt2 = std::f64::consts::SQRT_2;
            let cdf = |b: &Tensor| {
                let scaled = binary_at(BinaryOp::Div, b.into(), sqrt2.into(), loc);
                unary_at(UnaryOp::Erf, scaled.into(), loc)
            };
            let (a, b) = (cdf(&lo), cdf(&hi));
            let u = uniform_call(&inner[0], shape, [CallArg::tensor(&a), CallArg::tensor(&b)], true, loc);
            let e = unary_at(UnaryOp::ErfInv, u.into(), loc);
            let out = binary_at(BinaryOp::Mul, sqrt2.into(), e.into(), loc);
            // Clamped to the open interval, as JAX does for rounding at the edges.
            let next = |b: &Tensor, towards: f64| {
                let b = unary_at(UnaryOp::StopGradient, b.into(), loc);
                binary_at(BinaryOp::Nextafter, b.into(), towards.into(), loc)
            };
            let (lo, hi) = (next(&lo, f64::INFINITY), next(&hi, f64::NEG_INFINITY));
            out.clip(&lo, &hi)
        },
        loc,
    )
}

/// `jax.random.randint(key, shape, minval, maxval)`: uniform `i32` integers in
/// `[minval, maxval)`, recorded as `jit[name=_randint]` (JAX's two-word construction:
/// `(hi_bits % span * (2^32 % span) + lo_bits % span) % span`, so that the draw is
/// almost unbiased for any span). The bounds are Rust integers or `i32` scalars.
#[track_caller]
pub fn randint(key: &Tensor, shape: &[usize], minval: impl Into<Arg>, maxval: impl Into<Arg>) -> Tensor {
    randint_at(key, shape, minval.into(), maxval.into(), Location::caller())
}

fn randint_at(key: &Tensor, shape: &[usize], minval: Arg, maxval: Arg, loc: &'static Location<'static>) -> Tensor {
    let out = Tensor::placeholder(Aval::new(DType::I32, shape.to_vec()));
    let Some(k) = check_key("randint", key, true, loc) else { return out };
    let bounds = [CallArg::of(minval), CallArg::of(maxval)];
    for b in &bounds {
        let (aval, _) = b.operand.typ();
        if !aval.shape.is_empty() || !aval.dtype.is_integer() {
            record_error(loc, format!("randint: minval and maxval must be integer scalars, found {aval}"));
            return out;
        }
    }
    let shape = shape.to_vec();
    let args = [CallArg::tensor(&k.key), bounds[0].clone(), bounds[1].clone()];
    call(
        "_randint",
        &args,
        |inner| {
            let (key, lo, hi) = (&inner[0], &inner[1], &inner[2]);
            let (imin, imax) = (f64::from(i32::MIN), f64::from(i32::MAX));
            // JAX's `_convert_and_clip_integer`: clips to int32's range, through `jnp.clip`.
            // Its first call (on int32's maximum) is traced apart from the two on the bounds
            // (a separate entry of JAX's trace cache), so it prints inline and they share.
            let max_in_range = call_clip([strong_i32(imax), weak_i32(imin), weak_i32(imax)], loc);
            // `lax.gt`: no promotion, so no conversion of a weakly typed bound.
            let hi_out_of_range =
                bind(Primitive::Compare(CompareOp::Gt), &[hi.into(), max_in_range.into()], false, loc).remove(0);
            let clip_bound = |b: &Tensor| {
                let c = call_clip([CallArg::tensor(b), weak_i32(imin), weak_i32(imax)], loc);
                c.to_type(DType::I32, false, loc)
            };
            let (lo, hi) = (clip_bound(lo), clip_bound(hi));
            let rank = shape.len();
            let to_rank = |b: Tensor| {
                if rank == 0 {
                    b
                } else {
                    b.apply_at(Primitive::BroadcastInDim { shape: vec![1; rank], broadcast_dimensions: vec![] }, loc)
                }
            };
            let (lo, hi) = (to_rank(lo), to_rank(hi));
            let keys = key.apply_at(Primitive::RandomSplit { shape: vec![2] }, loc);
            let pick = |i: usize| {
                let s = Primitive::Slice { start_indices: vec![i], limit_indices: vec![i + 1], strides: Some(vec![1]) };
                keys.apply_at(s, loc).apply_at(Primitive::Squeeze { dimensions: vec![0] }, loc)
            };
            let (k1, k2) = (pick(0), pick(1));
            let higher = random_bits(&k1, &shape, loc);
            let lower = random_bits(&k2, &shape, loc);
            let u32_lit = |v: u32| Operand::Literal(LitValue::U32(v));
            let bin = |op: BinaryOp, a: Operand, b: Operand| bind(Primitive::Binary(op), &[a, b], false, loc).remove(0);
            let span =
                binary_at(BinaryOp::Sub, hi.clone().into(), lo.clone().into(), loc).to_type(DType::U32, false, loc);
            // An empty range gives span 1 (JAX returns minval then).
            let empty = compare_at(CompareOp::Le, hi.clone().into(), lo.clone().into(), loc);
            let one = crate::numpy::full_at(span.shape(), LitValue::U32(1), loc);
            let span = bind(Primitive::SelectN, &[empty.into(), span.into(), one.into()], false, loc).remove(0);
            // A maxval above int32's range widens the span by one, to include the maximum.
            let nonempty = compare_at(CompareOp::Gt, hi.into(), lo.clone().into(), loc);
            let widen = bin(BinaryOp::And, hi_out_of_range.into(), nonempty.into());
            let wider = bin(BinaryOp::Add, span.clone().into(), u32_lit(1));
            let span = bind(Primitive::SelectN, &[widen.into(), span.into(), wider.into()], false, loc).remove(0);
            let multiplier = bin(BinaryOp::Rem, u32_lit(65536), span.clone().into());
            let multiplier = bin(BinaryOp::Mul, multiplier.clone().into(), multiplier.into());
            let multiplier = bin(BinaryOp::Rem, multiplier.into(), span.clone().into());
            let hi_part = bin(BinaryOp::Rem, higher.into(), span.clone().into());
            let hi_part = bin(BinaryOp::Mul, hi_part.into(), multiplier.into());
            let lo_part = bin(BinaryOp::Rem, lower.into(), span.clone().into());
            let offset = bin(BinaryOp::Add, hi_part.into(), lo_part.into());
            let offset = bin(BinaryOp::Rem, offset.into(), span.into());
            let offset = offset.to_type(DType::I32, false, loc);
            binary_at(BinaryOp::Add, lo.into(), offset.into(), loc)
        },
        loc,
    )
}

fn weak_i32(v: f64) -> CallArg {
    CallArg { operand: Operand::Literal(LitValue::I32(v as i32)), weak: true, python_float: None }
}

fn strong_i32(v: f64) -> CallArg {
    CallArg { operand: Operand::Literal(LitValue::I32(v as i32)), weak: false, python_float: None }
}

/// `jnp.clip(x, lo, hi)` on `i32` scalars, as `jit[name=clip]` of `lax.max` and `lax.min`
/// (no promotion between weakly and strongly typed operands; a result is weak if both
/// operands are, JAX's standard weak-type rule).
fn call_clip(args: [CallArg; 3], loc: &'static Location<'static>) -> Tensor {
    call(
        "clip",
        &args,
        |inner| {
            let lax_op = |op: BinaryOp, a: &Tensor, b: &Tensor| {
                bind(Primitive::Binary(op), &[a.into(), b.into()], a.is_weak() && b.is_weak(), loc).remove(0)
            };
            let x = lax_op(BinaryOp::Max, &inner[1], &inner[0]);
            lax_op(BinaryOp::Min, &inner[2], &x)
        },
        loc,
    )
}
