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
//! - The pods other than the DaemonSets' belong to workloads
//!   ([`workloads`]): Deployments of 3 to 12 replicas (through a ReplicaSet
//!   each), one workload in ten a StatefulSet, some on neighbouring nodes
//!   of one zone and some spread over the zones. The simulator does not
//!   need owners; what serves the fleet as API objects (`sim --serve`)
//!   writes them into the pods, so a snapshot of it reads as a real
//!   cluster's.

use nodewarden_engine::NodeSnapshot;
use nodewarden_model::keys::{
    LABEL_ARCH, LABEL_BETA_ARCH, LABEL_BETA_OS, LABEL_OS, LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE, TAINT_NOT_READY,
    TAINT_UNREACHABLE,
};
use nodewarden_model::{NodeCondition, Span, Timestamp, Toleration, TolerationOperator};

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
    Toleration::no_execute(key, seconds)
}

/// DaemonSet pods per node: two, one when a node has fewer than five pods,
/// none with one.
pub fn daemonsets_per_node(pods_per_node: usize) -> usize {
    match pods_per_node {
        0 | 1 => 0,
        2..=4 => 1,
        _ => 2,
    }
}

/// The namespace of the fleet's workload pods.
pub const WORKLOAD_NAMESPACE: &str = "apps";

/// The key of the `j`th pod of node `i` when it is a workload's pod
/// (`apps/w000012-05`).
pub fn workload_pod_key(i: usize, j: usize) -> String {
    format!("{WORKLOAD_NAMESPACE}/w{i:06}-{j:02}")
}

/// The controller a workload's pods are made by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadKind {
    /// A Deployment, whose ReplicaSet owns the pods.
    Deployment,
    /// A StatefulSet, owning its pods directly.
    StatefulSet,
}

/// One of the fleet's workloads: who owns which pods, so the served fleet
/// carries the owner references and labels a real cluster's pods carry and
/// what reads a snapshot of it (what-if's per-workload report) can group
/// replicas as it groups a real cluster's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// Deployment or StatefulSet.
    pub kind: WorkloadKind,
    /// Its name (`svc-0000`, or `db-0001` for a StatefulSet), in
    /// [`WORKLOAD_NAMESPACE`].
    pub name: String,
    /// The hash of its pod template, in the form the controllers write it:
    /// a Deployment's ReplicaSet is `<name>-<revision>` and its pods carry
    /// `pod-template-hash: <revision>`; a StatefulSet's pods carry
    /// `controller-revision-hash: <name>-<revision>`.
    pub revision: String,
    /// Its pods' keys, in replica order (a StatefulSet's ordinals).
    pub pods: Vec<String>,
}

impl Workload {
    /// The kind and name of the pods' controlling owner: the ReplicaSet of
    /// a Deployment, the StatefulSet itself.
    pub fn owner(&self) -> (&'static str, String) {
        match self.kind {
            WorkloadKind::Deployment => ("ReplicaSet", format!("{}-{}", self.name, self.revision)),
            WorkloadKind::StatefulSet => ("StatefulSet", self.name.clone()),
        }
    }
}

/// A pod template hash as the workload controllers spell it: the decimal
/// digits of a 32-bit hash, each written as a letter or digit that cannot
/// form words (so `0`..`9` become `4`..`9`, `b`, `c`, `d`, `f`).
fn template_hash(h: u32) -> String {
    const SAFE: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    h.to_string().bytes().map(|d| char::from(SAFE[usize::from(d) % SAFE.len()])).collect()
}

