//! What a simulation starts from, for each [`Source`](super::Source): a
//! generated fleet with a built-in scenario's fault plan, a scenario file's
//! cluster and events, or a cluster prepared by the caller (what-if).
//!
//! Invariant: every source is checked (fleet size, the file, the controller
//! configuration) before anything is built, so a bad input is an error and
//! never a half-built world.

use nodewarden_cluster::addons;
use nodewarden_cluster::admission::AdmissionDefaults;
use nodewarden_cluster::builtin::Builtin;
use nodewarden_cluster::cluster::Cluster;
use nodewarden_cluster::faults::{Fault, FaultPlan};
use nodewarden_cluster::fleet::{self, FleetSpec, LEASE_JITTER};
use nodewarden_cluster::kubelet::{KubeletTiming, Kubelets};
use nodewarden_cluster::scenario::{EventAction, Scenario};
use nodewarden_model::{ControllerConfig, Span, Timestamp};

use super::SimError;
use crate::prepared::Prepared;

/// The world a simulation runs, before the controller starts.
pub(super) struct World {
    /// The scenario's name, for the report.
    pub(super) name: String,
    /// One line on what it does.
    pub(super) description: String,
    /// The controller's configuration.
    pub(super) config: ControllerConfig,
    /// The admission defaults of the cluster.
    pub(super) admission: AdmissionDefaults,
    /// The kubelets' periods.
    pub(super) timing: KubeletTiming,
    /// The cluster at t=0.
    pub(super) cluster: Cluster,
    /// Its kubelets.
    pub(super) kubelets: Kubelets,
    /// What goes wrong, when.
    pub(super) plan: FaultPlan,
    /// Where each node of a generated fleet is (`None` for other sources).
    pub(super) layout: Option<fleet::Layout>,
    /// The last instant simulated.
    pub(super) end: Timestamp,
}

impl World {
    /// A generated fleet and a built-in scenario's faults. The
    /// critical-addon scenario is about the rescheduler, so it runs it, with
    /// the cluster's scheduler.
    pub(super) fn builtin(
        builtin: Builtin,
        fleet: FleetSpec,
        mut config: ControllerConfig,
        seed: u64,
        duration: Option<Span>,
    ) -> Result<World, SimError> {
        if fleet.nodes == 0 {
            return Err(SimError::Fleet("--nodes must be at least 1".into()));
        }
        if fleet.zones == 0 || fleet.zones > fleet.nodes {
            return Err(SimError::Fleet(format!(
                "--zones must be between 1 and the number of nodes ({}), got {}",
                fleet.nodes, fleet.zones
            )));
        }
        config.validate()?;
        let admission = AdmissionDefaults::default();
        let timing = KubeletTiming::default();
        let mut cluster = Cluster::new(admission);
        let mut kubelets = Kubelets::new(timing).with_jitter(LEASE_JITTER, seed);
        let fleet = FleetSpec { seed, ..fleet };
        let layout = if builtin == Builtin::CriticalAddon {
            config.enable_rescheduler = true;
            cluster = cluster.with_scheduling(true, true);
            addons::build(&fleet, &timing, &mut cluster, &mut kubelets)
        } else {
            fleet::build(&fleet, &timing, &mut cluster, &mut kubelets)
        };
        let plan = builtin.plan(&layout, seed);
        let duration = duration.unwrap_or_else(|| builtin.default_duration(&layout));
        Ok(World {
            name: builtin.name().to_string(),
            description: builtin.describe().to_string(),
            config,
            admission,
            timing,
            cluster,
            kubelets,
            plan,
            layout: Some(layout),
            end: Timestamp::EPOCH + duration,
        })
    }

    /// A scenario file's cluster, with its events as the fault plan (a
    /// controller restart is the simulation's own fault; kubelet stops and
    /// starts are named in the report).
    pub(super) fn file(scenario: &Scenario, duration: Option<Span>) -> Result<World, SimError> {
        nodewarden_cluster::validate::validate(scenario)?;
        scenario.config.validate()?;
        let (cluster, kubelets) = Cluster::from_scenario(scenario);
        let mut plan = FaultPlan::new();
        for e in &scenario.events {
            let what = match &e.action {
                EventAction::RestartController => "the controller restarts".to_string(),
                EventAction::KubeletStop(n) => format!("kubelet-stop {}", n.join(", ")),
                EventAction::KubeletStart(n) => format!("kubelet-start {}", n.join(", ")),
                _ => String::new(),
            };
            let fault = match &e.action {
                EventAction::RestartController => Fault::RestartController,
                other => Fault::Event(other.clone()),
            };
            plan.add(Timestamp::EPOCH + e.at, fault, what);
        }
        let end = duration.map_or_else(|| scenario.end(), |d| Timestamp::EPOCH + d);
        Ok(World {
            name: scenario.name.clone().unwrap_or_else(|| "scenario file".to_string()),
            description: "a scenario file's cluster and events".to_string(),
            config: scenario.config.clone(),
            admission: AdmissionDefaults::from(&scenario.cluster),
            timing: KubeletTiming::from(&scenario.cluster.kubelet),
            cluster,
            kubelets,
            plan,
            layout: None,
            end,
        })
    }

    /// A cluster the caller prepared (what-if), run with `config`.
    pub(super) fn prepared(p: Prepared, config: ControllerConfig, duration: Option<Span>) -> Result<World, SimError> {
        config.validate()?;
        let end = Timestamp::EPOCH + duration.unwrap_or(p.duration);
        Ok(World {
            name: p.name,
            description: p.description,
            config,
            admission: p.admission,
            timing: p.timing,
            cluster: p.cluster,
            kubelets: p.kubelets,
            plan: p.plan,
            layout: None,
            end,
        })
    }
}
