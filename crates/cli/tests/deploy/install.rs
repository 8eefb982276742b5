//! docs/operations.md's Install section, run as written: its ```sh blocks
//! go to bash unchanged, in a copy of the checkout's deploy/ and
//! Dockerfile, with stand-ins on PATH for what needs a registry or a
//! cluster:
//!
//! - `docker build`: checks that the build context holds the Dockerfile
//!   and builds nothing (no Docker engine is assumed); `docker push`: only
//!   recorded.
//! - `kubectl kustomize`: the real kubectl. `kubectl apply -k DIR`: the
//!   real `kubectl kustomize DIR`, its output kept as what would have been
//!   applied. Any other kubectl command (`rollout status`, ...): recorded
//!   only.
//! - `helm`: recorded only; the test renders the chart with the recorded
//!   `--set` values through helm.rs's renderer.
//!
//! Every command the stand-ins see is recorded, one line each, fields
//! separated by tabs.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Map, Value, json};

/// The Install section's ```sh blocks, in order.
pub fn install_blocks() -> Vec<String> {
    let ops = std::fs::read_to_string(super::root().join("docs/operations.md")).expect("docs/operations.md");
    let start = ops.find("\n## Install\n").expect("docs/operations.md has an Install section") + 1;
    let section = &ops[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let mut blocks = Vec::new();
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        if line == "```sh" {
            let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
            blocks.push(body.join("\n") + "\n");
        }
    }
    blocks
}

/// The one block whose first line starts with `heading`.
pub fn block(blocks: &[String], heading: &str) -> String {
    let found: Vec<&String> = blocks.iter().filter(|b| b.starts_with(heading)).collect();
    assert_eq!(found.len(), 1, "docs/operations.md's Install section: expected one ```sh block starting {heading:?}");
    found[0].clone()
}

/// One command a stand-in saw: the program and its arguments.
pub type Call = Vec<String>;

/// What running the blocks gave.
pub struct Run {
    /// The commands the stand-ins saw, in order.
    pub calls: Vec<Call>,
    /// The blocks' standard output.
    pub stdout: String,
    /// `kubectl kustomize` of each `kubectl apply -k` directory, in order.
    pub applied: Vec<String>,
}

fn stand_in(dir: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    let script = format!(
        "#!/bin/bash\n\
         # Stand-in for {name} (crates/cli/tests/deploy/install.rs).\n\
         {{ printf '%s' {name}; printf '\\t%s' \"$@\"; printf '\\n'; }} >> \"$NW_CALLS\"\n\
         {body}"
    );
    std::fs::write(&path, script).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Runs `script` with bash (`-euo pipefail`) in `work`, with the stand-ins
/// first on PATH. `None` (with a SKIPPED line) when kubectl or bash is not
/// installed.
pub fn run(work: &Path, script: &str) -> Option<Run> {
    let Some(kubectl) = super::which("kubectl") else {
        eprintln!("SKIPPED: kubectl is not installed, so the Install section's commands were not run");
        return None;
    };
    let Some(bash) = super::which("bash") else {
        eprintln!("SKIPPED: bash is not installed, so the Install section's commands were not run");
        return None;
    };
    let bin = work.join(".stand-ins");
    let applied = work.join(".applied");
    std::fs::create_dir_all(&bin).expect("stand-in dir");
    std::fs::create_dir_all(&applied).expect("applied dir");
    let kubectl = kubectl.display().to_string();
    stand_in(
        &bin,
        "docker",
        r#"case "$1" in
  build)
    context="${@: -1}"
    if [ ! -f "$context/Dockerfile" ]; then
      echo "stand-in docker: no Dockerfile in the build context $context" >&2; exit 1
    fi
    echo "stand-in docker: would build from $context/Dockerfile (nothing built)" >&2 ;;
  push) echo "stand-in docker: would push $2 (nothing pushed)" >&2 ;;
  *) echo "stand-in docker: docker $1 is not stood in for" >&2; exit 1 ;;
