//! The taint manager under a zone outage: 3,300 nodes of one zone get the
//! `unreachable:NoExecute` taint at once, with 30 pods each (99,000 pods);
//! half tolerate it for 300 s (the admission default), half tolerate it
//! for an hour (so every pod gets a scheduled deletion).
//!
//! `schedule_all`: the tick that sees the tainted nodes and schedules every
//! deletion. `idle_tick`: a tick afterwards with nothing due, which must
//! cost next to nothing however many deletions are pending.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use nodewarden_engine::{Engine, NodeSnapshot, Observation, PodSnapshot};
use nodewarden_model::{
    ConditionStatus, ConditionType, ControllerConfig, NodeCondition, Span, Taint, TaintEffect, Timestamp, Toleration,
    TolerationOperator, keys,
};

const NODES: usize = 3_300;
const PODS_PER_NODE: usize = 30;

fn node(i: usize, tainted: bool) -> NodeSnapshot {
    let mut labels = BTreeMap::new();
    labels.insert(keys::LABEL_TOPOLOGY_REGION.to_string(), "region1".to_string());
    labels.insert(keys::LABEL_TOPOLOGY_ZONE.to_string(), "zone-a".to_string());
    NodeSnapshot {
        version: 0,
        allocatable: None,
        name: format!("node-{i:05}"),
        created: Timestamp::EPOCH - Span::from_secs(3600),
        labels,
        conditions: vec![NodeCondition {
            kind: ConditionType::Ready,
            status: if tainted { ConditionStatus::Unknown } else { ConditionStatus::True },
            reason: String::new(),
            message: String::new(),
            last_heartbeat: Timestamp::EPOCH,
            last_transition: Timestamp::EPOCH,
        }],
        taints: if tainted {
            vec![Taint {
                time_added: Some(Timestamp::EPOCH + Span::from_secs(1)),
                ..Taint::new(keys::TAINT_UNREACHABLE, TaintEffect::NoExecute)
            }]
        } else {
            vec![]
        },
        unschedulable: false,
    }
}

fn toleration(seconds: i64) -> Toleration {
    Toleration {
        key: keys::TAINT_UNREACHABLE.to_string(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: Some(TaintEffect::NoExecute),
        seconds: Some(seconds),
    }
}

/// An engine that knows the healthy zone and its pods, plus the
/// observations that taint every node.
fn setup() -> (Engine, Vec<Observation>) {
    let config = ControllerConfig { node_monitor_grace_period: Span::from_secs(1_000_000), ..Default::default() };
    let mut engine = Engine::new(config, Timestamp::EPOCH).expect("valid config");
    for i in 0..NODES {
        engine.observe(Observation::NodeUpserted(node(i, false)));
        for j in 0..PODS_PER_NODE {
            let seconds = if j % 2 == 0 { 300 } else { 3600 };
            engine.observe(Observation::PodUpserted(PodSnapshot {
                version: 0,
                node_lost: false,
                scheduling: None,
                key: format!("default/pod-{i:05}-{j:02}"),
                uid: format!("uid-{i}-{j}"),
                node: Some(format!("node-{i:05}")),
                daemonset: false,
                ready: Some(true),
                terminating: false,
                tolerations: vec![toleration(seconds), toleration(seconds)],
            }));
        }
    }
    let _ = engine.tick(Timestamp::EPOCH);
    let taint: Vec<Observation> = (0..NODES).map(|i| Observation::NodeUpserted(node(i, true))).collect();
    (engine, taint)
}

fn eviction(c: &mut Criterion) {
    let mut group = c.benchmark_group("zone_outage_3300_nodes_99k_pods");
    group.sample_size(10);
    // A tick at a time that is neither a monitor nor a tainting grid point,
    // so it measures ingest and the taint manager only.
    let at = Timestamp::EPOCH + Span::from_millis(1_050);
    group.bench_function("schedule_all", |b| {
        b.iter_batched(
            setup,
            |(mut engine, taint)| {
                for o in taint {
                    engine.observe(o);
                }
                let actions = engine.tick(black_box(at));
                // Nothing is due yet: no deletion may have been issued.
                assert!(actions.iter().all(|a| !matches!(a.kind, nodewarden_engine::ActionKind::DeletePod { .. })));
                engine
            },
            BatchSize::PerIteration,
        )
    });

    let (mut engine, taint) = setup();
    for o in taint {
        engine.observe(o);
    }
    let _ = engine.tick(at);
    let mut now = at;
    let mut acted = Vec::new();
    group.bench_function("idle_tick", |b| {
        b.iter(|| {
            // Nanosecond steps: millions of iterations stay short of the
            // next monitor pass (which, with the only zone down, would enter
            // master disruption mode and lift every taint) and of the
            // deadlines.
            now += Span::from_nanos(1);
            let actions = engine.tick(black_box(now));
            if acted.len() < 5 {
                acted.extend(actions);
            }
        })
    });
    assert!(acted.is_empty(), "idle ticks must not act: {acted:#?}");
    group.finish();
}

criterion_group!(benches, eviction);
criterion_main!(benches);
