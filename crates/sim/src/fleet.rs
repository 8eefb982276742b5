//! A generated cluster: N nodes in Z zones with P pods each, shaped like a
//! real one, for `nodewarden sim` and the load test.
//!
//! - Nodes are named `node-000000`, `node-000001`, ... and split into
//!   contiguous blocks, one per zone (`region-1/zone-a`, `zone-b`, ...).
//!   Each has the stable and beta os/arch labels, Ready=True and the three
//!   pressure conditions False, and a Lease, all as of a heartbeat shortly
//!   before the simulation starts.
//! - Each node runs two DaemonSet pods (one when it has fewer than five
//!   pods; none with one), which tolerate `not-ready` and `unreachable`
//!   NoExecute forever, as the DaemonSet controller makes them.
//! - Of the other pods, about 85% have no toleration of their own, so
//!   admission gives them the default 300 s ones; about 10% tolerate
//!   `not-ready` and `unreachable` for their own 30, 60, 120 or 600 s; about
//!   5% tolerate every taint forever (`operator: Exists`).
//! - Kubelets start at random phases, so renewals spread over the Lease
//!   interval as in a real cluster, and renew with the kubelet's 4% jitter.

use nodewarden_engine::NodeSnapshot;
use nodewarden_model::keys::{
    LABEL_ARCH, LABEL_BETA_ARCH, LABEL_BETA_OS, LABEL_OS, LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE, TAINT_NOT_READY,
    TAINT_UNREACHABLE,
};
use nodewarden_model::{
    ConditionStatus, ConditionType, NodeCondition, Span, TaintEffect, Timestamp, Toleration, TolerationOperator,
};

use crate::cluster::Cluster;
use crate::kubelet::{KubeletTiming, Kubelets};
use crate::rng::Rng;
use crate::scenario::PodSpec;

/// The kubelet's Lease renewal jitter factor (`JitterUntil(..., 0.04, ...)`).
pub const LEASE_JITTER: f64 = 0.04;

/// Own `tolerationSeconds` some workloads set, drawn uniformly.
pub const OWN_TOLERATION_SECONDS: [i64; 4] = [30, 60, 120, 600];

/// The shape of a generated cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FleetSpec {
    /// Nodes in the whole cluster.
    pub nodes: usize,
    /// Zones the nodes are split into (contiguous blocks).
    pub zones: usize,
    /// Pods bound to each node.
    pub pods_per_node: usize,
    /// Decides kubelet phases and which pods get which tolerations.
    pub seed: u64,
}

/// The generated nodes, for fault plans and reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Layout {
    /// Zone names (`zone-a`, ...), in order; the region is `region-1`.
    pub zones: Vec<String>,
    /// Node names, in order.
    pub nodes: Vec<String>,
    /// Each node's zone, an index into `zones`.
    pub zone_of: Vec<usize>,
}

impl Layout {
    /// The nodes of zone `z`, in order.
    pub fn nodes_in(&self, z: usize) -> Vec<String> {
        self.nodes.iter().zip(&self.zone_of).filter(|(_, zz)| **zz == z).map(|(n, _)| n.clone()).collect()
    }
}

/// The name of zone `i`: `zone-a` to `zone-z`, then `zone-27`, ...
pub fn zone_name(i: usize) -> String {
    match u8::try_from(i).ok().filter(|&b| b < 26) {
        Some(b) => format!("zone-{}", char::from(b'a' + b)),
        None => format!("zone-{}", i + 1),
    }
}

