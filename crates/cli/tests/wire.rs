//! `cargo xtask wire`'s harness (`nodewarden-wire`) against this build's
//! `nodewarden` binary: a scenario file played through real `sim --serve`
//! and `run` processes over HTTPS on a compressed clock, judged from the
//! served cluster's journal. One file whose expectation is wrong must fail
//! (the harness can fail), one with a SIGKILL restart in the middle of a
//! toleration countdown must pass.

use std::path::{Path, PathBuf};

use nodewarden_wire::{Options, run_file};

fn options(dir: &Path) -> Options {
    Options {
        binary: PathBuf::from(env!("CARGO_BIN_EXE_nodewarden")),
        rate: 20.0,
        parallel: 1,
        work_dir: dir.to_path_buf(),
        keep: false,
    }
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nodewarden-wire-test-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// One dead node whose pod tolerates `unreachable` for 30 s, two healthy
/// ones; `events` and `expect` as given.
fn scenario(events: &str, expect: &str) -> String {
    format!(
        "name: over the wire\n\
         config: {{node-monitor-period: 1s, node-monitor-grace-period: 10s, node-startup-grace-period: 10s}}\n\
         cluster: {{default-not-ready-toleration-seconds: 30, default-unreachable-toleration-seconds: 30}}\n\
         nodes:\n\
         - {{name: dead, zone: r/z, created: -1h, ready: 'True', heartbeat: 0s, transition: -1h, lease: 0s}}\n\
         - {{name: h1, zone: r/z, created: -1h, ready: 'True', heartbeat: 0s, transition: -1h, lease: 0s, kubelet: true}}\n\
         - {{name: h2, zone: r/z, created: -1h, ready: 'True', heartbeat: 0s, transition: -1h, lease: 0s, kubelet: true}}\n\
         pods:\n\
         - {{name: default/victim, node: dead}}\n\
         - {{name: default/bystander, node: h1}}\n\
         events: {events}\n\
         expect:\n{expect}"
    )
}

/// The countdown of 30 s from the taint at 11 s would delete the pod at
/// 41 s; the controller is SIGKILLed at 25 s and its successor, knowing
/// only the cluster, marks the node reachable and taints it again, so the
/// countdown runs from 25 s: the pod goes at 55 s, once (as `nodewarden
/// replay` of the same file says).
#[test]
fn a_sigkill_restart_mid_eviction_passes() {
    let d = dir("restart");
    let file = d.join("restart.yaml");
    let expect = "\
- {at: 12s, node: dead, ready: Unknown, has-taints: ['node.kubernetes.io/unreachable:NoExecute']}
- {at: 12s, pod: default/victim, ready: false}
- {at: 42s, pod: default/victim, deleted: false}
- {at: 53s, pod: default/victim, deleted: false}
- {at: 56s, pod: default/victim, deleted: true, conditions: {DisruptionTarget: 'True'}}
- {at: 56s, pod: default/bystander, deleted: false}
- {at: 56s, events-include: [{reason: TaintManagerEviction, object: default/victim, count: 1}]}
";
    std::fs::write(&file, scenario("[{at: 25s, restart-controller: true}]", expect)).expect("write");
    let report = run_file(&file, &options(&d), 0);
    assert!(report.ok, "{}", report.text());
    assert_eq!(report.controllers, 2, "the restart is a second process");
    assert_eq!(report.expectations, 7);
    let _ = std::fs::remove_dir_all(&d);
}

/// The pod cannot be gone at 20 s (its toleration runs to 41 s): the file
/// fails, and the report names the expectation and what was found.
#[test]
fn a_wrong_expectation_fails_over_the_wire() {
    let d = dir("wrong");
    let file = d.join("wrong.yaml");
    let expect = "\
- {at: 12s, node: dead, ready: Unknown}
- {at: 20s, pod: default/victim, deleted: true}
";
    std::fs::write(&file, scenario("[]", expect)).expect("write");
    let report = run_file(&file, &options(&d), 0);
    assert!(!report.ok, "{}", report.text());
    assert!(report.error.is_none(), "{}", report.text());
    assert_eq!(report.failures.len(), 1, "{}", report.text());
    let f = &report.failures[0];
    assert_eq!(f.expect, 2);
    assert_eq!(f.got, serde_json::json!({"deleted": false}), "{}", report.text());
    let text = report.text();
    assert!(text.starts_with("FAIL ") && text.contains("expect #2 at 20.000s (pod default/victim)"), "{text}");
    let _ = std::fs::remove_dir_all(&d);
}
