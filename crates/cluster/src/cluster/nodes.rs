//! Nodes and their Leases in the simulated cluster: creation from a
//! scenario's spec, the kubelets' and the timeline's writes, and the node
//! table the kubelets address by row.
//!
//! Invariant: after every change to a node, its row in the node table
//! (`NodeRow`) says what the node says (Ready status, controller NoExecute
//! taint), and a change a scheduling verdict can depend on moves the
//! cluster's epoch.

use std::collections::{BTreeMap, HashMap};

use nodewarden_engine::{NodeSnapshot, Observation};
use nodewarden_model::{CompactName, ConditionStatus, ConditionType, NodeCondition, Taint, Timestamp, ZoneKey, keys};
use tracing::warn;

use super::scheduling::scheduling_view_changed;
use super::{Cluster, Hasher};
use crate::kubelet::{KubeletApi, NodeHandle};
use crate::rules::node::{edit_labels, is_controller_noexecute, post_condition, ready_reason, ready_status};
use crate::scenario::NodeSpec;

/// One name's row in [`Cluster`]'s node table.
#[derive(Clone, Debug)]
pub(super) struct NodeRow {
    /// The name.
    pub(super) name: CompactName,
    /// The node's Ready status (`Some(None)`: no Ready condition); `None`
    /// while no node of this name exists.
    pub(super) ready: Option<Option<ConditionStatus>>,
    /// The Lease's renew time; `None` while there is no Lease.
    pub(super) lease: Option<Timestamp>,
    /// The node carries a `not-ready` or `unreachable` NoExecute taint.
    pub(super) noexecute: bool,
}

/// A node as the timeline samples it ([`Cluster::node_summaries`]).
#[derive(Clone, Copy, Debug)]
pub struct NodeSummary<'a> {
    /// Its row in the cluster's node table (stable for the name).
    pub row: usize,
    /// Its name.
    pub name: &'a str,
    /// Its Ready status; `None` without a Ready condition.
    pub ready: Option<ConditionStatus>,
    /// It carries a `not-ready` or `unreachable` NoExecute taint.
    pub noexecute: bool,
}

/// Brings a node's row in line with the node (after any change to it).
pub(super) fn sync_row(rows: &mut [NodeRow], row_of: &HashMap<CompactName, u32, Hasher>, node: &NodeSnapshot) {
    if let Some(&r) = row_of.get(node.name.as_str())
        && let Some(row) = rows.get_mut(r as usize)
    {
        row.ready = Some(ready_status(&node.conditions));
        row.noexecute = node.taints.iter().any(is_controller_noexecute);
    }
}

/// Builds the node a [`NodeSpec`] describes, and its Lease renew time, as
/// of `now` (the time `now` in the spec stands for).
pub fn node_from_spec(spec: &NodeSpec, now: Timestamp) -> (NodeSnapshot, Option<Timestamp>) {
    let created = spec.created.map_or(now, |t| t.resolve(now));
    let mut labels = spec.labels.clone();
    if let Some(zone) = &spec.zone {
        let key = ZoneKey::parse(zone);
        if !key.region.is_empty() {
            labels.insert(keys::LABEL_TOPOLOGY_REGION.to_string(), key.region);
        }
        if !key.zone.is_empty() {
            labels.insert(keys::LABEL_TOPOLOGY_ZONE.to_string(), key.zone);
        }
    }
    let heartbeat = spec.heartbeat.map_or(now, |t| t.resolve(now));
    let transition = spec.transition.map_or(created, |t| t.resolve(now));
    let mut conditions = Vec::new();
    if let Some(status) = spec.ready {
        conditions.push(NodeCondition {
            kind: ConditionType::Ready,
            status,
            reason: ready_reason(status).to_string(),
            message: String::new(),
            last_heartbeat: heartbeat,
            last_transition: transition,
        });
    }
    for (kind, status) in &spec.conditions {
        conditions.push(NodeCondition {
            kind: kind.clone(),
            status: *status,
            reason: String::new(),
            message: String::new(),
            last_heartbeat: heartbeat,
            last_transition: transition,
        });
    }
    let node = NodeSnapshot {
        version: 0,
        allocatable: None,
        name: spec.name.clone(),
        created,
        labels,
        conditions,
        taints: spec.taints.clone(),
        unschedulable: spec.unschedulable,
    };
    (node, spec.lease.map(|t| t.resolve(now)))
}

