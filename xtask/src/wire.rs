//! `cargo xtask wire`: scenario files through real `nodewarden sim --serve`
//! and `nodewarden run` processes (`nodewarden-wire`). One line a file on
//! stdout (`PASS`/`FAIL` and the path, failures indented; `--json`: one
//! object a file), a summary on stderr; exits 1 unless every expectation
//! of every file held.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use nodewarden_wire::{DEFAULT_RATE, FileReport, Options};

/// The part of `tests/scenarios/` CI plays (with every public conformance
/// file): restarts, legacy mode, the Eviction API, the rescheduler, zone
/// rates, the taint manager, the two Unknown writes only the wire's
/// send-time judgement could get wrong, and a client rate.
pub const CI_SCENARIOS: [&str; 13] = [
    "tests/scenarios/14-noexecute-swap-not-rate-limited.yaml",
    "tests/scenarios/21-more-than-two-not-ready.yaml",
    "tests/scenarios/34-restart-full-grace.yaml",
    "tests/scenarios/36-restart-marks-pods-on-unknown-node.yaml",
    "tests/scenarios/39-tm-untolerated-deleted-at-once.yaml",
    "tests/scenarios/45-legacy-unknown-from-last-heartbeat.yaml",
    "tests/scenarios/50-refused-deletion-retried.yaml",
    "tests/scenarios/51-evict-mode-legacy-refusal.yaml",
    "tests/scenarios/59-resched-tier-1-quick-and-allowed.yaml",
    "tests/scenarios/62-resched-refused-then-next-node.yaml",
    "tests/scenarios/71-never-posted-unknown-with-longer-monitor-grace.yaml",
    "tests/scenarios/72-ready-removed-unknown-with-longer-monitor-grace.yaml",
    "tests/scenarios/74-client-rate-paces-deletions.yaml",
];

/// `cargo xtask wire`'s flags.
#[derive(Debug, clap::Args)]
pub(crate) struct WireArgs {
    /// Scenario files, or directories of them (default: tests/scenarios/
    /// and ../shared/conformance/).
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The conformance files and a part of tests/scenarios/: what CI plays.
    #[arg(long)]
    ci: bool,
    /// One JSON object a file instead of the text line.
    #[arg(long)]
    json: bool,
    /// The nodewarden binary (default: built with cargo build --release).
    #[arg(long, value_name = "PATH")]
    binary: Option<PathBuf>,
    /// Clock seconds per real second (1 to 200).
    #[arg(long, default_value_t = DEFAULT_RATE, value_parser = rate)]
    rate: f64,
    /// Files played at once (at least 1).
    #[arg(long, default_value_t = 3, value_parser = at_least_one)]
    parallel: usize,
    /// Keep every file's logs, not only a failed one's.
    #[arg(long)]
    keep: bool,
}

fn rate(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(r) if (1.0..=200.0).contains(&r) => Ok(r),
        Ok(r) => Err(format!("must be from 1 to 200, got {r}")),
        Err(_) => Err("needs a number".into()),
    }
}

fn at_least_one(value: &str) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err("needs a whole number".into()),
    }
}

/// Runs `cargo xtask wire [FILE...] [--ci] [--json] [--binary PATH]
/// [--rate N] [--parallel N] [--keep]`.
pub fn wire(args: WireArgs) -> Result<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let root = std::fs::canonicalize(&root).unwrap_or(root);
    let WireArgs { files: given, ci, json, binary, rate, parallel, keep } = args;
    let mut files: Vec<PathBuf> = Vec::new();
    for path in given {
        if path.is_dir() {
            files.extend(nodewarden_wire::scenario_files(&[path]));
        } else if path.is_file() {
            files.push(path);
        } else {
            bail!("{}: no such file or directory", path.display());
        }
    }
    let shared = root.join("../shared/conformance");
    if ci {
        files.extend(nodewarden_wire::scenario_files(std::slice::from_ref(&shared)));
        files.extend(CI_SCENARIOS.iter().map(|f| root.join(f)));
    }
    if files.is_empty() {
        files = nodewarden_wire::scenario_files(&[root.join("tests/scenarios"), shared]);
    }
    let binary = match binary {
        Some(b) => b,
        None => crate::build_release("nodewarden", "nodewarden")?,
    };
    let binary = std::fs::canonicalize(&binary).with_context(|| format!("{} does not exist", binary.display()))?;
    let version =
        Command::new(&binary).arg("--version").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let work_dir = std::env::temp_dir().join(format!("nodewarden-wire-{}", std::process::id()));
    eprintln!(
        "wire: {} file(s), {parallel} at a time, clock at {rate}x real time, with {} ({})",
        files.len(),
        binary.display(),
        version.unwrap_or_default()
    );
    let opts = Options { binary, rate, parallel, work_dir: work_dir.clone(), keep };
    let started = Instant::now();
    let print = |r: &FileReport| {
        if json {
            println!("{}", r.json());
        } else {
            println!("{}", r.text());
        }
    };
    let reports = nodewarden_wire::run_files(&files, &opts, &print);
    let passed = reports.iter().filter(|r| r.ok).count();
    let largest = reports.iter().map(|r| r.largest_deviation).max().unwrap_or_default();
    eprintln!(
        "wire: {passed} of {} file(s) passed in {:.0} s; largest deviation {:.3} s",
        reports.len(),
        started.elapsed().as_secs_f64(),
        largest.as_secs_f64()
    );
    if !keep && passed == reports.len() {
        let _ = std::fs::remove_dir_all(&work_dir);
    }
    if passed != reports.len() {
        bail!("{} file(s) failed over the wire", reports.len() - passed);
    }
    Ok(())
}
