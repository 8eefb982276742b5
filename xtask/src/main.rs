//! `cargo xtask`: project automation in Rust, so it runs wherever cargo does.
//!
//! `cargo xtask ci` runs exactly what CI runs (`.ci/run` calls the same
//! steps), so a green local run means a green CI run.

use std::process::Command;

use anyhow::{Context, Result, bail};
use clap::{CommandFactory, Parser, Subcommand};

mod chaos;
mod fuzz;
mod image;
mod load;
mod wire;
mod wire_load;

/// `cargo xtask`'s tasks. Each task's flags are its module's (`--help`
/// after a task lists them).
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", about = "nodewarden's project automation")]
struct Cli {
    #[command(subcommand)]
    task: Option<Task>,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// What CI runs: cargo fmt --check, clippy (-D warnings), the test
    /// suite, `cargo xtask wire --ci`.
    Ci,
    /// The controller on a large simulated cluster; prints one JSON report.
    Load(load::LoadArgs),
    /// `nodewarden run` replicas through a zone outage while the leader is
    /// killed or stopped, the API fails, throttles, drops watches, goes away
    /// or freezes, the controller restarts again and again, objects are
    /// malformed; one JSON verdict a trial.
    Chaos(chaos::ChaosArgs),
    /// Every scenario file (tests/scenarios/ and ../shared/conformance/, or
    /// the files or directories given) through real `nodewarden sim
    /// --serve` and `nodewarden run` processes on one compressed clock; a
    /// PASS/FAIL line a file.
    Wire(wire::WireArgs),
    /// `nodewarden sim --serve` and `nodewarden run` processes on loopback
    /// at size through a node crash or a zone outage; one JSON report of
    /// memory, CPU, sync, Lease watch lag, detection, taint and takeover
    /// times, and for a zone outage its write backlog, requests and
    /// deletions.
    WireLoad(wire_load::WireLoadArgs),
    /// Every cargo-fuzz target in turn (stable toolchain; installs
    /// cargo-fuzz).
    Fuzz(fuzz::FuzzArgs),
    /// Builds the static release binary the Dockerfile builds, then the
    /// image with docker when an engine answers.
    Image(image::ImageArgs),
    /// Checks that `nodewarden replay` of every scenario under
    /// tests/scenarios/ and ../shared/conformance/ prints exactly its
    /// stored transcript (tests/transcripts/).
    Transcripts {
        /// Re-record the transcripts after a change of behaviour that is
        /// meant.
        #[arg(long)]
        bless: bool,
    },
}

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
fn transcripts(bless: bool) -> Result<()> {
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
    match Cli::parse().task {
        Some(Task::Ci) => ci(),
        Some(Task::Load(a)) => load::load(a),
        Some(Task::Fuzz(a)) => fuzz::fuzz(a),
        Some(Task::Chaos(a)) => chaos::chaos(a),
        Some(Task::Wire(a)) => wire::wire(a),
        Some(Task::WireLoad(a)) => wire_load::wire_load(a),
        Some(Task::Transcripts { bless }) => transcripts(bless),
        Some(Task::Image(a)) => image::image(a),
        None => Ok(Cli::command().print_help()?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_task_is_named_as_before() {
        for task in ["ci", "load", "chaos", "wire", "wire-load", "fuzz", "image", "transcripts"] {
            assert!(Cli::command().find_subcommand(task).is_some(), "{task}");
        }
        let bless = Cli::try_parse_from(["xtask", "transcripts", "--bless"]).expect("--bless");
        assert!(matches!(bless.task, Some(Task::Transcripts { bless: true })));
        assert!(Cli::try_parse_from(["xtask", "transcripts", "--bliss"]).is_err());
    }
}
