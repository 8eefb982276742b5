//! The engine's public facade, driven as an adapter would.

use std::collections::BTreeMap;

use nodewarden_engine::{ActionKind, Engine, NodeSnapshot, Observation};
use nodewarden_model::{ConditionStatus, ConditionType, ControllerConfig, NodeCondition, Span, Timestamp};

fn t(ms: i64) -> Timestamp {
    Timestamp::EPOCH + Span::from_millis(ms)
}

fn node(name: &str) -> Observation {
    Observation::NodeUpserted(NodeSnapshot {
        allocatable: None,
        name: name.into(),
        created: t(-3_600_000),
        labels: BTreeMap::new(),
        conditions: vec![NodeCondition {
            kind: ConditionType::Ready,
            status: ConditionStatus::True,
            reason: String::new(),
            message: String::new(),
            last_heartbeat: t(0),
            last_transition: t(0),
        }],
        taints: vec![],
        unschedulable: false,
    })
}

#[test]
fn refuses_a_configuration_that_cannot_work() {
    let bad = ControllerConfig { unhealthy_zone_threshold: 0.0, ..Default::default() };
    let err = Engine::new(bad, t(0)).err().map(|e| e.flag);
    assert_eq!(err, Some("unhealthy-zone-threshold"));
}

#[test]
fn phases_are_timed_only_with_a_clock_and_only_when_they_ran() {
    let mut engine = Engine::new(ControllerConfig::default(), t(0)).unwrap();
    engine.observe(node("a"));
    let _ = engine.tick(t(0));
    assert!(engine.last_tick_timings().is_empty(), "no clock lent, nothing timed");
    engine.measure_with(std::time::Instant::now);
    let _ = engine.tick(t(5_000));
    let ran: Vec<_> = engine.last_tick_timings().iter().map(|p| p.phase).collect();
    assert!(ran.contains(&"ingest") && ran.contains(&"health_monitor") && ran.contains(&"tainting_pass"), "{ran:?}");
    assert!(!ran.contains(&"legacy_eviction_pass"));
    let _ = engine.tick(t(5_050));
    let ran: Vec<_> = engine.last_tick_timings().iter().map(|p| p.phase).collect();
    assert!(!ran.contains(&"health_monitor") && !ran.contains(&"tainting_pass"), "off-grid tick: {ran:?}");
    assert_eq!(engine.phase_names().first(), Some(&"ingest"));
}

#[test]
fn a_silent_node_goes_unknown_after_the_grace_period_and_the_clock_never_goes_back() {
    let mut engine = Engine::new(ControllerConfig::default(), t(0)).unwrap();
    engine.observe(node("a"));
    assert_eq!(engine.pending_observations(), 1);
    let mut unknown_at = None;
    let mut now = 0;
    while now <= 60_000 && unknown_at.is_none() {
        let actions = engine.tick(t(now));
        assert_eq!(engine.pending_observations(), 0);
        if actions.iter().any(|a| matches!(&a.kind, ActionKind::UpdateNodeConditions { .. })) {
            unknown_at = Some(now);
        }
        now += 100;
    }
    // First seen at 0 s, grace 40 s, strictly after: the 45 s pass.
    assert_eq!(unknown_at, Some(45_000));
    // A tick in the past is held at the last tick's time and changes nothing.
    let actions = engine.tick(t(1_000));
    assert_eq!(actions.into_iter().filter(|a| !matches!(a.kind, ActionKind::RecordEvent(_))).count(), 0);
    assert!(engine.next_due() >= t(45_100));
}
