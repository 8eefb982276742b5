//! The engine's public facade, driven as an adapter would.

use std::collections::BTreeMap;

use nodewarden_engine::{ActionKind, Changed, Engine, NodeSnapshot, Observation, TickPhase, Withdrawal, WriteOutcome};
use nodewarden_model::{ConditionStatus, ConditionType, ControllerConfig, Span, Timestamp};

fn node(name: &str) -> Observation {
    Observation::NodeUpserted(
        NodeSnapshot::new(name, Timestamp::from_secs(-3600)).with_ready(ConditionStatus::True, Timestamp::EPOCH),
    )
}

/// The fact the engine's send-time check found changed: what every
/// withdrawal of its own is.
fn changed(why: &Withdrawal) -> &Changed {
    match why {
        Withdrawal::NoLongerTrue(changed) => changed,
        other => panic!("the engine withdraws only what is no longer true, not: {other}"),
    }
}

#[test]
fn refuses_a_configuration_that_cannot_work() {
    let bad = ControllerConfig { unhealthy_zone_threshold: 0.0, ..Default::default() };
    let err = Engine::new(bad, Timestamp::from_millis(0)).err().map(|e| e.flag);
    assert_eq!(err, Some("unhealthy-zone-threshold"));
}

#[test]
fn phases_are_timed_only_with_a_clock_and_only_when_they_ran() {
    let mut engine = Engine::new(ControllerConfig::default(), Timestamp::from_millis(0)).unwrap();
    engine.observe(node("a"));
    let _ = engine.tick(Timestamp::from_millis(0));
    assert!(engine.last_tick_timings().is_empty(), "no clock lent, nothing timed");
    engine.measure_with(std::time::Instant::now);
    let _ = engine.tick(Timestamp::from_millis(5_000));
    let ran: Vec<_> = engine.last_tick_timings().iter().map(|p| p.phase).collect();
    let [ingest, monitor, tainting] = [TickPhase::Ingest, TickPhase::HealthMonitor, TickPhase::TaintingPass];
    assert!(ran.contains(&ingest) && ran.contains(&monitor) && ran.contains(&tainting), "{ran:?}");
    assert!(!ran.contains(&TickPhase::LegacyEvictionPass));
    let _ = engine.tick(Timestamp::from_millis(5_050));
    let ran: Vec<_> = engine.last_tick_timings().iter().map(|p| p.phase).collect();
    assert!(!ran.contains(&monitor) && !ran.contains(&tainting), "off-grid tick: {ran:?}");
    // Every phase, in order, whether or not it ran: the order reports
    // list them in, by the names they have always shown.
    let names: Vec<_> = engine.tick_phases().into_iter().map(TickPhase::name).collect();
    let order = [
        "ingest",
        "pod_assignment",
        "health_monitor",
        "node_handlers",
        "tainting_pass",
        "legacy_eviction_pass",
        "taint_manager",
        "rescheduler",
    ];
    assert_eq!(names, order);
}

#[test]
fn a_silent_node_goes_unknown_after_the_grace_period_and_the_clock_never_goes_back() {
    let mut engine = Engine::new(ControllerConfig::default(), Timestamp::from_millis(0)).unwrap();
    engine.observe(node("a"));
    assert_eq!(engine.pending_observations(), 1);
    let mut unknown_at = None;
    let mut now = 0;
    while now <= 60_000 && unknown_at.is_none() {
        let actions = engine.tick(Timestamp::from_millis(now));
        assert_eq!(engine.pending_observations(), 0);
        if actions.iter().any(|a| matches!(&a.kind, ActionKind::UpdateNodeConditions { .. })) {
            unknown_at = Some(now);
        }
        now += 100;
    }
    // First seen at 0 s, grace 40 s, strictly after: the 45 s pass.
    assert_eq!(unknown_at, Some(45_000));
    // A tick in the past is held at the last tick's time and changes nothing.
    let actions = engine.tick(Timestamp::from_millis(1_000));
    assert_eq!(actions.into_iter().filter(|a| !matches!(a.kind, ActionKind::RecordEvent(_))).count(), 0);
    assert!(engine.next_due() >= Timestamp::from_millis(45_100));
}

/// A node in `zone` whose Ready heartbeat is at `beat` ms.
fn zoned_node(name: &str, zone: &str, beat: i64) -> Observation {
    let Observation::NodeUpserted(mut n) = node(name) else { unreachable!() };
    n.labels.insert(nodewarden_model::keys::LABEL_TOPOLOGY_ZONE.into(), zone.into());
    for c in &mut n.conditions {
        c.last_heartbeat = Timestamp::from_millis(beat);
    }
    Observation::NodeUpserted(n)
}

