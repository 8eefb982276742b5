//! Reading a snapshot of a real cluster: what
//! `kubectl get nodes,pods,leases,daemonsets,poddisruptionbudgets -A -o json`
//! prints (a `List`), the same as YAML, several documents, a directory of
//! such files, or the pages of a live listing ([`crate::live`]).
//!
//! A snapshot is untrusted input (hand-edited, truncated, from another
//! tool), so reading it never panics and never gives up on one bad object:
//!
//! - a file that is not JSON or YAML, or whose documents are not Kubernetes
//!   objects or Lists (no `kind`), is a [`SnapshotError`] naming the file;
//! - objects of kinds the what-if does not use are counted by kind and
//!   skipped ([`Snapshot::skipped`]);
//! - an object that lacks what the simulation needs (a Node without a
//!   name; a Pod without a name, namespace or uid) is reported by name in
//!   [`Snapshot::problems`] and left out;
//! - odd fields are read as the adapter reads them (`nodewarden_objects`:
//!   conservatively, logged), so `nodewarden run` and a what-if agree on
//!   what an object means.
//!
//! JSON is read as a stream: the `items` of a List are decoded and reduced
//! to what the simulation keeps one at a time, so a 300k-pod List (hundreds
//! of megabytes) never exists as one JSON tree in memory.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use nodewarden_engine::{NodeSnapshot, Observation, PodSnapshot};
use nodewarden_model::{BudgetAmounts, KubeVersion, LabelSelector, Timestamp};
pub use nodewarden_objects::ControllerOwner;
use nodewarden_objects::{
    Detail, NODE_LEASE_NAMESPACE, budget_amounts, controller_owner, label_selector_reading, lease_reading,
    node_reading, pod_priority, pod_reading,
};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Why a snapshot could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// What was read.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The text is neither JSON nor YAML.
    #[error("{origin}: not JSON or YAML: {message}")]
    Syntax {
        /// The file (or listing) it came from.
        origin: String,
        /// The parser's message, with the line and column.
        message: String,
    },
    /// It parses, but is not a Kubernetes object or List.
    #[error("{origin}: not Kubernetes JSON or YAML: {message}")]
    NotKubernetes {
        /// The file (or listing) it came from.
        origin: String,
        /// What was found instead.
        message: String,
    },
    /// `--from-cluster`: the API server could not be reached at all (no
    /// connection, a TLS failure, no answer).
    #[error("cannot reach {server}: {cause}")]
    Unreachable {
        /// The API server's URL.
        server: String,
        /// Why, in a few words (`connection refused`).
        cause: String,
    },
    /// `--from-cluster`: the API server refused a listing, or answered it
    /// with something that is not a list.
    #[error("{origin}: {message}")]
    Listing {
        /// The cluster and the kind listed.
        origin: String,
        /// The request and the answer.
        message: String,
    },
    /// A directory without a single `.json`, `.yaml` or `.yml` file.
    #[error("{0}: no .json, .yaml or .yml file in the directory")]
    EmptyDirectory(PathBuf),
    /// A fault aimed at something the snapshot does not have.
    #[error("{0}")]
    Fault(String),
    /// Everything was read, but there is no node to simulate.
    #[error("{0}: the snapshot has no usable Node (was it taken with `kubectl get nodes,pods,... -o json`?)")]
    NoNodes(String),
}

/// What the what-if keeps of a pod: the engine's reading, and what the
/// per-workload report needs.
#[derive(Clone, Debug, PartialEq)]
pub struct SnapPod {
    /// The engine's reading (times in Unix nanoseconds, as the adapter's).
    pub pod: PodSnapshot,
    /// The owner reference marked `controller: true`, if any.
    pub owner: Option<ControllerOwner>,
    /// `metadata.labels` (for PodDisruptionBudget selectors and the
    /// Deployment rule).
    pub labels: BTreeMap<String, String>,
    /// `spec.priority`.
    pub priority: Option<i64>,
    /// `spec.priorityClassName`.
    pub priority_class: Option<String>,
    /// The `scheduler.alpha.kubernetes.io/critical-pod` annotation is set.
    pub critical_annotation: bool,
    /// `status.phase` is `Succeeded` or `Failed`: not a replica any more.
    pub finished: bool,
}

