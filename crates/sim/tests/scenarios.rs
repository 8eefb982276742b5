//! Replays every scenario of the repository (`tests/scenarios/*.yaml`) and,
//! when present, the shared conformance scenarios (`../shared/conformance`),
//! each in the instant world and with realistic API latency (several
//! seeds), and checks that every file of `tests/invalid/` is refused with
//! the message its first line announces.

mod common;

use std::path::{Path, PathBuf};

use nodewarden_cluster::{ApiLatency, load_scenario, parse_scenario};
use nodewarden_sim::{ReplayOptions, replay};

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

/// The shared conformance files, or `None` when the folder is not there
/// (see [`common::conformance_dir`]).
fn conformance_files() -> Option<Vec<PathBuf>> {
    let dir = common::conformance_dir(&repo_root())?;
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

/// docs/scenarios.md, which describes the format to users in full.
fn format_doc() -> String {
    let path = repo_root().join("docs/scenarios.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The part of `doc` from the heading `from` to the next heading of the
/// same level.
fn doc_section<'a>(doc: &'a str, from: &str) -> &'a str {
    let start = doc.find(from).unwrap_or_else(|| panic!("docs/scenarios.md has no {from:?}"));
    let level = from.split(' ').next().unwrap_or("##");
    let rest = &doc[start + from.len()..];
    let end = rest.find(&format!("\n{level} ")).unwrap_or(rest.len());
    &rest[..end]
}

/// The example at the top of the format's description replays, and
/// every expectation in it holds.
#[test]
fn the_format_docs_example_passes() {
    let doc = format_doc();
    let section = doc_section(&doc, "## The format");
    let start = section.find("```yaml\n").expect("a YAML example under \"The format\"") + "```yaml\n".len();
    let end = start + section[start..].find("```").expect("the example's closing fence");
    let scenario = parse_scenario(&section[start..end]).unwrap_or_else(|e| panic!("the docs' example: {e}"));
    let outcome = replay(&scenario, &ReplayOptions { quiet: true, ..ReplayOptions::default() }).unwrap();
    assert!(outcome.ok(), "{:?}", outcome.failures().map(|r| r.to_json()).collect::<Vec<_>>());
    assert!(outcome.summary.passed >= 2);
}

/// Every event action the format's description lists is one the parser
/// takes, written as the table writes it.
#[test]
fn the_format_docs_event_actions_parse() {
    let doc = format_doc();
    let section = doc_section(&doc, "### `events`");
    let actions: Vec<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(code, _)| code.to_string()))
        .map(|a| a.replace("node-z, ...", "node-z").replace("default/p, ...", "default/p").replace("[...]", "[]"))
        .collect();
    assert!(actions.len() >= 17, "only {} actions found in the events table", actions.len());
    for action in &actions {
        let file = format!(
            "nodes: [{{name: node-a}}, {{name: node-b}}]\npods: [{{name: default/web-1}}]\nevents:\n- {{at: 1s, {action}}}\n"
        );
        if let Err(e) = parse_scenario(&file) {
            panic!("docs/scenarios.md lists `{action}`, which does not parse: {e}");
        }
    }
}
