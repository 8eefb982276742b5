//! Server-side printing: the `meta.k8s.io/v1` `Table` that `kubectl get`
//! asks for, with upstream's columns for each served kind (wide columns at
//! priority 1) and ages computed here, as the API server does.
//!
//! Invariant: a row's cells are upstream's printers' for the same object
//! and time, so `kubectl get` reads here as against a real cluster.

use nodewarden_model::Timestamp;
use serde_json::{Value, json};

use crate::resource::Kind;
use nodewarden_objects::TimeBase;

/// What each row carries besides its cells (`includeObject`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    /// Nothing.
    None,
    /// `PartialObjectMetadata` (the default).
    Metadata,
    /// The whole object.
    Object,
}

fn col(name: &str, ty: &str, priority: i32, description: &str) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

/// The column definitions of a kind.
// Long on purpose: one arm a kind, each upstream's printer's column
// list in its order, so the table reads against upstream's source.
pub fn columns(kind: Kind) -> Vec<Value> {
    let name = col("Name", "string", 0, "Name must be unique within a namespace.");
    let age = col(
        "Age",
        "string",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    );
    match kind {
        Kind::Node => vec![
            name,
            col("Status", "string", 0, "The status of the node"),
            col("Roles", "string", 0, "The roles of the node"),
            age,
            col("Version", "string", 0, "Kubelet Version reported by the node."),
            col(
                "Internal-IP",
                "string",
                1,
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
            ),
            col(
                "External-IP",
                "string",
                1,
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
            ),
            col(
                "OS-Image",
                "string",
                1,
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            ),
            col(
                "Kernel-Version",
                "string",
                1,
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            ),
            col(
                "Container-Runtime",
                "string",
                1,
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            ),
        ],
        Kind::Pod => vec![
            name,
            col("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic."),
            col("Status", "string", 0, "The aggregate status of the containers in this pod."),
            col(
                "Restarts",
                "string",
                0,
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            age,
            col(
                "IP",
                "string",
                1,
                "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            ),
            col("Node", "string", 1, "NodeName is a request to schedule this pod onto a specific node."),
            col(
                "Nominated Node",
                "string",
                1,
                "nominatedNodeName is set when this pod preempts other pods on the node.",
            ),
            col(
                "Readiness Gates",
                "string",
                1,
                "If specified, all readiness gates will be evaluated for pod readiness.",
            ),
        ],
        Kind::Namespace => vec![name, col("Status", "string", 0, "The status of the namespace"), age],
        Kind::Lease => vec![
            name,
            col("Holder", "string", 0, "HolderIdentity contains the identity of the holder of a current lease."),
            age,
        ],
        Kind::Event => vec![
            col("Last Seen", "string", 0, "Time when this Event was last seen."),
            col("Type", "string", 0, "Type of this event (Normal, Warning), new types could be added in the future."),
            col("Reason", "string", 0, "Reason is why the action was taken."),
            col("Object", "string", 0, "The object this Event is about."),
            col("Subobject", "string", 1, "The subobject of the object this Event is about."),
            col("Source", "string", 1, "The component reporting this event."),
            col("Message", "string", 0, "A human-readable description of the status of this operation."),
            col("First Seen", "string", 1, "The time at which the event was first recorded."),
            col("Count", "string", 1, "The number of times this event has occurred."),
            col("Name", "string", 1, "Name must be unique within a namespace."),
        ],
        Kind::DaemonSet => vec![
            name,
            col("Desired", "integer", 0, "The total number of nodes that should be running the daemon pod."),
            col("Current", "integer", 0, "The number of nodes that are running at least 1 daemon pod."),
            col(
                "Ready",
                "integer",
                0,
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
            ),
            col("Up-to-date", "integer", 0, "The total number of nodes that are running updated daemon pod"),
            col(
                "Available",
                "integer",
                0,
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
            ),
            col(
                "Node Selector",
                "string",
                0,
                "NodeSelector is a selector which must be true for the pod to fit on a node.",
            ),
            age,
        ],
        Kind::PodDisruptionBudget => vec![
            name,
            col(
                "Min Available",
                "string",
                0,
                "The minimum number of pods that must be available, either a number or a percentage.",
            ),
            col(
                "Max Unavailable",
                "string",
                0,
                "The maximum number of pods that may be unavailable, either a number or a percentage.",
            ),
            col("Allowed Disruptions", "integer", 0, "Number of pod disruptions that are currently allowed."),
            age,
        ],
    }
}

/// Upstream's `duration.HumanDuration`.
pub fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    if s < 120 {
        return format!("{s}s");
    }
    let m = s / 60;
    if m < 10 {
        let rs = s % 60;
        return if rs == 0 { format!("{m}m") } else { format!("{m}m{rs}s") };
    }
    if m < 180 {
        return format!("{m}m");
    }
    let h = s / 3600;
    if h < 8 {
        let rm = m % 60;
        return if rm == 0 { format!("{h}h") } else { format!("{h}h{rm}m") };
    }
    if h < 48 {
        return format!("{h}h");
    }
    if h < 24 * 8 {
        let rh = h % 24;
        return if rh == 0 { format!("{}d", h / 24) } else { format!("{}d{rh}h", h / 24) };
    }
    if h < 24 * 365 * 2 {
        return format!("{}d", h / 24);
    }
    if h < 24 * 365 * 8 {
        let dy = (h / 24) % 365;
        return if dy == 0 { format!("{}y", h / 24 / 365) } else { format!("{}y{dy}d", h / 24 / 365) };
    }
    format!("{}y", h / 24 / 365)
}

fn st<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default()
}

