//! The critical-addon rescheduler (issue 13): makes room for `kube-system`
//! critical addons the scheduler cannot place, one node at a time.
//!
//! One housekeeping pass every `rescheduler-housekeeping-interval`, on its
//! own grid, in its own phase, the tick's last: it decides on what node
//! lifecycle made of the instant (a node turned Unknown in this pass is no
//! candidate; a pod deleted in this tick still counts until its deletion
//! is observed). A pass, in order:
//!
//! 1. (first pass only) a node carrying nodewarden's reservation taint is
//!    adopted as the prepared node if an addon needs help and may go there;
//! 2. the prepared node is checked: released when its addon is bound
//!    (anywhere), gone or no longer waiting, when the node is no longer
//!    suitable, after `rescheduler-pod-scheduled-timeout`, or when a
//!    victim's eviction was refused [`MAX_EVICTION_ATTEMPTS`] times (then
//!    the node is not chosen again for that addon); refused evictions below
//!    that bound are issued again;
//! 3. every other node carrying the reservation taint is released;
//! 4. with no node prepared, the addons that need help, oldest first, are
//!    planned for ([`choose_node`]); the first that fits somewhere gets its
//!    node tainted and its victims evicted; one that fits nowhere is
//!    reported once.
//!
//! While every zone is fully disrupted (node lifecycle's master disruption
//! mode, as of its last pass, which may be this instant's) nothing that
//! disrupts happens: no node is prepared and no pod evicted; releases
//! still go (removing our own taint is always safe).

use bevy_ecs::prelude::*;
use nodewarden_model::scheduling::CRITICAL_ADDONS_ONLY_TAINT;
use nodewarden_model::{
    ConditionStatus, ControllerConfig, Placement, Resources, Span, TaintEffect, Timestamp, Toleration,
};

use crate::action::{ActionKind, EventType, ObjectRef, WriteSlot};
use crate::components::*;
use crate::explain::AddonEviction;
use crate::metric_names;
use crate::reschedule::{
    Candidate, MAX_EVICTION_ATTEMPTS, Preparation, ReschedulerState, Resident, SchedFacts, Victim, choose_node,
    is_reservation_taint, reservation_taint,
};
use crate::resources::*;

/// A critical addon that needs help now.
struct Needy {
    key: String,
    uid: String,
    since: Timestamp,
    requests: Resources,
    tolerations: std::sync::Arc<[Toleration]>,
    placement: Placement,
}

/// The housekeeping pass (see the module documentation).
pub fn housekeeping(world: &mut World) {
    let now = world.resource::<Now>().0;
    let cfg = world.resource::<Settings>().0.clone();
    let all_down = world.resource::<DisruptionMode>().all_zones_down;
    world.resource_scope(|world: &mut World, mut facts: Mut<SchedFacts>| {
        world.resource_scope(|world: &mut World, mut state: Mut<ReschedulerState>| {
            let mut pass = Pass { world, facts: &mut facts, state: &mut state, now, cfg: &cfg, all_down };
            pass.run();
        });
    });
}

struct Pass<'a> {
    world: &'a mut World,
    facts: &'a mut SchedFacts,
    state: &'a mut ReschedulerState,
    now: Timestamp,
    cfg: &'a ControllerConfig,
    all_down: bool,
}

fn outcome(outcome: &'static str) {
    metrics::counter!(metric_names::RESCHEDULER_OUTCOMES_TOTAL, metric_names::OUTCOME => outcome).increment(1);
}