/// The workloads of the fleet `spec` describes, in order. The workload
/// pods are taken slot by slot (each node's first workload pod, then each
/// node's second, ...), walking the nodes in order for even slots (so a
/// workload sits on neighbouring nodes, mostly in one zone) and zone by
/// zone in turn for odd slots (so it spreads over the zones), and cut into
/// workloads of 3, 4, ... 12 replicas, then 3 again; the last may be
/// smaller. Workload 1, 11, 21, ... is a StatefulSet, the rest
/// Deployments.
pub fn workloads(spec: &FleetSpec) -> Vec<Workload> {
    let nodes = spec.nodes;
    let zones = spec.zones.max(1);
    let daemonsets = daemonsets_per_node(spec.pods_per_node);
    let mut in_zone = vec![0usize; zones];
    let mut spread: Vec<(usize, usize, usize)> = (0..nodes)
        .map(|i| {
            let z = i * zones / nodes.max(1);
            in_zone[z] += 1;
            (in_zone[z], z, i)
        })
        .collect();
    spread.sort_unstable();
    let mut keys = Vec::with_capacity(nodes * spec.pods_per_node.saturating_sub(daemonsets));
    for (slot, j) in (daemonsets..spec.pods_per_node).enumerate() {
        if slot % 2 == 0 {
            keys.extend((0..nodes).map(|i| workload_pod_key(i, j)));
        } else {
            keys.extend(spread.iter().map(|&(_, _, i)| workload_pod_key(i, j)));
        }
    }
    let mut hashes = Rng::stream(spec.seed, 3);
    let mut out = Vec::new();
    let mut keys = keys.into_iter().peekable();
    while keys.peek().is_some() {
        let w = out.len();
        let replicas = 3 + w % 10;
        let (kind, name) = if w % 10 == 1 {
            (WorkloadKind::StatefulSet, format!("db-{w:04}"))
        } else {
            (WorkloadKind::Deployment, format!("svc-{w:04}"))
        };
        let revision = template_hash((hashes.next_u64() >> 32) as u32);
        out.push(Workload { kind, name, revision, pods: keys.by_ref().take(replicas).collect() });
    }
    out
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
    let daemonsets = daemonsets_per_node(spec.pods_per_node);
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
        let conditions = NodeCondition::healthy_kubelet(heartbeat, created);
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
                (workload_pod_key(i, j), false, tolerations)
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

    #[test]
    fn workloads_own_every_workload_pod_once() {
        let mut cluster = Cluster::new(AdmissionDefaults::default());
        let timing = KubeletTiming::default();
        let mut kubelets = Kubelets::new(timing);
        let spec = FleetSpec { nodes: 30, zones: 3, pods_per_node: 10, seed: 1 };
        let layout = build(&spec, &timing, &mut cluster, &mut kubelets);
        let ws = workloads(&spec);
        let mut owned: Vec<&str> = ws.iter().flat_map(|w| w.pods.iter().map(String::as_str)).collect();
        owned.sort_unstable();
        let mut expected: Vec<&str> = cluster.pods().filter(|p| !p.daemonset).map(|p| p.key.as_str()).collect();
        expected.sort_unstable();
        assert_eq!(owned.len(), 240);
        assert_eq!(owned, expected, "every workload pod has exactly one owner");
        let sizes: Vec<usize> = ws.iter().map(|w| w.pods.len()).collect();
        assert_eq!(&sizes[..4], [3, 4, 5, 6]);
        assert!(sizes.iter().all(|&n| (1..=12).contains(&n)));
        assert_eq!(ws[1].kind, WorkloadKind::StatefulSet);
        assert_eq!(ws[1].owner(), ("StatefulSet", "db-0001".to_string()));
        assert_eq!(ws[0].owner(), ("ReplicaSet", format!("svc-0000-{}", ws[0].revision)));
        assert!(ws.iter().all(|w| !w.revision.is_empty() && w.revision.chars().all(|c| "456789bcdf".contains(c))));
        // Some sit in one zone, some spread over all three.
        let zone_of = |key: &str| {
            let node: usize = key.get(6..12).and_then(|n| n.parse().ok()).unwrap_or(usize::MAX);
            layout.zone_of[node]
        };
        let zones: Vec<usize> = ws
            .iter()
            .map(|w| w.pods.iter().map(|p| zone_of(p)).collect::<std::collections::BTreeSet<_>>().len())
            .collect();
        assert!(zones.contains(&1) && zones.contains(&3), "{zones:?}");
        assert_eq!(workloads(&spec), ws, "the same fleet, the same owners");
        assert!(workloads(&FleetSpec { pods_per_node: 0, ..spec }).is_empty(), "no pods, no workloads");
        assert_eq!(template_hash(0), "4");
        assert_eq!(template_hash(1_234_567_890), "56789bcdf4");
    }
}
