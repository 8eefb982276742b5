//! The engine's modules form layers, not a knot: this test reads the
//! `crate::` and `super::` paths in every file under `src/`
//! (`nodewarden_testkit::module_graph`, which every crate's cycle check
//! shares) and fails when the module graph has a cycle (naming it) or an
//! edge that points up the layers below.
//!
//! It reads source text, not the compiler's view, so it is deliberately
//! strict about spelling: inside the engine, items are named by their module
//! path (`crate::action::Action`), never through the crate root's re-exports
//! (`crate::Action`), because the root depends on everything.

use nodewarden_testkit::module_graph::{Graph, Paths};

/// Layers, bottom first. A module may depend on modules of lower layers
/// only; within a layer only the systems may use one another, and a
/// module's own submodules may use it (the cycle check keeps both honest:
/// a module that used its submodule back by path would close a cycle). `lib.rs` is the crate root: it declares
/// the modules and re-exports the boundary, and is not part of the graph.
const LAYERS: &[&[&str]] = &[
    // Boundary types, one direction: actions carry explanations,
    // observations answer actions (a withdrawn one with its reason);
    // judgements carry explanation facts.
    &["explain", "withdrawal"],
    &["action"],
    &["observation", "judgement"],
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

fn graph() -> Graph {
    Graph::of_crate(env!("CARGO_MANIFEST_DIR"), Paths::Strict)
}

#[test]
fn the_engine_modules_have_no_cycle() {
    if let Some(cycle) = graph().cycle() {
        panic!("module cycle: {}", cycle.join(" -> "));
    }
}

#[test]
fn every_dependency_points_down_the_layers() {
    // Within a layer, only the systems may use one another, and a
    // submodule the module it is part of (`engine::assembly` -> `engine`).
    let wrong = graph().upward_edges(LAYERS, |from, to| {
        (from.starts_with("systems") && to.starts_with("systems")) || from.starts_with(&format!("{to}::"))
    });
    assert!(wrong.is_empty(), "dependencies that do not point down the layers: {wrong:?}");
}
