//! The workload controllers' part the served cluster plays when it keeps
//! scheduling facts (a scenario file with `cluster.scheduler` or
//! `enable-rescheduler`, the `critical-addon` built-in, or
//! [`ServeOptions::scheduler`](crate::ServeOptions)): a pod owned by a
//! controller (a ReplicaSet, StatefulSet, Job, ...) that is deleted or
//! starts terminating gets a replacement, as the simulator's cluster makes
//! one ([`nodewarden_cluster::Cluster`]'s recreation), so an addon the node
//! lifecycle controller evicted comes back unscheduled and the scheduler,
//! and then the rescheduler, have something to do.
//!
//! Which pods come back, under what name and how ready is decided by the
//! simulated cluster's rules ([`nodewarden_cluster::rules::recreate`]); this
//! module reads the JSON for them and stores the replacement: the old pod's
//! spec under the name `<name>-r<N>` (the first N free, counted from the
//! original name, with no upper bound), with a new uid, created now,
//! unbound and Pending. DaemonSet pods
//! (their controller makes one per node) and mirror pods are not
//! replaced, nor are bare pods. It follows the store's changes from the
//! resourceVersion it last saw, so a dropped or lagging subscription
//! misses nothing (a gap beyond the store's window is logged).
//!
//! Invariant: an owned pod is replaced at most once per deletion, and
//! nothing is recreated into a namespace that is going.

use std::collections::HashSet;
use std::sync::Arc;

use nodewarden_cluster::rules::recreate::{is_replaced, replacement_name, replacement_ready};
use nodewarden_model::Timestamp;
use nodewarden_model::scheduling::MIRROR_POD_ANNOTATION;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;
use tracing::{debug, warn};

use crate::cluster::ServedCluster;
use crate::resource::Kind;
use crate::store::{Change, EventType, Inner, key_of};

/// Follows pod deletions and creates the replacements.
pub struct Recreator {
    rx: broadcast::Receiver<Arc<Change>>,
    /// The last pod change handled.
    last_rv: u64,
    /// Pods replaced while still terminating (finalizers), so their final
    /// deletion is not replaced again.
    replaced: HashSet<String>,
}

/// True when the pod's controller would make a replacement
/// ([`is_replaced`]), read from its controller owner reference and its
/// mirror annotation.
pub fn replaced_by_owner(pod: &Value) -> bool {
    let mirror = pod
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION));
    // Owner references that cannot be read name no controller: nothing
    // recreates such a pod.
    let owner = nodewarden_objects::controller_owner(pod).ok().flatten();
    let owner_kind = owner.as_ref().map(|o| o.kind.as_str()).filter(|k| !k.is_empty());
    is_replaced(owner_kind == Some("DaemonSet"), mirror, owner_kind)
}

/// The pod `old` (deleted, or terminating) as its controller recreates it:
/// named `name`, with `uid`, created `now`, unbound and Pending.
pub fn replacement(old: &Value, name: &str, uid: &str, created: &str) -> Value {
    let mut v = old.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in ["resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers", "generateName"] {
            meta.remove(k);
        }
        meta.insert("name".into(), json!(name));
        meta.insert("uid".into(), json!(uid));
        meta.insert("creationTimestamp".into(), json!(created));
    }
    if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("nodeName");
    }
    let qos = old.pointer("/status/qosClass").cloned().unwrap_or_else(|| json!("BestEffort"));
    let mut status = Map::new();
    status.insert("phase".into(), json!("Pending"));
    status.insert("qosClass".into(), qos);
    // Not ready until started ([`replacement_ready`]).
    let had_ready = old
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c.get("type").and_then(Value::as_str) == Some("Ready")));
    if let Some(ready) = replacement_ready(had_ready) {
        status.insert(
            "conditions".into(),
            json!([{"type": "Ready", "status": ready.as_str(), "lastProbeTime": null, "lastTransitionTime": created}]),
        );
    }
    v["status"] = Value::Object(status);
    v
}

impl Recreator {
    /// Follows pod changes from now.
    pub fn subscribe(sh: &ServedCluster) -> Recreator {
        let mut s = sh.store.lock();
        let rv = s.rv();
        let rx = match s.watch(Kind::Pod, Some(rv)) {
            Ok(w) => w.rx,
            // From the current resourceVersion the window cannot have moved on.
            Err(_) => s.watch(Kind::Pod, None).map(|w| w.rx).unwrap_or_else(|_| broadcast::channel(16).1),
        };
        Recreator { rx, last_rv: rv, replaced: HashSet::new() }
    }

