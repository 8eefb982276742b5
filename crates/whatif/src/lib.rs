//! What-if on your own cluster: a snapshot of a real cluster (kubectl's
//! `List` output, YAML, a directory, or a read-only listing of a live API
//! server) played through nodewarden's simulator against a failure aimed
//! at its real names, and reported in the operator's terms: per workload,
//! which replicas are evicted and when, which workloads lose every ready
//! replica and for how long, which PodDisruptionBudgets the deletions
//! breach, and what happens to DaemonSet and critical pods; then the
//! simulator's usual per-zone story.
//!
//! - [`snapshot`] reads snapshots (untrusted input: nothing panics, unknown
//!   kinds are counted, unusable objects reported by name);
//! - [`live`] lists the same objects from a cluster (GET only);
//! - [`fleet`] makes the simulated cluster and kubelets from a snapshot;
//! - [`faults`] aims the failure at real zones, nodes and labels;
//! - [`config`] reads the controller's flags and kube-apiserver's default
//!   toleration seconds, for `--config` and `--compare`;
//! - [`workloads`] builds the per-workload report from the controller's
//!   pod writes;
//! - [`compare`] sets two configurations' runs side by side
//!   (`--compare`).
//!
//! This crate sits above the simulator and the adapter (it reads objects
//! with the adapter's lenient readings, so `nodewarden run` and a what-if
//! agree on what an object means) and below the cli.

mod compare;
mod config;
mod faults;
mod fleet;
mod live;
mod snapshot;
mod workloads;

use nodewarden_model::{ControllerConfig, Timestamp};
use nodewarden_sim::report::RunInfo;
use nodewarden_sim::{Outcome, SimOptions, Simulation, Source};

pub use compare::{Comparison, compare};
pub use config::{Defaults, TolerationDefaults, VersionSource, read as read_config};
pub use faults::{FailMode, Faults, check_events, scenario_events};
pub use fleet::{prepare, snapshot_time};
pub use live::list_cluster;
pub use snapshot::{Snapshot, SnapshotError, load_path, read_bytes};
pub use workloads::{Report, WorkloadReport};

/// Why a what-if could not run.
#[derive(Debug, thiserror::Error)]
pub enum WhatIfError {
    /// The snapshot (or the faults aimed at it) cannot be used.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// A configuration file cannot be used.
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// The simulator refused to start (a bad configuration).
    #[error(transparent)]
    Sim(#[from] nodewarden_sim::SimError),
}

/// One played configuration.
#[derive(Debug)]
pub struct Played {
    /// The simulator's figures (per zone, safety, timeline).
    pub outcome: Outcome,
    /// The per-workload report.
    pub report: Report,
    /// Wall time and seed, for the renderings.
    pub run: RunInfo,
}

/// Plays `faults` on the snapshot with the controller's `config`, through
/// an API with realistic latency.
pub fn play(snap: &Snapshot, faults: &Faults, config: ControllerConfig, seed: u64) -> Result<Played, WhatIfError> {
    play_with(snap, faults, config, seed, None)
}

/// [`play`] through an API with latency `api` (`None`: realistic).
pub fn play_with(
    snap: &Snapshot,
    faults: &Faults,
    config: ControllerConfig,
    seed: u64,
    api: Option<nodewarden_cluster::ApiLatency>,
) -> Result<Played, WhatIfError> {
    let prepared = fleet::prepare(snap, faults, seed)?;
    let plan = prepared.plan.clone();
    let started = std::time::Instant::now();
    let source = Source::Prepared(Box::new(prepared));
    let opts = SimOptions { source, config, duration: None, seed, measure: false, api };
    let mut sim = Simulation::new(opts)?;
    sim.record_pod_changes();
    while sim.step()? {}
    let changes = sim.take_pod_changes();
    let end = sim.now().max(Timestamp::EPOCH);
    let outcome = sim.finish();
    let report = workloads::build(snap, &plan, &changes, end);
    let run = RunInfo {
        wall_seconds: started.elapsed().as_secs_f64(),
        seed,
        peak_rss_bytes: None,
        rss_before_controller_bytes: None,
        cpu_seconds: None,
    };
    Ok(Played { outcome, report, run })
}
