//! Two `nodewarden run` replicas against one in-process `sim --serve`, with
//! leader election on short periods (lease 3 s, renew deadline 2 s, retry
//! 0.5 s). The server records every accepted write with the writer's
//! User-Agent, which names the replica, so the tests can check that no two
//! replicas ever wrote in overlapping spans.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodewarden_apiserver::{ApiFault, FaultTarget, ServeOptions, ServeSource, Served, ServerConfig, WriteRecord};
use nodewarden_cluster::parse_scenario;

const LEASE: Duration = Duration::from_secs(3);
const RETRY: Duration = Duration::from_millis(500);
use nodewarden_testkit::served::{self, CRASHED};

/// The node-crash fleet, every write recorded.
async fn serve() -> Served {
    let mut opts = served::node_crash_fleet();
    opts.server.record_writes = true;
    served::serve(opts).await
}

/// A replica: its child process, its name and where its log goes.
struct Replica {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

/// The node lifecycle flags of most tests: a crashed node is noticed fast.
const FAST: [&str; 6] =
    ["--node-monitor-period", "200ms", "--node-monitor-grace-period", "2s", "--node-startup-grace-period", "2s"];

impl Replica {
    fn start(name: &'static str, kubeconfig: &std::path::Path) -> Replica {
        Replica::with(name, kubeconfig, &FAST)
    }

