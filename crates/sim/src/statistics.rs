//! What a simulation measures while it runs: per-node failure stories,
//! per-zone tallies, latencies against what the configuration predicts,
//! tick costs and a sampled timeline. The driver ([`crate::simulation`])
//! feeds it faults, zone reports and each action as the simulated API
//! server carries it out; [`crate::report`] renders what it gathered.
//!
//! Nothing here decides anything or feeds the engine: figures only.

use std::collections::HashMap;

use nodewarden_cluster::admission::AdmissionDefaults;
use nodewarden_cluster::cluster::Cluster;
use nodewarden_cluster::faults::Fault;
use nodewarden_cluster::fleet::Layout;
use nodewarden_cluster::kubelet::KubeletTiming;
use nodewarden_cluster::rules::node::is_controller_noexecute as is_noexecute;
use nodewarden_controller::Invariant;
use nodewarden_engine::explain::Verdict;
use nodewarden_engine::{Action, ActionKind, TickPhase, ZoneReport, ZoneState};
use nodewarden_model::{ConditionStatus, ConditionType, ControllerConfig, Span, Timestamp, ZoneKey};

/// One node's story, for latencies and per-zone figures.
#[derive(Clone, Debug, Default)]
pub(crate) struct NodeTrack {
    /// Its zone's slot in the tallies.
    pub(crate) zone: usize,
    /// Down (crashed or partitioned) since.
    down_since: Option<Timestamp>,
    /// The controller set Ready to Unknown during the current episode.
    seen_dead: Option<Timestamp>,
    /// A NoExecute taint went on during the current episode.
    tainted: Option<Timestamp>,
}

/// Figures for one zone, gathered while the simulation runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ZoneTally {
    /// `region/zone`.
    pub key: String,
    /// Nodes in the zone at the start.
    pub nodes: usize,
    /// Pods bound to its nodes at the start.
    pub pods: usize,
    /// Failure episodes (a flapping node counts once per time down).
    pub failures: usize,
    /// Distinct nodes that failed.
    pub nodes_failed: usize,
    /// Failed nodes that came back.
    pub recoveries: usize,
    /// First and last failure.
    pub failed: Option<(Timestamp, Timestamp)>,
    /// Ready set to Unknown for a down node: count, first, last.
    pub seen_dead: (usize, Option<(Timestamp, Timestamp)>),
    /// Ready set to Unknown for a node whose kubelet was fine.
    pub false_alarms: usize,
    /// NoExecute taints added: count, first, last.
    pub tainted: (usize, Option<(Timestamp, Timestamp)>),
    /// NoExecute taints removed.
    pub untainted: usize,
    /// Pods deleted: count, first, last.
    pub evicted: (usize, Option<(Timestamp, Timestamp)>),
    /// Deleted pods that belonged to a DaemonSet.
    pub daemonset_evicted: usize,
    /// Every (state, rate) the zone went through, with when it started.
    pub states: Vec<(Timestamp, Option<ZoneState>, f64)>,
    /// Every fault that touched the zone (its nodes going down or coming
    /// back) or the whole cluster (the control plane, the controller, a
    /// scenario event), in time order: the chart marks each one, where
    /// [`Outcome::faults`] keeps only the lines written for people (a
    /// rolling failure is one line there and eighty faults here).
    pub marks: Vec<FaultMark>,
}

/// What a fault did, as a zone's chart marks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkKind {
    /// Nodes of the zone went down (crashed, partitioned, kubelet stopped).
    Down,
    /// Nodes of the zone came back.
    Up,
    /// Something that touches every zone alike: the control plane, the
    /// controller, a scenario event that is not about one node's kubelet.
    Cluster,
}

/// One fault as it touched one zone.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultMark {
    /// When.
    pub at: Timestamp,
    /// Down, up, or cluster-wide.
    pub kind: MarkKind,
    /// For people: `2 node(s) crash: node-000001, node-000004`.
    pub what: String,
}

