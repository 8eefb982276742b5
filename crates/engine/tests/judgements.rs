//! A shadow's judgements: what the engine concludes whether or not it
//! writes, when another controller (kube-controller-manager beside a
//! `--dry-run` replica) got there first.

use nodewarden_engine::{Engine, Judged, Judgement, NodeSnapshot, Observation, PodSnapshot};
use nodewarden_model::{
    ConditionStatus, ConditionType, ControllerConfig, NodeCondition, Span, Taint, TaintEffect, Timestamp, keys,
};

fn at(secs: i64) -> Timestamp {
    Timestamp::from_secs(secs)
}

/// Node `name` in zone `z`, Ready `status` with its last heartbeat at
/// `beat` s, changed at `changed` s, carrying `taints`.
fn node(name: &str, status: ConditionStatus, beat: i64, changed: i64, taints: Vec<Taint>) -> Observation {
    let mut n = NodeSnapshot::new(name, at(-3600)).in_zone("z").with_taints(taints);
    let mut ready = NodeCondition::posted(ConditionType::Ready, status, "", at(beat), at(changed));
    if status == ConditionStatus::Unknown {
        ready.reason = "NodeStatusUnknown".into();
    }
    n.conditions = vec![ready];
    Observation::NodeUpserted(n)
}

fn ready(name: &str) -> Observation {
    node(name, ConditionStatus::True, 0, 0, vec![])
}

fn pod(key: &str, node: &str, terminating: bool) -> Observation {
    let mut p = PodSnapshot::new(key, format!("uid-{key}"), Some(node));
    p.terminating = terminating;
    Observation::PodUpserted(p)
}

fn unreachable(effect: TaintEffect, added: Option<Timestamp>) -> Taint {
    Taint { time_added: added, ..Taint::new(keys::TAINT_UNREACHABLE, effect) }
}

/// Ticks every 100 ms from `from` to `to` s, collecting judgements. Three
/// healthy nodes of the zone beat every 10 s, so one node down is no zone
/// disruption (which would pause tainting and take NoExecute taints off).
fn run(engine: &mut Engine, from: i64, to: i64, out: &mut Vec<Judgement>) {
    let mut ms = from * 1000;
    while ms <= to * 1000 {
        if ms % 10_000 == 0 {
            for h in ["h1", "h2", "h3"] {
                engine.observe(node(h, ConditionStatus::True, ms / 1000, 0, vec![]));
            }
        }
        let _ = engine.tick(Timestamp::from_millis(ms));
        out.extend(engine.take_judgements());
        ms += 100;
    }
}

fn silences(js: &[Judgement]) -> Vec<(Timestamp, &str, bool)> {
    js.iter()
        .filter_map(|j| match j.what {
            Judged::Silent { first_sight, .. } => Some((j.at, j.node.as_str(), first_sight)),
            _ => None,
        })
        .collect()
}

fn shadow() -> Engine {
    let mut engine = Engine::new(ControllerConfig::default(), at(0)).unwrap();
    engine.keep_judgements();
    engine
}

#[test]
fn nothing_is_kept_unless_asked() {
    let mut engine = Engine::new(ControllerConfig::default(), at(0)).unwrap();
    engine.observe(ready("a"));
    let mut js = Vec::new();
    run(&mut engine, 0, 60, &mut js);
    assert!(js.is_empty(), "{js:?}");
}

#[test]
fn a_silence_is_judged_once_with_its_pods_marks() {
    let mut engine = shadow();
    engine.observe(ready("a"));
    engine.observe(pod("default/web", "a", false));
    let mut js = Vec::new();
    run(&mut engine, 0, 120, &mut js);
    // First seen at 0 s, grace 40 s, strictly after: the 45 s pass; the
    // probe is the engine's first sight, not a heartbeat it saw.
    assert_eq!(silences(&js), [(at(45), "a", true)]);
    assert!(js.iter().any(|j| j.at == at(45) && matches!(j.what, Judged::PodsNotReady { pods: 1 })), "{js:?}");
}

#[test]
fn a_silence_after_a_heartbeat_seen_is_not_first_sight() {
    let mut engine = shadow();
    engine.observe(ready("a"));
    let mut js = Vec::new();
    run(&mut engine, 0, 10, &mut js);
    engine.observe(node("a", ConditionStatus::True, 10, 0, vec![]));
    run(&mut engine, 10, 120, &mut js);
    // The heartbeat taken in at the 15 s pass; 40 s later, the 60 s pass.
    assert_eq!(silences(&js), [(at(60), "a", false)]);
}

