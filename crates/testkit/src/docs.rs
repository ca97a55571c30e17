//! The fenced code blocks of the repository's documentation (`README.md` and `docs/*.md`),
//! for the tests that keep every sample in them compiled, run or compared with what it
//! shows (`crates/remat/tests/doc_samples.rs`, `crates/cli/tests/doc_commands.rs`).
//!
//! A block opens with a line of three or more backticks (indented or not: a block inside a
//! list item is indented), optionally followed by a language word, and closes at the next
//! line that is only backticks, at least as many. Its text is the lines in between, with the
//! opening fence's indentation removed.

use std::fmt;
use std::path::{Path, PathBuf};

/// One fenced block of a documentation file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeBlock {
    /// The file, relative to the repository: `README.md`, `docs/autodiff.md`.
    pub file: String,
    /// The 1-based line of the opening fence.
    pub line: usize,
    /// The word after the fence (`rust`, `sh`, `text`), empty for a bare fence.
    pub lang: String,
    /// The lines between the fences, without the fence's indentation, each ending in `\n`.
    pub text: String,
}

impl CodeBlock {
    /// The block's first line, trimmed (what the tests' tables recognise a block by).
    pub fn first_line(&self) -> &str {
        self.text.lines().next().unwrap_or("").trim()
    }
}

/// `docs/autodiff.md:72 (text)`: where a block is, for test messages.
impl fmt::Display for CodeBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lang = if self.lang.is_empty() { "bare" } else { &self.lang };
        write!(f, "{}:{} ({lang})", self.file, self.line)
    }
}

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the repository root exists")
}

/// `README.md`, then every `docs/*.md` in name order, relative to the repository.
pub fn doc_files() -> Vec<String> {
    let mut docs: Vec<String> = std::fs::read_dir(repo_root().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("a directory entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    std::iter::once("README.md".to_string()).chain(docs).collect()
}

/// Every fenced block of every documentation file, in file then line order.
pub fn doc_blocks() -> Vec<CodeBlock> {
    doc_files()
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(repo_root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            code_blocks(file, &text)
        })
        .collect()
}

/// The fenced blocks of `text` (the contents of `file`). An unclosed block is a panic naming it.
pub fn code_blocks(file: &str, text: &str) -> Vec<CodeBlock> {
    let mut blocks = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        let Some((indent, ticks, lang)) = fence(line) else { continue };
        let mut body = String::new();
        let mut closed = false;
        for (_, inner) in lines.by_ref() {
            if let Some((_, close_ticks, "")) = fence(inner) {
                if close_ticks >= ticks {
                    closed = true;
                    break;
                }
            }
            let strip = inner.len() - inner.trim_start_matches(' ').len();
            body.push_str(&inner[strip.min(indent)..]);
            body.push('\n');
        }
        assert!(closed, "{file}:{}: a code block that is never closed", i + 1);
        blocks.push(CodeBlock { file: file.to_string(), line: i + 1, lang: lang.to_string(), text: body });
    }
    blocks
}

/// A fence line: its indentation, its number of backticks and its language word.
fn fence(line: &str) -> Option<(usize, usize, &str)> {
    let rest = line.trim_start_matches(' ');
    let indent = line.len() - rest.len();
    let ticks = rest.len() - rest.trim_start_matches('`').len();
    (ticks >= 3).then(|| (indent, ticks, rest[ticks..].trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_found_with_their_line_language_and_unindented_text() {
        let text = "# T\n\n```rust\nlet x = 1;\n```\n\n- item:\n\n  ```\n  a\n    b\n  ```\n````text\n```\n````\n";
        let blocks = code_blocks("t.md", text);
        let got: Vec<(usize, &str, &str)> = blocks.iter().map(|b| (b.line, b.lang.as_str(), b.text.as_str())).collect();
        assert_eq!(got, [(3, "rust", "let x = 1;\n"), (9, "", "a\n  b\n"), (13, "text", "```\n")]);
        assert_eq!(blocks[1].to_string(), "t.md:9 (bare)");
    }
}