impl Cluster {
    /// The node, if it exists now.
    pub fn node(&self, name: &str) -> Option<&NodeSnapshot> {
        self.nodes.get(name)
    }

    /// Every node that exists now, by name.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeSnapshot> {
        self.nodes.values()
    }

    /// True when a node of this name existed at some point.
    pub fn node_ever_existed(&self, name: &str) -> bool {
        self.ever_nodes.contains(name)
    }

    /// The node's stored Ready status: `None` when the node does not exist,
    /// `Some(None)` when it has no Ready condition.
    pub fn ready_status(&self, name: &str) -> Option<Option<ConditionStatus>> {
        self.find_row(name).and_then(|r| r.ready)
    }

    /// The node's Lease renew time; `None` when it has no Lease.
    pub fn lease(&self, name: &str) -> Option<Timestamp> {
        self.find_row(name).and_then(|r| r.lease)
    }

    fn find_row(&self, name: &str) -> Option<&NodeRow> {
        self.row_of.get(name).and_then(|&r| self.rows.get(r as usize))
    }

    /// The name's row, made on first use.
    fn row(&mut self, name: &str) -> u32 {
        if let Some(&r) = self.row_of.get(name) {
            return r;
        }
        let r = u32::try_from(self.rows.len()).unwrap_or(u32::MAX);
        let name = CompactName::from(name);
        self.rows.push(NodeRow { name: name.clone(), ready: None, lease: None, noexecute: false });
        self.row_of.insert(name, r);
        r
    }

    /// A kubelet's handle on the node's row (made now if the name has
    /// none yet).
    pub fn node_handle(&mut self, name: &str) -> NodeHandle {
        let r = self.row(name);
        NodeHandle::at_row(self.rows[r as usize].name.clone(), r)
    }

    /// The row a handle names, if it is that node's row here.
    fn row_at(&self, handle: &NodeHandle) -> Option<usize> {
        let r = handle.row()? as usize;
        self.rows.get(r).filter(|row| row.name == *handle.compact_name()).map(|_| r)
    }

    /// [`Cluster::ready_status`] through a kubelet's handle.
    pub fn ready_status_at(&self, handle: &NodeHandle) -> Option<Option<ConditionStatus>> {
        match self.row_at(handle) {
            Some(r) => self.rows[r].ready,
            None => self.ready_status(handle.name()),
        }
    }

    /// [`Cluster::set_lease`] through a kubelet's handle, appending the
    /// observation (if the renew time moved) to `out`.
    pub fn set_lease_at(&mut self, handle: &NodeHandle, renew: Timestamp, out: &mut Vec<Observation>) {
        let Some(r) = self.row_at(handle) else {
            out.extend(self.set_lease(handle.name(), renew));
            return;
        };
        let row = &mut self.rows[r];
        if row.lease == Some(renew) {
            return;
        }
        row.lease = Some(renew);
        // The name from the handle, which the kubelet just read.
        out.push(Observation::LeaseUpserted { node: String::from(handle.name()), renew: Some(renew) });
    }

    /// Every node that exists now, as the timeline samples it, in no
    /// particular order.
    pub fn node_summaries(&self) -> impl Iterator<Item = NodeSummary<'_>> {
        self.rows.iter().enumerate().filter_map(|(row, r)| {
            r.ready.map(|ready| NodeSummary { row, name: r.name.as_str(), ready, noexecute: r.noexecute })
        })
    }

    /// Creates (or replaces) the node a spec describes, with its Lease.
    pub fn add_node(&mut self, spec: &NodeSpec, now: Timestamp) -> Vec<Observation> {
        let (mut node, lease) = node_from_spec(spec, now);
        if self.tracks_scheduling() {
            let alloc = spec.allocatable_resources();
            self.allocatable.insert(spec.name.clone(), alloc);
            if self.report {
                node.allocatable = Some(alloc);
            }
        }
        let mut out = self.put_node(node);
        if let Some(renew) = lease {
            out.extend(self.set_lease(&spec.name, renew));
        }
        out
    }

    /// Stores a node as given.
    pub fn put_node(&mut self, node: NodeSnapshot) -> Vec<Observation> {
        if self.nodes.get(&node.name) == Some(&node) {
            self.ever_nodes.insert(node.name.clone());
            return Vec::new();
        }
        self.put_node_unobserved(node.clone());
        vec![Observation::NodeUpserted(node)]
    }

    /// [`Cluster::put_node`] for building a cluster before anything watches
    /// it: no observation is made.
    pub fn put_node_unobserved(&mut self, node: NodeSnapshot) {
        self.ever_nodes.insert(node.name.clone());
        self.row(&node.name);
        sync_row(&mut self.rows, &self.row_of, &node);
        self.epoch += 1;
        self.nodes.insert(node.name.clone(), node);
    }

    /// Deletes a node and its Lease; its pods stay bound.
    pub fn delete_node(&mut self, name: &str) -> Vec<Observation> {
        let mut out = Vec::new();
        let row = self.row_of.get(name).map(|&r| r as usize);
        if self.nodes.remove(name).is_some() {
            if let Some(r) = row {
                self.rows[r].ready = None;
                self.rows[r].noexecute = false;
            }
            self.epoch += 1;
            self.allocatable.remove(name);
            out.push(Observation::NodeDeleted { name: name.to_string() });
        } else {
            warn!(node = name, "delete-node: no such node now");
        }
        if let Some(r) = row
            && self.rows[r].lease.take().is_some()
        {
            out.push(Observation::LeaseDeleted { node: name.to_string() });
        }
        out
    }

    /// Sets (creating if needed) the node's Lease renew time.
    pub fn set_lease(&mut self, node: &str, renew: Timestamp) -> Vec<Observation> {
        let r = self.row(node) as usize;
        if self.rows[r].lease.replace(renew) == Some(renew) {
            return Vec::new();
        }
        vec![Observation::LeaseUpserted { node: node.to_string(), renew: Some(renew) }]
    }

    /// Posts a Ready status: heartbeat = now, transition = now only if the
    /// status changed (rule 3).
    pub fn set_ready(&mut self, node: &str, status: ConditionStatus, now: Timestamp) -> Vec<Observation> {
        // What `update_node` does, without its copy of the whole node: every
        // kubelet posts its status every few minutes.
        let Some(n) = self.nodes.get_mut(node) else {
            warn!(node, "set-ready: no such node now; ignored");
            return Vec::new();
        };
        let reason = ready_reason(status);
        let before = n
            .conditions
            .iter()
            .find(|c| c.kind == ConditionType::Ready)
            .map(|c| (c.status, c.last_heartbeat, c.reason == reason && c.message.is_empty()));
        if before == Some((status, now, true)) {
            return Vec::new();
        }
        post_condition(&mut n.conditions, ConditionType::Ready, status, reason, now);
        sync_row(&mut self.rows, &self.row_of, n);
        // The scheduler reads Ready's status (`scheduling_view_changed`).
        if before.map(|(s, _, _)| s) != Some(status) {
            self.epoch += 1;
        }
        vec![Observation::NodeUpserted(n.clone())]
    }

    /// Posts another condition, the same way; Ready is not touched.
    pub fn set_condition(
        &mut self,
        node: &str,
        kind: &ConditionType,
        status: ConditionStatus,
        now: Timestamp,
    ) -> Vec<Observation> {
        self.update_node(node, "set-condition", |n| post_condition(&mut n.conditions, kind.clone(), status, "", now))
    }

    /// Removes a condition (Ready included).
    pub fn remove_condition(&mut self, node: &str, kind: &ConditionType) -> Vec<Observation> {
        self.update_node(node, "remove-condition", |n| n.conditions.retain(|c| &c.kind != kind))
    }

    /// Replaces the node's taints.
    pub fn set_taints(&mut self, node: &str, taints: &[Taint]) -> Vec<Observation> {
        self.update_node(node, "set-taints", |n| n.taints = taints.to_vec())
    }

    /// Sets `spec.unschedulable`.
    pub fn set_unschedulable(&mut self, node: &str, value: bool) -> Vec<Observation> {
        self.update_node(node, "set-unschedulable", |n| n.unschedulable = value)
    }

    /// Merges labels; a `None` value removes the label.
    pub fn set_labels(&mut self, node: &str, labels: &BTreeMap<String, Option<String>>) -> Vec<Observation> {
        self.update_node(node, "set-labels", |n| edit_labels(&mut n.labels, labels))
    }

    pub(super) fn update_node(
        &mut self,
        name: &str,
        what: &str,
        f: impl FnOnce(&mut NodeSnapshot),
    ) -> Vec<Observation> {
        let Some(node) = self.nodes.get_mut(name) else {
            warn!(node = name, "{what}: no such node now; ignored");
            return Vec::new();
        };
        let before = node.clone();
        f(node);
        if *node == before {
            return Vec::new();
        }
        sync_row(&mut self.rows, &self.row_of, node);
        if scheduling_view_changed(&before, node) {
            self.epoch += 1;
        }
        vec![Observation::NodeUpserted(node.clone())]
    }
}

