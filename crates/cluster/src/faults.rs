//! Fault injection: what happens to a simulated cluster, and when.
//!
//! A [`FaultPlan`] is a time-ordered list of [`Fault`]s. Nodes crash (their
//! kubelet stops) and come back (it restarts: renews and posts at once), or
//! are partitioned from the API server (their kubelet keeps its cadence,
//! nothing lands) and reconnect; the whole control plane can be unreachable
//! from the controller for a while; the controller can restart; and a
//! scenario file's events can be replayed as they are.

use nodewarden_engine::Observation;
use nodewarden_model::Timestamp;
use tracing::warn;

use crate::cluster::Cluster;
use crate::kubelet::Kubelets;
use crate::scenario::EventAction;

/// One thing that happens to the cluster or the controller.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// These nodes crash: their kubelets stop.
    Crash(Vec<String>),
    /// These crashed nodes come back: their kubelets start, renew the Lease
    /// and post Ready at once.
    Recover(Vec<String>),
    /// These nodes' kubelets cannot reach the API server any more.
    Partition(Vec<String>),
    /// These partitioned kubelets reach the API server again.
    Heal(Vec<String>),
    /// The controller cannot reach the API server: it gets no observation
    /// and its writes fail. Kubelets are not affected.
    ControlPlaneDown,
    /// The controller reaches the API server again and relists everything.
    ControlPlaneUp,
    /// The controller restarts: a fresh engine, built from the cluster alone.
    RestartController,
    /// A scenario file's event, applied as `nodewarden replay` would.
    Event(EventAction),
}

impl Fault {
    /// The nodes that go down with this fault.
    pub fn nodes_down(&self) -> &[String] {
        match self {
            Fault::Crash(n) | Fault::Partition(n) => n,
            Fault::Event(EventAction::KubeletStop(n)) => n,
            _ => &[],
        }
    }

    /// The nodes that come back with this fault.
    pub fn nodes_up(&self) -> &[String] {
        match self {
            Fault::Recover(n) | Fault::Heal(n) => n,
            Fault::Event(EventAction::KubeletStart(n)) => n,
            _ => &[],
        }
    }
}

/// A fault at its instant, with a line for people.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedFault {
    /// When it happens.
    pub at: Timestamp,
    /// What happens.
    pub fault: Fault,
    /// What happens, for the summary ("zone-a (333 nodes) cannot reach the
    /// API server"); empty to leave it out of the summary.
    pub what: String,
}

/// Faults in time order (ties keep the order they were added in).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultPlan {
    faults: Vec<PlannedFault>,
}

impl FaultPlan {
    /// An empty plan.
    pub fn new() -> FaultPlan {
        FaultPlan::default()
    }

    /// Adds a fault.
    pub fn add(&mut self, at: Timestamp, fault: Fault, what: impl Into<String>) {
        self.faults.push(PlannedFault { at, fault, what: what.into() });
        self.faults.sort_by_key(|f| f.at);
    }

    /// Every fault, in time order.
    pub fn faults(&self) -> &[PlannedFault] {
        &self.faults
    }

    /// Moves every heal of a partition ([`Fault::Heal`]) to `at`: the
    /// built-in zone outage comes back at 50m, which a measurement of the
    /// outage's first minutes (`cargo xtask wire-load --zone-outage`)
    /// cannot wait for. Whether any heal was there to move.
    pub fn heal_at(&mut self, at: Timestamp) -> bool {
        let mut moved = false;
        for f in &mut self.faults {
            if matches!(f.fault, Fault::Heal(_)) {
                f.at = at;
                moved = true;
            }
        }
        self.faults.sort_by_key(|f| f.at);
        moved
    }

    /// The last fault's time, if any.
    pub fn last(&self) -> Option<Timestamp> {
        self.faults.last().map(|f| f.at)
    }
}

/// Applies a scenario event to the cluster and kubelets at `t`, as
/// `nodewarden replay` does, and returns what the watches deliver.
/// `restart-controller` is the caller's to handle (it changes nothing here).
pub fn apply_event(
    cluster: &mut Cluster,
    kubelets: &mut Kubelets,
    t: Timestamp,
    action: &EventAction,
) -> Vec<Observation> {
    let c = cluster;
    match action {
        EventAction::RenewLease(nodes) => nodes.iter().flat_map(|n| c.set_lease(n, t)).collect(),
        EventAction::SetReady(a) => c.set_ready(&a.node, a.status, t),
        EventAction::SetCondition(a) => c.set_condition(&a.node, &a.kind, a.status, t),
        EventAction::KubeletStop(nodes) => {
            for n in nodes {
                kubelets.stop(n);
            }
            Vec::new()
        }
        EventAction::KubeletStart(nodes) => {
            let mut out = Vec::new();
            for n in nodes {
                if c.node(n).is_none() {
                    warn!(node = %n, "kubelet-start: no such node now");
                }
                out.extend(kubelets.start(n, t, c));
            }
            out
        }
        EventAction::AddNode(spec) => {
            let mut out = c.add_node(spec, t);
            if spec.kubelet {
                out.extend(kubelets.start(&spec.name, t, c));
            }
            out
        }
        EventAction::DeleteNode(n) => {
            kubelets.stop(n);
            c.delete_node(n)
        }
        EventAction::AddPod(spec) => c.add_pod_at(spec, t),
        EventAction::DeletePod(k) => c.delete_pod(k),
        EventAction::SetTaints(a) => c.set_taints(&a.node, &a.taints),
        EventAction::SetUnschedulable(a) => c.set_unschedulable(&a.node, a.value),
        EventAction::SetLease(a) => c.set_lease(&a.node, a.renew.resolve(t)),
        EventAction::RemoveCondition(a) => c.remove_condition(&a.node, &a.kind),
        EventAction::SetTolerations(a) => c.set_tolerations(&a.pod, &a.tolerations),
        EventAction::BindPod(a) => c.bind_pod(&a.pod, &a.node),
        EventAction::SetLabels(a) => c.set_labels(&a.node, &a.labels),
        EventAction::RestartController => Vec::new(),
        EventAction::AddBudget(b) => c.put_budget(b),
        EventAction::DeleteBudget(k) => c.delete_budget(k),
        EventAction::SetAllocatable(a) => c.set_allocatable(&a.node, &a.allocatable),
        EventAction::MarkUnschedulable(a) => c.mark_unschedulable(&a.pod, t),
    }
}

