//! PodDisruptionBudgets: the disruption controller's status (computed
//! here from the pods) and the eviction of a pod under them, refused when
//! a budget forbids it, as upstream's Eviction API refuses it.
//!
//! Invariant: a refused eviction changes nothing; an accepted one takes
//! one disruption from the budget (of a healthy pod) and deletes the pod,
//! in one hold of the store's lock. The verdict is a [`EvictionRefused`],
//! which HTTP clients and the in-process controller both see worded as
//! the API words it ([`ApiError`]).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::cluster::{ServedCluster, mark_graceful};
use crate::error::{ApiError, Cause};
use crate::resource::Kind;
use crate::selector::{LabelReq, LabelSelector};
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

/// Ready as every reader in nodewarden reads it (`nodewarden_objects`):
/// a Ready condition whose status is not `True` is not ready.
fn is_ready(pod: &Value) -> bool {
    nodewarden_objects::pod_reading(pod, nodewarden_model::Timestamp::EPOCH, nodewarden_objects::Detail::Lifecycle)
        .and_then(|p| p.ready)
        == Some(true)
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
    let healthy = pods.iter().filter(|p| is_ready(p)).count() as i64;
    let desired = match (v.pointer("/spec/minAvailable"), v.pointer("/spec/maxUnavailable")) {
        (Some(min), _) => scaled(min, expected).unwrap_or(expected),
        (None, Some(max)) => expected - scaled(max, expected).unwrap_or(0),
        (None, None) => 1,
    };
    (expected, healthy, desired.max(0))
}

/// Recomputes every budget's status; writes only those that changed.
pub fn refresh(sh: &ServedCluster) {
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

/// Why an eviction was refused. Each has the code and wording upstream's
/// Eviction API answers with (see the [`ApiError`] it converts to).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvictionRefused {
    /// No pod of that name.
    NoSuchPod {
        /// The pod's name.
        name: String,
    },
    /// The eviction's uid precondition names another pod.
    UidMismatch {
        /// The pod's name.
        name: String,
        /// The uid the eviction asked for.
        precondition: String,
        /// The stored pod's uid.
        actual: String,
    },
    /// The scenario refuses this eviction (`refuse-deletions`).
    ScenarioRefuses,
    /// More than one budget selects the pod, which upstream does not
    /// support.
    SeveralBudgets,
    /// The pod's budget allows no disruption now.
    BudgetExhausted {
        /// The budget's name.
        budget: String,
        /// Healthy pods it needs.
        desired: i64,
        /// Healthy pods it has.
        healthy: i64,
    },
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

impl From<EvictionRefused> for ApiError {
    fn from(r: EvictionRefused) -> ApiError {
        match r {
            EvictionRefused::NoSuchPod { name } => ApiError::NotFound { resource: "pods".into(), name },
            EvictionRefused::UidMismatch { name, precondition, actual } => ApiError::Conflict {
                resource: "pods".into(),
                name,
                message: format!(
                    "Precondition failed: UID in precondition: {precondition}, UID in object meta: {actual}"
                ),
            },
            EvictionRefused::ScenarioRefuses => {
                budget_refusal("the scenario refuses this eviction (refuse-deletions)".to_string())
            }
            EvictionRefused::SeveralBudgets => ApiError::Internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
                    .into(),
            ),
            EvictionRefused::BudgetExhausted { budget, desired, healthy } => budget_refusal(format!(
                "The disruption budget {budget} needs {desired} healthy pods and has {healthy} currently"
            )),
        }
    }
}

/// What an eviction asks for, once its request has been read.
#[derive(Clone, Debug, Default)]
pub struct EvictionRequest<'a> {
    /// The pod's namespace.
    pub namespace: &'a str,
    /// The pod's name.
    pub name: &'a str,
    /// `deleteOptions.preconditions.uid`.
    pub uid: Option<String>,
    /// The grace period the deletion asks for (already coerced as
    /// upstream does), `None` for the pod's own.
    pub grace: Option<i64>,
    /// `dryRun=All`: judge, change nothing.
    pub dry: bool,
}

