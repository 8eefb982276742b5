//! The types the watches decode: each object reduced, as it is decoded, to
//! the observation the engine needs and the few metadata fields the
//! watcher itself reads (name, namespace, uid, resourceVersion).
//!
//! Watching k8s-openapi's own types would decode every field of every
//! object, so one object with a field those types cannot hold (an
//! unparsable timestamp, a string where a list belongs) would fail its
//! whole list page and keep the cache from ever syncing; and the watcher
//! would hand over whole objects, status and managed fields included.
//! [`Trimmed`] decodes any JSON object, only the fields its reading looks
//! at ([`Readable::KEEP`], [`nodewarden_objects::keep`]): `nodewarden_objects`'s lenient readings reads it
//! leniently (logging what it finds odd), and nothing else is kept. Pods
//! and Leases, nearly every object of a large cluster, are read through
//! typed fields as they are decoded ([`nodewarden_objects::typed`]),
//! which cost a fraction of the pruned `Value`; only an object that
//! reading declines is read leniently, from the pruned document the same
//! pass rebuilt.

use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodewarden_engine::Observation;
use nodewarden_model::Timestamp;
use serde::de::DeserializeSeed;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use nodewarden_objects::{self as objects, Detail, Keep, Pruned, keep, typed};

/// A kind whose objects the watches read: how its JSON becomes an
/// observation.
pub trait Readable: k8s_openapi::Resource {
    /// The fields [`Readable::read`] looks at: all a watch decodes
    /// ([`nodewarden_objects::keep`]).
    const KEEP: &'static Keep;
    /// The observation an object of this kind gives, seen at `seen_at`;
    /// `None` for an object the engine ignores.
    fn read(v: &Value, seen_at: Timestamp) -> Option<Observation>;
    /// Decodes one object from `d`, seen at `seen_at()` (asked only when
    /// a reading needs it): pruned to [`Readable::KEEP`] and read
    /// leniently, unless the kind has a typed reading
    /// ([`nodewarden_objects::typed`]), which reads a well-formed object
    /// in the same pass.
    fn decode<'de, D: Deserializer<'de>>(d: D, seen_at: impl FnOnce() -> Timestamp) -> Result<Trimmed<Self>, D::Error>
    where
        Self: Sized,
    {
        let v = Pruned(Self::KEEP).deserialize(d)?;
        Ok(Trimmed::from_json(&v, seen_at()))
    }
}

impl<K: Readable> Trimmed<K> {
    /// An object the single pass read typed, or else read leniently.
    fn from_decoded<T>(
        decoded: typed::Decoded<T>,
        seen_at: impl FnOnce() -> Timestamp,
        reading: impl FnOnce(T) -> Option<Observation>,
    ) -> Trimmed<K> {
        match decoded {
            typed::Decoded::Typed(metadata, t) => Trimmed { metadata, reading: reading(t), kind: PhantomData },
            typed::Decoded::Pruned(v) => Trimmed::from_json(&v, seen_at()),
        }
    }
}

impl Readable for Node {
    const KEEP: &'static Keep = &keep::NODE;
    fn read(v: &Value, seen_at: Timestamp) -> Option<Observation> {
        objects::node_reading(v, seen_at, Detail::Lifecycle).map(Observation::NodeUpserted)
    }
}

impl Readable for Pod {
    const KEEP: &'static Keep = &keep::POD;
    fn read(v: &Value, seen_at: Timestamp) -> Option<Observation> {
        objects::pod_reading(v, seen_at, Detail::Lifecycle).map(Observation::PodUpserted)
    }
    fn decode<'de, D: Deserializer<'de>>(d: D, seen_at: impl FnOnce() -> Timestamp) -> Result<Trimmed<Pod>, D::Error> {
        Ok(Trimmed::from_decoded(typed::decode_pod(d)?, seen_at, |pod| Some(Observation::PodUpserted(pod))))
    }
}

impl Readable for PodDisruptionBudget {
    const KEEP: &'static Keep = &keep::BUDGET;
    fn read(v: &Value, seen_at: Timestamp) -> Option<Observation> {
        objects::budget_reading(v, seen_at)
    }
}

