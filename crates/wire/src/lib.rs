//! The scenario suites over the wire: `cargo xtask wire [FILE...]`.
//!
//! Each scenario file is played through the processes users deploy: a
//! `nodewarden sim --serve` serving the file's cluster and timeline over
//! HTTPS, and a separate `nodewarden run` with the file's `config:` as its
//! flags ([`flags`]); a `restart-controller` event is a SIGKILL and a new
//! process ([`play`]). Every expectation is then judged against what the
//! served cluster held and when (its journal) and the zone states and
//! rates the controller's `/metrics` showed, with replay's own checks
//! ([`judge`]). The processes are started, watched and killed by
//! [`nodewarden_harness::process`], which `cargo xtask wire-load` and the
//! chaos trials share.
//!
//! Time is compressed by one clock both processes share
//! ([`nodewarden_model::wall`]): every duration of the file, every flag,
//! every kubelet period, timestamp and rate limit keeps its meaning on
//! it, and nothing is rescaled. What it cannot compress is the processes'
//! own time (a request's round trip, a scheduling delay), which the clock
//! sees `rate` times longer; the rate is chosen so that those stay within
//! the latency the tolerance allows ([`tolerance`]).

mod flags;
mod judge;
mod play;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nodewarden_cluster::Scenario;
use nodewarden_model::{ControllerConfig, Span};
use nodewarden_objects::TimeBase;
use nodewarden_sim::ExpectRecord;
use serde_json::{Value, json};

/// Why a file could not be played.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// A file or a process could not be read, written or started.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A process ended too early.
    #[error(transparent)]
    Process(#[from] nodewarden_harness::process::ProcessError),
    /// The server never said it served.
    #[error("{0}")]
    NotServing(String),
    /// The file is not a valid scenario.
    #[error("invalid scenario: {0}")]
    Scenario(String),
}

impl WireError {
    fn io(what: String, source: std::io::Error) -> WireError {
        WireError::Io { what, source }
    }
}

/// The write latency and watch delay the tolerance allows, as replay's
/// `realistic` API: writes land within 200 ms, changes are seen within
/// 500 ms.
pub const LATENCY_ALLOWED: (Span, Span) = (Span::from_millis(200), Span::from_millis(500));

/// How late an expectation may come true: the monitor period (a change
/// seen a moment late is taken in at the next pass) plus three round trips
/// at the longest latency allowed, the rule replay applies under latency
/// (7.1 s with a 5 s period). The same for every file, given its period.
pub fn tolerance(config: &ControllerConfig) -> Span {
    config.node_monitor_period + (LATENCY_ALLOWED.0 + LATENCY_ALLOWED.1).saturating_mul(3)
}

/// How to run the files.
#[derive(Clone, Debug)]
pub struct Options {
    /// The `nodewarden` binary both processes run.
    pub binary: PathBuf,
    /// Clock seconds per real second.
    pub rate: f64,
    /// Files played at once.
    pub parallel: usize,
    /// Where each file's kubeconfig, journal and logs go (a directory a
    /// file under it).
    pub work_dir: PathBuf,
    /// Keep every file's directory, not only a failed one's.
    pub keep: bool,
}

/// Default clock rate: 20 clock seconds a real second. A loopback round
/// trip of a few milliseconds is then well under the 200 ms the tolerance
/// allows a write.
pub const DEFAULT_RATE: f64 = 20.0;

/// What one file gave.
#[derive(Debug)]
pub struct FileReport {
    /// The file.
    pub path: PathBuf,
    /// Every expectation of the file held.
    pub ok: bool,
    /// Expectations in the file.
    pub expectations: usize,
    /// Those that did not hold, with what was found at the end of their
    /// window (`seen`).
    pub failures: Vec<ExpectRecord>,
    /// The largest delay, after its `at`, with which an expectation that
    /// held came true.
    pub largest_deviation: Span,
    /// Which expectation (from 1) came true that late.
    pub largest_expect: Option<usize>,
    /// The tolerance the file was judged with.
    pub tolerance: Span,
    /// Real time the file took.
    pub wall: Duration,
    /// The file could not be played (it then fails).
    pub error: Option<String>,
    /// Where its logs are, when kept.
    pub kept: Option<PathBuf>,
    /// Controller processes started (the first, plus one per restart).
    pub controllers: usize,
}

fn fmt_span(s: Span) -> String {
    format!("{:.3}s", s.as_secs_f64())
}

