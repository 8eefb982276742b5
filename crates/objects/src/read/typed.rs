//! The fast reading of well-formed Pods and Leases: decoded straight into
//! the few typed fields the engine reads, with nothing built for the rest.
//!
//! At 300k pods a watch's first list is decode-bound: even pruned to the
//! fields [`super`] reads ([`super::prune`]), every kept field
//! becomes a `serde_json::Value` (a map node, a string for each key), and
//! that cost several times the parse itself (`benches/decode.rs`). Almost
//! every object the API server sends is well formed, so this module reads
//! those through borrowed, typed fields and leaves every odd one to the
//! lenient reading.
//!
//! Its invariant: a reading here is the lenient reading, or nothing. The
//! types accept only the shapes whose lenient reading is plain (a field of
//! the wrong JSON type fails the decode), and every case in which the
//! lenient reading would log or choose conservatively (an empty name, an
//! unreadable owner reference or two marked controller, a Ready status other than True or False, a
//! toleration it could not read as written, an unparsable timestamp)
//! returns `None` here, so that the caller reads the object again
//! leniently and the log line names the object as it always did.
//! The readings' tests compare this reading with the lenient one for every
//! pod and Lease they read.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodewarden_engine::{Observation, PodSnapshot};
use nodewarden_model::{Toleration, TolerationOperator};
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::{NODE_LEASE_NAMESPACE, effect};
use crate::time::sane_time;

/// A string borrowed from the input where it has no escapes.
type Text<'a> = Option<Cow<'a, str>>;

/// The identity every kind carries, as the watcher keeps it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta<'a> {
    #[serde(borrow)]
    name: Text<'a>,
    #[serde(borrow)]
    namespace: Text<'a>,
    #[serde(borrow)]
    uid: Text<'a>,
    #[serde(borrow)]
    resource_version: Text<'a>,
    #[serde(borrow)]
    owner_references: Option<Vec<Owner<'a>>>,
    /// Any value but null marks the pod terminating.
    deletion_timestamp: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Owner<'a> {
    #[serde(borrow)]
    kind: Text<'a>,
    controller: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodSpec<'a> {
    #[serde(borrow)]
    node_name: Text<'a>,
    #[serde(borrow)]
    tolerations: Option<Vec<TolerationDoc<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TolerationDoc<'a> {
    #[serde(borrow)]
    key: Text<'a>,
    #[serde(borrow)]
    operator: Text<'a>,
    #[serde(borrow)]
    value: Text<'a>,
    #[serde(borrow)]
    effect: Text<'a>,
    toleration_seconds: Option<i64>,
}

#[derive(Deserialize)]
struct PodStatus<'a> {
    #[serde(borrow)]
    conditions: Option<Vec<Condition<'a>>>,
    #[serde(borrow)]
    reason: Text<'a>,
}

#[derive(Deserialize)]
struct Condition<'a> {
    #[serde(borrow, rename = "type")]
    kind: Text<'a>,
    #[serde(borrow)]
    status: Text<'a>,
}

#[derive(Deserialize)]
struct PodDoc<'a> {
    #[serde(borrow)]
    metadata: Option<Meta<'a>>,
    #[serde(borrow)]
    spec: Option<PodSpec<'a>>,
    #[serde(borrow)]
    status: Option<PodStatus<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeaseSpec<'a> {
    #[serde(borrow)]
    renew_time: Text<'a>,
}

#[derive(Deserialize)]
struct LeaseDoc<'a> {
    #[serde(borrow)]
    metadata: Option<Meta<'a>>,
    #[serde(borrow)]
    spec: Option<LeaseSpec<'a>>,
}

impl Meta<'_> {
    /// What the watcher keeps of the object's metadata ([`crate::Trimmed`]):
    /// name, namespace, uid and resourceVersion.
    fn identity(&self) -> ObjectMeta {
        let own = |t: &Text<'_>| t.as_deref().map(str::to_string);
        ObjectMeta {
            name: own(&self.name),
            namespace: own(&self.namespace),
            uid: own(&self.uid),
            resource_version: own(&self.resource_version),
            ..ObjectMeta::default()
        }
    }

    fn version(&self) -> u64 {
        self.resource_version.as_deref().and_then(|s| s.parse().ok()).unwrap_or(0)
    }
}

