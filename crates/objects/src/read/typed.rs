//! The fast reading of well-formed Pods and Leases: decoded in one pass,
//! straight from a list page or watch event, into the few typed fields the
//! engine reads, with nothing built for the rest.
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
//! reading takes only the shapes whose lenient reading is plain (a field
//! of another JSON type declines the object; null is absent, as in the
//! lenient readings), and every
//! case in which the lenient reading would log or choose conservatively
//! (an empty name, an unreadable owner reference or two marked
//! controller, a Ready status other than True or False, a toleration it
//! could not read as written, an unparsable timestamp) declines too. A
//! declined object is handed back as the document pruned decoding gives
//! ([`Decoded::Pruned`], rebuilt from what the pass decoded,
//! [`super::shape`]), so the lenient reading sees what it always saw and
//! its log line names the object as it always did. The readings' tests
//! compare this reading with the lenient one, and the rebuilt document
//! with pruned decoding, for every pod and Lease they read.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodewarden_engine::{Observation, PodSnapshot};
use nodewarden_model::{Toleration, TolerationOperator};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::keep;
use super::prune::Keep;
use super::shape::{Arr, Leaf, Obj, Rest, Skipped, shape};
use super::{NODE_LEASE_NAMESPACE, effect};
use crate::time::sane_time;

/// One object as the single pass decoded it.
///
/// The typed variant is the common one and moves straight into the
/// watcher's object; boxing it would cost an allocation an object.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Decoded<T> {
    /// Read typed: the identity a watcher keeps of it (name, namespace,
    /// uid, resourceVersion) and its reading.
    Typed(ObjectMeta, T),
    /// Declined: the object as pruned decoding gives it (its kind's tree
    /// in [`keep`]), for the lenient reading.
    Pruned(Value),
}

shape! {
    /// A Pod, as far as node lifecycle reads it ([`keep::POD`]).
    struct PodDoc<'de>: keep::POD, others: Skipped {
        "metadata" => metadata: Obj<PodMeta<'de>>,
        "spec" => spec: Obj<PodSpec<'de>>,
        "status" => status: Obj<PodStatus<'de>>,
    }
}

shape! {
    struct PodMeta<'de>: keep::POD_METADATA, others: Skipped {
        "name" => name: Leaf<'de>,
        "namespace" => namespace: Leaf<'de>,
        "uid" => uid: Leaf<'de>,
        "resourceVersion" => resource_version: Leaf<'de>,
        "ownerReferences" => owner_references: Arr<Owner<'de>>,
        "deletionTimestamp" => deletion_timestamp: Leaf<'de>,
    }
}

shape! {
    struct Owner<'de>: keep::OWNER, others: Skipped {
        "kind" => kind: Leaf<'de>,
        "controller" => controller: Leaf<'de>,
    }
}

shape! {
    struct PodSpec<'de>: keep::POD_SPEC, others: Skipped {
        "nodeName" => node_name: Leaf<'de>,
        "tolerations" => tolerations: Arr<TolerationDoc<'de>>,
    }
}

shape! {
    /// Kept whole: the lenient reading may quote it.
    struct TolerationDoc<'de>: Keep::All, others: Rest {
        "key" => key: Leaf<'de>,
        "operator" => operator: Leaf<'de>,
        "value" => value: Leaf<'de>,
        "effect" => effect: Leaf<'de>,
        "tolerationSeconds" => toleration_seconds: Leaf<'de>,
    }
}

shape! {
    struct PodStatus<'de>: keep::POD_STATUS, others: Skipped {
        "conditions" => conditions: Arr<Condition<'de>>,
        "reason" => reason: Leaf<'de>,
    }
}

shape! {
    struct Condition<'de>: keep::CONDITION, others: Skipped {
        "type" => kind: Leaf<'de>,
        "status" => status: Leaf<'de>,
    }
}

shape! {
    /// A Lease, as far as node lifecycle reads it ([`keep::LEASE`]).
    struct LeaseDoc<'de>: keep::LEASE, others: Skipped {
        "metadata" => metadata: Obj<LeaseMeta<'de>>,
        "spec" => spec: Obj<LeaseSpec<'de>>,
    }
}

shape! {
    struct LeaseMeta<'de>: keep::LEASE_METADATA, others: Skipped {
        "name" => name: Leaf<'de>,
        "namespace" => namespace: Leaf<'de>,
        "uid" => uid: Leaf<'de>,
        "resourceVersion" => resource_version: Leaf<'de>,
    }
}

