//! `nodewarden`: the node lifecycle controller's binary.
//!
//! `nodewarden sim` runs the controller on a simulated cluster (1000 nodes
//! in 3 zones by default) through a failure and summarises what it did;
//! it exits 0 when every safety check held, 1 when one failed, 2 on bad
//! flags or input.
//!
//! `nodewarden replay FILE` runs the real engine on a scenario with a
//! virtual clock and exits 0 when every expectation holds, 1 when one fails
//! (or the controller broke a rule it must keep), 2 when the file cannot be
//! read or is not a valid scenario.

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use nodewarden_cluster::{ApiLatency, EventAction, Scenario, ScenarioError, load_scenario};
use nodewarden_sim::{Record, ReplayOptions, replay_to_writer, replay_with};
use tracing_subscriber::EnvFilter;

mod controller_flags;
mod memory;
mod run;

/// The process's allocator (see crates/cli/Cargo.toml for why jemalloc):
/// what a served cluster's build or a large list frees goes back for reuse
/// instead of staying as holes in glibc's heap.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

mod serve;
mod shadow;
mod sim;
mod sim_args;
mod whatif;

/// Exit code: every expectation held.
const EXIT_OK: u8 = 0;
/// Exit code: an expectation failed, or the controller broke its contract.
const EXIT_FAILED: u8 = 1;
/// Exit code: the input could not be used (unreadable or invalid file).
const EXIT_INVALID: u8 = 2;

/// nodewarden: a Kubernetes node lifecycle controller.
#[derive(Debug, Parser)]
#[command(name = "nodewarden", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the controller on a simulated cluster through a failure.
    ///
    /// Builds a cluster of simulated nodes with heartbeating kubelets and
    /// pods, injects a failure (default: one zone loses contact with the
    /// API server), runs the real controller on a virtual clock, and prints
    /// per zone when nodes were seen dead, tainted and their pods evicted,
    /// against what the configuration predicts. Exits 0 when every safety
    /// check held, 1 when one failed, 2 on bad flags or input.
    Sim(Box<sim_args::SimArgs>),
    /// Replay a scenario file against the controller on a virtual clock.
    ///
    /// Prints one JSON object a line: every write the controller made,
    /// every zone state change, each expectation's result, then a summary.
    /// Exits 0 when every expectation holds, 1 when one fails, 2 when the
    /// file is invalid.
    Replay(ReplayArgs),
    /// Run the controller against a Kubernetes API server (kube-controller-manager's flags).
    Run(Box<run::RunArgs>),
    /// Read a `--dry-run` replica's comparison with kube-controller-manager.
    Shadow(shadow::ShadowArgs),
}

#[derive(Debug, Args)]
struct ReplayArgs {
    /// The scenario, YAML or JSON.
    file: PathBuf,
    /// Print only failed expectations (and violations) and the summary.
    #[arg(long, short)]
    quiet: bool,
    /// Instead of the JSON lines, print why the controller deleted this pod
    /// (namespace/name): the heartbeats it saw, the taint, the toleration
    /// or timeout, the zone rate, the deadline.
    #[arg(long, value_name = "NAMESPACE/NAME", conflicts_with = "quiet")]
    explain: Option<String>,
    /// How slow the API server between the controller and the cluster is:
    /// `none` (each write lands at once), `realistic` (writes 20-200 ms,
    /// watch events 50-500 ms late), or `write=MIN..MAX,watch=MIN..MAX`;
    /// add `,qps=N,burst=N` for the controller's client rate. Overrides
    /// the file's `cluster.api` (its client rate stays unless this gives
    /// one); without either, none. With
    /// latency an expectation holds when it comes true within a tolerance
    /// after its time (the summary line says how much).
    #[arg(long, value_name = "LATENCY")]
    api_latency: Option<ApiLatency>,
    /// Seed of the latency draws: the same seed gives the same run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A simulated control-plane outage refuses every write: one warning per
    // refused write would bury the progress line, so `sim` keeps those quiet
    // (ingest logs refused writes; the taint manager and legacy eviction log
    // their refused deletions as they retry them). `--from-cluster` reports
    // a failed listing itself, with the server's URL and the cause.
    let json = matches!(&cli.command, Command::Run(args) if args.json_logs());
    let run = matches!(&cli.command, Command::Run(_));
    init_logging(
        match cli.command {
            Command::Sim(_) => {
                "warn,nodewarden_engine::ingest=error,nodewarden_engine::systems::taint_manager=error,\
                 nodewarden_engine::systems::legacy=error,kube_client::client::builder=off"
            }
            Command::Replay(_) | Command::Shadow(_) => "warn",
            Command::Run(_) => "info",
        },
        json,
        run,
    );
    // `cargo xtask wire` runs the served cluster and the controller on one
    // compressed clock (`nodewarden_model::wall`).
    match nodewarden_model::wall::install_from_env() {
        Ok(d) if d.rate != 1.0 => {
            tracing::info!(rate = d.rate, "the clock runs faster than real time ({})", nodewarden_model::wall::ENV)
        }
        Ok(_) => {}
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_INVALID);
        }
    }
    let code = match cli.command {
        Command::Replay(args) => replay(&args),
        Command::Run(args) => match run::run(&args) {
            Ok(run::Ended::Stopped) => EXIT_OK,
            Ok(run::Ended::LeadershipLost) => EXIT_FAILED,
            Err(e) => {
                eprintln!("error: {e:#}");
                EXIT_INVALID
            }
        },
        Command::Shadow(args) => match shadow::run(&args) {
            Ok(true) => EXIT_OK,
            Ok(false) => EXIT_FAILED,
            Err(e) => {
                eprintln!("error: {e:#}");
                EXIT_INVALID
            }
        },
        Command::Sim(args) => match sim::run(*args) {
            Ok(true) => EXIT_OK,
            Ok(false) => EXIT_FAILED,
            Err(e) => {
                eprintln!("error: {e:#}");
                EXIT_INVALID
            }
        },
    };
    ExitCode::from(code)
}

