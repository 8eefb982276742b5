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

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nodewarden_engine::ZoneReport;
use nodewarden_model::Timestamp;
use nodewarden_model::wall::{self, Dilation};
use nodewarden_sim::{EventAction, Scenario};

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

/// A loopback address no one listens on now, for a process to bind.
pub fn free_port() -> Result<SocketAddr, WireError> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| WireError::io("finding a free port".into(), e))?;
    l.local_addr().map_err(|e| WireError::io("finding a free port".into(), e))
}

/// `GET /metrics` over plain HTTP; empty when it cannot be read.
fn scrape(addr: SocketAddr) -> String {
    // Short: the loop that kills a controller at its instant waits for it.
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(50)) else { return String::new() };
    let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
    if s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).is_err() {
        return String::new();
    }
    let mut body = String::new();
    let _ = s.read_to_string(&mut body);
    body
}

/// A process that is killed when dropped.
struct Proc {
    child: Child,
    log: PathBuf,
    what: String,
}

impl Proc {
    fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(format!(
                "{} exited ({status}); the end of {}:\n{}",
                self.what,
                self.log.display(),
                tail(&self.log)
            )),
            _ => None,
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last lines of a log.
pub fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}

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
    let server_log = opts.dir.join("server.log");

    let log = std::fs::File::create(&server_log).map_err(io(format!("creating {}", server_log.display())))?;
    let mut server = Command::new(opts.binary);
    server
        .args(["sim", "--serve", "127.0.0.1:0", "--quiet", "--scenario"])
        .arg(scenario_file)
        .arg("--write-kubeconfig")
        .arg(&kubeconfig)
        .arg("--journal")
        .arg(&journal)
        .args(["--start-at", &secs(anchor)])
        .env(wall::ENV, &env)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(log);
    let mut child = server.spawn().map_err(io(format!("starting {}", opts.binary.display())))?;
    let stdout = child.stdout.take();
    let mut server = Proc { child, log: server_log.clone(), what: "sim --serve".into() };
    // The server says where its kubeconfig is once it serves.
    if let Some(out) = stdout {
        let mut lines = BufReader::new(out).lines();
        loop {
            match lines.next() {
                Some(Ok(l)) if l.starts_with("kubeconfig:") => break,
                Some(Ok(_)) => {}
                _ => {
                    return Err(WireError::Process(server.exited().unwrap_or_else(|| {
                        format!(
                            "sim --serve wrote no kubeconfig; the end of {}:\n{}",
                            server_log.display(),
                            tail(&server_log)
                        )
                    })));
                }
            }
        }
    }

    let mut started = 0usize;
    let mut start_controller = |at: Timestamp| -> Result<Controller, WireError> {
        let n = started;
        started += 1;
        let metrics = free_port()?;
        let log_path = opts.dir.join(format!("run-{n}.log"));
        let log = std::fs::File::create(&log_path).map_err(io(format!("creating {}", log_path.display())))?;
        let child = Command::new(opts.binary)
            .args(["run", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(["--bind-address", &metrics.to_string(), "--leader-elect=false"])
            .args(["--start-at", &secs(anchor + (at - Timestamp::EPOCH).as_nanos())])
            .args(&opts.flags)
            .env(wall::ENV, &env)
            .env("RUST_LOG", "info")
            .env("HOSTNAME", format!("wire-{n}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(io(format!("starting {}", opts.binary.display())))?;
        Ok(Controller { proc: Proc { child, log: log_path, what: format!("nodewarden run #{n}") }, metrics })
    };

    // Scenario time now, on the shared clock.
    let now = || Timestamp::from_nanos(clock.at(wall::real_unix_nanos()) - anchor);
    // The real Unix time at which the scenario reaches `t`.
    let real_of = |t: Timestamp| clock.real_at(anchor + (t - Timestamp::EPOCH).as_nanos());
    let lead = i64::try_from(LEAD.as_nanos()).unwrap_or(0);
    let mut restarts: Vec<Timestamp> = scenario
        .events
        .iter()
        .filter(|e| matches!(e.action, EventAction::RestartController))
        .map(|e| Timestamp::EPOCH + e.at)
        .collect();
    restarts.sort();
    restarts.dedup();
    let mut restarts = restarts.into_iter().peekable();

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
        if let Some(why) = server.exited() {
            return Err(WireError::Process(why));
        }
        if let Some(why) = current.proc.exited() {
            return Err(WireError::Process(why));
        }
        // Not in the moments before a restart: the kill must not wait.
        let restart_near = restarts.peek().is_some_and(|&r| wall::real_unix_nanos() + 200_000_000 >= real_of(r));
        if Instant::now() >= next_scrape && !restart_near {
            let asked = now();
            let page = scrape(current.metrics);
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
