//! Taints, tolerations and upstream's matching rules.
//!
//! Matching follows `Toleration.ToleratesTaint` and the taint manager's
//! `GetMatchingTolerations` / `getMinTolerationTime`: an empty toleration
//! effect matches every effect, an empty key (with `Exists`) every key, and
//! for each taint only the first toleration in pod order that tolerates it
//! counts.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::time::{Span, Timestamp};

/// What a taint does to pods that do not tolerate it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TaintEffect {
    /// New pods are not scheduled onto the node.
    NoSchedule,
    /// The scheduler tries to avoid the node.
    PreferNoSchedule,
    /// Running pods are evicted (after their toleration time, if any).
    NoExecute,
}

impl TaintEffect {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

impl fmt::Display for TaintEffect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node taint. Two taints are "the same taint" when key and effect match
/// (upstream `MatchTaint`); the value and `time_added` are payload.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Taint {
    /// The taint key.
    pub key: String,
    /// The taint value; empty when absent.
    #[serde(default)]
    pub value: String,
    /// The effect.
    pub effect: TaintEffect,
    /// When the taint was added (set by the controller on NoExecute taints).
    #[serde(default, rename = "time-added", skip_serializing_if = "Option::is_none")]
    pub time_added: Option<Timestamp>,
}

impl Taint {
    /// A taint with an empty value and no `time_added`.
    pub fn new(key: impl Into<String>, effect: TaintEffect) -> Taint {
        Taint { key: key.into(), value: String::new(), effect, time_added: None }
    }

    /// Same key and effect (upstream `MatchTaint`).
    pub fn same_as(&self, other: &Taint) -> bool {
        self.key == other.key && self.effect == other.effect
    }

    /// True for a taint with this key and effect.
    pub fn is(&self, key: &str, effect: TaintEffect) -> bool {
        self.key == key && self.effect == effect
    }

    /// The `key:Effect` spelling used by scenario expectations.
    pub fn short(&self) -> String {
        format!("{}:{}", self.key, self.effect)
    }
}

/// How a toleration compares its value with the taint's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TolerationOperator {
    /// Values must be equal (the default, also for an empty operator).
    #[default]
    Equal,
    /// Any value matches.
    Exists,
}

/// A pod toleration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Toleration {
    /// The taint key to match; empty matches every key (meaningful with `Exists`).
    #[serde(default)]
    pub key: String,
    /// Equal or Exists.
    #[serde(default)]
    pub operator: TolerationOperator,
    /// The value to compare with `Equal`.
    #[serde(default)]
    pub value: String,
    /// The effect to match; `None` matches every effect.
    #[serde(default)]
    pub effect: Option<TaintEffect>,
    /// `tolerationSeconds`: how long a NoExecute taint is tolerated; `None` = forever.
    #[serde(default)]
    pub seconds: Option<i64>,
}

impl Toleration {
    /// Tolerates the NoExecute taint `key` (any value) for `seconds`
    /// (`None`: forever): the shape of the tolerations admission adds for
    /// `not-ready` and `unreachable`, and of most that users write.
    pub fn no_execute(key: &str, seconds: Option<i64>) -> Toleration {
        Toleration {
            key: key.to_string(),
            operator: TolerationOperator::Exists,
            value: String::new(),
            effect: Some(TaintEffect::NoExecute),
            seconds,
        }
    }

    /// Upstream `ToleratesTaint`.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match self.operator {
            TolerationOperator::Exists => true,
            TolerationOperator::Equal => self.value == taint.value,
        }
    }
}

/// When a pod on a node with NoExecute taints must go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TolerationVerdict {
    /// At least one taint is not tolerated, or a matched toleration has
    /// `tolerationSeconds <= 0`: delete now.
    Now,
    /// Every taint is tolerated and the smallest matched `tolerationSeconds`
    /// is this long.
    After(Span),
    /// Every taint is tolerated by tolerations without `tolerationSeconds`.
    Never,
}

/// For each taint, the first toleration (in pod order) that tolerates it;
/// `Err` names the first taint nothing tolerates (`GetMatchingTolerations`).
pub fn matching_tolerations<'a>(taints: &[Taint], tolerations: &'a [Toleration]) -> Result<Vec<&'a Toleration>, usize> {
    taints.iter().enumerate().map(|(i, taint)| tolerations.iter().find(|t| t.tolerates(taint)).ok_or(i)).collect()
}

