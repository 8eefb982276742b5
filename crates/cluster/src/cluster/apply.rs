//! The controller's writes as the simulated API server carries them out:
//! node condition updates, taint and label patches, pod status writes and
//! deletions or evictions, each with its precondition, and Events.
//!
//! Invariant: every write is counted against its object, answers with
//! `WriteFinished` and then the object's state (after a refusal, its
//! current one), and a write the controller must never make is reported as
//! a contract violation.

use nodewarden_controller::{Applied, ClusterApi};
use nodewarden_engine::{Action, ActionId, ActionKind, NodeSnapshot, ObjectRef, Observation, WriteOutcome};
use nodewarden_model::{DeletionMode, Span, Timestamp};

use super::Cluster;
use super::nodes::sync_row;
use super::objects::{RecordedEvent, SimPod};
use crate::rules;
use crate::rules::node::{merge_conditions, merge_labels, patch_taints};
use crate::rules::pod::{
    Deletion, POD_REASON_NODE_LOST, PodAtKey, SET_POD_NODE_LOST, add_disruption_target, check_pod_write,
    clear_disruption_target, mark_not_ready,
};

/// The simulated cluster is where replay and `nodewarden sim` carry out
/// the controller's actions: each lands at once, as a fast API server's
/// would, and answers with the object's new (or, refused, current) state.
impl ClusterApi for Cluster {
    fn apply(&mut self, now: Timestamp, action: &Action) -> Applied {
        self.apply_action(now, action)
    }

    fn read(&mut self, object: &ObjectRef) -> Vec<Observation> {
        match object {
            ObjectRef::Node(name) => match self.nodes.get(name) {
                Some(n) => vec![Observation::NodeUpserted(n.clone())],
                None => vec![Observation::NodeDeleted { name: name.clone() }],
            },
            ObjectRef::Pod(key) => match self.pods.get(key).filter(|p| !p.deleted) {
                Some(p) => vec![Observation::PodUpserted(p.snapshot())],
                None => vec![Observation::PodDeleted { key: key.clone() }],
            },
        }
    }
}

impl Cluster {
    /// Writes the controller made to this object so far (rule 11).
    pub fn writes(&self, object: &ObjectRef) -> u64 {
        self.writes.get(object).copied().unwrap_or(0)
    }

    /// Writes the controller made to the whole cluster so far.
    pub fn total_writes(&self) -> u64 {
        self.writes.values().sum()
    }

    /// Every Event the controller recorded, in order.
    pub fn events(&self) -> &[RecordedEvent] {
        &self.events
    }

    /// Applies one engine action as the API server would, and returns what
    /// to feed back: `WriteFinished`, then the object's snapshot (after a
    /// failure, its current one). Events are recorded and are not writes.
    pub fn apply_action(&mut self, now: Timestamp, action: &Action) -> Applied {
        let id = action.id;
        match &action.kind {
            ActionKind::RecordEvent(event) => {
                self.events.push(RecordedEvent { at: now, event: event.clone() });
                Applied::default()
            }
            ActionKind::UpdateNodeConditions { node, conditions, .. } => {
                self.node_write(id, node, |n| merge_conditions(&mut n.conditions, conditions))
            }
            ActionKind::PatchNodeTaints { node, add, remove, .. } => {
                self.node_write(id, node, |n| patch_taints(&mut n.taints, add, remove))
            }
            ActionKind::PatchNodeLabels { node, labels } => {
                self.node_write(id, node, |n| merge_labels(&mut n.labels, labels))
            }
            ActionKind::MarkPodNotReady { pod, uid } => self.pod_write(id, "mark-pod-not-ready", pod, uid, |p| {
                mark_not_ready(&mut p.conditions);
                Ok(())
            }),
            ActionKind::SetPodNodeLost { pod, uid, .. } => self.pod_write(id, SET_POD_NODE_LOST, pod, uid, |p| {
                p.reason = Some(POD_REASON_NODE_LOST.to_string());
                Ok(())
            }),
            ActionKind::AddPodDisruptionTarget { pod, uid } => {
                self.pod_write(id, "add-pod-disruption-target", pod, uid, |p| {
                    add_disruption_target(&mut p.conditions);
                    Ok(())
                })
            }
            ActionKind::ClearPodDisruptionTarget { pod, uid } => {
                self.pod_write(id, "clear-pod-disruption-target", pod, uid, |p| {
                    clear_disruption_target(&mut p.conditions);
                    Ok(())
                })
            }
            ActionKind::DeletePod { pod, uid, mode, .. } => {
                self.remove_pod(now, id, "delete-pod", pod, uid, *mode, Some(Span::ZERO))
            }
            ActionKind::EvictForAddon { pod, uid, grace, .. } => {
                self.remove_pod(now, id, "evict-for-addon", pod, uid, DeletionMode::Evict, *grace)
            }
        }
    }