/// A non-empty string field.
fn filled<'t>(t: &'t Text<'_>) -> Option<&'t str> {
    t.as_deref().filter(|s| !s.is_empty())
}

/// A Pod's JSON read for node lifecycle, or `None` when it is not a
/// well-formed pod whose lenient reading is plain (read it leniently).
pub fn pod(json: &str) -> Option<(ObjectMeta, PodSnapshot)> {
    let doc: PodDoc<'_> = serde_json::from_str(json).ok()?;
    let meta = doc.metadata?;
    let (name, ns, uid) = (filled(&meta.name)?, filled(&meta.namespace)?, filled(&meta.uid)?);
    let (mut daemonset, mut controllers) = (false, 0);
    for owner in meta.owner_references.iter().flatten() {
        let kind = owner.kind.as_deref()?;
        let controller = owner.controller == Some(true);
        controllers += usize::from(controller);
        daemonset |= kind == "DaemonSet" && controller;
    }
    if controllers > 1 {
        return None;
    }
    let (conditions, reason) = match &doc.status {
        Some(s) => (s.conditions.as_deref().unwrap_or_default(), s.reason.as_deref()),
        None => (&[][..], None),
    };
    let ready = match conditions.iter().find(|c| c.kind.as_deref() == Some("Ready")) {
        None => None,
        Some(c) => match c.status.as_deref() {
            Some("True") => Some(true),
            Some("False") => Some(false),
            _ => return None,
        },
    };
    let (node, tolerations) = match &doc.spec {
        Some(spec) => (
            spec.node_name.as_deref().filter(|n| !n.is_empty()).map(str::to_string),
            spec.tolerations.iter().flatten().map(toleration).collect::<Option<Vec<_>>>()?,
        ),
        None => (None, Vec::new()),
    };
    let snapshot = PodSnapshot {
        key: format!("{ns}/{name}"),
        uid: uid.to_string(),
        version: meta.version(),
        node,
        daemonset,
        ready,
        terminating: meta.deletion_timestamp.is_some(),
        node_lost: reason == Some(nodewarden_model::keys::POD_REASON_NODE_LOST),
        tolerations,
        scheduling: None,
    };
    Some((meta.identity(), snapshot))
}

/// One toleration as written, or `None` when the lenient reading would
/// read it as tolerating everything.
fn toleration(t: &TolerationDoc<'_>) -> Option<Toleration> {
    let operator = match t.operator.as_deref() {
        None | Some("" | "Equal") => TolerationOperator::Equal,
        Some("Exists") => TolerationOperator::Exists,
        Some(_) => return None,
    };
    let effect = match t.effect.as_deref() {
        None | Some("") => None,
        Some(e) => Some(effect(e)?),
    };
    Some(Toleration {
        key: t.key.as_deref().unwrap_or_default().to_string(),
        operator,
        value: t.value.as_deref().unwrap_or_default().to_string(),
        effect,
        seconds: t.toleration_seconds,
    })
}

/// A Lease's JSON read, or `None` when it is not a well-formed one whose
/// lenient reading is plain (read it leniently). A Lease outside
/// `kube-node-lease` reads as no observation, as leniently.
pub fn lease(json: &str) -> Option<(ObjectMeta, Option<Observation>)> {
    let doc: LeaseDoc<'_> = serde_json::from_str(json).ok()?;
    let meta = doc.metadata?;
    if meta.namespace.as_deref() != Some(NODE_LEASE_NAMESPACE) {
        return Some((meta.identity(), None));
    }
    let node = filled(&meta.name)?;
    let renew = match doc.spec.as_ref().and_then(|s| s.renew_time.as_deref()) {
        None => None,
        Some(t) => Some(sane_time(t)?),
    };
    let observation = Observation::LeaseUpserted { node: node.to_string(), renew };
    Some((meta.identity(), Some(observation)))
}

#[cfg(test)]
mod tests {
    use nodewarden_model::Timestamp;
    use serde_json::{Value, json};

    use super::*;
    use crate::read::{self as convert, Detail};

    /// A pod as `nodewarden sim --serve` serves it.
    fn served_pod() -> Value {
        serde_json::from_str(include_str!("../../samples/pod.json")).expect("the sample is JSON")
    }

