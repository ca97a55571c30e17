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
    let want = remat_interp::eval_jaxpr(jaxpr, &[], args).map_err(|e| format!("{what}: interpreter: {e}"))?;
    for o in options {
        let what = format!("{what} ({o:?})");
        let compiled = remat_jit::compile_with_options(jaxpr, &[], o).map_err(|e| format!("{what}: compile: {e}"))?;
        let got = compiled.run(args).map_err(|e| format!("{what}: run: {e}"))?;
        check_close(&format!("{what}: jit vs interpreter"), &got, &want, rel, abs)?;
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
fn same_bits(a: &Array, b: &Array) -> bool {
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
