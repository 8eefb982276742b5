//! The RBAC rules in deploy/ are exactly what `nodewarden run` uses: the
//! deployed command line (the Deployment's args from `kubectl kustomize`,
//! with only the address, the kubeconfig and shorter periods changed) runs
//! against an in-process `sim --serve` that logs every request as the
//! authorizer sees it. A node crashes; its pods are marked not ready and
//! deleted (`--pod-deletion-mode=delete`, then `evict`, refused by a
//! disruption budget until the budget goes), a stale NoExecute taint is
//! taken off a healthy node, Events are
//! recorded (events.k8s.io/v1, then core/v1 on a server without the
//! former), the Lease is created, renewed and released. Every request must
//! be allowed by the rules bound to the Deployment's ServiceAccount, and
//! every verb those rules grant must have been used. The shadow overlay's
//! read-only rules are checked the same way against a `--dry-run` run, and
//! overlays/active-rescheduler's against `--enable-rescheduler` runs.

mod deploy;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use deploy::rbac::{Rule, check, rules_for};
use deploy::{deployment_args, kustomize, one};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use nodewarden_apiserver::{RequestRecord, Served};
use serde_json::{Value, json};

use nodewarden_testkit::served::{self, CRASHED};

/// The node-crash fleet, every request recorded.
async fn serve(events_v1: bool) -> Served {
    let mut opts = served::node_crash_fleet();
    opts.server.record_requests = true;
    opts.server.events_v1 = events_v1;
    served::serve(opts).await
}

async fn client(served: &Served) -> kube::Client {
    served::client(served, "deploy-rbac-test", true).await
}

/// A pod on the node that will crash, tolerating its taints for 0 s: the
/// controller deletes it as soon as the node is tainted.
async fn victim(served: &Served) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "victim", "namespace": "default", "labels": {"app": "victim"}},
        "spec": {
            "nodeName": CRASHED,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
            "tolerations": [
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0},
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0},
            ],
        },
    }))
    .expect("pod");
    Api::<Pod>::namespaced(client(served).await, "default")
        .create(&PostParams::default(), &pod)
        .await
        .expect("create the victim");
}

/// The Deployment's args with `overrides` (flag, value) replacing or
/// added to them.
fn as_deployed(args: &[String], overrides: &[(&str, String)]) -> Vec<String> {
    let mut out: Vec<String> = args
        .iter()
        .map(|a| {
            let flag = a.split_once('=').map_or(a.as_str(), |(f, _)| f);
            match overrides.iter().find(|(f, _)| *f == flag) {
                Some((f, v)) => format!("{f}={v}"),
                None => a.clone(),
            }
        })
        .collect();
    for (f, v) in overrides {
        if !args.iter().any(|a| a == f || a.starts_with(&format!("{f}="))) {
            out.push(format!("{f}={v}"));
        }
    }
    out
}

struct Replica {
    child: Child,
    log: PathBuf,
}

