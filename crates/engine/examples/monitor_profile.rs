//! The health-pass benchmarks' fleet, run for a fixed number of passes so
//! that instruction counts can be compared (timings on a shared machine
//! are too noisy for small differences):
//!
//! ```text
//! cargo build --release -p nodewarden-engine --example monitor_profile
//! valgrind --tool=callgrind --toggle-collect='*measured_passes*' \
//!     target/release/examples/monitor_profile healthy 100000 20
//! ```
//!
//! The first argument is `healthy`, `zone_down` (as in
//! `benches/health_pass.rs`) or `quiet`; then the node count and the
//! number of passes. Without valgrind it prints the p50 and p99 of the
//! `health_monitor` phase over the passes (criterion reports neither).
//! With `--toggle-collect='*measured_passes*'` callgrind counts the
//! passes (the renewals' ingest and the ticks); with
//! `--toggle-collect=bevy_ecs::schedule::schedule::Schedule::run` the
//! tick's phases, setup included (subtract a run of 0 passes).
//!
//! `ingest NODES PODS_PER_NODE` instead times the first tick of an engine
//! handed a whole cluster (`--toggle-collect='*measured_ingest*'`).

#[path = "../benches/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::time::Duration;

use common::{PERIOD, Renewing, quiet_cluster};
use nodewarden_engine::Engine;
use nodewarden_model::{ControllerConfig, Timestamp};

#[inline(never)]
fn measured_passes(r: &mut Renewing, passes: usize) -> Vec<Duration> {
    (0..passes).map(|_| black_box(r.pass())).collect()
}

#[inline(never)]
fn measured_ingest(engine: &mut Engine, state: Vec<nodewarden_engine::Observation>) -> usize {
    for o in state {
        engine.observe(o);
    }
    engine.tick(Timestamp::EPOCH).len()
}

#[inline(never)]
fn measured_quiet_passes(engine: &mut Engine, passes: usize) {
    let mut now = Timestamp::EPOCH;
    for _ in 0..passes {
        now += PERIOD;
        black_box(engine.tick(now).len());
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map_or("healthy", String::as_str);
    let nodes: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let passes: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(20);
    match mode {
        "quiet" => {
            let mut engine = quiet_cluster(nodes);
            measured_quiet_passes(&mut engine, passes);
        }
        "healthy" | "zone_down" => {
            let mut r = Renewing::new(nodes, mode == "zone_down");
            let mut took = measured_passes(&mut r, passes);
            took.sort();
            let at = |q: f64| took.get(((took.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or_default();
            println!(
                "{mode} {nodes} nodes, {passes} passes: health_monitor phase p50 {:?} p99 {:?} max {:?}",
                at(0.5),
                at(0.99),
                at(1.0)
            );
            let zones = r.engine.zones();
            eprintln!("{zones:?}");
        }
        "ingest" => {
            // The third argument is pods per node here.
            let state = common::cluster_state(nodes, 3, passes);
            let mut engine = Engine::new(ControllerConfig::default(), Timestamp::EPOCH).expect("valid config");
            engine.measure_with(std::time::Instant::now);
            let started = std::time::Instant::now();
            let actions = measured_ingest(&mut engine, state);
            println!("ingest of {nodes} nodes, {} pods: {:?}, {actions} actions", nodes * passes, started.elapsed());
            let phases: Vec<String> = engine
                .last_tick_timings()
                .iter()
                .map(|p| format!("{} {:.1} ms", p.phase, p.took.as_secs_f64() * 1e3))
                .collect();
            println!("  {}", phases.join(", "));
        }
        other => panic!("unknown mode {other}: healthy, zone_down, quiet or ingest"),
    }
}