    /// A replica with these node lifecycle flags (and any others).
    fn with(name: &'static str, kubeconfig: &std::path::Path, flags: &[&str]) -> Replica {
        let log = std::env::temp_dir().join(format!("nodewarden-leader-{}-{name}.log", std::process::id()));
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_nodewarden"))
            .args(["run", "--kubeconfig"])
            .arg(kubeconfig)
            .args([
                "--bind-address",
                "127.0.0.1:0",
                "--leader-elect-lease-duration",
                "3s",
                "--leader-elect-renew-deadline",
                "2s",
                "--leader-elect-retry-period",
                "500ms",
            ])
            .args(flags)
            .env("HOSTNAME", name)
            .env("RUST_LOG", "info,nodewarden_kube::leader=debug")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("spawn nodewarden run");
        Replica { name, child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn writes(&self, all: &[WriteRecord]) -> Vec<WriteRecord> {
        let tag = format!("({}_", self.name);
        all.iter().filter(|w| w.user_agent.contains(&tag)).cloned().collect()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

async fn client(served: &Served) -> kube::Client {
    served::client(served, "leader-test", true).await
}

fn kubeconfig(served: &Served, test: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("nodewarden-leader-{}-{test}.kubeconfig", std::process::id()));
    std::fs::write(&path, served.kubeconfig()).expect("write kubeconfig");
    path
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    let l = leases.get_opt("nodewarden").await.ok().flatten()?;
    l.spec?.holder_identity.filter(|h| !h.is_empty())
}

/// Waits until the Lease names a holder and returns it.
async fn wait_for_holder(leases: &Api<Lease>, not: Option<&str>, within: Duration) -> (String, Instant) {
    let until = Instant::now() + within;
    loop {
        if let Some(h) = holder(leases).await
            && not.is_none_or(|n| !h.starts_with(&format!("{n}_")))
        {
            return (h, Instant::now());
        }
        assert!(Instant::now() < until, "no new leader within {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn tainted(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute"))
}

async fn wait_for_taint(nodes: &Api<Node>, within: Duration) {
    let until = Instant::now() + within;
    while !tainted(&nodes.get(CRASHED).await.expect("get node")) {
        assert!(Instant::now() < until, "{CRASHED} not tainted within {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// No write of `after` at or before the last write of `before`.
fn no_overlap(before: &[WriteRecord], after: &[WriteRecord]) {
    let (Some(last), Some(first)) = (before.iter().map(|w| w.at).max(), after.iter().map(|w| w.at).min()) else {
        return;
    };
    assert!(last < first, "writes overlap: the old leader wrote {:?} after the new one began", last - first);
}

/// Which of the two replicas `holder` names.
fn split<'a>(a: &'a mut Replica, b: &'a mut Replica, holder: &str) -> (&'a mut Replica, &'a mut Replica) {
    if holder.starts_with(&format!("{}_", a.name)) { (a, b) } else { (b, a) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_writes_and_the_standby_takes_over_after_a_sigkill() {
    let served = serve().await;
    let c = client(&served).await;
    let path = kubeconfig(&served, "sigkill");
    let mut a = Replica::start("replica-a", &path);
    let mut b = Replica::start("replica-b", &path);
    let leases: Api<Lease> = Api::namespaced(c.clone(), "kube-system");
    let nodes: Api<Node> = Api::all(c.clone());
    let (first, _) = wait_for_holder(&leases, None, Duration::from_secs(15)).await;
    let (leader, standby) = split(&mut a, &mut b, &first);
    wait_for_taint(&nodes, Duration::from_secs(20)).await;
    // Only the leader has written; the standby has only read.
    let writes = served.writes();
    assert!(!leader.writes(&writes).is_empty());
    assert!(standby.writes(&writes).is_empty(), "the standby wrote: {:#?}", standby.writes(&writes));
    assert!(standby.log().contains("standing by"), "{}", standby.log());

    leader.child.kill().expect("SIGKILL the leader");
    let killed = Instant::now();
    let last_renewal = leader.writes(&served.writes()).iter().map(|w| w.at).max().expect("leader wrote");
    let (second, took_over) = wait_for_holder(&leases, Some(leader.name), Duration::from_secs(15)).await;
    assert!(second.starts_with(&format!("{}_", standby.name)), "{second}");
    // Upstream's bound: the lease duration after the last renewal, plus a
    // retry period (and the jitter on it) for the standby to look again.
    let bound = LEASE + RETRY.mul_f64(1.2) + Duration::from_millis(700);
    assert!(took_over - last_renewal <= bound, "took over {:?} after the last renewal", took_over - last_renewal);
    assert!(took_over > killed);

    // The new leader rebuilt its state from the cluster: a user removing
    // the taint from the still-dead node sees it put back.
    let remove = serde_json::json!({"spec": {"taints": []}});
    nodes.patch(CRASHED, &PatchParams::default(), &Patch::Merge(&remove)).await.expect("untaint");
    wait_for_taint(&nodes, Duration::from_secs(20)).await;
    let writes = served.writes();
    assert!(
        standby.writes(&writes).iter().any(|w| w.path.ends_with(&format!("/nodes/{CRASHED}"))),
        "the new leader did not write the node: {:#?}",
        standby.writes(&writes)
    );
    no_overlap(&leader.writes(&writes), &standby.writes(&writes));
    served.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_stops_writing_before_anyone_else_starts() {
    let served = serve().await;
    let c = client(&served).await;
    let path = kubeconfig(&served, "fence");
    let mut a = Replica::start("replica-c", &path);
    let mut b = Replica::start("replica-d", &path);
    let leases: Api<Lease> = Api::namespaced(c.clone(), "kube-system");
    let nodes: Api<Node> = Api::all(c.clone());
    let (first, _) = wait_for_holder(&leases, None, Duration::from_secs(15)).await;
    let (leader, standby) = split(&mut a, &mut b, &first);
    wait_for_taint(&nodes, Duration::from_secs(20)).await;

    // The leader can still reach nodes and pods, but its Lease requests
    // fail: it must stop writing on its own, by its renew deadline.
    let cut = Instant::now();
    served.faults().inject_for(
        FaultTarget { user_agent: format!("({}_", leader.name), path: "/leases/".into() },
        ApiFault::Errors { rate: 1.0, code: 503 },
        None,
    );
    let (second, took_over) = wait_for_holder(&leases, Some(leader.name), Duration::from_secs(15)).await;
    assert!(second.starts_with(&format!("{}_", standby.name)), "{second}");
    let status = tokio::task::block_in_place(|| {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(s) = leader.child.try_wait().expect("wait") {
                return s;
            }
            assert!(Instant::now() < until, "the old leader did not exit: {}", leader.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    assert_eq!(status.code(), Some(1), "{}", leader.log());
    assert!(leader.log().contains("leadership lost"), "{}", leader.log());
    assert!(took_over - cut >= LEASE - Duration::from_millis(600), "taken over too early: {:?}", took_over - cut);

    // The new leader acts, and never while the old one could still write.
    let remove = serde_json::json!({"spec": {"taints": []}});
    nodes.patch(CRASHED, &PatchParams::default(), &Patch::Merge(&remove)).await.expect("untaint");
    wait_for_taint(&nodes, Duration::from_secs(20)).await;
    let writes = served.writes();
    assert!(!standby.writes(&writes).is_empty());
    no_overlap(&leader.writes(&writes), &standby.writes(&writes));
    served.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_releases_the_lease_so_the_standby_takes_over_at_once() {
    let served = serve().await;
    let c = client(&served).await;
    let path = kubeconfig(&served, "sigterm");
    let mut a = Replica::start("replica-e", &path);
    let mut b = Replica::start("replica-f", &path);
    let leases: Api<Lease> = Api::namespaced(c.clone(), "kube-system");
    let (first, _) = wait_for_holder(&leases, None, Duration::from_secs(15)).await;
    let (leader, standby) = split(&mut a, &mut b, &first);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pid = leader.child.id().to_string();
    let stopped = Instant::now();
    let ok = Command::new("kill").args(["-TERM", &pid]).status().expect("kill -TERM");
    assert!(ok.success());
    let status = tokio::task::block_in_place(|| leader.child.wait().expect("wait"));
    assert_eq!(status.code(), Some(0), "{}", leader.log());
    assert!(leader.log().contains("released the lease"), "{}", leader.log());
    let (second, took_over) = wait_for_holder(&leases, Some(leader.name), Duration::from_secs(10)).await;
    assert!(second.starts_with(&format!("{}_", standby.name)), "{second}");
    // A released Lease is taken at the standby's next look, well before
    // the lease duration.
    assert!(took_over - stopped < LEASE, "took {:?}", took_over - stopped);
    no_overlap(&leader.writes(&served.writes()), &standby.writes(&served.writes()));
    served.stop();
}

#[test]
fn bad_election_flags_are_refused_naming_the_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_nodewarden"))
        .args(["run", "--kubeconfig", "/nonexistent", "--leader-elect-renew-deadline", "20s"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--leader-elect-lease-duration") && err.contains("--leader-elect-renew-deadline"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_namespace_that_does_not_exist_is_a_clear_error() {
    let served = serve().await;
    let path = kubeconfig(&served, "nons");
    let out = tokio::task::block_in_place(|| {
        Command::new(env!("CARGO_BIN_EXE_nodewarden"))
            .args(["run", "--kubeconfig"])
            .arg(&path)
            .args(["--bind-address", "127.0.0.1:0", "--leader-elect-resource-namespace", "nowhere"])
            .output()
            .expect("run")
    });
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("nowhere/nodewarden"), "{err}");
    served.stop();
}

/// The cluster of the warm-standby test: five nodes in two zones, their
/// kubelets renewing every second, and node `dying` silent from 8 s on.
const FAILOVER: &str = r#"
name: a node dies during a failover
cluster:
  kubelet: {node-lease-duration-seconds: 4, node-status-update-frequency: 1s, node-status-report-frequency: 1m}
nodes:
- {name: a1, zone: r/z1, ready: "True", lease: 0s, kubelet: true}
- {name: a2, zone: r/z1, ready: "True", lease: 0s, kubelet: true}
- {name: dying, zone: r/z1, ready: "True", lease: 0s, kubelet: true}
- {name: b1, zone: r/z2, ready: "True", lease: 0s, kubelet: true}
- {name: b2, zone: r/z2, ready: "True", lease: 0s, kubelet: true}
events:
- {at: 8s, kubelet-stop: [dying]}
run-until: 10m
"#;

/// Node `dying` stops heartbeating 8 s after t=0; the leader is SIGKILLed
/// 5 s later, before the grace (10 s) has run out. The warm standby that
/// takes over kept the probe times it observed: it marks the node Unknown
/// at the node's own grace, where a cold one (kube-controller-manager's
/// standby) would start a full grace at its first pass. It decides at once
/// on taking the Lease, and nothing the old leader wrote is written again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_standby_marks_a_node_that_died_during_the_failover_at_its_own_grace() {
    let scenario = parse_scenario(FAILOVER).expect("the test's scenario");
    let zero = Instant::now() + Duration::from_secs(1);
    let opts = ServeOptions {
        source: ServeSource::File(Box::new(scenario)),
        server: ServerConfig {
            bookmark_every: Duration::from_millis(300),
            record_writes: true,
            ..ServerConfig::default()
        },
        tick: Duration::from_millis(50),
        zero_unix_nanos: Some(nodewarden_model::wall::unix_now_nanos() + 1_000_000_000),
        ..ServeOptions::default()
    };
    let served = served::serve(opts).await;
    let c = client(&served).await;
    let path = kubeconfig(&served, "warm");
    let flags = ["--node-monitor-period", "200ms", "--node-monitor-grace-period", "10s"];
    let mut a = Replica::with("replica-g", &path, &flags);
    let mut b = Replica::with("replica-h", &path, &flags);
    let leases: Api<Lease> = Api::namespaced(c.clone(), "kube-system");
    let (first, _) = wait_for_holder(&leases, None, Duration::from_secs(8)).await;
    let (leader, standby) = split(&mut a, &mut b, &first);
    let stopped = zero + Duration::from_secs(8);
    tokio::time::sleep_until((stopped + Duration::from_secs(5)).into()).await;
    leader.child.kill().expect("SIGKILL the leader");
    let (second, took_over) = wait_for_holder(&leases, Some(leader.name), Duration::from_secs(10)).await;
    assert!(second.starts_with(&format!("{}_", standby.name)), "{second}");
    assert!(took_over < stopped + Duration::from_secs(10), "took over after the grace: {:?}", took_over - stopped);

    // The Unknown status write for `dying`, by the new leader.
    let status_path = "/api/v1/nodes/dying/status";
    let until = stopped + Duration::from_secs(25);
    let marked = loop {
        let writes = served.writes();
        if let Some(w) = standby.writes(&writes).iter().find(|w| w.path == status_path) {
            break w.at;
        }
        assert!(Instant::now() < until, "dying never marked Unknown; new leader: {}", standby.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Its last renewal was at most a second before it stopped; grace 10 s,
    // the next 200 ms pass, and the API's and the engine's moments. A cold
    // standby would mark it a full grace after taking over (about 18 s
    // after it stopped).
    let after = marked - stopped;
    assert!(after < Duration::from_secs(11), "marked {after:?} after it stopped");
    assert!(after > Duration::from_secs(8), "marked {after:?} after it stopped: before its grace");
    assert!(standby.log().contains("leading: deciding from what this standby observed"), "{}", standby.log());

    let writes = served.writes();
    let old = leader.writes(&writes);
    let new = standby.writes(&writes);
    assert!(old.iter().all(|w| w.path != status_path), "the old leader marked it: {old:#?}");
    assert_eq!(new.iter().filter(|w| w.path == status_path).count(), 1, "{new:#?}");
    // Nothing else to do in this cluster: the old leader's writes (its
    // Events at start) are not made again.
    let events = |ws: &[WriteRecord]| ws.iter().filter(|w| w.path.contains("/events")).count();
    assert!(events(&new) <= 2, "the new leader re-recorded Events: {new:#?}");
    no_overlap(&old, &new);
    served.stop();
}