fn age(v: &Value, p: &str, time: &TimeBase, now: Timestamp) -> String {
    match time.parse(st(v, p)) {
        Some(t) => human_duration((now - t).as_nanos() / 1_000_000_000),
        None => "<unknown>".into(),
    }
}

fn or_none(s: &str) -> String {
    if s.is_empty() { "<none>".into() } else { s.to_string() }
}

fn or_unknown(s: &str) -> String {
    if s.is_empty() { "<unknown>".into() } else { s.to_string() }
}

fn present<'a>(v: &'a Value, p: &str) -> Option<&'a Value> {
    v.pointer(p).filter(|x| !x.is_null())
}

fn int(v: &Value, p: &str) -> i64 {
    v.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

/// A node's STATUS cell: `Ready` when its Ready condition is True,
/// `NotReady` when it is anything else (False, and Unknown as the node
/// lifecycle controller sets it), `Unknown` only when the node has no
/// Ready condition at all; `,SchedulingDisabled` when cordoned. Of several
/// Ready conditions the last counts, as upstream keys them by type.
pub fn node_status(v: &Value) -> String {
    let ready = v
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().rev().find(|c| st(c, "/type") == "Ready"))
        .map(|c| st(c, "/status"));
    let mut status = match ready {
        None => "Unknown".to_string(),
        Some("True") => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
    };
    if v.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    status
}

/// A node's ROLES cell: the `<role>` of each `node-role.kubernetes.io/<role>`
/// label and the value of a non-empty `kubernetes.io/role` label, sorted,
/// without repeats; `<none>` when there are none.
pub fn node_roles(v: &Value) -> String {
    let mut roles = std::collections::BTreeSet::new();
    for (k, val) in v.pointer("/metadata/labels").and_then(Value::as_object).into_iter().flatten() {
        if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
            if !role.is_empty() {
                roles.insert(role.to_string());
            }
        } else if k == "kubernetes.io/role"
            && let Some(role) = val.as_str().filter(|r| !r.is_empty())
        {
            roles.insert(role.to_string());
        }
    }
    if roles.is_empty() { "<none>".into() } else { roles.into_iter().collect::<Vec<_>>().join(",") }
}

/// What a pod's READY, STATUS and RESTARTS cells are made of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSummary {
    /// Containers ready and running (sidecars, the restartable init
    /// containers, included once started).
    pub ready: usize,
    /// Containers, sidecars included.
    pub total: usize,
    /// The STATUS word: the phase, or the reason that says more.
    pub status: String,
    /// Restarts of the containers that count (see [`pod_summary`]).
    pub restarts: i64,
    /// When the last of those restarts ended the container before it.
    pub last_restart: Option<Timestamp>,
}

