//! `cargo xtask fuzz`: every cargo-fuzz target under `fuzz/` in turn, on
//! the stable toolchain.
//!
//! cargo-fuzz passes `-Z` flags (sanitizer, coverage instrumentation) to
//! rustc; `RUSTC_BOOTSTRAP=1` lets a stable compiler accept them, so no
//! nightly is needed. cargo-fuzz itself is installed from crates.io when
//! missing. Each target runs for the given time on its committed corpus
//! (`fuzz/corpus/<target>`, which libFuzzer extends with what it finds);
//! a crash leaves its reproducer in `fuzz/artifacts/<target>/` and makes
//! the task fail, after the other targets have run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// The targets, in the order they run.
pub const TARGETS: [&str; 4] = ["engine_steps", "scenario_parser", "tolerations", "rate_queue"];

const USAGE: &str = "usage: cargo xtask fuzz [--time 60s] [--target NAME] [--cmin]
  --time    how long each target runs (s, m or h suffix; default 60s)
  --target  run only this target (engine_steps, scenario_parser, tolerations, rate_queue)
  --cmin    afterwards, minimize each corpus (what is committed under fuzz/corpus)";

/// What one target's run reported.
#[derive(Debug, Default)]
struct Outcome {
    target: String,
    execs: u64,
    execs_per_sec: u64,
    cov: u64,
    ft: u64,
    corpus: u64,
    crash: Option<String>,
}

/// Parses `60`, `60s`, `5m`, `1h` into seconds.
fn parse_secs(s: &str) -> Result<u64> {
    let (num, unit) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&s[..i], c),
        _ => (s, 's'),
    };
    let n: u64 = num.parse().with_context(|| format!("--time {s:?}: expected e.g. 60s, 5m or 1h"))?;
    Ok(match unit {
        's' => n,
        'm' => n * 60,
        'h' => n * 3600,
        other => bail!("--time {s:?}: unknown unit {other:?}"),
    })
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."))
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

