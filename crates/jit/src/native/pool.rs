//! The threads a compiled program's split products and loops run on.
//!
//! A program with parallel steps forks and joins once per step: hundreds of times per call
//! in a transformer, several times per iteration in a scan. rayon's pool puts an idle worker
//! to sleep after a few dozen `yield`s, and the thread that waits for a join sleeps on a
//! condition variable: every fork and every join could cost a futex wake-up, tens of
//! microseconds on a virtual machine (the scheduler was ~14% of a wide scan's samples).
//!
//! Here one helper thread per further core waits for its next part by spinning for
//! [`HELPER_SPIN`] after its last one, then parks; the forking thread spins for at most
//! [`JOIN_SPIN`] for the helpers to finish, then parks. Back-to-back steps therefore meet
//! without a system call, and an idle program costs at most one spin period of one core.
//!
//! On a busy machine a helper may not run for a scheduler slice (milliseconds) after its
//! fork: another process holds its core. So a part is *claimed* before it runs, by the
//! helper it was handed to or, once the forking thread has finished its own part, by the
//! forking thread itself; a part whose helper has not started it by then runs on the
//! forking thread, and the fork costs at most what it would on one core. A helper
//! descheduled in the middle of its part still makes the fork wait for it, and a forking
//! thread descheduled in the middle of its own makes the helpers wait. So the pool shrinks
//! when other processes take the cores: at most every [`CHECK_EVERY`], the forking thread
//! reads how long each of the pool's threads waited for a core (`contention.rs`), and for
//! each crowded one it *benches* a helper for a while (doubling while the cores stay
//! taken); a benched helper gets no parts (the forking thread runs them) and parks. With
//! one other process computing on a 2-core machine the pool thus shrinks to the forking
//! thread, and the scheduler gives each process a core (docs/benchmarks.md, "A busy
//! machine").
//!
//! One fork at a time holds the helpers. A fork made while they are held (by another
//! thread's program, or from inside a part) runs on rayon's pool instead, as every fork did
//! before: correct, only slower.

use std::cell::{Cell, UnsafeCell};
use std::fs::File;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use super::contention::{self, Sched, BENCH_FIRST, CHECK_EVERY};

/// The number of threads parallel work is split over (rayon's pool, which faer's matmul shares).
pub(super) fn threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(rayon::current_num_threads)
}

/// How long a helper spins for its next part before it parks.
const HELPER_SPIN: Duration = Duration::from_micros(200);

/// How long the forking thread spins for the helpers' parts before it parks. Short: the
/// parts are balanced, and a helper that is not done by then was most likely descheduled
/// (spinning on would take the core it needs).
const JOIN_SPIN: Duration = Duration::from_micros(50);

/// Runs `run(p)` for every part `p` in `0..parts`: this thread runs part 0, the helpers
/// (or rayon's pool, when the helpers are held) the others, and it returns when all are
/// done. A part that panics panics here after every part has finished.
pub(super) fn fork_join<F: Fn(usize) + Send + Sync>(parts: usize, run: F) {
    if parts <= 1 {
        if parts == 1 {
            run(0);
        }
        return;
    }
    let pool = pool();
    let held = parts - 1 <= pool.helpers.len()
        && pool.busy.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok();
    if !held {
        rayon::in_place_scope(|s| {
            for p in 1..parts {
                let run = &run;
                // rayon's threads run other work too: the environment for this part only.
                s.spawn(move |_| {
                    let _env = remat_math::XlaFloatEnv::enter();
                    run(p)
                });
            }
            run(0);
        });
        return;
    }
    let now = pool.nanos(Instant::now());
    if now >= pool.last_check.load(Ordering::Relaxed) + CHECK_EVERY.as_nanos() as u64 {
        pool.check(now);
    }
    let helpers = &pool.helpers[..parts - 1];
    let me = thread::current();
    let data = &run as *const F as *const ();
    let mut seqs = [0u64; MAX_HELPERS];
    let mut active = [false; MAX_HELPERS];
    for (h, helper) in helpers.iter().enumerate() {
        seqs[h] = helper.seq.load(Ordering::Relaxed);
        if helper.benched(now) {
            continue;
        }
        active[h] = true;
        // SAFETY: `busy` is ours, and every job handed out before was joined before `busy`
        // was released, so no helper reads its job cell now.
        unsafe {
            *helper.job.get() = Job { call: call_part::<F>, data, part: h + 1, waiter: Some(me.clone()) };
        }
        helper.panicked.store(false, Ordering::Relaxed);
        seqs[h] += 1;
        helper.seq.store(seqs[h], Ordering::SeqCst);
        if helper.sleeping.load(Ordering::SeqCst) {
            helper.thread().unpark();
        }
    }
    // Joins (and releases the helpers) even when a part unwinds here: the helpers hold
    // `&run`.
    let join = Join { pool, helpers, seqs, active };
    run(0);
    // The benched helpers' parts, and the parts no helper has started yet, run here, in
    // order: a helper that has not been scheduled since its fork would otherwise keep this
    // thread waiting for its slice.
    for (h, helper) in helpers.iter().enumerate() {
        if !active[h] {
            run(h + 1);
        } else if helper.claim.compare_exchange(seqs[h] - 1, seqs[h], Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            if catch_unwind(AssertUnwindSafe(|| run(h + 1))).is_err() {
                helper.panicked.store(true, Ordering::Relaxed);
            }
            helper.done.store(seqs[h], Ordering::Release);
        }
    }
    drop(join);
    if helpers.iter().zip(active).any(|(h, a)| a && h.panicked.load(Ordering::Relaxed)) {
        panic!("a parallel part of a compiled program panicked");
    }
}

