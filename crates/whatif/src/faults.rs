//! What fails in a what-if, aimed at the snapshot's real names: a zone,
//! named nodes, nodes with a label, the control plane, or a scenario
//! file's events.

use std::collections::BTreeSet;

use nodewarden_cluster::{EventEntry, Fault, FaultPlan};
use nodewarden_model::{Span, Timestamp, ZoneKey};
use nodewarden_sim::report::human_span;

use crate::snapshot::{Snapshot, SnapshotError};

/// How failed nodes fail.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailMode {
    /// Their kubelets cannot reach the API server (a zone's network goes):
    /// the kubelets keep running and catch up once healed.
    #[default]
    Partition,
    /// Their kubelets stop (the machines go down); on recovery they
    /// restart, renew and post Ready at once.
    Crash,
}

/// The failure to play.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Zones that fail: a `topology.kubernetes.io/zone` value or a
    /// `region/zone` key.
    pub zones: Vec<String>,
    /// Nodes that fail, by name.
    pub nodes: Vec<String>,
    /// Nodes that fail, by `LABEL=VALUE`.
    pub selectors: Vec<String>,
    /// How they fail.
    pub mode: FailMode,
    /// When they fail (from the snapshot's moment).
    pub at: Span,
    /// How long until they come back; `None` = not within the run.
    pub recover_after: Option<Span>,
    /// The controller cannot reach the API server for this long, from `at`.
    pub control_plane_outage: Option<Span>,
    /// A scenario file's events, as they are (times from the snapshot's
    /// moment; node names are the snapshot's).
    pub events: Vec<EventEntry>,
    /// Simulated time; `None` = 1h after `at`, or past the recovery.
    pub duration: Option<Span>,
}

impl Faults {
    /// Simulated time of the run.
    pub fn duration(&self) -> Span {
        self.duration.unwrap_or_else(|| {
            let mut d = self.at + Span::from_secs(3600);
            if let Some(r) = self.recover_after {
                d = d.max(self.at + r + Span::from_secs(10 * 60));
            }
            if let Some(e) = self.events.iter().map(|e| e.at).max() {
                d = d.max(e + Span::from_secs(10 * 60));
            }
            d
        })
    }

