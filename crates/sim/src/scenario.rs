//! The scenario file format (`docs/scenarios.md`, a public contract), as Rust
//! types that deserialize from YAML or JSON.
//!
//! Every struct refuses unknown fields, so a typo is an error naming its
//! path instead of a silently ignored line. Field names are the kebab-case
//! spellings of the format. An event or an expectation is read as one flat
//! mapping and then checked for "exactly one action" (or "exactly one
//! subject") while the YAML position is still known, so those errors carry a
//! line number too. Cross-references (unknown nodes, duplicate names, ...)
//! are checked afterwards by [`crate::validate()`].

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use nodewarden_engine::ZoneState;
use nodewarden_model::resources::{parse_bytes, parse_cpu_millis};
use nodewarden_model::{
    ConditionStatus, ConditionType, ControllerConfig, LabelSelector, NodeAffinity, Span, Taint, TaintEffect, Timestamp,
    Toleration,
};
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// A whole scenario: a cluster, a timeline and what must hold when.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Scenario {
    /// A title for humans; echoed in the summary line.
    #[serde(default)]
    pub name: Option<String>,
    /// The last instant simulated; `None` = latest `at` in events/expect + 1s.
    #[serde(default)]
    pub run_until: Option<Span>,
    /// The controller's flags, spelled as on the command line.
    #[serde(default, deserialize_with = "null_as_default")]
    pub config: ControllerConfig,
    /// What the surrounding cluster does (admission defaults, kubelets).
    #[serde(default, deserialize_with = "null_as_default")]
    pub cluster: ClusterSpec,
    /// The nodes present at t=0.
    #[serde(default, deserialize_with = "null_as_default")]
    pub nodes: Vec<NodeSpec>,
    /// The pods present at t=0.
    #[serde(default, deserialize_with = "null_as_default")]
    pub pods: Vec<PodSpec>,
    /// PodDisruptionBudgets present at t=0 (an addition to the contract:
    /// evictions honour them, and the rescheduler reads them).
    #[serde(default, deserialize_with = "null_as_default")]
    pub budgets: Vec<BudgetSpec>,
    /// What happens to the cluster, and when.
    #[serde(default, deserialize_with = "null_as_default")]
    pub events: Vec<EventEntry>,
    /// What must hold, and when.
    #[serde(default, deserialize_with = "null_as_default")]
    pub expect: Vec<Expectation>,
}

impl Scenario {
    /// The last instant to simulate: `run-until`, or the latest `at` of any
    /// event or expectation (0 if none is later) plus one second.
    pub fn end(&self) -> Timestamp {
        if let Some(end) = self.run_until {
            return Timestamp::EPOCH + end;
        }
        let latest = self
            .events
            .iter()
            .map(|e| e.at)
            .chain(self.expect.iter().map(|e| e.at))
            .max()
            .unwrap_or(Span::ZERO)
            .max(Span::ZERO);
        Timestamp::EPOCH + latest + Span::from_secs(1)
    }
}

/// Admission defaults and simulated kubelet settings.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ClusterSpec {
    /// `tolerationSeconds` of the not-ready toleration admission adds to
    /// pods lacking one; `None` (`null` in the file) = none added. Default 300.
    #[serde(default = "default_toleration_seconds", deserialize_with = "nullable")]
    pub default_not_ready_toleration_seconds: Option<i64>,
    /// The same for the unreachable toleration. Default 300.
    #[serde(default = "default_toleration_seconds", deserialize_with = "nullable")]
    pub default_unreachable_toleration_seconds: Option<i64>,
    /// Settings of the simulated kubelets (`kubelet: true` nodes).
    #[serde(default, deserialize_with = "null_as_default")]
    pub kubelet: KubeletSpec,
    /// Run the simulated kube-scheduler ([`crate::scheduler`]): pending
    /// pods are bound, or marked Unschedulable. Default false, so a file
    /// without it keeps its pods unscheduled until `bind-pod`, as the
    /// contract has it.
    #[serde(default)]
    pub scheduler: bool,
    /// How slow the API server between the controller and the cluster is
    /// (`{write-latency: 20ms..200ms, watch-delay: 50ms..500ms}`); absent,
    /// the instant world: each write lands at once and each change is seen
    /// in the same instant. `--api-latency` overrides it.
    #[serde(default, deserialize_with = "null_as_default")]
    pub api: crate::wire::ApiLatency,
}

fn default_toleration_seconds() -> Option<i64> {
    Some(300)
}

