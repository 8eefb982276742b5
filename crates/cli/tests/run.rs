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
    let fleet = ["--nodes", "3", "--zones", "1", "--pods-per-node", "2"];
    let _server = serve(&kubeconfig, &fleet.map(std::ffi::OsStr::new));
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
    let log = dir.join("run.log");
    let (_server, kubeconfig) = serve_scenario(&dir, CRASH, &[]);
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

/// `nodewarden sim --serve` on a loopback port with `args`, writing its
/// kubeconfig to `kubeconfig`; the server, killed when dropped, once it
/// has said where the kubeconfig is.
fn serve(kubeconfig: &std::path::Path, args: &[&std::ffi::OsStr]) -> Reaped {
    let mut server = Reaped(
        nodewarden()
            .args(["sim", "--serve", "127.0.0.1:0", "--quiet"])
            .args(args)
            .arg("--write-kubeconfig")
            .arg(kubeconfig)
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
    server
}

/// [`serve`] for the scenario `text`, written to `dir` with the kubeconfig.
fn serve_scenario(dir: &std::path::Path, text: &str, extra: &[&str]) -> (Reaped, std::path::PathBuf) {
    let (scenario, kubeconfig) = (dir.join("scenario.yaml"), dir.join("kubeconfig"));
    std::fs::write(&scenario, text).expect("write the scenario");
    let mut args: Vec<&std::ffi::OsStr> = extra.iter().map(|a| a.as_ref()).collect();
    args.extend(["--scenario".as_ref(), scenario.as_os_str()]);
    (serve(&kubeconfig, &args), kubeconfig)
}

/// A kubeconfig whose server is a loopback port nobody listens on: every
/// connection is refused.
fn refused_kubeconfig(test: &str) -> (std::path::PathBuf, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let server = format!("https://127.0.0.1:{port}");
    let path = std::env::temp_dir().join(format!("nodewarden-cli-run-{test}-{}.kubeconfig", std::process::id()));
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: down\n  cluster: {{server: '{server}'}}\n\
         users:\n- name: u\n  user: {{token: abc}}\ncontexts:\n- name: c\n  context: {{cluster: down, user: u}}\n\
         current-context: c\n"
    );
    std::fs::write(&path, text).expect("write the kubeconfig");
    (path, server)
}

/// One plain HTTP GET: (status code, body).
fn get(addr: &str, path: &str) -> (u16, String) {
    use nodewarden_harness::http::{self, Timeouts};
    let sock = addr.parse().expect("the replica's address");
    let t = Timeouts { connect: Duration::from_secs(5), read: Duration::from_secs(5) };
    let answer = http::get(sock, addr, path, t).unwrap_or_else(|e| panic!("GET {path} from the replica: {e}"));
    (answer.code, answer.body)
}

