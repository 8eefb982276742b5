//! The critical-addon rescheduler's facts and its planning rules, as plain
//! values and pure functions (issue 13, docs/semantics.md#critical-addon-rescheduler).
//!
//! [`SchedFacts`] is what the rescheduler knows beyond what node lifecycle
//! keeps: pods' requests, flags and labels, the placement of pending
//! critical addons, nodes' allocatable and labels, budgets. Ingest fills it
//! (only when the rescheduler is on: with it off it stays empty, so node
//! lifecycle pays nothing per pod or node). [`choose_node`] is the choice of
//! a node and of the pods to evict there, a pure function of what it is
//! given, so it is tested (and re-implemented by the reference model) on
//! its own. The system that acts on it is `systems::rescheduler`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bevy_ecs::prelude::*;
use nodewarden_model::scheduling::{CRITICAL_ADDONS_ONLY_TAINT, CRITICAL_ADDONS_ONLY_VALUE, is_critical_addon};
use nodewarden_model::{Placement, Resources, Span, Taint, TaintEffect, Timestamp};

use crate::action::ActionKind;
use crate::explain::PreparationTier;
use crate::observation::{BudgetSnapshot, Observation, PodSnapshot, WriteOutcome};

/// Refused evictions of one victim, retried at each pass, after which the
/// prepared node is given up for the addon and the next tier or node is
/// tried.
pub const MAX_EVICTION_ATTEMPTS: u32 = 3;

/// The taint nodewarden puts on a node it prepares for a critical addon
/// (`CriticalAddonsOnly=nodewarden:NoSchedule`): its value tells it apart
/// from one an operator or a provider put there, which nodewarden never
/// removes.
pub fn reservation_taint() -> Taint {
    Taint {
        key: CRITICAL_ADDONS_ONLY_TAINT.to_string(),
        value: CRITICAL_ADDONS_ONLY_VALUE.to_string(),
        effect: TaintEffect::NoSchedule,
        time_added: None,
    }
}

/// Whether `t` is nodewarden's own reservation taint (key, effect and value).
pub fn is_reservation_taint(t: &Taint) -> bool {
    t.key == CRITICAL_ADDONS_ONLY_TAINT && t.effect == TaintEffect::NoSchedule && t.value == CRITICAL_ADDONS_ONLY_VALUE
}

/// What the rescheduler keeps of one pod (node lifecycle's `Pod` component
/// has the rest: node, uid, tolerations, DaemonSet, terminating).
#[derive(Debug, Clone, PartialEq)]
pub struct SchedPod {
    /// Effective requests, one pod slot included.
    pub requests: Resources,
    /// A critical addon ([`is_critical_addon`]): never evicted, and made
    /// room for when it cannot be scheduled.
    pub critical: bool,
    /// A mirror (static) pod: an eviction cannot remove it.
    pub mirror: bool,
    /// Has a controller owner (something recreates it elsewhere).
    pub controlled: bool,
    /// Its own termination grace period.
    pub grace: Span,
    /// Its labels, for budget selectors.
    pub labels: BTreeMap<String, String>,
    /// Since when the scheduler has found it Unschedulable, if it has.
    pub unschedulable_since: Option<Timestamp>,
    /// Node selector and required affinity: kept only for critical addons
    /// that are not bound (the only pods placed anywhere).
    pub placement: Option<Box<Placement>>,
}

/// What the rescheduler keeps of one node beyond node lifecycle's
/// components: what fits there and the labels placement reads.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SchedNode {
    /// `status.allocatable`; a node without it is never chosen.
    pub allocatable: Option<Resources>,
    /// Every label (node lifecycle keeps only the ones it reconciles).
    pub labels: BTreeMap<String, String>,
}

