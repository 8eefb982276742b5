//! The deterministic harness shared by the `engine_steps` fuzz target and
//! the property tests.
//!
//! A [`Plan`] is a controller [`Setup`] and a list of [`Step`]s (both
//! `Arbitrary`, so a fuzzer's bytes or proptest's become one). The
//! [`Harness`] keeps two copies of a simulated cluster that receive the
//! same external steps: one is driven by the real engine through the same
//! [`Controller`] loop as production (each action judged by the safety
//! interlock before it is applied, the echoes fed back), the other by the
//! [`ReferenceModel`]. After every instant the two clusters are compared
//! ([`crate::compare`]). The harness ticks after every external step, and
//! at every instant either side has something due in between, so both see
//! each change on its own.
//!
//! A plan may put an API with latency between the engine and its cluster
//! ([`Setup::latency`]): writes land late, watch events arrive late and in
//! each object's order only ([`nodewarden_sim::Wire`]). The reference model
//! is an oracle of the instant world (it reads its cluster directly, and
//! its deadlines run from its own writes), so with latency the two are not
//! compared; every invariant, the interlock's silence (an action held back
//! is an invariant failure) and the API's contract are checked as always.

use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use nodewarden_controller::{Controller, StepEvent, Violation};
use nodewarden_engine::{ActionKind, BudgetSnapshot, NodeSnapshot, Observation};
use nodewarden_model::scheduling::{CRITICAL_ADDONS_ONLY_TAINT, SYSTEM_NAMESPACE};
use nodewarden_model::{
    ConditionStatus, ConditionType, ControllerConfig, DeletionMode, LabelSelector, NodeCondition, PodScheduling,
    Resources, Span, Taint, TaintEffect, Timestamp, Toleration, TolerationOperator, keys,
};
use nodewarden_sim::wire::{SpanRange, Wired};
use nodewarden_sim::{AdmissionDefaults, ApiLatency, Cluster, KubeletTiming, Kubelets, PodSpec, Wire};

use crate::compare::{Difference, compare};
use crate::model::ReferenceModel;
use crate::sched::{SchedSide, SideApi};

/// How many nodes, pods and zones the steps pick from (small, so that steps
/// collide on the same objects).
pub const NODES: u8 = 7;
/// See [`NODES`].
pub const PODS: u8 = 6;
/// See [`NODES`].
pub const ZONES: u8 = 3;
/// Instants one plan may run, so a plan cannot take unbounded time.
pub const MAX_INSTANTS: u64 = 20_000;

/// A condition status.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// True.
    True,
    /// False.
    False,
    /// Unknown.
    Unknown,
}

impl From<Status> for ConditionStatus {
    fn from(s: Status) -> Self {
        match s {
            Status::True => ConditionStatus::True,
            Status::False => ConditionStatus::False,
            Status::Unknown => ConditionStatus::Unknown,
        }
    }
}

/// A node condition other than Ready.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtherCondition {
    /// MemoryPressure.
    Memory,
    /// DiskPressure.
    Disk,
    /// PIDPressure.
    Pid,
    /// NetworkUnavailable.
    Network,
}

/// A taint, from a small vocabulary.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaintPick {
    /// 0 not-ready, 1 unreachable, 2 a foreign key, 3 memory-pressure.
    pub key: u8,
    /// Effect: 0 NoExecute, 1 NoSchedule, 2 PreferNoSchedule.
    pub effect: u8,
    /// A non-empty value.
    pub valued: bool,
}

const TAINT_KEYS: [&str; 4] =
    [keys::TAINT_NOT_READY, keys::TAINT_UNREACHABLE, "example.com/maintenance", keys::TAINT_MEMORY_PRESSURE];

impl TaintPick {
    /// The taint.
    pub fn taint(self, now: Timestamp) -> Taint {
        let effect = [TaintEffect::NoExecute, TaintEffect::NoSchedule, TaintEffect::PreferNoSchedule]
            [usize::from(self.effect % 3)];
        Taint {
            key: TAINT_KEYS[usize::from(self.key % 4)].to_string(),
            value: if self.valued { "v".into() } else { String::new() },
            effect,
            time_added: (effect == TaintEffect::NoExecute).then_some(now),
        }
    }
}

/// A toleration, from a small vocabulary.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq)]
pub struct TolerationPick {
    /// 0 any key, 1 not-ready, 2 unreachable, 3 the foreign key.
    pub key: u8,
    /// Exists (else Equal).
    pub exists: bool,
    /// Compare against value "v" (else "").
    pub valued: bool,
    /// 0 any effect, 1 NoExecute, 2 NoSchedule.
    pub effect: u8,
    /// `tolerationSeconds`: `None`, or a value from -1 to 254 (255 = a huge one).
    pub seconds: Option<u8>,
}

