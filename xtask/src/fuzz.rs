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
//!
//! The targets are built without a sanitizer unless `--sanitizer address`
//! is given: the workspace code they run has no `unsafe`, and with
//! AddressSanitizer `engine_steps` ran about 5.5 times fewer executions
//! per CPU second (see docs/fuzzing.md#sanitizers). An AddressSanitizer build goes to its own
//! target directory, so switching between the two does not rebuild either.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// The targets, in the order they run.
pub const TARGETS: [&str; 4] = ["engine_steps", "scenario_parser", "tolerations", "rate_queue"];

/// `cargo xtask fuzz`'s flags.
#[derive(Debug, clap::Args)]
pub(crate) struct FuzzArgs {
    /// How long each target runs (s, m or h suffix).
    #[arg(long = "time", value_name = "TIME", default_value = "60s", value_parser = parse_secs)]
    secs: u64,
    /// Run only this target (engine_steps, scenario_parser, tolerations,
    /// rate_queue).
    #[arg(long = "target", value_name = "NAME")]
    only: Option<String>,
    /// none: coverage instrumentation only; address: AddressSanitizer and
    /// LeakSanitizer too (several times slower).
    #[arg(long, value_name = "none|address", default_value = "none", value_parser = Sanitizer::parse)]
    sanitizer: Sanitizer,
    /// Afterwards, minimize each corpus (what is committed under
    /// fuzz/corpus).
    #[arg(long)]
    cmin: bool,
}

/// How the targets are instrumented beyond libFuzzer's coverage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sanitizer {
    /// Coverage only: the default, for throughput.
    None,
    /// AddressSanitizer (with LeakSanitizer): memory errors in `unsafe`
    /// code of dependencies, and leaks, at several times the cost.
    Address,
}

impl Sanitizer {
    fn parse(s: &str) -> Result<Sanitizer> {
        match s {
            "none" => Ok(Sanitizer::None),
            "address" | "asan" => Ok(Sanitizer::Address),
            other => bail!("--sanitizer {other:?}: expected none or address"),
        }
    }

    /// cargo-fuzz's name for it (`-s`).
    fn name(self) -> &'static str {
        match self {
            Sanitizer::None => "none",
            Sanitizer::Address => "address",
        }
    }

    /// cargo-fuzz's build options for it: the sanitizer, and for
    /// AddressSanitizer a target directory of its own (other compiler
    /// flags, so sharing one would rebuild everything at each switch).
    fn build_args(self) -> Vec<&'static str> {
        match self {
            Sanitizer::None => vec!["-s", "none"],
            Sanitizer::Address => vec!["-s", "address", "--target-dir", "target/asan"],
        }
    }
}

/// What one target's run reported.
#[derive(Debug, Default)]
struct Outcome {
    target: String,
    execs: u64,
    execs_per_sec: u64,
    cov: u64,
    ft: u64,
    corpus: u64,
    secs: u64,
    /// The machine's one-minute load average before and after the run
    /// (Linux), since exec/s depends on how busy the machine was.
    load: (Option<f64>, Option<f64>),
    crash: Option<String>,
}

/// The one-minute load average, where `/proc/loadavg` tells it.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

fn show_load(load: Option<f64>) -> String {
    load.map_or("?".to_string(), |l| format!("{l:.2}"))
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

/// Installs cargo-fuzz from crates.io unless `cargo fuzz` already works.
fn ensure_cargo_fuzz() -> Result<()> {
    let ok = Command::new(crate::cargo())
        .args(["fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return Ok(());
    }
    eprintln!("$ cargo install cargo-fuzz --locked");
    let status = Command::new(crate::cargo()).args(["install", "cargo-fuzz", "--locked"]).status()?;
    if !status.success() {
        bail!("could not install cargo-fuzz ({status})");
    }
    Ok(())
}

/// `cargo fuzz <sub> -O <sanitizer's options> <rest>`, run in `fuzz/`.
fn fuzz_command(fuzz_dir: &Path, sub: &str, sanitizer: Sanitizer, rest: &[&str]) -> Command {
    let mut cmd = Command::new(crate::cargo());
    cmd.arg("fuzz")
        .arg(sub)
        .arg("-O")
        .args(sanitizer.build_args())
        .args(rest)
        .current_dir(fuzz_dir)
        .env("RUSTC_BOOTSTRAP", "1");
    cmd
}

/// The command line `fuzz_command` runs, for showing.
fn shown(sub: &str, sanitizer: Sanitizer, rest: &[&str]) -> String {
    let mut words = vec!["RUSTC_BOOTSTRAP=1", "cargo", "fuzz", sub, "-O"];
    words.extend(sanitizer.build_args());
    words.extend(rest);
    format!("$ {}", words.join(" "))
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
        } else if let Some(v) = line.strip_prefix("Done ").and_then(|rest| rest.split(" runs in ").nth(1)) {
            out.secs = v.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(out.secs);
        } else if let Some(i) = line.find("Test unit written to ") {
            out.crash = Some(line[i + "Test unit written to ".len()..].trim().to_string());
        }
    }
    out
}

