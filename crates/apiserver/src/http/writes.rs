//! Writes: create, update (`PUT` and the three patch types, on an object
//! or its status) and delete, with upstream's checks, preconditions and
//! dry runs.
//!
//! Invariant: each write holds the store's lock from reading the current
//! object to committing, so it is atomic and gets a strictly larger
//! resourceVersion; a refused write, a dry run, or an update that changes
//! nothing stores nothing.

use std::sync::Arc;

use hyper::Response;
use serde_json::{Value, json};

use super::objects::{self, FieldValidation};
use super::reads::{not_found, view, view_value};
use super::request::Req;
use super::response::{self, ResBody};
use super::state::HttpState;
use super::{events, patch, protobuf};
use crate::admission;
use crate::cluster::{mark_graceful, requested_grace};
use crate::error::ApiError;
use crate::resource::{Kind, Resource};
use crate::store::{Inner, Obj, key_of, parse_rv};

/// Whether objects may be created in `ns` (cluster-scoped ones always).
fn namespace_exists(s: &Inner, ns: &str) -> bool {
    ns.is_empty() || s.get(Kind::Namespace, ns).is_some()
}

/// `POST` to a collection: a new object, named (or generated), admitted,
/// stored (unless a dry run) with a fresh uid.
pub(super) fn create(sh: &HttpState, r: &Req, res: &Resource, ns: &str) -> Result<Response<ResBody>, ApiError> {
    let fv = FieldValidation::parse(r.q("fieldValidation"))?;
    let dry = r.dry_run()?;
    let body = if r.content_type == protobuf::MEDIA_TYPE { protobuf::namespace(&r.body)? } else { r.json_body()? };
    let (mut v, unknown) = objects::decode(res, &body)?;
    let warnings = objects::check_unknown(fv, &unknown)?;
    if res.converted {
        v = events::to_core(&v);
    }
    let body_ns = v.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default().to_string();
    if res.namespaced && !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request".into(),
        ));
    }
    let mut s = sh.cluster.store.lock();
    let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let name = if name.is_empty() {
        match v.pointer("/metadata/generateName").and_then(Value::as_str).filter(|g| !g.is_empty()) {
            Some(prefix) => {
                let uid_n = s.rv() + 1;
                let n = objects::generate_name(prefix, uid_n);
                v["metadata"]["name"] = json!(n);
                n
            }
            None => String::new(),
        }
    } else {
        name
    };
    objects::validate(res, &v)?;
    if res.namespaced && !namespace_exists(&s, ns) {
        return Err(ApiError::NotFound { resource: "namespaces".into(), name: ns.to_string() });
    }
    let key = key_of(ns, &name);
    if s.get(res.kind, &key).is_some() {
        return Err(ApiError::AlreadyExists { resource: res.qualified(), name });
    }
    let uid = s.next_uid();
    let now = sh.cluster.time.now();
    objects::init_metadata(&mut v, if res.namespaced { ns } else { "" }, uid, sh.cluster.time.time(now), res.kind);
    admission::on_create(&sh.cluster, &s, res.kind, &mut v, now);
    let obj = if dry {
        Arc::new(Obj::unstored(key.clone(), String::new(), s.rv(), res.kind, crate::store::exact_json(&v)))
    } else {
        s.commit(res.kind, &key, v, false)
    };
    drop(s);
    let mut resp = response::json_response(201, view(res, &obj));
    response::add_warnings(&mut resp, &warnings);
    Ok(resp)
}

/// How a patch body is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PatchKind {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
}

/// What an update does to the stored object.
pub(super) enum Op {
    /// `PUT`: the body replaces it.
    Replace(Value),
    /// `PATCH`: the body patches it.
    Patch(PatchKind, Value),
}

/// The 409 for an object of this resource.
fn conflict(res: &Resource, name: &str, message: String) -> ApiError {
    ApiError::Conflict { resource: res.qualified(), name: name.to_string(), message }
}

/// The object an update asks for: the body of a `PUT`, or the current
/// object patched. Neither may rename it.
fn updated(cur_v: &Value, op: Op, name: &str) -> Result<Value, ApiError> {
    Ok(match op {
        Op::Replace(body) => {
            let body_name = body.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            if body_name != name {
                return Err(ApiError::BadRequest(format!(
                    "the name of the object ({body_name}) does not match the name on the URL ({name})"
                )));
            }
            body
        }
        Op::Patch(kind, patch) => {
            let mut v = cur_v.clone();
            match kind {
                PatchKind::Merge => {
                    if !patch.is_object() {
                        return Err(ApiError::BadRequest("a JSON merge patch must be a JSON object".into()));
                    }
                    patch::merge_patch(&mut v, &patch);
                }
                PatchKind::Json => patch::json_patch(&mut v, &patch)?,
                PatchKind::Strategic => patch::strategic_merge_patch(&mut v, &patch)?,
            }
            if v.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
                return Err(ApiError::BadRequest("metadata.name cannot be changed by a patch".into()));
            }
            v
        }
    })
}

