//! The named scenarios of `nodewarden sim`, each a fault plan over a
//! generated fleet and a default duration.

use std::fmt;
use std::str::FromStr;

use nodewarden_model::{Span, Timestamp};

use crate::faults::{Fault, FaultPlan};
use crate::fleet::Layout;
use crate::rng::Rng;

/// A built-in scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// 1% of the nodes (at least one), spread over the zones, crash at 1m
    /// and stay down.
    NodeCrash,
    /// The first zone loses contact with the API server at 1m and gets it
    /// back at 50m.
    ZoneOutage,
    /// 60% of the first zone's nodes crash at 1m (more than the 55%
    /// unhealthy-zone threshold): the zone slows to the secondary rate, or
    /// stops when it is small.
    PartialZone,
    /// 2% of the nodes (at least one) go down for 90 s and come back for
    /// 90 s, over and over.
    Flapping,
    /// The controller cannot reach the API server from 1m to 11m; the
    /// kubelets keep running.
    ControlPlaneOutage,
    /// The first zone goes down at 1m and the controller restarts at 6m,
    /// while nodes are being tainted and pods wait for their tolerations.
    ControllerRestart,
    /// One node after another (5%, at most 40), every 30 s across the
    /// zones, goes down for 8 minutes and comes back.
    RollingFailure,
    /// A full cluster (every node's CPU nearly taken by ordinary pods,
    /// some under budgets, some with long grace periods, some bare) loses
    /// the node that runs its DNS and metrics addons at 1m; their
    /// replacements fit nowhere until the rescheduler (turned on by this
    /// scenario) makes room. See `addons.rs`.
    CriticalAddon,
}

/// A scenario name that is not built in.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown scenario {name:?}: the built-in scenarios are {}; or give a scenario file", Builtin::names().join(", "))]
pub struct UnknownScenario {
    /// The name given.
    pub name: String,
}

