//! The critical-addon rescheduler, driven through the engine's facade on a
//! small cluster the test applies the engine's writes to (taint patches,
//! evictions that the "API" may refuse), one rule per test.

use std::collections::BTreeMap;

use nodewarden_engine::{
    Action, ActionKind, AddonEviction, BudgetSnapshot, Engine, EventType, NodeSnapshot, ObjectRef, Observation,
    PodSnapshot, PreparationTier, WriteOutcome, WriteSlot,
};
use nodewarden_model::scheduling::{CRITICAL_ADDONS_ONLY_TAINT, CRITICAL_ADDONS_ONLY_VALUE};
use nodewarden_model::{
    ConditionStatus, ConditionType, ControllerConfig, LabelSelector, NodeCondition, PodScheduling, Resources, Span,
    Taint, TaintEffect, Timestamp, Toleration, TolerationOperator, keys,
};

fn config() -> ControllerConfig {
    ControllerConfig { enable_rescheduler: true, node_lifecycle: false, ..ControllerConfig::default() }
}

fn ours() -> Taint {
    Taint {
        key: CRITICAL_ADDONS_ONLY_TAINT.into(),
        value: CRITICAL_ADDONS_ONLY_VALUE.into(),
        effect: TaintEffect::NoSchedule,
        time_added: None,
    }
}

fn node(name: &str, cpu: u64) -> NodeSnapshot {
    let mut n = NodeSnapshot::new(name, Timestamp::from_secs(-3600)).in_zone("z");
    n.conditions = vec![NodeCondition::posted(
        ConditionType::Ready,
        ConditionStatus::True,
        "",
        Timestamp::from_secs(0),
        Timestamp::from_secs(-3600),
    )];
    n.allocatable = Some(Resources { cpu_millis: cpu, memory_bytes: 1 << 40, pods: 110 });
    n
}

/// A ReplicaSet pod bound to `node`, with `cpu` millicores and a grace of
/// `grace` seconds, labelled `app=<app>`.
fn pod(key: &str, node: &str, cpu: u64, grace: i64, app: &str) -> PodSnapshot {
    let mut p = PodSnapshot::new(key, format!("uid-{key}"), Some(node));
    p.scheduling = Some(Box::new(PodScheduling {
        requests: Resources::pod(cpu, 0),
        controller_kind: Some("ReplicaSet".into()),
        termination_grace: Span::from_secs(grace),
        labels: BTreeMap::from([("app".to_string(), app.to_string())]),
        ..PodScheduling::default()
    }));
    p
}

/// A critical addon waiting since `since`, needing `cpu`, tolerating
/// CriticalAddonsOnly (as addons do).
fn addon(key: &str, cpu: u64, since: i64) -> PodSnapshot {
    PodSnapshot {
        version: 0,
        node_lost: false,
        key: key.into(),
        uid: format!("uid-{key}"),
        node: None,
        daemonset: false,
        ready: None,
        terminating: false,
        tolerations: vec![Toleration {
            key: CRITICAL_ADDONS_ONLY_TAINT.into(),
            operator: TolerationOperator::Exists,
            ..Toleration::default()
        }],
        scheduling: Some(Box::new(PodScheduling {
            requests: Resources::pod(cpu, 0),
            critical_annotation: true,
            controller_kind: Some("ReplicaSet".into()),
            unschedulable_since: Some(Timestamp::from_secs(since)),
            ..PodScheduling::default()
        })),
    }
}

fn budget(key: &str, app: &str, allowed: u32) -> Observation {
    Observation::BudgetUpserted(BudgetSnapshot {
        key: key.into(),
        selector: LabelSelector {
            match_labels: BTreeMap::from([("app".to_string(), app.to_string())]),
            match_expressions: vec![],
        },
        disruptions_allowed: allowed,
    })
}

/// The cluster the engine's writes land on.
struct Cluster {
    engine: Engine,
    nodes: BTreeMap<String, NodeSnapshot>,
    pods: BTreeMap<String, PodSnapshot>,
    /// Evictions still to refuse, per pod.
    refuse: BTreeMap<String, u32>,
    /// Every action, with its time in seconds.
    log: Vec<(i64, ActionKind)>,
    now: i64,
}

