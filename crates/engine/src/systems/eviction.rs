//! The taint manager (upstream's taint-eviction controller): pods on nodes
//! with NoExecute taints leave when their tolerations run out.
//!
//! Event driven: ingest and the tainting systems put changed nodes and pods
//! in the [`TaintManagerInbox`]; deadlines sit in [`DeletionTimers`], a heap
//! keyed by deadline, so an idle tick costs one peek however many deletions
//! are pending.

use bevy_ecs::prelude::*;
use nodewarden_model::{Span, Taint, TaintEffect, Timestamp, taint::TolerationVerdict, taint::toleration_verdict};

use crate::action::{ActionKind, EventType, ObjectRef};
use crate::components::*;
use crate::resources::*;

/// Backoff before retrying a refused deletion: 1 s, doubling, at most 5 min.
pub fn retry_backoff(failures: u32) -> Span {
    let secs = 1i64 << failures.saturating_sub(1).min(9);
    Span::from_secs(secs.min(300))
}

/// Schedules (or re-schedules) `pod`'s deletion at `at`.
pub fn schedule(world: &mut World, pod: Entity, at: Timestamp) {
    let now = world.resource::<Now>().0;
    let seq = world.resource_mut::<DeletionTimers>().push(at, pod);
    if let Some(mut pending) = world.get_mut::<PendingDeletion>(pod) {
        pending.0 = Some(Deadline { created: now, fire_at: at, seq });
    }
}

fn noexecute(taints: &[Taint]) -> Vec<Taint> {
    taints.iter().filter(|t| t.effect == TaintEffect::NoExecute).cloned().collect()
}

/// What `processPodOnNode` decided.
enum Plan {
    Cancel,
    Keep,
    At(Timestamp, Timestamp),
}

/// `processPodOnNode` for one pod: its verdict against the node's NoExecute
/// taints, respecting an already scheduled deletion (I3).
fn plan(pending: Option<Deadline>, taints: &[Taint], pod: &Pod, now: Timestamp) -> Plan {
    if taints.is_empty() {
        return Plan::Cancel;
    }
    match toleration_verdict(taints, &pod.tolerations) {
        TolerationVerdict::Now => Plan::At(now, now),
        TolerationVerdict::Never => Plan::Cancel,
        TolerationVerdict::After(wait) => match pending {
            // A deletion scheduled earlier is never moved; one scheduled in
            // this same instant is replaced (upstream compares start times).
            Some(p) if p.created < now => Plan::Keep,
            Some(p) => Plan::At(p.created, now + wait),
            None => Plan::At(now, now + wait),
        },
    }
}

/// Processes node and pod changes, then fires due deletions.
#[allow(clippy::too_many_arguments)]
pub fn taint_manager(
    now: Res<Now>,
    settings: Res<Settings>,
    mut inbox: ResMut<TaintManagerInbox>,
    mut timers: ResMut<DeletionTimers>,
    pod_index: Res<PodIndex>,
    node_index: Res<NodeIndex>,
    mut nodes: Query<(&NodeName, &NodeTaints, &mut SeenNoExecute)>,
    mut pods: Query<(Entity, &Pod, &mut PodProgress, &mut PendingDeletion)>,
    mut outbox: ResMut<Outbox>,
) {
    let now = now.0;
    if !settings.0.enable_taint_manager {
        // Legacy mode has no taint manager: NoExecute taints evict nothing (J1).
        inbox.nodes.clear();
        inbox.pods.clear();
        return;
    }
    let decide = |pod_entity: Entity,
                  taints: &[Taint],
                  pods: &mut Query<(Entity, &Pod, &mut PodProgress, &mut PendingDeletion)>,
                  timers: &mut DeletionTimers,
                  outbox: &mut Outbox| {
        let Ok((_, pod, _, mut pending)) = pods.get_mut(pod_entity) else { return };
        match plan(pending.0, taints, pod, now) {
            Plan::Keep => {}
            Plan::Cancel => {
                // The heap entry goes stale with it.
                if pending.0.take().is_some() {
                    outbox.event(
                        ObjectRef::Pod(pod.key.clone()),
                        EventType::Normal,
                        "TaintManagerEviction",
                        format!("Cancelling deletion of Pod {}", pod.key),
                    );
                }
            }
            Plan::At(created, at) => {
                let seq = timers.push(at, pod_entity);
                pending.0 = Some(Deadline { created, fire_at: at, seq });
                tracing::debug!(pod = %pod.key, deadline = %at, "pod deletion scheduled");
            }
        }
    };

    // Node updates go before pod updates, as upstream orders them.
    let mut node_list = std::mem::take(&mut inbox.nodes);
    node_list.sort_unstable();
    node_list.dedup();
    for &node in &node_list {
        let Ok((name, taints, mut seen)) = nodes.get_mut(node) else { continue };
        let current = noexecute(&taints.0);
        if current == seen.0 {
            continue;
        }
        seen.0 = current.clone();
        for &pod in pod_index.on_node(&name.0) {
            decide(pod, &current, &mut pods, &mut timers, &mut outbox);
        }
    }
    node_list.clear();
    inbox.nodes = node_list;

    let mut pod_list = std::mem::take(&mut inbox.pods);
    pod_list.sort_unstable();
    pod_list.dedup();
    for &pod in &pod_list {
        let Ok((_, p, _, _)) = pods.get(pod) else { continue };
        let Some(node) = p.node.as_ref().and_then(|n| node_index.0.get(n)) else { continue };
        let Ok((_, _, seen)) = nodes.get(*node) else { continue };
        if seen.0.is_empty() {
            continue;
        }
        let taints = seen.0.clone();
        decide(pod, &taints, &mut pods, &mut timers, &mut outbox);
    }
    pod_list.clear();
    inbox.pods = pod_list;

    // Fire what is due.
    while let Some(&std::cmp::Reverse((at, seq, pod))) = timers.heap.peek() {
        if at > now {
            break;
        }
        timers.heap.pop();
        let Ok((_, p, mut progress, mut pending)) = pods.get_mut(pod) else { continue };
        let Some(deadline) = pending.0.filter(|d| d.seq == seq) else { continue };
        pending.0 = None;
        if p.terminating || progress.deletion_requested {
            continue;
        }
        progress.deletion_requested = true;
        let late = now - deadline.fire_at;
        metrics::histogram!("taint_eviction_controller_pod_deletion_duration_seconds").record(late.as_secs_f64());
        metrics::counter!("taint_eviction_controller_pod_deletions_total").increment(1);
        tracing::info!(pod = %p.key, node = ?p.node, deadline = %deadline.fire_at, "deleting pod: NoExecute taint no longer tolerated");
        outbox.event(
            ObjectRef::Pod(p.key.clone()),
            EventType::Normal,
            "TaintManagerEviction",
            format!("Marking for deletion Pod {}", p.key),
        );
        outbox.write(ActionKind::AddPodDisruptionTarget { pod: p.key.clone(), uid: p.uid.clone() });
        outbox.write(ActionKind::DeletePod { pod: p.key.clone(), uid: p.uid.clone() });
    }
}