/// Which taint or toleration decides a pod's fate on a node with NoExecute
/// taints: the facts behind a [`TolerationVerdict`], kept for explanations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision<'a> {
    /// The node has no NoExecute taint.
    NoTaints,
    /// This taint has no matching toleration.
    Untolerated(&'a Taint),
    /// Every taint is tolerated; this toleration (the first match of some
    /// taint) has the smallest `tolerationSeconds` (any value `<= 0` means
    /// at once, as upstream's `getMinTolerationTime` treats it).
    Expires {
        /// The deciding toleration.
        toleration: &'a Toleration,
        /// Its `tolerationSeconds`.
        seconds: i64,
    },
    /// Every taint is tolerated by tolerations without `tolerationSeconds`.
    Forever,
}

/// Works out the [`Decision`] for a pod with `tolerations` on a node whose
/// taints are `taints` (`processPodOnNode`, `getMinTolerationTime`). Taints
/// of other effects are ignored, so callers may pass a node's whole set.
pub fn decide<'a>(taints: &'a [Taint], tolerations: &'a [Toleration]) -> Decision<'a> {
    let mut best: Option<(&Toleration, i64)> = None;
    let mut any = false;
    for taint in taints.iter().filter(|t| t.effect == TaintEffect::NoExecute) {
        any = true;
        let Some(tol) = tolerations.iter().find(|t| t.tolerates(taint)) else {
            return Decision::Untolerated(taint);
        };
        // Every taint is looked at before any verdict: a toleration of 0 s
        // on one taint must not hide a later untolerated taint, which
        // deletes at once even when a deletion is already scheduled (I2,
        // I3; found by the fuzzer).
        if let Some(s) = tol.seconds
            && best.is_none_or(|(_, b)| s < b)
        {
            best = Some((tol, s));
        }
    }
    match (any, best) {
        (false, _) => Decision::NoTaints,
        (true, None) => Decision::Forever,
        (true, Some((toleration, seconds))) => Decision::Expires { toleration, seconds },
    }
}

