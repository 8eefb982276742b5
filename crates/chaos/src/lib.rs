//! Chaos trials: `nodewarden run` processes against an in-process served
//! cluster (`nodewarden sim --serve`'s server, on loopback) through a zone
//! outage, while something else goes wrong: the leader is killed or
//! stopped mid-eviction, the API server fails, throttles, drops its
//! watches, goes away or freezes, the controller is restarted again and
//! again, objects are malformed. Each trial ends in a [`Verdict`]: what was
//! deleted before the zone came back against what upstream would have
//! deleted, and everything that must never happen (a deletion on a node
//! without a NoExecute taint at that moment, one before the pod's
//! toleration ran out from the taint's first sight, one pod deleted twice,
//! a healthy node written Unknown or tainted, a Ready node still tainted
//! after the recovery, an interlock refusal, a leader losing its Lease to
//! throttling).
//!
//! What a trial is made of:
//! - the world ([`world`]): a scenario file of three zones, every pod
//!   tolerating `unreachable` and `not-ready` for a set time; the first
//!   zone's kubelets stop at the outage and start at the heal;
//! - two replicas with leader election, as deployed ([`replica`]): real
//!   processes, killed with SIGKILL, stopped with SIGSTOP; one that exits
//!   is started again, as its Deployment would (the restart storm runs a
//!   single replica without election, crash-looping);
//! - the record ([`observe`]): the served store's own change feed, so every
//!   deletion is judged against the node as the store held it at that
//!   instant, not as a poller happened to see it.
//!
//! [`Scale::full`] is the trial `cargo xtask chaos` runs (300 nodes, 3,000
//! pods, kube-controller-manager's periods, minutes each);
//! [`Scale::short`] shortens every period and duration by the same factor
//! for `cargo test`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

mod observe;
mod replica;
mod world;

/// One kind of trouble.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trial {
    /// The leader is killed (SIGKILL) mid-eviction; the standby takes over.
    FailoverKill,
    /// The leader is stopped (SIGSTOP) mid-eviction for longer than the
    /// lease, then continued (SIGCONT): it must find itself fenced.
    FailoverStop,
    /// Half the requests fail with 503 for a while, mid-eviction.
    ApiErrors,
    /// 30% of requests get 429 with `Retry-After: 2` for a while,
    /// mid-eviction: the leader must keep its Lease.
    ApiThrottle,
    /// Every watch is dropped three times, mid-eviction.
    DroppedWatches,
    /// The API server is gone for a while, mid-eviction.
    ApiOutage,
    /// The API server and its kubelets freeze (as under SIGSTOP) while
    /// every node is healthy, before the zone outage.
    Freeze,
    /// A single controller (no leader election) is killed (SIGKILL) and
    /// started again five times within a short span, mid-eviction.
    RestartStorm,
    /// Objects no typed client can decode are in the cluster from the start.
    Malformed,
    /// 5% of requests (the liveness probes' included) answered 503 for
    /// four fault lengths, mid-eviction: load, not absence. Deletions go
    /// on, and the engine never stops deciding for want of an answer.
    ProbeFlakes,
}

impl Trial {
    /// Every trial, in the order `cargo xtask chaos` runs them.
    pub const ALL: [Trial; 10] = [
        Trial::FailoverKill,
        Trial::FailoverStop,
        Trial::ApiErrors,
        Trial::ApiThrottle,
        Trial::DroppedWatches,
        Trial::ApiOutage,
        Trial::Freeze,
        Trial::RestartStorm,
        Trial::Malformed,
        Trial::ProbeFlakes,
    ];

