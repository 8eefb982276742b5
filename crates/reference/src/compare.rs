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

use nodewarden_engine::ZoneReport;
use nodewarden_model::{NodeCondition, Taint};
use nodewarden_sim::Cluster;

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

fn node_facets(cluster: &Cluster) -> BTreeMap<String, NodeFacets> {
    cluster
        .nodes()
        .map(|n| {
            let mut conditions = n.conditions.clone();
            conditions.sort_by(|a, b| a.kind.cmp(&b.kind));
            let mut taints = n.taints.clone();
            taints.sort_by(|a, b| (&a.key, a.effect, &a.value).cmp(&(&b.key, b.effect, &b.value)));
            (n.name.clone(), NodeFacets { conditions, taints, labels: n.labels.clone() })
        })
        .collect()
}

fn pod_facets(cluster: &Cluster) -> BTreeMap<String, PodFacets> {
    cluster
        .pods()
        .map(|p| {
            let facets = PodFacets {
                uid: p.uid.clone(),
                deleted: p.deleted,
                conditions: format!("{:?}", p.conditions),
                reason: p.reason.clone(),
            };
            (p.key.clone(), facets)
        })
        .collect()
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

fn diff_maps<V: PartialEq + fmt::Debug>(
    kind: &str,
    engine: &BTreeMap<String, V>,
    model: &BTreeMap<String, V>,
) -> Option<Difference> {
    let keys: std::collections::BTreeSet<&String> = engine.keys().chain(model.keys()).collect();
    keys.into_iter().find_map(|k| {
        let (e, m) = (engine.get(k), model.get(k));
        (e != m).then(|| Difference {
            subject: format!("{kind} {k}"),
            engine: format!("{e:?}"),
            model: format!("{m:?}"),
        })
    })
}

/// The first difference between the two clusters and zone views, if any.
pub fn compare(
    engine: &Cluster,
    model: &Cluster,
    engine_zones: &[ZoneReport],
    model_zones: &[RefZone],
    flags: (bool, bool),
) -> Option<Difference> {
    if let Some(d) = diff_maps("node", &node_facets(engine), &node_facets(model)) {
        return Some(d);
    }
    if let Some(d) = diff_maps("pod", &pod_facets(engine), &pod_facets(model)) {
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
