//! The served cluster over time: kubelets on the wall clock, a built-in
//! scenario played out, and nodewarden's controller in-process.

mod common;

use std::time::Duration;

use common::{OrFail, client, fast_kubelets, options, start};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, ListParams};
use nodewarden_apiserver::ServeSource;
use nodewarden_cluster::Builtin;
use nodewarden_cluster::fleet::FleetSpec;
use nodewarden_model::{ControllerConfig, Span};

fn renew_age(l: &Lease) -> Duration {
    let renew = l.spec.as_ref().and_then(|s| s.renew_time.as_ref()).map(|t| t.0.as_millisecond()).unwrap_or(0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    Duration::from_millis((now - renew).max(0) as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelets_renew_on_the_wall_clock_and_a_crash_stops_one() {
    let mut opts = options(10, 2);
    opts.source =
        ServeSource::Fleet(FleetSpec { nodes: 10, zones: 2, pods_per_node: 2, seed: 3 }, Some(Builtin::NodeCrash));
    // node-crash crashes 1% (one node) at 1m: at 60x, after 1 s.
    opts.scenario_speed = 60.0;
    let served = start(opts).await;
    let c = client(&served, true).await;
    let leases: Api<Lease> = Api::namespaced(c, "kube-node-lease");
    tokio::time::timeout(Duration::from_secs(20), async {
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let all = leases.list(&ListParams::default()).await.or_fail("leases").items;
        assert_eq!(all.len(), 10);
        for l in &all {
            let name = l.metadata.name.clone().unwrap_or_default();
            let age = renew_age(l);
            if name == "node-000005" {
                assert!(age >= Duration::from_millis(1000), "{name} crashed at 1 s but renewed {age:?} ago");
            } else {
                assert!(age < Duration::from_millis(700), "{name} renewed {age:?} ago");
            }
        }
        assert!(served.status().last_fault.contains("crash"), "{}", served.status());
    })
    .await
    .or_fail("timed out");
    served.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_controller_marks_and_taints_a_crashed_node() {
    let mut opts = options(10, 2);
    opts.source =
        ServeSource::Fleet(FleetSpec { nodes: 10, zones: 2, pods_per_node: 2, seed: 3 }, Some(Builtin::NodeCrash));
    opts.scenario_speed = 60.0;
    opts.timing = fast_kubelets();
    opts.controller = Some(ControllerConfig {
        node_monitor_period: Span::from_millis(200),
        node_monitor_grace_period: Span::from_secs(2),
        node_startup_grace_period: Span::from_secs(2),
        ..ControllerConfig::default()
    });
    let served = start(opts).await;
    let c = client(&served, true).await;
    let nodes: Api<Node> = Api::all(c.clone());
    tokio::time::timeout(Duration::from_secs(25), async {
        loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let n = nodes.get("node-000005").await.or_fail("get");
            let ready = n
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
                .map(|c| c.status.clone());
            let tainted = n.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|ts| {
                ts.iter().any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute")
            });
            if ready.as_deref() == Some("Unknown") && tainted {
                break;
            }
        }
        // The others stay Ready and untainted.
        for n in nodes.list(&ListParams::default()).await.or_fail("list").items {
            if n.metadata.name.as_deref() == Some("node-000005") {
                continue;
            }
            let taints = n.spec.and_then(|s| s.taints).unwrap_or_default();
            assert!(taints.is_empty(), "{:?}", n.metadata.name);
        }
        let events: Api<Event> = Api::namespaced(c.clone(), "default");
        let evs =
            events.list(&ListParams::default().fields("involvedObject.name=node-000005")).await.or_fail("events").items;
        assert!(evs.iter().any(|e| e.reason.as_deref() == Some("NodeNotReady")), "{evs:?}");
    })
    .await
    .or_fail("timed out waiting for the controller");
    served.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_files_events_play_out_on_the_wall_clock() {
    let scenario = nodewarden_cluster::parse_scenario(
        r#"
name: served file
nodes:
- {name: a, zone: r/z, created: -1h, ready: "True", heartbeat: 0s, lease: 0s, kubelet: true}
- {name: b, zone: r/z, created: -1h, ready: "True", heartbeat: 0s, lease: 0s, kubelet: true}
pods:
- {name: default/web, node: a}
events:
- {at: 1s, set-labels: {node: b, labels: {team: blue}}}
- {at: 1s, delete-pod: default/web}
- {at: 2s, add-pod: {name: default/late, node: b}}
"#,
    )
    .or_fail("scenario");
    let mut opts = options(0, 0);
    opts.source = ServeSource::File(Box::new(scenario));
    // Ten times real time: the events land at 0.1 s and 0.2 s.
    opts.scenario_speed = 10.0;
    let served = start(opts).await;
    let c = client(&served, true).await;
    let nodes: Api<Node> = Api::all(c.clone());
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c, "default");
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let labelled = nodes.get("b").await.or_fail("get b").metadata.labels.unwrap_or_default();
            let names: Vec<String> = pods
                .list(&ListParams::default())
                .await
                .or_fail("pods")
                .items
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .collect();
            if labelled.get("team").map(String::as_str) == Some("blue") && names == ["late"] {
                break;
            }
        }
    })
    .await
    .or_fail("timed out waiting for the file's events");
    served.stop();
}

