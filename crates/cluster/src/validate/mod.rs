//! Reading a scenario, and the checks that need the whole file: unique
//! names, references to nodes and pods that exist somewhere, flags that can
//! work, times inside the run.
//!
//! By concern: `read` turns text into a [`Scenario`] and names serde's
//! errors, `names` checks each definition and collects the names a file
//! defines, `events` checks the timeline against them; this file is the
//! order the checks run in, and the settings'.

mod events;
mod names;
mod read;

pub use read::{load_scenario, parse_scenario};

use nodewarden_model::Span;

use crate::error::ScenarioError;
use crate::scenario::{Scenario, Subject};
use events::{check_creations, check_event};
use names::Names;

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
    if let Err(e) = s.cluster.api.check() {
        let (field, problem) = e.split_once(": ").unwrap_or(("", e.as_str()));
        return Err(err(format!("cluster.api.{field}"), problem));
    }
    if let Some(r) = s.run_until
        && r.is_negative()
    {
        return Err(err("run-until", format!("must not be before t=0, got {r}")));
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
    use super::*;

    /// `text` parsed and validated; panics with the error otherwise.
    pub(super) fn parse(text: &str) -> Scenario {
        match parse_scenario(text) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    /// The error `text` is refused with; panics when it is accepted.
    pub(super) fn error(text: &str) -> ScenarioError {
        match parse_scenario(text) {
            Ok(s) => panic!("accepted: {s:?}"),
            Err(e) => e,
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
            ("cluster: {api: {kube-api-qps: 0}}", "cluster.api.kube-api-qps", "at least 0.001"),
            ("cluster: {api: {kube-api-burst: 0}}", "cluster.api.kube-api-burst", "at least 1"),
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
    fn expectations_may_name_a_replacement() {
        parse("pods: [{name: d/web-1}]\nexpect: [{at: 1s, pod: d/web-1-r2, unschedulable: true}]");
        let e = error("pods: [{name: d/web-1}]\nexpect: [{at: 1s, pod: d/web-2-r1, unschedulable: true}]");
        assert_eq!(e.path(), Some("expect[0].pod"), "{e}");
        let e = error("pods: [{name: d/web-1}]\nevents: [{at: 1s, delete-pod: d/web-1-r1}]");
        assert_eq!(e.path(), Some("events[0].delete-pod"), "only expectations and marks: {e}");
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
}