/// A pod's table summary, by upstream's rules: STATUS starts as the phase
/// (or `status.reason`, e.g. `Evicted`; `SchedulingGated` while gated);
/// while init containers run it is `Init:N/M`, `Init:<reason>` or
/// `Init:ExitCode:N`; once initialised, the first container with a waiting
/// or terminated reason names it (`CrashLoopBackOff`, `Completed`,
/// `ExitCode:N`), `Completed` turning back to `Running` (or `NotReady`)
/// while another container still runs; a pod being deleted is
/// `Terminating`, or `Unknown` when the node lifecycle controller gave it
/// the `NodeLost` reason. RESTARTS counts the init containers' restarts
/// while they run, then the containers' and sidecars'.
// Long on purpose: it follows upstream's `printPod` step by step (init
// containers, containers, sidecars, deletion), whose order decides
// the STATUS shown.
pub fn pod_summary(v: &Value, time: &TimeBase) -> PodSummary {
    let phase = st(v, "/status/phase");
    let mut status = match st(v, "/status/reason") {
        "" => phase.to_string(),
        r => r.to_string(),
    };
    let conditions = v.pointer("/status/conditions").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    if conditions.iter().any(|c| st(c, "/type") == "PodScheduled" && st(c, "/reason") == "SchedulingGated") {
        status = "SchedulingGated".into();
    }
    let init_specs = v.pointer("/spec/initContainers").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    // Sidecars: init containers with `restartPolicy: Always` keep running
    // beside the main containers and count among them.
    let sidecar = |name: &str| init_specs.iter().any(|c| st(c, "/name") == name && st(c, "/restartPolicy") == "Always");
    let mut total = v.pointer("/spec/containers").and_then(Value::as_array).map_or(0, Vec::len);
    total += init_specs.iter().filter(|c| st(c, "/restartPolicy") == "Always").count();
    let mut ready = 0;
    let finished = |c: &Value| present(c, "/lastState/terminated").and_then(|t| time.parse(st(t, "/finishedAt")));
    let (mut restarts, mut last_restart) = (0i64, None::<Timestamp>);
    let (mut sidecar_restarts, mut sidecar_last) = (0i64, None::<Timestamp>);
    let mut initializing = false;
    let init_statuses =
        v.pointer("/status/initContainerStatuses").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    for (i, c) in init_statuses.iter().enumerate() {
        let count = int(c, "/restartCount");
        restarts += count;
        last_restart = last_restart.max(finished(c));
        let is_sidecar = sidecar(st(c, "/name"));
        if is_sidecar {
            sidecar_restarts += count;
            sidecar_last = sidecar_last.max(finished(c));
        }
        let terminated = present(c, "/state/terminated");
        let waiting_reason = st(c, "/state/waiting/reason");
        if terminated.is_some_and(|t| int(t, "/exitCode") == 0) {
            continue;
        }
        if is_sidecar && c.get("started").and_then(Value::as_bool) == Some(true) {
            if c.get("ready").and_then(Value::as_bool) == Some(true) {
                ready += 1;
            }
            continue;
        }
        status = match terminated {
            Some(t) => match (st(t, "/reason"), int(t, "/signal")) {
                ("", 0) => format!("Init:ExitCode:{}", int(t, "/exitCode")),
                ("", signal) => format!("Init:Signal:{signal}"),
                (reason, _) => format!("Init:{reason}"),
            },
            None if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" => {
                format!("Init:{waiting_reason}")
            }
            None => format!("Init:{i}/{}", init_specs.len()),
        };
        initializing = true;
        break;
    }
    let initialized = conditions.iter().any(|c| st(c, "/type") == "Initialized" && st(c, "/status") == "True");
    if !initializing || initialized {
        restarts = sidecar_restarts;
        last_restart = sidecar_last;
        let mut running = false;
        let statuses = v.pointer("/status/containerStatuses").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        // From the last to the first, so the first container with
        // something to say has the last word.
        for c in statuses.iter().rev() {
            restarts += int(c, "/restartCount");
            last_restart = last_restart.max(finished(c));
            let terminated = present(c, "/state/terminated");
            match (st(c, "/state/waiting/reason"), terminated) {
                ("", Some(t)) => {
                    status = match (st(t, "/reason"), int(t, "/signal")) {
                        ("", 0) => format!("ExitCode:{}", int(t, "/exitCode")),
                        ("", signal) => format!("Signal:{signal}"),
                        (reason, _) => reason.to_string(),
                    };
                }
                ("", None) => {
                    if c.get("ready").and_then(Value::as_bool) == Some(true) && present(c, "/state/running").is_some() {
                        running = true;
                        ready += 1;
                    }
                }
                (reason, _) => status = reason.to_string(),
            }
        }
        if status == "Completed" && running {
            let pod_ready = conditions.iter().any(|c| st(c, "/type") == "Ready" && st(c, "/status") == "True");
            status = if pod_ready { "Running".into() } else { "NotReady".into() };
        }
    }
    if present(v, "/metadata/deletionTimestamp").is_some() {
        if st(v, "/status/reason") == nodewarden_model::keys::POD_REASON_NODE_LOST {
            status = "Unknown".into();
        } else if phase != "Succeeded" && phase != "Failed" {
            status = "Terminating".into();
        }
    }
    PodSummary { ready, total, status, restarts, last_restart }
}

