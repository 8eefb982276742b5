//! `nodewarden run`: the controller against a real API server, with
//! kube-controller-manager's flag names and defaults.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use clap::{ArgAction, Args};
use nodewarden_kube::{ElectionConfig, Fence, Health, RunOptions, WriterOptions};
use nodewarden_model::flags::{
    NODE_LIFECYCLE_CONTROLLER as NODE_LIFECYCLE, TAINT_EVICTION_CONTROLLER as TAINT_EVICTION,
};
use nodewarden_model::{ControllerConfig, Span};

use crate::controller_flags::ControllerFlags;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Flags of `nodewarden run` (kube-controller-manager's names).
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Path to a kubeconfig; when absent, $KUBECONFIG, then
    /// ~/.kube/config, then the in-cluster configuration (in a pod).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The controller's flags (kube-controller-manager's node lifecycle
    /// flags and nodewarden's own), from the model's table.
    #[command(flatten)]
    controller: ControllerFlags,
    /// Client-side requests per second to the API server.
    #[arg(long, default_value_t = nodewarden_kube::DEFAULT_QPS)]
    kube_api_qps: f64,
    /// Client-side burst of requests to the API server.
    #[arg(long, default_value_t = nodewarden_kube::DEFAULT_BURST)]
    kube_api_burst: u32,
    /// Elect one writing replica through a Lease (false: this replica
    /// writes at once; run only one).
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    leader_elect: bool,
    /// How long standby replicas wait, after the leader's Lease record last
    /// changed, before taking it.
    #[arg(long, default_value_t = election_default(|e| e.lease_duration))]
    leader_elect_lease_duration: Span,
    /// How long after its last renewal was sent the leader may still write.
    #[arg(long, default_value_t = election_default(|e| e.renew_deadline))]
    leader_elect_renew_deadline: Span,
    /// How often standby replicas look at the Lease and the leader renews.
    #[arg(long, default_value_t = election_default(|e| e.retry_period))]
    leader_elect_retry_period: Span,
    /// The leader election Lease's name.
    #[arg(long, default_value_t = ElectionConfig::default().name)]
    leader_elect_resource_name: String,
    /// The leader election Lease's namespace.
    #[arg(long, default_value_t = ElectionConfig::default().namespace)]
    leader_elect_resource_namespace: String,
    /// The lock kind; only `leases` (upstream's default since 1.24).
    #[arg(long, default_value = "leases", value_parser = ["leases"])]
    leader_elect_resource_lock: String,
    /// A standby replica watches the cluster and keeps each node's health
    /// record while it waits for the Lease, so on taking it over it
    /// decides at once and judges each node by its own last heartbeat.
    /// `false`: a cold standby, as kube-controller-manager's, which
    /// watches nothing until elected (less memory while waiting; a node
    /// that dies during a failover then gets a full grace period from the
    /// new leader's first pass).
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    warm_standby: bool,
    /// Read and decide as the leader would, write nothing; log and count
    /// (`nodewarden_dry_run_actions_total`) every action it would take.
    /// Takes no part in leader election.
    #[arg(long)]
    dry_run: bool,
    /// With --dry-run, the shadow's comparison with the controller that
    /// does write (kube-controller-manager; `GET /shadow`): how long a
    /// decision of one side waits for the other's before it is called
    /// one-sided (only-nodewarden, only-upstream). Default 10m.
    #[arg(long, requires = "dry_run")]
    shadow_window: Option<Span>,
    /// Where /metrics, /healthz and /readyz are served (plain HTTP):
    /// IP:PORT, or an IP alone as kube-controller-manager takes it (the
    /// port is then 10257, its --secure-port default).
    #[arg(long, default_value = "127.0.0.1:10257", value_parser = bind_address)]
    bind_address: SocketAddr,
    /// Log format on stderr: `text` for people, `json` (one object a line)
    /// for log pipelines.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Controllers to run, kube-controller-manager's way: `*` for all,
    /// a name to switch one on, `-name` to switch one off; names:
    /// node-lifecycle-controller (health, Unknown conditions, tainting),
    /// taint-eviction-controller (deleting pods that do not tolerate
    /// NoExecute taints). E.g. `*,-taint-eviction-controller` taints
    /// without evicting.
    #[arg(long, default_value = "*", value_name = "LIST", allow_hyphen_values = true)]
    controllers: String,
    /// For `cargo xtask wire`: start the engine at this Unix time (seconds,
    /// on the process's clock) rather than at once; until then the caches
    /// fill and nothing is decided.
    #[arg(long, hide = true, value_name = "UNIX_SECONDS", value_parser = crate::unix_seconds)]
    start_at: Option<i64>,
}