impl Cluster {
    fn new(config: ControllerConfig) -> Cluster {
        Cluster {
            engine: Engine::new(config, Timestamp::from_secs(0)).unwrap(),
            nodes: BTreeMap::new(),
            pods: BTreeMap::new(),
            refuse: BTreeMap::new(),
            log: Vec::new(),
            now: 0,
        }
    }

    fn put_node(&mut self, n: NodeSnapshot) {
        self.nodes.insert(n.name.clone(), n.clone());
        self.engine.observe(Observation::NodeUpserted(n));
    }

    fn put_pod(&mut self, p: PodSnapshot) {
        self.pods.insert(p.key.clone(), p.clone());
        self.engine.observe(Observation::PodUpserted(p));
    }

    fn bind(&mut self, key: &str, node: &str) {
        let mut p = self.pods[key].clone();
        p.node = Some(node.into());
        if let Some(s) = &mut p.scheduling {
            s.unschedulable_since = None;
        }
        self.put_pod(p);
    }

    /// Ticks every second up to `until` (seconds), applying each action.
    fn run_to(&mut self, until: i64) {
        while self.now <= until {
            let actions = self.engine.tick(Timestamp::from_secs(self.now));
            for a in actions {
                self.apply(a);
            }
            self.now += 1;
        }
    }

    fn apply(&mut self, a: Action) {
        self.log.push((self.now, a.kind.clone()));
        let done = |id| Observation::WriteFinished { id, outcome: WriteOutcome::Done };
        match &a.kind {
            ActionKind::PatchNodeTaints { node, add, remove, .. } => {
                let n = self.nodes.get_mut(node).unwrap();
                n.taints.retain(|t| !remove.iter().chain(add).any(|r| r.same_as(t)));
                n.taints.extend(add.iter().cloned());
                let n = n.clone();
                self.engine.observe(done(a.id));
                self.engine.observe(Observation::NodeUpserted(n));
            }
            ActionKind::EvictForAddon { pod, .. } => {
                let left = self.refuse.entry(pod.clone()).or_default();
                if *left > 0 {
                    *left -= 1;
                    self.engine.observe(Observation::WriteFinished {
                        id: a.id,
                        outcome: WriteOutcome::Failed("429 budget".into()),
                    });
                    self.engine.observe(Observation::PodUpserted(self.pods[pod].clone()));
                } else {
                    self.pods.remove(pod);
                    self.engine.observe(done(a.id));
                    self.engine.observe(Observation::PodDeleted { key: pod.clone() });
                }
            }
            ActionKind::RecordEvent(_) => {}
            _ => self.engine.observe(done(a.id)),
        }
    }

    fn evictions(&self) -> Vec<(i64, String, Option<Span>, AddonEviction)> {
        self.log
            .iter()
            .filter_map(|(at, k)| match k {
                ActionKind::EvictForAddon { pod, grace, why, .. } => Some((*at, pod.clone(), *grace, (**why).clone())),
                _ => None,
            })
            .collect()
    }

    /// (time, node, added) of every reservation taint patch.
    fn reservations(&self) -> Vec<(i64, String, bool)> {
        self.log
            .iter()
            .filter_map(|(at, k)| match k {
                ActionKind::PatchNodeTaints { node, add, remove, slot: WriteSlot::CriticalAddonsTaint } => {
                    Some((*at, node.clone(), !add.is_empty() && remove.is_empty()))
                }
                _ => None,
            })
            .collect()
    }

    fn events(&self, reason: &str) -> Vec<(i64, String, EventType)> {
        self.log
            .iter()
            .filter_map(|(at, k)| match k {
                ActionKind::RecordEvent(e) if e.reason == reason => Some((*at, e.object.to_string(), e.kind)),
                _ => None,
            })
            .collect()
    }