impl Default for ClusterSpec {
    fn default() -> Self {
        ClusterSpec {
            default_not_ready_toleration_seconds: default_toleration_seconds(),
            default_unreachable_toleration_seconds: default_toleration_seconds(),
            kubelet: KubeletSpec::default(),
            scheduler: false,
            api: crate::wire::ApiLatency::NONE,
        }
    }
}

/// The kubelet configuration the simulated kubelets follow (kubelet
/// defaults).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct KubeletSpec {
    /// `nodeLeaseDurationSeconds`: the Lease is renewed every quarter of it (40).
    pub node_lease_duration_seconds: u64,
    /// `nodeStatusUpdateFrequency`: how often the kubelet computes its
    /// status and posts it if Ready is not True (10s).
    pub node_status_update_frequency: Span,
    /// `nodeStatusReportFrequency`: how often the status is posted even
    /// when nothing changed (5m).
    pub node_status_report_frequency: Span,
}

impl Default for KubeletSpec {
    fn default() -> Self {
        KubeletSpec {
            node_lease_duration_seconds: 40,
            node_status_update_frequency: Span::from_secs(10),
            node_status_report_frequency: Span::from_secs(300),
        }
    }
}

/// A time in the file: a duration from t=0, or `now` (the instant of the
/// event that sets it; t=0 under `nodes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSpec {
    /// The instant the enclosing event (or the scenario start) happens.
    Now,
    /// This offset from t=0 (may be negative).
    At(Span),
}

impl TimeSpec {
    /// The instant meant, given the current one.
    pub fn resolve(self, now: Timestamp) -> Timestamp {
        match self {
            TimeSpec::Now => now,
            TimeSpec::At(s) => Timestamp::EPOCH + s,
        }
    }
}

impl<'de> Deserialize<'de> for TimeSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<TimeSpec, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = TimeSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as 45s, 1m30s, 500ms or -1h, or `now`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<TimeSpec, E> {
                if v.trim() == "now" {
                    return Ok(TimeSpec::Now);
                }
                v.parse().map(TimeSpec::At).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<TimeSpec, E> {
                if v == 0 {
                    Ok(TimeSpec::At(Span::ZERO))
                } else {
                    Err(E::custom(format!("duration {v} has no unit: write {v}s, {v}m or {v}ms")))
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<TimeSpec, E> {
                self.visit_u64(v.unsigned_abs())
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for TimeSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            TimeSpec::Now => s.serialize_str("now"),
            TimeSpec::At(span) => span.serialize(s),
        }
    }
}

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

/// A count or a percentage, as a PodDisruptionBudget's `minAvailable` and
/// `maxUnavailable` are written (`2`, `"50%"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOrPercent {
    /// A number of pods.
    Int(u32),
    /// A percentage (0 to 100) of the pods the budget expects.
    Percent(u32),
}

impl IntOrPercent {
    /// The amount for `expected` pods, percentages rounded up (as the
    /// disruption controller scales both fields).
    pub fn scaled(self, expected: u32) -> u32 {
        match self {
            IntOrPercent::Int(n) => n,
            IntOrPercent::Percent(p) => {
                (u64::from(p) * u64::from(expected)).div_ceil(100).try_into().unwrap_or(u32::MAX)
            }
        }
    }
}

impl fmt::Display for IntOrPercent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntOrPercent::Int(n) => write!(f, "{n}"),
            IntOrPercent::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl<'de> Deserialize<'de> for IntOrPercent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<IntOrPercent, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = IntOrPercent;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of pods (2) or a percentage (\"50%\")")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<IntOrPercent, E> {
                u32::try_from(v).map(IntOrPercent::Int).map_err(|_| E::custom(format!("{v} pods is too many")))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<IntOrPercent, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom(format!("must not be negative, got {v}"))),
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<IntOrPercent, E> {
                let bad = || E::custom(format!("{v:?} is neither a number of pods (2) nor a percentage (\"50%\")"));
                match v.trim().strip_suffix('%') {
                    Some(p) => {
                        let p: u32 = p.trim().parse().map_err(|_| bad())?;
                        if p > 100 {
                            return Err(E::custom(format!("{v:?}: a percentage is at most 100%")));
                        }
                        Ok(IntOrPercent::Percent(p))
                    }
                    None => v.trim().parse::<u32>().map(IntOrPercent::Int).map_err(|_| bad()),
                }
            }
        }
        d.deserialize_any(V)
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

