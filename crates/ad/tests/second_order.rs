//! Differentiating JAX's own gradient programs (the benchmark jaxprs are value-and-grad
//! programs, with `remat2[differentiated=True]`, `add_any` and transposed dots in them):
//! their linearization transposes consistently (`<ct, J t> = <J^T ct, t>`), so
//! second-order reverse mode works through checkpoints.

use ndarray::{ArrayD, IxDyn};
use remat_ad::{linearize, transpose_jaxpr};
use remat_interp::eval_jaxpr;
use remat_ir::{parse_jaxpr, Array, Aval};
use remat_testkit::data_files;

fn random(aval: &Aval, seed: &mut u64) -> Array {
    let data: Vec<f32> = (0..aval.size())
        .map(|_| {
            *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((*seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2
        })
        .collect();
    Array::F32(ArrayD::from_shape_vec(IxDyn(&aval.shape), data).unwrap())
}

fn dot(a: &[Array], b: &[Array]) -> (f64, f64) {
    let mut sum = 0.0;
    let mut mag = 0.0;
    for (x, y) in a.iter().zip(b) {
        for (p, q) in x.to_f64_vec().iter().zip(y.to_f64_vec()) {
            sum += p * q;
            mag += (p * q).abs();
        }
    }
    (sum, mag)
}

#[test]
fn gradient_programs_transpose_consistently() {
    let paths: Vec<_> = data_files("bench", "jaxpr")
        .into_iter()
        .filter(|p| !p.to_string_lossy().contains("large") && !p.to_string_lossy().contains("medium"))
        // The realistic-size models: minutes in a debug build's interpreter.
        .filter(|p| !remat_testkit::is_model_bench(&p.file_stem().unwrap_or_default().to_string_lossy()))
        .collect();
    assert!(paths.len() >= 6);
    let mut seed = 7u64;
    for path in paths {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let jaxpr = parse_jaxpr(&std::fs::read_to_string(&path).unwrap(), "bench.jaxpr").unwrap();
        let xs: Vec<Array> = jaxpr.in_avals().iter().map(|a| random(a, &mut seed)).collect();
        let lin = linearize(&jaxpr).unwrap_or_else(|e| panic!("{name}: {e}"));
        let fwd = eval_jaxpr(&lin.primal, &[], &xs).unwrap();
        let res = &fwd[jaxpr.outvars.len()..];
        let ts: Vec<Array> = jaxpr.in_avals().iter().map(|a| random(a, &mut seed)).collect();
        let mut args = res.to_vec();
        args.extend(ts.iter().cloned());
        let jt = eval_jaxpr(&lin.tangent, &[], &args).unwrap();
        let cts: Vec<Array> = jt.iter().map(|y| random(&y.aval(), &mut seed)).collect();
        let mut linear = vec![false; lin.num_res];
        linear.extend(vec![true; ts.len()]);
        let t = transpose_jaxpr(&lin.tangent, &linear).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut targs = res.to_vec();
        targs.extend(cts.iter().cloned());
        let jtct = eval_jaxpr(&t.jaxpr, &[], &targs).unwrap();
        let ((lhs, mag), (rhs, _)) = (dot(&cts, &jt), dot(&jtct, &ts));
        assert!(
            (lhs - rhs).abs() <= 1e-4 * mag.max(1e-6),
            "{name}: <ct, J t> = {lhs}, <J^T ct, t> = {rhs} (scale {mag})"
        );
    }
}