#[test]
fn a_node_another_controller_wrote_unknown_early_is_judged_when_its_own_grace_runs_out() {
    // The shadow runs with a 60 s grace; kube-controller-manager (40 s)
    // writes Unknown and the unreachable taints first.
    let config = ControllerConfig { node_monitor_grace_period: Span::from_secs(60), ..ControllerConfig::default() };
    let mut engine = Engine::new(config, at(0)).unwrap();
    engine.keep_judgements();
    engine.observe(ready("a"));
    let mut js = Vec::new();
    run(&mut engine, 0, 10, &mut js);
    engine.observe(node("a", ConditionStatus::True, 10, 0, vec![]));
    run(&mut engine, 10, 52, &mut js);
    let tainted =
        vec![unreachable(TaintEffect::NoSchedule, Some(at(52))), unreachable(TaintEffect::NoExecute, Some(at(52)))];
    engine.observe(node("a", ConditionStatus::Unknown, 10, 52, tainted));
    run(&mut engine, 52, 200, &mut js);
    // Heartbeat taken in at 15 s; 60 s later, the 80 s pass, though the
    // node was parked Unknown and tainted long before.
    assert_eq!(silences(&js), [(at(80), "a", false)]);
    let taints: Vec<(Timestamp, TaintEffect)> = js
        .iter()
        .filter_map(|j| match &j.what {
            Judged::Taint { taint, .. } => Some((j.at, taint.effect)),
            _ => None,
        })
        .collect();
    // Found there: NoSchedule when the Unknown was seen, NoExecute when the
    // zone's queue released the node (its first token, at once).
    assert!(taints.contains(&(Timestamp::from_millis(52_000), TaintEffect::NoSchedule)), "{taints:?}");
    assert!(taints.iter().any(|&(t, e)| e == TaintEffect::NoExecute && t >= at(52) && t <= at(55)), "{taints:?}");
}

#[test]
fn a_pod_deleted_by_another_controller_is_judged_at_its_own_deadline() {
    let mut engine = shadow();
    engine.observe(ready("a"));
    engine.observe(pod("default/web", "a", false));
    let mut js = Vec::new();
    run(&mut engine, 0, 10, &mut js);
    // kube-controller-manager's taint at 10 s; the pod tolerates nothing,
    // so it is due at once; and a pod with 300 s on another node.
    engine.observe(node("a", ConditionStatus::Unknown, 0, 10, vec![unreachable(TaintEffect::NoExecute, Some(at(10)))]));
    run(&mut engine, 10, 11, &mut js);
    let deletions: Vec<&Judgement> = js.iter().filter(|j| matches!(j.what, Judged::PodDeletion { .. })).collect();
    assert_eq!(deletions.len(), 1, "{js:?}");
    assert_eq!(deletions[0].node, "a");
}

#[test]
fn a_pod_gone_before_its_deadline_is_judged_at_the_deadline() {
    let mut engine = shadow();
    engine.observe(ready("a"));
    let mut tolerant = PodSnapshot::new("default/web", "uid-web", Some("a"));
    tolerant.tolerations = vec![nodewarden_model::Toleration::no_execute(keys::TAINT_UNREACHABLE, Some(30))];
    engine.observe(Observation::PodUpserted(tolerant.clone()));
    let mut js = Vec::new();
    run(&mut engine, 0, 10, &mut js);
    engine.observe(node("a", ConditionStatus::Unknown, 0, 10, vec![unreachable(TaintEffect::NoExecute, Some(at(10)))]));
    run(&mut engine, 10, 20, &mut js);
    // Deleted by someone else at 20 s, and gone: due at 10 s + 30 s.
    engine.observe(Observation::PodDeleted { key: "default/web".into() });
    run(&mut engine, 20, 21, &mut js);
    let deletions: Vec<(Timestamp, &str)> = js
        .iter()
        .filter_map(|j| match &j.what {
            Judged::PodDeletion { pod, .. } => Some((j.at, pod.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(deletions.len(), 1, "{js:?}");
    assert_eq!(deletions[0].1, "default/web");
    assert!(deletions[0].0 >= at(40) && deletions[0].0 <= at(41), "{deletions:?}");

    // The same when it is seen terminating: judged when the deadline comes.
    let mut engine = shadow();
    engine.observe(ready("b"));
    tolerant.key = "default/db".into();
    tolerant.node = Some("b".into());
    engine.observe(Observation::PodUpserted(tolerant.clone()));
    let mut js = Vec::new();
    run(&mut engine, 0, 10, &mut js);
    engine.observe(node("b", ConditionStatus::Unknown, 0, 10, vec![unreachable(TaintEffect::NoExecute, Some(at(10)))]));
    run(&mut engine, 10, 20, &mut js);
    tolerant.terminating = true;
    engine.observe(Observation::PodUpserted(tolerant));
    run(&mut engine, 20, 45, &mut js);
    let due: Vec<Timestamp> =
        js.iter().filter(|j| matches!(j.what, Judged::PodDeletion { .. })).map(|j| j.at).collect();
    assert_eq!(due.len(), 1, "{js:?}");
    assert!(due[0] >= at(40) && due[0] <= at(41), "{due:?}");
}