/// `set-allocatable: {node, allocatable}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SetAllocatable {
    /// The node.
    pub node: String,
    /// Its new allocatable (dimensions left out take the defaults).
    #[serde(default, deserialize_with = "null_as_default")]
    pub allocatable: AllocatableSpec,
}

fn default_pod_ready() -> Option<bool> {
    Some(true)
}

/// One or more names: `[a, b]` or just `a`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameList(pub Vec<String>);

impl<'de> Deserialize<'de> for NameList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<NameList, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NameList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a name or a list of names")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<NameList, E> {
                Ok(NameList(vec![v.to_string()]))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<NameList, E> {
                Ok(NameList(vec![v.to_string()]))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<NameList, E> {
                Ok(NameList(vec![v.to_string()]))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<NameList, A::Error> {
                let mut names = Vec::new();
                while let Some(n) = seq.next_element::<String>()? {
                    names.push(n);
                }
                Ok(NameList(names))
            }
        }
        // A visitor rather than an untagged enum: it keeps error positions.
        d.deserialize_any(V)
    }
}

/// `set-ready: {node, status}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SetReady {
    /// The node.
    pub node: String,
    /// The new Ready status.
    pub status: ConditionStatus,
}

/// `set-condition: {node, type, status}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SetCondition {
    /// The node.
    pub node: String,
    /// The condition type (not Ready: use `set-ready`).
    #[serde(rename = "type")]
    pub kind: ConditionType,
    /// Its new status.
    pub status: ConditionStatus,
}

/// `remove-condition: {node, type}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RemoveCondition {
    /// The node.
    pub node: String,
    /// The condition type to remove (Ready included).
    #[serde(rename = "type")]
    pub kind: ConditionType,
}

/// `set-taints: {node, taints}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SetTaints {
    /// The node.
    pub node: String,
    /// Its whole new taint set.
    #[serde(default, deserialize_with = "null_as_default")]
    pub taints: Vec<Taint>,
}

/// `set-unschedulable: {node, value}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SetUnschedulable {
    /// The node.
    pub node: String,
    /// The new `spec.unschedulable`.
    pub value: bool,
}

/// `set-lease: {node, renew}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SetLease {
    /// The node (and Lease) name.
    pub node: String,
    /// The new `renewTime`; may be older than before.
    pub renew: TimeSpec,
}

/// `set-tolerations: {pod, tolerations}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SetTolerations {
    /// The pod.
    pub pod: String,
    /// Exactly the new tolerations (admission does not run on updates).
    #[serde(default, deserialize_with = "null_as_default")]
    pub tolerations: Vec<Toleration>,
}

/// `bind-pod: {pod, node}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct BindPod {
    /// The pod.
    pub pod: String,
    /// The node it is bound to.
    pub node: String,
}

/// `mark-unschedulable: {pod}`: the scheduler's verdict on a pod it could
/// not place, for files that do not run the simulated scheduler.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct MarkUnschedulable {
    /// The pod (one the file defines, or a controller's replacement of
    /// one, `<name>-r<N>`).
    pub pod: String,
}

/// `set-labels: {node, labels}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SetLabels {
    /// The node.
    pub node: String,
    /// Labels merged into the node's; a `null` value removes the label.
    #[serde(default, deserialize_with = "null_as_default")]
    pub labels: BTreeMap<String, Option<String>>,
}

/// What one scenario event does.
#[derive(Clone, Debug, PartialEq)]
pub enum EventAction {
    /// Lease `renewTime` = now for each node.
    RenewLease(Vec<String>),
    /// Post a Ready status (heartbeat = now).
    SetReady(SetReady),
    /// Set another condition (Ready untouched).
    SetCondition(SetCondition),
    /// Stop these simulated kubelets.
    KubeletStop(Vec<String>),
    /// Start these simulated kubelets (renew and post Ready=True at once).
    KubeletStart(Vec<String>),
    /// Create a node.
    AddNode(NodeSpec),
    /// Delete a node (its pods stay bound).
    DeleteNode(String),
    /// Create a pod (admission defaults apply).
    AddPod(PodSpec),
    /// Delete a pod.
    DeletePod(String),
    /// Replace a node's taints.
    SetTaints(SetTaints),
    /// Set `spec.unschedulable`.
    SetUnschedulable(SetUnschedulable),
    /// Set the Lease's `renewTime`.
    SetLease(SetLease),
    /// Remove a node condition.
    RemoveCondition(RemoveCondition),
    /// Replace a pod's tolerations.
    SetTolerations(SetTolerations),
    /// Bind a pod to a node.
    BindPod(BindPod),
    /// Merge labels into a node's.
    SetLabels(SetLabels),
    /// Drop all controller memory and rebuild it from the cluster.
    RestartController,
    /// Create (or replace) a PodDisruptionBudget.
    AddBudget(BudgetSpec),
    /// Delete a PodDisruptionBudget.
    DeleteBudget(String),
    /// Change a node's allocatable.
    SetAllocatable(SetAllocatable),
    /// The scheduler marks an unbound pod `PodScheduled=False`, reason
    /// `Unschedulable`, now (a pod already marked keeps its time).
    MarkUnschedulable(MarkUnschedulable),
}

