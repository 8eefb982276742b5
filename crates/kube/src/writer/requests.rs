//! Each action as the API requests that carry it out (a taint patch
//! guarded by the taints it read, a uid-preconditioned deletion or
//! eviction, a pod status patch naming the uid and only what it sets, an Event),
//! and the objects those requests return read back as observations.
//!
//! Every object a request returns, and every read, is decoded as any JSON
//! ([`Whole`]) and read as the watches read (leniently): a field our types
//! cannot hold never makes a write impossible, nor an accepted write look
//! failed. A 2xx whose body cannot be read at all is an accepted write
//! whose answer says nothing ([`unreadable`]).

use std::sync::atomic::Ordering;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Node, NodeCondition as KNodeCondition, ObjectReference, Pod};
use k8s_openapi::api::events::v1::Event as KEvent;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, Preconditions as KPreconditions};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use nodewarden_engine::{ActionKind, DISRUPTION_TARGET_TAKEN_BACK, EventType, ObjectRef, Observation};
use nodewarden_model::{DeletionMode, NodeCondition, Taint, Timestamp};
use serde_json::{Value, json};

use crate::trimmed::{Readable, Trimmed};
use crate::whole::Whole;

use super::*;

fn time(t: Timestamp) -> Option<Time> {
    k8s_openapi::jiff::Timestamp::from_nanosecond(i128::from(t.as_nanos())).ok().map(Time)
}

pub(super) fn pod_name(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("default", key))
}

/// A pod as a write returned it, read with the same detail as the
/// watches read it (a reading without the rescheduler's facts would make
/// the engine forget them until the watch delivered the pod again).
fn pod_state(key: &str, pod: Option<&Whole<Pod>>, detail: Detail) -> Vec<Observation> {
    match pod {
        None => vec![Observation::PodDeleted { key: key.to_string() }],
        Some(p) => pod_reading(&p.value, wall_clock_now(), detail).map(Observation::PodUpserted).into_iter().collect(),
    }
}

/// A node as a write returned it; see [`pod_state`].
fn node_state(name: &str, node: Option<&Whole<Node>>, detail: Detail) -> Vec<Observation> {
    match node {
        None => vec![Observation::NodeDeleted { name: name.to_string() }],
        Some(n) => {
            node_reading(&n.value, wall_clock_now(), detail).map(Observation::NodeUpserted).into_iter().collect()
        }
    }
}

/// A node read after a refusal: its state when the read answered (gone
/// when the API said so), nothing when the read failed: a failed read is
/// no news, and must not read as a deletion.
pub(super) fn node_read(name: &str, read: ApiResult<Option<Whole<Node>>>, detail: Detail) -> Vec<Observation> {
    read.map_or_else(|_| Vec::new(), |n| node_state(name, n.as_ref(), detail))
}

/// A pod read after a refusal; see [`node_read`].
pub(super) fn pod_read(key: &str, read: ApiResult<Option<Whole<Pod>>>, detail: Detail) -> Vec<Observation> {
    read.map_or_else(|_| Vec::new(), |p| pod_state(key, p.as_ref(), detail))
}

/// Whether `e` is an answer kube-rs could not decode after the API server
/// accepted the request: it checks the status first (4xx and 5xx are
/// [`kube::Error::Api`]), so a decoding error is a 2xx body that is not
/// JSON. The write was made; only its answer is lost.
pub(super) fn unreadable(e: &kube::Error) -> bool {
    matches!(e, kube::Error::SerdeError(_))
}

/// A node's taints as the server holds them: none when `spec.taints` is
/// absent, `None` when it is not a list (nothing a patch could be
/// computed from).
pub(super) fn taints_of(node: &Whole<Node>) -> Option<Vec<Value>> {
    match node.at("/spec/taints") {
        None => Some(Vec::new()),
        Some(Value::Array(taints)) => Some(taints.clone()),
        Some(_) => None,
    }
}

/// One object read leniently ([`Trimmed`]): `Some(None)` when it is gone.
pub(super) async fn get_reading<K: Readable>(
    api: Api<Trimmed<K>>,
    name: &str,
) -> ApiResult<Option<Option<Observation>>> {
    Ok(api.get_opt(name).await?.map(|o| o.reading))
}

