//! The workspace's layering, checked from its sources: no crate's top-level modules depend on each
//! other in a circle (a `crate::x` path outside comments and test modules is an edge), no file
//! depends on another that depends on it back, directly or around a circle (every `crate::` and
//! `super::` path, braces expanded, is an edge to the file of the longest module it names), and
//! the library crates never name the `dptrain` app, nor does dp-erm name the image engine.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The library crates' source folders, and the app's (dp-plot is one file: nothing to circle).
const SOURCES: [&str; 8] = [
    "crates/dp-accounting/src",
    "crates/dp-data/src",
    "kernels/src",
    "crates/dp-engine/src",
    "crates/dp-erm/src",
    "crates/dp-audit/src",
    "crates/dp-run/src",
    "src",
];

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// A file's code: test modules and comment lines dropped.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The top-level module a file of `root` belongs to (None for the crate root).
fn module_of(root: &Path, file: &Path) -> Option<String> {
    let first = file.strip_prefix(root).ok()?.components().next()?.as_os_str().to_str()?.to_string();
    let name = first.trim_end_matches(".rs").to_string();
    (!matches!(name.as_str(), "lib" | "main")).then_some(name)
}

/// The modules `code` names with `crate::`.
fn named(code: &str) -> BTreeSet<String> {
    code.match_indices("crate::")
        .filter(|(i, _)| !code[..*i].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
        .map(|(i, _)| code[i + 7..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect())
        .collect()
}

/// A file's module path inside its crate: `grad_sample/affine.rs` is [grad_sample, affine],
/// `step/mod.rs` [step], the crate root [].
fn file_module(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = rel.components().filter_map(|c| c.as_os_str().to_str()).map(String::from).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The paths a `use` tree names, expanded: "a::{b, c::{d, e}}" gives [a, b], [a, c, d], [a, c, e].
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let name = tree.split(" as ").next().unwrap_or_default();
        return vec![name.split("::").map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()];
    };
    let prefix: Vec<String> =
        tree[..open].split("::").map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    // Split at the commas outside nested braces.
    let (mut depth, mut start, mut items) = (0, 0, Vec::new());
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .filter(|item| !item.trim().is_empty())
        .flat_map(|item| expand(item).into_iter().map(|rest| prefix.iter().cloned().chain(rest).collect()))
        .collect()
}

/// The module paths (absolute in the crate) that the `crate::` and `super::` paths of `code`, in
/// the file of module `module` (`is_dir`: a mod.rs or the root, whose `super` is its parent's
/// parent...), name: each path as written, braces expanded.
fn file_edges(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for keyword in ["crate::", "super::"] {
        for (i, _) in code.match_indices(keyword) {
            if code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            // The path: identifiers, `::`, braces (balanced), spaces and commas inside braces.
            let rest = &code[i..];
            let (mut depth, mut end) = (0i32, rest.len());
            for (j, c) in rest.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        end = j;
                        break;
                    }
                    '}' => depth -= 1,
                    c if depth == 0 && !(c.is_alphanumeric() || c == '_' || c == ':') => {
                        end = j;
                        break;
                    }
                    _ => {}
                }
            }
            for path in expand(&rest[..end]) {
                let mut segments = path.into_iter().peekable();
                let mut base: Vec<String> = match segments.next().as_deref() {
                    Some("crate") => Vec::new(),
                    _ => module[..module.len().saturating_sub(1)].to_vec(),
                };
                while segments.peek().is_some_and(|s| s == "super") {
                    segments.next();
                    base.pop();
                }
                base.extend(segments);
                found.push(base);
            }
        }
    }
    found
}

/// The strongly connected components of more than one module (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            for w in self.graph.get(v).into_iter().flatten() {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let low = self.low[w.as_str()].min(self.low[v]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w.as_str()) {
                    let low = self.index[w.as_str()].min(self.low[v]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let at = self.stack.iter().position(|&x| x == v).unwrap();
                let component: Vec<String> = self.stack.split_off(at).into_iter().map(String::from).collect();
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut t = Tarjan { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), found: Vec::new() };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.found
}

#[test]
fn no_crate_has_a_circle_of_modules_and_the_libraries_do_not_name_the_app() {
    let workspace = crate::common::workspace();
    for source in SOURCES {
        let root = workspace.join(source);
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for file in rust_files(&root) {
            let code = code(&file);
            if source != "src" {
                assert!(!code.contains("dptrain::"), "{} names the app", file.display());
            }
            if source.contains("dp-erm") || source.contains("dp-audit") {
                assert!(!code.contains("dp_engine::"), "{} names the image engine", file.display());
            }
            if let Some(module) = module_of(&root, &file) {
                let edges: Vec<String> = named(&code).into_iter().filter(|m| *m != module).collect();
                graph.entry(module).or_default().extend(edges);
            }
        }
        assert!(graph.len() > 3, "{source}: the modules were not found");
        assert_eq!(circles(&graph), Vec::<Vec<String>>::new(), "{source}: modules in a circle");
    }
}

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let workspace = crate::common::workspace();
    let mut edges = 0;
    for source in SOURCES {
        let root = workspace.join(source);
        let files: BTreeMap<Vec<String>, PathBuf> =
            rust_files(&root).into_iter().map(|f| (file_module(&root, &f), f)).collect();
        // The file of the longest module a path names (an item's path names its module's file).
        let file_of =
            |path: &Vec<String>| (0..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| files.contains_key(p));
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (module, file) in &files {
            let name = |m: &[String]| if m.is_empty() { "<root>".to_string() } else { m.join("::") };
            let targets: BTreeSet<String> = file_edges(&code(file), module)
                .iter()
                .filter_map(file_of)
                .filter(|target| target != module)
                .map(|target| name(&target))
                .collect();
            edges += targets.len();
            graph.entry(name(module)).or_default().extend(targets);
        }
        assert_eq!(circles(&graph), Vec::<Vec<String>>::new(), "{source}: files in a circle");
    }
    assert!(edges > 200, "only {edges} file-level edges found: the paths were not read");
}

#[test]
fn the_circle_finder_finds_a_circle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]
        .into_iter()
        .map(|(x, y)| (x.to_string(), BTreeSet::from([y.to_string()])))
        .collect();
    let found = circles(&graph);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].iter().cloned().collect::<BTreeSet<_>>(), BTreeSet::from(["a".into(), "b".into(), "c".into()]));
    assert_eq!(
        named("use crate::step::lot; mycrate::no; crate::plan::plan(c)"),
        BTreeSet::from(["step".into(), "plan".into()])
    );
    let path = |p: &str| p.split("::").map(String::from).collect::<Vec<_>>();
    assert_eq!(expand("a::{b, c::{d, e as f}}"), vec![path("a::b"), path("a::c::d"), path("a::c::e")]);
    let module = path("grad_sample::affine");
    assert_eq!(
        file_edges("use super::{host::{self, X}, tape};\nlet y = crate::step::lot::f(super::super::plan::P);", &module),
        vec![
            path("step::lot::f"),
            path("grad_sample::host::self"),
            path("grad_sample::host::X"),
            path("grad_sample::tape"),
            path("plan::P")
        ]
    );
}
