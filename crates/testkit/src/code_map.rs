//! The checks that keep `docs/architecture.md` a true map of the code.
//!
//! The map is not an inventory: it names the crates and the modules a
//! reader needs, and says what each is for. What can be checked without
//! reading the prose is checked here:
//!
//! - **every crate has a section** ([`missing_sections`]): each crate of
//!   the workspace (a directory under `crates/` with a `Cargo.toml`, and
//!   `xtask`) has a heading that names it in backticks (`` `crates/kube` ``,
//!   `` `xtask` ``); the section runs to the next heading of the same or a
//!   higher level. A heading that names a crate which does not exist is
//!   wrong too.
//! - **every source path the map names exists** ([`broken_paths`]): a
//!   backticked path ending in `.rs` (a file) or `/` (a directory module).
//!   A path from the repository root (`crates/kube/src/watch.rs`,
//!   `fuzz/fuzz_targets/`) is taken as it is. A shorter one inside a
//!   crate's section may instead be a path from that crate's `src/`
//!   (`writer/requests.rs`), a file or directory name found anywhere under
//!   its `src/` (`requests.rs`, `writer/`), or a path from the crate's
//!   directory (`tests/module_graph.rs`). Outside every crate's section,
//!   only the first reading counts. Code blocks are not read, and a span
//!   that is not a relative path (`/metrics`, `nodewarden_sim::replay`) is
//!   not a path.
//! - **the map is short** ([`too_long`]): at most [`MAX_LINES`] lines.
//!
//! Every message names what is wrong: the crate, the path and its line.

use std::path::{Path, PathBuf};

/// The most lines docs/architecture.md may have: a map a reader takes in
/// at one sitting, not an inventory of every file.
pub const MAX_LINES: usize = 400;

/// Every problem of the three checks, in their order.
pub fn problems(root: &Path, map: &str) -> Vec<String> {
    let mut out = missing_sections(root, map);
    out.extend(broken_paths(root, map));
    out.extend(too_long(map));
    out
}

/// Each crate of the workspace under `root` that no heading of `map`
/// names in backticks, as a message.
pub fn missing_sections(root: &Path, map: &str) -> Vec<String> {
    let headed: Vec<String> = lines(map).filter_map(|l| l.heading.map(|(_, crates)| crates)).flatten().collect();
    crates(root)
        .into_iter()
        .filter(|krate| !headed.contains(krate))
        .map(|krate| format!("no section of the map is headed `{krate}` (a heading naming the crate in backticks)"))
        .collect()
}

/// Each backticked source path of `map` that does not exist under `root`
/// as the module documentation describes, and each heading that names a
/// crate `root` does not have, as a message.
pub fn broken_paths(root: &Path, map: &str) -> Vec<String> {
    let mut out = Vec::new();
    // The crates of the sections a line is in: one entry per open heading.
    let mut open: Vec<(usize, Vec<String>)> = Vec::new();
    for line in lines(map) {
        if let Some((level, crates)) = line.heading {
            open.retain(|(l, _)| *l < level);
            for krate in &crates {
                if !root.join(krate).join("Cargo.toml").is_file() {
                    out.push(format!(
                        "line {}: the heading names `{krate}`, but {krate}/Cargo.toml does not exist",
                        line.number
                    ));
                }
            }
            open.push((level, crates));
        }
        let mut sections: Vec<&String> = open.iter().flat_map(|(_, c)| c).collect();
        sections.sort();
        sections.dedup();
        for path in code_spans(line.text).filter(|s| is_source_path(s)) {
            if exists(&root.join(path), path) || sections.iter().any(|krate| in_crate(&root.join(krate), path)) {
                continue;
            }
            out.push(match sections.as_slice() {
                [] => format!(
                    "line {}: `{path}` does not exist (outside a crate's section, a path is read from the repository root)",
                    line.number
                ),
                crates => format!(
                    "line {}: `{path}` does not exist, neither from the repository root nor in {}",
                    line.number,
                    crates.iter().map(|k| format!("{k}/")).collect::<Vec<_>>().join(" or ")
                ),
            });
        }
    }
    out
}

/// A message when `map` is longer than [`MAX_LINES`].
pub fn too_long(map: &str) -> Option<String> {
    let n = map.lines().count();
    (n > MAX_LINES).then(|| format!("the map has {n} lines; it keeps to {MAX_LINES} (a map, not an inventory)"))
}

