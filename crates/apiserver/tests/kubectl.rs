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

/// Splits a line of kubectl's table into its cells (columns are padded
/// with at least three spaces; a cell has at most single spaces inside).
fn cells(line: &str) -> Vec<String> {
    line.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(str::to_string).collect()
}

/// The row of `name` in kubectl's output.
fn row_of(out: &str, name: &str) -> Vec<String> {
    out.lines().map(cells).find(|c| c.first().map(String::as_str) == Some(name)).unwrap_or_default()
}

/// The node and pod tables as kubectl prints them: upstream's headers,
/// `-o wide` included, and upstream's words (NotReady for a Ready that is
/// Unknown, Unknown only without a Ready condition, roles from both role
/// labels, `<unknown>` for what a node did not report, Terminating, and
/// Unknown for a deleted pod of a lost node).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_tables_have_upstreams_columns_and_status_words() {
    let Some(bin) = kubectl_path() else {
        println!("skipped: kubectl is not on PATH");
        return;
    };
    let served = start(options(2, 5)).await;
    let kubeconfig = std::env::temp_dir().join(format!("nodewarden-kubectl-tables-{}.kubeconfig", served.addr.port()));
    std::fs::write(&kubeconfig, served.kubeconfig()).or_fail("write kubeconfig");
    // Nodes without kubelets (none is simulated for a node a client
    // creates), in the states a controller and an operator leave them.
    let manifest = std::env::temp_dir().join(format!("nodewarden-kubectl-tables-{}.json", served.addr.port()));
    let node = |name: &str, labels: serde_json::Value, ready: Option<&str>, cordoned: bool| {
        let conditions: Vec<serde_json::Value> = ready
            .map(|r| {
                serde_json::json!({"type": "Ready", "status": r, "reason": "NodeStatusUnknown",
                "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"})
            })
            .into_iter()
            .collect();
        serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {"unschedulable": cordoned},
            "status": {"conditions": conditions, "nodeInfo": {"kubeletVersion": "v1.33.0"}}})
    };
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "held", "namespace": "apps", "finalizers": ["example.com/hold"]},
        "spec": {"nodeName": "node-000000", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}});
    // One object a line: kubectl reads a stream of JSON objects as it
    // reads a multi-document YAML file.
    let objects = [
        node("lost", serde_json::json!({"node-role.kubernetes.io/control-plane": ""}), Some("Unknown"), false),
        node(
            "down",
            serde_json::json!({"kubernetes.io/role": "worker", "node-role.kubernetes.io/infra": ""}),
            Some("False"),
            true,
        ),
        node("fresh", serde_json::json!({}), None, false),
        pod,
    ];
    let text: String = objects.iter().map(|o| format!("{o}\n")).collect();
    std::fs::write(&manifest, text).or_fail("write manifest");
    let check = tokio::task::spawn_blocking(move || {
        let k = |args: &[&str]| kubectl(&bin, &kubeconfig, args);
        let (ok, _, err) = k(&["create", "-f", &manifest.to_string_lossy()]);
        assert!(ok, "{err}");

        let (ok, out, err) = k(&["get", "nodes", "-o", "wide"]);
        assert!(ok, "{err}");
        let header = out.lines().next().map(cells).unwrap_or_default();
        assert_eq!(
            header,
            [
                "NAME",
                "STATUS",
                "ROLES",
                "AGE",
                "VERSION",
                "INTERNAL-IP",
                "EXTERNAL-IP",
                "OS-IMAGE",
                "KERNEL-VERSION",
                "CONTAINER-RUNTIME"
            ],
            "{out}"
        );
        let lost = row_of(&out, "lost");
        assert_eq!(
            (&lost[1..3], &lost[4..]),
            (
                &["NotReady".to_string(), "control-plane".to_string()][..],
                &["v1.33.0", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"].map(String::from)[..]
            ),
            "{out}"
        );
        assert_eq!(row_of(&out, "down")[1..3], ["NotReady,SchedulingDisabled", "infra,worker"], "{out}");
        assert_eq!(row_of(&out, "fresh")[1..3], ["Unknown", "<none>"], "{out}");
        let fleet = row_of(&out, "node-000001");
        assert_eq!(fleet[1], "Ready", "{out}");
        assert_eq!(
            fleet[5..],
            ["10.64.0.1", "<none>", "nodewarden simulated node", "6.8.0-nodewarden", "containerd://2.0.0"]
        );
        let (ok, out, err) = k(&["get", "nodes"]);
        assert!(ok, "{err}");
        assert_eq!(out.lines().next().map(cells).unwrap_or_default(), ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]);

        let (ok, _, err) = k(&["delete", "pod", "-n", "apps", "held", "--wait=false"]);
        assert!(ok, "{err}");
        let (ok, out, err) = k(&["get", "pods", "-n", "apps", "-o", "wide"]);
        assert!(ok, "{err}");
        let header = out.lines().next().map(cells).unwrap_or_default();
        assert_eq!(
            header,
            ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES"],
            "{out}"
        );
        let running = row_of(&out, "w000001-04");
        assert_eq!(
            (&running[1..4], &running[6..]),
            (
                &["1/1", "Running", "0"].map(String::from)[..],
                &["node-000001", "<none>", "<none>"].map(String::from)[..]
            ),
            "{out}"
        );
        assert_eq!(row_of(&out, "held")[2], "Terminating", "{out}");
        let (ok, _, err) = k(&[
            "patch",
            "pod",
            "-n",
            "apps",
            "held",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"reason":"NodeLost"}}"#,
        ]);
        assert!(ok, "{err}");
        let (_, out, _) = k(&["get", "pod", "-n", "apps", "held"]);
        assert_eq!(row_of(&out, "held")[2], "Unknown", "{out}");
        let (ok, out, err) = k(&["get", "pods", "-n", "apps"]);
        assert!(ok, "{err}");
        assert_eq!(out.lines().next().map(cells).unwrap_or_default(), ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
        let _ = std::fs::remove_file(&kubeconfig);
        let _ = std::fs::remove_file(&manifest);
    });
    tokio::time::timeout(Duration::from_secs(50), check).await.or_fail("timed out").or_fail("kubectl checks");
    served.stop();
}