/// `--log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// Lines for people.
    Text,
    /// One JSON object a line, for log pipelines.
    Json,
}

/// A leader election flag's default: the adapter's own
/// ([`ElectionConfig::default`], kube-controller-manager's).
fn election_default(pick: fn(&ElectionConfig) -> Duration) -> Span {
    Span::from_duration(pick(&ElectionConfig::default()))
}

impl RunArgs {
    /// `--log-format json`.
    pub(crate) fn json_logs(&self) -> bool {
        self.log_format == LogFormat::Json
    }
}

/// The port `--bind-address` gets when it names an IP alone:
/// kube-controller-manager's `--secure-port` default.
const DEFAULT_PORT: u16 = 10257;

/// `--bind-address`: IP:PORT (`[::1]:10257` for IPv6), or an IP alone, as
/// kube-controller-manager takes it next to its `--secure-port`: manifests
/// written for it (`--bind-address=0.0.0.0`) then work unchanged, on
/// [`DEFAULT_PORT`].
fn bind_address(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let bare = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).unwrap_or(text);
    match bare.parse::<IpAddr>() {
        Ok(ip) => Ok(SocketAddr::new(ip, DEFAULT_PORT)),
        Err(_) => Err(format!(
            "expected IP:PORT (e.g. 127.0.0.1:10257, [::]:10257) or an IP alone (then port {DEFAULT_PORT}), got {text:?}"
        )),
    }
}

/// What is wrong with a kubeconfig, once: kube-rs repeats its cause at
/// every level of the chain and quotes a path inside quotes.
fn kubeconfig_problem(e: &kube::config::KubeconfigError) -> String {
    match e {
        kube::config::KubeconfigError::ReadConfig(io, path) => {
            format!("cannot read {}: {}", path.display(), nodewarden_kube::root_cause(io))
        }
        e => without_os_error(&e.to_string()),
    }
}

fn without_os_error(text: &str) -> String {
    match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => text[..i].to_string(),
        _ => text.to_string(),
    }
}

/// The cluster to talk to, where kube-rs (and kubectl) look for it:
/// `--kubeconfig`, else the files in `$KUBECONFIG`, else
/// `~/.kube/config`, else the pod's service account (in-cluster). A
/// refusal is one line naming what was tried; when nothing was there at
/// all, it says how to point nodewarden at a cluster. Shared by `run` and
/// `sim --from-cluster`.
pub(crate) async fn kube_config(path: Option<&Path>) -> anyhow::Result<kube::Config> {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let (kubeconfig, from) = match path {
        Some(path) => {
            let from = format!("--kubeconfig {}", path.display());
            (Kubeconfig::read_from(path).map_err(|e| anyhow!("{from}: {}", kubeconfig_problem(&e)))?, from)
        }
        None => {
            let listed =
                std::env::var_os("KUBECONFIG").filter(|v| std::env::split_paths(v).any(|p| !p.as_os_str().is_empty()));
            let home = std::env::home_dir().map(|h| h.join(".kube").join("config"));
            if let Some(value) = listed {
                let from = format!("$KUBECONFIG={}", value.to_string_lossy());
                match Kubeconfig::from_env() {
                    Ok(Some(kc)) => (kc, from),
                    Ok(None) => {
                        bail!("{from}: names no file; pass --kubeconfig or set KUBECONFIG to a kubeconfig file")
                    }
                    Err(e) => bail!("{from}: {}", kubeconfig_problem(&e)),
                }
            } else if let Some(home) = home.as_ref().filter(|h| h.exists()) {
                let from = home.display().to_string();
                (Kubeconfig::read_from(home).map_err(|e| anyhow!("{from}: {}", kubeconfig_problem(&e)))?, from)
            } else if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
                return kube::Config::incluster().map_err(|e| {
                    anyhow!(
                        "in-cluster configuration (KUBERNETES_SERVICE_HOST is set): {}",
                        without_os_error(&e.to_string())
                    )
                });
            } else {
                let home = home.map_or("~/.kube/config (no home directory)".to_string(), |h| h.display().to_string());
                bail!(
                    "no cluster to talk to: no --kubeconfig, $KUBECONFIG is not set, {home} does not exist, \
                     and this is not a pod (KUBERNETES_SERVICE_HOST is not set); pass --kubeconfig or set KUBECONFIG"
                );
            }
        }
    };
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| anyhow!("{from}: {}", kubeconfig_problem(&e)))
}

