//! `nodewarden run`: the controller against a real API server, with
//! kube-controller-manager's flag names and defaults.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{ArgAction, Args};
use nodewarden_kube::{Health, RunOptions, WriterOptions};
use nodewarden_model::{ControllerConfig, DeletionMode, Span};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Flags of `nodewarden run` (kube-controller-manager's names).
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Path to a kubeconfig; in-cluster configuration (then $KUBECONFIG,
    /// then ~/.kube/config) when absent.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// How often node health is checked.
    #[arg(long, default_value = "5s")]
    node_monitor_period: Span,
    /// How long a node may go without a heartbeat before it is Unknown.
    #[arg(long, default_value = "40s")]
    node_monitor_grace_period: Span,
    /// Grace for a node that has just registered.
    #[arg(long, default_value = "1m")]
    node_startup_grace_period: Span,
    /// Legacy mode: how long a node is unready before its pods go.
    #[arg(long, default_value = "5m")]
    pod_eviction_timeout: Span,
    /// Nodes tainted per second in a healthy zone.
    #[arg(long, default_value_t = 0.1)]
    node_eviction_rate: f64,
    /// Nodes tainted per second in a partially disrupted large zone.
    #[arg(long, default_value_t = 0.01)]
    secondary_node_eviction_rate: f64,
    /// Zones with more nodes than this are large.
    #[arg(long, default_value_t = 50)]
    large_cluster_size_threshold: u32,
    /// Share of unready nodes that makes a zone partially disrupted.
    #[arg(long, default_value_t = 0.55)]
    unhealthy_zone_threshold: f64,
    /// false: legacy eviction (no NoExecute taints; pods deleted after
    /// --pod-eviction-timeout).
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    enable_taint_manager: bool,
    /// delete (upstream) or evict (through the Eviction API, honouring
    /// PodDisruptionBudgets).
    #[arg(long, default_value = "delete", value_parser = ["delete", "evict"])]
    pod_deletion_mode: String,
    /// Client-side requests per second to the API server.
    #[arg(long, default_value_t = 20.0)]
    kube_api_qps: f64,
    /// Client-side burst of requests to the API server.
    #[arg(long, default_value_t = 30)]
    kube_api_burst: u32,
    /// Leader election. Not implemented yet: only `false` is accepted.
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    leader_elect: bool,
    /// Read and decide as the leader would, write nothing; log and count
    /// (`nodewarden_dry_run_actions_total`) every action it would take.
    #[arg(long)]
    dry_run: bool,
    /// Where /metrics, /healthz and /readyz are served (plain HTTP).
    #[arg(long, default_value = "127.0.0.1:10257")]
    bind_address: SocketAddr,
    /// Log format on stderr: `text` for people, `json` (one object a line)
    /// for log pipelines.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Controllers to run, kube-controller-manager's way: `*` for all,
    /// a name to switch one on, `-name` to switch one off; names:
    /// node-lifecycle-controller (health, Unknown conditions, tainting),
    /// taint-eviction-controller (deleting pods that do not tolerate
    /// NoExecute taints). E.g. `*,-taint-eviction-controller` taints
    /// without evicting.
    #[arg(long, default_value = "*", value_name = "LIST", allow_hyphen_values = true)]
    controllers: String,
}

impl RunArgs {
    /// `--log-format json`.
    pub(crate) fn json_logs(&self) -> bool {
        self.log_format == "json"
    }
}

/// The controllers nodewarden is: kube-controller-manager's names.
const NODE_LIFECYCLE: &str = "node-lifecycle-controller";
const TAINT_EVICTION: &str = "taint-eviction-controller";

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
    let c = ControllerConfig {
        node_monitor_period: args.node_monitor_period,
        node_monitor_grace_period: args.node_monitor_grace_period,
        node_startup_grace_period: args.node_startup_grace_period,
        pod_eviction_timeout: args.pod_eviction_timeout,
        node_eviction_rate: args.node_eviction_rate,
        secondary_node_eviction_rate: args.secondary_node_eviction_rate,
        large_cluster_size_threshold: args.large_cluster_size_threshold,
        unhealthy_zone_threshold: args.unhealthy_zone_threshold,
        enable_taint_manager: args.enable_taint_manager,
        node_lifecycle,
        // Legacy eviction has no taint-eviction-controller: only switching
        // it off by name is refused there (by validate), leaving it out of
        // the list is not.
        taint_eviction: taint_eviction || (!args.enable_taint_manager && !eviction_switched_off),
        pod_deletion_mode: if args.pod_deletion_mode == "evict" { DeletionMode::Evict } else { DeletionMode::Delete },
    };
    c.validate().context("invalid controller flags")?;
    Ok(c)
}

