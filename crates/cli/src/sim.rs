//! `nodewarden sim`: the controller on a simulated cluster, with progress,
//! a summary, and optionally JSON, an HTML report and Prometheus metrics.

use std::io::{self, IsTerminal, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use nodewarden_model::{ControllerConfig, Span};
use nodewarden_sim::fleet::FleetSpec;
use nodewarden_sim::report::{self, RunInfo, human, human_span};
use nodewarden_sim::{Builtin, SimOptions, Simulation, Source, load_scenario};

/// Arguments of `nodewarden sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Nodes in the simulated cluster.
    #[arg(long, default_value_t = 1000)]
    pub(crate) nodes: usize,
    /// Zones the nodes are spread over.
    #[arg(long, default_value_t = 3)]
    pub(crate) zones: usize,
    /// Pods on each node (two of them DaemonSet pods).
    #[arg(long, default_value_t = 30)]
    pub(crate) pods_per_node: usize,
    /// A built-in scenario (node-crash, zone-outage, partial-zone, flapping,
    /// control-plane-outage, controller-restart, rolling-failure,
    /// critical-addon) or a scenario file (its own nodes, pods, config and events).
    /// (default: zone-outage; with --serve, none).
    #[arg(long)]
    pub(crate) scenario: Option<String>,
    /// Run at this many times real time (60 = one simulated minute per
    /// second); as fast as possible when not given.
    #[arg(long)]
    pub(crate) speed: Option<f64>,
    /// Simulated time (e.g. 30m, 2h); the scenario's own when not given.
    #[arg(long, conflicts_with = "hours")]
    pub(crate) duration: Option<Span>,
    /// Simulated time in hours (e.g. 1, 0.5).
    #[arg(long)]
    pub(crate) hours: Option<f64>,
    /// Seed for kubelet phases, pod tolerations and which nodes fail.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// How slow the simulated API server is: `realistic` (writes land
    /// 20-200 ms after they are sent, watch events 50-500 ms after the
    /// change), `none` (each write lands at once, each change is seen at
    /// once), or `write=MIN..MAX,watch=MIN..MAX`. Default: realistic for
    /// the built-in scenarios and what-if, a scenario file's own
    /// `cluster.api` (none when absent). Not with --serve, whose API is real.
    #[arg(long, value_name = "LATENCY")]
    pub(crate) api_latency: Option<nodewarden_sim::ApiLatency>,
    /// Controller flags as a YAML mapping with kube-controller-manager's
    /// names (`node-monitor-grace-period: 50s`, ...).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Legacy eviction mode (`enable-taint-manager: false`).
    #[arg(long)]
    pub(crate) legacy: bool,
    /// Print the figures as JSON on stdout instead of the summary.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also write a self-contained HTML page with a timeline chart.
    #[arg(long, value_name = "FILE.html")]
    pub(crate) report: Option<PathBuf>,
    /// Serve the controller's Prometheus metrics here while it runs
    /// (e.g. 127.0.0.1:9090).
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics_addr: Option<SocketAddr>,
    /// No progress on stderr.
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// Serve the simulated cluster over the Kubernetes API on this address
    /// (e.g. 127.0.0.1:6443) in real time, for kubectl, k9s or any client,
    /// instead of running the controller on a virtual clock.
    #[arg(long, value_name = "ADDR")]
    pub(crate) serve: Option<SocketAddr>,
    /// With --serve: write a kubeconfig for the server to this file.
    #[arg(long, value_name = "FILE", requires = "serve")]
    pub(crate) write_kubeconfig: Option<PathBuf>,
    /// With --serve: run nodewarden's controller in-process against it.
    #[arg(long, requires = "serve")]
    pub(crate) controller: bool,
    /// With --serve, for `cargo xtask wire`: the scenario's t=0 is this
    /// Unix time (seconds, on the process's clock) rather than the start;
    /// the cluster is served from the start, its timeline waits.
    #[arg(long, hide = true, value_name = "UNIX_SECONDS", requires = "serve", value_parser = crate::unix_seconds)]
    pub(crate) start_at: Option<i64>,
    /// With --serve, for `cargo xtask wire`: keep the served cluster's
    /// journal (every stored change to a node, pod or Event, and every
    /// client write to a node or pod, with its time) in this file.
    #[arg(long, hide = true, value_name = "FILE", requires = "serve")]
    pub(crate) journal: Option<PathBuf>,
    /// With --serve: inject an API fault, KIND[:ARGS]@START[+DURATION]
    /// (outage@60s+30s, errors:0.5:503@10s+20s, throttle:1:2@0s+10s,
    /// latency:200ms@0s+1m, drop-watches@30s, freeze@60s+100s: the server
    /// and its kubelets stopped, requests held); repeatable.
    #[arg(long, value_name = "SPEC", requires = "serve")]
    pub(crate) api_fault: Vec<String>,
    /// With --serve: serve plain HTTP without authentication instead of
    /// HTTPS with a bearer token (for tools that speak raw HTTP); only on
    /// loopback unless --insecure-allow-remote.
    #[arg(long, requires = "serve")]
    pub(crate) plain_http: bool,
    /// With --serve --plain-http: allow a non-loopback address. Plain HTTP
    /// has no authentication and no TLS: anyone who can reach it can change
    /// the simulated cluster. (Over HTTPS, the default, any address is
    /// allowed: only the kubeconfig's holders can use it.)
    #[arg(long, requires = "serve")]
    pub(crate) insecure_allow_remote: bool,
    /// What-if on a real cluster: a snapshot to simulate, as
    /// `kubectl get nodes,pods,leases,daemonsets,poddisruptionbudgets -A -o json`
    /// prints it (JSON or YAML; or a directory of such files).
    #[arg(long, value_name = "FILE|DIR", conflicts_with_all = ["serve", "from_cluster"])]
    pub(crate) from_snapshot: Option<PathBuf>,
    /// What-if on a real cluster, read live (list calls only: nothing is
    /// written, no watch is opened).
    #[arg(long, conflicts_with = "serve")]
    pub(crate) from_cluster: bool,
    /// With --from-cluster: the kubeconfig (default: $KUBECONFIG, then
    /// ~/.kube/config, then in-cluster).
    #[arg(long, value_name = "FILE", requires = "from_cluster")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// What-if: this zone fails (a topology.kubernetes.io/zone value or
    /// REGION/ZONE); repeatable.
    #[arg(long, value_name = "ZONE")]
    pub(crate) fail_zone: Vec<String>,
    /// What-if: these nodes fail (comma-separated names).
    #[arg(long, value_name = "A,B,C", value_delimiter = ',')]
    pub(crate) fail_nodes: Vec<String>,
    /// What-if: the nodes with this label fail; repeatable.
    #[arg(long, value_name = "LABEL=VALUE")]
    pub(crate) fail_nodes_selector: Vec<String>,
    /// What-if: how the nodes fail: partition (cut off from the API
    /// server, as a zone's network failure) or crash.
    #[arg(long, value_name = "MODE", default_value = "partition")]
    pub(crate) fail_mode: String,
    /// What-if: when the failure starts, after the snapshot's moment.
    #[arg(long, value_name = "DURATION", default_value = "1m")]
    pub(crate) fail_at: Span,
    /// What-if: the failed nodes come back after this long (default:
    /// not within the run).
    #[arg(long, value_name = "DURATION")]
    pub(crate) recover_after: Option<Span>,
    /// What-if: the controller cannot reach the API server for this long,
    /// from --fail-at.
    #[arg(long, value_name = "DURATION")]
    pub(crate) fail_control_plane: Option<Span>,
    /// What-if: play the same failure under a second controller
    /// configuration (kube-controller-manager's flag names) and show both
    /// side by side.
    #[arg(long, value_name = "CONFIG_B")]
    pub(crate) compare: Option<PathBuf>,
}

