//! `nodewarden sim`: picks the mode its flags ask for, and runs the plain
//! one itself: the controller on a simulated cluster, with progress, a
//! summary, and optionally JSON, an HTML report and Prometheus metrics.
//! The other two modes are `serve` and `whatif`; the flags of all three
//! are in `sim_args`.

use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nodewarden_cluster::fleet::FleetSpec;
use nodewarden_cluster::{Builtin, load_scenario};
use nodewarden_sim::report::{self, RunInfo, human, human_span};
use nodewarden_sim::{SimOptions, Simulation, Source};

use crate::sim_args::{ClockArgs, CommonArgs, FleetArgs, Mode, PlainArgs, SimArgs};

fn options(common: &CommonArgs, fleet: &FleetArgs, clock: &ClockArgs) -> anyhow::Result<SimOptions> {
    if fleet.nodes == 0 {
        bail!("--nodes must be at least 1");
    }
    if fleet.zones == 0 {
        bail!("--zones must be at least 1");
    }
    if fleet.zones > fleet.nodes {
        bail!("--zones ({}) cannot exceed --nodes ({})", fleet.zones, fleet.nodes);
    }
    if let Some(speed) = fleet.speed
        && !(speed.is_finite() && speed > 0.0)
    {
        bail!("--speed must be a positive number (times real time), got {speed}");
    }
    let duration = clock.duration()?;
    let scenario = common.scenario.as_deref().unwrap_or("zone-outage");
    let source = match scenario.parse::<Builtin>() {
        Ok(b) => {
            crate::memory::check(fleet.nodes, fleet.pods_per_node, common.quiet)?;
            let fleet = FleetSpec {
                nodes: fleet.nodes,
                zones: fleet.zones,
                pods_per_node: fleet.pods_per_node,
                seed: common.seed,
            };
            Source::Builtin(b, fleet)
        }
        Err(unknown) => {
            let path = Path::new(scenario);
            if !path.is_file() {
                bail!(unknown);
            }
            if common.config.is_some() {
                bail!("--config does not apply to a scenario file: the file's own `config:` is the controller's");
            }
            let mut scenario = load_scenario(path).with_context(|| format!("invalid scenario {}", path.display()))?;
            if common.legacy {
                scenario.config.enable_taint_manager = false;
            }
            Source::File(Box::new(scenario))
        }
    };
    let config = common.controller_config()?;
    Ok(SimOptions { source, config, duration, seed: common.seed, measure: true, api: clock.api_latency })
}

/// Progress on stderr: a live line on a terminal, a plain line every 10%
/// otherwise.
struct ProgressLine {
    live: bool,
    quiet: bool,
    last_draw: Option<Instant>,
    next_tenth: u32,
}

impl ProgressLine {
    fn show(&mut self, sim: &Simulation, wall: Duration, force: bool) {
        if self.quiet {
            return;
        }
        let p = sim.progress();
        let total = (p.end - nodewarden_model::Timestamp::EPOCH).as_secs_f64().max(1e-9);
        let done = (p.now - nodewarden_model::Timestamp::EPOCH).as_secs_f64() / total;
        let line = format!(
            "{:>3.0}%  t={} of {}  not ready {}  tainted {}  pods evicted {}{}  ({:.1}s)",
            done * 100.0,
            human(p.now),
            human(p.end),
            p.not_ready,
            p.tainted,
            p.evicted,
            if p.violations > 0 { format!("  SAFETY VIOLATIONS {}", p.violations) } else { String::new() },
            wall.as_secs_f64()
        );
        if self.live {
            let due = force || self.last_draw.is_none_or(|at| at.elapsed() >= Duration::from_millis(100));
            if due {
                let width = 20;
                let filled = ((done * f64::from(width)) as u32).min(width);
                let bar: String = (0..width).map(|i| if i < filled { '#' } else { '.' }).collect();
                eprint!("\r[{bar}] {line}\x1b[K");
                let _ = io::stderr().flush();
                self.last_draw = Some(Instant::now());
            }
        } else {
            let tenth = (done * 10.0).floor() as u32;
            if tenth >= self.next_tenth {
                eprintln!("sim: {line}");
                self.next_tenth = tenth + 1;
            }
        }
    }

