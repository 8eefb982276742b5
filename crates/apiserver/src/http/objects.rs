//! Decoding, defaulting and validating the objects clients write.
//!
//! A body is decoded into its k8s-openapi type, as the API server decodes
//! into its Go type: a field of the wrong type is a 400, unknown fields are
//! dropped (reported as warnings, or refused with `fieldValidation=Strict`),
//! and what is stored is the typed object serialised again. Then the
//! validation the API server does for the fields nodewarden and kubectl
//! write answers 422 with upstream's field paths and wording.
//!
//! Invariant: nothing a client writes is stored without passing the typed
//! decoding and the validation; server-owned metadata is the server's.

use serde_json::{Map, Value, json};

use crate::error::{ApiError, Cause};
use crate::resource::{Kind, Resource};

/// What to do with unknown fields (`fieldValidation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and say so in a `Warning` header (the default).
    #[default]
    Warn,
    /// Refuse the request with 400.
    Strict,
}

impl FieldValidation {
    /// Parses the query parameter.
    pub fn parse(s: Option<&str>) -> Result<FieldValidation, ApiError> {
        match s {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::BadRequest(format!(
                "fieldValidation parameter unsupported: {other}. Valid values are Ignore, Warn, Strict"
            ))),
        }
    }
}

macro_rules! round_trip {
    ($ty:ty, $v:expr) => {
        serde_json::from_value::<$ty>($v.clone()).and_then(serde_json::to_value)
    };
}

/// Decodes `body` as the resource's type: the pruned object and the
/// unknown fields it had.
pub fn decode(res: &Resource, body: &Value) -> Result<(Value, Vec<String>), ApiError> {
    use k8s_openapi::api;
    let Value::Object(map) = body else {
        return Err(ApiError::BadRequest(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: expected an object",
            res.kind_name
        )));
    };
    let api_version = res.api_version();
    let got_version = map.get("apiVersion").and_then(Value::as_str).unwrap_or(&api_version);
    let got_kind = map.get("kind").and_then(Value::as_str).unwrap_or(res.kind_name);
    if got_kind != res.kind_name {
        return Err(ApiError::BadRequest(format!(
            "{got_kind} in version \"{}\" cannot be handled as a {}: no kind \"{got_kind}\" is registered for this endpoint",
            got_version.rsplit('/').next().unwrap_or(got_version),
            res.kind_name
        )));
    }
    if got_version != api_version {
        return Err(ApiError::BadRequest(format!(
            "the API version in the data ({got_version}) does not match the expected API version ({api_version})"
        )));
    }
    let typed = match (res.kind, res.converted) {
        (Kind::Namespace, _) => round_trip!(api::core::v1::Namespace, body),
        (Kind::Node, _) => round_trip!(api::core::v1::Node, body),
        (Kind::Pod, _) => round_trip!(api::core::v1::Pod, body),
        (Kind::Event, false) => round_trip!(api::core::v1::Event, body),
        (Kind::Event, true) => round_trip!(api::events::v1::Event, body),
        (Kind::Lease, _) => round_trip!(api::coordination::v1::Lease, body),
        (Kind::DaemonSet, _) => round_trip!(api::apps::v1::DaemonSet, body),
        (Kind::PodDisruptionBudget, _) => round_trip!(api::policy::v1::PodDisruptionBudget, body),
    };
    let mut pruned = typed.map_err(|e| {
        ApiError::BadRequest(format!(
            "{} in version \"{}\" cannot be handled as a {}: {e}",
            res.kind_name, res.version, res.kind_name
        ))
    })?;
    if let Value::Object(m) = &mut pruned {
        m.insert("kind".into(), json!(res.kind_name));
        m.insert("apiVersion".into(), json!(api_version));
    }
    let mut unknown = Vec::new();
    unknown_fields(body, &pruned, "", &mut unknown);
    Ok((pruned, unknown))
}

