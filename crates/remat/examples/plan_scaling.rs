//! The planner's speed on generated programs of about 1,000 and 10,000 equations: a deep
//! MLP (`dot_general`, bias `add`, `tanh` per layer) and a transformer-like stack (two
//! products, a `sin`, a residual `add` and a `mul` per block), as jaxpr texts.
//!
//! ```text
//! cargo run --release -p remat --example plan_scaling
//! ```
//!
//! Prints, per program: equations, candidates, the search used, plans evaluated exactly,
//! the planner's wall time and CPU time (user + system, all threads: on the shared machine
//! the wall time says more about the load), and the frontier's size. Targets (issue 24): under 1 s at
//! 1,000 equations and under 10 s at 10,000. docs/planner.md records the numbers.

use std::sync::Arc;
use std::time::Instant;

use remat::ir::{parse_jaxpr, ClosedJaxpr};
use remat::plan::{Budget, PlanOptions, Planner};

/// `{ lambda ; w:f32[d,d] x:f32[n,d]. let ... in (loss,) }` with `layers` tanh layers
/// sharing one weight (so that the arguments stay few and small).
fn mlp(layers: usize, n: usize, d: usize) -> String {
    let mut t = format!("{{ lambda ; w:f32[{d},{d}] b:f32[{d}] x0:f32[{n},{d}]. let\n");
    t.push_str(&format!(
        "    bb:f32[1,{d}] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(1, {d}) sharding=None] b\n"
    ));
    for i in 0..layers {
        t.push_str(&format!(
            "    h{i}:f32[{n},{d}] = dot_general[dimension_numbers=(([1], [0]), ([], [])) out_sharding=None preferred_element_type=float32] x{i} w\n"
        ));
        t.push_str(&format!("    a{i}:f32[{n},{d}] = add h{i} bb\n"));
        t.push_str(&format!("    x{}:f32[{n},{d}] = tanh a{i}\n", i + 1));
    }
    t.push_str(&format!("    s:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] x{layers}\n  in (s,) }}\n"));
    t
}

/// A stack of blocks `x' = x + sin(x @ w1) @ w2 * x`.
fn stack(blocks: usize, n: usize, d: usize) -> String {
    let mut t = format!("{{ lambda ; w1:f32[{d},{d}] w2:f32[{d},{d}] x0:f32[{n},{d}]. let\n");
    let dot = "dot_general[dimension_numbers=(([1], [0]), ([], [])) out_sharding=None preferred_element_type=float32]";
    for i in 0..blocks {
        t.push_str(&format!("    p{i}:f32[{n},{d}] = {dot} x{i} w1\n"));
        t.push_str(&format!("    s{i}:f32[{n},{d}] = sin p{i}\n"));
        t.push_str(&format!("    q{i}:f32[{n},{d}] = {dot} s{i} w2\n"));
        t.push_str(&format!("    m{i}:f32[{n},{d}] = mul q{i} x{i}\n"));
        t.push_str(&format!("    x{}:f32[{n},{d}] = add x{i} m{i}\n", i + 1));
    }
    t.push_str(&format!("    s:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] x{blocks}\n  in (s,) }}\n"));
    t
}

/// The CPU time (user + system, every thread) this process has used, in seconds (10 ms
/// ticks), where Linux reports it.
fn cpu_secs() -> f64 {
    let ticks = || -> Option<u64> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
    };
    ticks().map_or(f64::NAN, |t| t as f64 / 100.0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let programs = [
        ("mlp", mlp(333, 8, 16)),
        ("stack", stack(200, 8, 16)),
        ("mlp", mlp(3333, 8, 16)),
        ("stack", stack(2000, 8, 16)),
    ];
    for (name, text) in programs {
        let jaxpr = parse_jaxpr(&text, name)?;
        let f = ClosedJaxpr::new(Arc::new(jaxpr));
        let options = PlanOptions { argnums: Some(vec![0, 1]), ..PlanOptions::default() };
        let (t, cpu) = (Instant::now(), cpu_secs());
        let planner = Planner::new(&f, &[], &options)?;
        let plan = planner.plan(Budget::bytes((planner.min_peak() + planner.no_remat_peak()) / 2))?;
        let (secs, cpu) = (t.elapsed().as_secs_f64(), cpu_secs() - cpu);
        println!(
            "{name}: {} equations, {} candidates, {:?}, {} plans evaluated, {:.2} s (CPU {:.2} s), frontier {} points, peak {} .. {} bytes, plan at the middle budget: {} bytes, {} FLOPs",
            f.jaxpr.eqns.len(),
            planner.candidates(),
            planner.method(),
            planner.evaluated(),
            secs,
            cpu,
            planner.frontier().len(),
            planner.min_peak(),
            planner.no_remat_peak(),
            plan.peak_bytes,
            plan.recompute_flops,
        );
    }
    Ok(())
}
