//! The timeline of a measurement (the steps `wire_load`'s module doc
//! lists): the server on its own, the controller (or a leader and a
//! standby), the node crash and, with `--failover`, the leader's death,
//! watched until every crashed node is found out, then the probes. Each
//! step is a function that returns what it measured; [`measure`] runs
//! them in order and hands the lot to the report.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use nodewarden_harness::process::{self, unix_nanos};
use serde_json::Value;
use tokio::task::JoinHandle;

use super::api::{Api, ELECTION_LEASE, NODE_LEASES};
use super::nodes::{Book, Detection, detection, stale_lease, time_at, watch_nodes};
use super::options::{Incident as Kind, Options};
use super::probes::{lease_lag, list_pods};
use super::procs::{LogTail, Procs, spawn, start_replica, wait_for_line};
use super::report::{Figures, Killed, Measured, Taken};
use super::usage::{Usage, clock_ticks, usage, usage_of};
use super::zone::{self, ZoneFigures, ZoneSeen, ZoneWatch};
use super::{
    CENSUS_AFTER_CRASH, CpuAt, IDLE_WINDOW, KILL_AFTER_CRASH, LEASE_WINDOW, STALE_LEASE, STEADY_AFTER_SYNC, nanos, say,
    secs,
};

/// What every step reads: the flags, the served API, the clocks.
struct Ctx<'a> {
    o: &'a Options,
    api: Api,
    /// When the measurement began (progress lines count from it).
    began: Instant,
    /// Clock ticks a second, for `/proc`'s CPU times.
    tick: f64,
    /// When the nodes crash, Unix nanoseconds.
    crash: i64,
    /// With `--zone-outage`: when the zone gets the API server back.
    heal: Option<i64>,
    /// The server's request journal (`--zone-outage`).
    requests: std::path::PathBuf,
}

/// After the heal, how long the harness still watches: the zone's
/// kubelets post Ready again and the controller takes its taints off; a
/// deletion in this time is counted as after the heal.
const AFTER_HEAL: Duration = Duration::from_secs(30);

/// The served cluster once it serves.
struct Server {
    procs: Procs,
    /// Its launch, Unix nanoseconds.
    spawned: i64,
    /// When it wrote its kubeconfig.
    served: i64,
    at_serve: Usage,
}

/// The controller once its caches are synced.
struct Run {
    /// When the first replica was started.
    began: Instant,
    /// The leader's identity in the election Lease (with `--failover`).
    leader_identity: Option<String>,
    leader_spawned: i64,
    synced: i64,
    run_to_sync: Usage,
    standby_synced: Option<f64>,
}

