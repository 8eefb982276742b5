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

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use futures_util::StreamExt;
use futures_util::io::AsyncBufReadExt;
use kube::core::params::{GetParams, ListParams, WatchParams};
use nodewarden_apiserver::clock::parse_rfc3339;
use nodewarden_wire::process::{self, Proc, free_port, unix_nanos};
use serde_json::{Value, json};

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
/// Any one request's answer (a page, a Lease).
const REQUEST_LIMIT: Duration = Duration::from_secs(120);
/// Items a list page asks for (kubectl's chunk size).
const PAGE: u32 = 500;
/// The leader election Lease (`--leader-elect-resource-*` defaults).
const ELECTION_LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/nodewarden";
const NODE_LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
/// The taint a node gets when it is unreachable (with effect NoExecute).
const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// What to measure.
#[derive(Clone, Debug, PartialEq)]
struct Options {
    nodes: usize,
    pods_per_node: usize,
    zones: usize,
    failover: bool,
    cold: bool,
    binary: Option<PathBuf>,
    keep: bool,
    /// When the nodes crash, after the server's launch.
    crash_at: Duration,
    /// Extra flags for every `nodewarden run` replica.
    run_flags: Vec<String>,
}

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
        }
    }
}

fn number<T: FromStr>(flag: &str, value: Option<String>) -> Result<T> {
    let value = value.with_context(|| format!("{flag} needs a number"))?;
    value.parse().map_err(|_| anyhow!("{flag} needs a whole number, got {value:?}"))
}

impl Options {
    /// Reads `--flag VALUE` and `--flag=VALUE`.
    fn parse(args: impl Iterator<Item = String>) -> Result<Options> {
        let mut o = Options::default();
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
                "--run-flag" => o.run_flags.push(value().context("--run-flag needs a flag for `nodewarden run`")?),
                "--failover" | "--cold" | "--keep" => {
                    if inline.is_some() {
                        bail!("{flag} takes no value");
                    }
                    match flag.as_str() {
                        "--failover" => o.failover = true,
                        "--cold" => o.cold = true,
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
        Ok(o)
    }
}

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

fn max(values: &[f64]) -> Option<f64> {
    percentile(values, 1.0)
}

/// Memory and CPU of a process so far, from `/proc`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Usage {
    /// VmRSS, bytes.
    rss: u64,
    /// VmHWM (the peak RSS), bytes.
    peak: u64,
    /// User plus system CPU, seconds.
    cpu: f64,
}

/// VmRSS and VmHWM of `/proc/PID/status`, in bytes.
fn parse_status(text: &str) -> Option<(u64, u64)> {
    let kib = |key: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(key))?;
        line[key.len()..].split_whitespace().next()?.parse::<u64>().ok().map(|k| k * 1024)
    };
    Some((kib("VmRSS:")?, kib("VmHWM:")?))
}

/// utime + stime of `/proc/PID/stat`, in seconds (`tick` clock ticks a
/// second). The fields are counted after the command's closing
/// parenthesis, since a command may contain spaces.
fn parse_stat_cpu(text: &str, tick: f64) -> Option<f64> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / tick)
}

/// Clock ticks a second (`getconf CLK_TCK`; 100 on every Linux in use).
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

fn usage_of(pid: &str, tick: f64) -> Result<Usage> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status (Linux only)"))?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat (Linux only)"))?;
    let (rss, peak) = parse_status(&status).with_context(|| format!("no VmRSS/VmHWM in /proc/{pid}/status"))?;
    let cpu = parse_stat_cpu(&stat, tick).with_context(|| format!("unreadable /proc/{pid}/stat"))?;
    Ok(Usage { rss, peak, cpu })
}

/// Memory and CPU of one of the harness's processes, named in the error.
fn usage(p: &Proc, tick: f64) -> Result<Usage> {
    usage_of(&p.id().to_string(), tick).with_context(|| p.what().to_string())
}

/// Starts `binary args` with `env`, its stdout piped (the caller reads or
/// drops it), its stderr in `log`.
fn spawn(binary: &Path, args: &[String], what: &str, log: PathBuf, env: &[(&str, &str)]) -> Result<Proc> {
    let mut cmd = Command::new(binary);
    cmd.args(args).stdout(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    Ok(Proc::spawn(cmd, what, log)?)
}

/// The server and the `run` replicas (`None` once killed).
struct Procs {
    server: Proc,
    replicas: Vec<Option<Proc>>,
}

impl Procs {
    fn check(&mut self) -> Result<()> {
        self.server.check()?;
        Ok(self.replicas.iter_mut().flatten().try_for_each(Proc::check)?)
    }

    fn replica(&self, i: usize) -> Result<&Proc> {
        self.replicas.get(i).and_then(Option::as_ref).with_context(|| format!("nodewarden run #{i} is not running"))
    }
}

/// The time stamp (Unix nanoseconds) and message of one line of
/// `nodewarden run --log-format json`.
fn log_line(line: &str) -> Option<(i64, String)> {
    let v: Value = serde_json::from_str(line).ok()?;
    let at = parse_rfc3339(v.get("timestamp")?.as_str()?)?;
    Some((at, v.get("message")?.as_str()?.to_string()))
}

/// Reads a growing log from where it last stopped.
struct LogTail {
    path: PathBuf,
    offset: u64,
    partial: String,
}

impl LogTail {
    fn new(path: &Path) -> LogTail {
        LogTail { path: path.to_path_buf(), offset: 0, partial: String::new() }
    }

    /// The time stamp of the first line, new since the last call, whose
    /// message starts with `prefix`.
    fn find(&mut self, prefix: &str) -> Option<i64> {
        let mut file = std::fs::File::open(&self.path).ok()?;
        file.seek(SeekFrom::Start(self.offset)).ok()?;
        let mut new = String::new();
        let read = file.read_to_string(&mut new).ok()?;
        self.offset += read as u64;
        self.partial.push_str(&new);
        let mut found = None;
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            if found.is_none()
                && let Some((at, message)) = log_line(line.trim_end())
                && message.starts_with(prefix)
            {
                found = Some(at);
            }
        }
        found
    }
}

/// The served API, through kube's client with the kubeconfig's CA and
/// token.
struct Api {
    client: kube::Client,
}