impl EventAction {
    /// The file spelling of this action's key.
    pub fn name(&self) -> &'static str {
        match self {
            EventAction::RenewLease(_) => "renew-lease",
            EventAction::SetReady(_) => "set-ready",
            EventAction::SetCondition(_) => "set-condition",
            EventAction::KubeletStop(_) => "kubelet-stop",
            EventAction::KubeletStart(_) => "kubelet-start",
            EventAction::AddNode(_) => "add-node",
            EventAction::DeleteNode(_) => "delete-node",
            EventAction::AddPod(_) => "add-pod",
            EventAction::DeletePod(_) => "delete-pod",
            EventAction::SetTaints(_) => "set-taints",
            EventAction::SetUnschedulable(_) => "set-unschedulable",
            EventAction::SetLease(_) => "set-lease",
            EventAction::RemoveCondition(_) => "remove-condition",
            EventAction::SetTolerations(_) => "set-tolerations",
            EventAction::BindPod(_) => "bind-pod",
            EventAction::SetLabels(_) => "set-labels",
            EventAction::RestartController => "restart-controller",
            EventAction::AddBudget(_) => "add-budget",
            EventAction::DeleteBudget(_) => "delete-budget",
            EventAction::SetAllocatable(_) => "set-allocatable",
            EventAction::MarkUnschedulable(_) => "mark-unschedulable",
        }
    }
}

/// One entry of `events`: an instant and exactly one action.
#[derive(Clone, Debug, PartialEq)]
pub struct EventEntry {
    /// When it happens.
    pub at: Span,
    /// What happens.
    pub action: EventAction,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawEvent {
    at: Span,
    #[serde(default)]
    renew_lease: Option<NameList>,
    #[serde(default)]
    set_ready: Option<SetReady>,
    #[serde(default)]
    set_condition: Option<SetCondition>,
    #[serde(default)]
    kubelet_stop: Option<NameList>,
    #[serde(default)]
    kubelet_start: Option<NameList>,
    #[serde(default)]
    add_node: Option<NodeSpec>,
    #[serde(default)]
    delete_node: Option<String>,
    #[serde(default)]
    add_pod: Option<PodSpec>,
    #[serde(default)]
    delete_pod: Option<String>,
    #[serde(default)]
    set_taints: Option<SetTaints>,
    #[serde(default)]
    set_unschedulable: Option<SetUnschedulable>,
    #[serde(default)]
    set_lease: Option<SetLease>,
    #[serde(default)]
    remove_condition: Option<RemoveCondition>,
    #[serde(default)]
    set_tolerations: Option<SetTolerations>,
    #[serde(default)]
    bind_pod: Option<BindPod>,
    #[serde(default)]
    set_labels: Option<SetLabels>,
    #[serde(default)]
    restart_controller: Option<bool>,
    #[serde(default)]
    add_budget: Option<BudgetSpec>,
    #[serde(default)]
    delete_budget: Option<String>,
    #[serde(default)]
    set_allocatable: Option<SetAllocatable>,
    #[serde(default)]
    mark_unschedulable: Option<MarkUnschedulable>,
}

const EVENT_ACTIONS: &str = "renew-lease, set-ready, set-condition, kubelet-stop, kubelet-start, \
     add-node, delete-node, add-pod, delete-pod, set-taints, set-unschedulable, set-lease, \
     remove-condition, set-tolerations, bind-pod, set-labels, restart-controller, add-budget, \
     delete-budget, set-allocatable, mark-unschedulable";

impl TryFrom<RawEvent> for EventEntry {
    type Error = String;