/// The whole measurement; every process is gone when it returns.
pub(super) async fn measure(o: &Options, binary: &Path, dir: &Path) -> Result<Measured> {
    let began = Instant::now();
    let tick = clock_ticks();
    let harness_cpu0 = usage_of("self", tick).map_or(0.0, |u| u.cpu);
    let mut problems = Vec::new();
    let kubeconfig = dir.join("kubeconfig");
    let requests = dir.join("requests.jsonl");
    let server_binary = o.server_binary.as_deref().unwrap_or(binary);
    let Server { mut procs, spawned: server_spawned, served, at_serve } =
        serve(o, server_binary, dir, &kubeconfig, &requests, began, tick).await?;
    let crash = server_spawned + nanos(o.crash_at);
    let heal = match o.incident {
        Kind::ZoneOutage { outage, .. } => Some(crash + nanos(outage)),
        Kind::NodeCrash => None,
    };
    say(
        began,
        format!(
            "serving after {:.1} s, {} MiB; idle for {} s",
            secs(server_spawned, served),
            at_serve.rss >> 20,
            IDLE_WINDOW.as_secs()
        ),
    );
    let cx = Ctx { o, api: Api::connect(&kubeconfig).await?, began, tick, crash, heal, requests };
    let idle_began = Instant::now();
    let before_idle = usage(&procs.server, tick)?;
    tokio::time::sleep(IDLE_WINDOW).await;
    procs.check()?;
    let at_run = usage(&procs.server, tick)?;
    let idle_cores = (at_run.cpu - before_idle.cpu) / idle_began.elapsed().as_secs_f64();

    let run = start_run(&cx, binary, dir, &kubeconfig, &mut procs, &mut problems).await?;
    let incident = watch_incident(&cx, &run, &mut procs, &mut problems).await?;

    // The probes, then every process is read and stopped.
    let observed = usage(&procs.server, tick)?;
    let run_seconds = run.began.elapsed().as_secs_f64();
    let d = &incident.detected;
    say(
        began,
        format!(
            "{} crashed node(s) Unknown, {} tainted; timing Lease renewals for {} s",
            d.detect.len(),
            d.tainted,
            LEASE_WINDOW.as_secs()
        ),
    );
    let lag = lease_lag(&cx.api, LEASE_WINDOW).await?;
    say(began, "listing every pod");
    let before_list = usage(&procs.server, tick)?;
    let listed = list_pods(&cx.api).await?;
    procs.check()?;
    incident.watcher.abort();
    let server_end = usage(&procs.server, tick)?;
    let last_leader = usage(procs.replica(if o.failover { 1 } else { 0 })?, tick)?;
    let harness_cpu = usage_of("self", tick).map_or(0.0, |u| u.cpu) - harness_cpu0;
    say(began, format!("listed {} pods in {} s; stopping", listed.pods, listed.seconds));
    drop(procs);

    let Incident { detected, seen, decides, zone, .. } = incident;
    let zone = match (zone, heal) {
        (Some((seen, watch)), Some(heal)) => {
            let requests = zone::read_requests(&cx.requests)?;
            let evictions = zone::judge(&watch.pods, &watch.tainted, &requests, heal);
            problems.extend(evictions.problems());
            Some(ZoneFigures { seen, watch, evictions, heal })
        }
        _ => None,
    };
    Figures {
        server_spawned,
        served,
        at_serve,
        at_run,
        observed,
        before_list,
        server_end,
        idle_cores,
        run_seconds,
        steady: seen.steady,
        leader_spawned: run.leader_spawned,
        synced: run.synced,
        run_to_sync: run.run_to_sync,
        standby_synced: run.standby_synced,
        last_leader,
        crash,
        detected,
        killed: seen.killed,
        taken: seen.taken,
        decided: seen.decided,
        decides,
        lag,
        listed,
        harness_cpu,
        zone,
        wall_seconds: began.elapsed().as_secs_f64(),
        problems,
    }
    .into_measured(o)
}

/// Step 1: `nodewarden sim --serve` with the built-in `node-crash` (or
/// `zone-outage`, healed after `--outage`, with the request journal), in
/// its own process, until it writes its kubeconfig.
async fn serve(
    o: &Options,
    binary: &Path,
    dir: &Path,
    kubeconfig: &Path,
    requests: &Path,
    began: Instant,
    tick: f64,
) -> Result<Server> {
    let pods = o.nodes * o.pods_per_node;
    let scenario = match o.incident {
        Kind::NodeCrash => "node-crash",
        Kind::ZoneOutage { .. } => "zone-outage",
    };
    let mut args: Vec<String> =
        ["sim", "--serve", "127.0.0.1:0", "--scenario", scenario, "--quiet"].map(String::from).into();
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
    // Both scenarios strike at their 1m; the timeline runs at this speed
    // so that 1m falls at --crash-at (the kubelets keep real time).
    let speed = 60.0 / o.crash_at.as_secs_f64();
    if o.crash_at != Duration::from_secs(60) {
        args.extend(["--speed".into(), format!("{speed}")]);
    }
    if let Kind::ZoneOutage { outage, toleration } = o.incident {
        // The heal, in the scenario's time, `outage` of real time after 1m.
        let heal_ms = ((60.0 + outage.as_secs_f64() * speed) * 1000.0).round() as u64;
        let toleration = toleration.as_secs().to_string();
        args.extend([
            "--heal-at".into(),
            format!("{heal_ms}ms"),
            "--default-not-ready-toleration-seconds".into(),
            toleration.clone(),
            "--default-unreachable-toleration-seconds".into(),
            toleration,
            "--request-journal".into(),
            requests.display().to_string(),
        ]);
    }
    say(began, format!("starting nodewarden sim --serve: {} nodes, {pods} pods, {} zones", o.nodes, o.zones));
    let mut server = spawn(binary, &args, "nodewarden sim --serve", dir.join("server.log"), &[("RUST_LOG", "warn")])?;
    let spawned = server.spawned_unix_nanos();
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
    let mut procs = Procs { server, replicas: Vec::new(), metrics: Vec::new() };
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
    Ok(Server { procs, spawned, served, at_serve })
}