impl Api {
    async fn connect(kubeconfig: &Path) -> Result<Api> {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig)
            .with_context(|| format!("reading the kubeconfig {}", kubeconfig.display()))?;
        let mut config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .with_context(|| format!("the kubeconfig {}", kubeconfig.display()))?;
        // Watches here end within 30 s (`timeoutSeconds`) and are opened
        // again; a request silent for a minute has stalled.
        config.read_timeout = Some(Duration::from_secs(60));
        config.connect_timeout = Some(Duration::from_secs(5));
        Ok(Api { client: kube::Client::try_from(config).context("kube client")? })
    }

    /// The body of a GET; `None` on 404.
    async fn get(&self, req: http::Request<Vec<u8>>) -> Result<Option<String>> {
        let uri = req.uri().to_string();
        match tokio::time::timeout(REQUEST_LIMIT, self.client.request_text(req)).await {
            Err(_) => bail!("GET {uri}: no answer within {} s", REQUEST_LIMIT.as_secs()),
            Ok(Err(kube::Error::Api(s))) if s.code == 404 => Ok(None),
            Ok(Err(e)) => Err(anyhow!("GET {uri}: {e}")),
            Ok(Ok(text)) => Ok(Some(text)),
        }
    }

    async fn json(&self, req: http::Request<Vec<u8>>) -> Result<Option<Value>> {
        let uri = req.uri().to_string();
        match self.get(req).await? {
            None => Ok(None),
            Some(t) => serde_json::from_str(&t).map(Some).map_err(|e| anyhow!("GET {uri}: not JSON: {e}")),
        }
    }

    /// One object by its path; `None` when there is none.
    async fn object(&self, path: &str) -> Result<Option<Value>> {
        let (dir, name) = path.rsplit_once('/').with_context(|| format!("{path} names no object"))?;
        self.json(kube::core::Request::new(dir).get(name, &GetParams::default())?).await
    }

    /// Every item of a collection, page by page, each given to `take` as
    /// its page arrives (at 100k nodes, the whole list decoded at once
    /// would be gigabytes); the list's resourceVersion.
    async fn list(&self, path: &str, mut take: impl FnMut(&Value)) -> Result<String> {
        let mut params = ListParams::default().limit(PAGE);
        loop {
            let req = kube::core::Request::new(path).list(&params)?;
            let page = self.json(req).await?.with_context(|| format!("{path}: not served (404)"))?;
            page.get("items").and_then(Value::as_array).into_iter().flatten().for_each(&mut take);
            let rv = page.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default();
            match page.pointer("/metadata/continue").and_then(Value::as_str).filter(|c| !c.is_empty()) {
                Some(c) => params = params.continue_token(c),
                None => return Ok(rv.to_string()),
            }
        }
    }

    /// A watch from `rv`, ended by the server after `timeout` seconds;
    /// its lines as they come.
    async fn watch(
        &self,
        path: &str,
        rv: &str,
        timeout: u32,
    ) -> Result<impl futures_util::Stream<Item = std::io::Result<String>> + Unpin + use<>> {
        let req = kube::core::Request::new(path).watch(&WatchParams::default().timeout(timeout), rv)?;
        let uri = req.uri().to_string();
        let body = tokio::time::timeout(REQUEST_LIMIT, self.client.request_stream(req))
            .await
            .map_err(|_| anyhow!("watch {uri}: no answer within {} s", REQUEST_LIMIT.as_secs()))?
            .map_err(|e| anyhow!("watch {uri}: {e}"))?;
        Ok(Box::pin(body.lines()))
    }
}

/// A time of `v` at `pointer` (RFC 3339), in Unix nanoseconds.
fn time_at(v: &Value, pointer: &str) -> Option<i64> {
    parse_rfc3339(v.pointer(pointer)?.as_str()?)
}

/// What one node object says about its health.
#[derive(Clone, Debug, Default, PartialEq)]
struct NodeFacts {
    zone: String,
    /// Ready's status (`True`, `False`, `Unknown`).
    ready: Option<String>,
    /// Ready's lastTransitionTime.
    transition: Option<i64>,
    /// Ready's lastHeartbeatTime.
    heartbeat: Option<i64>,
    /// The unreachable NoExecute taint is on the node, and its timeAdded.
    tainted: bool,
    taint_added: Option<i64>,
}

/// The node's name and facts; `None` for an object without a name.
fn node_facts(node: &Value) -> Option<(String, NodeFacts)> {
    let name = node.pointer("/metadata/name")?.as_str()?.to_string();
    let zone = node.pointer("/metadata/labels").and_then(|l| l.get(ZONE_LABEL)).and_then(Value::as_str);
    let ready = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("Ready")));
    let taint = node.pointer("/spec/taints").and_then(Value::as_array).and_then(|ts| {
        ts.iter().find(|t| {
            t.get("key").and_then(Value::as_str) == Some(UNREACHABLE)
                && t.get("effect").and_then(Value::as_str) == Some("NoExecute")
        })
    });
    Some((
        name,
        NodeFacts {
            zone: zone.unwrap_or_default().to_string(),
            ready: ready.and_then(|r| r.get("status")).and_then(Value::as_str).map(str::to_string),
            transition: ready.and_then(|r| time_at(r, "/lastTransitionTime")),
            heartbeat: ready.and_then(|r| time_at(r, "/lastHeartbeatTime")),
            tainted: taint.is_some(),
            taint_added: taint.and_then(|t| time_at(t, "/timeAdded")),
        },
    ))
}

/// What the harness's node watch saw of one node.
#[derive(Clone, Debug, Default, PartialEq)]
struct NodeSeen {
    zone: String,
    /// The latest Ready lastHeartbeatTime seen.
    heartbeat: Option<i64>,
    /// Ready seen Unknown since it was last seen True: (its
    /// lastTransitionTime, when it arrived).
    unknown: Option<(i64, i64)>,
    /// Ever seen Unknown (a live node marked by mistake, then Ready again,
    /// still counts).
    ever_unknown: bool,
    /// The unreachable NoExecute taint seen since it was last absent:
    /// (timeAdded, arrival).
    tainted: Option<(i64, i64)>,
}

impl NodeSeen {
    fn take(&mut self, f: &NodeFacts, arrival: i64) {
        self.zone.clone_from(&f.zone);
        self.heartbeat = self.heartbeat.max(f.heartbeat);
        match f.ready.as_deref() {
            Some("Unknown") => {
                self.ever_unknown = true;
                if self.unknown.is_none() {
                    self.unknown = Some((f.transition.unwrap_or(arrival), arrival));
                }
            }
            // Heard from again: a later Unknown is a new episode.
            Some("True") => self.unknown = None,
            _ => {}
        }
        if !f.tainted {
            self.tainted = None;
        } else if self.tainted.is_none() {
            self.tainted = Some((f.taint_added.unwrap_or(arrival), arrival));
        }
    }
}

type Book = Arc<Mutex<HashMap<String, NodeSeen>>>;