    /// Replaces the owned pods deleted (or terminating) since the last
    /// pass; returns how many it created.
    pub fn pass(&mut self, sh: &ServedCluster, now: Timestamp) -> usize {
        let mut changes: Vec<Arc<Change>> = Vec::new();
        let mut resume = false;
        loop {
            match self.rx.try_recv() {
                Ok(c) => changes.push(c),
                Err(broadcast::error::TryRecvError::Empty) => break,
                Err(broadcast::error::TryRecvError::Lagged(_) | broadcast::error::TryRecvError::Closed) => {
                    resume = true;
                    break;
                }
            }
        }
        if changes.is_empty() && !resume {
            return 0;
        }
        let mut s = sh.store.lock();
        if resume {
            // Start over from the last change handled: the store's window
            // has every change since (or says it has not).
            match s.watch(Kind::Pod, Some(self.last_rv)) {
                Ok(w) => {
                    changes = w.backlog;
                    self.rx = w.rx;
                }
                Err(e) => {
                    warn!(error = %e, "pod replacements: missed pod changes beyond the store's window");
                    let rv = s.rv();
                    changes.clear();
                    if let Ok(w) = s.watch(Kind::Pod, Some(rv)) {
                        self.rx = w.rx;
                    }
                    self.last_rv = rv;
                }
            }
        }
        let mut created = 0;
        for c in changes {
            if c.rv <= self.last_rv {
                continue;
            }
            self.last_rv = c.rv;
            let gone = c.kind == EventType::Deleted;
            let v = c.obj.value();
            let terminating = v.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null());
            if !gone && !terminating {
                continue;
            }
            let first_time =
                if gone { !self.replaced.remove(&c.obj.uid) } else { self.replaced.insert(c.obj.uid.clone()) };
            if first_time && replaced_by_owner(&v) {
                created += usize::from(recreate(&mut s, sh, &c.obj.key, &v, now));
            }
        }
        created
    }
}