/// Which controllers `--controllers` switches on: (node lifecycle, taint
/// eviction, taint eviction switched off by name). As in
/// kube-controller-manager, `*` switches on every controller, a name
/// switches one on, `-name` off (which wins over `*`); a name nodewarden
/// does not know is refused rather than ignored, so a typo cannot leave a
/// controller running that the operator meant to stop.
fn controllers(list: &str) -> anyhow::Result<(bool, bool, bool)> {
    let (mut all, mut on, mut off) = (false, Vec::new(), Vec::new());
    for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, switch_on) = match item.strip_prefix('-') {
            Some(n) => (n, false),
            None => (item, true),
        };
        match name {
            "*" if switch_on => all = true,
            NODE_LIFECYCLE | TAINT_EVICTION => {
                if switch_on {
                    on.push(name)
                } else {
                    off.push(name)
                }
            }
            _ => bail!(
                "--controllers={list}: unknown controller {item:?}; known: *, {NODE_LIFECYCLE}, {TAINT_EVICTION} (each may be prefixed with -)"
            ),
        }
    }
    let enabled = |name: &str| !off.contains(&name) && (all || on.contains(&name));
    Ok((enabled(NODE_LIFECYCLE), enabled(TAINT_EVICTION), off.contains(&TAINT_EVICTION)))
}

fn config(args: &RunArgs) -> anyhow::Result<ControllerConfig> {
    let (node_lifecycle, taint_eviction, eviction_switched_off) = controllers(&args.controllers)?;
    let mut c = args.controller.config.clone();
    c.node_lifecycle = node_lifecycle;
    // Legacy eviction has no taint-eviction-controller: only switching it
    // off by name is refused there (by validate), leaving it out of the
    // list is not.
    c.taint_eviction = taint_eviction || (!c.enable_taint_manager && !eviction_switched_off);
    c.validate().context("invalid controller flags")?;
    Ok(c)
}

fn duration(flag: &'static str, span: Span) -> anyhow::Result<Duration> {
    u64::try_from(span.as_nanos())
        .map(Duration::from_nanos)
        .map_err(|_| anyhow::anyhow!("{flag}={span} must not be negative"))
}

fn election(args: &RunArgs, identity: &str) -> anyhow::Result<ElectionConfig> {
    let c = ElectionConfig {
        namespace: args.leader_elect_resource_namespace.clone(),
        name: args.leader_elect_resource_name.clone(),
        identity: identity.to_string(),
        lease_duration: duration("--leader-elect-lease-duration", args.leader_elect_lease_duration)?,
        renew_deadline: duration("--leader-elect-renew-deadline", args.leader_elect_renew_deadline)?,
        retry_period: duration("--leader-elect-retry-period", args.leader_elect_retry_period)?,
    };
    c.validate()?;
    Ok(c)
}

/// How `nodewarden run` ended, when it did not fail to start.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// SIGTERM or Ctrl-C: writes stopped, the Lease released.
    Stopped,
    /// The Lease could not be renewed in time: writes stopped at the renew
    /// deadline; the process exits so that a fresh one (or the standby)
    /// rebuilds state from the cluster, as kube-controller-manager does.
    LeadershipLost,
}

