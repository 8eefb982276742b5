//! Playing one scenario file through real processes: `nodewarden sim
//! --serve` serving the file's cluster and timeline, and `nodewarden run`
//! against it, both on one compressed clock ([`nodewarden_model::wall`]).
//!
//! The scenario's t=0 is a moment a little ahead, when the clock reads
//! its anchor: the server serves the file's objects from its start and
//! holds its timeline until then (`--start-at`), and the controller starts
//! its engine then (`run --start-at`), its caches filled meanwhile. A
//! `restart-controller` event at `t` SIGKILLs the running controller at
//! `t`; its successor was started a moment before with `--start-at t`, so
//! it lists the cluster, waits, and takes over at `t` exactly, as the
//! file's rule 10 says a restarted controller does. Zone states and rates
//! are scraped from the running controller's `/metrics` as it goes.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nodewarden_cluster::{EventAction, Scenario};
use nodewarden_engine::ZoneReport;
use nodewarden_model::Timestamp;
use nodewarden_model::wall::{self, Dilation};

use nodewarden_harness::http::{Timeouts, scrape};
use nodewarden_harness::process::{Proc, free_port, tail};

use crate::WireError;
use crate::judge::zones_from_metrics;

/// What a play left to judge.
pub struct Played {
    /// The served cluster's journal.
    pub journal: PathBuf,
    /// Zone reports scraped, with the scenario time of each scrape.
    pub scrapes: Vec<(Timestamp, Vec<ZoneReport>)>,
    /// The scenario's t=0 on the Unix clock (reads the journal's objects).
    pub zero_unix_nanos: i64,
    /// Controllers started (one, plus one a restart).
    pub controllers: usize,
}

/// How to play.
pub struct PlayOptions<'a> {
    /// The `nodewarden` binary.
    pub binary: &'a Path,
    /// Clock seconds per real second.
    pub rate: f64,
    /// Play until this scenario time.
    pub until: Timestamp,
    /// `nodewarden run`'s flags from the file's `config:`.
    pub flags: Vec<String>,
    /// Where the kubeconfig, the journal and the logs go.
    pub dir: &'a Path,
}

/// Real time the processes get to start before the scenario's t=0, and
/// that a successor gets before it takes over.
const LEAD: Duration = Duration::from_millis(2500);

/// How long a scrape of a controller may take: short, since the loop that
/// kills a controller at its instant waits for it.
const SCRAPE: Timeouts = Timeouts { connect: Duration::from_millis(50), read: Duration::from_millis(100) };

/// A controller process and where its metrics are.
struct Controller {
    proc: Proc,
    metrics: SocketAddr,
}

fn secs(unix_nanos: i64) -> String {
    format!("{}.{:09}", unix_nanos.div_euclid(1_000_000_000), unix_nanos.rem_euclid(1_000_000_000))
}

