//! Whether other processes are taking the cores the pool's threads run on, from the
//! scheduler's own count: Linux's `/proc/thread-self/schedstat` gives each thread's time on
//! a CPU and its time runnable but waiting for one. A thread that waited for a core for
//! more than [`CROWDED`] of the time it was runnable shares its core with another process;
//! a fork that waits for it waits for the other process's slice, so the pool benches one
//! helper per such thread ([`to_bench`]) and the forking thread runs their parts itself
//! (`pool.rs`). Where the statistics cannot be read (another system), nothing is benched.

use std::fs::File;
use std::time::Duration;

/// A thread that waited for a core longer than this share of its runnable time is crowded.
pub(super) const CROWDED: f64 = 0.25;

/// A thread runnable for less than this between two readings says nothing.
const MIN_RUNNABLE: Duration = Duration::from_micros(500);

/// How often the forking thread looks at the statistics (at a fork, at most this often).
pub(super) const CHECK_EVERY: Duration = Duration::from_millis(5);

/// The bench time of a helper benched for the first time, and the longest: it doubles each
/// time the helpers are benched again, and starts over once no thread was crowded.
pub(super) const BENCH_FIRST: Duration = Duration::from_millis(20);
pub(super) const BENCH_LONGEST: Duration = Duration::from_secs(1);

/// One reading of a thread's statistics: nanoseconds on a CPU, and runnable but waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Sched {
    pub cpu: u64,
    pub waited: u64,
}

/// The calling thread's statistics file, to be read again and again ([`read`]); `None`
/// where there is none.
pub(super) fn open_own() -> Option<File> {
    File::open("/proc/thread-self/schedstat").ok()
}

/// The statistics now (the file's first two numbers).
#[cfg(unix)]
pub(super) fn read(file: &File) -> Option<Sched> {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 96];
    let n = file.read_at(&mut buf, 0).ok()?;
    parse(std::str::from_utf8(&buf[..n]).ok()?)
}

#[cfg(not(unix))]
pub(super) fn read(_file: &File) -> Option<Sched> {
    None
}

fn parse(text: &str) -> Option<Sched> {
    let mut numbers = text.split_ascii_whitespace().map(|x| x.parse::<u64>().ok());
    Some(Sched { cpu: numbers.next()??, waited: numbers.next()?? })
}

/// The share of the runnable time between two readings that the thread spent waiting for a
/// core; `None` if it was runnable too briefly to say.
pub(super) fn waiting_share(before: Sched, after: Sched) -> Option<f64> {
    let cpu = after.cpu.checked_sub(before.cpu)?;
    let waited = after.waited.checked_sub(before.waited)?;
    let runnable = cpu + waited;
    (runnable >= MIN_RUNNABLE.as_nanos() as u64).then(|| waited as f64 / runnable as f64)
}

/// Which of the helpers taking parts (index, waiting share) to bench, given the forking
/// thread's waiting share: one per crowded thread, the forking thread included, the most
/// crowded helpers first. On two cores with one other process computing, whichever of the
/// two threads shares its core with it, the one helper is benched and the scheduler can
/// give the forking thread a core of its own.
pub(super) fn to_bench(caller: Option<f64>, helpers: &[(usize, Option<f64>)]) -> Vec<usize> {
    let crowded = |s: Option<f64>| s.is_some_and(|s| s > CROWDED);
    let n = helpers.iter().filter(|(_, s)| crowded(*s)).count() + usize::from(crowded(caller));
    let mut order = helpers.to_vec();
    order.sort_by(|a, b| b.1.unwrap_or(0.0).total_cmp(&a.1.unwrap_or(0.0)).then(b.0.cmp(&a.0)));
    order.into_iter().take(n).map(|(h, _)| h).collect()
}

/// The next bench time after `bench`.
pub(super) fn longer(bench: Duration) -> Duration {
    (2 * bench).min(BENCH_LONGEST)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_statistics_are_read_from_the_kernels_text() {
        assert_eq!(parse("405187 1200 1\n"), Some(Sched { cpu: 405187, waited: 1200 }));
        assert_eq!(parse("405187\n"), None);
        assert_eq!(parse("x 1 2"), None);
        if cfg!(target_os = "linux") {
            let file = open_own().expect("Linux has /proc/thread-self/schedstat");
            let a = read(&file).expect("it reads");
            // The kernel adds a running thread's time at its scheduler ticks (every 10 ms
            // or less) and switches: 30 ms of spinning and a yield see it move.
            let spin = std::time::Instant::now();
            while spin.elapsed() < Duration::from_millis(30) {
                std::hint::spin_loop();
            }
            std::thread::yield_now();
            let b = read(&file).expect("and reads again");
            assert!(b.cpu > a.cpu && b.waited >= a.waited, "{a:?} then {b:?}");
        }
    }

    #[test]
    fn the_waiting_share_needs_half_a_millisecond_of_runnable_time() {
        let at = |cpu: u64, waited: u64| Sched { cpu: cpu * 1000, waited: waited * 1000 };
        assert_eq!(waiting_share(at(0, 0), at(3000, 1000)), Some(0.25));
        assert_eq!(waiting_share(at(0, 0), at(300, 100)), None);
        assert_eq!(waiting_share(at(10, 0), at(5, 0)), None, "another thread's reading");
    }

    #[test]
    fn one_helper_is_benched_per_crowded_thread() {
        // Nobody crowded; a helper crowded; only the forking thread crowded (a helper is
        // benched all the same: its core is then free for the other process).
        assert_eq!(to_bench(Some(0.01), &[(0, Some(0.02))]), Vec::<usize>::new());
        assert_eq!(to_bench(Some(0.01), &[(0, Some(0.5))]), vec![0]);
        assert_eq!(to_bench(Some(0.5), &[(0, Some(0.02))]), vec![0]);
        assert_eq!(to_bench(Some(0.5), &[(0, None)]), vec![0]);
        // Seven helpers, two crowded and the forking thread too: the two, and the next most
        // crowded one.
        let helpers: Vec<_> = [0.0, 0.4, 0.1, 0.0, 0.6, 0.2, 0.0].iter().map(|&s| Some(s)).enumerate().collect();
        assert_eq!(to_bench(Some(0.3), &helpers), vec![4, 1, 5]);
        assert_eq!(to_bench(None, &helpers), vec![4, 1]);
        // No helper taking parts: nothing to bench.
        assert_eq!(to_bench(Some(0.9), &[]), Vec::<usize>::new());
    }

    #[test]
    fn the_bench_time_doubles_up_to_its_longest() {
        let mut bench = BENCH_FIRST;
        let mut seen = vec![];
        for _ in 0..8 {
            seen.push(bench.as_millis());
            bench = longer(bench);
        }
        assert_eq!(seen, [20, 40, 80, 160, 320, 640, 1000, 1000]);
    }
}
