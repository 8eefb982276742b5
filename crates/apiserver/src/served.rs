//! Serving a cluster: the options, and [`Served`], which builds the
//! cluster, starts the HTTP server and the driver, and hands out what a
//! client needs (address, kubeconfig, credentials).
//!
//! This is the composition root: the one module that knows both the
//! domain (the cluster and its driver) and the HTTP layer. Invariant: the
//! cluster is fully populated before the first request can be accepted.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodewarden_cluster::fleet::FleetSpec;
use nodewarden_cluster::{AdmissionDefaults, Builtin, KubeletTiming};
use nodewarden_model::{ControllerConfig, Timestamp};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tracing::info;

use crate::cluster::ServedCluster;
use crate::driver::{self, Driver, DriverSettings, StatusLine};
use crate::faults::{ApiFaults, PlannedApiFault};
use crate::http::{Credentials, HttpState, RequestRecord, Security, ServerConfig, TlsError, WriteRecord};
use crate::populate::{BadFleet, ServeSource, populate};
use crate::store::StoreLimits;
use nodewarden_objects::TimeBase;

/// How to serve it: everything `nodewarden sim --serve`'s flags choose,
/// so a test serves exactly what a user would.
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
    /// (the served scheduler). A scenario file's `cluster.scheduler: true`
    /// and the `critical-addon` built-in turn it on as well. Off, pods stay
    /// unbound until a client binds them, as before. With it, the pods a
    /// controller owns are recreated when deleted.
    pub scheduler: bool,
    /// The scenario's t=0 (`Timestamp::EPOCH`) at this Unix time of the
    /// process's clock, in nanoseconds, rather than at the start: the
    /// cluster is served at once and its timeline waits for it
    /// (`cargo xtask wire` starts the controller then).
    pub zero_unix_nanos: Option<i64>,
    /// Keep a journal of every change to nodes, pods and Events, and of
    /// every client write to a node or pod, in this file
    /// ([`journal`](crate::journal); `cargo xtask wire` judges from it).
    pub journal: Option<std::path::PathBuf>,
    /// Keep a journal of every client request to a node or pod, reads
    /// included, in this file ([`journal`](crate::journal); `cargo xtask
    /// wire-load` counts each evicted pod's requests from it).
    pub request_journal: Option<std::path::PathBuf>,
    /// The DefaultTolerationSeconds admission plugin's settings
    /// (kube-apiserver's `--default-not-ready-toleration-seconds` and
    /// `--default-unreachable-toleration-seconds`) for a generated fleet,
    /// its pods included; a scenario file's `cluster:` says its own.
    pub fleet_admission: AdmissionDefaults,
    /// A built-in scenario's partitioned nodes reach the API server again
    /// at this scenario time rather than its own ([`FaultPlan::heal_at`]).
    ///
    /// [`FaultPlan::heal_at`]: nodewarden_cluster::FaultPlan::heal_at
    pub heal_at: Option<Timestamp>,
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
            request_journal: None,
            fleet_admission: AdmissionDefaults::default(),
            heal_at: None,
        }
    }
}

/// Why the cluster could not be served: each is the user's to fix (the
/// fleet's shape, the controller's flags) or the machine's (the port, the
/// certificate).
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
    Tls(#[from] TlsError),
}

/// A running served cluster: what `nodewarden sim --serve` and the tests
/// hold to reach it, inspect it and stop it.
pub struct Served {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The served cluster (store, clock, faults), for tests that look
    /// into it or change it behind the API's back.
    pub shared: Arc<ServedCluster>,
    /// What the HTTP side keeps (its logs).
    http: Arc<HttpState>,
    status: Arc<Mutex<StatusLine>>,
    tasks: Vec<JoinHandle<()>>,
    /// The CA and token, over HTTPS ([`Security::Https`]).
    credentials: Option<Arc<Credentials>>,
}

