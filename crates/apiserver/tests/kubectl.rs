//! kubectl against the served cluster (skipped, with the reason printed,
//! where kubectl is not installed).

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::{OrFail, options, start};

fn kubectl_path() -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| PathBuf::from(d).join("kubectl")).find(|p| p.is_file())
}

/// Runs kubectl with the kubeconfig; (exit ok, stdout, stderr).
fn kubectl(bin: &PathBuf, kubeconfig: &PathBuf, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(bin)
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .args(["--request-timeout", "10s"])
        .output()
        .or_fail("run kubectl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_describe_taint_cordon_delete_and_watch() {
    let Some(bin) = kubectl_path() else {
        println!("skipped: kubectl is not on PATH");
        return;
    };
    let served = start(options(4, 5)).await;
    let kubeconfig = std::env::temp_dir().join(format!("nodewarden-kubectl-test-{}.kubeconfig", served.addr.port()));
    std::fs::write(&kubeconfig, served.kubeconfig()).or_fail("write kubeconfig");
    let addr = served.addr;
    let faults_check = tokio::task::spawn_blocking(move || {
        let k = |args: &[&str]| kubectl(&bin, &kubeconfig, args);
        let (ok, out, err) = k(&["get", "nodes"]);
        assert!(ok, "{err}");
        assert!(out.starts_with("NAME ") && out.contains("node-000003   Ready"), "{out}");
        let (ok, out, err) = k(&["get", "pods", "-A", "-o", "wide"]);
        assert!(ok, "{err}");
        assert!(out.contains("NOMINATED NODE") && out.contains("node-000002") && out.contains("kube-system"), "{out}");
        assert_eq!(out.lines().count(), 21, "{out}");
        let (ok, out, err) = k(&["describe", "node", "node-000001"]);
        assert!(ok, "{err}");
        assert!(out.contains("Non-terminated Pods:          (5 in total)") && out.contains("KubeletReady"), "{out}");
        let (ok, out, err) = k(&["get", "lease", "-n", "kube-node-lease"]);
        assert!(ok, "{err}");
        assert!(out.contains("HOLDER") && out.contains("node-000000   node-000000"), "{out}");
        let (ok, out, err) = k(&["get", "node", "node-000000", "-o", "json"]);
        assert!(ok, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).or_fail("json");
        assert_eq!(v["kind"], "Node");
        let (ok, out, err) = k(&["get", "pods", "-n", "apps", "-o", "yaml"]);
        assert!(ok && out.starts_with("apiVersion: v1\nitems:"), "{err}{out}");
        let (ok, _, err) = k(&["taint", "node", "node-000002", "example.com/x=y:NoSchedule"]);
        assert!(ok, "{err}");
        let (ok, _, err) = k(&["cordon", "node-000002"]);
        assert!(ok, "{err}");
        let (ok, _, err) = k(&["label", "node", "node-000002", "team=a"]);
        assert!(ok, "{err}");
        let (_, out, _) = k(&[
            "get",
            "node",
            "node-000002",
            "-o",
            "jsonpath={.spec.taints[0].key} {.spec.unschedulable} {.metadata.labels.team}",
        ]);
        assert_eq!(out, "example.com/x true a");
        let (_, out, _) = k(&["get", "node", "node-000002"]);
        assert!(out.contains("Ready,SchedulingDisabled"), "{out}");
        let (ok, _, err) = k(&["taint", "node", "node-000002", "example.com/x-"]);
        assert!(ok, "{err}");
        let (ok, out, err) = k(&["delete", "pod", "-n", "apps", "w000001-04"]);
        assert!(ok && out.contains("deleted"), "{err}");
        let (ok, _, err) = k(&["get", "pod", "-n", "apps", "w000001-04"]);
        assert!(!ok && err.contains("NotFound"), "{err}");
        // `get nodes -w` sees a status change another client makes.
        let watcher = Command::new(&bin)
            .env("KUBECONFIG", &kubeconfig)
            .args(["get", "nodes", "-w", "--request-timeout", "4s"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .or_fail("spawn watch");
        std::thread::sleep(Duration::from_millis(800));
        let patch = r#"{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Test","message":"by test","lastHeartbeatTime":"2020-01-01T00:00:00Z","lastTransitionTime":"2020-01-01T00:00:00Z"}]}}"#;
        let (ok, _, err) =
            k(&["patch", "node", "node-000003", "--subresource=status", "--type=strategic", "-p", patch]);
        assert!(ok, "{err}");
        let out = watcher.wait_with_output().or_fail("watch output");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("node-000003   NotReady"), "{text}");
        // Unknown resources get a clear answer.
        let (ok, _, err) = k(&["get", "deployments"]);
        assert!(!ok && err.contains("the server doesn't have a resource type"), "{err}");
        let _ = std::fs::remove_file(&kubeconfig);
        addr
    });
    tokio::time::timeout(Duration::from_secs(50), faults_check).await.or_fail("timed out").or_fail("kubectl checks");
    served.stop();
}
