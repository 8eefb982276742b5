//! Objects as the writer reads them: any JSON object, kept whole.
//!
//! The watches read through [`crate::Trimmed`], which keeps only what the
//! engine looks at. The writer needs more of what an answer holds (a
//! node's taints exactly as the server has them, to guard a patch with;
//! its resourceVersion; whether a pod now has a `deletionTimestamp`), and
//! must read it as leniently: decoded with k8s-openapi's types, one field
//! they cannot hold (an unparsable timestamp, a field of a newer API of
//! an unexpected shape) turns an accepted write into a decoding error,
//! reported failed and sent again, and a node read before a taint patch
//! into a write that can never be made. [`Whole`] accepts any JSON; the
//! engine's reading of it is the watches' lenient one
//! ([`nodewarden_objects::node_reading`], [`nodewarden_objects::pod_reading`]).

use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// An object of kind `K` as an answer or a read returned it: its JSON,
/// whatever it holds, and the identifying metadata kube-rs asks for.
pub struct Whole<K> {
    /// Only `name`, `namespace`, `uid` and `resourceVersion`, when they
    /// are strings.
    pub metadata: ObjectMeta,
    /// The object as the server sent it.
    pub value: Value,
    kind: PhantomData<fn() -> K>,
}

impl<K> Whole<K> {
    /// Wraps one object's JSON. Never fails: a field of an odd shape is
    /// for the reading to judge, not the decoder.
    pub fn new(value: Value) -> Whole<K> {
        Whole { metadata: crate::trimmed::identity(&value), value, kind: PhantomData }
    }

    /// The value at `pointer` (a JSON pointer, `/spec/taints`), if any.
    pub fn at(&self, pointer: &str) -> Option<&Value> {
        self.value.pointer(pointer).filter(|v| !v.is_null())
    }
}

impl<K> Clone for Whole<K> {
    fn clone(&self) -> Self {
        Whole { metadata: self.metadata.clone(), value: self.value.clone(), kind: PhantomData }
    }
}

impl<K> fmt::Debug for Whole<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Whole").field("metadata", &self.metadata).finish_non_exhaustive()
    }
}

impl<'de, K> Deserialize<'de> for Whole<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(Whole::new)
    }
}

crate::kind_of!(Whole);

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Node;

    use super::*;

    #[test]
    fn a_node_typed_decoding_refuses_is_read_whole() {
        // A condition time k8s-openapi cannot parse, and a taint of a newer
        // API with a field it does not know.
        let text = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","resourceVersion":"7"},
            "spec":{"taints":[{"key":"k","effect":"NoSchedule","future":{"x":1}}]},
            "status":{"conditions":[{"type":"Ready","status":"True","lastHeartbeatTime":"yesterday"}]}}"#;
        assert!(serde_json::from_str::<Node>(text).is_err(), "the typed decoding refuses it");
        let n: Whole<Node> = serde_json::from_str(text).expect("any JSON object is read");
        assert_eq!(n.metadata.name.as_deref(), Some("n1"));
        assert_eq!(n.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(n.at("/spec/taints/0/future/x"), Some(&serde_json::json!(1)), "kept whole");
        assert_eq!(n.at("/metadata/deletionTimestamp"), None);
    }
}
