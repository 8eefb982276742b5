//! The critical-addon rescheduler, written from
//! docs/semantics.md#critical-addon-rescheduler (not from the engine): one
//! pass every housekeeping interval, reading the whole cluster.

use std::collections::{BTreeMap, BTreeSet};

use nodewarden_cluster::Cluster;
use nodewarden_engine::explain::{AddonEviction, PreparationTier};
use nodewarden_engine::{ActionKind, WriteSlot};
use nodewarden_model::scheduling::{CRITICAL_ADDONS_ONLY_TAINT, CRITICAL_ADDONS_ONLY_VALUE, is_critical_addon};
use nodewarden_model::{
    ConditionStatus, ConditionType, ControllerConfig, PodScheduling, Resources, Span, Taint, TaintEffect, Timestamp,
};

use crate::sched::SchedSide;

/// Refusals of one victim's eviction before its node is given up.
const ATTEMPTS: u32 = 3;

fn reservation() -> Taint {
    Taint {
        key: CRITICAL_ADDONS_ONLY_TAINT.into(),
        value: CRITICAL_ADDONS_ONLY_VALUE.into(),
        effect: TaintEffect::NoSchedule,
        time_added: None,
    }
}

fn ours(t: &Taint) -> bool {
    t.key == CRITICAL_ADDONS_ONLY_TAINT && t.value == CRITICAL_ADDONS_ONLY_VALUE && t.effect == TaintEffect::NoSchedule
}

/// The node being prepared.
#[derive(Clone, Debug)]
struct Prepared {
    node: String,
    addon: String,
    uid: String,
    at: Timestamp,
    /// (key, uid, the eviction as sent).
    victims: Vec<(String, String, ActionKind)>,
}

/// What the rescheduler remembers between passes.
#[derive(Clone, Debug)]
pub(super) struct RefRescheduler {
    pub(super) next_pass: Timestamp,
    first_pass_done: bool,
    prepared: Option<Prepared>,
    given_up: BTreeMap<String, BTreeSet<String>>,
    refused: BTreeMap<String, u32>,
}

impl RefRescheduler {
    pub(super) fn new(start: Timestamp) -> RefRescheduler {
        RefRescheduler {
            next_pass: start,
            first_pass_done: false,
            prepared: None,
            given_up: BTreeMap::new(),
            refused: BTreeMap::new(),
        }
    }
}

/// An addon waiting for help.
struct Waiting {
    key: String,
    uid: String,
    since: Timestamp,
    facts: PodScheduling,
}

/// One pod on a candidate node.
#[derive(Clone)]
struct OnNode {
    key: String,
    uid: String,
    req: Resources,
    may_go: bool,
    grace: Span,
    owned: bool,
    budgets: Vec<String>,
}

/// How plans of one tier compare (smaller first): victims, cpu and memory
/// evicted, some victim without an owner, node name.
type Order = (usize, u64, u64, bool, String);

/// One plan: node, tier, victims (indexes into `pods`).
struct Plan {
    node: String,
    allocatable: Resources,
    pods: Vec<OnNode>,
    tier: PreparationTier,
    victims: Vec<usize>,
}

fn add(a: Resources, b: Resources) -> Resources {
    Resources {
        cpu_millis: a.cpu_millis + b.cpu_millis,
        memory_bytes: a.memory_bytes + b.memory_bytes,
        pods: a.pods + b.pods,
    }
}

/// What is still missing for `need` on a node with `alloc` whose pods use
/// `used` after `gone` leave, per dimension (never negative).
fn missing(need: Resources, alloc: Resources, used: Resources, gone: Resources) -> [u64; 3] {
    let f = |n: u64, a: u64, u: u64, g: u64| (n + (u - g)).saturating_sub(a);
    [
        f(need.cpu_millis, alloc.cpu_millis, used.cpu_millis, gone.cpu_millis),
        f(need.memory_bytes, alloc.memory_bytes, used.memory_bytes, gone.memory_bytes),
        f(need.pods, alloc.pods, used.pods, gone.pods),
    ]
}

fn dims(r: Resources) -> [u64; 3] {
    [r.cpu_millis, r.memory_bytes, r.pods]
}

