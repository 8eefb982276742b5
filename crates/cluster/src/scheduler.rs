//! A simulated kube-scheduler, so the critical-addon rescheduler's loop
//! (addon Unschedulable, room made, addon bound) plays out in replay and in
//! `nodewarden sim`.
//!
//! It is deliberately the simplest scheduler that upstream's filters agree
//! with: **first fit**. Pending pods are taken in creation order; each goes
//! to the first node, in name order, that passes every filter:
//!
//! - the node's Ready condition is True and it is not `unschedulable`;
//! - every NoSchedule and NoExecute taint is tolerated
//!   ([`Toleration::tolerates`]); PreferNoSchedule is ignored;
//! - the pod's node selector and required node affinity hold
//!   ([`Placement::allows`]);
//! - its requests fit in the node's allocatable minus the requests of
//!   the pods bound there that are not gone (terminating pods count until
//!   they are deleted, as upstream's scheduler cache keeps them).
//!
//! A pod placed by an earlier pod of the same pass counts against the next
//! ones. No scoring, no preemption, no backoff: the
//! [`Cluster`](crate::cluster::Cluster) runs a pass whenever something that
//! can change a verdict has changed since the last one, which is what the
//! upstream scheduler's event-driven requeueing amounts to on a virtual
//! clock. A pod that fits nowhere is marked `PodScheduled=False`, reason
//! `Unschedulable`, and keeps the time it was first marked.

use std::collections::BTreeMap;

use nodewarden_model::{Placement, Resources, Taint, TaintEffect, Toleration};

/// What the scheduler reads of a node.
#[derive(Clone, Debug)]
pub struct NodeView<'a> {
    /// `metadata.name`.
    pub name: &'a str,
    /// `metadata.labels`.
    pub labels: &'a BTreeMap<String, String>,
    /// `spec.taints`.
    pub taints: &'a [Taint],
    /// The Ready condition is True.
    pub ready: bool,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// `status.allocatable`.
    pub allocatable: Resources,
    /// Requests of the pods bound to it that are not gone.
    pub used: Resources,
}

/// What the scheduler reads of a pending pod.
#[derive(Clone, Debug)]
pub struct PodView<'a> {
    /// The pod's requests (one pod slot included).
    pub requests: Resources,
    /// `spec.tolerations`.
    pub tolerations: &'a [Toleration],
    /// Node selector and required affinity.
    pub placement: &'a Placement,
}

/// Why a node was not chosen for a pod, for tests and messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Misfit {
    /// Ready is not True.
    NotReady,
    /// `spec.unschedulable`.
    Unschedulable,
    /// A NoSchedule/NoExecute taint the pod does not tolerate (`key:Effect`).
    Taint(String),
    /// Node selector or required affinity do not hold.
    Placement,
    /// The requests do not fit; what is missing.
    Insufficient(Resources),
}

/// Whether `pod` may go on `node`, and if not, the first reason found (in
/// the order of the module's filter list).
pub fn fits(pod: &PodView<'_>, node: &NodeView<'_>) -> Result<(), Misfit> {
    if !node.ready {
        return Err(Misfit::NotReady);
    }
    if node.unschedulable {
        return Err(Misfit::Unschedulable);
    }
    if let Some(t) = untolerated(pod.tolerations, node.taints) {
        return Err(Misfit::Taint(t.short()));
    }
    if !pod.placement.allows(node.name, node.labels) {
        return Err(Misfit::Placement);
    }
    let free = node.allocatable.saturating_sub(&node.used);
    if !pod.requests.fits_in(&free) {
        return Err(Misfit::Insufficient(pod.requests.shortfall(&free)));
    }
    Ok(())
}

/// The first NoSchedule or NoExecute taint no toleration tolerates.
pub fn untolerated<'t>(tolerations: &[Toleration], taints: &'t [Taint]) -> Option<&'t Taint> {
    taints
        .iter()
        .filter(|t| matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute))
        .find(|t| !tolerations.iter().any(|tol| tol.tolerates(t)))
}

/// One first-fit pass: `pods` in the order given (creation order), `nodes`
/// in the order given (name order). Returns, per pod, the index of the
/// node it is bound to, or `None`; a placed pod's requests are added to
/// its node's `used`, so later pods see them.
pub fn first_fit(pods: &[PodView<'_>], nodes: &mut [NodeView<'_>]) -> Vec<Option<usize>> {
    pods.iter()
        .map(|pod| {
            let i = nodes.iter().position(|n| fits(pod, n).is_ok())?;
            if let Some(n) = nodes.get_mut(i) {
                n.used += pod.requests;
            }
            Some(i)
        })
        .collect()
}

/// The upstream-style message of a pod that fits nowhere: `0/N nodes are
/// available: ...`, reasons counted and sorted.
pub fn unschedulable_message(pod: &PodView<'_>, nodes: &[NodeView<'_>]) -> String {
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for n in nodes {
        if let Err(m) = fits(pod, n) {
            let r = match m {
                Misfit::NotReady => "node(s) were not ready".to_string(),
                Misfit::Unschedulable => "node(s) were unschedulable".to_string(),
                Misfit::Taint(t) => format!("node(s) had untolerated taint {{{t}}}"),
                Misfit::Placement => "node(s) didn't match Pod's node affinity/selector".to_string(),
                Misfit::Insufficient(short) => {
                    let mut what = Vec::new();
                    if short.cpu_millis > 0 {
                        what.push("Insufficient cpu");
                    }
                    if short.memory_bytes > 0 {
                        what.push("Insufficient memory");
                    }
                    if short.pods > 0 {
                        what.push("Too many pods");
                    }
                    what.join(", ")
                }
            };
            *reasons.entry(r).or_default() += 1;
        }
    }
    let parts: Vec<String> = reasons.into_iter().map(|(r, n)| format!("{n} {r}")).collect();
    format!("0/{} nodes are available: {}.", nodes.len(), parts.join(", "))
}