/// The kind `K` (Node or Pod) read with what the critical-addon
/// rescheduler needs as well ([`Detail::Scheduling`]).
///
/// A type rather than a flag because a watch decodes objects through
/// `Deserialize`, which takes no argument: `Trimmed<Pod>` reads what node
/// lifecycle needs and keeps nothing more, `Trimmed<Scheduled<Pod>>` reads
/// requests, placement and the rest, and the watch is started with one or
/// the other.
pub struct Scheduled<K>(PhantomData<fn() -> K>);

impl<K: k8s_openapi::Resource> k8s_openapi::Resource for Scheduled<K> {
    const API_VERSION: &'static str = K::API_VERSION;
    const GROUP: &'static str = K::GROUP;
    const KIND: &'static str = K::KIND;
    const VERSION: &'static str = K::VERSION;
    const URL_PATH_SEGMENT: &'static str = K::URL_PATH_SEGMENT;
    type Scope = K::Scope;
}

impl Readable for Scheduled<Node> {
    const KEEP: &'static Keep = &keep::SCHEDULED_NODE;
    fn read(v: &Value, seen_at: Timestamp) -> Option<Observation> {
        objects::node_reading(v, seen_at, Detail::Scheduling).map(Observation::NodeUpserted)
    }
}

impl Readable for Scheduled<Pod> {
    const KEEP: &'static Keep = &keep::SCHEDULED_POD;
    fn read(v: &Value, seen_at: Timestamp) -> Option<Observation> {
        objects::pod_reading(v, seen_at, Detail::Scheduling).map(Observation::PodUpserted)
    }
}

impl Readable for Lease {
    const KEEP: &'static Keep = &keep::LEASE;
    fn read(v: &Value, seen_at: Timestamp) -> Option<Observation> {
        objects::lease_reading(v, seen_at)
    }
    fn decode<'de, D: Deserializer<'de>>(
        d: D,
        seen_at: impl FnOnce() -> Timestamp,
    ) -> Result<Trimmed<Lease>, D::Error> {
        Ok(Trimmed::from_decoded(typed::decode_lease(d)?, seen_at, |lease| lease))
    }
}

/// An object of kind `K` as the watches keep it: its identifying metadata
/// and what the engine reads of it (`None`: ignored, and logged why).
pub struct Trimmed<K> {
    /// Only `name`, `namespace`, `uid` and `resourceVersion` are kept.
    pub metadata: ObjectMeta,
    /// The engine's reading of the object, decoded when it arrived.
    pub reading: Option<Observation>,
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Trimmed<K> {
    fn clone(&self) -> Self {
        Trimmed { metadata: self.metadata.clone(), reading: self.reading.clone(), kind: PhantomData }
    }
}

impl<K> fmt::Debug for Trimmed<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trimmed").field("metadata", &self.metadata).field("reading", &self.reading).finish()
    }
}

/// The metadata kube-rs reads of an object (name, namespace, uid,
/// resourceVersion), from its JSON: each field only when it is a string.
pub(crate) fn identity(v: &Value) -> ObjectMeta {
    let text = |f: &str| v.get("metadata").and_then(|m| m.get(f)).and_then(Value::as_str).map(str::to_string);
    ObjectMeta {
        name: text("name"),
        namespace: text("namespace"),
        uid: text("uid"),
        resource_version: text("resourceVersion"),
        ..ObjectMeta::default()
    }
}

impl<K: Readable> Trimmed<K> {
    /// Reads one object's JSON, seen at `seen_at`. Never fails: an object
    /// that cannot be read at all has no reading.
    pub fn from_json(v: &Value, seen_at: Timestamp) -> Trimmed<K> {
        let metadata = identity(v);
        let reading = if v.is_object() {
            K::read(v, seen_at)
        } else {
            tracing::warn!(kind = K::KIND, "ignoring an object that is not a JSON object");
            None
        };
        Trimmed { metadata, reading, kind: PhantomData }
    }

    /// Reads one object's text, seen at `seen_at`, as a watch decodes it.
    /// Never fails on valid JSON; `Err` names what is not.
    pub fn from_text(json: &str, seen_at: Timestamp) -> serde_json::Result<Trimmed<K>> {
        let mut d = serde_json::Deserializer::from_str(json);
        let t = K::decode(&mut d, || seen_at)?;
        d.end()?;
        Ok(t)
    }
}

impl<'de, K: Readable> Deserialize<'de> for Trimmed<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        K::decode(d, objects::wall_clock_now)
    }
}

crate::kind_of!(Trimmed);

#[cfg(test)]
mod tests;