impl TolerationPick {
    /// The toleration.
    pub fn toleration(self) -> Toleration {
        Toleration {
            key: ["", keys::TAINT_NOT_READY, keys::TAINT_UNREACHABLE, TAINT_KEYS[2]][usize::from(self.key % 4)]
                .to_string(),
            operator: if self.exists { TolerationOperator::Exists } else { TolerationOperator::Equal },
            value: if self.valued { "v".into() } else { String::new() },
            effect: [None, Some(TaintEffect::NoExecute), Some(TaintEffect::NoSchedule)][usize::from(self.effect % 3)],
            seconds: self.seconds.map(|s| if s == 255 { i64::MAX } else { i64::from(s) - 1 }),
        }
    }
}

/// What the critical-addon rescheduler reads of a pod (used only when the
/// setup runs the rescheduler), from a small vocabulary.
#[derive(Arbitrary, Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedPick {
    /// CPU request: 125m to 1000m in steps of 125m.
    pub cpu: u8,
    /// Memory request: 0, 256Mi, 512Mi or 768Mi.
    pub memory: u8,
    /// 0 and 4+: owned by a ReplicaSet; 1: a critical addon (annotation);
    /// 2: a mirror pod; 3: a bare pod (no controller).
    pub kind: u8,
    /// Termination grace: 5, 10, 30 or 60 s.
    pub grace: u8,
    /// Label `app=a0` or `app=a1`.
    pub app: bool,
    /// Sets the budget of its app (`kube-system/a0` or `a1`) to allow this
    /// many disruptions (mod 3).
    pub budget: Option<u8>,
    /// An unbound pod is marked Unschedulable now.
    pub unschedulable: bool,
    /// Node selector `pool=p0` (false) or `pool=p1` (true).
    pub pool: Option<bool>,
    /// A critical addon tolerates `CriticalAddonsOnly` (as addons do).
    pub tolerates_reservation: bool,
}

impl SchedPick {
    /// The pod's scheduling facts, as of `now`.
    pub fn facts(self, now: Timestamp, bound: bool) -> PodScheduling {
        let kind = self.kind % 8;
        let mut placement = nodewarden_model::Placement::default();
        if let Some(p) = self.pool {
            placement.node_selector.insert("pool".into(), if p { "p1" } else { "p0" }.into());
        }
        PodScheduling {
            requests: Resources::pod(125 * (u64::from(self.cpu % 8) + 1), 256 * (1 << 20) * u64::from(self.memory % 4)),
            priority_class: None,
            critical_annotation: kind == 1,
            mirror: kind == 2,
            controller_kind: (kind != 3).then(|| "ReplicaSet".to_string()),
            termination_grace: Span::from_secs(pick(&[5, 10, 30, 60], self.grace)),
            labels: BTreeMap::from([("app".to_string(), if self.app { "a1" } else { "a0" }.to_string())]),
            placement,
            unschedulable_since: (self.unschedulable && !bound).then_some(now),
        }
    }
}

