//! Modules point one way inside every crate, as crates do between themselves
//! (docs/architecture.md, "Modules point one way").
//!
//! The rule: at every level of a crate's module tree, the sibling modules' imports form no
//! circle. A module's own file (`jvp.rs` or `jvp/mod.rs`) and the files below it
//! (`jvp/rules.rs`) are one unit to their siblings: the module's file is the hub of its
//! own subtree, its children may use what it defines and it may call them. So
//! `jvp/rules.rs -> transpose.rs` and `transpose/rules.rs -> jvp.rs` make a circle between
//! the siblings `jvp` and `transpose`, and `jvp/rules.rs -> jvp/special.rs ->
//! jvp/rules.rs` one between the siblings `rules` and `special`.
//!
//! An import is every path that names another file's module or item: `use` statements
//! (groups and globs expanded) and paths written inline (`crate::dce::dce_jaxpr(..)`,
//! `super::Primitive`, `rules::jvp_rule(..)` where `rules` is a child module), each
//! resolved to the file that defines the item (through `pub use` re-exports, which are a
//! module's face and not an import of their own). `mod` declarations, comments, strings
//! and `#[cfg(test)]` modules are not imports.
//!
//! In `remat-ad` the rule is stronger: its top-level modules sit in the layers
//! docs/architecture.md lists under "Layers of remat-ad", and every import points down.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path inside its crate: `[]` for the crate root, `["jvp", "rules"]`.
type ModPath = Vec<String>;

/// One crate's files and the imports between them (file module -> file module -> the
/// paths that make the import, for the messages).
struct Graph {
    files: BTreeSet<ModPath>,
    edges: BTreeMap<ModPath, BTreeMap<ModPath, BTreeSet<String>>>,
}

fn mod_path(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut segs: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if matches!(segs.last().map(String::as_str), Some("lib" | "main" | "mod")) {
        segs.pop();
    }
    segs
}

fn show(m: &[String]) -> String {
    if m.is_empty() {
        "<crate root>".into()
    } else {
        m.join("/")
    }
}