fn widen(span: &mut Option<(Timestamp, Timestamp)>, t: Timestamp) {
    *span = Some(match *span {
        Some((a, b)) => (a.min(t), b.max(t)),
        None => (t, t),
    });
}

/// One point of the timeline, per zone.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ZoneSample {
    /// Nodes whose Ready is True.
    pub ready: usize,
    /// Ready False.
    pub not_ready: usize,
    /// Ready Unknown (the controller stopped hearing from them).
    pub unknown: usize,
    /// Nodes with a not-ready or unreachable NoExecute taint.
    pub tainted: usize,
    /// Pods deleted so far.
    pub evicted: usize,
}

/// Latencies in seconds, each with what the configuration predicts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Latencies {
    /// Failure to Ready=Unknown.
    pub detection: Vec<f64>,
    /// Ready=Unknown to NoExecute taint.
    pub tainting: Vec<f64>,
    /// Taint on the node to deletion sent, minus what the pod's toleration
    /// allowed (0 = exactly on time; never negative when the controller is
    /// right). With API latency, from the taint's landing (when the answer
    /// showed it to the controller) to the deletion's sending.
    pub eviction_vs_toleration: Vec<f64>,
    /// Taint to deletion.
    pub eviction: Vec<f64>,
}

/// Wall-clock cost of the engine's ticks, in nanoseconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TickCosts {
    /// Whole ticks (ingest included).
    pub tick: Vec<u64>,
    /// Per phase, in the engine's order.
    pub phases: Vec<(TickPhase, Vec<u64>)>,
    /// The slowest health monitor passes, slowest first (at most
    /// [`SLOWEST_KEPT`]): when each ran, what it took (ns), and how many
    /// actions its tick issued. A tail of the pass's distribution is made of
    /// a few passes; what their ticks did says why.
    pub slowest_health: Vec<SlowPass>,
}

/// One of the slowest health monitor passes ([`TickCosts::slowest_health`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowPass {
    /// When it ran.
    pub at: Timestamp,
    /// What the pass took, in nanoseconds.
    pub nanos: u64,
    /// Actions its tick issued (a mass of Unknown statuses, taints, ...).
    pub actions: usize,
}

/// How many of the slowest health monitor passes are kept.
pub const SLOWEST_KEPT: usize = 12;

impl TickCosts {
    /// Keeps `pass` if it is among the slowest.
    pub fn note_health_pass(&mut self, pass: SlowPass) {
        let at = self.slowest_health.partition_point(|p| p.nanos >= pass.nanos);
        if at < SLOWEST_KEPT {
            self.slowest_health.insert(at, pass);
            self.slowest_health.truncate(SLOWEST_KEPT);
        }
    }
}

/// Counts for the progress line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Virtual time now.
    pub now: Timestamp,
    /// Where the run ends.
    pub end: Timestamp,
    /// Nodes now not Ready (False or Unknown).
    pub not_ready: usize,
    /// Nodes now carrying a NoExecute taint.
    pub tainted: usize,
    /// Pods deleted so far.
    pub evicted: usize,
    /// Safety violations so far.
    pub violations: usize,
}