/// At most this many helpers (further cores) take parts.
const MAX_HELPERS: usize = 63;

/// Calls the part closure behind `data`.
///
/// # Safety
/// `data` is a live `&F`.
unsafe fn call_part<F: Fn(usize)>(data: *const (), part: usize) {
    // SAFETY: the caller's contract.
    let run = unsafe { &*(data as *const F) };
    run(part)
}

/// The helpers and the flag that gives them to one fork at a time.
struct Pool {
    busy: AtomicBool,
    helpers: Box<[Helper]>,
    /// The origin of the times below, in nanoseconds.
    epoch: Instant,
    /// When the forking thread last looked at the threads' waiting (`check`).
    last_check: AtomicU64,
    /// The next bench time, in nanoseconds.
    bench: AtomicU64,
}

thread_local! {
    /// A forking thread's statistics file and its reading at its last `check`.
    static OWN_SCHED: (Option<File>, Cell<Option<Sched>>) = (contention::open_own(), Cell::new(None));
}

impl Pool {
    /// Nanoseconds from the pool's start to `t`.
    fn nanos(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    /// Benches a helper for each of the forking thread and the helpers taking parts that
    /// waited for a core for much of its runnable time since the last check. Called by the
    /// holder of `busy` only, so the relaxed loads and stores below do not race.
    fn check(&self, now: u64) {
        self.last_check.store(now, Ordering::Relaxed);
        let caller = OWN_SCHED.with(|(file, last)| {
            let reading = contention::read(file.as_ref()?)?;
            contention::waiting_share(last.replace(Some(reading))?, reading)
        });
        let helpers: Vec<(usize, Option<f64>)> = (self.helpers.iter().enumerate())
            .filter(|(_, h)| !h.benched(now))
            .map(|(i, h)| (i, h.waiting_share()))
            .collect();
        let bench = contention::to_bench(caller, &helpers);
        if bench.is_empty() {
            // The bench time starts over once the helpers taking parts ran without waiting;
            // a check that saw none of them run long enough to tell (one just woken from
            // its bench) leaves it as it is.
            if helpers.iter().any(|(_, s)| s.is_some()) && !self.helpers.iter().any(|h| h.benched(now)) {
                self.bench.store(BENCH_FIRST.as_nanos() as u64, Ordering::Relaxed);
            }
            return;
        }
        let time = self.bench.load(Ordering::Relaxed);
        for h in bench {
            self.helpers[h].benched_until.store(now + time, Ordering::Relaxed);
        }
        let next = contention::longer(Duration::from_nanos(time));
        self.bench.store(next.as_nanos() as u64, Ordering::Relaxed);
    }
}

/// One helper thread's mailbox.
struct Helper {
    /// The job cell: written by the holder of `busy` before it bumps `seq`, read by the
    /// helper after it sees the bump.
    job: UnsafeCell<Job>,
    /// Bumped once per job handed out.
    seq: AtomicU64,
    /// The last `seq` whose job was claimed, by the helper or by the forking thread (which
    /// runs a part its helper has not started): always `seq - 1` or `seq`, and the one who
    /// moves it from `seq - 1` to `seq` runs the job.
    claim: AtomicU64,
    /// The last `seq` whose job finished.
    done: AtomicU64,
    /// Set while the helper is (about to be) parked: a new job must unpark it.
    sleeping: AtomicBool,
    /// Set when the last job panicked.
    panicked: AtomicBool,
    thread: OnceLock<Thread>,
    /// The helper's statistics file (`contention.rs`), opened by the helper itself, and
    /// its reading at the last check that looked (cpu, waited; `u64::MAX`: none yet).
    sched: OnceLock<Option<File>>,
    last_cpu: AtomicU64,
    last_waited: AtomicU64,
    /// Until when (nanoseconds since the pool's `epoch`) the helper is benched: it takes no
    /// parts.
    benched_until: AtomicU64,
}

// SAFETY: `job` is only written by the thread holding `Pool::busy` while the helper is
// between jobs, and only read by the helper after the `seq` bump that publishes it.
unsafe impl Sync for Helper {}

impl Helper {
    fn thread(&self) -> &Thread {
        self.thread.get().expect("a helper registers its thread before the pool is returned")
    }

