//! How the engine's cluster and the model's cluster are compared.
//!
//! Granularity: after every instant, the *state each produced* — every
//! field a controller writes — on two clusters that received the same
//! external changes. Comparing states rather than action lists makes the
//! comparison indifferent to how writes are batched or ordered within an
//! instant (one patch or two, NoSchedule before NoExecute), which upstream
//! leaves open, while any difference in what was written, to what, or when
//! (to the instant) shows up at once. Zone states and rates, and the
//! master-disruption flag, are compared too. Events are not.

use std::collections::BTreeMap;
use std::fmt;

use nodewarden_cluster::{Cluster, SimPod};
use nodewarden_engine::NodeSnapshot;
use nodewarden_engine::ZoneReport;
use nodewarden_model::{NodeCondition, Taint};

use crate::model::RefZone;

/// The controller-visible facets of one node.
#[derive(Clone, Debug, PartialEq)]
struct NodeFacets {
    conditions: Vec<NodeCondition>,
    taints: Vec<Taint>,
    labels: BTreeMap<String, String>,
}

/// The controller-visible facets of one pod.
#[derive(Clone, Debug, PartialEq)]
struct PodFacets {
    uid: String,
    deleted: bool,
    conditions: String,
    reason: Option<String>,
}

fn node_facets(n: &NodeSnapshot) -> NodeFacets {
    let mut conditions = n.conditions.clone();
    conditions.sort_by(|a, b| a.kind.cmp(&b.kind));
    let mut taints = n.taints.clone();
    taints.sort_by(|a, b| (&a.key, a.effect, &a.value).cmp(&(&b.key, b.effect, &b.value)));
    NodeFacets { conditions, taints, labels: n.labels.clone() }
}

/// Equal as written, order included: then their facets are equal too, and
/// nothing needs to be built to know it.
fn same_node(a: &NodeSnapshot, b: &NodeSnapshot) -> bool {
    a.conditions == b.conditions && a.taints == b.taints && a.labels == b.labels
}

fn pod_facets(p: &SimPod) -> PodFacets {
    PodFacets {
        uid: p.uid.clone(),
        deleted: p.deleted,
        conditions: format!("{:?}", p.conditions),
        reason: p.reason.clone(),
    }
}

fn same_pod(a: &SimPod, b: &SimPod) -> bool {
    a.uid == b.uid && a.deleted == b.deleted && a.conditions == b.conditions && a.reason == b.reason
}

/// A difference between what the engine and the model did.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// What differs (`node n1`, `pod ns/p0`, `zone r/z0`, ...).
    pub subject: String,
    /// The engine's side.
    pub engine: String,
    /// The model's side.
    pub model: String,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:\n  engine: {}\n  model:  {}", self.subject, self.engine, self.model)
    }
}

/// The first key, in order, whose facets differ between the two sides
/// (each listed by key, in key order): a merge of the two lists, in which
/// an entry equal to its counterpart as written (`same`) is passed over
/// without building its facets.
fn first_difference<'a, T: 'a, F: PartialEq + fmt::Debug>(
    kind: &str,
    engine: impl Iterator<Item = (&'a str, &'a T)>,
    model: impl Iterator<Item = (&'a str, &'a T)>,
    same: impl Fn(&T, &T) -> bool,
    facets: impl Fn(&T) -> F,
) -> Option<Difference> {
    let differ = |key: &str, e: Option<&T>, m: Option<&T>| {
        let (e, m) = (e.map(&facets), m.map(&facets));
        (e != m).then(|| Difference {
            subject: format!("{kind} {key}"),
            engine: format!("{:?}", e.as_ref()),
            model: format!("{:?}", m.as_ref()),
        })
    };
    let (mut engine, mut model) = (engine.peekable(), model.peekable());
    loop {
        let found = match (engine.peek(), model.peek()) {
            (None, None) => return None,
            (Some(&(k, e)), Some(&(mk, m))) if k == mk => {
                engine.next();
                model.next();
                if same(e, m) { None } else { differ(k, Some(e), Some(m)) }
            }
            (Some(&(k, e)), Some(&(mk, _))) if k < mk => {
                engine.next();
                differ(k, Some(e), None)
            }
            (Some(&(k, e)), None) => {
                engine.next();
                differ(k, Some(e), None)
            }
            (_, Some(&(mk, m))) => {
                model.next();
                differ(mk, None, Some(m))
            }
        };
        if found.is_some() {
            return found;
        }
    }
}

fn diff_maps<V: Clone + PartialEq + fmt::Debug>(
    kind: &str,
    engine: &BTreeMap<String, V>,
    model: &BTreeMap<String, V>,
) -> Option<Difference> {
    first_difference(
        kind,
        engine.iter().map(|(k, v)| (k.as_str(), v)),
        model.iter().map(|(k, v)| (k.as_str(), v)),
        |a, b| a == b,
        V::clone,
    )
}

/// The first difference between the two clusters and zone views, if any.
pub fn compare(
    engine: &Cluster,
    model: &Cluster,
    engine_zones: &[ZoneReport],
    model_zones: &[RefZone],
    flags: (bool, bool),
) -> Option<Difference> {
    if let Some(d) = first_difference(
        "node",
        engine.nodes().map(|n| (n.name.as_str(), n)),
        model.nodes().map(|n| (n.name.as_str(), n)),
        same_node,
        node_facets,
    ) {
        return Some(d);
    }
    if let Some(d) = first_difference(
        "pod",
        engine.pods().map(|p| (p.key.as_str(), p)),
        model.pods().map(|p| (p.key.as_str(), p)),
        same_pod,
        pod_facets,
    ) {
        return Some(d);
    }
    let ez: BTreeMap<String, (String, f32)> = engine_zones
        .iter()
        .filter_map(|z| z.state.map(|s| (z.key.to_string(), (s.as_str().to_string(), z.rate as f32))))
        .collect();
    let mz: BTreeMap<String, (String, f32)> = model_zones
        .iter()
        .filter_map(|z| z.state.map(|s| (z.key.to_string(), (s.as_str().to_string(), z.rate as f32))))
        .collect();
    if let Some(d) = diff_maps("zone", &ez, &mz) {
        return Some(d);
    }
    (flags.0 != flags.1).then(|| Difference {
        subject: "master disruption mode".into(),
        engine: flags.0.to_string(),
        model: flags.1.to_string(),
    })
}
