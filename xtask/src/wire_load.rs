//! `cargo xtask wire-load`: the served cluster and `nodewarden run` as
//! users deploy them, at size, on loopback, through one node crash (and,
//! with `--failover`, the leader's death in the middle of it); one JSON
//! report on stdout of what each process cost and how long each step took,
//! progress on stderr.
//!
//! The timeline, from the launch of `nodewarden sim --serve` (its own
//! process, so that its memory and CPU are its own):
//!
//! 1. The server builds the fleet and serves; an idle window measures its
//!    CPU with only the kubelets renewing ([`IDLE_WINDOW`]).
//! 2. `nodewarden run` starts: one replica without leader election, or,
//!    with `--failover`, a leader and then a standby (warm unless
//!    `--cold`), both on the default periods. `sync_seconds` runs from the
//!    leader's start to its log line `every cache synced`.
//! 3. A watch on the nodes runs from then to the end, recording when each
//!    node went Unknown and was tainted.
//! 4. The built-in `node-crash` scenario stops the kubelets of 1% of the
//!    nodes at `--crash-at` (60 s, the scenario's own time; otherwise the
//!    server's timeline is slowed or sped up to put it there). With
//!    `--failover` the leader is SIGKILLed [`KILL_AFTER_CRASH`] later, so
//!    the nodes stop heartbeating before it dies and reach their grace
//!    period under the new leader. The crashed nodes are the ones whose
//!    Lease has stopped moving ([`STALE_LEASE`]).
//! 5. Once every crashed node is Unknown and each zone's first one is
//!    tainted (the zone's rate limiter lets one through at once, then one
//!    every 1/`--node-eviction-rate` seconds: minutes for the rest), a
//!    watch on the node Leases for [`LEASE_WINDOW`] times how old each
//!    renewal is when it arrives, a full paged list of the pods is timed,
//!    and every process is read and stopped.
//!
//! The harness reads the cluster as `nodewarden run` does: HTTPS with the
//! kubeconfig's CA and token through kube's client. `cargo xtask` builds
//! it for debug, so it does not decode the pod list it times (only each
//! page's `continue`), and it reports its own CPU (`harness_cpu_seconds`):
//! on a small machine it competes with what it measures. From 20k nodes
//! it says to build it for release (at 100k nodes a debug harness decoding
//! 10,000 Lease events a second starved the processes it measured).
//!
//! The parts, by concern: [`options`] (the arguments), [`scenario`] (the
//! timeline above, step by step), [`procs`] (the processes and their
//! logs), [`usage`] (their memory and CPU), [`api`] (the served API as the
//! harness reads it), [`nodes`] (the incident as the nodes show it),
//! [`probes`] (the Lease watch lag and the pod list) and [`report`] (the
//! JSON report and what each key is).

mod api;
mod nodes;
mod options;
mod probes;
mod procs;
mod report;
mod scenario;
mod usage;
mod zone;

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

use options::Options;
pub(crate) use options::WireLoadArgs;

/// CPU of the server alone, before any controller: the kubelets' renewals
/// and nothing else.
const IDLE_WINDOW: Duration = Duration::from_secs(10);

/// How long the Lease watch that times renewals runs.
const LEASE_WINDOW: Duration = Duration::from_secs(10);

/// The leader dies this long after the crash: the crashed nodes have
/// stopped heartbeating, their 40 s grace has not run out.
const KILL_AFTER_CRASH: Duration = Duration::from_secs(5);

/// A node Lease not renewed for this long has stopped: kubelets renew
/// every 10 s (with a little jitter), so a live one is never this old.
const STALE_LEASE: Duration = Duration::from_secs(20);

/// The leader's steady CPU (`run_steady_cores`) is read from this long
/// after its caches synced until the crash (none when the crash comes
/// sooner: pass a later `--crash-at`).
const STEADY_AFTER_SYNC: Duration = Duration::from_secs(20);

/// A process's CPU seconds read at a Unix time (nanoseconds).
type CpuAt = (i64, f64);

/// When the crashed nodes are counted, after the crash: long enough for
/// their Leases to be [`STALE_LEASE`] old, and for every live node to have
/// renewed since the crash.
const CENSUS_AFTER_CRASH: Duration = Duration::from_secs(30);

/// A duration in nanoseconds, as the Unix times here are kept.
fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// Seconds between two Unix times in nanoseconds, to the millisecond.
fn secs(from: i64, to: i64) -> f64 {
    round3((to - from) as f64 / 1e9)
}

