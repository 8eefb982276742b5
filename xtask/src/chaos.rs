//! `cargo xtask chaos`: the chaos trials (`nodewarden-chaos`) against the
//! release binary, one JSON verdict a line on stdout, a summary on stderr;
//! exits 1 when a trial misses a target. `big-zone` ([`big_zone`]) is the
//! one trial at the size we claim, through `cargo xtask wire-load`'s
//! harness; it has no short form.

mod big_zone;

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};
use nodewarden_chaos::{Scale, Trial};

/// The trial that is not one of `nodewarden_chaos`'s.
const BIG_ZONE: &str = "big-zone";

/// `cargo xtask chaos`'s flags.
#[derive(Debug, clap::Args)]
pub(crate) struct ChaosArgs {
    /// The trials to run (every one when none): failover-kill,
    /// failover-stop, api-errors, api-throttle, dropped-watches,
    /// api-outage, freeze, restart-storm, malformed, big-zone.
    #[arg(value_name = "TRIAL")]
    trials: Vec<String>,
    /// The shortened trials (no big-zone), as the test suite runs them.
    #[arg(long)]
    short: bool,
    /// The nodewarden binary (default: built with cargo build --release).
    #[arg(long, value_name = "PATH")]
    binary: Option<PathBuf>,
}

/// Runs the trials `args` name (every one when none), at the full scale
/// unless `--short`.
pub fn chaos(args: ChaosArgs) -> Result<()> {
    let mut trials = Vec::new();
    let mut big_zone = false;
    let scale = if args.short { Scale::short() } else { Scale::full() };
    let binary = args.binary;
    for a in &args.trials {
        match a.as_str() {
            BIG_ZONE => big_zone = true,
            name => match Trial::named(name) {
                Some(t) => trials.push(t),
                None => bail!(
                    "unknown trial {name:?}; trials: {}, {BIG_ZONE}",
                    Trial::ALL.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
                ),
            },
        }
    }
    let short = scale.name == Scale::short().name;
    if big_zone && short {
        bail!("{BIG_ZONE} has no short scale: it is the outage at the size we claim (40k nodes, 1M pods)");
    }
    if trials.is_empty() && !big_zone {
        trials = Trial::ALL.to_vec();
        big_zone = !short;
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
        trials.len() + usize::from(big_zone),
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
    if big_zone {
        eprintln!("chaos: {BIG_ZONE} ...");
        let verdict = big_zone::run(&binary).with_context(|| format!("trial {BIG_ZONE}"))?;
        println!("{}", serde_json::to_string(&verdict)?);
        eprintln!(
            "chaos: {} {BIG_ZONE}{}",
            if verdict.pass { "PASS" } else { "FAIL" },
            if verdict.failures.is_empty() {
                String::new()
            } else {
                format!("\n       {}", verdict.failures.join("\n       "))
            },
        );
        if !verdict.pass {
            failed.push(BIG_ZONE);
        }
    }
    if !failed.is_empty() {
        bail!("trials missed their targets: {}", failed.join(", "));
    }
    Ok(())
}
