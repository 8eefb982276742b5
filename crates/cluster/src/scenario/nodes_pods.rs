//! The cluster a scenario file starts from: nodes, pods (with what the
//! scheduler reads of them), resource quantities and PodDisruptionBudgets.
//!
//! Invariant: what deserializes is a valid spec; a field that can only be
//! checked against another (a budget with both `min-available` and
//! `max-unavailable`, a pod's scheduling fields) is checked here, with the
//! YAML position still known.

use std::collections::BTreeMap;
use std::fmt;

pub use nodewarden_model::IntOrPercent;
use nodewarden_model::resources::{parse_bytes, parse_cpu_millis};
use nodewarden_model::{ConditionStatus, ConditionType, LabelSelector, NodeAffinity, Span, Taint, Toleration};
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use super::*;

/// A node as the file describes it, under `nodes` or in `add-node`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct NodeSpec {
    /// `metadata.name`.
    pub name: String,
    /// `region/zone`: sets the topology region and zone labels (an empty
    /// part sets no label).
    #[serde(default)]
    pub zone: Option<String>,
    /// Any other labels.
    #[serde(default, deserialize_with = "null_as_default")]
    pub labels: BTreeMap<String, String>,
    /// `creationTimestamp`; default: when the node is added.
    #[serde(default)]
    pub created: Option<TimeSpec>,
    /// The Ready condition's status; `None` = the kubelet never posted status.
    #[serde(default)]
    pub ready: Option<ConditionStatus>,
    /// Ready's `lastHeartbeatTime`; default: when the node is added.
    #[serde(default)]
    pub heartbeat: Option<TimeSpec>,
    /// Ready's `lastTransitionTime`; default: the creation time.
    #[serde(default)]
    pub transition: Option<TimeSpec>,
    /// Other conditions and their statuses (same heartbeat and transition as Ready).
    #[serde(default, deserialize_with = "null_as_default")]
    pub conditions: BTreeMap<ConditionType, ConditionStatus>,
    /// The Lease's `renewTime`; `None` = the node has no Lease.
    #[serde(default)]
    pub lease: Option<TimeSpec>,
    /// `spec.taints`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub taints: Vec<Taint>,
    /// `spec.unschedulable`.
    #[serde(default)]
    pub unschedulable: bool,
    /// A simulated kubelet keeps the Lease and status fresh until stopped.
    #[serde(default)]
    pub kubelet: bool,
    /// `status.allocatable`; dimensions left out take the defaults of
    /// [`AllocatableSpec::resources`]. Read only when a scheduler or the
    /// rescheduler runs. Boxed: most nodes give none.
    #[serde(default)]
    pub allocatable: Option<Box<AllocatableSpec>>,
}

impl NodeSpec {
    /// The allocatable the node reports: the file's, or
    /// [`DEFAULT_ALLOCATABLE`] when it gives none (both back ends serve a
    /// node's allocatable alike).
    pub fn allocatable_resources(&self) -> nodewarden_model::Resources {
        self.allocatable.as_ref().map_or(DEFAULT_ALLOCATABLE, |a| a.resources())
    }
}

/// A pod as the file describes it, under `pods` or in `add-pod`.
#[derive(Clone, Debug, PartialEq)]
pub struct PodSpec {
    /// `namespace/name`.
    pub name: String,
    /// `spec.nodeName`; `None` = unscheduled.
    pub node: Option<String>,
    /// Owned by a DaemonSet (marks the owner only; adds no toleration).
    pub daemonset: bool,
    /// The Ready condition's status (default true); `null` = the pod has no
    /// Ready condition.
    pub ready: Option<bool>,
    /// Already being deleted (has a deletion timestamp).
    pub terminating: bool,
    /// `spec.tolerations` before admission adds its defaults.
    pub tolerations: Vec<Toleration>,
    /// The API server refuses this many deletion attempts of the pod before
    /// accepting one, as an admission webhook or (with
    /// `pod-deletion-mode: evict`) a PodDisruptionBudget would.
    pub refuse_deletions: u32,
    /// What the scheduler and the rescheduler read (additions to the
    /// contract, all optional): requests, priority, owner, placement.
    /// Boxed: most pods give none of it.
    pub scheduling: Box<PodSchedulingSpec>,
}

impl PodSpec {
    /// A Ready pod `name` (`namespace/name`) bound to `node`, tolerating
    /// nothing, as a file writes it with only those two fields: what most
    /// tests start from.
    pub fn bound(name: &str, node: &str) -> PodSpec {
        PodSpec {
            name: name.into(),
            node: Some(node.into()),
            daemonset: false,
            ready: Some(true),
            terminating: false,
            tolerations: vec![],
            refuse_deletions: 0,
            scheduling: Default::default(),
        }
    }
}

