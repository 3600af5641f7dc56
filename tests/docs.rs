//! The docs' Rust is compiled: every ```rust block of README.md, docs/*.md and each crate's
//! README is a run of consecutive lines of an example program that CI builds (indentation
//! aside), so a snippet cannot drift from the API it shows. The README stays a ten-minute read (at most 200 lines).

use std::path::{Path, PathBuf};

/// The workspace root.
fn root() -> PathBuf {
    crate::common::workspace()
}

/// The `.rs` files in `dir` (none if it does not exist).
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "rs")).collect()
}

/// Every example program of the workspace: `examples/` and each crate's `examples/`.
fn examples() -> Vec<(PathBuf, Vec<String>)> {
    let mut dirs = vec![root().join("examples"), root().join("kernels/examples")];
    for krate in std::fs::read_dir(root().join("crates")).unwrap() {
        dirs.push(krate.unwrap().path().join("examples"));
    }
    let files = dirs.iter().flat_map(|d| rust_files(d));
    files.map(|f| (f.clone(), trimmed_lines(&std::fs::read_to_string(&f).unwrap()))).collect()
}

/// The lines of `text` without their indentation and trailing space.
fn trimmed_lines(text: &str) -> Vec<String> {
    text.lines().map(|l| l.trim().to_string()).collect()
}

/// A code block of a Markdown file: the line it starts on and its lines, trimmed.
type Block = (usize, Vec<String>);

/// The ```rust blocks of a Markdown text.
fn rust_blocks(markdown: &str) -> Vec<Block> {
    let (mut blocks, mut open): (Vec<Block>, Option<Block>) = (Vec::new(), None);
    for (i, line) in markdown.lines().enumerate() {
        match (&mut open, line.trim_start()) {
            (None, l) if l.starts_with("```rust") => open = Some((i + 1, Vec::new())),
            (Some(_), l) if l.starts_with("```") => blocks.extend(open.take()),
            (Some((_, body)), _) => body.push(line.trim().to_string()),
            (None, _) => {}
        }
    }
    blocks
}

/// Whether `block` occurs as consecutive lines of `file`.
fn contains(file: &[String], block: &[String]) -> bool {
    block.is_empty() || file.windows(block.len()).any(|w| w == block)
}

/// The Markdown files whose Rust is checked: the README, every doc and every crate's README.
fn markdown_files() -> Vec<PathBuf> {
    let docs = std::fs::read_dir(root().join("docs")).unwrap().map(|e| e.unwrap().path());
    let mut files: Vec<PathBuf> = docs.filter(|p| p.extension().is_some_and(|e| e == "md")).collect();
    files.push(root().join("README.md"));
    files.push(root().join("kernels/README.md"));
    for krate in std::fs::read_dir(root().join("crates")).unwrap() {
        files.push(krate.unwrap().path().join("README.md"));
    }
    files
}

#[test]
fn every_rust_block_of_the_docs_is_an_excerpt_of_an_example_ci_builds() {
    let examples = examples();
    assert!(examples.len() >= 5, "the examples were not found: {examples:?}");
    let mut checked = 0;
    for doc in markdown_files() {
        let text = std::fs::read_to_string(&doc).unwrap_or_else(|e| panic!("{}: {e}", doc.display()));
        for (line, block) in rust_blocks(&text) {
            let home = examples.iter().find(|(_, lines)| contains(lines, &block));
            assert!(home.is_some(), "{}:{line}: this Rust block is in no example program", doc.display());
            checked += 1;
        }
    }
    assert!(checked >= 2, "the README's and the library guide's programs were not found ({checked} blocks)");
}

#[test]
fn an_edited_snippet_is_caught() {
    let examples = examples();
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let (_, mut block) = rust_blocks(&readme).into_iter().next().expect("the README has a Rust block");
    assert!(examples.iter().any(|(_, lines)| contains(lines, &block)));
    let last = block.len() / 2;
    block[last].push_str(" // edited");
    assert!(!examples.iter().any(|(_, lines)| contains(lines, &block)), "an edited line still matched");
}

#[test]
fn the_readme_is_a_ten_minute_read() {
    let lines = std::fs::read_to_string(root().join("README.md")).unwrap().lines().count();
    assert!(lines <= 200, "README.md has {lines} lines (at most 200: the rest belongs in docs/)");
}

/// The lines of `private` (its code: `//!` lines aside) that are not in `plain`, and the lines
/// of `plain` not in `private`, by the longest common subsequence of lines (what a diff shows).
fn differing_lines(plain: &str, private: &str) -> (usize, usize) {
    let code =
        |text: &str| -> Vec<String> { text.lines().filter(|l| !l.starts_with("//!")).map(str::to_string).collect() };
    let (a, b) = (code(plain), code(private));
    let mut common = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            common[i][j] = if a[i] == b[j] { common[i + 1][j + 1] + 1 } else { common[i + 1][j].max(common[i][j + 1]) };
        }
    }
    (b.len() - common[0][0], a.len() - common[0][0])
}

/// The Burn user's CNN made private and resumable (`crates/dp-run/examples/burn_cnn.rs`) differs
/// from its plain Burn twin (`burn_cnn_plain.rs`, a Dataset, Batcher, DataLoader and loop) in the
/// lines docs/LIBRARY.md counts, and no more.
#[test]
fn the_private_cnn_is_its_plain_twin_with_a_few_lines_changed() {
    let read = |name: &str| std::fs::read_to_string(root().join("crates/dp-run/examples").join(name)).unwrap();
    let (written, removed) = differing_lines(&read("burn_cnn_plain.rs"), &read("burn_cnn.rs"));
    let library = std::fs::read_to_string(root().join("docs/LIBRARY.md")).unwrap();
    // Counted as a user counts a diff: the lines it adds and the lines it takes away.
    let claim = format!("{} lines differ by `diff` ({written} added, {removed} removed)", written + removed);
    assert!(library.contains(&claim), "docs/LIBRARY.md should say \"{claim}\"");
    assert!(written + removed <= 28, "{} lines changed to make the CNN private", written + removed);
    assert_eq!(differing_lines("a\nb\nc\n", "a\nB\nc\nd\n"), (2, 1), "a changed and an added line");
}

/// The crates `crates/dp-run/examples/burn_cnn.rs` uses are all among the README's dependency
/// lines, so that the example copied into a new crate with them builds (dp-data was missing).
/// `scripts/user-crate.sh` builds it so; docs/BENCHMARKS.md, "A library user's build", has the time.
#[test]
fn the_readmes_dependencies_name_every_crate_the_burn_cnn_example_uses() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let block = readme.split("```toml\n[dependencies]\n").nth(1).unwrap().split("```").next().unwrap();
    let listed: Vec<String> = block.lines().map(|l| l.split('=').next().unwrap().trim().replace('-', "_")).collect();
    let example = std::fs::read_to_string(root().join("crates/dp-run/examples/burn_cnn.rs")).unwrap();
    let used: std::collections::BTreeSet<&str> = example
        .lines()
        .filter_map(|l| l.strip_prefix("use "))
        .filter_map(|l| l.split("::").next())
        .filter(|c| !matches!(*c, "std" | "crate" | "self" | "super"))
        .collect();
    assert!(used.len() >= 5, "{used:?}");
    for name in used {
        assert!(listed.iter().any(|l| l == name), "the README's [dependencies] lack `{name}` ({listed:?})");
    }
}
