//! The timeline's checks: each event happens within the run and names what
//! exists somewhere in the file, and, walked in replay order, no event
//! creates a name that exists at that moment.

use std::collections::BTreeSet;

use nodewarden_model::{ConditionType, Span};

use super::err;
use super::names::Names;
use crate::error::ScenarioError;
use crate::scenario::{EventAction, EventEntry, Scenario};

/// One event at `base`: it happens by `end`, and what it names exists.
pub(super) fn check_event(base: &str, e: &EventEntry, end: Span, names: &Names<'_>) -> Result<(), ScenarioError> {
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
pub(super) fn check_creations(s: &Scenario) -> Result<(), ScenarioError> {
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

#[cfg(test)]
mod tests {
    use crate::scenario::EventAction;
    use crate::validate::tests::{error, parse};

    #[test]
    fn pods_may_name_nodes_that_do_not_exist_yet_and_names_may_come_back() {
        parse("pods: [{name: a/b, node: later}]\nevents: [{at: 5s, add-node: {name: later}}]");
        parse("pods: [{name: a/b, node: nowhere}]");
        parse(
            "nodes: [{name: a}]\nevents:\n- {at: 2s, add-node: {name: a}}\n- {at: 1s, delete-node: a}\n\
             - {at: 3s, set-ready: {node: a, status: 'False'}}",
        );
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
}
