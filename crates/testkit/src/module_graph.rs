//! A crate's module graph, read from its source text, and the checks run
//! on it: no cycle, and (where a crate declares layers) every edge pointing
//! down them.
//!
//! An edge `a -> b` is a `crate::` or `super::` path in `a`'s file that
//! lands in module `b` (the longest prefix of the path that is a module
//! file). Paths through the crate root's re-exports (`crate::Trimmed`)
//! land in the module the root re-exports them from. Comments and
//! `#[cfg(test)]` items are blanked first, and test-only module files
//! (`#[cfg(test)] mod fixtures;`) left out (an intra-doc link is no
//! dependency, and tests may use what they like); a `super::` in a
//! top-level file's inline module means the file itself.
//!
//! It reads text, not the compiler's view: a dependency written without
//! `crate::` / `super::` (a child named from its parent's file, a sibling
//! imported through the root's glob) is not seen. That is deliberate: it
//! costs no build and catches the cycles that grow by `use crate::...`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A crate's modules and the modules each depends on. The crate root
/// (`lib.rs` or `main.rs`) declares the modules and re-exports the
/// facade; it is not part of the graph.
#[derive(Debug, Default)]
pub struct Graph {
    /// Module path (`systems::pods`) to the modules it depends on.
    pub edges: BTreeMap<String, BTreeSet<String>>,
}

/// How a path that lands in no module file is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Paths {
    /// As an item of the crate root (a macro, a type defined in `lib.rs`):
    /// no edge.
    Lenient,
    /// As an error: every item must be named by its module path (the
    /// engine's rule, because its root re-exports everything).
    Strict,
}

impl Graph {
    /// The graph of the crate at `manifest_dir` (its `src/`). Panics, for
    /// a test, naming the file it could not read or the path it could not
    /// place.
    pub fn of_crate(manifest_dir: &str, paths: Paths) -> Graph {
        let src = Path::new(manifest_dir).join("src");
        let mut files = module_files(&src);
        let tests_only = test_only(&src, &files);
        files.retain(|(m, _)| !tests_only.contains(m));
        let known: BTreeSet<String> = files.iter().map(|(m, _)| m.clone()).collect();
        let root = ["lib.rs", "main.rs"].iter().map(|f| src.join(f)).find(|p| p.exists());
        let exports = root.map(|r| root_exports(&read(&r), &known)).unwrap_or_default();
        let edges =
            files.iter().map(|(m, path)| (m.clone(), dependencies(m, &read(path), &known, &exports, paths))).collect();
        Graph { edges }
    }

    /// A cycle, if there is one, as the modules along it (the first one
    /// repeated at the end).
    pub fn cycle(&self) -> Option<Vec<String>> {
        let mut marks = BTreeMap::new();
        self.edges.keys().find_map(|n| visit(n, &self.edges, &mut marks, &mut Vec::new()))
    }

    /// The edges that do not point down `layers` (bottom first; a module
    /// belongs to the layer naming its top-level module). An edge within
    /// one layer is allowed only when `within(from, to)` says so. Panics
    /// naming a module that is in no layer.
    pub fn upward_edges(&self, layers: &[&[&str]], within: impl Fn(&str, &str) -> bool) -> Vec<String> {
        let layer = |module: &str| {
            let top = module.split("::").next().unwrap_or(module);
            layers
                .iter()
                .position(|l| l.contains(&top))
                .unwrap_or_else(|| panic!("module {module} is in no layer: add it to the crate's LAYERS"))
        };
        let mut wrong = Vec::new();
        for (module, deps) in &self.edges {
            for dep in deps {
                let (from, to) = (layer(module), layer(dep));
                if to > from || (to == from && !within(module, dep)) {
                    wrong.push(format!("{module} -> {dep}"));
                }
            }
        }
        wrong
    }
}

/// Fails the calling test when the crate at `manifest_dir` has a module
/// cycle, naming it.
pub fn assert_no_cycle(manifest_dir: &str) {
    if let Some(cycle) = Graph::of_crate(manifest_dir, Paths::Lenient).cycle() {
        panic!("module cycle in {manifest_dir}: {}", cycle.join(" -> "));
    }
}

