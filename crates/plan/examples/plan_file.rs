//! Plans one primal jaxpr file and prints the frontier and the built-in policies:
//! `cargo run --release -p remat-plan --example plan_file -- FILE.jaxpr [ARGNUMS_COUNT]`.

use std::sync::Arc;
use std::time::Instant;

use remat_ir::{parse_jaxpr, ClosedJaxpr};
use remat_plan::{PlanOptions, Planner};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).ok_or("usage: plan_file FILE.jaxpr [NUM_PARAMS]")?;
    let text = std::fs::read_to_string(path)?;
    let jaxpr = parse_jaxpr(&text, path)?;
    let argnums = args.get(2).map(|n| n.parse::<usize>().map(|n| (0..n).collect::<Vec<_>>())).transpose()?;
    let f = ClosedJaxpr::new(Arc::new(jaxpr));
    let t = Instant::now();
    let greedy = std::env::var("GREEDY").is_ok();
    let mut options = PlanOptions { argnums, ..PlanOptions::default() };
    if greedy {
        options.exhaustive_candidates = 0;
    }
    let planner = Planner::new(&f, &[], &options)?;
    println!(
        "{} equations, {} candidates, method {:?}, {} plans evaluated in {:.2?}",
        f.jaxpr.eqns.len(),
        planner.candidates(),
        planner.method(),
        planner.evaluated(),
        t.elapsed()
    );
    for p in planner.frontier() {
        println!(
            "frontier peak {:>12} flops {:>14} residual {:>12} recomputed {}",
            p.peak_bytes, p.recompute_flops, p.residual_bytes, p.recomputed
        );
    }
    if std::env::var("ALL").is_ok() {
        for p in planner.points().into_iter().filter(|p| p.rewrite.is_some()) {
            println!(
                "rewritten peak {:>12} flops {:>14} residual {:>12} {}",
                p.peak_bytes,
                p.recompute_flops,
                p.residual_bytes,
                p.rewrite.unwrap_or_default()
            );
        }
    }
    for b in planner.builtins() {
        println!("builtin  peak {:>12} flops {:>14} {}", b.peak_bytes, b.recompute_flops, b.policy);
    }
    Ok(())
}
