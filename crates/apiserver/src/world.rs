//! The served cluster: a generated fleet (or a scenario file's cluster) in
//! the store, its simulated kubelets heartbeating on the wall clock, the
//! scenario's fault plan and the API fault plan played out in real time,
//! the disruption controller's PDB status, and optionally nodewarden's own
//! controller in-process.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nodewarden_controller::Controller;
use nodewarden_engine::Observation;
use nodewarden_model::{ConditionStatus, ControllerConfig, Span, Timestamp, wall};
use nodewarden_sim::faults::{Fault, FaultPlan};
use nodewarden_sim::fleet::{self, FleetSpec, LEASE_JITTER};
use nodewarden_sim::{AdmissionDefaults, Builtin, Cluster, EventAction, KubeletApi, KubeletTiming, Kubelets, Scenario};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::clock::TimeBase;
use crate::convert::{self, NODE_LEASE_NAMESPACE};
use crate::faults::{ApiFault, ApiFaults, PlannedApiFault};
use crate::recreate::Recreator;
use crate::resource::Kind;
use crate::served_api::{self, Delivered, Reader, ServedApi};
use crate::server::{ServerConfig, Shared};
use crate::store::{Inner, NODE_READY, Store, StoreLimits, key_of};
use crate::tls::{Credentials, Security};

/// What cluster to serve.
#[derive(Clone, Debug)]
pub enum ServeSource {
    /// A generated fleet, and optionally a built-in scenario's fault plan
    /// (`critical-addon` builds its own full cluster around the fleet's
    /// nodes, as `nodewarden sim` does, and runs the scheduler and, in the
    /// in-process controller, the rescheduler).
    Fleet(FleetSpec, Option<Builtin>),
    /// A scenario file's nodes, pods, kubelet settings and events.
    File(Box<Scenario>),
}

/// How to serve it.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The cluster.
    pub source: ServeSource,
    /// Kubelet periods (a scenario file brings its own).
    pub timing: KubeletTiming,
    /// `leaseDurationSeconds` of the node Leases (a quarter of it is
    /// `timing.lease_every` for a real kubelet).
    pub lease_duration_secs: i64,
    /// The scenario's timeline runs this many times faster than real time
    /// (1 = real time; tests use more).
    pub scenario_speed: f64,
    /// API faults to play out.
    pub api_faults: Vec<PlannedApiFault>,
    /// Run nodewarden's engine in-process with this configuration.
    pub controller: Option<ControllerConfig>,
    /// HTTP settings, and HTTPS with a token or plain HTTP
    /// ([`ServerConfig::security`]).
    pub server: ServerConfig,
    /// Store limits.
    pub limits: StoreLimits,
    /// How often kubelets, faults and the controller are driven.
    pub tick: Duration,
    /// Run the simulator's scheduler over the served pods (each second):
    /// unbound pods are bound first-fit or marked Unschedulable
    /// ([`crate::scheduler`]). A scenario file's `cluster.scheduler: true`
    /// and the `critical-addon` built-in turn it on as well. Off, pods stay
    /// unbound until a client binds them, as before. With it, the pods a
    /// controller owns are recreated when deleted ([`crate::recreate`]).
    pub scheduler: bool,
    /// The scenario's t=0 (`Timestamp::EPOCH`) at this Unix time of the
    /// process's clock, in nanoseconds, rather than at the start: the
    /// cluster is served at once and its timeline waits for it
    /// (`cargo xtask wire` starts the controller then).
    pub zero_unix_nanos: Option<i64>,
    /// Keep a journal of every change to nodes, pods and Events, and of
    /// every client write to a node or pod, in this file
    /// ([`crate::journal`]; `cargo xtask wire` judges from it).
    pub journal: Option<std::path::PathBuf>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            source: ServeSource::Fleet(FleetSpec { nodes: 3, zones: 1, pods_per_node: 3, seed: 1 }, None),
            timing: KubeletTiming::default(),
            lease_duration_secs: 40,
            scenario_speed: 1.0,
            api_faults: Vec::new(),
            controller: None,
            server: ServerConfig::default(),
            limits: StoreLimits::default(),
            tick: Duration::from_millis(100),
            scheduler: false,
            zero_unix_nanos: None,
            journal: None,
        }
    }
}

