//! Shared helpers of the differential tests: compile with the JIT, evaluate with the
//! interpreter, compare within float32 tolerance (`remat_testkit::check_close`).

#![allow(dead_code)]

use remat_ir::{Array, Jaxpr, Primitive};
use remat_testkit::check_close;

/// Runs `jaxpr` on `args` with both backends and compares.
pub fn differential(what: &str, jaxpr: &Jaxpr, args: &[Array], rel: f64, abs: f64) -> Result<(), String> {
    differential_with(what, jaxpr, args, rel, abs, &[remat_jit::Options::default()])
}

/// Runs `jaxpr` on `args` with the interpreter and with the JIT under each of `options`,
/// and compares.
pub fn differential_with(
    what: &str,
    jaxpr: &Jaxpr,
    args: &[Array],
    rel: f64,
    abs: f64,
    options: &[remat_jit::Options],
) -> Result<(), String> {
    differential_by(what, jaxpr, args, options, &move |what, got, want| check_close(what, got, want, rel, abs))
}

/// A comparison of the JIT's outputs with the interpreter's: `compare(what, got, want)`.
pub type Compare<'a> = dyn Fn(&str, &[Array], &[Array]) -> Result<(), String> + 'a;

/// [`differential_with`] with the comparison `compare(what, got, want)`.
pub fn differential_by(
    what: &str,
    jaxpr: &Jaxpr,
    args: &[Array],
    options: &[remat_jit::Options],
    compare: &Compare<'_>,
) -> Result<(), String> {
    let want = remat_interp::eval_jaxpr(jaxpr, &[], args).map_err(|e| format!("{what}: interpreter: {e}"))?;
    for o in options {
        let what = format!("{what} ({o:?})");
        let compiled = remat_jit::compile_with_options(jaxpr, &[], o).map_err(|e| format!("{what}: compile: {e}"))?;
        // First into arrays full of garbage, each followed by more of it in its allocation:
        // the program writes nothing past an output (checked before any unguarded run, which
        // such a write would corrupt the heap from) ...
        let mut guarded: Vec<Array> = jaxpr.out_avals().iter().map(garbage).collect();
        compiled.run_into(args, &mut guarded).map_err(|e| format!("{what}: run_into: {e}"))?;
        let mut outs = Vec::with_capacity(guarded.len());
        for (i, out) in guarded.into_iter().enumerate() {
            outs.push(
                guard_intact(out).ok_or_else(|| format!("{what}: the program wrote past the end of output {i}"))?,
            );
        }
        // ... then into fresh ones (not zeroed below 2 MiB): the program writes every element
        // of every output, so both runs return the same bits.
        let got = compiled.run(args).map_err(|e| format!("{what}: run: {e}"))?;
        compare(&format!("{what}: jit vs interpreter"), &got, &want)?;
        for (i, (a, b)) in outs.iter().zip(&got).enumerate() {
            if !same_bits(a, b) {
                return Err(format!("{what}: output {i} of run_into over garbage differs from run's"));
            }
        }
    }
    Ok(())
}

/// How many elements after each output [`differential_by`] checks the program leaves alone.
pub const GUARD: usize = 64;

/// An owned array of `shape` at the start of an allocation of [`GUARD`] more elements, all
/// `fill`.
fn padded<T: Clone>(shape: &[usize], fill: T) -> ndarray::ArrayD<T> {
    let n: usize = shape.iter().product();
    ndarray::Array1::from_vec(vec![fill; n + GUARD])
        .slice_move(ndarray::s![..n])
        .into_shape_with_order(ndarray::IxDyn(shape))
        .expect("a contiguous slice takes any shape of its length")
}

/// `a` (made by [`padded`]) again if the elements after its data still have `fill`'s bits.
fn tail_intact<T, B: PartialEq>(a: ndarray::ArrayD<T>, fill: T, bits: impl Fn(&T) -> B) -> Option<ndarray::ArrayD<T>> {
    let (n, shape) = (a.len(), a.shape().to_vec());
    let (data, offset) = a.into_raw_vec_and_offset();
    let start = offset.unwrap_or(0);
    if !data[start + n..].iter().all(|x| bits(x) == bits(&fill)) {
        return None;
    }
    let a = ndarray::Array1::from_vec(data).slice_move(ndarray::s![start..start + n]);
    Some(a.into_shape_with_order(ndarray::IxDyn(&shape)).expect("the same length"))
}

