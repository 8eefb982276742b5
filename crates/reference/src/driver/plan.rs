//! The harness's input vocabulary: a controller [`Setup`] and the
//! [`Step`]s that happen to the cluster, each `Arbitrary` and drawn from a
//! few interesting values, so every byte string is a valid [`Plan`] and
//! steps collide on the same few objects.

use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use nodewarden_cluster::latency::SpanRange;
use nodewarden_cluster::{AdmissionDefaults, ApiLatency};
use nodewarden_model::{
    ConditionStatus, ControllerConfig, DeletionMode, PodScheduling, Resources, Span, Taint, TaintEffect, Timestamp,
    Toleration, TolerationOperator, keys,
};

/// How many nodes, pods and zones the steps pick from (small, so that steps
/// collide on the same objects).
pub const NODES: u8 = 7;
/// See [`NODES`].
pub const PODS: u8 = 6;
/// See [`NODES`].
pub const ZONES: u8 = 3;

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
    /// The API's latency ([`Setup::api_latency`]): none for four values
    /// in ten (then the reference model is compared), else writes and
    /// watch events from a few milliseconds to seconds late, or (two in
    /// ten) writes held to a client rate: two requests a second (burst
    /// 3), or one every two seconds (burst 1).
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
        let delays = |write, watch| ApiLatency { write_latency: write, watch_delay: watch, ..ApiLatency::NONE };
        let rated = |qps, burst, delays: ApiLatency| ApiLatency {
            kube_api_qps: Some(qps),
            kube_api_burst: Some(burst),
            ..delays
        };
        match self.latency % 10 {
            0..=3 => ApiLatency::NONE,
            4 => ApiLatency::REALISTIC,
            5 => delays(ms(1, 20), ms(1, 50)),
            6 => delays(ms(100, 1_000), ms(200, 3_000)),
            7 => delays(ms(0, 300), ms(0, 0)),
            // A client rate that holds writes back for seconds, as a
            // large incident's backlog does. The slower one keeps a node's
            // first taint waiting unsent long enough for the engine to swap
            // it (docs/fuzzing.md, bug 11).
            8 => rated(2.0, 3, ApiLatency::REALISTIC),
            _ => rated(0.5, 1, ApiLatency::NONE),
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
