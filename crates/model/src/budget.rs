//! A PodDisruptionBudget's amounts: `minAvailable` and `maxUnavailable`,
//! each a count of pods or a percentage of the pods the budget expects.
//!
//! The scenario files, the served cluster's disruption controller and
//! what-if's snapshots all hold budgets, so the amounts and the one way
//! they are scaled live here. Reading them from an API object's JSON is
//! `nodewarden_objects`'s job; turning them into a budget's status is
//! `nodewarden_cluster::rules::budget`'s.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// A count or a percentage, as a PodDisruptionBudget's `minAvailable` and
/// `maxUnavailable` are written (`2`, `"50%"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOrPercent {
    /// A number of pods.
    Int(u32),
    /// A percentage (0 to 100 in a scenario file; the API server lets more
    /// through) of the pods the budget expects.
    Percent(u32),
}

impl IntOrPercent {
    /// The amount for `expected` pods, percentages rounded up (as the
    /// disruption controller scales both fields, upstream
    /// `GetScaledValueFromIntOrPercent` with rounding up).
    pub fn scaled(self, expected: u32) -> u32 {
        match self {
            IntOrPercent::Int(n) => n,
            IntOrPercent::Percent(p) => {
                (u64::from(p) * u64::from(expected)).div_ceil(100).try_into().unwrap_or(u32::MAX)
            }
        }
    }
}

impl fmt::Display for IntOrPercent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntOrPercent::Int(n) => write!(f, "{n}"),
            IntOrPercent::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// The scenario file's form: a whole number of pods, or a percentage of
/// at most 100 as a string; surrounding blanks are forgiven, anything else
/// is an error naming what was found.
impl<'de> Deserialize<'de> for IntOrPercent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<IntOrPercent, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = IntOrPercent;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of pods (2) or a percentage (\"50%\")")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<IntOrPercent, E> {
                u32::try_from(v).map(IntOrPercent::Int).map_err(|_| E::custom(format!("{v} pods is too many")))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<IntOrPercent, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom(format!("must not be negative, got {v}"))),
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<IntOrPercent, E> {
                let bad = || E::custom(format!("{v:?} is neither a number of pods (2) nor a percentage (\"50%\")"));
                match v.trim().strip_suffix('%') {
                    Some(p) => {
                        let p: u32 = p.trim().parse().map_err(|_| bad())?;
                        if p > 100 {
                            return Err(E::custom(format!("{v:?}: a percentage is at most 100%")));
                        }
                        Ok(IntOrPercent::Percent(p))
                    }
                    None => v.trim().parse::<u32>().map(IntOrPercent::Int).map_err(|_| bad()),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// A budget's spec amounts as the API object holds them: either, both
/// (the API server refuses that, but a snapshot file may hold it) or
/// neither.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BudgetAmounts {
    /// `spec.minAvailable`.
    pub min_available: Option<IntOrPercent>,
    /// `spec.maxUnavailable`; the disruption controller reads it first.
    pub max_unavailable: Option<IntOrPercent>,
}

/// The amount that counts, as the disruption controller picks it:
/// `maxUnavailable` when set, else `minAvailable`, else a budget that
/// allows nothing.
impl fmt::Display for BudgetAmounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.max_unavailable, self.min_available) {
            (Some(max), _) => write!(f, "maxUnavailable {max}"),
            (None, Some(min)) => write!(f, "minAvailable {min}"),
            (None, None) => f.write_str("neither minAvailable nor maxUnavailable (allows nothing)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_scale_rounding_up() {
        assert_eq!(IntOrPercent::Percent(50).scaled(3), 2);
        assert_eq!(IntOrPercent::Percent(10).scaled(0), 0);
        assert_eq!(IntOrPercent::Int(4).scaled(1), 4);
    }

    #[test]
    fn the_amount_shown_is_the_one_that_counts() {
        let both = BudgetAmounts {
            min_available: Some(IntOrPercent::Int(2)),
            max_unavailable: Some(IntOrPercent::Percent(10)),
        };
        assert_eq!(both.to_string(), "maxUnavailable 10%");
        let min = BudgetAmounts { min_available: Some(IntOrPercent::Int(2)), max_unavailable: None };
        assert_eq!(min.to_string(), "minAvailable 2");
        assert!(BudgetAmounts::default().to_string().contains("allows nothing"));
    }
}
