//! The README's speed and memory figures are computed here from the tables in
//! docs/benchmarks.md that the benchmark scripts print (`crates/jit/bench/distributions.sh`,
//! `table.sh`), so that no figure in the README can go stale: a new table changes what this
//! test expects, and the README must follow (the failure prints the text to paste).
//!
//! The README's block sits between `<!-- numbers -->` and `<!-- /numbers -->`.

use std::path::Path;

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The rows of the first markdown table after the heading that starts with `heading`: each
/// row's cells by the header's names.
fn table_after(doc: &str, heading: &str) -> Vec<Vec<(String, String)>> {
    let start = doc
        .lines()
        .position(|l| l.starts_with('#') && l.trim_start_matches('#').trim().starts_with(heading))
        .unwrap_or_else(|| panic!("docs/benchmarks.md has no heading {heading:?}"));
    let lines: Vec<&str> = doc.lines().skip(start + 1).skip_while(|l| !l.starts_with('|')).collect();
    let cells = |l: &str| l.trim().trim_matches('|').split('|').map(|c| c.trim().to_string()).collect::<Vec<_>>();
    let header = cells(lines[0]);
    lines[2..]
        .iter()
        .take_while(|l| l.starts_with('|'))
        .map(|l| header.iter().cloned().zip(cells(l)).collect())
        .collect()
}

fn cell<'a>(row: &'a [(String, String)], name: &str) -> &'a str {
    &row.iter().find(|(h, _)| h == name).unwrap_or_else(|| panic!("no column {name:?}")).1
}

/// A ratio cell (`1.36`, `0.99 (miss)`) as a number.
fn ratio(row: &[(String, String)], name: &str) -> f64 {
    let text = cell(row, name);
    text.split_whitespace().next().and_then(|x| x.parse().ok()).unwrap_or_else(|| panic!("{name}: {text:?}"))
}

/// `a-b` (or `a` when equal) with two decimals.
fn range(xs: impl IntoIterator<Item = f64>) -> String {
    range_to(xs, 2)
}

/// Whole numbers: `a-b`.
fn whole_range(xs: impl IntoIterator<Item = f64>) -> String {
    range_to(xs, 0)
}

/// The smallest and largest of `xs` with `decimals` decimals, one number when they print alike.
fn range_to(xs: impl IntoIterator<Item = f64>, decimals: usize) -> String {
    let xs: Vec<f64> = xs.into_iter().collect();
    assert!(!xs.is_empty(), "a range of nothing");
    let (lo, hi) = xs.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    let (lo, hi) = (format!("{lo:.decimals$}"), format!("{hi:.decimals$}"));
    if lo == hi {
        lo
    } else {
        format!("{lo}-{hi}")
    }
}

/// The README's block, computed from the two tables.
fn expected() -> String {
    let doc = read("docs/benchmarks.md");
    let any = table_after(&doc, "Speed on any input");
    let program = |r: &Vec<(String, String)>| cell(r, "program").to_string();
    let dist = |r: &Vec<(String, String)>| cell(r, "distribution").split_whitespace().next().unwrap_or("").to_string();
    let programs: std::collections::BTreeSet<String> = any.iter().map(program).collect();
    let run = |r: &Vec<(String, String)>| ratio(r, "JAX/remat (run)");
    let over = |dists: &[&str], family: &dyn Fn(&str) -> bool| {
        range(any.iter().filter(|r| dists.contains(&dist(r).as_str()) && family(&program(r))).map(run))
    };
    let all = |_: &str| true;
    let prefix = |p: &'static [&'static str]| move |name: &str| p.iter().any(|p| name.starts_with(p));
    let below = any.iter().filter(|r| run(r) < 1.0).count();
    let whole = table_after(&doc, "The whole table after");
    // The rows of JAX's own programs (not the Rust twins or the kept-recompute variants).
    let jax_rows: Vec<_> = whole.iter().filter(|r| programs.contains(cell(r, "program"))).collect();
    let num = |r: &Vec<(String, String)>, name: &str| -> f64 {
        cell(r, name).parse().unwrap_or_else(|_| panic!("{name}: {:?}", cell(r, name)))
    };
    let compile = whole_range(jax_rows.iter().map(|r| num(r, "JAX compile ms") / num(r, "remat compile ms")));
    let run_into = range(jax_rows.iter().map(|r| ratio(r, "JAX/remat (run_into)")));
    let within = jax_rows.iter().filter(|r| num(r, "remat peak bytes") <= num(r, "JAX temp bytes")).count();
    let less = jax_rows.iter().filter(|r| num(r, "remat peak bytes") < num(r, "JAX temp bytes")).count();
    let speed = format!(
        "- Speed: [`docs/benchmarks.md`](docs/benchmarks.md), \"Speed on any input\", times the {n} benchmark \
         programs side by side with JAX 0.10.2's XLA on one 2-core machine, both on the same arguments, remat \
         with fresh output arrays as a JAX call returns them: {jax}x XLA's speed on JAX's own arguments, \
         {uniform}x on uniform ones in [-1, 1], and {hard}x on arguments that saturate the softmax or underflow \
         in the backward pass ({below} of {rows} rows below 1.00x). By family, on JAX's and the uniform \
         arguments: CNN and ResNet {conv}x, GPT and transformer blocks {attn}x, scans {scan}x, deep GELU MLPs \
         {gelu}x, small MLPs {small}x, medium MLPs {medium}x, and the large MLPs, GEMM-bound on both sides, \
         {large}x. In the last whole table (\"The whole table after round six\", the same {m} programs) remat \
         compiles {compile}x faster than XLA, tracing and autodiff included, and with outputs reused \
         (`run_into`) runs at {run_into}x XLA's speed.",
        n = programs.len(),
        jax = over(&["jax"], &all),
        uniform = over(&["uniform"], &all),
        hard = over(&["saturate", "tiny"], &all),
        rows = any.len(),
        conv = over(&["jax", "uniform"], &prefix(&["cnn_", "resnet_"])),
        attn = over(&["jax", "uniform"], &prefix(&["gpt_", "transformer_"])),
        scan = over(&["jax", "uniform"], &prefix(&["scan_"])),
        gelu = over(&["jax", "uniform"], &prefix(&["gelu_deep_"])),
        small = over(&["jax", "uniform"], &prefix(&["mlp_small_"])),
        medium = over(&["jax", "uniform"], &prefix(&["mlp_medium_"])),
        large = over(&["jax", "uniform"], &prefix(&["mlp_large_"])),
        m = jax_rows.len(),
    );
    let memory = format!(
        "- Memory: in that table the JIT's planned peak is at most XLA's temp buffer on {within} of the {m} \
         programs, and below it on {less}.",
        m = jax_rows.len(),
    );
    format!("{}\n{}", wrap(&speed), wrap(&memory))
}