impl Pass<'_> {
    fn run(&mut self) {
        let needy = self.needing_help();
        metrics::gauge!(metric_names::RESCHEDULER_PENDING_ADDONS).set(needy.len() as f64);
        // Memory of addons that no longer need help goes.
        let pending = &self.facts.pending;
        self.state.failed.retain(|addon, _| pending.contains(addon));
        self.state.no_fit_reported.retain(|addon| needy.iter().any(|n| &n.key == addon));

        if !self.state.started {
            self.state.started = true;
            self.adopt(&needy);
        }
        self.check_prepared();
        let keep = self.state.prepared.as_ref().map(|p| p.node.clone());
        let stale: Vec<String> = self.facts.reserved.iter().filter(|n| Some(*n) != keep.as_ref()).cloned().collect();
        for node in stale {
            self.release(&node, "no critical addon is waiting for it", "released");
        }
        if self.state.prepared.is_some() || self.all_down {
            return;
        }
        for addon in &needy {
            if self.prepare_for(addon) {
                break;
            }
        }
    }

    /// Critical addons that need help now, oldest first.
    fn needing_help(&self) -> Vec<Needy> {
        let grace = self.cfg.rescheduler_unschedulable_grace;
        let mut out: Vec<Needy> = self
            .facts
            .pending
            .iter()
            .filter_map(|key| {
                let f = self.facts.pods.get(key)?;
                let since = f.unschedulable_since?;
                if since + grace > self.now {
                    return None;
                }
                let pod = self.pod(key)?;
                if pod.node.is_some() || pod.terminating {
                    return None;
                }
                Some(Needy {
                    key: key.clone(),
                    uid: pod.uid.to_string(),
                    since,
                    requests: f.requests,
                    tolerations: pod.tolerations.clone(),
                    placement: f.placement.as_deref().cloned().unwrap_or_default(),
                })
            })
            .collect();
        out.sort_by(|a, b| (a.since, &a.key).cmp(&(b.since, &b.key)));
        out
    }

    fn pod_entity(&self, key: &str) -> Option<Entity> {
        let world = &*self.world;
        world.resource::<PodIndex>().by_key.get(key, |e| world.get::<Pod>(e).map(|p| &*p.key))
    }

    fn pod(&self, key: &str) -> Option<&Pod> {
        self.pod_entity(key).and_then(|e| self.world.get::<Pod>(e))
    }

    fn node_entity(&self, name: &str) -> Option<Entity> {
        self.world.resource::<NodeIndex>().0.get(name).copied()
    }

    /// Whether `node` may take the addon at all (fit aside): Ready, not
    /// unschedulable, every NoSchedule/NoExecute taint tolerated (our own
    /// reservation aside), placement allowed, allocatable known.
    fn suitable(&self, node: &str, tolerations: &[Toleration], placement: &Placement) -> bool {
        let Some(e) = self.node_entity(node) else { return false };
        let Some(facts) = self.facts.nodes.get(node) else { return false };
        let entity = self.world.entity(e);
        let ready = entity.get::<ReadyView>().is_some_and(|r| r.status == Some(ConditionStatus::True));
        let schedulable = entity.get::<NodeMeta>().is_some_and(|m| !m.unschedulable);
        let tolerated = entity.get::<NodeTaints>().is_some_and(|t| {
            t.0.iter()
                .filter(|t| matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute))
                .filter(|t| !is_reservation_taint(t))
                .all(|t| tolerations.iter().any(|tol| tol.tolerates(t)))
        });
        ready && schedulable && tolerated && facts.allocatable.is_some() && placement.allows(node, &facts.labels)
    }

    /// A restarted controller finds the reservation it left: kept for the
    /// oldest addon needing help if that addon may go there.
    fn adopt(&mut self, needy: &[Needy]) {
        let Some(addon) = needy.first() else { return };
        let Some(node) =
            self.facts.reserved.iter().find(|n| self.suitable(n, &addon.tolerations, &addon.placement)).cloned()
        else {
            return;
        };
        tracing::info!(node = %node, addon = %addon.key, "adopting the reservation a previous run left");
        self.event(
            ObjectRef::Node(node.clone()),
            EventType::Normal,
            "CriticalAddonReservationAdopted",
            format!("Node {node} keeps its CriticalAddonsOnly reservation for critical addon {}", addon.key),
        );
        outcome("adopted");
        self.state.prepared = Some(Preparation {
            node,
            addon: addon.key.clone(),
            addon_uid: addon.uid.clone(),
            since: self.now,
            tier: None,
            victims: Vec::new(),
        });
    }

    /// Step 2 of the pass.
    fn check_prepared(&mut self) {
        let Some(prep) = self.state.prepared.clone() else { return };
        let addon = self.pod(&prep.addon).filter(|p| *p.uid == *prep.addon_uid);
        let waiting = addon.is_some_and(|p| p.node.is_none() && !p.terminating)
            && self.facts.pods.get(&prep.addon).is_some_and(|f| f.critical && f.unschedulable_since.is_some());
        let (why, what): (String, &'static str) = if let Some(bound) = addon.and_then(|p| p.node.clone()) {
            if *bound == *prep.node {
                (format!("critical addon {} was bound to it", prep.addon), "scheduled")
            } else {
                (format!("critical addon {} was bound to {bound} instead", prep.addon), "landed_elsewhere")
            }
        } else if !waiting {
            (format!("critical addon {} no longer waits to be scheduled", prep.addon), "addon_gone")
        } else if !self.addon_may_go(&prep.addon, &prep.node) {
            (format!("node {} can no longer take critical addon {}", prep.node, prep.addon), "node_unsuitable")
        } else if self.now >= prep.since + self.cfg.rescheduler_pod_scheduled_timeout {
            (
                format!(
                    "critical addon {} was not bound within {}",
                    prep.addon, self.cfg.rescheduler_pod_scheduled_timeout
                ),
                "timed_out",
            )
        } else {
            self.retry_refused(&prep);
            return;
        };
        self.state.prepared = None;
        self.release(&prep.node, &why, what);
    }

    fn addon_may_go(&self, addon: &str, node: &str) -> bool {
        let Some(pod) = self.pod(addon) else { return false };
        let tolerations = pod.tolerations.clone();
        let placement = self.facts.pods.get(addon).and_then(|f| f.placement.as_deref().cloned()).unwrap_or_default();
        self.suitable(node, &tolerations, &placement)
    }

    /// Victims whose eviction was refused are evicted again, until one has
    /// been refused [`MAX_EVICTION_ATTEMPTS`] times: then the node is given
    /// up for this addon and the next choice is made.
    fn retry_refused(&mut self, prep: &Preparation) {
        let mut again = Vec::new();
        for v in &prep.victims {
            let Some(e) = self.pod_entity(&v.key) else { continue };
            let Some(pod) = self.world.get::<Pod>(e) else { continue };
            if *pod.uid != *v.uid || pod.node.as_deref() != Some(prep.node.as_str()) {
                continue;
            }
            if pod.terminating || pod.progress.deletion_requested {
                continue;
            }
            let refusals = self.facts.refusals.get(&v.key).copied().unwrap_or(0);
            if refusals >= MAX_EVICTION_ATTEMPTS {
                self.state.prepared = None;
                self.state.failed.entry(prep.addon.clone()).or_default().insert(prep.node.clone());
                let why = format!("the eviction of {} was refused {refusals} times", v.key);
                self.release(&prep.node, &why, "evictions_refused");
                return;
            }
            again.push((e, v.clone(), refusals));
        }
        if self.all_down {
            return;
        }
        for (e, v, refusals) in again {
            self.event(
                ObjectRef::Pod(v.key.clone()),
                EventType::Warning,
                "FailedEviction",
                format!(
                    "Evicting Pod {} for critical addon {} was refused {refusals} time(s); trying again",
                    v.key, prep.addon
                ),
            );
            self.evict(e, &v);
        }
    }

    /// Removes nodewarden's reservation taint from `node` if it carries it.
    fn release(&mut self, node: &str, why: &str, what: &'static str) {
        self.facts.reserved.remove(node);
        outcome(what);
        let Some(e) = self.node_entity(node) else { return };
        let carries = self.world.get::<NodeTaints>(e).is_some_and(|t| t.0.iter().any(is_reservation_taint));
        if !carries {
            return;
        }
        tracing::info!(node, why, "releasing the node reserved for a critical addon");
        let now = self.now;
        self.world.resource_scope(|world: &mut World, mut outbox: Mut<Outbox>| {
            world.resource_scope(|world: &mut World, mut inbox: Mut<TaintManagerInbox>| {
                let mut entity = world.entity_mut(e);
                let Some(name) = entity.get::<NodeName>().map(|n| n.0.clone()) else { return };
                let Some(mut taints) = entity.get::<NodeTaints>().cloned() else { return };
                let Some(mut flags) = entity.get::<NodeFlags>().copied() else { return };
                let target = super::TaintTarget::new(&name, e, &mut taints, &mut flags);
                super::write_taints(
                    &mut outbox,
                    &mut inbox,
                    target,
                    vec![],
                    vec![reservation_taint()],
                    WriteSlot::CriticalAddonsTaint,
                    now,
                );
                entity.insert((taints, flags));
                outbox.event(
                    ObjectRef::Node(name.clone()),
                    EventType::Normal,
                    "CriticalAddonReservationReleased",
                    format!("Removed the CriticalAddonsOnly taint from node {name}: {why}"),
                );
            });
        });
    }

    fn event(&mut self, object: ObjectRef, kind: EventType, reason: &'static str, message: String) {
        self.world.resource_mut::<Outbox>().event(object, kind, reason, message);
    }

    /// The candidates for an addon, in name order, with their pods.
    fn candidates(&self, addon: &Needy) -> Vec<Candidate> {
        let failed = self.state.failed.get(&addon.key);
        let mut names: Vec<&String> = self.facts.nodes.keys().collect();
        names.sort();
        let budgets: Vec<&String> = self.facts.budgets.keys().collect();
        let mut out = Vec::new();
        for name in names {
            if failed.is_some_and(|f| f.contains(name)) || !self.suitable(name, &addon.tolerations, &addon.placement) {
                continue;
            }
            let Some(allocatable) = self.facts.nodes.get(name).and_then(|n| n.allocatable) else { continue };
            let index = self.world.resource::<PodIndex>();
            let mut residents: Vec<Resident> = index
                .on_node(name)
                .iter()
                .filter_map(|&e| self.world.get::<Pod>(e))
                .map(|pod| {
                    let facts = self.facts.pods.get(&*pod.key);
                    let evictable = facts.is_some_and(|f| !f.critical && !f.mirror)
                        && !pod.daemonset
                        && !pod.terminating
                        && !pod.progress.deletion_requested;
                    let covering = facts.map(|f| self.facts.budgets_of(&pod.key, &f.labels)).unwrap_or_default();
                    Resident {
                        key: pod.key.to_string(),
                        requests: facts.map_or(Resources { cpu_millis: 0, memory_bytes: 0, pods: 1 }, |f| f.requests),
                        evictable,
                        grace: facts.map_or(Span::ZERO, |f| f.grace),
                        controlled: facts.is_some_and(|f| f.controlled),
                        budgets: covering.iter().filter_map(|b| budgets.iter().position(|k| **k == b.key)).collect(),
                    }
                })
                .collect();
            residents.sort_by(|a, b| a.key.cmp(&b.key));
            out.push(Candidate { name: name.clone(), allocatable, residents });
        }
        out
    }

    /// Plans for one addon and prepares the node chosen; false when it fits
    /// nowhere (reported once).
    fn prepare_for(&mut self, addon: &Needy) -> bool {
        let candidates = self.candidates(addon);
        let allowed: Vec<u32> = self.facts.budgets.values().map(|b| b.disruptions_allowed).collect();
        let budget_keys: Vec<String> = self.facts.budgets.keys().cloned().collect();
        let grace = self.cfg.rescheduler_eviction_grace;
        let Some(choice) = choose_node(addon.requests, &candidates, &allowed, grace) else {
            if self.state.no_fit_reported.insert(addon.key.clone()) {
                tracing::warn!(addon = %addon.key, "critical addon fits on no node, even after evictions");
                outcome("no_fit");
                self.event(
                    ObjectRef::Pod(addon.key.clone()),
                    EventType::Warning,
                    "CriticalAddonNoFit",
                    format!(
                        "Critical addon {} (needs {}) fits on no node, even after evicting every pod that may be evicted; nothing done",
                        addon.key, addon.requests
                    ),
                );
            }
            return false;
        };
        self.state.no_fit_reported.remove(&addon.key);
        let node = &candidates[choice.node];
        let victims: Vec<&Resident> = choice.victims.iter().map(|&i| &node.residents[i]).collect();
        let names: Vec<String> = victims.iter().map(|r| r.key.clone()).collect();
        let tolerates = addon.tolerations.iter().any(|t| t.tolerates(&reservation_taint()));
        outcome("prepared");
        if tolerates {
            self.reserve(&node.name);
        } else {
            self.event(
                ObjectRef::Pod(addon.key.clone()),
                EventType::Warning,
                "CriticalAddonNotReserved",
                format!(
                    "Critical addon {} does not tolerate the {CRITICAL_ADDONS_ONLY_TAINT} taint: the room made on node {} cannot be reserved for it",
                    addon.key, node.name
                ),
            );
            outcome("not_reserved");
        }
        let message = format!(
            "Preparing node {} for critical addon {} (unschedulable since {}): tier {} ({}), evicting {} pod(s){}",
            node.name,
            addon.key,
            addon.since,
            choice.tier.number(),
            choice.tier.describe(),
            names.len(),
            if names.is_empty() { String::new() } else { format!(": {}", names.join(", ")) }
        );
        self.event(ObjectRef::Node(node.name.clone()), EventType::Normal, "CriticalAddonPreparing", message.clone());
        self.event(ObjectRef::Pod(addon.key.clone()), EventType::Normal, "CriticalAddonPreparing", message);
        let mut prepared = Vec::new();
        for r in &victims {
            let Some(pe) = self.pod_entity(&r.key) else { continue };
            let Some(uid) = self.world.get::<Pod>(pe).map(|p| p.uid.to_string()) else { continue };
            let budgets = r.budgets.iter().map(|&b| (budget_keys[b].clone(), allowed[b])).collect();
            let sent = r.grace.min(grace);
            let why = AddonEviction {
                pod: r.key.clone(),
                node: node.name.clone(),
                addon: addon.key.clone(),
                unschedulable_since: addon.since,
                needed: addon.requests,
                free_before: choice.free_before,
                tier: choice.tier,
                victims: names.clone(),
                freed: choice.freed,
                budgets,
                pod_grace: r.grace,
                grace: sent,
                decided_at: self.now,
            };
            let victim =
                Victim { key: r.key.clone(), uid, grace: (r.grace > grace).then_some(grace), why: Box::new(why) };
            self.facts.refusals.remove(&r.key);
            self.evict(pe, &victim);
            prepared.push(victim);
        }
        self.state.prepared = Some(Preparation {
            node: node.name.clone(),
            addon: addon.key.clone(),
            addon_uid: addon.uid.clone(),
            since: self.now,
            tier: Some(choice.tier),
            victims: prepared,
        });
        true
    }

    /// Adds the reservation taint unless the node already carries a
    /// `CriticalAddonsOnly` NoSchedule taint (ours, or someone else's,
    /// which reserves the room as well and is never replaced).
    fn reserve(&mut self, node: &str) {
        let Some(e) = self.node_entity(node) else { return };
        let present = self
            .world
            .get::<NodeTaints>(e)
            .is_some_and(|t| t.0.iter().any(|t| t.is(CRITICAL_ADDONS_ONLY_TAINT, TaintEffect::NoSchedule)));
        if present {
            if self.world.get::<NodeTaints>(e).is_some_and(|t| t.0.iter().any(is_reservation_taint)) {
                self.facts.reserved.insert(node.to_string());
            }
            return;
        }
        self.facts.reserved.insert(node.to_string());
        let now = self.now;
        self.world.resource_scope(|world: &mut World, mut outbox: Mut<Outbox>| {
            world.resource_scope(|world: &mut World, mut inbox: Mut<TaintManagerInbox>| {
                let mut entity = world.entity_mut(e);
                let Some(name) = entity.get::<NodeName>().map(|n| n.0.clone()) else { return };
                let Some(mut taints) = entity.get::<NodeTaints>().cloned() else { return };
                let Some(mut flags) = entity.get::<NodeFlags>().copied() else { return };
                let target = super::TaintTarget::new(&name, e, &mut taints, &mut flags);
                super::write_taints(
                    &mut outbox,
                    &mut inbox,
                    target,
                    vec![reservation_taint()],
                    vec![],
                    WriteSlot::CriticalAddonsTaint,
                    now,
                );
                entity.insert((taints, flags));
            });
        });
    }

    /// Issues one eviction; the pod counts as being deleted until the
    /// eviction is refused (so the taint manager does not delete it too).
    fn evict(&mut self, pod: Entity, v: &Victim) {
        if let Some(mut p) = self.world.get_mut::<Pod>(pod) {
            p.progress.deletion_requested = true;
        }
        metrics::counter!(metric_names::RESCHEDULER_EVICTIONS_TOTAL).increment(1);
        tracing::info!(pod = %v.key, why = %v.why.one_line(), "evicting for a critical addon");
        self.world.resource_mut::<Outbox>().write(ActionKind::EvictForAddon {
            pod: v.key.clone(),
            uid: v.uid.clone(),
            grace: v.grace,
            why: v.why.clone(),
        });
    }
}
