//! Checkpointed segments: Rotor-style checkpointing of a function's chain of equations.
//!
//! One checkpoint around the whole function, whatever it saves, recomputes in one go: the
//! backward half runs every recomputation before the transposes that read it, so what is
//! recomputed is alive all at once, and a plan that recomputes everything has the same peak
//! as one that saves everything. Cutting the function's top-level equations into segments,
//! each a checkpoint that saves nothing (`remat2[policy=nothing_saveable]`), changes that:
//! the forward half keeps only each segment's outputs that later equations read (its
//! boundary), and the backward half, transposing the segments last first, recomputes one
//! segment just before its own transpose, so only one segment's values are alive at a time.
//! That is the classic checkpointing of a chain (`sqrt n` segments of `sqrt n` layers:
//! Chen et al. 2016; Rotor, Beaumont et al. 2019, for the optimal cuts), and what a JAX user
//! writes by hand with one `jax.checkpoint` per layer.
//!
//! [`Chain`] chooses the cuts. It models the function as a chain of *units* (the top-level
//! equations, or runs of them between cut points chosen where few bytes cross, on long
//! programs); a segmentation says which runs of units are checkpointed segments and
//! which units are kept (everything they make saved). The model:
//!
//! - a kept unit keeps every value it makes, `made(u)` bytes, until the backward half;
//! - a segment `[u, w)` keeps its boundary, `out(u, w)` bytes (what it makes that an
//!   equation after it or the function's result reads), and recomputes every equation in
//!   it, `flops(u, w)` ([`crate::cost::eqn_flops`]), once;
//! - the peak is the largest of what the forward half keeps in all, and, for each segment,
//!   what the units before it keep plus everything the segment makes (all of it alive
//!   during its recompute and transpose).
//!
//! [`Chain::solve`] finds the segmentation of least recompute FLOPs whose modelled peak fits
//! a budget, exactly under that model: a dynamic program over the unit boundaries whose
//! state is the bytes kept so far, keeping at each boundary the Pareto set of (bytes kept,
//! FLOPs) (a partial segmentation keeping fewer bytes at no more FLOPs leaves every
//! completion that fits to the other one too). `the_chain_dp_is_optimal_under_its_model`
//! (`tests/segment.rs`) checks it against every segmentation of small chains. The model
//! is not the JIT's peak (the backward half's gradients, fused loops and buffer reuse are
//! outside it), so the planner uses it only to *propose* segmentations; each is then
//! measured exactly like any plan (`rewrites.rs`) and the budget chooses among measured points.

use std::sync::Arc;

use remat_ad::{Builder, VarMap};
use remat_ir::{Atom, ClosedJaxpr, Jaxpr, Policy, Primitive, Var};

use crate::cost::eqn_flops;
use crate::model::{Analysis, Evaluated};
use crate::PlanError;

/// A function the planner rewrote (cut into checkpointed segments, or a scan nested:
/// `nest.rs`), measured as `jax.value_and_grad` of it runs, without an enclosing checkpoint
/// (which would override the policies of the checkpoints the rewrite placed, as in JAX).
#[derive(Debug)]
pub struct Rewritten {
    f: ClosedJaxpr,
    argnums: Vec<usize>,
    arg_names: Vec<String>,
    /// The FLOPs of the original function's program recomputing nothing.
    base_flops: u64,
}

impl Rewritten {
    /// The rewritten function's constants.
    pub fn consts(&self) -> &[remat_ir::Array] {
        &self.f.consts
    }

    pub fn new(f: ClosedJaxpr, argnums: &[usize], arg_names: &[String], base_flops: u64) -> Rewritten {
        Rewritten { f, argnums: argnums.to_vec(), arg_names: arg_names.to_vec(), base_flops }
    }

    /// Its vjp, whole program and planned peak.
    pub fn evaluate(&self) -> Result<Evaluated, PlanError> {
        let (vjp, program) = remat_ad::value_and_grad_vjp(&self.f.jaxpr, &self.argnums, &self.arg_names)?;
        let residual_bytes = crate::model::saved_bytes(&vjp.residuals);
        let analysis = Analysis { recompute: Vec::new(), residuals: Vec::new(), residual_bytes, recompute_flops: 0 };
        let mut e = Evaluated::measure(analysis, Vec::new(), vjp, program, &self.f.consts, self.base_flops, None)?;
        e.analysis.recompute_flops = e.recompute_flops;
        Ok(e)
    }
}

/// The most units [`Chain::new`] cuts a long function into for the planner.
pub const MAX_UNITS: usize = 64;

