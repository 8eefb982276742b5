//! PodDisruptionBudgets in the served cluster: the disruption controller's
//! status and the eviction of a pod under them. The rules are the
//! simulated cluster's ([`nodewarden_cluster::rules::budget`]), so both back
//! ends count and refuse alike; this module finds the pods and budgets in
//! the JSON store, reads what the rules need and stores what they answer.
//!
//! Invariant: a refused eviction changes nothing; an accepted one takes
//! the disruption the verdict says from the budget and deletes the pod,
//! in one hold of the store's lock. The verdict is a [`EvictionRefused`],
//! which HTTP clients and the in-process controller both see worded as
//! the API words it ([`ApiError`]).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::cluster::{ServedCluster, mark_graceful};
use crate::error::{ApiError, Cause};
use crate::resource::Kind;
use crate::selector::LabelSelector;
use crate::store::{Inner, Obj, key_of};
use nodewarden_cluster::rules::budget::{self, BudgetStatus, Disruption, PodHealth};

/// A PDB's `spec.selector` as every reader in nodewarden reads a label
/// selector (`nodewarden_objects`); `None` when malformed (the budget's
/// sync then fails, as upstream's does). A budget without a selector
/// selects no pod (policy/v1: `LabelSelectorAsSelector(nil)` is
/// `labels.Nothing()`).
pub fn selector(pdb: &Value) -> Option<LabelSelector> {
    match pdb.pointer("/spec/selector") {
        None | Some(Value::Null) => Some(LabelSelector::nothing()),
        Some(sel) => nodewarden_objects::label_selector_reading(sel).ok().map(|s| LabelSelector::from(&s)),
    }
}

/// What the budget rules read of a stored pod, read once as every reader
/// in nodewarden reads it (`nodewarden_objects`): `running` unless its
/// phase is one upstream's Eviction API lets go without asking budgets.
/// A pod that reading ignores (no name, namespace or uid) is not ready and
/// terminating only by its own deletionTimestamp.
fn pod_health(pod: &Value) -> PodHealth {
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    let read =
        nodewarden_objects::pod_reading(pod, nodewarden_model::Timestamp::EPOCH, nodewarden_objects::Detail::Lifecycle);
    PodHealth {
        terminating: read.as_ref().map_or_else(
            || pod.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null()),
            |p| p.terminating,
        ),
        running: !matches!(phase, Some("Pending" | "Succeeded" | "Failed")),
        ready: read.and_then(|p| p.ready),
    }
}

/// The budget's status now ([`budget::budget_status`] over the pods of its
/// namespace its selector picks); an error, as the disruption controller's
/// sync fails, when its selector or numbers cannot be read.
fn status(s: &Inner, pdb: &Obj) -> Result<BudgetStatus, String> {
    let v = pdb.value();
    let sel = selector(&v).ok_or_else(|| "invalid selector".to_string())?;
    let amounts = nodewarden_objects::budget_amounts(&v)?;
    let prefix = format!("{}/", pdb.namespace());
    let snapshot = s.snapshot(Kind::Pod);
    let pods = snapshot
        .iter_from("", Some(&prefix))
        .filter(|p| sel.matches_with(|k| p.labels.get(k)))
        .map(|p| pod_health(&p.value()));
    Ok(budget::budget_status(pods, amounts.min_available, amounts.max_unavailable))
}

/// The `DisruptionAllowed` condition for `allowed` (upstream
/// `UpdateDisruptionAllowedCondition`), or False with `SyncFailed` when
/// the sync failed; the transition time moves only with the status.
fn allowed_condition(prev: Option<&Value>, allowed: bool, failed: Option<&str>, generation: i64, now: &str) -> Value {
    let status = if allowed { "True" } else { "False" };
    let (reason, message) = match failed {
        Some(why) => ("SyncFailed", why),
        None if allowed => ("SufficientPods", ""),
        None => ("InsufficientPods", ""),
    };
    let since = match prev {
        Some(c) if c["status"] == status => c["lastTransitionTime"].clone(),
        _ => json!(now),
    };
    json!({"type": "DisruptionAllowed", "status": status, "reason": reason, "message": message,
           "observedGeneration": generation, "lastTransitionTime": since})
}

