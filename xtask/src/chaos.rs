//! `cargo xtask chaos`: the chaos trials (`nodewarden-chaos`) against the
//! release binary, one JSON verdict a line on stdout, a summary on stderr;
//! exits 1 when a trial misses a target.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};
use nodewarden_chaos::{Scale, Trial};

/// Runs the trials `args` name (every one when none), at the full scale
/// unless `--short`.
pub fn chaos(args: impl Iterator<Item = String>) -> Result<()> {
    let mut trials = Vec::new();
    let mut scale = Scale::full();
    let mut binary: Option<PathBuf> = None;
    let mut args = args.peekable();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--short" => scale = Scale::short(),
            "--binary" => binary = Some(args.next().context("--binary needs a path")?.into()),
            name => match Trial::named(name) {
                Some(t) => trials.push(t),
                None => bail!(
                    "unknown trial {name:?}; trials: {}",
                    Trial::ALL.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
                ),
            },
        }
    }
    if trials.is_empty() {
        trials = Trial::ALL.to_vec();
    }
    let binary = match binary {
        Some(b) => b,
        None => {
            let binary = crate::build_release("nodewarden", "nodewarden")?;
            std::fs::canonicalize(&binary).unwrap_or(binary)
        }
    };
    if !binary.exists() {
        bail!("{} does not exist", binary.display());
    }
    let version =
        Command::new(&binary).arg("--version").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    eprintln!(
        "chaos: {} trial(s) at the {} scale with {} ({})",
        trials.len(),
        scale.name,
        binary.display(),
        version.unwrap_or_default()
    );
    let mut failed = Vec::new();
    for trial in trials {
        eprintln!("chaos: {} ...", trial.name());
        let verdict =
            nodewarden_chaos::run(&binary, trial, &scale).with_context(|| format!("trial {}", trial.name()))?;
        println!("{}", serde_json::to_string(&verdict)?);
        eprintln!(
            "chaos: {} {}: {}/{} deleted before the heal, {} on untainted nodes, {} early, {} twice, {} interlock refusals, {} Ready still tainted, {} leadership lost, {:.0} s{}",
            if verdict.pass { "PASS" } else { "FAIL" },
            trial.name(),
            verdict.deleted_before_heal,
            verdict.expected_before_heal,
            verdict.on_untainted_node,
            verdict.early,
            verdict.duplicate,
            verdict.interlock_refusals,
            verdict.ready_still_tainted,
            verdict.leadership_lost,
            verdict.wall_seconds,
            if verdict.failures.is_empty() {
                String::new()
            } else {
                format!("\n       {}", verdict.failures.join("\n       "))
            },
        );
        if !verdict.pass {
            failed.push(trial.name());
        }
    }
    if !failed.is_empty() {
        bail!("trials missed their targets: {}", failed.join(", "));
    }
    Ok(())
}