/// What a checkpointed segment saves inside itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Keep {
    /// Nothing (`nothing_saveable`): the backward half recomputes the whole segment.
    Nothing,
    /// Its products (`dots_saveable`: `dot_general` and convolution outputs): the backward
    /// half recomputes only the rest.
    Dots,
}

impl Keep {
    pub const ALL: [Keep; 2] = [Keep::Nothing, Keep::Dots];

    pub fn policy(self) -> Policy {
        match self {
            Keep::Nothing => Policy::NothingSaveable,
            Keep::Dots => Policy::DotsSaveable { only_if_no_batch_dims: false },
        }
    }

    pub fn words(self) -> &'static str {
        match self {
            Keep::Nothing => "nothing_saveable",
            Keep::Dots => "dots_saveable",
        }
    }
}

/// Whether `e` is a product `dots_saveable` saves.
fn is_product(e: &remat_ir::Eqn) -> bool {
    matches!(e.primitive, Primitive::DotGeneral { .. } | Primitive::ConvGeneralDilated(_))
}

/// `f` with each of its top-level equation ranges `spans` (`[start, end)`, ascending and
/// disjoint) run as a checkpoint that saves what its [`Keep`] says. A range none of whose
/// values is read after it is left as it is.
pub fn checkpoint_segments(f: &Jaxpr, spans: &[(usize, usize, Keep)]) -> Result<Jaxpr, PlanError> {
    let n = f.eqns.len();
    let mut end = 0;
    for &(a, e, _) in spans {
        if a < end || e <= a || e > n {
            return Err(PlanError::Invalid(format!(
                "segments {spans:?} are not ascending, disjoint ranges of the {n} equations"
            )));
        }
        end = e;
    }
    let last = last_reads(f);
    let mut producer = vec![usize::MAX; f.vars.len()];
    for (i, e) in f.eqns.iter().enumerate() {
        for &o in &e.outvars {
            producer[o.index()] = i;
        }
    }
    let (mut b, mut map) = Builder::with_signature_of(f);
    let mut spans = spans.iter().peekable();
    let mut i = 0;
    while i < n {
        match spans.next_if(|&&(a, _, _)| a == i) {
            Some(&(a, e, keep)) => {
                wrap(&mut b, &mut map, f, (a, e, keep), &producer, &last)?;
                i = e;
            }
            None => {
                b.copy_eqn(f, &f.eqns[i], &mut map);
                i += 1;
            }
        }
    }
    let outs = map.get_all(&f.outvars);
    Ok(b.finish(outs))
}

/// Emits the equations `a..e` of `f` as one `remat2` under `keep`'s policy.
fn wrap(
    b: &mut Builder,
    map: &mut VarMap,
    f: &Jaxpr,
    (a, e, keep): (usize, usize, Keep),
    producer: &[usize],
    last: &[usize],
) -> Result<(), PlanError> {
    let inside = |v: Var| (a..e).contains(&producer[v.index()]);
    let mut seen = vec![false; f.vars.len()];
    let mut ins: Vec<Var> = Vec::new();
    for eqn in &f.eqns[a..e] {
        for atom in &eqn.invars {
            if let Atom::Var(v) = atom {
                if !inside(*v) && !std::mem::replace(&mut seen[v.index()], true) {
                    ins.push(*v);
                }
            }
        }
    }
    let outs: Vec<Var> =
        f.eqns[a..e].iter().flat_map(|q| q.outvars.iter().copied()).filter(|v| last[v.index()] >= e).collect();
    if outs.is_empty() {
        for eqn in &f.eqns[a..e] {
            b.copy_eqn(f, eqn, map);
        }
        return Ok(());
    }
    let mut s = Builder::new();
    let mut inner = VarMap::new(f);
    for &v in &ins {
        let nv = s.invar(f.aval(v).clone());
        inner.set(v, nv);
    }
    for eqn in &f.eqns[a..e] {
        s.copy_eqn(f, eqn, &mut inner);
    }
    let body = s.finish(inner.get_vars(&outs));
    let prim = Primitive::Remat2 {
        jaxpr: Arc::new(body),
        prevent_cse: true,
        differentiated: false,
        policy: Some(keep.policy()),
    };
    let old = b.set_source(Some(f.eqns[a].source.clone()));
    let made = b.bind(prim, map.get_vars(&ins));
    b.set_source(old);
    for (&v, m) in outs.iter().zip(made?) {
        map.set(v, m);
    }
    Ok(())
}

