//! The operator's answer: what the failure does to each workload.
//!
//! **Owners.** A pod belongs to the workload its controlling owner
//! reference (`controller: true`) names, resolved one step further for
//! ReplicaSets:
//! - a ReplicaSet that is in the snapshot belongs to its own controlling
//!   owner (a Deployment, usually);
//! - a ReplicaSet that is not (kubectl was not asked for ReplicaSets)
//!   belongs to a Deployment when its name is `<deployment>-<hash>` and the
//!   pod carries `pod-template-hash: <hash>` (the Deployment controller
//!   names ReplicaSets and labels their pods so); otherwise the ReplicaSet
//!   itself is the workload;
//! - StatefulSet, Job, DaemonSet and any other owner kind (a CRD's
//!   controller) are the workload as named; a pod without a controlling
//!   owner is a bare pod, its own workload.
//!
//! **Replicas** are a workload's pods that are not finished (`Succeeded`,
//! `Failed`) and not already terminating at the snapshot.
//!
//! **Ready** is what Services route to: a replica is ready from the start
//! when it is bound and its Ready condition is True; it stops being ready
//! when the controller sets its Ready to False (when its node is found
//! dead) or deletes it; it is ready again when its node comes back, unless
//! it was deleted. A deleted replica stays gone: the replacement its
//! controller creates is not simulated (where it lands and when it is
//! ready depends on scheduling, capacity and image pulls), so "no ready
//! replica until the end" means "until the replacements are up".
//!
//! **PodDisruptionBudgets.** The controller deletes pods (it does not use
//! the Eviction API unless `pod-deletion-mode: evict`), so budgets do not
//! stop it. A budget is *breached* when the controller deletes more of its
//! pods than it allowed at the snapshot, the `disruptionsAllowed` the
//! disruption controller would publish over the pods it selects
//! (`nodewarden_cluster::rules::budget`, the served cluster's rule):
//! `maxUnavailable` first, else `minAvailable`, percentages of the
//! selected pods rounded up, and a budget with neither allows nothing.
//! The breach time is the deletion that went one over. Separately, the time
//! its ready pods were below what it requires (the outage itself, before
//! any deletion) is reported.
//!
//! **Critical pods**: in `kube-system` with a system priority class or the
//! critical-pod annotation, or any pod with priority at or above
//! 2,000,000,000 (the system range).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::{self, Write as _};

use nodewarden_cluster::FaultPlan;
use nodewarden_cluster::rules::budget::{PodHealth, budget_status};
use nodewarden_model::{BudgetAmounts, Timestamp, ZoneKey};
use nodewarden_sim::report::{human, human_span};
use nodewarden_sim::{PodChange, PodChangeKind};
use serde_json::{Value, json};

use crate::snapshot::{SnapPod, Snapshot};

/// The label the Deployment controller puts on a ReplicaSet's pods.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// Priorities at or above this are the system's (`system-*` classes).
pub const SYSTEM_PRIORITY: i64 = 2_000_000_000;

/// A workload: kind, namespace, name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkloadId {
    /// `Deployment`, `StatefulSet`, `Job`, `DaemonSet`, `ReplicaSet`,
    /// `Pod` (bare), or another owner kind.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl fmt::Display for WorkloadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// The workload a pod belongs to (the module documentation has the rule).
pub fn workload_of(p: &SnapPod, snap: &Snapshot) -> WorkloadId {
    let (ns, name) = p.pod.key.split_once('/').unwrap_or(("", &p.pod.key));
    let id = |kind: &str, name: &str| WorkloadId { kind: kind.into(), namespace: ns.into(), name: name.into() };
    let Some(owner) = &p.owner else { return id("Pod", name) };
    if owner.kind != "ReplicaSet" {
        return id(&owner.kind, &owner.name);
    }
    if let Some(rs_owner) = snap.replicasets.get(&format!("{ns}/{}", owner.name)) {
        return match rs_owner {
            Some(o) => id(&o.kind, &o.name),
            None => id("ReplicaSet", &owner.name),
        };
    }
    if let Some(hash) = p.labels.get(POD_TEMPLATE_HASH)
        && let Some(deployment) = owner.name.strip_suffix(hash.as_str()).and_then(|d| d.strip_suffix('-'))
        && !deployment.is_empty()
    {
        return id("Deployment", deployment);
    }
    id("ReplicaSet", &owner.name)
}

