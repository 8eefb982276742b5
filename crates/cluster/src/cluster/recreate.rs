//! Workload recreation: the part a pod's controller (a ReplicaSet, a Job,
//! ...) plays when one of its pods goes, so an evicted pod comes back
//! unscheduled and the scheduler and rescheduler have work.
//!
//! Invariant: only a cluster that tracks scheduling recreates, a
//! replacement never takes the name of a pod that exists, and it gets the
//! next uid like any new pod.

use crate::rules::pod_conditions::PodConditions;
use nodewarden_engine::Observation;

use super::Cluster;
use super::objects::SimPod;
use crate::rules::pod::POD_READY;
use crate::rules::recreate::{is_replaced, replacement_name, replacement_ready};

impl Cluster {
    /// The pod's controller creates its replacement, as a ReplicaSet does
    /// as soon as a pod is terminating or gone ([`crate::rules::recreate`]
    /// decides whether and under what name): same spec, a new uid,
    /// unscheduled and not Ready. Only when the cluster tracks scheduling.
    pub(super) fn recreate(&mut self, key: &str) -> Vec<Observation> {
        if !self.tracks_scheduling() {
            return Vec::new();
        }
        let Some(old) = self.pods.get(key) else { return Vec::new() };
        let Some(sched) = old.scheduling.as_ref() else { return Vec::new() };
        if !is_replaced(old.daemonset, sched.mirror, sched.controller_kind.as_deref()) {
            return Vec::new();
        }
        let new_key = replacement_name(key, |k| self.pods.get(k).is_some_and(|p| !p.deleted));
        self.next_uid += 1;
        let mut scheduling = sched.clone();
        scheduling.unschedulable_since = None;
        let conditions: PodConditions = replacement_ready(old.conditions.contains_key(POD_READY))
            .map(|ready| (POD_READY, ready))
            .into_iter()
            .collect();
        let pod = SimPod {
            key: new_key,
            uid: format!("uid-{}", self.next_uid),
            node: None,
            daemonset: false,
            terminating: false,
            tolerations: old.tolerations.clone(),
            conditions,
            reason: None,
            deleted: false,
            refuse_deletions: 0,
            scheduling: Some(scheduling),
            report_scheduling: self.report,
        };
        self.insert_pod(pod)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures::*;

    #[test]
    fn recreated_pod_gets_a_new_uid() {
        let mut c = cluster();
        c.delete_pod("default/p");
        c.add_pod(&pod_spec("default/p", "a"));
        let p = c.pod("default/p").unwrap();
        assert_eq!(p.uid, "uid-2");
        assert!(!p.deleted);
    }

    #[test]
    fn owned_pods_are_recreated_unscheduled_bare_and_daemonset_pods_are_not() {
        let mut c = world(&format!(
            "{NODES}pods:\n\
                 - {{name: d/web-1, node: a, owner: ReplicaSet, labels: {{app: web}}, requests: {{cpu: 100m}}, grace-period: 0s}}\n\
                 - {{name: d/bare, node: a, grace-period: 0s}}\n\
                 - {{name: d/ds, node: a, daemonset: true, grace-period: 0s}}\n"
        ));
        let r = c.apply_action(t(1), &evict(1, &c, "d/web-1", None));
        let Some(Observation::PodUpserted(new)) = r.observations.get(2) else { panic!("{r:?}") };
        assert_eq!(new.key, "d/web-1-r1");
        assert_eq!(new.node, None);
        assert_ne!(new.uid, c.pod("d/web-1").unwrap().uid);
        let p = c.pod("d/web-1-r1").unwrap();
        assert_eq!(p.scheduling.as_ref().unwrap().labels["app"], "web");
        assert_eq!(p.requests().cpu_millis, 100);
        assert_eq!(p.ready(), Some(false));
        // Its own replacement is named from the same base.
        c.housekeeping(t(2));
        assert_eq!(bound(&c, "d/web-1-r1").as_deref(), Some("a"));
        assert_eq!(c.pod("d/web-1-r1").unwrap().ready(), Some(true), "started by its kubelet");
        c.apply_action(t(3), &evict(2, &c, "d/web-1-r1", None));
        assert!(c.pod("d/web-1-r2").is_some());
        let before = c.pods().count();
        c.apply_action(t(4), &evict(3, &c, "d/bare", None));
        c.apply_action(t(4), &evict(4, &c, "d/ds", None));
        assert_eq!(c.pods().count(), before, "nothing recreated");
        assert_eq!(replacement_base("d/web-1-r12"), "d/web-1");
        assert_eq!(replacement_base("d/worker"), "d/worker");
    }
}