/// Lists the nodes, then watches them to the end (aborted by the caller),
/// keeping what each went through in `book`. Listed again when the watch
/// says its resourceVersion is too old.
async fn watch_nodes(api: Api, book: Book) -> Result<()> {
    let mut rv: Option<String> = None;
    loop {
        let from = match rv.take() {
            Some(v) => v,
            None => {
                api.list("/api/v1/nodes", |item| {
                    if let Some((name, f)) = node_facts(item) {
                        let mut b = book.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        b.entry(name).or_default().take(&f, unix_nanos());
                    }
                })
                .await?
            }
        };
        let mut lines = api.watch("/api/v1/nodes", &from, 30).await?;
        let mut next = Some(from);
        while let Some(line) = lines.next().await {
            let line = line.context("reading the node watch")?;
            let arrival = unix_nanos();
            let event: Value = serde_json::from_str(&line).with_context(|| format!("a node watch event: {line}"))?;
            let object = &event["object"];
            match event["type"].as_str() {
                Some("ERROR") => {
                    next = None;
                    break;
                }
                Some("ADDED" | "MODIFIED") => {
                    if let Some((name, f)) = node_facts(object) {
                        book.lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .entry(name)
                            .or_default()
                            .take(&f, arrival);
                    }
                }
                _ => {}
            }
            if let Some(v) = object.pointer("/metadata/resourceVersion").and_then(Value::as_str) {
                next = Some(v.to_string());
            }
        }
        rv = next;
    }
}

/// A node Lease's name and renewTime if it was not renewed for `age` at
/// `now`.
fn stale_lease(lease: &Value, now: i64, age: Duration) -> Option<(String, i64)> {
    let renew = time_at(lease, "/spec/renewTime")?;
    let name = lease.pointer("/metadata/name")?.as_str()?;
    (renew <= now - nanos(age)).then(|| (name.to_string(), renew))
}

/// How the crashed nodes were found out, so far.
#[derive(Debug, Default, PartialEq)]
struct Detection {
    crashed: usize,
    /// Per node marked Unknown: lastTransitionTime − last heartbeat, s.
    detect: Vec<f64>,
    /// Per node marked Unknown: arrival on the watch − last heartbeat, s.
    detect_seen: Vec<f64>,
    /// `detect` of the nodes marked after the leader was killed.
    after_kill: Vec<f64>,
    /// Nodes marked before the leader was killed.
    before_kill: usize,
    /// Crashed nodes not marked Unknown yet.
    undetected: Vec<String>,
    /// Per zone with a crashed node: the zone's first taint, timeAdded −
    /// that node's last heartbeat, s; `None` while none is tainted.
    zone_first_taint: BTreeMap<String, Option<f64>>,
    /// Crashed nodes tainted.
    tainted: usize,
    /// Nodes that never stopped renewing but were marked Unknown.
    healthy_marked: Vec<String>,
}

impl Detection {
    /// Every crashed node Unknown, every zone's first one tainted.
    fn complete(&self) -> bool {
        self.undetected.is_empty() && self.zone_first_taint.values().all(Option::is_some)
    }
}

/// `crashed` (name → Lease renewTime) judged by what the node watch saw;
/// `killed_at`: when the leader was killed, if it was.
fn detection(crashed: &BTreeMap<String, i64>, book: &HashMap<String, NodeSeen>, killed_at: Option<i64>) -> Detection {
    let mut d = Detection { crashed: crashed.len(), ..Detection::default() };
    // Per zone: (timeAdded, arrival, latency) of its first taint.
    let mut firsts: BTreeMap<String, Option<(i64, i64, f64)>> = BTreeMap::new();
    for (name, &renew) in crashed {
        let Some(seen) = book.get(name) else {
            d.undetected.push(name.clone());
            continue;
        };
        let heartbeat = seen.heartbeat.map_or(renew, |h| h.max(renew));
        let first = firsts.entry(seen.zone.clone()).or_default();
        match seen.unknown {
            Some((transition, arrival)) => {
                let s = secs(heartbeat, transition);
                d.detect.push(s);
                d.detect_seen.push(secs(heartbeat, arrival));
                match killed_at {
                    Some(k) if transition.max(arrival) >= k => d.after_kill.push(s),
                    Some(_) => d.before_kill += 1,
                    None => {}
                }
            }
            None => d.undetected.push(name.clone()),
        }
        if let Some((added, arrival)) = seen.tainted {
            d.tainted += 1;
            if first.is_none_or(|(a, r, _)| (added, arrival) < (a, r)) {
                *first = Some((added, arrival, secs(heartbeat, added)));
            }
        }
    }
    d.zone_first_taint = firsts.into_iter().map(|(z, f)| (z, f.map(|(_, _, s)| s))).collect();
    d.healthy_marked =
        book.iter().filter(|(n, s)| s.ever_unknown && !crashed.contains_key(*n)).map(|(n, _)| n.clone()).collect();
    d.healthy_marked.sort();
    d
}

/// The age of the node Lease in one watch event line when it arrived at
/// `arrival`, in seconds; `None` for other events.
fn lease_event_lag(line: &str, arrival: i64) -> Option<f64> {
    let event: Value = serde_json::from_str(line).ok()?;
    if !matches!(event.get("type")?.as_str()?, "ADDED" | "MODIFIED") {
        return None;
    }
    Some((arrival - time_at(&event["object"], "/spec/renewTime")?) as f64 / 1e9)
}

/// Node Lease renewals seen on a watch.
struct LeaseLag {
    events: usize,
    lags: Vec<f64>,
    window: f64,
}

/// Watches the node Leases for `window` from now: for each renewal, how
/// long after its renewTime it arrived.
async fn lease_lag(api: &Api, window: Duration) -> Result<LeaseLag> {
    let req = kube::core::Request::new(NODE_LEASES).list(&ListParams::default().limit(1))?;
    let list = api.json(req).await?.context("node Leases are not served")?;
    let rv =
        list.pointer("/metadata/resourceVersion").and_then(Value::as_str).context("a list without resourceVersion")?;
    let began = Instant::now();
    let mut lines = api.watch(NODE_LEASES, rv, u32::try_from(window.as_secs()).unwrap_or(u32::MAX)).await?;
    let until = tokio::time::Instant::now() + window + Duration::from_secs(10);
    let mut lag = LeaseLag { events: 0, lags: Vec::new(), window: 0.0 };
    while let Ok(Some(line)) = tokio::time::timeout_at(until, lines.next()).await {
        let line = line.context("reading the Lease watch")?;
        if let Some(l) = lease_event_lag(&line, unix_nanos()) {
            lag.events += 1;
            lag.lags.push(l);
        }
    }
    lag.window = began.elapsed().as_secs_f64();
    Ok(lag)
}

/// What a full paged list of the pods took.
struct Listed {
    pods: u64,
    pages: u64,
    bytes: u64,
    seconds: f64,
}

/// The `metadata` of a list page, read from what comes before its
/// `items` (the served API writes it first), so the items need not be
/// decoded; `None` when it is not there.
fn page_head(text: &str) -> Option<Value> {
    let items = text.find("\"items\":")?;
    let head = text[..items].trim_end().strip_suffix(',')?;
    let v: Value = serde_json::from_str(&format!("{head}}}")).ok()?;
    v.get("metadata").cloned()
}