/// True for a critical pod (see the module documentation).
pub fn is_critical(p: &SnapPod) -> bool {
    let ns = p.pod.key.split_once('/').map_or("", |(ns, _)| ns);
    nodewarden_model::scheduling::is_critical_addon(ns, p.critical_annotation, p.priority_class.as_deref())
        || p.priority.is_some_and(|x| x >= SYSTEM_PRIORITY)
}

/// What happened to one workload.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadReport {
    /// Which.
    pub id: WorkloadId,
    /// Replicas at the snapshot.
    pub replicas: usize,
    /// Of those, ready at the snapshot.
    pub ready_at_start: usize,
    /// Zones its replicas ran in.
    pub zones: BTreeSet<String>,
    /// Replicas on nodes that failed.
    pub on_failed_nodes: usize,
    /// Replicas the controller deleted, with when.
    pub evicted: Vec<(Timestamp, String)>,
    /// Spans with no ready replica (`None` end: still none at the end).
    pub no_ready: Vec<(Timestamp, Option<Timestamp>)>,
    /// Fewest ready replicas at any time.
    pub min_ready: usize,
    /// Replicas that are critical pods.
    pub critical: usize,
}

impl WorkloadReport {
    /// Every replica was deleted: when the last one went.
    pub fn all_evicted_at(&self) -> Option<Timestamp> {
        (self.replicas > 0 && self.evicted.len() >= self.replicas).then(|| self.evicted.last().map(|e| e.0)).flatten()
    }

    /// It lost every ready replica at some point.
    pub fn lost_all(&self) -> bool {
        !self.no_ready.is_empty()
    }

    /// Time with no ready replica, up to `end`.
    pub fn time_without(&self, end: Timestamp) -> nodewarden_model::Span {
        self.no_ready.iter().map(|(a, b)| b.unwrap_or(end) - *a).fold(nodewarden_model::Span::ZERO, |x, y| x + y)
    }

    /// Anything happened to it.
    pub fn affected(&self) -> bool {
        self.on_failed_nodes > 0 || !self.evicted.is_empty() || self.min_ready < self.ready_at_start
    }
}

/// What happened to one PodDisruptionBudget.
#[derive(Clone, Debug, PartialEq)]
pub struct PdbReport {
    /// `namespace/name`.
    pub name: String,
    /// What it requires, as the disruption controller reads its spec.
    pub budget: BudgetAmounts,
    /// Pods it selects at the snapshot.
    pub selected: usize,
    /// Of those, ready.
    pub ready_at_start: usize,
    /// Ready pods it requires.
    pub required: usize,
    /// Deletions it allowed at the snapshot.
    pub allowed: usize,
    /// Its pods the controller deleted.
    pub evicted: usize,
    /// The deletion that went over the allowance.
    pub breached_at: Option<Timestamp>,
    /// Spans its ready pods were below what it requires.
    pub below_budget: Vec<(Timestamp, Option<Timestamp>)>,
}

/// A critical pod that was on a failed node.
#[derive(Clone, Debug, PartialEq)]
pub struct CriticalPod {
    /// `namespace/name`.
    pub pod: String,
    /// Its workload.
    pub workload: WorkloadId,
    /// When it was deleted, if it was.
    pub evicted: Option<Timestamp>,
}

/// The per-workload report of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Nodes that failed.
    pub failed_nodes: usize,
    /// Every workload with a replica, in id order.
    pub workloads: Vec<WorkloadReport>,
    /// Every PodDisruptionBudget, in name order.
    pub pdbs: Vec<PdbReport>,
    /// Critical pods on failed nodes.
    pub critical: Vec<CriticalPod>,
    /// DaemonSet pods on failed nodes.
    pub daemonset_pods_on_failed: usize,
    /// DaemonSet pods deleted.
    pub daemonset_pods_evicted: usize,
    /// Where the run ended.
    pub end: Timestamp,
}