/// Per variable of `f`: the last top-level equation reading it (`f.eqns.len()` for a
/// result of `f`, 0 for a variable nobody reads).
fn last_reads(f: &Jaxpr) -> Vec<usize> {
    let mut last = vec![0; f.vars.len()];
    for (i, e) in f.eqns.iter().enumerate() {
        for a in &e.invars {
            if let Atom::Var(v) = a {
                last[v.index()] = i;
            }
        }
    }
    for a in &f.outvars {
        if let Atom::Var(v) = a {
            last[v.index()] = f.eqns.len();
        }
    }
    last
}

/// A function's top-level equations as a chain of units, with what the segment model
/// needs (see the module docs).
#[derive(Clone, Debug)]
pub struct Chain {
    /// The units' first equations, then the number of equations: unit `u` is the
    /// equations `cuts[u]..cuts[u + 1]`.
    cuts: Vec<usize>,
    /// Prefix sums over the units (`x[w] - x[u]` is the units `u..w`' total): the bytes of
    /// the values they make, the FLOPs of their equations, and the bytes their products
    /// make and those products' FLOPs.
    made: Vec<u64>,
    flops: Vec<u64>,
    dot_made: Vec<u64>,
    dot_flops: Vec<u64>,
    /// `out[u][w - u - 1]`: the bytes the units `u..w` make that an equation after them or
    /// the result reads.
    out: Vec<Vec<u64>>,
}

/// A segmentation of a [`Chain`]: the checkpointed segments as unit ranges `[u, w)` with
/// what each saves, ascending and disjoint (every other unit is kept whole).
pub type Segmentation = Vec<(usize, usize, Keep)>;

/// What [`Chain::solve`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Solution {
    pub segments: Segmentation,
    /// The modelled peak and recompute FLOPs.
    pub peak: u64,
    pub flops: u64,
    /// Whether it is optimal under the model: false only if the Pareto sets were thinned
    /// (more than [`Chain::MAX_PARETO`] points at a boundary).
    pub exact: bool,
}

impl Chain {
    /// The most (bytes kept, FLOPs) points the dynamic program keeps per boundary; beyond,
    /// it keeps an evenly spaced subset and says its answer is not proven optimal.
    pub const MAX_PARETO: usize = 2048;

    /// The chain of `f`'s top-level equations: one unit per equation when there are at most
    /// `max_units`, else `max_units` runs of equations, each ending where the fewest bytes
    /// cross within its share of the program.
    pub fn new(f: &Jaxpr, max_units: usize) -> Chain {
        let n = f.eqns.len();
        let last = last_reads(f);
        let bytes = |v: Var| f.aval(v).size_in_bytes() as u64;
        // crossing[p]: the bytes made before equation p and read at or after it.
        let mut delta = vec![0i128; n + 2];
        for (i, e) in f.eqns.iter().enumerate() {
            for &o in &e.outvars {
                if last[o.index()] > i {
                    delta[i + 1] += bytes(o) as i128;
                    delta[last[o.index()] + 1] -= bytes(o) as i128;
                }
            }
        }
        let mut crossing = vec![0u64; n + 1];
        let mut run = 0i128;
        for (p, c) in crossing.iter_mut().enumerate() {
            run += delta[p];
            *c = run as u64;
        }
        let units = max_units.max(1);
        let mut cuts = vec![0];
        if n <= units {
            cuts.extend(1..=n);
        } else {
            for k in 1..units {
                let (lo, hi) = ((k * n / units).max(cuts[cuts.len() - 1] + 1), ((k + 1) * n / units).min(n));
                if lo < hi {
                    let best = (lo..hi).min_by_key(|&p| (crossing[p], p)).unwrap_or(lo);
                    cuts.push(best);
                }
            }
            cuts.push(n);
        }
        let k = cuts.len() - 1;
        let mut unit_of = vec![0usize; n + 1];
        for u in 0..k {
            for slot in &mut unit_of[cuts[u]..cuts[u + 1]] {
                *slot = u;
            }
        }
        unit_of[n] = k;
        let mut made = vec![0u64; k];
        let mut flops = vec![0u64; k];
        let mut dot_made = vec![0u64; k];
        let mut dot_flops = vec![0u64; k];
        // reach[pu][w]: the bytes made in unit pu and read at or after unit w's start,
        // accumulated over w by a difference array.
        let mut reach = vec![vec![0i128; k + 2]; k];
        for (i, e) in f.eqns.iter().enumerate() {
            let u = unit_of[i];
            flops[u] += eqn_flops(f, e);
            if is_product(e) {
                dot_flops[u] += eqn_flops(f, e);
                dot_made[u] += e.outvars.iter().map(|&o| bytes(o)).sum::<u64>();
            }
            for &o in &e.outvars {
                made[u] += bytes(o);
                let lu = unit_of[last[o.index()]];
                // Read after the segment [.., w) exactly when w <= lu, for w in (u, lu].
                if lu > u {
                    reach[u][u + 1] += bytes(o) as i128;
                    reach[u][lu + 1] -= bytes(o) as i128;
                }
            }
        }
        for r in &mut reach {
            for w in 1..r.len() {
                r[w] += r[w - 1];
            }
        }
        let out = (0..k)
            .map(|u| (u + 1..=k).map(|w| reach[u..w].iter().map(|r| r[w] as u64).sum()).collect::<Vec<u64>>())
            .collect();
        let prefix = |per_unit: Vec<u64>| -> Vec<u64> {
            std::iter::once(0)
                .chain(per_unit.iter().scan(0u64, |sum, &x| {
                    *sum += x;
                    Some(*sum)
                }))
                .collect()
        };
        Chain {
            cuts,
            made: prefix(made),
            flops: prefix(flops),
            dot_made: prefix(dot_made),
            dot_flops: prefix(dot_flops),
            out,
        }
    }

