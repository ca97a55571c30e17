//! `remat bench FILE [--inputs IN.json] [--runs N] [--json] [--cse SCOPE] [--nans MODE]`: compile with the JIT, run N
//! times, report compile time (parse excluded), median run time, the plan's peak bytes and
//! the GFLOP/s of the products (`crates/jit/bench/table.sh` reads the JSON line). Runs are timed
//! both ways: writing into the previous run's output arrays (`run_into`: no allocation, the
//! steady state of a training loop) and with fresh output arrays (`run`, as a JAX call).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use remat::run::{check_arguments, Program, RunOptions};
use remat::{Array, Aval, Backend, ClosedJaxpr, CseScope, DType, Nans, Options};
use serde_json::json;

use crate::io::{check_inputs, read_arrays, read_jaxpr, reject_nans, CliError, Result};

pub fn run(file: &Path, inputs: Option<&Path>, runs: usize, as_json: bool, cse: CseScope, nans: Nans) -> Result<()> {
    let jaxpr = read_jaxpr(file)?;
    let args = match inputs {
        Some(path) => {
            let args = read_arrays(path)?;
            check_inputs(path, &args, file, &jaxpr)?;
            reject_nans(path, "input", check_arguments(&args.iter().collect::<Vec<_>>(), nans))?;
            args
        }
        None => pseudo_random_inputs(&jaxpr.in_avals())?,
    };
    let closed = ClosedJaxpr::new(Arc::new(jaxpr));
    let options = RunOptions { backend: Backend::Jit, nans, jit: Options { cse, ..Options::default() } };
    let start = Instant::now();
    let program = Program::new(closed, &options)?;
    let compile_ms = start.elapsed().as_secs_f64() * 1e3;
    // Warm-up: page in the arena and the code; `--nans debug` locates a NaN it makes.
    let mut outs = program.run(&args.iter().collect::<Vec<_>>())?;
    // The timed runs call the native code directly: it checks no values.
    let compiled = program.compiled().ok_or_else(|| CliError("the JIT backend compiled no native code".into()))?;
    // More warm-up, up to 8 calls or 100 ms: the steady state of a training loop, in which
    // the pairs of products that may run on two cores have timed both ways and chosen.
    let warm = Instant::now();
    for _ in 0..8 {
        if warm.elapsed().as_millis() >= 100 {
            break;
        }
        compiled.run_into(&args, &mut outs)?;
    }

    // The two ways alternate, call by call, so that the host's drift in speed (a shared VM
    // can change by tens of percent within a second) falls on both alike.
    let mut reused = Vec::with_capacity(runs);
    let mut fresh = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        compiled.run_into(&args, &mut outs)?;
        reused.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        drop(compiled.run(&args)?);
        fresh.push(t.elapsed().as_secs_f64() * 1e3);
    }
    reused.sort_by(f64::total_cmp);
    fresh.sort_by(f64::total_cmp);
    let (median, fresh_median) = (reused[reused.len() / 2], fresh[fresh.len() / 2]);
    let plan = compiled.plan();
    let mut report = format!("{}: compile {compile_ms:.2} ms\n", file.display());
    report += &format!(
        "run: median {median:.4} ms over {} runs (min {:.4}, max {:.4}) into the previous outputs; \
         {fresh_median:.4} ms with fresh output arrays\n",
        reused.len(),
        reused[0],
        reused[reused.len() - 1]
    );
    report += &format!(
        "plan: peak {} bytes in the arena, {} bytes in the host pool, {} buffers ({} inside outputs not yet written), \
         {} functions, {} split over threads, {} pairs of products run at once; cse {:?}\n",
        plan.peak_bytes,
        plan.host_bytes,
        plan.buffers,
        plan.buffers_in_outputs,
        plan.functions,
        plan.parallel_steps,
        plan.paired_steps,
        plan.cse
    );
    if as_json {
        // Written by hand to keep the documented key order.
        let (c, r, f, p) = (json!(compile_ms), json!(median), json!(fresh_median), json!(plan.peak_bytes));
        let gflop = compiled.dot_flops() as f64 / 1e9;
        let (g, gs) = (json!(gflop), json!(gflop / (median * 1e-3)));
        let m = json!(plan.cse == CseScope::AcrossCheckpoints);
        report += &format!(
            "{{\"compile_ms\": {c}, \"run_median_ms\": {r}, \"run_fresh_outputs_median_ms\": {f}, \"peak_bytes\": {p}, \"dot_gflop\": {g}, \"gflops\": {gs}, \"merged_across_checkpoints\": {m}}}\n"
        );
    }
    remat::pretty::write_stdout(&report);
    Ok(())
}

/// Deterministic inputs in [-1, 1] (integers in -5..=5, unsigned 0..=5, booleans by sign,
/// keys of arbitrary words). The avals are
/// verified (within `REMAT_MAX_VALUE_BYTES`); an allocation the allocator refuses is an
/// error, not an abort.
fn pseudo_random_inputs(avals: &[Aval]) -> Result<Vec<Array>> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    };
    avals
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let shape = ndarray::IxDyn(&a.shape);
            let oom = || CliError(format!("cannot allocate input {i} ({a}) for the benchmark: out of memory"));
            let n = a.checked_size().ok_or_else(oom)?;
            Ok(match a.dtype {
                DType::F32 => Array::F32(filled(shape, n, || next() as f32).ok_or_else(oom)?),
                DType::F64 => Array::F64(filled(shape, n, &mut next).ok_or_else(oom)?),
                DType::I32 => Array::I32(filled(shape, n, || (next() * 5.0).round() as i32).ok_or_else(oom)?),
                DType::BF16 => Array::BF16(filled(shape, n, || remat::bf16::from_f64(next())).ok_or_else(oom)?),
                DType::F16 => Array::F16(filled(shape, n, || remat::f16::from_f64(next())).ok_or_else(oom)?),
                DType::I8 => Array::I8(filled(shape, n, || (next() * 5.0).round() as i8).ok_or_else(oom)?),
                DType::I16 => Array::I16(filled(shape, n, || (next() * 5.0).round() as i16).ok_or_else(oom)?),
                DType::I64 => Array::I64(filled(shape, n, || (next() * 5.0).round() as i64).ok_or_else(oom)?),
                DType::U8 => Array::U8(filled(shape, n, || (next().abs() * 5.0).round() as u8).ok_or_else(oom)?),
                DType::U32 => Array::U32(filled(shape, n, || (next().abs() * 5.0).round() as u32).ok_or_else(oom)?),
                DType::Bool => Array::Bool(filled(shape, n, || next() > 0.0).ok_or_else(oom)?),
                DType::Key => Array::Key(
                    filled(shape, n, || {
                        let word = |x: f64| (x.abs() * u32::MAX as f64) as u32;
                        remat::PrngKey([word(next()), word(next())])
                    })
                    .ok_or_else(oom)?,
                ),
                DType::C64 => {
                    Array::C64(filled(shape, n, || remat::c64::new(next() as f32, next() as f32)).ok_or_else(oom)?)
                }
                DType::C128 => Array::C128(filled(shape, n, || remat::c128::new(next(), next())).ok_or_else(oom)?),
            })
        })
        .collect()
}

/// An array of `n` elements of `shape` from `f`, or `None` if the allocator refuses.
fn filled<T>(shape: ndarray::IxDyn, n: usize, mut f: impl FnMut() -> T) -> Option<ndarray::ArrayD<T>> {
    let mut data = Vec::new();
    data.try_reserve_exact(n).ok()?;
    data.extend((0..n).map(|_| f()));
    ndarray::ArrayD::from_shape_vec(shape, data).ok()
}