/// The greedy victim rule of the semantics page, for one node and tier.
fn pick_victims(
    need: Resources,
    alloc: Resources,
    pods: &[OnNode],
    tier: PreparationTier,
    budgets: &BTreeMap<String, u32>,
    max_grace: Span,
) -> Option<Vec<usize>> {
    let used = pods.iter().fold(Resources::ZERO, |a, p| add(a, p.req));
    let mut taken: Vec<usize> = vec![];
    let mut gone = Resources::ZERO;
    let mut spent: BTreeMap<&str, u32> = BTreeMap::new();
    loop {
        let lack = missing(need, alloc, used, gone);
        if lack == [0, 0, 0] {
            return Some(taken);
        }
        let allows = |p: &OnNode, spent: &BTreeMap<&str, u32>| {
            p.budgets.iter().all(|b| budgets[b] > spent.get(b.as_str()).copied().unwrap_or(0))
        };
        let eligible: Vec<usize> = (0..pods.len())
            .filter(|i| !taken.contains(i) && pods[*i].may_go)
            .filter(|&i| match tier {
                PreparationTier::Any => true,
                PreparationTier::Allowed => allows(&pods[i], &spent),
                PreparationTier::AllowedAndQuick => pods[i].grace <= max_grace && allows(&pods[i], &spent),
            })
            .collect();
        // Smaller first: cpu, memory, slots, then name.
        let smaller = |a: usize, b: usize| (dims(pods[a].req), &pods[a].key) < (dims(pods[b].req), &pods[b].key);
        let closes = |i: usize| dims(pods[i].req).iter().zip(lack).all(|(h, l)| *h >= l);
        let mut pick: Option<usize> = None;
        for &i in eligible.iter().filter(|&&i| closes(i)) {
            if pick.is_none_or(|p| smaller(i, p)) {
                pick = Some(i);
            }
        }
        if pick.is_none() {
            let part = |i: usize| -> u128 {
                dims(pods[i].req)
                    .iter()
                    .zip(lack)
                    .filter(|(_, l)| *l > 0)
                    .map(|(h, l)| (u128::from((*h).min(l)) << 32) / u128::from(l))
                    .sum()
            };
            let mut best: Option<(usize, u128)> = None;
            for &i in &eligible {
                let p = part(i);
                if p == 0 {
                    continue;
                }
                if best.is_none_or(|(b, bp)| p > bp || (p == bp && smaller(i, b))) {
                    best = Some((i, p));
                }
            }
            pick = best.map(|(i, _)| i);
        }
        let i = pick?;
        taken.push(i);
        gone = add(gone, pods[i].req);
        for b in &pods[i].budgets {
            *spent.entry(b.as_str()).or_default() += 1;
        }
    }
}

impl super::ReferenceModel {
    /// One rescheduler pass, when due.
    pub(super) fn rescheduler(&mut self, now: Timestamp, cluster: &mut Cluster, side: &mut SchedSide) {
        if !self.cfg.enable_rescheduler || now < self.resched.next_pass {
            return;
        }
        self.resched.next_pass =
            super::grid_at_or_after(self.start, self.cfg.rescheduler_housekeeping_interval, now + Span::from_nanos(1));
        let quiet = self.all_down;
        let waiting = waiting(&self.cfg, now, cluster, side);
        let pending: BTreeSet<String> = cluster
            .pods()
            .filter(|p| !p.deleted && p.node.is_none() && !p.terminating)
            .filter(|p| side.pods.get(&p.key).is_some_and(|f| critical(&p.key, f) && f.unschedulable_since.is_some()))
            .map(|p| p.key.clone())
            .collect();
        self.resched.given_up.retain(|a, _| pending.contains(a));

        if !self.resched.first_pass_done {
            self.resched.first_pass_done = true;
            if let Some(w) = waiting.first() {
                let found = cluster
                    .nodes()
                    .filter(|n| n.taints.iter().any(ours))
                    .map(|n| n.name.clone())
                    .find(|n| may_take(cluster, side, &w.key, n));
                if let Some(node) = found {
                    self.resched.prepared =
                        Some(Prepared { node, addon: w.key.clone(), uid: w.uid.clone(), at: now, victims: vec![] });
                }
            }
        }

        if let Some(p) = self.resched.prepared.clone() {
            let addon = cluster.pod(&p.addon).filter(|a| !a.deleted && a.uid == p.uid);
            let still_waits = addon.is_some_and(|a| {
                a.node.is_none()
                    && !a.terminating
                    && side.pods.get(&a.key).is_some_and(|f| critical(&a.key, f) && f.unschedulable_since.is_some())
            });
            let end = addon.is_some_and(|a| a.node.is_some())
                || !still_waits
                || !may_take(cluster, side, &p.addon, &p.node)
                || now >= p.at + self.cfg.rescheduler_pod_scheduled_timeout;
            if end {
                self.resched.prepared = None;
                self.unreserve(now, cluster, side, &p.node);
            } else {
                let mut again = vec![];
                let mut give_up = false;
                for (key, uid, eviction) in &p.victims {
                    let Some(v) = cluster.pod(key).filter(|v| !v.deleted && &v.uid == uid) else { continue };
                    if v.node.as_deref() != Some(p.node.as_str()) || v.terminating {
                        continue;
                    }
                    if self.resched.refused.get(key).copied().unwrap_or(0) >= ATTEMPTS {
                        give_up = true;
                        break;
                    }
                    again.push((key.clone(), eviction.clone()));
                }
                if give_up {
                    self.resched.prepared = None;
                    self.resched.given_up.entry(p.addon.clone()).or_default().insert(p.node.clone());
                    self.unreserve(now, cluster, side, &p.node);
                } else if !quiet {
                    for (key, eviction) in again {
                        self.evict(now, cluster, side, &key, eviction);
                    }
                }
            }
        }

        let keep = self.resched.prepared.as_ref().map(|p| p.node.clone());
        let others: Vec<String> = cluster
            .nodes()
            .filter(|n| n.taints.iter().any(ours) && Some(&n.name) != keep.as_ref())
            .map(|n| n.name.clone())
            .collect();
        for n in others {
            self.unreserve(now, cluster, side, &n);
        }

        if self.resched.prepared.is_some() || quiet {
            return;
        }
        for w in &waiting {
            if let Some(plan) = self.plan(cluster, side, w) {
                self.prepare(now, cluster, side, w, plan);
                return;
            }
        }
    }

