//! Node conditions.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// A condition's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Nobody knows: the kubelet stopped reporting.
    Unknown,
}

impl ConditionStatus {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The node condition types the controller reads or writes; any other type
/// is carried through untouched.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConditionType {
    /// The kubelet is healthy and ready to accept pods.
    Ready,
    /// The node is short of memory.
    MemoryPressure,
    /// The node is short of disk.
    DiskPressure,
    /// The node is short of process ids.
    PidPressure,
    /// The node's network is not configured.
    NetworkUnavailable,
    /// Any other condition type (from node-problem-detector and the like).
    Other(String),
}

impl ConditionType {
    /// The conditions the controller turns Unknown when the kubelet goes
    /// silent (never NetworkUnavailable), in upstream's order.
    pub const SILENCED: [ConditionType; 4] =
        [ConditionType::Ready, ConditionType::MemoryPressure, ConditionType::DiskPressure, ConditionType::PidPressure];

    /// The API spelling.
    pub fn as_str(&self) -> &str {
        match self {
            ConditionType::Ready => "Ready",
            ConditionType::MemoryPressure => "MemoryPressure",
            ConditionType::DiskPressure => "DiskPressure",
            ConditionType::PidPressure => "PIDPressure",
            ConditionType::NetworkUnavailable => "NetworkUnavailable",
            ConditionType::Other(s) => s,
        }
    }

    /// Parses the API spelling; unknown names become [`ConditionType::Other`].
    pub fn parse(s: &str) -> ConditionType {
        match s {
            "Ready" => ConditionType::Ready,
            "MemoryPressure" => ConditionType::MemoryPressure,
            "DiskPressure" => ConditionType::DiskPressure,
            "PIDPressure" => ConditionType::PidPressure,
            "NetworkUnavailable" => ConditionType::NetworkUnavailable,
            other => ConditionType::Other(other.to_string()),
        }
    }
}

impl fmt::Display for ConditionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ConditionType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ConditionType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() {
            return Err(serde::de::Error::custom("condition type must not be empty"));
        }
        Ok(ConditionType::parse(&s))
    }
}

/// One node condition as the API server stores it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeCondition {
    /// Which condition.
    #[serde(rename = "type")]
    pub kind: ConditionType,
    /// Its status.
    pub status: ConditionStatus,
    /// Machine-readable reason, e.g. `NodeStatusUnknown`.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// When the kubelet last reported it.
    pub last_heartbeat: Timestamp,
    /// When its status last changed.
    pub last_transition: Timestamp,
}

impl NodeCondition {
    /// A condition as a kubelet posts it: `status` since `transition`,
    /// last reported at `heartbeat`, no message. Simulated kubelets,
    /// fleets and tests build conditions this way; the controller's own
    /// Unknown writes carry their upstream reason and message instead.
    pub fn posted(
        kind: ConditionType,
        status: ConditionStatus,
        reason: &str,
        heartbeat: Timestamp,
        transition: Timestamp,
    ) -> NodeCondition {
        NodeCondition {
            kind,
            status,
            reason: reason.to_string(),
            message: String::new(),
            last_heartbeat: heartbeat,
            last_transition: transition,
        }
    }

    /// The four conditions a healthy kubelet posts (Ready, and no memory,
    /// disk or PID pressure, with the kubelet's reasons), reported at
    /// `heartbeat` and unchanged since `transition`: every simulated fleet
    /// starts its nodes this way.
    pub fn healthy_kubelet(heartbeat: Timestamp, transition: Timestamp) -> Vec<NodeCondition> {
        [
            (ConditionType::Ready, ConditionStatus::True, "KubeletReady"),
            (ConditionType::MemoryPressure, ConditionStatus::False, "KubeletHasSufficientMemory"),
            (ConditionType::DiskPressure, ConditionStatus::False, "KubeletHasNoDiskPressure"),
            (ConditionType::PidPressure, ConditionStatus::False, "KubeletHasSufficientPID"),
        ]
        .into_iter()
        .map(|(kind, status, reason)| NodeCondition::posted(kind, status, reason, heartbeat, transition))
        .collect()
    }
}

/// Reason set on conditions the kubelet stopped updating.
pub const REASON_STATUS_UNKNOWN: &str = "NodeStatusUnknown";
/// Message set on conditions the kubelet stopped updating.
pub const MESSAGE_STATUS_UNKNOWN: &str = "Kubelet stopped posting node status.";
/// Reason set on conditions the kubelet never posted.
pub const REASON_NEVER_UPDATED: &str = "NodeStatusNeverUpdated";
/// Message set on conditions the kubelet never posted.
pub const MESSAGE_NEVER_UPDATED: &str = "Kubelet never posted node status.";