/// Why the cluster could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The fleet's shape cannot work.
    #[error("{0}")]
    Fleet(String),
    /// The controller refused its configuration.
    #[error("the engine refused the configuration: {0}")]
    Config(#[from] nodewarden_model::ConfigError),
    /// The listener failed.
    #[error("cannot serve: {0}")]
    Io(#[from] std::io::Error),
    /// The CA, serving certificate or token could not be made.
    #[error("cannot serve over HTTPS: {0}")]
    Tls(#[from] crate::tls::TlsError),
}

/// A one-line status, updated as the cluster runs.
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

/// A running served cluster.
pub struct Served {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The shared state (store, faults, time).
    pub shared: Arc<Shared>,
    status: Arc<Mutex<StatusLine>>,
    tasks: Vec<JoinHandle<()>>,
    /// The CA and token, over HTTPS ([`crate::Security::Https`]).
    credentials: Option<Arc<Credentials>>,
}

impl Served {
    /// Builds the cluster and serves it on `listener`.
    pub async fn start(opts: ServeOptions, listener: TcpListener) -> Result<Served, ServeError> {
        let addr = listener.local_addr()?;
        let time = match opts.zero_unix_nanos {
            Some(unix_nanos_at_epoch) => TimeBase { unix_nanos_at_epoch },
            None => TimeBase::starting_now(),
        };
        let admission = match &opts.source {
            ServeSource::File(s) => AdmissionDefaults::from(&s.cluster),
            ServeSource::Fleet(..) => AdmissionDefaults::default(),
        };
        let shared = Arc::new(Shared {
            store: Store::new(opts.limits),
            time,
            faults: ApiFaults::default(),
            config: opts.server.clone(),
            admission,
            addr: std::sync::OnceLock::new(),
            writes: std::sync::Mutex::new(Vec::new()),
            requests: std::sync::Mutex::new(Vec::new()),
            refusals: std::sync::Mutex::new(std::collections::HashMap::new()),
            graceful: std::sync::Mutex::new(None),
        });
        if let Some(path) = &opts.journal {
            let journal = crate::journal::Journal::create(path, time)?;
            shared.store.keep_journal(Arc::new(journal));
        }
        let Populated { kubelets, plan, name, tracks_scheduling } = populate(&opts, &shared)?;
        let critical_addon = matches!(opts.source, ServeSource::Fleet(_, Some(Builtin::CriticalAddon)));
        if critical_addon && opts.controller.is_none() {
            info!(
                "critical-addon without --controller: run `nodewarden run --enable-rescheduler` against this server \
                 to make room for the addons"
            );
        }
        let mut reader = Reader::default();
        let controller = match &opts.controller {
            Some(config) => {
                let mut config = config.clone();
                if critical_addon {
                    // The scenario is about the rescheduler, as in
                    // `nodewarden sim`: it runs.
                    config.enable_rescheduler = true;
                }
                reader = Reader::for_config(&config);
                // The controller's clock is Unix time, as `nodewarden run`'s.
                let now = time.unix_timestamp(time.now());
                let mut c = Controller::new(config, now)?;
                for o in reader.state(&shared, now) {
                    c.observe(now, o);
                }
                Some(c)
            }
            None => None,
        };
        let status = Arc::new(Mutex::new(StatusLine::default()));
        let scheduler =
            opts.scheduler || critical_addon || matches!(&opts.source, ServeSource::File(f) if f.cluster.scheduler);
        if tracks_scheduling || scheduler {
            *shared.graceful.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Default::default());
        }
        let credentials = match opts.server.security {
            Security::Https => Some(Arc::new(Credentials::generate(addr)?)),
            Security::PlainHttp => None,
        };
        let server = tokio::spawn(crate::server::serve(listener, shared.clone(), credentials.clone()));
        let driver = Driver {
            shared: shared.clone(),
            kubelets,
            plan,
            next_fault: 0,
            api_faults: opts.api_faults.clone(),
            next_api_fault: 0,
            speed: if opts.scenario_speed.is_finite() && opts.scenario_speed > 0.0 { opts.scenario_speed } else { 1.0 },
            lease_duration: opts.lease_duration_secs,
            started: Instant::now(),
            status: status.clone(),
            controller,
            reader,
            tracks_scheduling,
            watches: None,
            tick: opts.tick,
            scheduler,
            // Workload controllers recreate the pods they own whenever the
            // cluster is about scheduling, as the simulator's do.
            recreator: (tracks_scheduling || scheduler).then(|| Recreator::subscribe(&shared)),
        };
        info!(%addr, scenario = %name, "serving the simulated cluster");
        let driver = tokio::spawn(driver.run());
        Ok(Served { addr, shared, status, tasks: vec![server, driver], credentials })
    }

    /// Every write accepted so far (empty unless
    /// [`ServerConfig::record_writes`](crate::ServerConfig) is on).
    pub fn writes(&self) -> Vec<crate::server::WriteRecord> {
        self.shared.writes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Every request received so far (empty unless
    /// [`ServerConfig::record_requests`](crate::ServerConfig) is on).
    pub fn requests(&self) -> Vec<crate::RequestRecord> {
        self.shared.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The API faults, to inject by hand.
    pub fn faults(&self) -> &ApiFaults {
        &self.shared.faults
    }

    /// `https://127.0.0.1:PORT`, or `http://...` with
    /// [`Security::PlainHttp`].
    pub fn url(&self) -> String {
        let scheme = if self.credentials.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// A kubeconfig for it: over HTTPS, with its CA and bearer token, so
    /// whoever holds it can use (and change) the cluster.
    pub fn kubeconfig(&self) -> String {
        match &self.credentials {
            Some(c) => secure_kubeconfig(&self.url(), c.ca_pem(), c.token()),
            None => kubeconfig(&self.url()),
        }
    }

    /// The CA that signed the serving certificate (PEM), over HTTPS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.credentials.as_deref().map(Credentials::ca_pem)
    }

    /// The bearer token every request must carry, over HTTPS.
    pub fn token(&self) -> Option<&str> {
        self.credentials.as_deref().map(Credentials::token)
    }

    /// The status line now.
    pub fn status(&self) -> StatusLine {
        self.status.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Stops serving and driving.
    pub fn stop(self) {
        for t in self.tasks {
            t.abort();
        }
    }
}

/// A kubeconfig for a server at `url` (plain HTTP, no credentials).
pub fn kubeconfig(url: &str) -> String {
    kubeconfig_with(url, "", " {}")
}

/// A kubeconfig for an HTTPS server at `url` whose certificate `ca_pem`
/// signed, for the user holding `token`.
pub fn secure_kubeconfig(url: &str, ca_pem: &str, token: &str) -> String {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    kubeconfig_with(url, &format!("\n    certificate-authority-data: {ca}"), &format!("\n    token: {token}"))
}

/// The kubeconfig, with `cluster` added under the cluster's `server` and
/// `user` after `user:`.
fn kubeconfig_with(url: &str, cluster: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: nodewarden-sim\n  cluster:\n    server: {url}{cluster}\ncontexts:\n- name: nodewarden-sim\n  context:\n    cluster: nodewarden-sim\n    user: nodewarden-sim\n    namespace: default\ncurrent-context: nodewarden-sim\nusers:\n- name: nodewarden-sim\n  user:{user}\npreferences: {{}}\n"
    )
}

fn create_namespace(s: &mut Inner, time: &TimeBase, name: &str) {
    if s.get(Kind::Namespace, name).is_some() {
        return;
    }
    let uid = s.next_uid();
    let v = json!({
        "kind": "Namespace", "apiVersion": "v1",
        "metadata": {"name": name, "uid": uid, "creationTimestamp": time.time(Timestamp::EPOCH), "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    });
    s.commit(Kind::Namespace, name, v, false);
}

/// Stores a pod a scenario event added, with its scheduling facts when it
/// has any, created now. One of the same name is replaced in place (a new
/// uid), as the simulator replaces it: not deleted, so no controller
/// recreates it.
fn store_added_pod(s: &mut Inner, time: &TimeBase, p: &nodewarden_sim::cluster::SimPod, now: Timestamp) {
    let mut snap = p.snapshot();
    snap.scheduling = p.scheduling.clone();
    let ns = snap.key.split_once('/').map_or("default", |(ns, _)| ns).to_string();
    create_namespace(s, time, &ns);
    let uid = s.next_uid();
    let host = snap
        .node
        .as_ref()
        .and_then(|n| s.get(Kind::Node, n))
        .and_then(|n| n.value().pointer("/status/addresses/0/address").and_then(Value::as_str).map(str::to_string));
    let ip = format!("10.251.{}.{}", (s.rv() >> 8) & 0xff, s.rv() & 0xff);
    let mut v = convert::pod_json(&snap, &uid, now, host.as_deref(), &ip, time);
    if let Some(reason) = &p.reason {
        v["status"]["reason"] = json!(reason);
    }
    s.commit(Kind::Pod, &snap.key, v, false);
}

/// Stores a scenario's budget under policy/v1, or replaces its spec (a new
/// generation, which the disruption controller has yet to observe).
fn store_budget(s: &mut Inner, time: &TimeBase, spec: &nodewarden_sim::scenario::BudgetSpec) {
    let (ns, name) = spec.name.split_once('/').unwrap_or(("default", &spec.name));
    create_namespace(s, time, ns);
    let key = key_of(ns, name);
    let v = match s.get(Kind::PodDisruptionBudget, &key) {
        Some(cur) => {
            let old = cur.value();
            let mut v = convert::budget_json(spec, ns, name, &cur.uid, time);
            let generation = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
            v["metadata"]["generation"] = json!(generation + 1);
            v["metadata"]["creationTimestamp"] = old["metadata"]["creationTimestamp"].clone();
            if let Some(status) = old.get("status") {
                v["status"] = status.clone();
            }
            v
        }
        None => {
            let uid = s.next_uid();
            convert::budget_json(spec, ns, name, &uid, time)
        }
    };
    s.commit(Kind::PodDisruptionBudget, &key, v, false);
}

/// What [`populate`] built beside the store's objects.
struct Populated {
    kubelets: Kubelets,
    plan: FaultPlan,
    name: String,
    /// The cluster keeps what the scheduler reads (allocatable, requests,
    /// owners): a scenario file's events that add nodes and pods then
    /// serve it too.
    tracks_scheduling: bool,
}

/// Fills the store from the simulator's cluster.
fn populate(opts: &ServeOptions, sh: &Shared) -> Result<Populated, ServeError> {
    let time = sh.time;
    let mut cluster;
    let mut kubelets;
    let plan;
    let name;
    match &opts.source {
        ServeSource::Fleet(spec, builtin) => {
            if spec.nodes == 0 || spec.zones == 0 || spec.zones > spec.nodes {
                return Err(ServeError::Fleet(format!(
                    "a fleet needs at least one node and 1..=nodes zones (got {} nodes, {} zones)",
                    spec.nodes, spec.zones
                )));
            }
            cluster = Cluster::new(AdmissionDefaults::default());
            kubelets = Kubelets::new(opts.timing).with_jitter(LEASE_JITTER, spec.seed);
            let layout = if *builtin == Some(Builtin::CriticalAddon) {
                // The cluster `nodewarden sim --scenario critical-addon`
                // builds: full nodes, budgets, the addons on the first node,
                // with what the scheduler reads.
                cluster = cluster.with_scheduling(true, true);
                nodewarden_sim::addons::build(spec, &opts.timing, &mut cluster, &mut kubelets)
            } else {
                fleet::build(spec, &opts.timing, &mut cluster, &mut kubelets)
            };
            plan = builtin.map_or_else(FaultPlan::new, |b| b.plan(&layout, spec.seed));
            name = builtin.map_or_else(|| "no scenario".to_string(), |b| b.name().to_string());
        }
        ServeSource::File(scenario) => {
            let (c, k) = Cluster::from_scenario(scenario);
            let mut refusals = sh.refusals.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            refusals.extend(c.pods().filter(|p| p.refuse_deletions > 0).map(|p| (p.key.clone(), p.refuse_deletions)));
            drop(refusals);
            cluster = c;
            kubelets = k;
            let mut p = FaultPlan::new();
            for e in &scenario.events {
                // A restart is the in-process controller's (with
                // `--controller`), not a change to the served cluster.
                let fault = match &e.action {
                    EventAction::RestartController => Fault::RestartController,
                    other => Fault::Event(other.clone()),
                };
                p.add(Timestamp::EPOCH + e.at, fault, "");
            }
            plan = p;
            name = "scenario file".to_string();
        }
    }
    let mut s = sh.store.lock();
    for ns in ["default", "kube-system", "kube-public", NODE_LEASE_NAMESPACE] {
        create_namespace(&mut s, &time, ns);
    }
    let mut node_uids = std::collections::HashMap::new();
    // What the file says of scheduling (allocatable, requests, budgets) is
    // served whenever the cluster keeps it, as a real cluster always has it:
    // whether nodewarden reads it is nodewarden's flag.
    let tracks = cluster.tracks_scheduling();
    for (i, n) in cluster.nodes().enumerate() {
        let uid = s.next_uid();
        let mut n = n.clone();
        if tracks {
            n.allocatable = Some(cluster.allocatable(&n.name).unwrap_or(nodewarden_sim::scenario::DEFAULT_ALLOCATABLE));
        }
        let n = &n;
        let v = convert::node_json(n, &uid, i, &time);
        s.commit(Kind::Node, &n.name, v, false);
        if let Some(renew) = cluster.lease(&n.name) {
            let luid = s.next_uid();
            let lv =
                convert::lease_json_created(&n.name, &uid, &luid, n.created, renew, opts.lease_duration_secs, &time);
            s.commit(Kind::Lease, &key_of(NODE_LEASE_NAMESPACE, &n.name), lv, false);
        }
        node_uids.insert(n.name.clone(), (uid, i));
    }
    // A generated fleet's workload pods get the owners and labels their
    // controllers would have given them (a scenario file's pods say their
    // own); the ReplicaSets and StatefulSets themselves are not served.
    let workloads = match &opts.source {
        ServeSource::Fleet(spec, builtin) if *builtin != Some(Builtin::CriticalAddon) => fleet::workloads(spec),
        _ => Vec::new(),
    };
    let owner_uids: Vec<String> = workloads.iter().map(|_| s.next_uid()).collect();
    let owned: std::collections::HashMap<&str, (usize, usize)> = workloads
        .iter()
        .enumerate()
        .flat_map(|(w, wl)| wl.pods.iter().enumerate().map(move |(ordinal, key)| (key.as_str(), (w, ordinal))))
        .collect();
    let mut daemonsets = std::collections::BTreeMap::new();
    for (j, p) in cluster.pods().filter(|p| !p.deleted).enumerate() {
        let mut snap = p.snapshot();
        snap.scheduling = p.scheduling.clone();
        let ns = snap.key.split_once('/').map_or("default", |(ns, _)| ns).to_string();
        create_namespace(&mut s, &time, &ns);
        let uid = s.next_uid();
        let host = snap.node.as_ref().and_then(|n| node_uids.get(n)).map(|(_, i)| convert::node_ip(*i));
        let created = Timestamp::EPOCH - Span::from_secs(24 * 3600);
        let mut v = convert::pod_json(
            &snap,
            &uid,
            created,
            host.as_deref(),
            &format!("10.{}.{}.{}", 128 + (j >> 16) % 64, (j >> 8) & 0xff, j & 0xff),
            &time,
        );
        if snap.daemonset
            && let Some(owner) = v.pointer("/metadata/ownerReferences/0").cloned()
        {
            daemonsets
                .entry((ns.clone(), owner["name"].as_str().unwrap_or_default().to_string()))
                .or_insert(owner["uid"].clone());
        }
        if let Some(reason) = &p.reason {
            v["status"]["reason"] = json!(reason);
        }
        if let Some(&(w, ordinal)) = owned.get(snap.key.as_str()) {
            owned_by_workload(&mut v, &workloads[w], ordinal, &owner_uids[w]);
        }
        s.commit(Kind::Pod, &snap.key, v, false);
    }
    let n_nodes = cluster.nodes().count();
    for ((ns, name), uid) in daemonsets {
        let v = json!({
            "kind": "DaemonSet", "apiVersion": "apps/v1",
            "metadata": {"name": name, "namespace": ns, "uid": uid, "generation": 1, "creationTimestamp": time.time(Timestamp::EPOCH - Span::from_secs(30 * 86400)), "labels": {"app": name}},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}], "tolerations": [{"operator": "Exists"}]}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
                "revisionHistoryLimit": 10,
            },
            "status": {"currentNumberScheduled": n_nodes, "desiredNumberScheduled": n_nodes, "numberReady": n_nodes, "updatedNumberScheduled": n_nodes, "numberAvailable": n_nodes, "numberMisscheduled": 0, "observedGeneration": 1},
        });
        s.commit(Kind::DaemonSet, &key_of(&ns, &name), v, false);
    }
    for b in cluster.budgets().values() {
        store_budget(&mut s, &time, &b.spec);
    }
    Ok(Populated { kubelets, plan, name, tracks_scheduling: tracks })
}

/// Writes into a fleet pod what its workload's controller puts there: the
/// controlling owner reference (the Deployment's ReplicaSet, or the
/// StatefulSet) and the labels the controller adds (`pod-template-hash`;
/// a StatefulSet's revision, pod name and index), under `app: <workload>`.
fn owned_by_workload(v: &mut Value, w: &fleet::Workload, ordinal: usize, uid: &str) {
    let (kind, owner) = w.owner();
    let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let labels = match w.kind {
        fleet::WorkloadKind::Deployment => json!({"app": w.name, "pod-template-hash": w.revision}),
        fleet::WorkloadKind::StatefulSet => json!({
            "app": w.name,
            "controller-revision-hash": format!("{}-{}", w.name, w.revision),
            "statefulset.kubernetes.io/pod-name": name,
            "apps.kubernetes.io/pod-index": ordinal.to_string(),
        }),
    };
    v["metadata"]["labels"] = labels;
    v["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "apps/v1", "kind": kind, "name": owner, "uid": uid,
        "controller": true, "blockOwnerDeletion": true,
    }]);
}

/// Called when a client creates an object, before it is stored: what
/// admission and the simulated kubelets would add.
pub fn on_create(sh: &Shared, s: &Inner, kind: Kind, v: &mut Value, now: Timestamp) {
    match kind {
        Kind::Pod => {
            // DefaultTolerationSeconds admission.
            let mut tols: Vec<nodewarden_model::Toleration> = v
                .pointer("/spec/tolerations")
                .and_then(Value::as_array)
                .map(|t| t.iter().map(convert::toleration).collect())
                .unwrap_or_default();
            let before = tols.len();
            sh.admission.admit(&mut tols);
            if tols.len() != before
                && let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut)
            {
                let mut list = spec.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
                list.extend(tols[before..].iter().map(convert::toleration_json));
                spec.insert("tolerations".into(), Value::Array(list));
            }
            if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) {
                for (k, d) in [
                    ("restartPolicy", json!("Always")),
                    ("terminationGracePeriodSeconds", json!(30)),
                    ("dnsPolicy", json!("ClusterFirst")),
                    ("schedulerName", json!("default-scheduler")),
                    ("serviceAccountName", json!("default")),
                    ("securityContext", json!({})),
                    ("enableServiceLinks", json!(true)),
                    ("priority", json!(0)),
                    ("preemptionPolicy", json!("PreemptLowerPriority")),
                ] {
                    spec.entry(k).or_insert(d);
                }
            }
            // A pod bound to a Ready node is started by its kubelet at once.
            let node = v.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default().to_string();
            let node_obj = if node.is_empty() { None } else { s.get(Kind::Node, &node) };
            let host = node_obj.as_ref().and_then(|n| {
                let nv = n.value();
                let ready = convert::node_snapshot(&nv, &sh.time)
                    .conditions
                    .iter()
                    .any(|c| c.kind == nodewarden_model::ConditionType::Ready && c.status == ConditionStatus::True);
                ready.then(|| {
                    nv.pointer("/status/addresses/0/address").and_then(Value::as_str).unwrap_or("10.0.0.1").to_string()
                })
            });
            let ip = format!("10.250.{}.{}", (s.rv() >> 8) & 0xff, s.rv() & 0xff);
            v["status"] = convert::running_status(host.is_some(), true, now, host.as_deref(), &ip, &sh.time);
        }
        Kind::Namespace => {
            let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
            v["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
            v["spec"]["finalizers"] = json!(["kubernetes"]);
            v["status"] = json!({"phase": "Active"});
        }
        _ => {}
    }
}