/// The Eviction to POST. Not kube-rs's `Api::evict`: kube-core 5 writes
/// its delete options as `delete_options`, a field the API server does not
/// know and drops (a warning at most), so the uid precondition and the
/// grace period would silently not apply; here they are `deleteOptions`,
/// as policy/v1 spells them.
fn eviction(ns: &str, name: &str, uid: &str, grace_period_seconds: Option<u32>) -> Eviction {
    Eviction {
        metadata: ObjectMeta { name: Some(name.to_string()), namespace: Some(ns.to_string()), ..ObjectMeta::default() },
        delete_options: Some(DeleteOptions {
            grace_period_seconds: grace_period_seconds.map(i64::from),
            preconditions: Some(KPreconditions { uid: Some(uid.to_string()), resource_version: None }),
            ..DeleteOptions::default()
        }),
    }
}

fn same_taint(k: &Value, t: &Taint) -> bool {
    k.get("key").and_then(Value::as_str) == Some(t.key.as_str())
        && k.get("effect").and_then(Value::as_str) == Some(t.effect.as_str())
}

/// `old` (the server's taints, each kept as it was written) with `remove`
/// taken out and `add` put in (replacing a taint of the same key and
/// effect), in the API's form.
fn patched_taints(old: &[Value], add: &[Taint], remove: &[Taint]) -> Vec<Value> {
    let mut taints = old.to_vec();
    taints.retain(|k| !remove.iter().any(|t| same_taint(k, t)));
    for t in add {
        taints.retain(|k| !same_taint(k, t));
        let mut taint = serde_json::Map::new();
        taint.insert("key".into(), json!(t.key));
        if !t.value.is_empty() {
            taint.insert("value".into(), json!(t.value));
        }
        taint.insert("effect".into(), json!(t.effect.as_str()));
        if let Some(at) = t.time_added.and_then(time) {
            taint.insert("timeAdded".into(), json!(at));
        }
        taints.push(Value::Object(taint));
    }
    taints
}

/// The `pods/status` strategic merge patch for these pod status actions:
/// the uid as precondition (upstream's `PatchPodStatus` puts it there),
/// and only what each action sets: the Ready condition False
/// (`MarkPodsNotReady`), the `DisruptionTarget` condition (the taint
/// manager's, before its deletion), `NodeLost` as the status's reason
/// (legacy mode's, before its deletion). Transitions are stamped `now`.
pub(super) fn pod_status_patch(uid: &str, actions: &[nodewarden_engine::Action], now: Timestamp) -> Value {
    let at = time(now);
    let mut conditions = Vec::new();
    let mut status = serde_json::Map::new();
    for a in actions {
        match &a.kind {
            ActionKind::MarkPodNotReady { .. } => conditions.push(json!({
                "type": "Ready",
                "status": "False",
                "lastTransitionTime": at,
            })),
            ActionKind::AddPodDisruptionTarget { .. } => conditions.push(json!({
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "DeletionByTaintManager",
                "message": "Taint manager: deleting due to NoExecute taint",
                "lastTransitionTime": at,
            })),
            // Conditions merge field by field: the reason and message
            // are replaced too, or the taint manager's "deleting" would
            // stay beside False.
            ActionKind::ClearPodDisruptionTarget { .. } => conditions.push(json!({
                "type": "DisruptionTarget",
                "status": "False",
                "reason": DISRUPTION_TARGET_TAKEN_BACK.0,
                "message": DISRUPTION_TARGET_TAKEN_BACK.1,
                "lastTransitionTime": at,
            })),
            ActionKind::SetPodNodeLost { pod, node, .. } => {
                let (_, name) = pod_name(pod);
                status.insert("reason".into(), json!("NodeLost"));
                status.insert(
                    "message".into(),
                    json!(format!("Node {node} which was running pod {name} is unresponsive")),
                );
            }
            _ => {}
        }
    }
    if !conditions.is_empty() {
        status.insert("conditions".into(), Value::Array(conditions));
    }
    json!({"metadata": {"uid": uid}, "status": status})
}

/// Default create/update parameters (a static, so request futures may
/// borrow it).
static POST: PostParams = PostParams { dry_run: false, field_manager: None };