/// A pod's readiness at the start and its changes (time, ready after).
type PodLine = (bool, Vec<(Timestamp, bool)>);

/// One pod's readiness changes: (time, ready after).
fn pod_changes(
    ready: bool,
    node_ups: &[Timestamp],
    not_ready: &[Timestamp],
    deleted: Option<Timestamp>,
) -> Vec<(Timestamp, bool)> {
    let mut ev: Vec<(Timestamp, u8)> = Vec::new();
    ev.extend(not_ready.iter().map(|t| (*t, 0)));
    ev.extend(node_ups.iter().map(|t| (*t, 1)));
    ev.extend(deleted.map(|t| (t, 2)));
    ev.sort();
    let mut now = ready;
    let mut out = Vec::new();
    for (t, what) in ev {
        let next = match what {
            0 | 2 => false,
            _ => ready,
        };
        if next != now {
            out.push((t, next));
            now = next;
        }
        if what == 2 {
            break;
        }
    }
    out
}

/// Spans where a count that starts at `start` and moves by the changes is
/// below `floor`, and its minimum.
fn spans_below(
    start: usize,
    mut changes: Vec<(Timestamp, i64)>,
    floor: usize,
) -> (Vec<(Timestamp, Option<Timestamp>)>, usize) {
    changes.sort();
    let mut count = i64::try_from(start).unwrap_or(i64::MAX);
    let floor = i64::try_from(floor).unwrap_or(i64::MAX);
    let mut min = count;
    let mut spans: Vec<(Timestamp, Option<Timestamp>)> = Vec::new();
    let mut i = 0;
    while i < changes.len() {
        let t = changes[i].0;
        while i < changes.len() && changes[i].0 == t {
            count += changes[i].1;
            i += 1;
        }
        min = min.min(count);
        let below = count < floor;
        match spans.last_mut() {
            Some((_, end @ None)) if !below => *end = Some(t),
            Some((_, None)) => {}
            _ if below => spans.push((t, None)),
            _ => {}
        }
    }
    (spans, usize::try_from(min.max(0)).unwrap_or(0))
}

/// Builds the report from the snapshot, the fault plan that was played,
/// the controller's pod writes and the run's end.
pub fn build(snap: &Snapshot, plan: &FaultPlan, changes: &[PodChange], end: Timestamp) -> Report {
    let timeline = Timeline::of(plan, changes, end);
    let PodPass { workloads, mut critical, ds_failed, ds_evicted, pod_lines } = pod_pass(snap, &timeline);
    let mut pdbs = pdb_reports(snap, &pod_lines, &timeline.deleted);
    pdbs.sort_by(|a, b| a.name.cmp(&b.name));
    critical.sort_by(|a: &CriticalPod, b| a.pod.cmp(&b.pod));
    Report {
        failed_nodes: timeline.failed.len(),
        workloads,
        pdbs,
        critical,
        daemonset_pods_on_failed: ds_failed,
        daemonset_pods_evicted: ds_evicted,
        end,
    }
}

/// What happened during the run, by name: the nodes that failed and when
/// each came back up (from the plan), and when each pod was marked
/// NotReady or deleted (from the controller's writes).
struct Timeline<'a> {
    failed: BTreeSet<&'a str>,
    ups: HashMap<&'a str, Vec<Timestamp>>,
    not_ready: HashMap<&'a str, Vec<Timestamp>>,
    deleted: HashMap<&'a str, Timestamp>,
}

