//! Reading a scenario, and the checks that need the whole file: unique
//! names, references to nodes and pods that exist somewhere, flags that can
//! work, times inside the run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use nodewarden_model::{ConditionType, Span, keys};

use crate::error::ScenarioError;
use crate::scenario::{BudgetSpec, EventAction, EventEntry, NodeSpec, PodSpec, Scenario, Subject};

/// Parses a scenario from YAML or JSON text and validates it.
pub fn parse_scenario(text: &str) -> Result<Scenario, ScenarioError> {
    let de = serde_yaml_ng::Deserializer::from_str(text);
    let scenario: Scenario = serde_path_to_error::deserialize(de).map_err(ScenarioError::from_yaml)?;
    validate(&scenario)?;
    Ok(scenario)
}

/// Reads, parses and validates the scenario file at `path`.
pub fn load_scenario(path: &Path) -> Result<Scenario, ScenarioError> {
    let bytes = std::fs::read(path).map_err(|cause| ScenarioError::Read { path: path.to_path_buf(), cause })?;
    let text = String::from_utf8(bytes).map_err(|e| ScenarioError::Parse {
        path: ".".to_string(),
        location: None,
        message: format!("not UTF-8 text: {}", e.utf8_error()),
    })?;
    parse_scenario(&text)
}

/// Checks what deserialization alone cannot: the first problem found is
/// returned, named by its field path. In order: the settings, every
/// definition (nodes, pods, budgets, then those events create), the
/// timeline's references, creations of names that exist at that moment,
/// and the expectations' references.
pub fn validate(s: &Scenario) -> Result<(), ScenarioError> {
    check_settings(s)?;
    let end = s.end().since_epoch();
    let names = Names::of(s)?;
    for (i, e) in s.events.iter().enumerate() {
        check_event(&format!("events[{i}]"), e, end, &names)?;
    }
    check_creations(s)?;
    for (i, x) in s.expect.iter().enumerate() {
        let base = format!("expect[{i}]");
        if x.at > end {
            return Err(err(
                format!("{base}.at"),
                format!("{} is after run-until ({end}): it would never be checked", x.at),
            ));
        }
        match &x.subject {
            Subject::Node { name, .. } => names.node(format!("{base}.node"), name)?,
            // A controller's replacement (`<name>-r<N>`) of a defined pod
            // may be checked too.
            Subject::Pod { key, .. } if names.has_pod_or_replaced(key) => {}
            Subject::Pod { key, .. } => names.pod(format!("{base}.pod"), key)?,
            Subject::Zone { .. } | Subject::EventsInclude(_) | Subject::EventsExclude(_) => {}
        }
    }
    Ok(())
}

/// The controller's configuration, the kubelets' periods and `run-until`.
fn check_settings(s: &Scenario) -> Result<(), ScenarioError> {
    if let Err(e) = s.config.validate() {
        return Err(err(format!("config.{}", e.flag), e.problem));
    }
    let k = &s.cluster.kubelet;
    if k.node_lease_duration_seconds == 0 || k.node_lease_duration_seconds > 365 * 24 * 3600 {
        return Err(err(
            "cluster.kubelet.node-lease-duration-seconds",
            format!("must be between 1 and one year, got {}", k.node_lease_duration_seconds),
        ));
    }
    for (field, span) in [
        ("node-status-update-frequency", k.node_status_update_frequency),
        ("node-status-report-frequency", k.node_status_report_frequency),
    ] {
        if span <= Span::ZERO {
            return Err(err(format!("cluster.kubelet.{field}"), format!("must be positive, got {span}")));
        }
    }
    if let Some(r) = s.run_until
        && r.is_negative()
    {
        return Err(err("run-until", format!("must not be before t=0, got {r}")));
    }
    Ok(())
}

/// Every name a file defines anywhere (up front or by an event), with the
/// path that defined it first.
struct Names<'a> {
    nodes: BTreeMap<&'a str, String>,
    pods: BTreeMap<&'a str, String>,
    budgets: BTreeMap<&'a str, String>,
}

