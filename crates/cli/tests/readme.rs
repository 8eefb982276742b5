//! README.md's sample output is what its first command prints today, and
//! docs/simulation.md's table of safety checks names every check the
//! output reports.
//!
//! The sample is the block after "The first command runs": every line of
//! it but `...` lines (which stand for what is left out, such as the wall
//! time, which changes from run to run) must be a line of `nodewarden sim`'s
//! output, in the same order. When the output changes, regenerate it:
//!
//! ```sh
//! UPDATE_README=1 cargo test -p nodewarden --test readme
//! ```
//!
//! which rewrites that block (and nothing else in README.md) from the
//! output, leaving out the wall time and the latency table.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    let p = root().join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

/// The arguments of README's first command, `cargo run --release -p
/// nodewarden -- ARGS`.
fn readme_args(readme: &str) -> Vec<String> {
    let first = readme
        .lines()
        .skip_while(|l| !l.starts_with("```"))
        .nth(1)
        .expect("README.md starts with a code block of commands");
    let args = first.strip_prefix("cargo run --release -p nodewarden -- ").unwrap_or_else(|| {
        panic!("README.md's first command is not `cargo run --release -p nodewarden -- ...`: {first}")
    });
    args.split_whitespace().map(String::from).collect()
}

/// What the command prints on stdout, run once for every test here (an
/// hour of 1000 nodes: about 20 s with the debug binary). The simulation
/// is deterministic for a seed; only the wall time differs.
fn output() -> &'static str {
    static OUT: OnceLock<String> = OnceLock::new();
    OUT.get_or_init(|| {
        let args = readme_args(&read("README.md"));
        let o = Command::new(env!("CARGO_BIN_EXE_nodewarden"))
            .args(&args)
            .arg("--quiet")
            .env_remove("RUST_LOG")
            .output()
            .expect("run nodewarden");
        assert!(o.status.success(), "nodewarden {args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).expect("UTF-8 output")
    })
}

/// The sample block: the lines between the first pair of bare fences
/// after "The first command runs", with the line numbers of its fences.
fn sample_block(readme: &str) -> (usize, usize, Vec<&str>) {
    let lines: Vec<&str> = readme.lines().collect();
    let intro = lines
        .iter()
        .position(|l| l.starts_with("The first command runs"))
        .expect("README.md has the paragraph \"The first command runs ...\"");
    let open = intro + lines[intro..].iter().position(|l| *l == "```").expect("a ``` block after it");
    let close = open + 1 + lines[open + 1..].iter().position(|l| *l == "```").expect("the block's closing ```");
    (open, close, lines[open + 1..close].to_vec())
}

/// The sample README shows, made from the output: everything but the
/// wall-time line and the latency table, each left out as `...`.
fn sample(output: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_latencies = false;
    for (i, line) in output.lines().enumerate() {
        if i == 1 {
            // "1000 nodes in 3 zone(s), ...; 1h00m00s simulated in 1.5s of wall time (2339x), seed 1"
            out.push("...".to_string());
        } else if line.starts_with("Latencies (seconds)") {
            in_latencies = true;
            out.push("...".to_string());
        } else if in_latencies {
            in_latencies = !line.is_empty();
            if line.is_empty() {
                out.push(String::new());
            }
        } else {
            out.push(line.to_string());
        }
    }
    out
}

/// Lines of `shown` (but `...` lines) that are not lines of `output` in
/// order: (line within the block, the line, the output line most like it).
fn drift(shown: &[&str], output: &str) -> Vec<(usize, String, String)> {
    let out: Vec<&str> = output.lines().collect();
    let mut from = 0;
    let mut wrong = Vec::new();
    for (i, line) in shown.iter().enumerate() {
        if line.trim() == "..." {
            continue;
        }
        match out[from..].iter().position(|o| o == line) {
            Some(j) => from += j + 1,
            None => {
                // The output line sharing the longest start with it.
                let common = |o: &&&str| o.chars().zip(line.chars()).take_while(|(a, b)| a == b).count();
                let near = out.iter().max_by_key(common).copied().unwrap_or_default();
                wrong.push((i + 1, line.to_string(), near.to_string()));
            }
        }
    }
    wrong
}