/// A PodDisruptionBudget.
#[derive(Clone, Debug, PartialEq)]
pub struct Pdb {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Which pods of the namespace it covers.
    pub selector: LabelSelector,
    /// What it requires, as the disruption controller reads its spec.
    pub budget: BudgetAmounts,
}

/// Everything read from a snapshot.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Where it came from (file names or the cluster), for messages.
    pub source: String,
    /// Nodes, in the order read (times in Unix nanoseconds).
    pub nodes: Vec<NodeSnapshot>,
    /// Node Lease renew times, by node (Unix nanoseconds).
    pub leases: HashMap<String, Option<Timestamp>>,
    /// Pods, in the order read.
    pub pods: Vec<SnapPod>,
    /// DaemonSets, as `namespace/name`.
    pub daemonsets: Vec<String>,
    /// ReplicaSets' own controlling owners, by `namespace/name` (when the
    /// snapshot has ReplicaSets; see [`crate::workloads`]).
    pub replicasets: HashMap<String, Option<ControllerOwner>>,
    /// PodDisruptionBudgets.
    pub pdbs: Vec<Pdb>,
    /// Objects skipped because the what-if does not use their kind, by kind.
    pub skipped: BTreeMap<String, usize>,
    /// Objects left out, each with its name and why.
    pub problems: Vec<String>,
    /// The cluster's Kubernetes version, when the snapshot says it: the
    /// API server's `/version` for `--from-cluster`, or a file holding its
    /// body (`kubectl get --raw /version > version.json`). It picks the
    /// defaults the what-if plays ([`crate::Defaults`]).
    pub kube_version: Option<KubeVersion>,
}

/// The `seen_at` the adapter's readings get: an unreadable timestamp reads
/// as this, and [`crate::fleet`] puts it at the snapshot's own time (the
/// latest sign of life in it), as the adapter reads one as "when seen".
pub const SEEN_AT: Timestamp = Timestamp::from_nanos(i64::MIN + 1);

fn text<'v>(v: &'v Value, path: &[&str]) -> Option<&'v str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str()
}

fn object_name(v: &Value) -> String {
    match (text(v, &["metadata", "namespace"]), text(v, &["metadata", "name"])) {
        (Some(ns), Some(n)) if !ns.is_empty() => format!("{ns}/{n}"),
        (_, Some(n)) => n.to_string(),
        _ => "(unnamed)".to_string(),
    }
}

impl Snapshot {
    /// An empty snapshot from `source`.
    pub fn new(source: impl Into<String>) -> Snapshot {
        Snapshot { source: source.into(), ..Snapshot::default() }
    }

    /// Node names by zone key (`region/zone`), for messages and fault
    /// checks.
    pub fn zones(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for n in &self.nodes {
            out.entry(nodewarden_model::ZoneKey::from_labels(&n.labels).to_string()).or_default().push(n.name.clone());
        }
        out
    }

    fn problem(&mut self, kind: &str, v: &Value, why: &str) {
        self.problems.push(format!("{kind} {}: {why}; left out", object_name(v)));
    }

    /// Takes in one object. `kind` overrides the object's own (items of an
    /// API list response carry none).
    pub fn add(&mut self, v: &Value, kind: Option<&str>) {
        let Some(kind) = kind.or_else(|| text(v, &["kind"])) else {
            self.problems.push(format!("an object without a kind ({}); left out", object_name(v)));
            return;
        };
        match kind {
            "Node" => match node_reading(v, SEEN_AT, Detail::Lifecycle) {
                Some(n) => self.nodes.push(n),
                None => self.problem("Node", v, "no metadata.name"),
            },
            "Pod" => self.add_pod(v),
            "Lease" => {
                if text(v, &["metadata", "namespace"]) != Some(NODE_LEASE_NAMESPACE) {
                    *self.skipped.entry("Lease (not a node's)".into()).or_default() += 1;
                    return;
                }
                match lease_reading(v, SEEN_AT) {
                    Some(Observation::LeaseUpserted { node, renew }) => {
                        self.leases.insert(node, renew);
                    }
                    _ => self.problem("Lease", v, "no metadata.name"),
                }
            }
            "DaemonSet" => match (text(v, &["metadata", "namespace"]), text(v, &["metadata", "name"])) {
                (Some(ns), Some(n)) => self.daemonsets.push(format!("{ns}/{n}")),
                _ => self.problem("DaemonSet", v, "no name or namespace"),
            },
            "ReplicaSet" => match (text(v, &["metadata", "namespace"]), text(v, &["metadata", "name"])) {
                (Some(ns), Some(n)) => {
                    // An unreadable controller leaves the ReplicaSet's pods
                    // grouped under the ReplicaSet itself.
                    let owner = controller_owner(v).ok().flatten();
                    self.replicasets.insert(format!("{ns}/{n}"), owner);
                }
                _ => self.problem("ReplicaSet", v, "no name or namespace"),
            },
            "PodDisruptionBudget" => self.add_pdb(v),
            other => *self.skipped.entry(other.to_string()).or_default() += 1,
        }
    }

