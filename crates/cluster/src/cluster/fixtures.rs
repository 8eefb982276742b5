//! What the cluster's tests share: specs, a small cluster, actions and
//! scenario-built worlds.

pub(crate) use std::collections::BTreeMap;

pub(crate) use nodewarden_engine::explain::{AddonEviction, PreparationTier};
pub(crate) use nodewarden_engine::{Action, ActionId, ActionKind, Event, EventType, WriteOutcome, WriteSlot};
pub(crate) use nodewarden_model::{
    ConditionStatus, ConditionType, DeletionMode, NodeCondition, PodScheduling, Resources, Span, Taint, TaintEffect,
    Timestamp, keys,
};

pub(crate) use super::Cluster;
pub(crate) use crate::admission::AdmissionDefaults;
pub(crate) use crate::rules::budget::{BUDGET_REFUSAL, SEVERAL_BUDGETS};
pub(crate) use crate::rules::pod::POD_DISRUPTION_TARGET;
pub(crate) use crate::rules::recreate::replacement_base;
pub(crate) use crate::scenario::{IntOrPercent, NodeSpec, PodSpec, TimeSpec};
pub(crate) use crate::validate::parse_scenario;

pub(crate) fn t(s: i64) -> Timestamp {
    Timestamp::from_secs(s)
}

pub(crate) fn node_spec(name: &str) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        zone: Some("r1/z1".into()),
        labels: BTreeMap::new(),
        created: Some(TimeSpec::At(Span::from_secs(-3600))),
        ready: Some(ConditionStatus::True),
        heartbeat: Some(TimeSpec::At(Span::ZERO)),
        transition: None,
        conditions: BTreeMap::from([(ConditionType::DiskPressure, ConditionStatus::False)]),
        lease: Some(TimeSpec::Now),
        taints: vec![Taint::new("example.com/x", TaintEffect::NoSchedule)],
        unschedulable: false,
        kubelet: false,
        allocatable: None,
    }
}

pub(crate) fn pod_spec(name: &str, node: &str) -> PodSpec {
    PodSpec::bound(name, node)
}

pub(crate) fn cluster() -> Cluster {
    let mut c = Cluster::new(AdmissionDefaults::default());
    c.add_node(&node_spec("a"), t(0));
    c.add_pod(&pod_spec("default/p", "a"));
    c
}

pub(crate) fn act(id: u64, kind: ActionKind) -> Action {
    Action { id: ActionId(id), kind }
}

pub(crate) fn why() -> Box<nodewarden_engine::Explanation> {
    Box::new(nodewarden_engine::Explanation {
        pod: "default/p".into(),
        node: "n".into(),
        node_facts: None,
        taints: vec![],
        tainting: None,
        verdict: nodewarden_engine::explain::Verdict::NotTolerated {
            taint: nodewarden_model::Taint::new("k", nodewarden_model::TaintEffect::NoExecute),
        },
        scheduled_at: t(0),
        due_at: t(0),
        deleted_at: t(0),
    })
}

pub(crate) fn world(yaml: &str) -> Cluster {
    let s = parse_scenario(yaml).unwrap_or_else(|e| panic!("{e}"));
    Cluster::from_scenario(&s).0
}

pub(crate) const NODES: &str = r#"
cluster: {scheduler: true}
nodes:
- {name: a, ready: "True", allocatable: {cpu: 1, memory: 1Gi, pods: 10}}
- {name: b, ready: "True", allocatable: {cpu: "1", memory: 1Gi, pods: 10}}
"#;

pub(crate) fn evict(id: u64, c: &Cluster, pod: &str, grace: Option<Span>) -> Action {
    let uid = c.pod(pod).map(|p| p.uid.clone()).unwrap_or_default();
    let why = Box::new(AddonEviction {
        pod: pod.into(),
        node: "a".into(),
        addon: "kube-system/dns".into(),
        unschedulable_since: t(0),
        needed: Resources::pod(100, 0),
        free_before: Resources::ZERO,
        tier: PreparationTier::AllowedAndQuick,
        victims: vec![pod.into()],
        freed: Resources::ZERO,
        budgets: vec![],
        pod_grace: Span::from_secs(30),
        grace: grace.unwrap_or(Span::from_secs(30)),
        decided_at: t(0),
    });
    act(id, ActionKind::EvictForAddon { pod: pod.into(), uid, grace, why })
}

pub(crate) fn bound(c: &Cluster, pod: &str) -> Option<String> {
    c.pod(pod).and_then(|p| p.node.clone())
}

pub(crate) fn budget_world(budget: &str, pods: usize) -> Cluster {
    let mut y = format!("{NODES}budgets:\n- {budget}\npods:\n");
    for i in 0..pods {
        y.push_str(&format!("- {{name: d/w{i}, node: a, labels: {{app: w}}, grace-period: 0s}}\n"));
    }
    y.push_str("- {name: d/other, node: a, labels: {app: x}, grace-period: 0s}\n");
    world(&y)
}

pub(crate) fn allowed(c: &Cluster) -> u32 {
    c.budgets().values().next().map_or(99, |b| b.allowed)
}