    /// How many units the chain has.
    pub fn units(&self) -> usize {
        self.made.len() - 1
    }

    /// The equation ranges of the segments `s` (unit ranges).
    pub fn spans(&self, s: &[(usize, usize, Keep)]) -> Vec<(usize, usize, Keep)> {
        s.iter().map(|&(u, w, keep)| (self.cuts[u], self.cuts[w], keep)).collect()
    }

    /// A segment's (bytes kept by the forward half, recompute FLOPs): its boundary and,
    /// saving products, their outputs (counted even where they are in the boundary: an
    /// upper bound); its FLOPs less, saving products, theirs.
    fn segment(&self, u: usize, w: usize, keep: Keep) -> (u64, u64) {
        let flops = self.flops[w] - self.flops[u];
        match keep {
            Keep::Nothing => (self.out(u, w), flops),
            Keep::Dots => (
                self.out(u, w) + (self.dot_made[w] - self.dot_made[u]),
                flops - (self.dot_flops[w] - self.dot_flops[u]),
            ),
        }
    }

    fn out(&self, u: usize, w: usize) -> u64 {
        self.out[u][w - u - 1]
    }

    fn made_in(&self, u: usize, w: usize) -> u64 {
        self.made[w] - self.made[u]
    }

    /// The modelled (peak, recompute FLOPs) of the segmentation `s`.
    pub fn cost(&self, s: &[(usize, usize, Keep)]) -> (u64, u64) {
        let (mut kept, mut peak, mut flops) = (0u64, 0u64, 0u64);
        let mut u = 0;
        let mut segs = s.iter().peekable();
        while u < self.units() {
            match segs.next_if(|&&(a, _, _)| a == u) {
                Some(&(a, w, keep)) => {
                    peak = peak.max(kept + self.made_in(a, w));
                    let (k, f) = self.segment(a, w, keep);
                    kept += k;
                    flops += f;
                    u = w;
                }
                None => {
                    kept += self.made_in(u, u + 1);
                    u += 1;
                }
            }
        }
        (peak.max(kept), flops)
    }

    /// The segmentations one change away from `s`: a segment saving the other thing, one
    /// unit longer or shorter at either end, split in two, merged with the next one when
    /// they touch, or dropped. What the planner's local refinement measures (`rewrites.rs`),
    /// where the model and the JIT's peak disagree.
    pub fn neighbours(&self, s: &[(usize, usize, Keep)]) -> Vec<Segmentation> {
        let mut out: Vec<Segmentation> = Vec::new();
        let mut push = |i: usize, with: &[(usize, usize, Keep)]| {
            let mut n: Segmentation = s[..i].to_vec();
            n.extend_from_slice(with);
            n.extend_from_slice(&s[(i + 1).min(s.len())..]);
            if n.as_slice() != s && !out.contains(&n) {
                out.push(n);
            }
        };
        for (i, &(u, w, keep)) in s.iter().enumerate() {
            let other = match keep {
                Keep::Nothing => Keep::Dots,
                Keep::Dots => Keep::Nothing,
            };
            push(i, &[(u, w, other)]);
            let before = if i == 0 { 0 } else { s[i - 1].1 };
            let after = s.get(i + 1).map_or(self.units(), |n| n.0);
            if u > before {
                push(i, &[(u - 1, w, keep)]);
            }
            if w < after {
                push(i, &[(u, w + 1, keep)]);
            }
            if w - u >= 2 {
                push(i, &[(u + 1, w, keep)]);
                push(i, &[(u, w - 1, keep)]);
                let m = u + (w - u) / 2;
                push(i, &[(u, m, keep), (m, w, keep)]);
            }
            push(i, &[]);
        }
        for i in 0..s.len().saturating_sub(1) {
            if s[i].1 == s[i + 1].0 {
                let mut n: Segmentation = s[..i].to_vec();
                n.push((s[i].0, s[i + 1].1, s[i].2));
                n.extend_from_slice(&s[i + 2..]);
                if !out.contains(&n) {
                    out.push(n);
                }
            }
        }
        out
    }

