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
