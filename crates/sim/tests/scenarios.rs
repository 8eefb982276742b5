//! Replays every scenario of the repository (`tests/scenarios/*.yaml`) and,
//! when present, the shared conformance scenarios (`../shared/conformance`),
//! each in the instant world and with realistic API latency (several
//! seeds), and checks that every file of `tests/invalid/` is refused with
//! the message its first line announces.

use std::path::{Path, PathBuf};

use nodewarden_sim::{ApiLatency, ReplayOptions, load_scenario, replay};

/// The seeds the latency runs use: each draws other delays.
const LATENCY_SEEDS: [u64; 3] = [1, 2, 3];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The files of `dir` (sorted), keeping those `keep` accepts.
fn files(dir: &Path, keep: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => panic!("cannot list {}: {e}", dir.display()),
    };
    let mut files: Vec<PathBuf> =
        entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_file() && keep(p)).collect();
    files.sort();
    files
}

fn is_yaml(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "yaml" || e == "yml")
}

fn is_visible(p: &Path) -> bool {
    p.file_name().is_some_and(|n| !n.to_string_lossy().starts_with('.'))
}

/// Replays each file with `opts`; returns one report per file that did not
/// pass.
fn replay_all(paths: &[PathBuf], opts: &ReplayOptions) -> Vec<String> {
    let mut failures = Vec::new();
    for path in paths {
        let scenario = match load_scenario(path) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{}: invalid: {e}", path.display()));
                continue;
            }
        };
        match replay(&scenario, opts) {
            Ok(outcome) if outcome.ok() => {}
            Ok(outcome) => {
                let mut report = format!(
                    "{} (api latency {}, seed {}): {} of {} expectations failed, {} violations",
                    path.display(),
                    opts.api.unwrap_or(scenario.cluster.api),
                    opts.seed,
                    outcome.summary.failed - outcome.summary.violations,
                    outcome.summary.passed + outcome.summary.failed - outcome.summary.violations,
                    outcome.summary.violations,
                );
                for r in outcome.failures() {
                    report.push_str("\n    ");
                    report.push_str(&r.to_json());
                }
                failures.push(report);
            }
            Err(e) => failures.push(format!("{}: replay error: {e}", path.display())),
        }
    }
    failures
}

fn assert_all_pass(paths: &[PathBuf], opts: &ReplayOptions) {
    let failures = replay_all(paths, opts);
    for f in &failures {
        eprintln!("{f}\n");
    }
    assert!(failures.is_empty(), "{} of {} scenarios failed:\n{}", failures.len(), paths.len(), failures.join("\n"));
}

#[test]
fn repository_scenarios_pass() {
    let dir = repo_root().join("tests/scenarios");
    let paths = files(&dir, is_yaml);
    assert!(!paths.is_empty(), "no *.yaml scenario in {}", dir.display());
    assert_all_pass(&paths, &ReplayOptions { quiet: true, ..ReplayOptions::default() });
}

/// The same files through an API that answers 20-200 ms late and whose
/// watch events are 50-500 ms late: each must hold within its tolerance.
#[test]
fn repository_scenarios_pass_with_api_latency() {
    let paths = files(&repo_root().join("tests/scenarios"), is_yaml);
    for seed in LATENCY_SEEDS {
        assert_all_pass(&paths, &ReplayOptions { quiet: true, api: Some(ApiLatency::REALISTIC), seed });
    }
}

/// The shared conformance files, or `None` (said on stderr) when the folder
/// is not there. CI always has it: there its absence fails the test.
fn conformance_files() -> Option<Vec<PathBuf>> {
    let dir = repo_root().join("../shared/conformance");
    if !dir.is_dir() {
        assert!(std::env::var_os("CI").is_none(), "{} is missing: CI always has it", dir.display());
        eprintln!(
            "skipped: {} is not present (the public conformance scenarios sit beside the repository)",
            dir.display()
        );
        return None;
    }
    let paths = files(&dir, is_visible);
    assert!(!paths.is_empty(), "{} is empty", dir.display());
    Some(paths)
}

#[test]
fn shared_conformance_scenarios_pass() {
    let Some(paths) = conformance_files() else { return };
    assert_all_pass(&paths, &ReplayOptions { quiet: true, ..ReplayOptions::default() });
}

#[test]
fn shared_conformance_scenarios_pass_with_api_latency() {
    let Some(paths) = conformance_files() else { return };
    for seed in LATENCY_SEEDS {
        assert_all_pass(&paths, &ReplayOptions { quiet: true, api: Some(ApiLatency::REALISTIC), seed });
    }
}

#[test]
fn invalid_scenarios_are_refused_with_their_message() {
    let dir = repo_root().join("tests/invalid");
    let paths = files(&dir, is_yaml);
    assert!(!paths.is_empty(), "no *.yaml file in {}", dir.display());
    let mut problems = Vec::new();
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let Some(want) = text.lines().next().and_then(|l| l.strip_prefix("# error: ")) else {
            problems.push(format!("{}: the first line must be `# error: <text>`", path.display()));
            continue;
        };
        match load_scenario(path) {
            Ok(_) => problems.push(format!("{}: accepted, expected an error with {want:?}", path.display())),
            Err(e) if e.to_string().contains(want.trim()) => {}
            Err(e) => problems.push(format!("{}: error {:?} lacks {want:?}", path.display(), e.to_string())),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The engine is deterministic: replaying a scenario twice gives the same
/// output, line for line (what replay, fuzzing and load tests rely on).
#[test]
fn replays_are_deterministic() {
    let dir = repo_root().join("tests/scenarios");
    for path in files(&dir, is_yaml) {
        let scenario = load_scenario(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let run = || {
            replay(&scenario, &ReplayOptions { quiet: false, ..ReplayOptions::default() })
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
                .records
                .iter()
                .map(|r| r.to_json())
                .collect::<Vec<_>>()
        };
        let (first, second) = (run(), run());
        assert!(
            first == second,
            "{}: two replays differ at line {}",
            path.display(),
            first.iter().zip(&second).position(|(a, b)| a != b).unwrap_or(first.len().min(second.len()))
        );
    }
}