/// Conflict retries for a write recomputed on a fresh read (upstream's
/// `retry.DefaultRetry` makes 5 attempts).
const CONFLICT_ATTEMPTS: usize = 5;

impl Writer {
    /// One action as its API requests: one `match` over every action kind, so
    /// the compiler checks each has its requests; the longer ones are steps
    /// of their own below.
    pub(super) async fn write(&self, sending: &Sending) -> ApiResult<Attempt> {
        let Some(first) = sending.first() else { return Ok(Attempt::Done(Vec::new())) };
        let kind = &first.kind;
        match kind {
            ActionKind::UpdateNodeConditions { node, conditions, version } => {
                self.update_node_conditions(node, conditions, *version).await
            }
            ActionKind::PatchNodeTaints { node, add, remove, .. } => self.patch_node_taints(node, add, remove).await,
            ActionKind::PatchNodeLabels { node, labels } => {
                let api = Api::<Whole<Node>>::all(self.client.clone());
                let patch = json!({"metadata": {"labels": labels}});
                let pp = PatchParams::default();
                let merge = Patch::Merge(&patch);
                match self.send(|| api.patch(node, &pp, &merge)).await {
                    Ok(n) => Ok(Attempt::Done(node_state(node, Some(&n), self.opts.detail))),
                    Err(e) if unreadable(&e) => Ok(Attempt::Done(Vec::new())),
                    Err(e) if code(&e) == Some(404) => {
                        Ok(Attempt::Refused(e.to_string(), node_state(node, None, self.opts.detail)))
                    }
                    Err(e) => Err(e),
                }
            }
            ActionKind::MarkPodNotReady { pod, uid }
            | ActionKind::SetPodNodeLost { pod, uid, .. }
            | ActionKind::AddPodDisruptionTarget { pod, uid }
            | ActionKind::ClearPodDisruptionTarget { pod, uid } => self.pod_status(pod, uid, sending).await,
            ActionKind::DeletePod { pod, uid, mode, .. } => self.delete_pod(pod, uid, *mode, None).await,
            ActionKind::EvictForAddon { pod, uid, grace, .. } => {
                self.delete_pod(pod, uid, DeletionMode::Evict, *grace).await
            }
            ActionKind::RecordEvent(_) => Ok(Attempt::Done(Vec::new())),
        }
    }

    /// The Ready and pressure conditions' write: its own step because it is
    /// one guarded request with its own answer to a conflict.
    async fn update_node_conditions(
        &self,
        node: &str,
        conditions: &[NodeCondition],
        version: u64,
    ) -> ApiResult<Attempt> {
        // One request, as upstream's UpdateStatus from its cache: a
        // strategic merge patch of the conditions (merged by type),
        // guarded by the resourceVersion the decision was made on.
        // Decided on an older node (a kubelet's post came since),
        // it is refused with 409 and the engine decides again from
        // the node as it is, as upstream's conflict makes it
        // recompute.
        let api = Api::<Whole<Node>>::all(self.client.clone());
        let list: Vec<KNodeCondition> = conditions
            .iter()
            .map(|c| KNodeCondition {
                type_: c.kind.as_str().to_string(),
                status: c.status.as_str().to_string(),
                reason: Some(c.reason.clone()),
                message: Some(c.message.clone()),
                last_heartbeat_time: time(c.last_heartbeat),
                last_transition_time: time(c.last_transition),
            })
            .collect();
        // Never a status write without a precondition. Decided on a node
        // whose resourceVersion the engine does not know (0: one of our
        // own writes' answers came without the node, or the version is not
        // a number): read it, hand the engine what the read shows before
        // the write is judged (a heartbeat it reveals withdraws the write),
        // and guard the write with the version read.
        let version = if version != 0 {
            version.to_string()
        } else {
            let Some(cur) = self.call(|| api.get_opt(node)).await? else {
                return Ok(Attempt::Refused(
                    format!("nodes {node:?} not found"),
                    node_state(node, None, self.opts.detail),
                ));
            };
            let Some(read) = cur.metadata.resource_version.clone() else {
                return Ok(Attempt::Refused(
                    format!("nodes {node:?} has no resourceVersion to guard the write with"),
                    node_state(node, Some(&cur), self.opts.detail),
                ));
            };
            for o in node_state(node, Some(&cur), self.opts.detail) {
                let _ = self.answers.send(Input::Observe(o));
            }
            read
        };
        let body = json!({"metadata": {"resourceVersion": version}, "status": {"conditions": list}});
        let pp = PatchParams::default();
        let patch = Patch::Strategic(&body);
        match self.send(|| api.patch_status(node, &pp, &patch)).await {
            Ok(n) => {
                self.taints_seen.remember(&n);
                Ok(Attempt::Done(node_state(node, Some(&n), self.opts.detail)))
            }
            Err(e) if unreadable(&e) => Ok(Attempt::Done(Vec::new())),
            Err(e) if code(&e) == Some(409) || code(&e) == Some(404) => {
                let fresh = self.call(|| api.get_opt(node)).await;
                Ok(Attempt::Refused(e.to_string(), node_read(node, fresh, self.opts.detail)))
            }
            Err(e) => Err(e),
        }
    }