impl FileReport {
    /// `PASS path ...` or `FAIL path ...`, then each failure indented.
    pub fn text(&self) -> String {
        let mut out = format!(
            "{} {}  ({} expectations, largest deviation {}{}, tolerance {}, {} controller process{}, {:.1}s)",
            if self.ok { "PASS" } else { "FAIL" },
            self.path.display(),
            self.expectations,
            fmt_span(self.largest_deviation),
            self.largest_expect.map_or(String::new(), |n| format!(" (#{n})")),
            fmt_span(self.tolerance),
            self.controllers,
            if self.controllers == 1 { "" } else { "es" },
            self.wall.as_secs_f64()
        );
        if let Some(e) = &self.error {
            for l in e.lines() {
                out.push_str("\n    ");
                out.push_str(l);
            }
        }
        for f in &self.failures {
            let subject =
                f.node.as_deref().map(|n| format!("node {n}")).or(f.pod.as_deref().map(|p| format!("pod {p}")));
            let subject = subject.or(f.zone.as_deref().map(|z| format!("zone {z}"))).unwrap_or_else(|| "events".into());
            out.push_str(&format!(
                "\n    expect #{} at {} ({subject}): want {} got {} (checked until {})",
                f.expect,
                fmt_span(f.at - nodewarden_model::Timestamp::EPOCH),
                f.want,
                f.got,
                f.seen.map_or("-".into(), |s| fmt_span(s - nodewarden_model::Timestamp::EPOCH)),
            ));
        }
        if let Some(dir) = &self.kept {
            out.push_str(&format!("\n    logs: {}", dir.display()));
        }
        out
    }

    /// One JSON object.
    pub fn json(&self) -> Value {
        json!({
            "file": self.path.display().to_string(),
            "ok": self.ok,
            "expectations": self.expectations,
            "failed": self.failures.len() + usize::from(self.error.is_some() && self.failures.is_empty()),
            "largest_deviation": self.largest_deviation.as_secs_f64(),
            "largest_deviation_expect": self.largest_expect,
            "tolerance": self.tolerance.as_secs_f64(),
            "controllers": self.controllers,
            "wall_seconds": self.wall.as_secs_f64(),
            "error": self.error,
            "failures": self.failures,
            "logs": self.kept.as_ref().map(|p| p.display().to_string()),
        })
    }
}

/// Plays and judges one file.
pub fn run_file(path: &Path, opts: &Options, slot: usize) -> FileReport {
    let started = Instant::now();
    let mut report = FileReport {
        path: path.to_path_buf(),
        ok: false,
        expectations: 0,
        failures: Vec::new(),
        largest_deviation: Span::ZERO,
        largest_expect: None,
        tolerance: Span::ZERO,
        wall: Duration::ZERO,
        error: None,
        kept: None,
        controllers: 0,
    };
    let dir = opts
        .work_dir
        .join(format!("{}-{slot}", path.file_stem().map_or("scenario".into(), |s| s.to_string_lossy().into_owned())));
    let result = (|| -> Result<(), WireError> {
        let scenario: Scenario =
            nodewarden_cluster::load_scenario(path).map_err(|e| WireError::Scenario(e.to_string()))?;
        report.expectations = scenario.expect.len();
        report.tolerance = tolerance(&scenario.config);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| WireError::io(format!("creating {}", dir.display()), e))?;
        let until = scenario.end() + report.tolerance + Span::from_millis(500);
        let played = play::play(
            path,
            &scenario,
            &play::PlayOptions {
                binary: &opts.binary,
                rate: opts.rate,
                until,
                flags: [
                    nodewarden_model::flags::command_line(&scenario.config),
                    flags::client_flags(&scenario.cluster.api),
                ]
                .concat(),
                dir: &dir,
            },
        )?;
        report.controllers = played.controllers;
        let judged = judge::judge(
            &scenario,
            &played.journal,
            played.scrapes,
            report.tolerance,
            TimeBase { unix_nanos_at_epoch: played.zero_unix_nanos },
            "nodewarden/",
        )?;
        report.largest_deviation = judged.largest_deviation;
        report.largest_expect = judged.largest_expect;
        report.failures = judged.records.into_iter().filter(|r| !r.ok).collect();
        Ok(())
    })();
    if let Err(e) = result {
        report.error = Some(e.to_string());
    }
    report.ok = report.error.is_none() && report.failures.is_empty();
    report.wall = started.elapsed();
    if report.ok && !opts.keep {
        let _ = std::fs::remove_dir_all(&dir);
    } else if dir.exists() {
        report.kept = Some(dir);
    }
    report
}

/// Plays every file, `opts.parallel` at once; `done` hears of each as it
/// finishes. Returns the reports in the files' order.
pub fn run_files(files: &[PathBuf], opts: &Options, done: &(dyn Fn(&FileReport) + Sync)) -> Vec<FileReport> {
    let next = Mutex::new(0usize);
    let reports: Mutex<Vec<Option<FileReport>>> = Mutex::new((0..files.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..opts.parallel.max(1).min(files.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = {
                        let mut n = next.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        let i = *n;
                        *n += 1;
                        i
                    };
                    let Some(file) = files.get(i) else { return };
                    let report = run_file(file, opts, i);
                    done(&report);
                    reports.lock().unwrap_or_else(std::sync::PoisonError::into_inner)[i] = Some(report);
                }
            });
        }
    });
    reports.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner).into_iter().flatten().collect()
}

/// Every scenario file under `dirs` (`*.yaml`, `*.yml`, `*.json`), sorted.
pub fn scenario_files(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(d) else { continue };
        let mut files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml" || x == "json"))
            .collect();
        files.sort();
        out.extend(files);
    }
    out
}