/// One thing that happens to the cluster (or the clock, or the controller).
#[derive(Arbitrary, Clone, Debug, PartialEq)]
pub enum Step {
    /// Creates (or replaces) a node.
    AddNode {
        /// Which node.
        node: u8,
        /// Its zone.
        zone: u8,
        /// Its Ready condition, with a heartbeat of now.
        ready: Option<Status>,
        /// How long ago it was created, in seconds.
        created_ago: u8,
        /// It has a Lease renewed now.
        lease: bool,
        /// Its kubelet runs.
        kubelet: bool,
        /// It carries the exclude-disruption label.
        excluded: bool,
        /// Its taints.
        taints: Vec<TaintPick>,
        /// With the rescheduler: allocatable cpu 500m to 2000m, pod slots
        /// 2 to 5, and label `pool=p0`/`p1`.
        size: u8,
    },
    /// Deletes a node (and its Lease).
    DeleteNode {
        /// Which node.
        node: u8,
    },
    /// Posts a Ready status with a fresh heartbeat.
    SetReady {
        /// Which node.
        node: u8,
        /// The status.
        status: Status,
    },
    /// Removes the Ready condition.
    RemoveReady {
        /// Which node.
        node: u8,
    },
    /// Posts another condition.
    SetCondition {
        /// Which node.
        node: u8,
        /// Which condition.
        kind: OtherCondition,
        /// The status.
        status: Status,
    },
    /// Renews the node's Lease now.
    RenewLease {
        /// Which node.
        node: u8,
    },
    /// Replaces the node's taints.
    SetTaints {
        /// Which node.
        node: u8,
        /// The taints (at most 3 are used).
        taints: Vec<TaintPick>,
    },
    /// Sets `spec.unschedulable`.
    SetUnschedulable {
        /// Which node.
        node: u8,
        /// The value.
        value: bool,
    },
    /// Changes labels: zone, exclusion, OS.
    SetLabels {
        /// Moves the node to this zone.
        zone: Option<u8>,
        /// Which node.
        node: u8,
        /// Adds or removes the exclude-disruption label.
        excluded: Option<bool>,
        /// Sets (or removes) `kubernetes.io/os`.
        os: Option<bool>,
    },
    /// Creates (or replaces, with a new uid) a pod.
    AddPod {
        /// Which pod.
        pod: u8,
        /// Its node.
        node: Option<u8>,
        /// Owned by a DaemonSet.
        daemonset: bool,
        /// Its Ready condition.
        ready: Option<bool>,
        /// Already terminating.
        terminating: bool,
        /// Its tolerations (at most 3 are used), before admission defaults.
        tolerations: Vec<TolerationPick>,
        /// With the rescheduler: its scheduling facts (`None`: it has none).
        sched: Option<SchedPick>,
    },
    /// Deletes a pod.
    DeletePod {
        /// Which pod.
        pod: u8,
    },
    /// Binds an unbound pod to a node.
    BindPod {
        /// Which pod.
        pod: u8,
        /// Which node.
        node: u8,
    },
    /// Replaces a pod's tolerations.
    SetTolerations {
        /// Which pod.
        pod: u8,
        /// The tolerations (at most 3 are used).
        tolerations: Vec<TolerationPick>,
    },
    /// Stops a node's kubelet.
    KubeletStop {
        /// Which node.
        node: u8,
    },
    /// Starts a node's kubelet.
    KubeletStart {
        /// Which node.
        node: u8,
    },
    /// Moves the clock on by up to a minute.
    Advance {
        /// Milliseconds.
        ms: u16,
    },
    /// Moves the clock on by up to four minutes.
    AdvanceSecs {
        /// Seconds.
        secs: u8,
    },
    /// Replaces the controller with a fresh one.
    RestartController,
}

/// The controller's configuration, from a few interesting values each.
#[derive(Arbitrary, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Setup {
    /// Legacy eviction instead of taints.
    pub legacy: bool,
    /// `node-eviction-rate`: 0.1, 1, 0.5, 0, 0.05.
    pub rate: u8,
    /// `secondary-node-eviction-rate`: 0.01, 0.1, 0.
    pub secondary: u8,
    /// `large-cluster-size-threshold`: 50, 2, 0, 4.
    pub large: u8,
    /// `unhealthy-zone-threshold`: 0.55, 0.3, 1.0, 0.7.
    pub threshold: u8,
    /// `pod-eviction-timeout`: 5m, 30s, 0, 90s.
    pub timeout: u8,
    /// Grace periods (monitor, startup): (40s, 60s), (10s, 20s), (5s, 5s).
    pub grace: u8,
    /// Admission defaults (not-ready, unreachable): 300/300, 30/10, none, 0/5.
    pub admission: u8,
    /// Eviction API instead of plain deletes.
    pub evict: bool,
    /// Run the critical-addon rescheduler (pods then live in
    /// `kube-system`, and carry scheduling facts).
    pub rescheduler: bool,
    /// The API's latency ([`Setup::api_latency`]): none for half the
    /// values (then the reference model is compared), else writes and
    /// watch events from a few milliseconds to seconds late.
    pub latency: u8,
}

fn pick<T: Copy>(table: &[T], i: u8) -> T {
    table[usize::from(i) % table.len()]
}

impl Setup {
    /// The controller configuration.
    pub fn config(&self) -> ControllerConfig {
        let (grace, startup) = pick(&[(40, 60), (10, 20), (5, 5)], self.grace);
        ControllerConfig {
            node_monitor_period: Span::from_secs(5),
            node_monitor_grace_period: Span::from_secs(grace),
            node_startup_grace_period: Span::from_secs(startup),
            pod_eviction_timeout: Span::from_secs(pick(&[300, 30, 0, 90], self.timeout)),
            node_eviction_rate: pick(&[0.1, 1.0, 0.5, 0.0, 0.05], self.rate),
            secondary_node_eviction_rate: pick(&[0.01, 0.1, 0.0], self.secondary),
            large_cluster_size_threshold: pick(&[50, 2, 0, 4], self.large),
            unhealthy_zone_threshold: pick(&[0.55, 0.3, 1.0, 0.7], self.threshold),
            enable_taint_manager: !self.legacy,
            pod_deletion_mode: if self.evict { DeletionMode::Evict } else { DeletionMode::Delete },
            enable_rescheduler: self.rescheduler,
            ..ControllerConfig::default()
        }
    }

