//! `cargo xtask load`: the controller on a large simulated cluster, with the
//! figures that show whether it is fast and safe enough.
//!
//! Builds the release binary, runs `nodewarden sim --json` with the given
//! shape (its progress goes to stderr), and prints one JSON report: wall and
//! simulated time, tick time p50/p99/max (whole tick and per phase), peak
//! RSS, CPU seconds per simulated hour, observations and actions per
//! second, detection/tainting/eviction latencies, and the safety checks.
//! Exits non-zero when a safety check failed.
//!
//! Peak RSS and CPU time are read by the simulation process itself from
//! `/proc/self/status` (`VmHWM`) and `/proc/self/stat`: Linux only (they are
//! `null` elsewhere). They cover the whole process: the simulated cluster
//! and the invariant checker as well as the controller;
//! `rss_before_controller_bytes` is what the process held before the
//! controller started. `engine_only` is the engine's own figure, apart from
//! the simulator: the `engine-memory` binary (`xtask/src/bin/`) feeds an
//! engine the same fleet's observations and counts its live bytes with a
//! counting allocator (total, per node, per pod), its first tick and its
//! monitor passes.

use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Parser;
use serde_json::{Value, json};

/// `cargo xtask load`'s flags: a cluster's shape (a preset, or nodes and
/// pods per node; a flag given with a preset overrides it), the scenario
/// and the API's latency.
#[derive(Debug, Parser)]
#[command(after_help = "Presets: 10k nodes / 300k pods, 100k / 1M, 130k-1m: 130k / 1.04M. The API's latency is \
                  realistic unless said otherwise.")]
pub(crate) struct LoadArgs {
    /// A named cluster size: 10k, 100k or 130k-1m (130k is the same).
    #[arg(long, value_parser = parse_preset)]
    preset: Option<(u64, u64)>,
    /// Nodes of the cluster [default: 10000, or the preset's].
    #[arg(long)]
    nodes: Option<u64>,
    /// Zones.
    #[arg(long, default_value_t = 3)]
    zones: u64,
    /// Pods a node [default: 30, or the preset's].
    #[arg(long)]
    pods_per_node: Option<u64>,
    /// The built-in scenario.
    #[arg(long, default_value = "zone-outage")]
    scenario: String,
    /// Simulated hours (positive).
    #[arg(long, default_value_t = 1.0, value_parser = positive_hours)]
    hours: f64,
    /// The simulation's seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Legacy eviction mode (no taint manager).
    #[arg(long)]
    legacy: bool,
    /// `nodewarden sim`'s `--api-latency`: realistic, none or
    /// write=MIN..MAX,watch=MIN..MAX.
    #[arg(long, default_value = "realistic")]
    api_latency: String,
    /// Also run the same shape with `--api-latency none` and report the
    /// ratios of wall and CPU time: what the latency world costs, as a
    /// number in the same invocation.
    #[arg(long)]
    compare_latency: bool,
}

impl LoadArgs {
    /// Nodes: the flag, else the preset's, else 10,000.
    fn nodes(&self) -> u64 {
        self.nodes.or(self.preset.map(|p| p.0)).unwrap_or(10_000)
    }

    /// Pods a node: the flag, else the preset's, else 30.
    fn pods_per_node(&self) -> u64 {
        self.pods_per_node.or(self.preset.map(|p| p.1)).unwrap_or(30)
    }
}

fn parse_preset(name: &str) -> Result<(u64, u64), String> {
    preset(name).ok_or_else(|| "expected 10k, 100k or 130k-1m".to_string())
}

fn positive_hours(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(h) if h.is_finite() && h > 0.0 => Ok(h),
        Ok(_) => Err("must be positive".into()),
        Err(_) => Err("must be a number".into()),
    }
}

/// The node count and pods per node of a named cluster size: the sizes
/// issue 14 measures (10k nodes with 300k pods, 100k with 1M, and 130k
/// with about 1M, `130k-1m`; `130k` is the same).
fn preset(name: &str) -> Option<(u64, u64)> {
    match name {
        "10k" => Some((10_000, 30)),
        "100k" => Some((100_000, 10)),
        "130k" | "130k-1m" => Some((130_000, 8)),
        _ => None,
    }
}

