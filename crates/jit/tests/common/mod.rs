//! Shared helpers of the differential tests: compile with the JIT, evaluate with the
//! interpreter, compare within float32 tolerance.

#![allow(dead_code)]

use remat_ir::{Array, Aval, DType, Jaxpr, Primitive};

/// Same dtype and shape, and |a - b| <= max(rel |b|, abs) elementwise (NaN matches NaN).
pub fn check_close(what: &str, got: &[Array], want: &[Array], rel: f64, abs: f64) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{what}: {} values, expected {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.dtype() != w.dtype() || g.shape() != w.shape() {
            return Err(format!("{what} {i}: got {}, expected {}", g.aval(), w.aval()));
        }
        for (j, (a, b)) in g.to_f64_vec().into_iter().zip(w.to_f64_vec()).enumerate() {
            let close = a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= (rel * b.abs()).max(abs);
            if !close {
                return Err(format!("{what} {i}, element {j}: jit {a}, interpreter {b}"));
            }
        }
    }
    Ok(())
}

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
        check_close(&what, &got, &want, rel, abs)?;
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
        Array::Bool(x) => Array::Bool(x.mapv(|v| !v)),
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
        _ => a == b,
    }
}

/// Deterministic pseudo-random values in [-1, 1] (a 64-bit LCG).
#[derive(Debug)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }

    pub fn array(&mut self, aval: &Aval) -> Array {
        let shape = ndarray::IxDyn(&aval.shape);
        match aval.dtype {
            DType::F32 => Array::F32(ndarray::ArrayD::from_shape_fn(shape, |_| self.next_f64() as f32)),
            DType::F64 => Array::F64(ndarray::ArrayD::from_shape_fn(shape, |_| self.next_f64())),
            DType::I32 => Array::I32(ndarray::ArrayD::from_shape_fn(shape, |_| (self.next_f64() * 5.0) as i32)),
            DType::Bool => Array::Bool(ndarray::ArrayD::from_shape_fn(shape, |_| self.next_f64() > 0.0)),
        }
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