    /// A taint patch: guarded by the node's taints as this writer's last
    /// request to the node returned them, with no read first (a zone
    /// outage taints each node after writing its Unknown status, whose
    /// answer shows its taints); read, recompute and patch again when
    /// that guard fails or nothing was remembered, at most
    /// [`CONFLICT_ATTEMPTS`] times. Its own step for that loop.
    async fn patch_node_taints(&self, node: &str, add: &[Taint], remove: &[Taint]) -> ApiResult<Attempt> {
        let api = Api::<Whole<Node>>::all(self.client.clone());
        let mut last = String::new();
        // Guarded by the taints it read, not by the whole node's
        // resourceVersion: a kubelet's status post between the read
        // and the patch changes the node, not its taints, and need
        // not cost a conflict and a second patch (under load, with
        // every recovering kubelet posting, most taint patches
        // conflicted once). Falls back to the resourceVersion when
        // the test cannot be written (no taints yet) or failed for
        // a reason other than the taints (a 422 the JSON reading
        // of the taints cannot explain).
        let mut guard_on_taints = true;
        let mut remembered = self.taints_seen.forget(node);
        for _ in 0..CONFLICT_ATTEMPTS {
            // The remembered taints stand for a read only when they make
            // the patch a change: "already so" is for a fresh read to say.
            let from_memory = remembered.take().filter(|seen| patched_taints(&seen.taints, add, remove) != seen.taints);
            let (old, cur, seen_version) = match from_memory {
                Some(seen) => (seen.taints, None, seen.version),
                None => {
                    let Some(cur) = self.send(|| api.get_opt(node)).await? else {
                        return Ok(Attempt::Refused(
                            format!("nodes {node:?} not found"),
                            node_state(node, None, self.opts.detail),
                        ));
                    };
                    let Some(taints) = taints_of(&cur) else {
                        return Ok(Attempt::Refused(
                            format!("nodes {node:?}: spec.taints is not a list; nothing to patch it from"),
                            node_state(node, Some(&cur), self.opts.detail),
                        ));
                    };
                    (taints, Some(cur), None)
                }
            };
            let taints = patched_taints(&old, add, remove);
            if let Some(cur) = &cur
                && taints == old
            {
                self.taints_seen.remember(cur);
                return Ok(Attempt::Done(node_state(node, Some(cur), self.opts.detail)));
            }
            let read = match &cur {
                Some(cur) => cur.at("/spec/taints").cloned(),
                // A node the answer showed without taints has no
                // `spec.taints` to test: its resourceVersion guards.
                None => (!old.is_empty()).then(|| Value::Array(old.clone())),
            };
            let guarded = (guard_on_taints || cur.is_none()).then_some(read).flatten().and_then(|old| {
                serde_json::from_value::<json_patch::Patch>(json!([
                    {"op": "test", "path": "/spec/taints", "value": old},
                    {"op": "replace", "path": "/spec/taints", "value": taints},
                ]))
                .ok()
            });
            let version = cur.as_ref().map_or(seen_version, |c| c.metadata.resource_version.clone());
            let patch = match (guarded, version) {
                (Some(ops), _) => Patch::Json::<Value>(ops),
                (None, Some(version)) => Patch::Merge(json!({
                    "metadata": {"resourceVersion": version},
                    "spec": {"taints": taints},
                })),
                // Nothing to guard with: read first.
                (None, None) => continue,
            };
            let pp = PatchParams::default();
            match self.send(|| api.patch(node, &pp, &patch)).await {
                Ok(n) => {
                    self.taints_seen.remember(&n);
                    return Ok(Attempt::Done(node_state(node, Some(&n), self.opts.detail)));
                }
                Err(e) if unreadable(&e) => return Ok(Attempt::Done(Vec::new())),
                Err(e) if code(&e) == Some(409) => last = e.to_string(),
                // Guarded by a remembered node that has changed since (a
                // 409 above, or a failed test): read it, and guard by what
                // the read shows.
                Err(e) if code(&e) == Some(422) && cur.is_none() => last = e.to_string(),
                // The taints changed since the read (the test
                // failed), or the test itself could not be met:
                // read again; the next attempt is guarded by the
                // resourceVersion, which cannot be misread.
                Err(e) if code(&e) == Some(422) && matches!(patch, Patch::Json(_)) => {
                    last = e.to_string();
                    guard_on_taints = false;
                }
                Err(e) if code(&e) == Some(404) => {
                    return Ok(Attempt::Refused(e.to_string(), node_state(node, None, self.opts.detail)));
                }
                Err(e) => return Err(e),
            }
        }
        let fresh = self.call(|| api.get_opt(node)).await;
        Ok(Attempt::Refused(last, node_read(node, fresh, self.opts.detail)))
    }