/// Every crate of the workspace under `root`, by its path from `root`
/// (`crates/kube`, `xtask`), sorted.
pub fn crates(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(root.join("crates")) {
        for e in entries.flatten() {
            if e.path().join("Cargo.toml").is_file() {
                out.push(format!("crates/{}", e.file_name().to_string_lossy()));
            }
        }
    }
    if root.join("xtask/Cargo.toml").is_file() {
        out.push("xtask".to_string());
    }
    out.sort();
    out
}

/// One line of the map outside code blocks.
struct Line<'a> {
    /// 1-based, as an editor shows it.
    number: usize,
    text: &'a str,
    /// For a heading: its level and the crates it names in backticks.
    heading: Option<(usize, Vec<String>)>,
}

/// The lines of `map` outside fenced code blocks.
fn lines(map: &str) -> impl Iterator<Item = Line<'_>> {
    let mut fenced = false;
    map.lines().enumerate().filter_map(move |(i, text)| {
        if text.trim_start().starts_with("```") {
            fenced = !fenced;
            return None;
        }
        if fenced {
            return None;
        }
        let hashes = text.chars().take_while(|c| *c == '#').count();
        let heading = (hashes > 0 && text[hashes..].starts_with(' '))
            .then(|| (hashes, code_spans(text).filter(|s| is_crate_name(s)).map(str::to_string).collect()));
        Some(Line { number: i + 1, text, heading })
    })
}

/// The contents of a line's `` `code spans` ``.
fn code_spans(line: &str) -> impl Iterator<Item = &str> {
    line.split('`').skip(1).step_by(2)
}

/// `crates/<name>` or `xtask`.
fn is_crate_name(s: &str) -> bool {
    s == "xtask"
        || s.strip_prefix("crates/")
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
}

/// A relative path to a Rust file or a directory: only path characters,
/// ending in `.rs` or `/`.
fn is_source_path(s: &str) -> bool {
    let Some(stem) = s.strip_suffix(".rs").or_else(|| s.strip_suffix('/')) else { return false };
    !s.starts_with('/')
        && stem.chars().any(|c| c.is_ascii_alphanumeric())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
}

/// Whether `p` is what `path` says: a directory when it ends in `/`, else
/// a file.
fn exists(p: &Path, path: &str) -> bool {
    if path.ends_with('/') { p.is_dir() } else { p.is_file() }
}

/// Whether `path` names something of the crate in `dir`: from its `src/`,
/// from the crate's directory, or by name anywhere under its `src/`.
fn in_crate(dir: &Path, path: &str) -> bool {
    let src = dir.join("src");
    if exists(&src.join(path), path) || exists(&dir.join(path), path) {
        return true;
    }
    let name = path.trim_end_matches('/');
    !name.contains('/') && walk(&src).iter().any(|p| p.file_name().is_some_and(|n| n == name) && exists(p, path))
}