    fn plan(&self, cluster: &Cluster, side: &SchedSide, w: &Waiting) -> Option<Plan> {
        let given_up = self.resched.given_up.get(&w.key).cloned().unwrap_or_default();
        let budgets: BTreeMap<String, u32> =
            side.budgets.iter().map(|(k, b)| (k.clone(), b.disruptions_allowed)).collect();
        let mut nodes: Vec<(String, Resources, Vec<OnNode>)> = vec![];
        for n in cluster.nodes() {
            if given_up.contains(&n.name) || !may_take(cluster, side, &w.key, &n.name) {
                continue;
            }
            let Some(alloc) = n.allocatable else { continue };
            // Pods this instant's writes deleted still count: the
            // controller has not seen them go yet.
            let deleted_now: BTreeSet<&str> = self
                .writes
                .iter()
                .filter_map(|w| match w {
                    ActionKind::DeletePod { pod, .. } => Some(pod.as_str()),
                    _ => None,
                })
                .collect();
            let mut pods: Vec<OnNode> = cluster
                .pods()
                .filter(|p| {
                    (!p.deleted || deleted_now.contains(p.key.as_str())) && p.node.as_deref() == Some(n.name.as_str())
                })
                .map(|p| {
                    let f = side.pods.get(&p.key);
                    OnNode {
                        key: p.key.clone(),
                        uid: p.uid.clone(),
                        req: f.map_or(Resources { cpu_millis: 0, memory_bytes: 0, pods: 1 }, |f| f.requests),
                        may_go: f.is_some_and(|f| !critical(&p.key, f) && !f.mirror)
                            && !p.daemonset
                            && !p.terminating
                            && !p.deleted,
                        grace: f.map_or(Span::ZERO, |f| f.termination_grace),
                        owned: f.is_some_and(|f| f.controller_kind.is_some()),
                        budgets: side.covering(&p.key),
                    }
                })
                .collect();
            pods.sort_by(|a, b| a.key.cmp(&b.key));
            nodes.push((n.name.clone(), alloc, pods));
        }
        nodes.sort_by(|a, b| a.0.cmp(&b.0));
        let grace = self.cfg.rescheduler_eviction_grace;
        for tier in [PreparationTier::AllowedAndQuick, PreparationTier::Allowed, PreparationTier::Any] {
            let mut best: Option<(Order, Plan)> = None;
            for (name, alloc, pods) in &nodes {
                let Some(victims) = pick_victims(w.facts.requests, *alloc, pods, tier, &budgets, grace) else {
                    continue;
                };
                let freed = victims.iter().fold(Resources::ZERO, |a, &i| add(a, pods[i].req));
                let bare = victims.iter().any(|&i| !pods[i].owned);
                let rank = (victims.len(), freed.cpu_millis, freed.memory_bytes, bare, name.clone());
                if best.as_ref().is_none_or(|(r, _)| rank < *r) {
                    let plan = Plan { node: name.clone(), allocatable: *alloc, pods: pods.clone(), tier, victims };
                    best = Some((rank, plan));
                }
            }
            if let Some((_, plan)) = best {
                return Some(plan);
            }
        }
        None
    }