/// Reads a child's stderr on a thread, a line at a time.
fn lines_of(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for a line containing `what`; returns every line read so far.
fn wait_for_line(rx: &std::sync::mpsc::Receiver<String>, seen: &mut Vec<String>, what: &str) -> String {
    let started = Instant::now();
    loop {
        if let Some(l) = seen.iter().find(|l| l.contains(what)) {
            return l.clone();
        }
        let left = Duration::from_secs(20).saturating_sub(started.elapsed());
        match rx.recv_timeout(left) {
            Ok(l) => seen.push(l),
            Err(_) => panic!("no line with {what:?} within 20 s; got {seen:#?}"),
        }
    }
}

/// The address the replica serves its health on, from its log.
fn serving(line: &str) -> String {
    line.split("http://").nth(1).and_then(|a| a.split_whitespace().next()).expect("an address").to_string()
}

#[test]
fn without_a_kubeconfig_the_error_says_what_was_tried_and_what_to_do() {
    let home = std::env::temp_dir().join(format!("nodewarden-cli-run-empty-home-{}", std::process::id()));
    std::fs::create_dir_all(&home).expect("an empty home");
    let out = nodewarden()
        .args(["run", "--leader-elect=false"])
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", &home)
        .output()
        .expect("run nodewarden");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let config = home.join(".kube").join("config");
    for says in [
        "no --kubeconfig",
        "$KUBECONFIG is not set",
        &format!("{} does not exist", config.display()),
        "KUBERNETES_SERVICE_HOST is not set",
        "pass --kubeconfig or set KUBECONFIG",
    ] {
        assert!(err.contains(says), "{says:?} missing: {err}");
    }
    assert!(!err.contains("os error"), "{err}");

    // A file that is not there: its path once, in plain words.
    let out = run(&["--kubeconfig", "/nonexistent/kubeconfig"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        "error: --kubeconfig /nonexistent/kubeconfig: cannot read /nonexistent/kubeconfig: no such file or directory"
    );
    let out =
        nodewarden().args(["run", "--leader-elect=false"]).env("KUBECONFIG", "/nonexistent/k").output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim_end(),
        "error: $KUBECONFIG=/nonexistent/k: cannot read /nonexistent/k: no such file or directory"
    );
}

#[test]
fn bind_address_takes_an_ip_alone_as_kube_controller_manager_does() {
    // Past the flags: it fails on the kubeconfig, not on the address.
    let out = run(&["--bind-address", "0.0.0.0", "--kubeconfig", "/nonexistent"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.starts_with("error: --kubeconfig /nonexistent"), "{err}");
    let out = run(&["--bind-address", "localhost:10257", "--kubeconfig", "/nonexistent"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("expected IP:PORT") && err.contains("or an IP alone (then port 10257)"), "{err}");
}

/// `nodewarden run` with election on `kubeconfig`, its metrics on a free
/// port; the process (killed when dropped) and its stderr, line by line.
fn replica(kubeconfig: &std::path::Path) -> (Reaped, std::sync::mpsc::Receiver<String>) {
    let mut child = nodewarden()
        .args(["run", "--bind-address", "127.0.0.1:0", "--kubeconfig"])
        .arg(kubeconfig)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn the replica");
    let rx = lines_of(&mut child);
    (Reaped(child), rx)
}

/// A standby whose API server refuses connections says where it tried and
/// why, and is not ready; its liveness is unaffected.
#[test]
fn a_replica_that_never_reached_the_api_server_is_not_ready() {
    let (kubeconfig, server) = refused_kubeconfig("refused");
    let (_replica, rx) = replica(&kubeconfig);
    let mut seen = Vec::new();
    let addr = serving(&wait_for_line(&rx, &mut seen, "serving /metrics, /healthz and /readyz on"));
    let refused = format!("cannot reach {server}: connection refused");
    let warning = wait_for_line(&rx, &mut seen, &refused);
    assert!(warning.contains("WARN") && warning.contains("trying again every 2s"), "{warning}");
    let (code, body) = get(&addr, "/readyz");
    assert_eq!(code, 503, "{body}");
    assert_eq!(body, format!("not ready: the API server has never been reached; {refused}"));
    assert_eq!(get(&addr, "/healthz"), (200, "ok: standby".to_string()));
    // kube-rs's own line (no server, no cause) stays out of the log.
    std::thread::sleep(Duration::from_secs(3));
    seen.extend(rx.try_iter());
    assert!(!seen.iter().any(|l| l.contains("client error (Connect)")), "{seen:#?}");
    let _ = std::fs::remove_file(&kubeconfig);
}

/// A standby that has reached the API server (another replica holds the
/// Lease) is ready, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_that_reached_the_api_server_is_ready() {
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    let served = nodewarden_testkit::served::serve(nodewarden_apiserver::ServeOptions::default()).await;
    let kubeconfig = std::env::temp_dir().join(format!("nodewarden-cli-run-standby-{}.kubeconfig", std::process::id()));
    std::fs::write(&kubeconfig, served.kubeconfig()).expect("write the kubeconfig");
    let client = nodewarden_testkit::served::client(&served, "run-test", true).await;
    let leases: kube::Api<Lease> = kube::Api::namespaced(client, "kube-system");
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let held = Lease {
        metadata: kube::api::ObjectMeta { name: Some("nodewarden".into()), ..Default::default() },
        spec: Some(LeaseSpec {
            holder_identity: Some("someone-else".into()),
            lease_duration_seconds: Some(3600),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            ..LeaseSpec::default()
        }),
    };
    leases.create(&kube::api::PostParams::default(), &held).await.expect("the Lease, held by another replica");
    let (_replica, rx) = replica(&kubeconfig);
    let mut seen = Vec::new();
    let addr = serving(&wait_for_line(&rx, &mut seen, "serving /metrics, /healthz and /readyz on"));
    wait_for_line(&rx, &mut seen, "reached the API server");
    wait_for_line(&rx, &mut seen, "standing by: another replica leads");
    let readyz = tokio::task::spawn_blocking(move || get(&addr, "/readyz")).await.expect("join");
    assert_eq!(readyz, (200, "ok: standby".to_string()), "{seen:#?}");
    let _ = std::fs::remove_file(&kubeconfig);
}

/// The crash scenario with the served controller in kube-controller-manager's
/// role, on the shortened periods `run` is given below.
fn crash_with_its_controller() -> String {
    format!(
        "{CRASH}config: {{node-monitor-period: 200ms, node-monitor-grace-period: 2s, node-startup-grace-period: 2s}}\n"
    )
}

/// `run --dry-run` beside the served cluster's own controller: the shadow
/// matches each of the controller's decisions on the crashed node
/// (Unknown, both unreachable taints, the pods' marks and the bare pod's
/// deletion) with its own, and `nodewarden shadow report` says all agree,
/// as a table and as a page.
#[test]
fn a_dry_run_beside_the_writing_controller_reports_that_all_agree() {
    let dir = std::env::temp_dir().join(format!("nodewarden-cli-shadow-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let page = dir.join("shadow.html");
    let (_server, kubeconfig) = serve_scenario(&dir, &crash_with_its_controller(), &["--controller"]);
    let mut child = nodewarden()
        .args(["run", "--dry-run", "--bind-address", "127.0.0.1:0"])
        .args(["--node-monitor-period", "200ms", "--node-monitor-grace-period", "2s"])
        .args(["--node-startup-grace-period", "2s", "--kubeconfig"])
        .arg(&kubeconfig)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn the shadow");
    let rx = lines_of(&mut child);
    let _shadow = Reaped(child);
    let mut seen = Vec::new();
    let url =
        format!("http://{}", serving(&wait_for_line(&rx, &mut seen, "serving /metrics, /healthz and /readyz on")));
    let report = |extra: &[&std::ffi::OsStr]| {
        nodewarden().args(["shadow", "report", "--url", &url]).args(extra).output().expect("shadow report")
    };
    // The crash at 3 s, Unknown and tainted 2 s on, the bare pod deleted at
    // once: wait for every kind (at most 40 s).
    let wanted = ["unknown", "noschedule-unreachable", "noexecute-unreachable", "pods-not-ready", "pod-deletion"];
    let started = Instant::now();
    let summary = loop {
        let out = report(&["--json".as_ref()]);
        let summary: Option<serde_json::Value> = serde_json::from_slice(&out.stdout).ok();
        let matched = |s: &serde_json::Value| {
            wanted.iter().all(|kind| {
                s["kinds"].as_array().into_iter().flatten().any(|k| k["kind"] == *kind && k["decisions"] == 1)
            })
        };
        match summary {
            Some(s) if matched(&s) => break s,
            _ if started.elapsed() > Duration::from_secs(40) => {
                seen.extend(rx.try_iter());
                panic!("not every decision matched within 40 s: {}\n{seen:#?}", String::from_utf8_lossy(&out.stdout))
            }
            _ => std::thread::sleep(Duration::from_millis(500)),
        }
    };
    assert_eq!(summary["agree"], summary["decisions"], "{summary:#}");
    let out = report(&["--html".as_ref(), page.as_os_str()]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{table}");
    assert!(table.lines().any(|l| l.starts_with("verdict:") && l.contains("all agree")), "{table}");
    let html = std::fs::read_to_string(&page).expect("the page");
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("pod-deletion"), "{html}");
    let _ = std::fs::remove_dir_all(&dir);
}
