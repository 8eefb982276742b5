//! Decoding only the fields a reading looks at.
//!
//! A watch event carries the whole object: a served pod is about 2.3 KB of
//! JSON, a real one with `managedFields` and container statuses several
//! times that, and the engine reads a dozen fields of it. Building a full
//! `serde_json::Value` (a map node and a string for every field) only to
//! drop it was most of `run`'s decoding time and allocation at a million
//! pods. A [`Keep`] tree names, per kind, the fields [`super`]
//! reads; [`Pruned`] decodes a document into a `Value` holding only those,
//! skipping the rest as it parses (nothing is allocated for a skipped
//! field).
//!
//! Pruning never changes a reading: where a kept field has a shape the
//! tree does not expect (a string where an object belongs), it is kept
//! whole, so the lenient readings see exactly what they saw before. The
//! readings' tests check every reading they make against the reading of
//! the pruned document.

use std::borrow::Cow;
use std::fmt;

use serde::Deserializer;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Which fields of a JSON document to keep.
#[derive(Debug)]
pub enum Keep {
    /// This value whole.
    All,
    /// Of an object, only these keys, each pruned by its own tree; any
    /// other value (an array's elements, a scalar) is kept whole.
    Only(&'static [(&'static str, Keep)]),
    /// Of an object, only these keys, each whole; any other value is kept
    /// whole.
    Fields(&'static [&'static str]),
    /// Of an object, every key but these; any other value is kept whole.
    AllBut(&'static [&'static str]),
    /// Of an array, every element pruned by this tree; any other value is
    /// kept whole.
    Each(&'static Keep),
}

impl Keep {
    fn child(&self, key: &str) -> Option<&Keep> {
        match self {
            Keep::All => Some(&Keep::All),
            Keep::Only(fields) => fields.iter().find(|(k, _)| *k == key).map(|(_, keep)| keep),
            Keep::Fields(names) => names.contains(&key).then_some(&Keep::All),
            Keep::AllBut(dropped) => (!dropped.contains(&key)).then_some(&Keep::All),
            // An object where an array belongs: kept whole.
            Keep::Each(_) => Some(&Keep::All),
        }
    }

    /// `v` pruned as decoding it would prune it (for tests and for values
    /// already decoded).
    pub fn prune(&self, v: &Value) -> Value {
        match (self, v) {
            (Keep::All, _) | (_, Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_)) => v.clone(),
            (Keep::Each(each), Value::Array(items)) => Value::Array(items.iter().map(|v| each.prune(v)).collect()),
            (_, Value::Array(items)) => Value::Array(items.clone()),
            (_, Value::Object(m)) => Value::Object(
                m.iter().filter_map(|(k, v)| self.child(k).map(|keep| (k.clone(), keep.prune(v)))).collect(),
            ),
        }
    }
}

/// Decodes one JSON value keeping what a [`Keep`] tree names.
#[derive(Clone, Copy)]
pub struct Pruned<'k>(pub &'k Keep);

impl<'de> DeserializeSeed<'de> for Pruned<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        match self.0 {
            Keep::All => serde::Deserialize::deserialize(d),
            keep => d.deserialize_any(PrunedVisitor(keep)),
        }
    }
}

pub(super) struct PrunedVisitor<'k>(pub(super) &'k Keep);

impl<'de> Visitor<'de> for PrunedVisitor<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        // Keys are borrowed from the input while they are matched: only a
        // kept one is allocated.
        while let Some(key) = map.next_key_seed(Key)? {
            match self.0.child(&key) {
                Some(keep) => {
                    let v = map.next_value_seed(Pruned(keep))?;
                    out.insert(key.into_owned(), v);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(out))
    }

    // Anything but an object is kept whole, so a reading sees an odd
    // shape exactly as it was sent; but an array's elements are pruned
    // when the tree says how ([`Keep::Each`]).
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let each = match self.0 {
            Keep::Each(each) => each,
            _ => &Keep::All,
        };
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(Pruned(each))? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_string()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Pruned(self.0).deserialize(d)
    }
}

/// A map key, borrowed from the input where it can be (serde_json borrows
/// a key without escapes from a slice or a string).
pub(super) struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(s))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(s.to_string()))
    }

    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(s))
    }
}

/// Decodes `text` pruned by `keep` (the tests' pruned document).
#[cfg(test)]
pub fn from_str(text: &str, keep: &Keep) -> serde_json::Result<Value> {
    let mut d = serde_json::Deserializer::from_str(text);
    let v = Pruned(keep).deserialize(&mut d)?;
    d.end()?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const TREE: Keep = Keep::Only(&[
        ("metadata", Keep::AllBut(&["managedFields"])),
        ("spec", Keep::Fields(&["nodeName", "tolerations"])),
        ("status", Keep::Only(&[("conditions", Keep::Each(&Keep::Fields(&["type", "status"])))])),
    ]);

    #[test]
    fn only_the_named_fields_are_kept() {
        let doc = json!({"kind": "Pod", "metadata": {"name": "p", "managedFields": [{"manager": "x"}]},
                         "spec": {"nodeName": "n", "containers": [{"name": "c"}], "tolerations": [{"key": "k"}]},
                         "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": null}]}});
        let want = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n", "tolerations": [{"key": "k"}]},
                          "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(from_str(&doc.to_string(), &TREE).unwrap(), want);
        assert_eq!(TREE.prune(&doc), want);
    }

    #[test]
    fn an_odd_shape_is_kept_whole() {
        for doc in [
            json!({"metadata": "p", "spec": [1, {"nodeName": 2}]}),
            json!({"metadata": null, "spec": 3.5}),
            json!([{"metadata": {}}]),
            json!("text"),
            json!({"spec": {"nodeName": {"deep": [true, null, -1, 18446744073709551615u64]}}}),
            json!({"status": {"conditions": [1, "two", null, [{"type": "Ready", "x": 1}], {"type": "Ready", "x": 1}]}}),
            json!({"status": {"conditions": {"type": "Ready", "x": [1]}}}),
            json!({"status": {"conditions": "Ready", "phase": 1}}),
        ] {
            assert_eq!(from_str(&doc.to_string(), &TREE).unwrap(), TREE.prune(&doc), "{doc}");
        }
        assert_eq!(from_str("[1, 2]", &TREE).unwrap(), json!([1, 2]));
    }

    #[test]
    fn an_escaped_key_is_matched_by_what_it_spells() {
        let text = r#"{"metadata": {"na\u006de": "p", "\"uid\"": "u"}, "st\u0061tus": {"phase": 1}}"#;
        assert_eq!(from_str(text, &TREE).unwrap(), json!({"metadata": {"name": "p", "\"uid\"": "u"}, "status": {}}));
    }

    #[test]
    fn malformed_json_is_still_an_error() {
        assert!(from_str("{\"metadata\": ", &TREE).is_err());
        assert!(from_str("{\"kind\": [1, }", &TREE).is_err(), "a skipped field must still parse");
        assert!(from_str("{} trailing", &TREE).is_err());
    }
}
