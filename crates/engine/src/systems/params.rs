//! The resources the systems take together, bundled by what they mean.
//!
//! A system names the bundles it needs instead of a long list of
//! `Res`/`ResMut`/`Query` arguments, and destructures them on its first
//! line, so its body reads the same as with separate arguments. A bundle
//! only groups parameters: bevy sees the same accesses as before, so the
//! schedules, their order and their cost are unchanged.
//!
//! Two bundles may not both hold the same resource when one of them holds
//! it mutably (bevy refuses such a system when it builds the schedule):
//! the health pass's systems take [`MonitorPass`], which writes the
//! monitor's timers, and so never [`Lookups`], which reads them.

use bevy_ecs::prelude::*;
use bevy_ecs::system::SystemParam;

use nodewarden_model::{ConditionStatus, Span, Timestamp};

use crate::components::{NodeName, PendingDeletion, Pod};
use crate::judgement::{Judged, Judgements};
use crate::monitor::{Health, NodeTimers, ZoneCounts};
use crate::resources::{
    DeletionTimers, NodeIndex, Now, Outbox, PassScratch, PodIndex, Settings, TaintManagerInbox, ZoneIndex,
};

/// The instant a pass decides at and the configuration it decides under.
/// Every decision reads both: deadlines are `now` against a period from the
/// settings, and neither changes while a tick runs.
#[derive(SystemParam)]
pub struct Tick<'w> {
    /// The tick's virtual time.
    pub now: Res<'w, Now>,
    /// The controller's configuration.
    pub settings: Res<'w, Settings>,
}

/// Where a taint write goes: the Outbox (to the API server) and the taint
/// manager's inbox. They travel together because a write that takes a
/// node's last NoExecute taint off must reach the taint manager in the same
/// breath ([`super::write_taints`] takes both), and the taint manager, which
/// drains the inbox, answers through the Outbox.
#[derive(SystemParam)]
pub struct Emit<'w> {
    /// Actions and Events for the API server.
    pub outbox: ResMut<'w, Outbox>,
    /// Nodes and pods the taint manager must look at again.
    pub inbox: ResMut<'w, TaintManagerInbox>,
}

/// The health monitor's own state, carried from pass to pass and from each
/// of the pass's systems to the next: the timers that say which nodes the
/// pass visits, the zone counts kept as nodes change, and the scratch lists
/// that hand the work on (pass 1 to [`super::health::decide`], verdicts to
/// the eviction mode's system, tallies to `handle_disruption`).
#[derive(SystemParam)]
pub struct MonitorPass<'w> {
    /// Work, verdicts and zone tallies of this pass.
    pub scratch: ResMut<'w, PassScratch>,
    /// Per-zone counts of counted and not-Ready nodes.
    pub counts: ResMut<'w, ZoneCounts>,
    /// Which nodes the pass visits; a node's `Health` is read through them.
    pub timers: ResMut<'w, NodeTimers>,
}

/// Read-only ways in for the systems that act outside the health pass: a
/// node by name, the zones in slot order, and the monitor's timers, without
/// which a node's `Health` record cannot be read.
#[derive(SystemParam)]
pub struct Lookups<'w> {
    /// Node entity by name.
    pub node_index: Res<'w, NodeIndex>,
    /// Zone entities by slot.
    pub zone_index: Res<'w, ZoneIndex>,
    /// The health monitor's timers (read only).
    pub timers: Res<'w, NodeTimers>,
}

/// A node's pods: the index lists them by node name, the query reaches
/// them. Marking pods NotReady and deleting them go through both.
#[derive(SystemParam)]
pub struct NodePods<'w, 's> {
    /// Pod entities by node name.
    pub index: Res<'w, PodIndex>,
    /// The pods.
    pub pods: Query<'w, 's, &'static mut Pod>,
}

/// The taint manager's scheduled deletions: a deadline lives both in the
/// heap and in the pod's [`PendingDeletion`], which is what makes a heap
/// entry stale when it is cancelled, so the two are always changed
/// together.
#[derive(SystemParam)]
pub struct Deletions<'w, 's> {
    /// Deadlines, earliest first.
    pub timers: ResMut<'w, DeletionTimers>,
    /// The pods and their pending deletions.
    pub pods: Query<'w, 's, (&'static mut Pod, &'static mut PendingDeletion)>,
    /// A shadow's record of the deadlines that came (or that the pod's own
    /// deletion cut short).
    pub judgements: ResMut<'w, Judgements>,
}

/// What a pass that deletes pods hands on: the writes and Events for the
/// API server, and, for a shadow, its conclusions.
#[derive(SystemParam)]
pub struct Decided<'w> {
    /// Actions and Events.
    pub outbox: ResMut<'w, Outbox>,
    /// A shadow's judgements.
    pub judgements: ResMut<'w, Judgements>,
}

/// What a health pass needs to record a shadow's judgement of a silent
/// node ([`crate::judgement::Judgement`]): the record, the node's name, and how many
/// pods are bound to it. Nothing is recorded, or looked up, unless a
/// driver asked for judgements.
#[derive(SystemParam)]
pub struct ShadowFacts<'w, 's> {
    /// Where judgements go, and whether they are kept.
    pub judgements: ResMut<'w, Judgements>,
    /// Node names.
    pub names: Query<'w, 's, &'static NodeName>,
    /// Pods by node name.
    pub pods: Res<'w, PodIndex>,
}

impl ShadowFacts<'_, '_> {
    /// A silence past `grace` found on `node` with `probe` as its last
    /// heartbeat seen, its Ready condition `status` as observed: judged
    /// once per silence; its pods' not-ready marks go with it when upstream
    /// would make them: a Ready condition this pass turns from True, with
    /// pods bound; or one the writer left Unknown, which marked the pods
    /// it saw then, even if they are gone by now (its taint manager may
    /// have deleted them before this pass).
    pub fn judge_silence(
        &mut self,
        node: Entity,
        health: &mut Health,
        probe: Timestamp,
        grace: Span,
        status: Option<ConditionStatus>,
        now: Timestamp,
    ) {
        if !self.judgements.on {
            return;
        }
        let Some(first_sight) = health.judge_silence(probe) else { return };
        let Ok(name) = self.names.get(node) else { return };
        let name = name.0.as_str();
        self.judgements.note(now, name, || Judged::Silent { probe, grace, first_sight });
        let pods = self.pods.on_node(name).len();
        let marked = match status {
            Some(ConditionStatus::True) => pods > 0,
            Some(ConditionStatus::Unknown) => true,
            _ => false,
        };
        if marked {
            self.judgements.note(now, name, || Judged::PodsNotReady { pods });
        }
    }
}
