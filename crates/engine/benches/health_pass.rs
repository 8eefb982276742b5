//! The health monitor's pass at 10k and 100k nodes, and the ingest of a
//! whole cluster, through the engine's public API.
//!
//! - `health_pass/quiet`: a whole tick (every loop due) over nodes that
//!   nothing happens to (the grace period is out of reach and no heartbeat
//!   arrives): the floor of a pass.
//! - `health_pass/healthy`: the monitor pass alone (the `health_monitor`
//!   phase, timed with the clock lent to the engine) while half the nodes
//!   renew their Lease before each pass, as 10 s renewals and a 5 s period
//!   make them: the steady state of a large healthy cluster.
//! - `health_pass/zone_down`: the same with one zone of three silent for
//!   longer than the grace period: its nodes are Unknown, queued or tainted,
//!   the zone fully disrupted, the others renewing.
//! - `ingest/full_cluster`: the first tick of an engine handed a whole
//!   cluster (10k nodes and their Leases, 300k pods), as at startup or after
//!   a restart; the observations are made outside the measured time.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use nodewarden_engine::{ActionKind, Engine, NodeSnapshot, Observation, PodSnapshot, WriteOutcome};
use nodewarden_model::{
    ConditionStatus, ConditionType, ControllerConfig, NodeCondition, Span, TaintEffect, Timestamp, Toleration,
    TolerationOperator, keys,
};

const PERIOD: Span = Span::from_secs(5);

fn node(i: usize, zones: usize, nodes: usize, heartbeat: Timestamp) -> NodeSnapshot {
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
    let conditions = [
        (ConditionType::Ready, ConditionStatus::True, "KubeletReady"),
        (ConditionType::MemoryPressure, ConditionStatus::False, "KubeletHasSufficientMemory"),
        (ConditionType::DiskPressure, ConditionStatus::False, "KubeletHasNoDiskPressure"),
        (ConditionType::PidPressure, ConditionStatus::False, "KubeletHasSufficientPID"),
    ]
    .into_iter()
    .map(|(kind, status, reason)| NodeCondition {
        kind,
        status,
        reason: reason.into(),
        message: String::new(),
        last_heartbeat: heartbeat,
        last_transition: created,
    })
    .collect();
    NodeSnapshot { name: name(i), created, labels, conditions, taints: vec![], unschedulable: false }
}

fn name(i: usize) -> String {
    format!("node-{i:06}")
}

fn toleration(key: &str, seconds: Option<i64>) -> Toleration {
    Toleration {
        key: key.to_string(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: Some(TaintEffect::NoExecute),
        seconds,
    }
}

/// A cluster's worth of observations: nodes, Leases, and `pods_per_node`
/// pods on each node, two of them DaemonSet pods, the others with the
/// admission defaults (the tolerations most pods carry).
fn cluster_state(nodes: usize, zones: usize, pods_per_node: usize) -> Vec<Observation> {
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
fn tick(engine: &mut Engine, now: Timestamp) -> usize {
    let actions = engine.tick(now);
    for a in &actions {
        if !matches!(a.kind, ActionKind::RecordEvent(_)) {
            engine.observe(Observation::WriteFinished { id: a.id, outcome: WriteOutcome::Done });
        }
    }
    actions.len()
}

fn quiet_cluster(nodes: usize) -> Engine {
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

fn quiet(c: &mut Criterion) {
    let mut group = c.benchmark_group("health_pass/quiet");
    group.sample_size(50);
    for nodes in [10_000usize, 100_000] {
        let mut engine = quiet_cluster(nodes);
        let mut now = Timestamp::EPOCH;
        let mut writes = 0;
        group.bench_with_input(BenchmarkId::from_parameter(nodes), &nodes, |b, _| {
            b.iter(|| {
                now += PERIOD;
                writes += engine.tick(black_box(now)).len();
            })
        });
        assert_eq!(writes, 0, "healthy nodes must cause no writes");
        let zones = engine.zones();
        assert!(zones.iter().all(|z| z.not_ready == 0 && z.size > 0), "{zones:?}");
    }
    group.finish();
}

/// A cluster on the default grace period whose nodes renew their Leases,
/// half of them before each pass; with `down`, zone 0's nodes stop
/// renewing and the cluster is run until they are Unknown.
struct Renewing {
    engine: Engine,
    nodes: usize,
    /// Nodes `0..silent` do not renew.
    silent: usize,
    now: Timestamp,
    passes: u64,
}

impl Renewing {
    fn new(nodes: usize, down: bool) -> Renewing {
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
    fn pass(&mut self) -> Duration {
        self.now += PERIOD;
        self.passes += 1;
        let parity = (self.passes % 2) as usize;
        for i in (self.silent..self.nodes).filter(|i| i % 2 == parity) {
            self.engine.observe(Observation::LeaseUpserted { node: name(i), renew: Some(self.now) });
        }
        tick(&mut self.engine, self.now);
        self.engine.last_tick_timings().iter().find(|p| p.phase == "health_monitor").map_or(Duration::ZERO, |p| p.took)
    }
}

fn renewing(c: &mut Criterion) {
    for (group_name, down) in [("health_pass/healthy", false), ("health_pass/zone_down", true)] {
        let mut group = c.benchmark_group(group_name);
        group.sample_size(30);
        for nodes in [10_000usize, 100_000] {
            let mut r = Renewing::new(nodes, down);
            group.bench_with_input(BenchmarkId::from_parameter(nodes), &nodes, |b, _| {
                b.iter_custom(|iters| (0..iters).map(|_| r.pass()).sum())
            });
            let zones = r.engine.zones();
            let down_zones = zones.iter().filter(|z| z.not_ready == z.size).count();
            assert_eq!(down_zones, usize::from(down), "{zones:?}");
        }
        group.finish();
    }
}

fn ingest(c: &mut Criterion) {
    let mut group = c.benchmark_group("ingest");
    group.sample_size(10);
    let (nodes, pods_per_node) = (10_000usize, 30usize);
    group.bench_function(BenchmarkId::new("full_cluster", format!("{nodes}n-{}p", nodes * pods_per_node)), |b| {
        b.iter_batched(
            || cluster_state(nodes, 3, pods_per_node),
            |state| {
                let mut engine = Engine::new(ControllerConfig::default(), Timestamp::EPOCH).expect("valid config");
                for o in state {
                    engine.observe(o);
                }
                black_box(engine.tick(Timestamp::EPOCH).len());
                engine
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, quiet, renewing, ingest);
criterion_main!(benches);
