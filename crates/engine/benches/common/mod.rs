//! The fleet the health-pass benchmarks drive, shared with the
//! `monitor_profile` example (which runs the same passes under callgrind).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use nodewarden_engine::{ActionKind, Engine, NodeSnapshot, Observation, PodSnapshot, TickPhase, WriteOutcome};
use nodewarden_model::{ControllerConfig, NodeCondition, Span, Timestamp, Toleration, keys};

pub const PERIOD: Span = Span::from_secs(5);

pub fn node(i: usize, zones: usize, nodes: usize, heartbeat: Timestamp) -> NodeSnapshot {
    let mut labels = BTreeMap::new();
    labels.insert(keys::LABEL_TOPOLOGY_REGION.to_string(), "region1".to_string());
    labels.insert(keys::LABEL_TOPOLOGY_ZONE.to_string(), format!("zone-{}", i * zones / nodes));
    for (k, v) in [
        (keys::LABEL_OS, "linux"),
        (keys::LABEL_BETA_OS, "linux"),
        (keys::LABEL_ARCH, "amd64"),
        (keys::LABEL_BETA_ARCH, "amd64"),
    ] {
        labels.insert(k.to_string(), v.to_string());
    }
    let created = Timestamp::EPOCH - Span::from_secs(3600);
    let conditions = NodeCondition::healthy_kubelet(heartbeat, created);
    NodeSnapshot {
        version: 0,
        allocatable: None,
        name: name(i),
        created,
        labels,
        conditions,
        taints: vec![],
        unschedulable: false,
    }
}

pub fn name(i: usize) -> String {
    format!("node-{i:06}")
}

pub fn toleration(key: &str, seconds: Option<i64>) -> Toleration {
    Toleration::no_execute(key, seconds)
}

/// A cluster's worth of observations: nodes, Leases, and `pods_per_node`
/// pods on each node, two of them DaemonSet pods, the others with the
/// admission defaults (the tolerations most pods carry).
pub fn cluster_state(nodes: usize, zones: usize, pods_per_node: usize) -> Vec<Observation> {
    let mut out = Vec::with_capacity(nodes * (2 + pods_per_node));
    for i in 0..nodes {
        out.push(Observation::NodeUpserted(node(i, zones, nodes, Timestamp::EPOCH)));
        out.push(Observation::LeaseUpserted { node: name(i), renew: Some(Timestamp::EPOCH) });
    }
    for i in 0..nodes {
        for j in 0..pods_per_node {
            let (key, daemonset, tolerations) = if j < 2 {
                (
                    format!("kube-system/ds{j}-{i:06}"),
                    true,
                    vec![toleration(keys::TAINT_NOT_READY, None), toleration(keys::TAINT_UNREACHABLE, None)],
                )
            } else {
                (
                    format!("apps/w{i:06}-{j:02}"),
                    false,
                    vec![toleration(keys::TAINT_NOT_READY, Some(300)), toleration(keys::TAINT_UNREACHABLE, Some(300))],
                )
            };
            out.push(Observation::PodUpserted(PodSnapshot {
                version: 0,
                node_lost: false,
                scheduling: None,
                uid: format!("uid-{key}"),
                key,
                node: Some(name(i)),
                daemonset,
                ready: Some(true),
                terminating: false,
                tolerations,
            }));
        }
    }
    out
}

/// One tick; every write succeeds and its answer is handed back.
pub fn tick(engine: &mut Engine, now: Timestamp) -> usize {
    let actions = engine.tick(now);
    for a in &actions {
        if !matches!(a.kind, ActionKind::RecordEvent(_)) {
            engine.observe(Observation::WriteFinished { id: a.id, outcome: WriteOutcome::Done });
        }
    }
    actions.len()
}

pub fn quiet_cluster(nodes: usize) -> Engine {
    let config =
        ControllerConfig { node_monitor_grace_period: Span::from_secs(1_000_000_000), ..ControllerConfig::default() };
    let mut engine = Engine::new(config, Timestamp::EPOCH).expect("valid config");
    for o in cluster_state(nodes, 3, 0) {
        engine.observe(o);
    }
    // The first pass registers every node; benchmark the passes after it.
    tick(&mut engine, Timestamp::EPOCH);
    engine
}

/// A cluster on the default grace period whose nodes renew their Leases,
/// half of them before each pass; with `down`, zone 0's nodes stop
/// renewing and the cluster is run until they are Unknown.
pub struct Renewing {
    pub engine: Engine,
    nodes: usize,
    /// Nodes `0..silent` do not renew.
    silent: usize,
    now: Timestamp,
    passes: u64,
}

impl Renewing {
    pub fn new(nodes: usize, down: bool) -> Renewing {
        let mut engine = Engine::new(ControllerConfig::default(), Timestamp::EPOCH).expect("valid config");
        engine.measure_with(Instant::now);
        for o in cluster_state(nodes, 3, 0) {
            engine.observe(o);
        }
        tick(&mut engine, Timestamp::EPOCH);
        let silent = if down { nodes.div_ceil(3) } else { 0 };
        let mut r = Renewing { engine, nodes, silent, now: Timestamp::EPOCH, passes: 0 };
        // Past the grace period, so the silent zone is Unknown and queued.
        for _ in 0..12 {
            r.pass();
        }
        r
    }

    /// Renews half the Leases, ticks at the next monitor pass and returns
    /// how long the pass took.
    pub fn pass(&mut self) -> Duration {
        self.now += PERIOD;
        self.passes += 1;
        let parity = (self.passes % 2) as usize;
        for i in (self.silent..self.nodes).filter(|i| i % 2 == parity) {
            self.engine.observe(Observation::LeaseUpserted { node: name(i), renew: Some(self.now) });
        }
        tick(&mut self.engine, self.now);
        self.engine
            .last_tick_timings()
            .iter()
            .find(|p| p.phase == TickPhase::HealthMonitor)
            .map_or(Duration::ZERO, |p| p.took)
    }
}
