//! The names a file defines, up front or by an event, each definition
//! checked on the way (a node's Ready fields and labels, a pod's or
//! budget's `namespace/name`), and the lookups the timeline and the
//! expectations check their references with.

use std::collections::BTreeMap;

use nodewarden_model::{ConditionType, keys};

use super::{err, is_pod_key};
use crate::error::ScenarioError;
use crate::scenario::{BudgetSpec, EventAction, NodeSpec, PodSpec, Scenario};

/// Every name a file defines anywhere (up front or by an event), with the
/// path that defined it first.
pub(super) struct Names<'a> {
    pub(super) nodes: BTreeMap<&'a str, String>,
    pub(super) pods: BTreeMap<&'a str, String>,
    pub(super) budgets: BTreeMap<&'a str, String>,
}

impl<'a> Names<'a> {
    /// Checks each definition and collects the names; a name defined twice
    /// up front is an error (an event may create a name again later, which
    /// [`check_creations`](super::events::check_creations) judges in time order).
    pub(super) fn of(s: &'a Scenario) -> Result<Names<'a>, ScenarioError> {
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
    pub(super) fn node(&self, path: String, name: &str) -> Result<(), ScenarioError> {
        if self.nodes.contains_key(name) {
            Ok(())
        } else {
            Err(err(path, format!("no node {name:?} is defined (under nodes or by an add-node event)")))
        }
    }

    /// A reference at `path` to pod `key`.
    pub(super) fn pod(&self, path: String, key: &str) -> Result<(), ScenarioError> {
        if self.pods.contains_key(key) {
            Ok(())
        } else {
            Err(err(path, format!("no pod {key:?} is defined (under pods or by an add-pod event)")))
        }
    }

    /// True when `key` is a defined pod or a controller's replacement of
    /// one (`<name>-r<N>`), which the cluster may create.
    pub(super) fn has_pod_or_replaced(&self, key: &str) -> bool {
        self.pods.contains_key(crate::rules::recreate::replacement_base(key))
    }
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