fn plain_pod(key: &str, node: &str) -> Observation {
    Observation::PodUpserted(nodewarden_engine::PodSnapshot {
        version: 0,
        node_lost: false,
        key: key.into(),
        uid: format!("uid-{key}"),
        node: Some(node.into()),
        daemonset: false,
        ready: Some(true),
        terminating: false,
        tolerations: vec![],
        scheduling: None,
    })
}

/// What an adapter's first list hands over: two zones of nodes, their
/// Leases and pods, in the order the watches would interleave them.
fn first_list() -> Vec<Observation> {
    let mut out = Vec::new();
    for (zone, prefix) in [("zone-a", "a"), ("zone-b", "b")] {
        for i in 0..4 {
            let name = format!("{prefix}{i}");
            out.push(zoned_node(&name, zone, 0));
            out.push(Observation::LeaseUpserted { node: name.clone(), renew: Some(Timestamp::from_millis(0)) });
            for p in 0..3 {
                out.push(plain_pod(&format!("default/{name}-{p}"), &name));
            }
        }
    }
    out
}

/// Drives an engine for three minutes after `start_ms`, every node but
/// `a0` renewing its Lease every 10 s, and returns every action issued.
/// Each write is answered as an API server would: accepted, and the
/// node's new state observed (the taint manager acts on observed taints).
fn run_on(engine: &mut Engine, start_ms: i64) -> Vec<String> {
    let mut nodes: BTreeMap<String, NodeSnapshot> = first_list()
        .into_iter()
        .filter_map(|o| match o {
            Observation::NodeUpserted(n) => Some((n.name.clone(), n)),
            _ => None,
        })
        .collect();
    let mut seen = Vec::new();
    let mut now = start_ms;
    while now <= start_ms + 180_000 {
        if now % 10_000 == 0 {
            for name in ["a1", "a2", "a3", "b0", "b1", "b2", "b3"] {
                engine.observe(Observation::LeaseUpserted {
                    node: name.into(),
                    renew: Some(Timestamp::from_millis(now)),
                });
            }
        }
        for a in engine.tick(Timestamp::from_millis(now)) {
            seen.push(format!("{:?}", a.kind));
            if a.kind.slot().is_some() {
                engine.observe(Observation::WriteFinished { id: a.id, outcome: WriteOutcome::Done });
            }
            let Some((name, _)) = a.kind.slot() else { continue };
            let Some(n) = nodes.get_mut(&name.to_string()) else { continue };
            match &a.kind {
                ActionKind::PatchNodeTaints { add, remove, .. } => {
                    n.taints.retain(|t| !remove.iter().chain(add).any(|r| r.same_as(t)));
                    n.taints.extend(add.iter().cloned());
                }
                ActionKind::UpdateNodeConditions { conditions, .. } => n.conditions = conditions.clone(),
                _ => continue,
            }
            engine.observe(Observation::NodeUpserted(n.clone()));
        }
        now += 100;
    }
    seen
}

#[test]
fn taking_in_before_the_first_tick_decides_as_one_tick_would() {
    // The first list arrives between 0 and 3 s, the first tick is at 3 s:
    // one engine holds everything until then, the other takes each part
    // in as it arrives. They must then decide exactly alike.
    let list = first_list();
    let mut held = Engine::new(ControllerConfig::default(), Timestamp::from_millis(0)).unwrap();
    let mut absorbed = Engine::new(ControllerConfig::default(), Timestamp::from_millis(0)).unwrap();
    for (i, chunk) in list.chunks(7).enumerate() {
        for o in chunk {
            held.observe(o.clone());
            absorbed.observe(o.clone());
        }
        absorbed.absorb(Timestamp::from_millis(i as i64 * 300));
        assert_eq!(absorbed.pending_observations(), 0, "taken in at once");
    }
    assert_eq!(held.pending_observations(), list.len());
    // 8 nodes and 24 pods already exist in `absorbed`, none in `held`.
    assert!(absorbed.entities() >= held.entities() + 32, "{} vs {}", absorbed.entities(), held.entities());
    let a = run_on(&mut held, 3_000);
    let b = run_on(&mut absorbed, 3_000);
    assert!(a.iter().any(|k| k.contains("UpdateNodeConditions")), "a0 went unknown: {a:?}");
    assert!(a.iter().any(|k| k.contains("DeletePod")), "a0's pods were evicted: {a:?}");
    assert_eq!(a, b);
}