#[test]
fn readme_sample_output_is_what_the_command_prints() {
    let readme = read("README.md");
    let output = output();
    let (open, close, shown) = sample_block(&readme);
    let wrong = drift(&shown, output);
    if wrong.is_empty() {
        return;
    }
    if std::env::var_os("UPDATE_README").is_some() {
        // Read again just before writing: other edits to README.md since
        // the run started are kept.
        let readme = read("README.md");
        let (open_now, close_now, _) = sample_block(&readme);
        assert_eq!((open, close), (open_now, close_now), "README.md changed while the test ran; run it again");
        let lines: Vec<&str> = readme.lines().collect();
        let mut text: Vec<String> = lines[..=open].iter().map(|l| l.to_string()).collect();
        text.extend(sample(output));
        text.extend(lines[close..].iter().map(|l| l.to_string()));
        let mut text = text.join("\n");
        text.push('\n');
        std::fs::write(root().join("README.md"), text).expect("write README.md");
        eprintln!("README.md's sample output rewritten from the output of the command");
        return;
    }
    let mut msg = String::from(
        "README.md's sample output (the block after \"The first command runs\") is not what the command prints.\n",
    );
    for (n, line, near) in &wrong {
        msg.push_str(&format!("  line {n} of the block:\n    README: {line}\n    output: {near}\n"));
    }
    msg.push_str(&format!(
        "Regenerate it with: UPDATE_README=1 cargo test -p nodewarden --test readme\n\nThe whole output:\n{output}"
    ));
    panic!("{msg}");
}

#[test]
fn the_sample_keeps_what_the_reader_needs() {
    // Regenerating cannot quietly drop the part README's text talks about.
    let readme = read("README.md");
    let (_, _, shown) = sample_block(&readme);
    let shown = shown.join("\n");
    for needed in ["What the controller did, per zone", "zone state", "why these rates", "in short", "Safety: all"] {
        assert!(shown.contains(needed), "README.md's sample output lacks {needed:?}:\n{shown}");
    }
}

#[test]
fn the_sample_is_regenerated_from_the_output_and_checked_line_by_line() {
    let output = "title\n1000 nodes; 1.5s of wall time\nzone a\n  in short  fine\n\nLatencies (seconds) x\n  a 1\n\nSafety: all 2 checks held (a,\n        b).\n";
    let made = sample(output);
    assert_eq!(
        made,
        ["title", "...", "zone a", "  in short  fine", "", "...", "", "Safety: all 2 checks held (a,", "        b)."]
    );
    let shown: Vec<&str> = made.iter().map(String::as_str).collect();
    assert!(drift(&shown, output).is_empty());
    // A changed figure, an abbreviation inside a line, or lines out of
    // order are caught; `...` lines are not.
    let wrong =
        drift(&["title", "  ...", "zone b", "  in short  (...)", "Safety: all 2 checks held (a,", "title"], output);
    let lines: Vec<usize> = wrong.iter().map(|w| w.0).collect();
    assert_eq!(lines, [3, 4, 6]);
    assert_eq!(wrong[0].2, "zone a", "the nearest output line is shown");
}

#[test]
fn docs_list_every_safety_check_the_output_prints() {
    // "Safety: all 12 checks held (a, b, ...)." wrapped over lines.
    let output = output();
    let safety: String = output
        .lines()
        .skip_while(|l| !l.starts_with("Safety: all "))
        .take_while(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let inside = safety.split_once('(').and_then(|(_, rest)| rest.rsplit_once(')')).expect("the checks' names").0;
    let names: Vec<&str> = inside.split(',').map(str::trim).collect();
    let count: usize = safety["Safety: all ".len()..].split(' ').next().and_then(|n| n.parse().ok()).expect("a count");
    assert_eq!(names.len(), count, "{safety}");
    let docs = read("docs/simulation.md");
    let listed: Vec<&str> = docs
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split_once("` |").map(|(name, _)| name))
        .filter(|name| name.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect();
    for name in &names {
        assert!(
            listed.contains(name),
            "docs/simulation.md's table of safety checks lacks `{name}` (listed: {listed:?})"
        );
    }
    let table: Vec<&&str> = listed.iter().filter(|l| names.contains(l)).collect();
    assert_eq!(table.len(), names.len(), "each check once in docs/simulation.md: {listed:?}");
}
