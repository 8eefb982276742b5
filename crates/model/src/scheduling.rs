//! What the critical-addon rescheduler reads of pods and nodes, and the
//! scheduling rules it shares with the simulated scheduler: label
//! selectors, required node affinity, node selectors, and which pods are
//! critical addons.
//!
//! Matching follows the API's documented semantics (`labels.Selector`,
//! `NodeSelectorRequirement`), so the engine's idea of "the addon fits on
//! that node" and the simulated scheduler's agree by construction.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::resources::Resources;
use crate::time::{Span, Timestamp};

/// The 2016 design's marker of a critical addon (its presence counts; the
/// value is ignored).
pub const CRITICAL_POD_ANNOTATION: &str = "scheduler.alpha.kubernetes.io/critical-pod";
/// Priority classes that make a `kube-system` pod a critical addon today.
pub const CRITICAL_PRIORITY_CLASSES: [&str; 2] = ["system-cluster-critical", "system-node-critical"];
/// The only namespace critical addons live in.
pub const SYSTEM_NAMESPACE: &str = "kube-system";
/// The NoSchedule taint that keeps a prepared node's freed space for
/// critical addons (which tolerate it).
pub const CRITICAL_ADDONS_ONLY_TAINT: &str = "CriticalAddonsOnly";
/// The value nodewarden puts on the [`CRITICAL_ADDONS_ONLY_TAINT`] it adds,
/// so it removes its own and never one an operator (or a provider's system
/// node pool, which uses `CriticalAddonsOnly=true`) put there.
pub const CRITICAL_ADDONS_ONLY_VALUE: &str = "nodewarden";
/// Annotation the kubelet puts on mirror pods (static pods seen in the API).
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// True for a pod the rescheduler makes room for: in `kube-system`, and
/// marked critical by the annotation or by a system priority class.
pub fn is_critical_addon(namespace: &str, critical_annotation: bool, priority_class: Option<&str>) -> bool {
    namespace == SYSTEM_NAMESPACE
        && (critical_annotation || priority_class.is_some_and(|p| CRITICAL_PRIORITY_CLASSES.contains(&p)))
}

/// How a requirement compares a label's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SelectorOperator {
    /// The label is present with one of the values.
    In,
    /// The label is absent, or present with none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// Node affinity only: the value, as an integer, is greater than the
    /// single value given.
    Gt,
    /// Node affinity only: the value, as an integer, is less.
    Lt,
}

/// One `key operator values` requirement.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// How to compare.
    pub operator: SelectorOperator,
    /// The values (`In`, `NotIn`: any number; `Gt`, `Lt`: one; else none).
    #[serde(default)]
    pub values: Vec<String>,
}

impl Requirement {
    /// Whether a label value (`None`: the label is absent) satisfies this.
    pub fn matches_value(&self, value: Option<&str>) -> bool {
        let int = |s: &str| s.parse::<i64>().ok();
        match self.operator {
            SelectorOperator::In => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            SelectorOperator::NotIn => value.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            SelectorOperator::Exists => value.is_some(),
            SelectorOperator::DoesNotExist => value.is_none(),
            SelectorOperator::Gt | SelectorOperator::Lt => {
                let (Some(v), [bound]) = (value.and_then(int), self.values.as_slice()) else { return false };
                let Some(bound) = int(bound) else { return false };
                if self.operator == SelectorOperator::Gt { v > bound } else { v < bound }
            }
        }
    }

    /// Whether a label set satisfies this.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_value(labels.get(&self.key).map(String::as_str))
    }
}

/// A `metav1.LabelSelector` (a PodDisruptionBudget's): every label in
/// `match_labels` and every requirement must hold. An empty selector
/// matches every pod, as policy/v1 budgets define it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LabelSelector {
    /// Labels that must be present with these values.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    /// Further requirements.
    #[serde(default)]
    pub match_expressions: Vec<Requirement>,
}

impl LabelSelector {
    /// Whether a pod with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }
}

/// One `nodeSelectorTerm`: all its requirements must hold. A term with no
/// requirement matches no node (the API's rule).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeSelectorTerm {
    /// Requirements on node labels.
    #[serde(default)]
    pub match_expressions: Vec<Requirement>,
    /// Requirements on node fields; only `metadata.name` exists.
    #[serde(default)]
    pub match_fields: Vec<Requirement>,
}

impl NodeSelectorTerm {
    /// Whether the node (its name and labels) satisfies the term.
    pub fn matches(&self, node: &str, labels: &BTreeMap<String, String>) -> bool {
        if self.match_expressions.is_empty() && self.match_fields.is_empty() {
            return false;
        }
        self.match_expressions.iter().all(|r| r.matches(labels))
            && self.match_fields.iter().all(|r| r.key == "metadata.name" && r.matches_value(Some(node)))
    }
}

/// `requiredDuringSchedulingIgnoredDuringExecution` node affinity: any one
/// term must hold. No terms matches no node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeAffinity {
    /// The terms, ORed.
    pub node_selector_terms: Vec<NodeSelectorTerm>,
}

impl NodeAffinity {
    /// Whether the node satisfies the affinity.
    pub fn matches(&self, node: &str, labels: &BTreeMap<String, String>) -> bool {
        self.node_selector_terms.iter().any(|t| t.matches(node, labels))
    }
}

