//! Filling the store at start: the simulator's cluster (a generated fleet,
//! a built-in scenario's cluster or a scenario file's) written as the full
//! objects a real cluster would hold, and the objects scenario events add
//! later (pods, budgets, their namespaces).
//!
//! Invariant: the served objects say what the simulator's cluster says,
//! nothing more (owners, labels and DaemonSets are what its controllers
//! would have written), so a served run and a replay of the same scenario
//! start from the same state.

use std::collections::{BTreeMap, HashMap};

use nodewarden_cluster::fleet::{self, FleetSpec, LEASE_JITTER};
use nodewarden_cluster::{Builtin, Cluster, EventAction, KubeletTiming, Kubelets, Scenario};
use nodewarden_cluster::{Fault, FaultPlan};
use nodewarden_model::{Span, Timestamp};
use serde_json::{Value, json};

use crate::cluster::ServedCluster;
use crate::resource::Kind;
use crate::store::{Inner, key_of};
use nodewarden_objects::NODE_LEASE_NAMESPACE;
use nodewarden_objects::TimeBase;
use nodewarden_objects::write as convert;

/// What cluster to serve: the choice between a generated fleet and a
/// scenario file, made by `nodewarden sim --serve`'s flags.
#[derive(Clone, Debug)]
pub enum ServeSource {
    /// A generated fleet, and optionally a built-in scenario's fault plan
    /// (`critical-addon` builds its own full cluster around the fleet's
    /// nodes, as `nodewarden sim` does, and runs the scheduler and, in the
    /// in-process controller, the rescheduler).
    Fleet(FleetSpec, Option<Builtin>),
    /// A scenario file's nodes, pods, kubelet settings and events.
    File(Box<Scenario>),
}

