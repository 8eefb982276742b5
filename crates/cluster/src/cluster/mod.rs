//! An in-memory cluster: nodes, Leases, pods, budgets and Events, changed by
//! the scenario (as users, kubelets and other controllers would) and by the
//! engine's [`Action`](nodewarden_engine::Action)s (as the API server would
//! apply them).
//!
//! Every change returns the [`Observation`]s a watch would deliver, so the
//! runner can feed them to the engine. Writes of the controller are counted
//! per object, and writes the controller must never make (to a pod that is
//! terminating or already deleted; legacy eviction's `NodeLost` status
//! write to a terminating pod excepted) are reported as contract violations.
//!
//! [`Cluster::from_scenario`] builds the world a scenario file describes at
//! t=0: the cluster and the simulated kubelets of its nodes.
//!
//! One concern a file: `objects` (the stored values), `nodes`, `pods`,
//! `budgets`, `recreate` (workload controllers), `scheduling` and `apply`
//! (the controller's writes). This file keeps the storage itself and what
//! spans all of it (the initial list, housekeeping).
//!
//! Invariant: the cluster's maps change only through its methods, and each
//! method returns exactly what a watch would deliver for the change.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

pub use nodewarden_controller::Applied;
use nodewarden_engine::{NodeSnapshot, ObjectRef, Observation};
use nodewarden_model::{CompactName, Resources, Timestamp, Toleration};

use crate::admission::AdmissionDefaults;
use crate::kubelet::{KubeletTiming, Kubelets};
use crate::scenario::Scenario;

mod apply;
mod budgets;
#[cfg(test)]
pub(crate) mod fixtures;
mod nodes;
mod objects;
mod pods;
mod recreate;
mod scheduling;

use nodes::NodeRow;
pub use nodes::{NodeSummary, node_from_spec};
use objects::budget_snapshot;
pub use objects::{RecordedEvent, SimBudget, SimPod};
pub use pods::pod_from_spec;

// The two pod constants the reference model reads under the path they had
// when the rules lived here; every other rule is named from `rules`.
pub use crate::rules::pod::{POD_DISRUPTION_TARGET, POD_REASON_NODE_LOST};

/// The simulated cluster.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    admission: AdmissionDefaults,
    nodes: BTreeMap<String, NodeSnapshot>,
    ever_nodes: BTreeSet<String>,
    /// What the kubelets and the timeline read and write at every renewal,
    /// one row per name that ever had a node or a Lease (rows are never
    /// removed): a kubelet keeps its node's row ([`NodeHandle`](crate::NodeHandle)), so a
    /// renewal is no search by name. [`Cluster::state`] sorts the Leases.
    rows: Vec<NodeRow>,
    /// Each name's row.
    row_of: HashMap<CompactName, u32, Hasher>,
    pods: BTreeMap<String, SimPod>,
    /// Every distinct set of pod tolerations, shared by the pods that
    /// have it ([`SimPod::tolerations`]).
    toleration_sets: HashSet<Arc<[Toleration]>, Hasher>,
    deleted_uids: BTreeSet<String>,
    writes: BTreeMap<ObjectRef, u64>,
    events: Vec<RecordedEvent>,
    next_uid: u64,
    /// Run the simulated scheduler.
    scheduler: bool,
    /// Send pods' scheduling data and nodes' allocatable to the
    /// controller (it runs the rescheduler).
    report: bool,
    /// Nodes' allocatable, when a scheduler or the rescheduler runs.
    allocatable: BTreeMap<String, Resources>,
    budgets: BTreeMap<String, SimBudget>,
    /// Graceful deletions in progress: (deadline, pod key).
    graceful: BTreeSet<(Timestamp, String)>,
    /// Bumped by every change a scheduler verdict or a budget can depend
    /// on; housekeeping reruns only when it moved.
    epoch: u64,
    scheduled_epoch: u64,
    budgets_epoch: u64,
}

/// The hasher of the cluster's hashed maps (looked up, never iterated in
/// an order that matters).
type Hasher = foldhash::fast::RandomState;

impl Cluster {
    /// An empty cluster whose admission adds `admission`'s tolerations.
    pub fn new(admission: AdmissionDefaults) -> Cluster {
        Cluster { admission, ..Cluster::default() }
    }

    /// The cluster a scenario file describes at t=0 (admission defaults
    /// applied to its pods) and the simulated kubelets of its
    /// `kubelet: true` nodes, scheduled from t=0.
    pub fn from_scenario(scenario: &Scenario) -> (Cluster, Kubelets) {
        let mut cluster = Cluster::new(AdmissionDefaults::from(&scenario.cluster))
            .with_scheduling(scenario.cluster.scheduler, scenario.config.enable_rescheduler);
        let mut kubelets = Kubelets::new(KubeletTiming::from(&scenario.cluster.kubelet));
        for n in &scenario.nodes {
            cluster.add_node(n, Timestamp::EPOCH);
            if n.kubelet {
                kubelets.schedule(&n.name, Timestamp::EPOCH);
            }
        }
        for p in &scenario.pods {
            cluster.add_pod(p);
        }
        for b in &scenario.budgets {
            cluster.put_budget(b);
        }
        (cluster, kubelets)
    }

    /// The whole current state as a watch's initial list would deliver it:
    /// nodes, then Leases, then pods (deleted pods are not listed).
    pub fn state(&self) -> Vec<Observation> {
        let mut out: Vec<Observation> = self.nodes.values().cloned().map(Observation::NodeUpserted).collect();
        let mut leases: Vec<(&str, Timestamp)> =
            self.rows.iter().filter_map(|r| r.lease.map(|renew| (r.name.as_str(), renew))).collect();
        leases.sort_unstable();
        out.extend(
            leases
                .into_iter()
                .map(|(node, renew)| Observation::LeaseUpserted { node: node.to_string(), renew: Some(renew) }),
        );
        out.extend(self.pods.values().filter(|p| !p.deleted).map(|p| Observation::PodUpserted(p.snapshot())));
        out.extend(self.budgets.iter().map(|(k, b)| Observation::BudgetUpserted(budget_snapshot(k, b))));
        out
    }

    /// The earliest instant housekeeping has something to do by itself (a
    /// graceful deletion ends); `None` when nothing is pending.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.graceful.first().map(|(t, _)| *t)
    }

    /// What happens in the cluster without anyone asking, at `now`: pods
    /// whose grace period is over go; the scheduler binds what fits and
    /// marks the rest Unschedulable; the disruption controller publishes
    /// changed budgets. Returns what the watches deliver. Costs nothing
    /// when the cluster tracks no scheduling and has no budget.
    pub fn housekeeping(&mut self, now: Timestamp) -> Vec<Observation> {
        let mut out = Vec::new();
        while let Some((at, key)) = self.graceful.first().cloned() {
            if at > now {
                break;
            }
            self.graceful.pop_first();
            if let Some(p) = self.pods.get_mut(&key).filter(|p| !p.deleted && p.terminating) {
                p.deleted = true;
                self.deleted_uids.insert(p.uid.clone());
                self.epoch += 1;
                out.push(Observation::PodDeleted { key });
            }
        }
        if self.scheduler && self.scheduled_epoch != self.epoch {
            out.extend(self.schedule(now));
            self.scheduled_epoch = self.epoch;
        }
        out.extend(self.publish_budgets());
        out
    }
}