/// Everything a finished simulation gathered.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The scenario's name.
    pub scenario: String,
    /// What it does.
    pub description: String,
    /// The controller's flags.
    pub config: ControllerConfig,
    /// Admission's default toleration seconds.
    pub admission: AdmissionDefaults,
    /// Kubelet cadence.
    pub kubelet: KubeletTiming,
    /// Nodes at the start.
    pub nodes: usize,
    /// Pods at the start.
    pub pods: usize,
    /// Simulated span.
    pub simulated: Span,
    /// Steps taken (engine ticks, answer rounds not counted).
    pub steps: u64,
    /// Observations sent to the engine.
    pub observations: u64,
    /// Actions the engine emitted.
    pub actions: u64,
    /// Writes that failed.
    pub writes_failed: u64,
    /// Controller restarts.
    pub restarts: usize,
    /// The faults, with their times, for people.
    pub faults: Vec<(Timestamp, String)>,
    /// Per zone, in zone order.
    pub zones: Vec<ZoneTally>,
    /// Latencies.
    pub latencies: Latencies,
    /// Tick costs (empty unless measured).
    pub costs: TickCosts,
    /// Timeline: (time, per-zone sample).
    pub timeline: Vec<(Timestamp, Vec<ZoneSample>)>,
    /// Each invariant with whether it held.
    pub safety: Vec<(Invariant, bool)>,
    /// Writes the safety interlock held back: none in a correct run (a
    /// refusal in a fault-free run is a bug, as the runbook says).
    pub held_back: usize,
    /// The API latency the run had.
    pub api_latency: nodewarden_cluster::latency::ApiLatency,
    /// Writes the cluster refused as contract breaks (to a deleted or
    /// terminating pod).
    pub contract_violations: usize,
    /// The first violations, for people.
    pub violations: Vec<String>,
    /// What happened to each critical addon (empty unless the cluster
    /// keeps scheduling data, as in `critical-addon`).
    pub addons: Vec<nodewarden_cluster::addons::AddonOutcome>,
}

/// The safety check the simulated API server makes itself: the controller
/// never writes to a pod that is deleted or terminating (so never deletes
/// one twice).
pub const CONTRACT: &str = "no_write_to_deleted_or_terminating_pod";

/// The safety check of the interlock itself: it held back no write. Its
/// refusals keep a wrong write from the cluster, but in a correct run there
/// is none to keep back, with or without API latency.
pub const INTERLOCK_SILENT: &str = "interlock_held_back_nothing";

impl Outcome {
    /// True when every safety check held ([`Outcome::checks`]).
    pub fn safe(&self) -> bool {
        self.checks().iter().all(|(_, ok)| *ok)
    }

    /// Every safety check, by name, with whether it held: each invariant,
    /// then the two the run makes itself: no write to a deleted or
    /// terminating pod ([`CONTRACT`]), and the interlock
    /// held back nothing ([`INTERLOCK_SILENT`]).
    pub fn checks(&self) -> Vec<(&'static str, bool)> {
        let mut checks: Vec<(&'static str, bool)> = self.safety.iter().map(|(i, ok)| (i.name(), *ok)).collect();
        checks.push((CONTRACT, self.contract_violations == 0));
        checks.push((INTERLOCK_SILENT, self.held_back == 0));
        checks
    }
}

/// The figures gathered so far, and the indexes that place a node in its
/// zone.
#[derive(Debug, Default)]
pub(crate) struct Statistics {
    pub(crate) zone_keys: Vec<String>,
    zone_index: HashMap<String, usize>,
    /// `zone_index` by the engine's key, met at every tick's zone report:
    /// a few zones, searched in place rather than formatted each time.
    zone_by_key: Vec<(ZoneKey, usize)>,
    pub(crate) node_index: HashMap<String, usize, foldhash::fast::RandomState>,
    /// `node_index` by the cluster's row of the name (`NodeSummary::row`),
    /// filled as the timeline meets them.
    by_row: Vec<Option<u32>>,
    pub(crate) nodes: Vec<NodeTrack>,
    pub(crate) tally: Vec<ZoneTally>,
    pub(crate) latencies: Latencies,
    pub(crate) costs: TickCosts,
    pub(crate) timeline: Vec<(Timestamp, Vec<ZoneSample>)>,
    pub(crate) sample_every: Span,
    pub(crate) next_sample: Timestamp,
    pub(crate) node_count: usize,
    pub(crate) pod_count: usize,
    pub(crate) steps: u64,
    pub(crate) observations: u64,
    pub(crate) actions: u64,
    pub(crate) writes_failed: u64,
    pub(crate) contract_violations: usize,
    pub(crate) held_back: usize,
    /// With API latency: when each pod deletion on its way was sent.
    pub(crate) deletions_sent: HashMap<String, Timestamp>,
    pub(crate) violations: Vec<String>,
    pub(crate) violation_count: usize,
}

impl Statistics {
    pub(crate) fn zone_slot(&mut self, key: String) -> usize {
        if let Some(&z) = self.zone_index.get(&key) {
            return z;
        }
        let z = self.zone_keys.len();
        self.zone_index.insert(key.clone(), z);
        self.zone_keys.push(key.clone());
        self.tally.push(ZoneTally { key, ..ZoneTally::default() });
        z
    }

