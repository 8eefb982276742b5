//! The taint manager (§I): pods on nodes with NoExecute taints are deleted
//! when their tolerations run out.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use nodewarden_cluster::Cluster;
use nodewarden_cluster::cluster::POD_DISRUPTION_TARGET;
use nodewarden_engine::ActionKind;
use nodewarden_engine::explain::{Explanation, Verdict};
use nodewarden_model::{ConditionStatus, Span, Taint, TaintEffect, Timestamp, Toleration};

use super::ReferenceModel;
use crate::tolerations::{RefVerdict, verdict};

/// A scheduled deletion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pending {
    created: Timestamp,
    fire_at: Timestamp,
}

/// A pod's uid, node and tolerations, as the taint manager last processed
/// them.
type PodSeen = (String, Option<String>, Arc<[Toleration]>);

/// What the taint manager remembers.
#[derive(Clone, Debug, Default)]
pub(super) struct TaintManager {
    /// Each node's NoExecute taints as last processed.
    nodes: BTreeMap<String, Vec<Taint>>,
    /// Each pod's uid, node and tolerations as last processed.
    pods: BTreeMap<String, PodSeen>,
    /// Scheduled deletions by pod key.
    pending: BTreeMap<String, Pending>,
}

impl TaintManager {
    /// The earliest scheduled deletion.
    pub(super) fn next_deadline(&self) -> Option<Timestamp> {
        self.pending.values().map(|p| p.fire_at).min()
    }
}

/// A minimal explanation for a deletion the model makes (not compared).
pub(super) fn why(pod: &str, node: &str, now: Timestamp) -> Box<Explanation> {
    Box::new(Explanation {
        pod: pod.to_string(),
        node: node.to_string(),
        node_facts: None,
        taints: vec![],
        tainting: None,
        verdict: Verdict::NotTolerated { taint: Taint::new("reference-model", TaintEffect::NoExecute) },
        scheduled_at: now,
        due_at: now,
        deleted_at: now,
    })
}

impl ReferenceModel {
    /// `processPodOnNode` (§I2, §I3).
    fn process_pod(&mut self, now: Timestamp, key: &str, taints: &[Taint], tolerations: &[Toleration]) {
        let pending = self.tm.pending.get(key).copied();
        match verdict(taints, tolerations) {
            RefVerdict::NoTaints | RefVerdict::Forever => {
                self.tm.pending.remove(key);
            }
            RefVerdict::Untolerated => {
                self.tm.pending.insert(key.to_string(), Pending { created: now, fire_at: now });
            }
            RefVerdict::After(seconds) => {
                let fire_at = if seconds <= 0 { now } else { now + Span::from_secs(seconds) };
                match pending {
                    // Kept as it is (I3) ...
                    Some(p) if p.created < now => {}
                    // ... unless it was scheduled in this same instant:
                    // upstream compares start times, so it is replaced.
                    Some(p) => {
                        self.tm.pending.insert(key.to_string(), Pending { created: p.created, fire_at });
                    }
                    None => {
                        self.tm.pending.insert(key.to_string(), Pending { created: now, fire_at });
                    }
                }
            }
        }
    }

    /// A node event from one of the model's own writes: when it leaves the
    /// node without NoExecute taints, every pending deletion on it is
    /// cancelled now (I4).
    pub(super) fn taint_manager_node_event(&mut self, now: Timestamp, cluster: &Cluster, name: &str) {
        let Some(node) = cluster.node(name) else { return };
        if node.taints.iter().any(|t| t.effect == TaintEffect::NoExecute)
            || self.tm.nodes.get(name).is_some_and(|seen| seen.is_empty())
        {
            return;
        }
        self.tm.nodes.insert(name.to_string(), Vec::new());
        let pods: Vec<(String, Arc<[Toleration]>)> = cluster
            .pods()
            .filter(|p| !p.deleted && p.node.as_deref() == Some(name))
            .map(|p| (p.key.clone(), p.tolerations.clone()))
            .collect();
        for (key, tolerations) in pods {
            self.process_pod(now, &key, &[], &tolerations);
        }
    }

