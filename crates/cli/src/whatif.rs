//! `nodewarden sim --from-snapshot FILE` and `--from-cluster`: a failure
//! played on a snapshot of a real cluster, reported per workload, then per
//! zone; `--compare CONFIG_B` plays it under a second configuration.

use std::io::{self, Write};
use std::path::Path;

use anyhow::{Context, bail};
use nodewarden_model::{ControllerConfig, Span};
use nodewarden_sim::report;
use nodewarden_whatif::{Comparison, compare};
use nodewarden_whatif::{Defaults, TolerationDefaults};
use nodewarden_whatif::{FailMode, Faults, Played, Snapshot};

use crate::sim_args::{ClockArgs, CommonArgs, WhatIfArgs};

/// Workloads listed per section in the text report.
const LIST_LIMIT: usize = 25;

/// Workloads listed as faring differently under `--compare` (three lines
/// each; `--json` has them all).
const COMPARE_LIMIT: usize = 10;

fn faults(common: &CommonArgs, clock: &ClockArgs, args: &WhatIfArgs) -> anyhow::Result<Faults> {
    let mode = match args.fail_mode.as_str() {
        "partition" => FailMode::Partition,
        "crash" => FailMode::Crash,
        other => bail!("--fail-mode must be partition or crash, got {other:?}"),
    };
    let duration = clock.duration()?;
    let events = match &common.scenario {
        Some(name) if name.parse::<nodewarden_cluster::Builtin>().is_ok() => {
            bail!(
                "--scenario {name} generates its own fleet; on a snapshot, aim the failure with --fail-zone, --fail-nodes, --fail-nodes-selector or --fail-control-plane (or give a scenario file)"
            )
        }
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
            nodewarden_whatif::scenario_events(&text).with_context(|| path.clone())?
        }
        None => Vec::new(),
    };
    if args.fail_at < Span::ZERO {
        bail!("--fail-at must not be negative, got {}", args.fail_at);
    }
    Ok(Faults {
        zones: args.fail_zone.clone(),
        nodes: args.fail_nodes.clone(),
        selectors: args.fail_nodes_selector.clone(),
        mode,
        at: args.fail_at,
        recover_after: args.recover_after,
        control_plane_outage: args.fail_control_plane,
        events,
        duration,
    })
}

fn snapshot(args: &WhatIfArgs) -> anyhow::Result<Snapshot> {
    if let Some(path) = &args.from_snapshot {
        return Ok(nodewarden_whatif::load_path(path)?);
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let config = crate::run::kube_config(args.kubeconfig.as_deref()).await?;
        let server = nodewarden_kube::server_url(&config);
        let client = kube::Client::try_from(config).context("kube client")?;
        Ok(nodewarden_whatif::list_cluster(&client, &server).await?)
    })
}

