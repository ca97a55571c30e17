//! How many live buffers cover each [`ALIGN`]-byte unit of one home: a sparse segment tree
//! over the units, which answers the layout's two questions in `O(log U)` for a home of `U`
//! units: the lowest free run of a given length, and the most buffers covering any unit of
//! a range.
//!
//! What it keeps true: every node's summary (its most covering buffers, and the free runs
//! at its start, at its end and the longest) is that of its units; a node absent from the
//! tree covers free units only, and a subtree that becomes free is given back, so the tree
//! holds at most two nodes per covered unit and a path per live range. The units past the
//! tree's span are free.

use super::ALIGN;

/// No node: free units.
const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Node {
    /// The live ranges covering all of this node's units that are counted here (not in its
    /// children).
    cover: u32,
    /// The most live ranges covering one unit of this node.
    most: u32,
    /// The free units at the node's start, at its end, and the longest free run in it.
    head: usize,
    tail: usize,
    run: usize,
    kids: [u32; 2],
}

/// The coverage of a home's units. Units are counted from its start.
#[derive(Clone, Debug, Default)]
pub(super) struct Coverage {
    nodes: Vec<Node>,
    /// Nodes given back, for reuse.
    spare: Vec<u32>,
    root: Option<u32>,
    /// The units the root spans (a power of two; 0 before the first range).
    span: usize,
}

/// What a subtree says of its units (an absent one: all free).
#[derive(Clone, Copy)]
struct Summary {
    most: u32,
    head: usize,
    tail: usize,
    run: usize,
}

impl Coverage {
    /// Adds (`delta` 1) or removes (`delta` -1) a live range `[start, end)` of bytes, whose
    /// start is a multiple of [`ALIGN`]; it covers the units up to its aligned end.
    pub fn add(&mut self, start: usize, end: usize, delta: i32) {
        debug_assert!(start.is_multiple_of(ALIGN) && end > start, "a live range of whole units: {start}..{end}");
        let (lo, hi) = (start / ALIGN, end.div_ceil(ALIGN));
        while self.span < hi {
            // Grow: the old root becomes the new root's first half.
            let span = self.span.max(1) * 2;
            if let Some(old) = self.root {
                let root = self.alloc();
                self.nodes[root as usize].kids = [old, NONE];
                self.span = span;
                self.root = Some(root);
                self.pull(root, span);
            } else {
                self.span = span;
            }
        }
        let root = self.root.unwrap_or(NONE);
        let root = self.update(root, 0, self.span, lo, hi, delta);
        self.root = (root != NONE).then_some(root);
    }

    /// The lowest unit-aligned offset where `size` bytes cover no unit any live range covers.
    pub fn lowest_free(&self, size: usize) -> usize {
        let units = size.div_ceil(ALIGN).max(1);
        let Some(root) = self.root else { return 0 };
        let s = self.summary(root, self.span);
        let unit = if s.run >= units { self.leftmost_run(root, 0, self.span, units) } else { self.span - s.tail };
        unit * ALIGN
    }

    /// The most live ranges covering one unit of the bytes `[start, end)` (`start` a
    /// multiple of [`ALIGN`]).
    pub fn most_covering(&self, start: usize, end: usize) -> u32 {
        debug_assert!(start.is_multiple_of(ALIGN));
        let (lo, hi) = (start / ALIGN, end.div_ceil(ALIGN).min(self.span));
        match self.root {
            Some(root) if lo < hi => self.most_in(root, 0, self.span, lo, hi),
            _ => 0,
        }
    }

    fn alloc(&mut self) -> u32 {
        let node = Node { cover: 0, most: 0, head: 0, tail: 0, run: 0, kids: [NONE, NONE] };
        match self.spare.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// Gives back `node` and its subtree.
    fn release(&mut self, node: u32) {
        if node != NONE {
            let [l, r] = self.nodes[node as usize].kids;
            self.release(l);
            self.release(r);
            self.spare.push(node);
        }
    }

    fn summary(&self, node: u32, len: usize) -> Summary {
        if node == NONE {
            return Summary { most: 0, head: len, tail: len, run: len };
        }
        let n = &self.nodes[node as usize];
        Summary { most: n.most, head: n.head, tail: n.tail, run: n.run }
    }

    /// Recomputes `node`'s summary (of `len` units) from its cover and its children.
    fn pull(&mut self, node: u32, len: usize) {
        let n = self.nodes[node as usize];
        let s = if len == 1 {
            let free = usize::from(n.cover == 0);
            Summary { most: n.cover, head: free, tail: free, run: free }
        } else {
            let half = len / 2;
            let (l, r) = (self.summary(n.kids[0], half), self.summary(n.kids[1], half));
            if n.cover > 0 {
                Summary { most: n.cover + l.most.max(r.most), head: 0, tail: 0, run: 0 }
            } else {
                Summary {
                    most: l.most.max(r.most),
                    head: if l.head == half { half + r.head } else { l.head },
                    tail: if r.tail == half { half + l.tail } else { r.tail },
                    run: l.run.max(r.run).max(l.tail + r.head),
                }
            }
        };
        let n = &mut self.nodes[node as usize];
        (n.most, n.head, n.tail, n.run) = (s.most, s.head, s.tail, s.run);
    }

    /// Adds `delta` to the cover of the units `[lo, hi)` under `node` (which spans `len`
    /// units from `at`); returns the node, or `NONE` if its subtree is now free.
    fn update(&mut self, node: u32, at: usize, len: usize, lo: usize, hi: usize, delta: i32) -> u32 {
        let node = if node == NONE { self.alloc() } else { node };
        if lo <= at && at + len <= hi {
            let n = &mut self.nodes[node as usize];
            n.cover = n.cover.checked_add_signed(delta).expect("a range is removed only after it was added");
        } else {
            let half = len / 2;
            for (k, start) in [(0, at), (1, at + half)] {
                if lo < start + half && start < hi {
                    let kid = self.nodes[node as usize].kids[k];
                    let kid = self.update(kid, start, half, lo, hi, delta);
                    self.nodes[node as usize].kids[k] = kid;
                }
            }
        }
        self.pull(node, len);
        if self.nodes[node as usize].most == 0 {
            self.release(node);
            return NONE;
        }
        node
    }

    /// The first unit of the leftmost free run of at least `units` under `node` (spanning
    /// `len` units from `at`), which has one.
    fn leftmost_run(&self, node: u32, at: usize, len: usize, units: usize) -> usize {
        if node == NONE {
            return at;
        }
        let half = len / 2;
        let kids = self.nodes[node as usize].kids;
        let (l, r) = (self.summary(kids[0], half), self.summary(kids[1], half));
        if l.run >= units {
            self.leftmost_run(kids[0], at, half, units)
        } else if l.tail + r.head >= units {
            at + half - l.tail
        } else {
            self.leftmost_run(kids[1], at + half, half, units)
        }
    }

    fn most_in(&self, node: u32, at: usize, len: usize, lo: usize, hi: usize) -> u32 {
        if node == NONE {
            return 0;
        }
        let n = &self.nodes[node as usize];
        if lo <= at && at + len <= hi {
            return n.most;
        }
        let half = len / 2;
        let mut most = 0;
        for (k, start) in [(0, at), (1, at + half)] {
            if lo < start + half && start < hi {
                most = most.max(self.most_in(n.kids[k], start, half, lo, hi));
            }
        }
        n.cover + most
    }
}
