//! The flags of `nodewarden sim`, grouped by the modes that read them.
//!
//! One command has three modes: the simulation on a virtual clock (no mode
//! flag), the served cluster (`--serve ADDR`) and what-if on a real
//! cluster's snapshot (`--from-snapshot` / `--from-cluster`). Each group of
//! flags below is a clap struct under a help heading of its own; a flag
//! names the mode flags it cannot be used with, and the served mode's and
//! what-if's groups require their mode flag, so that clap itself refuses
//! a flag given in a mode that would ignore it, naming the flag, before
//! any mode runs. The modes' own modules (`sim`, `serve`, `whatif`) depend
//! on this one and not on each other; `sim` picks the mode
//! ([`SimArgs::into_mode`]).
//!
//! Which group a flag is in:
//!
//! | group | plain | `--serve` | what-if |
//! | --- | --- | --- | --- |
//! | [`CommonArgs`] | yes | yes | yes |
//! | [`FleetArgs`] | yes | yes | no |
//! | [`ClockArgs`] | yes | no | yes |
//! | [`PlainArgs`] | yes | no | no |
//! | [`ServeArgs`] | no | yes | no |
//! | [`WhatIfArgs`] | no | no | yes |

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use nodewarden_model::{ControllerConfig, KubeVersion, Span};

/// Group id of the two flags that make a run a what-if (one at most).
const WHAT_IF_SOURCE: &str = "what_if_source";
/// The flags that make a run a what-if, for the flags a what-if refuses.
/// The conflicts are each flag's own rather than its group's: clap's
/// error for a group's conflict lists every member of the group, given
/// or not, where an argument's names just the flags given.
const WHAT_IF_SOURCES: [&str; 2] = ["from_snapshot", "from_cluster"];
/// Every flag that picks a mode: a flag only the plain simulation reads
/// refuses all of them.
const MODE_FLAGS: [&str; 3] = ["serve", "from_snapshot", "from_cluster"];

/// Everything `nodewarden sim` takes, as its modes' groups; clap fills it,
/// and [`SimArgs::into_mode`] hands each mode only the groups it reads.
#[derive(Debug, Args)]
pub struct SimArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    #[command(flatten)]
    pub(crate) fleet: FleetArgs,
    #[command(flatten)]
    pub(crate) clock: ClockArgs,
    #[command(flatten)]
    pub(crate) plain: PlainArgs,
    #[command(flatten)]
    pub(crate) serve: ServeArgs,
    #[command(flatten)]
    pub(crate) what_if: WhatIfArgs,
}

/// Flags every mode reads: which failure, which controller, how chatty.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// A built-in scenario (node-crash, zone-outage, partial-zone, flapping,
    /// control-plane-outage, controller-restart, rolling-failure,
    /// critical-addon) or a scenario file (its own nodes, pods, config and events).
    /// (default: zone-outage; with --serve, none).
    #[arg(long)]
    pub(crate) scenario: Option<String>,
    /// Seed for kubelet phases, pod tolerations and which nodes fail.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Controller flags as a YAML mapping with kube-controller-manager's
    /// names (`node-monitor-grace-period: 50s`, ...).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Legacy eviction mode (`enable-taint-manager: false`); with --serve,
    /// only for --controller.
    #[arg(long)]
    pub(crate) legacy: bool,
    /// No progress on stderr.
    #[arg(long, short)]
    pub(crate) quiet: bool,
}