    /// A pod deletion (plain, or through the Eviction API), preconditioned
    /// on the pod's uid, with `grace` as `gracePeriodSeconds` when given.
    async fn delete_pod(
        &self,
        pod: &str,
        uid: &str,
        mode: DeletionMode,
        grace: Option<nodewarden_model::Span>,
    ) -> ApiResult<Attempt> {
        let (ns, name) = pod_name(pod);
        let api = Api::<Whole<Pod>>::namespaced(self.client.clone(), ns);
        let dp = DeleteParams {
            preconditions: Some(Preconditions { uid: Some(uid.to_string()), resource_version: None }),
            grace_period_seconds: grace.map(|g| g.as_secs_f64().ceil().max(0.0) as u32),
            ..DeleteParams::default()
        };
        let result = match mode {
            DeletionMode::Delete => self.send(|| api.delete(name, &dp)).await.map(|r| r.left()),
            DeletionMode::Evict => {
                let eviction = eviction(ns, name, uid, dp.grace_period_seconds);
                let pp = PostParams::default();
                self.send(|| api.create_subresource::<_, serde_json::Value>("eviction", name, &pp, &eviction))
                    .await
                    .map(|_| None)
            }
        };
        match result {
            Ok(Some(p)) if p.at("/metadata/deletionTimestamp").is_some() => {
                Ok(Attempt::Done(pod_state(pod, Some(&p), self.opts.detail)))
            }
            // Gone at once (a Status), or accepted with an answer that
            // cannot be read: the deletion was made either way.
            Ok(_) => Ok(Attempt::Done(pod_state(pod, None, self.opts.detail))),
            Err(e) if unreadable(&e) => Ok(Attempt::Done(pod_state(pod, None, self.opts.detail))),
            // Already gone: what the deletion wanted, but not a deletion
            // of ours (it is not counted as one).
            Err(e) if code(&e) == Some(404) => Ok(Attempt::Gone(pod_state(pod, None, self.opts.detail))),
            Err(e) if matches!(code(&e), Some(409 | 429)) => {
                let fresh = self.call(|| api.get_opt(name)).await;
                Ok(Attempt::Refused(e.to_string(), pod_read(pod, fresh, self.opts.detail)))
            }
            Err(e) => Err(e),
        }
    }

