//! nodewarden's dev-only test kit: what every crate's tests share.
//!
//! - [`module_graph`]: reads a crate's `crate::` / `super::` paths and
//!   finds module cycles and edges that point up a declared layering.
//!   Every crate runs it on itself in `tests/module_graph.rs`, so a cycle
//!   fails `cargo test` in the crate that grew it.
//! - [`code_map`]: the check that `docs/architecture.md` names every
//!   source file of the workspace, so the map cannot go stale silently.
//! - `served` (feature `served`): the served cluster started on loopback
//!   with fast kubelets, and a kube-rs client of it configured from its
//!   kubeconfig, for the end-to-end tests of the crates above it.
//!
//! Without features it reads source text and has no dependency, so the
//! lowest crates' tests use it too; it is never a dependency of
//! production code.

pub mod code_map;
pub mod module_graph;
#[cfg(feature = "served")]
pub mod served;
