//! `engine-memory`: the engine's own memory and cost on a generated fleet,
//! measured apart from the simulator.
//!
//! `cargo xtask load` runs it beside `nodewarden sim` (and it can be run by
//! hand: `cargo run --release -p xtask --bin engine-memory -- --nodes 10000`).
//! The fleet is `nodewarden sim`'s (`nodewarden_cluster::fleet`); its kubelets
//! renew Leases and post status on their own cadences, and the engine is fed
//! exactly what the cluster's watches deliver, through the same control loop
//! as production (`Controller::step`, the simulated cluster as its API).
//!
//! Memory is counted by a global allocator that keeps the live byte count,
//! so the figures are exact and repeatable: the engine's share is the live
//! bytes that go away when it is dropped, and the safety interlock's (its
//! mirror of the cluster) what goes away when the checker is dropped after
//! it. Per-node bytes come from an engine
//! fed the same nodes and Leases without pods; per-pod bytes are the rest
//! divided by the pods.
//!
//! Prints one JSON object.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nodewarden_cluster::fleet::{self, FleetSpec, LEASE_JITTER};
use nodewarden_cluster::{AdmissionDefaults, Cluster, KubeletTiming, Kubelets};
use nodewarden_controller::Controller;
use nodewarden_engine::TickPhase;
use nodewarden_model::{ControllerConfig, Span, Timestamp};
use serde_json::json;

