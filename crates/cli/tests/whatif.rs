//! `nodewarden sim --from-snapshot` through the built binary: the report,
//! `--json`, `--compare`, `--report`, and exit code 2 for input that is
//! not a snapshot or faults aimed at nothing.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::{Value, json};

fn dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nodewarden-whatif-cli");
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// Writes `name` whole, atomically: the tests run in parallel and several
/// write the same snapshot, so one must never read another's half-written
/// file (a plain write truncates it first).
fn write(name: &str, text: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let p = dir().join(name);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir().join(format!(".{name}.{}.{n}", std::process::id()));
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, &p).expect("rename into place");
    p
}

fn nodewarden(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewarden")).args(args).env_remove("RUST_LOG").output().expect("run nodewarden")
}

/// Two zones of two nodes; Deployment `web` (2 replicas) all in zone-a,
/// with a budget of minAvailable 1.
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
    for (i, n) in ["a1", "a2"].iter().enumerate() {
        items.push(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("web-6f7-{i}"), "namespace": "prod", "uid": format!("u{i}"),
                         "labels": {"app": "web", "pod-template-hash": "6f7"},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "web-6f7", "controller": true}]},
            "spec": {"nodeName": n, "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}));
    }
    items.push(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "prod"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}));
    write("snapshot.json", &json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string())
}

