//! The contraction order: opt_einsum 3.4's path optimizers (`optimal`, branch and bound,
//! `greedy`, and `auto`'s choice among them by operand count), with its cost model and its
//! tie-breaking, so an n-ary einsum contracts in the order JAX's does.
//!
//! A tensor's indices are a bit set (`Ix`, bit `b` for the spec's `b`-th letter). A path is
//! opt_einsum's linear form: each step names the positions, in the current operand list,
//! of the operands it contracts; the result goes to the end of the list. The searches
//! work on SSA ids (every tensor ever made gets the next id) and convert at the end
//! (`ssa_to_linear`). JAX passes no memory limit, so none is modelled.
//!
//! Costs are opt_einsum's: a pairwise contraction over the indices `either` costs
//! `size(either) * (1 + [some index is summed away])` (`flop_count`); the heuristic that
//! orders candidates is the memory a contraction frees (`size12 - size1 - size2`). Costs
//! are exact integers, saturating at `u128::MAX` (Python's are unbounded).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::pyset::PySet;

/// A set of indices: bit `b` is the spec's `b`-th distinct letter.
pub(crate) type Ix = u128;

/// The most distinct letters an einsum may have (the bits of an [`Ix`]).
pub(crate) const MAX_INDICES: usize = 128;

/// How the contraction order is chosen: `jnp.einsum`'s `optimize=`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Optimize {
    /// `'auto'` (JAX's default): `optimal` for up to 4 operands, branch and bound over
    /// every candidate for 5-6, over the best 2 for 7-8, the best 1 for 9-14, `greedy`
    /// above.
    #[default]
    Auto,
    /// `'optimal'` (or `True`): every pairwise order, depth first, the cheapest kept.
    Optimal,
    /// `'greedy'`: Hadamard products first, then the pair that frees the most memory, then
    /// outer products smallest first.
    Greedy,
    /// `'branch-all'`: depth-first search over every candidate at each step, the
    /// candidates ranked by the memory they free and cut by the best path so far.
    BranchAll,
    /// `'branch-2'`: as `BranchAll`, exploring the best 2 candidates at each step.
    Branch2,
    /// `'branch-1'`: as `BranchAll`, exploring only the best candidate at each step.
    Branch1,
    /// `False`: no optimization: operands 0 and 1 are contracted, the result goes to the
    /// end, and again, until one is left.
    Unoptimized,
}

pub(crate) type Path = Vec<Vec<usize>>;

type Flops = u128;
const INF: Flops = Flops::MAX;

struct Sizes<'a>(&'a [usize]);

impl Sizes<'_> {
    /// `compute_size_by_dict`: the product of the indices' sizes.
    fn of(&self, ix: Ix) -> Flops {
        let mut size: Flops = 1;
        let mut bits = ix;
        while bits != 0 {
            let b = bits.trailing_zeros() as usize;
            size = size.saturating_mul(self.0[b] as Flops);
            bits &= bits - 1;
        }
        size
    }

    /// `flop_count(indices, inner, num_terms)`.
    fn flops(&self, ix: Ix, inner: bool, num_terms: usize) -> Flops {
        let factor = (num_terms.saturating_sub(1)).max(1) + inner as usize;
        self.of(ix).saturating_mul(factor as Flops)
    }
}

/// The path `optimize` chooses for operands with indices `inputs`, result `output` and
/// index sizes `sizes` (indexed by bit).
pub(crate) fn find_path(inputs: &[Ix], output: Ix, sizes: &[usize], optimize: Optimize) -> Path {
    let n = inputs.len();
    if n <= 2 {
        return vec![(0..n).collect()];
    }
    let sizes = Sizes(sizes);
    match optimize {
        Optimize::Unoptimized => vec![vec![0, 1]; n - 1],
        Optimize::Optimal => optimal(inputs, output, &sizes),
        Optimize::Greedy => greedy(inputs, output, &sizes),
        Optimize::BranchAll => branch(inputs, output, &sizes, None),
        Optimize::Branch2 => branch(inputs, output, &sizes, Some(2)),
        Optimize::Branch1 => branch(inputs, output, &sizes, Some(1)),
        Optimize::Auto => match n {
            0..=4 => optimal(inputs, output, &sizes),
            5..=6 => branch(inputs, output, &sizes, None),
            7..=8 => branch(inputs, output, &sizes, Some(2)),
            9..=14 => branch(inputs, output, &sizes, Some(1)),
            _ => greedy(inputs, output, &sizes),
        },
    }
}