/// The source without comments, string and char literals, and `#[cfg(test)]` modules.
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == b'r' && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#')) && !word_byte(b, i) {
            // r"..." or r#"..."#
            let mut j = i + 1;
            let mut hashes = 0;
            while j < b.len() && b[j] == b'#' {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == b'"' && b[j + 1..].iter().take(hashes).filter(|&&h| h == b'#').count() == hashes {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{1F600}'), not a lifetime ('a).
            let end = if b.get(i + 1) == Some(&b'\\') {
                b.get(i + 3..).and_then(|r| r.iter().position(|&x| x == b'\'')).map(|p| i + 3 + p)
            } else {
                let ch_len = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch_len) == Some(&b'\'')).then_some(i + 1 + ch_len)
            };
            match end {
                Some(e) => {
                    out.push_str("' '");
                    i = e + 1;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let ch = src[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    remove_test_modules(&out)
}

fn word_byte(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

fn remove_test_modules(src: &str) -> String {
    let mut s = src.to_string();
    while let Some(at) = s.find("#[cfg(test)]") {
        let rest = &s[at + "#[cfg(test)]".len()..];
        let trimmed = rest.trim_start();
        let item_start = s.len() - trimmed.len();
        // Remove the item: up to its matching brace, or its semicolon.
        let bytes = s.as_bytes();
        let mut j = item_start;
        let mut depth = 0usize;
        while j < bytes.len() {
            match bytes[j] {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        j += 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    j += 1;
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        s.replace_range(at..j, "");
    }
    s
}

/// Every path a `use` tree names: `crate::{a::b, c::{d, e as f}, g::*}` gives `crate::a::b`,
/// `crate::c::d`, `crate::c::e`, `crate::g::*`.
fn expand_use(tree: &str) -> Vec<Vec<String>> {
    fn split_top(s: &str) -> Vec<&str> {
        let mut parts = Vec::new();
        let (mut depth, mut start) = (0, 0);
        for (i, c) in s.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&s[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&s[start..]);
        parts
    }
    fn rec(prefix: &[String], s: &str, out: &mut Vec<Vec<String>>) {
        let parts = split_top(s);
        if parts.len() > 1 {
            for p in parts {
                rec(prefix, p, out);
            }
            return;
        }
        let s = s.trim();
        if s.is_empty() {
            return;
        }
        match s.find('{') {
            None => {
                let path = s.split(" as ").next().unwrap().trim();
                let mut p = prefix.to_vec();
                p.extend(path.split("::").map(str::trim).filter(|x| !x.is_empty()).map(String::from));
                if p.last().map(String::as_str) == Some("self") {
                    p.pop();
                }
                out.push(p);
            }
            Some(open) => {
                let mut p = prefix.to_vec();
                p.extend(s[..open].split("::").map(str::trim).filter(|x| !x.is_empty()).map(String::from));
                let close = s.rfind('}').expect("a use group closes");
                rec(&p, &s[open + 1..close], out);
            }
        }
    }
    let mut out = Vec::new();
    rec(&[], tree, &mut out);
    out
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}
fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// One `use` statement: is it a `pub` re-export, and the paths it names.
type UseStatement = (bool, Vec<Vec<String>>);

/// `use` statements; and the text left when they are taken out.
fn use_statements(src: &str) -> (Vec<UseStatement>, String) {
    let mut uses = Vec::new();
    let mut rest = String::with_capacity(src.len());
    let b = src.as_bytes();
    let mut i = 0;
    let mut last = 0;
    while let Some(p) = src[i..].find("use ") {
        let at = i + p;
        i = at + 4;
        if word_byte(b, at) {
            continue;
        }
        // Is it preceded by `pub` or `pub(crate)`?
        let before = src[..at].trim_end();
        let public = before.ends_with("pub")
            || (before.ends_with(')') && before[..before.rfind('(').unwrap_or(0)].trim_end().ends_with("pub"));
        let Some(end) = src[at..].find(';') else { break };
        uses.push((public, expand_use(&src[at + 4..at + end])));
        rest.push_str(&src[last..at]);
        last = at + end + 1;
        i = last;
    }
    rest.push_str(&src[last..]);
    (uses, rest)
}

/// Paths written inline: `a::b::c` not preceded by `::` or a word character.
fn inline_paths(src: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let prev_ok = i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == ':');
        if is_ident_start(c) && prev_ok {
            let mut segs = Vec::new();
            let mut j = i;
            loop {
                let s = j;
                while j < chars.len() && is_ident(chars[j]) {
                    j += 1;
                }
                segs.push(chars[s..j].iter().collect::<String>());
                if j + 2 < chars.len() && chars[j] == ':' && chars[j + 1] == ':' && is_ident_start(chars[j + 2]) {
                    j += 2;
                } else {
                    break;
                }
            }
            if segs.len() > 1 {
                out.push(segs);
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

fn definitions(src: &str) -> BTreeSet<String> {
    let mut defs = BTreeSet::new();
    let words: Vec<&str> = src.split(|c: char| !(is_ident(c) || c == '!')).filter(|w| !w.is_empty()).collect();
    for w in words.windows(2) {
        if matches!(w[0], "fn" | "struct" | "enum" | "trait" | "type" | "const" | "static" | "union" | "macro_rules!") {
            defs.insert(w[1].to_string());
        }
    }
    defs
}

struct Crate {
    files: BTreeSet<ModPath>,
    defs: BTreeMap<ModPath, BTreeSet<String>>,
    reexports: BTreeMap<ModPath, Vec<Vec<String>>>,
}

impl Crate {
    /// The file a path names, read from module `at`; `None` for paths outside the crate.
    fn resolve(&self, at: &[String], path: &[String], depth: usize) -> Option<ModPath> {
        let mut segs: &[String] = path;
        let mut cur: ModPath = match segs.first()?.as_str() {
            "crate" => {
                segs = &segs[1..];
                Vec::new()
            }
            "super" | "self" => {
                let mut cur = at.to_vec();
                while let Some(s) = segs.first() {
                    match s.as_str() {
                        "super" => {
                            cur.pop();
                        }
                        "self" => {}
                        _ => break,
                    }
                    segs = &segs[1..];
                }
                cur
            }
            child if self.files.contains(&[at, &[child.to_string()]].concat()) => at.to_vec(),
            _ => return None,
        };
        while let Some(s) = segs.first() {
            let next = [cur.as_slice(), std::slice::from_ref(s)].concat();
            if !self.files.contains(&next) {
                break;
            }
            cur = next;
            segs = &segs[1..];
        }
        let Some(name) = segs.first() else { return Some(cur) };
        if self.defs.get(&cur).is_some_and(|d| d.contains(name)) || depth > 8 {
            return Some(cur);
        }
        for re in self.reexports.get(&cur).into_iter().flatten() {
            if re.last() == Some(name) {
                if let Some(r) = self.resolve(&cur, re, depth + 1) {
                    return Some(r);
                }
            }
            if re.last().map(String::as_str) == Some("*") {
                let mut p = re[..re.len() - 1].to_vec();
                p.push(name.clone());
                if let Some(r) = self.resolve(&cur, &p, depth + 1) {
                    if self.defs.get(&r).is_some_and(|d| d.contains(name)) {
                        return Some(r);
                    }
                }
            }
        }
        Some(cur)
    }
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The import graph of one crate's sources, given as (module path, text).
fn graph_of(sources: &[(ModPath, String)]) -> Graph {
    let stripped: Vec<(ModPath, String)> = sources.iter().map(|(m, s)| (m.clone(), strip(s))).collect();
    let files: BTreeSet<ModPath> = stripped.iter().map(|(m, _)| m.clone()).collect();
    let mut krate = Crate { files: files.clone(), defs: BTreeMap::new(), reexports: BTreeMap::new() };
    let mut parsed = Vec::new();
    for (m, s) in &stripped {
        krate.defs.insert(m.clone(), definitions(s));
        let (uses, rest) = use_statements(s);
        for (public, paths) in &uses {
            if *public {
                krate.reexports.entry(m.clone()).or_default().extend(paths.iter().cloned());
            }
        }
        parsed.push((m.clone(), uses, rest));
    }
    let mut edges: BTreeMap<ModPath, BTreeMap<ModPath, BTreeSet<String>>> = BTreeMap::new();
    for (m, uses, rest) in &parsed {
        let mut paths: Vec<(bool, Vec<String>)> =
            uses.iter().flat_map(|(public, ps)| ps.iter().map(move |p| (*public, p.clone()))).collect();
        paths.extend(inline_paths(rest).into_iter().map(|p| (false, p)));
        for (public, mut p) in paths {
            if p.last().map(String::as_str) == Some("*") {
                p.pop();
            }
            let Some(to) = krate.resolve(m, &p, 0) else { continue };
            // A re-export of the module's own descendants is its face, not an import.
            if to == *m || (public && to.starts_with(m)) {
                continue;
            }
            edges.entry(m.clone()).or_default().entry(to).or_default().insert(p.join("::"));
        }
    }
    Graph { files, edges }
}

fn crate_graph(src: &Path) -> Graph {
    let mut paths = Vec::new();
    rs_files(src, &mut paths);
    let sources: Vec<(ModPath, String)> =
        paths.iter().map(|p| (mod_path(src, p), std::fs::read_to_string(p).unwrap())).collect();
    graph_of(&sources)
}

/// Strongly connected components of more than one node (Tarjan).
fn circles(nodes: &BTreeSet<String>, edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct St<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        on: BTreeSet<String>,
        out: Vec<Vec<String>>,
    }
    fn visit(st: &mut St, v: &str) {
        let n = st.index.len();
        st.index.insert(v.to_string(), n);
        st.low.insert(v.to_string(), n);
        st.stack.push(v.to_string());
        st.on.insert(v.to_string());
        for w in st.edges.get(v).into_iter().flatten().cloned().collect::<Vec<_>>() {
            if !st.index.contains_key(&w) {
                visit(st, &w);
                let l = st.low[&w].min(st.low[v]);
                st.low.insert(v.to_string(), l);
            } else if st.on.contains(&w) {
                let l = st.index[&w].min(st.low[v]);
                st.low.insert(v.to_string(), l);
            }
        }
        if st.low[v] == st.index[v] {
            let mut c = Vec::new();
            loop {
                let w = st.stack.pop().unwrap();
                st.on.remove(&w);
                let done = w == v;
                c.push(w);
                if done {
                    break;
                }
            }
            if c.len() > 1 {
                c.sort();
                st.out.push(c);
            }
        }
    }
    let mut st = St {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in nodes {
        if !st.index.contains_key(v) {
            visit(&mut st, v);
        }
    }
    st.out
}

/// For every module with submodules: the import circles among its children (each child
/// with its subtree as one unit), each with the file imports that make it.
fn sibling_circles(g: &Graph) -> Vec<String> {
    let parents: BTreeSet<ModPath> =
        g.files.iter().filter(|m| !m.is_empty()).map(|m| m[..m.len() - 1].to_vec()).collect();
    let mut problems = Vec::new();
    for p in &parents {
        let below = |m: &ModPath| m.len() > p.len() && m.starts_with(p);
        let kids: BTreeSet<String> = g.files.iter().filter(|m| below(m)).map(|m| m[p.len()].clone()).collect();
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut why: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for (a, tos) in &g.edges {
            for (b, paths) in tos {
                if below(a) && below(b) && a[p.len()] != b[p.len()] {
                    let (ka, kb) = (a[p.len()].clone(), b[p.len()].clone());
                    edges.entry(ka.clone()).or_default().insert(kb.clone());
                    for path in paths {
                        why.entry((ka.clone(), kb.clone())).or_default().push(format!("{} uses {path}", show(a)));
                    }
                }
            }
        }
        for c in circles(&kids, &edges) {
            let mut text = format!("an import circle among the children of {}: {}\n", show(p), c.join(", "));
            for a in &c {
                for b in edges.get(a).into_iter().flatten().filter(|b| c.contains(b)) {
                    let w = &why[&(a.clone(), b.clone())];
                    text.push_str(&format!(
                        "    {a} -> {b}: {}\n",
                        w.iter().take(3).cloned().collect::<Vec<_>>().join("; ")
                    ));
                }
            }
            problems.push(text);
        }
    }
    problems
}

/// remat-ad's layers, bottom first, from docs/architecture.md's "Layers of remat-ad" table
/// (`| n | `module`, `module` | what |`).
fn documented_layers(doc: &str) -> Vec<Vec<String>> {
    let section =
        doc.split("### Layers of remat-ad").nth(1).expect("docs/architecture.md has '### Layers of remat-ad'");
    let section = section.split("\n#").next().unwrap();
    section
        .lines()
        .filter(|l| l.starts_with("| ") && l[2..].starts_with(|c: char| c.is_ascii_digit()))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            cells[1].split(',').map(|m| m.trim().trim_matches('`').to_string()).collect()
        })
        .collect()
}

/// Imports between top-level modules of a crate that do not point down the layers.
fn layer_violations(g: &Graph, layers: &[Vec<String>]) -> Vec<String> {
    let layer_of = |m: &str| layers.iter().position(|l| l.iter().any(|x| x == m));
    let mut problems = Vec::new();
    for m in g.files.iter().filter(|m| m.len() == 1) {
        if layer_of(&m[0]).is_none() {
            problems.push(format!("module {} is in no layer", m[0]));
        }
    }
    for (a, tos) in &g.edges {
        for (b, paths) in tos {
            let (Some(ta), Some(tb)) = (a.first(), b.first()) else { continue };
            if ta == tb {
                continue;
            }
            if let (Some(la), Some(lb)) = (layer_of(ta), layer_of(tb)) {
                if lb >= la {
                    problems.push(format!(
                        "{} (layer {}) imports {} (layer {}): {}",
                        show(a),
                        la + 1,
                        show(b),
                        lb + 1,
                        paths.iter().cloned().collect::<Vec<_>>().join(", ")
                    ));
                }
            }
        }
    }
    problems
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn crate_srcs() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(root().join("crates")).unwrap() {
        let dir = e.unwrap().path();
        if dir.join("src").is_dir() {
            out.push((dir.file_name().unwrap().to_string_lossy().into_owned(), dir.join("src")));
        }
    }
    out.sort();
    out
}

/// No crate has an import circle between sibling modules at any level of its module tree
/// (issue 42 took the last five apart); the failure prints each circle with the imports
/// that close it.
#[test]
fn no_import_circle_between_sibling_modules_in_any_crate() {
    let mut problems = Vec::new();
    for (name, src) in crate_srcs() {
        for p in sibling_circles(&crate_graph(&src)) {
            problems.push(format!("crates/{name}: {p}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn remat_ads_modules_import_only_down_its_layers() {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let layers = documented_layers(&doc);
    assert!(layers.len() >= 7, "docs/architecture.md lists {} layers of remat-ad", layers.len());
    let problems = layer_violations(&crate_graph(&root().join("crates/ad/src")), &layers);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn sources(files: &[(&str, &str)]) -> Vec<(ModPath, String)> {
    files
        .iter()
        .map(|(p, s)| (p.split('/').filter(|x| !x.is_empty()).map(String::from).collect(), s.to_string()))
        .collect()
}

/// The checker itself: it sees imports written every way they are written, and an upward
/// import (or a circle) fails it.
#[test]
fn the_checker_finds_circles_and_upward_imports() {
    let clean = [
        ("", "mod builder; mod jvp; mod vjp; pub use jvp::jvp_jaxpr;"),
        ("builder", "pub struct Builder; pub fn fresh() {}"),
        ("jvp", "mod rules; use crate::builder::Builder; pub fn jvp_jaxpr() { rules::rule(); }"),
        ("jvp/rules", "use super::jvp_jaxpr; pub fn rule() { crate::builder::fresh(); let s = \"crate::vjp::vjp\"; }"),
        ("vjp", "use crate::{builder::{self, Builder}, jvp_jaxpr}; pub fn vjp() { jvp_jaxpr(); }\n#[cfg(test)]\nmod tests { use crate::vjp; }"),
    ];
    let layers: Vec<Vec<String>> = [["builder"], ["jvp"], ["vjp"]].iter().map(|l| vec![l[0].to_string()]).collect();
    let g = graph_of(&sources(&clean));
    assert!(sibling_circles(&g).is_empty(), "{:?}", sibling_circles(&g));
    assert!(layer_violations(&g, &layers).is_empty(), "{:?}", layer_violations(&g, &layers));
    // The re-export resolves to the file that defines the item.
    assert!(g.edges[&vec!["vjp".to_string()]].contains_key(&vec!["jvp".to_string()]));

    // jvp's rules call up into vjp (written inline): an upward import and a circle.
    let mut upward = clean;
    upward[3] = ("jvp/rules", "use super::jvp_jaxpr; pub fn rule() { crate::vjp::vjp(); }");
    let g = graph_of(&sources(&upward));
    let circles = sibling_circles(&g);
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(circles[0].contains("jvp, vjp") && circles[0].contains("jvp/rules uses crate::vjp::vjp"), "{}", circles[0]);
    let v = layer_violations(&g, &layers);
    assert_eq!(v, ["jvp/rules (layer 2) imports vjp (layer 3): crate::vjp::vjp"]);

    // Two siblings below one module that use each other, through a glob and a group.
    let mut siblings = clean.to_vec();
    siblings[2] = ("jvp", "mod rules; mod special; pub fn jvp_jaxpr() {}");
    siblings.push(("jvp/special", "use super::rules::*; pub fn erf() { rule(); }"));
    siblings[3] = ("jvp/rules", "use super::{special::erf}; pub fn rule() { erf() }");
    let circles = sibling_circles(&graph_of(&sources(&siblings)));
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(circles[0].starts_with("an import circle among the children of jvp: rules, special"), "{}", circles[0]);
}