/// A scenario file's scheduling facts are served (allocatable, requests,
/// priority, budgets), and with `cluster.scheduler` the simulator's first
/// fit runs over the served pods: what fits is bound, what does not is
/// marked Unschedulable with upstream's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_files_scheduler_binds_what_fits_and_marks_the_rest_unschedulable() {
    let scenario = nodewarden_cluster::parse_scenario(
        r#"
name: served scheduler
cluster: {scheduler: true}
nodes:
- {name: a, zone: r/z, created: -1h, ready: "True", heartbeat: 0s, lease: 0s, kubelet: true, allocatable: {cpu: 2, memory: 4Gi, pods: 10}}
- {name: b, zone: r/z, created: -1h, ready: "True", heartbeat: 0s, lease: 0s, kubelet: true, allocatable: {cpu: 1, memory: 4Gi}}
budgets:
- {name: default/web, selector: {matchLabels: {app: web}}, min-available: 1}
pods:
- {name: default/web-1, node: a, owner: ReplicaSet, labels: {app: web}, requests: {cpu: 1000m, memory: 1Gi}, grace-period: 20s}
- name: kube-system/dns
  requests: {cpu: 1, memory: 70Mi}
  priority-class: system-cluster-critical
  tolerations: [{key: CriticalAddonsOnly, operator: Exists}]
- {name: default/huge, requests: {cpu: 4}}
"#,
    )
    .or_fail("scenario");
    let mut opts = options(0, 0);
    opts.source = ServeSource::File(Box::new(scenario));
    let served = start(opts).await;
    let c = client(&served, true).await;
    let node_a = Api::<Node>::all(c.clone()).get("a").await.or_fail("node a");
    let alloc = node_a.status.and_then(|s| s.allocatable).ok_or("no allocatable").or_fail("allocatable");
    assert_eq!(alloc.get("cpu").map(|q| q.0.as_str()), Some("2000m"));
    let web =
        Api::<k8s_openapi::api::core::v1::Pod>::namespaced(c.clone(), "default").get("web-1").await.or_fail("web-1");
    let spec = web.spec.ok_or("no spec").or_fail("spec");
    assert_eq!(spec.termination_grace_period_seconds, Some(20));
    let requests =
        spec.containers[0].resources.as_ref().and_then(|r| r.requests.clone()).ok_or("none").or_fail("requests");
    assert_eq!(requests.get("cpu").map(|q| q.0.as_str()), Some("1000m"));
    let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> = Api::namespaced(c.clone(), "default");
    let system: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.clone(), "kube-system");
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.clone(), "default");
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let dns = system.get("dns").await.or_fail("dns");
            let huge = pods.get("huge").await.or_fail("huge");
            let budget = pdbs.get("web").await.or_fail("budget");
            let bound = dns.spec.as_ref().and_then(|s| s.node_name.clone());
            let marked =
                huge.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default().into_iter().find(|c| {
                    c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable")
                });
            let allowed = budget.status.map(|s| s.disruptions_allowed);
            if let (Some(node), Some(mark), Some(_)) = (bound, marked, allowed) {
                assert_eq!(node, "a", "first fit: a has 1 core free, b 1 core too, a comes first");
                let message = mark.message.unwrap_or_default();
                assert!(
                    message.starts_with("0/2 nodes are available") && message.contains("Insufficient cpu"),
                    "{message}"
                );
                assert_eq!(dns.spec.and_then(|s| s.priority_class_name).as_deref(), Some("system-cluster-critical"));
                assert!(huge.spec.and_then(|s| s.node_name).is_none());
                break;
            }
        }
    })
    .await
    .or_fail("timed out waiting for the scheduler");
    served.stop();
}

fn pod_condition(p: &k8s_openapi::api::core::v1::Pod, type_: &str) -> Option<(String, Option<String>, i64)> {
    p.status.as_ref().and_then(|s| s.conditions.as_ref()).and_then(|cs| cs.iter().find(|c| c.type_ == type_)).map(|c| {
        let at = c.last_transition_time.as_ref().map_or(0, |t| t.0.as_second());
        (c.status.clone(), c.reason.clone(), at)
    })
}

