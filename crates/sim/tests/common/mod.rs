//! What the scenario tests share: where the public conformance scenarios
//! are, and what a test says when they are not.

use std::io::Write;
use std::path::{Path, PathBuf};

/// `../shared/conformance` beside the repository, when it is there.
///
/// A clone on its own does not have it, and its tests then say so on the
/// terminal (written past the test harness's capture, which would hide a
/// passing test's output). CI always has the folder: with `CI` set, its
/// absence fails the test instead of passing it silently.
pub fn conformance_dir(root: &Path) -> Option<PathBuf> {
    let dir = root.join("../shared/conformance");
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(std::env::var_os("CI").is_none(), "{} is missing: CI always has it", dir.display());
    let _ = writeln!(
        std::io::stderr(),
        "note: skipped the shared conformance scenarios: {} is not present (they sit beside the repository)",
        dir.display()
    );
    None
}
