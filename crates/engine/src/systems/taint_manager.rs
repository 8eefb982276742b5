//! The taint manager (upstream's taint-eviction controller): pods on nodes
//! with NoExecute taints leave when their tolerations run out.
//!
//! Event driven: ingest and the tainting systems put changed nodes and pods
//! in the [`TaintManagerInbox`]; deadlines sit in [`DeletionTimers`], a heap
//! keyed by deadline, so an idle tick costs one peek however many deletions
//! are pending. A deletion the API server refused comes back here
//! ([`retry_refused_deletions`]) and is retried with backoff.

use bevy_ecs::prelude::*;
use nodewarden_model::{ControllerConfig, Span, Taint, TaintEffect, Timestamp, taint::Decision};

use crate::action::{ActionKind, EventType, ObjectRef};
use crate::components::*;
use crate::explain::{Explanation, Verdict};
use crate::judgement::Judgements;
use crate::monitor::{Health, NodeTimers};
use crate::resources::*;

use super::params::{Deletions, Emit, Lookups, Tick};

/// Backoff before retrying a refused deletion: 1 s, doubling, at most 5 min.
pub fn retry_backoff(failures: u32) -> Span {
    let secs = 1i64 << failures.saturating_sub(1).min(9);
    Span::from_secs(secs.min(300))
}

/// A refused taint-based deletion is retried on its own timer, with
/// [`retry_backoff`], on the basis it was decided on (kept in its
/// [`PendingDeletion`]), and announced with a `FailedEviction` Warning Event.
/// Upstream gives up after a few quick tries; a pod whose tolerations ran
/// out should not outstay them because of one refusal.
pub fn retry_refused_deletions(
    now: Res<Now>,
    mut refused: ResMut<RefusedDeletions>,
    mut timers: ResMut<DeletionTimers>,
    mut pending: Query<&mut PendingDeletion>,
    mut outbox: ResMut<Outbox>,
) {
    let now = now.0;
    for RefusedDeletion { pod: entity, key: pod, reason, failures } in refused.0.drain(..) {
        let backoff = retry_backoff(failures);
        let at = now + backoff;
        let seq = timers.push(at, entity);
        if let Ok(mut pending) = pending.get_mut(entity) {
            pending.set(Some(Deadline { created: now, fire_at: at, seq }));
        }
        let retry = format!("retrying in {backoff}");
        tracing::warn!(pod = %pod, failures, %reason, "pod deletion refused; {retry}");
        outbox.event(
            ObjectRef::Pod(pod.clone()),
            EventType::Warning,
            "FailedEviction",
            format!("Deleting Pod {pod} was refused ({reason}); {retry} (refusal {failures})"),
        );
    }
}

/// The NoExecute taints the taint manager acts on for a node, from those
/// `observed` on it and node lifecycle's own view of its taints
/// (`bookkeeping`, which holds our writes from the moment they are issued);
/// `None` to wait for the next observation.
///
/// - Lifecycle is taking every NoExecute taint off: none (pending
///   deletions are called off at once, nothing is scheduled on taints on
///   their way out).
/// - Otherwise the observed taints that lifecycle still keeps. A taint we
///   added counts only once observed, so a countdown never starts before
///   the taint is on the node.
/// - Every observed taint is being replaced (a not-ready/unreachable swap,
///   or a taint removed and added again in one pass): wait for the
///   replacement to be observed, so a running countdown is neither
///   cancelled nor restarted by our own write.
fn acted_on(observed: &[Taint], bookkeeping: &[Taint]) -> Option<Vec<Taint>> {
    if !bookkeeping.iter().any(|t| t.effect == TaintEffect::NoExecute) {
        return Some(Vec::new());
    }
    let kept: Vec<Taint> = observed.iter().filter(|t| bookkeeping.contains(t)).cloned().collect();
    if kept.is_empty() && !observed.is_empty() {
        return None;
    }
    Some(kept)
}

/// What `processPodOnNode` decided for one pod.
enum Plan {
    /// Call off any pending deletion.
    Cancel,
    /// Leave the pending deletion as it is (I3).
    Keep,
    /// Schedule: (created, due, verdict).
    At(Timestamp, Timestamp, Verdict),
}

