//! The function rewritten and measured as further plans: each top-level scan nested
//! (`nest.rs`, binomial checkpointing) and the function cut into checkpointed segments
//! (`segment.rs`, the chain DP and its local refinement), each a [`Variant`].

use std::sync::Arc;

use rayon::prelude::*;
use remat_ir::{ClosedJaxpr, Primitive};

use crate::model::Model;
use crate::options::PlanOptions;
use crate::report::segments_description;
use crate::search::{self, Evaluations, Point};
use crate::{nest, segment, PlanError};

/// A function the planner rewrote and measured as a plan: its description, the rewritten
/// function, and for checkpointed segments the segments (ranges of the flat function's
/// top-level equations, with what each saves).
#[derive(Debug)]
pub(crate) struct Variant {
    pub(crate) description: String,
    pub(crate) rewritten: segment::Rewritten,
    pub(crate) segments: Option<Vec<(usize, usize, segment::Keep)>>,
}

/// The function (its top-level calls inlined) with each of its top-level scans (of length
/// 4 or more) nested every way [`nest::nestings`] proposes, each described and measured as
/// `jax.value_and_grad` of it runs (no enclosing checkpoint, whose policy would override
/// the nested checkpoints'), against `model`'s zero of recompute.
pub(crate) fn scan_variants(model: &Model, arg_names: &[String]) -> Result<Vec<Variant>, PlanError> {
    let f = model.flat();
    let mut out = Vec::new();
    for (at, e) in f.eqns.iter().enumerate() {
        let Primitive::Scan { length, .. } = &e.primitive else { continue };
        if *length < 4 {
            continue;
        }
        for factors in nest::nestings(*length) {
            let nested = nest::nest_scan(f, at, &factors)?;
            let closed = ClosedJaxpr { jaxpr: Arc::new(nested), consts: model.consts().to_vec() };
            let m = segment::Rewritten::new(closed, model.argnums(), arg_names, model.base_flops());
            let shape: Vec<String> = factors.iter().map(|k| k.to_string()).collect();
            out.push(Variant {
                description: format!(
                    "the scan of {length} iterations at {}, run as {} nested scans of {} iterations (binomial checkpointing: each level keeps its segments' first carries, the backward pass recomputes every segment once per level above it)",
                    e.source,
                    factors.len(),
                    shape.join(" x ")
                ),
                rewritten: m,
                segments: None,
            });
        }
    }
    Ok(out)
}

/// Measures the rewritten functions `variants[from..]` (in parallel) and adds their points.
pub(crate) fn measure_variants(variants: &[Variant], from: usize, evals: &mut Evaluations) -> Result<(), PlanError> {
    let measured: Vec<Result<(usize, u64, u64, usize), PlanError>> = variants[from..]
        .par_iter()
        .map(|v| {
            let e = v.rewritten.evaluate()?;
            Ok((e.peak_bytes, e.recompute_flops, e.residual_bytes, e.host_bytes))
        })
        .collect();
    for (k, m) in measured.into_iter().enumerate() {
        let (peak_bytes, recompute_flops, residual_bytes, host_bytes) = m?;
        evals.insert(Point {
            recompute: Vec::new(),
            peak_bytes,
            recompute_flops,
            residual_bytes,
            variant: Some(from + k),
            policy: None,
            offload: Vec::new(),
            host_bytes,
        });
    }
    Ok(())
}

/// The checkpointed segments' search: the chain, the segmentations measured (in the order
/// of their variants) and how many more the local refinement may measure.
pub(crate) struct SegmentSearch {
    chain: segment::Chain,
    pub(crate) plans: Vec<segment::Segmentation>,
    refine: usize,
}