/// Installs cargo-fuzz from crates.io unless `cargo fuzz` already works.
fn ensure_cargo_fuzz() -> Result<()> {
    let ok = Command::new(cargo())
        .args(["fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return Ok(());
    }
    eprintln!("$ cargo install cargo-fuzz --locked");
    let status = Command::new(cargo()).args(["install", "cargo-fuzz", "--locked"]).status()?;
    if !status.success() {
        bail!("could not install cargo-fuzz ({status})");
    }
    Ok(())
}

fn fuzz_command(fuzz_dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(cargo());
    cmd.arg("fuzz").args(args).current_dir(fuzz_dir).env("RUSTC_BOOTSTRAP", "1");
    cmd
}

/// The number after `key` in a libFuzzer status line (`cov: 123`).
fn field(line: &str, key: &str) -> Option<u64> {
    let rest = &line[line.find(key)? + key.len()..];
    let digits: String = rest.trim_start().chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Reads libFuzzer's output: the last status line and the final stats.
fn parse_output(target: &str, text: &str) -> Outcome {
    let mut out = Outcome { target: target.to_string(), ..Outcome::default() };
    for line in text.lines() {
        if line.starts_with('#') && line.contains("cov: ") {
            out.execs = line[1..].split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(out.execs);
            out.cov = field(line, "cov: ").unwrap_or(out.cov);
            out.ft = field(line, "ft: ").unwrap_or(out.ft);
            out.corpus = field(line, "corp: ").unwrap_or(out.corpus);
            out.execs_per_sec = field(line, "exec/s: ").unwrap_or(out.execs_per_sec);
        } else if let Some(v) = line.strip_prefix("stat::number_of_executed_units: ") {
            out.execs = v.trim().parse().unwrap_or(out.execs);
        } else if let Some(v) = line.strip_prefix("stat::average_exec_per_sec: ") {
            out.execs_per_sec = v.trim().parse().unwrap_or(out.execs_per_sec);
        } else if let Some(i) = line.find("Test unit written to ") {
            out.crash = Some(line[i + "Test unit written to ".len()..].trim().to_string());
        }
    }
    out
}

fn run_target(fuzz_dir: &Path, target: &str, secs: u64) -> Result<Outcome> {
    let corpus = format!("corpus/{target}");
    std::fs::create_dir_all(fuzz_dir.join(&corpus))?;
    let time = format!("-max_total_time={secs}");
    eprintln!("$ RUSTC_BOOTSTRAP=1 cargo fuzz run -O {target} {corpus} -- {time} -print_final_stats=1");
    let output = fuzz_command(fuzz_dir, &["run", "-O", target, &corpus, "--", &time, "-print_final_stats=1"])
        .stdout(Stdio::inherit())
        .output()
        .with_context(|| format!("could not run cargo fuzz for {target}"))?;
    let text = String::from_utf8_lossy(&output.stderr);
    let mut outcome = parse_output(target, &text);
    if !output.status.success() && outcome.crash.is_none() {
        // Not a crash libFuzzer reported: show why, and fail.
        eprintln!(
            "{}",
            text.lines().rev().take(30).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
        );
        outcome.crash = Some(format!("cargo fuzz exited with {}", output.status));
    }
    Ok(outcome)
}

/// `cargo xtask fuzz [--time 60s] [--target NAME] [--cmin]`.
pub fn fuzz(mut args: impl Iterator<Item = String>) -> Result<()> {
    let (mut secs, mut only, mut cmin) = (60, None, false);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--time" => secs = parse_secs(&args.next().context("--time needs a value")?)?,
            "--target" => only = Some(args.next().context("--target needs a value")?),
            "--cmin" => cmin = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown argument {other:?}\n\n{USAGE}"),
        }
    }
    let targets: Vec<&str> = match &only {
        Some(t) if TARGETS.contains(&t.as_str()) => vec![t.as_str()],
        Some(t) => bail!("unknown target {t:?}; targets: {}", TARGETS.join(", ")),
        None => TARGETS.to_vec(),
    };
    ensure_cargo_fuzz()?;
    let fuzz_dir = repo_root().join("fuzz");
    eprintln!("$ RUSTC_BOOTSTRAP=1 cargo fuzz build -O");
    let status = fuzz_command(&fuzz_dir, &["build", "-O"]).status()?;
    if !status.success() {
        bail!("cargo fuzz build failed ({status})");
    }
    let mut outcomes = Vec::new();
    for target in &targets {
        outcomes.push(run_target(&fuzz_dir, target, secs)?);
        if cmin {
            let corpus = format!("corpus/{target}");
            eprintln!("$ RUSTC_BOOTSTRAP=1 cargo fuzz cmin -O {target} {corpus}");
            fuzz_command(&fuzz_dir, &["cmin", "-O", target, &corpus]).stdout(Stdio::null()).status()?;
        }
    }
    println!("{:<16} {:>10} {:>8} {:>7} {:>8} {:>7}  result", "target", "execs", "exec/s", "cov", "ft", "corpus");
    for o in &outcomes {
        let result = o.crash.as_deref().map_or("ok".to_string(), |c| format!("CRASH {c}"));
        println!(
            "{:<16} {:>10} {:>8} {:>7} {:>8} {:>7}  {result}",
            o.target, o.execs, o.execs_per_sec, o.cov, o.ft, o.corpus
        );
    }
    let crashed: Vec<&str> = outcomes.iter().filter(|o| o.crash.is_some()).map(|o| o.target.as_str()).collect();
    if !crashed.is_empty() {
        bail!("crash in {}; reproducers are under fuzz/artifacts/", crashed.join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(parse_secs("60").ok(), Some(60));
        assert_eq!(parse_secs("45s").ok(), Some(45));
        assert_eq!(parse_secs("5m").ok(), Some(300));
        assert_eq!(parse_secs("1h").ok(), Some(3600));
        assert!(parse_secs("5d").is_err());
        assert!(parse_secs("s").is_err());
    }

    #[test]
    fn libfuzzer_output() {
        let text = "#1024\tpulse  cov: 10 ft: 20 corp: 3/30b exec/s: 512 rss: 40Mb\n\
                    #2048\tDONE   cov: 12903 ft: 38926 corp: 362/7591b lim: 25 exec/s: 291 rss: 462Mb\n\
                    stat::number_of_executed_units: 2050\nstat::average_exec_per_sec:     290\n";
        let o = parse_output("t", text);
        assert_eq!((o.execs, o.execs_per_sec, o.cov, o.ft, o.corpus), (2050, 290, 12903, 38926, 362));
        assert!(o.crash.is_none());
        let crash = parse_output("t", "artifact_prefix='a/'; Test unit written to a/crash-12ab\n");
        assert_eq!(crash.crash.as_deref(), Some("a/crash-12ab"));
    }
}