/// A pod's READINESS GATES cell: how many of its gates' conditions are
/// True, out of how many gates; `<none>` without gates.
fn readiness_gates(v: &Value) -> String {
    let Some(gates) = v.pointer("/spec/readinessGates").and_then(Value::as_array).filter(|g| !g.is_empty()) else {
        return "<none>".into();
    };
    let conditions = v.pointer("/status/conditions").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let met = gates
        .iter()
        .filter(|g| {
            conditions
                .iter()
                .find(|c| st(c, "/type") == st(g, "/conditionType"))
                .is_some_and(|c| st(c, "/status") == "True")
        })
        .count();
    format!("{met}/{}", gates.len())
}

/// The cells of one object's row.
// Long on purpose: one arm a kind, each matching its arm in
// `columns`, so a row's cells and the header stay side by side.
pub fn cells(kind: Kind, v: &Value, time: &TimeBase, now: Timestamp) -> Vec<Value> {
    let name = json!(st(v, "/metadata/name"));
    let created = age(v, "/metadata/creationTimestamp", time, now);
    match kind {
        Kind::Node => {
            let addr = |t: &str| {
                v.pointer("/status/addresses")
                    .and_then(Value::as_array)
                    .and_then(|a| a.iter().find(|x| st(x, "/type") == t))
                    .map_or_else(|| "<none>".to_string(), |x| st(x, "/address").to_string())
            };
            vec![
                name,
                json!(node_status(v)),
                json!(node_roles(v)),
                json!(created),
                json!(st(v, "/status/nodeInfo/kubeletVersion")),
                json!(addr("InternalIP")),
                json!(addr("ExternalIP")),
                json!(or_unknown(st(v, "/status/nodeInfo/osImage"))),
                json!(or_unknown(st(v, "/status/nodeInfo/kernelVersion"))),
                json!(or_unknown(st(v, "/status/nodeInfo/containerRuntimeVersion"))),
            ]
        }
        Kind::Pod => {
            let summary = pod_summary(v, time);
            let restarts = match summary.last_restart {
                Some(t) if summary.restarts != 0 => {
                    format!("{} ({} ago)", summary.restarts, human_duration((now - t).as_nanos() / 1_000_000_000))
                }
                _ => summary.restarts.to_string(),
            };
            // Dual-stack pods list their addresses in `podIPs`; a client
            // that wrote only `podIP` is read as the API reads it.
            let ip = match st(v, "/status/podIPs/0/ip") {
                "" => st(v, "/status/podIP"),
                ip => ip,
            };
            vec![
                name,
                json!(format!("{}/{}", summary.ready, summary.total)),
                json!(summary.status),
                json!(restarts),
                json!(created),
                json!(or_none(ip)),
                json!(or_none(st(v, "/spec/nodeName"))),
                json!(or_none(st(v, "/status/nominatedNodeName"))),
                json!(readiness_gates(v)),
            ]
        }
        Kind::Namespace => vec![name, json!(st(v, "/status/phase")), json!(created)],
        Kind::Lease => vec![name, json!(st(v, "/spec/holderIdentity")), json!(created)],
        Kind::Event => {
            let last = ["/lastTimestamp", "/eventTime", "/metadata/creationTimestamp"]
                .iter()
                .find(|p| !st(v, p).is_empty())
                .map_or_else(|| "<unknown>".to_string(), |p| age(v, p, time, now));
            let first =
                if st(v, "/firstTimestamp").is_empty() { last.clone() } else { age(v, "/firstTimestamp", time, now) };
            let obj =
                format!("{}/{}", st(v, "/involvedObject/kind").to_ascii_lowercase(), st(v, "/involvedObject/name"));
            vec![
                json!(last),
                json!(st(v, "/type")),
                json!(st(v, "/reason")),
                json!(obj),
                json!(st(v, "/involvedObject/fieldPath")),
                json!(or_none(st(v, "/source/component"))),
                json!(st(v, "/message")),
                json!(first),
                json!(v.get("count").and_then(Value::as_i64).unwrap_or(1).to_string()),
                name,
            ]
        }
        Kind::DaemonSet => {
            let n = |p: &str| json!(v.pointer(p).and_then(Value::as_i64).unwrap_or(0));
            let sel = v
                .pointer("/spec/template/spec/nodeSelector")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            vec![
                name,
                n("/status/desiredNumberScheduled"),
                n("/status/currentNumberScheduled"),
                n("/status/numberReady"),
                n("/status/updatedNumberScheduled"),
                n("/status/numberAvailable"),
                json!(or_none(&sel)),
                json!(created),
            ]
        }
        Kind::PodDisruptionBudget => {
            let iors = |p: &str| match v.pointer(p) {
                Some(Value::Number(n)) => n.to_string(),
                Some(Value::String(s)) => s.clone(),
                _ => "N/A".into(),
            };
            vec![
                name,
                json!(iors("/spec/minAvailable")),
                json!(iors("/spec/maxUnavailable")),
                json!(v.pointer("/status/disruptionsAllowed").and_then(Value::as_i64).unwrap_or(0)),
                json!(created),
            ]
        }
    }
}

