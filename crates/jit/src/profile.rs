//! The memory profile: every arena buffer of a planned program with its home, offset,
//! lifetime and origin, each step position's equation, and the peak explained.
//!
//! Positions are the planner's (`plan.rs`): steps numbered in execution order, a loop's
//! body steps inside the loop's range; the caller reads the outputs at position
//! `positions`. Origins name the jaxpr that was given (not the one CSE made of it): a buffer
//! or step made while lowering a call, a scan or a cond belongs to the enclosing top-level
//! equation.
//!
//! What "the peak is explained" means here. The arena's size is the highest end offset of
//! any buffer placed in it (rounded up to [`ALIGN`](crate::plan::ALIGN)), and the planner
//! places by first fit, so the arena may hold holes. The peak buffer is one whose end is
//! that highest end; the peak position is the position within its lifetime where the most
//! arena bytes are live. The buffers live there ([`Peak::live`]) are pairwise disjoint in
//! the arena, the highest of them ends where the arena ends, and their bytes plus
//! [`Peak::unused_bytes`] (holes below the peak buffer: fragmentation and alignment padding)
//! are `peak_bytes`, exactly. No position has more live arena bytes than the arena holds.

use remat_ir::{Array, Atom, Jaxpr, Var};

use crate::plan::{self, Home, Layout, Lifetimes};
use crate::program::{BufId, Program, Storage};
use crate::{checked_front, io_bytes, Front, JitError, MemoryPlan, Options};

/// Where an arena buffer lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferHome {
    /// The device arena (counted in `peak_bytes`).
    Arena,
    /// The memory of output `k`, before the program first writes that output (no arena
    /// bytes).
    Output(usize),
    /// The host pool (values placed in host memory by `device_put`).
    HostPool,
}

/// One arena buffer of the planned program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferProfile {
    pub bytes: usize,
    pub home: BufferHome,
    /// The byte offset in its home.
    pub offset: usize,
    /// The first and last step positions it is live at (inclusive).
    pub first: usize,
    pub last: usize,
    /// The top-level equation (of the jaxpr given) whose lowering made it; `None` for a
    /// buffer made for the outputs' final copies.
    pub eqn: Option<usize>,
    /// The top-level variable whose value it holds whole, if any (a buffer may also be a
    /// lowering's temporary, or hold a value inside an inlined call).
    pub var: Option<Var>,
    /// The position where another buffer written in place over it takes its bytes over:
    /// its last position, for the operand of an elementwise kernel that writes over it, or
    /// the first position of a loop that fills a stack slot by slot over it (the stack it
    /// consumes). It holds its bytes only before that position (see [`Self::holds_at`]).
    pub handed_over_at: Option<usize>,
}

impl BufferProfile {
    /// Whether the buffer is live at `position` (read or written there, or between).
    pub fn live_at(&self, position: usize) -> bool {
        self.first <= position && position <= self.last
    }

    /// Whether its bytes are its own at `position`: it is live there, and not at the
    /// position where a buffer written in place over it takes them over. Memory is
    /// counted with this, so no byte is counted twice.
    pub fn holds_at(&self, position: usize) -> bool {
        self.live_at(position) && self.handed_over_at.is_none_or(|h| position < h)
    }

    /// The bytes it takes in its home (a buffer of no bytes still takes one).
    pub fn extent(&self) -> usize {
        self.bytes.max(1)
    }
}

/// The arena at its peak (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peak {
    /// The peak position (see the module documentation).
    pub position: usize,
    /// The arena buffers holding bytes there ([`BufferProfile::holds_at`]), by offset
    /// (indices into [`MemoryProfile::buffers`]).
    pub live: Vec<usize>,
    /// Their bytes.
    pub live_bytes: usize,
    /// `peak_bytes - live_bytes`: the holes below the highest live buffer.
    pub unused_bytes: usize,
}

/// What the planner did with every buffer of a program.
#[derive(Clone, Debug)]
pub struct MemoryProfile {
    /// The same numbers as [`crate::memory_plan`].
    pub plan: MemoryPlan,
    /// The number of step positions.
    pub positions: usize,
    /// For each position, the top-level equation it belongs to (`None`: a copy into an
    /// output).
    pub step_eqns: Vec<Option<usize>>,
    /// Every arena buffer (device arena, output memory or host pool) that a step names.
    pub buffers: Vec<BufferProfile>,
    pub peak: Peak,
}

