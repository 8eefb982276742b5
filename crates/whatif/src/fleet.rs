//! A snapshot made into a simulated cluster: its real nodes, Leases and
//! pods, on the simulator's virtual clock, with kubelets that keep
//! heartbeating as the nodes did.
//!
//! - **Time.** The snapshot's own moment is the latest sign of life in it
//!   (the newest Lease renewal or Ready heartbeat, not the wall clock: a
//!   snapshot is often played days after it was taken). It becomes the
//!   simulation's t=0; every timestamp in the snapshot moves with it, so a
//!   Lease renewed 7 s before the snapshot was taken was renewed at -7 s.
//!   A timestamp the adapter could not read counts as t=0 (as `run` reads
//!   one as the moment it was seen).
//! - **Kubelets.** A node whose Ready is True gets a kubelet that renews
//!   its Lease every `leaseDurationSeconds / 4` (10 s) from its last
//!   renewal, and posts status from its last Ready heartbeat, so renewals
//!   keep the phases they had in the real cluster. A node that was not
//!   Ready (or has no Ready condition) gets none: it stays as it was, and
//!   the controller treats it as a real one would treat a silent node.
//! - **Pods** keep their tolerations exactly as the API stored them
//!   (admission already ran in the real cluster, so none is added), their
//!   node, Ready condition and deletion timestamp.

use nodewarden_cluster::Cluster;
use nodewarden_cluster::{AdmissionDefaults, KubeletTiming, Kubelets, PodSpec};
use nodewarden_engine::NodeSnapshot;
use nodewarden_model::{ConditionStatus, ConditionType, Span, Timestamp};
use nodewarden_sim::Prepared;

use crate::faults::Faults;
use crate::snapshot::{SEEN_AT, Snapshot, SnapshotError};

/// The kubelet's Lease renewal jitter (as the generated fleet's).
const LEASE_JITTER: f64 = nodewarden_cluster::fleet::LEASE_JITTER;

/// The snapshot's own moment: the latest Lease renewal or Ready heartbeat
/// in it (Unix nanoseconds); `None` when it has neither.
pub fn snapshot_time(snap: &Snapshot) -> Option<Timestamp> {
    let renewals = snap.leases.values().filter_map(|r| *r);
    let heartbeats = snap
        .nodes
        .iter()
        .flat_map(|n| n.conditions.iter().filter(|c| c.kind == ConditionType::Ready).map(|c| c.last_heartbeat));
    renewals.chain(heartbeats).filter(|t| *t != SEEN_AT && *t != Timestamp::EPOCH).max()
}

/// A timestamp of the snapshot on the virtual clock (t=0 = `at`).
fn shift(t: Timestamp, at: Timestamp) -> Timestamp {
    if t == SEEN_AT {
        return Timestamp::EPOCH;
    }
    if t == Timestamp::EPOCH {
        // Absent in the object: keeps its meaning ("never").
        return t;
    }
    Timestamp::from_nanos(t.as_nanos().saturating_sub(at.as_nanos()))
}

fn shift_node(n: &NodeSnapshot, at: Timestamp) -> NodeSnapshot {
    let mut n = n.clone();
    n.created = shift(n.created, at);
    for c in &mut n.conditions {
        c.last_heartbeat = shift(c.last_heartbeat, at);
        c.last_transition = shift(c.last_transition, at);
    }
    for t in &mut n.taints {
        t.time_added = t.time_added.map(|x| shift(x, at));
    }
    n
}

/// The first instant of a cadence of period `every` after `last` that is
/// at or after t=0 (and never more than one period away).
fn next_after_zero(last: Timestamp, every: Span) -> Timestamp {
    let every_n = every.as_nanos().max(1);
    let next = last.as_nanos().saturating_add(every_n);
    if next >= 0 {
        return Timestamp::from_nanos(next.min(every_n));
    }
    Timestamp::from_nanos(next.rem_euclid(every_n))
}

/// Builds the simulated cluster, its kubelets and the fault plan.
pub fn prepare(snap: &Snapshot, faults: &Faults, seed: u64) -> Result<Prepared, SnapshotError> {
    if snap.nodes.is_empty() {
        return Err(SnapshotError::NoNodes(snap.source.clone()));
    }
    let at = snapshot_time(snap).unwrap_or(Timestamp::EPOCH);
    let timing = KubeletTiming::default();
    // The pods' tolerations are as the real API server stored them.
    let admission = AdmissionDefaults { not_ready_seconds: None, unreachable_seconds: None };
    let mut cluster = Cluster::new(admission);
    let mut kubelets = Kubelets::new(timing).with_jitter(LEASE_JITTER, seed);
    let mut seen = std::collections::HashSet::new();
    for n in &snap.nodes {
        if !seen.insert(n.name.as_str()) {
            continue; // listed twice (two files): the first is kept
        }
        let node = shift_node(n, at);
        let ready = node.conditions.iter().find(|c| c.kind == ConditionType::Ready);
        let heartbeat = ready.map(|c| c.last_heartbeat);
        let up = ready.is_some_and(|c| c.status == ConditionStatus::True);
        let renew = snap.leases.get(&n.name).copied().flatten().map(|r| shift(r, at));
        cluster.put_node(node.clone());
        if let Some(r) = renew {
            cluster.set_lease(&n.name, r);
        }
        if up {
            let last_lease = renew.or(heartbeat).unwrap_or(Timestamp::EPOCH);
            let last_status = heartbeat.unwrap_or(Timestamp::EPOCH);
            kubelets.schedule_phased(
                &n.name,
                next_after_zero(last_lease, timing.lease_every),
                next_after_zero(last_status, timing.update_every),
                next_after_zero(last_status, timing.report_every),
            );
        }
    }
    let mut pods_seen = std::collections::HashSet::new();
    for p in &snap.pods {
        if !pods_seen.insert(p.pod.key.as_str()) {
            continue;
        }
        cluster.add_pod_unobserved(&PodSpec {
            name: p.pod.key.clone(),
            node: p.pod.node.clone(),
            daemonset: p.pod.daemonset,
            ready: p.pod.ready,
            terminating: p.pod.terminating,
            tolerations: p.pod.tolerations.clone(),
            refuse_deletions: 0,
            // The what-if plays node lifecycle only: no scheduling facts.
            scheduling: Default::default(),
        });
    }
    let plan = faults.plan(snap)?;
    Ok(Prepared {
        name: format!("what-if on {}", snap.source),
        description: faults.describe(),
        admission,
        timing,
        cluster,
        kubelets,
        duration: faults.duration(),
        plan,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cadences_resume_from_the_last_beat() {
        let s = |x: i64| Timestamp::EPOCH + Span::from_secs(x);
        let every = Span::from_secs(10);
        assert_eq!(next_after_zero(s(-3), every), s(7));
        assert_eq!(next_after_zero(s(-10), every), s(0));
        assert_eq!(next_after_zero(s(-33), every), s(7));
        assert_eq!(next_after_zero(s(4), every), s(10), "a beat after t=0 (clock skew) resumes within a period");
    }
}
