//! Compile time against program size: wide programs (many scalar inputs, many outputs) and
//! long ones (a chain of equations), the shapes of issue 22's reproducer 6.
//!
//! `cargo run --release -p remat-jit --example compile_scaling [-- SIZES...]` prints, per
//! shape and size, the best of three compiles (parsing excluded; `compile` verifies) in wall and CPU time, and the plan's
//! function count (`SHAPE=sum` measures one shape); `-- --write DIR SIZE` writes the four programs of that size as jaxpr
//! files (`remat bench DIR/sum_50000.jaxpr` runs one end to end). docs/jit.md records the
//! figures.

use std::fmt::Write as _;
use std::time::Instant;

use remat_ir::parse_jaxpr;

/// The shapes of program measured, each a jaxpr text of `n` (inputs, outputs or equations).
/// A program's text for a size.
type Make = fn(usize) -> String;

const SHAPES: [(&str, Make); 6] =
    [("sum", sum), ("tree", tree), ("outs", outs), ("chain", chain), ("shared", shared), ("fanout", fanout)];

/// `n` scalar inputs added one by one into one output.
fn sum(n: usize) -> String {
    let mut t = header(n);
    let mut acc = "x0".to_string();
    for i in 1..n {
        writeln!(t, "    s{i}:f32[] = add {acc} x{i}").unwrap();
        acc = format!("s{i}");
    }
    t + &format!("  in ({acc},) }}\n")
}

/// `n` scalar inputs summed pairwise (a balanced tree of adds) into one output.
fn tree(n: usize) -> String {
    let mut t = header(n);
    let mut level: Vec<String> = (0..n).map(|i| format!("x{i}")).collect();
    let mut next = 0;
    while level.len() > 1 {
        let mut up = Vec::with_capacity(level.len().div_ceil(2));
        for pair in level.chunks(2) {
            if let [a, b] = pair {
                writeln!(t, "    p{next}:f32[] = add {a} {b}").unwrap();
                up.push(format!("p{next}"));
                next += 1;
            } else {
                up.push(pair[0].clone());
            }
        }
        level = up;
    }
    t + &format!("  in ({},) }}\n", level[0])
}

/// `n` scalar inputs, each with its own output (`2 * x + 1`).
fn outs(n: usize) -> String {
    let mut t = header(n);
    for i in 0..n {
        writeln!(t, "    m{i}:f32[] = mul x{i} 2.0:f32[]").unwrap();
        writeln!(t, "    y{i}:f32[] = add m{i} 1.0:f32[]").unwrap();
    }
    let ys: Vec<String> = (0..n).map(|i| format!("y{i}")).collect();
    t + &format!("  in ({},) }}\n", ys.join(", "))
}

/// `n` scalar inputs, each with its own output `sin(x) * sin(x)`: the `sin` is
/// materialized (read twice), then folded into its one consumer (`lower/share.rs`).
fn shared(n: usize) -> String {
    let mut t = header(n);
    for i in 0..n {
        writeln!(t, "    a{i}:f32[] = sin x{i}").unwrap();
        writeln!(t, "    y{i}:f32[] = mul a{i} a{i}").unwrap();
    }
    let ys: Vec<String> = (0..n).map(|i| format!("y{i}")).collect();
    t + &format!("  in ({},) }}\n", ys.join(", "))
}

/// `n` scalar inputs, each giving two outputs `sin(x) * 2` and `sin(x) + 1`: `n`
/// intermediate buffers for the planner.
fn fanout(n: usize) -> String {
    let mut t = header(n);
    for i in 0..n {
        writeln!(t, "    a{i}:f32[] = sin x{i}").unwrap();
        writeln!(t, "    y{i}:f32[] = mul a{i} 2.0:f32[]").unwrap();
        writeln!(t, "    z{i}:f32[] = add a{i} 1.0:f32[]").unwrap();
    }
    let ys: Vec<String> = (0..n).flat_map(|i| [format!("y{i}"), format!("z{i}")]).collect();
    t + &format!("  in ({},) }}\n", ys.join(", "))
}

/// One `f32[16]` input through a chain of `n` equations (`sin` then `mul` by 0.5,
/// alternating), with every tenth value also an output so that not all of it fuses.
fn chain(n: usize) -> String {
    let mut t = "{ lambda ; x0:f32[16]. let\n".to_string();
    let mut outs = Vec::new();
    for i in 1..=n {
        let op = if i % 2 == 1 { format!("sin x{}", i - 1) } else { format!("mul x{} 0.5:f32[]", i - 1) };
        writeln!(t, "    x{i}:f32[16] = {op}").unwrap();
        if i % 10 == 0 || i == n {
            outs.push(format!("x{i}"));
        }
    }
    t + &format!("  in ({},) }}\n", outs.join(", "))
}

/// The CPU time (user + system) this process has used, in ms (10 ms ticks), where Linux
/// reports it: on a loaded machine the wall time of a compile says more about the load.
fn cpu_ms() -> f64 {
    let ticks = || -> Option<u64> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
    };
    ticks().map_or(f64::NAN, |t| t as f64 * 10.0)
}

fn header(n: usize) -> String {
    let params: Vec<String> = (0..n).map(|i| format!("x{i}:f32[]")).collect();
    format!("{{ lambda ; {}. let\n", params.join(" "))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--write") {
        let (dir, n) = match &args[1..] {
            [dir, n] => (dir, n.parse::<usize>().expect("SIZE is a number")),
            _ => panic!("usage: compile_scaling --write DIR SIZE"),
        };
        for (name, make) in SHAPES {
            let path = format!("{dir}/{name}_{n}.jaxpr");
            std::fs::write(&path, make(n)).expect("writes the program");
            println!("{path}");
        }
        return;
    }
    let only = std::env::var("SHAPE").ok();
    let sizes: Vec<usize> = if args.is_empty() {
        vec![1_000, 10_000, 50_000, 100_000]
    } else {
        args.iter().map(|a| a.parse().expect("sizes are numbers")).collect()
    };
    println!("{:<6} {:>7} {:>11} {:>11} {:>10}", "shape", "n", "compile ms", "CPU ms", "functions");
    for (name, make) in SHAPES.into_iter().filter(|(name, _)| only.as_deref().is_none_or(|o| o == *name)) {
        for &n in &sizes {
            let jaxpr = parse_jaxpr(&make(n), name).expect("parses");
            let (mut best, mut best_cpu) = (f64::INFINITY, f64::INFINITY);
            let mut functions = 0;
            for _ in 0..3 {
                let (start, cpu) = (Instant::now(), cpu_ms());
                let compiled = remat_jit::compile(&jaxpr).expect("compiles");
                best = best.min(start.elapsed().as_secs_f64() * 1e3);
                best_cpu = best_cpu.min(cpu_ms() - cpu);
                functions = compiled.plan().functions;
            }
            println!("{name:<6} {n:>7} {best:>11.1} {best_cpu:>11.0} {functions:>10}");
        }
    }
}