/// The chain DP's segmentations of the function (`segment.rs`): solved with segments saving
/// nothing only and with both kinds, each at model budgets from saving everything down to
/// the smallest it fits, the distinct ones spread to half of
/// [`PlanOptions::segment_evals`] each (fewer on large bodies, at least two in all: the
/// ends); the refinement may measure half as many again on bodies of up to
/// `heuristic_full_size` equations.
pub(crate) fn segment_variants(model: &Model, options: &PlanOptions) -> SegmentSearch {
    let chain = segment::Chain::new(model.flat(), segment::MAX_UNITS);
    let size = model.body().eqns.len();
    if options.segment_evals == 0 {
        return SegmentSearch { chain, plans: Vec::new(), refine: 0 };
    }
    let (count, refine) = match size <= options.heuristic_full_size {
        true => (options.segment_evals, options.segment_evals / 2),
        false => {
            let scaled =
                options.segment_evals as u128 * (options.heuristic_full_size as u128).pow(2) / (size as u128).pow(2);
            ((scaled as usize).clamp(2.min(options.segment_evals), options.segment_evals), 0)
        }
    };
    let all_kept = chain.cost(&[]).0;
    // Segments saving nothing reach the least memory; letting them save their products
    // too gives cheaper plans between. Half the measurements for each.
    let mut plans: Vec<segment::Segmentation> = Vec::new();
    for (keeps, share) in [(&[segment::Keep::Nothing][..], count.div_ceil(2)), (&segment::Keep::ALL[..], count / 2)] {
        if share == 0 {
            continue;
        }
        let mut found: Vec<segment::Segmentation> = Vec::new();
        let mut add = |s: segment::Solution| {
            if !s.segments.is_empty() && !found.contains(&s.segments) {
                found.push(s.segments);
            }
        };
        // Modelled budgets evenly spaced below saving everything, four per segmentation
        // measured (at most 32).
        let budgets = (4 * share as u64).clamp(4, 32);
        let mut fits = all_kept;
        for k in (1..budgets).rev() {
            let Some(s) = chain.solve(all_kept * k / budgets, keeps) else { break };
            fits = all_kept * k / budgets;
            add(s);
        }
        // The smallest modelled budget any segmentation fits, by bisection (what fits is
        // monotone in the budget): the segmentation of the least memory.
        let (mut lo, mut hi) = (0, fits);
        while hi - lo > (all_kept / 256).max(1) {
            let mid = lo + (hi - lo) / 2;
            match chain.solve(mid, keeps) {
                Some(_) => hi = mid,
                None => lo = mid,
            }
        }
        if let Some(s) = chain.solve(hi, keeps) {
            add(s);
        }
        for s in search::spread(&found, share) {
            if !plans.contains(&s) {
                plans.push(s);
            }
        }
    }
    SegmentSearch { chain, plans, refine }
}

impl SegmentSearch {
    /// The function rewritten with each of `plans`, described.
    pub(crate) fn rewrite(
        &self,
        model: &Model,
        arg_names: &[String],
        plans: &[segment::Segmentation],
    ) -> Result<Vec<Variant>, PlanError> {
        let flat = model.flat();
        plans
            .par_iter()
            .map(|s| {
                let spans = self.chain.spans(s);
                let g = segment::checkpoint_segments(flat, &spans)?;
                let closed = ClosedJaxpr { jaxpr: Arc::new(g), consts: model.consts().to_vec() };
                let m = segment::Rewritten::new(closed, model.argnums(), arg_names, model.base_flops());
                Ok(Variant { description: segments_description(flat, &spans), rewritten: m, segments: Some(spans) })
            })
            .collect()
    }

    /// Local refinement where the model and the JIT disagree: the segmentations one change
    /// away ([`segment::Chain::neighbours`]) from those on the frontier, taken in turn from
    /// each (lowest peak first, each one's by modelled peak then FLOPs), measured four at a
    /// time until `refine` were spent or a round leaves the frontier as it was. The
    /// segmentations measured are `variants[first..]`.
    pub(crate) fn refine(
        &mut self,
        model: &Model,
        arg_names: &[String],
        first: usize,
        variants: &mut Vec<Variant>,
        evals: &mut Evaluations,
    ) -> Result<(), PlanError> {
        const ROUND: usize = 4;
        while self.refine > 0 {
            let before = evals.frontier();
            let parents: Vec<&segment::Segmentation> = before
                .iter()
                .filter_map(|&i| evals.points[i].variant)
                .filter(|&k| k >= first)
                .map(|k| &self.plans[k - first])
                .collect();
            let mut lists: Vec<Vec<segment::Segmentation>> = parents
                .iter()
                .map(|p| {
                    let mut n: Vec<segment::Segmentation> = self
                        .chain
                        .neighbours(p)
                        .into_iter()
                        .filter(|n| !n.is_empty() && !self.plans.contains(n))
                        .collect();
                    n.sort_by_key(|n| self.chain.cost(n));
                    n.reverse();
                    n
                })
                .collect();
            let mut batch: Vec<segment::Segmentation> = Vec::new();
            while batch.len() < ROUND.min(self.refine) && lists.iter().any(|l| !l.is_empty()) {
                for l in &mut lists {
                    if let Some(n) = l.pop() {
                        if batch.len() < ROUND.min(self.refine) && !batch.contains(&n) {
                            batch.push(n);
                        }
                    }
                }
            }
            if batch.is_empty() {
                break;
            }
            let from = variants.len();
            variants.extend(self.rewrite(model, arg_names, &batch)?);
            self.refine -= batch.len();
            self.plans.extend(batch);
            measure_variants(variants, from, evals)?;
            if evals.frontier() == before {
                break;
            }
        }
        Ok(())
    }
}
