//! The served cluster in motion: one task that, each tick of the wall
//! clock, plays the scenario's and the API's fault plans, runs the
//! simulated kubelets, ends graceful deletions, recreates owned pods,
//! runs the scheduler and the disruption controller (each second), and
//! steps the in-process controller.
//!
//! Invariant: it acts on the cluster only through the store and the
//! [`ServedCluster`]'s faults, as the controllers and kubelets of a real
//! cluster act through its API; a frozen API (an injected fault) freezes
//! all of it, and nothing moves before the scenario's start.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nodewarden_cluster::rules::node as node_rules;
use nodewarden_cluster::served::{node_from_spec, pod_from_spec};
use nodewarden_cluster::{EventAction, Kubelets};
use nodewarden_cluster::{Fault, FaultPlan};
use nodewarden_controller::Controller;
use nodewarden_engine::Observation;
use nodewarden_model::{ConfigError, ControllerConfig, Span, Timestamp, wall};
use serde_json::{Value, json};
use tracing::{info, warn};

use crate::cluster::ServedCluster;
use crate::faults::{ApiFault, PlannedApiFault};
use crate::kubelets::StoreKubelets;
use crate::populate::{Populated, store_added_pod, store_budget};
use crate::recreate::Recreator;
use crate::resource::Kind;
use crate::served_api::{self, Delivered, Reader, ServedApi};
use crate::store::{Inner, NODE_READY, key_of};
use nodewarden_objects::NODE_LEASE_NAMESPACE;
use nodewarden_objects::write as convert;

/// A one-line status of the running cluster, for `nodewarden sim
/// --serve`'s terminal: enough to see the fault plan bite without a
/// client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusLine {
    /// Seconds since start.
    pub uptime_secs: u64,
    /// Nodes stored.
    pub nodes: usize,
    /// Nodes whose Ready is not True.
    pub not_ready: usize,
    /// Pods stored.
    pub pods: usize,
    /// The store's resourceVersion.
    pub resource_version: u64,
    /// What the fault plans did last.
    pub last_fault: String,
}

impl std::fmt::Display for StatusLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "up {}s  nodes {} ({} not ready)  pods {}  rv {}{}",
            self.uptime_secs,
            self.nodes,
            self.not_ready,
            self.pods,
            self.resource_version,
            if self.last_fault.is_empty() { String::new() } else { format!("  last fault: {}", self.last_fault) }
        )
    }
}

/// Plays the cluster out on the wall clock: kubelets, the scenario's and
/// the API's fault plans, graceful deletions, pod recreation, the
/// scheduler, the disruption controller, and the in-process controller.
pub struct Driver {
    cluster: Arc<ServedCluster>,
    kubelets: Kubelets,
    plan: FaultPlan,
    next_fault: usize,
    api_faults: Vec<PlannedApiFault>,
    next_api_fault: usize,
    speed: f64,
    lease_duration: i64,
    started: Instant,
    status: Arc<Mutex<StatusLine>>,
    controller: Option<Controller>,
    /// How the controller reads the store (its configuration's choice).
    reader: Reader,
    /// See [`crate::populate::Populated::tracks_scheduling`].
    tracks_scheduling: bool,
    watches: Option<served_api::Feeds>,
    /// The controller's time at its last step (Unix time).
    stepped: Option<Timestamp>,
    tick: Duration,
    scheduler: bool,
    /// Replaces the owned pods deleted, when the cluster keeps scheduling
    /// facts.
    recreator: Option<Recreator>,
}

/// How the driver plays the cluster out, from the serving options.
pub struct DriverSettings {
    /// API faults to play out, on the process's clock.
    pub api_faults: Vec<PlannedApiFault>,
    /// How many times faster than real time the scenario's timeline runs.
    pub scenario_speed: f64,
    /// `leaseDurationSeconds` of the Leases the kubelets create.
    pub lease_duration: i64,
    /// How often it is driven.
    pub tick: Duration,
    /// Whether the served scheduler runs.
    pub scheduler: bool,
}

