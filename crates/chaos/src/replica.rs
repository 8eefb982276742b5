//! The `nodewarden run` replicas of a trial: real processes with leader
//! election, their logs in files, their metrics scraped over HTTP before
//! they are killed and at the end. Each is a [`Proc`] of the harness the
//! wire suites share, so a trial that fails half-way leaves none running.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use nodewarden_harness::http::Timeouts;
use nodewarden_harness::process::{Proc, ProcessError, free_port};
use nodewarden_harness::prometheus::named;
use nodewarden_model::{ControllerConfig, KubeVersion, Span};

use crate::{ChaosError, Scale};

/// One replica process.
struct Replica {
    /// Killed (SIGKILL) when dropped.
    proc: Proc,
    /// Its `--bind-address` (metrics, probes).
    addr: SocketAddr,
    /// Stopped with SIGSTOP, not yet continued.
    stopped: bool,
    /// Its metrics as last scraped (a replica that exits by itself is
    /// counted from these).
    last: String,
}

/// What the replicas' metrics and logs said, summed over every replica
/// that ran.
#[derive(Debug, Default)]
pub struct Scraped {
    /// `nodewarden_safety_interlock_blocked_total`.
    pub interlock_refusals: u64,
    /// `nodewarden_writes_withdrawn_total`.
    pub withdrawn: u64,
    /// By class: the upper bound of the highest `nodewarden_write_lag_seconds`
    /// bucket in use.
    pub write_lag_max: BTreeMap<String, f64>,
    /// Replicas that logged losing their Lease.
    pub leadership_lost: usize,
    /// "the API server does not answer" lines, every replica.
    pub api_silences: usize,
    /// Replicas started.
    pub started: usize,
}

/// The replicas of a trial.
pub struct Replicas {
    /// One replica, no leader election: it is "the leader".
    single: bool,
    /// How long to look for a leader before giving up.
    takeover: Duration,
    binary: PathBuf,
    kubeconfig: PathBuf,
    dir: PathBuf,
    flags: Vec<String>,
    running: Vec<Replica>,
    /// Scraped from replicas already gone.
    scraped: Scraped,
}