/// Where this replica stands, for `/readyz` and `/healthz`.
struct Role {
    /// Set once this replica leads (or runs without election) and its
    /// controller has started.
    running: std::sync::OnceLock<Arc<Health>>,
    /// A `--dry-run` replica's shadow summary, once its controller runs.
    shadow: std::sync::OnceLock<nodewarden_kube::ShadowBoard>,
    /// The API server's URL, for messages.
    server: String,
    /// Set by [`reach`] when the API server first answers a request with
    /// success; never cleared. A standby that has never reached it is not
    /// ready: it could not take over, and a rollout must not count it.
    reached: AtomicBool,
    /// Why the last attempt to reach the API server failed, while it has
    /// never been reached.
    failure: std::sync::Mutex<Option<String>>,
}

impl Role {
    /// `GET /shadow`: the shadow's summary as JSON; an error object (with
    /// a status saying which) on a replica without one, or before its
    /// first summary.
    fn shadow_json(&self) -> (u16, String) {
        let error = |code: u16, message: &str| (code, serde_json::json!({ "error": message }).to_string());
        let Some(board) = self.shadow.get() else {
            return error(404, "no shadow here: /shadow is served by a `nodewarden run --dry-run` replica");
        };
        let summary = board.lock().ok().and_then(|b| b.clone());
        match summary.map(|s| serde_json::to_string(&s)) {
            Some(Ok(json)) => (200, json),
            Some(Err(e)) => error(500, &format!("the summary could not be written as JSON: {e}")),
            None => error(503, "the shadow has no summary yet: its watches have not all listed once"),
        }
    }

    fn new(server: String) -> Role {
        Role {
            running: std::sync::OnceLock::new(),
            shadow: std::sync::OnceLock::new(),
            server,
            reached: AtomicBool::new(false),
            failure: Default::default(),
        }
    }