/// The module files only tests compile (`#[cfg(test)]` on the line before
/// `mod name;`), by module path: a test's helpers may use any module.
fn test_only(src: &Path, files: &[(String, PathBuf)]) -> BTreeSet<String> {
    let roots = ["lib.rs", "main.rs"].map(|f| (String::new(), src.join(f)));
    let mut out = BTreeSet::new();
    for (module, path) in files.iter().chain(roots.iter().filter(|(_, p)| p.exists())) {
        let text = read(path);
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for pair in lines.windows(2) {
            if pair[0] == "#[cfg(test)]"
                && let Some(name) = pair[1].strip_prefix("mod ").and_then(|r| r.strip_suffix(';'))
            {
                out.insert(if module.is_empty() { name.to_string() } else { format!("{module}::{name}") });
            }
        }
    }
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every module file under `src` as (module path, file), the root left out.
fn module_files(src: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut dirs = vec![(src.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.unwrap_or_else(|e| panic!("{}: {e}", dir.display())).path();
            let stem = path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
            if path.is_dir() {
                // `src/bin/*` are other crates' roots.
                if !(prefix.is_empty() && stem == "bin") {
                    dirs.push((path, format!("{prefix}{stem}::")));
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let name = match (prefix.as_str(), stem.as_str()) {
                    ("", "lib" | "main") => continue,
                    (p, "mod") => p.trim_end_matches("::").to_string(),
                    (p, s) => format!("{p}{s}"),
                };
                out.push((name, path));
            }
        }
    }
    out.sort();
    out
}

/// The text with `//` comments (doc comments included) and `#[cfg(test)]`
/// items blanked out: the graph is the production code's. A module's tests
/// may use a higher module (a reading's tests decoding a whole list page).
fn code(text: &str) -> String {
    let text = text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        // The item ends at its first `;` before any `{`, or at the brace
        // matching its first `{`.
        let end = match (rest.find('{'), rest.find(';')) {
            (Some(open), Some(semi)) if semi < open => semi + 1,
            (Some(open), _) => {
                let mut depth = 0usize;
                rest[open..]
                    .char_indices()
                    .find_map(|(i, c)| {
                        match c {
                            '{' => depth += 1,
                            '}' => depth -= 1,
                            _ => {}
                        }
                        (depth == 0).then_some(open + i + 1)
                    })
                    .unwrap_or(rest.len())
            }
            (None, Some(semi)) => semi + 1,
            (None, None) => rest.len(),
        };
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The paths a `use` tree or path expression starting at `rest` names, as
/// segments: `a::b` gives `[a, b]`; `a::{b, c::d}` gives `[a, b]` and
/// `[a, c, d]`. Reading stops at the first character that is not part of
/// a path.
fn paths(rest: &str) -> Vec<Vec<String>> {
    let mut prefix = Vec::new();
    let mut rest = rest.trim_start();
    loop {
        if let Some(inner) = rest.strip_prefix('{') {
            // Split the group at its top-level commas; each part continues
            // the prefix.
            let (mut depth, mut start, mut out) = (0, 0, Vec::new());
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.extend(paths(&inner[start..i]));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.extend(paths(&inner[start..i]));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            return out.into_iter().map(|tail| prefix.iter().cloned().chain(tail).collect()).collect();
        }
        let ident: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '*').collect();
        if ident.is_empty() {
            return if prefix.is_empty() { vec![] } else { vec![prefix] };
        }
        rest = &rest[ident.len()..];
        prefix.push(ident);
        match rest.strip_prefix("::") {
            Some(more) => rest = more.trim_start(),
            None => return vec![prefix],
        }
    }
}

/// The longest prefix of `path` that is a module.
fn module_of(path: &[String], known: &BTreeSet<String>) -> Option<String> {
    (1..=path.len()).rev().map(|n| path[..n].join("::")).find(|m| known.contains(m))
}

/// What the crate root re-exports, by name: the module each comes from.
fn root_exports(root: &str, known: &BTreeSet<String>) -> BTreeMap<String, String> {
    let text = code(root);
    let mut out = BTreeMap::new();
    for (at, _) in text.match_indices("use ") {
        if text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        for path in paths(&text[at + 4..]) {
            let path: Vec<String> = path.into_iter().skip_while(|s| s == "crate" || s == "self").collect();
            if let (Some(module), Some(name)) = (module_of(&path, known), path.last())
                && name != "*"
            {
                out.insert(name.clone(), module);
            }
        }
    }
    out
}

/// The modules `module` depends on.
fn dependencies(
    module: &str,
    text: &str,
    known: &BTreeSet<String>,
    exports: &BTreeMap<String, String>,
    strictness: Paths,
) -> BTreeSet<String> {
    let parent = module.rsplit_once("::").map(|(p, _)| p.to_string());
    let text = code(text);
    let mut deps = BTreeSet::new();
    for keyword in ["crate::", "super::"] {
        for (at, _) in text.match_indices(keyword) {
            // `foo_crate::` and `$crate::` are not ours.
            if text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let base: Vec<String> = match (keyword, &parent) {
                ("crate::", _) => vec![],
                (_, Some(p)) => p.split("::").map(str::to_string).collect(),
                // A top-level file's `super::` only appears in its inline
                // modules, where it means the file itself.
                (_, None) => continue,
            };
            for path in paths(&text[at + keyword.len()..]) {
                if path.first().is_some_and(|s| s == "*") {
                    // `use super::*` in a `mod tests`: the module under test.
                    continue;
                }
                let full: Vec<String> = base.iter().cloned().chain(path).collect();
                let target = module_of(&full, known).or_else(|| {
                    (keyword == "crate::").then(|| full.first().and_then(|n| exports.get(n)).cloned()).flatten()
                });
                match target {
                    Some(t) if t != module => {
                        deps.insert(t);
                    }
                    Some(_) => {}
                    None if strictness == Paths::Lenient => {}
                    None => panic!(
                        "{module}: `{keyword}{}` is in no module file; name items by their module path \
                         (the crate root's re-exports depend on everything)",
                        full.join("::")
                    ),
                }
            }
        }
    }
    deps
}

#[derive(Clone, Copy, PartialEq)]
enum Mark {
    Open,
    Done,
}

fn visit(
    node: &str,
    graph: &BTreeMap<String, BTreeSet<String>>,
    marks: &mut BTreeMap<String, Mark>,
    stack: &mut Vec<String>,
) -> Option<Vec<String>> {
    match marks.get(node) {
        Some(Mark::Done) => return None,
        Some(Mark::Open) => {
            let from = stack.iter().position(|n| n == node).unwrap_or(0);
            let mut cycle = stack[from..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        None => {}
    }
    marks.insert(node.to_string(), Mark::Open);
    stack.push(node.to_string());
    for next in graph.get(node).into_iter().flatten() {
        if let Some(cycle) = visit(next, graph, marks, stack) {
            return Some(cycle);
        }
    }
    stack.pop();
    marks.insert(node.to_string(), Mark::Done);
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_reader_sees_what_it_should() {
        let known = set(&["action", "explain", "systems", "systems::legacy", "systems::pods", "trimmed"]);
        let exports = root_exports("pub use trimmed::{Scheduled, Trimmed};\nmod x;", &known);
        let text = "use crate::{action::Action, explain};\n\
                    // crate::engine in a comment is no dependency\n\
                    fn f() { super::legacy::x(); super::write_taints(); let _ = crate::Trimmed::new(); }\n\
                    macro_rules! m { () => { $crate::nothing } }\n\
                    mod tests { use super::*; }";
        let deps = dependencies("systems::pods", text, &known, &exports, Paths::Strict);
        assert_eq!(deps, set(&["action", "explain", "systems", "systems::legacy", "trimmed"]));
    }

    #[test]
    fn test_code_is_no_edge() {
        let known = set(&["a", "b", "c"]);
        let text = "use crate::b::X;\n#[cfg(test)]\nmod tests {\n    fn f() { if x { crate::c::y() } }\n}\n\
                    #[cfg(test)]\nuse crate::c::Z;\nfn g() { crate::b::w() }";
        assert_eq!(dependencies("a", text, &known, &BTreeMap::new(), Paths::Strict), set(&["b"]));
    }

    #[test]
    fn a_root_item_is_no_edge_unless_strict() {
        let known = set(&["a"]);
        let deps = dependencies("a", "use crate::Defined;", &known, &BTreeMap::new(), Paths::Lenient);
        assert!(deps.is_empty());
        let strict = std::panic::catch_unwind(|| {
            dependencies("a", "use crate::Defined;", &known, &BTreeMap::new(), Paths::Strict)
        });
        assert!(strict.is_err());
    }

    #[test]
    fn cycles_and_layers_are_found() {
        let mut g = Graph::default();
        g.edges.insert("a".into(), set(&["b"]));
        g.edges.insert("b".into(), set(&["c"]));
        g.edges.insert("c".into(), set(&["a"]));
        assert_eq!(g.cycle().map(|c| c.join(" -> ")).as_deref(), Some("a -> b -> c -> a"));
        g.edges.insert("c".into(), set(&[]));
        assert_eq!(g.cycle(), None);
        assert_eq!(g.upward_edges(&[&["c"], &["b"], &["a"]], |_, _| false), Vec::<String>::new());
        assert_eq!(g.upward_edges(&[&["a"], &["b", "c"]], |_, _| false), ["a -> b", "b -> c"]);
    }

    /// This crate's own modules: the guard runs on itself too.
    #[test]
    fn this_crate_has_no_cycle() {
        assert_no_cycle(env!("CARGO_MANIFEST_DIR"));
    }
}