    /// Node changes, then pod changes, then the deletions that are due.
    pub(super) fn taint_manager(&mut self, now: Timestamp, cluster: &mut Cluster) {
        // Node changes (I1, I4, I5, I6).
        let names: BTreeSet<String> =
            cluster.nodes().map(|n| n.name.clone()).chain(self.tm.nodes.keys().cloned()).collect();
        for name in names {
            let Some(node) = cluster.node(&name) else {
                // Deleted: taints forgotten, pending deletions kept (I5).
                self.tm.nodes.remove(&name);
                continue;
            };
            let current: Vec<Taint> =
                node.taints.iter().filter(|t| t.effect == TaintEffect::NoExecute).cloned().collect();
            // A node new to the taint manager is an event even without
            // taints: its pods' pending deletions are cancelled (I4).
            if self.tm.nodes.get(&name).is_some_and(|seen| *seen == current) {
                continue;
            }
            self.tm.nodes.insert(name.clone(), current.clone());
            let pods: Vec<(String, Arc<[Toleration]>)> = cluster
                .pods()
                .filter(|p| !p.deleted && p.node.as_deref() == Some(name.as_str()))
                .map(|p| (p.key.clone(), p.tolerations.clone()))
                .collect();
            for (key, tolerations) in pods {
                self.process_pod(now, &key, &current, &tolerations);
            }
        }
        // Pod changes: new pods, new node, new tolerations; deletions cancel.
        let keys: BTreeSet<String> =
            cluster.pods().filter(|p| !p.deleted).map(|p| p.key.clone()).chain(self.tm.pods.keys().cloned()).collect();
        for key in keys {
            let Some(p) = cluster.pod(&key).filter(|p| !p.deleted) else {
                self.tm.pods.remove(&key);
                self.tm.pending.remove(&key);
                continue;
            };
            let now_seen = (p.uid.clone(), p.node.clone(), p.tolerations.clone());
            let changed = match self.tm.pods.get(&key) {
                None => true,
                Some(seen) if seen.0 != p.uid => {
                    // A new pod under the same name.
                    self.tm.pending.remove(&key);
                    true
                }
                Some(seen) => *seen != now_seen,
            };
            self.tm.pods.insert(key.clone(), now_seen);
            if !changed {
                continue;
            }
            let Some(node) = p.node.clone() else { continue };
            let taints = self.tm.nodes.get(&node).cloned().unwrap_or_default();
            if taints.is_empty() {
                continue;
            }
            let tolerations = p.tolerations.clone();
            self.process_pod(now, &key, &taints, &tolerations);
        }
        // Deadlines.
        let mut due: Vec<(Timestamp, String)> =
            self.tm.pending.iter().filter(|(_, p)| p.fire_at <= now).map(|(k, p)| (p.fire_at, k.clone())).collect();
        due.sort();
        for (_, key) in due {
            self.tm.pending.remove(&key);
            let Some(p) = cluster.pod(&key).filter(|p| !p.deleted && !p.terminating) else { continue };
            let (uid, node) = (p.uid.clone(), p.node.clone().unwrap_or_default());
            // Set True unless it already is (upstream's
            // `UpdatePodCondition` writes only a change).
            if p.conditions.get(POD_DISRUPTION_TARGET) != Some(&ConditionStatus::True) {
                self.write(now, cluster, ActionKind::AddPodDisruptionTarget { pod: key.clone(), uid: uid.clone() });
            }
            let kind = ActionKind::DeletePod {
                pod: key.clone(),
                uid,
                mode: self.cfg.pod_deletion_mode,
                why: why(&key, &node, now),
            };
            self.write(now, cluster, kind);
        }
    }
}