/// One `nodewarden sim --json` run: its report, its exit status, the
/// command line and the process's wall time.
struct SimRun {
    report: Value,
    status: std::process::ExitStatus,
    command: String,
    wall: f64,
}

/// Runs `nodewarden sim --json` with the load test's shape and the API
/// latency `latency`.
fn run_sim(binary: &std::path::Path, a: &LoadArgs, latency: &str) -> Result<SimRun> {
    let mut sim_args: Vec<String> = vec![
        "sim".into(),
        "--json".into(),
        "--nodes".into(),
        a.nodes().to_string(),
        "--zones".into(),
        a.zones.to_string(),
        "--pods-per-node".into(),
        a.pods_per_node().to_string(),
        "--scenario".into(),
        a.scenario.clone(),
        "--hours".into(),
        a.hours.to_string(),
        "--seed".into(),
        a.seed.to_string(),
        "--api-latency".into(),
        latency.to_string(),
    ];
    if a.legacy {
        sim_args.push("--legacy".into());
    }
    let command = format!("{} {}", binary.display(), sim_args.join(" "));
    eprintln!("$ {command}");
    let started = Instant::now();
    let output = Command::new(binary)
        .args(&sim_args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("could not start {}", binary.display()))?;
    let wall = started.elapsed().as_secs_f64();
    let report: Value = serde_json::from_slice(&output.stdout).with_context(|| {
        format!("nodewarden sim did not print a JSON report ({}); see its messages above", output.status)
    })?;
    if !report.is_object() {
        bail!("nodewarden sim printed JSON that is not an object");
    }
    Ok(SimRun { report, status: output.status, command, wall })
}

/// Wall and CPU time of a run, and per simulated hour, for the latency
/// comparison.
fn times(report: &Value, wall: f64) -> Value {
    let simulated = report.get("simulated_seconds").and_then(Value::as_f64).unwrap_or(0.0).max(1e-9);
    let cpu = report.get("cpu_seconds").and_then(Value::as_f64);
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    json!({
        "wall_seconds": round(wall),
        "wall_seconds_per_simulated_hour": round(wall * 3600.0 / simulated),
        "cpu_seconds": cpu.map(round),
        "cpu_seconds_per_simulated_hour": cpu.map(|c| round(c * 3600.0 / simulated)),
        "peak_rss_bytes": report.get("peak_rss_bytes").cloned().unwrap_or(Value::Null),
    })
}

/// Runs the load test and prints its report.
pub fn load(a: LoadArgs) -> Result<()> {
    let binary = crate::build_release("nodewarden", "nodewarden")?;
    let SimRun { mut report, status, command, wall: process_wall } = run_sim(&binary, &a, &a.api_latency)?;
    let with_latency = times(&report, process_wall);
    // Checked by `run_sim`.
    let Some(obj) = report.as_object_mut() else { bail!("nodewarden sim printed JSON that is not an object") };
    let loop_wall = obj.get("wall_seconds").and_then(Value::as_f64).unwrap_or(0.0);
    let simulated = obj.get("simulated_seconds").and_then(Value::as_f64).unwrap_or(0.0);
    let tick_p99 = obj.get("tick_ms").and_then(|t| t.get("p99")).and_then(Value::as_f64);
    let rss = obj.get("peak_rss_bytes").and_then(Value::as_u64);
    // Wall time is the whole process (building the cluster included); the
    // simulation loop alone is kept beside it.
    obj.insert("simulation_wall_seconds".into(), json!(loop_wall));
    obj.insert("wall_seconds".into(), json!((process_wall * 1000.0).round() / 1000.0));
    obj.insert("hours".into(), json!(a.hours));
    obj.insert("command".into(), json!(command));
    let per_hour = process_wall * 3600.0 / simulated.max(1e-9);
    obj.insert(
        "targets".into(),
        json!({
            "wall_seconds_per_simulated_hour": (per_hour * 1000.0).round() / 1000.0,
            "wall_seconds_per_simulated_hour_at_most_60": per_hour <= 60.0,
            "tick_p99_under_10ms": tick_p99.map(|p| p < 10.0),
            "peak_rss_under_1gib": rss.map(|r| r < 1 << 30),
        }),
    );
    // The per-zone state history is for the HTML report, not for scripts.
    if let Some(zones) = obj.get_mut("zones").and_then(Value::as_array_mut) {
        for z in zones {
            if let Some(z) = z.as_object_mut() {
                z.remove("states");
            }
        }
    }
    if a.compare_latency {
        // The same shape in the instant world, right after, on the same
        // machine: what the latency costs, as ratios.
        let none = run_sim(&binary, &a, "none")?;
        let (w, n) = (with_latency, times(&none.report, none.wall));
        let ratio = |key: &str| match (w[key].as_f64(), n[key].as_f64()) {
            (Some(x), Some(y)) if y > 0.0 => json!(((x / y) * 100.0).round() / 100.0),
            _ => Value::Null,
        };
        obj.insert(
            "latency_comparison".into(),
            json!({
                "api_latency": a.api_latency,
                "with_latency": w,
                "without_latency": n,
                "wall_ratio": ratio("wall_seconds"),
                "cpu_ratio": ratio("cpu_seconds"),
                "without_latency_safe": none.report.get("safety").and_then(Value::as_object)
                    .is_some_and(|s| s.values().all(|v| v == &json!(true))),
            }),
        );
    }
    // The engine alone on the same fleet, memory counted by allocator: the
    // controller's own figure, apart from the simulated cluster above.
    let engine_only = engine_only(&a)?;
    obj.insert("engine_only".into(), engine_only);
    let safe = obj.get("safety").and_then(Value::as_object).is_some_and(|s| s.values().all(|v| v == &json!(true)));
    println!("{}", serde_json::to_string_pretty(&report)?);
    if !safe {
        bail!("a safety check failed (see \"safety\" and \"violations\" above)");
    }
    if !status.success() {
        bail!("nodewarden sim failed ({status})");
    }
    Ok(())
}

