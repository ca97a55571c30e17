//! `PySet`: CPython's `set` of small non-negative ints, slot for slot, so that iterating
//! one visits its elements in the order Python does.
//!
//! opt_einsum's `optimal` and branch-and-bound searches walk
//! `itertools.combinations(remaining, 2)` over a `set` of tensor ids, and the walk's order
//! decides ties (the first of two equally cheap paths wins) and which candidates the
//! branch-and-bound cut-off sees first. That order is the order of the set's hash table,
//! which depends on how the set was built: `set(range(n))`, then `(s - {i, j}) | {k}` at
//! every step. This module reproduces CPython 3.11's `Objects/setobject.c` for those
//! operations (an int hashes to itself; open addressing with 9 linear probes, then
//! perturbed jumps; deleted slots become dummies; the table grows to 4x `used` when it is
//! 3/5 full; `set_merge` copies a same-sized table verbatim), and nothing else.

const MIN_SIZE: usize = 8;
const LINEAR_PROBES: usize = 9;
const PERTURB_SHIFT: u32 = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Unused,
    Dummy,
    Active(usize),
}

/// A CPython `set` of ints, with its table laid out as CPython lays it out.
#[derive(Clone, Debug)]
pub(crate) struct PySet {
    table: Vec<Slot>,
    /// Active and dummy slots.
    fill: usize,
    /// Active slots.
    used: usize,
}

impl PySet {
    /// `set()`.
    pub(crate) fn new() -> PySet {
        PySet { table: vec![Slot::Unused; MIN_SIZE], fill: 0, used: 0 }
    }

    /// `set(range(n))`: `n` insertions in order.
    pub(crate) fn range(n: usize) -> PySet {
        let mut s = PySet::new();
        for i in 0..n {
            s.add(i);
        }
        s
    }

    fn mask(&self) -> usize {
        self.table.len() - 1
    }

    pub(crate) fn len(&self) -> usize {
        self.used
    }