    fn add_pod(&mut self, v: &Value) {
        let named = text(v, &["metadata", "namespace"]).is_some_and(|s| !s.is_empty())
            && text(v, &["metadata", "name"]).is_some_and(|s| !s.is_empty());
        if !named {
            return self.problem("Pod", v, "no metadata.name or metadata.namespace");
        }
        if text(v, &["metadata", "uid"]).is_none_or(str::is_empty) {
            return self.problem("Pod", v, "no metadata.uid");
        }
        // Read as the rescheduler reads a pod, for its labels, priority
        // class and annotation; the simulation itself keeps only what node
        // lifecycle reads.
        let Some(mut pod) = pod_reading(v, SEEN_AT, Detail::Scheduling) else {
            return self.problem("Pod", v, "unreadable");
        };
        let scheduling = pod.scheduling.take().map(|s| *s).unwrap_or_default();
        let owner = match controller_owner(v) {
            Ok(o) => o,
            Err(what) => {
                self.problems.push(format!(
                    "Pod {}: unreadable ownerReferences ({what}); counted as a bare pod (and, as nodewarden run \
                     reads it, as a DaemonSet's)",
                    pod.key
                ));
                None
            }
        };
        self.pods.push(SnapPod {
            owner,
            labels: scheduling.labels,
            priority: pod_priority(v),
            priority_class: scheduling.priority_class,
            critical_annotation: scheduling.critical_annotation,
            finished: matches!(text(v, &["status", "phase"]), Some("Succeeded" | "Failed")),
            pod,
        });
    }

    fn add_pdb(&mut self, v: &Value) {
        let (Some(ns), Some(name)) = (text(v, &["metadata", "namespace"]), text(v, &["metadata", "name"])) else {
            return self.problem("PodDisruptionBudget", v, "no name or namespace");
        };
        let selector = match v.pointer("/spec/selector") {
            // policy/v1: a null selector selects nothing; leave it out.
            None | Some(Value::Null) => {
                return self.problem("PodDisruptionBudget", v, "no spec.selector (it selects no pod)");
            }
            Some(s) => match label_selector_reading(s) {
                Ok(s) => s,
                Err(e) => return self.problem("PodDisruptionBudget", v, &format!("unreadable spec.selector: {e}")),
            },
        };
        let budget = match budget_amounts(v) {
            Ok(b) => b,
            Err(e) => {
                return self.problem(
                    "PodDisruptionBudget",
                    v,
                    &format!("unreadable minAvailable or maxUnavailable: {e}"),
                );
            }
        };
        self.pdbs.push(Pdb { namespace: ns.to_string(), name: name.to_string(), selector, budget });
    }

    /// Takes the body of the API server's `/version` (`major`, `minor`,
    /// `gitVersion`); two different versions are refused, since they name
    /// two clusters.
    fn take_version(&mut self, body: &Map<String, Value>, source: &str) -> Result<(), SnapshotError> {
        let field = |k: &str| body.get(k).and_then(Value::as_str).unwrap_or_default();
        let read = KubeVersion::from_info(field("major"), field("minor"))
            .or_else(|_| field("gitVersion").parse::<KubeVersion>())
            .map_err(|e| not_k8s(source, &format!("a /version body without a readable version: {e}")))?;
        match self.kube_version {
            Some(v) if v != read => {
                Err(not_k8s(source, &format!("says Kubernetes {read}, another file of the snapshot says {v}")))
            }
            _ => {
                self.kube_version = Some(read);
                Ok(())
            }
        }
    }