/// Paths present (and not null) in `input` but gone from `typed`.
fn unknown_fields(input: &Value, typed: &Value, path: &str, out: &mut Vec<String>) {
    match (input, typed) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                match b.get(k) {
                    Some(t) => unknown_fields(v, t, &p, out),
                    None if v.is_null() => {}
                    None => out.push(p),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                unknown_fields(x, y, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Applies `fieldValidation` to the unknown fields: the warnings to send,
/// or a 400.
pub fn check_unknown(mode: FieldValidation, unknown: &[String]) -> Result<Vec<String>, ApiError> {
    let msgs: Vec<String> = unknown.iter().map(|p| format!("unknown field \"{p}\"")).collect();
    match mode {
        FieldValidation::Ignore => Ok(Vec::new()),
        FieldValidation::Warn => Ok(msgs),
        FieldValidation::Strict if msgs.is_empty() => Ok(Vec::new()),
        FieldValidation::Strict => Err(ApiError::BadRequest(format!("strict decoding error: {}", msgs.join(", ")))),
    }
}

const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const QUALIFIED_NAME: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_label)
}

fn is_label_value(s: &str) -> bool {
    s.is_empty()
        || (s.len() <= 63
            && s.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
            && s.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
            && s.as_bytes().last().is_some_and(u8::is_ascii_alphanumeric))
}

fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    prefix.is_none_or(is_subdomain) && !name.is_empty() && is_label_value(name)
}

fn str_at<'a>(v: &'a Value, path: &str) -> Option<&'a str> {
    v.pointer(path).and_then(Value::as_str)
}

/// Validates an object about to be stored; `Ok` or a 422 with every cause.
/// Every check adds its causes to one list, so a body with several faults
/// gets one 422 naming them all, as upstream's does.
pub fn validate(res: &Resource, v: &Value) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    let name = str_at(v, "/metadata/name").unwrap_or_default();
    validate_name(res.kind, name, &mut causes);
    validate_labels(v, &mut causes);
    validate_annotations(v, &mut causes);
    validate_spec(res.kind, v, &mut causes);
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::Invalid {
            kind: res.kind_name.to_string(),
            group: res.group.to_string(),
            name: name.to_string(),
            causes,
        })
    }
}

/// The name's causes: required, and a DNS label for a namespace, a DNS
/// subdomain for every other kind.
fn validate_name(kind: Kind, name: &str, causes: &mut Vec<Cause>) {
    if name.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "metadata.name",
            "Required value: name or generateName is required",
        ));
    } else if kind == Kind::Namespace && !is_label(name) {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "metadata.name",
            format!("Invalid value: {name:?}: {DNS1123_LABEL}"),
        ));
    } else if kind != Kind::Namespace && !is_subdomain(name) {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "metadata.name",
            format!("Invalid value: {name:?}: {DNS1123_SUBDOMAIN}"),
        ));
    }
}

/// The labels' causes: each key a qualified name, each value a label value.
fn validate_labels(v: &Value, causes: &mut Vec<Cause>) {
    if let Some(labels) = v.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, val) in labels {
            if !is_qualified_name(k) {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    "metadata.labels",
                    format!("Invalid value: {k:?}: {QUALIFIED_NAME}"),
                ));
            }
            let s = val.as_str().unwrap_or_default();
            if !is_label_value(s) {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    "metadata.labels",
                    format!("Invalid value: {s:?}: {LABEL_VALUE}"),
                ));
            }
        }
    }
}

/// The annotations' causes: their total size, and each key a qualified name.
fn validate_annotations(v: &Value, causes: &mut Vec<Cause>) {
    if let Some(ann) = v.pointer("/metadata/annotations").and_then(Value::as_object) {
        let size: usize = ann.iter().map(|(k, v)| k.len() + v.as_str().map_or(0, str::len)).sum();
        if size > 256 * 1024 {
            causes.push(Cause::new(
                "FieldValueTooLong",
                "metadata.annotations",
                "Too long: must have at most 262144 bytes",
            ));
        }
        for k in ann.keys() {
            if !is_qualified_name(&k.to_ascii_lowercase()) {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    "metadata.annotations",
                    format!("Invalid value: {k:?}: {QUALIFIED_NAME}"),
                ));
            }
        }
    }
}