/// Creates the replacement of the pod at `key` ([`replacement_name`]);
/// false when its namespace is going.
fn recreate(s: &mut Inner, sh: &ServedCluster, key: &str, old: &Value, now: Timestamp) -> bool {
    let new_key = replacement_name(key, |k| s.get(Kind::Pod, k).is_some());
    let (ns, name) = new_key.split_once('/').unwrap_or(("default", new_key.as_str()));
    let namespace_going = s
        .get(Kind::Namespace, ns)
        .is_none_or(|n| n.value().pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null()));
    if namespace_going {
        // The namespace is being deleted with its pods: nothing comes back.
        return false;
    }
    let uid = s.next_uid();
    let v = replacement(old, name, &uid, &sh.time.time(now));
    debug!(pod = key, replacement = %new_key, "the pod's controller recreates it");
    s.commit(Kind::Pod, &key_of(ns, name), v, false);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(owner: Option<(&str, bool)>, mirror: bool) -> Value {
        let mut v = json!({"metadata": {"name": "web-1", "namespace": "default", "uid": "u1", "resourceVersion": "7",
                                         "deletionTimestamp": "2025-01-01T00:00:00Z", "creationTimestamp": "2024-01-01T00:00:00Z"},
                           "spec": {"nodeName": "a", "containers": [{"name": "c", "image": "i"}]},
                           "status": {"phase": "Running", "qosClass": "Burstable"}});
        if let Some((kind, controller)) = owner {
            v["metadata"]["ownerReferences"] =
                json!([{"kind": kind, "name": "o", "uid": "ou", "controller": controller}]);
        }
        if mirror {
            v["metadata"]["annotations"] = json!({MIRROR_POD_ANNOTATION: "x"});
        }
        v
    }

    fn shared() -> ServedCluster {
        ServedCluster::new(
            crate::store::StoreLimits::default(),
            crate::TimeBase { unix_nanos_at_epoch: 1_700_000_000_000_000_000 },
            nodewarden_cluster::AdmissionDefaults::default(),
        )
    }

    fn names(sh: &ServedCluster) -> Vec<String> {
        sh.store.lock().snapshot(Kind::Pod).iter_from("", None).map(|o| o.key.clone()).collect()
    }

    /// Through the store: a deleted owned pod comes back as `-r1`, its own
    /// deletion as `-r2`; a bare pod does not; a pod terminating with a
    /// finalizer is replaced once, not again when it goes; nothing comes
    /// back into a namespace being deleted; and a dropped subscription
    /// loses no deletion.
    #[test]
    fn owned_pods_come_back_once_under_the_next_free_name() {
        let sh = shared();
        let now = Timestamp::EPOCH;
        let mut r = Recreator::subscribe(&sh);
        let owned = |name: &str| {
            let mut v = pod(Some(("ReplicaSet", true)), false);
            v["metadata"]["name"] = json!(name);
            v["metadata"].as_object_mut().map(|m| m.remove("deletionTimestamp"));
            v
        };
        {
            let mut s = sh.store.lock();
            s.commit(Kind::Namespace, "default", json!({"metadata": {"name": "default", "uid": "ns"}}), false);
            for name in ["web-1", "other"] {
                s.commit(Kind::Pod, &key_of("default", name), owned(name), false);
            }
            let mut bare = owned("bare");
            bare["metadata"].as_object_mut().map(|m| m.remove("ownerReferences"));
            s.commit(Kind::Pod, "default/bare", bare, false);
            for key in ["default/web-1", "default/bare"] {
                let v = s.get(Kind::Pod, key).map(|o| o.value()).unwrap_or_default();
                s.commit(Kind::Pod, key, v, true);
            }
        }
        assert_eq!(r.pass(&sh, now), 1);
        assert_eq!(names(&sh), ["default/other", "default/web-1-r1"]);
        let r1 = sh.store.lock().get(Kind::Pod, "default/web-1-r1").map(|o| o.value()).unwrap_or_default();
        assert!(r1.pointer("/spec/nodeName").is_none() && r1["status"]["phase"] == "Pending");
        {
            let mut s = sh.store.lock();
            s.commit(Kind::Pod, "default/web-1-r1", r1.clone(), true);
            // A dropped subscription (an injected watch drop) is resumed
            // from the last change handled.
            s.close_watches(Kind::Pod);
        }
        assert_eq!(r.pass(&sh, now), 1);
        assert_eq!(names(&sh), ["default/other", "default/web-1-r2"]);
        // Terminating (a finalizer keeps it): replaced now, not again.
        let mut terminating = owned("other");
        terminating["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
        sh.store.lock().commit(Kind::Pod, "default/other", terminating.clone(), false);
        assert_eq!(r.pass(&sh, now), 1);
        sh.store.lock().commit(Kind::Pod, "default/other", terminating, true);
        assert_eq!(r.pass(&sh, now), 0);
        assert_eq!(names(&sh), ["default/other-r1", "default/web-1-r2"]);
        // A namespace being deleted gets nothing back.
        {
            let mut s = sh.store.lock();
            let ns = json!({"metadata": {"name": "default", "uid": "ns", "deletionTimestamp": "2025-01-01T00:00:00Z"}});
            s.commit(Kind::Namespace, "default", ns, false);
            let v = s.get(Kind::Pod, "default/other-r1").map(|o| o.value()).unwrap_or_default();
            s.commit(Kind::Pod, "default/other-r1", v, true);
        }
        assert_eq!(r.pass(&sh, now), 0);
        assert_eq!(names(&sh), ["default/web-1-r2"]);
    }

    #[test]
    fn only_pods_a_controller_owns_are_replaced() {
        assert!(replaced_by_owner(&pod(Some(("ReplicaSet", true)), false)));
        assert!(replaced_by_owner(&pod(Some(("Job", true)), false)));
        assert!(!replaced_by_owner(&pod(Some(("DaemonSet", true)), false)));
        assert!(!replaced_by_owner(&pod(Some(("ReplicaSet", false)), false)), "not the controller");
        assert!(!replaced_by_owner(&pod(None, false)), "a bare pod");
        assert!(!replaced_by_owner(&pod(Some(("ReplicaSet", true)), true)), "a mirror pod");
    }

    #[test]
    fn the_replacement_is_the_spec_unbound_and_pending() {
        let r = replacement(&pod(Some(("ReplicaSet", true)), false), "web-1-r1", "u2", "2025-01-02T00:00:00Z");
        assert_eq!(r["metadata"]["name"], "web-1-r1");
        assert_eq!(r["metadata"]["uid"], "u2");
        assert_eq!(r["metadata"]["creationTimestamp"], "2025-01-02T00:00:00Z");
        assert!(r.pointer("/metadata/deletionTimestamp").is_none() && r.pointer("/metadata/resourceVersion").is_none());
        assert!(r.pointer("/spec/nodeName").is_none());
        assert_eq!(r["spec"]["containers"][0]["name"], "c");
        assert_eq!(r["status"], json!({"phase": "Pending", "qosClass": "Burstable"}));
        assert_eq!(r["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
    }
}