    /// One line for the summary.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        let how = match self.mode {
            FailMode::Partition => "cut off from the API server",
            FailMode::Crash => "crashed",
        };
        let mut which = Vec::new();
        which.extend(self.zones.iter().map(|z| format!("zone {z}")));
        which.extend(self.selectors.iter().map(|s| format!("nodes with {s}")));
        if !self.nodes.is_empty() {
            which.push(format!("{} named node(s)", self.nodes.len()));
        }
        if !which.is_empty() {
            let back = self.recover_after.map_or(String::new(), |r| format!(", back after {}", human_span(r)));
            parts.push(format!("{} fail at {} ({how}){back}", which.join(" and "), human_span(self.at)));
        }
        if let Some(d) = self.control_plane_outage {
            parts.push(format!("the control plane is unreachable from {} for {}", human_span(self.at), human_span(d)));
        }
        if !self.events.is_empty() {
            parts.push(format!("{} scenario event(s)", self.events.len()));
        }
        if parts.is_empty() {
            return "nothing fails".to_string();
        }
        parts.join("; ")
    }

    /// The nodes that fail, in name order; an error names what matches
    /// nothing.
    pub fn failed_nodes(&self, snap: &Snapshot) -> Result<Vec<String>, SnapshotError> {
        let bad = SnapshotError::Fault;
        let mut out = BTreeSet::new();
        let zones = snap.zones();
        for z in &self.zones {
            let mut found = false;
            for n in &snap.nodes {
                let key = ZoneKey::from_labels(&n.labels);
                if key.zone == *z || key.to_string() == *z {
                    out.insert(n.name.clone());
                    found = true;
                }
            }
            if !found {
                let known: Vec<&str> = zones.keys().map(String::as_str).collect();
                return Err(bad(format!("no node in zone {z:?}; the snapshot's zones: {}", known.join(", "))));
            }
        }
        for name in &self.nodes {
            if !snap.nodes.iter().any(|n| n.name == *name) {
                return Err(bad(format!("no node named {name:?} in the snapshot")));
            }
            out.insert(name.clone());
        }
        for sel in &self.selectors {
            let Some((k, v)) = sel.split_once('=') else {
                return Err(bad(format!("--fail-nodes-selector wants LABEL=VALUE, got {sel:?}")));
            };
            let matched: Vec<&str> = snap
                .nodes
                .iter()
                .filter(|n| n.labels.get(k).is_some_and(|x| x == v))
                .map(|n| n.name.as_str())
                .collect();
            if matched.is_empty() {
                return Err(bad(format!("no node has the label {sel}")));
            }
            out.extend(matched.into_iter().map(str::to_string));
        }
        Ok(out.into_iter().collect())
    }

    /// The fault plan on the virtual clock (t=0 = the snapshot's moment).
    pub fn plan(&self, snap: &Snapshot) -> Result<FaultPlan, SnapshotError> {
        let mut plan = FaultPlan::new();
        let at = Timestamp::EPOCH + self.at;
        let nodes = self.failed_nodes(snap)?;
        if !nodes.is_empty() {
            let what = format!("{} node(s) {}", nodes.len(), self.describe_nodes());
            let (down, up) = match self.mode {
                FailMode::Partition => (Fault::Partition(nodes.clone()), Fault::Heal(nodes.clone())),
                FailMode::Crash => (Fault::Crash(nodes.clone()), Fault::Recover(nodes.clone())),
            };
            plan.add(at, down, what);
            if let Some(r) = self.recover_after {
                plan.add(at + r, up, format!("the {} failed node(s) are back", nodes.len()));
            }
        }
        if let Some(d) = self.control_plane_outage {
            plan.add(at, Fault::ControlPlaneDown, "the controller cannot reach the API server");
            plan.add(at + d, Fault::ControlPlaneUp, "the controller reaches the API server again");
        }
        for e in &self.events {
            let fault = match &e.action {
                nodewarden_cluster::EventAction::RestartController => Fault::RestartController,
                other => Fault::Event(other.clone()),
            };
            plan.add(Timestamp::EPOCH + e.at, fault, String::new());
        }
        Ok(plan)
    }

    fn describe_nodes(&self) -> String {
        let how = match self.mode {
            FailMode::Partition => "cut off from the API server",
            FailMode::Crash => "crashed",
        };
        let mut which = Vec::new();
        which.extend(self.zones.iter().map(|z| format!("zone {z}")));
        which.extend(self.selectors.iter().cloned());
        if !self.nodes.is_empty() {
            which.push("named".to_string());
        }
        format!("fail ({}; {how})", which.join(", "))
    }
}

/// A scenario file's events, to play on a snapshot (its nodes, pods and
/// expectations are not used; its `config`, if any, is not either: the
/// controller's flags come from `--config`). Node names in the events must
/// be the snapshot's (checked by [`check_events`]).
pub fn scenario_events(text: &str) -> Result<Vec<EventEntry>, SnapshotError> {
    let scenario: nodewarden_cluster::Scenario =
        serde_yaml_ng::from_str(text).map_err(|e| SnapshotError::Fault(format!("invalid scenario file: {e}")))?;
    Ok(scenario.events)
}

/// Every node a kubelet-stop or kubelet-start event names is in the
/// snapshot.
pub fn check_events(events: &[EventEntry], snap: &Snapshot) -> Result<(), SnapshotError> {
    let names: BTreeSet<&str> = snap.nodes.iter().map(|n| n.name.as_str()).collect();
    for e in events {
        let nodes = match &e.action {
            nodewarden_cluster::EventAction::KubeletStop(n) | nodewarden_cluster::EventAction::KubeletStart(n) => {
                n.as_slice()
            }
            _ => &[],
        };
        if let Some(missing) = nodes.iter().find(|n| !names.contains(n.as_str())) {
            return Err(SnapshotError::Fault(format!(
                "the scenario's event at {} names node {missing:?}, which the snapshot does not have",
                human_span(e.at)
            )));
        }
    }
    Ok(())
}
