//! docs/architecture.md stays true: its table of crate dependencies is exactly what
//! `cargo metadata` reports for the workspace (normal dependencies between remat's own
//! crates), and every dependency points down the pipeline (no crate depends on one listed
//! after it).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// `crate -> its remat dependencies`, from `cargo metadata` (normal dependencies only:
/// dev-dependencies are test oracles, not architecture).
fn metadata_graph(root: &Path) -> BTreeMap<String, Vec<String>> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let members: Vec<String> =
        meta["packages"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap().to_string()).collect();
    let mut graph = BTreeMap::new();
    for p in meta["packages"].as_array().unwrap() {
        let mut deps: Vec<String> = p["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null() && members.contains(&d["name"].as_str().unwrap().to_string()))
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect();
        deps.sort();
        graph.insert(p["name"].as_str().unwrap().to_string(), deps);
    }
    graph
}

/// The rows of the table under "## Crate dependencies" in docs/architecture.md, in order:
/// `| crate | depends on |`, dependencies comma-separated, `-` for none.
fn documented_graph(doc: &str) -> Vec<(String, Vec<String>)> {
    let section = doc.split("## Crate dependencies").nth(1).expect("docs/architecture.md has '## Crate dependencies'");
    let section = section.split("\n## ").next().unwrap();
    let mut rows = Vec::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let name = cells[0].trim_matches('`').to_string();
        let mut deps: Vec<String> = if cells[1] == "-" {
            Vec::new()
        } else {
            cells[1].split(',').map(|d| d.trim().trim_matches('`').to_string()).collect()
        };
        deps.sort();
        rows.push((name, deps));
    }
    rows
}

#[test]
fn documented_dependencies_are_cargos() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let documented = documented_graph(&doc);
    let actual = metadata_graph(&root);
    let documented_map: BTreeMap<String, Vec<String>> = documented.iter().cloned().collect();
    assert_eq!(
        documented_map, actual,
        "docs/architecture.md's '## Crate dependencies' table differs from cargo metadata"
    );
    // Listed in pipeline order: every dependency appears earlier in the table.
    for (i, (name, deps)) in documented.iter().enumerate() {
        for d in deps {
            let at = documented.iter().position(|(n, _)| n == d).unwrap();
            assert!(at < i, "{name} depends on {d}, which the table lists after it");
        }
    }
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The `_ =>` arms (and `_ if ... =>`) of matches whose other arms name `Primitive::`,
/// `PrimitiveKind::` or `HigherOrder::` variants: `(file, line)`. The arms of one match
/// are the lines at the `_ =>` arm's indentation up to the `match` that opens them
/// (rustfmt's layout).
fn wildcard_arms_on_primitives(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let wildcard = t.starts_with("_ =>") || (t.starts_with("_ if ") && t.contains("=>"));
        if !wildcard {
            continue;
        }
        let at = indent(l);
        let mut names_a_primitive = false;
        for prev in lines[..i].iter().rev() {
            if prev.trim().is_empty() {
                continue;
            }
            let p = prev.trim_start().trim_start_matches("| ");
            if indent(prev) == at
                && ["Primitive::", "PrimitiveKind::", "HigherOrder::", "remat_ir::Primitive::"]
                    .iter()
                    .any(|v| p.starts_with(v))
            {
                names_a_primitive = true;
            }
            if indent(prev) < at && prev.contains("match ") {
                break;
            }
        }
        if names_a_primitive {
            out.push(i + 1);
        }
    }
    out
}

/// Every property a primitive has is an exhaustive match: a new primitive does not
/// compile until each table decides about it (issue 42). No `_ =>` arm on `Primitive`,
/// `PrimitiveKind` or `HigherOrder` in any crate's sources or tests.
#[test]
fn no_wildcard_arm_on_primitives() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    rust_files(&root.join("crates"), &mut files);
    files.sort();
    let mut found = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let name = f.strip_prefix(&root).unwrap().display().to_string();
        let lines = wildcard_arms_on_primitives(&text);
        if !lines.is_empty() {
            found.push(format!("{name}: lines {lines:?}"));
        }
    }
    assert!(found.is_empty(), "`_ =>` arms on primitives:\n{}", found.join("\n"));
    // The check sees one, a guarded one and one in a nested match; not one on other types.
    let sample = "match p {\n    Primitive::Sin => 1,\n    // a comment\n    _ => 0,\n}\n";
    assert_eq!(wildcard_arms_on_primitives(sample), [4]);
    let guarded = "match p {\n    PrimitiveKind::Cos => 1,\n    _ if q => 2,\n    Primitive::Sin => 3,\n}\n";
    assert_eq!(wildcard_arms_on_primitives(guarded), [3]);
    let nested = "match d {\n    DType::F32 => match p {\n        HigherOrder::Scan => 1,\n        _ => 0,\n    },\n    _ => 2,\n}\n";
    assert_eq!(wildcard_arms_on_primitives(nested), [4]);
}
