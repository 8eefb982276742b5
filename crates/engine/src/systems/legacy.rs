//! Legacy eviction (`--enable-taint-manager=false`, removed upstream in
//! 1.27): after each monitor pass, [`eviction_decisions`] queues nodes
//! NotReady or Unknown for longer than `pod-eviction-timeout` in their
//! zone's rate-limited pod evictor; the eviction pass ([`eviction_pass`])
//! writes `NodeLost` to their pods and deletes them, sparing DaemonSet pods
//! and terminating ones (which still get `NodeLost`). A refused deletion
//! ([`refused_deletions`]) is tried again at the next monitor pass.

use bevy_ecs::prelude::*;
use nodewarden_model::{ConditionStatus, ControllerConfig, Span, Timestamp};

use crate::action::{ActionKind, EventType, ObjectRef};
use crate::components::*;
use crate::explain::{Explanation, NodeFacts, Verdict};
use crate::judgement::Judged;
use crate::metric_names;
use crate::monitor::Health;
use crate::queue::Attempt;
use crate::resources::*;

use super::params::{Decided, Lookups, NodePods, Tick};

/// The node a legacy decision is about, and what the pass knows of it.
struct LegacyNode<'a> {
    /// Its entity.
    pub entity: Entity,
    /// Its name.
    pub name: &'a str,
    /// Its flags.
    pub flags: &'a mut NodeFlags,
    /// Its zone.
    pub zone: &'a mut Zone,
    /// Ready as observed at the start of the pass.
    pub observed: ConditionStatus,
    /// Its health record (a fresh one if it has none yet).
    pub rec: HealthRecord,
    /// What an explanation says of it.
    pub facts: NodeFacts,
}

/// What the legacy decision reads of a judged node.
type JudgedNodes<'w, 's> = Query<
    'w,
    's,
    (
        &'static NodeName,
        &'static mut NodeFlags,
        &'static InZone,
        &'static Health,
        &'static ReadyView,
        &'static LeaseView,
    ),
>;

