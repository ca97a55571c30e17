//! PRNG primitives on threefry keys (`key<fry>`): `random_seed`, `random_wrap`,
//! `random_unwrap`, `random_split`, `random_fold_in` and `random_bits`.
//!
//! For each primitive, in this order: its parameters' text form (`*_params`, `parse_*`) and
//! its shape rule (`*_shape`, JAX 0.10.2's abstract evaluation rules in
//! `jax/_src/random/prng.py`). A key array `key<fry>[K]` is physically `u32[K,2]`; every
//! primitive applies per key (JAX's `iterated_vmap_unary`), so key dimensions lead the
//! result's. The only implementation is threefry (`impl=fry`, JAX's default); what the
//! primitives compute is the interpreter's `random.rs`.

use super::params::{ParamReader, Params};
use super::Primitive;
use crate::param::Param;
use crate::shape::{arity, broadcast_shapes, device, ensure, ShapeError};
use crate::types::{Aval, DType};

/// The tag of the one PRNG implementation: threefry2x32.
const IMPL: &str = "fry";

/// `impl=fry`, the parameter of `random_seed` and `random_wrap`.
pub(super) fn impl_params() -> Params {
    vec![("impl", Param::Word(IMPL.to_string()))]
}

fn parse_impl(p: &mut ParamReader) -> Result<(), String> {
    let name = p.prim().to_string();
    match p.word("impl")?.as_str() {
        IMPL => Ok(()),
        other => Err(format!("{name}: unsupported PRNG implementation `impl={other}` (only threefry, `impl=fry`)")),
    }
}

// `random_seed[impl=fry] seeds`: integer seeds of any shape to keys of that shape.

pub(super) fn parse_random_seed(p: &mut ParamReader) -> Result<Primitive, String> {
    parse_impl(p)?;
    Ok(Primitive::RandomSeed)
}

pub(crate) fn random_seed_shape(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "random_seed";
    let [seeds] = arity(name, in_avals)?;
    ensure!(seeds.dtype.is_integer(), name, "seeds must be integers, found {seeds}");
    Ok(device(DType::Key, seeds.shape.clone()))
}

// `random_wrap[impl=fry] data`: `u32[K,2]` to `key<fry>[K]`.

pub(super) fn parse_random_wrap(p: &mut ParamReader) -> Result<Primitive, String> {
    parse_impl(p)?;
    Ok(Primitive::RandomWrap)
}

pub(crate) fn random_wrap_shape(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "random_wrap";
    let [data] = arity(name, in_avals)?;
    ensure!(data.dtype == DType::U32, name, "key data must be u32, found {data}");
    let Some((&2, keys)) = data.shape.split_last() else {
        crate::shape::bail!(
            name,
            "key data must have a last dimension of size 2 (a threefry key's two words), found {data}"
        )
    };
    Ok(device(DType::Key, keys.to_vec()))
}

// `random_unwrap keys`: `key<fry>[K]` to `u32[K,2]`.

pub(crate) fn random_unwrap_shape(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "random_unwrap";
    let [keys] = arity(name, in_avals)?;
    key_operand(name, keys)?;
    let mut shape = keys.shape.clone();
    shape.push(2);
    Ok(device(DType::U32, shape))
}

// `random_split[shape=(2,)] keys`: `key<fry>[K]` to `key<fry>[K,*shape]`.

pub(super) fn shape_params(shape: &[usize]) -> Params {
    vec![("shape", Param::ints(shape.iter().copied()))]
}

pub(super) fn parse_random_split(p: &mut ParamReader) -> Result<Primitive, String> {
    Ok(Primitive::RandomSplit { shape: p.usizes("shape")? })
}

pub(crate) fn random_split_shape(shape: &[usize], in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "random_split";
    let [keys] = arity(name, in_avals)?;
    key_operand(name, keys)?;
    Ok(device(DType::Key, [&keys.shape[..], shape].concat()))
}

// `random_fold_in keys msgs`: no parameters; shapes broadcast as `add`'s do.

pub(crate) fn random_fold_in_shape(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "random_fold_in";
    let [keys, msgs] = arity(name, in_avals)?;
    key_operand(name, keys)?;
    // JAX's `threefry_fold_in` takes any integer message as a `uint32`.
    ensure!(msgs.dtype.is_integer(), name, "the message must be an integer, found {msgs}");
    Ok(device(DType::Key, broadcast_shapes(name, keys, msgs)?))
}

// `random_bits[bit_width=32 shape=(4, 16)] keys`: `key<fry>[K]` to `uW[K,*shape]`.

pub(super) fn random_bits_params(bit_width: u32, shape: &[usize]) -> Params {
    vec![("bit_width", Param::Int(bit_width.into())), ("shape", Param::ints(shape.iter().copied()))]
}

pub(super) fn parse_random_bits(p: &mut ParamReader) -> Result<Primitive, String> {
    let bit_width = p.int("bit_width")?;
    let bit_width = match bit_width {
        8 | 16 | 32 | 64 => bit_width as u32,
        _ => return Err(format!("random_bits: bit_width must be 8, 16, 32 or 64, found {bit_width}")),
    };
    Ok(Primitive::RandomBits { bit_width, shape: p.usizes("shape")? })
}

/// The unsigned dtype of `bit_width`-bit random bits, where remat has it.
pub fn random_bits_dtype(bit_width: u32) -> Result<DType, ShapeError> {
    match bit_width {
        8 => Ok(DType::U8),
        32 => Ok(DType::U32),
        16 | 64 => Err(ShapeError::new(
            "random_bits",
            format!(
                "bit_width={bit_width} gives u{bit_width} bits, a dtype remat does not have (bit_width=8 and 32 do)"
            ),
        )),
        _ => Err(ShapeError::new("random_bits", format!("bit_width must be 8, 16, 32 or 64, found {bit_width}"))),
    }
}

pub(crate) fn random_bits_shape(bit_width: u32, shape: &[usize], in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "random_bits";
    let [keys] = arity(name, in_avals)?;
    key_operand(name, keys)?;
    Ok(device(random_bits_dtype(bit_width)?, [&keys.shape[..], shape].concat()))
}

fn key_operand(name: &str, keys: &Aval) -> Result<(), ShapeError> {
    ensure!(keys.dtype == DType::Key, name, "the operand must be a key array (key<fry>), found {keys}");
    Ok(())
}