/// The rescheduler's view of the cluster, kept by ingest when the
/// rescheduler is on (empty, and never written, when it is off).
#[derive(Resource, Debug, Default)]
pub struct SchedFacts {
    /// The rescheduler runs: ingest keeps these facts.
    pub enabled: bool,
    /// Pods with scheduling facts, by `namespace/name`.
    pub pods: HashMap<String, SchedPod>,
    /// Nodes, by name.
    pub nodes: HashMap<String, SchedNode>,
    /// Critical addons that are unbound, not terminating and marked
    /// Unschedulable: the only pods a pass looks at when nothing is
    /// prepared, so a quiet cluster costs nothing.
    pub pending: BTreeSet<String>,
    /// PodDisruptionBudgets by `namespace/name`.
    pub budgets: BTreeMap<String, BudgetSnapshot>,
    /// Nodes carrying nodewarden's reservation taint, as last observed or
    /// written.
    pub reserved: BTreeSet<String>,
    /// Refused evictions per pod (`namespace/name`) since it was last
    /// chosen; reset when it is chosen again for a new preparation.
    pub refusals: BTreeMap<String, u32>,
}

impl SchedFacts {
    /// Takes in what an observation says about scheduling. Called by
    /// ingest for every observation while the rescheduler is on.
    pub fn observe(&mut self, obs: &Observation) {
        match obs {
            Observation::NodeUpserted(n) => {
                // Most node updates are status heartbeats: the labels are
                // copied only when they changed.
                match self.nodes.get_mut(&n.name) {
                    Some(known) => {
                        known.allocatable = n.allocatable;
                        if known.labels != n.labels {
                            known.labels = n.labels.clone();
                        }
                    }
                    None => {
                        let facts = SchedNode { allocatable: n.allocatable, labels: n.labels.clone() };
                        self.nodes.insert(n.name.clone(), facts);
                    }
                }
                if n.taints.iter().any(is_reservation_taint) {
                    self.reserved.insert(n.name.clone());
                } else {
                    self.reserved.remove(&n.name);
                }
            }
            Observation::NodeDeleted { name } => {
                self.nodes.remove(name);
                self.reserved.remove(name);
            }
            Observation::PodUpserted(p) => self.observe_pod(p),
            Observation::PodDeleted { key } => {
                self.pods.remove(key);
                self.pending.remove(key);
                self.refusals.remove(key);
            }
            Observation::BudgetUpserted(b) => {
                self.budgets.insert(b.key.clone(), b.clone());
            }
            Observation::BudgetDeleted { key } => {
                self.budgets.remove(key);
            }
            Observation::LeaseUpserted { .. } | Observation::LeaseDeleted { .. } => {}
            Observation::WriteFinished { .. } => {}
        }
    }

    /// Takes in a pod snapshot (ingest's pod runs call this for each pod;
    /// [`SchedFacts::observe`] for one alone).
    pub fn observe_pod(&mut self, p: &PodSnapshot) {
        let Some(s) = &p.scheduling else {
            self.pods.remove(&p.key);
            self.pending.remove(&p.key);
            return;
        };
        let namespace = p.key.split_once('/').map_or("", |(ns, _)| ns);
        let critical = is_critical_addon(namespace, s.critical_annotation, s.priority_class.as_deref());
        let pending = critical && p.node.is_none() && !p.terminating && s.unschedulable_since.is_some();
        self.pods.insert(
            p.key.clone(),
            SchedPod {
                requests: s.requests,
                critical,
                mirror: s.mirror,
                controlled: s.controller_kind.is_some(),
                grace: s.termination_grace,
                labels: s.labels.clone(),
                unschedulable_since: s.unschedulable_since,
                placement: (critical && p.node.is_none()).then(|| Box::new(s.placement.clone())),
            },
        );
        if pending {
            self.pending.insert(p.key.clone());
        } else {
            self.pending.remove(&p.key);
        }
    }

