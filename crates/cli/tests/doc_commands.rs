//! The `remat` commands of the documentation, run; the documentation's command outputs,
//! compared with what the commands print.
//!
//! Every fenced block of `README.md` and `docs/*.md` that is not Rust or Python (those are
//! doctests, `crates/remat/src/lib.rs`, and `crates/python/tests/test_docs.py`) is in
//! [`BLOCKS`], which says how it is checked or why it is not: a block added to the
//! documentation fails `every_block_is_in_the_table` until it is classified there.
//!
//! A block of commands ([`Check::Run`]) has each of its `remat ...` lines run, in a
//! temporary directory that holds the files the block names (its [`Setup`]: the
//! repository's `examples/cli/`, or a conformance or zoo case written under the name the
//! block uses). An optional part, `[--backend jit]`, is run on its own: the command without
//! any, then with each (`[--policy dots | --budget 64MiB]`: each alternative;
//! `interp|jit`: each value). Each run must succeed and print or write something.

use std::path::Path;
use std::process::{Command, Output};

use remat_testkit::docs::{doc_blocks, repo_root, CodeBlock};
use serde_json::Value;

/// How a block is checked.
#[derive(Clone, Copy, Debug)]
enum Check {
    /// Its `remat` lines are run, with these files in the working directory.
    Run(Setup),
    /// Compared with what a command prints, by the named test of this file.
    Compared(&'static str),
    /// Compared by another test file, named.
    ComparedElsewhere(&'static str),
    /// Not a command's output, or not comparable: why.
    Not(&'static str),
}

/// The files a block's commands read, by the names the block uses.
#[derive(Clone, Copy, Debug)]
enum Setup {
    /// `examples/cli/` (a conformance case: see `the_cli_example_is_jaxs_case`).
    ExamplesCli,
    /// `FILE.jaxpr`, `IN.json`, `CT.json`: the conformance case `seed_no_checkpoint`
    /// (arguments `W1, W2, W3, x`, as the synopsis names them).
    SeedSynopsis,
    /// `loss.jaxpr`, `a.jaxpr`, `b.jaxpr`: the zoo's `gpt_block` (its names `q`, `k`, `v`,
    /// `attn_out`, `mlp_hidden`, as the planner's and the report's pages use them).
    GptBlock,
}

use Check::*;

/// Every block that is not Rust or Python, by its file and first line.
const BLOCKS: &[(&str, &str, Check)] = &[
    ("README.md", "cargo run --release --example demo", Not("cargo run of an example: built by `cargo test -p remat`, its output is not shown")),
    ("README.md", "./test.sh", Not("runs every test, this one included")),
    ("README.md", "pip install ./crates/python", Not("builds and installs the Python package (test.sh does, with maturin)")),
    ("README.md", "cargo run --release --example train", ComparedElsewhere("crates/remat/tests/train.rs compares the table below with the example's output")),
    ("README.md", "digits: 1797 images", ComparedElsewhere("crates/remat/tests/train.rs: the example's output, whole")),
    ("README.md", "cargo build --release", Run(Setup::ExamplesCli)),
    ("docs/architecture.md", "remat-cli (the `remat` binary)", Not("a diagram of the crates")),
    ("docs/autodiff.md", "jvp_jaxpr                  (primals) -> (outs)", Not("signatures of the passes, no command's output")),
    ("docs/autodiff.md", "{ lambda ; a:f32[3] b:f32[3] c:f32[3] d:f32[3]. let", Not("a jvp annotated with the rules (`<-` notes)")),
    ("docs/autodiff.md", "primal (known half):", Not("an illustration of partial evaluation, two hand-aligned columns")),
    ("docs/autodiff.md", "jaxpr  : (ins)", Not("signatures of the passes, no command's output")),
    ("docs/autodiff.md", "no checkpoint", Compared("autodiffs_residual_columns_are_what_remat_residuals_prints")),
    ("docs/autodiff.md", "forward computation:", Not("fwd-bwd with the long parameters elided (`[...]`, `...`) to fit the page")),
    ("docs/autodiff.md", "jaxpr      : (ins)", Not("signatures of the passes, no command's output")),
    ("docs/autodiff.md", "{ lambda ; a:f32[3] b:f32[3] c:f32[3] d:f32[]. let", Not("a backward half annotated with what each input is")),
    ("docs/autodiff.md", "remat residuals FILE.jaxpr [--arg-names W1,W2,W3,x]", Run(Setup::SeedSynopsis)),
    ("docs/autodiff.md", "checkpointed ──> vjp, partial_eval, jvp, policy, call, builder", Not("remat-ad's module graph; crates/remat/tests/imports.rs checks its imports against the layers")),
    ("docs/benchmarks_history.md", "# old/new alternating with JAX in the same rounds", Not("benchmark runs of minutes; their outputs are timings (the tables of that page, each with its command and date)")),
    ("docs/benchmarks.md", "bash crates/jit/bench/distributions.sh 20 3       # every program, 20 runs, 3 rounds", Not("benchmark runs of minutes on several input distributions; their outputs are timings")),
    ("docs/benchmarks.md", "bash crates/jit/bench/table.sh 30 3", Not("benchmark runs of minutes; their outputs are timings")),
    ("docs/ir.md", "{ lambda ; a:f32[5,4] b:f32[4]. let", Compared("irs_example_prints_back_exactly")),
    ("docs/ir.md", "file    := (\"let\" NAME \"=\" jaxpr \"in\")* jaxpr", Not("the grammar of the text form")),
    ("docs/ir.md", "eqn 0 (broadcast_in_dim) at f.jaxpr:1:25:", Compared("irs_size_errors_are_what_remat_prints")),
    ("docs/jit.md", "Jaxpr --cse----> Jaxpr:", Not("a diagram of the passes")),
    ("docs/planner.md", "remat plan loss.jaxpr --budget 64MiB", Run(Setup::GptBlock)),
    ("docs/planner.md", "python3 crates/plan/bench/gen_mlp.py 500 > /tmp/mlp1k.jaxpr", Not("a scale measurement of a minute or more; its timings are the table below it, with their date")),
    ("docs/planner.md", "policy: jax.checkpoint_policies.save_and_offload_only_these_names(", Not("an excerpt of `remat plan --names-only --host-budget` on the benchmark transformer at a budget the page gives around it")),
    ("docs/python.md", "pip install ./crates/python", Not("builds and installs the Python package")),
    ("docs/reliability.md", "cargo run --release -p remat-jit --example fuzz_programs", Not("a fuzzing campaign of ten minutes (crates/jit/tests/random_programs.rs runs the generator's programs)")),
    ("docs/reliability.md", "cargo run --release -p remat --example fuzz_text", Not("a fuzzing campaign (crates/remat/tests/fuzz_smoke.rs runs it briefly)")),
    ("docs/reliability.md", "CARGO_INCREMENTAL=0 RUSTFLAGS=\"-Zsanitizer=address\" \\", Not("a nightly sanitizer build")),
    ("docs/report.md", "remat report loss.jaxpr -o r.html", Run(Setup::GptBlock)),
    ("docs/training.md", "$ cargo run --release --example train", ComparedElsewhere("crates/remat/tests/train.rs: the example's output, whole (a run with times would be compared but for them)")),
    ("docs/training.md", "f32[3,3,1,16] from the argument params['conv1_w']", ComparedElsewhere("crates/remat/tests/train.rs: remat's lines with the example's --residuals, JAX's with train_jax.txt")),
    ("docs/training.md", "f32[64,8,8,16] output of conv_general_dilated", ComparedElsewhere("crates/remat/tests/train.rs: lines of the example's --residuals")),
    ("docs/training.md", "f32[64,8,8,16] named 'conv1'", ComparedElsewhere("crates/remat/tests/train.rs: lines of the example's --residuals")),
    ("docs/training.md", "python3 crates/remat/examples/train_jax.py > crates/remat/examples/train_jax.txt", Not("needs JAX; its output is committed and crates/remat/tests/train.rs compares remat with it")),
];

/// The blocks this file checks: not Rust, not Python.
fn checked_blocks() -> Vec<CodeBlock> {
    doc_blocks().into_iter().filter(|b| b.lang != "rust" && b.lang != "python").collect()
}

fn check_of(block: &CodeBlock) -> Option<Check> {
    BLOCKS.iter().find(|(file, first, _)| *file == block.file && block.first_line().starts_with(first)).map(|e| e.2)
}

fn block(file: &str, first: &str) -> CodeBlock {
    let found: Vec<CodeBlock> =
        checked_blocks().into_iter().filter(|b| b.file == file && b.first_line().starts_with(first)).collect();
    assert_eq!(found.len(), 1, "{file}: one block starting {first:?}");
    found.into_iter().next().unwrap()
}

/// The `remat` binary's commands (`remat --help`).
const COMMANDS: &[&str] = &["print", "eval", "grad", "residuals", "fwd-bwd", "bench", "plan", "explain", "report"];

/// A line's `remat` command, without `target/release/` and the comment: `None` for other
/// lines (`remat (the facade)` in a diagram is no command).
fn remat_command(line: &str) -> Option<&str> {
    let line = line.trim();
    let rest = line.strip_prefix("target/release/remat ").or_else(|| line.strip_prefix("remat "))?;
    let word = rest.split_whitespace().next()?;
    if !COMMANDS.contains(&word) {
        return None;
    }
    // A comment starts at a `#` after a space.
    Some(rest.find(" #").map_or(rest, |i| &rest[..i]).trim())
}

#[test]
fn every_block_is_in_the_table() {
    let blocks = checked_blocks();
    let missing: Vec<String> = blocks.iter().filter(|b| check_of(b).is_none()).map(|b| b.to_string()).collect();
    assert!(missing.is_empty(), "blocks not in BLOCKS (say how each is checked): {missing:#?}");
    for (file, first, _) in BLOCKS {
        assert!(
            blocks.iter().any(|b| b.file == *file && b.first_line().starts_with(first)),
            "BLOCKS names a block that is gone: {file}: {first:?}"
        );
    }
    // Each entry says where it is compared, or why it is not.
    let this_file = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/doc_commands.rs"))
        .expect("this file");
    for (file, first, check) in BLOCKS {
        match check {
            Run(_) => {}
            Compared(test) => {
                assert!(this_file.contains(&format!("fn {test}()")), "{file}: {first:?}: no test {test} here")
            }
            ComparedElsewhere(what) => {
                let path = what.split([' ', ':']).next().unwrap();
                assert!(repo_root().join(path).is_file(), "{file}: {first:?}: {path} is no file");
            }
            Not(why) => assert!(why.len() > 10, "{file}: {first:?}: say why it is not compared"),
        }
    }
    // A block with a remat command runs it.
    for b in &blocks {
        let runs = matches!(check_of(b), Some(Run(_)));
        let has_command = b.text.lines().any(|l| remat_command(l).is_some());
        assert_eq!(runs, has_command, "{b}: a block with `remat` commands is run, and only such a block");
    }
}

/// The words of a command, one list per variant: no optional part, then each optional part's
/// alternatives one at a time, a word `a|b` as each of its values.
fn variants(command: &str) -> Vec<Vec<String>> {
    enum Part {
        Fixed(String),
        Optional(Vec<String>),
    }
    let mut parts = Vec::new();
    let mut rest = command;
    while let Some(open) = rest.find('[') {
        // `[` inside a word (none in the documentation's commands) would start a group too.
        parts.push(Part::Fixed(rest[..open].to_string()));
        let close = open + rest[open..].find(']').unwrap_or_else(|| panic!("unclosed [ in {command:?}"));
        parts.push(Part::Optional(rest[open + 1..close].split(" | ").map(|a| a.trim().to_string()).collect()));
        rest = &rest[close + 1..];
    }
    parts.push(Part::Fixed(rest.to_string()));
    let words = |chosen: Option<(usize, &str)>| -> Vec<String> {
        let mut text = String::new();
        for (i, part) in parts.iter().enumerate() {
            match part {
                Part::Fixed(t) => text.push_str(t),
                Part::Optional(_) if chosen.is_some_and(|(j, _)| j == i) => {
                    text.push(' ');
                    text.push_str(chosen.unwrap().1);
                    text.push(' ');
                }
                Part::Optional(_) => {}
            }
        }
        text.split_whitespace().map(str::to_string).collect()
    };
    let mut out = vec![words(None)];
    for (i, part) in parts.iter().enumerate() {
        if let Part::Optional(alternatives) = part {
            for alt in alternatives {
                out.push(words(Some((i, alt))));
            }
        }
    }
    // A word `interp|jit`: one variant per value.
    out.into_iter()
        .flat_map(|ws| match ws.iter().position(|w| w.contains('|')) {
            None => vec![ws],
            Some(k) => ws[k]
                .split('|')
                .map(|value| {
                    let mut v = ws.clone();
                    v[k] = value.to_string();
                    v
                })
                .collect(),
        })
        .collect()
}

#[test]
fn optional_parts_are_run_one_at_a_time() {
    let got = variants("grad f --x a [--backend interp|jit] [--p dots | --b 6MiB]");
    let want: Vec<Vec<&str>> = vec![
        vec!["grad", "f", "--x", "a"],
        vec!["grad", "f", "--x", "a", "--backend", "interp"],
        vec!["grad", "f", "--x", "a", "--backend", "jit"],
        vec!["grad", "f", "--x", "a", "--p", "dots"],
        vec!["grad", "f", "--x", "a", "--b", "6MiB"],
    ];
    assert_eq!(got, want);
    assert_eq!(remat_command("target/release/remat print  a.jaxpr   # parse"), Some("print  a.jaxpr"));
    assert_eq!(remat_command("# each of the three also takes"), None);
    assert_eq!(remat_command("cargo build --release"), None);
    assert_eq!(remat_command("remat (the facade: run.rs, pretty.rs)"), None);
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn case(dir: &str, name: &str) -> Value {
    read_json(&repo_root().join("tests/data").join(dir).join(format!("{name}.json")))
}

/// Writes `setup`'s files into `dir`.
fn write_setup(setup: Setup, dir: &Path) {
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).expect("write a setup file");
    match setup {
        Setup::ExamplesCli => {
            std::fs::create_dir_all(dir.join("examples/cli")).unwrap();
            for name in ["loss.jaxpr", "inputs.json", "cotangents.json"] {
                std::fs::copy(repo_root().join("examples/cli").join(name), dir.join("examples/cli").join(name))
                    .expect("copy examples/cli");
            }
        }
        Setup::SeedSynopsis => {
            let c = case("conformance", "seed_no_checkpoint");
            write("FILE.jaxpr", c["jaxpr"].as_str().unwrap());
            write("IN.json", &c["args"].to_string());
            write("CT.json", &c["cotangents"].to_string());
        }
        Setup::GptBlock => {
            let c = case("zoo", "gpt_block");
            for name in ["loss.jaxpr", "a.jaxpr", "b.jaxpr"] {
                write(name, c["jaxpr"].as_str().unwrap());
            }
        }
    }
}

fn remat_in(dir: &Path, args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_remat")).args(args).current_dir(dir).output().expect("run remat")
}

/// The files of `dir` and their sizes, recursively.
fn files(dir: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            out.extend(files(&e.path()));
        } else {
            out.push((e.path().display().to_string(), e.metadata().unwrap().len()));
        }
    }
    out.sort();
    out
}

#[test]
fn every_documented_command_runs() {
    let mut ran = 0;
    for b in checked_blocks() {
        let Some(Run(setup)) = check_of(&b) else { continue };
        for line in b.text.lines() {
            let Some(command) = remat_command(line) else { continue };
            for args in variants(command) {
                let dir = tempfile::tempdir().expect("a temporary directory");
                write_setup(setup, dir.path());
                let before = files(dir.path());
                let out = remat_in(dir.path(), &args);
                let shown = format!(
                    "{b}: remat {}\nstdout:\n{}\nstderr:\n{}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                assert!(out.status.success(), "{shown}");
                let wrote = files(dir.path()) != before;
                assert!(!out.stdout.is_empty() || wrote, "printed and wrote nothing: {shown}");
                ran += 1;
            }
        }
    }
    // README (9 commands, 21 variants), the planner's and report's pages, autodiff's synopsis.
    assert!(ran >= 40, "only {ran} commands ran");
}

#[test]
fn the_cli_example_is_jaxs_case() {
    // examples/cli/ is the conformance case seed_loss_named_nopolicy, as JAX 0.10.2 gave it.
    let c = case("conformance", "seed_loss_named_nopolicy");
    let dir = repo_root().join("examples/cli");
    let text = std::fs::read_to_string(dir.join("loss.jaxpr")).unwrap();
    assert_eq!(text.trim_end(), c["jaxpr"].as_str().unwrap());
    assert_eq!(read_json(&dir.join("inputs.json")), c["args"]);
    assert_eq!(read_json(&dir.join("cotangents.json")), c["cotangents"]);
    // And `remat grad` on it, the README's line, gives JAX's gradients.
    let out_dir = tempfile::tempdir().unwrap();
    let out = out_dir.path().join("grads.json");
    let path = |n: &str| dir.join(n).display().to_string();
    let args: Vec<String> = [
        "grad",
        &path("loss.jaxpr"),
        "--inputs",
        &path("inputs.json"),
        "--cotangents",
        &path("cotangents.json"),
        "--out",
        &out.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let run = remat_in(out_dir.path(), &args);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let got = read_json(&out);
    let got = got["grads"].as_array().expect("grads");
    let want = c["grads"].as_array().unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g["shape"], w["shape"]);
        for (x, y) in g["data"].as_array().unwrap().iter().zip(w["data"].as_array().unwrap()) {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!(remat_testkit::within(x, y, 1e-4, 1e-5), "remat {x}, JAX {y}");
        }
    }
}

/// Runs `remat` with `args` on the files `files` (name, text) in a temporary directory.
fn remat_on(files: &[(&str, &str)], args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    remat_in(dir.path(), &args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

#[test]
fn irs_example_prints_back_exactly() {
    let b = block("docs/ir.md", "{ lambda ; a:f32[5,4] b:f32[4]. let");
    let out = remat_on(&[("f.jaxpr", &b.text)], &["print", "f.jaxpr"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), b.text);
}

#[test]
fn irs_size_errors_are_what_remat_prints() {
    // The two programs the page's lines are about: a broadcast to 909.5 TiB at column 25 of
    // line 1, and an input of 2^64 elements.
    let b = block("docs/ir.md", "eqn 0 (broadcast_in_dim) at f.jaxpr:1:25:");
    let programs = [
        "{ lambda ; a:f32[]. let b:f32[250000000000000] = broadcast_in_dim[broadcast_dimensions=() shape=(250000000000000,) sharding=None] a in (a,) }",
        "{ lambda ; a:f32[4294967296,4294967296]. let  in (a,) }",
    ];
    let lines: Vec<&str> = b.text.lines().collect();
    assert_eq!(lines.len(), programs.len());
    for (line, program) in lines.iter().zip(programs) {
        let out = remat_on(&[("f.jaxpr", program)], &["print", "f.jaxpr"]);
        assert!(!out.status.success());
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.lines().any(|l| l.ends_with(line)), "{line:?} is not a line of:\n{stderr}");
    }
}

/// The columns of a block of two hand-aligned columns: the second starts at the first
/// line's second column (two or more spaces before it).
fn columns(paragraph: &[&str]) -> (Vec<String>, Vec<String>) {
    let header = paragraph[0];
    let at = header.find("  ").map(|i| i + header[i..].len() - header[i..].trim_start().len()).expect("two columns");
    let (mut left, mut right) = (Vec::new(), Vec::new());
    for line in &paragraph[1..] {
        let (l, r) = if line.len() > at { line.split_at(at) } else { (*line, "") };
        for (col, text) in [(&mut left, l), (&mut right, r)] {
            if !text.trim().is_empty() {
                col.push(text.trim().to_string());
            }
        }
    }
    (left, right)
}

#[test]
fn autodiffs_residual_columns_are_what_remat_residuals_prints() {
    // Each column is `remat residuals f.jaxpr --arg-names W1,W2,W3,x` of the seed program
    // with that checkpoint (the conformance case named); the last column elides lines.
    let b = block("docs/autodiff.md", "no checkpoint");
    let lines: Vec<&str> = b.text.lines().collect();
    let paragraphs: Vec<&[&str]> = lines.split(|l| l.trim().is_empty()).filter(|p| !p.is_empty()).collect();
    assert_eq!(paragraphs.len(), 2);
    let (first, second) = (columns(paragraphs[0]), columns(paragraphs[1]));
    let cases = [
        ("seed_no_checkpoint", &first.0),
        ("seed_policy_dots_no_batch", &first.1),
        ("seed_names_save_only_a", &second.0),
        ("offload_dots_no_batch", &second.1),
    ];
    for (name, column) in cases {
        let c = case("conformance", name);
        let out = remat_on(
            &[("f.jaxpr", c["jaxpr"].as_str().unwrap())],
            &["residuals", "f.jaxpr", "--arg-names", "W1,W2,W3,x"],
        );
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let got: Vec<String> =
            String::from_utf8(out.stdout).unwrap().lines().map(|l| l.trim_end().to_string()).collect();
        if column.iter().any(|l| l == "...") {
            // An elided column: its lines are remat's, in remat's order.
            let mut rest = got.iter();
            for line in column.iter().filter(|l| *l != "...") {
                assert!(rest.any(|g| g == line), "{name}: {line:?} is not in order in {got:#?}");
            }
        } else {
            assert_eq!(&got, column, "{name}");
        }
    }
}
