//! The workspace's structure, checked on every crate at once: no crate's
//! modules form a cycle, and docs/architecture.md stays a true map: a
//! section for every crate, every source path it names existing, at most
//! 400 lines (`nodewarden_testkit::code_map`). The map names the modules a
//! reader needs, not every file. (Crates with declared layers also check
//! them, in their own `tests/module_graph.rs`.)

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

fn map() -> String {
    std::fs::read_to_string(root().join("docs/architecture.md")).expect("docs/architecture.md is readable")
}

#[test]
fn the_code_map_has_a_section_for_every_crate() {
    let missing = nodewarden_testkit::code_map::missing_sections(&root(), &map());
    assert!(missing.is_empty(), "docs/architecture.md:\n{}", missing.join("\n"));
}

#[test]
fn every_source_path_the_code_map_names_exists() {
    let broken = nodewarden_testkit::code_map::broken_paths(&root(), &map());
    assert!(
        broken.is_empty(),
        "docs/architecture.md names paths that do not exist (a moved or renamed file: name it where it is now):\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_code_map_is_short() {
    if let Some(problem) = nodewarden_testkit::code_map::too_long(&map()) {
        panic!("docs/architecture.md: {problem}");
    }
}