    /// Its name on the command line and in the verdict.
    pub fn name(self) -> &'static str {
        match self {
            Trial::FailoverKill => "failover-kill",
            Trial::FailoverStop => "failover-stop",
            Trial::ApiErrors => "api-errors",
            Trial::ApiThrottle => "api-throttle",
            Trial::DroppedWatches => "dropped-watches",
            Trial::ApiOutage => "api-outage",
            Trial::Freeze => "freeze",
            Trial::RestartStorm => "restart-storm",
            Trial::Malformed => "malformed",
            Trial::ProbeFlakes => "probe-flakes",
        }
    }

    /// The trial called `name`.
    pub fn named(name: &str) -> Option<Trial> {
        Trial::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// The trial world's three zones; the first is the one lost. Both the
/// world's builder and the verdict read it.
pub const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

/// How big and how fast a trial is. Every duration of [`Scale::short`] is
/// [`Scale::full`]'s divided by the same factor, the controller's periods
/// included, so the two tell the same story at different speeds; only
/// the cluster's size differs.
#[derive(Clone, Debug, Serialize)]
pub struct Scale {
    /// Its name in the verdict.
    pub name: &'static str,
    /// Nodes in each of the three zones.
    pub nodes_per_zone: usize,
    /// Pods on each node.
    pub pods_per_node: usize,
    /// Every pod tolerates `unreachable` and `not-ready` this long.
    pub toleration: Duration,
    /// The first zone's kubelets stop.
    pub outage_at: Duration,
    /// They start again.
    pub heal_at: Duration,
    /// How long after the heal the verdict is taken (Ready nodes must have
    /// lost their taints by then).
    pub settle: Duration,
    /// `--node-monitor-period`.
    pub monitor_period: Duration,
    /// `--node-monitor-grace-period` (and the startup grace period).
    pub grace: Duration,
    /// `--node-eviction-rate`, nodes a second.
    pub eviction_rate: f64,
    /// `--leader-elect-lease-duration`, `--leader-elect-renew-deadline`,
    /// `--leader-elect-retry-period`.
    pub election: (Duration, Duration, Duration),
    /// The kubelets' Lease duration (they renew every quarter of it).
    pub kubelet_lease: Duration,
    /// How long an API fault lasts.
    pub fault: Duration,
    /// How long the freeze lasts.
    pub freeze: Duration,
    /// The restart storm's five kills are this far apart.
    pub storm_gap: Duration,
    /// The factor every duration of the full scale is divided by.
    pub factor: u32,
}

impl Scale {
    /// `cargo xtask chaos`: 300 nodes in three zones, 10 pods each,
    /// kube-controller-manager's periods (monitor 5 s, grace 40 s),
    /// `--node-eviction-rate 1`, pods tolerating the taints for 60 s; the
    /// zone is down from 20 s to 420 s; faults of 30 s, a freeze of 100 s,
    /// five kills in 48 s.
    pub fn full() -> Scale {
        Scale {
            name: "full",
            nodes_per_zone: 100,
            pods_per_node: 10,
            toleration: Duration::from_secs(60),
            outage_at: Duration::from_secs(20),
            heal_at: Duration::from_secs(420),
            settle: Duration::from_secs(60),
            monitor_period: Duration::from_secs(5),
            grace: Duration::from_secs(40),
            eviction_rate: 1.0,
            election: (Duration::from_secs(15), Duration::from_secs(10), Duration::from_secs(2)),
            kubelet_lease: Duration::from_secs(40),
            fault: Duration::from_secs(30),
            freeze: Duration::from_secs(100),
            storm_gap: Duration::from_secs(12),
            factor: 1,
        }
    }

    /// `cargo test`: every duration of [`Scale::full`] divided by 10, a
    /// zone of 5 nodes with 3 pods each (at `--node-eviction-rate 10`, the
    /// same ten seconds of tainting per hundred nodes).
    pub fn short() -> Scale {
        let f = Scale::full();
        let d = |x: Duration| x / 10;
        Scale {
            name: "short",
            nodes_per_zone: 5,
            pods_per_node: 3,
            toleration: d(f.toleration),
            outage_at: d(f.outage_at),
            heal_at: d(f.heal_at),
            settle: d(f.settle),
            monitor_period: d(f.monitor_period),
            grace: d(f.grace),
            eviction_rate: f.eviction_rate * 10.0,
            // A Lease records whole seconds: 3 s, 2 s and 0.5 s (the
            // retry period divided by four, the others by five).
            election: (Duration::from_secs(3), Duration::from_secs(2), d(f.election.2) * 5 / 2),
            kubelet_lease: d(f.kubelet_lease),
            fault: d(f.fault),
            freeze: d(f.freeze),
            storm_gap: d(f.storm_gap),
            factor: 10,
        }
    }

    /// When the lost zone's last pod is due, as upstream would have it:
    /// nodes detected one grace period and one monitor period after the
    /// outage (the latest), tainted one every `1 / eviction_rate`, their
    /// pods due a toleration later.
    pub fn last_due(&self) -> Duration {
        let taints = Duration::from_secs_f64(self.nodes_per_zone.saturating_sub(1) as f64 / self.eviction_rate);
        self.outage_at + self.grace + self.monitor_period + taints + self.toleration
    }

    /// Mid-eviction: when half the lost zone's pods are due.
    pub fn mid_eviction(&self) -> Duration {
        let half = Duration::from_secs_f64(self.nodes_per_zone as f64 / 2.0 / self.eviction_rate);
        self.outage_at + self.grace + self.monitor_period + half + self.toleration
    }
}

/// What went wrong running a trial (not what the controller did wrong:
/// that is the [`Verdict`]).
#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    /// The scenario the trial builds does not parse (a bug here).
    #[error("the trial's scenario: {0}")]
    Scenario(String),
    /// The served cluster did not start.
    #[error("serving the cluster: {0}")]
    Serve(String),
    /// No replica led when the trial was to kill or stop the leader: the
    /// trouble could not be made, so the trial says nothing.
    #[error("no replica led when the trial was to kill or stop the leader")]
    NoLeader,
    /// A replica exited before it started running (a flag it refused).
    #[error("a replica did not start; its log ends:\n{0}")]
    Replica(String),
    /// A file or a process could not be handled.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
}