    fn prepare(&mut self, now: Timestamp, cluster: &mut Cluster, side: &mut SchedSide, w: &Waiting, plan: Plan) {
        let tolerates = cluster.pod(&w.key).is_some_and(|p| p.tolerations.iter().any(|t| t.tolerates(&reservation())));
        let has_any = cluster.node(&plan.node).is_some_and(|n| {
            n.taints.iter().any(|t| t.key == CRITICAL_ADDONS_ONLY_TAINT && t.effect == TaintEffect::NoSchedule)
        });
        if tolerates && !has_any {
            let taint = Taint { time_added: Some(now), ..reservation() };
            self.side_write(
                now,
                cluster,
                side,
                ActionKind::PatchNodeTaints {
                    node: plan.node.clone(),
                    add: vec![taint],
                    remove: vec![],
                    slot: WriteSlot::CriticalAddonsTaint,
                },
            );
        }
        let used = plan.pods.iter().fold(Resources::ZERO, |a, p| add(a, p.req));
        let freed = plan.victims.iter().fold(Resources::ZERO, |a, &i| add(a, plan.pods[i].req));
        let names: Vec<String> = plan.victims.iter().map(|&i| plan.pods[i].key.clone()).collect();
        let max = self.cfg.rescheduler_eviction_grace;
        let mut victims = vec![];
        for &i in &plan.victims {
            let p = &plan.pods[i];
            let why = AddonEviction {
                pod: p.key.clone(),
                node: plan.node.clone(),
                addon: w.key.clone(),
                unschedulable_since: w.since,
                needed: w.facts.requests,
                free_before: plan.allocatable.saturating_sub(&used),
                tier: plan.tier,
                victims: names.clone(),
                freed,
                budgets: p.budgets.iter().map(|b| (b.clone(), side.budgets[b].disruptions_allowed)).collect(),
                pod_grace: p.grace,
                grace: p.grace.min(max),
                decided_at: now,
            };
            let eviction = ActionKind::EvictForAddon {
                pod: p.key.clone(),
                uid: p.uid.clone(),
                grace: (p.grace > max).then_some(max),
                why: Box::new(why),
            };
            self.resched.refused.remove(&p.key);
            self.evict(now, cluster, side, &p.key, eviction.clone());
            victims.push((p.key.clone(), p.uid.clone(), eviction));
        }
        self.resched.prepared =
            Some(Prepared { node: plan.node, addon: w.key.clone(), uid: w.uid.clone(), at: now, victims });
    }

    fn evict(&mut self, now: Timestamp, cluster: &mut Cluster, side: &mut SchedSide, key: &str, eviction: ActionKind) {
        if !self.side_write(now, cluster, side, eviction) {
            *self.resched.refused.entry(key.to_string()).or_default() += 1;
        }
    }

    fn unreserve(&mut self, now: Timestamp, cluster: &mut Cluster, side: &mut SchedSide, node: &str) {
        if !cluster.node(node).is_some_and(|n| n.taints.iter().any(ours)) {
            return;
        }
        self.side_write(
            now,
            cluster,
            side,
            ActionKind::PatchNodeTaints {
                node: node.to_string(),
                add: vec![],
                remove: vec![reservation()],
                slot: WriteSlot::CriticalAddonsTaint,
            },
        );
    }

    fn side_write(&mut self, now: Timestamp, cluster: &mut Cluster, side: &mut SchedSide, kind: ActionKind) -> bool {
        self.next_id += 1;
        self.writes.push(kind.clone());
        side.write(cluster, now, self.next_id, kind)
    }
}

fn critical(key: &str, f: &PodScheduling) -> bool {
    let ns = key.split_once('/').map_or("", |(ns, _)| ns);
    is_critical_addon(ns, f.critical_annotation, f.priority_class.as_deref())
}

/// Critical addons that need help now, oldest first.
fn waiting(cfg: &ControllerConfig, now: Timestamp, cluster: &Cluster, side: &SchedSide) -> Vec<Waiting> {
    let mut out: Vec<Waiting> = cluster
        .pods()
        .filter(|p| !p.deleted && p.node.is_none() && !p.terminating)
        .filter_map(|p| {
            let f = side.pods.get(&p.key)?;
            let since = f.unschedulable_since?;
            (critical(&p.key, f) && since + cfg.rescheduler_unschedulable_grace <= now).then(|| Waiting {
                key: p.key.clone(),
                uid: p.uid.clone(),
                since,
                facts: f.clone(),
            })
        })
        .collect();
    out.sort_by(|a, b| (a.since, &a.key).cmp(&(b.since, &b.key)));
    out
}

/// Whether the addon may go on the node, room aside.
fn may_take(cluster: &Cluster, side: &SchedSide, addon: &str, node: &str) -> bool {
    let (Some(pod), Some(n)) = (cluster.pod(addon), cluster.node(node)) else { return false };
    let placement = side.pods.get(addon).map(|f| f.placement.clone()).unwrap_or_default();
    let ready = n.conditions.iter().any(|c| c.kind == ConditionType::Ready && c.status == ConditionStatus::True);
    let taints_ok = n
        .taints
        .iter()
        .filter(|t| t.effect != TaintEffect::PreferNoSchedule && !ours(t))
        .all(|t| pod.tolerations.iter().any(|tol| tol.tolerates(t)));
    ready && !n.unschedulable && taints_ok && n.allocatable.is_some() && placement.allows(&n.name, &n.labels)
}
