//! The harness that every test, suite and trial which runs `nodewarden`
//! as a process shares: `cargo xtask wire`, `wire-load` and `chaos`, and
//! the binary's own process-level tests.
//!
//! - [`process`]: child processes started as users start them, their
//!   stderr in a log, never left running; a free loopback port for one.
//! - [`http`]: one plain HTTP/1.1 GET over loopback (`/metrics`,
//!   `/healthz`, `/shadow`), and the scrape of a `/metrics` page.
//! - [`prometheus`]: the Prometheus text format read correctly, once: a
//!   sample's name, its labels (quoted values with commas, braces and
//!   escapes) and its value (`+Inf` and `NaN` included).
//!
//! Each of these was written two or three times, in the crates that
//! needed it, and the copies had drifted (two label splitters that
//! disagreed on a value with a comma). It depends on the standard library
//! only, so the `nodewarden` binary may use [`http::get`] for `shadow
//! report` without a dev-only crate in its tree.

pub mod http;
pub mod process;
pub mod prometheus;