/// Seconds to the microsecond: a warm standby decides within a
/// millisecond of taking the Lease.
fn secs_fine(from: i64, to: i64) -> f64 {
    ((to - from) as f64 / 1e3).round() / 1e6
}

/// To the millisecond, as the report gives seconds.
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The nearest-rank percentile `p` (0 to 1) of `values`; `None` when empty.
fn percentile(values: &[f64], p: f64) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let rank = (p.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The largest of `values`; `None` when empty.
fn max(values: &[f64]) -> Option<f64> {
    percentile(values, 1.0)
}

/// Progress on stderr, with the seconds since the measurement began.
fn say(began: Instant, what: impl std::fmt::Display) {
    eprintln!("wire-load: {:>6.1} s  {what}", began.elapsed().as_secs_f64());
}

/// Waits for SIGINT or SIGTERM; which one came.
async fn stop_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}

/// Runs `cargo xtask wire-load [--nodes N] [--pods-per-node P] [--zones Z]
/// [--failover [--cold]] [--crash-at SECS] [--run-flag FLAG]...
/// [--binary PATH] [--keep]`.
pub fn wire_load(args: WireLoadArgs) -> Result<()> {
    let (report, problems) = measure_options(args.options()?)?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    if !problems.is_empty() {
        bail!("wire-load: {}", problems.join("; "));
    }
    Ok(())
}

/// Measures what `args` (wire-load's arguments) ask for: the report, and
/// the problems that fail the run (a deletion a safe controller never
/// makes). Progress on stderr; the logs kept when there are problems (or
/// with `--keep`). Also `cargo xtask chaos big-zone`'s course.
pub fn measure(args: Vec<String>) -> Result<(Value, Vec<String>)> {
    measure_options(Options::parse(args)?)
}

/// [`measure`] of options already read.
fn measure_options(o: Options) -> Result<(Value, Vec<String>)> {
    if cfg!(debug_assertions) && o.nodes >= 20_000 {
        eprintln!(
            "wire-load: note: this harness is a debug build and shares the machine with what it measures; \
             at this size run it built for release: cargo run --release -p xtask -- wire-load ..."
        );
    }
    let binary = match &o.binary {
        Some(b) => b.clone(),
        None => crate::build_release("nodewarden", "nodewarden")?,
    };
    let binary = std::fs::canonicalize(&binary).with_context(|| format!("{} does not exist", binary.display()))?;
    let version = Command::new(&binary)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let dir = std::env::temp_dir().join(format!("nodewarden-wire-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    eprintln!("wire-load: {} ({version}); logs in {}", binary.display(), dir.display());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    // Stopped by Ctrl-C or SIGTERM, the measurement is dropped, and with
    // it every process it started.
    let measured = runtime.block_on(async {
        tokio::select! {
            m = scenario::measure(&o, &binary, &dir) => m,
            signal = stop_signal() => Err(anyhow!("stopped by {signal}; every process it started is killed")),
        }
    });
    // Ends the node watch if an error left it running.
    runtime.shutdown_timeout(Duration::from_secs(2));
    let measured = match measured {
        Ok(m) => m,
        Err(e) => {
            eprintln!("wire-load: logs kept in {}", dir.display());
            return Err(e);
        }
    };
    let mut report = measured.report;
    if let Value::Object(m) = &mut report {
        m.insert("binary".into(), json!(binary.display().to_string()));
        m.insert("version".into(), json!(version));
    }
    if o.keep || !measured.problems.is_empty() {
        eprintln!("wire-load: logs kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok((report, measured.problems))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&hundred, 0.99), Some(99.0));
        assert_eq!(percentile(&hundred, 0.5), Some(50.0));
        assert_eq!(percentile(&hundred, 0.0), Some(1.0));
        assert_eq!(max(&hundred), Some(100.0));
        assert_eq!(percentile(&[3.0, f64::NAN, 1.0, 2.0], 0.5), Some(2.0));
        assert_eq!(percentile(&[7.5], 0.99), Some(7.5));
        assert_eq!(percentile(&[], 0.5), None);
    }
}

/// The times the tests' objects carry: seconds from one fixed instant.
#[cfg(test)]
mod test_clock {
    /// The instant (Unix nanoseconds) the tests' times count from.
    pub(super) const T0: i64 = 1_800_000_000 * 1_000_000_000;

    /// `s` seconds after [`T0`] as RFC 3339, as the served API writes times.
    pub(super) fn at(s: f64) -> String {
        nodewarden_objects::format_rfc3339(T0 + (s * 1e9) as i64, true)
    }
}