impl Served {
    /// Builds the cluster and serves it on `listener`; it runs until
    /// [`Served::stop`] (or the runtime ends).
    pub async fn start(opts: ServeOptions, listener: TcpListener) -> Result<Served, ServeError> {
        let addr = listener.local_addr()?;
        let time = match opts.zero_unix_nanos {
            Some(unix_nanos_at_epoch) => TimeBase { unix_nanos_at_epoch },
            None => TimeBase::starting_now(),
        };
        let admission = match &opts.source {
            ServeSource::File(s) => AdmissionDefaults::from(&s.cluster),
            ServeSource::Fleet(..) => opts.fleet_admission,
        };
        let cluster = Arc::new(ServedCluster::new(opts.limits, time, admission));
        if let Some(path) = &opts.journal {
            let journal = crate::journal::Journal::create(path, time)?;
            cluster.store.keep_journal(Arc::new(journal));
        }
        let mut populated = populate(&opts.source, &opts.timing, opts.lease_duration_secs, &cluster)
            .map_err(|BadFleet(why)| ServeError::Fleet(why))?;
        if let Some(at) = opts.heal_at
            && !populated.plan.heal_at(at)
        {
            return Err(ServeError::Fleet(format!(
                "a heal time was given, but {} heals no partition (zone-outage does)",
                populated.name
            )));
        }
        if opts.zero_unix_nanos.is_none() && matches!(opts.source, ServeSource::Fleet(..)) {
            // The fleet's kubelets were phased from the clock's zero, taken
            // before the build: they start beating from now instead, as a
            // fleet already running when its API server comes up would.
            populated.kubelets.postpone(time.now() - Timestamp::EPOCH);
        }
        let critical_addon = matches!(opts.source, ServeSource::Fleet(_, Some(Builtin::CriticalAddon)));
        if critical_addon && opts.controller.is_none() {
            info!(
                "critical-addon without --controller: run `nodewarden run --enable-rescheduler` against this server \
                 to make room for the addons"
            );
        }
        let controller = match &opts.controller {
            Some(config) => Some(driver::in_process_controller(config, critical_addon, &cluster)?),
            None => None,
        };
        let status = Arc::new(Mutex::new(StatusLine::default()));
        let scheduler =
            opts.scheduler || critical_addon || matches!(&opts.source, ServeSource::File(f) if f.cluster.scheduler);
        if populated.tracks_scheduling || scheduler {
            cluster.hold_graceful_deletions();
        }
        let credentials = match opts.server.security {
            Security::Https => Some(Arc::new(Credentials::generate(addr, &opts.server.tls_sans)?)),
            Security::PlainHttp => None,
        };
        let http = Arc::new(HttpState::new(cluster.clone(), opts.server.clone()));
        if let Some(path) = &opts.request_journal {
            let _ = http.request_journal.set(crate::journal::Journal::create(path, time)?);
        }
        let server = tokio::spawn(crate::http::serve(listener, http.clone(), credentials.clone()));
        let name = populated.name.clone();
        let settings = DriverSettings {
            api_faults: opts.api_faults.clone(),
            scenario_speed: opts.scenario_speed,
            lease_duration: opts.lease_duration_secs,
            tick: opts.tick,
            scheduler,
        };
        let driver = Driver::new(cluster.clone(), populated, settings, controller, status.clone());
        info!(%addr, scenario = %name, "serving the simulated cluster");
        let driver = tokio::spawn(driver.run());
        Ok(Served { addr, shared: cluster, http, status, tasks: vec![server, driver], credentials })
    }

    /// Every write accepted so far (empty unless
    /// [`ServerConfig::record_writes`] is on).
    pub fn writes(&self) -> Vec<WriteRecord> {
        self.http.writes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Every request received so far (empty unless
    /// [`ServerConfig::record_requests`] is on).
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.http.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The API faults, for a test (or the cli) to inject by hand beside
    /// the planned ones.
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
    /// whoever holds it can use (and change) the cluster. With
    /// `--tls-san`, its server is the first of those names at the bound
    /// port: the kubeconfig is for the clients the names are for.
    pub fn kubeconfig(&self) -> String {
        match &self.credentials {
            Some(c) => {
                let url = match self.http.config.tls_sans.first() {
                    Some(host) => match host.parse::<std::net::IpAddr>() {
                        Ok(ip) => format!("https://{}", SocketAddr::new(ip, self.addr.port())),
                        Err(_) => format!("https://{host}:{}", self.addr.port()),
                    },
                    None => self.url(),
                };
                secure_kubeconfig(&url, c.ca_pem(), c.token())
            }
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

    /// The status line now, for a terminal that shows the cluster without
    /// being a client of it.
    pub fn status(&self) -> StatusLine {
        self.status.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Stops serving and driving, so a test can end one cluster and start
    /// another in the same process.
    pub fn stop(self) {
        for t in self.tasks {
            t.abort();
        }
    }
}

/// A kubeconfig for a server at `url` (plain HTTP, no credentials), for
/// tools that reach a served cluster without its own [`Served`].
pub fn kubeconfig(url: &str) -> String {
    kubeconfig_with(url, "", " {}")
}

/// A kubeconfig for an HTTPS server at `url` whose certificate `ca_pem`
/// signed, for the user holding `token`: what a client needs to trust the
/// served cluster, and to be trusted by it.
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