/// The controller's flags: `--config`'s file (kube-controller-manager's
/// names) or the defaults, and `--legacy`. Shared by `sim` and
/// `sim --serve --controller`.
pub(crate) fn controller_config(args: &SimArgs) -> anyhow::Result<ControllerConfig> {
    let mut config = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            ControllerConfig::from_yaml(&text)
                .with_context(|| format!("invalid controller config {}", path.display()))?
        }
        None => ControllerConfig::default(),
    };
    if args.legacy {
        config.enable_taint_manager = false;
    }
    Ok(config)
}

fn options(args: &SimArgs) -> anyhow::Result<SimOptions> {
    if args.nodes == 0 {
        bail!("--nodes must be at least 1");
    }
    if args.zones == 0 {
        bail!("--zones must be at least 1");
    }
    if args.zones > args.nodes {
        bail!("--zones ({}) cannot exceed --nodes ({})", args.zones, args.nodes);
    }
    if let Some(speed) = args.speed
        && !(speed.is_finite() && speed > 0.0)
    {
        bail!("--speed must be a positive number (times real time), got {speed}");
    }
    let duration = match (args.duration, args.hours) {
        (Some(d), _) if d <= Span::ZERO => bail!("--duration must be positive, got {d}"),
        (Some(d), _) => Some(d),
        (None, Some(h)) => match Span::from_secs_f64(h * 3600.0).filter(|s| *s > Span::ZERO) {
            Some(s) => Some(s),
            None => bail!("--hours must be a positive number, got {h}"),
        },
        (None, None) => None,
    };
    let scenario = args.scenario.as_deref().unwrap_or("zone-outage");
    let source = match scenario.parse::<Builtin>() {
        Ok(b) => {
            crate::memory::check(args.nodes, args.pods_per_node, args.quiet)?;
            let fleet =
                FleetSpec { nodes: args.nodes, zones: args.zones, pods_per_node: args.pods_per_node, seed: args.seed };
            Source::Builtin(b, fleet)
        }
        Err(unknown) => {
            let path = Path::new(scenario);
            if !path.is_file() {
                bail!(unknown);
            }
            if args.config.is_some() {
                bail!("--config does not apply to a scenario file: the file's own `config:` is the controller's");
            }
            let mut scenario = load_scenario(path).with_context(|| format!("invalid scenario {}", path.display()))?;
            if args.legacy {
                scenario.config.enable_taint_manager = false;
            }
            Source::File(Box::new(scenario))
        }
    };
    let config = controller_config(args)?;
    Ok(SimOptions { source, config, duration, seed: args.seed, measure: true, api: args.api_latency })
}