/// The fields of a pod the scheduler and the rescheduler read, as the
/// file spells them (flat in the pod's mapping). All optional; a pod that
/// gives none is what the contract describes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodSchedulingSpec {
    /// `resources.requests` summed over the containers; absent = none.
    pub requests: RequestsSpec,
    /// `spec.priorityClassName`.
    pub priority_class: Option<String>,
    /// Carries the `scheduler.alpha.kubernetes.io/critical-pod` annotation.
    pub critical: bool,
    /// `metadata.labels` (budget selectors read them).
    pub labels: BTreeMap<String, String>,
    /// The kind of the controller owning the pod (`ReplicaSet`,
    /// `StatefulSet`, `Job`, ...); `None` = a bare pod. DaemonSet pods use
    /// `daemonset: true`.
    pub owner: Option<String>,
    /// A mirror pod (annotation `kubernetes.io/config.mirror`).
    pub mirror: bool,
    /// `spec.terminationGracePeriodSeconds`; `None` = 30 s.
    pub grace_period: Option<Span>,
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity, in the shape of
    /// `requiredDuringSchedulingIgnoredDuringExecution`
    /// (`{nodeSelectorTerms: [{matchExpressions, matchFields}]}`).
    pub affinity: Option<NodeAffinity>,
    /// The pod carries `PodScheduled=False` (reason `Unschedulable`) since
    /// this time; for files without the scheduler.
    pub unschedulable_since: Option<TimeSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawPodSpec {
    name: String,
    #[serde(default)]
    node: Option<String>,
    #[serde(default)]
    daemonset: bool,
    #[serde(default = "default_pod_ready", deserialize_with = "nullable")]
    ready: Option<bool>,
    #[serde(default)]
    terminating: bool,
    #[serde(default, deserialize_with = "null_as_default")]
    tolerations: Vec<Toleration>,
    #[serde(default)]
    refuse_deletions: u32,
    #[serde(default, deserialize_with = "null_as_default")]
    requests: RequestsSpec,
    #[serde(default)]
    priority_class: Option<String>,
    #[serde(default)]
    critical: bool,
    #[serde(default, deserialize_with = "null_as_default")]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    owner: Option<String>,
    #[serde(default)]
    mirror: bool,
    #[serde(default)]
    grace_period: Option<Span>,
    #[serde(default, deserialize_with = "null_as_default")]
    node_selector: BTreeMap<String, String>,
    #[serde(default)]
    affinity: Option<NodeAffinity>,
    #[serde(default)]
    unschedulable_since: Option<TimeSpec>,
}

impl TryFrom<RawPodSpec> for PodSpec {
    type Error = String;

    fn try_from(r: RawPodSpec) -> Result<PodSpec, String> {
        if r.owner.as_deref() == Some("DaemonSet") {
            return Err("owner: DaemonSet pods are spelled `daemonset: true`".to_string());
        }
        if r.owner.as_deref() == Some("") {
            return Err("owner: must not be empty (omit it for a bare pod)".to_string());
        }
        if let Some(g) = r.grace_period
            && g.is_negative()
        {
            return Err(format!("grace-period: must not be negative, got {g}"));
        }
        if r.unschedulable_since.is_some() && r.node.is_some() {
            return Err("unschedulable-since: only an unscheduled pod (no `node`) can be unschedulable".to_string());
        }
        Ok(PodSpec {
            name: r.name,
            node: r.node,
            daemonset: r.daemonset,
            ready: r.ready,
            terminating: r.terminating,
            tolerations: r.tolerations,
            refuse_deletions: r.refuse_deletions,
            scheduling: Box::new(PodSchedulingSpec {
                requests: r.requests,
                priority_class: r.priority_class,
                critical: r.critical,
                labels: r.labels,
                owner: r.owner,
                mirror: r.mirror,
                grace_period: r.grace_period,
                node_selector: r.node_selector,
                affinity: r.affinity,
                unschedulable_since: r.unschedulable_since,
            }),
        })
    }
}

impl<'de> Deserialize<'de> for PodSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PodSpec, D::Error> {
        deserialize_checked::<D, RawPodSpec, PodSpec>(d, "a pod: a mapping with `name` and its fields")
    }
}

/// A CPU amount in millicores, written as a Kubernetes quantity (`500m`,
/// `"2"`, `1.5`) or a plain number of cores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuQuantity(pub u64);

/// A memory amount in bytes, written as a Kubernetes quantity (`128Mi`,
/// `1G`) or a plain number of bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryQuantity(pub u64);

