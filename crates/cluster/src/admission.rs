//! The DefaultTolerationSeconds admission plugin: at pod creation, pods
//! that do not tolerate the not-ready or unreachable NoExecute taint get a
//! toleration for it with a bounded `tolerationSeconds`.

use nodewarden_model::keys::{TAINT_NOT_READY, TAINT_UNREACHABLE};
use nodewarden_model::{TaintEffect, Toleration, TolerationOperator};

use crate::scenario::ClusterSpec;

/// The plugin's two settings; `None` = that toleration is not added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdmissionDefaults {
    /// `default-not-ready-toleration-seconds`.
    pub not_ready_seconds: Option<i64>,
    /// `default-unreachable-toleration-seconds`.
    pub unreachable_seconds: Option<i64>,
}

impl Default for AdmissionDefaults {
    /// The apiserver's defaults: 300 s each.
    fn default() -> Self {
        AdmissionDefaults { not_ready_seconds: Some(300), unreachable_seconds: Some(300) }
    }
}

impl From<&ClusterSpec> for AdmissionDefaults {
    fn from(c: &ClusterSpec) -> Self {
        AdmissionDefaults {
            not_ready_seconds: c.default_not_ready_toleration_seconds,
            unreachable_seconds: c.default_unreachable_toleration_seconds,
        }
    }
}

impl AdmissionDefaults {
    /// Adds the default tolerations a newly created pod lacks, not-ready
    /// first, as upstream appends them.
    pub fn admit(&self, tolerations: &mut Vec<Toleration>) {
        for (key, seconds) in [(TAINT_NOT_READY, self.not_ready_seconds), (TAINT_UNREACHABLE, self.unreachable_seconds)]
        {
            let Some(seconds) = seconds else { continue };
            if !tolerations.iter().any(|t| covers(t, key)) {
                tolerations.push(Toleration {
                    key: key.to_string(),
                    operator: TolerationOperator::Exists,
                    value: String::new(),
                    effect: Some(TaintEffect::NoExecute),
                    seconds: Some(seconds),
                });
            }
        }
    }
}

/// The plugin's own test (not `ToleratesTaint`): the key is the taint's or
/// empty, and the effect NoExecute or empty. Operator and value are not
/// looked at.
fn covers(t: &Toleration, key: &str) -> bool {
    (t.key.is_empty() || t.key == key) && t.effect.is_none_or(|e| e == TaintEffect::NoExecute)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tol(key: &str, effect: Option<TaintEffect>, seconds: Option<i64>) -> Toleration {
        Toleration { key: key.into(), operator: TolerationOperator::Exists, value: String::new(), effect, seconds }
    }

    #[test]
    fn adds_both_to_a_pod_without_tolerations() {
        let mut t = Vec::new();
        AdmissionDefaults::default().admit(&mut t);
        assert_eq!(
            t,
            vec![
                tol(TAINT_NOT_READY, Some(TaintEffect::NoExecute), Some(300)),
                tol(TAINT_UNREACHABLE, Some(TaintEffect::NoExecute), Some(300)),
            ]
        );
    }

    #[test]
    fn null_setting_adds_nothing() {
        let mut t = Vec::new();
        AdmissionDefaults { not_ready_seconds: None, unreachable_seconds: Some(20) }.admit(&mut t);
        assert_eq!(t, vec![tol(TAINT_UNREACHABLE, Some(TaintEffect::NoExecute), Some(20))]);
        let mut t = Vec::new();
        AdmissionDefaults { not_ready_seconds: None, unreachable_seconds: None }.admit(&mut t);
        assert!(t.is_empty());
    }

    #[test]
    fn an_existing_toleration_for_the_key_is_kept_as_is() {
        let mut t = vec![tol(TAINT_UNREACHABLE, Some(TaintEffect::NoExecute), Some(20))];
        AdmissionDefaults::default().admit(&mut t);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].seconds, Some(20));
        assert_eq!(t[1].key, TAINT_NOT_READY);
    }

    #[test]
    fn empty_key_covers_both_taints() {
        let mut t = vec![tol("", None, None)];
        AdmissionDefaults::default().admit(&mut t);
        assert_eq!(t.len(), 1);
        let mut t = vec![tol("", Some(TaintEffect::NoExecute), Some(5))];
        AdmissionDefaults::default().admit(&mut t);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn empty_effect_covers_noexecute() {
        let mut t = vec![tol(TAINT_NOT_READY, None, None)];
        AdmissionDefaults::default().admit(&mut t);
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].key, TAINT_UNREACHABLE);
    }

    #[test]
    fn other_effects_or_keys_do_not_count() {
        let mut t = vec![
            tol(TAINT_NOT_READY, Some(TaintEffect::NoSchedule), None),
            tol("", Some(TaintEffect::PreferNoSchedule), None),
            tol("example.com/other", Some(TaintEffect::NoExecute), None),
        ];
        AdmissionDefaults::default().admit(&mut t);
        assert_eq!(t.len(), 5);
        assert_eq!(t[3].key, TAINT_NOT_READY);
        assert_eq!(t[4].key, TAINT_UNREACHABLE);
    }

    #[test]
    fn negative_seconds_are_kept() {
        let mut t = Vec::new();
        AdmissionDefaults { not_ready_seconds: Some(-1), unreachable_seconds: Some(0) }.admit(&mut t);
        assert_eq!(t[0].seconds, Some(-1));
        assert_eq!(t[1].seconds, Some(0));
    }
}
