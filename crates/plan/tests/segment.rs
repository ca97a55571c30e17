//! Checkpointed segments (`remat_plan::segment`): the chain DP is optimal under its model
//! (against every segmentation of small chains), a segmented function has the original's
//! value and gradients (on a deep MLP and on every recorded zoo and conformance program
//! with a vjp), and the planner's segmented plans reach peaks that one checkpoint around
//! the whole function cannot, at exactly the peak the JIT compiles them to.

use std::sync::Arc;

use remat_ir::{parse_jaxpr, pp_jaxpr, Array, ClosedJaxpr, Jaxpr};
use remat_plan::cost::jaxpr_flops;
use remat_plan::segment::{checkpoint_segments, Chain, Keep, Segmentation};
use remat_plan::{Budget, PlanOptions, Planner};

/// A tanh MLP `layers` deep (width 64, batch 32), its loss the sum of the last layer:
/// `(w, b, x)`, the weights shared by every layer.
fn deep_mlp(layers: usize) -> Jaxpr {
    let mut t = String::from("{ lambda ; w:f32[64,64] b:f32[64] x:f32[32,64]. let\n    bb:f32[1,64] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(1, 64) sharding=None] b\n");
    let mut h = "x".to_string();
    for l in 0..layers {
        t.push_str(&format!(
            "    d{l}:f32[32,64] = dot_general[dimension_numbers=(([1], [0]), ([], [])) preferred_element_type=float32] {h} w\n    a{l}:f32[32,64] = add d{l} bb\n    h{l}:f32[32,64] = tanh a{l}\n"
        ));
        h = format!("h{l}");
    }
    t.push_str(&format!("    s:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] {h}\n  in (s,) }}"));
    parse_jaxpr(&t, "deep_mlp.jaxpr").expect("parses")
}

fn data(name: &str) -> Jaxpr {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    parse_jaxpr(&std::fs::read_to_string(&path).expect("readable"), name).expect("parses")
}

/// Every segmentation of units `u..k`: each unit kept, or a run of units checkpointed
/// saving nothing or its products.
fn every_segmentation(u: usize, k: usize) -> Vec<Segmentation> {
    if u == k {
        return vec![Vec::new()];
    }
    let mut out = every_segmentation(u + 1, k);
    for w in u + 1..=k {
        for rest in every_segmentation(w, k) {
            for keep in Keep::ALL {
                let mut s = vec![(u, w, keep)];
                s.extend(rest.iter().copied());
                out.push(s);
            }
        }
    }
    out
}

#[test]
fn the_chain_dp_is_optimal_under_its_model() {
    let programs = [
        ("deep_mlp(6)", deep_mlp(6)),
        ("chain.jaxpr", data("chain.jaxpr")),
        ("dag.jaxpr", data("dag.jaxpr")),
        ("transformer_reduced.jaxpr", data("primal/transformer_reduced.jaxpr")),
    ];
    for (name, f) in programs {
        for units in [5, 7, 8] {
            let chain = Chain::new(&f, units);
            let all = every_segmentation(0, chain.units());
            let costs: Vec<(u64, u64)> = all.iter().map(|s| chain.cost(s)).collect();
            let (min_peak, max_peak) =
                (costs.iter().map(|c| c.0).min().unwrap(), costs.iter().map(|c| c.0).max().unwrap());
            assert!(min_peak < max_peak, "{name} with {units} units: segments change the modelled peak");
            for step in 0..=24u64 {
                let budget = min_peak + (max_peak - min_peak) * step / 24;
                let best = costs.iter().filter(|c| c.0 <= budget).map(|c| c.1).min();
                let got = chain.solve(budget, &Keep::ALL);
                match (best, got) {
                    (Some(flops), Some(s)) => {
                        assert!(s.exact, "{name}: no thinning on {} units", chain.units());
                        assert_eq!(s.flops, flops, "{name}, {units} units, budget {budget}: {:?}", s.segments);
                        assert_eq!(chain.cost(&s.segments), (s.peak, s.flops), "{name}: the solution's own cost");
                        assert!(s.peak <= budget, "{name}: {} over {budget}", s.peak);
                    }
                    (best, got) => panic!("{name}, budget {budget}: brute force {best:?}, DP {got:?}"),
                }
            }
            assert!(chain.solve(min_peak - 1, &Keep::ALL).is_none(), "{name}: nothing fits below the smallest peak");
            println!(
                "{name}: {} units, {} segmentations, modelled peaks {min_peak}..{max_peak}",
                chain.units(),
                all.len()
            );
        }
    }
}

