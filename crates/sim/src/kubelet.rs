//! Simulated kubelets: deterministic Lease renewals and status posts for
//! nodes with `kubelet: true` (scenario rules 2 and 13).
//!
//! A kubelet started at `s` renews its Lease at `s, s+I, s+2I, ...`
//! (I = lease duration / 4), computes its status at `s, s+U, ...` and posts
//! Ready=True then if the stored Ready is not True, and re-posts its status
//! (fresh heartbeat) at `s, s+R, ...` even when nothing changed. It never
//! touches other conditions.

use std::collections::BTreeMap;

use nodewarden_engine::Observation;
use nodewarden_model::{ConditionStatus, ConditionType, Span, Timestamp};

use crate::cluster::Cluster;
use crate::scenario::KubeletSpec;

/// The three periods every simulated kubelet follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KubeletTiming {
    /// Lease renewal period: a quarter of the lease duration.
    pub lease_every: Span,
    /// Status computation period (`node-status-update-frequency`).
    pub update_every: Span,
    /// Unconditional status post period (`node-status-report-frequency`).
    pub report_every: Span,
}

impl From<&KubeletSpec> for KubeletTiming {
    fn from(k: &KubeletSpec) -> Self {
        let secs = i64::try_from(k.node_lease_duration_seconds).unwrap_or(i64::MAX);
        KubeletTiming {
            // 0.25 x seconds = 250 ms per second of lease duration.
            lease_every: Span::from_millis(secs.saturating_mul(250)),
            update_every: k.node_status_update_frequency,
            report_every: k.node_status_report_frequency,
        }
    }
}