/// Reads a quantity given as a string or a number with `parse`, so a bad
/// one is an error at its field and line.
struct QuantityVisitor(fn(&str) -> Result<u64, nodewarden_model::QuantityError>, &'static str);

impl Visitor<'_> for QuantityVisitor {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.1)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        (self.0)(v).map_err(E::custom)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
        if !v.is_finite() {
            return Err(E::custom(format!("quantity {v}: not a finite number")));
        }
        self.visit_str(&v.to_string())
    }
}

impl<'de> Deserialize<'de> for CpuQuantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<CpuQuantity, D::Error> {
        d.deserialize_any(QuantityVisitor(parse_cpu_millis, "a CPU quantity such as 500m, 2 or \"1.5\""))
            .map(CpuQuantity)
    }
}

impl<'de> Deserialize<'de> for MemoryQuantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<MemoryQuantity, D::Error> {
        d.deserialize_any(QuantityVisitor(parse_bytes, "a memory quantity such as 128Mi, 1Gi or 1e9"))
            .map(MemoryQuantity)
    }
}

/// A pod's requests: `{cpu, memory}`, each optional (absent = 0, as for a
/// BestEffort container).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RequestsSpec {
    /// CPU requested.
    #[serde(default)]
    pub cpu: Option<CpuQuantity>,
    /// Memory requested.
    #[serde(default)]
    pub memory: Option<MemoryQuantity>,
}

impl RequestsSpec {
    /// The requests in the scheduler's units, with one pod slot.
    pub fn resources(&self) -> nodewarden_model::Resources {
        nodewarden_model::Resources::pod(self.cpu.map_or(0, |c| c.0), self.memory.map_or(0, |m| m.0))
    }
}

/// A node's `status.allocatable`: `{cpu, memory, pods}`, each optional.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AllocatableSpec {
    /// Allocatable CPU (default 4 cores).
    #[serde(default)]
    pub cpu: Option<CpuQuantity>,
    /// Allocatable memory (default 16Gi).
    #[serde(default)]
    pub memory: Option<MemoryQuantity>,
    /// Pod slots (default 110, the kubelet's `maxPods`).
    #[serde(default)]
    pub pods: Option<u64>,
}

/// What a node offers when the file does not say: 4 CPU, 16Gi, 110 pods
/// (a common worker size, and the kubelet's default `maxPods`).
pub const DEFAULT_ALLOCATABLE: nodewarden_model::Resources =
    nodewarden_model::Resources { cpu_millis: 4000, memory_bytes: 16 << 30, pods: 110 };

impl AllocatableSpec {
    /// The amounts, each dimension not given taken from
    /// [`DEFAULT_ALLOCATABLE`].
    pub fn resources(&self) -> nodewarden_model::Resources {
        nodewarden_model::Resources {
            cpu_millis: self.cpu.map_or(DEFAULT_ALLOCATABLE.cpu_millis, |c| c.0),
            memory_bytes: self.memory.map_or(DEFAULT_ALLOCATABLE.memory_bytes, |m| m.0),
            pods: self.pods.unwrap_or(DEFAULT_ALLOCATABLE.pods),
        }
    }
}

/// A PodDisruptionBudget (an addition to the contract): `name` is
/// `namespace/name`, `selector` a label selector over the pods of that
/// namespace, and exactly one of `min-available` / `max-unavailable`
/// (checked as it is read, so the error has its line).
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetSpec {
    /// `namespace/name`.
    pub name: String,
    /// `spec.selector` (`matchLabels`, `matchExpressions`); empty = every
    /// pod of the namespace.
    pub selector: LabelSelector,
    /// `spec.minAvailable`.
    pub min_available: Option<IntOrPercent>,
    /// `spec.maxUnavailable`.
    pub max_unavailable: Option<IntOrPercent>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawBudget {
    name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    selector: LabelSelector,
    #[serde(default)]
    min_available: Option<IntOrPercent>,
    #[serde(default)]
    max_unavailable: Option<IntOrPercent>,
}

impl TryFrom<RawBudget> for BudgetSpec {
    type Error = String;

    fn try_from(r: RawBudget) -> Result<BudgetSpec, String> {
        match (r.min_available, r.max_unavailable) {
            (Some(_), Some(_)) => {
                Err("a budget gives one of min-available and max-unavailable, not both (as policy/v1)".to_string())
            }
            (None, None) => Err("a budget needs min-available or max-unavailable".to_string()),
            _ => Ok(BudgetSpec {
                name: r.name,
                selector: r.selector,
                min_available: r.min_available,
                max_unavailable: r.max_unavailable,
            }),
        }
    }
}

impl<'de> Deserialize<'de> for BudgetSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<BudgetSpec, D::Error> {
        deserialize_checked::<D, RawBudget, BudgetSpec>(
            d,
            "a budget: a mapping with `name`, `selector` and one of min-available, max-unavailable",
        )
    }
}

fn default_pod_ready() -> Option<bool> {
    Some(true)
}