impl MemoryProfile {
    /// The device-arena bytes held at each position ([`BufferProfile::holds_at`]).
    pub fn live_bytes(&self) -> Vec<usize> {
        let mut delta = vec![0i128; self.positions + 2];
        for b in self.buffers.iter().filter(|b| b.home == BufferHome::Arena) {
            let end = b.handed_over_at.unwrap_or(b.last + 1);
            delta[b.first] += b.bytes as i128;
            delta[end] -= b.bytes as i128;
        }
        let mut live = 0i128;
        (0..self.positions.max(1))
            .map(|p| {
                live += delta[p];
                live as usize
            })
            .collect()
    }
}

/// Lowers and plans `jaxpr` as [`crate::compile_with_options`] would, and describes every
/// buffer of the plan.
pub fn memory_profile(jaxpr: &Jaxpr, consts: &[Array], options: &Options) -> Result<MemoryProfile, JitError> {
    // A sharded program's profile is one device's: the program device 0 runs
    // (`device.rs`), its equations and variables named by the program given.
    if crate::device::is_sharded(jaxpr) {
        crate::check_input(jaxpr, consts)?;
        let dp = crate::device::device_program(jaxpr)?;
        let mut profile = profile_of(&dp.jaxpr, consts, options)?;
        let eqn = |e: Option<usize>| e.and_then(|e| dp.eqn_origin.get(e).copied());
        profile.step_eqns.iter_mut().for_each(|e| *e = eqn(*e));
        for b in &mut profile.buffers {
            b.eqn = eqn(b.eqn);
            b.var = b.var.and_then(|v| dp.var_origin.get(v.index()).copied().flatten());
        }
        return Ok(profile);
    }
    profile_of(jaxpr, consts, options)
}

/// [`memory_profile`] of an unsharded program.
fn profile_of(jaxpr: &Jaxpr, consts: &[Array], options: &Options) -> Result<MemoryProfile, JitError> {
    let (scope, Front { prog, layout, merged, .. }) = checked_front(jaxpr, consts, options)?;
    let (io, host_io) = io_bytes(jaxpr);
    let plan = MemoryPlan {
        peak_bytes: layout.device_bytes,
        host_bytes: layout.host_bytes + host_io,
        io_bytes: io,
        cse: scope,
    };
    let lifetimes = plan::lifetimes(&prog).0;
    // The input's variable for each variable of the merged program (the first, where CSE
    // merged several).
    let mut input_var: Vec<Option<Var>> = vec![None; merged.jaxpr.vars.len()];
    for (i, a) in merged.var_map.iter().enumerate() {
        if let Some(Atom::Var(m)) = a {
            input_var[m.index()].get_or_insert(Var(i as u32));
        }
    }
    let origin = |e: Option<usize>| e.and_then(|e| merged.eqn_origin.get(e).copied());
    let mut step_eqns = vec![None; lifetimes.end];
    for (&(s, e), &eqn) in lifetimes.top_steps.iter().zip(&prog.provenance.step_eqn) {
        step_eqns[s..e].iter_mut().for_each(|x| *x = origin(eqn));
    }
    let describe = |b: usize| {
        let var = prog.provenance.buffer_var[b].and_then(|m| input_var[m.index()]);
        (origin(prog.provenance.buffer_eqn[b]), var)
    };
    let buffers = describe_buffers(&prog, &layout, &lifetimes, describe)?.0;
    let peak = find_peak(&buffers, plan.peak_bytes);
    Ok(MemoryProfile { plan, positions: lifetimes.end, step_eqns, buffers, peak })
}