/// Stores the namespace unless it exists, as created at the scenario's
/// start, so objects put into it are never orphans.
pub fn create_namespace(s: &mut Inner, time: &TimeBase, name: &str) {
    if s.get(Kind::Namespace, name).is_some() {
        return;
    }
    let uid = s.next_uid();
    let v = json!({
        "kind": "Namespace", "apiVersion": "v1",
        "metadata": {"name": name, "uid": uid, "creationTimestamp": time.time(Timestamp::EPOCH), "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    });
    s.commit(Kind::Namespace, name, v, false);
}

/// Stores a pod a scenario event added, with its scheduling facts when it
/// has any, created now. One of the same name is replaced in place (a new
/// uid), as the simulator replaces it: not deleted, so no controller
/// recreates it.
pub fn store_added_pod(s: &mut Inner, time: &TimeBase, p: &nodewarden_cluster::SimPod, now: Timestamp) {
    let mut snap = p.snapshot();
    snap.scheduling = p.scheduling.clone();
    let ns = snap.key.split_once('/').map_or("default", |(ns, _)| ns).to_string();
    create_namespace(s, time, &ns);
    let uid = s.next_uid();
    let host = snap
        .node
        .as_ref()
        .and_then(|n| s.get(Kind::Node, n))
        .and_then(|n| n.value().pointer("/status/addresses/0/address").and_then(Value::as_str).map(str::to_string));
    let ip = format!("10.251.{}.{}", (s.rv() >> 8) & 0xff, s.rv() & 0xff);
    let mut v = convert::pod_json(&snap, &uid, now, host.as_deref(), &ip, time);
    if let Some(reason) = &p.reason {
        v["status"]["reason"] = json!(reason);
    }
    s.commit(Kind::Pod, &snap.key, v, false);
}

/// Stores a scenario's budget under policy/v1, or replaces its spec (a new
/// generation, which the disruption controller has yet to observe).
pub fn store_budget(s: &mut Inner, time: &TimeBase, spec: &nodewarden_cluster::scenario::BudgetSpec) {
    let (ns, name) = spec.name.split_once('/').unwrap_or(("default", &spec.name));
    create_namespace(s, time, ns);
    let key = key_of(ns, name);
    let v = match s.get(Kind::PodDisruptionBudget, &key) {
        Some(cur) => {
            let old = cur.value();
            let mut v = budget_json(spec, ns, name, &cur.uid, time);
            let generation = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
            v["metadata"]["generation"] = json!(generation + 1);
            v["metadata"]["creationTimestamp"] = old["metadata"]["creationTimestamp"].clone();
            if let Some(status) = old.get("status") {
                v["status"] = status.clone();
            }
            v
        }
        None => {
            let uid = s.next_uid();
            budget_json(spec, ns, name, &uid, time)
        }
    };
    s.commit(Kind::PodDisruptionBudget, &key, v, false);
}

/// What [`populate`] built beside the store's objects: what the driver
/// plays out over them.
pub struct Populated {
    /// The simulator's kubelets, one a node.
    pub kubelets: Kubelets,
    /// The scenario's timeline.
    pub plan: FaultPlan,
    /// What is served, for the log.
    pub name: String,
    /// The cluster keeps what the scheduler reads (allocatable, requests,
    /// owners): a scenario file's events that add nodes and pods then
    /// serve it too.
    pub tracks_scheduling: bool,
}

/// A fleet whose shape cannot work (no node, or zones out of range).
#[derive(Debug)]
pub struct BadFleet(pub String);

/// Fills the store from the simulator's cluster built from `source`, with
/// kubelets on `timing` whose Leases last `lease_duration_secs`.
pub fn populate(
    source: &ServeSource,
    timing: &KubeletTiming,
    lease_duration_secs: i64,
    sh: &ServedCluster,
) -> Result<Populated, BadFleet> {
    let time = sh.time;
    let (cluster, kubelets, plan, name) = simulated(source, timing, sh)?;
    let mut s = sh.store.lock();
    for ns in ["default", "kube-system", "kube-public", NODE_LEASE_NAMESPACE] {
        create_namespace(&mut s, &time, ns);
    }
    // What the file says of scheduling (allocatable, requests, budgets) is
    // served whenever the cluster keeps it, as a real cluster always has it:
    // whether nodewarden reads it is nodewarden's flag.
    let tracks = cluster.tracks_scheduling();
    let node_uids = store_nodes(&mut s, &time, &cluster, lease_duration_secs);
    // A generated fleet's workload pods get the owners and labels their
    // controllers would have given them (a scenario file's pods say their
    // own); the ReplicaSets and StatefulSets themselves are not served.
    let workloads = match source {
        ServeSource::Fleet(spec, builtin) if *builtin != Some(Builtin::CriticalAddon) => fleet::workloads(spec),
        _ => Vec::new(),
    };
    let n_nodes = cluster.nodes().count();
    let budgets: Vec<_> = cluster.budgets().values().map(|b| b.spec.clone()).collect();
    // The typed pods are freed one by one as their JSON is stored.
    let daemonsets = store_pods(&mut s, &time, cluster.into_pods(), &node_uids, &workloads);
    store_daemonsets(&mut s, &time, daemonsets, n_nodes);
    for b in &budgets {
        store_budget(&mut s, &time, b);
    }
    Ok(Populated { kubelets, plan, name, tracks_scheduling: tracks })
}

/// The simulator's cluster, kubelets and timeline for `source`, and its
/// name; a scenario file's refusals are handed to the served cluster.
fn simulated(
    source: &ServeSource,
    timing: &KubeletTiming,
    sh: &ServedCluster,
) -> Result<(Cluster, Kubelets, FaultPlan, String), BadFleet> {
    match source {
        ServeSource::Fleet(spec, builtin) => {
            if spec.nodes == 0 || spec.zones == 0 || spec.zones > spec.nodes {
                return Err(BadFleet(format!(
                    "a fleet needs at least one node and 1..=nodes zones (got {} nodes, {} zones)",
                    spec.nodes, spec.zones
                )));
            }
            let mut cluster = Cluster::new(sh.admission);
            let mut kubelets = Kubelets::new(*timing).with_jitter(LEASE_JITTER, spec.seed);
            let layout = if *builtin == Some(Builtin::CriticalAddon) {
                // The cluster `nodewarden sim --scenario critical-addon`
                // builds: full nodes, budgets, the addons on the first node,
                // with what the scheduler reads.
                cluster = cluster.with_scheduling(true, true);
                nodewarden_cluster::served::build_addons(spec, timing, &mut cluster, &mut kubelets)
            } else {
                fleet::build(spec, timing, &mut cluster, &mut kubelets)
            };
            let plan = builtin.map_or_else(FaultPlan::new, |b| b.plan(&layout, spec.seed));
            let name = builtin.map_or_else(|| "no scenario".to_string(), |b| b.name().to_string());
            Ok((cluster, kubelets, plan, name))
        }
        ServeSource::File(scenario) => {
            let (cluster, kubelets) = Cluster::from_scenario(scenario);
            sh.refuse_deletions(
                cluster.pods().filter(|p| p.refuse_deletions > 0).map(|p| (p.key.clone(), p.refuse_deletions)),
            );
            let mut plan = FaultPlan::new();
            for e in &scenario.events {
                // A restart is the in-process controller's (with
                // `--controller`), not a change to the served cluster.
                let fault = match &e.action {
                    EventAction::RestartController => Fault::RestartController,
                    other => Fault::Event(other.clone()),
                };
                plan.add(Timestamp::EPOCH + e.at, fault, "");
            }
            Ok((cluster, kubelets, plan, "scenario file".to_string()))
        }
    }
}

/// Stores the nodes and their Leases; returns each node's uid and index.
fn store_nodes(
    s: &mut Inner,
    time: &TimeBase,
    cluster: &Cluster,
    lease_duration_secs: i64,
) -> HashMap<String, (String, usize)> {
    let tracks = cluster.tracks_scheduling();
    let mut node_uids = HashMap::new();
    for (i, n) in cluster.nodes().enumerate() {
        let uid = s.next_uid();
        let mut n = n.clone();
        if tracks {
            n.allocatable =
                Some(cluster.allocatable(&n.name).unwrap_or(nodewarden_cluster::scenario::DEFAULT_ALLOCATABLE));
        }
        let n = &n;
        let v = convert::node_json(n, &uid, i, time);
        s.commit(Kind::Node, &n.name, v, false);
        if let Some(renew) = cluster.lease(&n.name) {
            let luid = s.next_uid();
            let lv = convert::lease_json_created(&n.name, &uid, &luid, n.created, renew, lease_duration_secs, time);
            s.commit(Kind::Lease, &key_of(NODE_LEASE_NAMESPACE, &n.name), lv, false);
        }
        node_uids.insert(n.name.clone(), (uid, i));
    }
    node_uids
}

/// Stores the pods that are not deleted, owned by their `workloads` where
/// they are a workload's; returns the DaemonSets that own pods (by
/// namespace and name, with their uid).
fn store_pods(
    s: &mut Inner,
    time: &TimeBase,
    pods: BTreeMap<String, nodewarden_cluster::SimPod>,
    node_uids: &HashMap<String, (String, usize)>,
    workloads: &[fleet::Workload],
) -> BTreeMap<(String, String), Value> {
    let owner_uids: Vec<String> = workloads.iter().map(|_| s.next_uid()).collect();
    let owned: HashMap<&str, (usize, usize)> = workloads
        .iter()
        .enumerate()
        .flat_map(|(w, wl)| wl.pods.iter().enumerate().map(move |(ordinal, key)| (key.as_str(), (w, ordinal))))
        .collect();
    let mut daemonsets = BTreeMap::new();
    for (j, mut p) in pods.into_values().filter(|p| !p.deleted).enumerate() {
        let mut snap = p.snapshot();
        snap.scheduling = p.scheduling.take();
        let ns = snap.key.split_once('/').map_or("default", |(ns, _)| ns).to_string();
        create_namespace(s, time, &ns);
        let uid = s.next_uid();
        let host = snap.node.as_ref().and_then(|n| node_uids.get(n)).map(|(_, i)| convert::node_ip(*i));
        let created = Timestamp::EPOCH - Span::from_secs(24 * 3600);
        let mut v = convert::pod_json(
            &snap,
            &uid,
            created,
            host.as_deref(),
            &format!("10.{}.{}.{}", 128 + (j >> 16) % 64, (j >> 8) & 0xff, j & 0xff),
            time,
        );
        if snap.daemonset
            && let Some(owner) = v.pointer("/metadata/ownerReferences/0").cloned()
        {
            daemonsets
                .entry((ns.clone(), owner["name"].as_str().unwrap_or_default().to_string()))
                .or_insert(owner["uid"].clone());
        }
        if let Some(reason) = &p.reason {
            v["status"]["reason"] = json!(reason);
        }
        if let Some(&(w, ordinal)) = owned.get(snap.key.as_str()) {
            owned_by_workload(&mut v, &workloads[w], ordinal, &owner_uids[w]);
        }
        s.commit(Kind::Pod, &snap.key, v, false);
    }
    daemonsets
}

/// Stores the DaemonSets that own pods, each fully rolled out on the
/// `n_nodes` nodes.
fn store_daemonsets(s: &mut Inner, time: &TimeBase, daemonsets: BTreeMap<(String, String), Value>, n_nodes: usize) {
    for ((ns, name), uid) in daemonsets {
        let v = json!({
            "kind": "DaemonSet", "apiVersion": "apps/v1",
            "metadata": {"name": name, "namespace": ns, "uid": uid, "generation": 1, "creationTimestamp": time.time(Timestamp::EPOCH - Span::from_secs(30 * 86400)), "labels": {"app": name}},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}], "tolerations": [{"operator": "Exists"}]}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
                "revisionHistoryLimit": 10,
            },
            "status": {"currentNumberScheduled": n_nodes, "desiredNumberScheduled": n_nodes, "numberReady": n_nodes, "updatedNumberScheduled": n_nodes, "numberAvailable": n_nodes, "numberMisscheduled": 0, "observedGeneration": 1},
        });
        s.commit(Kind::DaemonSet, &key_of(&ns, &name), v, false);
    }
}