/// Recomputes every budget's status; writes only those that changed. A
/// budget whose sync fails keeps its numbers and allows nothing (upstream
/// `failSafe`).
pub fn refresh(sh: &ServedCluster) {
    let mut s = sh.store.lock();
    let now = sh.time.time(sh.time.now());
    let pdbs: Vec<Arc<Obj>> = s.snapshot(Kind::PodDisruptionBudget).iter_from("", None).cloned().collect();
    for pdb in pdbs {
        let mut v = pdb.value();
        let generation = v.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
        let prev_cond = v.pointer("/status/conditions/0");
        let new_status = match status(&s, &pdb) {
            Ok(st) => json!({
                "observedGeneration": generation,
                "disruptionsAllowed": st.allowed,
                "currentHealthy": st.healthy,
                "desiredHealthy": st.desired,
                "expectedPods": st.expected,
                "conditions": [allowed_condition(prev_cond, st.allowed > 0, None, generation, &now)],
            }),
            Err(why) => {
                let observed = v.pointer("/status/observedGeneration").and_then(Value::as_i64).unwrap_or(0);
                let mut st = v.get("status").filter(|x| x.is_object()).cloned().unwrap_or_else(|| json!({}));
                st["disruptionsAllowed"] = json!(0);
                st["conditions"] = json!([allowed_condition(prev_cond, false, Some(&why), observed, &now)]);
                st
            }
        };
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
    take_disruption(sh, &mut s, &pod, &pv, ns, name, dry)?;
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

/// The budget's part of an eviction, [`budget::eviction_verdict`]'s: a pod
/// not running or terminating goes free, several budgets refuse, an
/// eviction the budget lets through may take one of its disruptions
/// (unless dry).
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
    // A budget that cannot be read allows nothing, as its failed sync
    // published.
    let broken = BudgetStatus { expected: 0, healthy: 0, desired: 0, allowed: 0 };
    let covering: Vec<BudgetStatus> = budgets.iter().map(|b| status(s, b).unwrap_or(broken)).collect();
    match budget::eviction_verdict(pod_health(pv), &covering) {
        Ok(Disruption::Free) => Ok(()),
        Ok(Disruption::TakesOne) => {
            if !dry && let [b] = budgets.as_slice() {
                let mut bv = b.value();
                bv["status"]["disruptionsAllowed"] = json!(covering[0].allowed - 1);
                bv["status"]["disruptedPods"][name] = json!(sh.time.time(sh.time.now()));
                s.commit(Kind::PodDisruptionBudget, &b.key, bv, false);
            }
            Ok(())
        }
        Err(budget::SEVERAL_BUDGETS) => Err(EvictionRefused::SeveralBudgets),
        Err(_) => {
            let (b, st) = (&budgets[0], covering[0]);
            Err(EvictionRefused::BudgetExhausted {
                budget: b.name().to_string(),
                desired: i64::from(st.desired),
                healthy: i64::from(st.healthy),
            })
        }
    }
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
            nodewarden_cluster::AdmissionDefaults::default(),
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

    fn set_spec(sh: &ServedCluster, spec: Value) {
        let mut s = sh.store.lock();
        let Some(b) = s.get(Kind::PodDisruptionBudget, "default/b") else { panic!("no budget") };
        let mut v = b.value();
        v["spec"] = spec;
        s.commit(Kind::PodDisruptionBudget, "default/b", v, false);
    }

    fn published(sh: &ServedCluster) -> Value {
        refresh(sh);
        let s = sh.store.lock();
        s.get(Kind::PodDisruptionBudget, "default/b").map(|b| b.value()["status"].clone()).unwrap_or_default()
    }

    /// Disagreement (b): the served cluster read a budget with neither
    /// field as `minAvailable: 1` and a malformed percentage as a float; the
    /// disruption controller allows nothing for the first and fails the
    /// sync of the second (`failSafe`: nothing allowed, `SyncFailed`).
    #[test]
    fn budgets_are_read_as_the_disruption_controller_reads_them() {
        let sh = cluster();
        let sel = json!({"matchLabels": {"app": "web"}});
        set_spec(&sh, json!({"maxUnavailable": "100%", "selector": sel}));
        let st = published(&sh);
        assert_eq!((st["expectedPods"].clone(), st["disruptionsAllowed"].clone()), (json!(1), json!(1)));
        set_spec(&sh, json!({"selector": sel}));
        let st = published(&sh);
        assert_eq!((st["expectedPods"].clone(), st["desiredHealthy"].clone()), (json!(0), json!(0)));
        assert_eq!(st["disruptionsAllowed"], 0);
        set_spec(&sh, json!({"maxUnavailable": "50.5%", "selector": sel}));
        let st = published(&sh);
        assert_eq!(st["disruptionsAllowed"], 0);
        assert_eq!(st["conditions"][0]["reason"], "SyncFailed");
        assert_eq!(evict(&sh, &eviction(None)).map_err(|r| ApiError::from(r).code()), Err(429));
    }

    /// Disagreement (c): an integer minAvailable expects every matching
    /// pod, terminating ones too (upstream `getExpectedPodCount`), none of
    /// which is healthy.
    #[test]
    fn an_integer_min_available_expects_terminating_pods_too() {
        let sh = cluster();
        {
            let mut s = sh.store.lock();
            let pod = json!({"metadata": {"name": "web-2", "namespace": "default", "uid": "u2", "labels": {"app": "web"},
                                          "deletionTimestamp": "2025-01-01T00:00:00Z", "finalizers": ["f"]},
                             "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
            s.commit(Kind::Pod, "default/web-2", pod, false);
        }
        let st = published(&sh);
        assert_eq!((st["expectedPods"].clone(), st["currentHealthy"].clone()), (json!(2), json!(1)));
        // Disagreement (d): evicting the terminating pod does not ask its
        // budget (upstream `canIgnorePDB`), though the budget has no room.
        let going = EvictionRequest { name: "web-2", ..eviction(None) };
        assert_eq!(evict(&sh, &going), Ok(()));
    }

    /// A Pending pod is evicted without asking its budget (upstream
    /// `canIgnorePDB`), though the budget has no room.
    #[test]
    fn a_pending_pod_goes_whatever_its_budget_says() {
        let sh = cluster();
        {
            let mut s = sh.store.lock();
            let Some(p) = s.get(Kind::Pod, "default/web-1") else { panic!("no pod") };
            let mut v = p.value();
            v["status"]["phase"] = json!("Pending");
            s.commit(Kind::Pod, "default/web-1", v, false);
        }
        assert_eq!(evict(&sh, &eviction(None)), Ok(()));
    }
}
