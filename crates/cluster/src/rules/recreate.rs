//! Rules for workload recreation: which pods a controller (ReplicaSet,
//! StatefulSet, Job, ...) replaces when they go, under what name, and in
//! what state the replacement starts.
//!
//! Invariant: a replacement never takes the name of a pod that exists, and
//! names stay short: a replacement of a replacement counts from the
//! original name.

use nodewarden_model::ConditionStatus;

/// True when the pod's controller makes a replacement when it goes (a
/// ReplicaSet does as soon as a pod is terminating or gone): it has a
/// controller that is not a DaemonSet (whose pod is per node), and it is
/// not a mirror pod (the kubelet owns those). A bare pod is not replaced.
pub fn is_replaced(daemonset: bool, mirror: bool, controller_kind: Option<&str>) -> bool {
    !daemonset && !mirror && controller_kind.is_some_and(|k| k != "DaemonSet")
}

/// The name a replacement is derived from: the pod's, without a
/// `-r<digits>` suffix a previous replacement added.
pub fn replacement_base(key: &str) -> &str {
    match key.rsplit_once("-r") {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => key,
    }
}

/// The replacement's key: `<base>-r<N>` for the first N from 1 whose key
/// is not `key` itself and not `taken` (a pod of that key exists). There
/// is no upper bound: a workload controller always names a replacement
/// (upstream's generated names never run out), and only finitely many
/// names can be taken.
pub fn replacement_name(key: &str, taken: impl Fn(&str) -> bool) -> String {
    let base = replacement_base(key);
    (1u64..).map(|n| format!("{base}-r{n}")).find(|k| !taken(k) && k != key).unwrap_or_else(|| format!("{base}-r"))
}

/// The replacement's Ready condition: not ready until its kubelet starts
/// it, so False when the old pod had a Ready condition, and none otherwise.
pub fn replacement_ready(old_had_ready: bool) -> Option<ConditionStatus> {
    old_had_ready.then_some(ConditionStatus::False)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_pods_of_a_controller_other_than_a_daemonset_are_replaced() {
        assert!(is_replaced(false, false, Some("ReplicaSet")));
        assert!(!is_replaced(false, false, None));
        assert!(!is_replaced(false, false, Some("DaemonSet")));
        assert!(!is_replaced(true, false, Some("ReplicaSet")));
        assert!(!is_replaced(false, true, Some("ReplicaSet")));
    }

    #[test]
    fn replacements_count_from_the_original_name() {
        assert_eq!(replacement_base("ns/web-r12"), "ns/web");
        assert_eq!(replacement_base("ns/web-r"), "ns/web-r");
        assert_eq!(replacement_base("ns/web-rx"), "ns/web-rx");
        assert_eq!(replacement_name("ns/web", |_| false), "ns/web-r1");
        assert_eq!(replacement_name("ns/web-r1", |k| k == "ns/web-r2"), "ns/web-r3");
        assert_eq!(replacement_ready(true), Some(ConditionStatus::False));
        assert_eq!(replacement_ready(false), None);
    }

    /// Disagreement (e): the served cluster gave up after `-r9999` (and
    /// recreated nothing), the simulated one searched on; a workload
    /// controller always makes its replacement, so the search has no bound.
    #[test]
    fn the_name_search_has_no_upper_bound() {
        let taken =
            |k: &str| k.strip_prefix("ns/web-r").and_then(|n| n.parse::<u32>().ok()).is_some_and(|n| n < 10_000);
        assert_eq!(replacement_name("ns/web-r3", taken), "ns/web-r10000");
    }
}