    /// The API between the engine and its cluster.
    pub fn api_latency(&self) -> ApiLatency {
        let ms = |a, b| SpanRange::new(Span::from_millis(a), Span::from_millis(b));
        match self.latency % 8 {
            0..=3 => ApiLatency::NONE,
            4 => ApiLatency::REALISTIC,
            5 => ApiLatency { write_latency: ms(1, 20), watch_delay: ms(1, 50) },
            6 => ApiLatency { write_latency: ms(100, 1_000), watch_delay: ms(200, 3_000) },
            _ => ApiLatency { write_latency: ms(0, 300), watch_delay: ms(0, 0) },
        }
    }

    /// The admission defaults.
    pub fn admission(&self) -> AdmissionDefaults {
        let (not_ready_seconds, unreachable_seconds) =
            pick(&[(Some(300), Some(300)), (Some(30), Some(10)), (None, None), (Some(0), Some(5))], self.admission);
        AdmissionDefaults { not_ready_seconds, unreachable_seconds }
    }
}

/// A whole fuzz input.
#[derive(Arbitrary, Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// The configuration.
    pub setup: Setup,
    /// What happens, in order.
    pub steps: Vec<Step>,
}

/// Steps one plan may hold.
pub const MAX_STEPS: usize = 96;

impl Plan {
    /// A plan from raw bytes (a fuzzer's or proptest's): the setup, then
    /// steps until the bytes run out (at most [`MAX_STEPS`]). Every byte
    /// string is a valid plan.
    pub fn from_bytes(bytes: &[u8]) -> Plan {
        let mut u = arbitrary::Unstructured::new(bytes);
        let setup = Setup::arbitrary(&mut u).unwrap_or_default();
        let mut steps = Vec::new();
        while !u.is_empty() && steps.len() < MAX_STEPS {
            match Step::arbitrary(&mut u) {
                Ok(step) => steps.push(step),
                Err(_) => break,
            }
        }
        Plan { setup, steps }
    }
}

/// Why a plan failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Failure {
    /// An invariant broke.
    #[error("invariant broken after step {step}: {violation}")]
    Invariant {
        /// Index of the step being run.
        step: usize,
        /// What broke.
        violation: Violation,
    },
    /// The simulated API server saw a write the controller must never make.
    #[error("contract violation at {at} after step {step}: {what}")]
    Contract {
        /// Index of the step being run.
        step: usize,
        /// When.
        at: Timestamp,
        /// What.
        what: String,
    },
    /// The engine and the reference model disagree.
    #[error("engine and reference model disagree at {at} after step {step}: {difference}")]
    Divergence {
        /// Index of the step being run.
        step: usize,
        /// When.
        at: Timestamp,
        /// The first difference.
        difference: Difference,
    },
}

/// What a run did, for statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Steps run.
    pub steps: usize,
    /// Instants ticked.
    pub instants: u64,
    /// Engine actions applied.
    pub actions: u64,
}

/// What to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checks {
    /// Fail the run on a broken invariant. (The checker runs either way:
    /// it is the controller's safety interlock, which holds such an action
    /// back.)
    pub invariants: bool,
    /// Run the reference model and compare.
    pub reference: bool,
}

impl Default for Checks {
    fn default() -> Self {
        Checks { invariants: true, reference: true }
    }
}

/// A cluster, its kubelets, and what the rescheduler reads beyond it.
struct World {
    cluster: Cluster,
    kubelets: Kubelets,
    side: SchedSide,
}

/// Runs plans.
pub struct Harness {
    config: ControllerConfig,
    checks: Checks,
    now: Timestamp,
    step: usize,
    stats: Stats,
    /// The engine behind its safety interlock, as in production.
    controller: Controller,
    engine_world: World,
    model: ReferenceModel,
    model_world: World,
    trace: Option<Vec<String>>,
    /// The API between the engine and its cluster (bypassed when instant).
    wire: Wire,
    /// The reference model runs and is compared: asked for, and the API
    /// answers at once.
    compare: bool,
}

fn node_name(i: u8) -> String {
    format!("n{}", i % NODES)
}