/// The events the rescheduler's scenarios use reach the served store, as
/// a client sees them: a budget created (served under policy/v1, its
/// status kept by the disruption controller) and deleted, a node's
/// allocatable changed, a pod added with its scheduling facts and marked
/// Unschedulable at the event's time, a bind that the pod's kubelet
/// follows (PodScheduled=True, Running), and a pending pod marked
/// Unschedulable by `mark-unschedulable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reschedulers_scenario_events_reach_the_served_store() {
    let scenario = nodewarden_cluster::parse_scenario(
        r#"
name: rescheduler events, served
config: {enable-rescheduler: true}
nodes:
- {name: a, zone: r/z, created: -1h, ready: "True", heartbeat: 0s, lease: 0s, kubelet: true, allocatable: {cpu: 2, memory: 4Gi, pods: 10}}
pods:
- {name: default/web-1, owner: ReplicaSet, labels: {app: web}, requests: {cpu: 500m}}
- {name: default/waiting}
events:
- {at: 1s, add-budget: {name: default/web, selector: {matchLabels: {app: web}}, max-unavailable: 1}}
- {at: 1s, set-allocatable: {node: a, allocatable: {cpu: 3, memory: 8Gi, pods: 20}}}
- {at: 2s, bind-pod: {pod: default/web-1, node: a}}
- at: 8s
  add-pod:
    name: kube-system/dns
    requests: {cpu: 1, memory: 70Mi}
    priority-class: system-cluster-critical
    unschedulable-since: now
- {at: 10s, mark-unschedulable: {pod: default/waiting}}
- {at: 20s, delete-budget: default/web}
"#,
    )
    .or_fail("scenario");
    let mut opts = options(0, 0);
    opts.source = ServeSource::File(Box::new(scenario));
    // Twice real time: the budget at 0.5 s, the bind at 1 s, the addon at
    // 4 s, the budget gone at 10 s.
    opts.scenario_speed = 2.0;
    let served = start(opts).await;
    let epoch_secs = served.shared.time.unix_nanos_at_epoch / 1_000_000_000;
    let c = client(&served, true).await;
    let nodes: Api<Node> = Api::all(c.clone());
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.clone(), "default");
    let system: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.clone(), "kube-system");
    let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> = Api::namespaced(c.clone(), "default");
    tokio::time::timeout(Duration::from_secs(30), async {
        // The budget, with the disruption controller's status (1 healthy:
        // the file's pod is Ready, as the file says, before and after its
        // bind; max 1 unavailable: 1 allowed), once the pod is bound.
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let Some(b) = pdbs.get_opt("web").await.or_fail("budget") else { continue };
            let bound = pods.get("web-1").await.or_fail("web-1").spec.and_then(|s| s.node_name).is_some();
            if bound && b.status.as_ref().is_some_and(|s| s.disruptions_allowed == 1 && s.expected_pods == 1) {
                break;
            }
        }
        let alloc = nodes.get("a").await.or_fail("a").status.and_then(|s| s.allocatable).unwrap_or_default();
        let alloc: Vec<(&str, &str)> =
            ["cpu", "memory", "pods"].iter().map(|k| (*k, alloc.get(*k).map_or("", |q| q.0.as_str()))).collect();
        assert_eq!(alloc, [("cpu", "3000m"), ("memory", "8589934592"), ("pods", "20")]);
        let web = pods.get("web-1").await.or_fail("web-1");
        assert_eq!(web.spec.as_ref().and_then(|s| s.node_name.as_deref()), Some("a"));
        assert_eq!(web.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Running"));
        assert_eq!(pod_condition(&web, "PodScheduled").map(|c| c.0).as_deref(), Some("True"));
        // The addon, added at 8 s of the timeline (4 s of wall time), is
        // Unschedulable since then, with its facts.
        let dns = loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if let Some(p) = system.get_opt("dns").await.or_fail("dns") {
                break p;
            }
        };
        let (status, reason, since) = pod_condition(&dns, "PodScheduled").ok_or("none").or_fail("PodScheduled");
        assert_eq!((status.as_str(), reason.as_deref()), ("False", Some("Unschedulable")));
        assert!(since - epoch_secs >= 3, "marked {}s after the start, not at the event", since - epoch_secs);
        let spec = dns.spec.ok_or("none").or_fail("spec");
        assert_eq!(spec.priority_class_name.as_deref(), Some("system-cluster-critical"));
        let requests = spec.containers[0].resources.as_ref().and_then(|r| r.requests.clone()).unwrap_or_default();
        assert_eq!(requests.get("cpu").map(|q| q.0.as_str()), Some("1000m"));
        // The scheduler's verdict the file plays at 10 s (5 s of wall time).
        let waiting = loop {
            let p = pods.get("waiting").await.or_fail("waiting");
            if pod_condition(&p, "PodScheduled").is_some() {
                break p;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let (status, reason, since) = pod_condition(&waiting, "PodScheduled").ok_or("none").or_fail("PodScheduled");
        assert_eq!((status.as_str(), reason.as_deref()), ("False", Some("Unschedulable")));
        assert!(since - epoch_secs >= 4, "marked {}s after the start, not at the event", since - epoch_secs);
        // The budget goes at 20 s of the timeline.
        while pdbs.get_opt("web").await.or_fail("budget").is_some() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .or_fail("timed out waiting for the file's events");
    served.stop();
}