/// The in-process controller (`--controller`) and how it reads the store,
/// having observed the cluster as it is now; `critical_addon` turns the
/// rescheduler on, as `nodewarden sim` does for that scenario.
pub fn in_process_controller(
    config: &ControllerConfig,
    critical_addon: bool,
    cluster: &ServedCluster,
) -> Result<(Controller, Reader), ConfigError> {
    let mut config = config.clone();
    if critical_addon {
        // The scenario is about the rescheduler, as in
        // `nodewarden sim`: it runs.
        config.enable_rescheduler = true;
    }
    let reader = Reader::for_config(&config);
    // The controller's clock is Unix time, as `nodewarden run`'s.
    let now = cluster.time.unix_timestamp(cluster.time.now());
    let mut c = Controller::new(config, now)?;
    for o in reader.state(cluster, now) {
        c.observe(now, o);
    }
    Ok((c, reader))
}

impl Driver {
    /// A driver of `cluster` as `populated` it, publishing to `status`;
    /// it starts counting its uptime and following pod deletions (to
    /// recreate owned pods) now.
    pub fn new(
        cluster: Arc<ServedCluster>,
        populated: Populated,
        settings: DriverSettings,
        controller: Option<(Controller, Reader)>,
        status: Arc<Mutex<StatusLine>>,
    ) -> Driver {
        let Populated { kubelets, plan, tracks_scheduling, .. } = populated;
        let speed = settings.scenario_speed;
        let (controller, reader) = match controller {
            Some((c, r)) => (Some(c), r),
            None => (None, Reader::default()),
        };
        let started = Instant::now();
        // Workload controllers recreate the pods they own whenever the
        // cluster is about scheduling, as the simulator's do.
        let recreator = (tracks_scheduling || settings.scheduler).then(|| Recreator::subscribe(&cluster));
        Driver {
            cluster,
            kubelets,
            plan,
            next_fault: 0,
            api_faults: settings.api_faults,
            next_api_fault: 0,
            speed: if speed.is_finite() && speed > 0.0 { speed } else { 1.0 },
            lease_duration: settings.lease_duration,
            started,
            status,
            controller,
            reader,
            tracks_scheduling,
            watches: None,
            stepped: None,
            tick: settings.tick,
            scheduler: settings.scheduler,
            recreator,
        }
    }

