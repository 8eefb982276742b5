//! The workspace's structure, checked on every crate at once: no crate's
//! modules form a cycle, and docs/architecture.md names every source
//! file. (The engine and sim also check their layers, in their own
//! `tests/module_graph.rs`.)

use std::path::{Path, PathBuf};

use nodewarden_testkit::module_graph::{Graph, Paths};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every crate directory: `crates/*` and `xtask`.
fn crates() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .expect("crates/ is readable")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    out.push(root().join("xtask"));
    out.sort();
    out
}

#[test]
fn no_crate_has_a_module_cycle() {
    let mut cycles = Vec::new();
    for dir in crates() {
        if let Some(cycle) = Graph::of_crate(&dir.to_string_lossy(), Paths::Lenient).cycle() {
            let name = dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
            cycles.push(format!("{name}: {}", cycle.join(" -> ")));
        }
    }
    assert!(cycles.is_empty(), "module cycles:\n{}", cycles.join("\n"));
}

#[test]
fn every_crate_is_read() {
    let names: Vec<String> =
        crates().iter().filter_map(|d| d.file_name().map(|n| n.to_string_lossy().to_string())).collect();
    for expected in ["engine", "kube", "apiserver", "sim", "xtask"] {
        assert!(names.iter().any(|n| n == expected), "{expected} not found in {names:?}");
    }
    let kube = Graph::of_crate(&root().join("crates/kube").to_string_lossy(), Paths::Lenient);
    assert!(kube.edges.get("watch").is_some_and(|d| d.contains("input")), "the reader sees kube's edges");
}

#[test]
fn the_code_map_names_every_source_file() {
    let map = std::fs::read_to_string(root().join("docs/architecture.md")).expect("docs/architecture.md is readable");
    let missing = nodewarden_testkit::code_map::unmapped(&root(), &map);
    assert!(
        missing.is_empty(),
        "docs/architecture.md's code map does not name these files (name each in its crate's section):\n{}",
        missing.join("\n")
    );
}