impl Replica {
    fn start(name: &str, args: &[String]) -> Replica {
        let log = std::env::temp_dir().join(format!("nodewarden-deploy-rbac-{}-{name}.log", std::process::id()));
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_nodewarden"))
            .args(args)
            .env("HOSTNAME", name)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("spawn nodewarden run");
        Replica { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, then the exit code (0: stopped, Lease released).
    fn stop(&mut self) -> Option<i32> {
        let ok = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().expect("kill -TERM");
        assert!(ok.success());
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                return s.code();
            }
            assert!(Instant::now() < until, "nodewarden did not stop on SIGTERM: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

fn kubeconfig(served: &Served, name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("nodewarden-deploy-rbac-{}-{name}.kubeconfig", std::process::id()));
    std::fs::write(&path, served.kubeconfig()).expect("write kubeconfig");
    path
}

fn fast(kubeconfig: &Path, mode: Option<&str>) -> Vec<(&'static str, String)> {
    let mut o = vec![
        ("--kubeconfig", kubeconfig.display().to_string()),
        ("--bind-address", "127.0.0.1:0".into()),
        ("--node-monitor-period", "200ms".into()),
        ("--node-monitor-grace-period", "2s".into()),
        ("--node-startup-grace-period", "2s".into()),
        ("--leader-elect-lease-duration", "3s".into()),
        ("--leader-elect-renew-deadline", "2s".into()),
        ("--leader-elect-retry-period", "500ms".into()),
    ];
    if let Some(m) = mode {
        o.push(("--pod-deletion-mode", m.into()));
    }
    o
}

/// The replica's requests (its User-Agent names nodewarden).
fn nodewardens(served: &Served) -> Vec<RequestRecord> {
    served.requests().into_iter().filter(|r| r.user_agent.starts_with("nodewarden/")).collect()
}

async fn wait_for(what: &str, replica: &Replica, within: Duration, mut done: impl AsyncFnMut() -> bool) {
    let until = Instant::now() + within;
    while !done().await {
        assert!(Instant::now() < until, "{what} did not happen within {within:?}; replica log:\n{}", replica.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One writing run of the deployed command line: the victim deleted in
/// `mode`, an Event recorded in the group the server serves, the Lease
/// released. Returns every request nodewarden made. `tag` keeps the files
/// of runs in concurrent tests apart.
async fn active_run(args: &[String], mode: &str, events_v1: bool, tag: &str) -> Vec<RequestRecord> {
    let served = serve(events_v1).await;
    victim(&served).await;
    let path = kubeconfig(&served, &format!("{tag}-{mode}"));
    // A healthy node carrying a NoExecute taint from before: nodewarden
    // takes it off at its start (upstream's markNodeAsReachable), a taint
    // patch to a node it has written nothing to yet, so it reads the node
    // first (its later taint patches are guarded by what its own writes'
    // answers showed).
    let nodes: Api<Node> = Api::all(client(&served).await);
    let stale = json!({"spec": {"taints": [
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"},
    ]}});
    nodes.patch("node-000001", &PatchParams::default(), &Patch::Merge(&stale)).await.expect("taint node-000001");
    // In evict mode a budget first refuses the eviction: nodewarden reads
    // a pod only after a refused write (its status writes and deletions
    // need no read), and the budget's removal lets the next try through.
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client(&served).await, "default");
    if mode == "evict" {
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "victim", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "victim"}}},
        }))
        .expect("budget");
        budgets.create(&PostParams::default(), &pdb).await.expect("create the budget");
    }
    let mut replica = Replica::start(&format!("rbac-{tag}-{mode}"), &as_deployed(args, &fast(&path, Some(mode))));
    let pods: Api<Pod> = Api::namespaced(client(&served).await, "default");
    wait_for("the stale taint taken off", &replica, Duration::from_secs(30), async || {
        nodewardens(&served).iter().any(|r| r.verb == "get" && r.resource == "nodes" && r.name == "node-000001")
    })
    .await;
    if mode == "evict" {
        wait_for("the victim read after a refused eviction", &replica, Duration::from_secs(30), async || {
            nodewardens(&served).iter().any(|r| r.verb == "get" && r.resource == "pods" && r.name == "victim")
        })
        .await;
        budgets.delete("victim", &Default::default()).await.expect("delete the budget");
    }
    wait_for(&format!("the victim's deletion ({mode})"), &replica, Duration::from_secs(30), async || {
        pods.get_opt("victim").await.expect("get").is_none_or(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await;
    let events_group = if events_v1 { "events.k8s.io" } else { "" };
    wait_for("an Event", &replica, Duration::from_secs(10), async || {
        nodewardens(&served).iter().any(|r| r.verb == "create" && r.resource == "events" && r.group == events_group)
    })
    .await;
    let deleted = nodewardens(&served).iter().any(|r| match mode {
        "evict" => r.verb == "create" && r.subresource == "eviction",
        _ => r.verb == "delete" && r.resource == "pods",
    });
    assert!(deleted, "{mode}: the victim went, but not through nodewarden");
    assert_eq!(replica.stop(), Some(0), "{}", replica.log());
    assert!(replica.log().contains("released the lease"), "{}", replica.log());
    let requests = nodewardens(&served);
    served.stop();
    let _ = std::fs::remove_file(path);
    requests
}

fn report(errors: Vec<String>, rules: &[Rule]) -> String {
    format!("{}\n\nrules bound to kube-system/nodewarden:\n{rules:#?}", errors.join("\n"))
}

fn service_account(objs: &[Value]) -> (String, String) {
    let d = one(objs, "Deployment");
    let sa = d["spec"]["template"]["spec"]["serviceAccountName"].as_str().expect("serviceAccountName").to_string();
    (d["metadata"]["namespace"].as_str().expect("namespace").to_string(), sa)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_active_rbac_grants_exactly_what_nodewarden_run_uses() {
    let Some(objs) = kustomize("overlays/active") else { return };
    let args = deployment_args(&objs);
    let (ns, sa) = service_account(&objs);
    let rules = rules_for(&objs, &ns, &sa);
    assert!(!rules.is_empty(), "no rules bound to {ns}/{sa}");
    let (delete, evict) =
        tokio::join!(active_run(&args, "delete", true, "active"), active_run(&args, "evict", false, "active"));
    let mut requests = delete;
    requests.extend(evict);
    if let Err(errors) = check(&rules, &requests) {
        panic!("{}", report(errors, &rules));
    }
    // The API probe asks through a client of its own, named as such.
    let probes = requests.iter().filter(|r| r.non_resource_path == "/version" && r.user_agent.ends_with(" probe"));
    assert!(probes.count() > 0, "no /version request from the probe's own client");
}

/// `--enable-rescheduler` adds the budget watch to what nodewarden uses;
/// the rest (the CriticalAddonsOnly taint is a node patch, its evictions go
/// through pods/eviction) is what node lifecycle uses already.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rescheduler_rbac_grants_exactly_what_nodewarden_run_uses() {
    let Some(objs) = kustomize("overlays/active-rescheduler") else { return };
    let args = deployment_args(&objs);
    assert!(args.contains(&"--enable-rescheduler".to_string()));
    let (ns, sa) = service_account(&objs);
    let rules = rules_for(&objs, &ns, &sa);
    let (delete, evict) =
        tokio::join!(active_run(&args, "delete", true, "resched"), active_run(&args, "evict", false, "resched"));
    let mut requests = delete;
    requests.extend(evict);
    assert!(
        requests.iter().any(|r| r.verb == "watch" && r.resource == "poddisruptionbudgets"),
        "the rescheduler did not watch budgets"
    );
    if let Err(errors) = check(&rules, &requests) {
        panic!("{}", report(errors, &rules));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shadow_rbac_grants_exactly_what_a_dry_run_uses() {
    let Some(objs) = kustomize("overlays/shadow") else { return };
    let args = deployment_args(&objs);
    assert!(args.contains(&"--dry-run".to_string()));
    let (ns, sa) = service_account(&objs);
    let rules = rules_for(&objs, &ns, &sa);
    let served = serve(true).await;
    victim(&served).await;
    let path = kubeconfig(&served, "shadow");
    let mut replica = Replica::start("rbac-shadow", &as_deployed(&args, &fast(&path, None)));
    // The dry run decides to delete the victim, and sends nothing.
    wait_for("a dry-run deletion", &replica, Duration::from_secs(30), async || {
        replica.log().lines().any(|l| l.contains("would send") && l.contains("victim"))
    })
    .await;
    assert_eq!(replica.stop(), Some(0), "{}", replica.log());
    let requests = nodewardens(&served);
    served.stop();
    let _ = std::fs::remove_file(path);
    if let Err(errors) = check(&rules, &requests) {
        panic!("{}", report(errors, &rules));
    }
}

fn request(verb: &str, group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> RequestRecord {
    RequestRecord {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        subresource: sub.into(),
        namespace: ns.into(),
        name: name.into(),
        ..RequestRecord::default()
    }
}

/// The check fails both ways: a request no rule allows, and a rule verb
/// no request used; names and namespaces scope as in upstream's RBAC.
#[test]
fn the_check_refuses_ungranted_requests_and_unused_grants() {
    let objs: Vec<Value> = deploy::yaml_docs(
        r#"
kind: ClusterRole
metadata: {name: c}
rules:
- {apiGroups: [""], resources: [nodes], verbs: [get, patch]}
- {apiGroups: [""], resources: [pods/status], verbs: [update]}
---
kind: ClusterRoleBinding
metadata: {name: c}
roleRef: {kind: ClusterRole, name: c}
subjects: [{kind: ServiceAccount, name: sa, namespace: ns}]
---
kind: Role
metadata: {name: r, namespace: ns}
rules:
- {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [create]}
- {apiGroups: [coordination.k8s.io], resources: [leases], resourceNames: [me], verbs: [get]}
---
kind: RoleBinding
metadata: {name: r, namespace: ns}
roleRef: {kind: Role, name: r}
subjects: [{kind: ServiceAccount, name: sa, namespace: ns}]
---
kind: ClusterRoleBinding
metadata: {name: other}
roleRef: {kind: ClusterRole, name: unrelated}
subjects: [{kind: ServiceAccount, name: someone-else, namespace: ns}]
"#,
        "rules",
    );
    let rules = rules_for(&objs, "ns", "sa");
    assert_eq!(rules.len(), 4);
    let all = vec![
        request("get", "", "nodes", "", "", "n1"),
        request("patch", "", "nodes", "", "", "n1"),
        request("update", "", "pods", "status", "default", "p"),
        request("create", "coordination.k8s.io", "leases", "", "ns", ""),
        request("get", "coordination.k8s.io", "leases", "", "ns", "me"),
    ];
    assert_eq!(check(&rules, &all), Ok(()));

    // Used but not granted: a verb, a subresource, another Lease name,
    // another namespace.
    for (extra, why) in [
        (
            request("update", "", "nodes", "", "", "n1"),
            "uses update core/nodes named n1, which the role does not grant",
        ),
        (
            request("patch", "", "pods", "status", "d", "p"),
            "uses patch core/pods/status in d named p, which the role does not grant",
        ),
        (
            request("get", "coordination.k8s.io", "leases", "", "ns", "kube-controller-manager"),
            "uses get coordination.k8s.io/leases in ns named kube-controller-manager, which the role does not grant",
        ),
        (
            request("create", "coordination.k8s.io", "leases", "", "kube-node-lease", ""),
            "uses create coordination.k8s.io/leases in kube-node-lease, which the role does not grant",
        ),
    ] {
        let mut reqs = all.clone();
        reqs.push(extra);
        assert_eq!(check(&rules, &reqs), Err(vec![why.to_string()]));
    }
    // Granted but never used.
    let fewer: Vec<RequestRecord> = all.iter().filter(|r| r.verb != "patch").cloned().collect();
    assert_eq!(
        check(&rules, &fewer),
        Err(vec!["ClusterRole/c grants patch core/nodes, which nodewarden never used".to_string()])
    );
    // A named rule is not used by a request for another name.
    let other_name: Vec<RequestRecord> =
        all.iter()
            .map(|r| {
                if r.name == "me" {
                    request("get", "coordination.k8s.io", "leases", "", "ns", "you")
                } else {
                    r.clone()
                }
            })
            .collect();
    assert_eq!(check(&rules, &other_name).unwrap_err().len(), 2);
}