/// Every file and directory under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p.clone());
            }
            out.push(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A made-up workspace in a directory of its own: `crates/kube` with
    /// `src/lib.rs`, `src/watch.rs`, `src/writer/mod.rs`,
    /// `src/writer/requests.rs` and `tests/fence.rs`; `xtask` with
    /// `src/main.rs`; `fuzz/fuzz_targets/tolerations.rs` at the root.
    struct Tree(PathBuf);

    impl Tree {
        fn new(test: &str) -> Tree {
            let root = std::env::temp_dir().join(format!("nodewarden-code-map-{}-{test}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            for (dir, files) in [
                ("crates/kube", &["Cargo.toml"][..]),
                ("crates/kube/src", &["lib.rs", "watch.rs"][..]),
                ("crates/kube/src/writer", &["mod.rs", "requests.rs"][..]),
                ("crates/kube/tests", &["fence.rs"][..]),
                ("xtask", &["Cargo.toml"][..]),
                ("xtask/src", &["main.rs"][..]),
                ("fuzz/fuzz_targets", &["tolerations.rs"][..]),
            ] {
                std::fs::create_dir_all(root.join(dir)).unwrap();
                for f in files {
                    std::fs::write(root.join(dir).join(f), "").unwrap();
                }
            }
            Tree(root)
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const MAP: &str = "# Architecture\n\
                       The watch (`crates/kube/src/watch.rs`), the fuzzers (`fuzz/fuzz_targets/`).\n\
                       ```\n\
                       `nowhere.rs` in a code block is a picture, not a path\n\
                       ```\n\
                       ## Code map\n\
                       ### `crates/kube`\n\
                       `watch.rs`, `writer/`, `writer/requests.rs`, `requests.rs`, `tests/fence.rs`;\n\
                       `/metrics`, `.rs`, `nodewarden_kube::start` are no paths.\n\
                       #### The writer of `crates/kube`\n\
                       Still kube's section: `requests.rs`.\n\
                       ### `xtask`\n\
                       `main.rs`.\n";

    #[test]
    fn a_map_that_holds_has_no_problem() {
        let tree = Tree::new("holds");
        assert_eq!(problems(&tree.0, MAP), Vec::<String>::new());
    }

    #[test]
    fn every_crate_needs_a_section() {
        let tree = Tree::new("sections");
        let map = MAP.replace("### `xtask`", "### The tasks");
        assert_eq!(
            missing_sections(&tree.0, &map),
            ["no section of the map is headed `xtask` (a heading naming the crate in backticks)"]
        );
        // Named in a sentence is not a section.
        let map = format!("{map}\nSee `xtask`.\n");
        assert_eq!(missing_sections(&tree.0, &map).len(), 1);
    }

    #[test]
    fn a_heading_names_a_crate_that_exists() {
        let tree = Tree::new("heading");
        let map = format!("{MAP}### `crates/cluster`\nThe cluster.\n");
        assert_eq!(
            broken_paths(&tree.0, &map),
            ["line 14: the heading names `crates/cluster`, but crates/cluster/Cargo.toml does not exist"]
        );
    }

    #[test]
    fn a_full_path_must_exist_from_the_root() {
        let tree = Tree::new("full");
        let map = MAP.replace("crates/kube/src/watch.rs", "crates/kube/src/watcher.rs");
        assert_eq!(
            broken_paths(&tree.0, &map),
            [
                "line 2: `crates/kube/src/watcher.rs` does not exist (outside a crate's section, a path is read from the repository root)"
            ]
        );
        // A directory is named as one, a file as a file.
        let map = MAP.replace("`fuzz/fuzz_targets/`", "`fuzz/fuzz_targets/tolerations.rs/`");
        assert_eq!(broken_paths(&tree.0, &map).len(), 1);
    }

    #[test]
    fn a_short_path_is_read_in_its_crates_section_only() {
        let tree = Tree::new("short");
        // Outside every crate's section, a short path is read from the root.
        let map = MAP.replace("The watch (", "The watch (`watch.rs`, ");
        assert_eq!(
            broken_paths(&tree.0, &map),
            ["line 2: `watch.rs` does not exist (outside a crate's section, a path is read from the repository root)"]
        );
        // In another crate's section, it is read in that crate.
        let map = MAP.replace("`main.rs`", "`main.rs`, `requests.rs`");
        assert_eq!(
            broken_paths(&tree.0, &map),
            ["line 13: `requests.rs` does not exist, neither from the repository root nor in xtask/"]
        );
        // A file gone from the crate is named with the crate's section.
        let map = MAP.replace("`tests/fence.rs`", "`tests/leader.rs`");
        assert_eq!(
            broken_paths(&tree.0, &map),
            ["line 8: `tests/leader.rs` does not exist, neither from the repository root nor in crates/kube/"]
        );
        // A file's name is no directory's.
        let map = MAP.replace("`writer/`,", "`watch.rs/`,");
        assert_eq!(broken_paths(&tree.0, &map).len(), 1);
    }

    #[test]
    fn a_section_ends_at_a_heading_of_its_level_or_higher() {
        let tree = Tree::new("ends");
        // `requests.rs` under `#### ... crates/kube` is kube's; after the
        // next `###` it is not.
        let map = format!("{MAP}`requests.rs`\n");
        assert_eq!(broken_paths(&tree.0, &map).len(), 1);
        let map = format!("{MAP}## Testing\n`tests/fence.rs`\n");
        assert_eq!(
            broken_paths(&tree.0, &map),
            [
                "line 15: `tests/fence.rs` does not exist (outside a crate's section, a path is read from the repository root)"
            ]
        );
    }

    #[test]
    fn the_map_keeps_to_its_length() {
        let within = "line\n".repeat(MAX_LINES);
        assert_eq!(too_long(&within), None);
        let beyond = format!("{within}one more\n");
        assert_eq!(
            too_long(&beyond).as_deref(),
            Some("the map has 401 lines; it keeps to 400 (a map, not an inventory)")
        );
    }
}
