//! PodDisruptionBudgets: the disruption controller's status (computed
//! here from the pods) and the Eviction API, which answers 429 when a
//! budget forbids, as upstream does.

use std::sync::Arc;

use bytes::Bytes;
use hyper::Response;
use serde_json::{Value, json};

use crate::convert;
use crate::error::{ApiError, Cause};
use crate::http::{self, ResBody};
use crate::resource::Kind;
use crate::selector::{LabelReq, LabelSelector};
use crate::server::Shared;
use crate::store::{Inner, Obj, key_of};

/// A PDB's `spec.selector` as a label selector; `None` when malformed.
pub fn selector(pdb: &Value) -> Option<LabelSelector> {
    let sel = pdb.pointer("/spec/selector")?;
    let mut reqs: Vec<LabelReq> = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter().map(|(k, v)| LabelReq::In(k.clone(), vec![v.as_str().unwrap_or_default().to_string()])).collect()
        })
        .unwrap_or_default();
    for e in sel.get("matchExpressions").and_then(Value::as_array).into_iter().flatten() {
        let key = e.get("key").and_then(Value::as_str)?.to_string();
        let values: Vec<String> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|v| v.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        reqs.push(match e.get("operator").and_then(Value::as_str)? {
            "In" => LabelReq::In(key, values),
            "NotIn" => LabelReq::NotIn(key, values),
            "Exists" => LabelReq::Exists(key),
            "DoesNotExist" => LabelReq::DoesNotExist(key),
            _ => return None,
        });
    }
    Some(LabelSelector(reqs))
}

fn scaled(v: &Value, expected: i64) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let pct: f64 = s.strip_suffix('%')?.parse().ok()?;
            Some((pct * expected as f64 / 100.0).ceil() as i64)
        }
        _ => None,
    }
}

/// The budget's numbers now: (expected, current healthy, desired healthy).
pub fn numbers(s: &Inner, pdb: &Obj) -> (i64, i64, i64) {
    let v = pdb.value();
    let Some(sel) = selector(&v) else { return (0, 0, 0) };
    let prefix = format!("{}/", pdb.namespace());
    let pods: Vec<Value> = s
        .snapshot(Kind::Pod)
        .iter_from("", Some(&prefix))
        .filter(|p| sel.matches_with(|k| p.labels.get(k)))
        .map(|p| p.value())
        .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none_or(Value::is_null))
        .collect();
    let expected = pods.len() as i64;
    let healthy = pods.iter().filter(|p| convert::pod_ready(p) == Some(true)).count() as i64;
    let desired = match (v.pointer("/spec/minAvailable"), v.pointer("/spec/maxUnavailable")) {
        (Some(min), _) => scaled(min, expected).unwrap_or(expected),
        (None, Some(max)) => expected - scaled(max, expected).unwrap_or(0),
        (None, None) => 1,
    };
    (expected, healthy, desired.max(0))
}

/// Recomputes every budget's status; writes only those that changed.
pub fn refresh(sh: &Shared) {
    let mut s = sh.store.lock();
    let pdbs: Vec<Arc<Obj>> = s.snapshot(Kind::PodDisruptionBudget).iter_from("", None).cloned().collect();
    for pdb in pdbs {
        let (expected, healthy, desired) = numbers(&s, &pdb);
        let mut v = pdb.value();
        let allowed = (healthy - desired).max(0);
        let generation = v.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
        let prev_cond = v.pointer("/status/conditions/0").cloned();
        let status = if allowed > 0 { "True" } else { "False" };
        let cond = match prev_cond {
            Some(c) if c["status"] == status => c,
            _ => {
                json!({"type": "DisruptionAllowed", "status": status, "reason": if allowed > 0 { "SufficientPods" } else { "InsufficientPods" }, "message": "", "observedGeneration": generation, "lastTransitionTime": sh.time.time(sh.time.now())})
            }
        };
        let new_status = json!({
            "observedGeneration": generation,
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "conditions": [cond],
        });
        if v.get("status") != Some(&new_status) {
            v["status"] = new_status;
            s.commit(Kind::PodDisruptionBudget, &pdb.key, v, false);
        }
    }
}

/// `deleteOptions.gracePeriodSeconds`: `None` when absent (the pod's
/// own), a negative value reads as 1 s (as upstream's `BeforeDelete`
/// coerces it), anything but an integer is refused.
pub fn grace_period(opts: &Value) -> Result<Option<i64>, ApiError> {
    match opts.get("gracePeriodSeconds") {
        None | Some(Value::Null) => Ok(None),
        Some(x) => match x.as_i64() {
            Some(n) => Ok(Some(if n < 0 { 1 } else { n })),
            None => Err(ApiError::BadRequest(format!("gracePeriodSeconds: {x} is not an integer"))),
        },
    }
}