/// An update's preconditions: the body's resourceVersion and uid, when
/// it names them, must be the stored object's.
fn check_preconditions(res: &Resource, name: &str, new: &Value, cur: &Obj) -> Result<(), ApiError> {
    let wanted_rv = match new.pointer("/metadata/resourceVersion").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        Some(rv) => Some(parse_rv(rv).map_err(|_| ApiError::BadRequest(format!("invalid resourceVersion {rv:?}")))?),
        None => None,
    };
    if wanted_rv.is_some_and(|rv| rv != cur.rv) {
        return Err(conflict(
            res,
            name,
            "the object has been modified; please apply your changes to the latest version and try again".into(),
        ));
    }
    if let Some(uid) = new.pointer("/metadata/uid").and_then(Value::as_str).filter(|s| !s.is_empty())
        && uid != cur.uid
    {
        return Err(conflict(
            res,
            name,
            format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {}", cur.uid),
        ));
    }
    Ok(())
}

/// As upstream's `ShouldDeleteDuringUpdate`: an update that leaves a
/// terminating object without finalizers ends it only when its grace
/// period is unset or zero (as one whose last finalizer goes after a
/// delete has). A pod still within its grace period stays (its kubelet
/// deletes it), whatever status is written to it.
fn ends_terminating(res: &Resource, cur: &Obj, new: &Value) -> bool {
    let removing = res.kind == Kind::Pod || res.kind == Kind::Namespace;
    let old = cur.value();
    let was_terminating = old.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null());
    let no_grace_left =
        old.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64).is_none_or(|g| g == 0);
    removing
        && was_terminating
        && new.pointer("/metadata/finalizers").and_then(Value::as_array).is_none_or(Vec::is_empty)
        && no_grace_left
}

/// `PUT` or `PATCH` of an object or its status: the update checked,
/// validated and stored (unless it changes nothing, or is a dry run).
#[allow(clippy::too_many_arguments)] // the route's parts, each checked by the route
pub(super) fn write(
    sh: &HttpState,
    r: &Req,
    res: &Resource,
    ns: &str,
    name: &str,
    sub: Option<&str>,
    op: Op,
    fv: FieldValidation,
) -> Result<Response<ResBody>, ApiError> {
    let dry = r.dry_run()?;
    let key = key_of(ns, name);
    let mut s = sh.cluster.store.lock();
    let cur = s.get(res.kind, &key).ok_or_else(|| not_found(res, name))?;
    let cur_v = view_value(res, &cur);
    let new = updated(&cur_v, op, name)?;
    let body_ns = new.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
    if res.namespaced && !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request".into(),
        ));
    }
    check_preconditions(res, name, &new, &cur)?;
    let (decoded, unknown) = objects::decode(res, &new)?;
    let warnings = objects::check_unknown(fv, &unknown)?;
    let new = decoded;
    let (cur_core, mut new) =
        if res.converted { (events::to_core(&cur_v), events::to_core(&new)) } else { (cur_v, new) };
    objects::keep_server_metadata(&cur_core, &mut new);
    let has_status = res.subresources.contains(&"status");
    if sub == Some("status") {
        objects::keep_field(&cur_core, &mut new, "spec");
        objects::keep_field(&cur_core, &mut new, "metadata");
    } else if has_status {
        objects::keep_field(&cur_core, &mut new, "status");
        if res.kind == Kind::Pod {
            objects::check_pod_spec_update(&cur_core, &new).map_err(|c| ApiError::Invalid {
                kind: res.kind_name.into(),
                group: res.group.into(),
                name: name.into(),
                causes: vec![c],
            })?;
        }
    }
    objects::validate(res, &new)?;
    objects::bump_generation(res.kind, &cur_core, &mut new);
    if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), json!(cur.rv.to_string()));
    }
    // A write that changes nothing is not stored: same resourceVersion, no
    // watch event, as upstream.
    let obj = if new == cur_core || dry {
        if dry {
            Arc::new(Obj::unstored(key, cur.uid.clone(), cur.rv, res.kind, crate::store::exact_json(&new)))
        } else {
            cur
        }
    } else {
        let finalized = ends_terminating(res, &cur, &new);
        s.commit(res.kind, &key, new, finalized)
    };
    drop(s);
    let mut resp = response::json_response(200, view(res, &obj));
    response::add_warnings(&mut resp, &warnings);
    Ok(resp)
}

