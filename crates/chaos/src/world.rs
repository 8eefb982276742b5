//! A trial's world and its course: the scenario served, the replicas, the
//! trouble at its time, and the verdict from what the store recorded.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use nodewarden_apiserver::ApiFault;
use nodewarden_apiserver::Kind;
use nodewarden_apiserver::store::key_of;
use nodewarden_apiserver::{ServeOptions, ServeSource, Served, ServerConfig, StoreLimits};
use serde_json::json;

use crate::observe::Recorder;
use crate::replica::Replicas;
use crate::{ChaosError, Scale, Trial, Verdict, ZONES};

/// Node `i` of `zone`.
pub fn node_name(zone: &str, i: usize) -> String {
    format!("{}-{i:03}", zone.trim_start_matches("zone-"))
}

/// The scenario: three zones of `nodes_per_zone` kubelet-driven nodes,
/// `pods_per_node` pods on each tolerating `unreachable` and `not-ready`
/// for the scale's toleration (no defaults admitted), the first zone's
/// kubelets stopped at `outage_at + offset` and started at `heal_at +
/// offset`.
pub fn scenario(scale: &Scale, offset: Duration) -> Result<nodewarden_cluster::Scenario, ChaosError> {
    let ms = |d: Duration| format!("{}ms", d.as_millis());
    let mut y = String::new();
    let _ = write!(
        y,
        "name: chaos\n\
         cluster:\n  \
           default-not-ready-toleration-seconds: null\n  \
           default-unreachable-toleration-seconds: null\n  \
           kubelet: {{node-lease-duration-seconds: {}, node-status-update-frequency: {}, \
                     node-status-report-frequency: {}}}\n\
         nodes:\n",
        scale.kubelet_lease.as_secs().max(1),
        ms(scale.kubelet_lease / 4),
        ms(scale.kubelet_lease * 15 / 2),
    );
    for zone in ZONES {
        for i in 0..scale.nodes_per_zone {
            let _ = writeln!(
                y,
                "- {{name: {}, zone: {zone}, created: -1h, ready: 'True', heartbeat: 0s, transition: -1h, \
                 lease: 0s, kubelet: true}}",
                node_name(zone, i)
            );
        }
    }
    let secs = scale.toleration.as_secs_f64().ceil() as i64;
    let tolerations = format!(
        "[{{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, seconds: {secs}}}, \
         {{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, seconds: {secs}}}]"
    );
    y.push_str("pods:\n");
    for zone in ZONES {
        for i in 0..scale.nodes_per_zone {
            let node = node_name(zone, i);
            for p in 0..scale.pods_per_node {
                let _ = writeln!(y, "- {{name: default/{node}-p{p}, node: {node}, tolerations: {tolerations}}}");
            }
        }
    }
    let lost: Vec<String> = (0..scale.nodes_per_zone).map(|i| node_name(ZONES[0], i)).collect();
    let _ = write!(
        y,
        "events:\n- {{at: {}, kubelet-stop: [{list}]}}\n- {{at: {}, kubelet-start: [{list}]}}\n",
        ms(scale.outage_at + offset),
        ms(scale.heal_at + offset),
        list = lost.join(", ")
    );
    nodewarden_cluster::parse_scenario(&y).map_err(|e| ChaosError::Scenario(e.to_string()))
}

/// Objects no typed client can decode, as an older server or a
/// hand-edited etcd could leave them: a node, a pod on a node of the lost
/// zone, a Lease.
fn store_malformed(served: &Served) {
    let absurd = "9999-12-31T23:59:59Z";
    let mut s = served.shared.store.lock();
    s.commit(
        Kind::Node,
        &key_of("", "rogue"),
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": "rogue", "uid": "rogue-uid", "creationTimestamp": absurd,
                            "labels": {"topology.kubernetes.io/zone": 7}},
               "spec": {"taints": "many", "unschedulable": "no"},
               "status": {"conditions": [{"type": "Ready", "status": "Sometimes", "lastHeartbeatTime": absurd}]}}),
        false,
    );
    s.commit(
        Kind::Pod,
        &key_of("default", "garbled"),
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "garbled", "namespace": "default", "uid": "garbled-uid",
                            "creationTimestamp": absurd, "ownerReferences": "none"},
               "spec": {"nodeName": node_name(ZONES[0], 0), "containers": [{"name": "c", "image": "i"}],
                        "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Sideways",
                                         "effect": "NoExecute", "tolerationSeconds": "0"}]},
               "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": 5}]}}),
        false,
    );
    s.commit(
        Kind::Lease,
        &key_of("kube-node-lease", "rogue"),
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "rogue", "namespace": "kube-node-lease", "uid": "rogue-lease",
                            "creationTimestamp": absurd},
               "spec": {"renewTime": absurd, "holderIdentity": 3}}),
        false,
    );
}

/// Sleeps until `at` after `start`.
async fn until(start: Instant, at: Duration) {
    tokio::time::sleep_until(tokio::time::Instant::from_std(start + at)).await;
}