/// A `kind: List`, as `kubectl get -o yaml` writes several objects.
fn list_of(items: &[serde_json::Value]) -> String {
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

/// `kubectl create|apply|replace -f` of a `kind: List` with the default
/// strict validation. kubectl validates a List on the client against
/// `/openapi/v2`, which it asks for in protobuf only; a server that cannot
/// answer that refuses every List ("unable to respond with a content type
/// that the client supports") though it takes the same objects as
/// separate documents. Server-side apply, not served, gets kubectl's
/// "not available" answer (a 415), and a List with an unknown field is
/// still refused by the server's own validation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_apply_and_replace_a_list() {
    let Some(bin) = kubectl_path() else {
        println!("skipped: kubectl is not on PATH");
        return;
    };
    let served = start(options(2, 2)).await;
    let port = served.addr.port();
    let dir = std::env::temp_dir();
    let kubeconfig = dir.join(format!("nodewarden-kubectl-list-{port}.kubeconfig"));
    std::fs::write(&kubeconfig, served.kubeconfig()).or_fail("write kubeconfig");
    // Pods without a node stay Pending and nothing else writes them, so
    // a listing replaced later is still current.
    let pod = |name: &str| {
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "lists"},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})
    };
    let lease = |name: &str, team: &str| {
        serde_json::json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "lists", "labels": {"team": team}},
            "spec": {"holderIdentity": "someone"}})
    };
    let namespace = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lists"}});
    let file = |name: &str, text: String| {
        let path = dir.join(format!("nodewarden-kubectl-list-{port}-{name}.yaml"));
        std::fs::write(&path, text).or_fail("write manifest");
        path
    };
    let created = file("created", list_of(&[namespace, pod("p1"), pod("p2"), lease("l1", "a")]));
    let applied = file("applied", list_of(&[pod("p3"), lease("l2", "a")]));
    let reapplied = file("reapplied", list_of(&[pod("p3"), lease("l2", "b")]));
    let mut bad_pod = pod("p4");
    bad_pod["spec"]["containers"][0]["bogus"] = serde_json::json!(1);
    let bad = file("bad", list_of(&[bad_pod]));
    let listing = dir.join(format!("nodewarden-kubectl-list-{port}-listing.yaml"));
    let files = [created.clone(), applied.clone(), reapplied.clone(), bad.clone(), listing.clone()];
    let check = tokio::task::spawn_blocking(move || {
        let k = |args: &[&str]| kubectl(&bin, &kubeconfig, args);
        let path = |p: &PathBuf| p.to_string_lossy().into_owned();
        let (ok, out, err) = k(&["create", "-f", &path(&created)]);
        assert!(ok, "{err}");
        for line in
            ["namespace/lists created", "pod/p1 created", "pod/p2 created", "lease.coordination.k8s.io/l1 created"]
        {
            assert!(out.contains(line), "{out}");
        }
        let (ok, out, err) = k(&["apply", "-f", &path(&applied)]);
        assert!(ok, "{err}");
        assert!(out.contains("pod/p3 created") && out.contains("lease.coordination.k8s.io/l2 created"), "{out}");
        let (ok, out, err) = k(&["apply", "-f", &path(&reapplied)]);
        assert!(ok, "{err}");
        assert!(out.contains("pod/p3 unchanged") && out.contains("lease.coordination.k8s.io/l2 configured"), "{out}");
        let (_, out, _) = k(&["get", "lease", "-n", "lists", "l2", "-o", "jsonpath={.metadata.labels.team}"]);
        assert_eq!(out, "b");

        // `get -o yaml` of several objects is a List; replace takes it back.
        let (ok, out, err) = k(&["get", "pods", "-n", "lists", "-o", "yaml"]);
        assert!(ok && out.starts_with("apiVersion: v1\nitems:") && out.contains("kind: List"), "{err}{out}");
        std::fs::write(&listing, out.replace("image: registry.k8s.io/pause:3.10", "image: registry.k8s.io/pause:3.9"))
            .or_fail("write listing");
        let (ok, out, err) = k(&["replace", "-f", &path(&listing)]);
        assert!(ok, "{err}");
        assert!(["p1", "p2", "p3"].iter().all(|p| out.contains(&format!("pod/{p} replaced"))), "{out}");
        let (_, out, _) = k(&["get", "pods", "-n", "lists", "-o", "jsonpath={.items[*].spec.containers[0].image}"]);
        assert_eq!(out, ["registry.k8s.io/pause:3.9"; 3].join(" "));

        // Server-side apply is not served: kubectl says so for each item,
        // from the server's 415, after validating the List.
        let (ok, _, err) = k(&["apply", "--server-side", "-f", &path(&reapplied)]);
        assert!(!ok && err.contains("Server-side apply not available on the server"), "{err}");
        assert!(!err.contains("content type"), "{err}");
        // Strict validation still holds for a List's items.
        let (ok, _, err) = k(&["create", "-f", &path(&bad)]);
        assert!(!ok && err.contains("unknown field \"spec.containers[0].bogus\""), "{err}");
        let (ok, _, err) = k(&["get", "pod", "-n", "lists", "p4"]);
        assert!(!ok && err.contains("NotFound"), "{err}");
        let _ = std::fs::remove_file(&kubeconfig);
    });
    let result = tokio::time::timeout(Duration::from_secs(60), check).await;
    for f in files {
        let _ = std::fs::remove_file(f);
    }
    result.or_fail("timed out").or_fail("kubectl checks");
    served.stop();
}