/// Evicts a pod as upstream's Eviction API does: refused when its budget
/// allows no disruption; otherwise one disruption is taken from the budget
/// (for a healthy pod) and the pod is deleted (or starts terminating
/// through its grace, see [`ServedCluster::graceful_deletion`]). A pod
/// already terminating gracefully is left as it is and the eviction
/// succeeds.
pub fn evict(sh: &ServedCluster, req: &EvictionRequest<'_>) -> Result<(), EvictionRefused> {
    let &EvictionRequest { namespace: ns, name, grace, dry, .. } = req;
    let mut s = sh.store.lock();
    let key = key_of(ns, name);
    let pod = s.get(Kind::Pod, &key).ok_or_else(|| EvictionRefused::NoSuchPod { name: name.into() })?;
    if let Some(uid) = &req.uid
        && *uid != pod.uid
    {
        return Err(EvictionRefused::UidMismatch {
            name: name.into(),
            precondition: uid.clone(),
            actual: pod.uid.clone(),
        });
    }
    if sh.terminating_gracefully(&key) {
        // Evicted (or deleted) already and within its grace: nothing more.
        return Ok(());
    }
    if !dry && sh.refuses_deletion(&key) {
        return Err(EvictionRefused::ScenarioRefuses);
    }
    let pv = pod.value();
    let terminal = matches!(pv.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed"));
    let terminating = pv.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null());
    if !terminal && !terminating {
        take_disruption(sh, &mut s, &pod, &pv, ns, name, dry)?;
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
    Ok(())
}

/// The budget's part of an eviction: refused when the pod's budget allows
/// no disruption; a healthy pod's eviction takes one (unless dry).
fn take_disruption(
    sh: &ServedCluster,
    s: &mut Inner,
    pod: &Obj,
    pv: &Value,
    ns: &str,
    name: &str,
    dry: bool,
) -> Result<(), EvictionRefused> {
    let prefix = format!("{ns}/");
    let budgets: Vec<Arc<Obj>> = s
        .snapshot(Kind::PodDisruptionBudget)
        .iter_from("", Some(&prefix))
        .filter(|b| selector(&b.value()).is_some_and(|sel| sel.matches_with(|k| pod.labels.get(k))))
        .cloned()
        .collect();
    if budgets.len() > 1 {
        return Err(EvictionRefused::SeveralBudgets);
    }
    let Some(b) = budgets.first() else { return Ok(()) };
    let (_, healthy, desired) = numbers(s, b);
    let pod_healthy = is_ready(pv);
    let allowed = healthy - desired;
    let ok = if pod_healthy { allowed > 0 } else { healthy >= desired };
    if !ok {
        return Err(EvictionRefused::BudgetExhausted { budget: b.name().to_string(), desired, healthy });
    }
    if !dry && pod_healthy {
        let mut bv = b.value();
        bv["status"]["disruptionsAllowed"] = json!((allowed - 1).max(0));
        bv["status"]["disruptedPods"][name] = json!(sh.time.time(sh.time.now()));
        s.commit(Kind::PodDisruptionBudget, &b.key, bv, false);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TimeBase;
    use crate::store::StoreLimits;

    /// One Ready pod `default/web-1` (labels `app: web`, uid `u1`) and a
    /// budget `b` over it needing one healthy pod.
    fn cluster() -> ServedCluster {
        let sh = ServedCluster::new(
            StoreLimits::default(),
            TimeBase { unix_nanos_at_epoch: 1_700_000_000_000_000_000 },
            nodewarden_sim::AdmissionDefaults::default(),
        );
        let mut s = sh.store.lock();
        let pod = json!({"metadata": {"name": "web-1", "namespace": "default", "uid": "u1", "labels": {"app": "web"}},
                         "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        s.commit(Kind::Pod, "default/web-1", pod, false);
        let budget = json!({"metadata": {"name": "b", "namespace": "default", "uid": "bu"},
                            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}});
        s.commit(Kind::PodDisruptionBudget, "default/b", budget, false);
        drop(s);
        sh
    }

    fn eviction(uid: Option<&str>) -> EvictionRequest<'static> {
        EvictionRequest { namespace: "default", name: "web-1", uid: uid.map(str::to_string), grace: None, dry: false }
    }

    /// Each refusal is the verdict of its cause, changes nothing, and is
    /// worded (code, reason, message, cause) as upstream's Eviction API
    /// answers it.
    #[test]
    fn refusals_change_nothing_and_read_as_upstreams() {
        let sh = cluster();
        let rv = sh.store.lock().rv();
        let refused = evict(&sh, &eviction(None)).err();
        assert_eq!(refused, Some(EvictionRefused::BudgetExhausted { budget: "b".into(), desired: 1, healthy: 1 }));
        let status = ApiError::from(refused.unwrap_or(EvictionRefused::ScenarioRefuses)).status();
        assert_eq!(
            status,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "Cannot evict pod as it would violate the pod's disruption budget.",
                   "reason": "TooManyRequests", "code": 429,
                   "details": {"causes": [{"reason": "DisruptionBudget",
                       "message": "The disruption budget b needs 1 healthy pods and has 1 currently"}]}})
        );
        let wrong_uid = evict(&sh, &eviction(Some("other"))).err();
        assert_eq!(
            wrong_uid.map(|r| ApiError::from(r).to_string()).as_deref(),
            Some(
                "Operation cannot be fulfilled on pods \"web-1\": Precondition failed: UID in precondition: other, UID in object meta: u1"
            )
        );
        let missing = EvictionRequest { name: "web-2", ..eviction(None) };
        assert_eq!(evict(&sh, &missing).err().map(|r| ApiError::from(r).code()), Some(404));
        assert_eq!(sh.store.lock().rv(), rv, "a refused eviction wrote something");
        assert_eq!(ApiError::from(EvictionRefused::SeveralBudgets).code(), 500);
    }

    /// With room in the budget the pod goes, and the budget records the
    /// disruption.
    #[test]
    fn an_allowed_eviction_takes_one_disruption_and_deletes_the_pod() {
        let sh = cluster();
        {
            let mut s = sh.store.lock();
            let Some(b) = s.get(Kind::PodDisruptionBudget, "default/b") else { panic!("no budget") };
            let mut v = b.value();
            v["spec"] = json!({"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}});
            s.commit(Kind::PodDisruptionBudget, "default/b", v, false);
        }
        assert_eq!(evict(&sh, &eviction(Some("u1"))), Ok(()));
        let s = sh.store.lock();
        assert!(s.get(Kind::Pod, "default/web-1").is_none());
        let b = s.get(Kind::PodDisruptionBudget, "default/b").map(|b| b.value()).unwrap_or_default();
        assert_eq!(b["status"]["disruptionsAllowed"], 0);
        assert!(b["status"]["disruptedPods"]["web-1"].is_string());
    }
}