/// A node's Unknown status decided at 45 s is still true until a heartbeat
/// is observed; after a Lease renewal is observed (no pass since), it is
/// not, and the sender withdraws it. Withdrawn, it leaves nothing in
/// flight and counts as no failure.
#[test]
fn an_unknown_status_is_withdrawn_once_a_renewal_is_observed() {
    let mut engine = Engine::new(ControllerConfig::default(), Timestamp::from_millis(0)).unwrap();
    engine.observe(node("a"));
    engine.observe(Observation::LeaseUpserted { node: "a".into(), renew: Some(Timestamp::from_millis(0)) });
    let mut decided = Vec::new();
    let mut now = 0;
    while now <= 60_000 && decided.is_empty() {
        decided = engine.tick(Timestamp::from_millis(now));
        decided.retain(|a| a.kind.slot().is_some());
        now += 100;
    }
    // The status, then the NoSchedule taint it calls for, both in flight.
    let [status, taint] = <[_; 2]>::try_from(decided).expect("the silent node goes Unknown and is tainted");
    assert!(matches!(status.kind, ActionKind::UpdateNodeConditions { .. }));
    assert_eq!(engine.still_true(Timestamp::from_millis(46_000), &status.kind), Ok(()), "nothing heard since");
    engine.observe(Observation::LeaseUpserted { node: "a".into(), renew: Some(Timestamp::from_millis(46_000)) });
    let why = engine.still_true(Timestamp::from_millis(46_100), &status.kind).expect_err("a renewal was observed");
    assert!(matches!(changed(&why), Changed::HeardFromSinceDecision { node } if node == "a"), "{why}");
    // As the adapter answers a withdrawn node write: the outcome, then the
    // node as it is.
    engine.observe(Observation::WriteFinished { id: status.id, outcome: WriteOutcome::Withdrawn(why) });
    engine.observe(node("a"));
    // The taint patch queued behind it is judged with that node taken in.
    let why =
        engine.still_true(Timestamp::from_millis(46_150), &taint.kind).expect_err("the node is Ready as observed");
    assert!(matches!(changed(&why), Changed::TaintNoLongerCalledFor { node, .. } if node == "a"), "{why}");
    engine.observe(Observation::WriteFinished { id: taint.id, outcome: WriteOutcome::Withdrawn(why) });
    engine.observe(node("a"));
    let actions = engine.tick(Timestamp::from_millis(46_200));
    assert!(actions.iter().all(|a| matches!(a.kind, ActionKind::RecordEvent(_))), "nothing to decide: {actions:?}");
    assert_eq!(engine.writes_in_flight(), 0);
}

/// Ticks at every monitor pass (5 s) from `from` until the engine issues a
/// node's Unknown status; returns the pass's time and the write.
fn until_unknown(engine: &mut Engine, from: i64) -> (Timestamp, nodewarden_engine::Action) {
    let mut at = from;
    while at <= 300 {
        let now = Timestamp::from_secs(at);
        let status = engine.tick(now).into_iter().find(|a| matches!(a.kind, ActionKind::UpdateNodeConditions { .. }));
        if let Some(status) = status {
            return (now, status);
        }
        at += 5;
    }
    panic!("no Unknown status by {at} s");
}

