//! A PodDisruptionBudget's reading, for the rescheduler: what it covers
//! and how many disruptions it allows now.

use nodewarden_engine::{BudgetSnapshot, Observation};
use nodewarden_model::{LabelSelector, Timestamp};
use serde_json::Value;

use super::{Reading, at, label_selector, name_of};
use crate::time::TimeBase;

/// The observation a policy/v1 PodDisruptionBudget's JSON gives: its
/// selector and `status.disruptionsAllowed` ([`Observation::BudgetUpserted`]),
/// or [`Observation::BudgetDeleted`] for a budget without a selector (it
/// covers no pod). `None` when it cannot be named. See the module's
/// documentation for how odd fields are read.
pub fn budget_reading(v: &Value, seen_at: Timestamp) -> Option<Observation> {
    read(v, seen_at, TimeBase::UNIX)
}

pub(super) fn read(v: &Value, seen_at: Timestamp, clock: TimeBase) -> Option<Observation> {
    let ns = at(v, &["metadata", "namespace"]).and_then(Value::as_str).filter(|n| !n.is_empty());
    let (Some(name), Some(ns)) = (name_of(v), ns) else {
        tracing::warn!(
            kind = "PodDisruptionBudget",
            "ignoring a PodDisruptionBudget without a readable name or namespace"
        );
        return None;
    };
    let key = format!("{ns}/{name}");
    let r = Reading { kind: "PodDisruptionBudget", name: &key, seen_at, clock };
    let (selector, readable) = match at(v, &["spec", "selector"]) {
        None => return Some(Observation::BudgetDeleted { key }),
        Some(sel) => match label_selector(sel) {
            Ok(s) => (s, true),
            Err(what) => {
                r.odd(
                    "spec.selector",
                    &format!("{what}; read as covering every pod of the namespace and allowing no disruption"),
                );
                (LabelSelector::default(), false)
            }
        },
    };
    let allowed = match at(v, &["status", "disruptionsAllowed"]) {
        None => 0,
        Some(x) => match x.as_i64() {
            Some(n) if n >= 0 => u32::try_from(n).unwrap_or(u32::MAX),
            _ => {
                r.odd("status.disruptionsAllowed", &format!("{x} is not a count; read as 0"));
                0
            }
        },
    };
    let generation = at(v, &["metadata", "generation"]).and_then(Value::as_i64);
    let observed = at(v, &["status", "observedGeneration"]).and_then(Value::as_i64);
    // The disruption controller has not looked at the latest spec yet: the
    // Eviction API refuses every eviction under it until it has.
    let current = match (generation, observed) {
        (Some(g), Some(o)) => o >= g,
        (Some(_), None) => false,
        (None, _) => true,
    };
    let disruptions_allowed = if readable && current { allowed } else { 0 };
    Some(Observation::BudgetUpserted(BudgetSnapshot { key, selector, disruptions_allowed }))
}