    fn carries_ours(&self, node: &str) -> bool {
        self.nodes[node]
            .taints
            .iter()
            .any(|t| t.key == CRITICAL_ADDONS_ONLY_TAINT && t.value == CRITICAL_ADDONS_ONLY_VALUE)
    }
}

/// Two full nodes: `a` with a slow pod (grace 30 s), `b` with a quick one
/// under a budget allowing `allowed`.
fn two_full_nodes(allowed: u32) -> Cluster {
    let mut c = Cluster::new(config());
    c.put_node(node("a", 1000));
    c.put_node(node("b", 1000));
    c.put_pod(pod("default/slow", "a", 1000, 30, "slow"));
    c.put_pod(pod("default/quick", "b", 1000, 5, "quick"));
    c.engine.observe(budget("default/quick", "quick", allowed));
    c.put_pod(addon("kube-system/dns", 500, 0));
    c
}

#[test]
fn tier_1_is_chosen_when_a_quick_allowed_eviction_makes_room() {
    let mut c = two_full_nodes(1);
    c.run_to(10);
    let ev = c.evictions();
    assert_eq!(ev.len(), 1, "{ev:?}");
    let (at, pod, grace, why) = &ev[0];
    assert_eq!((*at, pod.as_str(), *grace), (10, "default/quick", None), "grace 5 s is kept");
    assert_eq!(why.tier, PreparationTier::AllowedAndQuick);
    assert_eq!(why.node, "b");
    assert_eq!(why.addon, "kube-system/dns");
    assert_eq!(why.unschedulable_since, Timestamp::from_secs(0));
    assert_eq!(why.victims, vec!["default/quick".to_string()]);
    assert_eq!(why.budgets, vec![("default/quick".to_string(), 1)]);
    assert_eq!(why.freed, Resources::pod(1000, 0));
    assert_eq!(why.free_before.cpu_millis, 0);
    assert_eq!(
        (why.pod_grace, why.grace, why.decided_at),
        (Span::from_secs(5), Span::from_secs(5), Timestamp::from_secs(10))
    );
    assert_eq!(c.reservations(), vec![(10, "b".to_string(), true)]);
    assert!(c.carries_ours("b") && !c.carries_ours("a"));
    assert_eq!(c.events("CriticalAddonPreparing").len(), 2, "on the node and on the addon");
}

#[test]
fn tier_2_is_chosen_when_no_quick_eviction_is_allowed_and_its_grace_is_shortened() {
    let mut c = two_full_nodes(0);
    c.run_to(10);
    let ev = c.evictions();
    assert_eq!(ev.len(), 1, "{ev:?}");
    let (_, pod, grace, why) = &ev[0];
    assert_eq!(pod, "default/slow", "the budget of the quick pod allows nothing");
    assert_eq!(why.tier, PreparationTier::Allowed);
    assert_eq!(*grace, Some(Span::from_secs(10)), "30 s shortened to the rescheduler's 10 s");
    assert_eq!((why.pod_grace, why.grace), (Span::from_secs(30), Span::from_secs(10)));
    assert!(why.one_line().contains("grace shortened from 30s to 10s"), "{}", why.one_line());
}

#[test]
fn tier_3_is_chosen_when_every_way_needs_a_budget_and_the_refusal_is_retried_then_the_next_node_tried() {
    let mut c = Cluster::new(config());
    c.put_node(node("a", 1000));
    c.put_node(node("b", 1000));
    c.put_pod(pod("default/a1", "a", 1000, 5, "web"));
    c.put_pod(pod("default/b1", "b", 1000, 5, "web"));
    c.engine.observe(budget("default/web", "web", 0));
    c.put_pod(addon("kube-system/dns", 500, 0));
    c.refuse.insert("default/a1".into(), 100);
    c.run_to(60);
    let ev = c.evictions();
    let tries: Vec<(i64, &str)> = ev.iter().map(|(at, p, _, _)| (*at, p.as_str())).collect();
    // a first (name order): tried at 10, 20, 30 (3 refusals), given up at
    // 40, where b is prepared and its pod evicted.
    assert_eq!(tries, vec![(10, "default/a1"), (20, "default/a1"), (30, "default/a1"), (40, "default/b1")], "{ev:?}");
    assert!(ev.iter().all(|(_, _, _, why)| why.tier == PreparationTier::Any));
    assert_eq!(
        c.reservations(),
        vec![(10, "a".to_string(), true), (40, "a".to_string(), false), (40, "b".to_string(), true)]
    );
    assert_eq!(c.events("FailedEviction").len(), 2, "announced at each retry");
}

