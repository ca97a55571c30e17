//! PRNG primitives on threefry keys (`key<fry>`): `random_seed`, `random_wrap`,
//! `random_unwrap`, `random_split`, `random_fold_in`, `random_bits` and `random_clone`; and
//! threefry's parts on `u32` words: `threefry2x32` and `iota_2x32_shape`.
//!
//! For each primitive, in this order: its parameters' text form (`*_params`, `parse_*`) and
//! its shape rule (`*_shape`, JAX 0.10.2's abstract evaluation rules in
//! `jax/_src/random/prng.py`). A key array `key<fry>[K]` is physically `u32[K,2]`; every
//! primitive applies per key (JAX's `iterated_vmap_unary`), so key dimensions lead the
//! result's. The only implementation is threefry (`impl=fry`, JAX's default); what the
//! primitives compute is the interpreter's `random.rs`.

use super::params::{dtype_param, ParamReader, Params};
use super::Primitive;
use crate::param::Param;
use crate::param_types::RngAlgorithm;
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

// `random_clone x`: the same value, of any type (JAX's `random.clone` binds it on a typed
// key array, and on a legacy `u32[2]` key's words as they are).

pub(crate) fn random_clone_shape(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let [x] = arity("random_clone", in_avals)?;
    Ok(device(x.dtype, x.shape.clone()))
}

// `threefry2x32 k1 k2 x1 x2`: `u32` operands broadcasting as `add`'s do (rank-0 operands
// broadcast to the others' shape); two `u32` results of the broadcast shape.

pub(crate) fn threefry2x32_shape(in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "threefry2x32";
    let [k1, k2, x1, x2] = arity(name, in_avals)?;
    for a in [k1, k2, x1, x2] {
        ensure!(a.dtype == DType::U32, name, "operands must be u32, found {a}");
    }
    let shape = broadcast_shapes(name, k1, k2)?;
    let shape = broadcast_shapes(name, &Aval::new(DType::U32, shape), x1)?;
    let shape = broadcast_shapes(name, &Aval::new(DType::U32, shape), x2)?;
    let out = device(DType::U32, shape);
    Ok([out.clone(), out].concat())
}

// `iota_2x32_shape[shape=(3, 4)]`: no operands; two `u32[3,4]` results.

pub(crate) fn iota_2x32_shape_shape(shape: &[usize], in_avals: &[Aval]) -> Result<Vec<Aval>, ShapeError> {
    let name = "iota_2x32_shape";
    let [] = arity(name, in_avals)?;
    ensure!(!shape.is_empty(), name, "shape must have at least one dimension (JAX makes zeros for shape=())");
    let out = device(DType::U32, shape.to_vec());
    Ok([out.clone(), out].concat())
}

// `rng_bit_generator[algorithm=RNG_DEFAULT dtype=uint32 out_sharding=None shape=(2, 3)] key`:
// sorted; `out_sharding=None` always printed.

pub(super) fn rng_bit_generator_params(algorithm: RngAlgorithm, dtype: DType, shape: &[usize]) -> Params {
    vec![
        ("algorithm", Param::Word(algorithm.name().to_string())),
        ("dtype", dtype_param(dtype)),
        ("out_sharding", Param::None),
        ("shape", Param::ints(shape.iter().copied())),
    ]
}

pub(super) fn parse_rng_bit_generator(p: &mut ParamReader) -> Result<Primitive, String> {
    let word = p.word("algorithm")?;
    let algorithm = RngAlgorithm::from_name(&word).ok_or_else(|| {
        format!("rng_bit_generator: unknown algorithm `{word}` (RNG_DEFAULT, RNG_THREE_FRY, RNG_PHILOX)")
    })?;
    p.optional_none("out_sharding")?;
    Ok(Primitive::RngBitGenerator { algorithm, dtype: p.dtype("dtype")?, shape: p.usizes("shape")? })
}