    fn benched(&self, now: u64) -> bool {
        now < self.benched_until.load(Ordering::Relaxed)
    }

    /// The share of its runnable time the helper waited for a core since the last call.
    fn waiting_share(&self) -> Option<f64> {
        let reading = contention::read(self.sched.get()?.as_ref()?)?;
        let cpu = self.last_cpu.swap(reading.cpu, Ordering::Relaxed);
        let waited = self.last_waited.swap(reading.waited, Ordering::Relaxed);
        if cpu == u64::MAX {
            return None;
        }
        contention::waiting_share(Sched { cpu, waited }, reading)
    }
}

/// One part of a fork: the closure's address and its monomorphic caller, and the forking
/// thread to wake when it is done.
struct Job {
    call: unsafe fn(*const (), usize),
    data: *const (),
    part: usize,
    waiter: Option<Thread>,
}

/// Waits on drop until every helper that took a part of the fork has finished it, then
/// releases the helpers.
struct Join<'a> {
    pool: &'a Pool,
    helpers: &'a [Helper],
    seqs: [u64; MAX_HELPERS],
    /// The helpers handed a part (not benched).
    active: [bool; MAX_HELPERS],
}

impl Drop for Join<'_> {
    fn drop(&mut self) {
        let finished = |h: usize| self.helpers[h].done.load(Ordering::Acquire) == self.seqs[h];
        for h in (0..self.helpers.len()).filter(|&h| self.active[h]) {
            if !spin_until(JOIN_SPIN, || finished(h)) {
                // The helper unparks the job's waiter after storing `done`; a wake-up for an
                // earlier fork only makes this loop look again.
                while !finished(h) {
                    thread::park_timeout(Duration::from_millis(1));
                }
            }
        }
        self.pool.busy.store(false, Ordering::Release);
    }
}

/// The helpers, started on first use: one per core beyond the first (rayon's thread count,
/// which `RAYON_NUM_THREADS` sets).
fn pool() -> &'static Pool {
    static POOL: OnceLock<&'static Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let count = threads().saturating_sub(1).min(MAX_HELPERS);
        let helpers = (0..count)
            .map(|_| Helper {
                job: UnsafeCell::new(Job {
                    call: call_part::<fn(usize)>,
                    data: std::ptr::null(),
                    part: 0,
                    waiter: None,
                }),
                seq: AtomicU64::new(0),
                claim: AtomicU64::new(0),
                done: AtomicU64::new(0),
                sleeping: AtomicBool::new(false),
                panicked: AtomicBool::new(false),
                thread: OnceLock::new(),
                sched: OnceLock::new(),
                last_cpu: AtomicU64::new(u64::MAX),
                last_waited: AtomicU64::new(u64::MAX),
                benched_until: AtomicU64::new(0),
            })
            .collect();
        // Leaked: the helpers live as long as the process and borrow their mailboxes.
        let pool: &'static Pool = Box::leak(Box::new(Pool {
            busy: AtomicBool::new(false),
            helpers,
            epoch: Instant::now(),
            last_check: AtomicU64::new(0),
            bench: AtomicU64::new(BENCH_FIRST.as_nanos() as u64),
        }));
        for (h, helper) in pool.helpers.iter().enumerate() {
            let handle = thread::Builder::new()
                .name(format!("remat-helper-{}", h + 1))
                .spawn(move || helper_loop(helper))
                .expect("the helper threads start");
            let _ = helper.thread.set(handle.thread().clone());
        }
        pool
    })
}