    /// A pod deletion, plain or through the Eviction API: refused while the
    /// pod's `refuse-deletions` count lasts, as a webhook or a budget would.
    ///
    /// When the cluster tracks scheduling, an eviction also honours the
    /// budgets ([`Cluster::budget_status`]; refused with upstream's
    /// message), the pod goes terminating for `grace` (`None`: its own
    /// `terminationGracePeriodSeconds`) and is gone when it ends (zero:
    /// at once), and its controller recreates it. Otherwise the pod is
    /// gone at once, as before. The node lifecycle controller's deletions
    /// pass `Some(0)`: their pods are on dead nodes, whose kubelet cannot
    /// hold them, and instant removal keeps the node lifecycle runs as
    /// they were. The outcome is [`rules::pod::deletion`]'s.
    #[allow(clippy::too_many_arguments)]
    fn remove_pod(
        &mut self,
        now: Timestamp,
        id: ActionId,
        what: &'static str,
        pod: &str,
        uid: &str,
        mode: DeletionMode,
        grace: Option<Span>,
    ) -> Applied {
        let tracks = self.tracks_scheduling();
        let eviction = match self.pods.get(pod) {
            Some(p) if tracks && mode == DeletionMode::Evict && !p.deleted && p.uid == uid => {
                self.eviction_verdict(p).map_err(str::to_string)
            }
            _ => Ok(()),
        };
        let mut graceful = None;
        let mut applied = self.pod_write(id, what, pod, uid, |p| {
            let pod_grace = p.scheduling.as_ref().map(|s| s.termination_grace);
            let grace = rules::pod::deletion_grace(tracks, grace, pod_grace);
            match rules::pod::deletion(mode, p.refuse_deletions, eviction, grace) {
                Deletion::Refused { reason, refusals_left } => {
                    p.refuse_deletions = refusals_left;
                    return Err(reason);
                }
                Deletion::Terminating(grace) => {
                    p.terminating = true;
                    graceful = Some(now + grace);
                }
                Deletion::Gone => p.deleted = true,
            }
            Ok(())
        });
        if applied.outcome == Some(WriteOutcome::Done) {
            if let Some(at) = graceful {
                self.graceful.insert((at, pod.to_string()));
            }
            applied.observations.extend(self.recreate(pod));
            applied.observations.extend(self.publish_budgets());
        }
        applied
    }

    fn count_write(&mut self, object: ObjectRef) {
        *self.writes.entry(object).or_insert(0) += 1;
    }

    /// A controller write to a node: `f` changes it in place; a missing
    /// node fails the write and answers with its deletion.
    fn node_write(&mut self, id: ActionId, name: &str, f: impl FnOnce(&mut NodeSnapshot)) -> Applied {
        self.count_write(ObjectRef::Node(name.to_string()));
        let Some(node) = self.nodes.get_mut(name) else {
            return Applied {
                observations: vec![
                    Observation::WriteFinished { id, outcome: WriteOutcome::Failed(format!("node {name} not found")) },
                    Observation::NodeDeleted { name: name.to_string() },
                ],
                outcome: Some(WriteOutcome::Failed(format!("node {name} not found"))),
                violation: None,
            };
        };
        f(node);
        sync_row(&mut self.rows, &self.row_of, node);
        self.epoch += 1;
        Applied {
            observations: vec![
                Observation::WriteFinished { id, outcome: WriteOutcome::Done },
                Observation::NodeUpserted(node.clone()),
            ],
            outcome: Some(WriteOutcome::Done),
            violation: None,
        }
    }