/// One trial's outcome. `pass` is true when every target holds; `failures`
/// says which did not.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    /// The trial.
    pub trial: Trial,
    /// The scale's name.
    pub scale: &'static str,
    /// Pods of the lost zone upstream would have deleted before the heal:
    /// every one (the timeline leaves room for a failover's cold start:
    /// `last_due_seconds` is before `heal_seconds`).
    pub expected_before_heal: usize,
    /// Pods of the lost zone deleted before the heal.
    pub deleted_before_heal: usize,
    /// `deleted_before_heal / expected_before_heal`; the target is 0.99.
    pub ratio: f64,
    /// Deletions of a pod whose node carried no NoExecute taint at that
    /// instant (as the store held it).
    pub on_untainted_node: usize,
    /// Deletions before the pod's toleration ran out, counted from the
    /// taint's first appearance in the store.
    pub early: usize,
    /// Pods whose deletion was accepted more than once.
    pub duplicate: usize,
    /// Pods outside the lost zone that were deleted.
    pub outside_the_lost_zone: usize,
    /// Nodes outside the lost zone ever written Unknown or tainted
    /// NoExecute.
    pub healthy_nodes_marked: usize,
    /// `nodewarden_safety_interlock_blocked_total`, every replica.
    pub interlock_refusals: u64,
    /// `nodewarden_writes_withdrawn_total`, every replica.
    pub withdrawn: u64,
    /// The largest write lag each class saw (decided to sent), as the upper
    /// bound of `nodewarden_write_lag_seconds`'s highest bucket in use;
    /// every replica.
    pub write_lag_max_seconds: BTreeMap<String, f64>,
    /// Ready nodes still carrying a controller taint when the verdict is
    /// taken (`settle` after the heal).
    pub ready_still_tainted: usize,
    /// Replicas that logged losing their Lease.
    pub leadership_lost: usize,
    /// Times a replica stopped deciding because its probes of the API
    /// server went unanswered (each "does not answer" it logged).
    pub api_silences: usize,
    /// Replicas started in all (restarts included).
    pub replicas_started: usize,
    /// When the lost zone's last pod was due (upstream's reckoning) and
    /// when the zone came back, seconds from the start.
    pub last_due_seconds: f64,
    /// The zone came back.
    pub heal_seconds: f64,
    /// The trial's wall time.
    pub wall_seconds: f64,
    /// Every target held.
    pub pass: bool,
    /// The targets that did not.
    pub failures: Vec<String>,
    /// Where the replicas' logs were kept (a failed trial, or
    /// NODEWARDEN_CHAOS_KEEP set).
    pub logs: Option<String>,
}

/// Where a trial keeps its files (scenario, kubeconfig, the replicas' logs).
fn workdir(trial: Trial) -> PathBuf {
    std::env::temp_dir().join(format!("nodewarden-chaos-{}-{}", std::process::id(), trial.name()))
}

/// Runs `trial` at `scale` with `binary` (the `nodewarden` executable) and
/// returns its verdict. Blocks for the trial's length.
pub fn run(binary: &Path, trial: Trial, scale: &Scale) -> Result<Verdict, ChaosError> {
    let dir = workdir(trial);
    std::fs::create_dir_all(&dir).map_err(|source| ChaosError::Io { what: format!("{}", dir.display()), source })?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|source| ChaosError::Io { what: "a tokio runtime".into(), source })?;
    let started = Instant::now();
    let outcome = runtime.block_on(world::play(binary, trial, scale, &dir));
    // The replicas' logs are kept for a trial that failed (or when
    // NODEWARDEN_CHAOS_KEEP is set), and the verdict says where.
    let keep = std::env::var_os("NODEWARDEN_CHAOS_KEEP").is_some() || outcome.as_ref().is_ok_and(|v| !v.pass);
    if !keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let mut verdict = outcome?;
    verdict.wall_seconds = started.elapsed().as_secs_f64();
    verdict.logs = keep.then(|| dir.display().to_string());
    Ok(verdict)
}