/// Plays `trial` and takes its verdict.
pub async fn play(binary: &Path, trial: Trial, scale: &Scale, dir: &Path) -> Result<Verdict, ChaosError> {
    // The freeze comes first, with every node healthy; the zone outage
    // after it.
    let offset = if trial == Trial::Freeze { scale.outage_at + scale.freeze + scale.fault / 3 } else { Duration::ZERO };
    let opts = ServeOptions {
        source: ServeSource::File(Box::new(scenario(scale, offset)?)),
        scenario_speed: 1.0,
        server: ServerConfig {
            record_writes: true,
            bookmark_every: scale.monitor_period * 4,
            ..ServerConfig::default()
        },
        limits: StoreLimits::default(),
        tick: Duration::from_millis(50),
        ..ServeOptions::default()
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|source| ChaosError::Io { what: "binding the served cluster".into(), source })?;
    let served = Served::start(opts, listener).await.map_err(|e| ChaosError::Serve(e.to_string()))?;
    let start = Instant::now();
    if trial == Trial::Malformed {
        store_malformed(&served);
    }
    let lost: Vec<String> = (0..scale.nodes_per_zone).map(|i| node_name(ZONES[0], i)).collect();
    let recorder = Recorder::start(&served, &lost);
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, served.kubeconfig())
        .map_err(|source| ChaosError::Io { what: format!("{}", kubeconfig.display()), source })?;
    // The restart storm is a single controller crash-looping; every other
    // trial runs two replicas with leader election, as deployed.
    let single = trial == Trial::RestartStorm;
    let mut replicas = Replicas::new(binary, &kubeconfig, dir, scale, single);
    replicas.start_one()?;
    if !single {
        replicas.start_one()?;
    }

    let mid = scale.mid_eviction() + offset;
    let heal = scale.heal_at + offset;
    let end = heal + scale.settle;

    // The trouble, at its time; the replicas supervised meanwhile.
    let steps = schedule(trial, scale, mid, end);
    let mut stopped = None;
    for (at, step) in steps {
        // Supervise until the step is due: exited replicas started again,
        // every replica's metrics scraped every second or so.
        let mut scraped = Instant::now();
        while start.elapsed() < at {
            replicas.restart_exited()?;
            if scraped.elapsed() >= Duration::from_secs(1) {
                replicas.scrape_all().await;
                scraped = Instant::now();
            }
            let next = (start.elapsed() + Duration::from_millis(250)).min(at);
            until(start, next).await;
        }
        match step {
            Step::KillLeader => replicas.kill_leader().await?,
            Step::StopLeader => stopped = Some(replicas.stop_leader().await?),
            Step::ContinueStopped => {
                if let Some(pid) = stopped.take() {
                    replicas.cont(pid)?;
                }
            }
            Step::Fault(fault, lasts) => served.faults().inject(fault, lasts),
            Step::Freeze => served.faults().inject(ApiFault::Freeze, Some(scale.freeze)),
            Step::End => break,
        }
    }
    let ready_still_tainted = crate::observe::ready_still_tainted(&served);
    let metrics = replicas.finish().await;
    let history = recorder.finish();
    let writes = served.writes();
    served.stop();
    Ok(crate::observe::verdict(trial, scale, history, &writes, metrics, ready_still_tainted, start, heal, offset))
}

/// What `trial` does and when (from the served cluster's start), ending
/// with [`Step::End`] at `end`; `mid` is the middle of the evictions.
fn schedule(trial: Trial, scale: &Scale, mid: Duration, end: Duration) -> Vec<(Duration, Step)> {
    let fault = |f: ApiFault| Step::Fault(f, Some(scale.fault));
    let mut steps: Vec<(Duration, Step)> = match trial {
        Trial::FailoverKill => vec![(mid, Step::KillLeader)],
        Trial::FailoverStop => {
            vec![(mid, Step::StopLeader), (mid + scale.election.0 + scale.election.0 / 3, Step::ContinueStopped)]
        }
        Trial::ApiErrors => vec![(mid - scale.fault / 2, fault(ApiFault::Errors { rate: 0.5, code: 503 }))],
        Trial::ApiThrottle => vec![(mid - scale.fault / 2, fault(ApiFault::Throttle { rate: 0.3, retry_after: 2 }))],
        Trial::DroppedWatches => (0..3)
            .map(|i| (mid - scale.fault / 2 + scale.fault / 3 * i, Step::Fault(ApiFault::DropWatches, None)))
            .collect(),
        Trial::ApiOutage => vec![(mid - scale.fault / 2, fault(ApiFault::Outage))],
        Trial::ProbeFlakes => {
            let flakes = ApiFault::Errors { rate: 0.05, code: 503 };
            vec![(mid - scale.fault * 2, Step::Fault(flakes, Some(scale.fault * 4)))]
        }
        Trial::Freeze => vec![(scale.outage_at, Step::Freeze)],
        Trial::RestartStorm => {
            (0..5u32).map(|i| (mid - scale.storm_gap * 2 + scale.storm_gap * i, Step::KillLeader)).collect()
        }
        Trial::Malformed => Vec::new(),
    };
    steps.push((end, Step::End));
    steps
}

/// One thing a trial does at its time.
enum Step {
    /// SIGKILL the leader (the supervisor starts a new replica).
    KillLeader,
    /// SIGSTOP the leader.
    StopLeader,
    /// SIGCONT the replica stopped.
    ContinueStopped,
    /// An API fault, for as long as given (`None`: a single blow, as
    /// dropping the watches).
    Fault(ApiFault, Option<Duration>),
    /// The server and its kubelets freeze for the scale's freeze length.
    Freeze,
    /// Take the verdict.
    End,
}