    fn done(&self) {
        if self.live && !self.quiet {
            eprintln!();
        }
    }
}

/// Publishes the simulation's own gauges next to the engine's metrics.
fn publish(sim: &Simulation) {
    let p = sim.progress();
    metrics::gauge!("nodewarden_sim_virtual_seconds").set((p.now - nodewarden_model::Timestamp::EPOCH).as_secs_f64());
    metrics::gauge!("nodewarden_sim_nodes_not_ready").set(p.not_ready as f64);
    metrics::gauge!("nodewarden_sim_nodes_tainted").set(p.tainted as f64);
    metrics::gauge!("nodewarden_sim_pods_evicted").set(p.evicted as f64);
}

/// Runs `nodewarden sim` in the mode its flags ask for; `Ok(true)` when
/// every safety check held (a served cluster has none: it runs until
/// Ctrl-C).
pub fn run(args: SimArgs) -> anyhow::Result<bool> {
    match args.into_mode() {
        Mode::Plain { common, fleet, clock, plain } => simulate(&common, &fleet, &clock, &plain),
        Mode::Serve { addr, common, fleet, serve } => crate::serve::run(addr, &common, &fleet, &serve).map(|()| true),
        Mode::WhatIf { common, clock, what_if } => crate::whatif::run(&common, &clock, &what_if),
    }
}

/// The plain mode: the simulation on its virtual clock, paced by
/// `--speed`, then its outputs.
fn simulate(common: &CommonArgs, fleet: &FleetArgs, clock: &ClockArgs, plain: &PlainArgs) -> anyhow::Result<bool> {
    let opts = options(common, fleet, clock)?;
    if let Some(addr) = plain.metrics_addr {
        crate::prometheus()
            .with_http_listener(addr)
            .install()
            .with_context(|| format!("cannot serve metrics on {addr}"))?;
        if !common.quiet {
            eprintln!("sim: Prometheus metrics on http://{addr}/metrics");
        }
    }
    let seed = opts.seed;
    let mut sim = Simulation::new(opts)?;
    let (_, rss_before, _) = report::process_usage();
    let (nodes, pods) = sim.size();
    if !common.quiet {
        eprintln!(
            "sim: {} on {nodes} nodes, {pods} pods; simulating {}{}",
            sim.name(),
            human_span(sim.end() - nodewarden_model::Timestamp::EPOCH),
            fleet.speed.map_or(" as fast as possible".to_string(), |s| format!(" at {s}x real time"))
        );
    }
    let mut progress =
        ProgressLine { live: io::stderr().is_terminal(), quiet: common.quiet, last_draw: None, next_tenth: 1 };
    let started = Instant::now();
    let mut last_publish = Instant::now();
    while sim.step()? {
        if let Some(speed) = fleet.speed {
            let virtual_secs = (sim.now() - nodewarden_model::Timestamp::EPOCH).as_secs_f64();
            let due = Duration::from_secs_f64((virtual_secs / speed).max(0.0));
            if let Some(ahead) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(ahead);
            }
        }
        progress.show(&sim, started.elapsed(), false);
        if plain.metrics_addr.is_some() && last_publish.elapsed() >= Duration::from_millis(200) {
            publish(&sim);
            last_publish = Instant::now();
        }
    }
    let wall = started.elapsed().as_secs_f64();
    progress.show(&sim, started.elapsed(), true);
    progress.done();
    let outcome = sim.finish_before_exit();
    let (peak, _, cpu) = report::process_usage();
    let run = RunInfo {
        wall_seconds: wall,
        seed,
        peak_rss_bytes: peak,
        rss_before_controller_bytes: rss_before,
        cpu_seconds: cpu,
    };
    if let Some(path) = &clock.report {
        std::fs::write(path, report::render_html(&outcome, &run))
            .with_context(|| format!("cannot write {}", path.display()))?;
        if !common.quiet {
            eprintln!("sim: report written to {}", path.display());
        }
    }
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let text = if clock.json {
        let mut s = serde_json::to_string_pretty(&report::to_json(&outcome, &run, false))?;
        s.push('\n');
        s
    } else {
        report::render_text(&outcome, &run)
    };
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => return Err(e.into()),
        _ => {}
    }
    Ok(outcome.safe())
}