    /// An eviction for an addon finished: a refusal is counted against its
    /// pod (the system retries it at its next pass, a bounded number of
    /// times). A refused taint patch needs nothing: the node's next
    /// observation says whether it carries the taint.
    pub fn write_finished(&mut self, kind: &ActionKind, outcome: &WriteOutcome) {
        if let (ActionKind::EvictForAddon { pod, .. }, WriteOutcome::Failed(_)) = (kind, outcome) {
            *self.refusals.entry(pod.clone()).or_default() += 1;
        }
    }

    /// The budgets covering a pod: in its namespace, selecting its labels.
    pub fn budgets_of<'a>(&'a self, pod: &'a str, labels: &'a BTreeMap<String, String>) -> Vec<&'a BudgetSnapshot> {
        let namespace = pod.split_once('/').map_or("", |(ns, _)| ns);
        self.budgets
            .values()
            .filter(|b| b.key.split_once('/').map_or("", |(ns, _)| ns) == namespace && b.selector.matches(labels))
            .collect()
    }
}

/// One pod evicted for the prepared node, with the eviction as issued (a
/// refused one is issued again, identical, at the next pass).
#[derive(Debug, Clone, PartialEq)]
pub struct Victim {
    /// `namespace/name`.
    pub key: String,
    /// Its uid when chosen: a pod recreated under the name is not it.
    pub uid: String,
    /// The grace period sent (`None`: the pod's own).
    pub grace: Option<Span>,
    /// The explanation the eviction carries.
    pub why: Box<crate::explain::AddonEviction>,
}

/// The node being prepared for a critical addon (at most one at a time).
#[derive(Debug, Clone, PartialEq)]
pub struct Preparation {
    /// The node.
    pub node: String,
    /// The addon (`namespace/name`) and its uid.
    pub addon: String,
    /// See `addon`.
    pub addon_uid: String,
    /// When the node was chosen (or adopted after a restart): the
    /// pod-scheduled timeout counts from here.
    pub since: Timestamp,
    /// The tier it was chosen in; `None` for a node adopted after a
    /// restart, whose choice this engine did not make.
    pub tier: Option<PreparationTier>,
    /// The pods evicted for it.
    pub victims: Vec<Victim>,
}

/// What the rescheduler remembers between passes.
#[derive(Resource, Debug, Default)]
pub struct ReschedulerState {
    /// The node being prepared, if any.
    pub prepared: Option<Preparation>,
    /// Per addon, nodes given up on after their evictions were refused
    /// [`MAX_EVICTION_ATTEMPTS`] times: not chosen again for it while it
    /// needs help.
    pub failed: BTreeMap<String, BTreeSet<String>>,
    /// Addons already reported as fitting nowhere (reported once until
    /// they fit somewhere or stop needing help).
    pub no_fit_reported: BTreeSet<String>,
    /// The first pass has run (it adopts a reservation left by a previous
    /// life of the controller).
    pub started: bool,
}

/// One pod bound to a candidate node, as the planner sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Resident {
    /// `namespace/name`.
    pub key: String,
    /// Its requests (counted against the node whatever it is).
    pub requests: Resources,
    /// May be evicted at all: not a critical addon, not a mirror pod, not
    /// a DaemonSet pod, not terminating (nor being deleted), with known
    /// facts.
    pub evictable: bool,
    /// Its own termination grace period.
    pub grace: Span,
    /// Has a controller owner.
    pub controlled: bool,
    /// Indexes (into the planner's budget list) of the budgets covering it.
    pub budgets: Vec<usize>,
}

/// A node the addon may go on (Ready, schedulable, taints tolerated,
/// placement allowed), with every pod bound there.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Node name.
    pub name: String,
    /// `status.allocatable`.
    pub allocatable: Resources,
    /// The pods bound there, in key order.
    pub residents: Vec<Resident>,
}

impl Candidate {
    /// The requests of every pod bound there.
    pub fn used(&self) -> Resources {
        self.residents.iter().fold(Resources::ZERO, |acc, r| acc + r.requests)
    }
}