impl<'a> Timeline<'a> {
    /// The faults played up to `end` and the pod writes, by name.
    fn of(plan: &'a FaultPlan, changes: &'a [PodChange], end: Timestamp) -> Timeline<'a> {
        // Node ups after a failure, and the nodes that failed at all.
        let mut failed: BTreeSet<&str> = BTreeSet::new();
        let mut ups: HashMap<&str, Vec<Timestamp>> = HashMap::new();
        for f in plan.faults().iter().filter(|f| f.at <= end) {
            failed.extend(f.fault.nodes_down().iter().map(String::as_str));
            for n in f.fault.nodes_up() {
                ups.entry(n.as_str()).or_default().push(f.at);
            }
        }
        let mut not_ready: HashMap<&str, Vec<Timestamp>> = HashMap::new();
        let mut deleted: HashMap<&str, Timestamp> = HashMap::new();
        for c in changes {
            match c.kind {
                PodChangeKind::NotReady => not_ready.entry(c.pod.as_str()).or_default().push(c.at),
                PodChangeKind::Deleted => {
                    deleted.entry(c.pod.as_str()).or_insert(c.at);
                }
            }
        }
        Timeline { failed, ups, not_ready, deleted }
    }
}

/// What one pass over the snapshot's pods gives: the workloads' reports,
/// the critical pods on failed nodes, the DaemonSet pods' counts, and each
/// pod's readiness line for the budgets.
struct PodPass<'a> {
    workloads: Vec<WorkloadReport>,
    critical: Vec<CriticalPod>,
    ds_failed: usize,
    ds_evicted: usize,
    pod_lines: HashMap<&'a str, PodLine>,
}

/// Goes through the snapshot's live pods once (a pod listed twice counts
/// once), adding each to its workload's report.
fn pod_pass<'a>(snap: &'a Snapshot, timeline: &Timeline<'_>) -> PodPass<'a> {
    let Timeline { failed, ups, not_ready, deleted } = timeline;
    let zone_of: HashMap<&str, String> =
        snap.nodes.iter().map(|n| (n.name.as_str(), ZoneKey::from_labels(&n.labels).to_string())).collect();

    struct Acc {
        report: WorkloadReport,
        changes: Vec<(Timestamp, i64)>,
    }
    let mut by_id: BTreeMap<WorkloadId, Acc> = BTreeMap::new();
    let mut critical = Vec::new();
    let (mut ds_failed, mut ds_evicted) = (0, 0);
    // Per pod: (ready at start, its readiness changes), for the budgets.
    let mut pod_lines: HashMap<&str, PodLine> = HashMap::new();
    let mut seen = BTreeSet::new();
    for p in &snap.pods {
        if p.finished || p.pod.terminating || !seen.insert(p.pod.key.as_str()) {
            continue;
        }
        let id = workload_of(p, snap);
        let node = p.pod.node.as_deref();
        let on_failed = node.is_some_and(|n| failed.contains(n));
        let ready = node.is_some() && p.pod.ready == Some(true);
        let gone = deleted.get(p.pod.key.as_str()).copied();
        let lines = pod_changes(
            ready,
            node.and_then(|n| ups.get(n)).map_or(&[][..], Vec::as_slice),
            not_ready.get(p.pod.key.as_str()).map_or(&[][..], Vec::as_slice),
            gone,
        );
        let acc = by_id.entry(id.clone()).or_insert_with(|| Acc {
            report: WorkloadReport {
                id: id.clone(),
                replicas: 0,
                ready_at_start: 0,
                zones: BTreeSet::new(),
                on_failed_nodes: 0,
                evicted: Vec::new(),
                no_ready: Vec::new(),
                min_ready: 0,
                critical: 0,
            },
            changes: Vec::new(),
        });
        let r = &mut acc.report;
        r.replicas += 1;
        r.ready_at_start += usize::from(ready);
        if let Some(z) = node.and_then(|n| zone_of.get(n)) {
            r.zones.insert(z.clone());
        }
        r.on_failed_nodes += usize::from(on_failed);
        if let Some(t) = gone {
            r.evicted.push((t, p.pod.key.clone()));
        }
        acc.changes.extend(lines.iter().map(|(t, up)| (*t, if *up { 1 } else { -1 })));
        let crit = is_critical(p);
        r.critical += usize::from(crit);
        if crit && on_failed {
            critical.push(CriticalPod { pod: p.pod.key.clone(), workload: id.clone(), evicted: gone });
        }
        if p.pod.daemonset {
            ds_failed += usize::from(on_failed);
            ds_evicted += usize::from(gone.is_some());
        }
        pod_lines.insert(p.pod.key.as_str(), (ready, lines));
    }
    let workloads = by_id
        .into_values()
        .map(|Acc { mut report, changes }| {
            report.evicted.sort();
            let (spans, min) = spans_below(report.ready_at_start, changes, 1);
            report.min_ready = min;
            // Lost all: only for a workload that had a ready replica.
            report.no_ready = if report.ready_at_start > 0 { spans } else { Vec::new() };
            report
        })
        .collect();
    PodPass { workloads, critical, ds_failed, ds_evicted, pod_lines }
}