    /// One line on what was read, skipped and left out.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{}: {} nodes, {} pods, {} node Leases, {} DaemonSets, {} PodDisruptionBudgets",
            self.source,
            self.nodes.len(),
            self.pods.len(),
            self.leases.len(),
            self.daemonsets.len(),
            self.pdbs.len()
        );
        if !self.replicasets.is_empty() {
            s.push_str(&format!(", {} ReplicaSets", self.replicasets.len()));
        }
        if let Some(v) = self.kube_version {
            s.push_str(&format!("; Kubernetes {v}"));
        }
        if !self.skipped.is_empty() {
            let kinds: Vec<String> = self.skipped.iter().map(|(k, n)| format!("{n} {k}")).collect();
            s.push_str(&format!("; skipped (not used): {}", kinds.join(", ")));
        }
        if !self.problems.is_empty() {
            s.push_str(&format!("; {} object(s) left out or read leniently (listed below)", self.problems.len()));
        }
        s
    }
}

/// Reads a file or a directory of files (`.json`, `.yaml`, `.yml`, in name
/// order) into one snapshot.
pub fn load_path(path: &Path) -> Result<Snapshot, SnapshotError> {
    let io = |source| SnapshotError::Io { path: path.to_path_buf(), source };
    let mut snap = Snapshot::new(path.display().to_string());
    if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_file()
                    && p.extension().and_then(|e| e.to_str()).is_some_and(|e| matches!(e, "json" | "yaml" | "yml"))
            })
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(SnapshotError::EmptyDirectory(path.to_path_buf()));
        }
        for f in files {
            let bytes = std::fs::read(&f).map_err(|source| SnapshotError::Io { path: f.clone(), source })?;
            read_bytes(&bytes, &f.display().to_string(), &mut snap)?;
        }
    } else {
        let bytes = std::fs::read(path).map_err(io)?;
        read_bytes(&bytes, &path.display().to_string(), &mut snap)?;
    }
    Ok(snap)
}

/// Reads one file's text (JSON when it starts with `{` or `[`, else YAML,
/// possibly several `---` documents) into `snap`.
pub fn read_bytes(bytes: &[u8], source: &str, snap: &mut Snapshot) -> Result<(), SnapshotError> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace()).copied();
    match first {
        None => Err(SnapshotError::NotKubernetes { origin: source.to_string(), message: "the file is empty".into() }),
        Some(b'{' | b'[') => {
            let mut de = serde_json::Deserializer::from_slice(bytes);
            let top = TopLevel { snap: &mut *snap }.deserialize(&mut de).and_then(|t| de.end().map(|()| t));
            match top {
                Ok(top) => top.finish(source, snap),
                Err(e) => Err(SnapshotError::Syntax { origin: source.to_string(), message: e.to_string() }),
            }
        }
        Some(_) => {
            let text = std::str::from_utf8(bytes).map_err(|e| SnapshotError::Syntax {
                origin: source.to_string(),
                message: format!("not UTF-8 text ({e})"),
            })?;
            let mut any = false;
            for doc in serde_yaml_ng::Deserializer::from_str(text) {
                let v = <Value as serde::Deserialize>::deserialize(doc)
                    .map_err(|e| SnapshotError::Syntax { origin: source.to_string(), message: e.to_string() })?;
                if v.is_null() {
                    continue; // an empty document (a trailing `---`)
                }
                any = true;
                read_value(v, source, snap)?;
            }
            if !any {
                return Err(SnapshotError::NotKubernetes {
                    origin: source.to_string(),
                    message: "no document in the file".into(),
                });
            }
            Ok(())
        }
    }
}

