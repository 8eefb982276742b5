//! `nodewarden sim --from-snapshot ... --compare B.yaml` through the built
//! binary: when B evicts the same pods sooner, the table says so in its
//! timing rows, and the list names only the workloads whose fate or
//! timing differs.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::{Value, json};

fn dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nodewarden-compare-cli");
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn write(name: &str, text: &str) -> PathBuf {
    let p = dir().join(name);
    std::fs::write(&p, text).expect("write");
    p
}

fn nodewarden(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewarden")).args(args).env_remove("RUST_LOG").output().expect("run nodewarden")
}

fn pod(name: &str, node: &str, owner: &str, seconds: u32) -> Value {
    let toleration =
        |key: &str| json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds});
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "prod", "uid": name,
                     "labels": {"app": owner, "pod-template-hash": "6f7"},
                     "ownerReferences": [{"kind": "ReplicaSet", "name": format!("{owner}-6f7"), "controller": true}]},
        "spec": {"nodeName": node, "tolerations": [
            toleration("node.kubernetes.io/not-ready"), toleration("node.kubernetes.io/unreachable")]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// Two zones of two nodes. In zone-a: Deployment `web` (two replicas with
/// the 300 s tolerations admission adds, which B's 60 s default rewrites)
/// and Deployment `steady` (one replica tolerating 30 s of its own, which
/// no default touches: it goes at the same time under both).
fn snapshot() -> PathBuf {
    let mut items = Vec::new();
    for (n, z) in [("a1", "zone-a"), ("a2", "zone-a"), ("b1", "zone-b"), ("b2", "zone-b")] {
        items.push(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": n, "labels": {"topology.kubernetes.io/zone": z}},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]}}));
        items.push(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": n, "namespace": "kube-node-lease"},
            "spec": {"renewTime": "2026-01-01T00:00:02.000000Z"}}));
    }
    items.push(pod("web-6f7-0", "a1", "web", 300));
    items.push(pod("web-6f7-1", "a2", "web", 300));
    items.push(pod("steady-6f7-0", "a1", "steady", 30));
    items.push(pod("other-6f7-0", "b1", "other", 300));
    write("snapshot.json", &json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string())
}

fn run(extra: &[&str]) -> Output {
    let snap = snapshot();
    let fast = write("fast.yaml", "default-unreachable-toleration-seconds: 60\n");
    let mut args = vec![
        "sim",
        "--from-snapshot",
        snap.to_str().expect("utf-8"),
        "--fail-zone",
        "zone-a",
        "--duration",
        "20m",
        "--compare",
        fast.to_str().expect("utf-8"),
        "-q",
    ];
    args.extend_from_slice(extra);
    let o = nodewarden(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

/// The table's row `label`: (A, B, B - A).
fn row<'a>(out: &'a str, label: &str) -> (&'a str, &'a str, &'a str) {
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no row {label:?} in:\n{out}"));
    let cells: Vec<&str> = line[2 + label.len()..].split_whitespace().collect();
    match cells[..] {
        [a, b, d] => (a, b, d),
        _ => panic!("row {label:?} is not A, B, B - A: {line:?}"),
    }
}

#[test]
fn the_table_shows_b_evicting_sooner_and_the_list_only_what_differs() {
    let o = run(&[]);
    let out = String::from_utf8_lossy(&o.stdout);
    let side = out.split("\n== A:").next().unwrap_or_default();
    // The same pods go, and the same workloads lose every replica...
    assert_eq!(row(side, "pods evicted"), ("3", "3", "="), "{side}");
    assert_eq!(row(side, "workloads that lose every ready replica"), ("2", "2", "="), "{side}");
    // ... but B's 60 s tolerations take web's four minutes sooner.
    let (a, b, d) = row(side, "last eviction");
    assert_ne!(a, b, "{side}");
    assert_eq!(d, "-4m00s", "{side}");
    assert_eq!(row(side, "a workload's last eviction, latest").2, "-4m00s", "{side}");
    // steady's own 30 s first: the first eviction is the same.
    assert_eq!(row(side, "first eviction").2, "=", "{side}");
    assert!(side.contains("time without a ready replica, median"), "{side}");
    let checks = side.lines().find(|l| l.trim_start().starts_with("safety checks held")).unwrap_or_default();
    assert!(checks.contains("12 of 12     12 of 12") && checks.ends_with(" ="), "{side}");
    // Only web fares differently; steady, which loses its only replica
    // alike under both, is not listed.
    assert!(side.contains("Workloads that fare differently (1):"), "{side}");
    assert!(side.contains("Deployment prod/web: first and last eviction 4m00s sooner under B"), "{side}");
    assert!(!side.contains("steady"), "{side}");
    // A's report follows; B's full report is not repeated.
    assert!(out.contains("== A: default flags ==\nWhat it does to your workloads"), "{out}");
    assert!(out.contains("B's full report: run again with --config"), "{out}");
    assert_eq!(out.matches("What the controller did, per zone").count(), 1, "{out}");
}

#[test]
fn json_has_the_comparison() {
    let o = run(&["--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let rows = v["compare"]["rows"].as_array().expect("rows");
    let last = rows.iter().find(|r| r["what"] == "last eviction").expect("last eviction row");
    assert_eq!(last["differs"], true);
    let (a, b) = (last["a"].as_f64().expect("a"), last["b"].as_f64().expect("b"));
    assert!((a - b - 240.0).abs() < 1.0, "{last}");
    let listed: Vec<&str> = v["compare"]["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .filter_map(|w| w["workload"].as_str())
        .collect();
    assert_eq!(listed, ["Deployment prod/web"]);
}