    pub(crate) fn index_nodes(&mut self, layout: Option<&Layout>, cluster: &Cluster) {
        if let Some(l) = layout {
            for z in &l.zones {
                self.zone_slot(format!("region-1/{z}"));
            }
        }
        let nodes: Vec<(String, String)> =
            cluster.nodes().map(|n| (n.name.clone(), ZoneKey::from_labels(&n.labels).to_string())).collect();
        for (name, zone) in nodes {
            self.track_node(&name, zone);
        }
        for p in cluster.pods() {
            if let Some(&i) = p.node.as_ref().and_then(|n| self.node_index.get(n))
                && let Some(tally) = self.tally.get_mut(self.nodes[i].zone)
            {
                tally.pods += 1;
            }
        }
        self.node_count = self.nodes.len();
        self.pod_count = cluster.pods().count();
    }

    pub(crate) fn track_node(&mut self, name: &str, zone: String) -> usize {
        if let Some(&i) = self.node_index.get(name) {
            return i;
        }
        let z = self.zone_slot(zone);
        self.tally[z].nodes += 1;
        let i = self.nodes.len();
        self.nodes.push(NodeTrack { zone: z, ..NodeTrack::default() });
        self.node_index.insert(name.to_string(), i);
        i
    }

    pub(crate) fn node_slot(&mut self, name: &str, cluster: &Cluster) -> usize {
        if let Some(&i) = self.node_index.get(name) {
            return i;
        }
        let zone = cluster.node(name).map(|n| ZoneKey::from_labels(&n.labels).to_string()).unwrap_or_default();
        self.track_node(name, zone)
    }

    pub(crate) fn note_violation(&mut self, v: String) {
        self.violation_count += 1;
        if self.violations.len() < 20 {
            tracing::warn!("{v}");
            self.violations.push(v);
        }
    }

    pub(crate) fn track_zones(&mut self, t: Timestamp, zones: &[ZoneReport]) {
        for z in zones {
            let slot = match self.zone_by_key.iter().find(|(k, _)| *k == z.key) {
                Some(&(_, slot)) => slot,
                None => {
                    let slot = self.zone_slot(z.key.to_string());
                    self.zone_by_key.push((z.key.clone(), slot));
                    slot
                }
            };
            let states = &mut self.tally[slot].states;
            if states.last().is_none_or(|&(_, s, r)| s != z.state || r != z.rate) {
                states.push((t, z.state, z.rate));
            }
        }
    }

    /// Facts only known before the write lands: the deleted pod's node.
    pub(crate) fn track_before(&mut self, t: Timestamp, action: &Action, cluster: &Cluster) {
        let ActionKind::DeletePod { pod, why, .. } = &action.kind else { return };
        let Some(p) = cluster.pod(pod).filter(|p| !p.deleted) else { return };
        let daemonset = p.daemonset;
        let Some(node) = p.node.clone() else { return };
        let i = self.node_slot(&node, cluster);
        let tally = &mut self.tally[self.nodes[i].zone];
        tally.evicted.0 += 1;
        widen(&mut tally.evicted.1, t);
        if daemonset {
            tally.daemonset_evicted += 1;
        }
        let tainted_at = cluster
            .node(&node)
            .and_then(|n| n.taints.iter().filter(|t| is_noexecute(t)).filter_map(|t| t.time_added).min());
        let allowed = match &why.verdict {
            Verdict::NotTolerated { .. } => Some(Span::ZERO),
            Verdict::TolerationExpired { seconds, .. } => Some(Span::from_secs((*seconds).max(0))),
            Verdict::EvictionTimeout { .. } => None,
        };
        // The controller's part: from the taint on the node (as the answer
        // to its write showed it) to the deletion being sent. Without API
        // latency both are the instants of the writes.
        let sent = self.deletions_sent.remove(pod.as_str()).unwrap_or(t);
        let seen = self.nodes[i].tainted.or(tainted_at);
        if let Some(at) = tainted_at {
            self.latencies.eviction.push((t - at).as_secs_f64());
        }
        if let (Some(seen), Some(allowed)) = (seen, allowed) {
            self.latencies.eviction_vs_toleration.push((sent - seen).as_secs_f64() - allowed.as_secs_f64());
        }
    }