/// The kind's own checks of its spec: one `match` over every served kind,
/// so a new kind cannot go without deciding what it checks.
fn validate_spec(kind: Kind, v: &Value, causes: &mut Vec<Cause>) {
    match kind {
        Kind::Node => validate_taints(v, causes),
        Kind::Pod => validate_pod(v, causes),
        Kind::Lease => {
            if let Some(d) = v.pointer("/spec/leaseDurationSeconds").and_then(Value::as_i64)
                && d <= 0
            {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    "spec.leaseDurationSeconds",
                    format!("Invalid value: {d}: must be greater than 0"),
                ));
            }
        }
        Kind::PodDisruptionBudget => {
            if v.pointer("/spec/minAvailable").is_some() && v.pointer("/spec/maxUnavailable").is_some() {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    "spec",
                    "Invalid value: minAvailable and maxUnavailable cannot be both set",
                ));
            }
        }
        Kind::DaemonSet => {
            let selector = v.pointer("/spec/selector/matchLabels").and_then(Value::as_object);
            let template = v.pointer("/spec/template/metadata/labels").and_then(Value::as_object);
            match selector {
                None if v.pointer("/spec/selector/matchExpressions").is_none() => {
                    causes.push(Cause::new("FieldValueRequired", "spec.selector", "Required value"));
                }
                Some(sel) if !sel.iter().all(|(k, val)| template.and_then(|t| t.get(k)) == Some(val)) => {
                    causes.push(Cause::new(
                        "FieldValueInvalid",
                        "spec.template.metadata.labels",
                        "Invalid value: `selector` does not match template `labels`",
                    ));
                }
                _ => {}
            }
        }
        Kind::Namespace | Kind::Event => {}
    }
}

const EFFECTS: [&str; 3] = ["NoExecute", "NoSchedule", "PreferNoSchedule"];

fn validate_taints(v: &Value, causes: &mut Vec<Cause>) {
    let Some(taints) = v.pointer("/spec/taints").and_then(Value::as_array) else { return };
    let mut seen = Vec::new();
    for (i, t) in taints.iter().enumerate() {
        let key = str_at(t, "/key").unwrap_or_default();
        let effect = str_at(t, "/effect").unwrap_or_default();
        let value = str_at(t, "/value").unwrap_or_default();
        if key.is_empty() {
            causes.push(Cause::new("FieldValueRequired", format!("spec.taints[{i}].key"), "Required value"));
        } else if !is_qualified_name(key) {
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("spec.taints[{i}].key"),
                format!("Invalid value: {key:?}: {QUALIFIED_NAME}"),
            ));
        }
        if !is_label_value(value) {
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("spec.taints[{i}].value"),
                format!("Invalid value: {value:?}: {LABEL_VALUE}"),
            ));
        }
        if effect.is_empty() {
            causes.push(Cause::new("FieldValueRequired", format!("spec.taints[{i}].effect"), "Required value"));
        } else if !EFFECTS.contains(&effect) {
            causes.push(Cause::new(
                "FieldValueNotSupported",
                format!("spec.taints[{i}].effect"),
                format!("Unsupported value: {effect:?}: supported values: \"NoExecute\", \"NoSchedule\", \"PreferNoSchedule\""),
            ));
        }
        if seen.contains(&(key, effect)) {
            causes.push(Cause::new(
                "FieldValueDuplicate",
                format!("spec.taints[{i}]"),
                format!("Duplicate value: {{\"key\":{key:?},\"effect\":{effect:?}}}: taints must be unique by key and effect pair"),
            ));
        }
        seen.push((key, effect));
    }
}