/// The generated cluster's size and pace: what-if reads a real cluster's
/// size from its snapshot and plays it as fast as it can, so these have
/// no meaning there.
#[derive(Debug, Args)]
#[command(next_help_heading = "Generated cluster (sim and --serve)")]
pub struct FleetArgs {
    /// Nodes in the simulated cluster.
    #[arg(long, default_value_t = 1000, conflicts_with_all = WHAT_IF_SOURCES)]
    pub(crate) nodes: usize,
    /// Zones the nodes are spread over.
    #[arg(long, default_value_t = 3, conflicts_with_all = WHAT_IF_SOURCES)]
    pub(crate) zones: usize,
    /// Pods on each node (two of them DaemonSet pods).
    #[arg(long, default_value_t = 30, conflicts_with_all = WHAT_IF_SOURCES)]
    pub(crate) pods_per_node: usize,
    /// Run at this many times real time (60 = one simulated minute per
    /// second); as fast as possible when not given (with --serve: the
    /// scenario's timeline, kubelets keep real time).
    #[arg(long, conflicts_with_all = WHAT_IF_SOURCES)]
    pub(crate) speed: Option<f64>,
}

/// The virtual clock's run and what it writes out: the served cluster
/// runs on the wall clock until Ctrl-C against a real API, and writes no
/// figures, so these have no meaning with --serve.
#[derive(Debug, Args)]
#[command(next_help_heading = "Virtual-clock run and its output (sim and what-if)")]
pub struct ClockArgs {
    /// Simulated time (e.g. 30m, 2h); the scenario's own when not given.
    #[arg(long, conflicts_with_all = ["hours", "serve"])]
    pub(crate) duration: Option<Span>,
    /// Simulated time in hours (e.g. 1, 0.5).
    #[arg(long, conflicts_with = "serve")]
    pub(crate) hours: Option<f64>,
    /// How slow the simulated API server is: `realistic` (writes land
    /// 20-200 ms after they are sent, watch events 50-500 ms after the
    /// change), `none` (each write lands at once, each change is seen at
    /// once), or `write=MIN..MAX,watch=MIN..MAX`; add `,qps=N,burst=N`
    /// for the controller's client rate (as run's --kube-api-qps and
    /// --kube-api-burst). Default: realistic for the built-in scenarios
    /// and what-if, a scenario file's own `cluster.api` (none when absent;
    /// the file's client rate stays unless this gives one).
    #[arg(long, value_name = "LATENCY", conflicts_with = "serve")]
    pub(crate) api_latency: Option<nodewarden_cluster::ApiLatency>,
    /// Print the figures as JSON on stdout instead of the summary.
    #[arg(long, conflicts_with = "serve")]
    pub(crate) json: bool,
    /// Also write a self-contained HTML page with a timeline chart.
    #[arg(long, value_name = "FILE.html", conflicts_with = "serve")]
    pub(crate) report: Option<PathBuf>,
}

/// What only the plain simulation does: it alone runs the controller in
/// this process for long enough to be watched from Prometheus.
#[derive(Debug, Args)]
#[command(next_help_heading = "Simulation only (without --serve or --from-*)")]
pub struct PlainArgs {
    /// Serve the controller's Prometheus metrics here while it runs
    /// (e.g. 127.0.0.1:9090).
    #[arg(long, value_name = "ADDR", conflicts_with_all = MODE_FLAGS)]
    pub(crate) metrics_addr: Option<SocketAddr>,
}

