//! Pins the engine's behaviour: the full `nodewarden replay` output of every
//! scenario under `tests/scenarios/` (and, when present, of the shared
//! conformance scenarios) must equal the transcript stored for it under
//! `tests/transcripts/`, line for line.
//!
//! A refactor that changes no behaviour leaves every transcript as it is. A
//! deliberate change of behaviour re-records them with
//! `cargo xtask transcripts --bless` (which sets `NODEWARDEN_BLESS=1` for
//! this test), and the diff of `tests/transcripts/` in the same commit shows
//! exactly which writes moved.

mod common;

use std::path::{Path, PathBuf};

use nodewarden_cluster::load_scenario;
use nodewarden_sim::{ReplayOptions, replay};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    files
}

/// The replay's every line, as `nodewarden replay FILE` prints it.
fn transcript(path: &Path) -> String {
    let scenario = load_scenario(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let outcome = replay(&scenario, &ReplayOptions { quiet: false, ..ReplayOptions::default() })
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut text = String::new();
    for r in &outcome.records {
        text.push_str(&r.to_json());
        text.push('\n');
    }
    text
}

/// Compares (or, when blessing, rewrites) the transcript of every scenario
/// in `scenarios` against `stored/<stem>.jsonl`; returns the differences.
fn check(scenarios: &Path, stored: &Path) -> Vec<String> {
    let bless = std::env::var_os("NODEWARDEN_BLESS").is_some_and(|v| v == "1");
    let mut problems = Vec::new();
    let paths = yaml_files(scenarios);
    assert!(!paths.is_empty(), "no scenario in {}", scenarios.display());
    for path in &paths {
        let Some(stem) = path.file_stem() else { continue };
        let file = stored.join(stem).with_extension("jsonl");
        let got = transcript(path);
        if bless {
            std::fs::create_dir_all(stored).unwrap_or_else(|e| panic!("{}: {e}", stored.display()));
            std::fs::write(&file, &got).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            continue;
        }
        let Ok(want) = std::fs::read_to_string(&file) else {
            problems.push(format!("{}: no stored transcript {}", path.display(), file.display()));
            continue;
        };
        if got != want {
            let (g, w): (Vec<&str>, Vec<&str>) = (got.lines().collect(), want.lines().collect());
            let at = g.iter().zip(&w).position(|(a, b)| a != b).unwrap_or(g.len().min(w.len()));
            problems.push(format!(
                "{}: transcript differs from {} at line {}\n    stored: {}\n    now:    {}",
                path.display(),
                file.display(),
                at + 1,
                w.get(at).unwrap_or(&"(end)"),
                g.get(at).unwrap_or(&"(end)"),
            ));
        }
    }
    // A stored transcript whose scenario is gone is stale.
    if let Ok(entries) = std::fs::read_dir(stored) {
        for e in entries.filter_map(Result::ok) {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "jsonl") && !paths.iter().any(|s| s.file_stem() == p.file_stem()) {
                if bless {
                    let _ = std::fs::remove_file(&p);
                } else {
                    problems.push(format!("{}: no scenario of that name any more", p.display()));
                }
            }
        }
    }
    problems
}

#[test]
fn repository_transcripts_are_unchanged() {
    let root = repo_root();
    let problems = check(&root.join("tests/scenarios"), &root.join("tests/transcripts/scenarios"));
    assert!(
        problems.is_empty(),
        "{}\n(re-record with `cargo xtask transcripts --bless` if the change is meant)",
        problems.join("\n")
    );
}

#[test]
fn conformance_transcripts_are_unchanged() {
    let root = repo_root();
    let Some(dir) = common::conformance_dir(&root) else { return };
    let problems = check(&dir, &root.join("tests/transcripts/conformance"));
    assert!(
        problems.is_empty(),
        "{}\n(re-record with `cargo xtask transcripts --bless` if the change is meant)",
        problems.join("\n")
    );
}
