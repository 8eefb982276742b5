//! nodewarden's dev-only test kit: what every crate's tests share.
//!
//! - [`module_graph`]: reads a crate's `crate::` / `super::` paths and
//!   finds module cycles and edges that point up a declared layering.
//!   `tests/workspace.rs` runs the cycle check on every crate; a crate
//!   with declared layers also runs it on itself in its own
//!   `tests/module_graph.rs`, so an upward edge fails `cargo test` in the
//!   crate that grew it.
//! - [`code_map`]: the checks that `docs/architecture.md` stays a true
//!   map: a section for every crate, every source path it names
//!   existing, and short; so the map cannot go stale silently.
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
