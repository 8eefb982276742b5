//! The simulated cluster's modules form layers, not a knot (the simulation
//! of the controller on it, `nodewarden-sim`, is a crate above this one):
//! this test reads the `crate::` and `super::` paths in the production
//! code of every file under `src/` (`nodewarden_testkit::module_graph`, the
//! reader every crate's check shares) and fails when the module graph has a cycle (naming it)
//! or an edge that points up the layers below.
//!
//! Tests are left out (a file's `#[cfg(test)]` module and test-only files):
//! a test may drive its module with real neighbours from any layer. Inside
//! production code, items are named by their module path, never through
//! the crate root's re-exports, because the root depends on everything.

use nodewarden_testkit::module_graph::{Graph, Paths};

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
    &["latency"],
    // The scenario format: plain values as a file gives them.
    &["scenario"],
    // Rules over plain values, and admission defaults, which read the
    // format alone.
    &["rules", "admission"],
    &["validate"],
    // The kubelets, which reach any cluster through their trait.
    &["kubelet"],
    // The in-memory cluster: storage that calls the rules.
    &["cluster"],
    // What acts on a cluster and its kubelets.
    &["faults", "fleet"],
    &["builtin", "addons"],
];

fn graph() -> Graph {
    Graph::of_crate(env!("CARGO_MANIFEST_DIR"), Paths::Strict)
}

#[test]
fn the_cluster_modules_have_no_cycle() {
    if let Some(cycle) = graph().cycle() {
        panic!("module cycle: {}", cycle.join(" -> "));
    }
}

#[test]
fn every_dependency_points_down_the_layers() {
    // Within a layer, only a directory module's own files use one another.
    let top = |m: &str| m.split("::").next().unwrap_or_default().to_string();
    let wrong = graph().upward_edges(LAYERS, |from, to| top(from) == top(to));
    assert!(wrong.is_empty(), "dependencies that do not point down the layers: {wrong:?}");
}

/// Prints the graph (`cargo test -p nodewarden-cluster --test module_graph -- --nocapture print`).
#[test]
fn print_the_graph() {
    for (module, deps) in graph().edges {
        let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
        println!("{module} -> {}", deps.join(", "));
    }
}
