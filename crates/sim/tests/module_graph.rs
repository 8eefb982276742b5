//! The simulator's modules form layers, not a knot: this test reads the
//! `crate::` and `super::` paths in the production code of every file under
//! `src/` and fails when the module graph has a cycle (naming it) or an
//! edge that points up the layers below.
//!
//! Tests are left out (a file's `#[cfg(test)]` module and test-only files):
//! a test may drive its module with real neighbours from any layer. Inside
//! production code, items are named by their module path, never through
//! the crate root's re-exports, because the root depends on everything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layers, bottom first. A module may depend on modules of lower layers
/// only; modules of one layer do not use one another (except a directory
/// module's own files, which the cycle check keeps honest). `lib.rs` is the
/// crate root: it declares the modules and re-exports, and is not part of
/// the graph.
const LAYERS: &[&[&str]] = &[
    // Leaves: the seeded generator, the timing wheel, error locations, the
    // scheduler's fit (over borrowed views).
    &["rng", "due", "error", "scheduler"],
    // The API's latency model, which the scenario format names.
    &["wire"],
    // The scenario format: plain values as a file gives them.
    &["scenario"],
    // Rules over plain values, and what reads the format alone: admission
    // defaults, validation, the output records.
    &["rules", "admission", "output"],
    &["validate"],
    // The kubelets, which reach any cluster through their trait.
    &["kubelet"],
    // The in-memory cluster: storage that calls the rules.
    &["cluster"],
    // What acts on a cluster and its kubelets.
    &["expect", "faults", "fleet"],
    &["builtin", "addons", "prepared"],
    // The replay runner, the live simulation's figures, their reports, and
    // the simulation that produces them.
    &["runner", "statistics"],
    &["report"],
    &["simulation"],
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every module file as (module path, file), `lib.rs` left out.
fn modules() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut dirs = vec![(src(), String::new())];
    while let Some((dir, prefix)) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                dirs.push((path, format!("{prefix}{stem}::")));
            } else if path.extension().is_some_and(|e| e == "rs") {
                let name = match (prefix.as_str(), stem.as_str()) {
                    ("", "lib") => continue,
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

/// The production code of a file: `//` comments (doc comments included)
/// blanked out, since an intra-doc link is no dependency, and everything
/// from a `#[cfg(test)] mod name {` on (test modules close the files here).
fn code(text: &str) -> String {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        if l.trim() == "#[cfg(test)]" && lines.peek().is_some_and(|n| n.trim_end().ends_with('{')) {
            break;
        }
        out.push(l.split("//").next().unwrap_or(""));
    }
    out.join("\n")
}

/// The modules only tests compile (`#[cfg(test)] mod name;`), by path.
fn test_only(files: &[(String, PathBuf)]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (module, path) in files {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let lines: Vec<&str> = text.lines().collect();
        for pair in lines.windows(2) {
            if pair[0].trim() == "#[cfg(test)]"
                && let Some(name) = pair[1].trim().strip_prefix("mod ").and_then(|r| r.strip_suffix(';'))
            {
                out.insert(if module.is_empty() { name.to_string() } else { format!("{module}::{name}") });
            }
        }
    }
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
            Some(more) => rest = more,
            None => return vec![prefix],
        }
    }
}

/// The modules `module` depends on: the module each `crate::` and `super::`
/// path lands in (its longest prefix that is a module).
fn dependencies(module: &str, text: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let parent = module.rsplit_once("::").map(|(p, _)| p.to_string());
    let text = code(text);
    let mut deps = BTreeSet::new();
    for keyword in ["crate::", "super::"] {
        for (at, _) in text.match_indices(keyword) {
            // `foo_crate::` and the like are not ours.
            if text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let base = match (keyword, &parent) {
                ("crate::", _) => vec![],
                (_, Some(p)) => p.split("::").map(str::to_string).collect(),
                // A top-level file's `super::` only appears in its own
                // `mod tests`, where it means the file itself.
                (_, None) => continue,
            };
            for path in paths(&text[at + keyword.len()..]) {
                if path.first().is_some_and(|s| s == "*") {
                    // `use super::*` in a `mod tests`: the module under test.
                    continue;
                }
                let full: Vec<String> = base.iter().cloned().chain(path).collect();
                let target = (1..=full.len()).rev().map(|n| full[..n].join("::")).find(|m| known.contains(m));
                match target {
                    Some(t) if t != module => {
                        deps.insert(t);
                    }
                    Some(_) => {}
                    None => panic!(
                        "{module}: `{keyword}{}` is in no module file; inside the simulator name items by \
                         their module path (the crate root's re-exports depend on everything)",
                        full.join("::")
                    ),
                }
            }
        }
    }
    deps
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = modules();
    let mut root = files.clone();
    root.push((String::new(), src().join("lib.rs")));
    let tests = test_only(&root);
    files.retain(|(m, _)| !tests.contains(m));
    let known: BTreeSet<String> = files.iter().map(|(m, _)| m.clone()).collect();
    files
        .iter()
        .map(|(m, path)| {
            let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (m.clone(), dependencies(m, &text, &known))
        })
        .collect()
}

/// A cycle through `graph`, if there is one, as the modules along it.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
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
                let from = stack.iter().position(|n| n == node).unwrap();
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
    let mut marks = BTreeMap::new();
    graph.keys().find_map(|n| visit(n, graph, &mut marks, &mut Vec::new()))
}

fn layer(module: &str) -> usize {
    let top = module.split("::").next().unwrap();
    LAYERS
        .iter()
        .position(|l| l.contains(&top))
        .unwrap_or_else(|| panic!("module {module} is in no layer: add it to LAYERS"))
}

#[test]
fn the_sim_modules_have_no_cycle() {
    let graph = graph();
    if let Some(cycle) = find_cycle(&graph) {
        panic!("module cycle: {}", cycle.join(" -> "));
    }
}

#[test]
fn every_dependency_points_down_the_layers() {
    let mut wrong = Vec::new();
    for (module, deps) in &graph() {
        for dep in deps {
            let top = |m: &str| m.split("::").next().unwrap_or_default().to_string();
            let within = top(module) == top(dep);
            if layer(dep) > layer(module) || (layer(dep) == layer(module) && !within) {
                wrong.push(format!("{module} -> {dep}"));
            }
        }
    }
    assert!(wrong.is_empty(), "dependencies that do not point down the layers: {wrong:?}");
}

#[test]
fn the_reader_sees_what_it_should() {
    let known: BTreeSet<String> =
        ["cluster", "cluster::nodes", "rules", "rules::node", "scenario"].iter().map(|s| s.to_string()).collect();
    let text = "use crate::{rules::node::post_condition, scenario};\n\
                // crate::simulation in a comment is no dependency\n\
                fn f() { super::Cluster::new(); }\n\
                #[cfg(test)]\n\
                mod tests {\n\
                use crate::simulation::Simulation;\n\
                }";
    let deps = dependencies("cluster::nodes", text, &known);
    let want: BTreeSet<String> = ["cluster", "rules::node", "scenario"].iter().map(|s| s.to_string()).collect();
    assert_eq!(deps, want);
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    g.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(find_cycle(&g).map(|c| c.join(" -> ")).as_deref(), Some("a -> b -> c -> a"));
}

/// Prints the graph (`cargo test -p nodewarden-sim --test module_graph -- --nocapture print`).
#[test]
fn print_the_graph() {
    for (module, deps) in graph() {
        let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
        println!("{module} -> {}", deps.join(", "));
    }
}