/// `DELETE` of an object: with finalizers it starts terminating; a pod
/// of a Ready node in a cluster about scheduling terminates through its
/// grace; anything else goes at once (a namespace with its contents).
pub(super) fn delete(
    sh: &HttpState,
    r: &Req,
    res: &Resource,
    ns: &str,
    name: &str,
) -> Result<Response<ResBody>, ApiError> {
    let dry = r.dry_run()?;
    let opts = delete_options(r)?;
    let grace = grace_period(&opts)?;
    let key = key_of(ns, name);
    let mut s = sh.cluster.store.lock();
    let cur = s.get(res.kind, &key).ok_or_else(|| not_found(res, name))?;
    check_delete_preconditions(res, name, &opts, &cur)?;
    let mut v = cur.value();
    let finalizers = v.pointer("/metadata/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty());
    if dry {
        return Ok(response::json_response(200, view(res, &cur)));
    }
    if res.kind == Kind::Pod && sh.cluster.terminating_gracefully(&key) {
        // Deleted already and within its grace: upstream leaves it as it
        // is and answers with it.
        return Ok(response::json_response(200, view(res, &cur)));
    }
    if res.kind == Kind::Pod && sh.cluster.refuses_deletion(&key) {
        return Err(ApiError::BadRequest(format!(
            "admission webhook \"refuse-deletions.sim.nodewarden.io\" denied the request: the scenario refuses this deletion of pod {name}"
        )));
    }
    let time = &sh.cluster.time;
    let obj = if finalizers {
        if v.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null()) {
            cur
        } else {
            v["metadata"]["deletionTimestamp"] = json!(time.time(time.now()));
            v["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            s.commit(res.kind, &key, v, false)
        }
    } else {
        if res.kind == Kind::Namespace {
            delete_contents(&mut s, name);
        }
        if res.kind == Kind::Pod {
            if let Some((grace, until)) = sh.cluster.graceful_deletion(&s, &v, grace) {
                let obj = sh.cluster.start_graceful(&mut s, &key, v, grace, until);
                drop(s);
                return Ok(response::json_response(200, view(res, &obj)));
            }
            mark_graceful(&mut v, grace, &time.time(time.now()));
        }
        s.commit(res.kind, &key, v, true)
    };
    drop(s);
    Ok(response::json_response(200, view(res, &obj)))
}

/// A deletion's `DeleteOptions` (none reads as empty), checked as
/// upstream checks them.
fn delete_options(r: &Req) -> Result<Value, ApiError> {
    let opts: Value = if r.body.is_empty() { json!({}) } else { r.json_body()? };
    if !opts.is_object() {
        return Err(ApiError::BadRequest("DeleteOptions must be a JSON object".into()));
    }
    if let Some(k) = opts.get("kind").and_then(Value::as_str)
        && k != "DeleteOptions"
    {
        return Err(ApiError::BadRequest(format!("{k} is not a DeleteOptions")));
    }
    if let Some(p) = opts.get("propagationPolicy").and_then(Value::as_str)
        && !matches!(p, "Orphan" | "Background" | "Foreground")
    {
        return Err(ApiError::BadRequest(format!(
            "propagationPolicy {p:?} is not one of Orphan, Background, Foreground"
        )));
    }
    Ok(opts)
}

/// `deleteOptions.gracePeriodSeconds`: `None` when absent (the pod's
/// own), a negative value reads as 1 s (as upstream's `BeforeDelete`
/// coerces it), anything but an integer is refused.
pub(super) fn grace_period(opts: &Value) -> Result<Option<i64>, ApiError> {
    match opts.get("gracePeriodSeconds") {
        None | Some(Value::Null) => Ok(None),
        Some(x) => match x.as_i64() {
            Some(n) => Ok(Some(requested_grace(n))),
            None => Err(ApiError::BadRequest(format!("gracePeriodSeconds: {x} is not an integer"))),
        },
    }
}

/// A deletion's preconditions: the uid and resourceVersion it names, if
/// any, must be the stored object's.
fn check_delete_preconditions(res: &Resource, name: &str, opts: &Value, cur: &Obj) -> Result<(), ApiError> {
    if let Some(uid) = opts.pointer("/preconditions/uid").and_then(Value::as_str)
        && uid != cur.uid
    {
        return Err(conflict(
            res,
            name,
            format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {}", cur.uid),
        ));
    }
    if let Some(rv) = opts.pointer("/preconditions/resourceVersion").and_then(Value::as_str)
        && parse_rv(rv).ok() != Some(cur.rv)
    {
        return Err(conflict(
            res,
            name,
            format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                cur.rv
            ),
        ));
    }
    Ok(())
}

/// The namespace controller's work, done at once: everything in the
/// namespace goes before it does.
fn delete_contents(s: &mut Inner, namespace: &str) {
    let prefix = format!("{namespace}/");
    for kind in Kind::ALL.into_iter().filter(|k| k.resource().namespaced) {
        let keys: Vec<(String, Value)> =
            s.snapshot(kind).iter_from("", Some(&prefix)).map(|o| (o.key.clone(), o.value())).collect();
        for (k, ov) in keys {
            s.commit(kind, &k, ov, true);
        }
    }
}
