//! nodewarden's adapter to a real Kubernetes API server (kube-rs).
//!
//! It makes no lifecycle decision. It turns watched objects into the
//! engine's [`Observation`](nodewarden_engine::Observation)s as they are
//! decoded, leniently ([`trimmed`], [`convert`], [`watch`]), runs the one control loop
//! ([`nodewarden_controller::Controller`]) on a thread of its own that wakes
//! on an observation or at the engine's next due time ([`engine_thread`]),
//! and carries the actions the safety interlock let through out as API
//! calls with client-side rate limits, retries and preconditions
//! ([`writer`]), answering each with `WriteFinished` and the object's fresh
//! state through the same channel the watchers use.
//!
//! ```text
//!  watchers (tokio) --Input--> crossbeam channel --> engine thread: Controller::step
//!        ^                           ^                        | actions (judged)
//!        | API                       | WriteFinished + state  v
//!        +------------------------ writer (tokio) <-- KubeApi (ClusterApi)
//! ```

pub mod convert;
pub mod engine_thread;
pub mod leader;
pub mod limiter;
pub mod runner;
pub mod trimmed;
pub mod watch;
pub mod write_log;
pub mod writer;

pub use convert::Detail;
pub use engine_thread::{EngineClock, EngineThread, Health, Input};
pub use leader::{ElectionConfig, ElectionError, Fence, Leadership, campaign};
pub use runner::{RunOptions, Running, start};
pub use trimmed::{Scheduled, Trimmed};
pub use watch::{Watched, Watches, spawn_watchers};
pub use writer::{DryRunApi, KubeApi, WriterOptions, spawn_writer};

/// A client configuration made fit for the controller: kube-rs's own retry
/// of 429, 503 and 504 answers (on by default since kube 3, up to 15
/// attempts, each waiting out the answer's `Retry-After`) is turned off.
/// The writer retries by itself, each attempt under the client rate limit
/// and judged again just before it goes out; a retry hidden below it would
/// send a write that may no longer be true, outside the rate limit. And a
/// Lease renewal must not sit out a `Retry-After` inside one attempt: it
/// tries again on its own schedule, well within the renew deadline.
pub fn controller_config(mut config: kube::Config) -> kube::Config {
    config.default_retry = false;
    config
}