/// `ssa_to_linear`: SSA ids to positions in the shrinking operand list.
fn ssa_to_linear(ssa_path: &[Vec<usize>]) -> Path {
    let n: usize = ssa_path.iter().map(Vec::len).sum::<usize>() - ssa_path.len() + 1;
    let mut ids: Vec<usize> = (0..n).collect();
    let mut path = Vec::with_capacity(ssa_path.len());
    for (next, step) in (n..).zip(ssa_path) {
        let mut con: Vec<usize> = step.iter().map(|s| ids.partition_point(|&x| x < *s)).collect();
        con.sort_unstable();
        for &j in con.iter().rev() {
            ids.remove(j);
        }
        ids.push(next);
        path.push(con);
    }
    path
}

/// `calc_k12_flops`: the indices of `i` and `j`'s contraction (those the output or another
/// remaining tensor has) and its cost.
fn k12_flops(inputs: &[Ix], output: Ix, remaining: &PySet, i: usize, j: usize, sizes: &Sizes) -> (Ix, Flops) {
    let (k1, k2) = (inputs[i], inputs[j]);
    let either = k1 | k2;
    let shared = k1 & k2;
    let keep = remaining.iter().filter(|&r| r != i && r != j).fold(output, |acc, r| acc | inputs[r]);
    (either & keep, sizes.flops(either, shared & !keep != 0, 2))
}

/// `optimal`: depth first over every pair at every step, in the order Python's
/// `itertools.combinations` walks the `remaining` set; a branch is cut as soon as it
/// costs at least the best complete path found so far, so of equally cheap paths the
/// first found wins. `(k1, k2) -> (k12, flops)` is cached by index sets, as opt_einsum's is.
fn optimal(inputs: &[Ix], output: Ix, sizes: &Sizes) -> Path {
    struct Search<'a> {
        output: Ix,
        sizes: &'a Sizes<'a>,
        best_flops: Flops,
        best_path: Vec<Vec<usize>>,
        cache: HashMap<(Ix, Ix), (Ix, Flops)>,
    }
    impl Search<'_> {
        fn iterate(&mut self, path: &mut Vec<Vec<usize>>, inputs: &mut Vec<Ix>, remaining: &PySet, flops: Flops) {
            if remaining.len() == 1 {
                self.best_flops = flops;
                self.best_path = path.clone();
                return;
            }
            for (a, b) in remaining.pairs() {
                let (i, j) = (a.min(b), a.max(b));
                let key = (inputs[i], inputs[j]);
                let (k12, flops12) = match self.cache.get(&key) {
                    Some(&hit) => hit,
                    None => {
                        let r = k12_flops(inputs, self.output, remaining, i, j, self.sizes);
                        self.cache.insert(key, r);
                        r
                    }
                };
                let new_flops = flops.saturating_add(flops12);
                if new_flops >= self.best_flops {
                    continue;
                }
                let next = remaining.replace_pair(i, j, inputs.len());
                path.push(vec![i, j]);
                inputs.push(k12);
                self.iterate(path, inputs, &next, new_flops);
                inputs.pop();
                path.pop();
            }
        }
    }
    let mut search =
        Search { output, sizes, best_flops: INF, best_path: vec![(0..inputs.len()).collect()], cache: HashMap::new() };
    search.iterate(&mut Vec::new(), &mut inputs.to_vec(), &PySet::range(inputs.len()), 0);
    ssa_to_linear(&search.best_path)
}

