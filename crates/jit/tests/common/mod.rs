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
        let got = compiled.run(args).map_err(|e| format!("{what}: run: {e}"))?;
        compare(&format!("{what}: jit vs interpreter"), &got, &want)?;
        // The program writes every element of every output: run into arrays full of
        // garbage, it returns exactly what `run` returned into zeroed ones.
        let mut outs: Vec<Array> = got.iter().map(garbage_like).collect();
        compiled.run_into(args, &mut outs).map_err(|e| format!("{what}: run_into: {e}"))?;
        for (i, (a, b)) in outs.iter().zip(&got).enumerate() {
            if !same_bits(a, b) {
                return Err(format!("{what}: output {i} of run_into over garbage differs from run's"));
            }
        }
    }
    Ok(())
}

/// An array of `a`'s dtype and shape full of values no program computes by accident.
fn garbage_like(a: &Array) -> Array {
    match a {
        Array::F32(x) => Array::F32(x.mapv(|_| f32::from_bits(0x7fc0_1234))),
        Array::F64(x) => Array::F64(x.mapv(|_| -1.234_567e300)),
        Array::I32(x) => Array::I32(x.mapv(|_| 0x5a5a_5a5a)),
        Array::BF16(x) => Array::BF16(x.mapv(|_| remat_ir::bf16::from_bits(0x7fc1))),
        Array::F16(x) => Array::F16(x.mapv(|_| remat_ir::f16::from_bits(0x7e01))),
        Array::I8(x) => Array::I8(x.mapv(|_| 0x5a)),
        Array::I16(x) => Array::I16(x.mapv(|_| 0x5a5a)),
        Array::I64(x) => Array::I64(x.mapv(|_| 0x5a5a_5a5a_5a5a_5a5a)),
        Array::U8(x) => Array::U8(x.mapv(|_| 0xa5)),
        Array::U32(x) => Array::U32(x.mapv(|_| 0xa5a5_a5a5)),
        Array::Bool(x) => Array::Bool(x.mapv(|v| !v)),
        Array::Key(x) => Array::Key(x.mapv(|_| remat_ir::PrngKey([0x5a5a_5a5a, 0xa5a5_a5a5]))),
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