impl<'a> Names<'a> {
    /// Checks each definition and collects the names; a name defined twice
    /// up front is an error (an event may create a name again later, which
    /// [`check_creations`] judges in time order).
    fn of(s: &'a Scenario) -> Result<Names<'a>, ScenarioError> {
        let mut names = Names { nodes: BTreeMap::new(), pods: BTreeMap::new(), budgets: BTreeMap::new() };
        for (i, n) in s.nodes.iter().enumerate() {
            let path = format!("nodes[{i}]");
            check_node(&path, n)?;
            if let Some(first) = names.nodes.insert(&n.name, path.clone()) {
                return Err(err(format!("{path}.name"), format!("duplicate node name {:?} (also {first})", n.name)));
            }
        }
        for (i, p) in s.pods.iter().enumerate() {
            let path = format!("pods[{i}]");
            check_pod(&path, p)?;
            if let Some(first) = names.pods.insert(&p.name, path.clone()) {
                return Err(err(format!("{path}.name"), format!("duplicate pod name {:?} (also {first})", p.name)));
            }
        }
        for (i, b) in s.budgets.iter().enumerate() {
            let path = format!("budgets[{i}]");
            check_budget(&path, b)?;
            if let Some(first) = names.budgets.insert(&b.name, path.clone()) {
                return Err(err(format!("{path}.name"), format!("duplicate budget name {:?} (also {first})", b.name)));
            }
        }
        for (i, e) in s.events.iter().enumerate() {
            match &e.action {
                EventAction::AddBudget(b) => {
                    check_budget(&format!("events[{i}].add-budget"), b)?;
                    names.budgets.entry(&b.name).or_insert_with(|| format!("events[{i}]"));
                }
                EventAction::AddNode(n) => {
                    check_node(&format!("events[{i}].add-node"), n)?;
                    names.nodes.entry(&n.name).or_insert_with(|| format!("events[{i}]"));
                }
                EventAction::AddPod(p) => {
                    check_pod(&format!("events[{i}].add-pod"), p)?;
                    names.pods.entry(&p.name).or_insert_with(|| format!("events[{i}]"));
                }
                _ => {}
            }
        }
        Ok(names)
    }

    /// A reference at `path` to node `name`.
    fn node(&self, path: String, name: &str) -> Result<(), ScenarioError> {
        if self.nodes.contains_key(name) {
            Ok(())
        } else {
            Err(err(path, format!("no node {name:?} is defined (under nodes or by an add-node event)")))
        }
    }

    /// A reference at `path` to pod `key`.
    fn pod(&self, path: String, key: &str) -> Result<(), ScenarioError> {
        if self.pods.contains_key(key) {
            Ok(())
        } else {
            Err(err(path, format!("no pod {key:?} is defined (under pods or by an add-pod event)")))
        }
    }

    /// True when `key` is a defined pod or a controller's replacement of
    /// one (`<name>-r<N>`), which the cluster may create.
    fn has_pod_or_replaced(&self, key: &str) -> bool {
        self.pods.contains_key(crate::rules::recreate::replacement_base(key))
    }
}

/// One event at `base`: it happens by `end`, and what it names exists.
fn check_event(base: &str, e: &EventEntry, end: Span, names: &Names<'_>) -> Result<(), ScenarioError> {
    if e.at > end {
        return Err(err(format!("{base}.at"), format!("{} is after run-until ({end}): it would never happen", e.at)));
    }
    let name = e.action.name();
    let field = |f: &str| format!("{base}.{name}.{f}");
    match &e.action {
        EventAction::RenewLease(list) | EventAction::KubeletStop(list) | EventAction::KubeletStart(list) => {
            if list.is_empty() {
                return Err(err(format!("{base}.{name}"), "names no node"));
            }
            for (j, n) in list.iter().enumerate() {
                names.node(format!("{base}.{name}[{j}]"), n)?;
            }
        }
        EventAction::SetReady(a) => names.node(field("node"), &a.node)?,
        EventAction::SetCondition(a) => {
            names.node(field("node"), &a.node)?;
            if a.kind == ConditionType::Ready {
                return Err(err(field("type"), "set-condition does not touch Ready: use set-ready"));
            }
        }
        EventAction::RemoveCondition(a) => names.node(field("node"), &a.node)?,
        EventAction::SetTaints(a) => {
            names.node(field("node"), &a.node)?;
            for (j, t) in a.taints.iter().enumerate() {
                if t.key.is_empty() {
                    return Err(err(field(&format!("taints[{j}].key")), "must not be empty"));
                }
            }
        }
        EventAction::SetUnschedulable(a) => names.node(field("node"), &a.node)?,
        EventAction::SetLease(a) => names.node(field("node"), &a.node)?,
        EventAction::SetLabels(a) => {
            names.node(field("node"), &a.node)?;
            if a.labels.keys().any(String::is_empty) {
                return Err(err(field("labels"), "a label key must not be empty"));
            }
        }
        EventAction::DeleteNode(n) => names.node(format!("{base}.delete-node"), n)?,
        EventAction::DeletePod(p) => names.pod(format!("{base}.delete-pod"), p)?,
        EventAction::SetTolerations(a) => names.pod(field("pod"), &a.pod)?,
        EventAction::BindPod(a) => names.pod(field("pod"), &a.pod)?,
        // A controller's replacement of a defined pod may be marked:
        // nothing else could mark it in a file without the scheduler.
        EventAction::MarkUnschedulable(a) if names.has_pod_or_replaced(&a.pod) => {}
        EventAction::MarkUnschedulable(a) => names.pod(field("pod"), &a.pod)?,
        EventAction::AddNode(_) | EventAction::AddPod(_) | EventAction::AddBudget(_) => {}
        EventAction::DeleteBudget(b) => {
            if !names.budgets.contains_key(b.as_str()) {
                return Err(err(
                    format!("{base}.delete-budget"),
                    format!("no budget {b:?} is defined (under budgets or by an add-budget event)"),
                ));
            }
        }
        EventAction::SetAllocatable(a) => names.node(field("node"), &a.node)?,
        EventAction::RestartController => {
            if e.at.is_negative() {
                return Err(err(format!("{base}.at"), "restart-controller before t=0: the controller starts at t=0"));
            }
        }
    }
    Ok(())
}

/// Walks the timeline in replay order (time, then file order) and refuses
/// `add-node`/`add-pod` of a name that exists at that moment.
fn check_creations(s: &Scenario) -> Result<(), ScenarioError> {
    let mut nodes: BTreeSet<&str> = s.nodes.iter().map(|n| n.name.as_str()).collect();
    let mut pods: BTreeSet<&str> = s.pods.iter().map(|p| p.name.as_str()).collect();
    let mut order: Vec<usize> = (0..s.events.len()).collect();
    order.sort_by_key(|&i| (s.events[i].at, i));
    for i in order {
        let e = &s.events[i];
        match &e.action {
            EventAction::AddNode(n) if !nodes.insert(&n.name) => {
                return Err(ScenarioError::invalid(
                    format!("events[{i}].add-node.name"),
                    format!("node {:?} already exists at {}; delete it first", n.name, e.at),
                ));
            }
            EventAction::AddPod(p) if !pods.insert(&p.name) => {
                return Err(ScenarioError::invalid(
                    format!("events[{i}].add-pod.name"),
                    format!("pod {:?} already exists at {}; delete it first", p.name, e.at),
                ));
            }
            EventAction::DeleteNode(n) => {
                nodes.remove(n.as_str());
            }
            EventAction::DeletePod(p) => {
                pods.remove(p.as_str());
            }
            _ => {}
        }
    }
    Ok(())
}

fn check_node(path: &str, n: &NodeSpec) -> Result<(), ScenarioError> {
    if n.name.is_empty() {
        return Err(err(format!("{path}.name"), "must not be empty"));
    }
    if n.ready.is_none() {
        for (field, given) in [("heartbeat", n.heartbeat.is_some()), ("transition", n.transition.is_some())] {
            if given {
                return Err(err(format!("{path}.{field}"), "belongs to the Ready condition, but `ready` is not given"));
            }
        }
    }
    if n.conditions.contains_key(&ConditionType::Ready) {
        return Err(err(
            format!("{path}.conditions.Ready"),
            "set Ready with the node's `ready` field (and `heartbeat`, `transition`)",
        ));
    }
    if n.zone.is_some() {
        for label in [keys::LABEL_TOPOLOGY_REGION, keys::LABEL_TOPOLOGY_ZONE] {
            if n.labels.contains_key(label) {
                return Err(err(
                    format!("{path}.labels.{label}"),
                    "conflicts with `zone`, which sets this label: give one or the other",
                ));
            }
        }
    }
    if n.labels.keys().any(String::is_empty) {
        return Err(err(format!("{path}.labels"), "a label key must not be empty"));
    }
    for (j, t) in n.taints.iter().enumerate() {
        if t.key.is_empty() {
            return Err(err(format!("{path}.taints[{j}].key"), "must not be empty"));
        }
    }
    Ok(())
}

fn check_pod(path: &str, p: &PodSpec) -> Result<(), ScenarioError> {
    if !is_pod_key(&p.name) {
        return Err(ScenarioError::invalid(
            format!("{path}.name"),
            format!("{:?} is not namespace/name (e.g. default/web-1)", p.name),
        ));
    }
    if p.node.as_deref() == Some("") {
        return Err(ScenarioError::invalid(
            format!("{path}.node"),
            "must not be empty (omit it for an unscheduled pod)",
        ));
    }
    for (field, map) in [("labels", &p.scheduling.labels), ("node-selector", &p.scheduling.node_selector)] {
        if map.keys().any(String::is_empty) {
            return Err(err(format!("{path}.{field}"), "a label key must not be empty"));
        }
    }
    Ok(())
}

fn check_budget(path: &str, b: &BudgetSpec) -> Result<(), ScenarioError> {
    if !is_pod_key(&b.name) {
        return Err(err(format!("{path}.name"), format!("{:?} is not namespace/name (e.g. default/web)", b.name)));
    }
    Ok(())
}

fn err(path: impl Into<String>, message: impl Into<String>) -> ScenarioError {
    ScenarioError::invalid(path, message)
}

/// True for `namespace/name` with both parts non-empty and no other `/`.
pub(crate) fn is_pod_key(s: &str) -> bool {
    match s.split_once('/') {
        Some((ns, name)) => !ns.is_empty() && !name.is_empty() && !name.contains('/'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use nodewarden_engine::ZoneState;
    use nodewarden_model::{ConditionStatus, ConditionType, Span, TaintEffect, Timestamp, TolerationOperator};

    use super::*;
    use crate::scenario::{EventAction, Subject, TimeSpec, ZoneStateSpec};

    fn parse(text: &str) -> Scenario {
        match parse_scenario(text) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    fn error(text: &str) -> ScenarioError {
        match parse_scenario(text) {
            Ok(s) => panic!("accepted: {s:?}"),
            Err(e) => e,
        }
    }

    fn secs(s: i64) -> Span {
        Span::from_secs(s)
    }

    const FULL: &str = r#"
name: everything
run-until: 10m
config:
  node-monitor-period: 5s
  node-monitor-grace-period: 40s
  node-startup-grace-period: 1m
  pod-eviction-timeout: 5m
  node-eviction-rate: 0.1
  secondary-node-eviction-rate: 0.01
  large-cluster-size-threshold: 50
  unhealthy-zone-threshold: 0.55
  enable-taint-manager: false
cluster:
  default-not-ready-toleration-seconds: null
  default-unreachable-toleration-seconds: 20
  kubelet:
    node-lease-duration-seconds: 20
    node-status-update-frequency: 7s
    node-status-report-frequency: 1m
nodes:
- name: node-a
  zone: region1/zone-a
  labels: {kubernetes.io/os: linux}
  created: -1h
  ready: "True"
  heartbeat: 0s
  transition: -1h
  conditions: {MemoryPressure: "False", DiskPressure: "True", PIDPressure: "False", NetworkUnavailable: "False"}
  lease: 0s
  taints: [{key: example.com/k, value: v, effect: NoSchedule}]
  unschedulable: true
  kubelet: true
- {name: node-b, zone: /zone-b, ready: Unknown}
pods:
- name: default/web-1
  node: node-a
  daemonset: true
  ready: false
  terminating: true
  tolerations:
  - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, seconds: -20}
  - {operator: Exists}
- {name: default/web-2, ready: null}
events:
- {at: 10s, renew-lease: [node-a]}
- {at: 10s, set-ready: {node: node-a, status: "False"}}
- {at: 10s, set-condition: {node: node-a, type: DiskPressure, status: "True"}}
- {at: 15s, kubelet-stop: [node-a]}
- {at: 60s, kubelet-start: node-a}
- {at: 20s, add-node: {name: node-z, zone: region1/}}
- {at: 20s, delete-node: node-b}
- {at: 20s, add-pod: {name: default/p, node: node-z}}
- {at: 20s, delete-pod: default/web-2}
- {at: 20s, set-taints: {node: node-a, taints: [{key: k, effect: NoExecute}]}}
- {at: 20s, set-unschedulable: {node: node-a, value: true}}
- {at: 20s, set-lease: {node: node-a, renew: now}}
- {at: 20.5s, set-lease: {node: node-a, renew: 5s}}
- {at: 500ms, remove-condition: {node: node-a, type: DiskPressure}}
- {at: 20s, set-tolerations: {pod: default/web-1, tolerations: []}}
- {at: 20s, bind-pod: {pod: default/p, node: node-a}}
- {at: 20s, set-labels: {node: node-a, labels: {k: v, gone: null}}}
- {at: 30s, restart-controller: true}
expect:
- {at: 45s, node: node-a, ready: Unknown, taints: ["a:NoExecute"], has-taints: ["b:NoSchedule"], lacks-taints: ["c:PreferNoSchedule"]}
- {at: 60s, node: node-a, conditions: {MemoryPressure: Unknown, Gone: null}, condition-reasons: {Ready: NodeStatusUnknown}}
- {at: 60s, node: node-a, labels: {kubernetes.io/os: linux}, writes: 1, deleted: false}
- {at: 400s, pod: default/web-1, deleted: true, ready: false, reason: NodeLost, conditions: {DisruptionTarget: "True"}, writes: 2}
- {at: 50s, zone: region1/zone-a, state: FullDisruption, rate: 0.01, tainted: 2}
- {at: 50s, zone: "", state: null}
- {at: 60s, events-include: [{reason: NodeNotReady, object: node-a}, {reason: X, count: 0}]}
- {at: 60s, events-exclude: [{reason: NodeControllerEviction, object: default/web-2}]}
"#;

    #[test]
    fn every_field_parses() {
        let s = parse(FULL);
        assert_eq!(s.name.as_deref(), Some("everything"));
        assert_eq!(s.run_until, Some(secs(600)));
        assert_eq!(s.end(), Timestamp::EPOCH + secs(600));
        assert!(!s.config.enable_taint_manager);
        assert_eq!(s.config.node_startup_grace_period, secs(60));
        assert_eq!(s.cluster.default_not_ready_toleration_seconds, None);
        assert_eq!(s.cluster.default_unreachable_toleration_seconds, Some(20));
        assert_eq!(s.cluster.kubelet.node_lease_duration_seconds, 20);
        assert_eq!(s.cluster.kubelet.node_status_update_frequency, secs(7));
        assert_eq!(s.cluster.kubelet.node_status_report_frequency, secs(60));

        let a = &s.nodes[0];
        assert_eq!(a.zone.as_deref(), Some("region1/zone-a"));
        assert_eq!(a.labels["kubernetes.io/os"], "linux");
        assert_eq!(a.created, Some(TimeSpec::At(secs(-3600))));
        assert_eq!(a.ready, Some(ConditionStatus::True));
        assert_eq!(a.heartbeat, Some(TimeSpec::At(Span::ZERO)));
        assert_eq!(a.transition, Some(TimeSpec::At(secs(-3600))));
        assert_eq!(a.conditions.len(), 4);
        assert_eq!(a.conditions[&ConditionType::DiskPressure], ConditionStatus::True);
        assert_eq!(a.conditions[&ConditionType::PidPressure], ConditionStatus::False);
        assert_eq!(a.lease, Some(TimeSpec::At(Span::ZERO)));
        assert_eq!(a.taints[0].value, "v");
        assert_eq!(a.taints[0].effect, TaintEffect::NoSchedule);
        assert!(a.unschedulable && a.kubelet);
        assert_eq!(s.nodes[1].ready, Some(ConditionStatus::Unknown));
        assert_eq!(s.nodes[1].lease, None);

        let p = &s.pods[0];
        assert_eq!(p.node.as_deref(), Some("node-a"));
        assert!(p.daemonset && p.terminating);
        assert_eq!(p.ready, Some(false));
        assert_eq!(p.tolerations[0].seconds, Some(-20));
        assert_eq!(p.tolerations[1].key, "");
        assert_eq!(p.tolerations[1].operator, TolerationOperator::Exists);
        assert_eq!(p.tolerations[1].effect, None);
        assert_eq!(s.pods[1].ready, None);
        assert_eq!(s.pods[1].node, None);

        let names: Vec<&str> = s.events.iter().map(|e| e.action.name()).collect();
        assert_eq!(
            names,
            [
                "renew-lease",
                "set-ready",
                "set-condition",
                "kubelet-stop",
                "kubelet-start",
                "add-node",
                "delete-node",
                "add-pod",
                "delete-pod",
                "set-taints",
                "set-unschedulable",
                "set-lease",
                "set-lease",
                "remove-condition",
                "set-tolerations",
                "bind-pod",
                "set-labels",
                "restart-controller",
            ]
        );
        assert_eq!(s.events[4].action, EventAction::KubeletStart(vec!["node-a".into()]));
        assert_eq!(s.events[12].at, Span::from_millis(20_500));
        assert_eq!(s.events[13].at, Span::from_millis(500));
        let EventAction::SetLease(l) = &s.events[11].action else { panic!() };
        assert_eq!(l.renew, TimeSpec::Now);
        let EventAction::SetLabels(l) = &s.events[16].action else { panic!() };
        assert_eq!(l.labels, BTreeMap::from([("k".into(), Some("v".into())), ("gone".into(), None)]));

        let Subject::Node { name, checks } = &s.expect[0].subject else { panic!() };
        assert_eq!(name, "node-a");
        assert_eq!(checks.ready, Some(ConditionStatus::Unknown));
        assert_eq!(checks.taints.as_ref().unwrap()[0].to_string(), "a:NoExecute");
        assert_eq!(checks.lacks_taints.as_ref().unwrap()[0].effect, TaintEffect::PreferNoSchedule);
        let Subject::Node { checks, .. } = &s.expect[1].subject else { panic!() };
        assert_eq!(checks.conditions.as_ref().unwrap()["Gone"], None);
        let Subject::Pod { checks, .. } = &s.expect[3].subject else { panic!() };
        assert_eq!((checks.deleted, checks.ready, checks.writes), (Some(true), Some(false), Some(2)));
        assert_eq!(checks.reason, Some(Some("NodeLost".into())));
        let Subject::Zone { zone, checks } = &s.expect[4].subject else { panic!() };
        assert_eq!(zone, "region1/zone-a");
        assert_eq!(checks.state, Some(Some(ZoneStateSpec(ZoneState::FullDisruption))));
        assert_eq!((checks.rate, checks.tainted), (Some(0.01), Some(2)));
        let Subject::Zone { checks, .. } = &s.expect[5].subject else { panic!() };
        assert_eq!(checks.state, Some(None));
        let Subject::EventsInclude(list) = &s.expect[6].subject else { panic!() };
        assert_eq!(list[1].count, Some(0));
        assert!(matches!(&s.expect[7].subject, Subject::EventsExclude(l) if l.len() == 1));
    }

    #[test]
    fn json_is_accepted_too() {
        let s = parse(
            r#"{"nodes": [{"name": "a", "ready": "True", "heartbeat": "0s"}],
            "expect": [{"at": "1s", "node": "a", "ready": "True"}]}"#,
        );
        assert_eq!(s.nodes.len(), 1);
        assert_eq!(s.end(), Timestamp::EPOCH + secs(2));
    }

    #[test]
    fn defaults() {
        let s = parse("nodes: [{name: a}]\npods: [{name: ns/p}]\nevents:\nexpect:\n");
        assert_eq!(s.cluster.default_not_ready_toleration_seconds, Some(300));
        assert_eq!(s.cluster.default_unreachable_toleration_seconds, Some(300));
        assert_eq!(s.cluster.kubelet.node_lease_duration_seconds, 40);
        assert_eq!(s.pods[0].ready, Some(true));
        assert!(!s.nodes[0].kubelet);
        assert_eq!(s.end(), Timestamp::EPOCH + secs(1));
        let s = parse("events: [{at: 3s, restart-controller: true}]\nexpect: [{at: 90s, zone: r/z, tainted: 0}]");
        assert_eq!(s.end(), Timestamp::EPOCH + secs(91));
    }

    #[test]
    fn unknown_fields_are_refused_with_their_path() {
        for (text, path) in [
            ("nmes: []", "nmes"),
            ("nodes: [{name: a, zonee: x}]", "nodes[0].zonee"),
            ("pods: [{name: a/b, tolerations: [{key: k, secs: 1}]}]", "pods[0].tolerations[0].secs"),
            ("cluster: {kubelet: {lease: 1}}", "cluster.kubelet.lease"),
            ("config: {node-monitor-grace: 1s}", "config.node-monitor-grace"),
            (
                "nodes: [{name: a}]\nevents: [{at: 1s, set-ready: {node: a, status: 'True', x: 1}}]",
                "events[0].set-ready.x",
            ),
            ("events: [{at: 1s, frobnicate: [a]}]", "events[0].frobnicate"),
            ("expect: [{at: 1s, zone: z, tainted: 1, colour: red}]", "expect[0].colour"),
            ("expect: [{at: 1s, events-include: [{reason: R, objekt: o}]}]", "expect[0].events-include[0].objekt"),
        ] {
            let e = error(text);
            assert_eq!(e.path(), Some(path), "{text}: {e}");
            assert!(e.to_string().contains("unknown field"), "{e}");
        }
    }

    #[test]
    fn bad_durations() {
        for (text, path, needle) in [
            ("run-until: 10", "run-until", "has no unit"),
            ("run-until: 10 minutes", "run-until", "invalid duration"),
            ("events: [{at: 1x, restart-controller: true}]", "events[0].at", "invalid duration"),
            ("nodes: [{name: a, created: yesterday}]", "nodes[0].created", "invalid duration"),
            ("nodes: [{name: a, lease: 5}]", "nodes[0].lease", "has no unit"),
            ("config: {node-monitor-period: 5}", "config.node-monitor-period", "has no unit"),
            (
                "cluster: {kubelet: {node-status-update-frequency: 1.5.0s}}",
                "cluster.kubelet.node-status-update-frequency",
                "invalid duration",
            ),
            ("expect: [{at: now, zone: z, tainted: 0}]", "expect[0].at", "invalid duration"),
        ] {
            let e = error(text);
            assert_eq!(e.path(), Some(path), "{text}: {e}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
        // Fractional and negative durations are fine.
        let s = parse("nodes: [{name: a, lease: -1h, created: 10.5s}]");
        assert_eq!(s.nodes[0].lease, Some(TimeSpec::At(secs(-3600))));
        assert_eq!(s.nodes[0].created, Some(TimeSpec::At(Span::from_millis(10_500))));
    }

    #[test]
    fn errors_carry_yaml_line_and_column() {
        let text =
            "nodes:\n- name: a\n  ready: 'True'\nevents:\n- at: 1s\n  set-ready:\n    node: a\n    status: Maybe\n";
        let e = error(text);
        assert_eq!(e.path(), Some("events[0].set-ready.status"));
        let loc = e.location().expect("a location");
        assert_eq!((loc.line, loc.column), (8, 13));
        assert_eq!(
            e.to_string(),
            "events[0].set-ready.status (line 8, column 13): unknown variant `Maybe`, expected one of `True`, `False`, `Unknown`"
        );
        // Structural errors point at the entry.
        let e = error(
            "nodes: [{name: a}]\nevents:\n- {at: 1s, renew-lease: [a]}\n- at: 2s\n  renew-lease: [a]\n  kubelet-stop: [a]\n",
        );
        assert_eq!(e.path(), Some("events[1]"));
        assert_eq!(e.location().map(|l| l.line), Some(4));
        assert!(e.to_string().contains("exactly one action"), "{e}");
        // Syntax errors have a position (and the path reached so far).
        let e = error("nodes:\n  - name: a\n   bad: [\n");
        assert_eq!(e.location().map(|l| l.line), Some(3), "{e}");
        assert!(e.to_string().contains("did not find expected"), "{e}");
        let e = error("name: x\n\tnodes: []\n");
        assert!(e.location().is_some(), "{e}");
    }

    #[test]
    fn statuses_are_strings_and_pod_flags_booleans() {
        let e = error("nodes: [{name: a, ready: 'Maybe'}]");
        assert_eq!(e.path(), Some("nodes[0].ready"));
        let e = error("nodes: [{name: a, ready: true}]");
        assert_eq!(e.path(), Some("nodes[0].ready"), "{e}");
        let e = error("pods: [{name: a/b, ready: 'yes'}]");
        assert_eq!(e.path(), Some("pods[0].ready"), "{e}");
        let e = error("nodes: [{name: a}]\nexpect: [{at: 1s, node: a, ready: true}]");
        assert!(e.to_string().contains("condition status"), "{e}");
        let e = error("pods: [{name: a/b}]\nexpect: [{at: 1s, pod: a/b, ready: Unknown}]");
        assert!(e.to_string().contains("boolean"), "{e}");
        let s = parse("pods: [{name: a/b}]\nexpect: [{at: 1s, pod: a/b, ready: false, deleted: false}]");
        assert!(matches!(&s.expect[0].subject, Subject::Pod { checks, .. } if checks.ready == Some(false)));
    }

    #[test]
    fn events_need_at_and_exactly_one_action() {
        let e = error("nodes: [{name: a}]\nevents: [{renew-lease: [a]}]");
        assert!(e.to_string().contains("missing field `at`"), "{e}");
        let e = error("events: [{at: 1s}]");
        assert!(e.to_string().contains("needs an action"), "{e}");
        let e = error("nodes: [{name: a}]\nevents: [{at: 1s, renew-lease: [a], kubelet-stop: [a]}]");
        assert!(e.to_string().contains("found 2: renew-lease, kubelet-stop"), "{e}");
        let e = error("events: [{at: 1s, restart-controller: false}]");
        assert!(e.to_string().contains("only value is `true`"), "{e}");
    }

    #[test]
    fn expectations_need_one_subject_and_a_check() {
        for (text, needle) in [
            ("expect: [{at: 1s, ready: 'True'}]", "needs a subject"),
            ("nodes: [{name: a}]\nexpect: [{at: 1s, node: a, zone: r/z, writes: 1}]", "found 2: node, zone"),
            ("nodes: [{name: a}]\nexpect: [{at: 1s, node: a}]", "at least one check"),
            ("pods: [{name: a/b}]\nexpect: [{at: 1s, pod: a/b, taints: []}]", "`taints` is not a check for a pod"),
            ("expect: [{at: 1s, zone: z, rate: .nan}]", "non-negative"),
            ("expect: [{at: 1s, events-include: []}]", "at least one"),
            ("expect: [{at: 1s, events-exclude: [{reason: R, count: 1}]}]", "count"),
            ("expect: [{at: 1s, events-include: [{reason: R}], writes: 1}]", "not a check"),
            ("expect: [{at: 1s, zone: z, state: Sleepy}]", "unknown variant `Sleepy`"),
            ("nodes: [{name: a}]\nexpect: [{at: 1s, node: a, taints: [NoExecute]}]", "key:Effect"),
            ("nodes: [{name: a}]\nexpect: [{at: 1s, node: a, taints: ['k:NoExecution']}]", "key:Effect"),
        ] {
            let e = error(text);
            assert!(e.to_string().contains(needle), "{text}: {e}");
            assert!(e.path().is_some_and(|p| p.starts_with("expect[0]")), "{text}: {e}");
        }
    }

    #[test]
    fn semantic_errors_name_the_path() {
        for (text, path, needle) in [
            ("nodes: [{name: a}, {name: a}]", "nodes[1].name", "duplicate node"),
            ("pods: [{name: a/b}, {name: a/b}]", "pods[1].name", "duplicate pod"),
            ("pods: [{name: web}]", "pods[0].name", "namespace/name"),
            ("pods: [{name: a/b/c}]", "pods[0].name", "namespace/name"),
            ("pods: [{name: /b}]", "pods[0].name", "namespace/name"),
            (
                "nodes: [{name: a}]\nevents: [{at: 1s, set-ready: {node: b, status: 'True'}}]",
                "events[0].set-ready.node",
                "no node \"b\"",
            ),
            (
                "nodes: [{name: a}]\nevents: [{at: 1s, kubelet-stop: [a, c]}]",
                "events[0].kubelet-stop[1]",
                "no node \"c\"",
            ),
            ("events: [{at: 1s, delete-pod: x/y}]", "events[0].delete-pod", "no pod \"x/y\""),
            ("pods: [{name: a/b}]\nexpect: [{at: 1s, pod: a/c, deleted: true}]", "expect[0].pod", "no pod"),
            ("expect: [{at: 1s, node: n, writes: 0}]", "expect[0].node", "no node"),
            ("config: {node-eviction-rate: -1}", "config.node-eviction-rate", "non-negative"),
            (
                "cluster: {kubelet: {node-lease-duration-seconds: 0}}",
                "cluster.kubelet.node-lease-duration-seconds",
                "between",
            ),
            (
                "cluster: {kubelet: {node-status-report-frequency: 0s}}",
                "cluster.kubelet.node-status-report-frequency",
                "positive",
            ),
            ("run-until: -1s", "run-until", "before t=0"),
            ("run-until: 5s\nexpect: [{at: 6s, zone: z, tainted: 0}]", "expect[0].at", "after run-until"),
            ("nodes: [{name: a, heartbeat: 0s}]", "nodes[0].heartbeat", "`ready` is not given"),
            ("nodes: [{name: a, conditions: {Ready: 'True'}}]", "nodes[0].conditions.Ready", "`ready` field"),
            (
                "nodes: [{name: a, zone: r/z, labels: {topology.kubernetes.io/zone: y}}]",
                "nodes[0].labels.topology.kubernetes.io/zone",
                "conflicts",
            ),
            (
                "nodes: [{name: a}]\nevents: [{at: 1s, set-condition: {node: a, type: Ready, status: 'True'}}]",
                "events[0].set-condition.type",
                "set-ready",
            ),
            (
                "nodes: [{name: a}]\nevents: [{at: 1s, add-node: {name: a}}]",
                "events[0].add-node.name",
                "already exists",
            ),
            ("events: [{at: -1s, restart-controller: true}]", "events[0].at", "before t=0"),
        ] {
            let e = error(text);
            assert_eq!(e.path(), Some(path), "{text}: {e}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn pods_may_name_nodes_that_do_not_exist_yet_and_names_may_come_back() {
        parse("pods: [{name: a/b, node: later}]\nevents: [{at: 5s, add-node: {name: later}}]");
        parse("pods: [{name: a/b, node: nowhere}]");
        parse(
            "nodes: [{name: a}]\nevents:\n- {at: 2s, add-node: {name: a}}\n- {at: 1s, delete-node: a}\n\
             - {at: 3s, set-ready: {node: a, status: 'False'}}",
        );
    }

    const RESCHEDULER: &str = r#"
config: {enable-rescheduler: true}
cluster: {scheduler: true}
nodes:
- {name: a, ready: "True", allocatable: {cpu: 3500m, memory: 8Gi, pods: 50}}
- {name: b, ready: "True", allocatable: {cpu: 2, memory: 1e9}}
budgets:
- {name: default/web, selector: {matchLabels: {app: web}}, min-available: "50%"}
- name: default/db
  selector: {matchExpressions: [{key: app, operator: In, values: [db]}]}
  max-unavailable: 1
pods:
- name: kube-system/dns
  requests: {cpu: 100m, memory: 70Mi}
  priority-class: system-cluster-critical
  critical: true
  labels: {k8s-app: kube-dns}
  owner: ReplicaSet
  grace-period: 45s
  node-selector: {kubernetes.io/os: linux}
  affinity: {nodeSelectorTerms: [{matchExpressions: [{key: disk, operator: Exists}]}]}
  unschedulable-since: -5s
- {name: kube-system/etcd-a, node: a, mirror: true, requests: {cpu: 0.5}}
events:
- {at: 5s, add-budget: {name: default/x, max-unavailable: 10%}}
- {at: 6s, delete-budget: default/db}
- {at: 7s, set-allocatable: {node: b, allocatable: {cpu: 4}}}
expect:
- {at: 10s, pod: kube-system/dns, node: a, terminating: false, unschedulable: false}
- {at: 10s, pod: kube-system/etcd-a, node: null}
- {at: 10s, node: a, has-taints: ["CriticalAddonsOnly:NoSchedule"]}
"#;

    #[test]
    fn rescheduler_fields_parse() {
        use nodewarden_model::Resources;

        use crate::scenario::{DEFAULT_ALLOCATABLE, IntOrPercent};
        let s = parse(RESCHEDULER);
        assert!(s.cluster.scheduler);
        assert_eq!(
            s.nodes[0].allocatable.as_ref().map(|a| a.resources()),
            Some(Resources { cpu_millis: 3500, memory_bytes: 8 << 30, pods: 50 })
        );
        assert_eq!(
            s.nodes[1].allocatable.as_ref().map(|a| a.resources()),
            Some(Resources { cpu_millis: 2000, memory_bytes: 1_000_000_000, pods: DEFAULT_ALLOCATABLE.pods })
        );
        assert_eq!(s.budgets[0].min_available, Some(IntOrPercent::Percent(50)));
        assert_eq!(s.budgets[1].max_unavailable, Some(IntOrPercent::Int(1)));
        assert_eq!(s.budgets[1].selector.match_expressions[0].values, ["db"]);
        let dns = &s.pods[0].scheduling;
        assert_eq!(dns.requests.resources(), Resources::pod(100, 70 << 20));
        assert_eq!(dns.priority_class.as_deref(), Some("system-cluster-critical"));
        assert!(dns.critical);
        assert_eq!(dns.owner.as_deref(), Some("ReplicaSet"));
        assert_eq!(dns.grace_period, Some(secs(45)));
        assert_eq!(dns.node_selector["kubernetes.io/os"], "linux");
        assert_eq!(dns.affinity.as_ref().map(|a| a.node_selector_terms.len()), Some(1));
        assert_eq!(dns.unschedulable_since, Some(TimeSpec::At(secs(-5))));
        assert!(s.pods[1].scheduling.mirror);
        assert_eq!(s.pods[1].scheduling.requests.resources().cpu_millis, 500);
        assert!(
            matches!(&s.events[0].action, EventAction::AddBudget(b) if b.max_unavailable == Some(IntOrPercent::Percent(10)))
        );
        assert!(matches!(&s.events[1].action, EventAction::DeleteBudget(b) if b == "default/db"));
        assert!(
            matches!(&s.events[2].action, EventAction::SetAllocatable(a) if a.allocatable.resources().cpu_millis == 4000)
        );
        let Subject::Pod { checks, .. } = &s.expect[0].subject else { panic!("{:?}", s.expect[0]) };
        assert_eq!(checks.node, Some(Some("a".to_string())));
        assert_eq!((checks.terminating, checks.unschedulable), (Some(false), Some(false)));
        let Subject::Pod { checks, .. } = &s.expect[1].subject else { panic!("{:?}", s.expect[1]) };
        assert_eq!(checks.node, Some(None));
        assert!(matches!(&s.expect[2].subject, Subject::Node { name, .. } if name == "a"));
        // Without any of it, a pod is what the contract describes.
        let plain = parse("pods: [{name: a/b}]");
        assert_eq!(*plain.pods[0].scheduling, crate::scenario::PodSchedulingSpec::default());
        assert!(!plain.cluster.scheduler && plain.budgets.is_empty());
    }

    #[test]
    fn expectations_may_name_a_replacement() {
        parse("pods: [{name: d/web-1}]\nexpect: [{at: 1s, pod: d/web-1-r2, unschedulable: true}]");
        let e = error("pods: [{name: d/web-1}]\nexpect: [{at: 1s, pod: d/web-2-r1, unschedulable: true}]");
        assert_eq!(e.path(), Some("expect[0].pod"), "{e}");
        let e = error("pods: [{name: d/web-1}]\nevents: [{at: 1s, delete-pod: d/web-1-r1}]");
        assert_eq!(e.path(), Some("events[0].delete-pod"), "only expectations and marks: {e}");
    }

    #[test]
    fn mark_unschedulable_names_a_defined_pod_or_its_replacement() {
        let s = parse(
            "pods: [{name: d/web-1}]\nevents: [{at: 1s, mark-unschedulable: {pod: d/web-1}}, \
             {at: 2s, mark-unschedulable: {pod: d/web-1-r1}}]",
        );
        let marked: Vec<&str> = s
            .events
            .iter()
            .filter_map(|e| match &e.action {
                EventAction::MarkUnschedulable(m) => Some(m.pod.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(marked, ["d/web-1", "d/web-1-r1"]);
        for (text, path, needle) in [
            (
                "pods: [{name: d/web-1}]\nevents: [{at: 1s, mark-unschedulable: {pod: d/web-2}}]",
                "events[0].mark-unschedulable.pod",
                "no pod",
            ),
            (
                "pods: [{name: d/web-1}]\nevents: [{at: 1s, mark-unschedulable: {pod: d/web-1, since: 0s}}]",
                "events[0].mark-unschedulable.since",
                "unknown field",
            ),
            (
                "pods: [{name: d/web-1}]\nevents: [{at: 1s, mark-unschedulable: d/web-1}]",
                "events[0].mark-unschedulable",
                "invalid type",
            ),
            (
                "pods: [{name: d/web-1}]\nevents: [{at: 1s, mark-unschedulable: {pod: d/web-1}, delete-pod: d/web-1}]",
                "events[0]",
                "exactly one action",
            ),
        ] {
            let e = error(text);
            assert_eq!(e.path(), Some(path), "{text}: {e}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn bad_rescheduler_values_name_their_field() {
        for (text, path, needle) in [
            ("nodes: [{name: a, allocatable: {cpu: lots}}]", "nodes[0].allocatable.cpu", "quantity \"lots\""),
            ("nodes: [{name: a, allocatable: {memory: -1Gi}}]", "nodes[0].allocatable.memory", "negative"),
            ("nodes: [{name: a, allocatable: {gpu: 1}}]", "nodes[0].allocatable.gpu", "unknown field"),
            ("pods: [{name: a/b, requests: {cpu: 1x}}]", "pods[0].requests.cpu", "unknown suffix"),
            ("pods: [{name: a/b, requests: {memory: [1]}}]", "pods[0].requests.memory", "memory quantity"),
            ("pods: [{name: a/b, grace-period: 30}]", "pods[0].grace-period", "has no unit"),
            ("pods: [{name: a/b, grace-period: -1s}]", "pods[0]", "must not be negative"),
            ("pods: [{name: a/b, owner: DaemonSet}]", "pods[0]", "daemonset: true"),
            ("pods: [{name: a/b, node: n, unschedulable-since: 0s}]", "pods[0]", "unscheduled pod"),
            (
                "pods: [{name: a/b, affinity: {nodeSelectorTerms: [{matchExpressions: [{key: k, operator: Near}]}]}}]",
                "pods[0].affinity.nodeSelectorTerms[0].matchExpressions[0].operator",
                "unknown variant",
            ),
            ("pods: [{name: a/b, colour: red}]", "pods[0].colour", "unknown field"),
            ("pods: [{name: a/b, labels: {'': x}}]", "pods[0].labels", "must not be empty"),
            ("budgets: [{name: b, min-available: 1}]", "budgets[0].name", "namespace/name"),
            ("budgets: [{name: a/b, min-available: 1, max-unavailable: 1}]", "budgets[0]", "not both"),
            ("budgets: [{name: a/b}]", "budgets[0]", "needs min-available"),
            ("budgets: [{name: a/b, min-available: 150%}]", "budgets[0].min-available", "at most 100%"),
            ("budgets: [{name: a/b, max-unavailable: -1}]", "budgets[0].max-unavailable", "negative"),
            ("budgets: [{name: a/b, max-unavailable: half}]", "budgets[0].max-unavailable", "percentage"),
            ("budgets: [{name: a/b, min-available: 1}, {name: a/b, min-available: 2}]", "budgets[1].name", "duplicate"),
            (
                "budgets: [{name: a/b, selector: {matchLabel: {}}, min-available: 1}]",
                "budgets[0].selector.matchLabel",
                "unknown field",
            ),
            ("events: [{at: 1s, delete-budget: a/b}]", "events[0].delete-budget", "no budget"),
            (
                "events: [{at: 1s, set-allocatable: {node: x, allocatable: {cpu: 1}}}]",
                "events[0].set-allocatable.node",
                "no node",
            ),
            ("cluster: {scheduler: yes}", "cluster.scheduler", "invalid type"),
            ("nodes: [{name: a}]\nexpect: [{at: 1s, node: null, ready: 'True'}]", "expect[0]", "not null"),
            (
                "pods: [{name: a/b}]\nexpect: [{at: 1s, pod: a/b, unschedulable: maybe}]",
                "expect[0].unschedulable",
                "invalid type",
            ),
            (
                "nodes: [{name: a}]\nexpect: [{at: 1s, node: a, terminating: true}]",
                "expect[0]",
                "not a check for a node",
            ),
        ] {
            let e = error(text);
            assert_eq!(e.path(), Some(path), "{text}: {e}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
        // Parse errors carry the line.
        let e = error("nodes:\n- name: a\n  allocatable:\n    cpu: 2\n    memory: 12Qi\n");
        assert_eq!(e.location().map(|l| l.line), Some(5), "{e}");
        assert!(e.to_string().starts_with("nodes[0].allocatable.memory (line 5"), "{e}");
        let e = error("nodes: []\nbudgets:\n- name: a/b\n  min-available: 1\n  max-unavailable: 1\n");
        assert_eq!((e.path(), e.location().map(|l| l.line)), (Some("budgets[0]"), Some(3)), "{e}");
    }

    #[test]
    fn garbage_never_panics() {
        for text in [
            "",
            "~",
            "[]",
            "42",
            "\"x\"",
            "nodes: 3",
            "nodes: [3]",
            "events: [[]]",
            "expect: {}",
            "{",
            ":",
            "- - -",
            "nodes: [{name: [a]}]",
            "run-until: 999999999999h",
            "&a [*a]",
            "nodes: [{name: a, labels: {k: [1]}}]",
            "\t",
            "a: b\n---\nc: d",
        ] {
            let _ = parse_scenario(text);
        }
    }
}
