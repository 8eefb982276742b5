//! Toleration matching, written from Kubernetes' `ToleratesTaint` and the
//! taint manager's `GetMatchingTolerations` / `getMinTolerationTime`, as the
//! reference the fuzzer holds `nodewarden_model::taint` against.

use nodewarden_model::{Taint, TaintEffect, Toleration, TolerationOperator};

/// What a pod's tolerations say about a node's NoExecute taints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefVerdict {
    /// The node has no NoExecute taint.
    NoTaints,
    /// Some NoExecute taint is tolerated by nothing: delete now.
    Untolerated,
    /// Every taint tolerated; the smallest `tolerationSeconds` of the first
    /// matching tolerations (`<= 0` means now).
    After(i64),
    /// Every taint tolerated and no matching toleration has seconds.
    Forever,
}

/// `Toleration.ToleratesTaint`.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = toleration.effect
        && effect != taint.effect
    {
        return false;
    }
    if !toleration.key.is_empty() && toleration.key != taint.key {
        return false;
    }
    match toleration.operator {
        TolerationOperator::Equal => toleration.value == taint.value,
        TolerationOperator::Exists => true,
    }
}

/// The verdict for the NoExecute taints among `taints`.
pub fn verdict(taints: &[Taint], tolerations: &[Toleration]) -> RefVerdict {
    let noexecute: Vec<&Taint> = taints.iter().filter(|t| t.effect == TaintEffect::NoExecute).collect();
    if noexecute.is_empty() {
        return RefVerdict::NoTaints;
    }
    let mut used = Vec::new();
    for taint in noexecute {
        match tolerations.iter().find(|t| tolerates(t, taint)) {
            Some(t) => used.push(t),
            None => return RefVerdict::Untolerated,
        }
    }
    let seconds: Vec<i64> = used.iter().filter_map(|t| t.seconds).collect();
    if seconds.iter().any(|s| *s <= 0) {
        return RefVerdict::After(0);
    }
    seconds.into_iter().min().map_or(RefVerdict::Forever, RefVerdict::After)
}