/// Step 2: the controller, one replica or a leader and then a standby,
/// until their caches are synced.
async fn start_run(
    cx: &Ctx<'_>,
    binary: &Path,
    dir: &Path,
    kubeconfig: &Path,
    procs: &mut Procs,
    problems: &mut Vec<String>,
) -> Result<Run> {
    let (o, began) = (cx.o, cx.began);
    let run_began = Instant::now();
    say(began, if o.failover { "starting nodewarden run #0 (leader election)" } else { "starting nodewarden run" });
    start_replica(binary, kubeconfig, dir, 0, procs, o)?;
    let leader_identity = if o.failover {
        let id = wait_holder(&cx.api, procs, "wire-load-0_", Duration::from_secs(60)).await?;
        say(began, format!("#0 holds the Lease; starting #1, a {} standby", if o.cold { "cold" } else { "warm" }));
        start_replica(binary, kubeconfig, dir, 1, procs, o)?;
        Some(id)
    } else {
        None
    };
    let pods = o.nodes * o.pods_per_node;
    let sync_limit = Duration::from_secs(120 + (pods / 4000) as u64);
    let leader = procs.replica(0)?;
    let (leader_spawned, mut leader_log) = (leader.spawned_unix_nanos(), LogTail::new(leader.log()));
    let synced = wait_for_line(procs, &mut leader_log, "every cache synced", sync_limit)
        .await
        .context("nodewarden run #0 syncing its caches")?;
    let run_to_sync = usage(procs.replica(0)?, cx.tick)?;
    say(began, format!("#0: every cache synced {:.1} s after its start", secs(leader_spawned, synced)));
    if synced > cx.crash {
        problems.push(format!(
            "the nodes crashed {} s after the launch, before the leader had synced: pass a later --crash-at",
            o.crash_at.as_secs()
        ));
    }
    let mut standby_synced = None;
    if o.failover && !o.cold {
        let standby = procs.replica(1)?;
        let (spawned, mut log) = (standby.spawned_unix_nanos(), LogTail::new(standby.log()));
        let at = wait_for_line(procs, &mut log, "every cache synced", sync_limit)
            .await
            .context("nodewarden run #1 (warm standby) syncing its caches")?;
        say(began, format!("#1 (standby): every cache synced {:.1} s after its start", secs(spawned, at)));
        if at > cx.crash + nanos(KILL_AFTER_CRASH) {
            problems.push("the warm standby had not synced when the leader was killed: pass a later --crash-at".into());
        }
        standby_synced = Some(secs(spawned, at));
    }
    Ok(Run { began: run_began, leader_identity, leader_spawned, synced, run_to_sync, standby_synced })
}

/// What the harness has seen of the incident so far, apart from the
/// nodes (which the node watch keeps).
#[derive(Default)]
struct Seen {
    killed: Option<Killed>,
    taken: Option<Taken>,
    /// When the new leader logged that it decides.
    decided: Option<i64>,
    /// The crashed nodes (name → their Lease's renewTime), once counted.
    crashed: Option<BTreeMap<String, i64>>,
    /// Far more nodes stale than node-crash stops: no crash to time.
    overloaded: bool,
    /// The leader's CPU between the end of its sync's aftermath and the
    /// crash: what it costs at steady state (Lease renewals, status posts).
    steady: [Option<CpuAt>; 2],
}

/// What step 3 leaves: the detection, what was seen on the way, and the
/// node watch, still running for the probes' duration.
struct Incident {
    detected: Detection,
    seen: Seen,
    watcher: JoinHandle<Result<()>>,
    decides: &'static str,
    /// With `--zone-outage`: the zone as the API server showed it, and
    /// what the harness kept while it was down.
    zone: Option<(ZoneSeen, ZoneWatch)>,
}