fn validate_pod(v: &Value, causes: &mut Vec<Cause>) {
    match v.pointer("/spec/containers").and_then(Value::as_array) {
        Some(c) if !c.is_empty() => {
            for (i, c) in c.iter().enumerate() {
                if str_at(c, "/name").unwrap_or_default().is_empty() {
                    causes.push(Cause::new(
                        "FieldValueRequired",
                        format!("spec.containers[{i}].name"),
                        "Required value",
                    ));
                }
                if str_at(c, "/image").unwrap_or_default().is_empty() {
                    causes.push(Cause::new(
                        "FieldValueRequired",
                        format!("spec.containers[{i}].image"),
                        "Required value",
                    ));
                }
            }
        }
        _ => causes.push(Cause::new("FieldValueRequired", "spec.containers", "Required value")),
    }
    let Some(tols) = v.pointer("/spec/tolerations").and_then(Value::as_array) else { return };
    for (i, t) in tols.iter().enumerate() {
        let op = str_at(t, "/operator").unwrap_or_default();
        let value = str_at(t, "/value").unwrap_or_default();
        let effect = str_at(t, "/effect").unwrap_or_default();
        let key = str_at(t, "/key").unwrap_or_default();
        match op {
            "" | "Equal" => {
                if key.is_empty() {
                    causes.push(Cause::new("FieldValueInvalid", format!("spec.tolerations[{i}].operator"), format!("Invalid value: {op:?}: operator must be Exists when `key` is empty, which means \"match all values and all keys\"")));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    causes.push(Cause::new(
                        "FieldValueInvalid",
                        format!("spec.tolerations[{i}].operator"),
                        "Invalid value: \"Exists\": value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => causes.push(Cause::new(
                "FieldValueNotSupported",
                format!("spec.tolerations[{i}].operator"),
                format!("Unsupported value: {other:?}: supported values: \"Equal\", \"Exists\""),
            )),
        }
        if !effect.is_empty() && !EFFECTS.contains(&effect) {
            causes.push(Cause::new(
                "FieldValueNotSupported",
                format!("spec.tolerations[{i}].effect"),
                format!("Unsupported value: {effect:?}: supported values: \"NoExecute\", \"NoSchedule\", \"PreferNoSchedule\""),
            ));
        }
        if t.get("tolerationSeconds").is_some_and(|s| !s.is_null()) && effect != "NoExecute" {
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("spec.tolerations[{i}].effect"),
                format!("Invalid value: {effect:?}: effect must be 'NoExecute' when `tolerationSeconds` is set"),
            ));
        }
    }
}

/// Upstream's pod update rule: only images, `activeDeadlineSeconds`,
/// `terminationGracePeriodSeconds` and additions to the tolerations may
/// change in a running pod's spec.
pub fn check_pod_spec_update(old: &Value, new: &Value) -> Result<(), Cause> {
    let strip = |v: &Value| -> Value {
        let mut s = v.get("spec").cloned().unwrap_or(Value::Null);
        if let Some(m) = s.as_object_mut() {
            m.remove("tolerations");
            m.remove("activeDeadlineSeconds");
            m.remove("terminationGracePeriodSeconds");
            for list in ["containers", "initContainers"] {
                if let Some(Value::Array(cs)) = m.get_mut(list) {
                    for c in cs {
                        if let Some(c) = c.as_object_mut() {
                            c.remove("image");
                        }
                    }
                }
            }
        }
        s
    };
    let old_tols = old.pointer("/spec/tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
    let new_tols = new.pointer("/spec/tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
    let kept = old_tols.iter().all(|t| new_tols.contains(t));
    if strip(old) == strip(new) && kept {
        return Ok(());
    }
    Err(Cause::new(
        "FieldValueForbidden",
        "spec",
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
    ))
}

/// The server-owned metadata of `old` carried onto `new` (uid, creation
/// time, and for fields a client may not change).
pub fn keep_server_metadata(old: &Value, new: &mut Value) {
    let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    for f in [
        "uid",
        "creationTimestamp",
        "namespace",
        "name",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match old.pointer(&format!("/metadata/{f}")) {
            Some(v) => {
                meta.insert(f.into(), v.clone());
            }
            None => {
                meta.remove(f);
            }
        }
    }
}

/// Replaces `new`'s top-level field `field` with `old`'s (status writes
/// keep the spec, spec writes keep the status).
pub fn keep_field(old: &Value, new: &mut Value, field: &str) {
    let Some(m) = new.as_object_mut() else { return };
    match old.get(field) {
        Some(v) => {
            m.insert(field.into(), v.clone());
        }
        None => {
            m.remove(field);
        }
    }
}

/// The kind's generation rule: bumped when anything but metadata and
/// status changes (DaemonSets, PDBs).
pub fn bump_generation(kind: Kind, old: &Value, new: &mut Value) {
    if !matches!(kind, Kind::DaemonSet | Kind::PodDisruptionBudget) {
        return;
    }
    let gen_old = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
    let changed = old.get("spec") != new.get("spec");
    if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("generation".into(), json!(if changed { gen_old + 1 } else { gen_old }));
    }
}

/// Sets a fresh object's server-owned metadata.
pub fn init_metadata(v: &mut Value, namespace: &str, uid: String, created: String, kind: Kind) {
    if !v.get("metadata").is_some_and(Value::is_object) {
        v["metadata"] = Value::Object(Map::new());
    }
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("uid".into(), json!(uid));
        meta.insert("creationTimestamp".into(), json!(created));
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        meta.remove("resourceVersion");
        if namespace.is_empty() {
            meta.remove("namespace");
        } else {
            meta.insert("namespace".into(), json!(namespace));
        }
        if matches!(kind, Kind::DaemonSet | Kind::PodDisruptionBudget) {
            meta.insert("generation".into(), json!(1));
        }
    }
}