/// One row.
pub fn row(kind: Kind, v: &Value, include: IncludeObject, time: &TimeBase, now: Timestamp) -> Value {
    let mut r = json!({"cells": cells(kind, v, time, now)});
    if kind == Kind::Pod {
        // A finished pod's row says so, as upstream marks it.
        let done = match st(v, "/status/phase") {
            "Succeeded" => Some("The pod has completed successfully."),
            "Failed" => Some("The pod failed."),
            _ => None,
        };
        if let Some(message) = done {
            r["conditions"] = json!([{"type": "Completed", "status": "True",
                "reason": st(v, "/status/phase"), "message": message}]);
        }
    }
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            r["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": v["metadata"].clone()});
        }
        IncludeObject::Object => r["object"] = v.clone(),
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_match_kubectl() {
        let cases = [
            (5, "5s"),
            (119, "119s"),
            (150, "2m30s"),
            (600, "10m"),
            (3 * 3600 + 60, "3h1m"),
            (9 * 3600, "9h"),
            (50 * 3600, "2d2h"),
            (30 * 86400, "30d"),
        ];
        for (s, want) in cases {
            assert_eq!(human_duration(s), want, "{s}");
        }
    }
}

#[cfg(test)]
mod printer_tests {
    use nodewarden_model::Span;

    use super::*;

    /// 2026-01-01T00:00:00Z is the epoch here.
    const TIME: TimeBase = TimeBase { unix_nanos_at_epoch: 1_767_225_600_000_000_000 };

    fn now() -> Timestamp {
        Timestamp::EPOCH + Span::from_secs(3600)
    }

    fn names(kind: Kind) -> Vec<(String, String, i64)> {
        columns(kind)
            .iter()
            .map(|c| (st(c, "/name").to_string(), st(c, "/type").to_string(), int(c, "/priority")))
            .collect()
    }

    fn cols(list: &[(&str, &str, i64)]) -> Vec<(String, String, i64)> {
        list.iter().map(|(n, t, p)| (n.to_string(), t.to_string(), *p)).collect()
    }

    #[test]
    fn node_and_pod_columns_are_upstreams() {
        // pkg/printers/internalversion: nodeColumnDefinitions and
        // podColumnDefinitions (name, type, priority; 1 = `-o wide`).
        let s = "string";
        assert_eq!(
            names(Kind::Node),
            cols(&[
                ("Name", s, 0),
                ("Status", s, 0),
                ("Roles", s, 0),
                ("Age", s, 0),
                ("Version", s, 0),
                ("Internal-IP", s, 1),
                ("External-IP", s, 1),
                ("OS-Image", s, 1),
                ("Kernel-Version", s, 1),
                ("Container-Runtime", s, 1),
            ])
        );
        assert_eq!(
            names(Kind::Pod),
            cols(&[
                ("Name", s, 0),
                ("Ready", s, 0),
                ("Status", s, 0),
                ("Restarts", s, 0),
                ("Age", s, 0),
                ("IP", s, 1),
                ("Node", s, 1),
                ("Nominated Node", s, 1),
                ("Readiness Gates", s, 1),
            ])
        );
        for kind in [Kind::Node, Kind::Pod] {
            let defs = columns(kind);
            let formats: Vec<&str> = defs.iter().map(|c| st(c, "/format")).collect();
            assert_eq!(formats[0], "name");
            assert!(formats[1..].iter().all(|f| f.is_empty()), "{formats:?}");
        }
    }

