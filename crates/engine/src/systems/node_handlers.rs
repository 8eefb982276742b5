//! Event-driven node handlers: NoSchedule taints from conditions
//! (`doNoScheduleTaintingPass`) and label reconciliation
//! (`reconcileNodeLabels`). They run on every node change, the
//! controller's own writes included, independent of zone state, rate limits
//! and eviction mode.

use std::collections::BTreeMap;

use bevy_ecs::prelude::*;
use nodewarden_model::{ConditionStatus, ConditionType, Taint, TaintEffect, keys};

use crate::action::{ActionKind, WriteSlot};
use crate::components::*;
use crate::judgement::{Judged, Judgements};
use crate::resources::*;

use super::params::Emit;

/// What the handlers read and reconcile on a changed node: its conditions
/// and `spec.unschedulable` against its NoSchedule taints, its labels.
type ChangedNodeQuery<'w, 's> = Query<
    'w,
    's,
    (
        &'static NodeName,
        &'static mut NodeMeta,
        &'static NodeConditions,
        &'static mut NodeTaints,
        &'static mut NodeFlags,
    ),
>;

/// The NoSchedule taint a condition in a given status calls for.
pub fn condition_taint(kind: &ConditionType, status: ConditionStatus) -> Option<&'static str> {
    use ConditionStatus::*;
    match (kind, status) {
        (ConditionType::Ready, False) => Some(keys::TAINT_NOT_READY),
        (ConditionType::Ready, Unknown) => Some(keys::TAINT_UNREACHABLE),
        (ConditionType::MemoryPressure, True) => Some(keys::TAINT_MEMORY_PRESSURE),
        (ConditionType::DiskPressure, True) => Some(keys::TAINT_DISK_PRESSURE),
        (ConditionType::PidPressure, True) => Some(keys::TAINT_PID_PRESSURE),
        (ConditionType::NetworkUnavailable, True) => Some(keys::TAINT_NETWORK_UNAVAILABLE),
        _ => None,
    }
}

/// Whether the NoSchedule pass owns a taint key.
pub fn managed_key(key: &str) -> bool {
    matches!(
        key,
        keys::TAINT_NOT_READY
            | keys::TAINT_UNREACHABLE
            | keys::TAINT_MEMORY_PRESSURE
            | keys::TAINT_DISK_PRESSURE
            | keys::TAINT_PID_PRESSURE
            | keys::TAINT_NETWORK_UNAVAILABLE
            | keys::TAINT_UNSCHEDULABLE
    )
}

/// Keeps the controller-owned NoSchedule taints equal to what the node's
/// conditions and `spec.unschedulable` call for; every other taint is left
/// alone (D1, D2).
pub fn noschedule_and_labels(
    now: Res<Now>,
    mut changed: ResMut<ChangedNodes>,
    mut nodes: ChangedNodeQuery,
    emit: Emit,
    mut judgements: ResMut<Judgements>,
) {
    let Emit { mut outbox, mut inbox } = emit;
    if changed.0.is_empty() {
        return;
    }
    let mut list = std::mem::take(&mut changed.0);
    list.sort_unstable();
    list.dedup();
    for &e in &list {
        let Ok((name, mut meta, conditions, mut taints, mut flags)) = nodes.get_mut(e) else { continue };
        let mut wanted: Vec<Taint> = conditions
            .0
            .iter()
            .filter_map(|c| condition_taint(&c.kind, c.status))
            .map(|k| Taint::new(k, TaintEffect::NoSchedule))
            .collect();
        if meta.unschedulable {
            wanted.push(Taint::new(keys::TAINT_UNSCHEDULABLE, TaintEffect::NoSchedule));
        }
        // The Ready taints called for, added now or found there; a
        // shadow keeps the first of each while the node stays so.
        for w in wanted.iter().filter(|w| w.key == keys::TAINT_NOT_READY || w.key == keys::TAINT_UNREACHABLE) {
            judgements.note(now.0, &name.0, || Judged::Taint { taint: w.clone(), released: None });
        }
        let have: Vec<&Taint> =
            taints.0.iter().filter(|t| t.effect == TaintEffect::NoSchedule && managed_key(&t.key)).collect();
        let add: Vec<Taint> = wanted.iter().filter(|w| !have.iter().any(|h| h.same_as(w))).cloned().collect();
        let remove: Vec<Taint> =
            have.iter().filter(|h| !wanted.iter().any(|w| w.same_as(h))).map(|h| (*h).clone()).collect();
        if !add.is_empty() || !remove.is_empty() {
            let target = super::TaintTarget { name: &name.0, entity: e, taints: &mut taints, flags: &mut flags };
            super::write_taints(&mut outbox, &mut inbox, target, add, remove, WriteSlot::NoScheduleTaints, now.0);
        }

        let mut patch = BTreeMap::new();
        for ((_, beta), [stable_value, beta_value]) in keys::RECONCILED_LABELS.iter().zip(&mut meta.labels.0) {
            if let Some(v) = stable_value
                && beta_value.as_ref() != Some(v)
            {
                patch.insert(beta.to_string(), v.to_string());
                // What the patch will make it: later passes compare with this.
                *beta_value = Some(v.clone());
            }
        }
        if !patch.is_empty() {
            outbox.write(ActionKind::PatchNodeLabels { node: name.0.clone(), labels: patch });
        }
    }
    changed.0 = recycle(list);
}