/// `processPodOnNode`: the pod's decision against the node's NoExecute
/// taints, respecting an already scheduled deletion (I3).
fn plan(pending: Option<Deadline>, taints: &[Taint], pod: &Pod, now: Timestamp) -> Plan {
    match nodewarden_model::taint::decide(taints, &pod.tolerations) {
        Decision::NoTaints | Decision::Forever => Plan::Cancel,
        Decision::Untolerated(taint) => Plan::At(now, now, Verdict::NotTolerated { taint: taint.clone() }),
        Decision::Expires { toleration, seconds } => {
            let verdict = Verdict::TolerationExpired { toleration: toleration.clone(), seconds };
            let due = if seconds <= 0 { now } else { now + Span::from_secs(seconds) };
            match pending {
                // A deletion scheduled earlier is never moved, not even by a
                // toleration now saying 0 s (only "not tolerated" deletes at
                // once); one scheduled in this same instant is replaced
                // (upstream compares start times).
                Some(p) if p.created < now => Plan::Keep,
                Some(p) => Plan::At(p.created, due, verdict),
                None => Plan::At(now, due, verdict),
            }
        }
    }
}

type PodQuery<'w, 's> = Query<'w, 's, (&'static mut Pod, &'static mut PendingDeletion)>;

/// A node as the taint manager sees it: the NoExecute taints observed on
/// it, lifecycle's own view of its taints, and those last acted on.
type TaintedNodes<'w, 's> =
    Query<'w, 's, (&'static NodeName, &'static ObservedNode, &'static NodeTaints, &'static mut SeenNoExecute)>;

/// What an explanation says of a node: its health, heartbeats and tainting.
type NodeFactsQuery<'w, 's> =
    Query<'w, 's, (&'static Health, &'static ReadyView, &'static LeaseView, &'static TaintRecord)>;

/// Applies [`plan`] to one pod.
fn process_pod(
    pod_entity: Entity,
    taints: &[Taint],
    now: Timestamp,
    pods: &mut PodQuery,
    timers: &mut DeletionTimers,
    outbox: &mut Outbox,
) {
    let Ok((mut pod, mut pending)) = pods.get_mut(pod_entity) else { return };
    match plan(pending.get(), taints, &pod, now) {
        Plan::Keep => {}
        Plan::Cancel => {
            // The heap entry goes stale with it.
            pending.set_basis(None);
            let cancelled = pending.set(None).is_some();
            if let Some(clear) = pod.take_back_disruption_target(false) {
                outbox.write(clear);
            }
            if cancelled {
                tracing::info!(pod = %pod.key, "pod tolerates the node's taints now; deletion cancelled");
                outbox.event(
                    ObjectRef::Pod(pod.key.to_string()),
                    EventType::Normal,
                    "TaintManagerEviction",
                    format!("Cancelling deletion of Pod {}", pod.key),
                );
            }
        }
        // Its deletion is on its way: nothing to schedule (a deadline set
        // now would only be "cancelled" when the deletion lands).
        Plan::At(..) if pod.progress.deletion_requested => {}
        Plan::At(created, due, verdict) => {
            let seq = timers.push(due, pod_entity);
            pending.set(Some(Deadline { created, fire_at: due, seq }));
            pending.set_basis(Some(Basis { taints: taints.to_vec(), verdict, scheduled_at: created }));
            tracing::debug!(pod = %pod.key, %due, "pod deletion scheduled");
        }
    }
}

/// What every pod decision of one run needs: the instant, the pods with
/// their pending deletions, the deadline heap, and where actions go.
/// Grouped so the run's steps take it as one.
struct PodWork<'a, 'w, 's> {
    now: Timestamp,
    pods: &'a mut PodQuery<'w, 's>,
    timers: &'a mut DeletionTimers,
    outbox: &'a mut Outbox,
    judgements: &'a mut Judgements,
}

impl PodWork<'_, '_, '_> {
    /// [`process_pod`] with this run's state.
    fn process(&mut self, pod: Entity, taints: &[Taint]) {
        process_pod(pod, taints, self.now, self.pods, self.timers, self.outbox);
    }
}