    /// Drives the cluster until the task is dropped.
    pub async fn run(mut self) {
        // The tick is on the process's clock (`wall`): kubelets and the
        // scenario's events keep their grain when time is compressed.
        let mut tick = tokio::time::interval(wall::real(self.tick).max(Duration::from_millis(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_pdb = Instant::now();
        let mut last_status = Instant::now() - Duration::from_secs(10);
        if self.controller.is_some() {
            self.watches = Some(served_api::Feeds::subscribe(&self.cluster, self.reader));
        }
        loop {
            tick.tick().await;
            // Frozen: kubelets, scenario and faults wait with the server.
            if self.cluster.faults.frozen() {
                continue;
            }
            let now = self.cluster.time.now();
            if now < Timestamp::EPOCH {
                // The scenario has not begun (`zero_unix_nanos`): the
                // cluster is served as the file starts it, and nothing in
                // it moves yet (no scheduler, no kubelet, no fault).
                continue;
            }
            let pdb_due = wall::since(last_pdb) >= Duration::from_secs(1);
            if pdb_due {
                last_pdb = Instant::now();
            }
            self.advance(now, pdb_due);
            if last_status.elapsed() >= Duration::from_secs(1) {
                self.update_status();
                last_status = Instant::now();
            }
        }
    }

    /// One step of the cluster at `now`: the fault plans, graceful
    /// deletions, the kubelets, pod recreation, the scheduler and the
    /// disruption controller (when `pdb_due`), and the controller.
    fn advance(&mut self, now: Timestamp, pdb_due: bool) {
        self.play_faults(now);
        self.cluster.end_graceful(now);
        {
            let mut s = self.cluster.store.lock();
            let mut api = StoreKubelets { s: &mut s, time: self.cluster.time, lease_duration: self.lease_duration };
            self.kubelets.run_until(now, &mut api);
        }
        if let Some(r) = &mut self.recreator {
            r.pass(&self.cluster, now);
        }
        if pdb_due {
            if self.scheduler {
                crate::scheduler::pass(&self.cluster);
            }
            crate::pdb::refresh(&self.cluster);
        }
        self.step_controller(now);
    }

    fn update_status(&self) {
        let s = self.cluster.store.lock();
        let nodes = s.snapshot(Kind::Node);
        let not_ready = nodes.iter_from("", None).filter(|n| n.field(NODE_READY).as_deref() != Some("True")).count();
        let mut st = self.status.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        st.uptime_secs = self.started.elapsed().as_secs();
        st.nodes = nodes.len();
        st.not_ready = not_ready;
        st.pods = s.count(Kind::Pod);
        st.resource_version = s.rv();
    }

    fn note(&self, what: String) {
        info!("{what}");
        self.status.lock().unwrap_or_else(std::sync::PoisonError::into_inner).last_fault = what;
    }

    fn play_faults(&mut self, now: Timestamp) {
        let elapsed = wall::since(self.started);
        while let Some(f) = self.api_faults.get(self.next_api_fault).cloned() {
            if f.at > elapsed {
                break;
            }
            // Its duration is on the process's clock, as its start is.
            self.cluster.faults.inject(f.fault.clone(), f.lasts.map(wall::real));
            self.note(format!(
                "{}{}",
                f.fault,
                f.lasts.map_or(String::new(), |d| format!(" for {}s", d.as_secs_f64()))
            ));
            self.next_api_fault += 1;
        }
        let scaled = Timestamp::EPOCH
            + Span::from_secs_f64((now - Timestamp::EPOCH).as_secs_f64() * self.speed).unwrap_or(Span::ZERO);
        while let Some(f) = self.plan.faults().get(self.next_fault).cloned() {
            if f.at > scaled {
                break;
            }
            self.next_fault += 1;
            if !f.what.is_empty() {
                self.note(f.what.clone());
            }
            self.apply_fault(now, &f.fault);
        }
    }

    fn apply_fault(&mut self, now: Timestamp, fault: &Fault) {
        let sh = self.cluster.clone();
        match fault {
            Fault::Crash(nodes) => nodes.iter().for_each(|n| self.kubelets.stop(n)),
            Fault::Partition(nodes) => nodes.iter().for_each(|n| self.kubelets.set_partitioned(n, true)),
            Fault::Heal(nodes) => nodes.iter().for_each(|n| self.kubelets.set_partitioned(n, false)),
            Fault::Recover(nodes) => {
                let mut s = sh.store.lock();
                let mut api = StoreKubelets { s: &mut s, time: sh.time, lease_duration: self.lease_duration };
                for n in nodes {
                    self.kubelets.start(n, now, &mut api);
                }
            }
            Fault::ControlPlaneDown => sh.faults.inject(ApiFault::Outage, None),
            Fault::ControlPlaneUp => sh.faults.clear(),
            Fault::RestartController => {
                if let Some(c) = &mut self.controller {
                    let now = sh.time.unix_timestamp(now);
                    if let Err(e) = c.restart(now) {
                        warn!(error = %e, "controller restart failed");
                    }
                    for o in self.reader.state(&sh, now) {
                        c.observe(now, o);
                    }
                }
            }
            Fault::Event(action) => self.apply_event(now, action),
        }
    }

    /// A scenario file's event, so that it means here exactly what it
    /// means in replay: written to the stored objects directly, with the
    /// simulator's rules where it has them (pods, budgets, allocatable,
    /// the scheduler's verdicts and binds, a node's own fields, added
    /// nodes and pods, kubelets).
    fn apply_event(&mut self, now: Timestamp, action: &EventAction) {
        let sh = self.cluster.clone();
        let mut s = sh.store.lock();
        let budgets_changed = match self.write_pod_event(&sh, &mut s, now, action) {
            Some(()) => false,
            None => match self.write_event(&sh, &mut s, now, action) {
                Some(changed) => changed,
                None => {
                    self.simulate_event(&sh, &mut s, now, action);
                    false
                }
            },
        };
        drop(s);
        if budgets_changed {
            // The disruption controller publishes the new budget's status
            // at once, as the simulator's does.
            crate::pdb::refresh(&sh);
        }
    }

    /// The events on a pod that are written to the stored pod directly;
    /// `None` for any other event.
    fn write_pod_event(
        &mut self,
        sh: &ServedCluster,
        s: &mut Inner,
        now: Timestamp,
        action: &EventAction,
    ) -> Option<()> {
        let time = sh.time;
        match action {
            EventAction::DeletePod(key) => match s.get(Kind::Pod, key) {
                Some(p) => {
                    s.commit(Kind::Pod, key, p.value(), true);
                }
                None => warn!(pod = %key, "delete-pod: no such pod now"),
            },
            EventAction::SetTolerations(a) => {
                if let Some(p) = s.get(Kind::Pod, &a.pod) {
                    let mut v = p.value();
                    v["spec"]["tolerations"] =
                        json!(a.tolerations.iter().map(convert::toleration_json).collect::<Vec<_>>());
                    s.commit(Kind::Pod, &a.pod, v, false);
                }
            }
            // As the scheduler's bind: the node, PodScheduled=True, and the
            // kubelet of a Ready node starts the pod.
            EventAction::BindPod(a) => match s.get(Kind::Pod, &a.pod) {
                Some(p) => {
                    let mut v = p.value();
                    crate::binding::assign(s, sh, &mut v, &a.node, now);
                    s.commit(Kind::Pod, &a.pod, v, false);
                }
                None => warn!(pod = %a.pod, "bind-pod: no such pod now"),
            },
            EventAction::AddPod(spec) => {
                // At the event's time (`unschedulable-since: now`), and with
                // what the file says of its scheduling, as the simulated
                // cluster creates it (the store gives it its own uid).
                let pod = pod_from_spec(spec, now, &sh.admission, self.tracks_scheduling, false, String::new());
                if spec.refuse_deletions > 0 {
                    sh.refuse_deletions([(spec.name.clone(), spec.refuse_deletions)]);
                }
                store_added_pod(s, &time, &pod, now);
            }
            // The scheduler's verdict, as the served scheduler writes it.
            EventAction::MarkUnschedulable(a) => match s.get(Kind::Pod, &a.pod) {
                Some(p) => {
                    let mut v = p.value();
                    let bound = v.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
                    let terminating = v.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null());
                    if bound || terminating {
                        warn!(pod = %a.pod, "mark-unschedulable: the pod is bound or terminating; ignored");
                    } else if crate::scheduler::mark_unschedulable(
                        &mut v,
                        "0/0 nodes are available (a scenario's mark-unschedulable)",
                        &time.time(now),
                    ) {
                        s.commit(Kind::Pod, &a.pod, v, false);
                    }
                }
                None => warn!(pod = %a.pod, "mark-unschedulable: no such pod now"),
            },
            _ => return None,
        }
        Some(())
    }

    /// The other events written to the stored objects directly (nodes,
    /// kubelets, budgets); `Some(true)` when a budget changed, `None` for
    /// an event the simulator applies.
    fn write_event(&mut self, sh: &ServedCluster, s: &mut Inner, now: Timestamp, action: &EventAction) -> Option<bool> {
        let time = sh.time;
        match action {
            EventAction::DeleteNode(n) => {
                self.kubelets.stop(n);
                for (kind, key) in [(Kind::Node, n.clone()), (Kind::Lease, key_of(NODE_LEASE_NAMESPACE, n))] {
                    if let Some(o) = s.get(kind, &key) {
                        s.commit(kind, &key, o.value(), true);
                    }
                }
            }
            EventAction::KubeletStart(nodes) => {
                let mut api = StoreKubelets { s, time, lease_duration: self.lease_duration };
                for n in nodes {
                    self.kubelets.start(n, now, &mut api);
                }
            }
            EventAction::AddBudget(spec) => {
                store_budget(s, &time, spec);
                return Some(true);
            }
            EventAction::DeleteBudget(key) => match s.get(Kind::PodDisruptionBudget, key) {
                Some(b) => {
                    s.commit(Kind::PodDisruptionBudget, key, b.value(), true);
                }
                None => warn!(budget = %key, "delete-budget: no such budget now"),
            },
            // A served node always reports an allocatable (a real one
            // does), so the change is served whatever the file runs.
            EventAction::SetAllocatable(a) => match s.get(Kind::Node, &a.node) {
                Some(n) => {
                    let mut v = n.value();
                    let resources = convert::resources_json(Some(a.allocatable.resources()));
                    v["status"]["allocatable"] = resources.clone();
                    v["status"]["capacity"] = resources;
                    s.commit(Kind::Node, &a.node, v, false);
                }
                None => warn!(node = %a.node, "set-allocatable: no such node now"),
            },
            _ => return None,
        }
        Some(false)
    }

    /// The other events. One on a node's own fields is applied to the
    /// stored node by the rule the simulated cluster applies too
    /// (`rules::node::apply_node_event`); an added node is built as the
    /// simulated cluster builds it (`node_from_spec`); Lease renewals are
    /// written as the kubelet writes them; kubelets start and stop as in
    /// replay, writing to the store.
    fn simulate_event(&mut self, sh: &ServedCluster, s: &mut Inner, now: Timestamp, action: &EventAction) {
        let time = sh.time;
        let obs = match action {
            _ if node_rules::event_node(action).is_some() => self.node_event(sh, s, now, action),
            EventAction::SetLease(a) => {
                vec![Observation::LeaseUpserted { node: a.node.clone(), renew: Some(a.renew.resolve(now)) }]
            }
            EventAction::RenewLease(nodes) => {
                nodes.iter().map(|n| Observation::LeaseUpserted { node: n.clone(), renew: Some(now) }).collect()
            }
            EventAction::AddNode(spec) => {
                let (mut node, lease) = node_from_spec(spec, now);
                if self.tracks_scheduling {
                    node.allocatable = Some(spec.allocatable_resources());
                }
                served_api::write_observation(s, &time, self.lease_duration, Observation::NodeUpserted(node));
                if let Some(renew) = lease {
                    let renewal = Observation::LeaseUpserted { node: spec.name.clone(), renew: Some(renew) };
                    served_api::write_observation(s, &time, self.lease_duration, renewal);
                }
                if spec.kubelet {
                    let mut api = StoreKubelets { s, time, lease_duration: self.lease_duration };
                    self.kubelets.start(&spec.name, now, &mut api);
                }
                Vec::new()
            }
            EventAction::KubeletStop(nodes) => {
                for n in nodes {
                    self.kubelets.stop(n);
                }
                Vec::new()
            }
            // The driver restarts its controller itself (`Fault::RestartController`).
            EventAction::RestartController => Vec::new(),
            // Written directly by `write_pod_event` and `write_event`, which
            // `apply_event` asks first; listed so that a new event kind
            // must be placed somewhere.
            EventAction::DeletePod(_)
            | EventAction::SetTolerations(_)
            | EventAction::BindPod(_)
            | EventAction::AddPod(_)
            | EventAction::MarkUnschedulable(_)
            | EventAction::DeleteNode(_)
            | EventAction::KubeletStart(_)
            | EventAction::AddBudget(_)
            | EventAction::DeleteBudget(_)
            | EventAction::SetAllocatable(_)
            | EventAction::SetReady(_)
            | EventAction::SetCondition(_)
            | EventAction::RemoveCondition(_)
            | EventAction::SetTaints(_)
            | EventAction::SetUnschedulable(_)
            | EventAction::SetLabels(_) => {
                warn!(
                    event = action.name(),
                    "an event the served cluster writes elsewhere reached the fallback; ignored"
                );
                Vec::new()
            }
        };
        for o in obs {
            served_api::write_observation(s, &time, self.lease_duration, o);
        }
    }

    /// An event on a node's own fields, applied to the stored node by the
    /// simulated cluster's rule; the node as it is then, if it changed.
    fn node_event(&self, sh: &ServedCluster, s: &Inner, now: Timestamp, action: &EventAction) -> Vec<Observation> {
        let Some(name) = node_rules::event_node(action) else { return Vec::new() };
        let reader = nodewarden_objects::Reader::new(nodewarden_objects::Detail::Lifecycle).on(sh.time);
        match s.get(Kind::Node, name).and_then(|o| reader.node(&o.value(), now)) {
            Some(mut node) => {
                let before = node.clone();
                node_rules::apply_node_event(&mut node, action, now);
                if node == before { Vec::new() } else { vec![Observation::NodeUpserted(node)] }
            }
            None => {
                warn!(node = name, "{}: no such node now; ignored", action.name());
                Vec::new()
            }
        }
    }

    fn step_controller(&mut self, now: Timestamp) {
        let Some(controller) = &mut self.controller else { return };
        let sh = self.cluster.clone();
        let now = sh.time.unix_timestamp(now);
        // Work that fell due since the last step (a monitor pass on its
        // grid) is decided as of its own instant, on what the controller
        // had taken in by then, before this step's changes: as `nodewarden
        // run`'s engine thread decides a pass its wake is late for
        // (`nodewarden_controller::late_pass`, shared). Decided at the step's time, a pass took the tick's
        // lateness (how long after the tick the driver read the clock) for
        // time. A probe time is a pass's time and the grace a whole number
        // of periods, so a silent node's grace ends exactly at a pass: it
        // was overdue there (`now > probe + grace`) whenever that tick read
        // the clock a few microseconds later than the probe's tick had, and
        // written Unknown a period before the next pass, the one the grid
        // (and `run`) finds it overdue at. In a zone outage, a third of the
        // zone went Unknown a period before a `run --dry-run` beside it
        // judged the nodes silent.
        let stepped = self.stepped.unwrap_or(Timestamp::MIN);
        if let Some(due) = nodewarden_controller::late_pass(now, controller.next_due(), stepped) {
            let mut api = ServedApi { cluster: &sh, reader: self.reader };
            controller.step(due, &mut api, &mut |_| {});
        }
        self.stepped = Some(now);
        let outage = sh.faults.outage();
        if let Some(feeds) = &mut self.watches {
            match feeds.drain(&sh, outage, now) {
                Delivered::Changes(changes) => controller.observe_all(now, changes),
                Delivered::Relisted(listed) => {
                    // As `nodewarden run` does after a re-list: what the
                    // engine holds and the list no longer shows was deleted
                    // while the watches were away.
                    controller.observe_all(now, listed.observations);
                    for (kind, present) in &listed.present {
                        let gone = controller.relisted(now, *kind, present);
                        if gone > 0 {
                            info!(?kind, deleted = gone, "re-list found objects deleted while the watches were away");
                        }
                    }
                }
            }
        }
        let mut api = ServedApi { cluster: &sh, reader: self.reader };
        controller.step(now, &mut api, &mut |_| {});
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use nodewarden_cluster::fleet::FleetSpec;
    use nodewarden_cluster::{AdmissionDefaults, Builtin, KubeletTiming};

    use super::*;
    use crate::populate::{ServeSource, populate};
    use crate::store::StoreLimits;
    use nodewarden_objects::TimeBase;

    /// The reported zone outage (`sim --serve --scenario zone-outage
    /// --controller`, period 5 s, grace 40 s), driven step by step on the
    /// 100 ms tick, each tick's clock read up to a millisecond late, as the
    /// driver's wakes are. Whatever the lateness, every node of the
    /// partitioned zone goes Unknown a grace and a period after the pass
    /// that took in its last renewal (the grid's verdict: strictly after
    /// the grace, so the pass after the one the grace ends at), as with
    /// punctual ticks. Decided at the ticks' times, some went a period
    /// earlier, 40.0000 s after it (two nodes here, with this lateness).
    #[test]
    fn late_ticks_never_bring_an_unknown_a_period_early() {
        let time = TimeBase { unix_nanos_at_epoch: 1_700_000_000_000_000_000 };
        let cluster = Arc::new(ServedCluster::new(StoreLimits::default(), time, AdmissionDefaults::default()));
        let fleet = FleetSpec { nodes: 60, zones: 3, pods_per_node: 2, seed: 1 };
        let populated =
            populate(&ServeSource::Fleet(fleet, Some(Builtin::ZoneOutage)), &KubeletTiming::default(), 40, &cluster)
                .expect("the fleet");
        let zone = match populated.plan.faults().first().map(|f| &f.fault) {
            Some(Fault::Partition(nodes)) => nodes.clone(),
            other => panic!("zone-outage starts with a partition: {other:?}"),
        };
        let config = ControllerConfig::default();
        let reader = Reader::for_config(&config);
        // Started between ticks, as a served controller is.
        let start = time.unix_timestamp(Timestamp::EPOCH + Span::from_millis(37));
        let mut controller = Controller::new(config.clone(), start).expect("config");
        for o in reader.state(&cluster, start) {
            controller.observe(start, o);
        }
        let settings = DriverSettings {
            api_faults: Vec::new(),
            scenario_speed: 1.0,
            lease_duration: 40,
            tick: Duration::from_millis(100),
            scheduler: false,
        };
        let status = Arc::new(Mutex::new(StatusLine::default()));
        let mut driver = Driver::new(cluster.clone(), populated, settings, Some((controller, reader)), status);
        driver.watches = Some(served_api::Feeds::subscribe(&cluster, reader));

        let renew_time = |n: &str| {
            let s = cluster.store.lock();
            s.get(Kind::Lease, &key_of(NODE_LEASE_NAMESPACE, n)).map(|l| l.value()["spec"]["renewTime"].clone())
        };
        // Per node, the tick its Lease was last renewed at and the tick it
        // was found Unknown at; the ticks at which a monitor pass ran.
        let mut renewed = BTreeMap::new();
        let mut unknown = BTreeMap::new();
        let mut passes = Vec::new();
        let mut lcg = 7u64;
        for k in 1..=1100i64 {
            lcg = lcg.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let late = Span::from_nanos(((lcg >> 33) % 1_000) as i64 * 1_000);
            let now = Timestamp::EPOCH + Span::from_millis(100 * k) + late;
            let before: Vec<_> = zone.iter().map(|n| renew_time(n)).collect();
            let ran = driver.controller.as_ref().map(|c| c.engine().monitor_passes());
            driver.advance(now, k % 10 == 0);
            if driver.controller.as_ref().map(|c| c.engine().monitor_passes()) != ran {
                passes.push(now);
            }
            for (n, before) in zone.iter().zip(before) {
                if renew_time(n) != before {
                    renewed.insert(n.clone(), now);
                }
            }
            let s = cluster.store.lock();
            for n in s.snapshot(Kind::Node).iter_from("", None) {
                if n.field(NODE_READY).as_deref() == Some("Unknown") {
                    unknown.entry(n.name().to_string()).or_insert(now);
                }
            }
        }
        assert_eq!(unknown.keys().collect::<Vec<_>>(), zone.iter().collect::<Vec<_>>(), "the partitioned zone, only");
        let expected = config.node_monitor_grace_period + config.node_monitor_period;
        let early: Vec<String> = zone
            .iter()
            .filter_map(|n| {
                // The earliest pass that can have taken the renewal in (a
                // tick's own pass is decided before what the tick brought,
                // so it is taken in by the next one).
                let probe = passes.iter().copied().find(|&p| p >= renewed[n]).expect("a pass after the renewal");
                let silent = unknown[n] - probe;
                (silent.as_secs_f64() < expected.as_secs_f64() - 0.01).then(|| {
                    format!("{n}: Unknown {:.4} s after the pass that took in its last renewal", silent.as_secs_f64())
                })
            })
            .collect();
        assert!(early.is_empty(), "{early:#?}");
    }
}