/// Where a pod may go: `spec.nodeSelector` and required node affinity.
/// Both must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Placement {
    /// `spec.nodeSelector`: labels the node must carry with these values.
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity, if any.
    pub affinity: Option<NodeAffinity>,
}

impl Placement {
    /// Whether the pod may be placed on this node by its labels and name.
    pub fn allows(&self, node: &str, labels: &BTreeMap<String, String>) -> bool {
        self.node_selector.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.affinity.as_ref().is_none_or(|a| a.matches(node, labels))
    }
}

/// What the rescheduler (and the simulated scheduler) reads of a pod
/// beyond what node lifecycle needs. Drivers that do not run the
/// rescheduler leave it out, so node lifecycle pays nothing for it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodScheduling {
    /// The pod's effective requests (containers summed, the larger of that
    /// and any init container, plus overhead) and one pod slot.
    pub requests: Resources,
    /// `spec.priorityClassName`.
    pub priority_class: Option<String>,
    /// Carries [`CRITICAL_POD_ANNOTATION`].
    pub critical_annotation: bool,
    /// Carries [`MIRROR_POD_ANNOTATION`]: a static pod's mirror, which an
    /// eviction cannot remove.
    pub mirror: bool,
    /// The kind of the owner reference marked `controller` (`ReplicaSet`,
    /// `StatefulSet`, ...), `None` for a bare pod, which nothing recreates.
    pub controller_kind: Option<String>,
    /// `spec.terminationGracePeriodSeconds` (30 s when unset).
    pub termination_grace: Span,
    /// `metadata.labels`, for PodDisruptionBudget selectors.
    pub labels: BTreeMap<String, String>,
    /// Node selector and required affinity.
    pub placement: Placement,
    /// The `lastTransitionTime` of a `PodScheduled=False` condition with
    /// reason `Unschedulable`; `None` otherwise.
    pub unschedulable_since: Option<Timestamp>,
}

impl PodScheduling {
    /// The default `terminationGracePeriodSeconds`.
    pub const DEFAULT_TERMINATION_GRACE: Span = Span::from_secs(30);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn req(key: &str, operator: SelectorOperator, values: &[&str]) -> Requirement {
        Requirement { key: key.into(), operator, values: values.iter().map(|v| v.to_string()).collect() }
    }

    #[test]
    fn critical_addons() {
        assert!(is_critical_addon("kube-system", true, None));
        assert!(is_critical_addon("kube-system", false, Some("system-cluster-critical")));
        assert!(is_critical_addon("kube-system", false, Some("system-node-critical")));
        assert!(!is_critical_addon("default", true, Some("system-node-critical")), "only kube-system");
        assert!(!is_critical_addon("kube-system", false, Some("high")));
        assert!(!is_critical_addon("kube-system", false, None));
    }

    #[test]
    fn requirements() {
        let l = labels(&[("tier", "dns"), ("gen", "5")]);
        use SelectorOperator::*;
        assert!(req("tier", In, &["dns", "web"]).matches(&l));
        assert!(!req("tier", NotIn, &["dns"]).matches(&l));
        assert!(req("missing", NotIn, &["x"]).matches(&l), "NotIn holds for an absent label");
        assert!(req("tier", Exists, &[]).matches(&l));
        assert!(req("missing", DoesNotExist, &[]).matches(&l));
        assert!(req("gen", Gt, &["4"]).matches(&l));
        assert!(!req("gen", Lt, &["4"]).matches(&l));
        assert!(!req("tier", Gt, &["4"]).matches(&l), "not an integer");
        assert!(!req("gen", Gt, &["4", "5"]).matches(&l), "Gt takes one value");
    }

    #[test]
    fn selectors_and_affinity() {
        let l = labels(&[("app", "dns"), ("zone", "a")]);
        assert!(LabelSelector::default().matches(&l), "empty selector matches all");
        let s = LabelSelector { match_labels: labels(&[("app", "dns")]), match_expressions: vec![] };
        assert!(s.matches(&l));
        assert!(!s.matches(&labels(&[("app", "web")])));

        let term = |e: Vec<Requirement>| NodeSelectorTerm { match_expressions: e, match_fields: vec![] };
        let a = NodeAffinity {
            node_selector_terms: vec![
                term(vec![req("zone", SelectorOperator::In, &["b"])]),
                term(vec![req("zone", SelectorOperator::In, &["a"])]),
            ],
        };
        assert!(a.matches("n1", &l), "terms are ORed");
        assert!(!NodeAffinity::default().matches("n1", &l), "no terms match nothing");
        assert!(!term(vec![]).matches("n1", &l), "an empty term matches nothing");
        let by_name = NodeSelectorTerm {
            match_expressions: vec![],
            match_fields: vec![req("metadata.name", SelectorOperator::In, &["n1"])],
        };
        assert!(by_name.matches("n1", &l));
        assert!(!by_name.matches("n2", &l));

        let p = Placement { node_selector: labels(&[("zone", "a")]), affinity: Some(a) };
        assert!(p.allows("n1", &l));
        assert!(!p.allows("n1", &labels(&[("zone", "b")])));
    }
}