/// Pods live in `kube-system` when the rescheduler runs (critical addons
/// must, and budgets cover pods of their own namespace).
fn pod_name(i: u8, rescheduler: bool) -> String {
    if rescheduler { format!("{SYSTEM_NAMESPACE}/p{}", i % PODS) } else { format!("ns/p{}", i % PODS) }
}

fn zone_labels(zone: u8) -> [(String, String); 2] {
    [
        (keys::LABEL_TOPOLOGY_REGION.to_string(), "r".to_string()),
        // Most nodes share zone 0, so that zones fill up enough for partial
        // disruption (more than 2 not ready) to happen.
        (keys::LABEL_TOPOLOGY_ZONE.to_string(), format!("z{}", if zone < 160 { 0 } else { zone % ZONES })),
    ]
}

fn ready_reason(status: ConditionStatus) -> &'static str {
    match status {
        ConditionStatus::True => "KubeletReady",
        ConditionStatus::False => "KubeletNotReady",
        ConditionStatus::Unknown => "NodeStatusUnknown",
    }
}

/// The taints a step sets: at most 3, possibly both `not-ready` and
/// `unreachable` NoExecute (the invariant only forbids the controller from
/// bringing them together).
fn user_taints(picks: &[TaintPick], now: Timestamp) -> Vec<Taint> {
    picks.iter().take(3).map(|p| p.taint(now)).collect()
}

/// Applies one external step to a cluster; returns what a watch delivers.
fn apply_step(world: &mut World, step: &Step, now: Timestamp, rescheduler: bool) -> Vec<Observation> {
    let out = apply_to_cluster(world, step, now, rescheduler);
    out.into_iter().map(|o| world.side.decorate(o)).collect()
}