/// The node chosen and the pods to evict there.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// Index of the node among the candidates.
    pub node: usize,
    /// The tier it was chosen in.
    pub tier: PreparationTier,
    /// Indexes (into the node's residents) of the pods to evict, in the
    /// order chosen.
    pub victims: Vec<usize>,
    /// Their requests together.
    pub freed: Resources,
    /// The node's room before any eviction.
    pub free_before: Resources,
    /// Some victim has no controller owner (nothing recreates it).
    pub undrainable: bool,
}

/// What the addon lacks on a node whose pods use `used`, once `freed` is
/// freed: zero in every dimension when it fits.
fn shortfall(needed: Resources, allocatable: Resources, used: Resources, freed: Resources) -> Resources {
    (needed + used.saturating_sub(&freed)).saturating_sub(&allocatable)
}

fn is_zero(r: &Resources) -> bool {
    *r == Resources::ZERO
}

/// How much of `short` a pod of `requests` closes, as a sum over the
/// lacking dimensions of the covered fraction, in units of 2^-32 (exact
/// integer arithmetic, so the choice never depends on rounding).
fn coverage(requests: Resources, short: Resources) -> u128 {
    let part = |have: u64, lack: u64| {
        if lack == 0 { 0 } else { (u128::from(have.min(lack)) << 32) / u128::from(lack) }
    };
    part(requests.cpu_millis, short.cpu_millis)
        + part(requests.memory_bytes, short.memory_bytes)
        + part(requests.pods, short.pods)
}

/// Requests in the order "smaller first": cpu, then memory, then slots.
fn size_key(r: &Resources) -> (u64, u64, u64) {
    (r.cpu_millis, r.memory_bytes, r.pods)
}

/// The victims on one node for one tier, by the documented greedy rule
/// (docs/semantics.md#critical-addon-rescheduler): while the addon does
/// not fit, among the pods still eligible (tiers 1 and 2: every budget
/// covering the pod allows one more disruption than already planned; tier
/// 1 also: grace at most `eviction_grace`), take the smallest pod that
/// alone closes the rest of the shortfall if there is one, otherwise the
/// pod that closes the largest part of it (ties: the smaller pod, then the
/// key). `None` when the addon cannot fit there in this tier.
pub fn victims_on(
    needed: Resources,
    node: &Candidate,
    allowed: &[u32],
    tier: PreparationTier,
    eviction_grace: Span,
) -> Option<(Vec<usize>, Resources)> {
    let used = node.used();
    let mut planned = vec![0u32; allowed.len()];
    let mut chosen: Vec<usize> = Vec::new();
    let mut freed = Resources::ZERO;
    loop {
        let short = shortfall(needed, node.allocatable, used, freed);
        if is_zero(&short) {
            return Some((chosen, freed));
        }
        let eligible = node.residents.iter().enumerate().filter(|(i, r)| {
            r.evictable
                && !chosen.contains(i)
                && match tier {
                    PreparationTier::Any => true,
                    PreparationTier::Allowed => r.budgets.iter().all(|&b| allowed[b] > planned[b]),
                    PreparationTier::AllowedAndQuick => {
                        r.grace <= eviction_grace && r.budgets.iter().all(|&b| allowed[b] > planned[b])
                    }
                }
        });
        let mut closing: Option<(usize, &Resident)> = None;
        let mut best: Option<(usize, &Resident, u128)> = None;
        for (i, r) in eligible {
            if short.fits_in(&r.requests) {
                if closing.is_none_or(|(_, c)| (size_key(&r.requests), &r.key) < (size_key(&c.requests), &c.key)) {
                    closing = Some((i, r));
                }
                continue;
            }
            let cover = coverage(r.requests, short);
            let better = best.is_none_or(|(_, b, bc)| {
                cover > bc || (cover == bc && (size_key(&r.requests), &r.key) < (size_key(&b.requests), &b.key))
            });
            if better {
                best = Some((i, r, cover));
            }
        }
        let (i, r) = match (closing, best) {
            (Some(c), _) => c,
            (None, Some((i, r, cover))) if cover > 0 => (i, r),
            _ => return None,
        };
        chosen.push(i);
        freed += r.requests;
        for &b in &r.budgets {
            planned[b] += 1;
        }
    }
}