/// A bullet wrapped at 92 columns, its continuation lines indented by two spaces.
fn wrap(text: &str) -> String {
    let mut lines = vec![String::new()];
    for word in text.split(' ') {
        let line = lines.last_mut().expect("one line at least");
        if !line.trim().is_empty() && line.len() + 1 + word.len() > 92 {
            lines.push(format!("  {word}"));
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines.join("\n")
}

#[test]
fn the_readmes_figures_are_the_benchmark_tables() {
    let readme = read("README.md");
    let (open, close) = ("<!-- numbers -->\n", "<!-- /numbers -->");
    let start = readme.find(open).expect("README.md has a `<!-- numbers -->` block") + open.len();
    let end = start + readme[start..].find(close).expect("the block ends with `<!-- /numbers -->`");
    let want = expected();
    assert_eq!(
        readme[start..end].trim_end(),
        want,
        "README.md's figures differ from docs/benchmarks.md's tables; the block should read:\n{want}\n"
    );
}

/// The README's planner figures: its reach on the benchmark transformer, from
/// docs/benchmarks.md's "Step time of the planner's plans". (The README's counts of cases
/// and programs are doc_samples.rs's.)
#[test]
fn the_readmes_plan_figures_are_the_step_time_table() {
    let readme = read("README.md");
    let doc = read("docs/benchmarks.md");
    let steps = table_after(&doc, "Step time of the planner's plans");
    let bytes = |r: &Vec<(String, String)>| -> f64 { cell(r, "bytes").replace(',', "").parse().unwrap() };
    let smallest = steps.first().map(bytes).expect("the table has rows") / (1u64 << 20) as f64;
    let one = steps.iter().find(|r| cell(r, "plan (planned peak)").contains("one checkpoint")).map(bytes);
    let one = one.expect("a row for one checkpoint") / 1e6;
    // The measured margins at one third of the activation memory, as the section states them.
    let section = &doc[doc.find("## Step time of the planner's plans").expect("the section")..];
    let at = section.find("(+").map(|i| &section[i + 1..]).expect("the section states its margins as (+A% to +B% ...)");
    let margins: Vec<&str> =
        at.split('%').take(2).map(|x| x.trim_start_matches(" to ").trim_start_matches('+')).collect();
    for want in [
        format!("{smallest:.1} MiB against {one:.1} MB"),
        format!("it runs +{}-{}% over no remat", margins[0], margins[1]),
    ] {
        let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains(&want), "README.md should say {want:?}");
    }
}

/// The parsing the figures rest on: a table after its heading, ratio cells with a
/// `(miss)` mark, ranges.
#[test]
fn the_tables_are_read_as_the_scripts_print_them() {
    let doc = "# x\n### Speed on any input (issue 41)\n\ntext\n\n| program | JAX/remat (run) |\n|---|---:|\n\
               | a | 1.25 |\n| b | 0.99 (miss) |\n\nafter\n| other | 9 |\n";
    let rows = table_after(doc, "Speed on any input");
    assert_eq!(rows.len(), 2);
    assert_eq!(cell(&rows[1], "program"), "b");
    assert_eq!(ratio(&rows[1], "JAX/remat (run)"), 0.99);
    assert_eq!(range(rows.iter().map(|r| ratio(r, "JAX/remat (run)"))), "0.99-1.25");
    assert_eq!(range([1.0, 1.0]), "1.00");
    assert_eq!(whole_range([13.6, 67.8]), "14-68");
    assert_eq!(wrap(&format!("- {}", "word ".repeat(30).trim())).lines().map(str::len).max(), Some(91));
    assert!(wrap(&format!("- {}", "word ".repeat(30).trim())).lines().skip(1).all(|l| l.starts_with("  word")));
}