const GARBAGE_F32: u32 = 0x7fc0_1234;
const GARBAGE_F64: f64 = -1.234_567e300;
const GARBAGE_BF16: u16 = 0x7fc1;
const GARBAGE_F16: u16 = 0x7e01;
const GARBAGE_KEY: remat_ir::PrngKey = remat_ir::PrngKey([0x5a5a_5a5a, 0xa5a5_a5a5]);
const GARBAGE_C64: remat_ir::c64 = remat_ir::c64::new(-1.5e-31, 3.25e29);
const GARBAGE_C128: remat_ir::c128 = remat_ir::c128::new(-1.5e-301, 3.25e299);

/// An array of `aval`'s dtype and shape full of values no program computes by accident, at
/// the start of an allocation of [`GUARD`] more of them ([`guard_intact`] checks those).
pub fn garbage(aval: &remat_ir::Aval) -> Array {
    let sh = &aval.shape;
    match aval.dtype {
        remat_ir::DType::F32 => Array::F32(padded(sh, f32::from_bits(GARBAGE_F32))),
        remat_ir::DType::F64 => Array::F64(padded(sh, GARBAGE_F64)),
        remat_ir::DType::I32 => Array::I32(padded(sh, 0x5a5a_5a5a)),
        remat_ir::DType::BF16 => Array::BF16(padded(sh, remat_ir::bf16::from_bits(GARBAGE_BF16))),
        remat_ir::DType::F16 => Array::F16(padded(sh, remat_ir::f16::from_bits(GARBAGE_F16))),
        remat_ir::DType::I8 => Array::I8(padded(sh, 0x5a)),
        remat_ir::DType::I16 => Array::I16(padded(sh, 0x5a5a)),
        remat_ir::DType::I64 => Array::I64(padded(sh, 0x5a5a_5a5a_5a5a_5a5a)),
        remat_ir::DType::U8 => Array::U8(padded(sh, 0xa5)),
        remat_ir::DType::U32 => Array::U32(padded(sh, 0xa5a5_a5a5)),
        remat_ir::DType::Bool => Array::Bool(padded(sh, true)),
        remat_ir::DType::Key => Array::Key(padded(sh, GARBAGE_KEY)),
        remat_ir::DType::C64 => Array::C64(padded(sh, GARBAGE_C64)),
        remat_ir::DType::C128 => Array::C128(padded(sh, GARBAGE_C128)),
    }
}

/// `a`, an array made by [`garbage`], again if nothing was written after its data.
pub fn guard_intact(a: Array) -> Option<Array> {
    match a {
        Array::F32(x) => tail_intact(x, f32::from_bits(GARBAGE_F32), |v| v.to_bits()).map(Array::F32),
        Array::F64(x) => tail_intact(x, GARBAGE_F64, |v| v.to_bits()).map(Array::F64),
        Array::I32(x) => tail_intact(x, 0x5a5a_5a5a, |&v| v).map(Array::I32),
        Array::BF16(x) => tail_intact(x, remat_ir::bf16::from_bits(GARBAGE_BF16), |v| v.to_bits()).map(Array::BF16),
        Array::F16(x) => tail_intact(x, remat_ir::f16::from_bits(GARBAGE_F16), |v| v.to_bits()).map(Array::F16),
        Array::I8(x) => tail_intact(x, 0x5a, |&v| v).map(Array::I8),
        Array::I16(x) => tail_intact(x, 0x5a5a, |&v| v).map(Array::I16),
        Array::I64(x) => tail_intact(x, 0x5a5a_5a5a_5a5a_5a5a, |&v| v).map(Array::I64),
        Array::U8(x) => tail_intact(x, 0xa5, |&v| v).map(Array::U8),
        Array::U32(x) => tail_intact(x, 0xa5a5_a5a5, |&v| v).map(Array::U32),
        Array::Bool(x) => tail_intact(x, true, |&v| v).map(Array::Bool),
        Array::Key(x) => tail_intact(x, GARBAGE_KEY, |v| v.0).map(Array::Key),
        Array::C64(x) => tail_intact(x, GARBAGE_C64, |v| (v.re.to_bits(), v.im.to_bits())).map(Array::C64),
        Array::C128(x) => tail_intact(x, GARBAGE_C128, |v| (v.re.to_bits(), v.im.to_bits())).map(Array::C128),
    }
}