/// kube-rs's log target for a request that failed: one line per failure,
/// naming neither the server nor the cause (`client error (Connect)`).
const KUBE_CLIENT_FAILURES: &str = "kube_client::client::builder";

/// Undoes the quieting of [`KUBE_CLIENT_FAILURES`]; set by [`init_logging`].
static ON_API_REACHED: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>> = std::sync::OnceLock::new();

/// `nodewarden run` reached the API server for the first time: from now
/// on kube-rs's line per failed request is logged again (by default).
pub(crate) fn api_reached() {
    if let Some(restore) = ON_API_REACHED.get() {
        restore();
    }
}

/// Logs go to stderr, filtered by `RUST_LOG` (or else by `default`), so
/// that stdout carries only the output. `json`: one JSON object a line
/// (timestamp, level, target, message and fields), for log pipelines that
/// parse what a controller running in a cluster writes.
///
/// `quiet_until_reached` (`run`, without `RUST_LOG`): until the API server
/// has answered once, kube-rs's own line per failed request is left out,
/// since `run` logs every failed attempt to reach it with the server's URL
/// and the cause; [`api_reached`] brings those lines back.
fn init_logging(default: &str, json: bool, quiet_until_reached: bool) {
    let from_env = EnvFilter::try_from_default_env().ok();
    let quiet = quiet_until_reached && from_env.is_none();
    let filter = from_env.unwrap_or_else(|| match quiet {
        true => EnvFilter::new(format!("{default},{KUBE_CLIENT_FAILURES}=off")),
        false => EnvFilter::new(default),
    });
    let builder = tracing_subscriber::fmt().with_writer(io::stderr).with_env_filter(filter);
    fn restore_on_reach<S: 'static>(handle: tracing_subscriber::reload::Handle<EnvFilter, S>, default: &str) {
        let default = default.to_string();
        // Only `main` sets it, once.
        let _ = ON_API_REACHED.set(Box::new(move || {
            let _ = handle.reload(EnvFilter::new(&default));
        }));
    }
    // A second initialisation cannot happen here; ignore it rather than panic.
    let _ = if json {
        let builder = builder.json().flatten_event(true).with_filter_reloading();
        if quiet {
            restore_on_reach(builder.reload_handle(), default);
        }
        builder.try_init()
    } else {
        let builder = builder.with_ansi(io::stderr().is_terminal()).with_filter_reloading();
        if quiet {
            restore_on_reach(builder.reload_handle(), default);
        }
        builder.try_init()
    };
}

fn replay(args: &ReplayArgs) -> u8 {
    let opts = ReplayOptions { quiet: args.quiet, api: args.api_latency, seed: args.seed };
    let result = match &args.explain {
        Some(pod) => run_explain(&args.file, pod, &opts),
        None => run_replay(&args.file, &opts),
    };
    match result {
        Ok(true) => EXIT_OK,
        Ok(false) => EXIT_FAILED,
        Err(e) => {
            eprintln!("error: {e:#}");
            EXIT_INVALID
        }
    }
}