    pub(crate) fn track_after(&mut self, t: Timestamp, action: &Action, cluster: &Cluster) {
        match &action.kind {
            ActionKind::UpdateNodeConditions { node, conditions, .. } => {
                let unknown =
                    conditions.iter().any(|c| c.kind == ConditionType::Ready && c.status == ConditionStatus::Unknown);
                if !unknown {
                    return;
                }
                let i = self.node_slot(node, cluster);
                let track = &mut self.nodes[i];
                let tally = &mut self.tally[track.zone];
                match track.down_since {
                    Some(since) if track.seen_dead.is_none() => {
                        track.seen_dead = Some(t);
                        tally.seen_dead.0 += 1;
                        widen(&mut tally.seen_dead.1, t);
                        self.latencies.detection.push((t - since).as_secs_f64());
                    }
                    Some(_) => {}
                    None => tally.false_alarms += 1,
                }
            }
            ActionKind::PatchNodeTaints { node, add, remove, .. } => {
                let i = self.node_slot(node, cluster);
                let track = &mut self.nodes[i];
                let tally = &mut self.tally[track.zone];
                if add.iter().any(is_noexecute) {
                    if track.tainted.is_none() {
                        track.tainted = Some(t);
                        tally.tainted.0 += 1;
                        widen(&mut tally.tainted.1, t);
                        if let Some(seen) = track.seen_dead {
                            self.latencies.tainting.push((t - seen).as_secs_f64());
                        }
                    }
                } else if remove.iter().any(is_noexecute) {
                    tally.untainted += 1;
                    track.tainted = None;
                }
            }
            _ => {}
        }
    }

    pub(crate) fn sample(&mut self, t: Timestamp, cluster: &Cluster) {
        let mut zones = vec![ZoneSample::default(); self.zone_keys.len()];
        // From the cluster's node table, not its nodes: a sample every few
        // seconds over every node was a search by name for each.
        for n in cluster.node_summaries() {
            let i = match self.by_row.get(n.row).copied().flatten() {
                Some(i) => i as usize,
                None => {
                    let Some(&i) = self.node_index.get(n.name) else { continue };
                    if self.by_row.len() <= n.row {
                        self.by_row.resize(n.row + 1, None);
                    }
                    self.by_row[n.row] = u32::try_from(i).ok();
                    i
                }
            };
            let Some(s) = zones.get_mut(self.nodes[i].zone) else { continue };
            match n.ready {
                Some(ConditionStatus::True) => s.ready += 1,
                Some(ConditionStatus::False) => s.not_ready += 1,
                _ => s.unknown += 1,
            }
            if n.noexecute {
                s.tainted += 1;
            }
        }
        for (s, tally) in zones.iter_mut().zip(&self.tally) {
            s.evicted = tally.evicted.0;
        }
        self.timeline.push((t, zones));
    }

    /// A fault takes nodes down or brings them back: their failure
    /// episodes start or end.
    pub(crate) fn track_fault(&mut self, t: Timestamp, fault: &Fault, cluster: &Cluster) {
        self.mark_fault(t, fault, cluster);
        for n in fault.nodes_down() {
            let i = self.node_slot(n, cluster);
            let track = &mut self.nodes[i];
            if track.down_since.is_none() {
                track.down_since = Some(t);
                track.seen_dead = None;
                track.tainted = None;
                let tally = &mut self.tally[track.zone];
                tally.failures += 1;
                widen(&mut tally.failed, t);
            }
        }
        for n in fault.nodes_up() {
            let i = self.node_slot(n, cluster);
            let track = &mut self.nodes[i];
            if track.down_since.take().is_some() {
                self.tally[track.zone].recoveries += 1;
            }
        }
    }

