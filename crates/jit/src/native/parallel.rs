//! The fork-join entry points of JIT code: a step split over the threads
//! (`remat_parallel_for`) and two independent steps run at once where that measured faster
//! (`remat_pair`, each pair timing itself). The threads are `pool`'s.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::cpu::clear_upper_vector_state;
use super::pool::{fork_join, threads};

/// A range function of the JIT code: runs its step over `lo..hi` of the split dimension,
/// given the base addresses of the step's buffers.
type RangeFn = extern "C" fn(*const usize, i64, i64);

/// Runs `f` over `0..total` in one contiguous range per thread, every bound but `total` a
/// multiple of `grain`: this thread runs the first range, the helper threads the others.
pub(super) extern "C" fn remat_parallel_for(f: RangeFn, bases: *const usize, total: i64, grain: i64) {
    let units = (total + grain - 1) / grain;
    let parts = (threads() as i64).min(units).max(1);
    let bound = |p: i64| (units * p / parts * grain).min(total);
    // Raw pointers are not `Send`; the addresses are, and every range function only reads
    // the step's inputs and writes its own range of the destination (kernel::split_dim).
    let bases = bases as usize;
    fork_join(parts as usize, move |p| {
        let p = p as i64;
        clear_upper_vector_state();
        f(bases as *const usize, bound(p), bound(p + 1));
    });
    clear_upper_vector_state();
}

/// A step function of JIT code: runs its step given the base addresses of its buffers.
type StepFn = extern "C" fn(*const usize);

/// What one pair of steps that may run at once (`remat_pair`) has measured, and what it
/// chose: running the two on two cores pays only when moving their freshly written operands
/// and results between the cores costs less than the time saved, and on this shared
/// virtual machine that changes with where the host places the two virtual CPUs (a
/// cache line's round trip between them measured 83-170 ns at some times and 360-440 ns
/// at others; mlp_small ran 28 us paired or 33 us not in the first state, 51 us paired in
/// the second). So each pair times itself: its first [`TRIAL_CALLS`] calls alternate
/// between one thread and two, the faster way (by each way's fastest call) runs from then
/// on, and the trial repeats every [`TRIAL_EVERY`] calls.
#[derive(Debug)]
pub(crate) struct PairSite {
    calls: AtomicU64,
    /// The fastest call of the current trial on one thread and on two, in nanoseconds.
    fastest: [AtomicU64; 2],
    /// Whether the pair runs on two threads (the last trial's verdict).
    parallel: AtomicBool,
}

impl Default for PairSite {
    fn default() -> Self {
        PairSite {
            calls: AtomicU64::new(0),
            fastest: [AtomicU64::new(u64::MAX), AtomicU64::new(u64::MAX)],
            parallel: AtomicBool::new(false),
        }
    }
}

/// Calls of a pair that time both ways, alternating (the first of them on two threads).
const TRIAL_CALLS: u64 = 8;
/// A pair's trial starts again after this many calls: the host's placement of the virtual
/// CPUs can change within a second (a trial every 4096 calls left mlp_small paired at 51 us
/// after the host moved them apart), and the trial's calls the slower way cost ~2% here.
const TRIAL_EVERY: u64 = 256;

