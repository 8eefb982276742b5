//! Pod identity.

/// A pod's `namespace/name`: how observations, actions, scenario files and
/// reports name a pod (its uid is carried separately, as a write
/// precondition).
pub type PodKey = String;