    /// The segmentation of least modelled recompute FLOPs whose modelled peak is at most
    /// `budget`, its segments saving what one of `keeps` says, or `None` if none fits.
    pub fn solve(&self, budget: u64, keeps: &[Keep]) -> Option<Solution> {
        let k = self.units();
        // Per boundary: the Pareto points (bytes kept, FLOPs), with back pointers.
        let mut at: Vec<Vec<Label>> = vec![Vec::new(); k + 1];
        at[0].push(Label { kept: 0, flops: 0, peak: 0, from: usize::MAX, prev: 0, segment: None });
        let mut exact = true;
        for u in 0..k {
            if at[u].is_empty() {
                continue;
            }
            let labels = pareto(std::mem::take(&mut at[u]), &mut exact);
            for (li, l) in labels.iter().enumerate() {
                // Keep unit u.
                let kept = l.kept + self.made_in(u, u + 1);
                if kept <= budget {
                    let peak = l.peak.max(kept);
                    at[u + 1].push(Label { kept, flops: l.flops, peak, from: u, prev: li, segment: None });
                }
                // Or checkpoint units u..w, saving nothing or its products.
                for (w, next) in at.iter_mut().enumerate().skip(u + 1) {
                    let made = self.made_in(u, w);
                    if l.kept + made > budget {
                        break;
                    }
                    for &keep in keeps {
                        let (seg_kept, seg_flops) = self.segment(u, w, keep);
                        let kept = l.kept + seg_kept;
                        if kept > budget {
                            continue;
                        }
                        let (flops, peak) = (l.flops + seg_flops, l.peak.max(l.kept + made).max(kept));
                        next.push(Label { kept, flops, peak, from: u, prev: li, segment: Some(keep) });
                    }
                }
            }
            at[u] = labels;
        }
        let end = pareto(std::mem::take(&mut at[k]), &mut exact);
        let best = (0..end.len()).min_by_key(|&i| (end[i].flops, end[i].peak, i))?;
        let (flops, peak) = (end[best].flops, end[best].peak);
        at[k] = end;
        let mut segments = Vec::new();
        let (mut w, mut i) = (k, best);
        while w > 0 {
            let l = at[w][i];
            if let Some(keep) = l.segment {
                segments.push((l.from, w, keep));
            }
            (w, i) = (l.from, l.prev);
        }
        segments.reverse();
        Some(Solution { segments, peak, flops, exact })
    }
}

/// A partial segmentation up to a unit boundary, in [`Chain::solve`].
#[derive(Clone, Copy, Debug)]
struct Label {
    kept: u64,
    flops: u64,
    /// The modelled peak so far (at most the budget).
    peak: u64,
    /// The boundary it extends and the index of that label there.
    from: usize,
    prev: usize,
    /// The segment it extends `from` by, saving what (else it keeps one unit).
    segment: Option<Keep>,
}

/// The labels no other label dominates (no more bytes kept at no more FLOPs; of equal
/// ones, the lower peak so far), thinned to [`Chain::MAX_PARETO`] if there are more (then
/// `exact` becomes false). Dominance is sound: every completion that fits after the
/// dominated label fits after the dominating one, at no more FLOPs.
fn pareto(mut labels: Vec<Label>, exact: &mut bool) -> Vec<Label> {
    labels.sort_by_key(|l| (l.kept, l.flops, l.peak));
    let mut front: Vec<Label> = Vec::new();
    for l in labels {
        if front.last().is_none_or(|f| l.flops < f.flops) {
            front.push(l);
        }
    }
    if front.len() > Chain::MAX_PARETO {
        *exact = false;
        let step = front.len() as f64 / Chain::MAX_PARETO as f64;
        front = (0..Chain::MAX_PARETO).map(|i| front[(i as f64 * step) as usize]).collect();
    }
    front
}
