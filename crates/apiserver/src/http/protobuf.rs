//! The one protobuf body kubectl sends to the resources served here:
//! `kubectl create namespace` posts a Namespace in the Kubernetes protobuf
//! envelope (its typed client speaks protobuf first and, in 1.32, does not
//! fall back to JSON on 415). Every other kind kubectl writes arrives as
//! JSON; a protobuf body for one of them is answered 415.
//!
//! The envelope is the magic `k8s\0` and a `runtime.Unknown` message whose
//! `raw` field holds the object. Only the fields a created namespace can
//! carry are read (name, generateName, labels, annotations, finalizers);
//! the result is the JSON object the create path already validates.
//!
//! Invariant: a body is either read into the same JSON a client would have
//! sent, or refused (400); nothing else is taken from it.

use serde_json::{Map, Value, json};

use crate::error::ApiError;

/// The Kubernetes protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

const MAGIC: &[u8] = b"k8s\0";

fn bad(what: &str) -> ApiError {
    ApiError::BadRequest(format!("the protobuf body could not be read: {what}"))
}

/// A protobuf field: its number and, for what is read here, its bytes
/// (length-delimited) or nothing (varints and fixed-width values, skipped).
struct Field<'a> {
    number: u64,
    bytes: Option<&'a [u8]>,
}

/// Reads a base-128 varint at the start of `buf`.
fn varint(buf: &mut &[u8]) -> Result<u64, ApiError> {
    let mut value: u64 = 0;
    for shift in (0..64).step_by(7) {
        let Some((&b, rest)) = buf.split_first() else { return Err(bad("truncated varint")) };
        *buf = rest;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(bad("varint longer than 10 bytes"))
}

/// The fields of one message, in order.
fn fields(mut buf: &[u8]) -> Result<Vec<Field<'_>>, ApiError> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        let number = key >> 3;
        let bytes = match key & 7 {
            0 => {
                varint(&mut buf)?;
                None
            }
            1 | 5 => {
                let width = if key & 7 == 1 { 8 } else { 4 };
                buf = buf.get(width..).ok_or_else(|| bad("truncated fixed-width field"))?;
                None
            }
            2 => {
                let len = usize::try_from(varint(&mut buf)?).map_err(|_| bad("length out of range"))?;
                let (b, rest) = (buf.get(..len), buf.get(len..));
                let (Some(b), Some(rest)) = (b, rest) else { return Err(bad("truncated length-delimited field")) };
                buf = rest;
                Some(b)
            }
            other => return Err(bad(&format!("unsupported wire type {other}"))),
        };
        out.push(Field { number, bytes });
    }
    Ok(out)
}

fn string(b: &[u8]) -> Result<String, ApiError> {
    String::from_utf8(b.to_vec()).map_err(|_| bad("a string field is not UTF-8"))
}

/// A `map<string, string>` entry (key 1, value 2).
fn entry(b: &[u8]) -> Result<(String, String), ApiError> {
    let (mut k, mut v) = (String::new(), String::new());
    for f in fields(b)? {
        match (f.number, f.bytes) {
            (1, Some(b)) => k = string(b)?,
            (2, Some(b)) => v = string(b)?,
            _ => {}
        }
    }
    Ok((k, v))
}

/// Decodes a protobuf-encoded Namespace into its JSON form.
pub fn namespace(body: &[u8]) -> Result<Value, ApiError> {
    let unknown = body.strip_prefix(MAGIC).ok_or_else(|| bad("it does not start with the k8s envelope"))?;
    let (mut kind, mut raw) = (String::new(), None);
    for f in fields(unknown)? {
        match (f.number, f.bytes) {
            (1, Some(type_meta)) => {
                for t in fields(type_meta)? {
                    if let (2, Some(b)) = (t.number, t.bytes) {
                        kind = string(b)?;
                    }
                }
            }
            (2, Some(b)) => raw = Some(b),
            _ => {}
        }
    }
    if kind != "Namespace" {
        return Err(ApiError::UnsupportedMediaType(format!(
            "only a Namespace may be sent as {MEDIA_TYPE} to nodewarden sim --serve, not {kind:?}; send JSON"
        )));
    }
    let raw = raw.ok_or_else(|| bad("the envelope has no object"))?;
    let (mut meta, mut finalizers) = (Map::new(), Vec::new());
    for f in fields(raw)? {
        match (f.number, f.bytes) {
            (1, Some(m)) => {
                let (mut labels, mut annotations) = (Map::new(), Map::new());
                for mf in fields(m)? {
                    match (mf.number, mf.bytes) {
                        (1, Some(b)) => _ = meta.insert("name".into(), json!(string(b)?)),
                        (2, Some(b)) => _ = meta.insert("generateName".into(), json!(string(b)?)),
                        (11, Some(b)) => {
                            let (k, v) = entry(b)?;
                            labels.insert(k, json!(v));
                        }
                        (12, Some(b)) => {
                            let (k, v) = entry(b)?;
                            annotations.insert(k, json!(v));
                        }
                        _ => {}
                    }
                }
                if !labels.is_empty() {
                    meta.insert("labels".into(), Value::Object(labels));
                }
                if !annotations.is_empty() {
                    meta.insert("annotations".into(), Value::Object(annotations));
                }
            }
            (2, Some(spec)) => {
                for sf in fields(spec)? {
                    if let (1, Some(b)) = (sf.number, sf.bytes) {
                        finalizers.push(json!(string(b)?));
                    }
                }
            }
            _ => {}
        }
    }
    let mut ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": meta});
    if !finalizers.is_empty() {
        ns["spec"] = json!({ "finalizers": finalizers });
    }
    Ok(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(number: u64, b: &[u8]) -> Vec<u8> {
        let mut out = vec![u8::try_from(number << 3 | 2).unwrap_or(0)];
        out.push(u8::try_from(b.len()).unwrap_or(0));
        out.extend_from_slice(b);
        out
    }

    /// What kubectl 1.32 sends for `kubectl create namespace team-a`, built
    /// field by field (plus a label, to read maps).
    fn envelope(kind: &str) -> Vec<u8> {
        let type_meta = [ld(1, b"v1"), ld(2, kind.as_bytes())].concat();
        let label = [ld(1, b"team"), ld(2, b"a")].concat();
        let meta = [ld(1, b"team-a"), ld(11, &label)].concat();
        let raw = [ld(1, &meta), ld(2, &[]), ld(3, &[])].concat();
        let unknown = [ld(1, &type_meta), ld(2, &raw), ld(3, b""), ld(4, b"")].concat();
        [MAGIC.to_vec(), unknown].concat()
    }

    #[test]
    fn a_namespace_is_read() {
        let v = namespace(&envelope("Namespace")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}})
        );
    }

    #[test]
    fn other_kinds_and_garbage_are_refused_without_panic() {
        assert!(matches!(namespace(&envelope("Pod")), Err(ApiError::UnsupportedMediaType(_))));
        for garbage in [&b""[..], b"k8s", b"k8s\0\x0a\xff", b"k8s\0\x0a\x05ab", b"\x00\x01\x02", b"k8s\0\x0f"] {
            assert!(namespace(garbage).is_err(), "{garbage:?}");
        }
    }
}