#[test]
fn budgets_are_respected_across_the_pods_chosen() {
    let mut c = Cluster::new(config());
    c.put_node(node("a", 1000));
    c.put_node(node("b", 1000));
    // a: two quick pods under one budget allowing one disruption; both
    // must go. b: one slow pod without budget.
    c.put_pod(pod("default/a1", "a", 500, 5, "web"));
    c.put_pod(pod("default/a2", "a", 500, 5, "web"));
    c.put_pod(pod("default/b1", "b", 1000, 30, "batch"));
    c.engine.observe(budget("default/web", "web", 1));
    c.put_pod(addon("kube-system/dns", 1000, 0));
    c.run_to(10);
    let ev = c.evictions();
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0].1, "default/b1", "a would need two disruptions of a budget that allows one");
    assert_eq!(ev[0].3.tier, PreparationTier::Allowed);
}

#[test]
fn the_addon_waits_out_the_unschedulable_grace() {
    let mut c = two_full_nodes(1);
    let mut late = addon("kube-system/dns", 500, 25);
    late.uid = "uid-late".into();
    c.put_pod(late);
    c.run_to(30);
    assert!(c.evictions().is_empty(), "25 s + 10 s grace: not before 35 s");
    c.run_to(40);
    assert_eq!(c.evictions().first().map(|e| e.0), Some(40));
}

#[test]
fn the_reservation_is_released_when_the_addon_lands_elsewhere() {
    let mut c = two_full_nodes(1);
    c.put_node(node("c", 100));
    c.run_to(12);
    assert!(c.carries_ours("b"));
    // Room appeared elsewhere and the scheduler used it.
    c.bind("kube-system/dns", "c");
    c.run_to(20);
    assert!(!c.carries_ours("b"));
    assert_eq!(c.reservations().last(), Some(&(20, "b".to_string(), false)));
    let released = c.events("CriticalAddonReservationReleased");
    assert_eq!(released, vec![(20, "b".to_string(), EventType::Normal)]);
}

#[test]
fn the_reservation_is_released_when_the_addon_is_bound_there_and_when_idle() {
    let mut c = two_full_nodes(1);
    c.run_to(12);
    c.bind("kube-system/dns", "b");
    c.run_to(20);
    assert!(!c.carries_ours("b"));
    // A reservation nobody waits for (left by a previous run) goes at the
    // first pass; someone else's CriticalAddonsOnly taint stays.
    let mut c = Cluster::new(config());
    let mut stale = node("a", 1000);
    stale.taints.push(ours());
    let mut foreign = node("b", 1000);
    foreign.taints.push(Taint { value: "true".into(), ..ours() });
    c.put_node(stale);
    c.put_node(foreign);
    c.run_to(0);
    assert_eq!(c.reservations(), vec![(0, "a".to_string(), false)]);
    assert!(c.nodes["b"].taints.iter().any(|t| t.key == CRITICAL_ADDONS_ONLY_TAINT));
}

#[test]
fn a_restarted_controller_adopts_its_reservation_while_an_addon_needs_it() {
    let mut c = two_full_nodes(1);
    // Waiting since long before this controller started.
    c.put_pod(addon("kube-system/dns", 500, -100));
    let mut b = node("b", 1000);
    b.taints.push(ours());
    c.put_node(b);
    c.run_to(30);
    assert!(c.reservations().is_empty(), "kept, not re-added: {:?}", c.reservations());
    assert!(c.evictions().is_empty(), "adopted with its victims already gone");
    assert_eq!(c.events("CriticalAddonReservationAdopted").len(), 1);
}