/// The taint manager's verdict for a pod with `tolerations` on a node whose
/// taints are `taints`. With no NoExecute taint at all the answer is
/// [`TolerationVerdict::Now`], as upstream's empty match set gives; callers
/// only ask about tainted nodes.
pub fn toleration_verdict(taints: &[Taint], tolerations: &[Toleration]) -> TolerationVerdict {
    match decide(taints, tolerations) {
        Decision::NoTaints | Decision::Untolerated(_) => TolerationVerdict::Now,
        Decision::Expires { seconds, .. } if seconds <= 0 => TolerationVerdict::Now,
        Decision::Expires { seconds, .. } => TolerationVerdict::After(Span::from_secs(seconds)),
        Decision::Forever => TolerationVerdict::Never,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TaintEffect::*;
    use TolerationOperator::*;

    fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
        Taint { key: key.into(), value: value.into(), effect, time_added: None }
    }
    fn tol(
        key: &str,
        op: TolerationOperator,
        value: &str,
        effect: Option<TaintEffect>,
        seconds: Option<i64>,
    ) -> Toleration {
        Toleration { key: key.into(), operator: op, value: value.into(), effect, seconds }
    }

    #[test]
    fn equal_needs_same_key_and_value() {
        let t = taint("k", "v", NoExecute);
        assert!(tol("k", Equal, "v", Some(NoExecute), None).tolerates(&t));
        assert!(!tol("k", Equal, "w", Some(NoExecute), None).tolerates(&t));
        assert!(!tol("other", Equal, "v", Some(NoExecute), None).tolerates(&t));
    }

    #[test]
    fn exists_ignores_value() {
        let t = taint("k", "v", NoExecute);
        assert!(tol("k", Exists, "", Some(NoExecute), None).tolerates(&t));
    }

    #[test]
    fn empty_key_with_exists_matches_every_key() {
        let any = tol("", Exists, "", None, None);
        assert!(any.tolerates(&taint("a", "1", NoExecute)));
        assert!(any.tolerates(&taint("b", "", NoSchedule)));
    }

    #[test]
    fn empty_key_with_equal_compares_values_only() {
        // API validation forbids it, but the matching rule is defined: key
        // check skipped, value compared.
        let t = tol("", Equal, "v", None, None);
        assert!(t.tolerates(&taint("a", "v", NoExecute)));
        assert!(!t.tolerates(&taint("a", "w", NoExecute)));
    }

    #[test]
    fn empty_effect_matches_every_effect() {
        let t = tol("k", Exists, "", None, None);
        for e in [NoSchedule, PreferNoSchedule, NoExecute] {
            assert!(t.tolerates(&taint("k", "", e)));
        }
        assert!(!tol("k", Exists, "", Some(NoSchedule), None).tolerates(&taint("k", "", NoExecute)));
    }

    #[test]
    fn untolerated_taint_means_now() {
        let taints = [taint("a", "", NoExecute), taint("b", "", NoExecute)];
        let tols = [tol("a", Exists, "", None, Some(100))];
        assert_eq!(toleration_verdict(&taints, &tols), TolerationVerdict::Now);
        assert_eq!(matching_tolerations(&taints, &tols), Err(1));
    }

    #[test]
    fn first_matching_toleration_per_taint_and_minimum_wins() {
        let taints = [taint("node.kubernetes.io/unreachable", "", NoExecute)];
        // The first toleration matches (30 s) even though a later, more
        // specific one says 100 s.
        let tols = [
            tol("", Exists, "", Some(NoExecute), Some(30)),
            tol("node.kubernetes.io/unreachable", Exists, "", Some(NoExecute), Some(100)),
        ];
        assert_eq!(toleration_verdict(&taints, &tols), TolerationVerdict::After(Span::from_secs(30)));
        // Reversed order: the specific one comes first.
        let rev = [tols[1].clone(), tols[0].clone()];
        assert_eq!(toleration_verdict(&taints, &rev), TolerationVerdict::After(Span::from_secs(100)));
        // Two taints, minimum of their first matches.
        let two = [taint("a", "", NoExecute), taint("b", "", NoExecute)];
        let tols2 = [tol("a", Exists, "", None, Some(50)), tol("b", Exists, "", None, Some(20))];
        assert_eq!(toleration_verdict(&two, &tols2), TolerationVerdict::After(Span::from_secs(20)));
    }

    #[test]
    fn an_untolerated_taint_wins_over_an_earlier_zero_second_toleration() {
        let taints = [taint("a", "", NoExecute), taint("b", "", NoExecute)];
        let tols = [tol("a", Exists, "", None, Some(0))];
        assert!(matches!(decide(&taints, &tols), Decision::Untolerated(t) if t.key == "b"));
        let both = [tol("a", Exists, "", None, Some(0)), tol("b", Exists, "", None, Some(-5))];
        assert!(matches!(decide(&taints, &both), Decision::Expires { seconds: -5, .. }));
    }

    #[test]
    fn a_later_forever_toleration_does_not_override_the_first_match() {
        let taints = [taint("k", "", NoExecute)];
        let tols = [tol("k", Exists, "", None, Some(10)), tol("k", Exists, "", None, None)];
        assert_eq!(toleration_verdict(&taints, &tols), TolerationVerdict::After(Span::from_secs(10)));
    }

    #[test]
    fn no_seconds_means_never_and_non_positive_means_now() {
        let taints = [taint("k", "", NoExecute)];
        assert_eq!(toleration_verdict(&taints, &[tol("k", Exists, "", None, None)]), TolerationVerdict::Never);
        assert_eq!(toleration_verdict(&taints, &[tol("k", Exists, "", None, Some(0))]), TolerationVerdict::Now);
        assert_eq!(toleration_verdict(&taints, &[tol("k", Exists, "", None, Some(-5))]), TolerationVerdict::Now);
        // Mixed: one forever, one with seconds -> the seconds decide.
        let two = [taint("a", "", NoExecute), taint("b", "", NoExecute)];
        let tols = [tol("a", Exists, "", None, None), tol("b", Exists, "", None, Some(7))];
        assert_eq!(toleration_verdict(&two, &tols), TolerationVerdict::After(Span::from_secs(7)));
    }

    #[test]
    fn other_effects_are_ignored_by_the_verdict() {
        let taints = [taint("x", "", NoSchedule), taint("k", "", NoExecute)];
        assert_eq!(toleration_verdict(&taints, &[tol("k", Exists, "", None, None)]), TolerationVerdict::Never);
    }

    #[test]
    fn decision_names_the_deciding_toleration_or_taint() {
        let two = [taint("a", "", NoExecute), taint("b", "", NoExecute)];
        let tols = [tol("a", Exists, "", None, Some(50)), tol("b", Exists, "", None, Some(20))];
        assert_eq!(decide(&two, &tols), Decision::Expires { toleration: &tols[1], seconds: 20 });
        assert_eq!(decide(&two, &tols[..1]), Decision::Untolerated(&two[1]));
        assert_eq!(decide(&[], &tols), Decision::NoTaints);
        assert_eq!(toleration_verdict(&[], &tols), TolerationVerdict::Now);
    }

    #[test]
    fn short_form() {
        assert_eq!(taint("a/b", "v", NoExecute).short(), "a/b:NoExecute");
    }
}
