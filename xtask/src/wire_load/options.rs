//! `cargo xtask wire-load`'s arguments: read by hand, as every xtask
//! reads its own (no argument parser in xtask), with `--help`'s text
//! beside the reader so the two change together.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};

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

pub(super) fn number<T: FromStr>(flag: &str, value: Option<String>) -> Result<T> {
    let value = value.with_context(|| format!("{flag} needs a number"))?;
    value.parse().map_err(|_| anyhow!("{flag} needs a whole number, got {value:?}"))
}

impl Options {
    /// Reads `--flag VALUE` and `--flag=VALUE`.
    pub(super) fn parse(args: impl Iterator<Item = String>) -> Result<Options> {
        let mut o = Options::default();
        let (mut zone_outage, mut outage, mut toleration) = (false, None, None);
        let mut args = args.peekable();
        while let Some(arg) = args.next() {
            let (flag, mut inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
                _ => (arg.clone(), None),
            };
            let mut value = || inline.take().or_else(|| args.next());
            match flag.as_str() {
                "--nodes" => o.nodes = number("--nodes", value())?,
                "--pods-per-node" => o.pods_per_node = number("--pods-per-node", value())?,
                "--zones" => o.zones = number("--zones", value())?,
                "--crash-at" => o.crash_at = Duration::from_secs(number("--crash-at", value())?),
                "--binary" => o.binary = Some(value().context("--binary needs a path")?.into()),
                "--server-binary" => {
                    o.server_binary = Some(value().context("--server-binary needs a path")?.into());
                }
                "--outage" => outage = Some(Duration::from_secs(number("--outage", value())?)),
                "--toleration" => toleration = Some(Duration::from_secs(number("--toleration", value())?)),
                "--run-flag" => o.run_flags.push(value().context("--run-flag needs a flag for `nodewarden run`")?),
                "--failover" | "--cold" | "--keep" | "--zone-outage" => {
                    if inline.is_some() {
                        bail!("{flag} takes no value");
                    }
                    match flag.as_str() {
                        "--failover" => o.failover = true,
                        "--cold" => o.cold = true,
                        "--zone-outage" => zone_outage = true,
                        _ => o.keep = true,
                    }
                }
                other => bail!("unknown flag {other:?} for `cargo xtask wire-load`\n\n{USAGE}"),
            }
        }
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
        if zone_outage {
            if o.failover {
                bail!("--zone-outage with --failover is not measured yet: run them apart");
            }
            let outage = outage.unwrap_or(DEFAULT_OUTAGE);
            if !(60..=3600).contains(&outage.as_secs()) {
                bail!("--outage must be from 60 to 3600 seconds, got {}", outage.as_secs());
            }
            o.incident = Incident::ZoneOutage { outage, toleration: toleration.unwrap_or(DEFAULT_TOLERATION) };
        } else if outage.is_some() || toleration.is_some() {
            bail!("--outage and --toleration shape the zone outage: they need --zone-outage");
        }
        Ok(o)
    }
}

/// What `cargo xtask wire-load --help` prints.
pub(super) const USAGE: &str = "\
cargo xtask wire-load: nodewarden sim --serve and nodewarden run on loopback, through a node crash
or a zone outage;
one JSON report on stdout (memory, CPU, sync, Lease watch lag, detection, taint, takeover), progress on stderr

  --nodes N           nodes of the served cluster (1000)
  --pods-per-node P   pods a node (30)
  --zones Z           zones (3)
  --crash-at SECS     when 1% of the nodes crash, after the server's launch (60; 20 to 3600)
  --zone-outage       instead of the crash: the first zone loses the API server at --crash-at
  --outage SECS       with --zone-outage: the zone gets it back this long after (240; 60 to 3600)
  --toleration SECS   with --zone-outage: the served cluster's default unreachable/not-ready
                      tolerationSeconds for pods without their own (60)
  --failover          two replicas with leader election; the leader is SIGKILLed 5 s after the crash
  --cold              with --failover: the standby is cold (--warm-standby=false)
  --run-flag FLAG     an extra flag for every nodewarden run replica (repeatable)
  --binary PATH       the nodewarden binary (default: built with cargo build --release)
  --server-binary P   the nodewarden binary that serves the cluster (default: --binary's);
                      to measure an older run against today's server
  --keep              keep the log directory

Figures and what each key means: docs/run.md (\"Measured\").";

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
            ("--nodes ten", "--nodes needs a whole number, got \"ten\""),
            ("--nodes", "--nodes needs a number"),
            ("--nodes 0", "at least 1"),
            ("--nodes 2 --zones 3", "--zones must be from 1 to --nodes (2)"),
            ("--crash-at 5", "--crash-at must be from 20"),
            ("--keep=yes", "--keep takes no value"),
            ("--speed 2", "unknown flag \"--speed\""),
            ("--outage 300", "they need --zone-outage"),
            ("--zone-outage --failover", "not measured yet"),
            ("--zone-outage --outage 10", "--outage must be from 60"),
        ] {
            let err = args(line).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains(says), "{line}: {err}");
        }
    }
}