esac
"#,
    );
    stand_in(&bin, "helm", "echo \"stand-in helm: recorded, not run: helm $*\" >&2\n");
    stand_in(
        &bin,
        "kubectl",
        &format!(
            r#"case "$1" in
  kustomize) exec {kubectl:?} "$@" ;;
  apply)
    if [ "$2" != -k ] || [ $# -ne 3 ]; then echo "stand-in kubectl: only apply -k DIR" >&2; exit 1; fi
    n=$(ls "$NW_APPLIED" | wc -l)
    {kubectl:?} kustomize "$3" > "$NW_APPLIED/$n.yaml"
    echo "stand-in kubectl: built $3 (kubectl kustomize), applied nothing" >&2 ;;
  *) echo "stand-in kubectl: needs a cluster; recorded, not run: kubectl $*" >&2 ;;
esac
"#
        ),
    );
    let calls = work.join(".calls");
    let path = std::env::join_paths(
        std::iter::once(bin.clone()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .expect("PATH");
    let out = Command::new(bash)
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(work)
        .env("PATH", path)
        .env("NW_CALLS", &calls)
        .env("NW_APPLIED", &applied)
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Install commands failed ({}):\n--- script\n{script}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    eprintln!("{stderr}");
    let calls = std::fs::read_to_string(&calls)
        .unwrap_or_default()
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect();
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&applied).expect("applied").map(|e| e.expect("entry").path()).collect();
    files.sort_by_key(|p| p.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse::<u32>().ok()));
    let applied = files.iter().map(|f| std::fs::read_to_string(f).expect("applied yaml")).collect();
    Some(Run { calls, stdout, applied })
}

/// Helm's `--set a.b=c,d=e` into a values tree, as Helm reads it: `true`,
/// `false` and integers typed, anything else a string (no escapes, no
/// lists: the docs use neither).
pub fn helm_set(values: &mut Value, arg: &str) {
    for pair in arg.split(',') {
        let (key, raw) = pair.split_once('=').unwrap_or_else(|| panic!("--set {pair}: no ="));
        let value = match raw {
            "true" => json!(true),
            "false" => json!(false),
            _ => raw.parse::<i64>().map_or_else(|_| json!(raw), |n| json!(n)),
        };
        let mut at = &mut *values;
        let parts: Vec<&str> = key.split('.').collect();
        for p in &parts[..parts.len() - 1] {
            if !at.is_object() {
                *at = Value::Object(Map::new());
            }
            at = at.as_object_mut().expect("object").entry(p.to_string()).or_insert_with(|| json!({}));
        }
        if !at.is_object() {
            *at = Value::Object(Map::new());
        }
        at.as_object_mut().expect("object").insert(parts[parts.len() - 1].to_string(), value);
    }
}

/// A recorded `helm install|upgrade NAME CHART ...`: the release name,
/// the chart path, the namespace (`-n`/`--namespace`) and the `--set`
/// values. Any other flag is refused, so a new one in the docs must be
/// taught here.
pub fn helm_call(call: &[String]) -> (String, String, String, Value) {
    assert_eq!(call[0], "helm");
    assert!(["install", "upgrade"].contains(&call[1].as_str()), "helm {}: not install or upgrade", call[1]);
    let (mut positional, mut namespace, mut values) = (Vec::new(), String::from("default"), json!({}));
    let mut args = call[2..].iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "-n" | "--namespace" => namespace = args.next().expect("a namespace").clone(),
            "--set" => helm_set(&mut values, args.next().expect("a --set value")),
            "--reuse-values" => {}
            f if f.starts_with('-') => panic!("helm flag {f} is not understood by this test"),
            p => positional.push(p.to_string()),
        }
    }
    assert_eq!(positional.len(), 2, "helm {}: expected NAME CHART, got {positional:?}", call[1]);
    (positional[0].clone(), positional[1].clone(), namespace, values)
}