    fn try_from(r: RawEvent) -> Result<EventEntry, String> {
        let mut actions = Vec::new();
        if let Some(v) = r.renew_lease {
            actions.push(EventAction::RenewLease(v.0));
        }
        if let Some(v) = r.set_ready {
            actions.push(EventAction::SetReady(v));
        }
        if let Some(v) = r.set_condition {
            actions.push(EventAction::SetCondition(v));
        }
        if let Some(v) = r.kubelet_stop {
            actions.push(EventAction::KubeletStop(v.0));
        }
        if let Some(v) = r.kubelet_start {
            actions.push(EventAction::KubeletStart(v.0));
        }
        if let Some(v) = r.add_node {
            actions.push(EventAction::AddNode(v));
        }
        if let Some(v) = r.delete_node {
            actions.push(EventAction::DeleteNode(v));
        }
        if let Some(v) = r.add_pod {
            actions.push(EventAction::AddPod(v));
        }
        if let Some(v) = r.delete_pod {
            actions.push(EventAction::DeletePod(v));
        }
        if let Some(v) = r.set_taints {
            actions.push(EventAction::SetTaints(v));
        }
        if let Some(v) = r.set_unschedulable {
            actions.push(EventAction::SetUnschedulable(v));
        }
        if let Some(v) = r.set_lease {
            actions.push(EventAction::SetLease(v));
        }
        if let Some(v) = r.remove_condition {
            actions.push(EventAction::RemoveCondition(v));
        }
        if let Some(v) = r.set_tolerations {
            actions.push(EventAction::SetTolerations(v));
        }
        if let Some(v) = r.bind_pod {
            actions.push(EventAction::BindPod(v));
        }
        if let Some(v) = r.set_labels {
            actions.push(EventAction::SetLabels(v));
        }
        if let Some(v) = r.add_budget {
            actions.push(EventAction::AddBudget(v));
        }
        if let Some(v) = r.delete_budget {
            actions.push(EventAction::DeleteBudget(v));
        }
        if let Some(v) = r.set_allocatable {
            actions.push(EventAction::SetAllocatable(v));
        }
        if let Some(v) = r.mark_unschedulable {
            actions.push(EventAction::MarkUnschedulable(v));
        }
        match r.restart_controller {
            Some(true) => actions.push(EventAction::RestartController),
            Some(false) => {
                return Err(
                    "restart-controller: the only value is `true` (remove the event to not restart)".to_string()
                );
            }
            None => {}
        }
        if actions.len() > 1 {
            let names: Vec<&str> = actions.iter().map(EventAction::name).collect();
            return Err(format!(
                "an event has exactly one action besides `at`, found {}: {}",
                actions.len(),
                names.join(", ")
            ));
        }
        match actions.pop() {
            Some(action) => Ok(EventEntry { at: r.at, action }),
            None => Err(format!("an event needs an action besides `at`, one of: {EVENT_ACTIONS}")),
        }
    }
}

impl<'de> Deserialize<'de> for EventEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<EventEntry, D::Error> {
        deserialize_checked::<D, RawEvent, EventEntry>(d, "an event: a mapping with `at` and one action")
    }
}

/// A taint named by `key:Effect`, as expectations spell it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaintRef {
    /// The taint key.
    pub key: String,
    /// The effect.
    pub effect: TaintEffect,
}

impl TaintRef {
    /// True when `taint` has this key and effect.
    pub fn matches(&self, taint: &Taint) -> bool {
        taint.is(&self.key, self.effect)
    }
}

impl fmt::Display for TaintRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.key, self.effect)
    }
}

impl std::str::FromStr for TaintRef {
    type Err = String;
    fn from_str(s: &str) -> Result<TaintRef, String> {
        let bad = || {
            format!(
                "invalid taint {s:?}: expected key:Effect with Effect one of NoSchedule, \
                 PreferNoSchedule, NoExecute, e.g. node.kubernetes.io/unreachable:NoExecute"
            )
        };
        let (key, effect) = s.rsplit_once(':').ok_or_else(bad)?;
        let effect = match effect {
            "NoSchedule" => TaintEffect::NoSchedule,
            "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
            "NoExecute" => TaintEffect::NoExecute,
            _ => return Err(bad()),
        };
        if key.is_empty() {
            return Err(bad());
        }
        Ok(TaintRef { key: key.to_string(), effect })
    }
}

impl<'de> Deserialize<'de> for TaintRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<TaintRef, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}

impl Serialize for TaintRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The `ready` of an expectation: a condition status for a node, a boolean
/// for a pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadyValue {
    Status(ConditionStatus),
    Bool(bool),
}