/// Lists every pod, [`PAGE`] at a time, with continue tokens. The first
/// page is decoded (its items and `remainingItemCount` give the total);
/// the others only up to their items.
async fn list_pods(api: &Api) -> Result<Listed> {
    let began = Instant::now();
    let mut params = ListParams::default().limit(PAGE);
    let mut listed = Listed { pods: 0, pages: 0, bytes: 0, seconds: 0.0 };
    let mut total: Option<u64> = None;
    loop {
        let req = kube::core::Request::new("/api/v1/pods").list(&params)?;
        let text = api.get(req).await?.context("/api/v1/pods is not served")?;
        listed.pages += 1;
        listed.bytes += text.len() as u64;
        let head = if total.is_some() { page_head(&text) } else { None };
        let meta = match head {
            Some(m) => m,
            None => {
                let page: Value = serde_json::from_str(&text).context("a pod list page is not JSON")?;
                let n = page.get("items").and_then(Value::as_array).map_or(0, Vec::len) as u64;
                listed.pods += n;
                if listed.pages == 1 {
                    total = page.pointer("/metadata/remainingItemCount").and_then(Value::as_u64).map(|r| r + n);
                }
                page.get("metadata").cloned().unwrap_or_default()
            }
        };
        match meta.get("continue").and_then(Value::as_str).filter(|c| !c.is_empty()) {
            Some(c) => params = params.continue_token(c),
            None => break,
        }
    }
    listed.seconds = round3(began.elapsed().as_secs_f64());
    listed.pods = total.unwrap_or(listed.pods);
    Ok(listed)
}

fn say(began: Instant, what: impl std::fmt::Display) {
    eprintln!("wire-load: {:>6.1} s  {what}", began.elapsed().as_secs_f64());
}

/// Replica `n` of `nodewarden run` (`HOSTNAME=wire-load-N`, so its
/// identity in the Lease starts with that).
fn start_replica(binary: &Path, kubeconfig: &Path, dir: &Path, n: usize, o: &Options) -> Result<Proc> {
    let mut args: Vec<String> = vec![
        "run".into(),
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--bind-address".into(),
        format!("127.0.0.1:{}", free_port().context("finding a free port")?.port()),
        "--log-format".into(),
        "json".into(),
    ];
    if !o.failover {
        args.push("--leader-elect=false".into());
    }
    if o.cold {
        args.push("--warm-standby=false".into());
    }
    args.extend(o.run_flags.iter().cloned());
    let host = format!("wire-load-{n}");
    let mut p = spawn(
        binary,
        &args,
        &format!("nodewarden run #{n}"),
        dir.join(format!("run-{n}.log")),
        &[("RUST_LOG", "info"), ("HOSTNAME", &host)],
    )?;
    // It writes nothing there; a pipe nobody reads would block it.
    drop(p.take_stdout());
    Ok(p)
}

