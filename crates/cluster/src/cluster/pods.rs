//! Pods in the simulated cluster: creation (admission and uid), the
//! scenario's and the scheduler's writes, and user deletions.
//!
//! Invariant: a pod is never removed from the map; a deleted pod stays,
//! marked, with its uid remembered as deleted, so a later write that names
//! it can be judged; every change moves the cluster's epoch.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use nodewarden_engine::Observation;
use nodewarden_model::{ConditionStatus, Placement, PodScheduling, Timestamp, Toleration};
use tracing::warn;

use super::Cluster;
use super::objects::SimPod;
use crate::admission::AdmissionDefaults;
use crate::rules::pod::{POD_READY, POD_SCHEDULED};
use crate::rules::pod_conditions::PodConditions;
use crate::scenario::{PodSchedulingSpec, PodSpec};

impl Cluster {
    /// The pod's current or last state (deleted pods stay, marked).
    pub fn pod(&self, key: &str) -> Option<&SimPod> {
        self.pods.get(key)
    }

    /// The pods of one namespace ever created, deleted ones included, by key.
    pub fn pods_in<'a>(&'a self, namespace: &str) -> impl Iterator<Item = &'a SimPod> + 'a {
        let start = format!("{namespace}/");
        self.pods
            .range::<str, _>((Bound::Included(start.as_str()), Bound::Unbounded))
            .take_while(move |(k, _)| k.starts_with(&start))
            .map(|(_, p)| p)
    }

    /// Every pod ever created, deleted ones included, by key.
    pub fn pods(&self) -> impl Iterator<Item = &SimPod> {
        self.pods.values()
    }

    /// The cluster's pods, by key, the cluster itself given up: for a back
    /// end that copies them into its own storage and can free each typed
    /// pod as it goes (the served cluster at 300k pods would otherwise
    /// hold both copies at once).
    pub fn into_pods(self) -> BTreeMap<String, SimPod> {
        self.pods
    }

    /// Creates a pod: admission adds its default tolerations, and it gets
    /// the next uid. A deleted pod of the same name is replaced.
    pub fn add_pod(&mut self, spec: &PodSpec) -> Vec<Observation> {
        self.add_pod_at(spec, Timestamp::EPOCH)
    }

    /// [`Cluster::add_pod`] at `now` (what `unschedulable-since: now`
    /// stands for).
    pub fn add_pod_at(&mut self, spec: &PodSpec, now: Timestamp) -> Vec<Observation> {
        let pod = self.new_pod(spec, now);
        self.insert_pod(pod)
    }

    /// [`Cluster::add_pod`] for building a cluster before anything watches
    /// it: no observation is made (a generated fleet's million pods are
    /// listed once, when the controller starts).
    pub fn add_pod_unobserved(&mut self, spec: &PodSpec) {
        let pod = self.new_pod(spec, Timestamp::EPOCH);
        self.epoch += 1;
        self.pods.insert(pod.key.clone(), pod);
    }

    /// The pod a spec describes, admitted, with the next uid.
    fn new_pod(&mut self, spec: &PodSpec, now: Timestamp) -> SimPod {
        if self.pods.get(&spec.name).is_some_and(|p| !p.deleted) {
            warn!(pod = %spec.name, "add-pod: the pod exists; replacing it");
        }
        self.next_uid += 1;
        let uid = format!("uid-{}", self.next_uid);
        let mut pod = pod_from_spec(spec, now, &self.admission, self.tracks_scheduling(), self.report, uid);
        pod.tolerations = self.shared_tolerations(pod.tolerations);
        pod
    }

    /// The one copy of `tolerations` the cluster keeps for every pod that
    /// has the same.
    fn shared_tolerations(&mut self, tolerations: Arc<[Toleration]>) -> Arc<[Toleration]> {
        match self.toleration_sets.get(&*tolerations) {
            Some(shared) => Arc::clone(shared),
            None => {
                self.toleration_sets.insert(Arc::clone(&tolerations));
                tolerations
            }
        }
    }

    pub(super) fn insert_pod(&mut self, pod: SimPod) -> Vec<Observation> {
        self.epoch += 1;
        let snapshot = pod.snapshot();
        self.pods.insert(pod.key.clone(), pod);
        vec![Observation::PodUpserted(snapshot)]
    }

    /// Deletes a pod (as a user would); its last state stays checkable. A
    /// pod a controller owns is recreated when the cluster tracks
    /// scheduling.
    pub fn delete_pod(&mut self, key: &str) -> Vec<Observation> {
        match self.pods.get_mut(key) {
            Some(p) if !p.deleted => {
                p.deleted = true;
                self.deleted_uids.insert(p.uid.clone());
                self.epoch += 1;
                let mut out = vec![Observation::PodDeleted { key: key.to_string() }];
                out.extend(self.recreate(key));
                out
            }
            _ => {
                warn!(pod = key, "delete-pod: no such pod now");
                Vec::new()
            }
        }
    }

    /// Replaces a pod's tolerations (admission does not run on updates).
    pub fn set_tolerations(&mut self, key: &str, tolerations: &[Toleration]) -> Vec<Observation> {
        self.update_pod(key, "set-tolerations", |p| p.tolerations = tolerations.into())
    }

    /// Binds a pod to a node (as the scheduler's `bind` would): it is no
    /// longer Unschedulable.
    pub fn bind_pod(&mut self, key: &str, node: &str) -> Vec<Observation> {
        self.update_pod(key, "bind-pod", |p| {
            p.node = Some(node.to_string());
            if let Some(s) = &mut p.scheduling {
                s.unschedulable_since = None;
            }
            if let Some(c) = p.conditions.get_mut(POD_SCHEDULED) {
                *c = ConditionStatus::True;
            }
        })
    }

    /// Marks an unbound pod `PodScheduled=False`, reason `Unschedulable`,
    /// as the scheduler does when it finds no room (the `mark-unschedulable`
    /// event, for files without the simulated scheduler). A pod already
    /// marked keeps its first time, as the scheduler keeps it; a bound,
    /// terminating or missing pod is left alone (logged).
    pub fn mark_unschedulable(&mut self, key: &str, now: Timestamp) -> Vec<Observation> {
        match self.pods.get(key).filter(|p| !p.deleted) {
            None => {
                warn!(pod = key, "mark-unschedulable: no such pod now; ignored");
                return Vec::new();
            }
            Some(p) if p.node.is_some() || p.terminating => {
                warn!(pod = key, "mark-unschedulable: the pod is bound or terminating; ignored");
                return Vec::new();
            }
            Some(_) => {}
        }
        self.update_pod(key, "mark-unschedulable", |p| {
            let s = p.scheduling.get_or_insert_with(|| {
                Box::new(PodScheduling {
                    termination_grace: PodScheduling::DEFAULT_TERMINATION_GRACE,
                    ..PodScheduling::default()
                })
            });
            s.unschedulable_since.get_or_insert(now);
            p.conditions.insert(POD_SCHEDULED, ConditionStatus::False);
        })
    }

    pub(super) fn update_pod(&mut self, key: &str, what: &str, f: impl FnOnce(&mut SimPod)) -> Vec<Observation> {
        let Some(pod) = self.pods.get_mut(key).filter(|p| !p.deleted) else {
            warn!(pod = key, "{what}: no such pod now; ignored");
            return Vec::new();
        };
        let before = pod.clone();
        f(pod);
        if *pod == before {
            return Vec::new();
        }
        let obs = Observation::PodUpserted(pod.snapshot());
        self.epoch += 1;
        vec![obs]
    }
}