    /// Records `fault` in the marks of each zone it touches (every zone
    /// for one that is not about nodes). Faults before the start only
    /// shape the cluster and are not marked.
    fn mark_fault(&mut self, t: Timestamp, fault: &Fault, cluster: &Cluster) {
        if t < Timestamp::EPOCH {
            return;
        }
        let (down, up) = match fault {
            Fault::Crash(_) | Fault::Recover(_) => ("crash", "come back"),
            Fault::Partition(_) | Fault::Heal(_) => ("lose contact with the API server", "reach the API server again"),
            _ => ("kubelet stops", "kubelet starts"),
        };
        let mut touched = false;
        for (nodes, kind, verb) in [(fault.nodes_down(), MarkKind::Down, down), (fault.nodes_up(), MarkKind::Up, up)] {
            let mut per_zone: Vec<Vec<&str>> = vec![Vec::new(); self.tally.len()];
            for n in nodes {
                let i = self.node_slot(n, cluster);
                let zone = self.nodes[i].zone;
                if per_zone.len() <= zone {
                    per_zone.resize(zone + 1, Vec::new());
                }
                per_zone[zone].push(n);
            }
            for (zone, names) in per_zone.iter().enumerate().filter(|(_, names)| !names.is_empty()) {
                touched = true;
                let what = format!("{} node(s) {verb}: {}", names.len(), name_list(names));
                self.tally[zone].marks.push(FaultMark { at: t, kind, what });
            }
        }
        if touched {
            return;
        }
        let what = match fault {
            Fault::ControlPlaneDown => "the controller loses the API server".to_string(),
            Fault::ControlPlaneUp => "the controller reaches the API server again".to_string(),
            Fault::RestartController => "the controller restarts".to_string(),
            Fault::Event(e) => format!("scenario event {}", e.name()),
            // Nodes named but none tracked (an empty list): nothing to mark.
            _ => return,
        };
        for tally in &mut self.tally {
            // Several events at one instant are one mark.
            match tally.marks.last_mut() {
                Some(last) if last.at == t && last.kind == MarkKind::Cluster => {
                    last.what.push_str(", ");
                    last.what.push_str(&what);
                }
                _ => tally.marks.push(FaultMark { at: t, kind: MarkKind::Cluster, what: what.clone() }),
            }
        }
    }
}

/// Up to three names, then how many more.
fn name_list(names: &[&str]) -> String {
    let mut s = names.iter().take(3).copied().collect::<Vec<_>>().join(", ");
    if names.len() > 3 {
        s.push_str(&format!(" and {} more", names.len() - 3));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_slowest_health_passes_are_kept_slowest_first() {
        let mut costs = TickCosts::default();
        for i in 0..100u64 {
            // Slow every seventh pass; one slowest at 42.
            let nanos = if i == 42 {
                10_000
            } else if i % 7 == 0 {
                1_000 + i
            } else {
                i
            };
            let at = Timestamp::EPOCH + Span::from_secs(5 * i as i64);
            costs.note_health_pass(SlowPass { at, nanos, actions: i as usize });
        }
        let kept: Vec<u64> = costs.slowest_health.iter().map(|p| p.nanos).collect();
        assert_eq!(kept.len(), SLOWEST_KEPT);
        assert_eq!(kept[0], 10_000);
        assert!(kept.windows(2).all(|w| w[0] >= w[1]), "{kept:?}");
        assert_eq!(kept[1..].iter().filter(|&&n| n > 1_000).count(), SLOWEST_KEPT - 1, "{kept:?}");
        assert_eq!(costs.slowest_health[0].actions, 42);
    }
}