/// Waits for a line of `tail` whose message starts with `prefix`, while
/// every process runs; its time stamp.
async fn wait_for_line(procs: &mut Procs, tail: &mut LogTail, prefix: &str, limit: Duration) -> Result<i64> {
    let until = Instant::now() + limit;
    loop {
        if let Some(at) = tail.find(prefix) {
            return Ok(at);
        }
        procs.check()?;
        if Instant::now() > until {
            bail!(
                "no line {prefix:?} in {} within {} s; its end:\n{}",
                tail.path.display(),
                limit.as_secs(),
                process::tail(&tail.path)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The election Lease's holder.
fn holder(lease: &Value) -> Option<&str> {
    lease.pointer("/spec/holderIdentity").and_then(Value::as_str).filter(|h| !h.is_empty())
}

/// Waits until the election Lease names a holder starting with `prefix`.
async fn wait_holder(api: &Api, procs: &mut Procs, prefix: &str, limit: Duration) -> Result<String> {
    let until = Instant::now() + limit;
    loop {
        if let Some(lease) = api.object(ELECTION_LEASE).await?
            && let Some(h) = holder(&lease).filter(|h| h.starts_with(prefix))
        {
            return Ok(h.to_string());
        }
        procs.check()?;
        if Instant::now() > until {
            bail!("no replica {prefix}* took the Lease {ELECTION_LEASE} within {} s", limit.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The leader's death.
#[derive(Clone, Copy, Debug)]
struct Killed {
    at: i64,
    leader: Usage,
    standby: Usage,
}

/// The new holder of the Lease.
#[derive(Clone, Debug)]
struct Taken {
    /// When the harness saw it.
    seen: i64,
    /// Its acquireTime (microseconds), when given.
    acquired: Option<i64>,
}

/// The report and what went wrong on the way (the report is still
/// printed; the task then fails).
struct Measured {
    report: Value,
    problems: Vec<String>,
}

fn insert(report: &mut serde_json::Map<String, Value>, entries: Value) {
    if let Value::Object(m) = entries {
        report.extend(m);
    }
}

/// The whole measurement; every process is gone when it returns.
async fn measure(o: &Options, binary: &Path, dir: &Path) -> Result<Measured> {
    let began = Instant::now();
    let tick = clock_ticks();
    let harness_cpu0 = usage_of("self", tick).map_or(0.0, |u| u.cpu);
    let pods = o.nodes * o.pods_per_node;
    let mut problems = Vec::new();

    // The server, on its own.
    let kubeconfig = dir.join("kubeconfig");
    let mut args: Vec<String> =
        ["sim", "--serve", "127.0.0.1:0", "--scenario", "node-crash", "--quiet"].map(String::from).into();
    args.extend([
        "--nodes".into(),
        o.nodes.to_string(),
        "--zones".into(),
        o.zones.to_string(),
        "--pods-per-node".into(),
        o.pods_per_node.to_string(),
        "--write-kubeconfig".into(),
        kubeconfig.display().to_string(),
    ]);
    // node-crash crashes at its 1m; its timeline runs at this speed so
    // that 1m falls at --crash-at (the kubelets keep real time).
    if o.crash_at != Duration::from_secs(60) {
        args.extend(["--speed".into(), format!("{}", 60.0 / o.crash_at.as_secs_f64())]);
    }
    say(began, format!("starting nodewarden sim --serve: {} nodes, {pods} pods, {} zones", o.nodes, o.zones));
    let mut server = spawn(binary, &args, "nodewarden sim --serve", dir.join("server.log"), &[("RUST_LOG", "warn")])?;
    let server_spawned = server.spawned_unix_nanos();
    let crash = server_spawned + nanos(o.crash_at);
    let out = server.take_stdout().context("the server's output")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut procs = Procs { server, replicas: Vec::new() };
    let limit = Duration::from_secs(60 + (pods / 5000) as u64);
    let serve_until = Instant::now() + limit;
    loop {
        match rx.try_recv() {
            Ok(l) if l.starts_with("kubeconfig:") => break,
            Ok(_) | Err(mpsc::TryRecvError::Empty) => {}
            Err(mpsc::TryRecvError::Disconnected) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                procs.server.check()?;
                bail!("nodewarden sim --serve closed its output without serving");
            }
        }
        procs.server.check()?;
        if Instant::now() > serve_until {
            bail!(
                "nodewarden sim --serve did not serve within {} s; the end of {}:\n{}",
                limit.as_secs(),
                procs.server.log().display(),
                process::tail(procs.server.log())
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let served = unix_nanos();
    let at_serve = usage(&procs.server, tick)?;
    say(
        began,
        format!(
            "serving after {:.1} s, {} MiB; idle for {} s",
            secs(server_spawned, served),
            at_serve.rss >> 20,
            IDLE_WINDOW.as_secs()
        ),
    );
    let api = Api::connect(&kubeconfig).await?;
    let idle_began = Instant::now();
    let before_idle = usage(&procs.server, tick)?;
    tokio::time::sleep(IDLE_WINDOW).await;
    procs.check()?;
    let at_run = usage(&procs.server, tick)?;
    let idle_cores = (at_run.cpu - before_idle.cpu) / idle_began.elapsed().as_secs_f64();

    // The controller: one replica, or a leader and then a standby.
    let run_began = Instant::now();
    say(began, if o.failover { "starting nodewarden run #0 (leader election)" } else { "starting nodewarden run" });
    procs.replicas.push(Some(start_replica(binary, &kubeconfig, dir, 0, o)?));
    let leader_identity = if o.failover {
        let id = wait_holder(&api, &mut procs, "wire-load-0_", Duration::from_secs(60)).await?;
        say(began, format!("#0 holds the Lease; starting #1, a {} standby", if o.cold { "cold" } else { "warm" }));
        procs.replicas.push(Some(start_replica(binary, &kubeconfig, dir, 1, o)?));
        Some(id)
    } else {
        None
    };
    let sync_limit = Duration::from_secs(120 + (pods / 4000) as u64);
    let leader = procs.replica(0)?;
    let (leader_spawned, mut leader_log) = (leader.spawned_unix_nanos(), LogTail::new(leader.log()));
    let synced = wait_for_line(&mut procs, &mut leader_log, "every cache synced", sync_limit)
        .await
        .context("nodewarden run #0 syncing its caches")?;
    let run_to_sync = usage(procs.replica(0)?, tick)?;
    say(began, format!("#0: every cache synced {:.1} s after its start", secs(leader_spawned, synced)));
    if synced > crash {
        problems.push(format!(
            "the nodes crashed {} s after the launch, before the leader had synced: pass a later --crash-at",
            o.crash_at.as_secs()
        ));
    }
    let mut standby_synced = None;
    if o.failover && !o.cold {
        let standby = procs.replica(1)?;
        let (spawned, mut log) = (standby.spawned_unix_nanos(), LogTail::new(standby.log()));
        let at = wait_for_line(&mut procs, &mut log, "every cache synced", sync_limit)
            .await
            .context("nodewarden run #1 (warm standby) syncing its caches")?;
        say(began, format!("#1 (standby): every cache synced {:.1} s after its start", secs(spawned, at)));
        if at > crash + nanos(KILL_AFTER_CRASH) {
            problems.push("the warm standby had not synced when the leader was killed: pass a later --crash-at".into());
        }
        standby_synced = Some(secs(spawned, at));
    }

    // The incident, watched on the nodes.
    let book: Book = Arc::new(Mutex::new(HashMap::new()));
    let watcher = tokio::spawn(watch_nodes(Api { client: api.client.clone() }, book.clone()));
    let kill_at = crash + nanos(KILL_AFTER_CRASH);
    let census_at = crash + nanos(CENSUS_AFTER_CRASH);
    // Grace, a monitor period and the first writes, then the Unknown
    // statuses themselves: a read and an update a node, three requests
    // counting the taints and Events, through the client's 20 requests a
    // second (a thousand crashed nodes take minutes to write, as they
    // would for kube-controller-manager at its default rate).
    let writes = Duration::from_secs_f64(o.nodes.div_ceil(100) as f64 * 3.0 / 20.0);
    let mut deadline = crash + nanos(Duration::from_secs(150) + writes);
    if o.failover {
        deadline += nanos(Duration::from_secs(30));
        if o.cold {
            deadline += 2 * (synced - leader_spawned) + nanos(Duration::from_secs(45));
        }
    }
    let decides = if o.cold { "every cache synced" } else { "leading: deciding" };
    let mut new_leader_log = procs.replicas.get(1).and_then(Option::as_ref).map(|p| LogTail::new(p.log()));
    say(
        began,
        format!("the nodes crash {:.0} s after the server's launch", o.crash_at.as_secs_f64())
            + &if o.failover {
                format!("; the leader is killed {} s later", KILL_AFTER_CRASH.as_secs())
            } else {
                String::new()
            },
    );
    let mut killed: Option<Killed> = None;
    let mut taken: Option<Taken> = None;
    let mut decided: Option<i64> = None;
    let mut crashed: Option<BTreeMap<String, i64>> = None;
    let mut overloaded = false;
    let mut said = Instant::now();
    // The leader's CPU between the end of its sync's aftermath and the
    // crash: what it costs at steady state (Lease renewals, status posts).
    let steady_from = synced + nanos(STEADY_AFTER_SYNC);
    let mut steady: [Option<CpuAt>; 2] = [None, None];
    let detected = loop {
        procs.check()?;
        let now = unix_nanos();
        if steady[0].is_none() && now >= steady_from && now < crash {
            steady[0] = Some((now, usage(procs.replica(0)?, tick)?.cpu));
        }
        if steady[0].is_some() && steady[1].is_none() && now >= crash {
            steady[1] = Some((now, usage(procs.replica(0)?, tick)?.cpu));
        }
        if watcher.is_finished() {
            return Err(match watcher.await {
                Ok(Err(e)) => e.context("the node watch"),
                Ok(Ok(())) => anyhow!("the node watch ended"),
                Err(e) => anyhow!("the node watch: {e}"),
            });
        }
        if o.failover && killed.is_none() && now >= kill_at {
            let leader = usage(procs.replica(0)?, tick)?;
            let standby = usage(procs.replica(1)?, tick)?;
            if let Some(mut p) = procs.replicas[0].take() {
                p.kill();
            }
            killed = Some(Killed { at: unix_nanos(), leader, standby });
            say(began, "SIGKILLed the leader (#0)");
        }
        if killed.is_some()
            && taken.is_none()
            && let Some(lease) = api.object(ELECTION_LEASE).await?
            && holder(&lease).is_some_and(|h| Some(h) != leader_identity.as_deref())
        {
            taken = Some(Taken { seen: unix_nanos(), acquired: time_at(&lease, "/spec/acquireTime") });
            say(began, format!("#1 holds the Lease ({})", holder(&lease).unwrap_or_default()));
        }
        if taken.is_some()
            && decided.is_none()
            && let Some(log) = &mut new_leader_log
        {
            decided = log.find(decides);
            if decided.is_some() {
                say(began, format!("#1 decides ({decides:?})"));
            }
        }
        if crashed.is_none() && now >= census_at {
            let now = unix_nanos();
            let mut c = BTreeMap::new();
            api.list(NODE_LEASES, |lease| c.extend(stale_lease(lease, now, STALE_LEASE))).await?;
            if c.is_empty() {
                bail!(
                    "no node Lease has stopped renewing {} s after the crash was due: node-crash did not play",
                    CENSUS_AFTER_CRASH.as_secs()
                );
            }
            say(began, format!("{} node(s) stopped renewing their Lease", c.len()));
            // node-crash stops 1% of the nodes (at least one); many more
            // stale Leases mean the server's kubelets are behind.
            let expected = (o.nodes / 100).max(1);
            if c.len() > 2 * expected + 10 {
                problems.push(format!(
                    "{} of {} node Leases were over {} s old where node-crash stops {expected}: the server's kubelets \
                     fall behind (it cannot keep this many nodes renewing on this machine), so there is no crash to time",
                    c.len(),
                    o.nodes,
                    STALE_LEASE.as_secs()
                ));
                overloaded = true;
            }
            crashed = Some(c);
        }
        if let Some(c) = &crashed {
            let d = detection(c, &book.lock().unwrap_or_else(std::sync::PoisonError::into_inner), killed.map(|k| k.at));
            let done = d.complete() && (!o.failover || decided.is_some());
            if done || overloaded || now > deadline {
                if !done && !overloaded {
                    problems.push(format!(
                        "by {} s after the crash: {} of {} crashed node(s) not marked Unknown, {} of {} zone(s) without a tainted one{}",
                        (deadline - crash) / 1_000_000_000,
                        d.undetected.len(),
                        d.crashed,
                        d.zone_first_taint.values().filter(|t| t.is_none()).count(),
                        d.zone_first_taint.len(),
                        if o.failover && decided.is_none() { ", and the new leader never decided" } else { "" }
                    ));
                }
                break d;
            }
            if said.elapsed() >= Duration::from_secs(10) {
                say(
                    began,
                    format!("{} of {} crashed node(s) Unknown, {} tainted", d.detect.len(), d.crashed, d.tainted),
                );
                said = Instant::now();
            }
        } else if now > deadline {
            bail!("the crash was never counted");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let observed = usage(&procs.server, tick)?;
    let run_seconds = run_began.elapsed().as_secs_f64();
    say(
        began,
        format!(
            "{} crashed node(s) Unknown, {} tainted; timing Lease renewals for {} s",
            detected.detect.len(),
            detected.tainted,
            LEASE_WINDOW.as_secs()
        ),
    );
    let lag = lease_lag(&api, LEASE_WINDOW).await?;
    say(began, "listing every pod");
    let before_list = usage(&procs.server, tick)?;
    let listed = list_pods(&api).await?;
    procs.check()?;
    watcher.abort();
    let server_end = usage(&procs.server, tick)?;
    let last_leader = usage(procs.replica(if o.failover { 1 } else { 0 })?, tick)?;
    let harness_cpu = usage_of("self", tick).map_or(0.0, |u| u.cpu) - harness_cpu0;
    say(began, format!("listed {} pods in {} s; stopping", listed.pods, listed.seconds));
    drop(procs);

    let leader_usage = killed.map_or(last_leader, |k| k.leader);
    let zone_firsts: Vec<f64> = detected.zone_first_taint.values().flatten().copied().collect();
    let mut report = serde_json::Map::new();
    insert(
        &mut report,
        json!({
            "nodes": o.nodes,
            "pods": pods,
            "zones": o.zones,
            "failover": o.failover,
            "crash_at_seconds": o.crash_at.as_secs(),
            "server_start_seconds": secs(server_spawned, served),
            "server_rss_bytes": server_end.rss,
            "server_rss_peak_bytes": server_end.peak,
            "server_cpu_seconds": round3(server_end.cpu),
            "server_cpu_seconds_to_serve": round3(at_serve.cpu),
            "server_idle_cores": round3(idle_cores),
            "run_steady_cores": match steady {
                [Some((t0, c0)), Some((t1, c1))] if t1 > t0 => json!(round3((c1 - c0) / ((t1 - t0) as f64 / 1e9))),
                _ => Value::Null,
            },
            "server_cores_with_run": round3((observed.cpu - at_run.cpu) / run_seconds),
            "pods_list_seconds": listed.seconds,
            "pods_listed": listed.pods,
            "pods_list_pages": listed.pages,
            "pods_list_bytes": listed.bytes,
            "pods_list_server_cpu_seconds": round3(server_end.cpu - before_list.cpu),
            "lease_watch_events_per_second": round3(lag.events as f64 / lag.window.max(1e-9)),
            "lease_watch_lag_p50_seconds": percentile(&lag.lags, 0.5).map(round3),
            "lease_watch_lag_p99_seconds": percentile(&lag.lags, 0.99).map(round3),
            "lease_watch_lag_max_seconds": max(&lag.lags).map(round3),
            "sync_seconds": secs(leader_spawned, synced),
            "run_cpu_seconds_to_sync": round3(run_to_sync.cpu),
            "run_rss_bytes": leader_usage.peak,
            "run_rss_end_bytes": leader_usage.rss,
            "run_cpu_seconds": round3(leader_usage.cpu),
            "crashed_nodes": detected.crashed,
            "detected_nodes": detected.detect.len(),
            "detect_seconds": max(&detected.detect),
            "detect_seconds_median": percentile(&detected.detect, 0.5),
            "detect_seconds_min": percentile(&detected.detect, 0.0),
            "detect_seen_seconds": max(&detected.detect_seen),
            "taint_seconds": max(&zone_firsts),
            "taint_seconds_min": percentile(&zone_firsts, 0.0),
            "tainted_nodes": detected.tainted,
            "healthy_nodes_marked_unknown": detected.healthy_marked.len(),
        }),
    );
    let mut notes = vec![
        "detect_seconds: per crashed node, Ready=Unknown's lastTransitionTime minus its last heartbeat (the later of \
         its Lease's renewTime and Ready's lastHeartbeatTime); the max over the crashed nodes (also _median, _min). \
         Condition and taint times are whole seconds (renewTime has microseconds), so a figure may read up to 1 s \
         short; detect_seen_seconds is to when the harness's node watch delivered the change"
            .to_string(),
        "taint_seconds: each zone's first crashed node tainted unreachable:NoExecute, timeAdded minus its last \
         heartbeat, the max over zones (the others follow at the zone's --node-eviction-rate and are not waited for)"
            .to_string(),
        format!(
            "crashed nodes: those whose node Lease was {} s old {} s after the crash was due",
            STALE_LEASE.as_secs(),
            CENSUS_AFTER_CRASH.as_secs()
        ),
        format!(
            "server_cpu_seconds from its launch (the fleet's build: server_cpu_seconds_to_serve) to the end (the pod \
             list included); server_idle_cores over {} s before run; server_cores_with_run from run's start until \
             every crashed node was found out",
            IDLE_WINDOW.as_secs()
        ),
        format!(
            "lease_watch_lag: each node Lease event's arrival minus its spec.renewTime, on a watch of {} s after the \
             incident; pods_list: limit={PAGE} with continue tokens over HTTPS, pages received whole, not decoded",
            LEASE_WINDOW.as_secs()
        ),
    ];
    if o.failover {
        let k = killed.context("the leader was never killed")?;
        let acquired = taken.as_ref().map(|t| t.acquired.unwrap_or(t.seen));
        insert(
            &mut report,
            json!({
                "standby": if o.cold { "cold" } else { "warm" },
                "standby_rss_bytes": k.standby.rss,
                "standby_cpu_seconds": round3(k.standby.cpu),
                "kill_after_crash_seconds": secs(crash, k.at),
                "lease_taken_after_kill_seconds": acquired.map(|a| secs(k.at, a)),
                "takeover_seconds": acquired.zip(decided).map(|(a, d)| secs_fine(a, d)),
                "failover_detect_seconds": max(&detected.after_kill),
                "failover_detect_seconds_median": percentile(&detected.after_kill, 0.5),
                "failover_detected_nodes": detected.after_kill.len(),
                "marked_before_the_kill": detected.before_kill,
                "new_leader_rss_bytes": last_leader.peak,
                "new_leader_cpu_seconds": round3(last_leader.cpu),
            }),
        );
        if let Some(s) = standby_synced {
            report.insert("standby_sync_seconds".into(), json!(s));
        }
        notes.push(format!(
            "failover: run_rss_bytes and run_cpu_seconds are the first leader's when it was killed; takeover_seconds \
             runs from the new holder's acquireTime{} to its log line {decides:?}; failover_detect_seconds is \
             detect_seconds over the nodes marked Unknown after the kill",
            if taken.as_ref().is_some_and(|t| t.acquired.is_none()) {
                " (absent: when the harness saw it)"
            } else {
                ""
            }
        ));
    }
    insert(
        &mut report,
        json!({
            "harness_cpu_seconds": round3(harness_cpu),
            "wall_seconds": round3(began.elapsed().as_secs_f64()),
            "notes": notes,
            "problems": problems,
        }),
    );
    Ok(Measured { report: Value::Object(report), problems })
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

/// What `cargo xtask wire-load --help` prints.
const USAGE: &str = "\
cargo xtask wire-load: nodewarden sim --serve and nodewarden run on loopback, through a node crash;
one JSON report on stdout (memory, CPU, sync, Lease watch lag, detection, taint, takeover), progress on stderr

  --nodes N           nodes of the served cluster (1000)
  --pods-per-node P   pods a node (30)
  --zones Z           zones (3)
  --crash-at SECS     when 1% of the nodes crash, after the server's launch (60; 20 to 3600)
  --failover          two replicas with leader election; the leader is SIGKILLed 5 s after the crash
  --cold              with --failover: the standby is cold (--warm-standby=false)
  --run-flag FLAG     an extra flag for every nodewarden run replica (repeatable)
  --binary PATH       the nodewarden binary (default: built with cargo build --release)
  --keep              keep the log directory

Figures and what each key means: docs/run.md (\"Measured\").";

/// Runs `cargo xtask wire-load [--nodes N] [--pods-per-node P] [--zones Z]
/// [--failover [--cold]] [--crash-at SECS] [--run-flag FLAG]...
/// [--binary PATH] [--keep]`.
pub fn wire_load(args: impl Iterator<Item = String>) -> Result<()> {
    let args: Vec<String> = args.collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return Ok(());
    }
    let o = Options::parse(args.into_iter())?;
    if cfg!(debug_assertions) && o.nodes >= 20_000 {
        eprintln!(
            "wire-load: note: this harness is a debug build and shares the machine with what it measures; \
             at this size run it built for release: cargo run --release -p xtask -- wire-load ..."
        );
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let binary = match &o.binary {
        Some(b) => b.clone(),
        None => {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
            crate::run(&cargo, &["build", "--release", "-p", "nodewarden"])?;
            root.join("target/release/nodewarden")
        }
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
            m = measure(&o, &binary, &dir) => m,
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
    println!("{}", serde_json::to_string_pretty(&report)?);
    if o.keep || !measured.problems.is_empty() {
        eprintln!("wire-load: logs kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    if !measured.problems.is_empty() {
        bail!("wire-load: {}", measured.problems.join("; "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Result<Options> {
        Options::parse(line.split_whitespace().map(String::from))
    }

    const T0: i64 = 1_800_000_000 * 1_000_000_000;

    fn at(s: f64) -> String {
        nodewarden_apiserver::clock::format_rfc3339(T0 + (s * 1e9) as i64, true)
    }

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

    #[test]
    fn flags_are_read_and_bad_ones_refused() {
        assert_eq!(args("").expect("defaults"), Options::default());
        let o = args("--nodes=10000 --pods-per-node 30 --failover --cold --crash-at 90 --run-flag=--kube-api-qps=50")
            .expect("flags");
        assert_eq!((o.nodes, o.pods_per_node, o.failover, o.cold), (10000, 30, true, true));
        assert_eq!(o.crash_at, Duration::from_secs(90));
        assert_eq!(o.run_flags, vec!["--kube-api-qps=50".to_string()]);
        for (line, says) in [
            ("--cold", "needs --failover"),
            ("--nodes ten", "--nodes needs a whole number, got \"ten\""),
            ("--nodes", "--nodes needs a number"),
            ("--nodes 0", "at least 1"),
            ("--nodes 2 --zones 3", "--zones must be from 1 to --nodes (2)"),
            ("--crash-at 5", "--crash-at must be from 20"),
            ("--keep=yes", "--keep takes no value"),
            ("--speed 2", "unknown flag \"--speed\""),
        ] {
            let err = args(line).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains(says), "{line}: {err}");
        }
    }

    #[test]
    fn proc_files_are_read() {
        let status = "Name:\tnodewarden\nVmPeak:\t 9 kB\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(parse_status(status), Some((1024 * 1024, 2048 * 1024)));
        assert_eq!(parse_status("Name:\tx\n"), None);
        // A command with spaces and a parenthesis: fields count after the last ')'.
        let stat = "42 (a b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 100 0 0";
        assert_eq!(parse_stat_cpu(stat, 100.0), Some(3.0));
        assert_eq!(parse_stat_cpu("42 (x) S 1", 100.0), None);
    }

    #[test]
    fn log_lines_are_found_once_whole() {
        let line = r#"{"timestamp":"2026-11-26T01:23:28.322787Z","level":"INFO","message":"leading: deciding from what this standby observed","synced":true}"#;
        let (t, message) = log_line(line).expect("a line");
        assert_eq!(nodewarden_apiserver::clock::format_rfc3339(t, true), "2026-11-26T01:23:28.322787Z");
        assert!(message.starts_with("leading: deciding"));
        assert_eq!(log_line("thread 'main' panicked"), None);

        let dir = std::env::temp_dir().join(format!("nodewarden-wire-load-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("run.log");
        let head = &line[..40];
        std::fs::write(&path, format!("not json\n{head}")).expect("write");
        let mut tail = LogTail::new(&path);
        assert_eq!(tail.find("leading: deciding"), None, "half a line");
        std::fs::write(&path, format!("not json\n{line}\n")).expect("write");
        assert_eq!(tail.find("leading: deciding"), Some(t));
        assert_eq!(tail.find("leading: deciding"), None, "each line once");
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn node(name: &str, zone: &str, ready: &str, transition: f64, heartbeat: f64, taint: Option<f64>) -> Value {
        let taints: Vec<Value> = taint
            .map(|t| json!({"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": at(t)}))
            .into_iter()
            .chain([json!({"key": UNREACHABLE, "effect": "NoSchedule"})])
            .collect();
        json!({
            "metadata": {"name": name, "labels": {ZONE_LABEL: zone}},
            "spec": {"taints": taints},
            "status": {"conditions": [
                {"type": "MemoryPressure", "status": "False", "lastTransitionTime": at(0.0)},
                {"type": "Ready", "status": ready, "lastTransitionTime": at(transition), "lastHeartbeatTime": at(heartbeat)},
            ]},
        })
    }

    fn take(book: &mut HashMap<String, NodeSeen>, v: &Value, arrival: f64) {
        let (name, f) = node_facts(v).expect("a node");
        book.entry(name).or_default().take(&f, T0 + (arrival * 1e9) as i64);
    }

    #[test]
    fn detection_counts_from_the_last_heartbeat() {
        let mut book = HashMap::new();
        for n in ["a", "b", "c", "h"] {
            take(&mut book, &node(n, if n == "c" { "z2" } else { "z1" }, "True", 0.0, 0.0, None), 0.0);
        }
        let (_, f) = node_facts(&node("a", "z1", "Unknown", 50.0, 5.0, Some(51.0))).expect("facts");
        assert_eq!((f.ready.as_deref(), f.tainted, f.taint_added), (Some("Unknown"), true, Some(T0 + 51_000_000_000)));
        // a: marked at 50 (heartbeat: its Lease at 8, after Ready's 5) and tainted.
        take(&mut book, &node("a", "z1", "Unknown", 50.0, 5.0, Some(51.0)), 50.4);
        // b: marked after the kill at 60, not tainted (z1's limiter).
        take(&mut book, &node("b", "z1", "Unknown", 62.0, 9.0, None), 62.3);
        // A later event does not move what was first seen.
        take(&mut book, &node("a", "z1", "Unknown", 70.0, 5.0, Some(71.0)), 71.0);
        let crashed: BTreeMap<String, i64> =
            [("a", 8.0), ("b", 2.0), ("c", 4.0)].map(|(n, r)| (n.to_string(), T0 + (r * 1e9) as i64)).into();
        let d = detection(&crashed, &book, Some(T0 + 60_000_000_000));
        assert_eq!(d.crashed, 3);
        assert_eq!(d.detect, vec![42.0, 53.0]);
        assert_eq!(d.detect_seen, vec![42.4, 53.3]);
        assert_eq!((d.after_kill.clone(), d.before_kill), (vec![53.0], 1));
        assert_eq!(d.undetected, vec!["c".to_string()]);
        assert_eq!(d.zone_first_taint, BTreeMap::from([("z1".into(), Some(43.0)), ("z2".into(), None)]));
        assert_eq!(d.tainted, 1);
        assert!(d.healthy_marked.is_empty() && !d.complete());

        // c: marked by mistake at 1 while it lived, Ready again at 3 (the
        // taint gone), then crashed; only the later episode counts.
        take(&mut book, &node("c", "z2", "Unknown", 1.0, 0.0, Some(1.0)), 1.2);
        take(&mut book, &node("c", "z2", "True", 3.0, 3.0, None), 3.1);
        take(&mut book, &node("c", "z2", "Unknown", 45.0, 4.0, Some(45.0)), 45.1);
        // h: marked by mistake, then Ready again: still a false mark.
        take(&mut book, &node("h", "z1", "Unknown", 45.0, 4.0, None), 45.1);
        take(&mut book, &node("h", "z1", "True", 50.0, 50.0, None), 50.1);
        let d = detection(&crashed, &book, None);
        assert!(d.complete());
        assert_eq!(d.detect, vec![42.0, 53.0, 41.0]);
        assert_eq!(d.zone_first_taint.get("z2"), Some(&Some(41.0)));
        assert_eq!(d.healthy_marked, vec!["h".to_string()]);
        assert_eq!((d.after_kill.len(), d.before_kill), (0, 0));
    }

    #[test]
    fn stale_leases_are_the_crashed_nodes() {
        let lease = |n: &str, renew: f64| json!({"metadata": {"name": n}, "spec": {"renewTime": at(renew)}});
        let now = T0 + 31_000_000_000;
        assert_eq!(stale_lease(&lease("old", 10.0), now, STALE_LEASE), Some(("old".to_string(), T0 + 10_000_000_000)));
        assert_eq!(stale_lease(&lease("fresh", 25.0), now, STALE_LEASE), None);
        assert_eq!(stale_lease(&json!({"metadata": {"name": "never"}, "spec": {}}), now, STALE_LEASE), None);
    }

    #[test]
    fn lease_lag_is_arrival_minus_renew_time() {
        let event = |kind: &str| {
            json!({"type": kind, "object": {"metadata": {"name": "n"}, "spec": {"renewTime": at(1.25)}}}).to_string()
        };
        assert_eq!(lease_event_lag(&event("MODIFIED"), T0 + 1_300_000_000), Some(0.05));
        assert_eq!(lease_event_lag(&event("BOOKMARK"), T0), None);
        assert_eq!(lease_event_lag("{", T0), None);
    }

    #[test]
    fn a_page_is_read_up_to_its_items() {
        let page = r#"{"apiVersion":"v1","kind":"PodList","metadata":{"continue":"abc","remainingItemCount":3},"items":[{"metadata":{"name":"x","items":1}}]}"#;
        assert_eq!(page_head(page).and_then(|m| m.get("continue").cloned()), Some(json!("abc")));
        let items_first = r#"{"items":[],"metadata":{"continue":"abc"}}"#;
        assert_eq!(page_head(items_first), None);
    }
}