/// What the eviction pass reads of a queued node before it evicts.
type QueuedNodes<'w, 's> =
    Query<'w, 's, (&'static NodeName, &'static mut NodeFlags, &'static Health, &'static ReadyView, &'static LeaseView)>;

/// The facts behind a legacy eviction, shared by the pods of one node.
#[derive(Debug, Clone)]
pub struct LegacyWhy {
    /// What the controller knew of the node.
    pub facts: Option<NodeFacts>,
    /// The Ready status that counted.
    pub status: ConditionStatus,
    /// Since when it counted.
    pub since: Timestamp,
    /// `pod-eviction-timeout`.
    pub timeout: Span,
    /// The zone's rate when the eviction was released.
    pub zone_rate: f64,
    /// When the node was queued for eviction (or now, for a pod found on an
    /// already evicted node).
    pub queued_at: Timestamp,
    /// Plain delete or Eviction API.
    pub mode: nodewarden_model::DeletionMode,
    /// Now.
    pub now: Timestamp,
}

impl LegacyWhy {
    fn explain(&self, pod: &str, node: &str) -> Explanation {
        Explanation {
            pod: pod.to_string(),
            node: node.to_string(),
            node_facts: self.facts.clone(),
            taints: vec![],
            tainting: None,
            verdict: Verdict::EvictionTimeout {
                status: self.status,
                since: self.since,
                timeout: self.timeout,
                zone_rate: self.zone_rate,
            },
            scheduled_at: self.queued_at,
            due_at: self.since + self.timeout,
            deleted_at: self.now,
        }
    }
}

/// When the legacy countdown of a node in `status` started: the last
/// observed heartbeat for Unknown, the observed transition for False.
pub fn countdown_start(status: ConditionStatus, rec: &HealthRecord) -> Timestamp {
    if status == ConditionStatus::False { rec.ready_transition } else { rec.probe }
}

/// Whether the node sent a heartbeat (a new Ready heartbeat, a Ready
/// condition that appeared, a newer Lease) that the last monitor pass has
/// not taken in: the controller's probe time is stale until the next pass.
pub fn heartbeat_since_last_pass(rec: &HealthRecord, ready: &ReadyView, lease: &LeaseView) -> bool {
    let status_beat = match (rec.saved_ready, ready.status) {
        (Some((heartbeat, _)), Some(_)) => heartbeat != ready.heartbeat,
        (None, Some(_)) => true,
        (_, None) => false,
    };
    let lease_beat = lease.present
        && match rec.saved_lease {
            None => true,
            Some(saved) => matches!((saved, lease.renew), (Some(s), Some(o)) if s < o),
        };
    status_beat || lease_beat
}

/// After the monitor pass: the legacy eviction decision for each node the
/// pass judged, in name order (its actions issued under the node's key of
/// the Outbox's ordered section).
pub fn eviction_decisions(
    tick: Tick,
    scratch: Res<PassScratch>,
    lookups: Lookups,
    node_pods: NodePods,
    mut outbox: ResMut<Outbox>,
    mut nodes: JudgedNodes,
    mut zones: Query<&mut Zone>,
) {
    let Tick { now, settings } = tick;
    let Lookups { timers, .. } = lookups;
    let NodePods { index: pod_index, mut pods } = node_pods;
    let now = now.0;
    let cfg = &settings.0;
    for v in &scratch.verdicts {
        outbox.order_by(v.order);
        let Ok((name, mut flags, in_zone, health, ready, lease)) = nodes.get_mut(v.node) else { continue };
        let Ok(mut zone) = zones.get_mut(in_zone.zone) else { continue };
        let name = name.0.as_str();
        let record = health.record(&timers);
        let rec =
            record.unwrap_or(HealthRecord { probe: now, ready_transition: now, saved_ready: None, saved_lease: None });
        let node = LegacyNode {
            entity: v.node,
            name,
            flags: &mut flags,
            zone: &mut zone,
            observed: v.observed,
            rec,
            facts: node_facts(record, ready, lease, cfg),
        };
        eviction_decision(node, cfg, now, pod_index.on_node(name), &mut pods, &mut outbox);
    }
}

/// `processNoTaintBaseEviction`: decided on the Ready condition *observed*
/// at the start of the pass (J2). False counts from the observed transition,
/// Unknown from the last observed heartbeat.
fn eviction_decision(
    node: LegacyNode<'_>,
    cfg: &ControllerConfig,
    now: Timestamp,
    node_pods: &[Entity],
    pods: &mut Query<&mut Pod>,
    outbox: &mut Outbox,
) {
    let LegacyNode { observed, rec, facts, .. } = node;
    let (timeout, mode) = (cfg.pod_eviction_timeout, cfg.pod_deletion_mode);
    if observed == ConditionStatus::True {
        if super::cancel_pod_eviction(node.entity, node.flags, node.zone) {
            tracing::info!(node = node.name, "node is ready again; pod eviction cancelled");
        }
        return;
    }
    let since = countdown_start(observed, &rec);
    if now <= since + timeout {
        return;
    }
    if node.flags.eviction == EvictionStatus::Evicted {
        // J5: pods that turned up after the eviction go at once.
        let why = LegacyWhy {
            facts: Some(facts),
            status: observed,
            since,
            timeout,
            zone_rate: node.zone.queue.qps(),
            queued_at: now,
            mode,
            now,
        };
        delete_pods(node.name, node_pods, pods, outbox, &why);
        return;
    }
    node.flags.eviction = EvictionStatus::ToBeEvicted;
    if node.zone.queue.add(node.entity, now) {
        node.flags.queued = true;
        tracing::info!(node = node.name, status = %observed, since = %since, timeout = %timeout, "node past pod-eviction-timeout; queued for pod eviction");
    }
}

/// `DeletePods` (J4): `status.reason = NodeLost` on every pod of the node,
/// terminating ones included, as upstream writes it before it looks at the
/// pod; then deletion of all but terminating and DaemonSet pods. Returns
/// how many deletions were issued.
pub fn delete_pods(
    node: &str,
    node_pods: &[Entity],
    pods: &mut Query<&mut Pod>,
    outbox: &mut Outbox,
    why: &LegacyWhy,
) -> usize {
    let mut deleted = 0;
    for &e in node_pods {
        let Ok(mut pod) = pods.get_mut(e) else { continue };
        if pod.node.as_deref() != Some(node) || pod.progress.deletion_requested {
            continue;
        }
        // A not-ready mark still waiting for its turn goes now, just ahead
        // of the `NodeLost` reason: a sender carries both in one patch.
        super::marks::build_mark(&mut pod, Some(why.status), outbox);
        // The status write goes to terminating pods too: a status update on
        // a pod being deleted is an ordinary write the API server accepts,
        // and the reason tells whoever looks at the pod why it went.
        if !pod.progress.node_lost {
            pod.progress.node_lost = true;
            outbox.write(ActionKind::SetPodNodeLost {
                pod: pod.key.to_string(),
                uid: pod.uid.to_string(),
                node: node.to_string(),
            });
        }
        // Already being deleted: nothing to add. DaemonSet pods are spared.
        if pod.terminating || pod.daemonset {
            continue;
        }
        pod.progress.deletion_requested = true;
        let explanation = why.explain(&pod.key, node);
        outbox.event(
            ObjectRef::Pod(pod.key.to_string()),
            EventType::Normal,
            "NodeControllerEviction",
            format!("Marking for deletion Pod {} from Node {node}: {}", pod.key, explanation.one_line()),
        );
        outbox.write(ActionKind::DeletePod {
            pod: pod.key.to_string(),
            uid: pod.uid.to_string(),
            mode: why.mode,
            why: Box::new(explanation),
        });
        deleted += 1;
    }
    deleted
}

/// A refused legacy deletion is retried at the next monitor pass, while the
/// node is still evicted and past the timeout (J5), as upstream's queue
/// retry would: nothing to schedule here (ingest already cleared the pod's
/// deletion-requested mark), only the `FailedEviction` Warning Event.
pub fn refused_deletions(mut refused: ResMut<RefusedDeletions>, mut outbox: ResMut<Outbox>) {
    for RefusedDeletion { key: pod, reason, failures, .. } in refused.0.drain(..) {
        let retry = "retrying at the next monitor pass while the node stays down";
        tracing::warn!(pod = %pod, failures, %reason, "pod deletion refused; {retry}");
        outbox.event(
            ObjectRef::Pod(pod.clone()),
            EventType::Warning,
            "FailedEviction",
            format!("Deleting Pod {pod} was refused ({reason}); {retry} (refusal {failures})"),
        );
    }
}

/// `doEvictionPass`, every 100 ms: drains each zone's pod evictor at the
/// zone's rate.
pub fn eviction_pass(
    tick: Tick,
    lookups: Lookups,
    node_pods: NodePods,
    mut zones: Query<&mut Zone>,
    mut nodes: QueuedNodes,
    decided: Decided,
    mode: Res<DisruptionMode>,
) {
    let Tick { now, settings } = tick;
    let Decided { mut outbox, mut judgements } = decided;
    let Lookups { zone_index, timers, .. } = lookups;
    let NodePods { index: pod_index, mut pods } = node_pods;
    let now = now.0;
    if mode.all_zones_down {
        // Every queue is paused while every zone is down, including those
        // of zones made only of excluded nodes (found by the fuzzer).
        return;
    }
    for &z in &zone_index.by_slot {
        let Ok(mut zone) = zones.get_mut(z) else { continue };
        let zone = &mut *zone;
        let label = zone.key.to_string();
        let zone_rate = zone.queue.qps();
        zone.queue.try_drain(now, |&node, added| {
            let Ok((name, mut flags, health, ready, lease)) = nodes.get_mut(node) else {
                // Deleted since: nothing to evict (upstream would still
                // delete the pods bound to the name; we leave them to the
                // pod garbage collector).
                return Attempt::Done;
            };
            let name = name.0.clone();
            let status = ready.status.unwrap_or(ConditionStatus::Unknown);
            // Upstream evicts whatever was queued. nodewarden looks again:
            // a node that is Ready, has sent a heartbeat the monitor has not
            // looked at yet, or is no longer past the timeout waits for the
            // next monitor pass to decide (which cancels it if it is back).
            let record = health.record(&timers);
            let still_due = record.is_some_and(|rec| {
                status != ConditionStatus::True
                    && !heartbeat_since_last_pass(&rec, ready, lease)
                    && now > countdown_start(status, &rec) + settings.0.pod_eviction_timeout
            });
            if !still_due {
                tracing::info!(node = %name, "queued node shows signs of life; eviction deferred to the next monitor pass");
                return Attempt::RetryAfter(settings.0.node_monitor_period);
            }
            outbox.event(
                ObjectRef::Node(name.clone()),
                EventType::Normal,
                "DeletingAllPods",
                format!("Node {name} event: Deleting all Pods from Node {name}."),
            );
            let why = LegacyWhy {
                facts: Some(node_facts(record, ready, lease, &settings.0)),
                status,
                since: record.map_or(added, |rec| countdown_start(status, &rec)),
                timeout: settings.0.pod_eviction_timeout,
                zone_rate,
                queued_at: added,
                mode: settings.0.pod_deletion_mode,
                now,
            };
            let bound = pod_index.on_node(&name).len();
            if bound > 0 {
                judgements.note(now, &name, || Judged::LegacyEviction {
                    pods: bound,
                    verdict: Verdict::EvictionTimeout { status, since: why.since, timeout: why.timeout, zone_rate },
                });
            }
            delete_pods(&name, pod_index.on_node(&name), &mut pods, &mut outbox, &why);
            flags.eviction = EvictionStatus::Evicted;
            metrics::counter!(metric_names::EVICTIONS_TOTAL, metric_names::ZONE => label.clone()).increment(1);
            Attempt::Done
        });
    }
}
