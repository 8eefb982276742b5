//! `cargo xtask wire-load`'s arguments: clap reads each flag, and
//! [`WireLoadArgs::options`] checks the ones that go together.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Parser;

/// What to measure.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Options {
    pub(super) nodes: usize,
    pub(super) pods_per_node: usize,
    pub(super) zones: usize,
    pub(super) failover: bool,
    pub(super) cold: bool,
    pub(super) binary: Option<PathBuf>,
    pub(super) keep: bool,
    /// When the nodes crash, after the server's launch.
    pub(super) crash_at: Duration,
    /// Extra flags for every `nodewarden run` replica.
    pub(super) run_flags: Vec<String>,
    /// The incident: 1% of the nodes crash, or the first zone loses the
    /// API server.
    pub(super) incident: Incident,
    /// The `nodewarden` binary that serves the cluster, when it is not
    /// `binary` (a run of an older controller against today's server).
    pub(super) server_binary: Option<PathBuf>,
}

/// What happens at `--crash-at`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Incident {
    /// The built-in `node-crash`: 1% of the nodes stop.
    NodeCrash,
    /// The built-in `zone-outage`, healed after `outage`; the served
    /// cluster's pods tolerate the unreachable taint for `toleration`
    /// unless they say otherwise.
    ZoneOutage { outage: Duration, toleration: Duration },
}

/// `--zone-outage`'s defaults: four minutes of outage, the first ones
/// the deploy's sizing must hold; a minute's toleration, so that
/// deletions fall due within them (kube-apiserver's 300 s would leave
/// none due).
const DEFAULT_OUTAGE: Duration = Duration::from_secs(240);
const DEFAULT_TOLERATION: Duration = Duration::from_secs(60);

impl Default for Options {
    fn default() -> Options {
        Options {
            nodes: 1000,
            pods_per_node: 30,
            zones: 3,
            failover: false,
            cold: false,
            binary: None,
            keep: false,
            crash_at: Duration::from_secs(60),
            run_flags: Vec::new(),
            incident: Incident::NodeCrash,
            server_binary: None,
        }
    }
}

/// `cargo xtask wire-load`'s flags, as given; [`WireLoadArgs::options`]
/// checks them together.
#[derive(Debug, Parser)]
#[command(after_help = "Figures and what each key means: docs/run.md (\"Measured\").")]
pub(crate) struct WireLoadArgs {
    /// Nodes of the served cluster.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    nodes: usize,
    /// Pods a node.
    #[arg(long, value_name = "P", default_value_t = 30)]
    pods_per_node: usize,
    /// Zones.
    #[arg(long, value_name = "Z", default_value_t = 3)]
    zones: usize,
    /// When 1% of the nodes crash, in seconds after the server's launch
    /// (20 to 3600).
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    crash_at: u64,
    /// Instead of the crash: the first zone loses the API server at
    /// --crash-at.
    #[arg(long)]
    zone_outage: bool,
    /// With --zone-outage: the zone gets it back this long after, in
    /// seconds (60 to 3600) [default: 240].
    #[arg(long, value_name = "SECS")]
    outage: Option<u64>,
    /// With --zone-outage: the served cluster's default
    /// unreachable/not-ready tolerationSeconds for pods without their own
    /// [default: 60].
    #[arg(long, value_name = "SECS")]
    toleration: Option<u64>,
    /// Two replicas with leader election; the leader is SIGKILLed 5 s
    /// after the crash.
    #[arg(long)]
    failover: bool,
    /// With --failover: the standby is cold (--warm-standby=false).
    #[arg(long)]
    cold: bool,
    /// An extra flag for every nodewarden run replica (repeatable).
    #[arg(long = "run-flag", value_name = "FLAG", allow_hyphen_values = true)]
    run_flags: Vec<String>,
    /// The nodewarden binary (default: built with cargo build --release).
    #[arg(long, value_name = "PATH")]
    binary: Option<PathBuf>,
    /// The nodewarden binary that serves the cluster (default: --binary's);
    /// to measure an older run against today's server.
    #[arg(long, value_name = "PATH")]
    server_binary: Option<PathBuf>,
    /// Keep the log directory.
    #[arg(long)]
    keep: bool,
}