fn toleration(key: &str, seconds: Option<i64>) -> Toleration {
    Toleration {
        key: key.to_string(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: Some(TaintEffect::NoExecute),
        seconds,
    }
}

/// Builds the fleet into `cluster` (through its admission, as pods are
/// created in a real cluster) and schedules its kubelets; returns the
/// layout. Heartbeats and Leases are as of shortly before t=0.
pub fn build(spec: &FleetSpec, timing: &KubeletTiming, cluster: &mut Cluster, kubelets: &mut Kubelets) -> Layout {
    let zones = spec.zones.max(1);
    let mut layout = Layout { zones: (0..zones).map(zone_name).collect(), ..Layout::default() };
    let mut phases = Rng::stream(spec.seed, 1);
    let mut mix = Rng::stream(spec.seed, 2);
    let start = Timestamp::EPOCH;
    let created = start - Span::from_secs(30 * 24 * 3600);
    let fraction = |rng: &mut Rng, every: Span| Span::from_nanos((rng.unit() * every.as_nanos().max(0) as f64) as i64);
    let daemonsets = match spec.pods_per_node {
        0 | 1 => 0,
        2..=4 => 1,
        _ => 2,
    };
    for i in 0..spec.nodes {
        let z = i * zones / spec.nodes.max(1);
        let name = format!("node-{i:06}");
        // Phases: the next renewal, status computation and report are each
        // somewhere within one period from now; the last ones were one
        // period before.
        let next_lease = start + fraction(&mut phases, timing.lease_every);
        let next_update = start + fraction(&mut phases, timing.update_every);
        let next_report = start + fraction(&mut phases, timing.report_every);
        let heartbeat = next_report - timing.report_every;
        let conditions = [
            (ConditionType::Ready, ConditionStatus::True, "KubeletReady"),
            (ConditionType::MemoryPressure, ConditionStatus::False, "KubeletHasSufficientMemory"),
            (ConditionType::DiskPressure, ConditionStatus::False, "KubeletHasNoDiskPressure"),
            (ConditionType::PidPressure, ConditionStatus::False, "KubeletHasSufficientPID"),
        ]
        .into_iter()
        .map(|(kind, status, reason)| NodeCondition {
            kind,
            status,
            reason: reason.to_string(),
            message: String::new(),
            last_heartbeat: heartbeat,
            last_transition: created,
        })
        .collect();
        let labels = [
            (LABEL_TOPOLOGY_REGION, "region-1"),
            (LABEL_TOPOLOGY_ZONE, layout.zones[z].as_str()),
            (LABEL_OS, "linux"),
            (LABEL_BETA_OS, "linux"),
            (LABEL_ARCH, "amd64"),
            (LABEL_BETA_ARCH, "amd64"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        cluster.put_node_unobserved(NodeSnapshot {
            version: 0,
            allocatable: None,
            name: name.clone(),
            created,
            labels,
            conditions,
            taints: Vec::new(),
            unschedulable: false,
        });
        cluster.set_lease(&name, next_lease - timing.lease_every);
        kubelets.schedule_phased(&name, next_lease, next_update, next_report);

        for j in 0..spec.pods_per_node {
            let (key, daemonset, tolerations) = if j < daemonsets {
                let tolerations = vec![toleration(TAINT_NOT_READY, None), toleration(TAINT_UNREACHABLE, None)];
                (format!("kube-system/ds{j}-{i:06}"), true, tolerations)
            } else {
                let draw = mix.unit();
                let tolerations = if draw < 0.85 {
                    Vec::new()
                } else if draw < 0.95 {
                    let s = OWN_TOLERATION_SECONDS[mix.below(OWN_TOLERATION_SECONDS.len() as u64) as usize];
                    vec![toleration(TAINT_NOT_READY, Some(s)), toleration(TAINT_UNREACHABLE, Some(s))]
                } else {
                    vec![Toleration {
                        key: String::new(),
                        operator: TolerationOperator::Exists,
                        ..Toleration::default()
                    }]
                };
                (format!("apps/w{i:06}-{j:02}"), false, tolerations)
            };
            cluster.add_pod_unobserved(&PodSpec {
                name: key,
                node: Some(name.clone()),
                daemonset,
                ready: Some(true),
                terminating: false,
                tolerations,
                refuse_deletions: 0,
                scheduling: Default::default(),
            });
        }
        layout.nodes.push(name);
        layout.zone_of.push(z);
    }
    layout
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::AdmissionDefaults;

    #[test]
    fn builds_zones_pods_and_kubelets() {
        let mut cluster = Cluster::new(AdmissionDefaults::default());
        let timing = KubeletTiming::default();
        let mut kubelets = Kubelets::new(timing);
        let spec = FleetSpec { nodes: 10, zones: 3, pods_per_node: 30, seed: 1 };
        let layout = build(&spec, &timing, &mut cluster, &mut kubelets);
        assert_eq!(layout.zones, ["zone-a", "zone-b", "zone-c"]);
        assert_eq!(layout.zone_of, [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]);
        assert_eq!(cluster.nodes().count(), 10);
        assert_eq!(cluster.pods().count(), 300);
        assert_eq!(cluster.pods().filter(|p| p.daemonset).count(), 20);
        // Every pod tolerates both taints somehow (admission, its own, or DaemonSet).
        assert!(cluster.pods().all(|p| !p.tolerations.is_empty()));
        assert!(kubelets.is_running("node-000009"));
        let first = kubelets.next_due().unwrap_or(Timestamp::MAX);
        assert!(first >= Timestamp::EPOCH && first < Timestamp::EPOCH + timing.lease_every);
        assert_eq!(zone_name(27), "zone-28");
    }
}
