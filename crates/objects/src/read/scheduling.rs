//! What the critical-addon rescheduler reads of pods and nodes: effective
//! requests as kube-scheduler adds them, placement, priority, grace, and a
//! node's allocatable. Each unreadable field is read the way that cannot
//! make the rescheduler evict a pod it should not.

use std::collections::BTreeMap;

use nodewarden_model::resources::{parse_bytes, parse_cpu_millis};
use nodewarden_model::scheduling::{CRITICAL_POD_ANNOTATION, MIRROR_POD_ANNOTATION, NodeSelectorTerm};
use nodewarden_model::{NodeAffinity, Placement, PodScheduling, Resources, Span};
use serde_json::Value;

use super::selector::requirements;
use super::{Reading, at, json_type};

/// A quantity field's text: quantities are strings, but a bare JSON
/// number is one too (the API server accepts both).
fn quantity_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// What one resource amount is: read, absent, or unreadable.
enum Amount {
    Read(u64),
    Absent,
    Unreadable,
}

/// Resources as the scheduler adds them up: `None` for a dimension that
/// could not be read, which then fills whatever it is added to.
#[derive(Clone, Copy, Default)]
struct Tally {
    cpu: Option<u64>,
    memory: Option<u64>,
}

impl Tally {
    const ZERO: Tally = Tally { cpu: Some(0), memory: Some(0) };

    fn add(self, o: Tally) -> Tally {
        let sum = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_add(b?));
        Tally { cpu: sum(self.cpu, o.cpu), memory: sum(self.memory, o.memory) }
    }

    fn max(self, o: Tally) -> Tally {
        let max = |a: Option<u64>, b: Option<u64>| Some(a?.max(b?));
        Tally { cpu: max(self.cpu, o.cpu), memory: max(self.memory, o.memory) }
    }
}