/// Runs two independent steps, at once on two threads (`a` on this one, `b` on a helper)
/// or one after the other on this thread, as `site` has measured to be faster. The
/// lowering pairs only steps that run on one thread each and touch disjoint memory where
/// either writes (`codegen`, `pair_with_next`), so each computes the same bits either way.
pub(super) extern "C" fn remat_pair(
    site: *const PairSite,
    a: StepFn,
    a_bases: *const usize,
    b: StepFn,
    b_bases: *const usize,
) {
    // SAFETY: `site` points into the `Box<[PairSite]>` the compiled program owns for as long
    // as its code can run (a constant the entry passes).
    let site = unsafe { &*site };
    // Addresses cross to the helper; the base arrays outlive the call (`fork_join` waits).
    let (a_bases, b_bases) = (a_bases as usize, b_bases as usize);
    let run = |two: bool| {
        if two {
            fork_join(2, move |p| {
                clear_upper_vector_state();
                match p {
                    0 => a(a_bases as *const usize),
                    _ => b(b_bases as *const usize),
                }
            });
        } else {
            a(a_bases as *const usize);
            b(b_bases as *const usize);
        }
        clear_upper_vector_state();
    };
    let n = site.calls.fetch_add(1, Ordering::Relaxed) % TRIAL_EVERY;
    if n >= TRIAL_CALLS {
        return run(site.parallel.load(Ordering::Relaxed));
    }
    let two = n.is_multiple_of(2);
    let start = std::time::Instant::now();
    run(two);
    site.record(n, two, u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
}

impl PairSite {
    /// Records trial call `n` (`< TRIAL_CALLS`), run on two threads or one, which took `ns`:
    /// the first call of a trial forgets the last trial's times, and the last one decides
    /// by each way's fastest call.
    fn record(&self, n: u64, two: bool, ns: u64) {
        if n == 0 {
            self.fastest.iter().for_each(|f| f.store(u64::MAX, Ordering::Relaxed));
        }
        self.fastest[two as usize].fetch_min(ns, Ordering::Relaxed);
        if n == TRIAL_CALLS - 1 {
            let [one, two] = [0, 1].map(|i| self.fastest[i].load(Ordering::Relaxed));
            self.parallel.store(two < one, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod pair_tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static RUNS: AtomicUsize = AtomicUsize::new(0);

    extern "C" fn slow(_: *const usize) {
        std::thread::sleep(std::time::Duration::from_millis(3));
        RUNS.fetch_add(1, Ordering::Relaxed);
    }

    extern "C" fn quick(_: *const usize) {
        RUNS.fetch_add(1, Ordering::Relaxed);
    }

    /// Runs a pair `calls` times; every call runs both steps, whichever way it runs them.
    fn run_pairs(f: StepFn, calls: u64) {
        let site = PairSite::default();
        let before = RUNS.load(Ordering::Relaxed);
        for _ in 0..calls {
            remat_pair(&site, f, std::ptr::null(), f, std::ptr::null());
        }
        assert!(RUNS.load(Ordering::Relaxed) - before >= 2 * calls as usize, "both steps ran on every call");
    }

    #[test]
    fn a_pair_runs_both_steps_on_every_call_through_trials_and_verdicts() {
        run_pairs(slow, TRIAL_CALLS);
        run_pairs(quick, 2 * TRIAL_EVERY + TRIAL_CALLS);
    }

    /// The verdict from a trial's times (given here, not measured: a timed test would
    /// depend on what else the machine runs): the way whose fastest call was faster, so one
    /// slow call (a preemption) does not decide; a new trial forgets the last one's times.
    #[test]
    fn a_trial_chooses_the_way_whose_fastest_call_was_faster() {
        let verdict = |times: &dyn Fn(u64, bool) -> u64| {
            let site = PairSite::default();
            for n in 0..TRIAL_CALLS {
                let two = n.is_multiple_of(2);
                site.record(n, two, times(n, two));
            }
            site.parallel.load(Ordering::Relaxed)
        };
        assert!(verdict(&|_, two| if two { 3_000 } else { 6_000 }));
        assert!(!verdict(&|_, two| if two { 9_000 } else { 6_000 }));
        // One preempted call each way does not decide.
        assert!(verdict(&|n, two| match (n, two) {
            (0, true) => 90_000,
            (1, false) => 1_000_000,
            (_, true) => 3_000,
            _ => 6_000,
        }));
        // A second trial on one site decides afresh.
        let site = PairSite::default();
        for n in 0..TRIAL_CALLS {
            site.record(n, n.is_multiple_of(2), if n.is_multiple_of(2) { 1_000 } else { 6_000 });
        }
        assert!(site.parallel.load(Ordering::Relaxed));
        for n in 0..TRIAL_CALLS {
            site.record(n, n.is_multiple_of(2), if n.is_multiple_of(2) { 9_000 } else { 6_000 });
        }
        assert!(!site.parallel.load(Ordering::Relaxed));
    }
}
