//! The benchmark programs (up to 1024x1024x1024 products) evaluate in reasonable time on
//! deterministic inputs, giving finite values of the declared types.

use std::time::Instant;

use ndarray::{ArrayD, IxDyn};
use remat_interp::eval_jaxpr;
use remat_ir::{parse_jaxpr, Array, DType};
use remat_testkit::data_files;

/// Small values in [-0.5, 0.5), different for every element and argument.
fn input(arg: usize, shape: &[usize]) -> Array {
    let n: usize = shape.iter().product();
    let data = (0..n).map(|i| (((i * 7919 + arg * 104_729) % 1000) as f32 / 1000.0 - 0.5) * 0.2).collect();
    Array::F32(ArrayD::from_shape_vec(IxDyn(shape), data).expect("the element count matches"))
}

#[test]
fn benchmark_programs_evaluate() {
    let paths = data_files("bench", "jaxpr");
    assert_eq!(paths.len(), 12, "expected 12 benchmark programs");
    for path in &paths {
        let name = path.file_stem().unwrap_or_default().to_string_lossy().to_string();
        let text = std::fs::read_to_string(path).expect("readable");
        let jaxpr = parse_jaxpr(&text, &name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let args: Vec<Array> = jaxpr
            .in_avals()
            .iter()
            .enumerate()
            .map(|(i, aval)| {
                assert_eq!(aval.dtype, DType::F32, "{name}: benchmark inputs are f32");
                input(i, &aval.shape)
            })
            .collect();
        let start = Instant::now();
        let outs = eval_jaxpr(&jaxpr, &[], &args).unwrap_or_else(|e| panic!("{name}: {e}"));
        let elapsed = start.elapsed();
        eprintln!("{name}: {:.3}s", elapsed.as_secs_f64());
        for (out, aval) in outs.iter().zip(jaxpr.out_avals()) {
            assert!(out.aval().same_type(&aval), "{name}: output {} should be {aval}", out.aval());
            assert!(out.to_f64_vec().iter().all(|x| x.is_finite()), "{name}: output {aval} is not finite");
        }
    }
}