/// How a node's choice ranks within a tier (smaller is better): victims,
/// requests evicted (cpu, memory), some victim without a controller, name.
type Rank<'a> = (usize, (u64, u64), bool, &'a str);

/// The node to prepare for an addon needing `needed`, and the pods to
/// evict there: the first tier (1, 2, 3) with any candidate where the addon
/// fits; within it, fewer victims, then the smaller total requests evicted
/// (cpu, then memory), then nodes where every victim has a controller
/// owner, then the node name. `allowed[i]` is budget `i`'s
/// `disruptionsAllowed`. `None` when the addon fits on no candidate even
/// with every evictable pod gone.
pub fn choose_node(
    needed: Resources,
    candidates: &[Candidate],
    allowed: &[u32],
    eviction_grace: Span,
) -> Option<Choice> {
    for tier in [PreparationTier::AllowedAndQuick, PreparationTier::Allowed, PreparationTier::Any] {
        let mut best: Option<(Choice, Rank<'_>)> = None;
        for (n, node) in candidates.iter().enumerate() {
            let Some((victims, freed)) = victims_on(needed, node, allowed, tier, eviction_grace) else { continue };
            let undrainable = victims.iter().any(|&v| !node.residents[v].controlled);
            let rank = (victims.len(), (freed.cpu_millis, freed.memory_bytes), undrainable, node.name.as_str());
            if best.as_ref().is_none_or(|(_, r)| rank < *r) {
                let free_before = node.allocatable.saturating_sub(&node.used());
                best = Some((Choice { node: n, tier, victims, freed, free_before, undrainable }, rank));
            }
        }
        if let Some((choice, _)) = best {
            return Some(choice);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(key: &str, cpu: u64, grace: i64, budgets: Vec<usize>) -> Resident {
        Resident {
            key: key.into(),
            requests: Resources::pod(cpu, 0),
            evictable: true,
            grace: Span::from_secs(grace),
            controlled: true,
            budgets,
        }
    }

    fn node(name: &str, cpu: u64, residents: Vec<Resident>) -> Candidate {
        Candidate {
            name: name.into(),
            allocatable: Resources { cpu_millis: cpu, memory_bytes: 0, pods: 110 },
            residents,
        }
    }

    const GRACE: Span = Span::from_secs(10);

    #[test]
    fn the_smallest_pod_that_closes_the_shortfall_goes() {
        let n = node(
            "a",
            1000,
            vec![pod("ns/big", 800, 5, vec![]), pod("ns/mid", 400, 5, vec![]), pod("ns/s", 100, 5, vec![])],
        );
        // Used 1300 of 1000 already (over-committed), addon needs 300:
        // 600 must go; "big" alone closes it and is the only one.
        let (v, freed) = victims_on(Resources::pod(300, 0), &n, &[], PreparationTier::Any, GRACE).unwrap();
        assert_eq!(v, vec![0]);
        assert_eq!(freed.cpu_millis, 800);
        // Needs 0 more than free: fits at once.
        let roomy = node("b", 2000, vec![pod("ns/x", 100, 5, vec![])]);
        assert_eq!(
            victims_on(Resources::pod(300, 0), &roomy, &[], PreparationTier::AllowedAndQuick, GRACE).unwrap().0,
            Vec::<usize>::new()
        );
    }

    #[test]
    fn without_a_single_closer_the_largest_goes_first() {
        let n = node(
            "a",
            1000,
            vec![pod("ns/a", 300, 5, vec![]), pod("ns/b", 400, 5, vec![]), pod("ns/c", 300, 5, vec![])],
        );
        // Full; needs 600: no single pod closes it, b (400) first, then the
        // smallest closer of the remaining 200: a (300, key before c).
        let (v, _) = victims_on(Resources::pod(600, 0), &n, &[], PreparationTier::Any, GRACE).unwrap();
        assert_eq!(v, vec![1, 0]);
    }

    #[test]
    fn tiers_respect_budgets_and_grace() {
        let slow = node("slow", 1000, vec![pod("ns/slow", 1000, 30, vec![])]);
        let guarded = node("guarded", 1000, vec![pod("ns/g", 1000, 5, vec![0])]);
        let need = Resources::pod(500, 0);
        // Budget 0 allows nothing: tier 1 has no node (slow's grace is
        // long), tier 2 picks slow.
        let c = choose_node(need, &[slow.clone(), guarded.clone()], &[0], GRACE).unwrap();
        assert_eq!((c.node, c.tier), (0, PreparationTier::Allowed));
        // The budget allows one: tier 1, guarded.
        let c = choose_node(need, &[slow.clone(), guarded.clone()], &[1], GRACE).unwrap();
        assert_eq!((c.node, c.tier), (1, PreparationTier::AllowedAndQuick));
        // Only the guarded node, budget at 0: tier 3.
        let c = choose_node(need, &[guarded], &[0], GRACE).unwrap();
        assert_eq!(c.tier, PreparationTier::Any);
    }

    #[test]
    fn a_budget_counts_the_evictions_already_planned_against_it() {
        let n = node("a", 1000, vec![pod("ns/a", 500, 5, vec![0]), pod("ns/b", 500, 5, vec![0])]);
        let need = Resources::pod(1000, 0);
        assert_eq!(
            victims_on(need, &n, &[1], PreparationTier::Allowed, GRACE),
            None,
            "one disruption allowed, two needed"
        );
        assert!(victims_on(need, &n, &[2], PreparationTier::Allowed, GRACE).is_some());
        assert!(victims_on(need, &n, &[1], PreparationTier::Any, GRACE).is_some());
    }

    #[test]
    fn within_a_tier_fewer_then_smaller_then_drainable_then_name() {
        let need = Resources::pod(500, 0);
        let two = node(
            "a",
            1000,
            vec![pod("ns/a1", 250, 5, vec![]), pod("ns/a2", 250, 5, vec![]), pod("ns/a3", 500, 5, vec![])],
        );
        let one_big = node("b", 1000, vec![pod("ns/b1", 1000, 5, vec![])]);
        let one_small = node("c", 1000, vec![pod("ns/c1", 500, 5, vec![]), pod("ns/c2", 500, 5, vec![])]);
        let c = choose_node(need, &[two.clone(), one_big.clone(), one_small.clone()], &[], GRACE).unwrap();
        assert_eq!(c.node, 0, "a3 alone (500) on a: as few and as small as c, and a < c");
        let mut bare = pod("ns/d1", 500, 5, vec![]);
        bare.controlled = false;
        let undrainable = node("0", 1000, vec![bare, pod("ns/d2", 500, 5, vec![])]);
        // d1 and d2 tie on size; d1 (key first) goes, which is bare: node
        // "0" ranks after "c" despite its name.
        let c = choose_node(need, &[undrainable, one_small.clone(), one_big], &[], GRACE).unwrap();
        assert_eq!(c.node, 1);
        assert!(!c.undrainable);
    }

    #[test]
    fn unevictable_pods_are_never_chosen_and_no_fit_is_none() {
        let mut critical = pod("kube-system/dns", 1000, 5, vec![]);
        critical.evictable = false;
        let n = node("a", 1000, vec![critical]);
        assert_eq!(choose_node(Resources::pod(100, 0), &[n], &[], GRACE), None);
        assert_eq!(choose_node(Resources::pod(100, 0), &[], &[], GRACE), None);
    }
}
