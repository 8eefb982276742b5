//! Nodewarden's side of a comparison: which decision a [`Judgement`] is,
//! and the facts behind it in one line.
//!
//! The line is what an operator reads next to a disagreement (in the log
//! and in the summary): not "nodewarden was 40 s later" alone, but why
//! nodewarden decided when it did (the heartbeat it last saw and the grace,
//! the zone's state and rate and when the node was queued, the toleration
//! that ran out), so the first look already points at the cause.

use std::fmt::Write as _;

use nodewarden_engine::explain::{TaintingFacts, Verdict as Rule};
use nodewarden_engine::{Judged, Judgement};
use nodewarden_model::{TaintEffect, Timestamp, ZoneKey};

use crate::kind::DecisionKind;

/// The reason given for an `only-upstream` verdict: nodewarden has no
/// facts to show, only their absence.
pub(crate) const NO_SUCH_DECISION: &str = "nodewarden reached no such decision within the window";

/// The decision a judgement is and its object (the node, or the pod for a
/// pod deletion); `None` for a taint the shadow does not compare (any but
/// the four node lifecycle taints).
pub(crate) fn decision_of(j: &Judgement) -> Option<(DecisionKind, &str)> {
    match &j.what {
        Judged::Silent { .. } => Some((DecisionKind::Unknown, &j.node)),
        Judged::PodsNotReady { .. } => Some((DecisionKind::PodsNotReady, &j.node)),
        Judged::Taint { taint, .. } => DecisionKind::of_taint(&taint.key, taint.effect).map(|k| (k, j.node.as_str())),
        Judged::PodDeletion { pod, .. } => Some((DecisionKind::PodDeletion, pod)),
        Judged::LegacyEviction { .. } => Some((DecisionKind::LegacyDeletion, &j.node)),
    }
}

/// A zone as reports name it: `region/zone`, or `(unlabelled)` for nodes
/// without zone labels (whose key displays as nothing).
pub(crate) fn zone_name(zone: &ZoneKey) -> String {
    if zone.is_empty() { "(unlabelled)".to_string() } else { zone.to_string() }
}

/// The facts behind a judgement, in one line. `now` is when the shadow was
/// told of it: a pod deletion due after that was cut short by the pod's
/// own deletion, and the line says so.
pub(crate) fn reason(j: &Judgement, now: Timestamp) -> String {
    let mut s = String::new();
    match &j.what {
        Judged::Silent { probe, grace, first_sight } => {
            let _ = write!(s, "last heartbeat seen {probe}, grace {grace}");
            if *first_sight {
                s.push_str(" (first sight of the node)");
            }
        }
        Judged::PodsNotReady { pods } => {
            let _ = write!(s, "{pods} pod(s) bound to the node");
        }
        Judged::Taint { taint, released } => match (taint.effect, released) {
            (TaintEffect::NoExecute, Some(facts)) => tainting(&mut s, facts),
            _ => {
                let _ = write!(s, "{} called for by the node's Ready condition", taint.short());
            }
        },
        Judged::PodDeletion { verdict, scheduled_at, .. } => {
            rule(&mut s, verdict);
            let _ = write!(s, ", scheduled {scheduled_at}");
            if j.at > now {
                let _ = write!(s, ", due {} (cut short by the pod's own deletion)", j.at);
            }
        }
        Judged::LegacyEviction { pods, verdict } => {
            rule(&mut s, verdict);
            let _ = write!(s, ", {pods} pod(s) bound");
        }
    }
    s
}

/// How a NoExecute taint came to be due: its zone's queue, or an
/// immediate swap from the opposite taint.
fn tainting(s: &mut String, facts: &TaintingFacts) {
    match facts.queued_at {
        Some(queued) => {
            let state = facts.zone_state.map_or("without a state", |z| z.as_str());
            let _ = write!(s, "zone {} {state} at {}/s, queued {queued}", zone_name(&facts.zone), facts.zone_rate);
        }
        None => s.push_str("immediate swap"),
    }
}

/// The rule that made a deletion due.
fn rule(s: &mut String, verdict: &Rule) {
    match verdict {
        Rule::NotTolerated { taint } => {
            let _ = write!(s, "untolerated taint {}", taint.short());
        }
        Rule::TolerationExpired { toleration, seconds } => {
            let key = if toleration.key.is_empty() { "*" } else { &toleration.key };
            let _ = write!(s, "toleration of {key} for {seconds} s ran out");
        }
        Rule::EvictionTimeout { status, since, timeout, zone_rate } => {
            let _ = write!(s, "{status} since {since}, pod-eviction-timeout {timeout}, zone rate {zone_rate}/s");
        }
    }
}

#[cfg(test)]
mod tests {
    use nodewarden_model::keys::TAINT_UNREACHABLE;
    use nodewarden_model::{ConditionStatus, Span, Taint, Toleration, ZoneState};

    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_secs(1_800_000_000 + s)
    }

    fn judged(what: Judged) -> Judgement {
        Judgement { at: t(100), node: "n1".into(), what }
    }

    #[test]
    fn each_judgement_says_its_facts_in_one_line() {
        let silent = judged(Judged::Silent { probe: t(50), grace: Span::from_secs(40), first_sight: false });
        assert_eq!(reason(&silent, t(100)), "last heartbeat seen 2027-01-15T08:00:50Z, grace 40s");

        let unreachable = Taint::new(TAINT_UNREACHABLE, TaintEffect::NoExecute);
        let facts = TaintingFacts {
            taint: unreachable.clone(),
            queued_at: Some(t(60)),
            zone: ZoneKey::new("r", "z"),
            zone_rate: 0.1,
            zone_state: Some(ZoneState::Normal),
        };
        let taint = judged(Judged::Taint { taint: unreachable.clone(), released: Some(facts.clone()) });
        assert_eq!(reason(&taint, t(100)), "zone r/z Normal at 0.1/s, queued 2027-01-15T08:01:00Z");
        let swap = judged(Judged::Taint {
            taint: unreachable.clone(),
            released: Some(TaintingFacts { queued_at: None, ..facts }),
        });
        assert_eq!(reason(&swap, t(100)), "immediate swap");

        let toleration = Toleration::no_execute(TAINT_UNREACHABLE, Some(300));
        let deletion = judged(Judged::PodDeletion {
            pod: "ns/p".into(),
            verdict: Rule::TolerationExpired { toleration, seconds: 300 },
            scheduled_at: t(-200),
        });
        assert_eq!(
            reason(&deletion, t(100)),
            "toleration of node.kubernetes.io/unreachable for 300 s ran out, scheduled 2027-01-15T07:56:40Z"
        );
        assert!(reason(&deletion, t(90)).ends_with("(cut short by the pod's own deletion)"));
        assert_eq!(decision_of(&deletion), Some((DecisionKind::PodDeletion, "ns/p")));

        let legacy = judged(Judged::LegacyEviction {
            pods: 3,
            verdict: Rule::EvictionTimeout {
                status: ConditionStatus::Unknown,
                since: t(-200),
                timeout: Span::from_secs(300),
                zone_rate: 0.1,
            },
        });
        assert_eq!(
            reason(&legacy, t(100)),
            "Unknown since 2027-01-15T07:56:40Z, pod-eviction-timeout 300s, zone rate 0.1/s, 3 pod(s) bound"
        );
    }

    #[test]
    fn taints_other_than_the_lifecycle_four_are_not_compared() {
        let other =
            judged(Judged::Taint { taint: Taint::new("example.com/x", TaintEffect::NoExecute), released: None });
        assert_eq!(decision_of(&other), None);
    }
}
