//! The engine's modules form layers, not a knot: this test reads the
//! `crate::` and `super::` paths in every file under `src/` and fails when
//! the module graph has a cycle (naming it) or an edge that points up the
//! layers below.
//!
//! It reads source text, not the compiler's view, so it is deliberately
//! strict about spelling: inside the engine, items are named by their module
//! path (`crate::action::Action`), never through the crate root's re-exports
//! (`crate::Action`), because the root depends on everything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layers, bottom first. A module may depend on modules of lower layers
/// only; within a layer only the systems may use one another (and the
/// cycle check keeps those honest). `lib.rs` is the crate root: it declares
/// the modules and re-exports the boundary, and is not part of the graph.
const LAYERS: &[&[&str]] = &[
    // Boundary types, one direction: actions carry explanations,
    // observations answer actions.
    &["explain"],
    &["action"],
    &["observation"],
    // State: the queue and metric names are leaves; components hold queues
    // and explanation facts; resources hold components' entities and the
    // outbox of actions.
    &["queue", "metric_names", "reschedule"],
    &["components"],
    &["resources"],
    // The health monitor's timers and per-node heartbeat record, kept by
    // ingest and read by the systems.
    &["monitor"],
    // Logic: ingest records observations, systems decide; neither uses the
    // other.
    &["ingest", "systems"],
    // The send-time check reads what the systems decide from (and shares
    // their rules), and decides nothing.
    &["send_check"],
    // The facade runs it all.
    &["engine"],
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

/// The text with `//` comments (doc comments included) blanked out: an
/// intra-doc link is no dependency.
fn code(text: &str) -> String {
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
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
                        "{module}: `{keyword}{}` is in no module file; inside the engine name items by their \
                         module path (the crate root's re-exports depend on everything)",
                        full.join("::")
                    ),
                }
            }
        }
    }
    deps
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let files = modules();
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
fn the_engine_modules_have_no_cycle() {
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
            let systems = module.starts_with("systems") && dep.starts_with("systems");
            if layer(dep) > layer(module) || (layer(dep) == layer(module) && !systems) {
                wrong.push(format!("{module} -> {dep}"));
            }
        }
    }
    assert!(wrong.is_empty(), "dependencies that do not point down the layers: {wrong:?}");
}

#[test]
fn the_reader_sees_what_it_should() {
    let known: BTreeSet<String> =
        ["action", "explain", "systems", "systems::legacy", "systems::pods"].iter().map(|s| s.to_string()).collect();
    let text = "use crate::{action::Action, explain};\n\
                // crate::engine in a comment is no dependency\n\
                fn f() { super::legacy::x(); super::write_taints(); }\n\
                mod tests { use super::*; }";
    let deps = dependencies("systems::pods", text, &known);
    let want: BTreeSet<String> =
        ["action", "explain", "systems", "systems::legacy"].iter().map(|s| s.to_string()).collect();
    assert_eq!(deps, want);
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    g.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(find_cycle(&g).map(|c| c.join(" -> ")).as_deref(), Some("a -> b -> c -> a"));
}