/// A node's Unknown status decided on the startup grace (a node that never
/// posted status, B5; one whose Ready condition was removed, B10) is still
/// true when it is sent, with the monitor grace the longer: node lifecycle
/// took the write into its view, which gave the node a Ready condition,
/// but the grace of a node with one is the next pass's rule, not a reason
/// to take this pass's decision back. Only a heartbeat since withdraws it.
#[test]
fn an_unknown_status_decided_on_the_startup_grace_is_still_true_when_sent() {
    let config = ControllerConfig {
        node_monitor_grace_period: Span::from_secs(90),
        node_startup_grace_period: Span::from_secs(60),
        ..ControllerConfig::default()
    };
    let shortly = |at: Timestamp| at + Span::from_millis(100);

    // Never posted, created 10 s before the start: probe -10 s, overdue
    // once 60 s have passed (at the 55 s pass), 65 s after the probe.
    let mut engine = Engine::new(config.clone(), Timestamp::EPOCH).unwrap();
    engine.observe(Observation::NodeUpserted(NodeSnapshot::new("ghost", Timestamp::from_secs(-10))));
    let (at, status) = until_unknown(&mut engine, 0);
    assert_eq!(at, Timestamp::from_secs(55), "the startup grace decides");
    assert_eq!(engine.still_true(shortly(at), &status.kind), Ok(()), "nothing heard from it since");
    engine.observe(Observation::LeaseUpserted { node: "ghost".into(), renew: Some(shortly(at)) });
    let why = engine.still_true(shortly(shortly(at)), &status.kind).expect_err("a renewal was observed");
    assert!(matches!(changed(&why), Changed::HeardFromSinceDecision { node } if node == "ghost"), "{why}");

    // Ready at 0 s (probe 0 s), its Ready condition removed at 10 s: the
    // startup grace from the same probe, overdue at the 65 s pass.
    let mut engine = Engine::new(config, Timestamp::EPOCH).unwrap();
    engine.observe(node("x"));
    let _ = engine.tick(Timestamp::EPOCH);
    engine.observe(Observation::NodeUpserted(NodeSnapshot::new("x", Timestamp::from_secs(-3600))));
    let (at, status) = until_unknown(&mut engine, 5);
    assert_eq!(at, Timestamp::from_secs(65), "the startup grace decides");
    assert_eq!(engine.still_true(shortly(at), &status.kind), Ok(()), "nothing heard from it since");
}

/// Ticks every 100 ms from `from` until a write `want` picks is issued,
/// answering each write as an API server would (applied to `node`, whose
/// new state is observed); node `b` renews its Lease meanwhile.
fn until_issued(
    engine: &mut Engine,
    node: &mut NodeSnapshot,
    from: i64,
    mut want: impl FnMut(&ActionKind) -> bool,
) -> nodewarden_engine::Action {
    for now in (from..120_000).step_by(100) {
        if now % 10_000 == 0 {
            // Another zone stays healthy, so this one's outage is not
            // every zone's (which would pause all tainting).
            engine.observe(Observation::LeaseUpserted { node: "b".into(), renew: Some(Timestamp::from_millis(now)) });
        }
        for a in engine.tick(Timestamp::from_millis(now)) {
            if want(&a.kind) {
                return a;
            }
            if let ActionKind::UpdateNodeConditions { conditions, .. } = &a.kind {
                for c in conditions {
                    node.conditions.retain(|k| k.kind != c.kind);
                    node.conditions.push(c.clone());
                }
                node.version += 1;
            }
            if let ActionKind::PatchNodeTaints { add, remove, .. } = &a.kind {
                node.taints.retain(|k| !remove.iter().any(|r| r.same_as(k)));
                for x in add {
                    node.taints.retain(|k| !k.same_as(x));
                    node.taints.push(x.clone());
                }
                node.version += 1;
            }
            if a.kind.slot().is_some() {
                engine.observe(Observation::WriteFinished { id: a.id, outcome: WriteOutcome::Done });
                engine.observe(Observation::NodeUpserted(node.clone()));
            }
        }
    }
    panic!("never issued");
}

/// Node `a` in zone-a, whose snapshot the test keeps to answer writes
/// with, and node `b` in zone-b, kept heartbeating by [`until_issued`] so
/// that zone-a's outage is not every zone's.
fn two_zones(engine: &mut Engine) -> NodeSnapshot {
    let Observation::NodeUpserted(mut n) = zoned_node("a", "zone-a", 0) else { unreachable!() };
    n.version = 1;
    engine.observe(Observation::NodeUpserted(n.clone()));
    engine.observe(zoned_node("b", "zone-b", 0));
    n
}