impl<'de> Deserialize<'de> for ReadyValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ReadyValue, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ReadyValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"True\", \"False\" or \"Unknown\" for a node, true or false for a pod")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ReadyValue, E> {
                Ok(ReadyValue::Bool(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ReadyValue, E> {
                match v {
                    "True" => Ok(ReadyValue::Status(ConditionStatus::True)),
                    "False" => Ok(ReadyValue::Status(ConditionStatus::False)),
                    "Unknown" => Ok(ReadyValue::Status(ConditionStatus::Unknown)),
                    "true" => Ok(ReadyValue::Bool(true)),
                    "false" => Ok(ReadyValue::Bool(false)),
                    other => Err(E::custom(format!(
                        "unknown ready value {other:?}: expected \"True\", \"False\" or \"Unknown\" \
                         for a node, true or false for a pod"
                    ))),
                }
            }
        }
        // YAML hands every scalar to `deserialize_str` as text, which keeps
        // `True` (a status) apart from `true` (a boolean).
        d.deserialize_str(V)
    }
}

/// A zone state as expectations spell it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneStateSpec(pub ZoneState);

impl<'de> Deserialize<'de> for ZoneStateSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ZoneStateSpec, D::Error> {
        const NAMES: &[&str] = &["Initial", "Normal", "PartialDisruption", "FullDisruption"];
        let s = String::deserialize(d)?;
        let state = match s.as_str() {
            "Initial" => ZoneState::Initial,
            "Normal" => ZoneState::Normal,
            "PartialDisruption" => ZoneState::PartialDisruption,
            "FullDisruption" => ZoneState::FullDisruption,
            _ => return Err(de::Error::unknown_variant(&s, NAMES)),
        };
        Ok(ZoneStateSpec(state))
    }
}

impl Serialize for ZoneStateSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.as_str())
    }
}

/// An Event to look for: by reason, optionally by object, optionally an
/// exact count.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EventMatch {
    /// The Event's reason (`NodeNotReady`, `TaintManagerEviction`, ...).
    pub reason: String,
    /// The object: a node name or `namespace/name`; `None` = any object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// `events-include` only: exactly this many matching Events so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

/// What an expectation checks on a node; every check given must hold.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct NodeChecks {
    /// The Ready condition's status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<ConditionStatus>,
    /// The exact taint set, order-insensitive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taints: Option<Vec<TaintRef>>,
    /// Taints that must be present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub has_taints: Option<Vec<TaintRef>>,
    /// Taints that must be absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lacks_taints: Option<Vec<TaintRef>>,
    /// Condition statuses by type; `null` = the condition is absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<BTreeMap<String, Option<ConditionStatus>>>,
    /// Condition reasons by type; `null` = the condition is absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition_reasons: Option<BTreeMap<String, Option<String>>>,
    /// Labels that must have these values; `null` = the label is absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, Option<String>>>,
    /// Writes the controller made to the node so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writes: Option<u64>,
    /// The node was deleted (true) or exists (false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted: Option<bool>,
}

/// What an expectation checks on a pod; every check given must hold.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct PodChecks {
    /// The pod was deleted (true) or exists (false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted: Option<bool>,
    /// The pod's Ready condition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// `status.reason`; `null` = none set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Option<String>>,
    /// Pod condition statuses by type; `null` = the condition is absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<BTreeMap<String, Option<ConditionStatus>>>,
    /// Writes the controller made to the pod so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writes: Option<u64>,
    /// The node the pod is bound to; `null` = unscheduled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<Option<String>>,
    /// The pod is terminating (has a deletion timestamp and is not gone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminating: Option<bool>,
    /// The pod carries `PodScheduled=False` with reason `Unschedulable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unschedulable: Option<bool>,
}

/// What an expectation checks on a zone; every check given must hold.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ZoneChecks {
    /// The engine's state for the zone; `null` = it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<Option<ZoneStateSpec>>,
    /// The zone limiter's QPS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Nodes of the zone carrying a not-ready or unreachable NoExecute taint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tainted: Option<u64>,
}

/// What an expectation is about, with its checks.
#[derive(Clone, Debug, PartialEq)]
pub enum Subject {
    /// A node, by name.
    Node {
        /// The node name.
        name: String,
        /// The checks.
        checks: NodeChecks,
    },
    /// A pod, by `namespace/name`.
    Pod {
        /// The pod key.
        key: String,
        /// The checks.
        checks: PodChecks,
    },
    /// A zone, spelled `region/zone`.
    Zone {
        /// The zone as written.
        zone: String,
        /// The checks.
        checks: ZoneChecks,
    },
    /// Events recorded so far include these.
    EventsInclude(Vec<EventMatch>),
    /// Events recorded so far include none of these.
    EventsExclude(Vec<EventMatch>),
}