/// A configuration file's text, read before the snapshot so a missing
/// file is said at once.
fn read_text(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// A configuration: the controller's flags over `defaults` and
/// kube-apiserver's default toleration seconds
/// (`nodewarden_whatif::read_config`); `defaults` themselves without a file.
fn read_config(
    file: Option<(&Path, &str)>,
    defaults: &Defaults,
    legacy: bool,
) -> anyhow::Result<(ControllerConfig, TolerationDefaults)> {
    let base = defaults.config();
    let (mut c, d) = match file {
        Some((path, text)) => nodewarden_whatif::read_config(text, &base)
            .with_context(|| format!("invalid config {} (over {})", path.display(), defaults.describe()))?,
        None => (base, TolerationDefaults::default()),
    };
    if legacy {
        c.enable_taint_manager = false;
    }
    Ok((c, d))
}

/// Plays one configuration, on a copy of the snapshot with its toleration
/// defaults applied when it sets any.
fn play_config(
    snap: &Snapshot,
    faults: &Faults,
    (config, defaults): (ControllerConfig, TolerationDefaults),
    (common, clock): (&CommonArgs, &ClockArgs),
    name: &str,
) -> anyhow::Result<Played> {
    let (seed, api) = (common.seed, clock.api_latency);
    if defaults.is_empty() {
        return Ok(nodewarden_whatif::play_with(snap, faults, config, seed, api)?);
    }
    let mut copy = snap.clone();
    let n = defaults.apply(&mut copy);
    if !common.quiet {
        eprintln!("sim: {name}: {} ({n} admission-added toleration(s) rewritten)", defaults.describe());
    }
    Ok(nodewarden_whatif::play_with(&copy, faults, config, seed, api)?)
}

/// The workload sections as HTML, for the page.
fn html_section(title: &str, played: &Played) -> String {
    let esc = |t: &str| t.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    format!("<h2>{}</h2><pre>{}</pre>", esc(title), esc(&played.report.render_text(usize::MAX)))
}

/// Runs a what-if; `Ok(true)` when every safety check held.
pub fn run(common: &CommonArgs, clock: &ClockArgs, args: &WhatIfArgs) -> anyhow::Result<bool> {
    let faults = faults(common, clock, args)?;
    let text_a = common.config.as_deref().map(read_text).transpose()?;
    let text_b = args.compare.as_deref().map(read_text).transpose()?;
    let file_a = common.config.as_deref().zip(text_a.as_deref());
    let file_b = args.compare.as_deref().zip(text_b.as_deref());
    // Checked before a listing that may take minutes, over the version the
    // flag names or the newest defaults; read again over the snapshot's.
    let early = Defaults::pick(args.kube_version, None);
    read_config(file_a, &early, common.legacy)?;
    if let Some(b) = file_b {
        read_config(Some(b), &early, common.legacy)?;
    }
    let started = std::time::Instant::now();
    let snap = snapshot(args)?;
    let defaults = Defaults::pick(args.kube_version, snap.kube_version);
    if !common.quiet {
        eprintln!("sim: defaults: {}", defaults.describe());
        if let (Some(flag), Some(own)) = (args.kube_version, snap.kube_version)
            && flag != own
        {
            eprintln!("sim: --kube-version {flag} is played, though the snapshot says Kubernetes {own}");
        }
    }
    let config_a = read_config(file_a, &defaults, common.legacy)?;
    let config_b = match file_b {
        Some((path, text)) => Some((path, read_config(Some((path, text)), &defaults, common.legacy)?)),
        None => None,
    };
    if !common.quiet {
        eprintln!("sim: {} (read in {:.1}s)", snap.summary(), started.elapsed().as_secs_f64());
        for p in snap.problems.iter().take(20) {
            eprintln!("sim:   {p}");
        }
        if snap.problems.len() > 20 {
            eprintln!("sim:   ... and {} more", snap.problems.len() - 20);
        }
    }
    nodewarden_whatif::check_events(&faults.events, &snap)?;
    if !common.quiet {
        eprintln!("sim: playing: {}", faults.describe());
    }
    let name_a = common.config.as_ref().map_or("default flags".to_string(), |p| p.display().to_string());
    let a = play_config(&snap, &faults, config_a, (common, clock), &name_a)?;
    let b = match config_b {
        Some((path, c)) => Some((path, play_config(&snap, &faults, c, (common, clock), &path.display().to_string())?)),
        None => None,
    };
    let comparison: Option<(String, Comparison)> = b.as_ref().map(|(pb, b)| (pb.display().to_string(), compare(&a, b)));
    if let Some(path) = &clock.report {
        write_report(path, (&name_a, &defaults), &a, b.as_ref(), comparison.as_ref())?;
        if !common.quiet {
            eprintln!("sim: report written to {}", path.display());
        }
    }
    let text = if clock.json {
        json_text((&snap, &defaults), &faults, &a, b.as_ref(), comparison.as_ref())?
    } else {
        format!("Defaults: {}.\n\n{}", defaults.describe(), plain_text(&name_a, &a, b.as_ref(), comparison.as_ref()))
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => return Err(e.into()),
        _ => {}
    }
    Ok(a.outcome.safe() && b.as_ref().is_none_or(|(_, b)| b.outcome.safe()))
}

/// The second run of a `--compare`: its config file and what it played.
type SideB<'a> = (&'a Path, Played);