    /// Returns once the API server has answered ([`reach`]).
    async fn until_reached(&self) {
        while !self.reached.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `/readyz` of a replica that does not run the controller (yet).
    fn standby_readiness(&self) -> (u16, String) {
        if self.reached.load(Ordering::Relaxed) {
            return (200, "ok: standby".to_string());
        }
        match self.failure.lock().ok().and_then(|f| f.clone()) {
            Some(why) => (503, format!("not ready: the API server has never been reached; {why}")),
            None => (503, format!("not ready: the API server at {} has not answered yet", self.server)),
        }
    }
}

/// How long one attempt to reach the API server may take.
const REACH_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause between two attempts.
const REACH_RETRY: Duration = Duration::from_secs(2);
/// How often an unchanged failure is logged again.
const REACH_REPEAT: Duration = Duration::from_secs(30);

/// Asks the API server for its version until it answers: then marks the
/// replica as having reached it ([`Role::reached`]). Until then each
/// failure is kept for `/readyz` and logged with the server's URL and the
/// cause: the first one, each change of cause, and every 30 s.
async fn reach(client: kube::Client, role: Arc<Role>) {
    let server = role.server.clone();
    let mut said: Option<(String, tokio::time::Instant)> = None;
    loop {
        let why = match tokio::time::timeout(REACH_TIMEOUT, client.apiserver_version()).await {
            Ok(Ok(v)) => {
                role.reached.store(true, Ordering::Relaxed);
                crate::api_reached();
                tracing::info!(server = %server, version = %v.git_version, "reached the API server");
                return;
            }
            Ok(Err(e)) => match (nodewarden_kube::unreachable_cause(&e), e) {
                (Some(cause), _) => format!("cannot reach {server}: {cause}"),
                (None, kube::Error::Api(s)) => {
                    format!("{server} answered GET /version with {} {}: {}", s.code, s.reason, s.message)
                }
                (None, e) => format!("{server} answered GET /version with something unreadable: {e}"),
            },
            Err(_) => format!("{server} did not answer GET /version within {}s", REACH_TIMEOUT.as_secs()),
        };
        if let Ok(mut f) = role.failure.lock() {
            *f = Some(why.clone());
        }
        let now = tokio::time::Instant::now();
        if said.as_ref().is_none_or(|(last, at)| *last != why || now - *at >= REACH_REPEAT) {
            tracing::warn!("{why}; trying again every {}s", REACH_RETRY.as_secs());
            said = Some((why, now));
        }
        tokio::time::sleep(REACH_RETRY).await;
    }
}

/// Checks the flags and the kubeconfig (errors exit 2), then runs until
/// SIGTERM or Ctrl-C, or until leadership is lost.
pub(crate) fn run(args: &RunArgs) -> anyhow::Result<Ended> {
    if !(args.kube_api_qps > 0.0 && args.kube_api_qps.is_finite()) {
        bail!("--kube-api-qps={} must be a positive number", args.kube_api_qps);
    }
    let config = config(args)?;
    let identity = nodewarden_kube::process_identity(&hostname());
    let elect = args.leader_elect && !args.dry_run;
    let election = if elect { Some(election(args, &identity)?) } else { None };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let ended = rt.block_on(async {
        let (server, Clients { controller: client, election: election_client, probe: probe_client }) =
            clients(args, &identity).await?;
        let role = serve_endpoints(args, &client, &server).await?;
        let signal = wait_for_signal();
        tokio::pin!(signal);
        let start_at = args.start_at.map(nodewarden_model::Timestamp::from_nanos);
        let writer = WriterOptions {
            qps: args.kube_api_qps,
            burst: args.kube_api_burst,
            instance: identity.clone(),
            ..WriterOptions::default()
        };
        let fence = election.as_ref().map(|_| Fence::closed());
        let start = |standby: bool| {
            let options = RunOptions {
                config: config.clone(),
                dry_run: args.dry_run,
                writer: writer.clone(),
                fence: fence.clone(),
                start_at,
                standby,
                probe_client: Some(nodewarden_kube::ProbeClient(probe_client.clone())),
                shadow_window: args.shadow_window,
            };
            nodewarden_kube::start(client.clone(), options).context("invalid controller flags")
        };
        // A warm standby watches and keeps its records while it waits; its
        // writes stay behind the closed fence, and it decides nothing. It
        // starts watching once the API server has answered (until then
        // `reach` says why not, once, rather than every watch every retry).
        let warm = if election.is_some() && args.warm_standby {
            tokio::select! {
                () = role.until_reached() => {}
                () = &mut signal => {
                    tracing::info!("stopped before reaching the API server");
                    return anyhow::Ok(Ended::Stopped);
                }
            }
            tracing::info!("warm standby: watching the cluster while waiting for the Lease");
            Some(start(true)?)
        } else {
            None
        };
        let leadership = match election {
            None => None,
            Some(election) => {
                tracing::info!(
                    identity = %identity,
                    lease = format!("{}/{}", election.namespace, election.name),
                    "waiting to become the leader"
                );
                let fence = fence.clone().unwrap_or_else(Fence::closed);
                tokio::select! {
                    won = nodewarden_kube::campaign(election_client, election, fence) => {
                        Some(won.context("leader election")?)
                    }
                    () = &mut signal => {
                        tracing::info!("stopped before becoming the leader");
                        if let Some(warm) = warm {
                            warm.stop();
                        }
                        return anyhow::Ok(Ended::Stopped);
                    }
                }
            }
        };
        let running = match warm {
            Some(warm) => {
                warm.take_over();
                warm
            }
            None => start(false)?,
        };
        let _ = role.running.set(running.health.clone());
        if let Some(board) = &running.shadow {
            let _ = role.shadow.set(board.clone());
        }
        tracing::info!(dry_run = args.dry_run, addr = %args.bind_address, identity = %identity, "nodewarden run started");
        let lost = async {
            match &leadership {
                Some(l) => l.lost().await,
                None => std::future::pending().await,
            }
        };
        let ended = tokio::select! {
            () = &mut signal => Ended::Stopped,
            () = lost => Ended::LeadershipLost,
        };
        finish(&ended, running, leadership, args.dry_run).await;
        anyhow::Ok(ended)
    })?;
    rt.shutdown_timeout(Duration::from_secs(2));
    Ok(ended)
}

/// Binds `--bind-address` and serves `/metrics`, `/healthz` and `/readyz`
/// there, with a task saying (until it can) why the API server at `server`
/// is not reached; returns the replica's role the endpoints report.
async fn serve_endpoints(args: &RunArgs, client: &kube::Client, server: &str) -> anyhow::Result<Arc<Role>> {
    let listener = tokio::net::TcpListener::bind(args.bind_address)
        .await
        .with_context(|| format!("--bind-address {}", args.bind_address))?;
    let metrics = crate::prometheus().install_recorder().context("metrics recorder")?;
    let role = Arc::new(Role::new(server.to_string()));
    let serving = listener.local_addr().unwrap_or(args.bind_address);
    tracing::info!("serving /metrics, /healthz and /readyz on http://{serving}");
    tokio::spawn(reach(client.clone(), role.clone()));
    let stuck_after = Duration::from_secs(30).max(Duration::from_nanos(
        u64::try_from(args.controller.config.node_monitor_period.as_nanos()).unwrap_or(0).saturating_mul(3),
    ));
    tokio::spawn(serve_http(listener, role.clone(), metrics, stuck_after));
    Ok(role)
}

/// The clients of one replica: the controller's (watches and writes),
/// leader election's and the API probe's.
struct Clients {
    controller: kube::Client,
    /// Its own connections, as kube-controller-manager's: the Lease is
    /// renewed whatever the writer's backlog, rate limit or throttling.
    election: kube::Client,
    /// Its own connections too: a probe queued behind the writer's
    /// requests on a saturated connection would read a busy client as a
    /// silent server.
    probe: kube::Client,
}

/// A client of `kconfig` whose User-Agent says what it is for.
fn client_for(kconfig: &kube::Config, agent: &str, what: &str) -> anyhow::Result<kube::Client> {
    let mut config = kconfig.clone();
    config.headers.retain(|(name, _)| name != http::header::USER_AGENT);
    config.headers.push((
        http::header::USER_AGENT,
        format!("{agent} {what}").parse().context("the replica's identity is not a valid User-Agent header")?,
    ));
    kube::Client::try_from(nodewarden_kube::controller_config(config))
        .with_context(|| format!("kube client for {what}"))
}

/// The kubeconfig's server and the replica's clients ([`Clients`]), each
/// with a User-Agent naming this replica.
async fn clients(args: &RunArgs, identity: &str) -> anyhow::Result<(String, Clients)> {
    let mut kconfig = kube_config(args.kubeconfig.as_deref()).await?;
    let server = nodewarden_kube::server_url(&kconfig);
    // The API server's audit log (and our test server) tell replicas
    // apart by this.
    let agent = format!("nodewarden/{} ({identity})", env!("CARGO_PKG_VERSION"));
    kconfig.headers.push((
        http::header::USER_AGENT,
        agent.parse().context("the replica's identity is not a valid User-Agent header")?,
    ));
    let election = client_for(&kconfig, &agent, "leader-election")?;
    let probe = client_for(&kconfig, &agent, "probe")?;
    let controller = nodewarden_kube::controller_client(kconfig).context("kube client")?;
    Ok((server, Clients { controller, election, probe }))
}

/// Says why the run ends, stops the controller (a dry run lists what it
/// would have done) and gives the Lease back if this replica held it.
async fn finish(
    ended: &Ended,
    running: nodewarden_kube::Running,
    leadership: Option<nodewarden_kube::Leadership>,
    dry_run: bool,
) {
    match ended {
        Ended::Stopped => tracing::info!("stopping: no more writes"),
        Ended::LeadershipLost => tracing::error!(
            "leadership lost: the Lease was not renewed within --leader-elect-renew-deadline; \
             no more writes; exiting so that a fresh process rebuilds its state from the cluster"
        ),
    }
    let would = running.stop();
    if dry_run {
        tracing::info!(actions = would.len(), "dry run: actions that would have been taken");
    }
    if let Some(l) = leadership {
        l.release().await;
    }
}

fn hostname() -> String {
    std::env::var("HOSTNAME").unwrap_or_else(|_| "nodewarden".into())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// `/metrics`, `/healthz` (the engine thread went round recently; a
/// standby replica is healthy while it waits) and `/readyz` (every cache
/// synced; a standby replica is ready once it has reached the API server,
/// so that rollouts and disruption budgets count it, but not before: it
/// could not take over), one request per connection.
async fn serve_http(
    listener: tokio::net::TcpListener,
    role: Arc<Role>,
    metrics: metrics_exporter_prometheus::PrometheusHandle,
    stuck_after: Duration,
) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else { continue };
        let role = role.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let n = match tokio::time::timeout(Duration::from_secs(5), sock.read(&mut buf)).await {
                Ok(Ok(n)) => n,
                _ => return,
            };
            let req = String::from_utf8_lossy(&buf[..n]);
            let path = req.split_whitespace().nth(1).unwrap_or("/");
            let health = role.running.get();
            let path = path.split('?').next().unwrap_or("/");
            if path == "/shadow" {
                let (code, body) = role.shadow_json();
                respond(&mut sock, code, "application/json", &body).await;
                return;
            }
            let (code, body): (u16, String) = match (path, health) {
                ("/metrics", _) => (200, metrics.render()),
                ("/healthz" | "/livez", None) => (200, "ok: standby".to_string()),
                ("/readyz", None) => role.standby_readiness(),
                ("/healthz" | "/livez", Some(h)) if h.alive_within(stuck_after) => (200, "ok".to_string()),
                ("/healthz" | "/livez", Some(_)) => (500, "engine thread stuck".to_string()),
                ("/readyz", Some(h)) if h.synced.load(Ordering::Relaxed) => (200, "ok".to_string()),
                ("/readyz", Some(_)) => (503, "caches not synced".to_string()),
                _ => (404, "not found".to_string()),
            };
            respond(&mut sock, code, "text/plain; charset=utf-8", &body).await;
        });
    }
}