    /// A pod status write: one strategic merge patch of `pods/status`,
    /// carrying every action still in the write (a not-ready mark and a
    /// `DisruptionTarget` waiting together go as one), guarded by the
    /// pod's uid, with no read before it. The patch names only the fields
    /// it sets (conditions merge by type), so whatever else the status
    /// holds, fields of a newer API than ours included, stays as the
    /// server has it; a PUT of a pod decoded with our types would erase
    /// them, on exactly the pods whose kubelets cannot put them back. The
    /// uid in the patch is upstream's precondition (`PatchPodStatus`): a
    /// pod re-created under the same name answers 409, and the write is
    /// refused with the pod as it now is.
    async fn pod_status(&self, key: &str, uid: &str, sending: &Sending) -> ApiResult<Attempt> {
        let (ns, name) = pod_name(key);
        let api = Api::<Whole<Pod>>::namespaced(self.client.clone(), ns);
        let pp = PatchParams::default();
        let result = self
            .send(|| {
                // Built at each attempt from the actions still in the
                // write: one withdrawn at the last judgement is not sent.
                let body = pod_status_patch(uid, &sending.live(), wall_clock_now());
                let api = api.clone();
                let pp = pp.clone();
                async move { api.patch_status(name, &pp, &Patch::Strategic(body)).await }
            })
            .await;
        match result {
            Ok(p) => Ok(Attempt::Done(pod_state(key, Some(&p), self.opts.detail))),
            Err(e) if unreadable(&e) => Ok(Attempt::Done(Vec::new())),
            Err(e) if matches!(code(&e), Some(404 | 409)) => {
                let fresh = self.call(|| api.get_opt(name)).await;
                Ok(Attempt::Refused(e.to_string(), pod_read(key, fresh, self.opts.detail)))
            }
            Err(e) => Err(e),
        }
    }

