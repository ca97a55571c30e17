//! With a host budget: the plans of the function itself that offload saved values to host
//! memory between the halves (`docs/planner.md`, "Offload").

use rayon::prelude::*;

use crate::budget;
use crate::model::Model;
use crate::search::{Evaluations, Point};
use crate::PlanError;

/// With a host budget: for every plan on the frontier (of the function itself), the plans
/// that also offload its largest saved values to host memory, one more at a time (largest
/// first, passing over a value that would not fit, at most 16), while the host memory they
/// use fits `host_budget`. Offloading costs
/// no FLOPs, so a budget the device cannot meet by saving is met by moving before
/// recomputing. [`PlanError::NoOffload`] if no such plan fits the host budget.
pub(crate) fn offload_plans(model: &Model, evals: &mut Evaluations, host_budget: usize) -> Result<(), PlanError> {
    const MAX_OFFLOADS: usize = 16;
    let mut proposals: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
    let mut smallest: Option<u64> = None;
    for i in evals.frontier() {
        let p = &evals.points[i];
        if p.variant.is_some() {
            continue;
        }
        let a = model.analyze(&model.saved_for(&p.recompute));
        // The saved candidate equations making residuals, largest residual first.
        let mut producers: Vec<(u64, usize)> = Vec::new();
        for &v in &a.residuals {
            if let Some(e) = model.producer(v).filter(|&e| model.is_candidate(e)) {
                match producers.iter_mut().find(|(_, q)| *q == e) {
                    Some(entry) => entry.0 += model.bytes(v),
                    None => producers.push((model.bytes(v), e)),
                }
            }
        }
        producers.sort_by_key(|&(bytes, e)| (std::cmp::Reverse(bytes), e));
        if let Some(&(b, _)) = producers.last() {
            smallest = Some(smallest.map_or(b, |s: u64| s.min(b)));
        }
        let mut offload: Vec<usize> = Vec::new();
        let mut bytes = 0u64;
        for &(b, e) in producers.iter() {
            if offload.len() == MAX_OFFLOADS {
                break;
            }
            // A value that no longer fits is passed over for the smaller ones after it.
            if bytes + b > host_budget as u64 {
                continue;
            }
            bytes += b;
            offload.push(e);
            let mut sorted = offload.clone();
            sorted.sort_unstable();
            proposals.push((p.recompute.clone(), sorted));
        }
    }
    let measured: Vec<Result<Point, PlanError>> =
        proposals.into_par_iter().map(|(recompute, offload)| Point::measured(model, recompute, offload)).collect();
    let mut fitted = 0;
    for p in measured {
        let p = p?;
        if p.host_bytes <= host_budget {
            evals.insert(p);
            fitted += 1;
        }
    }
    if fitted == 0 {
        let why = match smallest {
            Some(b) => format!(
                "the smallest value a plan of the frontier could offload has {b} bytes ({})",
                budget::human(b as usize)
            ),
            None => "no plan of the frontier saves a value that could be offloaded".into(),
        };
        return Err(PlanError::NoOffload { host_budget, why });
    }
    Ok(())
}