fn dur(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// How long a scrape may take: a replica about to be killed is scraped
/// for what it counted, so it gets time to answer under the trial's load.
const SCRAPE: Timeouts = Timeouts { connect: Duration::from_millis(500), read: Duration::from_secs(2) };

/// `GET /metrics` of a replica, with this module's timeouts; empty when it
/// cannot be read.
fn scrape(addr: SocketAddr) -> String {
    nodewarden_harness::http::scrape(addr, SCRAPE)
}

/// A counter's value, summed over its label sets, as a whole number.
fn total(metrics: &str, name: &str) -> u64 {
    named(metrics, name).map(|s| s.value as u64).sum()
}

impl Scraped {
    fn add(&mut self, metrics: &str, log: &str) {
        self.interlock_refusals += total(metrics, "nodewarden_safety_interlock_blocked_total");
        self.withdrawn += total(metrics, "nodewarden_writes_withdrawn_total");
        // Per class: the count, and each bucket's cumulative count; the
        // highest bucket in use is the smallest bound already holding the
        // whole count.
        let counts: BTreeMap<String, f64> = named(metrics, "nodewarden_write_lag_seconds_count")
            .filter_map(|s| Some((s.label("class")?.to_string(), s.value)))
            .collect();
        for (class, count) in counts {
            if count == 0.0 {
                continue;
            }
            let bound = named(metrics, "nodewarden_write_lag_seconds_bucket")
                .filter(|s| s.label("class") == Some(class.as_str()) && s.value >= count)
                .filter_map(|s| s.label("le")?.parse::<f64>().ok())
                .fold(f64::INFINITY, f64::min);
            let e = self.write_lag_max.entry(class).or_insert(0.0);
            *e = e.max(bound);
        }
        if log.contains("leadership lost") {
            self.leadership_lost += 1;
        }
        self.api_silences += log.matches("the API server does not answer").count();
    }
}

impl Replicas {
    /// Replicas of `binary` against the cluster `kubeconfig` names, with
    /// the scale's flags; `single`: one replica without leader election
    /// (`--leader-elect=false`), as a crash-looping single controller.
    pub fn new(binary: &Path, kubeconfig: &Path, dir: &Path, scale: &Scale, single: bool) -> Replicas {
        let (lease, renew, retry) = scale.election;
        // Every controller flag spelled out, the scale's over `run`'s
        // defaults.
        let config = ControllerConfig {
            node_monitor_period: Span::from_duration(scale.monitor_period),
            node_monitor_grace_period: Span::from_duration(scale.grace),
            node_startup_grace_period: Span::from_duration(scale.grace),
            node_eviction_rate: scale.eviction_rate,
            ..ControllerConfig::of_kube_controller_manager(KubeVersion::OLDEST_SUPPORTED)
        };
        let mut flags = nodewarden_model::flags::command_line(&config);
        flags.extend(
            [
                ("--leader-elect-lease-duration", dur(lease)),
                ("--leader-elect-renew-deadline", dur(renew)),
                ("--leader-elect-retry-period", dur(retry)),
            ]
            .into_iter()
            .flat_map(|(k, v)| [k.to_string(), v]),
        );
        if single {
            flags.push("--leader-elect=false".into());
        }
        Replicas {
            single,
            // Long enough for a standby to take over a killed leader's
            // Lease (it waits out the lease duration).
            takeover: lease + retry * 4,
            binary: binary.to_path_buf(),
            kubeconfig: kubeconfig.to_path_buf(),
            dir: dir.to_path_buf(),
            flags,
            running: Vec::new(),
            scraped: Scraped::default(),
        }
    }

    /// Starts one more replica.
    pub fn start_one(&mut self) -> Result<(), ChaosError> {
        let n = self.scraped.started;
        let addr = free_port().map_err(|source| ChaosError::Io { what: "a free port".into(), source })?;
        let log = self.dir.join(format!("replica-{n}.log"));
        let mut cmd = Command::new(&self.binary);
        cmd.args(["run", "--kubeconfig"])
            .arg(&self.kubeconfig)
            .args(["--bind-address", &addr.to_string()])
            .args(&self.flags)
            .env("HOSTNAME", format!("chaos-{n}"))
            .env("RUST_LOG", "info")
            .stdout(Stdio::null());
        let proc = Proc::spawn(cmd, format!("nodewarden run (replica {n})"), log).map_err(|e| match e {
            ProcessError::Io { what, source } => ChaosError::Io { what, source },
            other => ChaosError::Replica(other.to_string()),
        })?;
        self.scraped.started += 1;
        self.running.push(Replica { proc, addr, stopped: false, last: String::new() });
        Ok(())
    }

    /// Starts a new replica for each that exited, as a Deployment would.
    pub fn restart_exited(&mut self) -> Result<(), ChaosError> {
        let mut gone = Vec::new();
        for (i, r) in self.running.iter_mut().enumerate() {
            // One that cannot be asked counts as exited, as everywhere
            // the harness watches a process.
            if r.proc.check().is_err() {
                gone.push(i);
            }
        }
        for i in gone.into_iter().rev() {
            let r = self.running.remove(i);
            let log = std::fs::read_to_string(r.proc.log()).unwrap_or_default();
            let metrics = r.last.clone();
            if !log.contains("nodewarden run started") && !log.contains("waiting to become the leader") {
                let tail: Vec<&str> = log.lines().rev().take(10).collect();
                return Err(ChaosError::Replica(tail.into_iter().rev().collect::<Vec<_>>().join("\n")));
            }
            self.scraped.add(&metrics, &log);
            self.start_one()?;
        }
        Ok(())
    }

    /// Scrapes every running replica that is not stopped, keeping what it
    /// said for when it is gone.
    pub async fn scrape_all(&mut self) {
        for r in self.running.iter_mut().filter(|r| !r.stopped) {
            let addr = r.addr;
            let metrics = tokio::task::spawn_blocking(move || scrape(addr)).await.unwrap_or_default();
            if !metrics.is_empty() {
                r.last = metrics;
            }
        }
    }

    /// The index of the replica that leads now, if one does (by its
    /// `leader_election_master_status` gauge).
    async fn leader(&self) -> Option<usize> {
        if self.single {
            return (!self.running.is_empty()).then_some(0);
        }
        let until = std::time::Instant::now() + self.takeover;
        while std::time::Instant::now() < until {
            for (i, r) in self.running.iter().enumerate() {
                let addr = r.addr;
                let metrics = tokio::task::spawn_blocking(move || scrape(addr)).await.unwrap_or_default();
                if named(&metrics, "leader_election_master_status").any(|s| s.value == 1.0) {
                    return Some(i);
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        None
    }

    /// SIGKILLs the leader (its metrics scraped first); a new replica
    /// takes its place in the supervisor's next round.
    pub async fn kill_leader(&mut self) -> Result<(), ChaosError> {
        let Some(i) = self.leader().await else { return Err(ChaosError::NoLeader) };
        let r = self.running.remove(i);
        self.retire(r).await;
        self.start_one()
    }

    /// Scrapes `r`, kills it and counts what it said.
    async fn retire(&mut self, mut r: Replica) {
        let addr = r.addr;
        let metrics = tokio::task::spawn_blocking(move || scrape(addr)).await.unwrap_or_default();
        r.proc.kill();
        let log = std::fs::read_to_string(r.proc.log()).unwrap_or_default();
        self.scraped.add(if metrics.is_empty() { &r.last } else { &metrics }, &log);
    }

    /// SIGSTOPs the leader; returns its process id.
    pub async fn stop_leader(&mut self) -> Result<u32, ChaosError> {
        let Some(i) = self.leader().await else { return Err(ChaosError::NoLeader) };
        self.signal(i, "-STOP")?;
        self.running[i].stopped = true;
        Ok(self.running[i].proc.id())
    }

    /// SIGCONTs the replica with process id `pid`.
    pub fn cont(&mut self, pid: u32) -> Result<(), ChaosError> {
        if let Some(i) = self.running.iter().position(|r| r.proc.id() == pid && r.stopped) {
            self.signal(i, "-CONT")?;
            self.running[i].stopped = false;
        }
        Ok(())
    }

    fn signal(&self, i: usize, signal: &str) -> Result<(), ChaosError> {
        let pid = self.running[i].proc.id().to_string();
        Command::new("kill")
            .args([signal, &pid])
            .status()
            .map(drop)
            .map_err(|source| ChaosError::Io { what: format!("kill {signal} {pid}"), source })
    }

    /// Scrapes and stops every replica; what they all said.
    pub async fn finish(mut self) -> Scraped {
        for i in 0..self.running.len() {
            if self.running[i].stopped {
                let _ = self.signal(i, "-CONT");
            }
        }
        for r in std::mem::take(&mut self.running) {
            self.retire(r).await;
        }
        std::mem::take(&mut self.scraped)
    }
}