/// The served cluster: `--serve ADDR` picks the mode, the others shape
/// the server and are refused without it.
#[derive(Debug, Args)]
#[command(next_help_heading = "Serving the Kubernetes API (--serve)")]
#[group(id = "serving", multiple = true, requires = "serve")]
pub struct ServeArgs {
    /// Serve the simulated cluster over the Kubernetes API on this address
    /// (e.g. 127.0.0.1:6443) in real time, for kubectl, k9s or any client,
    /// instead of running the controller on a virtual clock.
    #[arg(long, value_name = "ADDR", conflicts_with_all = WHAT_IF_SOURCES)]
    pub(crate) serve: Option<SocketAddr>,
    /// Write a kubeconfig for the server to this file.
    #[arg(long, value_name = "FILE", conflicts_with_all = WHAT_IF_SOURCES)]
    pub(crate) write_kubeconfig: Option<PathBuf>,
    /// Run nodewarden's controller in-process against it.
    #[arg(long, conflicts_with_all = WHAT_IF_SOURCES)]
    pub(crate) controller: bool,
    /// For `cargo xtask wire`: the scenario's t=0 is this Unix time
    /// (seconds, on the process's clock) rather than the start; the
    /// cluster is served from the start, its timeline waits.
    #[arg(long, hide = true, value_name = "UNIX_SECONDS", value_parser = crate::unix_seconds, conflicts_with_all = WHAT_IF_SOURCES)]
    pub(crate) start_at: Option<i64>,
    /// For `cargo xtask wire`: keep the served cluster's journal (every
    /// stored change to a node, pod or Event, and every client write to a
    /// node or pod, with its time) in this file.
    #[arg(long, hide = true, value_name = "FILE", conflicts_with_all = WHAT_IF_SOURCES)]
    pub(crate) journal: Option<PathBuf>,
    /// For `cargo xtask wire-load`: keep every client request to a node or
    /// pod, reads included, with its Unix time, in this file.
    #[arg(long, hide = true, value_name = "FILE", conflicts_with_all = WHAT_IF_SOURCES)]
    pub(crate) request_journal: Option<PathBuf>,
    /// For `cargo xtask wire-load`: the built-in scenario's partitioned
    /// nodes come back at this scenario time (zone-outage: instead of 50m).
    #[arg(long, hide = true, value_name = "DURATION", conflicts_with_all = WHAT_IF_SOURCES)]
    pub(crate) heal_at: Option<Span>,
    /// As kube-apiserver's flag: the tolerationSeconds of the
    /// `node.kubernetes.io/not-ready:NoExecute` toleration the
    /// DefaultTolerationSeconds admission plugin gives a generated fleet's
    /// pods that have none (300; a scenario file's `cluster:` says its own).
    #[arg(long, value_name = "SECONDS", conflicts_with_all = WHAT_IF_SOURCES)]
    pub(crate) default_not_ready_toleration_seconds: Option<i64>,
    /// As kube-apiserver's flag: the same for
    /// `node.kubernetes.io/unreachable:NoExecute` (300).
    #[arg(long, value_name = "SECONDS", conflicts_with_all = WHAT_IF_SOURCES)]
    pub(crate) default_unreachable_toleration_seconds: Option<i64>,
    /// Inject an API fault, KIND[:ARGS]@START[+DURATION]
    /// (outage@60s+30s, errors:0.5:503@10s+20s, throttle:1:2@0s+10s,
    /// latency:200ms@0s+1m, drop-watches@30s, freeze@60s+100s: the server
    /// and its kubelets stopped, requests held); repeatable.
    #[arg(long, value_name = "SPEC", conflicts_with_all = WHAT_IF_SOURCES)]
    pub(crate) api_fault: Vec<String>,
    /// Serve plain HTTP without authentication instead of HTTPS with a
    /// bearer token (for tools that speak raw HTTP); only on loopback
    /// unless --insecure-allow-remote.
    #[arg(long, conflicts_with_all = WHAT_IF_SOURCES)]
    pub(crate) plain_http: bool,
    /// Another name or address the serving certificate is valid for
    /// (beyond localhost, loopback and the bound address), for clients on
    /// other machines; repeatable. The kubeconfig written names the first.
    #[arg(long, value_name = "NAME", value_parser = tls_san, conflicts_with_all = ["plain_http", "from_snapshot", "from_cluster"])]
    pub(crate) tls_san: Vec<String>,
    /// With --plain-http: allow a non-loopback address. Plain HTTP has no
    /// authentication and no TLS: anyone who can reach it can change the
    /// simulated cluster. (Over HTTPS, the default, any address is
    /// allowed: only the kubeconfig's holders can use it.)
    #[arg(long, conflicts_with_all = WHAT_IF_SOURCES)]
    pub(crate) insecure_allow_remote: bool,
}