impl Default for KubeletTiming {
    fn default() -> Self {
        KubeletTiming::from(&KubeletSpec::default())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cadence {
    next_lease: Timestamp,
    next_update: Timestamp,
    next_report: Timestamp,
}

/// Every running simulated kubelet, by node name.
#[derive(Clone, Debug, Default)]
pub struct Kubelets {
    timing: KubeletTiming,
    running: BTreeMap<String, Cadence>,
}

/// The next instant of a cadence strictly after `now`. A non-positive
/// period (refused by validation) never fires again.
fn advance(next: Timestamp, now: Timestamp, every: Span) -> Timestamp {
    if next > now {
        return next;
    }
    if every <= Span::ZERO {
        return Timestamp::MAX;
    }
    let behind = (now - next).as_nanos() / every.as_nanos() + 1;
    next + every.saturating_mul(behind)
}

impl Kubelets {
    /// No kubelet running yet.
    pub fn new(timing: KubeletTiming) -> Kubelets {
        Kubelets { timing, running: BTreeMap::new() }
    }

    /// Starts the node's kubelet with its first renewal and post due at
    /// `at`, done by the [`Kubelets::run_due`] call for that instant (how
    /// the kubelets of the initial nodes start at t=0).
    pub fn schedule(&mut self, node: &str, at: Timestamp) {
        self.running.insert(node.to_string(), Cadence { next_lease: at, next_update: at, next_report: at });
    }

    /// Starts (or restarts) the node's kubelet now: it renews the Lease
    /// and posts Ready=True at once, then keeps its cadence from `now`.
    pub fn start(&mut self, node: &str, now: Timestamp, cluster: &mut Cluster) -> Vec<Observation> {
        self.schedule(node, now);
        self.run_one(node, now, cluster)
    }

    /// Stops the node's kubelet (a crash or a partition).
    pub fn stop(&mut self, node: &str) {
        self.running.remove(node);
    }

    /// True while the node's kubelet runs.
    pub fn is_running(&self, node: &str) -> bool {
        self.running.contains_key(node)
    }

    /// The earliest instant some kubelet has something to do.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.running.values().map(|c| c.next_lease.min(c.next_update).min(c.next_report)).min()
    }

    /// Does what every kubelet has due at or before `now`, in node-name
    /// order, and returns what the cluster's watches deliver.
    pub fn run_due(&mut self, now: Timestamp, cluster: &mut Cluster) -> Vec<Observation> {
        let due: Vec<String> = self
            .running
            .iter()
            .filter(|(_, c)| c.next_lease.min(c.next_update).min(c.next_report) <= now)
            .map(|(n, _)| n.clone())
            .collect();
        due.iter().flat_map(|n| self.run_one(n, now, cluster)).collect()
    }

    fn run_one(&mut self, node: &str, now: Timestamp, cluster: &mut Cluster) -> Vec<Observation> {
        let timing = self.timing;
        let Some(c) = self.running.get_mut(node) else { return Vec::new() };
        let lease_due = c.next_lease <= now;
        let update_due = c.next_update <= now;
        let report_due = c.next_report <= now;
        c.next_lease = advance(c.next_lease, now, timing.lease_every);
        c.next_update = advance(c.next_update, now, timing.update_every);
        c.next_report = advance(c.next_report, now, timing.report_every);
        // A kubelet whose node is gone has nothing to renew or post.
        if cluster.node(node).is_none() {
            return Vec::new();
        }
        let mut out = Vec::new();
        if lease_due {
            out.extend(cluster.set_lease(node, now));
        }
        let ready_is_true = cluster
            .node(node)
            .and_then(|n| n.conditions.iter().find(|c| c.kind == ConditionType::Ready))
            .is_some_and(|c| c.status == ConditionStatus::True);
        if report_due || (update_due && !ready_is_true) {
            out.extend(cluster.set_ready(node, ConditionStatus::True, now));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use nodewarden_model::Span;

    use super::*;
    use crate::admission::AdmissionDefaults;
    use crate::scenario::{NodeSpec, TimeSpec};

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_nanos(ms * 1_000_000)
    }

    fn cluster(ready: Option<ConditionStatus>) -> Cluster {
        let mut c = Cluster::new(AdmissionDefaults::default());
        c.add_node(
            &NodeSpec {
                name: "n".into(),
                zone: None,
                labels: BTreeMap::new(),
                created: Some(TimeSpec::At(Span::from_secs(-3600))),
                ready,
                heartbeat: ready.map(|_| TimeSpec::At(Span::from_secs(-100))),
                transition: None,
                conditions: BTreeMap::new(),
                lease: None,
                taints: vec![],
                unschedulable: false,
                kubelet: true,
            },
            Timestamp::EPOCH,
        );
        c
    }

    fn ready(c: &Cluster) -> (ConditionStatus, Timestamp, Timestamp) {
        let r = c.node("n").unwrap().conditions.iter().find(|c| c.kind == ConditionType::Ready).unwrap();
        (r.status, r.last_heartbeat, r.last_transition)
    }

    /// Steps through every due instant up to `end`, as the runner does.
    fn run_until(k: &mut Kubelets, c: &mut Cluster, end: Timestamp) -> Vec<Timestamp> {
        let mut times = Vec::new();
        while let Some(next) = k.next_due() {
            if next > end {
                break;
            }
            k.run_due(next, c);
            times.push(next);
        }
        times
    }

    #[test]
    fn default_timing() {
        let tm = KubeletTiming::default();
        assert_eq!(tm.lease_every, Span::from_secs(10));
        assert_eq!(tm.update_every, Span::from_secs(10));
        assert_eq!(tm.report_every, Span::from_secs(300));
    }

    #[test]
    fn renews_lease_every_quarter_duration_from_zero() {
        let mut c = cluster(Some(ConditionStatus::True));
        let mut k = Kubelets::new(KubeletTiming {
            lease_every: Span::from_secs(10),
            update_every: Span::from_secs(7),
            report_every: Span::from_secs(300),
        });
        k.schedule("n", t(0));
        k.run_due(t(0), &mut c);
        assert_eq!(c.lease("n"), Some(t(0)));
        // Ready posted at 0 (a report time) with heartbeat 0, no transition change.
        assert_eq!(ready(&c), (ConditionStatus::True, t(0), t(-3_600_000)));
        let times = run_until(&mut k, &mut c, t(30_000));
        assert_eq!(times, [t(7000), t(10_000), t(14_000), t(20_000), t(21_000), t(28_000), t(30_000)]);
        assert_eq!(c.lease("n"), Some(t(30_000)));
        // Ready stayed True and nothing was due to re-post: heartbeat unchanged.
        assert_eq!(ready(&c).1, t(0));
    }

    #[test]
    fn reposts_at_report_times_and_repairs_within_update_frequency() {
        let mut c = cluster(Some(ConditionStatus::True));
        let mut k = Kubelets::new(KubeletTiming {
            lease_every: Span::from_secs(10),
            update_every: Span::from_secs(10),
            report_every: Span::from_secs(60),
        });
        k.schedule("n", t(0));
        run_until(&mut k, &mut c, t(60_000));
        assert_eq!(ready(&c).1, t(60_000));
        // The controller marks it Unknown at 65s; the kubelet posts True at 70s.
        c.set_ready("n", ConditionStatus::Unknown, t(65_000));
        run_until(&mut k, &mut c, t(69_999));
        assert_eq!(ready(&c).0, ConditionStatus::Unknown);
        run_until(&mut k, &mut c, t(70_000));
        assert_eq!(ready(&c), (ConditionStatus::True, t(70_000), t(70_000)));
    }

    #[test]
    fn a_node_without_status_gets_ready_at_start() {
        let mut c = cluster(None);
        let mut k = Kubelets::new(KubeletTiming::default());
        k.schedule("n", t(0));
        let obs = k.run_due(t(0), &mut c);
        assert_eq!(obs.len(), 2, "{obs:?}");
        assert_eq!(ready(&c), (ConditionStatus::True, t(0), t(0)));
    }

    #[test]
    fn stop_and_start() {
        let mut c = cluster(Some(ConditionStatus::True));
        let mut k = Kubelets::new(KubeletTiming::default());
        k.schedule("n", t(0));
        run_until(&mut k, &mut c, t(10_000));
        k.stop("n");
        assert!(!k.is_running("n"));
        assert_eq!(k.next_due(), None);
        c.set_ready("n", ConditionStatus::Unknown, t(50_000));
        let obs = k.start("n", t(61_500), &mut c);
        assert_eq!(obs.len(), 2);
        assert_eq!(c.lease("n"), Some(t(61_500)));
        assert_eq!(ready(&c), (ConditionStatus::True, t(61_500), t(61_500)));
        // Cadence restarts from the start time.
        assert_eq!(k.next_due(), Some(t(71_500)));
    }

    #[test]
    fn nothing_changes_means_no_observation() {
        let mut c = cluster(Some(ConditionStatus::True));
        let mut k = Kubelets::new(KubeletTiming {
            lease_every: Span::from_secs(10),
            update_every: Span::from_secs(3),
            report_every: Span::from_secs(300),
        });
        k.schedule("n", t(0));
        k.run_due(t(0), &mut c);
        assert!(k.run_due(t(3000), &mut c).is_empty());
    }

    #[test]
    fn kubelet_of_a_deleted_node_does_nothing() {
        let mut c = cluster(Some(ConditionStatus::True));
        let mut k = Kubelets::new(KubeletTiming::default());
        k.schedule("n", t(0));
        c.delete_node("n");
        assert!(k.run_due(t(0), &mut c).is_empty());
        assert_eq!(c.lease("n"), None);
    }

    #[test]
    fn advance_skips_missed_instants() {
        assert_eq!(advance(t(0), t(25_000), Span::from_secs(10)), t(30_000));
        assert_eq!(advance(t(0), t(20_000), Span::from_secs(10)), t(30_000));
        assert_eq!(advance(t(40_000), t(20_000), Span::from_secs(10)), t(40_000));
        assert_eq!(advance(t(0), t(0), Span::ZERO), Timestamp::MAX);
    }
}