shape! {
    struct LeaseSpec<'de>: keep::LEASE_SPEC, others: Skipped {
        "renewTime" => renew_time: Leaf<'de>,
    }
}

/// Why a typed reading declined: the lenient reading takes over.
struct Declined;

type Typed<T> = Result<T, Declined>;

// The lenient readings take a null field as an absent one, everywhere;
// so do these.

/// A string field: `None` when absent or null; declined in any other
/// shape.
fn text<'a>(f: &'a Option<Leaf<'_>>) -> Typed<Option<&'a str>> {
    match f {
        None | Some(Leaf::Odd(Value::Null)) => Ok(None),
        Some(Leaf::Str(s)) => Ok(Some(s)),
        Some(_) => Err(Declined),
    }
}

/// A string field that must be there and not empty.
fn filled<'a>(f: &'a Option<Leaf<'_>>) -> Typed<&'a str> {
    text(f)?.filter(|s| !s.is_empty()).ok_or(Declined)
}

/// The object's fields, declined when it is not an object.
fn plain<T>(o: &Obj<T>) -> Typed<&T> {
    match o {
        Obj::Plain(t) => Ok(t),
        Obj::Odd(_) => Err(Declined),
    }
}

/// An optional object: `None` when absent or null.
fn part<T>(o: &Option<Obj<T>>) -> Typed<Option<&T>> {
    match o {
        None | Some(Obj::Odd(Value::Null)) => Ok(None),
        Some(o) => plain(o).map(Some),
    }
}

/// An optional array of objects: empty when absent or null.
fn items<T>(a: &Option<Arr<T>>) -> Typed<&[Obj<T>]> {
    match a {
        None | Some(Arr::Odd(Value::Null)) => Ok(&[]),
        Some(Arr::Plain(items)) => Ok(items),
        Some(Arr::Odd(_)) => Err(Declined),
    }
}

/// What the watcher keeps of the object's metadata ([`crate::Trimmed`]):
/// name, namespace, uid and resourceVersion, each a string or absent.
fn identity(
    name: &Option<Leaf<'_>>,
    namespace: &Option<Leaf<'_>>,
    uid: &Option<Leaf<'_>>,
    version: &Option<Leaf<'_>>,
) -> Typed<ObjectMeta> {
    let own = |f| Ok::<_, Declined>(text(f)?.map(str::to_string));
    Ok(ObjectMeta {
        name: own(name)?,
        namespace: own(namespace)?,
        uid: own(uid)?,
        resource_version: own(version)?,
        ..ObjectMeta::default()
    })
}

/// Decodes one Pod from `d` in a single pass: read for node lifecycle
/// when it is a well-formed pod whose lenient reading is plain, else
/// pruned for the lenient reading. Fails only on malformed JSON.
pub fn decode_pod<'de, D: Deserializer<'de>>(d: D) -> Result<Decoded<PodSnapshot>, D::Error> {
    let doc = Obj::<PodDoc<'de>>::deserialize(d)?;
    Ok(match plain(&doc).and_then(read_pod) {
        Ok((id, pod)) => Decoded::Typed(id, pod),
        Err(Declined) => Decoded::Pruned(doc.into_value()),
    })
}

/// Decodes one Lease from `d` in a single pass, as [`decode_pod`] does: a
/// Lease outside `kube-node-lease` reads as no observation, as leniently.
pub fn decode_lease<'de, D: Deserializer<'de>>(d: D) -> Result<Decoded<Option<Observation>>, D::Error> {
    let doc = Obj::<LeaseDoc<'de>>::deserialize(d)?;
    Ok(match plain(&doc).and_then(read_lease) {
        Ok((id, lease)) => Decoded::Typed(id, lease),
        Err(Declined) => Decoded::Pruned(doc.into_value()),
    })
}

/// A Pod's JSON read typed, or `None` when the lenient reading should read
/// it (or it is not JSON).
pub fn pod(json: &str) -> Option<(ObjectMeta, PodSnapshot)> {
    match whole(json, |d| decode_pod(d))? {
        Decoded::Typed(id, pod) => Some((id, pod)),
        Decoded::Pruned(_) => None,
    }
}