impl WireLoadArgs {
    /// The options, once the flags agree with one another.
    pub(super) fn options(self) -> Result<Options> {
        let secs = Duration::from_secs;
        let o = Options {
            nodes: self.nodes,
            pods_per_node: self.pods_per_node,
            zones: self.zones,
            failover: self.failover,
            cold: self.cold,
            binary: self.binary,
            keep: self.keep,
            crash_at: secs(self.crash_at),
            run_flags: self.run_flags,
            incident: Incident::NodeCrash,
            server_binary: self.server_binary,
        };
        if o.nodes == 0 {
            bail!("--nodes must be at least 1");
        }
        if o.zones == 0 || o.zones > o.nodes {
            bail!("--zones must be from 1 to --nodes ({}), got {}", o.nodes, o.zones);
        }
        if !(20..=3600).contains(&o.crash_at.as_secs()) {
            bail!("--crash-at must be from 20 to 3600 seconds after the server's launch, got {}", o.crash_at.as_secs());
        }
        if o.cold && !o.failover {
            bail!("--cold is the standby's kind: it needs --failover");
        }
        if !self.zone_outage {
            if self.outage.is_some() || self.toleration.is_some() {
                bail!("--outage and --toleration shape the zone outage: they need --zone-outage");
            }
            return Ok(o);
        }
        if o.failover {
            bail!("--zone-outage with --failover is not measured yet: run them apart");
        }
        let outage = self.outage.map_or(DEFAULT_OUTAGE, secs);
        if !(60..=3600).contains(&outage.as_secs()) {
            bail!("--outage must be from 60 to 3600 seconds, got {}", outage.as_secs());
        }
        let toleration = self.toleration.map_or(DEFAULT_TOLERATION, secs);
        Ok(Options { incident: Incident::ZoneOutage { outage, toleration }, ..o })
    }
}

impl Options {
    /// Reads wire-load's flags from `args` (without the task's name): what
    /// `cargo xtask chaos big-zone` hands it.
    pub(super) fn parse(args: impl IntoIterator<Item = String>) -> Result<Options> {
        WireLoadArgs::try_parse_from(std::iter::once("wire-load".to_string()).chain(args))?.options()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Result<Options> {
        Options::parse(line.split_whitespace().map(String::from))
    }

    #[test]
    fn flags_are_read_and_bad_ones_refused() {
        assert_eq!(args("").expect("defaults"), Options::default());
        let o = args("--nodes=10000 --pods-per-node 30 --failover --cold --crash-at 90 --run-flag=--kube-api-qps=50")
            .expect("flags");
        let o2 = args("--run-flag --kube-api-qps=50 --run-flag --kube-api-burst=100").expect("a flag as the value");
        assert_eq!(o2.run_flags, ["--kube-api-qps=50", "--kube-api-burst=100"]);
        assert_eq!((o.nodes, o.pods_per_node, o.failover, o.cold), (10000, 30, true, true));
        assert_eq!(o.crash_at, Duration::from_secs(90));
        assert_eq!(o.run_flags, vec!["--kube-api-qps=50".to_string()]);
        assert_eq!(o.incident, Incident::NodeCrash);
        let o = args("--zone-outage --outage 300 --toleration=30 --server-binary /x").expect("zone flags");
        let (outage, toleration) = (Duration::from_secs(300), Duration::from_secs(30));
        assert_eq!(o.incident, Incident::ZoneOutage { outage, toleration });
        assert_eq!(o.server_binary, Some(PathBuf::from("/x")));
        let o = args("--zone-outage").expect("zone defaults");
        assert_eq!(o.incident, Incident::ZoneOutage { outage: DEFAULT_OUTAGE, toleration: DEFAULT_TOLERATION });
        for (line, says) in [
            ("--cold", "needs --failover"),
            ("--nodes ten", "invalid value 'ten' for '--nodes <N>'"),
            ("--nodes", "a value is required for '--nodes <N>'"),
            ("--nodes 0", "at least 1"),
            ("--nodes 2 --zones 3", "--zones must be from 1 to --nodes (2)"),
            ("--crash-at 5", "--crash-at must be from 20"),
            ("--keep=yes", "unexpected value 'yes' for '--keep'"),
            ("--speed 2", "unexpected argument '--speed'"),
            ("--outage 300", "they need --zone-outage"),
            ("--zone-outage --failover", "not measured yet"),
            ("--zone-outage --outage 10", "--outage must be from 60"),
        ] {
            let err = args(line).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains(says), "{line}: {err}");
        }
    }
}