impl Reading<'_> {
    /// One amount of a resource list (`requests`, `overhead`, `allocatable`).
    fn amount(&self, list: &Value, resource: &str, field: &str) -> Amount {
        let Some(x) = list.get(resource).filter(|x| !x.is_null()) else { return Amount::Absent };
        let parsed = match quantity_text(x) {
            None => Err(format!("a {}, not a quantity", json_type(x))),
            Some(t) => {
                let p = if resource == "cpu" { parse_cpu_millis(&t) } else { parse_bytes(&t) };
                p.map_err(|e| e.to_string())
            }
        };
        match parsed {
            Ok(n) => Amount::Read(n),
            Err(e) => {
                self.odd(&format!("{field}.{resource}"), &format!("malformed quantity: {e}"));
                Amount::Unreadable
            }
        }
    }

    /// The cpu and memory of a resource list at `path` (absent: zero).
    fn tally(&self, v: &Value, path: &[&str], field: &str) -> Tally {
        let Some(list) = at(v, path) else { return Tally::ZERO };
        if !list.is_object() {
            self.odd(field, &format!("expected an object, found {}; read as unreadable", json_type(list)));
            return Tally::default();
        }
        let read = |res| match self.amount(list, res, field) {
            Amount::Read(n) => Some(n),
            Amount::Absent => Some(0),
            Amount::Unreadable => None,
        };
        Tally { cpu: read("cpu"), memory: read("memory") }
    }

    /// One container's requests: `resources.requests`, where a resource
    /// with a limit and no request requests its limit (the API server's
    /// defaulting, for objects that did not go through it).
    fn container_requests(&self, c: &Value, field: &str) -> Tally {
        let requests = self.tally(c, &["resources", "requests"], &format!("{field}.resources.requests"));
        let limits = self.tally(c, &["resources", "limits"], &format!("{field}.resources.limits"));
        let has = |res: &str| at(c, &["resources", "requests", res]).is_some();
        // An unreadable request stays unreadable, whatever the limit says.
        let pick = |res: &str, request: Option<u64>, limit: Option<u64>| match request {
            Some(_) if !has(res) => limit,
            r => r,
        };
        Tally { cpu: pick("cpu", requests.cpu, limits.cpu), memory: pick("memory", requests.memory, limits.memory) }
    }

    /// The pod's effective requests, as kube-scheduler computes them: the
    /// containers summed (restartable init containers, sidecars, count with
    /// them), against the largest init container (plus the sidecars started
    /// before it), whichever is larger, plus `spec.overhead`.
    fn pod_requests(&self, v: &Value) -> Tally {
        let named = |c: &Value, i: usize| c.get("name").and_then(Value::as_str).map_or(i.to_string(), str::to_string);
        let mut sum = Tally::ZERO;
        match self.list(v, &["spec", "containers"], "spec.containers") {
            Err(()) => sum = Tally::default(),
            Ok(cs) => {
                for (i, c) in cs.iter().enumerate() {
                    sum = sum.add(self.container_requests(c, &format!("spec.containers[{}]", named(c, i))));
                }
            }
        }
        let mut init_max = Tally::ZERO;
        let mut sidecars = Tally::ZERO;
        match self.list(v, &["spec", "initContainers"], "spec.initContainers") {
            Err(()) => init_max = Tally::default(),
            Ok(cs) => {
                for (i, c) in cs.iter().enumerate() {
                    let req = self.container_requests(c, &format!("spec.initContainers[{}]", named(c, i)));
                    if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
                        sum = sum.add(req);
                        sidecars = sidecars.add(req);
                        init_max = init_max.max(sidecars);
                    } else {
                        init_max = init_max.max(req.add(sidecars));
                    }
                }
            }
        }
        sum.max(init_max).add(self.tally(v, &["spec", "overhead"], "spec.overhead"))
    }

    /// A `nodeSelectorTerms` list, or why it cannot be read.
    fn node_affinity(&self, v: &Value) -> Result<Option<NodeAffinity>, String> {
        let path = ["spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"];
        let Some(required) = at(v, &path) else { return Ok(None) };
        let terms = match at(required, &["nodeSelectorTerms"]) {
            None => Vec::new(),
            Some(Value::Array(ts)) => ts
                .iter()
                .map(|t| {
                    Ok(NodeSelectorTerm {
                        match_expressions: requirements(t.get("matchExpressions"), "matchExpressions", true)?,
                        match_fields: requirements(t.get("matchFields"), "matchFields", false)?,
                    })
                })
                .collect::<Result<_, String>>()?,
            Some(x) => return Err(format!("nodeSelectorTerms is a {}", json_type(x))),
        };
        Ok(Some(NodeAffinity { node_selector_terms: terms }))
    }

    /// Node selector and required node affinity; one that cannot be read
    /// matches no node.
    fn placement(&self, v: &Value) -> Placement {
        let nowhere = || Placement { node_selector: BTreeMap::new(), affinity: Some(NodeAffinity::default()) };
        let mut node_selector = BTreeMap::new();
        match at(v, &["spec", "nodeSelector"]) {
            None => {}
            Some(Value::Object(m)) => {
                for (k, val) in m {
                    let Some(s) = val.as_str() else {
                        self.odd(
                            "spec.nodeSelector",
                            &format!("{k:?} is a {}; the pod matches no node", json_type(val)),
                        );
                        return nowhere();
                    };
                    node_selector.insert(k.clone(), s.to_string());
                }
            }
            Some(x) => {
                self.odd(
                    "spec.nodeSelector",
                    &format!("expected an object, found {}; the pod matches no node", json_type(x)),
                );
                return nowhere();
            }
        }
        match self.node_affinity(v) {
            Ok(affinity) => Placement { node_selector, affinity },
            Err(what) => {
                self.odd("spec.affinity.nodeAffinity", &format!("{what}; the pod matches no node"));
                nowhere()
            }
        }
    }

    /// What the rescheduler reads of a pod (see the module's documentation).
    pub(super) fn scheduling(&self, v: &Value) -> PodScheduling {
        let annotations = at(v, &["metadata", "annotations"]);
        // Annotations that cannot be read might hide the mirror marker: such
        // a pod is never evicted (and, unmarked, is no critical addon).
        let garbled = annotations.is_some_and(|a| !a.is_object());
        if garbled {
            self.odd("metadata.annotations", "not an object; the pod is never evicted for an addon");
        }
        let annotations = annotations.and_then(Value::as_object);
        let annotated = |a: &str| annotations.is_some_and(|m| m.contains_key(a));
        let finished = matches!(at(v, &["status", "phase"]).and_then(Value::as_str), Some("Succeeded" | "Failed"));
        let tally = self.pod_requests(v);
        let unreadable = tally.cpu.is_none() || tally.memory.is_none();
        let requests = if finished {
            Resources::ZERO
        } else {
            Resources::pod(tally.cpu.unwrap_or(u64::MAX), tally.memory.unwrap_or(u64::MAX))
        };
        if unreadable && !finished {
            self.odd(
                "spec.containers[].resources",
                "requests cannot be read; the pod fills its node in that resource and is never evicted for an addon",
            );
        }
        // Unreadable owner references were logged by the lifecycle reading
        // (which spares the pod as a DaemonSet's); here they leave the pod
        // uncontrolled, which the rescheduler never drains.
        let controller_kind = super::owner::controller_owner(v).ok().flatten().map(|o| o.kind);
        let termination_grace = match at(v, &["spec", "terminationGracePeriodSeconds"]) {
            None => PodScheduling::DEFAULT_TERMINATION_GRACE,
            Some(x) => match x.as_i64() {
                Some(n) if n >= 0 => Span::from_secs(n),
                _ => {
                    self.odd(
                        "spec.terminationGracePeriodSeconds",
                        &format!("{x} is not a number of seconds; read as 30"),
                    );
                    PodScheduling::DEFAULT_TERMINATION_GRACE
                }
            },
        };
        let conditions = at(v, &["status", "conditions"]).and_then(Value::as_array);
        let unschedulable_since = conditions.and_then(|cs| {
            let c = cs.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("PodScheduled"))?;
            let unschedulable = c.get("status").and_then(Value::as_str) == Some("False")
                && c.get("reason").and_then(Value::as_str) == Some("Unschedulable");
            if !unschedulable {
                return None;
            }
            Some(
                self.time(c, &["lastTransitionTime"], "status.conditions[PodScheduled].lastTransitionTime")
                    .unwrap_or(self.seen_at),
            )
        });
        PodScheduling {
            requests,
            priority_class: self
                .text(v, &["spec", "priorityClassName"], "spec.priorityClassName")
                .filter(|p| !p.is_empty())
                .map(str::to_string),
            critical_annotation: annotated(CRITICAL_POD_ANNOTATION),
            mirror: annotated(MIRROR_POD_ANNOTATION) || garbled || (unreadable && !finished),
            controller_kind,
            termination_grace,
            labels: self.labels(v),
            placement: self.placement(v),
            unschedulable_since,
        }
    }

    /// `status.allocatable` (cpu, memory, pods); `None` when absent or
    /// unreadable, a missing resource reads as zero.
    pub(super) fn allocatable(&self, v: &Value) -> Option<Resources> {
        let list = at(v, &["status", "allocatable"])?;
        if !list.is_object() {
            self.odd("status.allocatable", &format!("expected an object, found {}; read as absent", json_type(list)));
            return None;
        }
        let mut out = Resources::ZERO;
        for (res, slot) in [("cpu", &mut out.cpu_millis), ("memory", &mut out.memory_bytes), ("pods", &mut out.pods)] {
            match self.amount(list, res, "status.allocatable") {
                Amount::Read(n) => *slot = n,
                Amount::Absent => {}
                Amount::Unreadable => {
                    self.odd("status.allocatable", "read as absent: no addon is placed on this node");
                    return None;
                }
            }
        }
        Some(out)
    }
}

/// `spec.priority` as priority admission resolved it from the pod's class;
/// `None` when absent or not an integer. The rescheduler's idea of a
/// critical addon does not use it (upstream's rescheduler asks the class
/// and the annotation); what-if counts pods in the system range as
/// critical too.
pub fn pod_priority(v: &Value) -> Option<i64> {
    at(v, &["spec", "priority"]).and_then(Value::as_i64)
}