/// Each budget's report, from the readiness lines of the pods it selects.
fn pdb_reports(
    snap: &Snapshot,
    pod_lines: &HashMap<&str, PodLine>,
    deleted: &HashMap<&str, Timestamp>,
) -> Vec<PdbReport> {
    // Pods by namespace, and by namespace and label, so a budget looks
    // only at the pods that can match it (thousands of budgets over
    // hundreds of thousands of pods would otherwise be their product).
    let mut by_ns: HashMap<&str, Vec<&SnapPod>> = HashMap::new();
    let mut by_label: HashMap<(&str, &str, &str), Vec<&SnapPod>> = HashMap::new();
    let mut indexed = BTreeSet::new();
    for p in &snap.pods {
        let Some((ns, _)) = p.pod.key.split_once('/') else { continue };
        if !indexed.insert(p.pod.key.as_str()) {
            continue; // listed twice (two files): counted once
        }
        by_ns.entry(ns).or_default().push(p);
        for (k, v) in &p.labels {
            by_label.entry((ns, k.as_str(), v.as_str())).or_default().push(p);
        }
    }
    snap.pdbs
        .iter()
        .map(|b| {
            let mut selected = 0;
            let mut ready0 = 0;
            let mut evictions: Vec<Timestamp> = Vec::new();
            let mut changes: Vec<(Timestamp, i64)> = Vec::new();
            let candidates = match b.selector.match_labels.iter().next() {
                Some((k, v)) => by_label.get(&(b.namespace.as_str(), k.as_str(), v.as_str())),
                None => by_ns.get(b.namespace.as_str()),
            };
            for p in candidates.map_or(&[][..], Vec::as_slice) {
                if !b.selector.matches(&p.labels) {
                    continue;
                }
                let Some((ready, lines)) = pod_lines.get(p.pod.key.as_str()) else { continue };
                selected += 1;
                ready0 += usize::from(*ready);
                evictions.extend(deleted.get(p.pod.key.as_str()));
                changes.extend(lines.iter().map(|(t, up)| (*t, if *up { 1 } else { -1 })));
            }
            // The status the disruption controller publishes at the
            // snapshot: the selected pods are running and not terminating,
            // `ready0` of them Ready.
            let at_start =
                (0..selected).map(|i| PodHealth { terminating: false, running: true, ready: Some(i < ready0) });
            let status = budget_status(at_start, b.budget.min_available, b.budget.max_unavailable);
            let (required, allowed) = (status.desired as usize, status.allowed as usize);
            evictions.sort();
            let (below_budget, _) = spans_below(ready0, changes, required);
            PdbReport {
                name: format!("{}/{}", b.namespace, b.name),
                budget: b.budget,
                selected,
                ready_at_start: ready0,
                required,
                allowed,
                evicted: evictions.len(),
                breached_at: evictions.get(allowed).copied(),
                below_budget,
            }
        })
        .collect()
}

fn secs(t: Timestamp) -> f64 {
    (t - Timestamp::EPOCH).as_secs_f64()
}

fn spans_json(spans: &[(Timestamp, Option<Timestamp>)]) -> Value {
    Value::Array(spans.iter().map(|(a, b)| json!({"from": secs(*a), "until": b.map(secs)})).collect())
}