fn apply_to_cluster(world: &mut World, step: &Step, now: Timestamp, rescheduler: bool) -> Vec<Observation> {
    let pod_name = |i: u8| pod_name(i, rescheduler);
    let c = &mut world.cluster;
    match step {
        Step::AddNode { node, zone, ready, created_ago, lease, kubelet, excluded, taints, size } => {
            let name = node_name(*node);
            let created = now - Span::from_secs(i64::from(*created_ago));
            let mut labels: BTreeMap<String, String> = zone_labels(*zone).into_iter().collect();
            if *excluded {
                labels.insert(keys::LABEL_EXCLUDE_DISRUPTION.to_string(), String::new());
            }
            let allocatable = rescheduler.then(|| {
                labels.insert("pool".into(), format!("p{}", size % 2));
                Resources {
                    cpu_millis: 500 * (u64::from(size / 2 % 4) + 1),
                    memory_bytes: 1 << 30,
                    pods: u64::from(size / 8 % 4) + 2,
                }
            });
            let conditions = ready
                .map(|s| {
                    let status = ConditionStatus::from(s);
                    NodeCondition {
                        kind: ConditionType::Ready,
                        status,
                        reason: ready_reason(status).to_string(),
                        message: String::new(),
                        last_heartbeat: now,
                        last_transition: created,
                    }
                })
                .into_iter()
                .collect();
            let taints = user_taints(taints, now);
            let snapshot = NodeSnapshot {
                version: 0,
                allocatable,
                name: name.clone(),
                created,
                labels,
                conditions,
                taints,
                unschedulable: false,
            };
            world.kubelets.stop(&name);
            let mut out = c.put_node(snapshot);
            if *lease {
                out.extend(c.set_lease(&name, now));
            }
            if *kubelet {
                out.extend(world.kubelets.start(&name, now, c));
            }
            out
        }
        Step::DeleteNode { node } => {
            let name = node_name(*node);
            world.kubelets.stop(&name);
            if c.node(&name).is_none() {
                return Vec::new();
            }
            c.delete_node(&name)
        }
        Step::SetReady { node, status } => c.set_ready(&node_name(*node), (*status).into(), now),
        Step::RemoveReady { node } => c.remove_condition(&node_name(*node), &ConditionType::Ready),
        Step::SetCondition { node, kind, status } => {
            let kind = match kind {
                OtherCondition::Memory => ConditionType::MemoryPressure,
                OtherCondition::Disk => ConditionType::DiskPressure,
                OtherCondition::Pid => ConditionType::PidPressure,
                OtherCondition::Network => ConditionType::NetworkUnavailable,
            };
            c.set_condition(&node_name(*node), &kind, (*status).into(), now)
        }
        Step::RenewLease { node } => {
            let name = node_name(*node);
            if c.node(&name).is_none() {
                return Vec::new();
            }
            c.set_lease(&name, now)
        }
        Step::SetTaints { node, taints } => {
            let taints = user_taints(taints, now);
            c.set_taints(&node_name(*node), &taints)
        }
        Step::SetUnschedulable { node, value } => c.set_unschedulable(&node_name(*node), *value),
        Step::SetLabels { node, zone, excluded, os } => {
            let mut labels: BTreeMap<String, Option<String>> = BTreeMap::new();
            if let Some(z) = zone {
                labels.extend(zone_labels(*z).into_iter().map(|(k, v)| (k, Some(v))));
            }
            if let Some(x) = excluded {
                labels.insert(keys::LABEL_EXCLUDE_DISRUPTION.to_string(), x.then(String::new));
            }
            if let Some(o) = os {
                labels.insert(keys::LABEL_OS.to_string(), o.then(|| "linux".to_string()));
            }
            c.set_labels(&node_name(*node), &labels)
        }
        Step::AddPod { pod, node, daemonset, ready, terminating, tolerations, sched } => {
            let name = pod_name(*pod);
            let mut tolerations: Vec<Toleration> = tolerations.iter().take(3).map(|t| t.toleration()).collect();
            let mut out = Vec::new();
            match sched.filter(|_| rescheduler) {
                Some(s) => {
                    let facts = s.facts(now, node.is_some());
                    if facts.critical_annotation && s.tolerates_reservation {
                        tolerations.push(Toleration {
                            key: CRITICAL_ADDONS_ONLY_TAINT.into(),
                            operator: TolerationOperator::Exists,
                            ..Toleration::default()
                        });
                    }
                    if let Some(allowed) = s.budget {
                        let key = format!("{SYSTEM_NAMESPACE}/{}", facts.labels["app"]);
                        let budget = BudgetSnapshot {
                            key: key.clone(),
                            selector: LabelSelector { match_labels: facts.labels.clone(), match_expressions: vec![] },
                            disruptions_allowed: u32::from(allowed % 3),
                        };
                        world.side.budgets.insert(key, budget.clone());
                        out.push(Observation::BudgetUpserted(budget));
                    }
                    world.side.pods.insert(name.clone(), facts);
                }
                None => {
                    world.side.pods.remove(&name);
                }
            }
            out.extend(world.cluster.add_pod(&PodSpec {
                name,
                node: node.map(node_name),
                daemonset: *daemonset,
                ready: *ready,
                terminating: *terminating,
                tolerations,
                refuse_deletions: 0,
                scheduling: Default::default(),
            }));
            out
        }
        Step::DeletePod { pod } => {
            let key = pod_name(*pod);
            if c.pod(&key).is_none_or(|p| p.deleted) {
                return Vec::new();
            }
            c.delete_pod(&key)
        }
        Step::BindPod { pod, node } => {
            // The API server refuses to change a pod's node once set.
            let key = pod_name(*pod);
            if c.pod(&key).is_none_or(|p| p.node.is_some()) {
                return Vec::new();
            }
            // The scheduler bound it: it is no longer Unschedulable.
            if let Some(facts) = world.side.pods.get_mut(&key) {
                facts.unschedulable_since = None;
                facts.placement = nodewarden_model::Placement::default();
            }
            world.cluster.bind_pod(&key, &node_name(*node))
        }
        Step::SetTolerations { pod, tolerations } => {
            let tolerations: Vec<Toleration> = tolerations.iter().take(3).map(|t| t.toleration()).collect();
            c.set_tolerations(&pod_name(*pod), &tolerations)
        }
        Step::KubeletStop { node } => {
            world.kubelets.stop(&node_name(*node));
            Vec::new()
        }
        Step::KubeletStart { node } => {
            let name = node_name(*node);
            if c.node(&name).is_none() {
                return Vec::new();
            }
            world.kubelets.start(&name, now, c)
        }
        Step::Advance { .. } | Step::AdvanceSecs { .. } | Step::RestartController => Vec::new(),
    }
}

/// An action without its explanation, for traces.
fn short(kind: &ActionKind) -> String {
    match kind {
        ActionKind::DeletePod { pod, uid, .. } => format!("DeletePod {pod} {uid}"),
        ActionKind::RecordEvent(e) => format!("Event {} {}: {}", e.object, e.reason, e.message),
        other => format!("{other:?}"),
    }
}