/// What-if on a real cluster: one of the two sources picks the mode, the
/// others aim the failure and are refused without one.
#[derive(Debug, Args)]
#[command(next_help_heading = "What-if on a real cluster (--from-snapshot or --from-cluster)")]
#[group(id = "what_if", multiple = true, requires = WHAT_IF_SOURCE)]
pub struct WhatIfArgs {
    /// A snapshot to simulate, as
    /// `kubectl get nodes,pods,leases,daemonsets,poddisruptionbudgets -A -o json`
    /// prints it (JSON or YAML; or a directory of such files).
    #[arg(long, value_name = "FILE|DIR", group = WHAT_IF_SOURCE)]
    pub(crate) from_snapshot: Option<PathBuf>,
    /// Read the cluster live (list calls only: nothing is written, no
    /// watch is opened).
    #[arg(long, group = WHAT_IF_SOURCE)]
    pub(crate) from_cluster: bool,
    /// With --from-cluster: the kubeconfig (default: $KUBECONFIG, then
    /// ~/.kube/config, then in-cluster).
    #[arg(long, value_name = "FILE", requires = "from_cluster", conflicts_with = "serve")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// This zone fails (a topology.kubernetes.io/zone value or
    /// REGION/ZONE); repeatable.
    #[arg(long, value_name = "ZONE", conflicts_with = "serve")]
    pub(crate) fail_zone: Vec<String>,
    /// These nodes fail (comma-separated names).
    #[arg(long, value_name = "A,B,C", value_delimiter = ',', conflicts_with = "serve")]
    pub(crate) fail_nodes: Vec<String>,
    /// The nodes with this label fail; repeatable.
    #[arg(long, value_name = "LABEL=VALUE", conflicts_with = "serve")]
    pub(crate) fail_nodes_selector: Vec<String>,
    /// How the nodes fail: partition (cut off from the API server, as a
    /// zone's network failure) or crash.
    #[arg(long, value_name = "MODE", default_value = "partition", conflicts_with = "serve")]
    pub(crate) fail_mode: String,
    /// When the failure starts, after the snapshot's moment.
    #[arg(long, value_name = "DURATION", default_value = "1m", conflicts_with = "serve")]
    pub(crate) fail_at: Span,
    /// The failed nodes come back after this long (default: not within
    /// the run).
    #[arg(long, value_name = "DURATION", conflicts_with = "serve")]
    pub(crate) recover_after: Option<Span>,
    /// The controller cannot reach the API server for this long, from
    /// --fail-at.
    #[arg(long, value_name = "DURATION", conflicts_with = "serve")]
    pub(crate) fail_control_plane: Option<Span>,
    /// Play the same failure under a second controller configuration
    /// (kube-controller-manager's flag names) and show both side by side.
    #[arg(long, value_name = "CONFIG_B", conflicts_with = "serve")]
    pub(crate) compare: Option<PathBuf>,
    /// The cluster's Kubernetes version (1.31, v1.31.4): the flags a
    /// config file leaves out take that kube-controller-manager's
    /// defaults. Default: the snapshot's /version (--from-cluster, or a
    /// version.json in the snapshot), else nodewarden run's defaults.
    #[arg(long, value_name = "VERSION", conflicts_with = "serve")]
    pub(crate) kube_version: Option<KubeVersion>,
}

/// One mode of `nodewarden sim` with the groups it reads and nothing else,
/// so a mode's code cannot look at a flag clap let through only for
/// another mode.
#[derive(Debug)]
pub(crate) enum Mode {
    /// The controller on a simulated cluster and a virtual clock.
    Plain { common: CommonArgs, fleet: FleetArgs, clock: ClockArgs, plain: PlainArgs },
    /// The simulated cluster behind the Kubernetes API, on the wall clock.
    Serve { addr: SocketAddr, common: CommonArgs, fleet: FleetArgs, serve: ServeArgs },
    /// A failure played on a real cluster's snapshot.
    WhatIf { common: CommonArgs, clock: ClockArgs, what_if: WhatIfArgs },
}