    /// An Event in events.k8s.io/v1, or core/v1 where that is not served;
    /// `folded` similar Events waited with it (the writer's queue folds
    /// them): it goes out once, counted `1 + folded` times (`series` in
    /// events.k8s.io/v1, `count` in core/v1), first seen when the first
    /// was decided.
    pub(super) async fn record_event(
        &self,
        since: Instant,
        ev: &nodewarden_engine::Event,
        folded: u32,
    ) -> ApiResult<()> {
        let now = k8s_openapi::jiff::Timestamp::now();
        let first = now.checked_sub(since.elapsed()).unwrap_or(now);
        let count = i32::try_from(folded).unwrap_or(i32::MAX - 1).saturating_add(1);
        let (kind, ns, name) = match &ev.object {
            ObjectRef::Node(n) => ("Node", "default".to_string(), n.clone()),
            ObjectRef::Pod(p) => {
                let (ns, name) = pod_name(p);
                ("Pod", ns.to_string(), name.to_string())
            }
        };
        let regarding = ObjectReference {
            kind: Some(kind.into()),
            api_version: Some("v1".into()),
            name: Some(name.clone()),
            namespace: (kind == "Pod").then(|| ns.clone()),
            ..ObjectReference::default()
        };
        let type_ = match ev.kind {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        };
        let meta = ObjectMeta {
            generate_name: Some(format!("{name}.")),
            namespace: Some(ns.clone()),
            ..ObjectMeta::default()
        };
        if !self.core_events.load(Ordering::Relaxed) {
            let e = KEvent {
                metadata: meta.clone(),
                event_time: Some(MicroTime(first)),
                series: (count > 1)
                    .then_some(k8s_openapi::api::events::v1::EventSeries { count, last_observed_time: MicroTime(now) }),
                reason: Some(ev.reason.to_string()),
                note: Some(ev.message.clone()),
                type_: Some(type_.into()),
                action: Some(ev.reason.to_string()),
                regarding: Some(regarding.clone()),
                reporting_controller: Some(self.opts.component.clone()),
                reporting_instance: Some(if self.opts.instance.is_empty() {
                    self.opts.component.clone()
                } else {
                    self.opts.instance.clone()
                }),
                ..KEvent::default()
            };
            let api = Api::<KEvent>::namespaced(self.client.clone(), &ns);
            match self.call(|| api.create(&POST, &e)).await {
                Ok(_) => return Ok(()),
                Err(e) if unreadable(&e) => return Ok(()),
                Err(e)
                    if code(&e) == Some(404)
                        && !matches!(&e, kube::Error::Api(s) if s.details.as_ref().is_some_and(|d| !d.name.is_empty())) =>
                {
                    tracing::info!("events.k8s.io/v1 is not served; recording core/v1 Events");
                    self.core_events.store(true, Ordering::Relaxed);
                }
                Err(e) => return Err(e),
            }
        }
        let e = k8s_openapi::api::core::v1::Event {
            metadata: meta,
            involved_object: regarding,
            reason: Some(ev.reason.to_string()),
            message: Some(ev.message.clone()),
            type_: Some(type_.into()),
            source: Some(k8s_openapi::api::core::v1::EventSource {
                component: Some(self.opts.component.clone()),
                host: None,
            }),
            first_timestamp: Some(Time(first)),
            last_timestamp: Some(Time(now)),
            count: Some(count),
            reporting_component: Some(self.opts.component.clone()),
            reporting_instance: Some(self.opts.instance.clone()),
            ..Default::default()
        };
        let api = Api::<k8s_openapi::api::core::v1::Event>::namespaced(self.client.clone(), &ns);
        match self.call(|| api.create(&POST, &e)).await {
            Err(e) if !unreadable(&e) => Err(e),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod eviction_body_tests {
    use super::*;

    /// What goes over the wire: `deleteOptions` with the uid precondition
    /// and the grace period, which kube-rs's own `evict` would misspell.
    #[test]
    fn the_eviction_body_spells_delete_options_as_the_api_does() {
        let v = serde_json::to_value(eviction("kube-system", "p", "u-1", Some(10))).expect("json");
        assert_eq!(v["apiVersion"], "policy/v1");
        assert_eq!(v["kind"], "Eviction");
        assert_eq!(v["metadata"]["name"], "p");
        assert_eq!(v["deleteOptions"]["gracePeriodSeconds"], 10);
        assert_eq!(v["deleteOptions"]["preconditions"]["uid"], "u-1");
        assert!(v.get("delete_options").is_none());
        let v = serde_json::to_value(eviction("ns", "p", "u", None)).expect("json");
        assert!(v["deleteOptions"].get("gracePeriodSeconds").is_none(), "no grace: the pod's own");
        // kube-rs's body, for the record: the reason this module builds its own.
        let req = kube::core::Request::new("/api/v1/namespaces/ns/pods")
            .evict("p", &kube::api::EvictParams::default())
            .expect("request");
        let body: serde_json::Value = serde_json::from_slice(req.body()).expect("json");
        assert!(
            body.get("deleteOptions").is_none() && body.as_object().is_some_and(|m| m.contains_key("delete_options"))
        );
    }
}

#[cfg(test)]
mod pod_status_patch_tests {
    use nodewarden_engine::{Action, ActionId};

    use super::*;

    /// One patch for a mark and a `DisruptionTarget` that waited together:
    /// the uid as precondition and the two conditions, merged by type on
    /// the server, and nothing else. A field of the pod's status this
    /// patch does not name (a newer API's, one our types cannot read) is
    /// left as the server has it: there is no PUT of a decoded pod.
    #[test]
    fn a_status_patch_names_the_uid_and_only_what_it_sets() {
        let at = Timestamp::from_millis(1_764_300_000_000);
        let mark =
            Action { id: ActionId(1), kind: ActionKind::MarkPodNotReady { pod: "ns/p".into(), uid: "u-1".into() } };
        let target = Action {
            id: ActionId(2),
            kind: ActionKind::AddPodDisruptionTarget { pod: "ns/p".into(), uid: "u-1".into() },
        };
        let body = pod_status_patch("u-1", &[mark, target], at);
        let stamp = serde_json::to_value(time(at)).expect("time");
        assert_eq!(
            body,
            json!({
                "metadata": {"uid": "u-1"},
                "status": {"conditions": [
                    {"type": "Ready", "status": "False", "lastTransitionTime": stamp},
                    {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                     "message": "Taint manager: deleting due to NoExecute taint", "lastTransitionTime": stamp},
                ]}
            })
        );
        let lost = Action {
            id: ActionId(3),
            kind: ActionKind::SetPodNodeLost { pod: "ns/p".into(), uid: "u-1".into(), node: "n1".into() },
        };
        assert_eq!(
            pod_status_patch("u-1", &[lost], at),
            json!({"metadata": {"uid": "u-1"},
                   "status": {"reason": "NodeLost", "message": "Node n1 which was running pod p is unresponsive"}})
        );
    }
}
