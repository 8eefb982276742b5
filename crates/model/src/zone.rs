//! Zone keys (`GetZoneKey`) and zone disruption states (`ComputeZoneState`).

use std::collections::BTreeMap;
use std::fmt;

use crate::keys;

/// A zone: region and zone together. Nodes with neither label share the
/// empty key. Displayed as `region/zone` (`""` for the empty key), the
/// spelling scenario files and metrics use.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ZoneKey {
    /// The region part, possibly empty.
    pub region: String,
    /// The zone part, possibly empty.
    pub zone: String,
}

impl ZoneKey {
    /// A key from its parts.
    pub fn new(region: impl Into<String>, zone: impl Into<String>) -> ZoneKey {
        ZoneKey { region: region.into(), zone: zone.into() }
    }

    /// The zone a node with these labels belongs to. The deprecated
    /// `failure-domain.beta` labels win over the topology labels when present
    /// (even when empty), as upstream's `GetZoneKey` does.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> ZoneKey {
        let (region, zone) = ZoneKey::parts_of(labels);
        ZoneKey::new(region, zone)
    }

    /// The region and zone [`ZoneKey::from_labels`] would take from
    /// `labels`, borrowed: a caller that only looks a known zone up (a
    /// node's every upsert) then builds no key.
    pub fn parts_of(labels: &BTreeMap<String, String>) -> (&str, &str) {
        let pick =
            |beta: &str, topology: &str| labels.get(beta).or_else(|| labels.get(topology)).map_or("", String::as_str);
        (
            pick(keys::LABEL_FAILURE_DOMAIN_REGION, keys::LABEL_TOPOLOGY_REGION),
            pick(keys::LABEL_FAILURE_DOMAIN_ZONE, keys::LABEL_TOPOLOGY_ZONE),
        )
    }

    /// True when [`ZoneKey::from_labels`] of `labels` is this key (without
    /// building one).
    pub fn is_of(&self, labels: &BTreeMap<String, String>) -> bool {
        let (region, zone) = ZoneKey::parts_of(labels);
        self.region == region && self.zone == zone
    }

    /// Parses the `region/zone` spelling (`""` is the empty key). The split is
    /// at the first `/`: region names carry no slash.
    pub fn parse(s: &str) -> ZoneKey {
        match s.split_once('/') {
            Some((r, z)) => ZoneKey::new(r, z),
            None => ZoneKey::new("", s),
        }
    }

    /// True for the key of nodes without zone labels.
    pub fn is_empty(&self) -> bool {
        self.region.is_empty() && self.zone.is_empty()
    }
}

impl fmt::Display for ZoneKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() { Ok(()) } else { write!(f, "{}/{}", self.region, self.zone) }
    }
}

/// A zone's disruption state (`ComputeZoneState`). The engine computes it;
/// scenario files, reports and the reference model name it, so it lives here
/// with the zone key rather than inside the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZoneState {
    /// Seen for the first time in this pass.
    Initial,
    /// Healthy enough: tainted at `node-eviction-rate`.
    Normal,
    /// Many nodes down: secondary rate, or 0 in small zones.
    PartialDisruption,
    /// No ready node at all.
    FullDisruption,
}

impl ZoneState {
    /// The spelling used in scenario files, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            ZoneState::Initial => "Initial",
            ZoneState::Normal => "Normal",
            ZoneState::PartialDisruption => "PartialDisruption",
            ZoneState::FullDisruption => "FullDisruption",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn topology_labels_make_the_key() {
        let k =
            ZoneKey::from_labels(&labels(&[(keys::LABEL_TOPOLOGY_REGION, "r1"), (keys::LABEL_TOPOLOGY_ZONE, "z1")]));
        assert_eq!(k.to_string(), "r1/z1");
    }

    #[test]
    fn beta_labels_win_even_when_empty() {
        let k = ZoneKey::from_labels(&labels(&[
            (keys::LABEL_TOPOLOGY_REGION, "r1"),
            (keys::LABEL_TOPOLOGY_ZONE, "z1"),
            (keys::LABEL_FAILURE_DOMAIN_ZONE, ""),
        ]));
        assert_eq!(k, ZoneKey::new("r1", ""));
        assert_eq!(k.to_string(), "r1/");
    }

    #[test]
    fn no_labels_is_the_empty_key() {
        let k = ZoneKey::from_labels(&BTreeMap::new());
        assert!(k.is_empty());
        assert_eq!(k.to_string(), "");
        assert_eq!(ZoneKey::parse(""), k);
    }

    #[test]
    fn is_of_agrees_with_from_labels() {
        let sets = [
            labels(&[(keys::LABEL_TOPOLOGY_REGION, "r1"), (keys::LABEL_TOPOLOGY_ZONE, "z1")]),
            labels(&[(keys::LABEL_TOPOLOGY_ZONE, "z1"), (keys::LABEL_FAILURE_DOMAIN_ZONE, "")]),
            labels(&[(keys::LABEL_FAILURE_DOMAIN_REGION, "r2"), (keys::LABEL_TOPOLOGY_REGION, "r1")]),
            BTreeMap::new(),
        ];
        for a in &sets {
            for b in &sets {
                assert_eq!(ZoneKey::from_labels(a).is_of(b), ZoneKey::from_labels(a) == ZoneKey::from_labels(b));
            }
        }
    }

    #[test]
    fn parse_round_trips() {
        for s in ["r/z", "/z", "r/"] {
            assert_eq!(ZoneKey::parse(s).to_string(), s);
        }
    }
}