/// One entry of `expect`: an instant and one subject with its checks.
#[derive(Clone, Debug, PartialEq)]
pub struct Expectation {
    /// When it is checked (after everything due at that instant has run).
    pub at: Span,
    /// What is checked.
    pub subject: Subject,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawExpect {
    at: Span,
    #[serde(default, deserialize_with = "double_option")]
    node: Option<Option<String>>,
    #[serde(default)]
    pod: Option<String>,
    #[serde(default)]
    zone: Option<String>,
    #[serde(default)]
    events_include: Option<Vec<EventMatch>>,
    #[serde(default)]
    events_exclude: Option<Vec<EventMatch>>,
    #[serde(default)]
    ready: Option<ReadyValue>,
    #[serde(default)]
    taints: Option<Vec<TaintRef>>,
    #[serde(default)]
    has_taints: Option<Vec<TaintRef>>,
    #[serde(default)]
    lacks_taints: Option<Vec<TaintRef>>,
    #[serde(default)]
    conditions: Option<BTreeMap<String, Option<ConditionStatus>>>,
    #[serde(default)]
    condition_reasons: Option<BTreeMap<String, Option<String>>>,
    #[serde(default)]
    labels: Option<BTreeMap<String, Option<String>>>,
    #[serde(default)]
    writes: Option<u64>,
    #[serde(default)]
    deleted: Option<bool>,
    #[serde(default, deserialize_with = "double_option")]
    reason: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option")]
    state: Option<Option<ZoneStateSpec>>,
    #[serde(default)]
    rate: Option<f64>,
    #[serde(default)]
    tainted: Option<u64>,
    #[serde(default)]
    terminating: Option<bool>,
    #[serde(default)]
    unschedulable: Option<bool>,
}

const EXPECT_SUBJECTS: &str = "node, pod, zone, events-include, events-exclude";

impl TryFrom<RawExpect> for Expectation {
    type Error = String;