fn load(file: &Path) -> anyhow::Result<Scenario> {
    load_scenario(file).map_err(|e| match e {
        e @ ScenarioError::Read { .. } => anyhow::Error::new(e),
        e => anyhow::Error::new(e).context(format!("invalid scenario {}", file.display())),
    })
}

/// Replays and prints the recorded causes of one pod's deletion;
/// `Ok(true)` when every expectation held.
fn run_explain(file: &Path, pod: &str, opts: &ReplayOptions) -> anyhow::Result<bool> {
    let scenario = load(file)?;
    let known =
        scenario.pods.iter().map(|p| p.name.as_str()).chain(scenario.events.iter().filter_map(|e| match &e.action {
            EventAction::AddPod(p) => Some(p.name.as_str()),
            _ => None,
        }));
    if !known.into_iter().any(|name| name == pod) {
        anyhow::bail!("{}: no pod {pod:?} in this scenario (give it as namespace/name)", file.display());
    }
    let mut explanation = None;
    let mut failed = vec![];
    let summary = replay_with(&scenario, opts, &mut |r: &Record| match r {
        Record::Action(a) if a.action == "delete-pod" && a.pod.as_deref() == Some(pod) => {
            explanation = a.explanation.clone();
        }
        r if r.is_failure_or_summary() && !matches!(r, Record::Summary(_)) => failed.push(r.to_json()),
        _ => {}
    })
    .with_context(|| format!("replay of {} failed", file.display()))?;
    match explanation {
        Some(why) => println!("{}", why.render()),
        None => println!("pod {pod} was not deleted by the controller (the replay ran until {})", summary.end),
    }
    for line in failed {
        eprintln!("failed: {line}");
    }
    Ok(summary.ok())
}

/// Runs the replay; `Ok(true)` when everything held.
fn run_replay(file: &Path, opts: &ReplayOptions) -> anyhow::Result<bool> {
    let scenario = load(file)?;
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let summary =
        replay_to_writer(&scenario, opts, &mut out).with_context(|| format!("replay of {} failed", file.display()))?;
    // Already flushed by the replay; a late failure here changes nothing.
    let _ = out.flush();
    Ok(summary.ok())
}

/// A Prometheus builder whose two latency metrics are histograms with
/// upstream's bucket boundaries (not summaries), so dashboards built on
/// `histogram_quantile` over `_bucket` work: kube-controller-manager's
/// `node_collector_update_all_nodes_health_duration_seconds` uses
/// `ExponentialBuckets(0.01, 4, 8)`, and
/// `taint_eviction_controller_pod_deletion_duration_seconds` uses
/// 0.005 .. 240 s.
/// `--start-at`'s value (hidden, for `cargo xtask wire`): Unix seconds on
/// the process's clock, as Unix nanoseconds.
pub(crate) fn unix_seconds(text: &str) -> Result<i64, String> {
    match text.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= 0.0 => Ok((secs * 1e9) as i64),
        _ => Err(format!("must be Unix seconds, got {text:?}")),
    }
}

pub(crate) fn prometheus() -> metrics_exporter_prometheus::PrometheusBuilder {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    let exponential: Vec<f64> = (0..8).map(|i| 0.01 * 4f64.powi(i)).collect();
    let deletion = [0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 30.0, 60.0, 120.0, 180.0, 240.0];
    // Only empty bucket lists are refused; these are not empty.
    PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full("node_collector_update_all_nodes_health_duration_seconds".into()),
            &exponential,
        )
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Full("taint_eviction_controller_pod_deletion_duration_seconds".into()),
                &deletion,
            )
        })
        .and_then(|b| {
            // Decided to sent: the alert on deletions lagging reads the
            // 10 s bucket.
            b.set_buckets_for_metric(
                Matcher::Full(nodewarden_kube::WRITE_LAG_METRIC.into()),
                &[0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0],
            )
        })
        .and_then(|b| {
            // Signed: nodewarden's time minus kube-controller-manager's.
            b.set_buckets_for_metric(
                Matcher::Full(nodewarden_shadow::DIFFERENCE_SECONDS.into()),
                &nodewarden_shadow::DIFFERENCE_BUCKETS,
            )
        })
        .unwrap_or_else(|_| PrometheusBuilder::new())
}