/// The simulated kubelets' view of the store.
pub struct StoreKubelets<'a> {
    /// The store, locked.
    pub s: &'a mut Inner,
    /// Time formats.
    pub time: TimeBase,
    /// The Leases' duration.
    pub lease_duration: i64,
}

impl KubeletApi for StoreKubelets<'_> {
    fn ready_status(&self, node: &str) -> Option<Option<ConditionStatus>> {
        let n = self.s.get(Kind::Node, node)?;
        Some(match n.field(NODE_READY).as_deref() {
            Some("True") => Some(ConditionStatus::True),
            Some("False") => Some(ConditionStatus::False),
            Some("") | None => None,
            Some(_) => Some(ConditionStatus::Unknown),
        })
    }

    fn renew_lease(&mut self, node: &str, now: Timestamp) -> Vec<Observation> {
        let key = key_of(NODE_LEASE_NAMESPACE, node);
        let v = match self.s.get(Kind::Lease, &key) {
            Some(l) => {
                let mut v = l.value();
                v["spec"]["renewTime"] = json!(self.time.micro_time(now));
                v["spec"]["holderIdentity"] = json!(node);
                v
            }
            None => {
                let Some(n) = self.s.get(Kind::Node, node) else { return Vec::new() };
                let uid = self.s.next_uid();
                convert::lease_json(node, &n.uid, &uid, now, self.lease_duration, &self.time)
            }
        };
        self.s.commit(Kind::Lease, &key, v, false);
        Vec::new()
    }

    fn post_ready(&mut self, node: &str, now: Timestamp) -> Vec<Observation> {
        let Some(n) = self.s.get(Kind::Node, node) else { return Vec::new() };
        let mut v = n.value();
        let at = self.time.time(now);
        let mut found = false;
        if let Some(cs) = v.pointer_mut("/status/conditions").and_then(Value::as_array_mut) {
            for c in cs.iter_mut() {
                let kind = c["type"].as_str().unwrap_or_default().to_string();
                match kind.as_str() {
                    "Ready" => {
                        found = true;
                        if c["status"] != "True" {
                            c["lastTransitionTime"] = json!(at);
                        }
                        c["status"] = json!("True");
                        c["reason"] = json!("KubeletReady");
                        c["message"] = json!("kubelet is posting ready status");
                        c["lastHeartbeatTime"] = json!(at);
                    }
                    t @ ("MemoryPressure" | "DiskPressure" | "PIDPressure") => {
                        if c["status"] != "False" {
                            c["lastTransitionTime"] = json!(at);
                        }
                        c["status"] = json!("False");
                        c["reason"] = json!(match t {
                            "MemoryPressure" => "KubeletHasSufficientMemory",
                            "DiskPressure" => "KubeletHasNoDiskPressure",
                            _ => "KubeletHasSufficientPID",
                        });
                        c["lastHeartbeatTime"] = json!(at);
                    }
                    _ => {}
                }
            }
        }
        if !found {
            let ready = json!({"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status", "lastHeartbeatTime": at, "lastTransitionTime": at});
            match v.pointer_mut("/status/conditions").and_then(Value::as_array_mut) {
                Some(cs) => cs.push(ready),
                None => v["status"]["conditions"] = json!([ready]),
            }
        }
        self.s.commit(Kind::Node, node, v, false);
        Vec::new()
    }
}