/// Equal dtype, shape and bits (NaNs included).
pub fn same_bits(a: &Array, b: &Array) -> bool {
    match (a, b) {
        (Array::F32(x), Array::F32(y)) => {
            x.shape() == y.shape() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        (Array::F64(x), Array::F64(y)) => {
            x.shape() == y.shape() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        (Array::BF16(x), Array::BF16(y)) => {
            x.shape() == y.shape() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        (Array::F16(x), Array::F16(y)) => {
            x.shape() == y.shape() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        (Array::C64(_), Array::C64(_)) | (Array::C128(_), Array::C128(_)) => {
            a.shape() == b.shape() && value_bits(a) == value_bits(b)
        }
        _ => a == b,
    }
}

/// The bits of every element (a key's two words as one), every NaN of a dtype as one value:
/// the comparison of values that must agree bit for bit (NaN payloads may differ between
/// instruction sequences).
pub fn value_bits(a: &Array) -> Vec<u64> {
    let nan = u64::MAX;
    match a {
        Array::F32(x) => x.iter().map(|v| if v.is_nan() { nan } else { v.to_bits() as u64 }).collect(),
        Array::F64(x) => x.iter().map(|v| if v.is_nan() { nan } else { v.to_bits() }).collect(),
        Array::BF16(x) => x.iter().map(|v| if v.is_nan() { nan } else { v.to_bits() as u64 }).collect(),
        Array::F16(x) => x.iter().map(|v| if v.is_nan() { nan } else { v.to_bits() as u64 }).collect(),
        Array::I8(x) => x.iter().map(|&v| v as u64).collect(),
        Array::I16(x) => x.iter().map(|&v| v as u64).collect(),
        Array::I32(x) => x.iter().map(|&v| v as u64).collect(),
        Array::I64(x) => x.iter().map(|&v| v as u64).collect(),
        Array::U8(x) => x.iter().map(|&v| v as u64).collect(),
        Array::U32(x) => x.iter().map(|&v| v as u64).collect(),
        Array::Bool(x) => x.iter().map(|&v| v as u64).collect(),
        Array::Key(x) => x.iter().map(|k| ((k.0[1] as u64) << 32) | k.0[0] as u64).collect(),
        // Each part's bits, real then imaginary (twice the elements).
        Array::C64(x) => {
            x.iter().flat_map(|z| [z.re, z.im].map(|v| if v.is_nan() { nan } else { v.to_bits() as u64 })).collect()
        }
        Array::C128(x) => {
            x.iter().flat_map(|z| [z.re, z.im].map(|v| if v.is_nan() { nan } else { v.to_bits() })).collect()
        }
    }
}

/// The first element where `got` and `want` differ in type or [`value_bits`], as an error.
pub fn check_bits(what: &str, got: &[Array], want: &[Array]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{what}: {} values, expected {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.aval() != w.aval() {
            return Err(format!("{what} {i}: got {}, expected {}", g.aval(), w.aval()));
        }
        let (gb, wb) = (value_bits(g), value_bits(w));
        if let Some(j) = (0..gb.len()).find(|&j| gb[j] != wb[j]) {
            let (gv, wv) = (g.to_f64_vec()[j], w.to_f64_vec()[j]);
            return Err(format!("{what} {i}, element {j}: got {gv} ({:#x}), expected {wv} ({:#x})", gb[j], wb[j]));
        }
    }
    Ok(())
}

/// The equations of `jaxpr` and of every body it calls whose primitive satisfies `pred`.
pub fn count_eqns(jaxpr: &Jaxpr, pred: &dyn Fn(&Primitive) -> bool) -> usize {
    jaxpr
        .eqns
        .iter()
        .map(|e| {
            usize::from(pred(&e.primitive))
                + e.primitive.subjaxprs().into_iter().map(|b| count_eqns(b, pred)).sum::<usize>()
        })
        .sum()
}