/// Fills the names of a `generateName` object: `prefix` + 5 characters.
pub fn generate_name(prefix: &str, seq: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 7;
    let mut s = prefix.to_string();
    for _ in 0..5 {
        s.push(ALPHABET[(n % ALPHABET.len() as u64) as usize] as char);
        n /= ALPHABET.len() as u64;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Resource;

    fn res(kind: Kind) -> &'static Resource {
        kind.resource()
    }

    #[test]
    fn decode_prunes_unknown_fields_and_refuses_wrong_types() {
        let body = json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n", "bogus": 1}, "spec": {"unschedulable": true, "taints": []}, "extra": {}});
        let (v, unknown) = decode(res(Kind::Node), &body).unwrap_or_default();
        assert_eq!(unknown, ["extra", "metadata.bogus"]);
        assert_eq!(v["spec"], json!({"unschedulable": true, "taints": []}));
        assert!(v.get("extra").is_none());
        assert!(
            matches!(check_unknown(FieldValidation::Strict, &unknown), Err(ApiError::BadRequest(m)) if m.contains("unknown field \"extra\""))
        );
        let wrong =
            json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n"}, "spec": {"unschedulable": "yes"}});
        assert_eq!(decode(res(Kind::Node), &wrong).map_err(|e| e.code()).err(), Some(400));
        let kind = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "n"}});
        assert_eq!(decode(res(Kind::Node), &kind).map_err(|e| e.code()).err(), Some(400));
        assert_eq!(decode(res(Kind::Node), &json!([1])).map_err(|e| e.code()).err(), Some(400));
    }

    #[test]
    fn validation_names_fields() {
        let node = json!({"metadata": {"name": "Bad_Name", "labels": {"ok": "bad value"}}, "spec": {"taints": [{"key": "k", "effect": "Sometimes"}, {"key": "k", "effect": "Sometimes"}]}});
        let Err(ApiError::Invalid { causes, .. }) = validate(res(Kind::Node), &node) else { panic!("valid?") };
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            ["metadata.name", "metadata.labels", "spec.taints[0].effect", "spec.taints[1].effect", "spec.taints[1]"]
        );
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}], "tolerations": [{"key": "k", "operator": "Exists", "value": "v", "effect": "NoSchedule", "tolerationSeconds": 5}]}});
        let Err(ApiError::Invalid { causes, .. }) = validate(res(Kind::Pod), &pod) else { panic!("valid?") };
        assert_eq!(causes.len(), 2);
        assert!(validate(res(Kind::Namespace), &json!({"metadata": {"name": "a.b"}})).is_err());
        assert!(validate(res(Kind::Namespace), &json!({"metadata": {"name": "ab"}})).is_ok());
    }

    #[test]
    fn pod_spec_updates_are_limited() {
        let old = json!({"spec": {"nodeName": "a", "containers": [{"name": "c", "image": "1"}], "tolerations": [{"key": "x"}]}});
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = json!("2");
        new["spec"]["tolerations"] = json!([{"key": "x"}, {"key": "y"}]);
        assert!(check_pod_spec_update(&old, &new).is_ok());
        new["spec"]["nodeName"] = json!("b");
        assert!(check_pod_spec_update(&old, &new).is_err());
        assert_eq!(generate_name("x-", 1).len(), 7);
    }
}
