//! Pods marked not ready (`MarkPodsNotReady`): decided as state, built
//! when a sender has room.
//!
//! The decision flags the pod and enters it in the outbox's wanted marks;
//! the write is built later, from the pod as it then is, by whoever pulls
//! ([`build_marks`], through `Engine::pull`), or at once by a system about
//! to write the pod's status for another reason (its deletion's), so one
//! patch carries both. One rule ([`mark_stands`]) is asked at the decision,
//! at the build and when the write is sent.

use bevy_ecs::prelude::*;
use nodewarden_model::ConditionStatus;

use crate::action::{ActionKind, EventType, ObjectRef};
use crate::components::*;
use crate::resources::*;
use crate::withdrawal::Changed;

/// Decides Ready=False for every pod of `pods` bound to `node` that has a
/// Ready condition not already False (H1). Terminating pods and pods being
/// deleted are left alone (the controller never writes to them).
///
/// The decision is recorded, not yet written: the pod is flagged and
/// entered in the outbox's wanted marks, and the mark is built when a
/// sender has room for it ([`build_marks`]), from the pod as it then is.
pub fn mark_pods_not_ready(node: &str, pods: &[Entity], query: &mut Query<&mut Pod>, outbox: &mut Outbox) {
    for &e in pods {
        let Ok(pod) = query.get(e) else { continue };
        if pod.node.as_deref() != Some(node) || pod.progress.deletion_requested || pod.progress.mark_wanted {
            continue;
        }
        // The node is not Ready: it is the one this decision is about.
        if pod.ready != Some(true) || mark_stands(pod, None).is_err() {
            continue;
        }
        let Ok(mut pod) = query.get_mut(e) else { continue };
        pod.progress.mark_wanted = true;
        outbox.want_mark(e);
    }
}

/// The rule a not-ready mark rests on, asked when it is decided, when it
/// is built and when it is sent: the pod is not terminating (a terminating
/// pod has left its Services' ready endpoints already, so the mark would
/// spend a request on nothing) and its node, as last seen
/// (`node_ready`), is not Ready.
pub fn mark_stands(pod: &Pod, node_ready: Option<ConditionStatus>) -> Result<(), Changed> {
    if pod.terminating {
        return Err(Changed::PodTerminating);
    }
    if node_ready == Some(ConditionStatus::True) {
        let node = pod.node.as_deref().unwrap_or_default();
        return Err(Changed::NodeReadyAgain { node: node.to_owned() });
    }
    Ok(())
}

/// Builds pod `pod`'s wanted mark, if it is wanted and still stands:
/// its write and the `NodeNotReady` Event that goes with it, the pod taken
/// for not ready from now on (node lifecycle applies its own writes to its
/// view). `node_ready` is the pod's node's Ready status as seen now. True
/// when it was built; either way the pod is no longer wanted.
pub fn build_mark(pod: &mut Pod, node_ready: Option<ConditionStatus>, outbox: &mut Outbox) -> bool {
    if !std::mem::take(&mut pod.progress.mark_wanted) {
        return false;
    }
    if pod.ready != Some(true) || mark_stands(pod, node_ready).is_err() {
        return false;
    }
    pod.ready = Some(false);
    outbox.write(ActionKind::MarkPodNotReady { pod: pod.key.to_string(), uid: pod.uid.to_string() });
    outbox.event(
        ObjectRef::Pod(pod.key.to_string()),
        EventType::Warning,
        "NodeNotReady",
        "Node is not ready".to_string(),
    );
    true
}

/// Builds up to `room` wanted marks, oldest decision first, passing over
/// those that no longer stand (never built, so never withdrawn). What a
/// sender pulls when it has room ([`crate::Engine::pull`]).
pub fn build_marks(world: &mut World, room: usize) -> usize {
    world.resource_scope(|world: &mut World, mut outbox: Mut<Outbox>| {
        let mut built = 0;
        while built < room {
            let Some(e) = outbox.next_wanted_mark() else { break };
            let Some(node) = world.get::<Pod>(e).and_then(|p| p.node.clone()) else {
                // Gone, or never bound: nothing to mark.
                if let Some(mut pod) = world.get_mut::<Pod>(e) {
                    pod.progress.mark_wanted = false;
                }
                continue;
            };
            let node_ready = world
                .resource::<NodeIndex>()
                .0
                .get(&*node)
                .and_then(|&n| world.get::<ReadyView>(n))
                .and_then(|r| r.status);
            if let Some(mut pod) = world.get_mut::<Pod>(e)
                && build_mark(&mut pod, node_ready, &mut outbox)
            {
                built += 1;
            }
        }
        built
    })
}