#[cfg(test)]
mod tests {
    use nodewarden_model::Span;

    use super::*;

    #[test]
    fn plan_keeps_time_order_and_insertion_order_for_ties() {
        let mut p = FaultPlan::new();
        let t = |s| Timestamp::EPOCH + Span::from_secs(s);
        p.add(t(10), Fault::ControlPlaneUp, "b");
        p.add(t(5), Fault::ControlPlaneDown, "a");
        p.add(t(10), Fault::RestartController, "c");
        let what: Vec<&str> = p.faults().iter().map(|f| f.what.as_str()).collect();
        assert_eq!(what, ["a", "b", "c"]);
        assert_eq!(p.last(), Some(t(10)));
        assert_eq!(Fault::Crash(vec!["n".into()]).nodes_down(), ["n".to_string()]);
        assert!(Fault::Crash(vec!["n".into()]).nodes_up().is_empty());
    }

    #[test]
    fn a_heal_moves_and_the_plan_stays_in_order() {
        let mut p = FaultPlan::new();
        let t = |s| Timestamp::EPOCH + Span::from_secs(s);
        p.add(t(60), Fault::Partition(vec!["n".into()]), "down");
        p.add(t(3000), Fault::Heal(vec!["n".into()]), "up");
        p.add(t(400), Fault::ControlPlaneDown, "cp");
        assert!(p.heal_at(t(300)));
        let order: Vec<(&str, Timestamp)> = p.faults().iter().map(|f| (f.what.as_str(), f.at)).collect();
        assert_eq!(order, [("down", t(60)), ("up", t(300)), ("cp", t(400))]);
        let mut crash_only = FaultPlan::new();
        crash_only.add(t(60), Fault::Crash(vec!["n".into()]), "");
        assert!(!crash_only.heal_at(t(300)), "nothing to heal");
    }

    /// The simulated cluster's events on a node's own fields change it as
    /// the shared rule does (`rules::node::apply_node_event`), which the
    /// served cluster applies to its stored node: one meaning for both.
    #[test]
    fn node_events_change_a_node_as_the_shared_rule_does() {
        use std::collections::BTreeMap;

        use nodewarden_model::{ConditionStatus, ConditionType, Taint, TaintEffect};

        use crate::cluster::fixtures::{cluster, t};
        use crate::rules::node::{apply_node_event, event_node};
        use crate::scenario::{RemoveCondition, SetCondition, SetLabels, SetReady, SetTaints, SetUnschedulable};

        let node = || "a".to_string();
        let events = [
            EventAction::SetReady(SetReady { node: node(), status: ConditionStatus::False }),
            EventAction::SetReady(SetReady { node: node(), status: ConditionStatus::True }),
            EventAction::SetCondition(SetCondition {
                node: node(),
                kind: ConditionType::DiskPressure,
                status: ConditionStatus::True,
            }),
            EventAction::SetCondition(SetCondition {
                node: node(),
                kind: ConditionType::parse("Custom"),
                status: ConditionStatus::Unknown,
            }),
            EventAction::RemoveCondition(RemoveCondition { node: node(), kind: ConditionType::Ready }),
            EventAction::SetTaints(SetTaints { node: node(), taints: vec![Taint::new("k", TaintEffect::NoExecute)] }),
            EventAction::SetUnschedulable(SetUnschedulable { node: node(), value: true }),
            EventAction::SetLabels(SetLabels {
                node: node(),
                labels: BTreeMap::from([("x".to_string(), Some("1".to_string())), ("zone".to_string(), None)]),
            }),
        ];
        let mut kubelets = Kubelets::new(crate::KubeletTiming::default());
        for (i, e) in events.iter().enumerate() {
            let mut c = cluster();
            let now = t(10 + i as i64);
            let mut expected = c.node("a").cloned().expect("the fixture's node");
            assert_eq!(event_node(e), Some("a"));
            apply_node_event(&mut expected, e, now);
            apply_event(&mut c, &mut kubelets, now, e);
            assert_eq!(c.node("a"), Some(&expected), "event {i}");
        }
    }
}