/// Writes one HTTP/1.1 answer and lets the connection close.
async fn respond(sock: &mut tokio::net::TcpStream, code: u16, content_type: &str, body: &str) {
    let reason = match code {
        200 => "OK",
        404 => "Not Found",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = sock.write_all(head.as_bytes()).await;
    let _ = sock.write_all(body.as_bytes()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `nodewarden run` stands in for the oldest supported
    /// kube-controller-manager: with no flag its configuration is that
    /// release's defaults, which a what-if on an unknown version plays too.
    #[test]
    fn runs_defaults_are_the_oldest_supported_kube_controller_managers() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            run: RunArgs,
        }
        let cli = <Cli as clap::Parser>::try_parse_from(["run"]).expect("parses");
        let upstream = ControllerConfig::of_kube_controller_manager(nodewarden_model::KubeVersion::OLDEST_SUPPORTED);
        assert_eq!(config(&cli.run).expect("valid"), upstream);
    }

    #[test]
    fn bind_address_takes_kube_controller_managers_bare_ip() {
        let ok = |text: &str| bind_address(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(ok("127.0.0.1:8080"), "127.0.0.1:8080".parse().expect("addr"));
        assert_eq!(ok("0.0.0.0"), "0.0.0.0:10257".parse().expect("addr"));
        assert_eq!(ok("::"), "[::]:10257".parse().expect("addr"));
        assert_eq!(ok("[::1]"), "[::1]:10257".parse().expect("addr"));
        assert_eq!(ok("[::1]:9000"), "[::1]:9000".parse().expect("addr"));
        let e = bind_address("localhost").expect_err("a name is not an IP");
        assert!(e.contains("IP:PORT") && e.contains("an IP alone (then port 10257)"), "{e}");
    }
}