impl Harness {
    /// A harness at time 0 with an empty cluster, for `setup`.
    pub fn new(setup: &Setup, checks: Checks) -> Harness {
        let config = setup.config();
        let world = || World {
            cluster: Cluster::new(setup.admission()),
            kubelets: Kubelets::new(KubeletTiming::default()),
            side: SchedSide::default(),
        };
        Harness {
            controller: Controller::new(config.clone(), Timestamp::EPOCH)
                .expect("every Setup gives a valid configuration"),
            model: ReferenceModel::new(config.clone(), Timestamp::EPOCH),
            config,
            checks,
            now: Timestamp::EPOCH,
            step: 0,
            stats: Stats::default(),
            engine_world: world(),
            model_world: world(),
            trace: None,
            wire: Wire::new(setup.api_latency(), u64::from(setup.latency)),
            compare: checks.reference && setup.api_latency().is_instant(),
        }
    }

    /// Runs a whole plan, step by step, stopping at the first failure.
    pub fn run(plan: &Plan, checks: Checks) -> Result<Stats, Failure> {
        Harness::new(&plan.setup, checks).run_plan(plan)
    }

    /// Runs a whole plan like [`Harness::run`], on `harness` if there is
    /// one, made new for the plan's setup ([`Harness::reset`]); the harness
    /// is left there for the next plan. Building the engine's schedules is
    /// most of what a short plan costs, and a reset keeps them: the fuzzer
    /// runs plans this way.
    pub fn run_reusing(harness: &mut Option<Harness>, plan: &Plan, checks: Checks) -> Result<Stats, Failure> {
        match harness {
            Some(h) => h.reset(&plan.setup, checks),
            None => *harness = Some(Harness::new(&plan.setup, checks)),
        }
        harness.as_mut().map_or(Ok(Stats::default()), |h| h.run_plan(plan))
    }

    fn run_plan(&mut self, plan: &Plan) -> Result<Stats, Failure> {
        for step in &plan.steps {
            self.step(step)?;
        }
        Ok(self.stats)
    }

    /// Makes this harness what [`Harness::new`] with `setup` and `checks`
    /// would make, keeping the engine's schedules when it can.
    pub fn reset(&mut self, setup: &Setup, checks: Checks) {
        let config = setup.config();
        self.controller.reset(config.clone(), Timestamp::EPOCH).expect("every Setup gives a valid configuration");
        let world = || World {
            cluster: Cluster::new(setup.admission()),
            kubelets: Kubelets::new(KubeletTiming::default()),
            side: SchedSide::default(),
        };
        self.model = ReferenceModel::new(config.clone(), Timestamp::EPOCH);
        self.config = config;
        self.checks = checks;
        self.now = Timestamp::EPOCH;
        self.step = 0;
        self.stats = Stats::default();
        self.engine_world = world();
        self.model_world = world();
        self.trace = None;
        self.wire = Wire::new(setup.api_latency(), u64::from(setup.latency));
        self.compare = checks.reference && setup.api_latency().is_instant();
    }

    /// Records, from now on, every step and every write of both sides
    /// (for reading a failure); [`Harness::trace`] returns it.
    pub fn record_trace(&mut self) {
        self.trace = Some(Vec::new());
    }

    /// What was recorded since [`Harness::record_trace`].
    pub fn trace(&self) -> &[String] {
        self.trace.as_deref().unwrap_or_default()
    }

    fn note(&mut self, line: impl FnOnce() -> String) {
        if let Some(t) = &mut self.trace {
            t.push(line());
        }
    }

    /// What has run so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The engine's cluster.
    pub fn cluster(&self) -> &Cluster {
        &self.engine_world.cluster
    }

    /// What the engine's cluster changed: handed over at once, or put on
    /// the wire.
    fn send(&mut self, observations: Vec<Observation>) {
        if self.wire.is_instant() {
            self.controller.observe_all(self.now, observations);
        } else {
            self.wire.publish(self.now, observations);
        }
    }

    /// Runs one step.
    pub fn step(&mut self, step: &Step) -> Result<(), Failure> {
        self.stats.steps += 1;
        let now = self.now;
        self.note(|| format!("{now} step {step:?}"));
        match step {
            Step::Advance { ms } => self.advance(Span::from_millis(i64::from(*ms))),
            Step::AdvanceSecs { secs } => self.advance(Span::from_secs(i64::from(*secs))),
            Step::RestartController => {
                // A new controller keeps nothing (its token buckets start
                // full, C2); the checker keeps what it knows of the cluster.
                self.controller.restart(self.now).expect("the configuration was valid at the start");
                let world = &self.engine_world;
                let mut state: Vec<Observation> =
                    world.cluster.state().into_iter().map(|o| world.side.decorate(o)).collect();
                state.extend(world.side.budgets.values().cloned().map(Observation::BudgetUpserted));
                if !self.wire.is_instant() {
                    // A new process: it lists the cluster, and nothing its
                    // previous life sent is answered.
                    self.wire.restart();
                    state = self.wire.list(self.now, state);
                }
                self.controller.observe_all(self.now, state);
                self.model = ReferenceModel::new(self.config.clone(), self.now);
                self.instant()
            }
            other => {
                let on = self.config.enable_rescheduler;
                let observations = apply_step(&mut self.engine_world, other, self.now, on);
                if self.compare {
                    apply_step(&mut self.model_world, other, self.now, on);
                }
                self.send(observations);
                self.instant()
            }
        }
        .inspect(|_| self.step += 1)
    }