/// One parsed document: an object or a List.
fn read_value(v: Value, source: &str, snap: &mut Snapshot) -> Result<(), SnapshotError> {
    match v {
        Value::Object(mut m) => {
            let items = m.remove("items");
            if let Some(items) = items {
                let items = match items {
                    Value::Array(items) => items,
                    Value::Null => Vec::new(),
                    _ => return Err(not_k8s(source, "`items` is not a list")),
                };
                for item in &items {
                    snap.add(item, None);
                }
                Top { rest: m, saw_items: true }.finish(source, snap)
            } else {
                Top { rest: m, saw_items: false }.finish(source, snap)
            }
        }
        Value::Array(items) => {
            for item in &items {
                snap.add(item, None);
            }
            Ok(())
        }
        other => Err(not_k8s(source, &format!("the document is {}, not an object with a kind", describe(&other)))),
    }
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "empty",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn not_k8s(source: &str, message: &str) -> SnapshotError {
    SnapshotError::NotKubernetes { origin: source.to_string(), message: message.to_string() }
}

/// The top level of a JSON document with its `items` already taken in.
struct Top {
    rest: Map<String, Value>,
    saw_items: bool,
}

impl Top {
    fn finish(self, source: &str, snap: &mut Snapshot) -> Result<(), SnapshotError> {
        let kind = self.rest.get("kind").and_then(Value::as_str);
        let api_version = self.rest.get("apiVersion").and_then(Value::as_str);
        match (kind, self.saw_items) {
            (Some(k), true) if k == "List" || k.ends_with("List") => Ok(()),
            (None, true) if api_version.is_some() => Ok(()),
            (Some(k), true) => Err(not_k8s(source, &format!("an object of kind {k:?} with items is not a List"))),
            (None, true) => Err(not_k8s(source, "an object with items but no kind or apiVersion")),
            (Some(_), false) if api_version.is_some() => {
                snap.add(&Value::Object(self.rest), None);
                Ok(())
            }
            (None, false) if self.rest.contains_key("gitVersion") => snap.take_version(&self.rest, source),
            _ => {
                let keys: Vec<&str> = self.rest.keys().map(String::as_str).take(5).collect();
                Err(not_k8s(source, &format!("an object without kind and apiVersion (keys: {})", keys.join(", "))))
            }
        }
    }
}

/// Streams a JSON document: a List's items go to the snapshot one at a
/// time; everything else at the top level is kept.
struct TopLevel<'s> {
    snap: &'s mut Snapshot,
}

impl<'de> DeserializeSeed<'de> for TopLevel<'_> {
    type Value = Top;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Top, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopLevel<'_> {
    type Value = Top;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object or List")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
        let mut rest = Map::new();
        let mut saw_items = false;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" && !saw_items {
                saw_items = true;
                map.next_value_seed(Items { snap: &mut *self.snap })?;
            } else {
                rest.insert(key, map.next_value::<Value>()?);
            }
        }
        Ok(Top { rest, saw_items })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Top, A::Error> {
        Items { snap: &mut *self.snap }.visit_seq(seq)?;
        Ok(Top { rest: Map::from_iter([("kind".to_string(), Value::from("List"))]), saw_items: true })
    }
}

/// A List's `items`, each taken in as soon as it is decoded.
struct Items<'s> {
    snap: &'s mut Snapshot,
}

impl<'de> DeserializeSeed<'de> for Items<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Items<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of Kubernetes objects")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element::<Value>()? {
            self.snap.add(&item, None);
        }
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(()) // `"items": null`, as an empty list
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_body_says_the_clusters_version_and_two_cannot_both_be_it() {
        let mut snap = Snapshot::new("t");
        read_bytes(br#"{"major": "1", "minor": "31+", "gitVersion": "v1.31.4-gke.1000"}"#, "v.json", &mut snap)
            .expect("a /version body");
        assert_eq!(snap.kube_version, Some(KubeVersion::new(1, 31)));
        assert!(snap.summary().ends_with("; Kubernetes 1.31"), "{}", snap.summary());
        // The same as YAML, with an empty minor: gitVersion is read.
        read_bytes(b"major: \"1\"\nminor: \"\"\ngitVersion: v1.31.0\n", "v.yaml", &mut snap).expect("same version");
        let e = read_bytes(br#"{"gitVersion": "v1.33.1"}"#, "other.json", &mut snap).unwrap_err();
        assert_eq!(
            e.to_string(),
            "other.json: not Kubernetes JSON or YAML: says Kubernetes 1.33, another file of the snapshot says 1.31"
        );
        let e = read_bytes(br#"{"gitVersion": "dev"}"#, "dev.json", &mut Snapshot::new("t")).unwrap_err();
        assert!(e.to_string().contains("a /version body without a readable version"), "{e}");
    }
}