/// Every placed arena buffer of `prog` (`describe` gives a program buffer's equation and
/// variable), with each program buffer's index among them; the buffers written over in
/// place hand their bytes over.
fn describe_buffers(
    prog: &Program,
    layout: &Layout,
    lifetimes: &Lifetimes,
    describe: impl Fn(usize) -> (Option<usize>, Option<Var>),
) -> Result<(Vec<BufferProfile>, Vec<Option<usize>>), JitError> {
    let mut buffers = Vec::new();
    // Each program buffer's index in `buffers`.
    let mut index = vec![None; prog.buffers.len()];
    for (b, buf) in prog.buffers.iter().enumerate() {
        let (Storage::Arena { host }, Some((home, offset))) = (buf.storage, layout.places[b]) else { continue };
        index[b] = Some(buffers.len());
        let home = match home {
            Home::Pool if host => BufferHome::HostPool,
            Home::Pool => BufferHome::Arena,
            Home::Out(o) => match prog.buffers[o.0 as usize].storage {
                Storage::Out { index, .. } => BufferHome::Output(index),
                _ => return Err(JitError::Invalid("the plan put a buffer in a non-output (a bug in the JIT)".into())),
            },
        };
        let (eqn, var) = describe(b);
        buffers.push(BufferProfile {
            bytes: buf.bytes,
            home,
            offset,
            first: lifetimes.first[b],
            last: lifetimes.last[b],
            eqn,
            var,
            handed_over_at: None,
        });
    }
    mark_handovers(&mut buffers, &index, &layout.written_over);
    Ok((buffers, index))
}

/// The device arena buffers holding bytes at the planned peak position ([`Peak::live`]),
/// and the arena's planned bytes: what the lowering's folds at the peak may free.
pub(crate) fn buffers_at_peak(prog: &Program) -> (Vec<BufId>, usize) {
    let (layout, lifetimes) = plan::plan_with_lifetimes(prog);
    let Ok((buffers, index)) = describe_buffers(prog, &layout, &lifetimes, |_| (None, None)) else {
        return (Vec::new(), layout.device_bytes);
    };
    let mut live = vec![false; buffers.len()];
    find_peak(&buffers, layout.device_bytes).live.into_iter().for_each(|i| live[i] = true);
    let at_peak = (0..prog.buffers.len()).filter(|&b| index[b].is_some_and(|i| live[i]));
    (at_peak.map(|b| BufId(b as u32)).collect(), layout.device_bytes)
}

/// Marks the buffers written over in place (the planner's `written_over`): a buffer hands
/// its bytes to the one written over it where that one starts: where the operand dies, for
/// an elementwise kernel, or at the start of the loop at whose end the operand dies, for a
/// stack filled slot by slot over the one it consumes.
fn mark_handovers(buffers: &mut [BufferProfile], index: &[Option<usize>], written_over: &[Option<BufId>]) {
    for (d, over) in written_over.iter().enumerate() {
        if let (Some(a), Some(di)) = (over.and_then(|a| index[a.0 as usize]), index[d]) {
            buffers[a].handed_over_at = Some(buffers[di].first);
        }
    }
}

/// The peak position and the buffers live there (see the module documentation).
fn find_peak(buffers: &[BufferProfile], peak_bytes: usize) -> Peak {
    let arena: Vec<usize> = (0..buffers.len()).filter(|&i| buffers[i].home == BufferHome::Arena).collect();
    let top = arena.iter().copied().max_by_key(|&i| (buffers[i].offset + buffers[i].extent(), std::cmp::Reverse(i)));
    let Some(top) = top else {
        return Peak { position: 0, live: Vec::new(), live_bytes: 0, unused_bytes: peak_bytes };
    };
    let live_at =
        |p: usize| arena.iter().filter(|&&i| buffers[i].holds_at(p)).map(|&i| buffers[i].bytes).sum::<usize>();
    // Live bytes change only where a buffer starts, so the candidates are the top buffer's
    // first position and the first positions of buffers starting within its life.
    let (lo, hi) = (buffers[top].first, buffers[top].last);
    let mut candidates: Vec<usize> =
        arena.iter().map(|&i| buffers[i].first).filter(|&p| lo <= p && p <= hi).chain([lo]).collect();
    candidates.sort_unstable();
    candidates.dedup();
    let position = candidates.into_iter().max_by_key(|&p| (live_at(p), std::cmp::Reverse(p))).unwrap_or(lo);
    let mut live: Vec<usize> = arena.into_iter().filter(|&i| buffers[i].holds_at(position)).collect();
    live.sort_by_key(|&i| (buffers[i].offset, i));
    let live_bytes = live.iter().map(|&i| buffers[i].bytes).sum();
    Peak { position, live, live_bytes, unused_bytes: peak_bytes.saturating_sub(live_bytes) }
}
