//! The check that `docs/architecture.md` maps every source file.
//!
//! A file is mapped when the document names it: by its path from the
//! repository root anywhere (`crates/kube/src/watch.rs`), or in backticks
//! inside the section about its crate (a heading naming `` `crates/kube` ``
//! or `` `xtask` ``, up to the next heading of the same or a higher level)
//! by its path from the crate's `src/` or its file name (`cluster/apply.rs`
//! or `apply.rs`); a directory module's `mod.rs` by its directory
//! (`` `systems/` ``).
//! Crate roots (`lib.rs`, `main.rs`) are their sections' subject and need
//! no entry; binaries under `src/bin/` do.

use std::path::Path;

/// The source files under `root` (a workspace: `crates/*` and `xtask`)
/// that `map` does not name, as paths from `root`, sorted.
pub fn unmapped(root: &Path, map: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (krate, dir) in crate_dirs(root) {
        let section = section(map, &krate);
        for rel in rust_files(&dir.join("src")) {
            if rel == "lib.rs" || rel == "main.rs" {
                continue;
            }
            let full = format!("{krate}/src/{rel}");
            // A directory module's `mod.rs` is named by its directory; any
            // other file by its path or its file name (a section listing a
            // directory's files names them by their file names).
            let file = rel.rsplit('/').next().unwrap_or(&rel);
            let named = match rel.strip_suffix("mod.rs") {
                Some(dir) => section.contains(&format!("`{dir}`")),
                None => section.contains(&format!("`{rel}`")) || section.contains(&format!("`{file}`")),
            };
            if !map.contains(&full) && !named {
                out.push(full);
            }
        }
    }
    out.sort();
    out
}

/// Every crate of the workspace: its path from `root` and its directory.
fn crate_dirs(root: &Path) -> Vec<(String, std::path::PathBuf)> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(root.join("crates")) {
        for e in entries.flatten() {
            if e.path().join("Cargo.toml").exists() {
                out.push((format!("crates/{}", e.file_name().to_string_lossy()), e.path()));
            }
        }
    }
    if root.join("xtask/Cargo.toml").exists() {
        out.push(("xtask".to_string(), root.join("xtask")));
    }
    out.sort();
    out
}

/// The `.rs` files under `src`, as paths from it with `/` separators.
fn rust_files(src: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs")
                && let Ok(rel) = p.strip_prefix(src)
            {
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out
}

/// The text of the section whose heading names `` `krate` `` (all such
/// sections, joined), each up to the next heading of its level or higher.
fn section(map: &str, krate: &str) -> String {
    let tag = format!("`{krate}`");
    let mut out = String::new();
    let mut level: Option<usize> = None;
    for line in map.lines() {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        let heading = hashes > 0 && line[hashes..].starts_with(' ');
        if heading {
            if level.is_some_and(|l| hashes <= l) {
                level = None;
            }
            if line.contains(&tag) {
                level = Some(hashes);
            }
        }
        if level.is_some() {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = "# Architecture\n\
                       ## Code map\n\
                       ### `crates/kube`\n\
                       `typed.rs` reads pods; see `crates/apiserver/src/store.rs`.\n\
                       #### details of `crates/kube`\n\
                       `cluster/apply.rs` and `systems/` too.\n\
                       ### `crates/sim`\n\
                       Nothing about `runner.rs` here is kube's.\n";

    #[test]
    fn a_file_is_mapped_in_its_own_section_or_by_its_full_path() {
        let s = section(MAP, "crates/kube");
        assert!(s.contains("`typed.rs`") && s.contains("`cluster/apply.rs`"));
        assert!(!s.contains("runner.rs"), "the next section of the same level ends it");
        assert!(section(MAP, "crates/sim").contains("`runner.rs`"));
        assert!(MAP.contains("crates/apiserver/src/store.rs"));
    }

    /// The workspace itself: a made-up tree with one file named and one not.
    #[test]
    fn unmapped_names_what_the_map_leaves_out() {
        let root = std::env::temp_dir().join(format!("nodewarden-code-map-{}", std::process::id()));
        let src = root.join("crates/kube/src");
        std::fs::create_dir_all(src.join("cluster")).unwrap();
        std::fs::write(root.join("crates/kube/Cargo.toml"), "").unwrap();
        std::fs::create_dir_all(src.join("systems")).unwrap();
        for f in ["lib.rs", "typed.rs", "watch.rs", "cluster/apply.rs", "systems/mod.rs"] {
            std::fs::write(src.join(f), "").unwrap();
        }
        let missing = unmapped(&root, MAP);
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(missing, ["crates/kube/src/watch.rs"]);
    }
}