    /// A controller write `what` to pod `key` with uid precondition `uid`:
    /// judged by [`rules::pod::check_pod_write`], then `f` changes the pod
    /// (or refuses, leaving it as it is).
    fn pod_write(
        &mut self,
        id: ActionId,
        what: &str,
        key: &str,
        uid: &str,
        f: impl FnOnce(&mut SimPod) -> Result<(), String>,
    ) -> Applied {
        self.count_write(ObjectRef::Pod(key.to_string()));
        let current = self.pods.get(key).filter(|p| !p.deleted);
        let at_key =
            current.map_or(PodAtKey::Missing, |p| PodAtKey::Present { uid: &p.uid, terminating: p.terminating });
        if let Err(refusal) = check_pod_write(what, key, uid, self.deleted_uids.contains(uid), at_key) {
            let current_state = match current {
                Some(p) => Observation::PodUpserted(p.snapshot()),
                None => Observation::PodDeleted { key: key.to_string() },
            };
            return refused(id, refusal.reason, current_state, refusal.violation);
        }
        let Some(pod) = self.pods.get_mut(key).filter(|p| !p.deleted) else {
            unreachable!("check_pod_write lets a write through only to a pod that exists");
        };
        if let Err(reason) = f(pod) {
            let current = Observation::PodUpserted(pod.snapshot());
            return refused(id, reason, current, None);
        }
        self.epoch += 1;
        let observation = if pod.deleted {
            self.deleted_uids.insert(pod.uid.clone());
            Observation::PodDeleted { key: key.to_string() }
        } else {
            Observation::PodUpserted(pod.snapshot())
        };
        Applied {
            observations: vec![Observation::WriteFinished { id, outcome: WriteOutcome::Done }, observation],
            outcome: Some(WriteOutcome::Done),
            violation: None,
        }
    }
}