    /// The elements in iteration order (table order).
    pub(crate) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.table.iter().filter_map(|s| match s {
            Slot::Active(k) => Some(*k),
            _ => None,
        })
    }

    pub(crate) fn contains(&self, key: usize) -> bool {
        self.iter().any(|k| k == key)
    }

    /// The probe sequence of `set_add_entry` / `set_lookkey` for `hash` in a table of
    /// `mask + 1` slots: runs of up to 10 consecutive slots, then a perturbed jump.
    fn probe(mask: usize, hash: usize) -> impl Iterator<Item = usize> {
        let mut i = hash & mask;
        let mut perturb = hash;
        let mut run = 0usize;
        let mut run_len = if i + LINEAR_PROBES <= mask { LINEAR_PROBES + 1 } else { 1 };
        std::iter::from_fn(move || {
            if run == run_len {
                perturb >>= PERTURB_SHIFT;
                i = (i.wrapping_mul(5).wrapping_add(1).wrapping_add(perturb)) & mask;
                run = 0;
                run_len = if i + LINEAR_PROBES <= mask { LINEAR_PROBES + 1 } else { 1 };
            }
            let slot = i + run;
            run += 1;
            Some(slot)
        })
    }

    /// `set_add_entry`: the first dummy met is reused if the key is absent.
    pub(crate) fn add(&mut self, key: usize) {
        let mut free = None;
        for slot in PySet::probe(self.mask(), key) {
            match self.table[slot] {
                Slot::Active(k) if k == key => return,
                Slot::Active(_) => {}
                Slot::Dummy => {
                    free.get_or_insert(slot);
                }
                Slot::Unused => {
                    if let Some(f) = free {
                        self.table[f] = Slot::Active(key);
                        self.used += 1;
                        return;
                    }
                    self.table[slot] = Slot::Active(key);
                    self.fill += 1;
                    self.used += 1;
                    if self.fill * 5 >= self.mask() * 3 {
                        self.resize(if self.used > 50_000 { self.used * 2 } else { self.used * 4 });
                    }
                    return;
                }
            }
        }
    }

    /// `set_discard_entry`: the slot becomes a dummy.
    pub(crate) fn discard(&mut self, key: usize) {
        for slot in PySet::probe(self.mask(), key) {
            match self.table[slot] {
                Slot::Active(k) if k == key => {
                    self.table[slot] = Slot::Dummy;
                    self.used -= 1;
                    return;
                }
                Slot::Unused => return,
                _ => {}
            }
        }
    }

    /// `set_insert_clean`: into a table without dummies, the key known absent.
    fn insert_clean(table: &mut [Slot], key: usize) {
        let mask = table.len() - 1;
        let slot = PySet::probe(mask, key).find(|&s| table[s] == Slot::Unused).expect("a free slot");
        table[slot] = Slot::Active(key);
    }

    /// `set_table_resize`: the smallest power of two above `min_used`, entries reinserted in
    /// old table order, dummies dropped.
    fn resize(&mut self, min_used: usize) {
        let mut size = MIN_SIZE;
        while size <= min_used {
            size <<= 1;
        }
        let old = std::mem::replace(&mut self.table, vec![Slot::Unused; size]);
        for slot in old {
            if let Slot::Active(k) = slot {
                PySet::insert_clean(&mut self.table, k);
            }
        }
        self.fill = self.used;
    }

    /// `set_merge(self, other)` (`self.update(other)` for a set `other`).
    fn merge(&mut self, other: &PySet) {
        if other.used == 0 {
            return;
        }
        if (self.fill + other.used) * 5 >= self.mask() * 3 {
            self.resize((self.used + other.used) * 2);
        }
        if self.fill == 0 && self.mask() == other.mask() && other.fill == other.used {
            self.table.clone_from(&other.table);
            self.fill = other.fill;
            self.used = other.used;
            return;
        }
        if self.fill == 0 {
            for k in other.iter() {
                PySet::insert_clean(&mut self.table, k);
            }
            self.fill = other.used;
            self.used = other.used;
            return;
        }
        for k in other.iter() {
            self.add(k);
        }
    }

    /// `set_copy`: a new set merged from this one.
    fn copy(&self) -> PySet {
        let mut s = PySet::new();
        s.merge(self);
        s
    }

    /// `self - other` (`set_difference`): for a small `other`, a new set built by inserting
    /// this one's elements not in `other`; for a large `self` (`len(self) >> 2 >
    /// len(other)`), a copy with `other`'s elements discarded.
    pub(crate) fn difference(&self, other: &PySet) -> PySet {
        if (self.used >> 2) > other.used {
            let mut s = self.copy();
            for k in other.iter() {
                s.discard(k);
            }
            return s;
        }
        let mut s = PySet::new();
        for k in self.iter() {
            if !other.contains(k) {
                s.add(k);
            }
        }
        s
    }

    /// `self | other` (`set_or`): a copy of this set, updated with `other`.
    pub(crate) fn union(&self, other: &PySet) -> PySet {
        let mut s = self.copy();
        s.merge(other);
        s
    }

    /// `{a, b, ...}`: a set display, its elements added in order.
    pub(crate) fn of(keys: &[usize]) -> PySet {
        let mut s = PySet::new();
        for &k in keys {
            s.add(k);
        }
        s
    }

    /// `(self - {i, j}) | {k}`: the next `remaining` after contracting `i` and `j` into `k`.
    pub(crate) fn replace_pair(&self, i: usize, j: usize, k: usize) -> PySet {
        self.difference(&PySet::of(&[i, j])).union(&PySet::of(&[k]))
    }

    /// `itertools.combinations(self, 2)`: pairs in iteration order.
    pub(crate) fn pairs(&self) -> Vec<(usize, usize)> {
        let items: Vec<usize> = self.iter().collect();
        let mut out = Vec::with_capacity(items.len() * items.len().saturating_sub(1) / 2);
        for (a, &x) in items.iter().enumerate() {
            for &y in &items[a + 1..] {
                out.push((x, y));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::PySet;

    /// Replays the random `(s - {i, j}) | {k}` sequences `gen_einsum.py` ran in CPython and
    /// compares the iteration order after every step.
    #[test]
    fn iteration_order_is_cpythons() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/einsum_oracle.json");
        let text = std::fs::read_to_string(&path).expect("the einsum oracle");
        let oracle: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let list = |v: &serde_json::Value| -> Vec<usize> {
            v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect()
        };
        let chains = oracle["pysets"].as_array().unwrap();
        assert!(chains.len() >= 100);
        for chain in chains {
            let n = chain["n"].as_u64().unwrap() as usize;
            let orders = chain["orders"].as_array().unwrap();
            let mut s = PySet::range(n);
            assert_eq!(s.iter().collect::<Vec<_>>(), list(&orders[0]));
            for (step, (pick, order)) in chain["picks"].as_array().unwrap().iter().zip(&orders[1..]).enumerate() {
                let [i, j] = list(pick)[..] else { panic!("a pair") };
                s = s.replace_pair(i, j, n + step);
                assert_eq!(s.iter().collect::<Vec<_>>(), list(order), "n = {n}, after {:?}", &orders[..step + 2]);
            }
        }
    }

    #[test]
    fn a_large_key_wraps_into_an_occupied_table() {
        // `{0, 3, 4} | {8}` in a table of 8 slots: 8 lands in slot 0, taken, so it goes to
        // (0 * 5 + 1) = slot 1, which is iterated before 3.
        let s = PySet::of(&[0, 3, 4]).union(&PySet::of(&[8]));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 8, 3, 4]);
        assert_eq!(s.pairs()[..3], [(0, 8), (0, 3), (0, 4)]);
    }
}
