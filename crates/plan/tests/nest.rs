//! Binomial checkpointing of a scan (`remat_plan::nest`): the nested program computes the
//! same value and gradients as the scan it replaces, and its planned peak falls with the
//! depth of the nesting while its recompute grows, as Revolve's trade-off says.

use std::sync::Arc;

use remat_ir::{parse_jaxpr, Array, ClosedJaxpr, Jaxpr};
use remat_plan::cost::jaxpr_flops;
use remat_plan::nest::{nest_scan, nestings};

/// An RNN over 64 steps, as JAX 0.10.2 prints it: `h' = tanh(h @ w + x_t)`, the loss the
/// sum of every step's `sin h'`.
const RNN: &str = "{ lambda ; a:f32[32,32] b:f32[32] c:f32[64,32]. let
    _:f32[32] d:f32[64,32] = scan[
      jaxpr={ lambda ; e:f32[32,32] f:f32[32] g:f32[32]. let
          h:f32[32] = dot_general[
            dimension_numbers=(([0], [0]), ([], []))
            preferred_element_type=float32
          ] f e
          i:f32[32] = add h g
          j:f32[32] = tanh i
          k:f32[32] = sin j
        in (j, k) }
      length=64
      num_carry=1
      num_consts=1
      reverse=False
      unroll=1
    ] a b c
    l:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] d
  in (l,) }";

fn arg(shape: &[usize], seed: f32) -> Array {
    let n: usize = shape.iter().product();
    let data = (0..n).map(|i| ((i as f32 * 0.61 + seed).sin()) * 0.3).collect();
    Array::F32(ndarray::ArrayD::from_shape_vec(shape.to_vec(), data).unwrap())
}

fn run(program: &Jaxpr) -> Vec<Array> {
    let args = [arg(&[32, 32], 0.1), arg(&[32], 0.2), arg(&[64, 32], 0.3)];
    remat_jit::compile(program).expect("compiles").run(&args).expect("runs")
}

fn whole_program(f: &Jaxpr) -> Jaxpr {
    remat_ad::value_and_grad(f, &[0, 1, 2]).expect("differentiates")
}

#[test]
fn a_nested_scan_has_the_scans_value_and_gradients_and_a_smaller_peak() {
    let f = parse_jaxpr(RNN, "rnn").unwrap();
    let plain = whole_program(&f);
    let want = run(&plain);
    let peak = |p: &Jaxpr| remat_jit::memory_plan(p, &[], &remat_jit::Options::default()).unwrap().peak_bytes;
    let (plain_peak, plain_flops) = (peak(&plain), jaxpr_flops(&plain));
    let mut last = (plain_peak, plain_flops);
    for factors in nestings(64) {
        let nested = nest_scan(&f, 0, &factors).expect("nests");
        remat_ir::verify_closed(&ClosedJaxpr::new(Arc::new(nested.clone()))).expect("verifies");
        let program = whole_program(&nested);
        let got = run(&program);
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            let (g, w) = (g.to_f64_vec(), w.to_f64_vec());
            for (x, y) in g.iter().zip(&w) {
                assert!((x - y).abs() <= 1e-5 + 1e-4 * y.abs(), "{factors:?}: output {k}: {x} against {y}");
            }
        }
        let (p, fl) = (peak(&program), jaxpr_flops(&program));
        println!("{factors:?}: peak {p} bytes, {fl} FLOPs (plain {plain_peak}, {plain_flops})");
        assert!(fl > plain_flops, "{factors:?} recomputes");
        if factors.len() == 2 {
            // sqrt(n) checkpointing: 8 + 8 carries instead of 64 steps' residuals.
            assert!(p < plain_peak, "{factors:?}: peak {p} against {plain_peak}");
        }
        // Every nesting keeps less than the stacked residuals of 64 steps. (Deeper ones
        // keep fewer carries, but each level's loop holds its own buffers in the JIT's
        // plan, so here the two-level one is the smallest.)
        assert!(p < plain_peak, "{factors:?}: peak {p} against {plain_peak}");
        last = (p.min(last.0), fl);
    }
    assert!(last.0 * 100 < plain_peak * 55, "sqrt(n) checkpointing about halves the peak: {last:?}");
}