struct Driver {
    shared: Arc<Shared>,
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
    /// See [`Populated::tracks_scheduling`].
    tracks_scheduling: bool,
    watches: Option<served_api::Feeds>,
    tick: Duration,
    scheduler: bool,
    /// Replaces the owned pods deleted, when the cluster keeps scheduling
    /// facts.
    recreator: Option<Recreator>,
}

impl Driver {
    async fn run(mut self) {
        // The tick is on the process's clock (`wall`): kubelets and the
        // scenario's events keep their grain when time is compressed.
        let mut tick = tokio::time::interval(wall::real(self.tick).max(Duration::from_millis(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_pdb = Instant::now();
        let mut last_status = Instant::now() - Duration::from_secs(10);
        if self.controller.is_some() {
            self.watches = Some(served_api::Feeds::subscribe(&self.shared, self.reader));
        }
        loop {
            tick.tick().await;
            // Frozen: kubelets, scenario and faults wait with the server.
            if self.shared.faults.frozen() {
                continue;
            }
            let now = self.shared.time.now();
            if now < Timestamp::EPOCH {
                // The scenario has not begun (`zero_unix_nanos`): the
                // cluster is served as the file starts it, and nothing in
                // it moves yet (no scheduler, no kubelet, no fault).
                continue;
            }
            self.play_faults(now);
            self.shared.end_graceful(now);
            {
                let mut s = self.shared.store.lock();
                let mut api = StoreKubelets { s: &mut s, time: self.shared.time, lease_duration: self.lease_duration };
                self.kubelets.run_until(now, &mut api);
            }
            if let Some(r) = &mut self.recreator {
                r.pass(&self.shared, now);
            }
            if wall::since(last_pdb) >= Duration::from_secs(1) {
                if self.scheduler {
                    crate::scheduler::pass(&self.shared);
                }
                crate::pdb::refresh(&self.shared);
                last_pdb = Instant::now();
            }
            self.step_controller(now);
            if last_status.elapsed() >= Duration::from_secs(1) {
                self.update_status();
                last_status = Instant::now();
            }
        }
    }

    fn update_status(&self) {
        let s = self.shared.store.lock();
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
            self.shared.faults.inject(f.fault.clone(), f.lasts.map(wall::real));
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
        let sh = self.shared.clone();
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

    /// A scenario file's event, applied through a scratch copy of the
    /// simulator's cluster holding the objects it touches, so the event
    /// means here exactly what it means in replay. What the simulator keeps
    /// apart from its objects (budgets, allocatable, the scheduler's
    /// verdicts and binds) is written to the stored objects directly, as
    /// the API would hold it.
    fn apply_event(&mut self, now: Timestamp, action: &EventAction) {
        let sh = self.shared.clone();
        let time = sh.time;
        let mut s = sh.store.lock();
        // The scratch cluster keeps scheduling facts exactly when the
        // served one does, so an added node or pod is served as a node or
        // pod of the file's is.
        let mut scratch = Cluster::new(sh.admission).with_scheduling(false, self.tracks_scheduling);
        let node_name = match action {
            EventAction::SetReady(a) => Some(a.node.clone()),
            EventAction::SetCondition(a) => Some(a.node.clone()),
            EventAction::RemoveCondition(a) => Some(a.node.clone()),
            EventAction::SetTaints(a) => Some(a.node.clone()),
            EventAction::SetUnschedulable(a) => Some(a.node.clone()),
            EventAction::SetLabels(a) => Some(a.node.clone()),
            EventAction::SetLease(a) => Some(a.node.clone()),
            _ => None,
        };
        if let Some(n) = &node_name
            && let Some(obj) = s.get(Kind::Node, n)
        {
            scratch.put_node(convert::node_snapshot(&obj.value(), &time));
        }
        let mut budgets_changed = false;
        let obs = match action {
            EventAction::DeletePod(key) => {
                match s.get(Kind::Pod, key) {
                    Some(p) => {
                        s.commit(Kind::Pod, key, p.value(), true);
                    }
                    None => warn!(pod = %key, "delete-pod: no such pod now"),
                }
                Vec::new()
            }
            EventAction::DeleteNode(n) => {
                self.kubelets.stop(n);
                for (kind, key) in [(Kind::Node, n.clone()), (Kind::Lease, key_of(NODE_LEASE_NAMESPACE, n))] {
                    if let Some(o) = s.get(kind, &key) {
                        s.commit(kind, &key, o.value(), true);
                    }
                }
                Vec::new()
            }
            EventAction::SetTolerations(a) => {
                if let Some(p) = s.get(Kind::Pod, &a.pod) {
                    let mut v = p.value();
                    v["spec"]["tolerations"] =
                        json!(a.tolerations.iter().map(convert::toleration_json).collect::<Vec<_>>());
                    s.commit(Kind::Pod, &a.pod, v, false);
                }
                Vec::new()
            }
            // As the scheduler's bind: the node, PodScheduled=True, and the
            // kubelet of a Ready node starts the pod.
            EventAction::BindPod(a) => {
                match s.get(Kind::Pod, &a.pod) {
                    Some(p) => {
                        let mut v = p.value();
                        crate::binding::assign(&s, &sh, &mut v, &a.node, now);
                        s.commit(Kind::Pod, &a.pod, v, false);
                    }
                    None => warn!(pod = %a.pod, "bind-pod: no such pod now"),
                }
                Vec::new()
            }
            EventAction::AddPod(spec) => {
                // At the event's time (`unschedulable-since: now`), and with
                // what the file says of its scheduling.
                scratch.add_pod_at(spec, now);
                if spec.refuse_deletions > 0 {
                    sh.refusals
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .insert(spec.name.clone(), spec.refuse_deletions);
                }
                if let Some(p) = scratch.pod(&spec.name) {
                    store_added_pod(&mut s, &time, p, now);
                }
                Vec::new()
            }
            EventAction::KubeletStart(nodes) => {
                let mut api = StoreKubelets { s: &mut s, time, lease_duration: self.lease_duration };
                for n in nodes {
                    self.kubelets.start(n, now, &mut api);
                }
                Vec::new()
            }
            EventAction::AddBudget(spec) => {
                store_budget(&mut s, &time, spec);
                budgets_changed = true;
                Vec::new()
            }
            EventAction::DeleteBudget(key) => {
                match s.get(Kind::PodDisruptionBudget, key) {
                    Some(b) => {
                        s.commit(Kind::PodDisruptionBudget, key, b.value(), true);
                    }
                    None => warn!(budget = %key, "delete-budget: no such budget now"),
                }
                Vec::new()
            }
            // A served node always reports an allocatable (a real one
            // does), so the change is served whatever the file runs.
            EventAction::SetAllocatable(a) => {
                match s.get(Kind::Node, &a.node) {
                    Some(n) => {
                        let mut v = n.value();
                        let resources = convert::resources_json(Some(a.allocatable.resources()));
                        v["status"]["allocatable"] = resources.clone();
                        v["status"]["capacity"] = resources;
                        s.commit(Kind::Node, &a.node, v, false);
                    }
                    None => warn!(node = %a.node, "set-allocatable: no such node now"),
                }
                Vec::new()
            }
            // The scheduler's verdict, as the served scheduler writes it.
            EventAction::MarkUnschedulable(a) => {
                match s.get(Kind::Pod, &a.pod) {
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
                }
                Vec::new()
            }
            other => nodewarden_sim::faults::apply_event(&mut scratch, &mut self.kubelets, now, other),
        };
        for o in obs {
            served_api::write_observation(&mut s, &time, self.lease_duration, o);
        }
        drop(s);
        if budgets_changed {
            // The disruption controller publishes the new budget's status
            // at once, as the simulator's does.
            crate::pdb::refresh(&sh);
        }
    }

    fn step_controller(&mut self, now: Timestamp) {
        let Some(controller) = &mut self.controller else { return };
        let sh = self.shared.clone();
        let now = sh.time.unix_timestamp(now);
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
        let mut api = ServedApi { shared: &sh, reader: self.reader };
        controller.step(now, &mut api, &mut |_| {});
    }
}