/// A queued node's unreachable taint, decided while its Ready condition
/// read Unknown, is judged at send time by the rule that decided it: the
/// node seen Ready again withdraws it. A snapshot without a Ready
/// condition (one from before node lifecycle's own Unknown status landed,
/// as watch latency delivers) says nothing against it: the taint stands
/// (`tests/scenarios/53-*` with API latency taints at 5 s only so).
#[test]
fn a_noexecute_taint_is_judged_by_the_rule_that_decided_it() {
    let mut engine = Engine::new(ControllerConfig::default(), Timestamp::from_millis(0)).unwrap();
    let mut n = two_zones(&mut engine);
    let adds_unreachable = |k: &ActionKind| matches!(k, ActionKind::PatchNodeTaints { add, .. } if add.iter().any(|t| t.key == nodewarden_model::keys::TAINT_UNREACHABLE && t.effect == nodewarden_model::TaintEffect::NoExecute));
    let taint = until_issued(&mut engine, &mut n, 0, adds_unreachable);
    let at = Timestamp::from_millis(60_000);
    assert_eq!(engine.still_true(at, &taint.kind), Ok(()), "the node reads Unknown");
    let mut stale = n.clone();
    stale.conditions.retain(|c| c.kind != ConditionType::Ready);
    stale.version += 1;
    engine.observe(Observation::NodeUpserted(stale));
    assert_eq!(engine.still_true(at + Span::from_millis(100), &taint.kind), Ok(()), "no Ready condition: no verdict");
    let Observation::NodeUpserted(ready) = zoned_node("a", "zone-a", 60_000) else { unreachable!() };
    let ready = NodeSnapshot { version: n.version + 2, ..ready };
    engine.observe(Observation::NodeUpserted(ready));
    let why = engine.still_true(at + Span::from_millis(200), &taint.kind).expect_err("Ready again");
    assert!(matches!(changed(&why), Changed::TaintNoLongerCalledFor { node, .. } if node == "a"), "{why}");
}

/// A pod's deletion, decided while its node carried `unreachable:NoExecute`,
/// is no longer true once the node is observed without the taint; a pod
/// re-created under the same name is not the pod the deletion was for.
#[test]
fn a_deletion_is_withdrawn_once_the_taint_is_seen_gone_or_the_pod_is_another() {
    let start = |engine: &mut Engine| {
        let mut n = two_zones(engine);
        engine.observe(plain_pod("default/p", "a"));
        // Never heard from again: Unknown at 45 s, tainted, the pod due.
        let deletion = until_issued(engine, &mut n, 0, |k| matches!(k, ActionKind::DeletePod { .. }));
        (n, deletion)
    };
    let mut engine = Engine::new(ControllerConfig::default(), Timestamp::from_millis(0)).unwrap();
    let (mut n, deletion) = start(&mut engine);
    assert_eq!(engine.still_true(Timestamp::from_millis(60_000), &deletion.kind), Ok(()));
    // The node seen without its taint (an operator removed it).
    n.taints.clear();
    n.version += 1;
    engine.observe(Observation::NodeUpserted(n));
    let why = engine.still_true(Timestamp::from_millis(60_100), &deletion.kind).expect_err("the taint is gone");
    assert!(matches!(changed(&why), Changed::NoNoExecuteTaint { node } if node == "a"), "{why}");

    // The same name, another pod.
    let mut again = Engine::new(ControllerConfig::default(), Timestamp::from_millis(0)).unwrap();
    let (_, deletion) = start(&mut again);
    let Observation::PodUpserted(mut other) = plain_pod("default/p", "a") else { unreachable!() };
    other.uid = "uid-new".into();
    other.version = 9;
    again.observe(Observation::PodUpserted(other));
    let why = again.still_true(Timestamp::from_millis(60_100), &deletion.kind).expect_err("another pod");
    assert!(matches!(changed(&why), Changed::PodRecreated { uid } if uid == "uid-new"), "{why}");
}

/// A pod's not-ready mark still waiting when the pod's own deletion went
/// out (a writer sends a deletion ahead of a mark that has not started) is
/// no longer worth a request: the pod, observed terminating, has left its
/// Services' ready endpoints. The rule is the one that decided the mark
/// (`mark_stands`): a terminating pod is never marked, whoever deleted it.
#[test]
fn a_waiting_mark_is_withdrawn_once_the_pods_own_deletion_went_out() {
    let mut engine = Engine::new(ControllerConfig::default(), Timestamp::from_millis(0)).unwrap();
    let mut n = two_zones(&mut engine);
    engine.observe(plain_pod("default/p", "a"));
    // The mark the node's Unknown status brings (judged by what it asks
    // for, whoever holds it).
    let mark = ActionKind::MarkPodNotReady { pod: "default/p".into(), uid: "uid-default/p".into() };
    let deletion = until_issued(&mut engine, &mut n, 0, |k| matches!(k, ActionKind::DeletePod { .. }));
    assert_eq!(engine.still_true(Timestamp::from_millis(50_000), &mark), Ok(()), "the deletion not sent yet");
    // The deletion went out and was answered with the pod terminating.
    engine.observe(Observation::WriteFinished { id: deletion.id, outcome: WriteOutcome::Done });
    let Observation::PodUpserted(mut p) = plain_pod("default/p", "a") else { unreachable!() };
    p.terminating = true;
    p.version = 2;
    engine.observe(Observation::PodUpserted(p));
    let why = engine.still_true(Timestamp::from_millis(50_100), &mark).expect_err("terminating");
    assert_eq!(changed(&why), &Changed::PodTerminating, "{why}");
}