/// Step 3: the crash (and with `--failover` the leader's death), watched
/// until every crashed node is Unknown and each zone has a tainted one,
/// or the deadline.
async fn watch_incident(cx: &Ctx<'_>, run: &Run, procs: &mut Procs, problems: &mut Vec<String>) -> Result<Incident> {
    let (o, began, crash) = (cx.o, cx.began, cx.crash);
    let book: Book = Arc::new(Mutex::new(HashMap::new()));
    let mut watcher = tokio::spawn(watch_nodes(Api { client: cx.api.client.clone() }, book.clone()));
    let deadline = deadline(o, crash, run);
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
    let mut seen = Seen::default();
    let mut said = Instant::now();
    let steady_from = run.synced + nanos(STEADY_AFTER_SYNC);
    let mut zone = cx.heal.map(|_| ZoneWatch::default());
    let no_zone_yet = BTreeMap::new();
    // The zone as it stood at the heal: after it, its nodes read Ready
    // and untainted again.
    let mut at_heal: Option<(Detection, ZoneSeen)> = None;
    let detected = loop {
        procs.check()?;
        let now = unix_nanos();
        if seen.steady[0].is_none() && now >= steady_from && now < crash {
            seen.steady[0] = Some((now, usage(procs.replica(0)?, cx.tick)?.cpu));
        }
        if seen.steady[0].is_some() && seen.steady[1].is_none() && now >= crash {
            seen.steady[1] = Some((now, usage(procs.replica(0)?, cx.tick)?.cpu));
        }
        if watcher.is_finished() {
            return Err(match (&mut watcher).await {
                Ok(Err(e)) => e.context("the node watch"),
                Ok(Ok(())) => anyhow!("the node watch ended"),
                Err(e) => anyhow!("the node watch: {e}"),
            });
        }
        if o.failover {
            seen.failover(cx, run, procs, new_leader_log.as_mut(), decides, now).await?;
        }
        if seen.crashed.is_none() && now >= crash + nanos(CENSUS_AFTER_CRASH) {
            seen.census(cx, problems).await?;
        }
        if let (Some(z), true) = (zone.as_mut(), now >= crash) {
            let nodes = seen.crashed.as_ref().unwrap_or(&no_zone_yet);
            let newly = z.newly_tainted(nodes, &book.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
            z.look(&cx.api, procs.replica(0)?, procs.metrics[0], cx.tick, newly).await?;
        }
        if let Some(c) = &seen.crashed {
            let d = detection(
                c,
                &book.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
                seen.killed.map(|k| k.at),
            );
            if let Some(heal) = cx.heal
                && now >= heal
                && at_heal.is_none()
            {
                let z = ZoneSeen::of(c, &book.lock().unwrap_or_else(std::sync::PoisonError::into_inner), crash);
                at_heal = Some((d.clone(), z));
            }
            let done = match cx.heal {
                // A zone outage is watched to its end and a little beyond.
                Some(heal) => now >= heal + nanos(AFTER_HEAL),
                None => d.complete() && (!o.failover || seen.decided.is_some()),
            };
            if done || seen.overloaded || now > deadline {
                if !done && !seen.overloaded {
                    problems.push(unfinished(o, &d, deadline - crash, seen.decided.is_none()));
                }
                break d;
            }
            if said.elapsed() >= Duration::from_secs(10) {
                let mut line =
                    format!("{} of {} crashed node(s) Unknown, {} tainted", d.detect.len(), d.crashed, d.tainted);
                if let Some(z) = &zone {
                    line += &format!(
                        "; run {} MiB (peak since the outage {} MiB), up to {} writes waiting",
                        usage(procs.replica(0)?, cx.tick)?.rss >> 20,
                        z.rss_max >> 20,
                        z.queue_max
                    );
                }
                say(began, line);
                said = Instant::now();
            }
        } else if now > deadline {
            bail!("the crash was never counted");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // A zone outage's figures are the zone's at the heal.
    let (detected, zone) = match (zone, at_heal) {
        (Some(z), Some((d, seen_at_heal))) => (d, Some((seen_at_heal, z))),
        (Some(z), None) => {
            let book = book.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            (detected, Some((ZoneSeen::of(seen.crashed.as_ref().unwrap_or(&no_zone_yet), &book, crash), z)))
        }
        (None, _) => (detected, None),
    };
    Ok(Incident { detected, seen, watcher, decides, zone })
}

/// How long after the crash step 3 waits: grace, a monitor period and
/// the first writes, then the Unknown statuses themselves: a read and an
/// update a node, three requests counting the taints and Events, through
/// the client's 20 requests a second (a thousand crashed nodes take
/// minutes to write, as they would for kube-controller-manager at its
/// default rate); longer for a takeover, longer still for a cold one.
fn deadline(o: &Options, crash: i64, run: &Run) -> i64 {
    if let Kind::ZoneOutage { outage, .. } = o.incident {
        return crash + nanos(outage + AFTER_HEAL);
    }
    let writes = Duration::from_secs_f64(o.nodes.div_ceil(100) as f64 * 3.0 / 20.0);
    let mut deadline = crash + nanos(Duration::from_secs(150) + writes);
    if o.failover {
        deadline += nanos(Duration::from_secs(30));
        if o.cold {
            deadline += 2 * (run.synced - run.leader_spawned) + nanos(Duration::from_secs(45));
        }
    }
    deadline
}

/// The problem of an incident not found out by the deadline.
fn unfinished(o: &Options, d: &Detection, waited: i64, undecided: bool) -> String {
    format!(
        "by {} s after the crash: {} of {} crashed node(s) not marked Unknown, {} of {} zone(s) without a tainted one{}",
        waited / 1_000_000_000,
        d.undetected.len(),
        d.crashed,
        d.zone_first_taint.values().filter(|t| t.is_none()).count(),
        d.zone_first_taint.len(),
        if o.failover && undecided { ", and the new leader never decided" } else { "" }
    )
}

impl Seen {
    /// The failover's moments, each once: the leader SIGKILLed
    /// [`KILL_AFTER_CRASH`] after the crash, the Lease taken by another,
    /// the new leader's line that it decides.
    async fn failover(
        &mut self,
        cx: &Ctx<'_>,
        run: &Run,
        procs: &mut Procs,
        new_leader_log: Option<&mut LogTail>,
        decides: &str,
        now: i64,
    ) -> Result<()> {
        if self.killed.is_none() && now >= cx.crash + nanos(KILL_AFTER_CRASH) {
            let leader = usage(procs.replica(0)?, cx.tick)?;
            let standby = usage(procs.replica(1)?, cx.tick)?;
            if let Some(mut p) = procs.replicas[0].take() {
                p.kill();
            }
            self.killed = Some(Killed { at: unix_nanos(), leader, standby });
            say(cx.began, "SIGKILLed the leader (#0)");
        }
        if self.killed.is_some()
            && self.taken.is_none()
            && let Some(lease) = cx.api.object(ELECTION_LEASE).await?
            && holder(&lease).is_some_and(|h| Some(h) != run.leader_identity.as_deref())
        {
            self.taken = Some(Taken { seen: unix_nanos(), acquired: time_at(&lease, "/spec/acquireTime") });
            say(cx.began, format!("#1 holds the Lease ({})", holder(&lease).unwrap_or_default()));
        }
        if self.taken.is_some()
            && self.decided.is_none()
            && let Some(log) = new_leader_log
        {
            self.decided = log.find(decides);
            if self.decided.is_some() {
                say(cx.began, format!("#1 decides ({decides:?})"));
            }
        }
        Ok(())
    }

    /// Counts the crashed nodes: those whose Lease is [`STALE_LEASE`] old
    /// [`CENSUS_AFTER_CRASH`] after the crash.
    async fn census(&mut self, cx: &Ctx<'_>, problems: &mut Vec<String>) -> Result<()> {
        let o = cx.o;
        let now = unix_nanos();
        let mut c = BTreeMap::new();
        cx.api.list(NODE_LEASES, |lease| c.extend(stale_lease(lease, now, STALE_LEASE))).await?;
        if c.is_empty() {
            bail!(
                "no node Lease has stopped renewing {} s after the crash was due: node-crash did not play",
                CENSUS_AFTER_CRASH.as_secs()
            );
        }
        say(cx.began, format!("{} node(s) stopped renewing their Lease", c.len()));
        // node-crash stops 1% of the nodes (at least one), zone-outage
        // the first zone; many more stale Leases mean the server's
        // kubelets are behind.
        let (expected, scenario) = match o.incident {
            Kind::NodeCrash => ((o.nodes / 100).max(1), "node-crash"),
            Kind::ZoneOutage { .. } => (o.nodes.div_ceil(o.zones), "zone-outage"),
        };
        if c.len() > 2 * expected + 10 {
            problems.push(format!(
                "{} of {} node Leases were over {} s old where {scenario} stops {expected}: the server's kubelets \
                 fall behind (it cannot keep this many nodes renewing on this machine), so there is no crash to time",
                c.len(),
                o.nodes,
                STALE_LEASE.as_secs()
            ));
            self.overloaded = true;
        }
        self.crashed = Some(c);
        Ok(())
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