/// The HTML page at `path`: run A's report, with the side-by-side table
/// and each run's workloads before its first section.
fn write_report(
    path: &Path,
    (name_a, defaults): (&str, &Defaults),
    a: &Played,
    b: Option<&SideB<'_>>,
    comparison: Option<&(String, Comparison)>,
) -> anyhow::Result<()> {
    let mut page = report::render_html(&a.outcome, &a.run);
    let esc = |t: &str| t.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let mut sections = format!("<h2>Defaults</h2><p>{}</p>", esc(&defaults.describe()));
    if let Some((name_b, c)) = comparison {
        let text = c.render_text(name_a, name_b, usize::MAX);
        sections.push_str(&format!("<h2>Side by side</h2><pre>{}</pre>", esc(&text)));
    }
    sections.push_str(&html_section(&format!("Workloads ({name_a})"), a));
    if let Some((pb, b)) = b {
        sections.push_str(&html_section(&format!("Workloads ({})", pb.display()), b));
    }
    match page.find("<h2>") {
        Some(i) => page.insert_str(i, &sections),
        None => page.push_str(&sections),
    }
    std::fs::write(path, page).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// The `--json` output: the snapshot's figures, the faults, each run and
/// the comparison.
fn json_text(
    (snap, defaults): (&Snapshot, &Defaults),
    faults: &Faults,
    a: &Played,
    b: Option<&SideB<'_>>,
    comparison: Option<&(String, Comparison)>,
) -> anyhow::Result<String> {
    let one = |p: &Played| {
        serde_json::json!({
            "workloads": p.report.to_json(),
            "sim": report::to_json(&p.outcome, &p.run, false),
        })
    };
    let mut v = serde_json::json!({
        "snapshot": {
            "source": snap.source, "nodes": snap.nodes.len(), "pods": snap.pods.len(),
            "leases": snap.leases.len(), "daemonsets": snap.daemonsets.len(),
            "pod_disruption_budgets": snap.pdbs.len(), "skipped": snap.skipped, "problems": snap.problems,
        },
        "defaults": {
            "kube_version": defaults.version.to_string(), "from": defaults.source_name(),
            "node_monitor_grace_period": defaults.config().node_monitor_grace_period.to_string(),
        },
        "faults": faults.describe(),
        "a": one(a),
    });
    if let Some((pb, b)) = b {
        v["b"] = one(b);
        v["b"]["config"] = serde_json::json!(pb.display().to_string());
    }
    if let Some((_, c)) = comparison {
        v["compare"] = c.to_json();
    }
    let mut s = serde_json::to_string_pretty(&v)?;
    s.push('\n');
    Ok(s)
}

/// The text output: A's report in full, and with `--compare` the
/// comparison first and B's report only where a safety check failed.
fn plain_text(name_a: &str, a: &Played, b: Option<&SideB<'_>>, comparison: Option<&(String, Comparison)>) -> String {
    let mut s = String::new();
    match b {
        Some((pb, b)) => {
            if let Some((name_b, c)) = comparison {
                s.push_str(&c.render_text(name_a, name_b, COMPARE_LIMIT));
            }
            // A's report in full, as without --compare; B's only
            // where the table cannot say enough (a safety check
            // failed), so the output stays the comparison.
            s.push_str(&format!("\n== A: {name_a} ==\n"));
            s.push_str(&a.report.render_text(LIST_LIMIT));
            s.push('\n');
            s.push_str(&report::render_text(&a.outcome, &a.run));
            s.push_str(&format!("\n== B: {} ==\n", pb.display()));
            if b.outcome.safe() {
                s.push_str(&format!(
                    "B's full report: run again with --config {} and without --compare; --json and --report have both runs.\n",
                    pb.display()
                ));
            } else {
                s.push_str(&b.report.render_text(LIST_LIMIT));
                s.push('\n');
                s.push_str(&report::render_text(&b.outcome, &b.run));
            }
        }
        None => {
            s.push_str(&a.report.render_text(LIST_LIMIT));
            s.push('\n');
            s.push_str(&report::render_text(&a.outcome, &a.run));
        }
    }
    s
}
