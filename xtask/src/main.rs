//! `cargo xtask`: project automation in Rust, so it runs wherever cargo does.
//!
//! `cargo xtask ci` runs exactly what CI runs (`.ci/run` calls the same
//! steps), so a green local run means a green CI run.

use std::process::Command;

use anyhow::{Context, Result, bail};

mod chaos;
mod fuzz;
mod image;
mod load;
mod wire;
mod wire_load;

const USAGE: &str = "usage: cargo xtask <task>

tasks:
  ci      what CI runs: cargo fmt --check, clippy (-D warnings), the test suite,
          `cargo xtask wire --ci`
  load    the controller on a large simulated cluster; prints one JSON report
          [--preset 10k|100k|130k-1m] [--nodes 10000] [--zones 3] [--pods-per-node 30]
          [--scenario zone-outage] [--hours 1] [--seed 1] [--legacy]
          [--api-latency realistic|none|write=MIN..MAX,watch=MIN..MAX]
          [--compare-latency]
          (presets: 10k nodes / 300k pods, 100k / 1M, 130k-1m: 130k / 1.04M;
          flags after a preset override it; the API's latency is realistic
          unless said otherwise; --compare-latency also runs the shape with
          --api-latency none and reports the wall and CPU ratios)
  chaos   `nodewarden run` replicas through a zone outage while the leader is
          killed or stopped, the API fails, throttles, drops watches, goes away
          or freezes, the controller restarts again and again, objects are
          malformed; one JSON verdict a trial [TRIAL...] [--short] [--binary PATH]
          (trials: failover-kill failover-stop api-errors api-throttle
          dropped-watches api-outage freeze restart-storm malformed)
  wire    every scenario file (tests/scenarios/ and ../shared/conformance/, or
          the FILEs or directories given) through real `nodewarden sim --serve`
          and `nodewarden run` processes on one compressed clock; a PASS/FAIL
          line a file [FILE...] [--ci] [--json] [--binary PATH] [--rate 20]
          [--parallel 3] [--keep] (--ci: the conformance files and a part of
          tests/scenarios/, what CI plays)
  wire-load
          `nodewarden sim --serve` and `nodewarden run` processes on loopback
          at size through a node crash (--failover: the leader is SIGKILLed
          5 s after it) or a zone outage; one JSON report of memory, CPU,
          sync, Lease watch lag, detection, taint and takeover times, and
          for a zone outage its write backlog, requests and deletions
          [--nodes 1000] [--pods-per-node 30] [--zones 3] [--failover [--cold]]
          [--zone-outage [--outage 240] [--toleration 60]] [--crash-at 60]
          [--run-flag FLAG]... [--binary PATH] [--server-binary PATH] [--keep]
  fuzz    every cargo-fuzz target in turn (stable toolchain; installs cargo-fuzz)
          [--time 60s] [--target NAME] [--sanitizer none|address] [--cmin]
  image   builds the static release binary the Dockerfile builds, then the
          image with docker when an engine answers [--tag NAME:TAG]
  transcripts
          checks that `nodewarden replay` of every scenario under tests/scenarios/
          and ../shared/conformance/ prints exactly its stored transcript
          (tests/transcripts/); --bless re-records them after a meant change";

/// One step of a task: a command line, shown before it runs.
fn run(program: &str, args: &[&str]) -> Result<()> {
    eprintln!("$ {program} {}", args.join(" "));
    let status = Command::new(program).args(args).status().with_context(|| format!("could not start {program}"))?;
    if !status.success() {
        bail!("`{program} {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

/// The cargo that runs xtask (`$CARGO`), or the one on the PATH.
fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

/// Where cargo puts what it builds, as `cargo metadata` says: it honours
/// `CARGO_TARGET_DIR` and `build.target-dir` as the build itself does
/// (a fixed `target/` would run a stale binary, or none, where either is
/// set).
fn target_dir(cargo: &str) -> Result<std::path::PathBuf> {
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .with_context(|| format!("could not start {cargo} metadata"))?;
    if !out.status.success() {
        bail!("`{cargo} metadata` failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).context("`cargo metadata` printed no JSON")?;
    meta.get("target_directory")
        .and_then(serde_json::Value::as_str)
        .map(std::path::PathBuf::from)
        .context("`cargo metadata` names no target_directory")
}

/// Builds `binary` of `package` for release and returns the file cargo
/// just built.
fn build_release(package: &str, binary: &str) -> Result<std::path::PathBuf> {
    let cargo = cargo();
    run(&cargo, &["build", "--release", "-p", package, "--bin", binary])?;
    Ok(target_dir(&cargo)?.join("release").join(binary))
}

fn ci() -> Result<()> {
    let cargo = cargo();
    // As `.ci/run`: no incremental caches, they only take disk space, and
    // `CI` set, so the conformance tests fail without ../shared.
    let step = |args: &[&str]| -> Result<()> {
        let status = Command::new(&cargo)
            .args(args)
            .env("CARGO_INCREMENTAL", "0")
            .env("CI", "true")
            .status()
            .with_context(|| format!("could not start {cargo}"))?;
        if !status.success() {
            bail!("`{cargo} {}` failed ({status})", args.join(" "));
        }
        Ok(())
    };
    step(&["fmt", "--all", "--check"])?;
    step(&["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"])?;
    step(&["test", "--workspace"])?;
    step(&["xtask", "wire", "--ci", "--binary", "target/debug/nodewarden"])?;
    Ok(())
}

/// Runs the transcript test; with `--bless`, re-records the transcripts.
fn transcripts(mut args: impl Iterator<Item = String>) -> Result<()> {
    let bless = match args.next().as_deref() {
        None => false,
        Some("--bless") => true,
        Some(other) => bail!("unknown flag {other:?} for `cargo xtask transcripts` (only --bless)"),
    };
    let cargo = cargo();
    let args = ["test", "-p", "nodewarden-sim", "--test", "transcripts"];
    eprintln!("$ {}{cargo} {}", if bless { "NODEWARDEN_BLESS=1 " } else { "" }, args.join(" "));
    let status = Command::new(&cargo)
        .args(args)
        .env("NODEWARDEN_BLESS", if bless { "1" } else { "0" })
        .status()
        .with_context(|| format!("could not start {cargo}"))?;
    if !status.success() {
        bail!("the transcripts differ ({status}); see the test's output");
    }
    Ok(())
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        Some("ci") => ci(),
        Some("load") => load::load(args),
        Some("fuzz") => fuzz::fuzz(args),
        Some("chaos") => chaos::chaos(args),
        Some("wire") => wire::wire(args),
        Some("wire-load") => wire_load::wire_load(args),
        Some("transcripts") => transcripts(args),
        Some("image") => image::image(args),
        Some("-h" | "--help") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => bail!("unknown task {other:?}\n\n{USAGE}"),
    }
}