/// `BranchBound(nbranch)` with opt_einsum's defaults (cut-off factor 4, minimize flops,
/// memory-removed heuristic): at each step the candidate pairs (those sharing an index,
/// or all pairs if none does) are ranked by the heuristic and the best `nbranch` explored.
/// A candidate is dropped if it cannot beat the best path's `(flops, size)`, or if its
/// flops exceed 4 times the best seen so far at the same depth; that record is updated
/// as candidates are assessed, in Python's set order.
fn branch(inputs: &[Ix], output: Ix, sizes: &Sizes, nbranch: Option<usize>) -> Path {
    struct Candidate {
        cost: i128,
        flops12: Flops,
        new_flops: Flops,
        new_size: Flops,
        pair: (usize, usize),
        k12: Ix,
    }
    struct Search<'a> {
        output: Ix,
        sizes: &'a Sizes<'a>,
        nbranch: Option<usize>,
        best_flops: Flops,
        best_size: Flops,
        best_path: Vec<Vec<usize>>,
        best_progress: HashMap<usize, Flops>,
        cache: HashMap<(Ix, Ix), (Ix, Flops)>,
    }
    impl Search<'_> {
        fn assess(
            &mut self,
            inputs: &[Ix],
            remaining: &PySet,
            flops: Flops,
            size: Flops,
            i: usize,
            j: usize,
        ) -> Option<Candidate> {
            let key = (inputs[i], inputs[j]);
            let (k12, flops12) = match self.cache.get(&key) {
                Some(&hit) => hit,
                None => {
                    let r = k12_flops(inputs, self.output, remaining, i, j, self.sizes);
                    self.cache.insert(key, r);
                    r
                }
            };
            let size12 = self.sizes.of(k12);
            let new_flops = flops.saturating_add(flops12);
            let new_size = size.max(size12);
            if (new_flops, new_size) >= (self.best_flops, self.best_size) {
                return None;
            }
            let progress = self.best_progress.entry(inputs.len()).or_insert(INF);
            if new_flops < *progress {
                *progress = new_flops;
            } else if new_flops > progress.saturating_mul(4) {
                return None;
            }
            let signed = |x: Flops| i128::try_from(x).unwrap_or(i128::MAX);
            let cost = signed(size12) - signed(self.sizes.of(inputs[i])) - signed(self.sizes.of(inputs[j]));
            Some(Candidate { cost, flops12, new_flops, new_size, pair: (i, j), k12 })
        }

        fn iterate(
            &mut self,
            path: &mut Vec<Vec<usize>>,
            inputs: &mut Vec<Ix>,
            remaining: &PySet,
            flops: Flops,
            size: Flops,
        ) {
            if remaining.len() == 1 {
                self.best_size = size;
                self.best_flops = flops;
                self.best_path = path.clone();
                return;
            }
            let pairs: Vec<(usize, usize)> = remaining.pairs().into_iter().map(|(a, b)| (a.min(b), a.max(b))).collect();
            let mut candidates = Vec::new();
            for &(i, j) in &pairs {
                // Outer products are considered only when nothing else is left.
                if inputs[i] & inputs[j] == 0 {
                    continue;
                }
                candidates.extend(self.assess(inputs, remaining, flops, size, i, j));
            }
            if candidates.is_empty() {
                for &(i, j) in &pairs {
                    candidates.extend(self.assess(inputs, remaining, flops, size, i, j));
                }
            }
            // Python pops them off a heap of tuples; the pair makes every tuple distinct.
            candidates.sort_by_key(|c| (c.cost, c.flops12, c.new_flops, c.new_size, c.pair));
            for c in candidates.into_iter().take(self.nbranch.unwrap_or(usize::MAX)) {
                let (i, j) = c.pair;
                let next = remaining.replace_pair(i, j, inputs.len());
                path.push(vec![i, j]);
                inputs.push(c.k12);
                self.iterate(path, inputs, &next, c.new_flops, c.new_size);
                inputs.pop();
                path.pop();
            }
        }
    }
    let mut search = Search {
        output,
        sizes,
        nbranch,
        best_flops: INF,
        best_size: INF,
        best_path: Vec::new(),
        best_progress: HashMap::new(),
        cache: HashMap::new(),
    };
    search.iterate(&mut Vec::new(), &mut inputs.to_vec(), &PySet::range(inputs.len()), 0, 0);
    ssa_to_linear(&search.best_path)
}