/// Checks the flags and the kubeconfig (errors exit 2), then runs until
/// SIGTERM or Ctrl-C (exit 0).
pub(crate) fn run(args: &RunArgs) -> anyhow::Result<()> {
    if args.leader_elect {
        bail!(
            "--leader-elect=true: leader election is not implemented yet; run a single replica with --leader-elect=false"
        );
    }
    if !(args.kube_api_qps > 0.0 && args.kube_api_qps.is_finite()) {
        bail!("--kube-api-qps={} must be a positive number", args.kube_api_qps);
    }
    let config = config(args)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async {
        let kconfig = match &args.kubeconfig {
            Some(path) => {
                let kc = kube::config::Kubeconfig::read_from(path)
                    .with_context(|| format!("--kubeconfig {}", path.display()))?;
                kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                    .await
                    .with_context(|| format!("--kubeconfig {}", path.display()))?
            }
            None => {
                kube::Config::infer().await.context("no --kubeconfig and no in-cluster or default configuration")?
            }
        };
        let client = kube::Client::try_from(kconfig).context("kube client")?;
        let listener = tokio::net::TcpListener::bind(args.bind_address)
            .await
            .with_context(|| format!("--bind-address {}", args.bind_address))?;
        let metrics = crate::prometheus().install_recorder().context("metrics recorder")?;
        let writer = WriterOptions {
            qps: args.kube_api_qps,
            burst: args.kube_api_burst,
            instance: hostname(),
            ..WriterOptions::default()
        };
        let running = nodewarden_kube::start(client, RunOptions { config, dry_run: args.dry_run, writer })
            .context("invalid controller flags")?;
        tracing::info!(dry_run = args.dry_run, addr = %args.bind_address, "nodewarden run started");
        let health = running.health.clone();
        let stuck_after = Duration::from_secs(30).max(Duration::from_nanos(
            u64::try_from(args.node_monitor_period.as_nanos()).unwrap_or(0).saturating_mul(3),
        ));
        tokio::spawn(serve_http(listener, health, metrics, stuck_after));
        wait_for_signal().await;
        tracing::info!("stopping: no more writes");
        let would = running.stop();
        if args.dry_run {
            tracing::info!(actions = would.len(), "dry run: actions that would have been taken");
        }
        anyhow::Ok(())
    })?;
    rt.shutdown_timeout(Duration::from_secs(2));
    Ok(())
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

/// `/metrics`, `/healthz` (the engine thread went round recently) and
/// `/readyz` (every cache synced), one request per connection.
async fn serve_http(
    listener: tokio::net::TcpListener,
    health: Arc<Health>,
    metrics: metrics_exporter_prometheus::PrometheusHandle,
    stuck_after: Duration,
) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else { continue };
        let health = health.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let n = match tokio::time::timeout(Duration::from_secs(5), sock.read(&mut buf)).await {
                Ok(Ok(n)) => n,
                _ => return,
            };
            let req = String::from_utf8_lossy(&buf[..n]);
            let path = req.split_whitespace().nth(1).unwrap_or("/");
            let (code, body) = match path.split('?').next().unwrap_or("/") {
                "/metrics" => (200, metrics.render()),
                "/healthz" | "/livez" if health.alive_within(stuck_after) => (200, "ok".to_string()),
                "/healthz" | "/livez" => (500, "engine thread stuck".to_string()),
                "/readyz" if health.synced.load(Ordering::Relaxed) => (200, "ok".to_string()),
                "/readyz" => (503, "caches not synced".to_string()),
                _ => (404, "not found".to_string()),
            };
            let reason = match code {
                200 => "OK",
                404 => "Not Found",
                503 => "Service Unavailable",
                _ => "Internal Server Error",
            };
            let head = format!(
                "HTTP/1.1 {code} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(body.as_bytes()).await;
        });
    }
}