/// The pod a [`PodSpec`] describes as of `now` (what `unschedulable-since:
/// now` stands for), admitted (admission adds its default tolerations) and
/// named `uid`. Its scheduling facts are kept when `scheduling` (the
/// cluster tracks them) or when the spec sets any, and reported in its
/// snapshots when `report`. The served cluster creates a scenario's added
/// pod with this too, so an added pod is the same in both.
pub fn pod_from_spec(
    spec: &PodSpec,
    now: Timestamp,
    admission: &AdmissionDefaults,
    scheduling: bool,
    report: bool,
    uid: String,
) -> SimPod {
    let mut tolerations = spec.tolerations.clone();
    admission.admit(&mut tolerations);
    let mut conditions = PodConditions::new();
    if let Some(ready) = spec.ready {
        let status = if ready { ConditionStatus::True } else { ConditionStatus::False };
        conditions.insert(POD_READY, status);
    }
    let sched = &spec.scheduling;
    let scheduling = (scheduling || **sched != PodSchedulingSpec::default()).then(|| {
        Box::new(PodScheduling {
            requests: sched.requests.resources(),
            priority_class: sched.priority_class.clone(),
            critical_annotation: sched.critical,
            mirror: sched.mirror,
            controller_kind: if spec.daemonset { Some("DaemonSet".to_string()) } else { sched.owner.clone() },
            termination_grace: sched.grace_period.unwrap_or(PodScheduling::DEFAULT_TERMINATION_GRACE),
            labels: sched.labels.clone(),
            placement: Placement { node_selector: sched.node_selector.clone(), affinity: sched.affinity.clone() },
            unschedulable_since: sched.unschedulable_since.map(|t| t.resolve(now)),
        })
    });
    if scheduling.as_ref().is_some_and(|s| s.unschedulable_since.is_some()) {
        conditions.insert(POD_SCHEDULED, ConditionStatus::False);
    }
    SimPod {
        key: spec.name.clone(),
        uid,
        node: spec.node.clone(),
        daemonset: spec.daemonset,
        terminating: spec.terminating,
        tolerations: tolerations.into(),
        conditions,
        reason: None,
        deleted: false,
        refuse_deletions: spec.refuse_deletions,
        scheduling,
        report_scheduling: report,
    }
}