/// Processes node and pod changes, then fires due deletions.
pub fn taint_manager(
    tick: Tick,
    emit: Emit,
    deletions: Deletions,
    pod_index: Res<PodIndex>,
    lookups: Lookups,
    mut nodes: TaintedNodes,
    facts: NodeFactsQuery,
) {
    let Tick { now, settings } = tick;
    let Emit { mut outbox, mut inbox } = emit;
    let Deletions { mut timers, mut pods, mut judgements } = deletions;
    let Lookups { node_index, timers: health_timers, .. } = lookups;
    let now = now.0;
    if !settings.0.enable_taint_manager || !settings.0.taint_eviction {
        // Legacy mode has no taint manager: NoExecute taints evict nothing
        // (J1); nor do they with taint-eviction-controller switched off.
        inbox.nodes.clear();
        inbox.pods.clear();
        inbox.cleared.clear();
        inbox.cleared_gone.clear();
        return;
    }
    let mut work =
        PodWork { now, pods: &mut pods, timers: &mut timers, outbox: &mut outbox, judgements: &mut judgements };

    let mut cleared = std::mem::take(&mut inbox.cleared);
    cleared.sort_unstable();
    cleared.dedup();
    cancel_on_cleared_nodes(&cleared, &mut nodes, &pod_index, &mut work);
    inbox.cleared = recycle(cleared);
    let gone = std::mem::take(&mut inbox.cleared_gone);
    for name in &gone {
        cancel_on_node(name, &pod_index, &mut work);
    }
    inbox.cleared_gone = recycle(gone);

    // Node updates go before pod updates, as upstream orders them.
    let mut node_list = std::mem::take(&mut inbox.nodes);
    node_list.sort_unstable();
    node_list.dedup();
    process_node_updates(&node_list, &mut nodes, &pod_index, &mut work);
    inbox.nodes = recycle(node_list);

    let mut pod_list = std::mem::take(&mut inbox.pods);
    pod_list.sort_unstable();
    pod_list.dedup();
    process_pod_updates(&pod_list, &nodes, &node_index, &mut work);
    inbox.pods = recycle(pod_list);

    fire_due_deletions(&mut work, &settings.0, &node_index, &facts, &health_timers);
}

/// Nodes without NoExecute taints at some moment since the last run (a
/// write of ours removed the last one, or the node was just added
/// without any): their pending deletions were cancelled then (I4, I6),
/// whatever taints came back since. Found by the fuzzer: a restart's
/// registration removes a taint that the same pass adds back, and a
/// node re-created healthy under the name of a deleted tainted one.
fn cancel_on_cleared_nodes(cleared: &[Entity], nodes: &mut TaintedNodes, pod_index: &PodIndex, work: &mut PodWork) {
    for &node in cleared {
        let Ok((name, _, _, mut seen)) = nodes.get_mut(node) else { continue };
        seen.0.clear();
        cancel_on_node(&name.0, pod_index, work);
    }
}

/// Calls off the pending deletions of the pods bound to node `name`.
fn cancel_on_node(name: &str, pod_index: &PodIndex, work: &mut PodWork) {
    for &pod in pod_index.on_node(name) {
        // Without taints the plan is to call off a pending deletion:
        // nothing to do for a pod that has none (most, and all of a new
        // node's), found without touching it mutably.
        if work.pods.get(pod).is_ok_and(|(_, pending)| pending.is_empty()) {
            continue;
        }
        work.process(pod, &[]);
    }
}

/// A node whose NoExecute taints the taint manager acts on changed: every
/// pod on it is decided again against the new taints.
fn process_node_updates(node_list: &[Entity], nodes: &mut TaintedNodes, pod_index: &PodIndex, work: &mut PodWork) {
    for &node in node_list {
        let Ok((name, observed, bookkeeping, mut seen)) = nodes.get_mut(node) else { continue };
        let Some(effective) = acted_on(&observed.noexecute, &bookkeeping.0) else { continue };
        if effective == seen.0 {
            continue;
        }
        seen.0 = effective;
        for &pod in pod_index.on_node(&name.0) {
            work.process(pod, &seen.0);
        }
    }
}

/// A changed pod is decided against the taints last acted on for its node.
fn process_pod_updates(pod_list: &[Entity], nodes: &TaintedNodes, node_index: &NodeIndex, work: &mut PodWork) {
    // The node of the last pod, as in `pod_assignment`.
    let mut last: Option<(std::sync::Arc<str>, Option<Entity>)> = None;
    for &pod in pod_list {
        let Ok((p, ..)) = work.pods.get(pod) else { continue };
        let Some(name) = &p.node else { continue };
        let node = match &last {
            Some((last_name, node)) if std::sync::Arc::ptr_eq(last_name, name) => *node,
            _ => {
                let node = node_index.0.get(&**name).copied();
                last = Some((name.clone(), node));
                node
            }
        };
        let Some(node) = node else { continue };
        let Ok((_, _, _, seen)) = nodes.get(node) else { continue };
        // A node without NoExecute taints: nothing to do (I4 cancelled
        // everything when they went).
        if !seen.0.is_empty() {
            work.process(pod, &seen.0);
        }
    }
}