#[test]
fn a_zone_failure_is_reported_per_workload_then_per_zone() {
    let snap = snapshot();
    let o = nodewarden(&[
        "sim",
        "--from-snapshot",
        snap.to_str().expect("utf-8"),
        "--fail-zone",
        "zone-a",
        "--duration",
        "15m",
        "-q",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("Lose EVERY ready replica (1):\n    Deployment prod/web: 2 replica(s) in /zone-a"), "{out}");
    assert!(out.contains("PodDisruptionBudgets breached (1 of 1):\n    prod/web (minAvailable 1;"), "{out}");
    assert!(out.contains("What the controller did, per zone"), "{out}");
}

#[test]
fn json_compare_and_html() {
    let snap = snapshot();
    let fast = write("fast.yaml", "default-unreachable-toleration-seconds: 60\n");
    let html = dir().join("whatif.html");
    let o = nodewarden(&[
        "sim",
        "--from-snapshot",
        snap.to_str().expect("utf-8"),
        "--fail-nodes",
        "a1,a2",
        "--duration",
        "15m",
        "--compare",
        fast.to_str().expect("utf-8"),
        "--json",
        "--report",
        html.to_str().expect("utf-8"),
        "-q",
        // The instant world, so the two runs differ by exactly the
        // toleration (with latency, by that within a few hundred ms).
        "--api-latency",
        "none",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let when = |side: &str| v[side]["workloads"]["workloads"][0]["all_evicted_at"].as_f64().expect("evicted");
    // Same failure; 60 s tolerations evict 240 s sooner.
    assert!((when("a") - when("b") - 240.0).abs() < 1e-6, "{} vs {}", when("a"), when("b"));
    assert_eq!(v["snapshot"]["nodes"], 4);
    assert!(v["a"]["sim"]["zones"].is_array() || v["a"]["sim"]["zones"].is_object(), "{}", v["a"]["sim"]);
    let page = std::fs::read_to_string(&html).expect("html");
    assert!(page.contains("Workloads (default flags)") && page.contains("fast.yaml"), "{page}");
    let o = nodewarden(&[
        "sim",
        "--from-snapshot",
        snap.to_str().expect("utf-8"),
        "--fail-zone",
        "zone-b",
        "--duration",
        "10m",
        "--compare",
        fast.to_str().expect("utf-8"),
        "-q",
    ]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("\n\nSide by side: A = default flags, B = "), "{out}");
}

/// A snapshot directory with the API server's `/version` body in it plays
/// that kube-controller-manager's defaults: 1.31's 40 s grace taints, so
/// evicts, 10 s sooner than 1.33's 50 s; `--kube-version` overrides it,
/// and the report says which defaults it played and why.
#[test]
fn the_snapshots_version_picks_the_defaults_played() {
    let dir = dir().join(format!("versioned-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::copy(snapshot(), dir.join("snapshot.json")).expect("copy");
    std::fs::write(dir.join("version.json"), r#"{"major": "1", "minor": "31+", "gitVersion": "v1.31.4-gke.1000"}"#)
        .expect("write");
    let play = |extra: &[&str]| {
        let mut args = vec!["sim", "--from-snapshot", dir.to_str().expect("utf-8"), "--fail-zone", "zone-a"];
        args.extend(["--duration", "15m", "--api-latency", "none", "--json", "-q"]);
        args.extend(extra);
        let o = nodewarden(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
        let evicted = v["a"]["workloads"]["workloads"][0]["all_evicted_at"].as_f64().expect("evicted");
        (v["defaults"].clone(), evicted)
    };
    let (own, at_31) = play(&[]);
    assert_eq!(own, json!({"kube_version": "1.31", "from": "snapshot", "node_monitor_grace_period": "40s"}));
    let (flag, at_33) = play(&["--kube-version", "v1.33.2"]);
    assert_eq!(flag, json!({"kube_version": "1.33", "from": "flag", "node_monitor_grace_period": "50s"}));
    assert!((at_33 - at_31 - 10.0).abs() < 1e-6, "{at_31} vs {at_33}");
    // A config file changes only what it names: the grace stays 1.33's
    // (the scenario format's default, under the file, would be 40 s).
    let rate = write("rate.yaml", "secondary-node-eviction-rate: 0.02\n");
    let (_, with_file) = play(&["--kube-version", "1.33", "--config", rate.to_str().expect("utf-8")]);
    assert!((with_file - at_33).abs() < 1e-6, "{with_file} vs {at_33}");
    // The text report opens with it.
    let o = nodewarden(&["sim", "--from-snapshot", dir.to_str().expect("utf-8"), "--fail-zone", "zone-a", "-q"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.starts_with(
            "Defaults: kube-controller-manager 1.31's defaults (the snapshot's /version): node-monitor-grace-period 40s."
        ),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_exits_2_with_a_message() {
    let snap = snapshot();
    let s = snap.to_str().expect("utf-8");
    let garbage = write("garbage.json", "{\"not\": \"kubernetes\"}");
    let text = write("notes.txt", "these are my notes\n");
    for (args, message) in [
        (vec!["sim", "--from-snapshot", garbage.to_str().expect("utf-8")], "not Kubernetes JSON or YAML"),
        (vec!["sim", "--from-snapshot", text.to_str().expect("utf-8")], "not Kubernetes JSON or YAML"),
        (vec!["sim", "--from-snapshot", "/nonexistent/snap.json"], "cannot read"),
        (
            vec!["sim", "--from-snapshot", s, "--fail-zone", "zone-x"],
            "no node in zone \"zone-x\"; the snapshot's zones: /zone-a, /zone-b",
        ),
        (vec!["sim", "--from-snapshot", s, "--fail-nodes-selector", "nolabel"], "LABEL=VALUE"),
        (vec!["sim", "--from-snapshot", s, "--fail-mode", "melt"], "--fail-mode"),
        (vec!["sim", "--fail-zone", "zone-a"], "<--from-snapshot <FILE|DIR>|--from-cluster>"),
        (vec!["sim", "--from-snapshot", s, "--kube-version", "latest"], "\"latest\" is not a Kubernetes version"),
    ] {
        let o = nodewarden(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(message), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

fn kubectl_path() -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| PathBuf::from(d).join("kubectl")).find(|p| p.is_file())
}

/// The README's loop: `sim --serve`, a kubectl snapshot of it, what-if on
/// the snapshot. The served fleet's pods carry their controllers' owners
/// and labels, so the report groups them into Deployments (through their
/// ReplicaSets), a StatefulSet and the DaemonSets, not one bare pod each.
#[test]
fn what_if_on_a_snapshot_of_the_served_fleet_groups_pods_into_workloads() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let Some(kubectl) = kubectl_path() else {
        println!("skipped: kubectl is not on PATH");
        return;
    };
    let kubeconfig = dir().join(format!("served-{}.kubeconfig", std::process::id()));
    let mut server = Command::new(env!("CARGO_BIN_EXE_nodewarden"))
        .args(["sim", "--serve", "127.0.0.1:0", "--nodes", "12", "--zones", "3", "--pods-per-node", "8", "--quiet"])
        .arg("--write-kubeconfig")
        .arg(&kubeconfig)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sim --serve");
    let mut line = String::new();
    if let Some(out) = server.stdout.take() {
        let _ = BufReader::new(out).read_line(&mut line);
    }
    let snap = Command::new(kubectl)
        .env("KUBECONFIG", &kubeconfig)
        .args(["get", "nodes,pods,leases,daemonsets,poddisruptionbudgets", "-A", "-o", "json"])
        .args(["--request-timeout", "20s"])
        .output();
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_file(&kubeconfig);
    let snap = snap.expect("run kubectl");
    assert!(snap.status.success(), "{line}{}", String::from_utf8_lossy(&snap.stderr));
    let file = write(&format!("served-{}.json", std::process::id()), &String::from_utf8_lossy(&snap.stdout));
    let o = nodewarden(&[
        "sim",
        "--from-snapshot",
        file.to_str().expect("utf-8"),
        "--fail-zone",
        "zone-a",
        "--duration",
        "15m",
        "--json",
        "-q",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let report = &v["a"]["workloads"];
    let affected = report["workloads"].as_array().expect("workloads");
    let kinds: Vec<(&str, &str, u64)> = affected
        .iter()
        .map(|w| {
            (w["kind"].as_str().unwrap_or(""), w["name"].as_str().unwrap_or(""), w["replicas"].as_u64().unwrap_or(0))
        })
        .collect();
    // 12 nodes of 6 workload pods: ten workloads of 3 to 11 replicas (the
    // last of 9), plus the two DaemonSets.
    assert_eq!(affected.len() as u64 + report["unaffected_workloads"].as_u64().unwrap_or(0), 12, "{kinds:?}");
    assert!(kinds.iter().all(|(k, _, _)| ["Deployment", "StatefulSet", "DaemonSet"].contains(k)), "{kinds:?}");
    assert!(kinds.contains(&("StatefulSet", "db-0001", 4)), "{kinds:?}");
    assert!(kinds.contains(&("Deployment", "svc-0000", 3)), "{kinds:?}");
    assert!(kinds.contains(&("DaemonSet", "ds0", 12)), "{kinds:?}");
    // Some lose every replica (all in zone-a), some keep replicas elsewhere.
    let lost = |w: &Value| w["lost_all_ready"].as_bool() == Some(true);
    assert!(affected.iter().any(lost), "{kinds:?}");
    assert!(
        affected.iter().any(|w| !lost(w) && w["kind"] != "DaemonSet" && w["on_failed_nodes"].as_u64() > Some(0)),
        "{kinds:?}"
    );
}
