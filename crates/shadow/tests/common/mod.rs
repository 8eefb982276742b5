//! Builders shared by the shadow's tests: Unix-time instants, nodes and
//! pods as the watch shows them, and the engine's judgements.

#![allow(dead_code)]

use nodewarden_engine::explain::{TaintingFacts, Verdict as Rule};
use nodewarden_engine::{Judged, Judgement, NodeSnapshot, Observation, PodSnapshot};
use nodewarden_model::condition::REASON_STATUS_UNKNOWN;
use nodewarden_model::keys::{TAINT_NOT_READY, TAINT_UNREACHABLE};
use nodewarden_model::{
    ConditionStatus, ConditionType, ControllerConfig, NodeCondition, Span, Taint, TaintEffect, Timestamp, ZoneKey,
    ZoneState,
};
use nodewarden_shadow::{Shadow, ShadowSettings, Summary};

/// `s` seconds after an instant in 2027 (Unix time, as `run` uses).
pub fn t(s: i64) -> Timestamp {
    Timestamp::from_secs(1_800_000_000 + s)
}

pub const UNREACHABLE: &str = TAINT_UNREACHABLE;
pub const NOT_READY: &str = TAINT_NOT_READY;
pub const NO_EXECUTE: TaintEffect = TaintEffect::NoExecute;
pub const NO_SCHEDULE: TaintEffect = TaintEffect::NoSchedule;

/// A lifecycle taint, stamped at `added` (seconds, as [`t`]) when given.
pub fn taint(key: &str, effect: TaintEffect, added: Option<i64>) -> Taint {
    Taint { time_added: added.map(t), ..Taint::new(key, effect) }
}

/// Node `name` in zone `z1`, Ready `status` since `since`, with `taints`.
pub fn node(name: &str, status: ConditionStatus, since: i64, taints: Vec<Taint>) -> Observation {
    let reason = if status == ConditionStatus::Unknown { REASON_STATUS_UNKNOWN } else { "KubeletReady" };
    let mut n = NodeSnapshot::new(name, t(-100_000)).in_zone("z1");
    n.conditions = vec![NodeCondition::posted(ConditionType::Ready, status, reason, t(since), t(since))];
    n.taints = taints;
    Observation::NodeUpserted(n)
}

pub fn ready(name: &str) -> Observation {
    node(name, ConditionStatus::True, 0, Vec::new())
}

/// Node `name` made Unknown by kube-controller-manager at `since`.
pub fn unknown(name: &str, since: i64, taints: Vec<Taint>) -> Observation {
    node(name, ConditionStatus::Unknown, since, taints)
}

/// Pod `key` on `node`, Ready or not, terminating or not.
pub fn pod(key: &str, node: &str, ready: bool, terminating: bool) -> Observation {
    let mut p = PodSnapshot::new(key, format!("uid-{key}"), Some(node));
    p.ready = Some(ready);
    p.terminating = terminating;
    Observation::PodUpserted(p)
}

pub fn judgement(node: &str, at: i64, what: Judged) -> Judgement {
    Judgement { at: t(at), node: node.into(), what }
}

/// The engine found `node` silent at `at`, its last heartbeat at `probe`.
pub fn silent(node: &str, at: i64, probe: i64) -> Judgement {
    judgement(node, at, Judged::Silent { probe: t(probe), grace: Span::from_secs(40), first_sight: false })
}

/// The engine's NoExecute taint released from zone z1 (queued at
/// `queued`), or its NoSchedule taint.
pub fn tainted(node: &str, at: i64, key: &str, effect: TaintEffect, queued: i64) -> Judgement {
    let released = (effect == NO_EXECUTE).then(|| TaintingFacts {
        taint: taint(key, effect, Some(at)),
        queued_at: Some(t(queued)),
        zone: ZoneKey::new("", "z1"),
        zone_rate: 0.1,
        zone_state: Some(ZoneState::Normal),
    });
    judgement(node, at, Judged::Taint { taint: Taint::new(key, effect), released })
}

/// The taint manager's deletion of `pod` on `node`, due at `at`.
pub fn deletion(pod: &str, node: &str, at: i64) -> Judgement {
    judgement(
        node,
        at,
        Judged::PodDeletion {
            pod: pod.into(),
            verdict: Rule::NotTolerated { taint: Taint::new(UNREACHABLE, NO_EXECUTE) },
            scheduled_at: t(at),
        },
    )
}

/// A shadow whose baseline is `nodes` Ready, synced at t(0).
pub fn synced_shadow(config: ControllerConfig, nodes: &[&str]) -> Shadow {
    let mut s = Shadow::new(ShadowSettings::new(config), t(-10));
    for n in nodes {
        s.observe(t(-5), &ready(n));
    }
    s.synced(t(0));
    s
}

pub fn summary(s: &Shadow, now: i64) -> Summary {
    s.summary(t(now), &[])
}
