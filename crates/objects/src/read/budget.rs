//! A PodDisruptionBudget's reading, for the rescheduler: what it covers
//! and how many disruptions it allows now.

use nodewarden_engine::{BudgetSnapshot, Observation};
use nodewarden_model::{BudgetAmounts, IntOrPercent, LabelSelector, Timestamp};
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

/// A budget's `spec.minAvailable` and `spec.maxUnavailable` as the
/// disruption controller reads them (upstream
/// `intstr.GetScaledValueFromIntOrPercent`): each a whole number, or a
/// string of digits ending in `%`; anything else is an error worded as
/// upstream's (the served cluster puts it in the budget's condition),
/// which fails the budget's sync (it then allows nothing).
pub fn budget_amounts(v: &Value) -> Result<BudgetAmounts, String> {
    let field = |name: &str| match at(v, &["spec", name]) {
        None => Ok(None),
        Some(x) => int_or_percent(x).map(Some),
    };
    Ok(BudgetAmounts { min_available: field("minAvailable")?, max_unavailable: field("maxUnavailable")? })
}

fn int_or_percent(v: &Value) -> Result<IntOrPercent, String> {
    let bad = || format!("invalid value for IntOrString: {v}");
    match v {
        Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()).map(IntOrPercent::Int).ok_or_else(bad),
        Value::String(s) => {
            let digits = s.strip_suffix('%').ok_or_else(bad)?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            digits.parse().map(IntOrPercent::Percent).map_err(|_| bad())
        }
        _ => Err(bad()),
    }
}