#[test]
fn a_prepared_node_that_stops_being_suitable_is_released_and_another_chosen() {
    let mut c = two_full_nodes(1);
    c.refuse.insert("default/quick".into(), 1);
    c.run_to(12);
    assert!(c.carries_ours("b"));
    let mut b = c.nodes["b"].clone();
    b.unschedulable = true;
    c.put_node(b);
    c.run_to(20);
    assert!(!c.carries_ours("b"));
    assert!(c.carries_ours("a"), "the next choice, at the same pass");
}

#[test]
fn a_prepared_node_is_released_after_the_pod_scheduled_timeout_and_reconsidered() {
    let cfg = ControllerConfig { rescheduler_pod_scheduled_timeout: Span::from_secs(60), ..config() };
    let mut c = Cluster::new(cfg);
    c.put_node(node("a", 1000));
    c.put_pod(pod("default/p", "a", 1000, 5, "web"));
    c.put_pod(addon("kube-system/dns", 500, 0));
    c.run_to(80);
    assert_eq!(
        c.reservations(),
        vec![(10, "a".to_string(), true), (70, "a".to_string(), false), (70, "a".to_string(), true)]
    );
}

#[test]
fn nothing_is_done_while_every_zone_is_down() {
    // Node lifecycle on: zone z's only counted node is not Ready, so every
    // zone is fully disrupted; the Ready node is excluded from disruption.
    let cfg = ControllerConfig { node_lifecycle: true, ..config() };
    let mut c = Cluster::new(cfg);
    let mut down = node("down", 1000);
    down.conditions[0].status = ConditionStatus::False;
    c.put_node(down);
    let mut spare = node("spare", 1000);
    spare.labels.insert(keys::LABEL_EXCLUDE_DISRUPTION.into(), String::new());
    c.put_node(spare);
    c.put_pod(pod("default/p", "spare", 1000, 5, "web"));
    c.put_pod(pod("default/q", "down", 1000, 5, "web"));
    c.put_pod(addon("kube-system/dns", 500, 0));
    c.run_to(30);
    assert!(c.engine.all_zones_down());
    assert!(c.evictions().is_empty() && c.reservations().is_empty(), "{:?}", c.log);
    // The zone comes back: the rescheduler acts at its next pass.
    let mut up = c.nodes["down"].clone();
    up.conditions[0].status = ConditionStatus::True;
    up.conditions[0].last_heartbeat = Timestamp::from_secs(31);
    c.put_node(up);
    c.run_to(40);
    assert!(!c.engine.all_zones_down());
    assert_eq!(c.reservations().len(), 1, "{:?}", c.log);
    assert_eq!(c.reservations()[0].0, 40);
}

#[test]
fn an_addon_that_fits_nowhere_is_reported_once_and_nothing_is_done() {
    let mut c = Cluster::new(config());
    c.put_node(node("a", 1000));
    // Only pods that are never evicted: another critical addon, a
    // DaemonSet pod, a mirror pod, a terminating pod.
    let mut critical = pod("kube-system/metrics", "a", 250, 5, "m");
    critical.scheduling.as_mut().unwrap().priority_class = Some("system-cluster-critical".into());
    let mut ds = pod("default/ds", "a", 250, 5, "ds");
    ds.daemonset = true;
    let mut mirror = pod("default/static", "a", 250, 5, "s");
    mirror.scheduling.as_mut().unwrap().mirror = true;
    let mut leaving = pod("default/leaving", "a", 250, 5, "l");
    leaving.terminating = true;
    for p in [critical, ds, mirror, leaving] {
        c.put_pod(p);
    }
    c.put_pod(addon("kube-system/dns", 500, 0));
    c.run_to(40);
    assert!(c.evictions().is_empty() && c.reservations().is_empty());
    assert_eq!(c.events("CriticalAddonNoFit"), vec![(10, "kube-system/dns".to_string(), EventType::Warning)]);
}

