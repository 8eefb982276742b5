//! Server-side printing: the `meta.k8s.io/v1` `Table` that `kubectl get`
//! asks for, with upstream's columns for each served kind (wide columns at
//! priority 1) and ages computed here, as the API server does.

use nodewarden_model::Timestamp;
use serde_json::{Value, json};

use crate::clock::TimeBase;
use crate::resource::Kind;

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

/// The cells of one object's row.
pub fn cells(kind: Kind, v: &Value, time: &TimeBase, now: Timestamp) -> Vec<Value> {
    let name = json!(st(v, "/metadata/name"));
    let created = age(v, "/metadata/creationTimestamp", time, now);
    match kind {
        Kind::Node => {
            let conds = v.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
            let mut status = match conds.iter().find(|c| st(c, "/type") == "Ready").map(|c| st(c, "/status")) {
                Some("True") => "Ready".to_string(),
                Some("False") => "NotReady".to_string(),
                _ => "Unknown".to_string(),
            };
            if v.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
                status.push_str(",SchedulingDisabled");
            }
            let mut roles: Vec<String> = v
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .map(|m| {
                    m.keys().filter_map(|k| k.strip_prefix("node-role.kubernetes.io/")).map(str::to_string).collect()
                })
                .unwrap_or_default();
            roles.sort();
            let addr = |t: &str| {
                v.pointer("/status/addresses")
                    .and_then(Value::as_array)
                    .and_then(|a| a.iter().find(|x| st(x, "/type") == t))
                    .map_or_else(|| "<none>".to_string(), |x| st(x, "/address").to_string())
            };
            vec![
                name,
                json!(status),
                json!(if roles.is_empty() { "<none>".to_string() } else { roles.join(",") }),
                json!(created),
                json!(st(v, "/status/nodeInfo/kubeletVersion")),
                json!(addr("InternalIP")),
                json!(addr("ExternalIP")),
                json!(or_none(st(v, "/status/nodeInfo/osImage"))),
                json!(or_none(st(v, "/status/nodeInfo/kernelVersion"))),
                json!(or_none(st(v, "/status/nodeInfo/containerRuntimeVersion"))),
            ]
        }
        Kind::Pod => {
            let statuses =
                v.pointer("/status/containerStatuses").and_then(Value::as_array).cloned().unwrap_or_default();
            let total = v.pointer("/spec/containers").and_then(Value::as_array).map_or(0, Vec::len);
            let ready = statuses.iter().filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true)).count();
            let restarts: i64 = statuses.iter().filter_map(|c| c.get("restartCount").and_then(Value::as_i64)).sum();
            let mut status = st(v, "/status/reason").to_string();
            if status.is_empty() {
                status = st(v, "/status/phase").to_string();
            }
            if v.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null()) {
                status = if st(v, "/status/reason") == "NodeLost" { "Unknown".into() } else { "Terminating".into() };
            }
            vec![
                name,
                json!(format!("{ready}/{total}")),
                json!(status),
                json!(restarts.to_string()),
                json!(created),
                json!(or_none(st(v, "/status/podIP"))),
                json!(or_none(st(v, "/spec/nodeName"))),
                json!(or_none(st(v, "/status/nominatedNodeName"))),
                json!("<none>"),
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