/// Fires what is due: each deletion whose deadline has come, still
/// current, is requested with the explanation of why.
fn fire_due_deletions(
    work: &mut PodWork,
    cfg: &ControllerConfig,
    node_index: &NodeIndex,
    facts: &NodeFactsQuery,
    health_timers: &NodeTimers,
) {
    let now = work.now;
    while let Some(&std::cmp::Reverse((at, seq, pod))) = work.timers.heap.peek() {
        if at > now {
            break;
        }
        work.timers.heap.pop();
        let Ok((mut p, mut pending)) = work.pods.get_mut(pod) else { continue };
        let Some(deadline) = pending.get().filter(|d| d.seq == seq) else { continue };
        pending.set(None);
        if p.progress.deletion_requested {
            continue;
        }
        if p.terminating {
            // Deleted by someone else before its deadline: what a shadow
            // compares with that deletion.
            if let Some(basis) = pending.basis() {
                let node = p.node.as_deref().unwrap_or_default();
                work.judgements.note(deadline.fire_at, node, || basis.judged(&p.key));
            }
            continue;
        }
        let Some(basis) = pending.basis().cloned() else {
            // Called off while it waited (a refusal's retry outlived its
            // basis).
            if let Some(clear) = p.take_back_disruption_target(false) {
                work.outbox.write(clear);
            }
            continue;
        };
        let node_name = p.node.as_deref().unwrap_or_default().to_string();
        let known = node_index.0.get(node_name.as_str()).and_then(|&n| facts.get(n).ok());
        let tainting = known
            .and_then(|(_, _, _, record)| record.0.clone())
            .filter(|r| basis.taints.iter().any(|t| t.same_as(&r.taint) && t.time_added == r.taint.time_added));
        work.judgements.note(now, p.node.as_deref().unwrap_or_default(), || basis.judged(&p.key));
        let why = Explanation {
            pod: p.key.to_string(),
            node: node_name,
            node_facts: known.map(|(h, r, l, _)| node_facts(h.record(health_timers), r, l, cfg)),
            taints: basis.taints,
            tainting,
            verdict: basis.verdict,
            scheduled_at: basis.scheduled_at,
            due_at: deadline.fire_at,
            deleted_at: now,
        };
        // A not-ready mark still waiting for its turn goes now, just
        // ahead of the `DisruptionTarget` condition: a sender carries
        // both in one status patch.
        super::marks::build_mark(&mut p, known.and_then(|(_, r, _, _)| r.status), work.outbox);
        p.progress.deletion_requested = true;
        let line = why.one_line();
        tracing::info!(pod = %p.key, why = %line, "deleting pod: NoExecute taint no longer tolerated");
        work.outbox.event(
            ObjectRef::Pod(p.key.to_string()),
            EventType::Normal,
            "TaintManagerEviction",
            format!("Marking for deletion Pod {}: {line}", p.key),
        );
        if !p.progress.disruption_target {
            p.progress.disruption_target = true;
            work.outbox.write(ActionKind::AddPodDisruptionTarget { pod: p.key.to_string(), uid: p.uid.to_string() });
        }
        work.outbox.write(ActionKind::DeletePod {
            pod: p.key.to_string(),
            uid: p.uid.to_string(),
            mode: cfg.pod_deletion_mode,
            why: Box::new(why),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewarden_model::{Toleration, TolerationOperator};

    fn pod(tols: Vec<Toleration>) -> Pod {
        Pod {
            key: "ns/p".into(),
            uid: "u".into(),
            version: 0,
            node: Some("n".into()),
            daemonset: false,
            ready: Some(true),
            terminating: false,
            tolerations: tols.into(),
            progress: PodProgress::default(),
        }
    }
    fn tol(seconds: Option<i64>) -> Toleration {
        Toleration {
            key: String::new(),
            operator: TolerationOperator::Exists,
            effect: None,
            value: String::new(),
            seconds,
        }
    }
    fn taints() -> Vec<Taint> {
        vec![Taint::new("k", TaintEffect::NoExecute)]
    }

    #[test]
    fn an_earlier_deadline_is_kept_whatever_the_new_tolerations_say() {
        let pending = Some(Deadline { created: Timestamp::from_secs(10), fire_at: Timestamp::from_secs(40), seq: 0 });
        assert!(matches!(plan(pending, &taints(), &pod(vec![tol(Some(1000))]), Timestamp::from_secs(20)), Plan::Keep));
        assert!(matches!(plan(pending, &taints(), &pod(vec![tol(Some(1))]), Timestamp::from_secs(20)), Plan::Keep));
    }

    #[test]
    fn forever_or_no_taints_cancels() {
        let pending = Some(Deadline { created: Timestamp::from_secs(10), fire_at: Timestamp::from_secs(40), seq: 0 });
        assert!(matches!(plan(pending, &taints(), &pod(vec![tol(None)]), Timestamp::from_secs(20)), Plan::Cancel));
        assert!(matches!(plan(pending, &[], &pod(vec![tol(Some(5))]), Timestamp::from_secs(20)), Plan::Cancel));
    }

    #[test]
    fn untolerated_means_now_even_when_pending() {
        let pending = Some(Deadline { created: Timestamp::from_secs(10), fire_at: Timestamp::from_secs(40), seq: 0 });
        assert!(
            matches!(plan(pending, &taints(), &pod(vec![]), Timestamp::from_secs(20)), Plan::At(c, d, _) if c == Timestamp::from_secs(20) && d == Timestamp::from_secs(20))
        );
        // A 0 s toleration does not move an existing deadline...
        assert!(matches!(plan(pending, &taints(), &pod(vec![tol(Some(0))]), Timestamp::from_secs(20)), Plan::Keep));
        // ...but without one it means now.
        assert!(
            matches!(plan(None, &taints(), &pod(vec![tol(Some(-3))]), Timestamp::from_secs(20)), Plan::At(_, d, _) if d == Timestamp::from_secs(20))
        );
    }

    #[test]
    fn same_instant_reschedule_replaces_the_deadline() {
        let pending = Some(Deadline { created: Timestamp::from_secs(20), fire_at: Timestamp::from_secs(50), seq: 0 });
        assert!(
            matches!(plan(pending, &taints(), &pod(vec![tol(Some(5))]), Timestamp::from_secs(20)), Plan::At(c, d, _) if c == Timestamp::from_secs(20) && d == Timestamp::from_secs(25))
        );
    }

    /// Found by `engine_steps` under watch delay: a node's foreign
    /// NoExecute taint removed and the node deleted, both delivered before
    /// the taint manager ran. The removal calls the pod's pending deletion
    /// off (I4), the deletion that follows does not bring it back (I5
    /// keeps only what is pending then); the pod was deleted at its old
    /// deadline, "node a gone".
    #[test]
    fn taints_seen_gone_call_deletions_off_even_when_the_node_goes_too() {
        use crate::Engine;
        use crate::observation::{NodeSnapshot, Observation, PodSnapshot};
        use nodewarden_model::ConditionStatus;

        let run = |untainted_first: bool, deleted: bool| {
            let t = Timestamp::from_secs;
            let mut engine = Engine::new(ControllerConfig::default(), t(0)).unwrap();
            let tainted = NodeSnapshot::new("a", t(-3600))
                .in_zone("z")
                .with_ready(ConditionStatus::True, t(0))
                .with_taints(vec![Taint::new("example.com/maintenance", TaintEffect::NoExecute)]);
            engine.observe(Observation::NodeUpserted(NodeSnapshot { version: 1, ..tainted.clone() }));
            engine.observe(Observation::PodUpserted(
                PodSnapshot::new("ns/p", "u", Some("a")).tolerating(vec![tol(Some(100))]),
            ));
            let _ = engine.tick(t(0));
            if untainted_first {
                let untainted = NodeSnapshot { version: 2, taints: vec![], ..tainted };
                engine.observe(Observation::NodeUpserted(untainted));
            }
            if deleted {
                engine.observe(Observation::NodeDeleted { name: "a".into() });
            }
            (10..=150)
                .step_by(10)
                .flat_map(|s| engine.tick(t(s)))
                .any(|a| matches!(a.kind, ActionKind::DeletePod { .. }))
        };
        assert!(run(false, true), "the node deleted with its taint: kept (I5)");
        assert!(!run(true, false), "the taint removed: called off");
        assert!(!run(true, true), "the taint removed, then the node deleted: called off all the same");
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(retry_backoff(1), Span::from_secs(1));
        assert_eq!(retry_backoff(2), Span::from_secs(2));
        assert_eq!(retry_backoff(5), Span::from_secs(16));
        assert_eq!(retry_backoff(40), Span::from_secs(300));
    }
}
