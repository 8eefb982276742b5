//! Legacy eviction (`--enable-taint-manager=false`, removed upstream in
//! 1.27): nodes NotReady or Unknown for longer than `pod-eviction-timeout`
//! are queued in their zone's rate-limited pod evictor, and the eviction
//! pass deletes their pods, sparing DaemonSet pods and terminating ones.

use bevy_ecs::prelude::*;
use nodewarden_model::{ConditionStatus, Span, Timestamp};

use crate::action::{ActionKind, EventType, ObjectRef};
use crate::components::*;
use crate::queue::Attempt;
use crate::resources::*;

/// The node a legacy decision is about.
pub struct LegacyNode<'a> {
    /// Its entity.
    pub entity: Entity,
    /// Its name.
    pub name: &'a str,
    /// Its flags.
    pub flags: &'a mut NodeFlags,
    /// Its zone.
    pub zone: &'a mut Zone,
}

/// `processNoTaintBaseEviction`: decided on the Ready condition *observed*
/// at the start of the pass (J2). False counts from the observed transition,
/// Unknown from the last observed heartbeat.
#[allow(clippy::too_many_arguments)]
pub fn eviction_decision(
    node: LegacyNode<'_>,
    observed: ConditionStatus,
    rec: HealthRecord,
    timeout: Span,
    now: Timestamp,
    node_pods: &[Entity],
    pods: &mut Query<(&mut Pod, &mut PodProgress)>,
    outbox: &mut Outbox,
) {
    let since = match observed {
        ConditionStatus::True => {
            if super::cancel_pod_eviction(node.entity, node.flags, node.zone) {
                tracing::info!(node = node.name, "node is ready again; pod eviction cancelled");
            }
            return;
        }
        ConditionStatus::False => rec.ready_transition,
        ConditionStatus::Unknown => rec.probe,
    };
    if now <= since + timeout {
        return;
    }
    if node.flags.eviction == EvictionStatus::Evicted {
        // J5: pods that turned up after the eviction go at once.
        delete_pods(node.name, node_pods, pods, outbox, now);
        return;
    }
    node.flags.eviction = EvictionStatus::ToBeEvicted;
    if node.zone.queue.add(node.entity, now) {
        node.flags.queued = true;
        tracing::info!(node = node.name, status = %observed, since = %since, timeout = %timeout, "node past pod-eviction-timeout; queued for pod eviction");
    }
}

/// `DeletePods`: `status.reason = NodeLost` on every pod of the node (not
/// terminating ones: the controller never writes to those), then deletion
/// of all but DaemonSet and terminating pods. Returns how many deletions
/// were issued.
pub fn delete_pods(
    node: &str,
    node_pods: &[Entity],
    pods: &mut Query<(&mut Pod, &mut PodProgress)>,
    outbox: &mut Outbox,
    _now: Timestamp,
) -> usize {
    let mut deleted = 0;
    for &e in node_pods {
        let Ok((pod, mut progress)) = pods.get_mut(e) else { continue };
        if pod.node.as_deref() != Some(node) || pod.terminating || progress.deletion_requested {
            continue;
        }
        if !progress.node_lost {
            progress.node_lost = true;
            outbox.write(ActionKind::SetPodNodeLost {
                pod: pod.key.clone(),
                uid: pod.uid.clone(),
                node: node.to_string(),
            });
        }
        if pod.daemonset {
            continue;
        }
        progress.deletion_requested = true;
        outbox.event(
            ObjectRef::Pod(pod.key.clone()),
            EventType::Normal,
            "NodeControllerEviction",
            format!("Marking for deletion Pod {} from Node {node}", pod.key),
        );
        outbox.write(ActionKind::DeletePod { pod: pod.key.clone(), uid: pod.uid.clone() });
        metrics::counter!("nodewarden_legacy_pod_deletions_total").increment(1);
        deleted += 1;
    }
    deleted
}

/// `doEvictionPass`, every 100 ms: drains each zone's pod evictor at the
/// zone's rate.
pub fn eviction_pass(
    now: Res<Now>,
    zone_index: Res<ZoneIndex>,
    pod_index: Res<PodIndex>,
    mut zones: Query<&mut Zone>,
    mut nodes: Query<(&NodeName, &mut NodeFlags)>,
    mut pods: Query<(&mut Pod, &mut PodProgress)>,
    mut outbox: ResMut<Outbox>,
) {
    let now = now.0;
    for &z in &zone_index.by_slot {
        let Ok(mut zone) = zones.get_mut(z) else { continue };
        let zone = &mut *zone;
        let label = zone.key.to_string();
        zone.queue.try_drain(now, |&node, _added| {
            let Ok((name, mut flags)) = nodes.get_mut(node) else {
                // Deleted since: nothing to evict (upstream would still
                // delete the pods bound to the name; we leave them to the
                // pod garbage collector).
                return Attempt::Done;
            };
            let name = name.0.clone();
            outbox.event(
                ObjectRef::Node(name.clone()),
                EventType::Normal,
                "DeletingAllPods",
                format!("Node {name} event: Deleting all Pods from Node {name}."),
            );
            delete_pods(&name, pod_index.on_node(&name), &mut pods, &mut outbox, now);
            flags.eviction = EvictionStatus::Evicted;
            metrics::counter!("node_collector_evictions_total", "zone" => label.clone()).increment(1);
            Attempt::Done
        });
    }
}