/// A Lease's JSON read typed, or `None` as for [`pod`].
pub fn lease(json: &str) -> Option<(ObjectMeta, Option<Observation>)> {
    match whole(json, |d| decode_lease(d))? {
        Decoded::Typed(id, lease) => Some((id, lease)),
        Decoded::Pruned(_) => None,
    }
}

/// `decode` over the whole of `json` (nothing may follow the object).
fn whole<'a, T>(
    json: &'a str,
    decode: impl FnOnce(&mut serde_json::Deserializer<serde_json::de::StrRead<'a>>) -> serde_json::Result<T>,
) -> Option<T> {
    let mut d = serde_json::Deserializer::from_str(json);
    let out = decode(&mut d).ok()?;
    d.end().ok()?;
    Some(out)
}

fn read_pod(doc: &PodDoc<'_>) -> Typed<(ObjectMeta, PodSnapshot)> {
    let meta = part(&doc.metadata)?.ok_or(Declined)?;
    let (name, ns, uid) = (filled(&meta.name)?, filled(&meta.namespace)?, filled(&meta.uid)?);
    let (mut daemonset, mut controllers) = (false, 0);
    for owner in items(&meta.owner_references)? {
        let owner = plain(owner)?;
        let kind = text(&owner.kind)?.ok_or(Declined)?;
        let controller = match &owner.controller {
            None | Some(Leaf::Odd(Value::Null)) => false,
            Some(Leaf::Bool(b)) => *b,
            Some(_) => return Err(Declined),
        };
        controllers += usize::from(controller);
        daemonset |= kind == "DaemonSet" && controller;
    }
    if controllers > 1 {
        return Err(Declined);
    }
    let status = part(&doc.status)?;
    let ready = ready(status.map(|s| items(&s.conditions)).transpose()?.unwrap_or_default())?;
    let reason = status.map(|s| text(&s.reason)).transpose()?.flatten();
    let (node, tolerations) = match part(&doc.spec)? {
        Some(spec) => (
            text(&spec.node_name)?.filter(|n| !n.is_empty()).map(str::to_string),
            items(&spec.tolerations)?.iter().map(|t| toleration(plain(t)?)).collect::<Typed<Vec<_>>>()?,
        ),
        None => (None, Vec::new()),
    };
    let id = identity(&meta.name, &meta.namespace, &meta.uid, &meta.resource_version)?;
    let version = text(&meta.resource_version)?.and_then(|s| s.parse().ok()).unwrap_or(0);
    let snapshot = PodSnapshot {
        key: format!("{ns}/{name}"),
        uid: uid.to_string(),
        version,
        node,
        daemonset,
        ready,
        // Any value but null is a deletion under way.
        terminating: !matches!(meta.deletion_timestamp, None | Some(Leaf::Odd(Value::Null))),
        node_lost: reason == Some(nodewarden_model::keys::POD_REASON_NODE_LOST),
        tolerations,
        scheduling: None,
    };
    Ok((id, snapshot))
}