/// JAX's `_rng_bit_generator_shape_rule`/`dtype_rule`: a `u32[4]` key (as JAX passes it) and
/// unsigned bits; the new key has the key's type. JAX also makes `uint16` and `uint64` bits,
/// dtypes remat does not have.
pub(crate) fn rng_bit_generator_shape(
    dtype: DType,
    shape: &[usize],
    in_avals: &[Aval],
) -> Result<Vec<Aval>, ShapeError> {
    let name = "rng_bit_generator";
    let [key] = arity(name, in_avals)?;
    ensure!(key.dtype == DType::U32 && key.shape == [4], name, "the key must be u32[4], found {key}");
    ensure!(
        matches!(dtype, DType::U8 | DType::U32),
        name,
        "unsupported dtype {} (remat makes uint8 and uint32 bits)",
        dtype.numpy_name()
    );
    Ok([device(DType::U32, vec![4]), device(dtype, shape.to_vec())].concat())
}

fn key_operand(name: &str, keys: &Aval) -> Result<(), ShapeError> {
    ensure!(keys.dtype == DType::Key, name, "the operand must be a key array (key<fry>), found {keys}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::parse::parse_jaxpr;
    use crate::primitive::shape_rule;
    use crate::print::pp_jaxpr;
    use crate::types::{Aval, DType};
    use crate::verify::verify;
    use crate::Primitive;

    /// JAX 0.10.2's `make_jaxpr` of `jax.random.PRNGKey(s)`, `split(k, (2, 3))`,
    /// `fold_in(k, d)`, `bits(k, (5,), uint8)` and a batch of keys, verbatim.
    const JAX_TEXTS: [&str; 5] = [
        "{ lambda ; a:i32[]. let
    b:key<fry>[] = random_seed[impl=fry] a
    c:u32[2] = random_unwrap b
  in (c,) }",
        "{ lambda ; a:u32[2]. let
    b:key<fry>[] = random_wrap[impl=fry] a
    c:key<fry>[2,3] = random_split[shape=(2, 3)] b
    d:u32[2,3,2] = random_unwrap c
  in (d,) }",
        "{ lambda ; a:u32[2] b:i32[]. let
    c:key<fry>[] = random_wrap[impl=fry] a
    d:u32[] = convert_element_type[new_dtype=uint32 weak_type=False] b
    e:key<fry>[] = random_fold_in c d
    f:u32[2] = random_unwrap e
  in (f,) }",
        "{ lambda ; a:u32[2]. let
    b:key<fry>[] = random_wrap[impl=fry] a
    c:u8[5] = random_bits[bit_width=8 shape=(5,)] b
  in (c,) }",
        "{ lambda ; a:key<fry>[2]. let
    b:u32[2,3] = random_bits[bit_width=32 shape=(3,)] a
  in (b,) }",
    ];

    #[test]
    fn jax_texts_round_trip() {
        for text in JAX_TEXTS {
            let j = parse_jaxpr(text, "random.jaxpr").unwrap_or_else(|e| panic!("{e}\n{text}"));
            verify(&j).unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(pp_jaxpr(&j), text);
        }
    }

    fn aval(dtype: DType, shape: &[usize]) -> Aval {
        Aval::new(dtype, shape.to_vec())
    }

    #[track_caller]
    fn error(prim: Primitive, ins: &[Aval]) -> String {
        shape_rule(&prim, ins).expect_err("a shape error").message
    }

    #[test]
    fn shape_rules() {
        let key = |shape: &[usize]| aval(DType::Key, shape);
        let ok = |prim: Primitive, ins: &[Aval]| shape_rule(&prim, ins).unwrap();
        assert_eq!(ok(Primitive::RandomSeed, &[aval(DType::I8, &[3])]), [key(&[3])]);
        assert_eq!(ok(Primitive::RandomWrap, &[aval(DType::U32, &[4, 2])]), [key(&[4])]);
        assert_eq!(ok(Primitive::RandomUnwrap, &[key(&[4])]), [aval(DType::U32, &[4, 2])]);
        assert_eq!(ok(Primitive::RandomSplit { shape: vec![2, 3] }, &[key(&[4])]), [key(&[4, 2, 3])]);
        assert_eq!(ok(Primitive::RandomFoldIn, &[key(&[]), aval(DType::U32, &[3])]), [key(&[3])]);
        assert_eq!(ok(Primitive::RandomFoldIn, &[key(&[2, 1]), aval(DType::I32, &[2, 3])]), [key(&[2, 3])]);
        let bits = |w| Primitive::RandomBits { bit_width: w, shape: vec![5] };
        assert_eq!(ok(bits(8), &[key(&[2])]), [aval(DType::U8, &[2, 5])]);
        assert_eq!(ok(bits(32), &[key(&[])]), [aval(DType::U32, &[5])]);

        assert_eq!(
            error(Primitive::RandomSeed, &[aval(DType::F32, &[])]),
            "random_seed: seeds must be integers, found f32[]"
        );
        assert_eq!(
            error(Primitive::RandomWrap, &[aval(DType::I32, &[2])]),
            "random_wrap: key data must be u32, found i32[2]"
        );
        assert!(error(Primitive::RandomWrap, &[aval(DType::U32, &[2, 3])]).contains("last dimension of size 2"));
        assert!(error(Primitive::RandomWrap, &[aval(DType::U32, &[])]).contains("last dimension of size 2"));
        assert_eq!(
            error(Primitive::RandomUnwrap, &[aval(DType::U32, &[2])]),
            "random_unwrap: the operand must be a key array (key<fry>), found u32[2]"
        );
        assert!(error(Primitive::RandomSplit { shape: vec![2] }, &[aval(DType::U32, &[2])]).contains("key array"));
        assert_eq!(
            error(Primitive::RandomFoldIn, &[key(&[]), aval(DType::F32, &[])]),
            "random_fold_in: the message must be an integer, found f32[]"
        );
        assert_eq!(
            error(Primitive::RandomFoldIn, &[key(&[2]), aval(DType::U32, &[3])]),
            "random_fold_in: operand shapes key<fry>[2] and u32[3] differ"
        );
        assert_eq!(
            error(bits(16), &[key(&[])]),
            "random_bits: bit_width=16 gives u16 bits, a dtype remat does not have (bit_width=8 and 32 do)"
        );
        assert!(error(bits(64), &[key(&[])]).contains("u64"));
        assert!(error(bits(32), &[key(&[]), key(&[])]).contains("expected 1 operand, found 2"));
    }

    /// Parameters JAX would never print are located parse errors, not panics.
    #[test]
    fn bad_parameters_are_errors() {
        for (text, want) in [
            (
                "{ lambda ; a:u32[2]. let b:key<fry>[] = random_wrap[impl=rbg] a in (b,) }",
                "random_wrap: unsupported PRNG implementation `impl=rbg` (only threefry, `impl=fry`)",
            ),
            (
                "{ lambda ; a:u32[2]. let b:key<fry>[] = random_wrap a in (b,) }",
                "random_wrap is missing parameter `impl`",
            ),
            (
                "{ lambda ; a:key<fry>[]. let b:u32[3] = random_bits[bit_width=12 shape=(3,)] a in (b,) }",
                "random_bits: bit_width must be 8, 16, 32 or 64, found 12",
            ),
            (
                "{ lambda ; a:key<fry>[]. let b:u32[3] = random_bits[bit_width=32 shape=(3,) x=1] a in (b,) }",
                "random_bits has no parameter `x`",
            ),
            (
                "{ lambda ; a:key<fry>[]. let b:key<fry>[2] = random_split[shape=(-2,)] a in (b,) }",
                "random_split: parameter `shape` must be a tuple of non-negative integers",
            ),
            (
                "{ lambda ; a:key<fry>[]. let b:u32[2] = random_unwrap[impl=fry] a in (b,) }",
                "random_unwrap has no parameter `impl`",
            ),
        ] {
            let err = parse_jaxpr(text, "bad.jaxpr").expect_err(text).to_string();
            assert!(err.contains(want) && err.contains("line 1"), "{err}\n  want {want}");
        }
    }
}