/// Counts live bytes, their peak, and allocations, on top of the system
/// allocator. Counting needs `unsafe impl GlobalAlloc`; xtask does not take
/// the workspace's `unsafe_code = "forbid"`, so it lives here rather than in
/// a crate that ships.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Relaxed) + by;
    PEAK.fetch_max(now, Relaxed);
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counters are plain atomics and never affect what is returned.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
            ALLOCATIONS.fetch_add(1, Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
            ALLOCATIONS.fetch_add(1, Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
            grew(new_size);
            ALLOCATIONS.fetch_add(1, Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> usize {
    LIVE.load(Relaxed)
}

struct Args {
    nodes: usize,
    zones: usize,
    pods_per_node: usize,
    minutes: i64,
    seed: u64,
    zone_down: bool,
}

fn parse() -> Result<Args> {
    let mut a = Args { nodes: 10_000, zones: 3, pods_per_node: 30, minutes: 5, seed: 1, zone_down: false };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--zone-down" {
            a.zone_down = true;
            continue;
        }
        let value = args.next().with_context(|| format!("{flag} needs a value"))?;
        let n: u64 = value.parse().with_context(|| format!("{flag} must be a whole number, got {value:?}"))?;
        match flag.as_str() {
            "--nodes" => a.nodes = n as usize,
            "--zones" => a.zones = n as usize,
            "--pods-per-node" => a.pods_per_node = n as usize,
            "--minutes" => a.minutes = n as i64,
            "--seed" => a.seed = n,
            other => bail!(
                "unknown flag {other:?}; usage: engine-memory [--nodes N] [--zones Z] [--pods-per-node P] \
                 [--minutes M] [--seed S] [--zone-down]"
            ),
        }
    }
    if a.nodes == 0 || a.zones == 0 || a.zones > a.nodes {
        bail!("need at least one node and between 1 and --nodes zones");
    }
    Ok(a)
}

/// What one run of the engine on a fleet measured.
struct Run {
    /// Live bytes the engine held at the end (dropped to measure).
    engine_bytes: usize,
    /// Live bytes the safety interlock's checker held at the end.
    interlock_bytes: usize,
    /// The highest live byte count minus what the process held before the
    /// controller was made: its peak (engine and interlock), the
    /// observations in hand included.
    engine_peak_bytes: usize,
    /// Allocations made while the engine ran (cluster and kubelets included).
    allocations: u64,
    /// Wall time of the first tick, which ingests the whole cluster.
    first_tick: Duration,
    /// Wall time of each monitor pass (the `health_monitor` phase).
    passes: Vec<Duration>,
    /// Wall time of the whole run.
    wall: Duration,
    actions: usize,
}

fn run(a: &Args, pods_per_node: usize, measure_steady_state: bool) -> Result<Run> {
    let timing = KubeletTiming::default();
    let mut cluster = Cluster::new(AdmissionDefaults::default());
    let mut kubelets = Kubelets::new(timing).with_jitter(LEASE_JITTER, a.seed);
    let spec = FleetSpec { nodes: a.nodes, zones: a.zones, pods_per_node, seed: a.seed };
    let layout = fleet::build(&spec, &timing, &mut cluster, &mut kubelets);
    let started = Instant::now();
    // What the process holds before the engine exists (the cluster, its
    // kubelets); the observations made next are handed to the engine, which
    // keeps their strings, so they count towards its peak.
    let baseline = live();
    PEAK.store(baseline, Relaxed);
    let allocations = ALLOCATIONS.load(Relaxed);
    let state = cluster.state();
    let mut controller = Controller::new(ControllerConfig::default(), Timestamp::EPOCH).context("default config")?;
    controller.measure_with(Instant::now);
    let mut now = Timestamp::EPOCH;
    controller.observe_all(now, state);
    let t0 = Instant::now();
    let mut actions = controller.step(now, &mut cluster, &mut |_| {}).actions;
    let first_tick = t0.elapsed();
    if a.zone_down {
        for n in layout.nodes_in(0) {
            kubelets.stop(&n);
        }
    }
    let mut passes = Vec::new();
    let end = Timestamp::EPOCH + Span::from_secs(a.minutes * 60);
    if measure_steady_state {
        while now < end {
            now += Span::from_millis(100);
            let observations = kubelets.run_until(now, &mut cluster);
            controller.observe_all(now, observations);
            actions += controller.step(now, &mut cluster, &mut |_| {}).actions;
            if let Some(p) =
                controller.engine().last_tick_timings().iter().find(|p| p.phase == TickPhase::HealthMonitor)
            {
                passes.push(p.took);
            }
        }
    }
    let peak = PEAK.load(Relaxed);
    let allocations = ALLOCATIONS.load(Relaxed) - allocations;
    let (engine, checker) = controller.into_parts();
    let with = live();
    drop(engine);
    let without_engine = live();
    drop(checker);
    let without = live();
    Ok(Run {
        engine_bytes: with - without_engine,
        interlock_bytes: without_engine - without,
        engine_peak_bytes: peak.saturating_sub(baseline),
        allocations,
        first_tick,
        passes,
        wall: started.elapsed(),
        actions,
    })
}

fn quantile(sorted: &[Duration], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    Some((sorted[i].as_secs_f64() * 1e6).round() / 1e3)
}

fn main() -> Result<()> {
    let a = parse()?;
    let pods = a.nodes * a.pods_per_node;
    let nodes_only = run(&a, 0, false)?;
    let full = run(&a, a.pods_per_node, true)?;
    let per_node = nodes_only.engine_bytes as f64 / a.nodes as f64;
    let per_pod =
        if pods == 0 { 0.0 } else { full.engine_bytes.saturating_sub(nodes_only.engine_bytes) as f64 / pods as f64 };
    let mut passes = full.passes.clone();
    passes.sort();
    let report = json!({
        "nodes": a.nodes,
        "pods": pods,
        "zones": a.zones,
        "zone_down": a.zone_down,
        "simulated_minutes": a.minutes,
        "engine_bytes": full.engine_bytes,
        "engine_mib": (full.engine_bytes as f64 / (1 << 20) as f64 * 10.0).round() / 10.0,
        "engine_peak_bytes": full.engine_peak_bytes,
        "interlock_bytes": full.interlock_bytes,
        "interlock_mib": (full.interlock_bytes as f64 / (1 << 20) as f64 * 10.0).round() / 10.0,
        "bytes_per_node": per_node.round(),
        "bytes_per_pod": per_pod.round(),
        "allocations": full.allocations,
        "first_tick_ms": (full.first_tick.as_secs_f64() * 1e6).round() / 1e3,
        "nodes_only_first_tick_ms": (nodes_only.first_tick.as_secs_f64() * 1e6).round() / 1e3,
        "monitor_pass_ms": {
            "count": passes.len(),
            "p50": quantile(&passes, 0.5),
            "p99": quantile(&passes, 0.99),
            "max": quantile(&passes, 1.0),
        },
        "actions": full.actions,
        "wall_seconds": (full.wall.as_secs_f64() * 1e3).round() / 1e3,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