/// A write that failed with `reason`: the failure, then the object's
/// current state, so the engine decides again from it.
fn refused(id: ActionId, reason: String, current: Observation, violation: Option<String>) -> Applied {
    Applied {
        observations: vec![Observation::WriteFinished { id, outcome: WriteOutcome::Failed(reason.clone()) }, current],
        outcome: Some(WriteOutcome::Failed(reason)),
        violation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures::*;

    #[test]
    fn conditions_are_replaced_by_type() {
        let mut c = cluster();
        let unknown = NodeCondition {
            kind: ConditionType::Ready,
            status: ConditionStatus::Unknown,
            reason: "NodeStatusUnknown".into(),
            message: String::new(),
            last_heartbeat: t(0),
            last_transition: t(45),
        };
        let mem = NodeCondition { kind: ConditionType::MemoryPressure, ..unknown.clone() };
        let r = c.apply_action(
            t(45),
            &act(
                1,
                ActionKind::UpdateNodeConditions {
                    node: "a".into(),
                    conditions: vec![unknown.clone(), mem],
                    version: 0,
                },
            ),
        );
        assert_eq!(r.outcome, Some(WriteOutcome::Done));
        assert!(matches!(
            r.observations[0],
            Observation::WriteFinished { id: ActionId(1), outcome: WriteOutcome::Done }
        ));
        let Observation::NodeUpserted(n) = &r.observations[1] else { panic!("{r:?}") };
        assert_eq!(n.conditions.len(), 3);
        assert_eq!(n.conditions[0], unknown);
        assert_eq!(n.conditions[2].kind, ConditionType::MemoryPressure);
        assert_eq!(c.writes(&ObjectRef::Node("a".into())), 1);
    }

    #[test]
    fn taint_patch_removes_then_adds_in_one_write() {
        let mut c = cluster();
        let nr = Taint::new(keys::TAINT_NOT_READY, TaintEffect::NoExecute);
        let mut ur = Taint::new(keys::TAINT_UNREACHABLE, TaintEffect::NoExecute);
        c.apply_action(
            t(1),
            &act(
                1,
                ActionKind::PatchNodeTaints {
                    node: "a".into(),
                    add: vec![nr.clone()],
                    remove: vec![],
                    slot: WriteSlot::NoExecuteTaints,
                },
            ),
        );
        ur.time_added = Some(t(2));
        // Remove matches by key and effect only (the value differs here).
        let mut nr_other_value = nr.clone();
        nr_other_value.value = "whatever".into();
        c.apply_action(
            t(2),
            &act(
                2,
                ActionKind::PatchNodeTaints {
                    node: "a".into(),
                    add: vec![ur.clone()],
                    remove: vec![nr_other_value],
                    slot: WriteSlot::NoExecuteTaints,
                },
            ),
        );
        let taints: Vec<String> = c.node("a").unwrap().taints.iter().map(Taint::short).collect();
        assert_eq!(taints, ["example.com/x:NoSchedule", "node.kubernetes.io/unreachable:NoExecute"]);
        // Adding the same key and effect replaces it.
        let mut ur2 = ur.clone();
        ur2.time_added = Some(t(3));
        c.apply_action(
            t(3),
            &act(
                3,
                ActionKind::PatchNodeTaints {
                    node: "a".into(),
                    add: vec![ur2.clone()],
                    remove: vec![],
                    slot: WriteSlot::NoExecuteTaints,
                },
            ),
        );
        assert_eq!(c.node("a").unwrap().taints[1], ur2);
        assert_eq!(c.node("a").unwrap().taints.len(), 2);
        assert_eq!(c.writes(&ObjectRef::Node("a".into())), 3);
    }

    #[test]
    fn labels_are_merged() {
        let mut c = cluster();
        c.apply_action(
            t(1),
            &act(
                1,
                ActionKind::PatchNodeLabels { node: "a".into(), labels: BTreeMap::from([("k".into(), "v".into())]) },
            ),
        );
        let n = c.node("a").unwrap();
        assert_eq!(n.labels["k"], "v");
        assert_eq!(n.labels[keys::LABEL_TOPOLOGY_ZONE], "z1");
        c.set_labels("a", &BTreeMap::from([("k".to_string(), None)]));
        assert!(!c.node("a").unwrap().labels.contains_key("k"));
    }

    #[test]
    fn write_to_missing_node_fails_and_resends_deletion() {
        let mut c = cluster();
        let r =
            c.apply_action(t(1), &act(9, ActionKind::PatchNodeLabels { node: "zz".into(), labels: BTreeMap::new() }));
        assert!(matches!(r.outcome, Some(WriteOutcome::Failed(_))));
        assert_eq!(r.observations[1], Observation::NodeDeleted { name: "zz".into() });
        assert!(r.violation.is_none());
    }

    #[test]
    fn pod_actions() {
        let mut c = cluster();
        let uid = c.pod("default/p").unwrap().uid.clone();
        assert_eq!(uid, "uid-1");
        // Admission added the two defaults.
        assert_eq!(c.pod("default/p").unwrap().tolerations.len(), 2);
        let r =
            c.apply_action(t(1), &act(1, ActionKind::MarkPodNotReady { pod: "default/p".into(), uid: uid.clone() }));
        assert_eq!(r.outcome, Some(WriteOutcome::Done));
        assert_eq!(c.pod("default/p").unwrap().ready(), Some(false));
        c.apply_action(
            t(2),
            &act(2, ActionKind::SetPodNodeLost { pod: "default/p".into(), uid: uid.clone(), node: "a".into() }),
        );
        assert_eq!(c.pod("default/p").unwrap().reason.as_deref(), Some("NodeLost"));
        c.apply_action(t(3), &act(3, ActionKind::AddPodDisruptionTarget { pod: "default/p".into(), uid: uid.clone() }));
        assert_eq!(c.pod("default/p").unwrap().conditions[POD_DISRUPTION_TARGET], ConditionStatus::True);
        let r = c.apply_action(
            t(4),
            &act(
                4,
                ActionKind::DeletePod {
                    pod: "default/p".into(),
                    uid: uid.clone(),
                    mode: DeletionMode::Delete,
                    why: why(),
                },
            ),
        );
        assert_eq!(r.observations[1], Observation::PodDeleted { key: "default/p".into() });
        let p = c.pod("default/p").unwrap();
        assert!(p.deleted);
        assert_eq!(p.reason.as_deref(), Some("NodeLost"));
        assert_eq!(c.writes(&ObjectRef::Pod("default/p".into())), 4);
        assert!(c.state().iter().all(|o| !matches!(o, Observation::PodUpserted(_))));
        // Writing to it again breaks the contract.
        let r = c.apply_action(
            t(5),
            &act(5, ActionKind::DeletePod { pod: "default/p".into(), uid, mode: DeletionMode::Delete, why: why() }),
        );
        assert!(r.violation.is_some());
        assert!(matches!(r.outcome, Some(WriteOutcome::Failed(_))));
    }

    #[test]
    fn mark_not_ready_leaves_pods_without_ready_alone() {
        let mut c = cluster();
        let mut spec = pod_spec("default/q", "a");
        spec.ready = None;
        c.add_pod(&spec);
        let uid = c.pod("default/q").unwrap().uid.clone();
        let r = c.apply_action(t(1), &act(1, ActionKind::MarkPodNotReady { pod: "default/q".into(), uid }));
        assert_eq!(r.outcome, Some(WriteOutcome::Done));
        assert_eq!(c.pod("default/q").unwrap().ready(), None);
    }

    #[test]
    fn uid_precondition_and_terminating_pods() {
        let mut c = cluster();
        let r = c.apply_action(
            t(1),
            &act(
                1,
                ActionKind::DeletePod {
                    pod: "default/p".into(),
                    uid: "uid-77".into(),
                    mode: DeletionMode::Delete,
                    why: why(),
                },
            ),
        );
        assert!(matches!(r.outcome, Some(WriteOutcome::Failed(_))));
        assert!(r.violation.is_none());
        assert!(matches!(&r.observations[1], Observation::PodUpserted(p) if p.uid == "uid-1"));
        assert!(!c.pod("default/p").unwrap().deleted);

        let mut spec = pod_spec("default/t", "a");
        spec.terminating = true;
        c.add_pod(&spec);
        let uid = c.pod("default/t").unwrap().uid.clone();
        let r = c.apply_action(
            t(2),
            &act(2, ActionKind::DeletePod { pod: "default/t".into(), uid, mode: DeletionMode::Delete, why: why() }),
        );
        assert!(r.violation.unwrap().contains("terminating"));
        assert!(!c.pod("default/t").unwrap().deleted);

        // Legacy eviction's NodeLost status write is the one write a
        // terminating pod accepts (J4).
        let uid = c.pod("default/t").unwrap().uid.clone();
        let lost = ActionKind::SetPodNodeLost { pod: "default/t".into(), uid, node: "a".into() };
        let r = c.apply_action(t(3), &act(3, lost));
        assert_eq!(r.outcome, Some(WriteOutcome::Done));
        assert!(r.violation.is_none());
        assert_eq!(c.pod("default/t").unwrap().reason.as_deref(), Some("NodeLost"));
    }

    #[test]
    fn events_are_recorded_not_written() {
        let mut c = cluster();
        let ev = Event {
            object: ObjectRef::Node("a".into()),
            kind: EventType::Normal,
            reason: "NodeNotReady",
            message: "m".into(),
        };
        let r = c.apply_action(t(1), &act(1, ActionKind::RecordEvent(ev.clone())));
        assert_eq!(r, Applied::default());
        assert_eq!(c.events(), &[RecordedEvent { at: t(1), event: ev }]);
        assert_eq!(c.total_writes(), 0);
    }

    #[test]
    fn refused_deletions_fail_then_succeed() {
        let mut c = Cluster::new(AdmissionDefaults::default());
        c.add_node(&node_spec("a"), t(0));
        c.add_pod(&PodSpec { refuse_deletions: 1, ..pod_spec("default/p", "a") });
        let uid = c.pod("default/p").map(|p| p.uid.clone()).unwrap_or_default();
        let delete = |id| {
            act(
                id,
                ActionKind::DeletePod {
                    pod: "default/p".into(),
                    uid: uid.clone(),
                    mode: DeletionMode::Evict,
                    why: why(),
                },
            )
        };
        let first = c.apply_action(t(1), &delete(1));
        assert!(
            matches!(&first.outcome, Some(WriteOutcome::Failed(r)) if r.contains("disruption budget")),
            "{first:?}"
        );
        assert!(first.violation.is_none());
        assert!(!c.pod("default/p").is_some_and(|p| p.deleted));
        let second = c.apply_action(t(2), &delete(2));
        assert!(second.outcome.is_none() || second.outcome == Some(WriteOutcome::Done), "{second:?}");
        assert!(c.pod("default/p").is_some_and(|p| p.deleted));
        assert_eq!(c.writes(&ObjectRef::Pod("default/p".into())), 2);
    }
}