/// Progress on stderr: a live line on a terminal, a plain line every 10%
/// otherwise.
struct ProgressLine {
    live: bool,
    quiet: bool,
    last_draw: Option<Instant>,
    next_tenth: u32,
}

impl ProgressLine {
    fn show(&mut self, sim: &Simulation, wall: Duration, force: bool) {
        if self.quiet {
            return;
        }
        let p = sim.progress();
        let total = (p.end - nodewarden_model::Timestamp::EPOCH).as_secs_f64().max(1e-9);
        let done = (p.now - nodewarden_model::Timestamp::EPOCH).as_secs_f64() / total;
        let line = format!(
            "{:>3.0}%  t={} of {}  not ready {}  tainted {}  pods evicted {}{}  ({:.1}s)",
            done * 100.0,
            human(p.now),
            human(p.end),
            p.not_ready,
            p.tainted,
            p.evicted,
            if p.violations > 0 { format!("  SAFETY VIOLATIONS {}", p.violations) } else { String::new() },
            wall.as_secs_f64()
        );
        if self.live {
            let due = force || self.last_draw.is_none_or(|at| at.elapsed() >= Duration::from_millis(100));
            if due {
                let width = 20;
                let filled = ((done * f64::from(width)) as u32).min(width);
                let bar: String = (0..width).map(|i| if i < filled { '#' } else { '.' }).collect();
                eprint!("\r[{bar}] {line}\x1b[K");
                let _ = io::stderr().flush();
                self.last_draw = Some(Instant::now());
            }
        } else {
            let tenth = (done * 10.0).floor() as u32;
            if tenth >= self.next_tenth {
                eprintln!("sim: {line}");
                self.next_tenth = tenth + 1;
            }
        }
    }

