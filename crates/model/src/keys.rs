//! Well-known label and taint keys, spelled exactly as upstream spells them.

/// Taint key for a node whose Ready condition is False.
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// Taint key for a node whose Ready condition is Unknown.
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// Taint key for MemoryPressure=True.
pub const TAINT_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
/// Taint key for DiskPressure=True.
pub const TAINT_DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
/// Taint key for PIDPressure=True.
pub const TAINT_PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
/// Taint key for NetworkUnavailable=True.
pub const TAINT_NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";
/// Taint key for `spec.unschedulable`.
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// Topology region label.
pub const LABEL_TOPOLOGY_REGION: &str = "topology.kubernetes.io/region";
/// Topology zone label.
pub const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
/// Deprecated region label; when present it wins over the topology label.
pub const LABEL_FAILURE_DOMAIN_REGION: &str = "failure-domain.beta.kubernetes.io/region";
/// Deprecated zone label; when present it wins over the topology label.
pub const LABEL_FAILURE_DOMAIN_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
/// Presence (any value) leaves the node out of its zone's disruption counts.
pub const LABEL_EXCLUDE_DISRUPTION: &str = "node.kubernetes.io/exclude-disruption";
/// Stable OS label, the source of truth for [`LABEL_BETA_OS`].
pub const LABEL_OS: &str = "kubernetes.io/os";
/// Deprecated OS label kept in step with [`LABEL_OS`].
pub const LABEL_BETA_OS: &str = "beta.kubernetes.io/os";
/// Stable architecture label, the source of truth for [`LABEL_BETA_ARCH`].
pub const LABEL_ARCH: &str = "kubernetes.io/arch";
/// Deprecated architecture label kept in step with [`LABEL_ARCH`].
pub const LABEL_BETA_ARCH: &str = "beta.kubernetes.io/arch";

/// The deprecated/stable label pairs that `reconcileNodeLabels` keeps equal.
pub const RECONCILED_LABELS: [(&str, &str); 2] = [(LABEL_OS, LABEL_BETA_OS), (LABEL_ARCH, LABEL_BETA_ARCH)];

/// `status.reason` of a pod legacy eviction deleted with its lost node
/// (upstream's `NodeUnreachablePodReason`).
pub const POD_REASON_NODE_LOST: &str = "NodeLost";