fn span_text(spans: &[(Timestamp, Option<Timestamp>)], end: Timestamp) -> String {
    let parts: Vec<String> = spans
        .iter()
        .map(|(a, b)| match b {
            Some(b) => format!("{} .. {} ({})", human(*a), human(*b), human_span(*b - *a)),
            None => format!("from {} to the end ({}+)", human(*a), human_span(end - *a)),
        })
        .collect();
    parts.join(", ")
}

impl Report {
    /// Workloads that lost every ready replica, longest first.
    pub fn lost_all(&self) -> Vec<&WorkloadReport> {
        let mut v: Vec<&WorkloadReport> =
            self.workloads.iter().filter(|w| w.lost_all() && w.id.kind != "DaemonSet").collect();
        v.sort_by(|a, b| b.time_without(self.end).cmp(&a.time_without(self.end)).then(a.id.cmp(&b.id)));
        v
    }

    /// The figures as JSON (times in seconds from the snapshot's moment).
    pub fn to_json(&self) -> Value {
        json!({
            "failed_nodes": self.failed_nodes,
            "end_seconds": secs(self.end),
            "workloads": self.workloads.iter().filter(|w| w.affected()).map(|w| json!({
                "kind": w.id.kind, "namespace": w.id.namespace, "name": w.id.name,
                "replicas": w.replicas, "ready_at_start": w.ready_at_start,
                "zones": w.zones, "on_failed_nodes": w.on_failed_nodes,
                "evicted": w.evicted.len(),
                "evicted_at": w.evicted.iter().map(|(t, p)| json!({"pod": p, "at": secs(*t)})).collect::<Vec<_>>(),
                "all_evicted_at": w.all_evicted_at().map(secs),
                "lost_all_ready": w.lost_all(),
                "no_ready_replica": spans_json(&w.no_ready),
                "seconds_without_ready_replica": w.time_without(self.end).as_secs_f64(),
                "min_ready": w.min_ready,
                "critical_pods": w.critical,
            })).collect::<Vec<_>>(),
            "unaffected_workloads": self.workloads.iter().filter(|w| !w.affected()).count(),
            "pod_disruption_budgets": self.pdbs.iter().map(|b| json!({
                "name": b.name, "budget": b.budget.to_string(), "selected": b.selected,
                "ready_at_start": b.ready_at_start, "required": b.required, "allowed": b.allowed,
                "evicted": b.evicted, "breached": b.breached_at.is_some(),
                "breached_at": b.breached_at.map(secs), "below_budget": spans_json(&b.below_budget),
            })).collect::<Vec<_>>(),
            "critical_pods_on_failed_nodes": self.critical.iter().map(|c| json!({
                "pod": c.pod, "workload": c.workload.to_string(), "evicted_at": c.evicted.map(secs),
            })).collect::<Vec<_>>(),
            "daemonset_pods_on_failed_nodes": self.daemonset_pods_on_failed,
            "daemonset_pods_evicted": self.daemonset_pods_evicted,
        })
    }

