//! The exact search's enumeration: every distinct recompute set, each once, without
//! visiting the subsets of the candidates that give none new.
//!
//! A plan's recompute set `R` (`Model::analyze`) is what the backward half recomputes: the
//! unsaved candidates reachable from the values it reads (`Model::needed`'s producers, the
//! *roots*) through the known inputs of unsaved candidates. So a set `R` of candidates is
//! the recompute set of some plan exactly when it is *closed*: every member is reachable
//! from a root in `R` through members of `R` (then the plan saving everything but `R` has
//! recompute set `R`; and every plan's recompute set is closed by construction). The
//! 2^k subsets of `k` candidates give far fewer closed sets whenever a candidate is
//! reachable only through another one (a value read only by the forward half's next
//! equation), and deciding the others is then irrelevant.
//!
//! The enumeration is a depth-first search over the *frontier* of a closed set (the
//! candidates one edge away from it, or roots, undecided yet): take the first undecided
//! frontier candidate and either exclude it for this branch, or add it (and its own
//! candidate inputs to the frontier). A branch ends when its frontier is decided, and its
//! set is closed. Two leaves differ in one decision, so they differ in one member: each
//! closed set is found exactly once, and every one is (follow its members' decisions).
//! Every branch point has two children that both end in leaves, so the search visits
//! fewer than twice as many nodes as it finds sets, and stops as soon as it has found one
//! more than it may return: its time does not depend on the number of candidates beyond
//! the sets it finds.

use crate::model::Model;

/// Every closed recompute set of `model` (see the module docs), each as its equations
/// ascending, in the order of the subsets that first give them when the subsets are
/// counted down from "save every candidate" (bit `j` of a subset saving the `j`th relevant
/// candidate): by increasing highest member, as the subsets' masks `!R` decrease. `None` if
/// there are more than `max_sets`.
pub fn recompute_sets(model: &Model, max_sets: usize) -> Option<Vec<Vec<usize>>> {
    let n = model.body().eqns.len();
    let mut search = Search {
        inputs: (0..n).map(|e| if model.is_candidate(e) { candidate_inputs(model, e) } else { Vec::new() }).collect(),
        in_r: vec![false; n],
        excluded: vec![false; n],
        frontier: model.roots(),
        found: Vec::new(),
        max_sets,
    };
    if !search.run() {
        return None;
    }
    let mut sets = search.found;
    // A closed set `R` first appears at the subset saving everything but `R` (any subset
    // giving `R` leaves `R` unsaved, so its mask is at most `!R`'s): counting masks down
    // orders the sets by `!R` decreasing, that is by `R`'s own mask increasing, which
    // compares the highest member where two sets differ.
    sets.sort_by(|x, y| x.iter().rev().cmp(y.iter().rev()));
    Some(sets)
}

/// The candidates making the known inputs of candidate `e`, each once, in operand order.
fn candidate_inputs(model: &Model, e: usize) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    for a in &model.body().eqns[e].invars {
        let remat_ir::Atom::Var(u) = a else { continue };
        if !model.is_known(*u) {
            continue;
        }
        if let Some(p) = model.producer(*u).filter(|&p| model.is_candidate(p)) {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

struct Search {
    /// Per equation of the body: the candidates making its known inputs.
    inputs: Vec<Vec<usize>>,
    in_r: Vec<bool>,
    excluded: Vec<bool>,
    /// The candidates met so far on this branch, in the order met (decided or not).
    frontier: Vec<usize>,
    found: Vec<Vec<usize>>,
    max_sets: usize,
}

/// A branch point of the search: the frontier's `pos`th candidate `x`, excluded first, then
/// added (the frontier was `len` long before its inputs joined it).
struct Branch {
    pos: usize,
    x: usize,
    added: bool,
    len: usize,
}

impl Search {
    /// Finds every closed set (depth first, with an explicit stack: a program's candidates
    /// may be many thousands deep); false once more than `max_sets` were found.
    fn run(&mut self) -> bool {
        let mut branches: Vec<Branch> = Vec::new();
        let mut pos = 0;
        loop {
            while pos < self.frontier.len() && (self.in_r[self.frontier[pos]] || self.excluded[self.frontier[pos]]) {
                pos += 1;
            }
            if let Some(&x) = self.frontier.get(pos) {
                self.excluded[x] = true;
                branches.push(Branch { pos, x, added: false, len: 0 });
                pos += 1;
                continue;
            }
            // A leaf: the frontier is decided and the set closed.
            if self.found.len() == self.max_sets {
                return false;
            }
            self.found.push((0..self.in_r.len()).filter(|&e| self.in_r[e]).collect());
            // Back to the deepest branch point whose second branch is still to take.
            loop {
                let Some(b) = branches.last_mut() else { return true };
                if b.added {
                    self.frontier.truncate(b.len);
                    self.in_r[b.x] = false;
                    branches.pop();
                    continue;
                }
                let x = b.x;
                self.excluded[x] = false;
                self.in_r[x] = true;
                b.added = true;
                b.len = self.frontier.len();
                pos = b.pos + 1;
                for k in 0..self.inputs[x].len() {
                    let p = self.inputs[x][k];
                    if !self.in_r[p] && !self.excluded[p] {
                        self.frontier.push(p);
                    }
                }
                break;
            }
        }
    }
}