#[cfg(test)]
mod tests {
    use nodewarden_model::scheduling::{NodeSelectorTerm, Requirement, SelectorOperator};
    use nodewarden_model::{NodeAffinity, TolerationOperator};

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn node<'a>(name: &'a str, labels: &'a BTreeMap<String, String>, taints: &'a [Taint]) -> NodeView<'a> {
        NodeView {
            name,
            labels,
            taints,
            ready: true,
            unschedulable: false,
            allocatable: Resources { cpu_millis: 1000, memory_bytes: 1 << 30, pods: 10 },
            used: Resources::ZERO,
        }
    }

    fn pod<'a>(cpu: u64, tolerations: &'a [Toleration], placement: &'a Placement) -> PodView<'a> {
        PodView { requests: Resources::pod(cpu, 1 << 20), tolerations, placement }
    }

    #[test]
    fn fit_counts_used_requests_and_every_dimension() {
        let l = labels(&[]);
        let p = Placement::default();
        let mut n = node("a", &l, &[]);
        assert_eq!(fits(&pod(1000, &[], &p), &n), Ok(()));
        n.used = Resources { cpu_millis: 600, memory_bytes: 0, pods: 1 };
        assert_eq!(
            fits(&pod(500, &[], &p), &n),
            Err(Misfit::Insufficient(Resources { cpu_millis: 100, memory_bytes: 0, pods: 0 }))
        );
        n.used = Resources { cpu_millis: 0, memory_bytes: 0, pods: 10 };
        assert!(matches!(fits(&pod(1, &[], &p), &n), Err(Misfit::Insufficient(r)) if r.pods == 1));
    }

    #[test]
    fn node_state_filters() {
        let l = labels(&[]);
        let p = Placement::default();
        let mut n = node("a", &l, &[]);
        n.ready = false;
        assert_eq!(fits(&pod(1, &[], &p), &n), Err(Misfit::NotReady));
        n.ready = true;
        n.unschedulable = true;
        assert_eq!(fits(&pod(1, &[], &p), &n), Err(Misfit::Unschedulable));
    }

    #[test]
    fn taints_must_be_tolerated_except_prefer_no_schedule() {
        let l = labels(&[]);
        let p = Placement::default();
        let taints = [Taint::new("CriticalAddonsOnly", TaintEffect::NoSchedule)];
        let n = node("a", &l, &taints);
        assert_eq!(fits(&pod(1, &[], &p), &n), Err(Misfit::Taint("CriticalAddonsOnly:NoSchedule".into())));
        let tol = [Toleration {
            key: "CriticalAddonsOnly".into(),
            operator: TolerationOperator::Exists,
            ..Toleration::default()
        }];
        assert_eq!(fits(&pod(1, &tol, &p), &n), Ok(()));
        let soft = [Taint::new("x", TaintEffect::PreferNoSchedule)];
        assert_eq!(fits(&pod(1, &[], &p), &node("a", &l, &soft)), Ok(()));
        let hard = [Taint::new("x", TaintEffect::NoExecute)];
        assert!(matches!(fits(&pod(1, &[], &p), &node("a", &l, &hard)), Err(Misfit::Taint(_))));
    }

    #[test]
    fn selector_and_affinity() {
        let zone_a = labels(&[("zone", "a")]);
        let zone_b = labels(&[("zone", "b")]);
        let by_selector = Placement { node_selector: labels(&[("zone", "a")]), affinity: None };
        assert_eq!(fits(&pod(1, &[], &by_selector), &node("n", &zone_a, &[])), Ok(()));
        assert_eq!(fits(&pod(1, &[], &by_selector), &node("n", &zone_b, &[])), Err(Misfit::Placement));
        let by_affinity = Placement {
            node_selector: BTreeMap::new(),
            affinity: Some(NodeAffinity {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: vec![Requirement {
                        key: "zone".into(),
                        operator: SelectorOperator::NotIn,
                        values: vec!["a".into()],
                    }],
                    match_fields: vec![],
                }],
            }),
        };
        assert_eq!(fits(&pod(1, &[], &by_affinity), &node("n", &zone_a, &[])), Err(Misfit::Placement));
        assert_eq!(fits(&pod(1, &[], &by_affinity), &node("n", &zone_b, &[])), Ok(()));
    }

    #[test]
    fn first_fit_is_in_order_and_counts_earlier_placements() {
        let l = labels(&[]);
        let p = Placement::default();
        let mut nodes = vec![node("a", &l, &[]), node("b", &l, &[])];
        let pods = [pod(600, &[], &p), pod(600, &[], &p), pod(300, &[], &p), pod(600, &[], &p)];
        assert_eq!(first_fit(&pods, &mut nodes), [Some(0), Some(1), Some(0), None]);
        assert_eq!(nodes[0].used.cpu_millis, 900);
        // Same input, same answer.
        let mut again = vec![node("a", &l, &[]), node("b", &l, &[])];
        assert_eq!(first_fit(&pods, &mut again), [Some(0), Some(1), Some(0), None]);
    }

    #[test]
    fn message_counts_reasons() {
        let l = labels(&[]);
        let p = Placement::default();
        let taints = [Taint::new("k", TaintEffect::NoSchedule)];
        let mut full = node("b", &l, &[]);
        full.used = Resources { cpu_millis: 1000, memory_bytes: 0, pods: 1 };
        let nodes = [node("a", &l, &taints), full];
        assert_eq!(
            unschedulable_message(&pod(100, &[], &p), &nodes),
            "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {k:NoSchedule}."
        );
    }
}