/// Writes into a fleet pod what its workload's controller puts there: the
/// controlling owner reference (the Deployment's ReplicaSet, or the
/// StatefulSet) and the labels the controller adds (`pod-template-hash`;
/// a StatefulSet's revision, pod name and index), under `app: <workload>`.
fn owned_by_workload(v: &mut Value, w: &fleet::Workload, ordinal: usize, uid: &str) {
    let (kind, owner) = w.owner();
    let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let labels = match w.kind {
        fleet::WorkloadKind::Deployment => json!({"app": w.name, "pod-template-hash": w.revision}),
        fleet::WorkloadKind::StatefulSet => json!({
            "app": w.name,
            "controller-revision-hash": format!("{}-{}", w.name, w.revision),
            "statefulset.kubernetes.io/pod-name": name,
            "apps.kubernetes.io/pod-index": ordinal.to_string(),
        }),
    };
    v["metadata"]["labels"] = labels;
    v["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "apps/v1", "kind": kind, "name": owner, "uid": uid,
        "controller": true, "blockOwnerDeletion": true,
    }]);
}

/// A scenario file's PodDisruptionBudget as the API holds it (its status
/// is the served disruption controller's, [`crate::pdb::refresh`]).
pub(crate) fn budget_json(
    b: &nodewarden_cluster::scenario::BudgetSpec,
    ns: &str,
    name: &str,
    uid: &str,
    time: &TimeBase,
) -> Value {
    use nodewarden_cluster::scenario::IntOrPercent;
    let amount = |a: &IntOrPercent| match a {
        IntOrPercent::Int(n) => json!(n),
        IntOrPercent::Percent(p) => json!(format!("{p}%")),
    };
    let mut spec = json!({"selector": convert::label_selector_json(&b.selector)});
    if let Some(m) = &b.min_available {
        spec["minAvailable"] = amount(m);
    }
    if let Some(m) = &b.max_unavailable {
        spec["maxUnavailable"] = amount(m);
    }
    json!({
        "kind": "PodDisruptionBudget", "apiVersion": "policy/v1",
        "metadata": {"name": name, "namespace": ns, "uid": uid, "generation": 1,
                     "creationTimestamp": time.time(Timestamp::EPOCH)},
        "spec": spec,
    })
}