/// Found by `rescheduler_steps`: a rescheduler eviction waiting behind an
/// earlier write to the same pod (a previous life's, across a restart)
/// went out after the engine had seen the pod deleted, and reached the API
/// server for a uid it had already removed. It is withdrawn now, as a
/// node-lifecycle deletion is.
#[test]
fn an_addon_eviction_is_withdrawn_once_the_pod_is_seen_gone_or_moved() {
    use nodewarden_engine::{AddonEviction, PreparationTier};
    use nodewarden_model::Resources;
    let mut engine =
        Engine::new(ControllerConfig { enable_rescheduler: true, ..Default::default() }, Timestamp::from_millis(0))
            .unwrap();
    engine.observe(node("a"));
    engine.observe(plain_pod("default/p", "a"));
    let _ = engine.tick(Timestamp::from_millis(0));
    let eviction = ActionKind::EvictForAddon {
        pod: "default/p".into(),
        uid: "uid-default/p".into(),
        grace: None,
        why: Box::new(AddonEviction {
            pod: "default/p".into(),
            node: "a".into(),
            addon: "kube-system/dns".into(),
            unschedulable_since: Timestamp::from_millis(0),
            needed: Resources::default(),
            free_before: Resources::default(),
            tier: PreparationTier::Allowed,
            victims: vec!["default/p".into()],
            freed: Resources::default(),
            budgets: vec![],
            pod_grace: Span::from_secs(30),
            grace: Span::from_secs(30),
            decided_at: Timestamp::from_millis(0),
        }),
    };
    assert_eq!(engine.still_true(Timestamp::from_millis(100), &eviction), Ok(()));
    let Observation::PodUpserted(mut terminating) = plain_pod("default/p", "a") else { unreachable!() };
    terminating.terminating = true;
    terminating.version = 2;
    engine.observe(Observation::PodUpserted(terminating));
    let why = engine.still_true(Timestamp::from_millis(200), &eviction).expect_err("terminating");
    assert_eq!(changed(&why), &Changed::PodAlreadyTerminating, "{why}");
    engine.observe(Observation::PodDeleted { key: "default/p".into() });
    let why = engine.still_true(Timestamp::from_millis(300), &eviction).expect_err("the pod is gone");
    assert_eq!(changed(&why), &Changed::PodGone, "{why}");
}

/// A warm standby keeps the probe times it observed: a node that stops
/// heartbeating 20 s before the takeover is marked Unknown at its own
/// grace (40 s after its last Lease renewal, at the next pass after),
/// where an engine started cold at the takeover gives it a grace from its
/// first pass. The standby decides nothing until it takes over.
#[test]
fn a_warm_standby_judges_each_node_by_its_own_last_heartbeat() {
    // Renews every 10 s until 10 s, then silent; another node renews on.
    let renewals = |until: i64| {
        (0..=until).step_by(10_000).flat_map(|at| {
            let mut out =
                vec![(at, Observation::LeaseUpserted { node: "b".into(), renew: Some(Timestamp::from_millis(at)) })];
            if at <= 10_000 {
                out.push((
                    at,
                    Observation::LeaseUpserted { node: "a".into(), renew: Some(Timestamp::from_millis(at)) },
                ));
            }
            out
        })
    };
    let unknown_at = |engine: &mut Engine, from: i64| {
        for now in (from..=120_000).step_by(100) {
            if now % 10_000 == 0 {
                engine
                    .observe(Observation::LeaseUpserted { node: "b".into(), renew: Some(Timestamp::from_millis(now)) });
            }
            let written = engine
                .tick(Timestamp::from_millis(now))
                .into_iter()
                .any(|a| matches!(&a.kind, ActionKind::UpdateNodeConditions { node, .. } if node == "a"));
            if written {
                return Some(now);
            }
        }
        None
    };

    let mut warm = Engine::new(ControllerConfig::default(), Timestamp::from_millis(0)).unwrap();
    warm.stand_by();
    warm.observe(zoned_node("a", "zone-a", 0));
    warm.observe(zoned_node("b", "zone-b", 0));
    let mut events = renewals(30_000).peekable();
    for now in (0..30_000).step_by(100) {
        while let Some((_, obs)) = events.next_if(|(at, _)| *at <= now) {
            warm.observe(obs);
        }
        assert!(warm.tick(Timestamp::from_millis(now)).is_empty(), "a standby decides nothing (at {now} ms)");
    }
    assert!(warm.standing_by());
    warm.take_over(Timestamp::from_millis(30_000));
    assert!(!warm.standing_by());
    // Last renewal at 10 s, grace 40 s, strictly after: the 55 s pass (passes
    // from the takeover at 30 s: 30, 35, ..., 50, 55).
    assert_eq!(unknown_at(&mut warm, 30_000), Some(55_000));

    let mut cold = Engine::new(ControllerConfig::default(), Timestamp::from_millis(30_000)).unwrap();
    cold.observe(zoned_node("a", "zone-a", 0));
    cold.observe(zoned_node("b", "zone-b", 0));
    cold.observe(Observation::LeaseUpserted { node: "a".into(), renew: Some(Timestamp::from_millis(10_000)) });
    // First seen at 30 s: a full grace from then, the 75 s pass.
    assert_eq!(unknown_at(&mut cold, 30_000), Some(75_000));
}

