//! One health-monitor pass (heartbeat check, zone accounting, disruption
//! handling, and the other loops of the same tick) over N healthy nodes.
//!
//! The grace period is set out of reach so the nodes stay healthy however
//! many passes criterion runs: this measures the steady state of a large
//! cluster where nothing is wrong, the case that must be cheap.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use nodewarden_engine::{Engine, NodeSnapshot, Observation};
use nodewarden_model::{ConditionStatus, ConditionType, ControllerConfig, NodeCondition, Span, Timestamp, keys};

fn cluster(nodes: usize) -> (Engine, crossbeam_channel::Receiver<nodewarden_engine::Action>) {
    let config =
        ControllerConfig { node_monitor_grace_period: Span::from_secs(1_000_000_000), ..ControllerConfig::default() };
    let (mut engine, tx, rx) = Engine::with_channels(config, Timestamp::EPOCH).expect("valid config");
    for i in 0..nodes {
        let mut labels = BTreeMap::new();
        labels.insert(keys::LABEL_TOPOLOGY_REGION.to_string(), "region1".to_string());
        labels.insert(keys::LABEL_TOPOLOGY_ZONE.to_string(), format!("zone-{}", i % 3));
        let name = format!("node-{i:06}");
        tx.send(Observation::NodeUpserted(NodeSnapshot {
            name: name.clone(),
            created: Timestamp::EPOCH - Span::from_secs(3600),
            labels,
            conditions: vec![NodeCondition {
                kind: ConditionType::Ready,
                status: ConditionStatus::True,
                reason: "KubeletReady".into(),
                message: String::new(),
                last_heartbeat: Timestamp::EPOCH,
                last_transition: Timestamp::EPOCH - Span::from_secs(3600),
            }],
            taints: vec![],
            unschedulable: false,
        }))
        .expect("channel open");
        tx.send(Observation::LeaseUpserted { node: name, renew: Some(Timestamp::EPOCH) }).expect("channel open");
    }
    // The first pass registers every node; benchmark the passes after it.
    engine.tick(Timestamp::EPOCH);
    rx.try_iter().for_each(drop);
    (engine, rx)
}

fn health_pass(c: &mut Criterion) {
    let mut group = c.benchmark_group("health_pass");
    group.sample_size(50);
    for nodes in [10_000usize, 100_000] {
        let (mut engine, rx) = cluster(nodes);
        let mut now = Timestamp::EPOCH;
        group.bench_with_input(BenchmarkId::from_parameter(nodes), &nodes, |b, _| {
            b.iter(|| {
                now += Span::from_secs(5);
                engine.tick(black_box(now));
            })
        });
        assert_eq!(rx.try_iter().count(), 0, "healthy nodes must cause no writes");
        let zones = engine.zones();
        assert!(zones.iter().all(|z| z.not_ready == 0 && z.size > 0), "{zones:?}");
    }
    group.finish();
}

criterion_group!(benches, health_pass);
criterion_main!(benches);