fn arg(shape: &[usize], seed: f32) -> Array {
    let n: usize = shape.iter().product();
    let data = (0..n).map(|i| ((i as f32 * 0.37 + seed).sin()) * 0.2).collect();
    Array::F32(ndarray::ArrayD::from_shape_vec(shape.to_vec(), data).unwrap())
}

#[test]
fn checkpointed_segments_keep_the_value_and_gradients_and_lower_the_peak() {
    let f = deep_mlp(8);
    let args = [arg(&[64, 64], 0.1), arg(&[64], 0.2), arg(&[32, 64], 0.3)];
    let plain = remat_ad::value_and_grad(&f, &[0, 1, 2]).unwrap();
    let want = remat_jit::compile(&plain).unwrap().run(&args).unwrap();
    let peak = |p: &Jaxpr| remat_jit::memory_plan(p, &[], &remat_jit::Options::default()).unwrap().peak_bytes;
    // Four segments of two layers each (the broadcast of the bias, equation 0, kept), one
    // of them saving its products.
    let spans = [(1, 7, Keep::Nothing), (7, 13, Keep::Dots), (13, 19, Keep::Nothing), (19, 25, Keep::Nothing)];
    let g = checkpoint_segments(&f, &spans).expect("segments");
    remat_ir::verify_closed(&ClosedJaxpr::new(Arc::new(g.clone()))).expect("verifies");
    assert_eq!(g.eqns.iter().filter(|e| e.primitive.name() == "remat2").count(), 4);
    let (vjp, program) = remat_ad::value_and_grad_vjp(&g, &[0, 1, 2], &[]).unwrap();
    // The forward half keeps each segment's boundary (and the last layer's own values),
    // not every layer's.
    let plain_vjp = remat_ad::vjp(&f, &[]).unwrap();
    assert!(vjp.residuals.len() < plain_vjp.residuals.len(), "{:?}", vjp.residuals);
    let got = remat_jit::compile(&program).unwrap().run(&args).unwrap();
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        for (x, y) in g.to_f64_vec().iter().zip(&w.to_f64_vec()) {
            assert!((x - y).abs() <= 1e-5 + 1e-4 * y.abs(), "output {k}: {x} against {y}");
        }
    }
    assert!(jaxpr_flops(&program) > jaxpr_flops(&plain), "the segments are recomputed");
    assert!(peak(&program) < peak(&plain), "peak {} against {}", peak(&program), peak(&plain));
    // Ranges that are not ascending and disjoint are an error, not a wrong program.
    assert!(checkpoint_segments(&f, &[(3, 7, Keep::Nothing), (5, 9, Keep::Nothing)]).is_err());
    assert!(checkpoint_segments(&f, &[(3, 3, Keep::Dots)]).is_err());
    assert!(checkpoint_segments(&f, &[(20, 99, Keep::Nothing)]).is_err());
}