/// The planner proposes the nestings itself: a budget below every plan of the scan as it
/// is gets a nested one, and says so.
#[test]
fn the_planner_nests_a_scan_when_the_budget_asks() {
    use remat_plan::{Budget, PlanOptions, Planner};
    let f = ClosedJaxpr::new(Arc::new(parse_jaxpr(RNN, "rnn").unwrap()));
    let planner = Planner::new(&f, &[], &PlanOptions::default()).expect("plans");
    let points = planner.points();
    let is_nesting = |p: &&remat_plan::FrontierPoint| p.rewrite.as_deref().is_some_and(|r| r.contains("nested scans"));
    let flat_min = points.iter().filter(|p| p.rewrite.is_none()).map(|p| p.peak_bytes).min().unwrap();
    let nested = points.iter().filter(is_nesting).min_by_key(|p| p.peak_bytes).expect("nestings");
    assert!(nested.peak_bytes < flat_min, "{} against {flat_min}", nested.peak_bytes);
    assert_eq!(planner.min_peak(), nested.peak_bytes);
    let plan = planner.plan(Budget::bytes(nested.peak_bytes)).expect("a plan");
    assert_eq!(plan.peak_bytes, nested.peak_bytes);
    assert!(plan.recomputed[0].contains("nested scans of 8 x 8 iterations"), "{:?}", plan.recomputed);
    assert!(plan.recompute_flops > 0);
    // The plan's program is the nested one, and computes what the scan does.
    let want = run(&whole_program(&f.jaxpr));
    let got = run(&plan.program);
    for (g, w) in got.iter().zip(&want) {
        for (x, y) in g.to_f64_vec().iter().zip(w.to_f64_vec()) {
            assert!((x - y).abs() <= 1e-5 + 1e-4 * y.abs(), "{x} against {y}");
        }
    }
    // A budget the scan as it is fits is planned without nesting.
    assert!(planner.plan(Budget::bytes(flat_min)).unwrap().recomputed.iter().all(|l| !l.contains("nested")));
}

#[test]
fn nesting_what_is_not_a_scan_or_does_not_divide_is_an_error() {
    let f = parse_jaxpr(RNN, "rnn").unwrap();
    for (at, factors) in [(1, vec![8, 8]), (0, vec![8, 4]), (0, vec![64]), (0, vec![64, 1]), (5, vec![8, 8])] {
        let e = nest_scan(&f, at, &factors).expect_err("an error");
        assert!(e.to_string().contains("scan") || e.to_string().contains("equation"), "{e}");
    }
}

/// An ODE-like rollout: 1,024 steps of an elementwise update of a 256-wide state, no
/// scanned-over inputs and no weights, differentiated with respect to the initial state.
/// Each step keeps several state-sized residuals, so stacking them all is what costs, and
/// each level of nesting adds only a few carries: Revolve's regime.
const ROLLOUT: &str = "{ lambda ; a:f32[256]. let
    b:f32[256] = scan[
      jaxpr={ lambda ; c:f32[256]. let
          d:f32[256] = sin c
          e:f32[256] = mul d c
          f:f32[256] = tanh e
          g:f32[256] = mul f 0.5:f32[]
          i:f32[256] = cos g
          j:f32[256] = add i c
          k:f32[256] = mul j 0.7:f32[]
        in (k,) }
      length=1024
      num_carry=1
      num_consts=0
      reverse=False
      unroll=1
    ] a
    l:f32[] = reduce_sum[axes=(0,) out_sharding=None] b
  in (l,) }";

#[test]
fn deeper_nestings_keep_less_where_the_steps_residuals_dominate() {
    use remat_plan::{Budget, PlanOptions, Planner};
    let f = parse_jaxpr(ROLLOUT, "rollout").unwrap();
    let peak = |p: &Jaxpr| remat_jit::memory_plan(p, &[], &remat_jit::Options::default()).unwrap().peak_bytes;
    let plain = peak(&whole_program_of(&f, &[0]));
    // Measured: 6,292,544 bytes stacked; 231,552 as 32 x 32; 37,248 as six levels.
    let mut by_levels = Vec::new();
    for factors in nestings(1024) {
        let p = peak(&whole_program_of(&nest_scan(&f, 0, &factors).unwrap(), &[0]));
        println!("{factors:?}: {p} bytes (stacked: {plain})");
        by_levels.push((factors.len(), p));
    }
    let two = by_levels[0].1;
    let (best_levels, best) = *by_levels.iter().min_by_key(|(_, p)| *p).unwrap();
    assert!(best_levels >= 5, "the smallest peak is a deep nesting: {by_levels:?}");
    assert!(best * 4 < two && two * 20 < plain, "log-depth keeps far less than sqrt: {by_levels:?}");
    // The planner reaches it: the plan for the smallest budget is that nesting, and a
    // budget between the two-level peak and the stack gets the two-level one (the least
    // recompute that fits).
    let planner = Planner::new(&ClosedJaxpr::new(Arc::new(f)), &[], &PlanOptions::default()).unwrap();
    assert_eq!(planner.min_peak(), best);
    let deepest = planner.plan(Budget::bytes(best)).unwrap();
    assert!(deepest.recomputed[0].contains(&format!("run as {best_levels} nested scans")), "{:?}", deepest.recomputed);
    let sqrt = planner.plan(Budget::bytes(two)).unwrap();
    assert!(sqrt.recomputed[0].contains("run as 2 nested scans"), "{:?}", sqrt.recomputed);
    assert!(sqrt.recompute_flops < deepest.recompute_flops);
}

fn whole_program_of(f: &Jaxpr, argnums: &[usize]) -> Jaxpr {
    remat_ad::value_and_grad(f, argnums).expect("differentiates")
}