/// Plays the file; the processes are gone when it returns.
pub fn play(scenario_file: &Path, scenario: &Scenario, opts: &PlayOptions<'_>) -> Result<Played, WireError> {
    let io = |what: String| move |e| WireError::io(what, e);
    // On a whole second: objects carry times to the second (metav1.Time),
    // so the scenario's whole seconds read back exactly, as in replay.
    let anchor = (wall::real_unix_nanos() + i64::try_from(LEAD.as_nanos()).unwrap_or(0)).div_euclid(1_000_000_000)
        * 1_000_000_000
        + 1_000_000_000;
    let clock = Dilation { rate: opts.rate, anchor_unix_nanos: anchor };
    let env = format!("{}@{}", opts.rate, secs(anchor));
    let kubeconfig = opts.dir.join("kubeconfig");
    let journal = opts.dir.join("journal.jsonl");

    let mut server = start_server(scenario_file, opts, &kubeconfig, &journal, anchor, &env)?;

    let mut started = 0usize;
    let mut start_controller = |at: Timestamp| -> Result<Controller, WireError> {
        let n = started;
        started += 1;
        let metrics = free_port().map_err(io("finding a free port".into()))?;
        let log_path = opts.dir.join(format!("run-{n}.log"));
        let mut cmd = Command::new(opts.binary);
        cmd.args(["run", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(["--bind-address", &metrics.to_string(), "--leader-elect=false"])
            .args(["--start-at", &secs(anchor + (at - Timestamp::EPOCH).as_nanos())])
            .args(&opts.flags)
            .env(wall::ENV, &env)
            .env("RUST_LOG", "info")
            .env("HOSTNAME", format!("wire-{n}"))
            .stdout(Stdio::null());
        Ok(Controller { proc: Proc::spawn(cmd, format!("nodewarden run #{n}"), log_path)?, metrics })
    };

    // Scenario time now, on the shared clock.
    let now = || Timestamp::from_nanos(clock.at(wall::real_unix_nanos()) - anchor);
    // The real Unix time at which the scenario reaches `t`.
    let real_of = |t: Timestamp| clock.real_at(anchor + (t - Timestamp::EPOCH).as_nanos());
    let lead = i64::try_from(LEAD.as_nanos()).unwrap_or(0);
    let mut restarts = restart_times(scenario).into_iter().peekable();

    let mut current = start_controller(Timestamp::EPOCH)?;
    let mut successor: Option<Controller> = None;
    let mut scrapes = Vec::new();
    let scrape_every = Duration::from_nanos(u64::try_from(scenario.config.node_monitor_period.as_nanos()).unwrap_or(0))
        .div_f64(opts.rate * 5.0)
        .max(Duration::from_millis(10));
    let mut next_scrape = Instant::now();
    loop {
        let t = now();
        if t >= opts.until {
            break;
        }
        if let Some(&r) = restarts.peek() {
            if successor.is_none() && wall::real_unix_nanos() + lead >= real_of(r) {
                successor = Some(start_controller(r)?);
            }
            if wall::real_unix_nanos() >= real_of(r) {
                // A crash: SIGKILL, at the file's instant.
                current.proc.kill();
                if let Some(next) = successor.take() {
                    current = next;
                }
                restarts.next();
                continue;
            }
        }
        server.check()?;
        current.proc.check()?;
        // Not in the moments before a restart: the kill must not wait.
        let restart_near = restarts.peek().is_some_and(|&r| wall::real_unix_nanos() + 200_000_000 >= real_of(r));
        if Instant::now() >= next_scrape && !restart_near {
            let asked = now();
            let page = scrape(current.metrics, SCRAPE);
            if !page.is_empty() {
                scrapes.push((asked, zones_from_metrics(&page)));
            }
            next_scrape = Instant::now() + scrape_every;
        }
        std::thread::sleep(Duration::from_millis(5).min(scrape_every));
    }
    current.proc.kill();
    drop(successor);
    server.kill();
    Ok(Played { journal, scrapes, zero_unix_nanos: anchor, controllers: started })
}

/// Starts `sim --serve` on the file, on the shared clock from `anchor`,
/// and waits until it says it serves (its kubeconfig written).
fn start_server(
    scenario_file: &Path,
    opts: &PlayOptions<'_>,
    kubeconfig: &Path,
    journal: &Path,
    anchor: i64,
    env: &str,
) -> Result<Proc, WireError> {
    let server_log = opts.dir.join("server.log");
    let mut server = Command::new(opts.binary);
    server
        .args(["sim", "--serve", "127.0.0.1:0", "--quiet", "--scenario"])
        .arg(scenario_file)
        .arg("--write-kubeconfig")
        .arg(kubeconfig)
        .arg("--journal")
        .arg(journal)
        .args(["--start-at", &secs(anchor)])
        .env(wall::ENV, env)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped());
    let mut server = Proc::spawn(server, "sim --serve", server_log.clone())?;
    let stdout = server.take_stdout();
    // The server says where its kubeconfig is once it serves.
    if let Some(out) = stdout {
        let mut lines = BufReader::new(out).lines();
        loop {
            match lines.next() {
                Some(Ok(l)) if l.starts_with("kubeconfig:") => break,
                Some(Ok(_)) => {}
                _ => {
                    server.check()?;
                    return Err(WireError::NotServing(format!(
                        "sim --serve wrote no kubeconfig; the end of {}:\n{}",
                        server_log.display(),
                        tail(&server_log)
                    )));
                }
            }
        }
    }
    Ok(server)
}

/// The file's `restart-controller` instants, in order, each once.
fn restart_times(scenario: &Scenario) -> Vec<Timestamp> {
    let mut restarts: Vec<Timestamp> = scenario
        .events
        .iter()
        .filter(|e| matches!(e.action, EventAction::RestartController))
        .map(|e| Timestamp::EPOCH + e.at)
        .collect();
    restarts.sort();
    restarts.dedup();
    restarts
}