/// `greedy` (`ssa_greedy_optimize`): contract tensors with equal index sets first
/// (Hadamard products), then repeatedly the candidate pair that frees the most memory
/// (ties: the lower SSA ids), considering only pairs that share a summed index; finally
/// outer products, smallest first. Indices every input has count as output indices.
fn greedy(inputs: &[Ix], output: Ix, sizes: &Sizes) -> Path {
    let output = output | inputs.iter().fold(Ix::MAX, |acc, &k| acc & k);
    let mut next_id = inputs.len();
    let mut ssa_path: Vec<Vec<usize>> = Vec::new();
    // `remaining`: index set -> SSA id (a dict keyed by frozensets in Python).
    let mut remaining: HashMap<Ix, usize> = HashMap::new();
    let mut order: Vec<Ix> = Vec::new();
    for (id, &key) in inputs.iter().enumerate() {
        if let Some(&old) = remaining.get(&key) {
            ssa_path.push(vec![old, id]);
            remaining.insert(key, next_id);
            next_id += 1;
        } else {
            remaining.insert(key, id);
            order.push(key);
        }
    }
    let dims = |ix: Ix| (0..MAX_INDICES).filter(move |&b| ix >> b & 1 == 1);
    let mut dim_to_keys: HashMap<usize, Vec<Ix>> = HashMap::new();
    for &key in &order {
        for d in dims(key & !output) {
            let keys = dim_to_keys.entry(d).or_default();
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    // Summed indices shared by at least 2 and at least 3 remaining tensors.
    let mut ref2: Ix = 0;
    let mut ref3: Ix = 0;
    for (&d, keys) in &dim_to_keys {
        if keys.len() >= 2 {
            ref2 |= 1 << d;
        }
        if keys.len() >= 3 {
            ref3 |= 1 << d;
        }
    }
    let mut footprints: HashMap<Ix, Flops> = remaining.keys().map(|&k| (k, sizes.of(k))).collect();

    // A candidate: ((memory freed, larger id, smaller id), k1, k2, k12), k1 the lower id's.
    type Candidate = ((i128, usize, usize), Ix, Ix, Ix);
    let candidate = |remaining: &HashMap<Ix, usize>,
                     footprints: &HashMap<Ix, Flops>,
                     ref2: Ix,
                     ref3: Ix,
                     k1: Ix,
                     k2: Ix|
     -> Candidate {
        let either = k1 | k2;
        let two = k1 & k2;
        let one = either & !two;
        let k12 = (either & output) | (two & ref3) | (one & ref2);
        let signed = |x: Flops| i128::try_from(x).unwrap_or(i128::MAX);
        let cost = signed(sizes.of(k12)) - signed(footprints[&k1]) - signed(footprints[&k2]);
        let (id1, id2) = (remaining[&k1], remaining[&k2]);
        if id1 > id2 {
            ((cost, id1, id2), k2, k1, k12)
        } else {
            ((cost, id2, id1), k1, k2, k12)
        }
    };
    let mut queue: BinaryHeap<Reverse<Candidate>> = BinaryHeap::new();
    let mut dim_list: Vec<usize> = dim_to_keys.keys().copied().collect();
    dim_list.sort_unstable();
    for d in dim_list {
        let mut keys = dim_to_keys[&d].clone();
        keys.sort_by_key(|k| remaining[k]);
        for (a, &k1) in keys.iter().enumerate().take(keys.len().saturating_sub(1)) {
            let best = keys[a + 1..]
                .iter()
                .map(|&k2| candidate(&remaining, &footprints, ref2, ref3, k1, k2))
                .min()
                .expect("at least one partner");
            queue.push(Reverse(best));
        }
    }
    while let Some(Reverse((_, k1, k2, k12))) = queue.pop() {
        if !remaining.contains_key(&k1) || !remaining.contains_key(&k2) {
            continue;
        }
        let id1 = remaining.remove(&k1).expect("present");
        let id2 = remaining.remove(&k2).expect("present");
        for (k, _) in [(k1, id1), (k2, id2)] {
            for d in dims(k & !output) {
                if let Some(keys) = dim_to_keys.get_mut(&d) {
                    keys.retain(|&x| x != k);
                }
            }
        }
        ssa_path.push(vec![id1, id2]);
        if let Some(&old) = remaining.get(&k12) {
            ssa_path.push(vec![old, next_id]);
            next_id += 1;
        } else {
            for d in dims(k12 & !output) {
                let keys = dim_to_keys.entry(d).or_default();
                if !keys.contains(&k12) {
                    keys.push(k12);
                }
            }
        }
        remaining.insert(k12, next_id);
        next_id += 1;
        // `_update_ref_counts(..., k1 | k2 - output)`: Python reads it as `k1 | (k2 - output)`.
        for d in dims(k1 | (k2 & !output)) {
            let count = dim_to_keys.get(&d).map_or(0, Vec::len);
            let bit: Ix = 1 << d;
            match count {
                0 | 1 => {
                    ref2 &= !bit;
                    ref3 &= !bit;
                }
                2 => {
                    ref2 |= bit;
                    ref3 &= !bit;
                }
                _ => {
                    ref2 |= bit;
                    ref3 |= bit;
                }
            }
        }
        footprints.insert(k12, sizes.of(k12));
        let mut partners: Vec<Ix> = Vec::new();
        for d in dims(k12) {
            for &k in dim_to_keys.get(&d).map(Vec::as_slice).unwrap_or(&[]) {
                if k != k12 && !partners.contains(&k) {
                    partners.push(k);
                }
            }
        }
        if let Some(best) = partners.iter().map(|&k2| candidate(&remaining, &footprints, ref2, ref3, k12, k2)).min() {
            queue.push(Reverse(best));
        }
    }
    // Outer products, the smallest (by output size, then id) first.
    let mut finals: BinaryHeap<Reverse<(Flops, usize, Ix)>> =
        remaining.iter().map(|(&key, &id)| Reverse((sizes.of(key & output), id, key))).collect();
    let Reverse((_, mut id1, mut k1)) = finals.pop().expect("a tensor is left");
    while let Some(Reverse((_, id2, k2))) = finals.pop() {
        ssa_path.push(vec![id1.min(id2), id1.max(id2)]);
        let k12 = (k1 | k2) & output;
        finals.push(Reverse((sizes.of(k12), next_id, k12)));
        next_id += 1;
        let Reverse((_, i, k)) = finals.pop().expect("just pushed");
        (id1, k1) = (i, k);
    }
    ssa_to_linear(&ssa_path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssa_paths_become_linear_paths() {
        // opt_einsum's docstring examples.
        assert_eq!(ssa_to_linear(&[vec![0, 3], vec![2, 4], vec![1, 5]]), vec![vec![0, 3], vec![1, 2], vec![0, 1]]);
    }

    #[test]
    fn the_docstring_examples_choose_opt_einsums_paths() {
        // isets = [set('abd'), set('ac'), set('bdc')], output '', sizes a=1 b=2 c=3 d=4:
        // optimal and greedy both give [(0, 2), (0, 1)].
        let (a, b, c, d) = (1u128, 2u128, 4u128, 8u128);
        let inputs = [a | b | d, a | c, b | d | c];
        let sizes = [1, 2, 3, 4];
        for opt in [Optimize::Optimal, Optimize::Greedy, Optimize::BranchAll, Optimize::Branch1] {
            assert_eq!(find_path(&inputs, 0, &sizes, opt), vec![vec![0, 2], vec![0, 1]], "{opt:?}");
        }
        assert_eq!(find_path(&inputs, 0, &sizes, Optimize::Unoptimized), vec![vec![0, 1], vec![0, 1]]);
    }
}