    fn done(&self) {
        if self.live && !self.quiet {
            eprintln!();
        }
    }
}

/// Publishes the simulation's own gauges next to the engine's metrics.
fn publish(sim: &Simulation) {
    let p = sim.progress();
    metrics::gauge!("nodewarden_sim_virtual_seconds").set((p.now - nodewarden_model::Timestamp::EPOCH).as_secs_f64());
    metrics::gauge!("nodewarden_sim_nodes_not_ready").set(p.not_ready as f64);
    metrics::gauge!("nodewarden_sim_nodes_tainted").set(p.tainted as f64);
    metrics::gauge!("nodewarden_sim_pods_evicted").set(p.evicted as f64);
}

/// Runs `nodewarden sim`; `Ok(true)` when every safety check held.
pub fn run(args: &SimArgs) -> anyhow::Result<bool> {
    if args.serve.is_some() {
        return crate::serve::run(args).map(|()| true);
    }
    if args.from_snapshot.is_some() || args.from_cluster {
        return crate::whatif::run(args);
    }
    let what_if_only = !args.fail_zone.is_empty()
        || !args.fail_nodes.is_empty()
        || !args.fail_nodes_selector.is_empty()
        || args.recover_after.is_some()
        || args.fail_control_plane.is_some()
        || args.compare.is_some();
    if what_if_only {
        bail!("--fail-*, --recover-after and --compare need --from-snapshot or --from-cluster");
    }
    let opts = options(args)?;
    if let Some(addr) = args.metrics_addr {
        crate::prometheus()
            .with_http_listener(addr)
            .install()
            .with_context(|| format!("cannot serve metrics on {addr}"))?;
        if !args.quiet {
            eprintln!("sim: Prometheus metrics on http://{addr}/metrics");
        }
    }
    let seed = opts.seed;
    let mut sim = Simulation::new(opts)?;
    let (_, rss_before, _) = report::process_usage();
    let (nodes, pods) = sim.size();
    if !args.quiet {
        eprintln!(
            "sim: {} on {nodes} nodes, {pods} pods; simulating {}{}",
            sim.name(),
            human_span(sim.end() - nodewarden_model::Timestamp::EPOCH),
            args.speed.map_or(" as fast as possible".to_string(), |s| format!(" at {s}x real time"))
        );
    }
    let mut progress =
        ProgressLine { live: io::stderr().is_terminal(), quiet: args.quiet, last_draw: None, next_tenth: 1 };
    let started = Instant::now();
    let mut last_publish = Instant::now();
    while sim.step()? {
        if let Some(speed) = args.speed {
            let virtual_secs = (sim.now() - nodewarden_model::Timestamp::EPOCH).as_secs_f64();
            let due = Duration::from_secs_f64((virtual_secs / speed).max(0.0));
            if let Some(ahead) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(ahead);
            }
        }
        progress.show(&sim, started.elapsed(), false);
        if args.metrics_addr.is_some() && last_publish.elapsed() >= Duration::from_millis(200) {
            publish(&sim);
            last_publish = Instant::now();
        }
    }
    let wall = started.elapsed().as_secs_f64();
    progress.show(&sim, started.elapsed(), true);
    progress.done();
    let outcome = sim.finish_before_exit();
    let (peak, _, cpu) = report::process_usage();
    let run = RunInfo {
        wall_seconds: wall,
        seed,
        peak_rss_bytes: peak,
        rss_before_controller_bytes: rss_before,
        cpu_seconds: cpu,
    };
    if let Some(path) = &args.report {
        std::fs::write(path, report::render_html(&outcome, &run))
            .with_context(|| format!("cannot write {}", path.display()))?;
        if !args.quiet {
            eprintln!("sim: report written to {}", path.display());
        }
    }
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let text = if args.json {
        let mut s = serde_json::to_string_pretty(&report::to_json(&outcome, &run, false))?;
        s.push('\n');
        s
    } else {
        report::render_text(&outcome, &run)
    };
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => return Err(e.into()),
        _ => {}
    }
    Ok(outcome.safe())
}