/// Spins until `done()` holds (true) or `budget` has passed (false).
fn spin_until(budget: Duration, done: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    loop {
        // The clock is read once per 64 looks.
        for _ in 0..64 {
            if done() {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= budget {
            return done();
        }
    }
}

/// A helper's life: wait for a job (spinning, then parked), run it, report it done.
fn helper_loop(helper: &'static Helper) {
    // A helper runs nothing but compiled programs' parts: XLA's float environment for its
    // whole life, as XLA's pool threads have it (`remat_math::fenv`).
    remat_math::fenv::set_for_thread();
    let _ = helper.sched.set(contention::open_own());
    let mut last = 0u64;
    loop {
        let ready = || helper.seq.load(Ordering::Acquire) != last;
        if !spin_until(HELPER_SPIN, ready) {
            loop {
                helper.sleeping.store(true, Ordering::SeqCst);
                if helper.seq.load(Ordering::SeqCst) == last {
                    thread::park();
                }
                helper.sleeping.store(false, Ordering::SeqCst);
                if ready() {
                    break;
                }
            }
        }
        let seq = helper.seq.load(Ordering::Acquire);
        last = seq;
        // Every job handed out before this one was claimed and joined, so the claim is
        // `seq - 1` unless the forking thread has taken this job to run it itself; then the
        // job cell is not read (the forking thread may be writing the next one).
        if helper.claim.compare_exchange(seq - 1, seq, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            continue;
        }
        // SAFETY: the `seq` bump (acquired above) published this cell, the claim makes this
        // thread its only reader, and its writer waits for `done` before it writes it again.
        let (call, data, part, waiter) = unsafe {
            let job = &mut *helper.job.get();
            (job.call, job.data, job.part, job.waiter.take())
        };
        // SAFETY: the forking thread keeps the closure alive until `done` says this part
        // has finished.
        if catch_unwind(AssertUnwindSafe(|| unsafe { call(data, part) })).is_err() {
            helper.panicked.store(true, Ordering::Relaxed);
        }
        helper.done.store(seq, Ordering::Release);
        if let Some(waiter) = waiter {
            waiter.unpark();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts how often each part ran.
    fn counted(parts: usize) -> Vec<usize> {
        let counts: Vec<AtomicUsize> = (0..parts).map(|_| AtomicUsize::new(0)).collect();
        fork_join(parts, |p| {
            counts[p].fetch_add(1, Ordering::Relaxed);
        });
        counts.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }

    #[test]
    fn every_part_runs_once_for_any_number_of_parts() {
        // More parts than helpers take rayon's pool; none and one run on this thread.
        for parts in [0, 1, 2, 3, 8, 65] {
            assert_eq!(counted(parts), vec![1; parts], "{parts} parts");
        }
    }

    #[test]
    fn forks_meet_after_the_helpers_have_parked() {
        // Back to back (the helpers spinning), then after a pause longer than their spin
        // (the helpers parked, woken by the fork).
        for pause in [Duration::ZERO, HELPER_SPIN * 10] {
            for _ in 0..50 {
                assert_eq!(counted(2), vec![1, 1]);
                thread::sleep(pause);
            }
        }
    }

    #[test]
    fn concurrent_and_nested_forks_all_complete() {
        // Several threads fork at once (one holds the helpers, the others take rayon's
        // pool), and every part forks again from inside (the helpers are held then).
        let total = AtomicUsize::new(0);
        thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..200 {
                        fork_join(2, |_| {
                            fork_join(3, |_| {
                                total.fetch_add(1, Ordering::Relaxed);
                            })
                        });
                    }
                });
            }
        });
        assert_eq!(total.load(Ordering::Relaxed), 4 * 200 * 2 * 3);
    }

    #[test]
    fn every_part_runs_once_while_other_threads_take_the_cores() {
        // Spinning threads outnumber the cores, so helpers are descheduled between and
        // during their parts and the forking thread claims parts they had not started:
        // each part still runs exactly once, on one thread or the other.
        let stop = AtomicBool::new(false);
        thread::scope(|s| {
            for _ in 0..2 * threads() {
                s.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                });
            }
            for parts in (0..3000).map(|i| 2 + i % 2) {
                assert_eq!(counted(parts), vec![1; parts], "{parts} parts");
            }
            stop.store(true, Ordering::Relaxed);
        });
    }

    #[test]
    fn a_panicking_part_panics_in_the_caller_and_the_helpers_stay_usable() {
        for bad in [0, 1] {
            let caught = catch_unwind(|| {
                fork_join(2, |p| {
                    if p == bad {
                        panic!("part {p} fails");
                    }
                })
            });
            assert!(caught.is_err(), "part {bad}'s panic reaches the caller");
            assert_eq!(counted(2), vec![1, 1], "the next fork after part {bad} panicked");
        }
    }
}