/// The served kubelets stop a pod at once, so a deleted pod is removed
/// without waiting. When the deletion asked for a grace period, the pod's
/// last state says so, as a real API server's would while it terminated:
/// `deletionTimestamp` and `deletionGracePeriodSeconds`, which watchers
/// see in the DELETED event (and tests check the grace sent by).
pub fn mark_graceful(pod: &mut Value, grace: Option<i64>, now: &str) {
    let Some(grace) = grace else { return };
    let Some(meta) = pod.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    if meta.get("deletionTimestamp").is_none_or(Value::is_null) {
        meta.insert("deletionTimestamp".into(), json!(now));
        meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
    }
}

/// The Eviction API's refusal for a budget (429 with a `DisruptionBudget`
/// cause), as upstream words it.
fn budget_refusal(why: String) -> ApiError {
    ApiError::TooManyRequests {
        message: "Cannot evict pod as it would violate the pod's disruption budget.".into(),
        retry_after: None,
        causes: vec![Cause::new("DisruptionBudget", "", why)],
    }
}

/// `POST pods/{name}/eviction`.
pub fn evict(sh: &Shared, body: Value, dry: bool, ns: &str, name: &str) -> Result<Response<ResBody>, ApiError> {
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or("Eviction");
    let av = body.get("apiVersion").and_then(Value::as_str).unwrap_or("policy/v1");
    if kind != "Eviction" || !matches!(av, "policy/v1" | "policy/v1beta1") {
        return Err(ApiError::BadRequest(format!("{kind} in version {av:?} cannot be handled as an Eviction")));
    }
    if body.pointer("/metadata/name").and_then(Value::as_str).is_some_and(|n| n != name) {
        return Err(ApiError::BadRequest("name in URL does not match name in Eviction object".into()));
    }
    let uid_pre = body.pointer("/deleteOptions/preconditions/uid").and_then(Value::as_str).map(str::to_string);
    let grace = match body.get("deleteOptions") {
        Some(o) if !o.is_null() => grace_period(o)?,
        _ => None,
    };
    let mut s = sh.store.lock();
    let key = key_of(ns, name);
    let pod =
        s.get(Kind::Pod, &key).ok_or_else(|| ApiError::NotFound { resource: "pods".into(), name: name.into() })?;
    if let Some(uid) = uid_pre
        && uid != pod.uid
    {
        return Err(ApiError::Conflict {
            resource: "pods".into(),
            name: name.into(),
            message: format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {}", pod.uid),
        });
    }
    if sh.terminating_gracefully(&key) {
        // Evicted (or deleted) already and within its grace: nothing more.
        return Ok(http::json_response(
            201,
            Bytes::from_static(br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}"#),
        ));
    }
    if !dry && sh.refuses_deletion(&key) {
        return Err(budget_refusal("the scenario refuses this eviction (refuse-deletions)".to_string()));
    }
    let pv = pod.value();
    let terminal = matches!(pv.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed"));
    let terminating = pv.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null());
    if !terminal && !terminating {
        let prefix = format!("{ns}/");
        let budgets: Vec<Arc<Obj>> = s
            .snapshot(Kind::PodDisruptionBudget)
            .iter_from("", Some(&prefix))
            .filter(|b| selector(&b.value()).is_some_and(|sel| sel.matches_with(|k| pod.labels.get(k))))
            .cloned()
            .collect();
        if budgets.len() > 1 {
            return Err(ApiError::Internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
                    .into(),
            ));
        }
        if let Some(b) = budgets.first() {
            let (_, healthy, desired) = numbers(&s, b);
            let pod_healthy = convert::pod_ready(&pv) == Some(true);
            let allowed = healthy - desired;
            let ok = if pod_healthy { allowed > 0 } else { healthy >= desired };
            if !ok {
                return Err(budget_refusal(format!(
                    "The disruption budget {} needs {desired} healthy pods and has {healthy} currently",
                    b.name()
                )));
            }
            if !dry && pod_healthy {
                let mut bv = b.value();
                bv["status"]["disruptionsAllowed"] = json!((allowed - 1).max(0));
                bv["status"]["disruptedPods"][name] = json!(sh.time.time(sh.time.now()));
                s.commit(Kind::PodDisruptionBudget, &b.key, bv, false);
            }
        }
    }
    if !dry {
        let mut pv = pv;
        match sh.graceful_deletion(&s, &pv, grace) {
            Some((grace, until)) => {
                sh.start_graceful(&mut s, &key, pv, grace, until);
            }
            None => {
                mark_graceful(&mut pv, grace, &sh.time.time(sh.time.now()));
                s.commit(Kind::Pod, &key, pv, true);
            }
        }
    }
    drop(s);
    Ok(http::json_response(
        201,
        Bytes::from_static(br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}"#),
    ))
}