/// A zone outage decides a not-ready mark for every pod of its nodes at
/// once; a client rate sends them over minutes. The marks wait as
/// decisions (the pod's entity in line and a flag on the pod), not as
/// built writes: a tick issues none, a sender pulls what it has room for,
/// oldest decision first, each with its Event.
#[test]
fn marks_wait_as_decisions_and_are_built_when_pulled() {
    let mut engine = Engine::new(ControllerConfig::default(), Timestamp::from_millis(0)).unwrap();
    let mut n = two_zones(&mut engine);
    for i in 0..200 {
        engine.observe(plain_pod(&format!("default/p{i:03}"), "a"));
    }
    let status = until_issued(&mut engine, &mut n, 0, |k| matches!(k, ActionKind::UpdateNodeConditions { .. }));
    let at = Timestamp::from_millis(45_100);
    let ticked = engine.tick(at);
    assert!(!ticked.iter().any(|a| matches!(a.kind, ActionKind::MarkPodNotReady { .. })), "no mark is built by a tick");
    assert_eq!(engine.writes_wanted(), 200);
    // What the backlog costs while it waits: its place in line, 8 bytes a
    // pod (a built mark was a write of several hundred).
    assert!(engine.writes_wanted_bytes() <= 200 * 16, "{} bytes for 200 marks", engine.writes_wanted_bytes());
    assert!(engine.writes_in_flight() <= 3, "only the node's own writes are built: {}", engine.writes_in_flight());

    let pulled = engine.pull(at, 5);
    let marks: Vec<String> = pulled
        .iter()
        .filter_map(|a| match &a.kind {
            ActionKind::MarkPodNotReady { pod, .. } => Some(pod.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(marks, ["default/p000", "default/p001", "default/p002", "default/p003", "default/p004"]);
    let events = pulled.iter().filter(|a| matches!(&a.kind, ActionKind::RecordEvent(e) if e.reason == "NodeNotReady"));
    assert_eq!(events.count(), 5, "each mark with its Event");
    assert_eq!(engine.writes_wanted(), 195);
    // A built mark is a write in flight, judged at send time as ever.
    assert_eq!(engine.still_true(at, &pulled[0].kind), Ok(()));
    let _ = status;
}

/// A mark decided and not yet built when the node is seen Ready again is
/// never built: nothing to withdraw, no request spent.
#[test]
fn a_mark_that_stopped_being_true_before_its_turn_is_never_built() {
    let mut engine = Engine::new(ControllerConfig::default(), Timestamp::from_millis(0)).unwrap();
    let mut n = two_zones(&mut engine);
    for i in 0..10 {
        engine.observe(plain_pod(&format!("default/p{i}"), "a"));
    }
    until_issued(&mut engine, &mut n, 0, |k| matches!(k, ActionKind::UpdateNodeConditions { .. }));
    let at = Timestamp::from_millis(45_100);
    let first = engine.pull(at, 2);
    assert_eq!(first.iter().filter(|a| matches!(a.kind, ActionKind::MarkPodNotReady { .. })).count(), 2);
    let Observation::NodeUpserted(ready) = zoned_node("a", "zone-a", 45_100) else { unreachable!() };
    engine.observe(Observation::NodeUpserted(NodeSnapshot { version: n.version + 1, ..ready }));
    let later = engine.pull(at + Span::from_millis(100), usize::MAX);
    assert!(!later.iter().any(|a| a.kind.slot().is_some()), "nothing built for a Ready node: {later:?}");
    assert_eq!(engine.writes_wanted(), 0);
}

/// A pod whose deletion comes due while its mark still waits gets the mark
/// built just ahead of its `DisruptionTarget` condition, so a sender
/// carries both in one status patch (the writer joins consecutive status
/// writes to one pod), then the deletion.
#[test]
fn a_waiting_mark_goes_with_the_pods_deletion() {
    let mut engine = Engine::new(ControllerConfig::default(), Timestamp::from_millis(0)).unwrap();
    let mut n = two_zones(&mut engine);
    engine.observe(plain_pod("default/p", "a"));
    let mut pod_writes = Vec::new();
    // Answer node writes as `until_issued` does, and never pull: the
    // mark waits until the deletion takes it along.
    let _ = until_issued(&mut engine, &mut n, 0, |k| {
        if let Some((nodewarden_engine::ObjectRef::Pod(_), _)) = k.slot() {
            pod_writes.push(k.name());
        }
        matches!(k, ActionKind::DeletePod { .. })
    });
    assert_eq!(pod_writes, ["mark_pod_not_ready", "add_pod_disruption_target", "delete_pod"]);
    // Its place in line is passed over when its turn comes: built once.
    let later = engine.pull(Timestamp::from_millis(120_000), usize::MAX);
    assert!(!later.iter().any(|a| matches!(a.kind, ActionKind::MarkPodNotReady { .. })), "{later:?}");
    assert_eq!(engine.writes_wanted(), 0);
}

/// A deletion withdrawn unsent after its pod's `DisruptionTarget`
/// condition landed (the node came back while the deletion waited for its
/// turn) leaves a running pod whose condition says it is about to go: the
/// engine takes the condition back. One whose condition never landed
/// (withdrawn with it) has nothing to take back.
#[test]
fn a_deletion_called_off_after_its_condition_landed_takes_the_condition_back() {
    let heal = |engine: &mut Engine, n: &mut NodeSnapshot| {
        n.taints.clear();
        n.version += 1;
        engine.observe(Observation::NodeUpserted(n.clone()));
    };
    let taken_back = |actions: &[nodewarden_engine::Action]| {
        actions
            .iter()
            .filter(|a| matches!(&a.kind, ActionKind::ClearPodDisruptionTarget { pod, .. } if pod == "default/p"))
            .count()
    };
    // The condition landed (`until_issued` answers every write at once),
    // the deletion after it did not go.
    let mut engine = Engine::new(ControllerConfig::default(), Timestamp::from_millis(0)).unwrap();
    let mut n = two_zones(&mut engine);
    engine.observe(plain_pod("default/p", "a"));
    let deletion = until_issued(&mut engine, &mut n, 0, |k| matches!(k, ActionKind::DeletePod { .. }));
    heal(&mut engine, &mut n);
    let why = engine.still_true(Timestamp::from_millis(60_000), &deletion.kind).expect_err("the taint is gone");
    engine.observe(Observation::WriteFinished { id: deletion.id, outcome: WriteOutcome::Withdrawn(why) });
    let actions = engine.tick(Timestamp::from_millis(60_100));
    assert_eq!(taken_back(&actions), 1, "{actions:?}");
    let clear = actions.iter().find(|a| matches!(a.kind, ActionKind::ClearPodDisruptionTarget { .. })).unwrap();
    assert_eq!(engine.still_true(Timestamp::from_millis(60_200), &clear.kind), Ok(()), "still called off");

    // Both withdrawn unsent: the condition never landed.
    let mut engine = Engine::new(ControllerConfig::default(), Timestamp::from_millis(0)).unwrap();
    let mut n = two_zones(&mut engine);
    engine.observe(plain_pod("default/p", "a"));
    let target = until_issued(&mut engine, &mut n, 0, |k| matches!(k, ActionKind::AddPodDisruptionTarget { .. }));
    heal(&mut engine, &mut n);
    let why = engine.still_true(Timestamp::from_millis(60_000), &target.kind).expect_err("called off");
    engine.observe(Observation::WriteFinished { id: target.id, outcome: WriteOutcome::Withdrawn(why.clone()) });
    // The deletion the same pass issued right after it (ids run in order).
    let deletion = nodewarden_engine::ActionId(target.id.0 + 1);
    engine.observe(Observation::WriteFinished { id: deletion, outcome: WriteOutcome::Withdrawn(why) });
    let actions = engine.tick(Timestamp::from_millis(60_100));
    assert_eq!(taken_back(&actions), 0, "{actions:?}");
}