/// The Ready condition's status: `None` without one; declined unless True
/// or False (or when a condition is not an object with a string type).
fn ready(conditions: &[Obj<Condition<'_>>]) -> Typed<Option<bool>> {
    for c in conditions {
        let c = plain(c)?;
        if text(&c.kind)? == Some("Ready") {
            return match text(&c.status)? {
                Some("True") => Ok(Some(true)),
                Some("False") => Ok(Some(false)),
                _ => Err(Declined),
            };
        }
    }
    Ok(None)
}

/// One toleration as written; declined when the lenient reading would log
/// it (an unknown operator or effect, a field of the wrong type).
fn toleration(t: &TolerationDoc<'_>) -> Typed<Toleration> {
    let operator = match text(&t.operator)? {
        None | Some("" | "Equal") => TolerationOperator::Equal,
        Some("Exists") => TolerationOperator::Exists,
        Some(_) => return Err(Declined),
    };
    let effect = match text(&t.effect)? {
        None | Some("") => None,
        Some(e) => Some(effect(e).ok_or(Declined)?),
    };
    let seconds = match &t.toleration_seconds {
        None | Some(Leaf::Odd(Value::Null)) => None,
        Some(Leaf::Int(n)) => Some(*n),
        Some(_) => return Err(Declined),
    };
    Ok(Toleration {
        key: text(&t.key)?.unwrap_or_default().to_string(),
        operator,
        value: text(&t.value)?.unwrap_or_default().to_string(),
        effect,
        seconds,
    })
}

fn read_lease(doc: &LeaseDoc<'_>) -> Typed<(ObjectMeta, Option<Observation>)> {
    let meta = part(&doc.metadata)?.ok_or(Declined)?;
    let id = identity(&meta.name, &meta.namespace, &meta.uid, &meta.resource_version)?;
    if text(&meta.namespace)? != Some(NODE_LEASE_NAMESPACE) {
        return Ok((id, None));
    }
    let node = filled(&meta.name)?;
    let renew = match part(&doc.spec)?.map(|s| text(&s.renew_time)).transpose()?.flatten() {
        None => None,
        Some(t) => Some(sane_time(t).ok_or(Declined)?),
    };
    Ok((id, Some(Observation::LeaseUpserted { node: node.to_string(), renew })))
}

/// The pruned documents the single pass rebuilds from what it decoded,
/// for the tests that compare them with pruned decoding.
#[cfg(test)]
pub(super) fn rebuilt_pod(json: &str) -> Value {
    Obj::<PodDoc<'_>>::deserialize(&mut serde_json::Deserializer::from_str(json)).expect("JSON").into_value()
}

#[cfg(test)]
pub(super) fn rebuilt_lease(json: &str) -> Value {
    Obj::<LeaseDoc<'_>>::deserialize(&mut serde_json::Deserializer::from_str(json)).expect("JSON").into_value()
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

    /// Texts no `Value` can stand for: duplicate keys (the last wins),
    /// escaped keys, and odd shapes in every kept place.
    const ODD_TEXTS: [&str; 9] = [
        r#"{"metadata": {"name": "a", "name": "b", "namespace": "ns", "uid": "u"}, "spec": {"nodeName": "n1", "nodeName": 5}}"#,
        r#"{"metadata": {"na\u006de": "p", "namespace": "ns", "uid": "u"}, "st\u0061tus": {"reason": "NodeLost"}}"#,
        r#"{"metadata": {"name": "p", "namespace": "ns", "uid": "u", "ownerReferences": [7, [1, {"kind": "x"}], {"kind": "DaemonSet", "controller": null, "name": "d"}]}}"#,
        r#"{"metadata": {"name": "p", "namespace": "ns", "uid": "u", "deletionTimestamp": {"when": [1.5]}}, "spec": {"tolerations": [{"key": "k", "extra": {"a": 1}, "extra": 2, "tolerationSeconds": 18446744073709551615}, "t", null]}}"#,
        r#"{"metadata": null, "spec": [1, 2], "status": "Running"}"#,
        r#"{"status": {"conditions": {"type": "Ready"}, "reason": ["x"], "phase": "Running"}, "kind": "Pod"}"#,
        r#"{"status": {"conditions": [{"type": "Ready", "status": "True", "status": "False", "lastProbeTime": null}, {"type": 3}]}}"#,
        r#"[{"metadata": {"name": "p"}}, 2]"#,
        r#""a pod""#,
    ];

    /// A declined object reaches the lenient reading exactly as pruned
    /// decoding gives it, and is read as the lenient reading reads that.
    #[test]
    fn a_declined_pod_is_handed_on_as_pruned_decoding_gives_it() {
        let mut texts: Vec<String> = ODD_TEXTS.iter().map(|t| t.to_string()).collect();
        texts.push(served_pod().to_string());
        for text in &texts {
            let pruned = crate::read::prune::from_str(text, &keep::POD).expect("JSON");
            assert_eq!(rebuilt_pod(text), pruned, "{text}");
            let decoded = decode_pod(&mut serde_json::Deserializer::from_str(text)).expect("JSON");
            match decoded {
                Decoded::Pruned(v) => assert_eq!(v, pruned, "{text}"),
                Decoded::Typed(_, pod) => assert_eq!(Some(pod), lenient_pod(&pruned), "{text}"),
            }
            let lease_pruned = crate::read::prune::from_str(text, &keep::LEASE).expect("JSON");
            assert_eq!(rebuilt_lease(text), lease_pruned, "{text}");
        }
        // Malformed JSON is still an error, skipped fields included.
        for bad in [r#"{"metadata": "#, r#"{"kind": [1, }"#, r#"{"spec": {"nodeName": "n" "x": 1}}"#] {
            assert!(decode_pod(&mut serde_json::Deserializer::from_str(bad)).is_err(), "{bad}");
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