/// Runs `engine-memory` (this crate's measuring binary) on the load test's
/// fleet and returns its JSON report: the engine's live bytes (total, per
/// node, per pod), its first tick and its monitor passes, without the
/// simulated cluster.
fn engine_only(a: &LoadArgs) -> Result<Value> {
    let binary = crate::build_release("xtask", "engine-memory")?;
    let args = [
        "--nodes".to_string(),
        a.nodes().to_string(),
        "--zones".into(),
        a.zones.to_string(),
        "--pods-per-node".into(),
        a.pods_per_node().to_string(),
        "--seed".into(),
        a.seed.to_string(),
    ];
    eprintln!("$ {} {}", binary.display(), args.join(" "));
    let output = Command::new(&binary)
        .args(&args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("could not start {}", binary.display()))?;
    if !output.status.success() {
        bail!("engine-memory failed ({})", output.status);
    }
    serde_json::from_slice(&output.stdout).context("engine-memory did not print a JSON report")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<LoadArgs, clap::Error> {
        LoadArgs::try_parse_from(std::iter::once("load").chain(line.split_whitespace()))
    }

    #[test]
    fn parses_flags_and_refuses_bad_ones() {
        let a = parse("--nodes 100 --hours 0.5 --scenario flapping --legacy").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((a.nodes(), a.hours, a.scenario.as_str(), a.legacy), (100, 0.5, "flapping", true));
        assert!(parse("--nodes ten").is_err());
        let p = parse("--preset 130k-1m --hours 0.5").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((p.nodes(), p.pods_per_node(), p.hours), (130_000, 8, 0.5));
        let p = parse("--preset 130k").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((p.nodes(), p.pods_per_node()), (130_000, 8));
        let p = parse("--preset 10k").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((p.nodes(), p.pods_per_node()), (10_000, 30));
        let p = parse("--preset 100k --nodes 50").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((p.nodes(), p.pods_per_node()), (50, 10), "a flag with the preset wins");
        let p = parse("--nodes 50 --preset 100k").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((p.nodes(), p.pods_per_node()), (50, 10), "before it too");
        assert!(parse("--preset 1m").is_err());
        assert!(parse("--hours -1").is_err());
        assert!(parse("--nodes").is_err());
        assert!(parse("--bogus 1").is_err());
        let c = parse("--compare-latency --preset 10k").unwrap_or_else(|e| panic!("{e}"));
        assert!(c.compare_latency && c.nodes() == 10_000);
        assert!(!parse("--nodes 5").unwrap_or_else(|e| panic!("{e}")).compare_latency);
    }
}