#[test]
fn segmented_plans_reach_below_one_checkpoints_floor_at_the_compiled_peak() {
    // The reduced transformer of the benchmarks (two blocks), differentiated with respect
    // to its 16 parameters, as `remat plan --argnums 0-15` plans it.
    let f = ClosedJaxpr::new(Arc::new(data("primal/transformer_reduced.jaxpr")));
    let argnums: Vec<usize> = (0..16).collect();
    let options = PlanOptions { argnums: Some(argnums.clone()), ..PlanOptions::default() };
    let with = Planner::new(&f, &[], &options).unwrap();
    let without = Planner::new(&f, &[], &PlanOptions { segment_evals: 0, ..options }).unwrap();
    let (no_remat, floor, min) = (with.no_remat_peak(), without.min_peak(), with.min_peak());
    println!("transformer_reduced: no remat {no_remat}, one checkpoint's smallest {floor}, with segments {min}");
    // Measured: 21,888 bytes without remat, 15,104 at best with one checkpoint, 9,472
    // with segments.
    assert!(min * 10 < floor * 7, "segments cut the smallest peak by more than 30%: {min} against {floor}");
    let segmented: Vec<_> = with
        .frontier()
        .into_iter()
        .filter(|p| p.rewrite.as_deref().is_some_and(|r| r.contains("checkpointed segments")))
        .collect();
    assert!(!segmented.is_empty(), "segmented plans are on the frontier");
    let args: Vec<Array> =
        f.jaxpr.invars.iter().enumerate().map(|(i, &v)| arg(&f.jaxpr.aval(v).shape, i as f32 * 0.1)).collect();
    let want = remat_jit::compile(&remat_ad::value_and_grad(&f.jaxpr, &argnums).unwrap()).unwrap().run(&args).unwrap();
    for p in &segmented {
        let plan = with.plan(Budget::bytes(p.peak_bytes)).unwrap();
        assert_eq!(plan.peak_bytes, p.peak_bytes);
        assert!(plan.recomputed.first().is_some_and(|l| l.contains("checkpointed segments")), "{:?}", plan.recomputed);
        // What `remat bench` does with `-o`'s file: parse the printed program, compile.
        let parsed = parse_jaxpr(&pp_jaxpr(&plan.program), "planned.jaxpr").unwrap();
        let compiled = remat_jit::compile(&parsed).unwrap();
        assert_eq!(compiled.plan().peak_bytes, plan.peak_bytes, "at {}", p.peak_bytes);
        for (k, (g, w)) in compiled.run(&args).unwrap().iter().zip(&want).enumerate() {
            for (x, y) in g.to_f64_vec().iter().zip(&w.to_f64_vec()) {
                assert!((x - y).abs() <= 1e-4 + 1e-3 * y.abs(), "output {k}: {x} against {y}");
            }
        }
    }
    // What a JAX user writes by hand, one `jax.checkpoint` per block (saving nothing, or
    // the products): the planner reaches a smaller peak, and at each one's peak it
    // recomputes no more. Measured: 18,816 and 15,616 bytes against the planner's 8,576.
    let flat = remat_ad::flatten_calls(&f.jaxpr);
    let second: Vec<_> = flat.invars[8..16].to_vec();
    let block = flat
        .eqns
        .iter()
        .position(|e| e.invars.iter().any(|a| matches!(a, remat_ir::Atom::Var(v) if second.contains(v))))
        .unwrap();
    let base = jaxpr_flops(&remat_ad::value_and_grad(&f.jaxpr, &argnums).unwrap());
    for keep in Keep::ALL {
        let g = checkpoint_segments(&flat, &[(0, block, keep), (block, flat.eqns.len(), keep)]).unwrap();
        let program = remat_ad::value_and_grad(&g, &argnums).unwrap();
        let peak = remat_jit::memory_plan(&program, &[], &remat_jit::Options::default()).unwrap().peak_bytes;
        let flops = jaxpr_flops(&program).saturating_sub(base);
        println!("one checkpoint per block, {keep:?}: {peak} bytes, {flops} FLOPs");
        assert!(min < peak, "{keep:?}: the planner's {min} against {peak} per block");
        let plan = with.plan(Budget::bytes(peak)).unwrap();
        assert!(plan.recompute_flops <= flops, "{keep:?}: at {peak}: {} FLOPs against {flops}", plan.recompute_flops);
    }
    // The budget semantics hold with segments among the plans: every plan fits, the peak
    // never grows as the budget shrinks, and the smallest budget is met.
    let mut last = usize::MAX;
    for k in (0..=20).rev() {
        let budget = min + (no_remat - min) * k / 20;
        let plan = with.plan(Budget::bytes(budget)).unwrap();
        assert!(plan.peak_bytes <= budget && plan.peak_bytes <= last, "at {budget}: {}", plan.peak_bytes);
        last = plan.peak_bytes;
    }
    assert!(with.plan(Budget::bytes(min - 1)).is_err());
}