impl Builtin {
    /// Every built-in scenario, in the order they are listed.
    pub const ALL: [Builtin; 8] = [
        Builtin::NodeCrash,
        Builtin::ZoneOutage,
        Builtin::PartialZone,
        Builtin::Flapping,
        Builtin::ControlPlaneOutage,
        Builtin::ControllerRestart,
        Builtin::RollingFailure,
        Builtin::CriticalAddon,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::NodeCrash => "node-crash",
            Builtin::ZoneOutage => "zone-outage",
            Builtin::PartialZone => "partial-zone",
            Builtin::Flapping => "flapping",
            Builtin::ControlPlaneOutage => "control-plane-outage",
            Builtin::ControllerRestart => "controller-restart",
            Builtin::RollingFailure => "rolling-failure",
            Builtin::CriticalAddon => "critical-addon",
        }
    }

    /// Every name, in order.
    pub fn names() -> Vec<&'static str> {
        Builtin::ALL.iter().map(|b| b.name()).collect()
    }

    /// One line on what it does.
    pub fn describe(self) -> &'static str {
        match self {
            Builtin::NodeCrash => "1% of the nodes crash at 1m and stay down",
            Builtin::ZoneOutage => "the first zone loses contact with the API server at 1m and gets it back at 50m",
            Builtin::PartialZone => "60% of the first zone's nodes crash at 1m (above the unhealthy-zone threshold)",
            Builtin::Flapping => "2% of the nodes go down for 90s and come back for 90s, again and again",
            Builtin::ControlPlaneOutage => {
                "the controller cannot reach the API server from 1m to 11m; kubelets keep running"
            }
            Builtin::ControllerRestart => "the first zone goes down at 1m; the controller restarts at 6m",
            Builtin::RollingFailure => "one node after another goes down for 8m, every 30s, across the zones",
            Builtin::CriticalAddon => {
                "a full cluster loses the node running its DNS and metrics addons at 1m; the rescheduler makes room"
            }
        }
    }

    /// How long it runs unless told otherwise.
    pub fn default_duration(self, layout: &Layout) -> Span {
        match self {
            Builtin::NodeCrash => Span::from_secs(15 * 60),
            Builtin::ZoneOutage => Span::from_secs(3600),
            Builtin::PartialZone => Span::from_secs(30 * 60),
            Builtin::Flapping => Span::from_secs(20 * 60),
            Builtin::ControlPlaneOutage => Span::from_secs(20 * 60),
            Builtin::ControllerRestart => Span::from_secs(15 * 60),
            Builtin::RollingFailure => {
                let n = rolling_count(layout.nodes.len()) as i64;
                Span::from_secs(60 + 30 * n + 8 * 60 + 120)
            }
            Builtin::CriticalAddon => Span::from_secs(15 * 60),
        }
    }

    /// The fault plan over `layout`; `seed` picks nodes where a choice is
    /// made.
    pub fn plan(self, layout: &Layout, seed: u64) -> FaultPlan {
        let mut plan = FaultPlan::new();
        let n = layout.nodes.len();
        let first_zone = || (layout.zones.first().cloned().unwrap_or_default(), layout.nodes_in(0));
        match self {
            Builtin::NodeCrash => {
                let nodes = spread(layout, (n / 100).max(1));
                let what = format!("{} node(s) crash: {}", nodes.len(), list(&nodes));
                plan.add(Timestamp::from_secs(60), Fault::Crash(nodes), what);
            }
            Builtin::ZoneOutage => {
                let (zone, nodes) = first_zone();
                let k = nodes.len();
                plan.add(
                    Timestamp::from_secs(60),
                    Fault::Partition(nodes.clone()),
                    format!("{zone} ({k} nodes) loses contact with the API server"),
                );
                plan.add(
                    Timestamp::from_secs(50 * 60),
                    Fault::Heal(nodes),
                    format!("{zone} reaches the API server again"),
                );
            }
            Builtin::PartialZone => {
                let (zone, nodes) = first_zone();
                let k = (nodes.len() * 6).div_ceil(10);
                let mut rng = Rng::stream(seed, 10);
                let mut picked = nodes.clone();
                shuffle(&mut picked, &mut rng);
                picked.truncate(k);
                picked.sort();
                plan.add(
                    Timestamp::from_secs(60),
                    Fault::Crash(picked),
                    format!("{k} of the {} nodes of {zone} crash", nodes.len()),
                );
            }
            Builtin::Flapping => {
                let nodes = spread(layout, (n / 50).max(1));
                let what = format!("{} node(s) start flapping (90s down, 90s up): {}", nodes.len(), list(&nodes));
                let mut first = true;
                let mut t = 60;
                while t + 180 <= 20 * 60 {
                    let down = if first { what.clone() } else { String::new() };
                    plan.add(Timestamp::from_secs(t), Fault::Crash(nodes.clone()), down);
                    plan.add(Timestamp::from_secs(t + 90), Fault::Recover(nodes.clone()), "");
                    first = false;
                    t += 180;
                }
            }
            Builtin::ControlPlaneOutage => {
                plan.add(Timestamp::from_secs(60), Fault::ControlPlaneDown, "the controller loses the API server");
                plan.add(
                    Timestamp::from_secs(11 * 60),
                    Fault::ControlPlaneUp,
                    "the controller reaches the API server again and relists",
                );
            }
            Builtin::ControllerRestart => {
                let (zone, nodes) = first_zone();
                let k = nodes.len();
                plan.add(
                    Timestamp::from_secs(60),
                    Fault::Partition(nodes),
                    format!("{zone} ({k} nodes) loses contact with the API server"),
                );
                plan.add(
                    Timestamp::from_secs(6 * 60),
                    Fault::RestartController,
                    "the controller restarts (rebuilt from the cluster alone)",
                );
            }
            Builtin::RollingFailure => {
                let nodes = interleave(layout, spread(layout, rolling_count(n)));
                for (i, node) in nodes.iter().enumerate() {
                    let t = 60 + 30 * i as i64;
                    let what = if i == 0 {
                        format!("{} nodes go down one after another, every 30s, each for 8m", nodes.len())
                    } else {
                        String::new()
                    };
                    plan.add(Timestamp::from_secs(t), Fault::Crash(vec![node.clone()]), what);
                    plan.add(Timestamp::from_secs(t + 8 * 60), Fault::Recover(vec![node.clone()]), "");
                }
            }
            Builtin::CriticalAddon => {
                if let Some(node) = layout.nodes.first() {
                    plan.add(
                        Timestamp::from_secs(60),
                        Fault::Crash(vec![node.clone()]),
                        format!("{node}, which runs the critical addons, crashes"),
                    );
                }
            }
        }
        plan
    }
}