    /// The report for people; at most `limit` workloads per list.
    pub fn render_text(&self, limit: usize) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "What it does to your workloads ({} node(s) failed)", self.failed_nodes);
        self.write_lost_all(&mut s, limit);
        self.write_partial(&mut s, limit);
        self.write_budgets(&mut s);
        self.write_critical_and_daemonsets(&mut s);
        let untouched = self.workloads.iter().filter(|w| !w.affected()).count();
        let _ = writeln!(s, "  Unaffected: {untouched} workload(s).");
        s
    }

    /// The workloads that lose every ready replica, with when (the report's first and gravest list).
    fn write_lost_all(&self, s: &mut String, limit: usize) {
        let end = self.end;
        let lost = self.lost_all();
        if lost.is_empty() {
            let _ = writeln!(s, "  No workload loses all its ready replicas.");
        } else {
            let _ = writeln!(s, "  Lose EVERY ready replica ({}):", lost.len());
            for w in lost.iter().take(limit) {
                let evicted = match (w.evicted.len(), w.all_evicted_at()) {
                    (0, _) => "none evicted".to_string(),
                    (n, Some(t)) => format!("all {n} evicted by {}", human(t)),
                    (n, None) if w.evicted[0].0 == w.evicted[n - 1].0 => {
                        format!("{n} of them evicted at {}", human(w.evicted[0].0))
                    }
                    (n, None) => {
                        format!("{n} of them evicted, {} .. {}", human(w.evicted[0].0), human(w.evicted[n - 1].0))
                    }
                };
                let _ = writeln!(
                    s,
                    "    {}: {} replica(s) in {}; no ready replica {}; {evicted}",
                    w.id,
                    w.replicas,
                    w.zones.iter().cloned().collect::<Vec<_>>().join(", "),
                    span_text(&w.no_ready, end),
                );
            }
            if lost.len() > limit {
                let _ = writeln!(s, "    ... and {} more (--json lists them all)", lost.len() - limit);
            }
        }
    }

    /// The workloads that lose some replicas but keep one ready, most evicted first.
    fn write_partial(&self, s: &mut String, limit: usize) {
        let mut partial: Vec<&WorkloadReport> =
            self.workloads.iter().filter(|w| w.affected() && !w.lost_all() && w.id.kind != "DaemonSet").collect();
        partial.sort_by(|a, b| b.evicted.len().cmp(&a.evicted.len()).then(a.id.cmp(&b.id)));
        if !partial.is_empty() {
            let _ = writeln!(s, "  Lose some replicas, keep at least one ready ({}):", partial.len());
            for w in partial.iter().take(limit) {
                let when = match (w.evicted.first(), w.evicted.last()) {
                    (Some(a), Some(b)) if a.0 == b.0 => format!(" at {}", human(a.0)),
                    (Some(a), Some(b)) => format!(", {} .. {}", human(a.0), human(b.0)),
                    _ => String::new(),
                };
                let _ = writeln!(
                    s,
                    "    {}: {} of {} on failed nodes, {} evicted{when}; at least {} ready throughout",
                    w.id,
                    w.on_failed_nodes,
                    w.replicas,
                    w.evicted.len(),
                    w.min_ready
                );
            }
            if partial.len() > limit {
                let _ = writeln!(s, "    ... and {} more", partial.len() - limit);
            }
        }
    }

    /// The budgets breached or run below what they require, or a line that all held.
    fn write_budgets(&self, s: &mut String) {
        let end = self.end;
        let breached: Vec<&PdbReport> =
            self.pdbs.iter().filter(|b| b.breached_at.is_some() || !b.below_budget.is_empty()).collect();
        if self.pdbs.is_empty() {
            let _ = writeln!(s, "  PodDisruptionBudgets: none in the snapshot.");
        } else if breached.is_empty() {
            let _ = writeln!(s, "  PodDisruptionBudgets: all {} held.", self.pdbs.len());
        } else {
            let _ = writeln!(s, "  PodDisruptionBudgets breached ({} of {}):", breached.len(), self.pdbs.len());
            for b in breached {
                let by = match b.breached_at {
                    Some(t) => {
                        format!("the controller deletes {} of its pods, the one at {} breaches it", b.evicted, human(t))
                    }
                    None => format!("deletions within its allowance ({} of {})", b.evicted, b.allowed),
                };
                let below = if b.below_budget.is_empty() {
                    String::new()
                } else {
                    format!("; fewer ready than required {}", span_text(&b.below_budget, end))
                };
                let _ = writeln!(
                    s,
                    "    {} ({}; {} of {} ready, {} required, {} disruption(s) allowed): {by}{below}",
                    b.name, b.budget, b.ready_at_start, b.selected, b.required, b.allowed
                );
            }
        }
    }

    /// The critical pods and DaemonSet pods on the failed nodes.
    fn write_critical_and_daemonsets(&self, s: &mut String) {
        if self.critical.is_empty() {
            let _ = writeln!(s, "  Critical pods: none on the failed nodes.");
        } else {
            let evicted: Vec<String> =
                self.critical.iter().filter_map(|c| c.evicted.map(|t| format!("{} at {}", c.pod, human(t)))).collect();
            let _ = writeln!(
                s,
                "  Critical pods on the failed nodes: {}; evicted: {}",
                self.critical.len(),
                if evicted.is_empty() { "none".to_string() } else { evicted.join(", ") }
            );
        }
        let _ = writeln!(
            s,
            "  DaemonSet pods: {} on the failed nodes, {} evicted{}",
            self.daemonset_pods_on_failed,
            self.daemonset_pods_evicted,
            if self.daemonset_pods_evicted == 0 {
                " (they tolerate the taints, as their controller makes them)"
            } else {
                ""
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::ControllerOwner;
    use nodewarden_engine::PodSnapshot;

    fn pod(key: &str, owner: Option<(&str, &str)>, hash: Option<&str>) -> SnapPod {
        SnapPod {
            pod: PodSnapshot {
                version: 0,
                node_lost: false,
                scheduling: None,
                key: key.into(),
                uid: key.into(),
                node: Some("n".into()),
                daemonset: false,
                ready: Some(true),
                terminating: false,
                tolerations: Vec::new(),
            },
            owner: owner.map(|(k, n)| ControllerOwner { kind: k.into(), name: n.into() }),
            labels: hash.map(|h| (POD_TEMPLATE_HASH.to_string(), h.to_string())).into_iter().collect(),
            priority: None,
            priority_class: None,
            critical_annotation: false,
            finished: false,
        }
    }

    #[test]
    fn owners_resolve_to_workloads() {
        let mut snap = Snapshot::default();
        let w = |p: &SnapPod, s: &Snapshot| workload_of(p, s).to_string();
        assert_eq!(w(&pod("a/web-5d8f-x", Some(("ReplicaSet", "web-5d8f")), Some("5d8f")), &snap), "Deployment a/web");
        assert_eq!(w(&pod("a/rs-x", Some(("ReplicaSet", "rs")), Some("5d8f")), &snap), "ReplicaSet a/rs");
        assert_eq!(w(&pod("a/rs-x", Some(("ReplicaSet", "rs")), None), &snap), "ReplicaSet a/rs");
        assert_eq!(w(&pod("a/db-0", Some(("StatefulSet", "db")), None), &snap), "StatefulSet a/db");
        assert_eq!(w(&pod("a/j-1", Some(("Job", "j")), None), &snap), "Job a/j");
        assert_eq!(w(&pod("a/lonely", None, None), &snap), "Pod a/lonely");
        // With the ReplicaSet in the snapshot, its own owner decides.
        snap.replicasets
            .insert("a/odd".into(), Some(ControllerOwner { kind: "Deployment".into(), name: "api".into() }));
        assert_eq!(w(&pod("a/odd-x", Some(("ReplicaSet", "odd")), None), &snap), "Deployment a/api");
    }

    #[test]
    fn spans_below_a_floor() {
        let t = |s: i64| Timestamp::EPOCH + nodewarden_model::Span::from_secs(s);
        let (spans, min) = spans_below(2, vec![(t(10), -1), (t(20), -1), (t(30), 1), (t(40), -1)], 1);
        assert_eq!(spans, vec![(t(20), Some(t(30))), (t(40), None)]);
        assert_eq!(min, 0);
        let (spans, min) = spans_below(3, vec![(t(5), -1), (t(5), 1)], 1);
        assert!(spans.is_empty());
        assert_eq!(min, 3);
    }

    #[test]
    fn a_pod_comes_back_with_its_node_unless_deleted() {
        let t = |s: i64| Timestamp::EPOCH + nodewarden_model::Span::from_secs(s);
        assert_eq!(pod_changes(true, &[t(100)], &[t(40)], None), vec![(t(40), false), (t(100), true)]);
        assert_eq!(pod_changes(true, &[t(100)], &[t(40)], Some(t(90))), vec![(t(40), false)]);
        assert_eq!(pod_changes(false, &[t(100)], &[], None), vec![]);
    }
}
