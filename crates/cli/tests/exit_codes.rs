//! The `nodewarden replay` contract, through the built binary: exit 0 when
//! every expectation holds, 1 when one fails, 2 for an invalid or unreadable
//! file; JSON lines on stdout, messages on stderr.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn scenario(name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nodewarden-cli-tests");
    std::fs::create_dir_all(&dir).expect("create the temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write the scenario");
    path
}

fn nodewarden(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewarden")).args(args).env_remove("RUST_LOG").output().expect("run nodewarden")
}

fn replay(path: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["replay", path.to_str().expect("utf-8 path")];
    args.extend_from_slice(extra);
    nodewarden(&args)
}

fn stdout_lines(o: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

const HEALTHY: &str = r#"
name: healthy kubelets
nodes:
- {name: a, zone: r/z, created: -1h, ready: "True", heartbeat: 0s, lease: 0s, kubelet: true}
- {name: b, zone: r/z, created: -1h, ready: "True", heartbeat: 0s, lease: 0s, kubelet: true}
pods:
- {name: default/p, node: a}
expect:
- {at: 120s, node: a, ready: "True", lacks-taints: ["node.kubernetes.io/unreachable:NoExecute"]}
- {at: 120s, pod: default/p, deleted: false}
"#;

#[test]
fn exit_0_when_every_expectation_holds() {
    let o = replay(&scenario("pass.yaml", HEALTHY), &[]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    let lines = stdout_lines(&o);
    let last = lines.last().expect("a summary line");
    assert_eq!(last["summary"], true);
    assert_eq!(last["passed"], 2);
    assert_eq!(last["failed"], 0);
    assert!(lines.iter().any(|l| l["expect"] == 1 && l["ok"] == true && l["at"] == "120s"));
}

#[test]
fn exit_1_when_an_expectation_fails() {
    let text =
        HEALTHY.replace("{at: 120s, pod: default/p, deleted: false}", "{at: 120s, pod: default/p, deleted: true}");
    let path = scenario("fail.yaml", &text);
    let o = replay(&path, &[]);
    assert_eq!(o.status.code(), Some(1), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    let lines = stdout_lines(&o);
    let failed = lines.iter().find(|l| l["ok"] == false).expect("a failed expectation");
    assert_eq!(failed["expect"], 2);
    assert_eq!(failed["want"]["deleted"], true);
    assert_eq!(failed["got"]["deleted"], false);

    // --quiet: only the failure and the summary.
    let o = replay(&path, &["--quiet"]);
    assert_eq!(o.status.code(), Some(1));
    let lines = stdout_lines(&o);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["expect"], 2);
    assert_eq!(lines[1]["summary"], true);
    assert_eq!(lines[1]["failed"], 1);
}

#[test]
fn exit_2_for_an_invalid_file_naming_field_and_line() {
    let path = scenario(
        "invalid.yaml",
        "nodes:\n- {name: a, ready: 'True'}\nevents:\n- at: 10s\n  set-ready:\n    node: a\n    status: Maybe\n",
    );
    let o = replay(&path, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("error: invalid scenario "), "{err}");
    assert!(err.contains("events[0].set-ready.status (line 7, column 13): unknown variant `Maybe`"), "{err}");

    let o = replay(&scenario("unknown-node.yaml", "events: [{at: 1s, renew-lease: [ghost]}]\n"), &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("events[0].renew-lease[0]"));
}

#[test]
fn exit_2_for_an_unreadable_file() {
    let o = nodewarden(&["replay", "/nonexistent/scenario.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot read /nonexistent/scenario.yaml"), "{err}");
}

#[test]
fn exit_2_for_bad_usage() {
    assert_eq!(nodewarden(&["replay"]).status.code(), Some(2));
    assert_eq!(nodewarden(&["frobnicate"]).status.code(), Some(2));
    assert_eq!(nodewarden(&["--help"]).status.code(), Some(0));
}

#[test]
fn json_scenarios_work_too() {
    let path = scenario(
        "pass.json",
        r#"{"nodes": [{"name": "a", "ready": "True", "heartbeat": "0s", "lease": "0s", "kubelet": true}],
            "expect": [{"at": "30s", "node": "a", "ready": "True"}]}"#,
    );
    let o = replay(&path, &[]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&o.stderr));
}

/// A badly indented line: the message points at the line, with the
/// enclosing field when there is one, and never at a `?`.
#[test]
fn exit_2_for_bad_indentation_without_a_question_mark() {
    let text = "name: indented\nnodes:\n- {name: a, ready: 'True'}\nexpect:\n- at: 10s\n  node: a\n    ready: 'True'\n";
    let o = replay(&scenario("indented.yaml", text), &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("indented.yaml: expect[0] (line 7, column 10): "), "{err}");
    let text = "name: indented\nnodes:\n  - {name: a}\n - {name: b}\n";
    let o = replay(&scenario("indented-root.yaml", text), &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("indented-root.yaml: line "), "{err}");
    assert!(!err.contains('?'), "{err}");
}