    /// Moves the clock on by `by`, stopping at every instant either side
    /// or a kubelet has something due.
    fn advance(&mut self, by: Span) -> Result<(), Failure> {
        let target = self.now + by;
        loop {
            if self.stats.instants >= MAX_INSTANTS {
                return Ok(());
            }
            let now = self.now;
            let mut candidates = vec![self.controller.next_due()];
            if self.compare {
                candidates.push(self.model.next_due());
            }
            candidates.extend(self.engine_world.kubelets.next_due());
            candidates.extend(self.wire.next_due());
            let Some(next) = candidates.into_iter().filter(|&t| t > now).min().filter(|&t| t < target) else {
                break;
            };
            self.now = next;
            self.instant()?;
        }
        self.now = target;
        self.instant()
    }

    /// One instant: kubelets, then the engine (and its actions), then the
    /// model, then the comparison.
    fn instant(&mut self) -> Result<(), Failure> {
        self.stats.instants += 1;
        let now = self.now;
        let observations = self.engine_world.kubelets.run_due(now, &mut self.engine_world.cluster);
        self.send(observations);
        if self.compare {
            self.model_world.kubelets.run_due(now, &mut self.model_world.cluster);
        }
        let mut failure = None;
        if !self.wire.is_instant() {
            // What lands and arrives by now reaches the engine first.
            let mut answers = Vec::new();
            let mut api = SideApi { cluster: &mut self.engine_world.cluster, side: &mut self.engine_world.side };
            let controller = &mut self.controller;
            let mut judge = |at: Timestamp, action: &nodewarden_engine::Action| controller.still_true(at, action);
            for landed in self.wire.land(now, &mut api, &mut answers, &mut judge) {
                if let Some(what) = landed.applied.violation {
                    failure.get_or_insert(Failure::Contract { step: self.step, at: landed.at, what });
                }
            }
            let mut events = Vec::new();
            self.wire.deliver(now, &mut events);
            self.controller.observe_all(now, answers);
            self.controller.observe_all(now, events);
        }
        let mut trace = Vec::new();
        let tracing = self.trace.is_some();
        let (step, invariants) = (self.step, self.checks.invariants);
        let stats = &mut self.stats;
        let mut side = SideApi { cluster: &mut self.engine_world.cluster, side: &mut self.engine_world.side };
        let mut api = Wired { wire: &mut self.wire, cluster: &mut side };
        self.controller.step(now, &mut api, &mut |event| {
            let StepEvent::Handled(h) = event else { return };
            stats.actions += 1;
            if tracing {
                trace.push(format!("{now}   engine: {:?}", short(&h.action.kind)));
            }
            if failure.is_some() {
                return;
            }
            if let Some(violation) = h.violations.first().filter(|_| invariants) {
                failure = Some(Failure::Invariant { step, violation: violation.clone() });
            } else if let Some(what) = h.applied.and_then(|a| a.violation.clone()) {
                failure = Some(Failure::Contract { step, at: now, what });
            }
        });
        if let Some(t) = &mut self.trace {
            t.extend(trace);
        }
        if failure.is_none()
            && invariants
            && let Some(violation) = self.controller.checker().step_violations().first()
        {
            failure = Some(Failure::Invariant { step, violation: violation.clone() });
        }
        if let Some(failure) = failure {
            return Err(failure);
        }
        if self.compare {
            let writes = self.model.tick(now, &mut self.model_world.cluster, &mut self.model_world.side);
            for w in writes {
                self.note(|| format!("{now}   model:  {:?}", short(&w)));
            }
            let flags = (self.controller.engine().all_zones_down(), self.model.all_zones_down());
            if let Some(difference) = compare(
                &self.engine_world.cluster,
                &self.model_world.cluster,
                &self.controller.engine().zones(),
                &self.model.zones(),
                flags,
            ) {
                return Err(Failure::Divergence { step: self.step, at: now, difference });
            }
        }
        Ok(())
    }
}
