//! The timeline of a scenario file: each event's action, as one flat
//! mapping checked for exactly one action.
//!
//! Invariant: an event names exactly one action of [`EventAction`]; anything
//! else is an error at the event's YAML position.

use std::collections::BTreeMap;
use std::fmt;

use nodewarden_model::{ConditionStatus, ConditionType, Span, Taint, Toleration};
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use super::*;

/// `set-allocatable: {node, allocatable}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SetAllocatable {
    /// The node.
    pub node: String,
    /// Its new allocatable (dimensions left out take the defaults).
    #[serde(default, deserialize_with = "null_as_default")]
    pub allocatable: AllocatableSpec,
}

/// One or more names: `[a, b]` or just `a`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameList(pub Vec<String>);

impl<'de> Deserialize<'de> for NameList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<NameList, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NameList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a name or a list of names")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<NameList, E> {
                Ok(NameList(vec![v.to_string()]))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<NameList, E> {
                Ok(NameList(vec![v.to_string()]))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<NameList, E> {
                Ok(NameList(vec![v.to_string()]))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<NameList, A::Error> {
                let mut names = Vec::new();
                while let Some(n) = seq.next_element::<String>()? {
                    names.push(n);
                }
                Ok(NameList(names))
            }
        }
        // A visitor rather than an untagged enum: it keeps error positions.
        d.deserialize_any(V)
    }
}

/// `set-ready: {node, status}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SetReady {
    /// The node.
    pub node: String,
    /// The new Ready status.
    pub status: ConditionStatus,
}

/// `set-condition: {node, type, status}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SetCondition {
    /// The node.
    pub node: String,
    /// The condition type (not Ready: use `set-ready`).
    #[serde(rename = "type")]
    pub kind: ConditionType,
    /// Its new status.
    pub status: ConditionStatus,
}

/// `remove-condition: {node, type}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RemoveCondition {
    /// The node.
    pub node: String,
    /// The condition type to remove (Ready included).
    #[serde(rename = "type")]
    pub kind: ConditionType,
}

/// `set-taints: {node, taints}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SetTaints {
    /// The node.
    pub node: String,
    /// Its whole new taint set.
    #[serde(default, deserialize_with = "null_as_default")]
    pub taints: Vec<Taint>,
}

/// `set-unschedulable: {node, value}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SetUnschedulable {
    /// The node.
    pub node: String,
    /// The new `spec.unschedulable`.
    pub value: bool,
}

/// `set-lease: {node, renew}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SetLease {
    /// The node (and Lease) name.
    pub node: String,
    /// The new `renewTime`; may be older than before.
    pub renew: TimeSpec,
}

/// `set-tolerations: {pod, tolerations}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SetTolerations {
    /// The pod.
    pub pod: String,
    /// Exactly the new tolerations (admission does not run on updates).
    #[serde(default, deserialize_with = "null_as_default")]
    pub tolerations: Vec<Toleration>,
}

/// `bind-pod: {pod, node}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct BindPod {
    /// The pod.
    pub pod: String,
    /// The node it is bound to.
    pub node: String,
}

/// `mark-unschedulable: {pod}`: the scheduler's verdict on a pod it could
/// not place, for files that do not run the simulated scheduler.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct MarkUnschedulable {
    /// The pod (one the file defines, or a controller's replacement of
    /// one, `<name>-r<N>`).
    pub pod: String,
}

/// `set-labels: {node, labels}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SetLabels {
    /// The node.
    pub node: String,
    /// Labels merged into the node's; a `null` value removes the label.
    #[serde(default, deserialize_with = "null_as_default")]
    pub labels: BTreeMap<String, Option<String>>,
}