impl fmt::Display for Builtin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Builtin {
    type Err = UnknownScenario;
    fn from_str(s: &str) -> Result<Builtin, UnknownScenario> {
        Builtin::ALL.into_iter().find(|b| b.name() == s).ok_or_else(|| UnknownScenario { name: s.to_string() })
    }
}

fn rolling_count(nodes: usize) -> usize {
    (nodes / 20).clamp(1.min(nodes), 40)
}

/// `k` nodes evenly spaced over the cluster; zones are contiguous blocks,
/// so the failures spread evenly over them too.
fn spread(layout: &Layout, k: usize) -> Vec<String> {
    let n = layout.nodes.len();
    let k = k.min(n);
    (0..k).filter_map(|i| layout.nodes.get(i * n / k + n / (2 * k)).cloned()).collect()
}

/// The same nodes, reordered to take one from each zone in turn.
fn interleave(layout: &Layout, nodes: Vec<String>) -> Vec<String> {
    let mut by_zone: Vec<Vec<String>> = vec![Vec::new(); layout.zones.len().max(1)];
    for node in nodes {
        let z = layout.nodes.iter().position(|x| *x == node).map_or(0, |i| layout.zone_of[i]);
        by_zone[z].push(node);
    }
    let longest = by_zone.iter().map(Vec::len).max().unwrap_or(0);
    (0..longest).flat_map(|i| by_zone.iter().filter_map(move |z| z.get(i).cloned())).collect()
}

fn shuffle(v: &mut [String], rng: &mut Rng) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

/// The first few names, then how many more.
fn list(nodes: &[String]) -> String {
    let shown: Vec<&str> = nodes.iter().take(4).map(String::as_str).collect();
    match nodes.len().saturating_sub(4) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(n: usize, z: usize) -> Layout {
        Layout {
            zones: (0..z).map(crate::fleet::zone_name).collect(),
            nodes: (0..n).map(|i| format!("node-{i:06}")).collect(),
            zone_of: (0..n).map(|i| i * z / n).collect(),
        }
    }

    #[test]
    fn names_round_trip_and_unknown_lists_them() {
        for b in Builtin::ALL {
            assert_eq!(b.name().parse::<Builtin>(), Ok(b));
        }
        let e = "zone-outages".parse::<Builtin>().unwrap_err().to_string();
        assert!(e.contains("zone-outage, partial-zone"), "{e}");
    }

    #[test]
    fn spread_takes_distinct_nodes_from_every_zone() {
        let l = layout(100, 3);
        let s = spread(&l, 6);
        assert_eq!(s.len(), 6);
        let zones: std::collections::BTreeSet<usize> =
            s.iter().map(|n| l.zone_of[l.nodes.iter().position(|x| x == n).unwrap_or(0)]).collect();
        assert_eq!(zones.len(), 3);
        assert_eq!(spread(&l, 500).len(), 100);
    }

    #[test]
    fn every_plan_is_within_its_duration() {
        let l = layout(60, 3);
        for b in Builtin::ALL {
            let plan = b.plan(&l, 1);
            assert!(!plan.faults().is_empty(), "{b}");
            assert!(plan.last().unwrap_or(Timestamp::MAX) < Timestamp::EPOCH + b.default_duration(&l), "{b}");
        }
    }
}