impl SimArgs {
    /// The mode the flags ask for: clap has already refused a flag of
    /// another mode, so the groups left out here were never given.
    pub(crate) fn into_mode(self) -> Mode {
        let SimArgs { common, fleet, clock, plain, serve, what_if } = self;
        if let Some(addr) = serve.serve {
            return Mode::Serve { addr, common, fleet, serve };
        }
        if what_if.from_snapshot.is_some() || what_if.from_cluster {
            return Mode::WhatIf { common, clock, what_if };
        }
        Mode::Plain { common, fleet, clock, plain }
    }
}

impl CommonArgs {
    /// The controller's flags: `--config`'s file (kube-controller-manager's
    /// names) or the defaults, and `--legacy`. Here because the plain
    /// simulation and `--serve --controller` read them the same way.
    pub(crate) fn controller_config(&self) -> anyhow::Result<ControllerConfig> {
        let mut config = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
                ControllerConfig::from_yaml(&text)
                    .with_context(|| format!("invalid controller config {}", path.display()))?
            }
            None => ControllerConfig::default(),
        };
        if self.legacy {
            config.enable_taint_manager = false;
        }
        Ok(config)
    }
}

impl ClockArgs {
    /// `--duration` or `--hours` as a span; `None` for the scenario's own.
    /// Shared because the plain simulation and what-if refuse the same
    /// values with the same words.
    pub(crate) fn duration(&self) -> anyhow::Result<Option<Span>> {
        match (self.duration, self.hours) {
            (Some(d), _) if d <= Span::ZERO => anyhow::bail!("--duration must be positive, got {d}"),
            (Some(d), _) => Ok(Some(d)),
            (None, Some(h)) => match Span::from_secs_f64(h * 3600.0).filter(|s| *s > Span::ZERO) {
                Some(s) => Ok(Some(s)),
                None => anyhow::bail!("--hours must be a positive number, got {h}"),
            },
            (None, None) => Ok(None),
        }
    }
}