/// The simulated kubelets run against the in-memory cluster through the
/// node table: a kubelet keeps its node's row, so a renewal at 100k nodes
/// is no search by name.
impl KubeletApi for Cluster {
    fn ready_status(&self, node: &str) -> Option<Option<ConditionStatus>> {
        Cluster::ready_status(self, node)
    }

    fn renew_lease(&mut self, node: &str, now: Timestamp) -> Vec<Observation> {
        self.set_lease(node, now)
    }

    fn post_ready(&mut self, node: &str, now: Timestamp) -> Vec<Observation> {
        self.set_ready(node, ConditionStatus::True, now)
    }

    fn handle(&mut self, node: &str) -> Option<NodeHandle> {
        Some(self.node_handle(node))
    }

    fn touch(&self, node: &NodeHandle) -> u64 {
        u64::from(self.ready_status_at(node).is_some())
    }

    fn ready_status_of(&self, node: &NodeHandle) -> Option<Option<ConditionStatus>> {
        self.ready_status_at(node)
    }

    fn renew_lease_of(&mut self, node: &NodeHandle, now: Timestamp, out: &mut Vec<Observation>) {
        self.set_lease_at(node, now, out);
    }

    fn post_ready_of(&mut self, node: &NodeHandle, now: Timestamp, out: &mut Vec<Observation>) {
        out.extend(self.set_ready(node.name(), ConditionStatus::True, now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures::*;

    #[test]
    fn node_from_spec_fills_labels_conditions_and_lease() {
        let (n, lease) = node_from_spec(&node_spec("a"), t(7));
        assert_eq!(n.created, t(-3600));
        assert_eq!(n.labels[keys::LABEL_TOPOLOGY_REGION], "r1");
        assert_eq!(n.labels[keys::LABEL_TOPOLOGY_ZONE], "z1");
        assert_eq!(n.conditions.len(), 2);
        assert_eq!(n.conditions[0].kind, ConditionType::Ready);
        assert_eq!(n.conditions[0].last_heartbeat, t(0));
        assert_eq!(n.conditions[0].last_transition, t(-3600));
        assert_eq!(lease, Some(t(7)));
        let mut spec = node_spec("b");
        spec.zone = Some("/z".into());
        let (n, _) = node_from_spec(&spec, t(0));
        assert!(!n.labels.contains_key(keys::LABEL_TOPOLOGY_REGION));
        assert_eq!(ZoneKey::from_labels(&n.labels).to_string(), "/z");
    }

    #[test]
    fn set_ready_moves_transition_only_on_change() {
        let mut c = cluster();
        let obs = c.set_ready("a", ConditionStatus::True, t(10));
        assert_eq!(obs.len(), 1);
        let ready = &c.node("a").unwrap().conditions[0];
        assert_eq!((ready.last_heartbeat, ready.last_transition), (t(10), t(-3600)));
        c.set_ready("a", ConditionStatus::False, t(20));
        let ready = &c.node("a").unwrap().conditions[0];
        assert_eq!((ready.status, ready.last_heartbeat, ready.last_transition), (ConditionStatus::False, t(20), t(20)));
        // Same status, same time: nothing to observe.
        assert!(c.set_ready("a", ConditionStatus::False, t(20)).is_empty());
        // Unknown node: ignored.
        assert!(c.set_ready("zz", ConditionStatus::True, t(20)).is_empty());
    }

    #[test]
    fn delete_node_drops_its_lease_and_keeps_pods() {
        let mut c = cluster();
        let obs = c.delete_node("a");
        assert_eq!(
            obs,
            vec![Observation::NodeDeleted { name: "a".into() }, Observation::LeaseDeleted { node: "a".into() }]
        );
        assert!(c.node("a").is_none());
        assert!(c.node_ever_existed("a"));
        assert_eq!(c.pod("default/p").unwrap().node.as_deref(), Some("a"));
    }
}