#[test]
fn an_addon_that_does_not_tolerate_the_reservation_gets_room_but_no_taint() {
    let mut c = two_full_nodes(1);
    let mut intolerant = addon("kube-system/dns", 500, 0);
    intolerant.tolerations.clear();
    c.put_pod(intolerant);
    c.run_to(10);
    assert_eq!(c.evictions().len(), 1);
    assert!(c.reservations().is_empty());
    assert_eq!(c.events("CriticalAddonNotReserved"), vec![(10, "kube-system/dns".to_string(), EventType::Warning)]);
}

#[test]
fn placement_and_taints_limit_the_candidates() {
    let mut c = two_full_nodes(1);
    // b (the tier-1 node) gets a taint the addon does not tolerate.
    let mut b = node("b", 1000);
    b.taints.push(Taint::new("example.com/gpu", TaintEffect::NoSchedule));
    c.put_node(b);
    c.run_to(10);
    assert_eq!(c.evictions()[0].3.node, "a");
    let mut c = two_full_nodes(1);
    let mut picky = addon("kube-system/dns", 500, 0);
    picky.scheduling.as_mut().unwrap().placement.node_selector.insert("pool".into(), "system".into());
    c.put_pod(picky);
    let mut a = node("a", 1000);
    a.labels.insert("pool".into(), "system".into());
    c.put_node(a);
    c.run_to(10);
    assert_eq!(c.evictions()[0].3.node, "a", "only a matches the node selector");
}

#[test]
fn the_same_cluster_given_in_any_order_gets_the_same_decisions() {
    let run = |reverse: bool| {
        let mut c = Cluster::new(config());
        let mut nodes: Vec<NodeSnapshot> = (0..6).map(|i| node(&format!("n{i}"), 1000)).collect();
        let mut pods: Vec<PodSnapshot> = (0..12)
            .map(|i| {
                pod(&format!("default/p{i:02}"), &format!("n{}", i % 6), 500, if i % 3 == 0 { 5 } else { 30 }, "web")
            })
            .collect();
        if reverse {
            nodes.reverse();
            pods.reverse();
        }
        nodes.into_iter().for_each(|n| c.put_node(n));
        pods.into_iter().for_each(|p| c.put_pod(p));
        c.put_pod(addon("kube-system/dns", 700, 0));
        c.put_pod(addon("kube-system/proxy", 200, 0));
        c.run_to(60);
        c.log.iter().map(|(at, k)| format!("{at} {k:?}")).collect::<Vec<_>>()
    };
    let forward = run(false);
    assert!(forward.iter().any(|l| l.contains("EvictForAddon")), "{forward:#?}");
    assert_eq!(forward, run(true));
}

#[test]
fn with_the_flag_off_nothing_happens() {
    let mut c = two_full_nodes(1);
    let mut off = Cluster::new(ControllerConfig { enable_rescheduler: false, ..config() });
    std::mem::swap(&mut c.engine, &mut off.engine);
    // `c` keeps its cluster, now in front of an engine with the flag off.
    for n in c.nodes.values() {
        c.engine.observe(Observation::NodeUpserted(n.clone()));
    }
    for p in c.pods.values() {
        c.engine.observe(Observation::PodUpserted(p.clone()));
    }
    c.run_to(120);
    assert!(c.log.is_empty(), "{:?}", c.log);
}

#[test]
fn every_eviction_names_the_addon_node_tier_and_victims() {
    let mut c = two_full_nodes(1);
    c.run_to(10);
    for (_, pod, _, why) in c.evictions() {
        assert_eq!(why.pod, pod);
        assert!(why.victims.contains(&pod));
        let text = why.render();
        for needle in ["kube-system/dns", "tier", "node b", "budget"] {
            assert!(text.contains(needle), "{needle} missing from {text}");
        }
    }
    let preparing: Vec<ObjectRef> = c
        .log
        .iter()
        .filter_map(|(_, k)| match k {
            ActionKind::RecordEvent(e) if e.reason == "CriticalAddonPreparing" => Some(e.object.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(preparing, vec![ObjectRef::Node("b".into()), ObjectRef::Pod("kube-system/dns".into())]);
}