/// `--tls-san`: an IP address or a DNS name.
fn tls_san(s: &str) -> Result<String, String> {
    nodewarden_apiserver::check_san(s).map(|()| s.to_string())
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;
    use crate::{Cli, Command};

    fn parse(line: &str) -> Result<Mode, clap::Error> {
        let words = std::iter::once("nodewarden").chain(line.split_whitespace());
        match Cli::try_parse_from(words)?.command {
            Command::Sim(args) => Ok(args.into_mode()),
            other => panic!("not `sim`: {other:?}"),
        }
    }

    #[derive(Debug, PartialEq)]
    enum Kind {
        Plain,
        Serve,
        WhatIf,
    }

    fn kind(mode: &Mode) -> Kind {
        match mode {
            Mode::Plain { .. } => Kind::Plain,
            Mode::Serve { .. } => Kind::Serve,
            Mode::WhatIf { .. } => Kind::WhatIf,
        }
    }

    #[test]
    fn the_command_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// The command lines of README.md, docs/, `.ci/run`, the xtasks, the
    /// wire harness and the tests parse, each into the mode it meant.
    #[test]
    fn documented_command_lines_still_parse() {
        for (line, expected) in [
            ("sim --nodes 10000 --scenario flapping --report flapping.html", Kind::Plain),
            ("sim --scenario partial-zone --speed 60", Kind::Plain),
            ("sim --scenario my-scenario.yaml --json", Kind::Plain),
            ("sim --metrics-addr 127.0.0.1:9090", Kind::Plain),
            (
                "sim --nodes 30 --pods-per-node 5 --duration 8m --quiet --scenario node-crash --report r.html",
                Kind::Plain,
            ),
            (
                "sim --json --nodes 100000 --zones 3 --pods-per-node 10 --scenario zone-outage --hours 1 --seed 1 \
                 --api-latency realistic --legacy",
                Kind::Plain,
            ),
            ("sim --config flags.yaml --legacy --api-latency none -q", Kind::Plain),
            (
                "sim --serve 127.0.0.1:6443 --write-kubeconfig sim.kubeconfig --scenario node-crash --controller",
                Kind::Serve,
            ),
            (
                "sim --serve 127.0.0.1:6443 --write-kubeconfig sim.kubeconfig --scenario critical-addon --nodes 12 \
                 --pods-per-node 10 --controller",
                Kind::Serve,
            ),
            (
                "sim --serve 127.0.0.1:0 --quiet --scenario f.yaml --write-kubeconfig k --journal j.jsonl \
                 --start-at 1700000000.5",
                Kind::Serve,
            ),
            (
                "sim --serve 127.0.0.1:0 --scenario node-crash --quiet --nodes 200 --zones 3 --pods-per-node 5 \
                 --write-kubeconfig k --speed 1.5",
                Kind::Serve,
            ),
            (
                "sim --serve 127.0.0.1:0 --scenario zone-outage --quiet --nodes 300 --zones 3 --pods-per-node 10 \
                 --write-kubeconfig k --speed 3 --heal-at 630000ms --default-not-ready-toleration-seconds 30 \
                 --default-unreachable-toleration-seconds 30 --request-journal r.jsonl",
                Kind::Serve,
            ),
            ("sim --serve 0.0.0.0:0 --plain-http", Kind::Serve),
            ("sim --serve 0.0.0.0:0 --plain-http --insecure-allow-remote", Kind::Serve),
            ("sim --serve 127.0.0.1:0 --api-fault errors:2@0s --api-fault outage@60s+30s", Kind::Serve),
            ("sim --serve 127.0.0.1:0 --controller --config flags.yaml --legacy --seed 3", Kind::Serve),
            ("sim --from-snapshot snap.json --fail-zone zone-a", Kind::WhatIf),
            ("sim --from-cluster --fail-zone zone-a", Kind::WhatIf),
            ("sim --from-cluster --kubeconfig k", Kind::WhatIf),
            ("sim --from-snapshot snap.json --fail-zone zone-a --compare fast.yaml", Kind::WhatIf),
            ("sim --from-snapshot big.json --fail-zone zone-a --duration 15m", Kind::WhatIf),
            (
                "sim --from-snapshot s.json --fail-nodes a1,a2 --duration 15m --compare fast.yaml --json \
                 --report w.html -q --api-latency none",
                Kind::WhatIf,
            ),
            (
                "sim --from-snapshot s.json --fail-nodes-selector a=b --fail-mode crash --fail-at 2m \
                 --recover-after 49m --fail-control-plane 10m --scenario f.yaml --config a.yaml --seed 2 --hours 1",
                Kind::WhatIf,
            ),
        ] {
            let mode = parse(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(kind(&mode), expected, "{line}");
        }
    }

    /// A flag of one mode given in another is clap's error, naming the
    /// flag, before anything runs.
    #[test]
    fn a_flag_of_another_mode_is_refused_naming_it() {
        for (line, flag) in [
            // The served cluster's flags, without --serve or in a what-if.
            ("sim --write-kubeconfig k", "--write-kubeconfig"),
            ("sim --controller", "--controller"),
            ("sim --api-fault outage@1s", "--api-fault"),
            ("sim --plain-http", "--plain-http"),
            ("sim --from-snapshot s --controller", "--controller"),
            ("sim --from-cluster --insecure-allow-remote", "--insecure-allow-remote"),
            ("sim --from-snapshot s --serve 127.0.0.1:0", "--serve"),
            // What-if's flags, without a source or with --serve.
            ("sim --fail-zone zone-a", "--fail-zone"),
            ("sim --fail-nodes a,b", "--fail-nodes"),
            ("sim --fail-mode crash", "--fail-mode"),
            ("sim --compare b.yaml", "--compare"),
            ("sim --recover-after 5m", "--recover-after"),
            ("sim --serve 127.0.0.1:0 --fail-zone zone-a", "--fail-zone"),
            ("sim --serve 127.0.0.1:0 --fail-at 2m", "--fail-at"),
            ("sim --serve 127.0.0.1:0 --from-cluster", "--from-cluster"),
            // The virtual clock's flags with --serve.
            ("sim --serve 127.0.0.1:0 --json", "--json"),
            ("sim --serve 127.0.0.1:0 --report r.html", "--report"),
            ("sim --serve 127.0.0.1:0 --api-latency none", "--api-latency"),
            ("sim --serve 127.0.0.1:0 --duration 1h", "--duration"),
            ("sim --serve 127.0.0.1:0 --hours 1", "--hours"),
            // The generated cluster's flags in a what-if.
            ("sim --from-snapshot s --nodes 5", "--nodes"),
            ("sim --from-cluster --zones 2", "--zones"),
            ("sim --from-snapshot s --pods-per-node 5", "--pods-per-node"),
            ("sim --from-snapshot s --speed 60", "--speed"),
            // The plain simulation's own.
            ("sim --serve 127.0.0.1:0 --metrics-addr 127.0.0.1:9090", "--metrics-addr"),
            ("sim --from-snapshot s --metrics-addr 127.0.0.1:9090", "--metrics-addr"),
        ] {
            let err = match parse(line) {
                Ok(mode) => panic!("{line}: accepted as {:?}", kind(&mode)),
                Err(e) => e,
            };
            assert!(
                matches!(
                    err.kind(),
                    clap::error::ErrorKind::ArgumentConflict | clap::error::ErrorKind::MissingRequiredArgument
                ),
                "{line}: {:?}: {err}",
                err.kind()
            );
            let text = err.to_string();
            let named = [" ", "'", "\n"].iter().any(|end| text.contains(&format!("{flag}{end}")));
            assert!(named, "{line}: {text}");
            // clap's exit code for bad flags is the one `sim` documents.
            assert_eq!(err.exit_code(), 2, "{line}");
        }
    }

    /// The hidden flags (`cargo xtask wire`'s) are refused as well. Without
    /// a mode, clap's error names only the --serve they need (it leaves
    /// hidden flags out of its usage line); against what-if, both.
    #[test]
    fn a_hidden_flag_of_the_served_mode_is_refused_too() {
        for (line, named) in [
            ("sim --journal j", "--serve"),
            ("sim --start-at 1700000000", "--serve"),
            ("sim --request-journal r", "--serve"),
            ("sim --heal-at 4m", "--serve"),
            ("sim --default-unreachable-toleration-seconds 30", "--serve"),
            ("sim --from-snapshot s --journal j", "--journal"),
        ] {
            let err = parse(line).err().unwrap_or_else(|| panic!("{line}: accepted"));
            assert_eq!(err.exit_code(), 2, "{line}");
            assert!(err.to_string().contains(named), "{line}: {err}");
        }
    }

    /// Each mode's flags are under a heading of their own in `sim --help`.
    #[test]
    fn help_has_a_heading_per_mode() {
        let mut cli = Cli::command();
        let help = cli.find_subcommand_mut("sim").expect("sim").render_long_help().to_string();
        for heading in [
            "Generated cluster (sim and --serve):",
            "Virtual-clock run and its output (sim and what-if):",
            "Simulation only (without --serve or --from-*):",
            "Serving the Kubernetes API (--serve):",
            "What-if on a real cluster (--from-snapshot or --from-cluster):",
        ] {
            assert!(help.contains(heading), "{heading} not in:\n{help}");
        }
        assert!(!help.contains("--start-at"), "hidden flags stay hidden:\n{help}");
    }
}
