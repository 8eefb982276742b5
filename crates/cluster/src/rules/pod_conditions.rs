//! A pod's conditions by type, kept small.
//!
//! A pod has one to three conditions (`Ready`, `PodScheduled`,
//! `DisruptionTarget`). As a `BTreeMap<String, _>` each pod paid for a
//! whole tree node (some 300 bytes) and a heap copy of the word `Ready`: a
//! quarter of what the simulated cluster held per pod at 100k nodes / 1M
//! pods. Here they are a short vector sorted by type, with the type kept
//! inline ([`CompactName`]); lookups, iteration order and the debug form
//! are a map's.

use std::fmt;

use nodewarden_model::{CompactName, ConditionStatus};

/// A pod's conditions by type, sorted by type.
#[derive(Clone, Default, PartialEq)]
pub struct PodConditions(Vec<(CompactName, ConditionStatus)>);

impl PodConditions {
    /// No conditions.
    pub fn new() -> PodConditions {
        PodConditions::default()
    }

    fn find(&self, kind: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(kind))
    }

    /// The status of the condition `kind`, if the pod has it.
    pub fn get(&self, kind: &str) -> Option<&ConditionStatus> {
        self.find(kind).ok().map(|i| &self.0[i].1)
    }

    /// The status of the condition `kind`, to change it in place.
    pub fn get_mut(&mut self, kind: &str) -> Option<&mut ConditionStatus> {
        self.find(kind).ok().map(|i| &mut self.0[i].1)
    }

    /// Whether the pod has the condition `kind`.
    pub fn contains_key(&self, kind: &str) -> bool {
        self.find(kind).is_ok()
    }

    /// Sets the condition `kind`, returning its previous status.
    pub fn insert(&mut self, kind: &str, status: ConditionStatus) -> Option<ConditionStatus> {
        match self.find(kind) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, status)),
            Err(i) => {
                self.0.insert(i, (CompactName::from(kind), status));
                None
            }
        }
    }

    /// The conditions, by type.
    pub fn iter(&self) -> impl Iterator<Item = (&str, ConditionStatus)> {
        self.0.iter().map(|(k, s)| (k.as_str(), *s))
    }

    /// How many conditions the pod has.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the pod has none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::ops::Index<&str> for PodConditions {
    type Output = ConditionStatus;

    /// The status of `kind`; panics when the pod has no such condition, as
    /// a map's index does (tests only).
    fn index(&self, kind: &str) -> &ConditionStatus {
        match self.get(kind) {
            Some(s) => s,
            None => panic!("the pod has no {kind} condition"),
        }
    }
}

impl<'a> FromIterator<(&'a str, ConditionStatus)> for PodConditions {
    fn from_iter<I: IntoIterator<Item = (&'a str, ConditionStatus)>>(iter: I) -> PodConditions {
        let mut out = PodConditions::new();
        for (kind, status) in iter {
            out.insert(kind, status);
        }
        out
    }
}

impl fmt::Debug for PodConditions {
    /// As a map's (`{"Ready": True}`): the reference model's comparison
    /// prints conditions this way.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.0.iter().map(|(k, s)| (k.as_str(), s))).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn behaves_as_the_map_it_replaces() {
        let mut small = PodConditions::new();
        let mut map: BTreeMap<String, ConditionStatus> = BTreeMap::new();
        for (kind, status) in [
            ("Ready", ConditionStatus::True),
            ("PodScheduled", ConditionStatus::False),
            ("DisruptionTarget", ConditionStatus::True),
            ("Ready", ConditionStatus::False),
        ] {
            assert_eq!(small.insert(kind, status), map.insert(kind.to_string(), status));
        }
        assert_eq!(format!("{small:?}"), format!("{map:?}"));
        assert_eq!(
            small.iter().map(|(k, _)| k.to_string()).collect::<Vec<_>>(),
            map.keys().cloned().collect::<Vec<_>>()
        );
        assert_eq!(small.get("Ready"), Some(&ConditionStatus::False));
        assert!(small.contains_key("PodScheduled") && !small.contains_key("Initialized"));
        if let Some(s) = small.get_mut("PodScheduled") {
            *s = ConditionStatus::True;
        }
        assert_eq!(small["PodScheduled"], ConditionStatus::True);
        assert_eq!(small.len(), 3);
        assert!(std::mem::size_of::<PodConditions>() <= 24);
    }
}