    fn node(ready: Option<&str>, unschedulable: bool, labels: Value) -> Value {
        let conditions: Vec<Value> = ready.map(|r| json!({"type": "Ready", "status": r})).into_iter().collect();
        json!({"metadata": {"name": "n1", "labels": labels, "creationTimestamp": "2025-12-31T23:00:00Z"},
               "spec": {"unschedulable": unschedulable},
               "status": {"conditions": conditions, "nodeInfo": {"kubeletVersion": "v1.33.1"},
                          "addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "10.0.0.7"}]}})
    }

    #[test]
    fn node_rows_say_not_ready_for_anything_but_true() {
        let cells = |v: &Value| cells(Kind::Node, v, &TIME, now());
        let none = json!({});
        assert_eq!(cells(&node(Some("True"), false, none.clone()))[1], "Ready");
        assert_eq!(cells(&node(Some("False"), false, none.clone()))[1], "NotReady");
        assert_eq!(cells(&node(Some("Unknown"), false, none.clone()))[1], "NotReady", "as the controller marks it");
        assert_eq!(cells(&node(None, false, none.clone()))[1], "Unknown", "no Ready condition at all");
        assert_eq!(cells(&node(Some("Unknown"), true, none.clone()))[1], "NotReady,SchedulingDisabled");
        assert_eq!(cells(&node(None, true, none.clone()))[1], "Unknown,SchedulingDisabled");
        let row = cells(&node(Some("True"), false, none));
        assert_eq!(
            row,
            ["n1", "Ready", "<none>", "120m", "v1.33.1", "10.0.0.7", "<none>", "<unknown>", "<unknown>", "<unknown>"]
        );
        let labels = json!({"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/control-plane": "",
                            "node-role.kubernetes.io/": "", "kubernetes.io/role": "worker", "team": "a"});
        assert_eq!(cells(&node(Some("True"), false, labels))[2], "control-plane,worker");
        assert_eq!(cells(&node(Some("True"), false, json!({"kubernetes.io/role": ""})))[2], "<none>");
    }

    fn pod(phase: &str, containers: Value, statuses: Value) -> Value {
        json!({"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:55:00Z"},
               "spec": {"containers": containers, "nodeName": "n1"},
               "status": {"phase": phase, "podIP": "10.1.0.9", "containerStatuses": statuses,
                          "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}]}})
    }

    fn summary(v: &Value) -> (String, String, String) {
        let c = cells(Kind::Pod, v, &TIME, now());
        t3(st(&c[1], ""), st(&c[2], ""), st(&c[3], ""))
    }

    fn t3(a: &str, b: &str, c: &str) -> (String, String, String) {
        (a.into(), b.into(), c.into())
    }

    #[test]
    fn pod_rows_follow_upstreams_status_rules() {
        let two = json!([{"name": "a"}, {"name": "b"}]);
        let running = |name: &str, ready: bool| json!({"name": name, "ready": ready, "restartCount": 0, "state": {"running": {}}});
        let ok = pod("Running", two.clone(), json!([running("a", true), running("b", true)]));
        let c = cells(Kind::Pod, &ok, &TIME, now());
        assert_eq!(c, ["p", "2/2", "Running", "0", "5m", "10.1.0.9", "n1", "<none>", "<none>"]);
        // Ready counts running containers only.
        let half = pod("Running", two.clone(), json!([running("a", true), running("b", false)]));
        assert_eq!(summary(&half), t3("1/2", "Running", "0"));
        // A waiting reason names the status; restarts say when the last ended.
        let crash = pod(
            "Running",
            two.clone(),
            json!([running("a", true), {"name": "b", "ready": false, "restartCount": 4,
                   "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                   "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-01-01T00:57:00Z"}}}]),
        );
        assert_eq!(summary(&crash), t3("1/2", "CrashLoopBackOff", "4 (3m ago)"));
        let exit = pod("Running", two.clone(), json!([{"name": "a", "state": {"terminated": {"exitCode": 2}}}]));
        assert_eq!(summary(&exit).1, "ExitCode:2");
        let signal = pod(
            "Running",
            two.clone(),
            json!([{"name": "a", "state": {"terminated": {"exitCode": 137, "signal": 9}}}]),
        );
        assert_eq!(summary(&signal).1, "Signal:9");
        // Completed beside a running container is Running again.
        let mixed = pod(
            "Running",
            two.clone(),
            json!([{"name": "a", "state": {"terminated": {"reason": "Completed"}}}, running("b", true)]),
        );
        assert_eq!(summary(&mixed), t3("1/2", "Running", "0"));
        let done =
            pod("Succeeded", two.clone(), json!([{"name": "a", "state": {"terminated": {"reason": "Completed"}}}]));
        assert_eq!(summary(&done).1, "Completed");
        let r = row(Kind::Pod, &done, IncludeObject::None, &TIME, now());
        assert_eq!(r["conditions"][0]["type"], "Completed");
        assert!(row(Kind::Pod, &ok, IncludeObject::None, &TIME, now()).get("conditions").is_none());

        // Deletion: Terminating, or Unknown for a pod the controller
        // marked NodeLost; a finished pod keeps its word.
        let mut going = ok.clone();
        going["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:59:00Z");
        assert_eq!(summary(&going).1, "Terminating");
        going["status"]["reason"] = json!("NodeLost");
        assert_eq!(summary(&going).1, "Unknown");
        let mut evicted = pod("Failed", two.clone(), json!([]));
        evicted["status"]["reason"] = json!("Evicted");
        evicted["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:59:00Z");
        assert_eq!(summary(&evicted), t3("0/2", "Evicted", "0"));

        // Init containers: their progress while they run; a sidecar
        // counts among the containers.
        let mut init =
            pod("Pending", two.clone(), json!([{"name": "a", "state": {"waiting": {"reason": "PodInitializing"}}}]));
        init["spec"]["initContainers"] =
            json!([{"name": "i1"}, {"name": "i2"}, {"name": "side", "restartPolicy": "Always"}]);
        init["status"]["conditions"] = json!([{"type": "Initialized", "status": "False"}]);
        init["status"]["initContainerStatuses"] = json!([
            {"name": "i1", "state": {"terminated": {"exitCode": 0}}},
            {"name": "i2", "restartCount": 2, "state": {"running": {}}},
        ]);
        assert_eq!(summary(&init), t3("0/3", "Init:1/3", "2"));
        init["status"]["initContainerStatuses"][1]["state"] = json!({"waiting": {"reason": "CrashLoopBackOff"}});
        assert_eq!(summary(&init).1, "Init:CrashLoopBackOff");
        init["status"]["initContainerStatuses"][1]["state"] = json!({"terminated": {"exitCode": 3}});
        assert_eq!(summary(&init).1, "Init:ExitCode:3");
        init["status"]["initContainerStatuses"][1]["state"] = json!({"terminated": {"exitCode": 0}});
        if let Some(list) = init["status"]["initContainerStatuses"].as_array_mut() {
            list.push(
                json!({"name": "side", "started": true, "ready": true, "restartCount": 1, "state": {"running": {}}}),
            );
        }
        init["status"]["conditions"] = json!([{"type": "Initialized", "status": "True"}]);
        init["status"]["phase"] = json!("Running");
        init["status"]["containerStatuses"] = json!([running("a", true), running("b", true)]);
        assert_eq!(summary(&init), t3("3/3", "Running", "1"), "the sidecar's restarts count, not the others'");

        // Gated scheduling; readiness gates; an address given only as podIP.
        let mut gated = pod("Pending", two.clone(), json!([]));
        gated["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"},
                                               {"type": "x/one", "status": "True"}, {"type": "x/two", "status": "False"}]);
        gated["status"]["podIP"] = json!(null);
        gated["spec"]["readinessGates"] = json!([{"conditionType": "x/one"}, {"conditionType": "x/two"}]);
        let c = cells(Kind::Pod, &gated, &TIME, now());
        assert_eq!((st(&c[2], ""), st(&c[5], ""), st(&c[8], "")), ("SchedulingGated", "<none>", "1/2"));
        let mut dual = ok;
        dual["status"]["podIPs"] = json!([{"ip": "10.1.0.10"}, {"ip": "fd00::a"}]);
        assert_eq!(cells(Kind::Pod, &dual, &TIME, now())[5], "10.1.0.10");
    }
}
