//! `nodewarden run` from the command line: `--controllers` refusals,
//! `--log-format json`, and a crash tainted and evicted, against
//! `nodewarden sim --serve` (HTTPS with a token) as a child process on
//! loopback.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn nodewarden() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nodewarden"));
    c.env_remove("RUST_LOG");
    c
}

fn run(args: &[&str]) -> Output {
    nodewarden().arg("run").arg("--leader-elect=false").args(args).output().expect("run nodewarden")
}

#[test]
fn bad_controllers_lists_are_refused_in_one_line_with_exit_2() {
    for (list, says) in [
        ("*,-ttl-controller", "unknown controller \"-ttl-controller\""),
        ("node-lifecycle-controler", "unknown controller \"node-lifecycle-controler\""),
        ("-node-lifecycle-controller,-taint-eviction-controller", "nothing left to run"),
        ("", "nothing left to run"),
    ] {
        let flag = format!("--controllers={list}");
        let out = run(&[&flag, "--kubeconfig", "/nonexistent"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{list}: {err}");
        assert_eq!(err.lines().count(), 1, "{list}: {err}");
        assert!(err.contains(says), "{list}: {err}");
    }
    let out = run(&["--controllers=*,-taint-eviction-controller", "--enable-taint-manager=false"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("legacy eviction mode"), "{err}");
    // A valid list goes past the flags and fails on the kubeconfig.
    let out = run(&["--controllers=*,-taint-eviction-controller", "--kubeconfig", "/nonexistent"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--kubeconfig /nonexistent"), "{err}");
}

#[test]
fn rescheduler_flags_are_checked_and_named() {
    for (flags, says) in [
        (&["--rescheduler-housekeeping-interval=0s"][..], "rescheduler-housekeeping-interval"),
        (&["--enable-rescheduler", "--rescheduler-eviction-grace=-1s"][..], "rescheduler-eviction-grace"),
        (&["--rescheduler-unschedulable-grace=-5s"][..], "rescheduler-unschedulable-grace"),
        (&["--rescheduler-pod-scheduled-timeout=1s"][..], "rescheduler-pod-scheduled-timeout"),
    ] {
        let out = run(&[flags, &["--kubeconfig", "/nonexistent"][..]].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{flags:?}: {err}");
        assert!(err.contains(says), "{flags:?}: {err}");
    }
    let out = run(&["--enable-rescheduler=perhaps", "--kubeconfig", "/nonexistent"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--enable-rescheduler"), "{err}");
    // Both spellings switch it on and go past the flags to the kubeconfig.
    for on in ["--enable-rescheduler", "--enable-rescheduler=true"] {
        let out = run(&[on, "--rescheduler-pod-scheduled-timeout=5m", "--kubeconfig", "/nonexistent"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{on}: {err}");
        assert!(err.contains("--kubeconfig /nonexistent"), "{on}: {err}");
    }
}

/// Kills the child when the test ends, however it ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn json_logs_are_one_object_a_line() {
    let kubeconfig = std::env::temp_dir().join(format!("nodewarden-cli-run-{}.kubeconfig", std::process::id()));
    let mut server = Reaped(
        nodewarden()
            .args(["sim", "--serve", "127.0.0.1:0", "--nodes", "3", "--zones", "1", "--pods-per-node", "2"])
            .args(["--quiet", "--write-kubeconfig"])
            .arg(&kubeconfig)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the server"),
    );
    let mut line = String::new();
    if let Some(out) = server.0.stdout.take() {
        let _ = BufReader::new(out).read_line(&mut line);
    }
    assert!(line.starts_with("kubeconfig:"), "{line}");
    let mut controller = Reaped(
        nodewarden()
            .args(["run", "--leader-elect=false", "--log-format", "json", "--bind-address", "127.0.0.1:0"])
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn the controller"),
    );
    let stderr = controller.0.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let started = Instant::now();
    let mut lines = Vec::new();
    while !lines.iter().any(|l: &serde_json::Value| l["message"] == "every cache synced; deciding from now on") {
        let left = Duration::from_secs(20).saturating_sub(started.elapsed());
        let Ok(l) = rx.recv_timeout(left) else { panic!("no sync line within 20 s; got {lines:#?}") };
        let v: serde_json::Value = serde_json::from_str(&l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}"));
        assert!(v["timestamp"].is_string() && v["level"].is_string() && v["target"].is_string(), "{l}");
        lines.push(v);
    }
    let _ = std::fs::remove_file(&kubeconfig);
    assert!(lines.iter().any(|l| l["message"] == "cache synced" && l["watch"] == "nodes"), "{lines:#?}");
}

/// A scenario file for `sim --serve`: three nodes whose kubelets renew
/// 1 s Leases every 200 ms, a pod on `a` that tolerates nothing (no
/// default tolerations are admitted), and `a`'s kubelet stopping at 3 s.
const CRASH: &str = "name: crash over https
cluster:
  default-not-ready-toleration-seconds: null
  default-unreachable-toleration-seconds: null
  kubelet: {node-lease-duration-seconds: 1, node-status-update-frequency: 200ms, node-status-report-frequency: 2s}
nodes:
- {name: a, zone: z, created: -1h, ready: 'True', heartbeat: 0s, transition: -1h, lease: 0s, kubelet: true}
- {name: b, zone: z, created: -1h, ready: 'True', heartbeat: 0s, transition: -1h, lease: 0s, kubelet: true}
- {name: c, zone: z, created: -1h, ready: 'True', heartbeat: 0s, transition: -1h, lease: 0s, kubelet: true}
pods:
- {name: default/bare-a, node: a}
- {name: default/bare-b, node: b}
events:
- {at: 3s, kubelet-stop: [a]}
";

/// `nodewarden run` against `sim --serve` over HTTPS (the default), as
/// two processes on loopback: it reads the kubeconfig's CA and token,
/// syncs, and acts: the crashed node is tainted and its pod evicted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_taints_and_evicts_over_https() {
    use k8s_openapi::api::core::v1::{Node, Pod};
    let dir = std::env::temp_dir().join(format!("nodewarden-cli-run-https-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (scenario, kubeconfig, log) = (dir.join("crash.yaml"), dir.join("kubeconfig"), dir.join("run.log"));
    std::fs::write(&scenario, CRASH).expect("write the scenario");
    let mut server = Reaped(
        nodewarden()
            .args(["sim", "--serve", "127.0.0.1:0", "--quiet", "--scenario"])
            .arg(&scenario)
            .arg("--write-kubeconfig")
            .arg(&kubeconfig)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the server"),
    );
    let mut line = String::new();
    if let Some(out) = server.0.stdout.take() {
        let _ = BufReader::new(out).read_line(&mut line);
    }
    assert!(line.starts_with("kubeconfig:"), "{line}");
    let text = std::fs::read_to_string(&kubeconfig).expect("the kubeconfig");
    assert!(
        text.contains("server: https://127.0.0.1:")
            && text.contains("certificate-authority-data: ")
            && text.contains("\n    token: "),
        "not HTTPS with a token:\n{text}"
    );
    let _controller = Reaped(
        nodewarden()
            .args(["run", "--leader-elect=false", "--bind-address", "127.0.0.1:0"])
            .args(["--node-monitor-period", "200ms", "--node-monitor-grace-period", "2s"])
            .args(["--node-startup-grace-period", "2s", "--kubeconfig"])
            .arg(&kubeconfig)
            .stderr(std::fs::File::create(&log).expect("log file"))
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn the controller"),
    );
    // The test's own client reads the same kubeconfig.
    let kc = kube::config::Kubeconfig::from_yaml(&text).expect("kubeconfig");
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.expect("config");
    let client = kube::Client::try_from(config).expect("client");
    let nodes: kube::Api<Node> = kube::Api::all(client.clone());
    let pods: kube::Api<Pod> = kube::Api::namespaced(client, "default");
    let started = Instant::now();
    let done = loop {
        let tainted =
            nodes.get("a").await.ok().and_then(|n| n.spec?.taints).is_some_and(|ts| {
                ts.iter().any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute")
            });
        let evicted = matches!(pods.get_opt("bare-a").await, Ok(None));
        if tainted && evicted {
            break true;
        }
        if started.elapsed() > Duration::from_secs(40) {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let run_log = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(done, "node a not tainted and its pod not evicted within 40 s; nodewarden run's log:\n{run_log}");
    // Only the crashed node's pod went.
    assert!(matches!(pods.get_opt("bare-b").await, Ok(Some(_))), "{run_log}");
}