    fn try_from(r: RawExpect) -> Result<Expectation, String> {
        // With a pod, `node` is a check (the node it is bound to), not a subject.
        let (node_subject, node_check) = if r.pod.is_some() { (None, r.node) } else { (r.node, None) };
        let given: Vec<&str> = [
            ("node", node_subject.is_some()),
            ("pod", r.pod.is_some()),
            ("zone", r.zone.is_some()),
            ("events-include", r.events_include.is_some()),
            ("events-exclude", r.events_exclude.is_some()),
        ]
        .into_iter()
        .filter_map(|(n, g)| g.then_some(n))
        .collect();
        if given.len() > 1 {
            return Err(format!("an expectation has exactly one subject, found {}: {}", given.len(), given.join(", ")));
        }
        // Checks given, by name, so that ones foreign to the subject can be named.
        let checks: Vec<&str> = [
            ("ready", r.ready.is_some()),
            ("taints", r.taints.is_some()),
            ("has-taints", r.has_taints.is_some()),
            ("lacks-taints", r.lacks_taints.is_some()),
            ("conditions", r.conditions.is_some()),
            ("condition-reasons", r.condition_reasons.is_some()),
            ("labels", r.labels.is_some()),
            ("writes", r.writes.is_some()),
            ("deleted", r.deleted.is_some()),
            ("reason", r.reason.is_some()),
            ("state", r.state.is_some()),
            ("rate", r.rate.is_some()),
            ("tainted", r.tainted.is_some()),
            ("node", node_check.is_some()),
            ("terminating", r.terminating.is_some()),
            ("unschedulable", r.unschedulable.is_some()),
        ]
        .into_iter()
        .filter_map(|(n, g)| g.then_some(n))
        .collect();
        let only = |subject: &str, allowed: &[&str]| -> Result<(), String> {
            if let Some(bad) = checks.iter().find(|c| !allowed.contains(c)) {
                return Err(format!("`{bad}` is not a check for a {subject} (its checks: {})", allowed.join(", ")));
            }
            if checks.is_empty() {
                return Err(format!(
                    "an expectation about a {subject} needs at least one check: {}",
                    allowed.join(", ")
                ));
            }
            Ok(())
        };
        let subject = if let Some(name) = node_subject {
            let Some(name) = name else {
                return Err("node: a node name, not null".to_string());
            };
            only(
                "node",
                &[
                    "ready",
                    "taints",
                    "has-taints",
                    "lacks-taints",
                    "conditions",
                    "condition-reasons",
                    "labels",
                    "writes",
                    "deleted",
                ],
            )?;
            let ready = match r.ready {
                None => None,
                Some(ReadyValue::Status(s)) => Some(s),
                Some(ReadyValue::Bool(b)) => {
                    return Err(format!(
                        "ready: a node's Ready is a condition status, \"True\", \"False\" or \
                         \"Unknown\" (quoted), not the boolean {b}"
                    ));
                }
            };
            Subject::Node {
                name,
                checks: NodeChecks {
                    ready,
                    taints: r.taints,
                    has_taints: r.has_taints,
                    lacks_taints: r.lacks_taints,
                    conditions: r.conditions,
                    condition_reasons: r.condition_reasons,
                    labels: r.labels,
                    writes: r.writes,
                    deleted: r.deleted,
                },
            }
        } else if let Some(key) = r.pod {
            only(
                "pod",
                &["deleted", "ready", "reason", "conditions", "writes", "node", "terminating", "unschedulable"],
            )?;
            let ready = match r.ready {
                None => None,
                Some(ReadyValue::Bool(b)) => Some(b),
                Some(ReadyValue::Status(ConditionStatus::True)) => Some(true),
                Some(ReadyValue::Status(ConditionStatus::False)) => Some(false),
                Some(ReadyValue::Status(ConditionStatus::Unknown)) => {
                    return Err("ready: a pod's ready is a boolean, true or false".to_string());
                }
            };
            Subject::Pod {
                key,
                checks: PodChecks {
                    deleted: r.deleted,
                    ready,
                    reason: r.reason,
                    conditions: r.conditions,
                    writes: r.writes,
                    node: node_check,
                    terminating: r.terminating,
                    unschedulable: r.unschedulable,
                },
            }
        } else if let Some(zone) = r.zone {
            only("zone", &["state", "rate", "tainted"])?;
            if let Some(rate) = r.rate
                && !(rate.is_finite() && rate >= 0.0)
            {
                return Err(format!("rate: must be a non-negative number, got {rate}"));
            }
            Subject::Zone { zone, checks: ZoneChecks { state: r.state, rate: r.rate, tainted: r.tainted } }
        } else if let Some(list) = r.events_include {
            only_events("events-include", &checks, &list)?;
            Subject::EventsInclude(list)
        } else if let Some(list) = r.events_exclude {
            only_events("events-exclude", &checks, &list)?;
            if list.iter().any(|m| m.count.is_some()) {
                return Err("events-exclude: `count` belongs in events-include (events-include with \
                     count: 0 says the same)"
                    .to_string());
            }
            Subject::EventsExclude(list)
        } else {
            return Err(format!("an expectation needs a subject, one of: {EXPECT_SUBJECTS}"));
        };
        Ok(Expectation { at: r.at, subject })
    }
}

fn only_events(subject: &str, checks: &[&str], list: &[EventMatch]) -> Result<(), String> {
    if let Some(bad) = checks.first() {
        return Err(format!("`{bad}` is not a check for {subject}: it takes only a list of {{reason, object}}"));
    }
    if list.is_empty() {
        return Err(format!("{subject} needs at least one {{reason, object}} entry"));
    }
    Ok(())
}

impl<'de> Deserialize<'de> for Expectation {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Expectation, D::Error> {
        deserialize_checked::<D, RawExpect, Expectation>(
            d,
            "an expectation: a mapping with `at`, one subject and its checks",
        )
    }
}

/// Reads a mapping as `R`, then converts it to `T`, raising the conversion's
/// error while the deserializer still knows where the mapping is, so the
/// error carries its line.
fn deserialize_checked<'de, D, R, T>(d: D, expecting: &'static str) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    R: Deserialize<'de>,
    T: TryFrom<R, Error = String>,
{
    struct V<R, T>(&'static str, PhantomData<fn() -> (R, T)>);
    impl<'de, R, T> Visitor<'de> for V<R, T>
    where
        R: Deserialize<'de>,
        T: TryFrom<R, Error = String>,
    {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            let raw = R::deserialize(MapAccessDeserializer::new(map))?;
            T::try_from(raw).map_err(de::Error::custom)
        }
    }
    d.deserialize_map(V::<R, T>(expecting, PhantomData))
}

/// `null` (or an empty YAML value) reads as the type's default.
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Present-but-`null` reads as `None`; the field's `default` covers absence.
fn nullable<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)
}

/// Absent = `None`, `null` = `Some(None)`, a value = `Some(Some(v))`.
fn double_option<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}