fn run_target(fuzz_dir: &Path, target: &str, secs: u64, sanitizer: Sanitizer) -> Result<Outcome> {
    let corpus = format!("corpus/{target}");
    std::fs::create_dir_all(fuzz_dir.join(&corpus))?;
    let time = format!("-max_total_time={secs}");
    let rest = [target, corpus.as_str(), "--", time.as_str(), "-print_final_stats=1"];
    eprintln!("{}", shown("run", sanitizer, &rest));
    let before = load_average();
    let output = fuzz_command(fuzz_dir, "run", sanitizer, &rest)
        .stdout(Stdio::inherit())
        .output()
        .with_context(|| format!("could not run cargo fuzz for {target}"))?;
    let text = String::from_utf8_lossy(&output.stderr);
    let mut outcome = parse_output(target, &text);
    outcome.load = (before, load_average());
    if !output.status.success() && outcome.crash.is_none() {
        // Not a crash libFuzzer reported: show why, and fail.
        eprintln!(
            "{}",
            text.lines().rev().take(30).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
        );
        outcome.crash = Some(format!("cargo fuzz exited with {}", output.status));
    }
    eprintln!("{}", summary(&outcome));
    Ok(outcome)
}

/// One target's result in a line, printed as soon as it has run.
fn summary(o: &Outcome) -> String {
    let result = o.crash.as_deref().map_or("ok".to_string(), |c| format!("CRASH {c}"));
    format!(
        "{}: {} exec/s ({} executions in {} s, libFuzzer's average; load {} -> {}), cov {}, ft {}, corpus {}: {result}",
        o.target,
        o.execs_per_sec,
        o.execs,
        o.secs,
        show_load(o.load.0),
        show_load(o.load.1),
        o.cov,
        o.ft,
        o.corpus
    )
}

/// `cargo xtask fuzz [--time 60s] [--target NAME] [--sanitizer none|address] [--cmin]`.
pub fn fuzz(args: FuzzArgs) -> Result<()> {
    let FuzzArgs { secs, only, sanitizer, cmin } = args;
    let targets: Vec<&str> = match &only {
        Some(t) if TARGETS.contains(&t.as_str()) => vec![t.as_str()],
        Some(t) => bail!("unknown target {t:?}; targets: {}", TARGETS.join(", ")),
        None => TARGETS.to_vec(),
    };
    ensure_cargo_fuzz()?;
    let fuzz_dir = repo_root().join("fuzz");
    eprintln!("{}", shown("build", sanitizer, &[]));
    let status = fuzz_command(&fuzz_dir, "build", sanitizer, &[]).status()?;
    if !status.success() {
        bail!("cargo fuzz build failed ({status})");
    }
    let mut outcomes = Vec::new();
    for target in &targets {
        outcomes.push(run_target(&fuzz_dir, target, secs, sanitizer)?);
        if cmin {
            let corpus = format!("corpus/{target}");
            let rest = [*target, corpus.as_str()];
            eprintln!("{}", shown("cmin", sanitizer, &rest));
            fuzz_command(&fuzz_dir, "cmin", sanitizer, &rest).stdout(Stdio::null()).status()?;
        }
    }
    println!(
        "sanitizer {}, {secs} s a target; exec/s is libFuzzer's average over the whole run (its first pass over the corpus included); load: the one-minute load average before and after",
        sanitizer.name()
    );
    println!(
        "{:<16} {:>10} {:>8} {:>7} {:>8} {:>7} {:>12}  result",
        "target", "execs", "exec/s", "cov", "ft", "corpus", "load"
    );
    for o in &outcomes {
        let result = o.crash.as_deref().map_or("ok".to_string(), |c| format!("CRASH {c}"));
        let load = format!("{}-{}", show_load(o.load.0), show_load(o.load.1));
        println!(
            "{:<16} {:>10} {:>8} {:>7} {:>8} {:>7} {:>12}  {result}",
            o.target, o.execs, o.execs_per_sec, o.cov, o.ft, o.corpus, load
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
                    Done 2050 runs in 7 second(s)\n\
                    stat::number_of_executed_units: 2050\nstat::average_exec_per_sec:     290\n";
        let o = parse_output("t", text);
        assert_eq!((o.execs, o.execs_per_sec, o.cov, o.ft, o.corpus, o.secs), (2050, 290, 12903, 38926, 362, 7));
        assert!(o.crash.is_none());
        let crash = parse_output("t", "artifact_prefix='a/'; Test unit written to a/crash-12ab\n");
        assert_eq!(crash.crash.as_deref(), Some("a/crash-12ab"));
    }

    #[test]
    fn sanitizers() {
        assert_eq!(Sanitizer::parse("none").ok(), Some(Sanitizer::None));
        assert_eq!(Sanitizer::parse("address").ok(), Some(Sanitizer::Address));
        assert_eq!(Sanitizer::parse("asan").ok(), Some(Sanitizer::Address));
        assert!(Sanitizer::parse("memory").is_err());
        assert!(Sanitizer::Address.build_args().contains(&"target/asan"));
        assert_eq!(Sanitizer::None.build_args(), ["-s", "none"]);
    }
}