/// What one scenario event does.
#[derive(Clone, Debug, PartialEq)]
pub enum EventAction {
    /// Lease `renewTime` = now for each node.
    RenewLease(Vec<String>),
    /// Post a Ready status (heartbeat = now).
    SetReady(SetReady),
    /// Set another condition (Ready untouched).
    SetCondition(SetCondition),
    /// Stop these simulated kubelets.
    KubeletStop(Vec<String>),
    /// Start these simulated kubelets (renew and post Ready=True at once).
    KubeletStart(Vec<String>),
    /// Create a node.
    AddNode(NodeSpec),
    /// Delete a node (its pods stay bound).
    DeleteNode(String),
    /// Create a pod (admission defaults apply).
    AddPod(PodSpec),
    /// Delete a pod.
    DeletePod(String),
    /// Replace a node's taints.
    SetTaints(SetTaints),
    /// Set `spec.unschedulable`.
    SetUnschedulable(SetUnschedulable),
    /// Set the Lease's `renewTime`.
    SetLease(SetLease),
    /// Remove a node condition.
    RemoveCondition(RemoveCondition),
    /// Replace a pod's tolerations.
    SetTolerations(SetTolerations),
    /// Bind a pod to a node.
    BindPod(BindPod),
    /// Merge labels into a node's.
    SetLabels(SetLabels),
    /// Drop all controller memory and rebuild it from the cluster.
    RestartController,
    /// Create (or replace) a PodDisruptionBudget.
    AddBudget(BudgetSpec),
    /// Delete a PodDisruptionBudget.
    DeleteBudget(String),
    /// Change a node's allocatable.
    SetAllocatable(SetAllocatable),
    /// The scheduler marks an unbound pod `PodScheduled=False`, reason
    /// `Unschedulable`, now (a pod already marked keeps its time).
    MarkUnschedulable(MarkUnschedulable),
}

impl EventAction {
    /// The file spelling of this action's key.
    pub fn name(&self) -> &'static str {
        match self {
            EventAction::RenewLease(_) => "renew-lease",
            EventAction::SetReady(_) => "set-ready",
            EventAction::SetCondition(_) => "set-condition",
            EventAction::KubeletStop(_) => "kubelet-stop",
            EventAction::KubeletStart(_) => "kubelet-start",
            EventAction::AddNode(_) => "add-node",
            EventAction::DeleteNode(_) => "delete-node",
            EventAction::AddPod(_) => "add-pod",
            EventAction::DeletePod(_) => "delete-pod",
            EventAction::SetTaints(_) => "set-taints",
            EventAction::SetUnschedulable(_) => "set-unschedulable",
            EventAction::SetLease(_) => "set-lease",
            EventAction::RemoveCondition(_) => "remove-condition",
            EventAction::SetTolerations(_) => "set-tolerations",
            EventAction::BindPod(_) => "bind-pod",
            EventAction::SetLabels(_) => "set-labels",
            EventAction::RestartController => "restart-controller",
            EventAction::AddBudget(_) => "add-budget",
            EventAction::DeleteBudget(_) => "delete-budget",
            EventAction::SetAllocatable(_) => "set-allocatable",
            EventAction::MarkUnschedulable(_) => "mark-unschedulable",
        }
    }
}

/// One entry of `events`: an instant and exactly one action.
#[derive(Clone, Debug, PartialEq)]
pub struct EventEntry {
    /// When it happens.
    pub at: Span,
    /// What happens.
    pub action: EventAction,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawEvent {
    at: Span,
    #[serde(default)]
    renew_lease: Option<NameList>,
    #[serde(default)]
    set_ready: Option<SetReady>,
    #[serde(default)]
    set_condition: Option<SetCondition>,
    #[serde(default)]
    kubelet_stop: Option<NameList>,
    #[serde(default)]
    kubelet_start: Option<NameList>,
    #[serde(default)]
    add_node: Option<NodeSpec>,
    #[serde(default)]
    delete_node: Option<String>,
    #[serde(default)]
    add_pod: Option<PodSpec>,
    #[serde(default)]
    delete_pod: Option<String>,
    #[serde(default)]
    set_taints: Option<SetTaints>,
    #[serde(default)]
    set_unschedulable: Option<SetUnschedulable>,
    #[serde(default)]
    set_lease: Option<SetLease>,
    #[serde(default)]
    remove_condition: Option<RemoveCondition>,
    #[serde(default)]
    set_tolerations: Option<SetTolerations>,
    #[serde(default)]
    bind_pod: Option<BindPod>,
    #[serde(default)]
    set_labels: Option<SetLabels>,
    #[serde(default)]
    restart_controller: Option<bool>,
    #[serde(default)]
    add_budget: Option<BudgetSpec>,
    #[serde(default)]
    delete_budget: Option<String>,
    #[serde(default)]
    set_allocatable: Option<SetAllocatable>,
    #[serde(default)]
    mark_unschedulable: Option<MarkUnschedulable>,
}

const EVENT_ACTIONS: &str = "renew-lease, set-ready, set-condition, kubelet-stop, kubelet-start, \
     add-node, delete-node, add-pod, delete-pod, set-taints, set-unschedulable, set-lease, \
     remove-condition, set-tolerations, bind-pod, set-labels, restart-controller, add-budget, \
     delete-budget, set-allocatable, mark-unschedulable";

impl TryFrom<RawEvent> for EventEntry {
    type Error = String;