#[test]
fn neighbours_are_valid_segmentations_one_change_away() {
    let chain = Chain::new(&deep_mlp(6), 10);
    let s: Segmentation = vec![(0, 3, Keep::Nothing), (3, 5, Keep::Dots), (7, 10, Keep::Nothing)];
    let near = chain.neighbours(&s);
    for n in &near {
        assert_ne!(n, &s);
        let mut end = 0;
        for &(u, w, _) in n {
            assert!(u >= end && w > u && w <= chain.units(), "{n:?}");
            end = w;
        }
    }
    for want in [
        vec![(0, 3, Keep::Dots), (3, 5, Keep::Dots), (7, 10, Keep::Nothing)],
        vec![(0, 3, Keep::Nothing), (3, 6, Keep::Dots), (7, 10, Keep::Nothing)],
        vec![(0, 3, Keep::Nothing), (3, 5, Keep::Dots), (6, 10, Keep::Nothing)],
        vec![(0, 1, Keep::Nothing), (1, 3, Keep::Nothing), (3, 5, Keep::Dots), (7, 10, Keep::Nothing)],
        vec![(0, 5, Keep::Nothing), (7, 10, Keep::Nothing)],
        vec![(3, 5, Keep::Dots), (7, 10, Keep::Nothing)],
    ] {
        assert!(near.contains(&want), "{want:?} among {near:?}");
    }
    // Touching segments cannot grow into each other.
    assert!(!near.iter().any(|n| n.windows(2).any(|p| p[0].1 > p[1].0)));
}

/// `f`'s vjp as one program, compiled and run on `args` and `cts`: `(outputs, grads)`.
fn run_vjp(f: &Jaxpr, args: &[Array], cts: &[Array]) -> Result<Vec<Array>, String> {
    let p = remat_ad::vjp_program(f, &[]).map_err(|e| e.to_string())?.jaxpr;
    let mut ins = args.to_vec();
    ins.extend(cts.iter().cloned());
    remat_jit::compile(&p).map_err(|e| e.to_string())?.run(&ins).map_err(|e| e.to_string())
}

#[test]
fn every_recorded_program_cut_into_segments_keeps_its_outputs_and_gradients() {
    let mut checked = 0;
    for (name, case) in remat_testkit::zoo_cases().into_iter().chain(remat_testkit::conformance_cases()) {
        // Cases without a cotangent for every output (integer outputs: JAX's `None`) are
        // left to the conformance tests.
        let complete = case["cotangents"].as_array().is_some_and(|c| c.iter().all(|v| v.is_object()));
        if case["forward_only"].as_bool() == Some(true) || !complete {
            continue;
        }
        let f = remat_ad::flatten_calls(&remat_testkit::case_jaxpr(&case));
        let (args, cts) = (remat_testkit::arrays(&case, "args"), remat_testkit::arrays(&case, "cotangents"));
        // A case whose policy JAX prints as a closure needs its meaning given
        // (`--policy-names`): left to the zoo's own tests.
        let Ok(want) = run_vjp(&f, &args, &cts) else { continue };
        let chain = Chain::new(&f, 16);
        let all_kept = chain.cost(&[]).0;
        // The segmentation of the least modelled memory, of segments saving nothing, and one
        // halfway, of both kinds: whatever the cuts, the same arithmetic.
        let least = (1..=64u64).map(|k| all_kept * k / 64).find_map(|b| chain.solve(b, &[Keep::Nothing]));
        let half = chain.solve(all_kept / 2, &Keep::ALL);
        for s in [least, half].into_iter().flatten().filter(|s| !s.segments.is_empty()) {
            let g = checkpoint_segments(&f, &chain.spans(&s.segments)).expect("segments");
            remat_ir::verify_closed(&ClosedJaxpr::new(Arc::new(g.clone()))).expect("verifies");
            let got = run_vjp(&g, &args, &cts).unwrap_or_else(|e| panic!("{name} cut as {:?}: {e}", s.segments));
            remat_testkit::check_close(&format!("{name} cut as {:?}", s.segments), &got, &want, 1e-4, 1e-5)
                .unwrap_or_else(|e| panic!("{e}"));
            checked += 1;
        }
    }
    println!("{checked} segmented programs checked");
    assert!(checked >= 60, "{checked} segmented programs");
}
