//! The readings this module's tests call: each is checked against the
//! reading of the object as a watch decodes it, so no test passes on a
//! field the watches would not have decoded.

use nodewarden_engine::{NodeSnapshot, Observation, PodSnapshot};
use nodewarden_model::Timestamp;
use serde_json::Value;

use super::prune::Keep;
use super::{Detail, keep};

/// `v` as a watch decodes it: pruned to `keep`.
fn decoded(v: &Value, keep: &Keep) -> Value {
    super::prune::from_str(&v.to_string(), keep).expect("the test's object is JSON")
}

pub(super) fn node_reading(v: &Value, at: Timestamp, detail: Detail) -> Option<NodeSnapshot> {
    let keep = match detail {
        Detail::Lifecycle => &keep::NODE,
        Detail::Scheduling => &keep::SCHEDULED_NODE,
    };
    let full = super::node_reading(v, at, detail);
    assert_eq!(super::node_reading(&decoded(v, keep), at, detail), full, "pruning changed the reading of {v}");
    full
}

pub(super) fn pod_reading(v: &Value, at: Timestamp, detail: Detail) -> Option<PodSnapshot> {
    let keep = match detail {
        Detail::Lifecycle => &keep::POD,
        Detail::Scheduling => &keep::SCHEDULED_POD,
    };
    let full = super::pod_reading(v, at, detail);
    assert_eq!(super::pod_reading(&decoded(v, keep), at, detail), full, "pruning changed the reading of {v}");
    if detail == Detail::Lifecycle {
        let text = v.to_string();
        assert_eq!(super::typed::rebuilt_pod(&text), decoded(v, keep), "the single pass lost a kept field of {v}");
        if let Some((_, typed)) = super::typed::pod(&text) {
            assert_eq!(Some(typed), full, "the typed reading differs from the lenient one for {v}");
        }
    }
    full
}

pub(super) fn lease_reading(v: &Value, at: Timestamp) -> Option<Observation> {
    let full = super::lease_reading(v, at);
    assert_eq!(super::lease_reading(&decoded(v, &keep::LEASE), at), full, "pruning changed the reading of {v}");
    let text = v.to_string();
    assert_eq!(
        super::typed::rebuilt_lease(&text),
        decoded(v, &keep::LEASE),
        "the single pass lost a kept field of {v}"
    );
    if let Some((_, typed)) = super::typed::lease(&text) {
        assert_eq!(typed, full, "the typed reading differs from the lenient one for {v}");
    }
    full
}

pub(super) fn budget_reading(v: &Value, at: Timestamp) -> Option<Observation> {
    let full = super::budget_reading(v, at);
    assert_eq!(super::budget_reading(&decoded(v, &keep::BUDGET), at), full, "pruning changed the reading of {v}");
    full
}