    fn try_from(r: RawEvent) -> Result<EventEntry, String> {
        let mut actions = Vec::new();
        if let Some(v) = r.renew_lease {
            actions.push(EventAction::RenewLease(v.0));
        }
        if let Some(v) = r.set_ready {
            actions.push(EventAction::SetReady(v));
        }
        if let Some(v) = r.set_condition {
            actions.push(EventAction::SetCondition(v));
        }
        if let Some(v) = r.kubelet_stop {
            actions.push(EventAction::KubeletStop(v.0));
        }
        if let Some(v) = r.kubelet_start {
            actions.push(EventAction::KubeletStart(v.0));
        }
        if let Some(v) = r.add_node {
            actions.push(EventAction::AddNode(v));
        }
        if let Some(v) = r.delete_node {
            actions.push(EventAction::DeleteNode(v));
        }
        if let Some(v) = r.add_pod {
            actions.push(EventAction::AddPod(v));
        }
        if let Some(v) = r.delete_pod {
            actions.push(EventAction::DeletePod(v));
        }
        if let Some(v) = r.set_taints {
            actions.push(EventAction::SetTaints(v));
        }
        if let Some(v) = r.set_unschedulable {
            actions.push(EventAction::SetUnschedulable(v));
        }
        if let Some(v) = r.set_lease {
            actions.push(EventAction::SetLease(v));
        }
        if let Some(v) = r.remove_condition {
            actions.push(EventAction::RemoveCondition(v));
        }
        if let Some(v) = r.set_tolerations {
            actions.push(EventAction::SetTolerations(v));
        }
        if let Some(v) = r.bind_pod {
            actions.push(EventAction::BindPod(v));
        }
        if let Some(v) = r.set_labels {
            actions.push(EventAction::SetLabels(v));
        }
        if let Some(v) = r.add_budget {
            actions.push(EventAction::AddBudget(v));
        }
        if let Some(v) = r.delete_budget {
            actions.push(EventAction::DeleteBudget(v));
        }
        if let Some(v) = r.set_allocatable {
            actions.push(EventAction::SetAllocatable(v));
        }
        if let Some(v) = r.mark_unschedulable {
            actions.push(EventAction::MarkUnschedulable(v));
        }
        match r.restart_controller {
            Some(true) => actions.push(EventAction::RestartController),
            Some(false) => {
                return Err(
                    "restart-controller: the only value is `true` (remove the event to not restart)".to_string()
                );
            }
            None => {}
        }
        if actions.len() > 1 {
            let names: Vec<&str> = actions.iter().map(EventAction::name).collect();
            return Err(format!(
                "an event has exactly one action besides `at`, found {}: {}",
                actions.len(),
                names.join(", ")
            ));
        }
        match actions.pop() {
            Some(action) => Ok(EventEntry { at: r.at, action }),
            None => Err(format!("an event needs an action besides `at`, one of: {EVENT_ACTIONS}")),
        }
    }
}

impl<'de> Deserialize<'de> for EventEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<EventEntry, D::Error> {
        deserialize_checked::<D, RawEvent, EventEntry>(d, "an event: a mapping with `at` and one action")
    }
}