    fn lenient_pod(v: &Value) -> Option<PodSnapshot> {
        convert::pod_reading(v, Timestamp::EPOCH, Detail::Lifecycle)
    }

    #[test]
    fn a_served_pod_is_read_typed_as_it_is_read_leniently() {
        let mut v = served_pod();
        let (id, typed) = pod(&v.to_string()).expect("a served pod is well formed");
        assert_eq!(Some(&typed), lenient_pod(&v).as_ref());
        assert_eq!(id.name.as_deref(), v["metadata"]["name"].as_str());
        assert_eq!(id.resource_version.as_deref(), v["metadata"]["resourceVersion"].as_str());
        assert_eq!(typed.tolerations.len(), 2);
        // The shapes a live cluster sends beside it read typed too.
        v["metadata"]["ownerReferences"] = json!([{"kind": "DaemonSet", "name": "ds", "controller": true}]);
        v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        v["status"]["reason"] = json!("NodeLost");
        v["status"]["conditions"][2]["status"] = json!("False");
        v["spec"]["tolerations"][0] = json!({"key": "k", "operator": "Equal", "value": "v", "effect": ""});
        v["spec"]["nodeName"] = json!("");
        let (_, typed) = pod(&v.to_string()).expect("still well formed");
        assert!(typed.daemonset && typed.terminating && typed.node_lost && typed.ready == Some(false));
        assert_eq!(Some(typed), lenient_pod(&v));
    }

    /// Every shape the lenient reading logs or reads conservatively is
    /// left to it: the typed reading gives nothing (the kube adapter's
    /// tests show a watch's decode then gives the lenient reading).
    #[test]
    fn an_odd_pod_is_left_to_the_lenient_reading() {
        let odd: [fn(&mut Value); 13] = [
            |v| v["metadata"]["name"] = json!(""),
            |v| v["metadata"]["uid"] = json!(7),
            |v| v["metadata"]["ownerReferences"] = json!([{"name": "no kind"}]),
            |v| v["metadata"]["ownerReferences"] = json!([{"kind": "DaemonSet", "controller": "yes"}]),
            |v| v["metadata"]["ownerReferences"] = json!({"kind": "DaemonSet"}),
            |v| {
                v["metadata"]["ownerReferences"] =
                    json!([{"kind": "Job", "controller": true}, {"kind": "Job", "controller": true}])
            },
            |v| v["status"]["conditions"][2]["status"] = json!("Maybe"),
            |v| v["spec"]["tolerations"][0]["operator"] = json!("Lt"),
            |v| v["spec"]["tolerations"][0]["effect"] = json!("NoEvict"),
            |v| v["spec"]["tolerations"][0]["tolerationSeconds"] = json!(1.5),
            |v| v["spec"]["nodeName"] = json!(["node"]),
            |v| v["metadata"] = json!(null),
            |v| *v = json!([1]),
        ];
        for (i, change) in odd.iter().enumerate() {
            let mut v = served_pod();
            change(&mut v);
            let text = v.to_string();
            assert!(pod(&text).is_none(), "case {i}: {text}");
        }
    }

    #[test]
    fn a_lease_is_read_typed_unless_odd() {
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "n1", "namespace": "kube-node-lease", "uid": "u", "resourceVersion": "5"},
            "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40, "renewTime": "2026-11-26T06:00:37.123456Z"}});
        let lenient = |v: &Value| convert::lease_reading(v, Timestamp::EPOCH);
        let (id, typed) = super::lease(&lease.to_string()).expect("well formed");
        assert_eq!(typed, lenient(&lease));
        assert!(typed.is_some());
        assert_eq!(id.uid.as_deref(), Some("u"));
        let mut elsewhere = lease.clone();
        elsewhere["metadata"]["namespace"] = json!("default");
        assert_eq!(super::lease(&elsewhere.to_string()).map(|(_, o)| o), Some(None));
        let mut unrenewed = lease.clone();
        unrenewed["spec"] = json!(null);
        assert_eq!(super::lease(&unrenewed.to_string()).map(|(_, o)| o), Some(lenient(&unrenewed)));
        for bad in [json!("yesterday"), json!(5), json!("1970-01-01T00:00:00Z")] {
            let mut v = lease.clone();
            v["spec"]["renewTime"] = bad;
            assert!(super::lease(&v.to_string()).is_none(), "{v}");
        }
    }
}
