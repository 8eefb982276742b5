//! kube-rs against the served cluster: discovery, get, list with paging
//! and selectors, watch with resume, bookmarks, timeouts and 410,
//! conflicts, preconditioned deletes, evictions a budget forbids, and
//! every API fault kind.

mod common;

use std::time::{Duration, Instant};

use common::{OrFail, client, code, options, start};
use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{
    Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams, Preconditions, WatchEvent, WatchParams,
};
use nodewarden_apiserver::{ApiFault, StoreLimits};
use serde_json::{Value, json};

fn bounded<F: std::future::Future>(f: F) -> tokio::time::Timeout<F> {
    tokio::time::timeout(Duration::from_secs(20), f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_get_list_paging_and_selectors() {
    let served = start(options(6, 5)).await;
    let c = client(&served, true).await;
    bounded(async {
        let v = c.apiserver_version().await.or_fail("version");
        assert_eq!(v.major, "1");
        let discovery = kube::Discovery::new(c.clone()).run().await.or_fail("discovery");
        let groups: Vec<String> = discovery.groups().map(|g| g.name().to_string()).collect();
        for g in ["", "apps", "coordination.k8s.io", "policy", "events.k8s.io"] {
            assert!(groups.iter().any(|x| x == g), "{g} missing from {groups:?}");
        }
        let nodes: Api<Node> = Api::all(c.clone());
        let list = nodes.list(&ListParams::default()).await.or_fail("list nodes");
        assert_eq!(list.items.len(), 6);
        let n0 = nodes.get("node-000000").await.or_fail("get node");
        assert!(n0.metadata.resource_version.is_some());
        // Paged: 30 pods in pages of 7, one consistent snapshot.
        let pods: Api<Pod> = Api::all(c.clone());
        let mut names = Vec::new();
        let mut lp = ListParams::default().limit(7);
        let mut pages = 0;
        let mut rv = None;
        loop {
            let page = pods.list(&lp).await.or_fail("page");
            pages += 1;
            rv.get_or_insert(page.metadata.resource_version.clone());
            assert_eq!(
                rv.as_ref(),
                Some(&page.metadata.resource_version),
                "every page at the first page's resourceVersion"
            );
            names.extend(page.items.iter().filter_map(|p| p.metadata.name.clone()));
            // What is left after this page, as upstream counts it (absent
            // on the last page).
            let left = page.metadata.remaining_item_count;
            match page.metadata.continue_ {
                Some(t) if !t.is_empty() => {
                    assert_eq!(left, Some(30 - names.len() as i64), "remainingItemCount after page {pages}");
                    lp = ListParams::default().limit(7).continue_token(&t)
                }
                _ => {
                    assert_eq!(left, None, "no remainingItemCount on the last page");
                    break;
                }
            }
        }
        assert_eq!((names.len(), pages), (30, 5));
        // Paged within a namespace: the count is of that namespace only.
        let system: Api<Pod> = Api::namespaced(c.clone(), "kube-system");
        let mut seen = 0;
        let mut lp = ListParams::default().limit(5);
        loop {
            let page = system.list(&lp).await.or_fail("namespaced page");
            seen += page.items.len() as i64;
            match page.metadata.continue_ {
                Some(t) if !t.is_empty() => {
                    assert_eq!(page.metadata.remaining_item_count, Some(12 - seen), "kube-system's pods left");
                    lp = ListParams::default().limit(5).continue_token(&t)
                }
                _ => break,
            }
        }
        assert_eq!(seen, 12);
        let on_node =
            pods.list(&ListParams::default().fields("spec.nodeName=node-000002")).await.or_fail("field selector");
        assert_eq!(on_node.items.len(), 5);
        let ds =
            pods.list(&ListParams::default().fields("metadata.namespace=kube-system")).await.or_fail("ns selector");
        assert_eq!(ds.items.len(), 12);
        // The fleet's workloads: Deployments of 3, 5 and 6 replicas and a
        // StatefulSet of 4 (db-0001), each pod with its controller's labels.
        let by_label = pods.list(&ListParams::default().labels("pod-template-hash")).await.or_fail("labels");
        assert_eq!(by_label.items.len(), 14, "the Deployments' pods");
        let sts = pods.list(&ListParams::default().labels("app=db-0001")).await.or_fail("labels");
        assert_eq!(sts.items.len(), 4);
        assert!(
            sts.items.iter().all(|p| p.metadata.owner_references.as_ref().is_some_and(|o| o.len() == 1
                && o[0].kind == "StatefulSet"
                && o[0].name == "db-0001"
                && o[0].controller == Some(true))),
            "{:?}",
            sts.items.iter().map(|p| &p.metadata.owner_references).collect::<Vec<_>>()
        );
        let any = pods.list(&ListParams::default().match_any()).await.or_fail("rv=0");
        assert_eq!(any.items.len(), 30);
        let bad = pods.list(&ListParams::default().fields("spec.bogus=1")).await.err();
        assert_eq!(bad.as_ref().and_then(code), Some(400));
        let leases: Api<Lease> = Api::namespaced(c.clone(), "kube-node-lease");
        assert_eq!(leases.list(&ListParams::default()).await.or_fail("leases").items.len(), 6);
        let nss: Api<Namespace> = Api::all(c.clone());
        assert!(nss.get("kube-node-lease").await.is_ok());
        let missing = nodes.get("nope").await.err();
        assert_eq!(missing.as_ref().and_then(code), Some(404));
    })
    .await
    .or_fail("timed out");
    served.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_resumes_bookmarks_times_out_and_says_410_when_too_old() {
    let mut opts = options(2, 2);
    opts.limits = StoreLimits { history: 50, ..StoreLimits::default() };
    let served = start(opts).await;
    let c = client(&served, true).await;
    bounded(async {
        let nodes: Api<Node> = Api::all(c.clone());
        let rv = nodes.list(&ListParams::default()).await.or_fail("list").metadata.resource_version.unwrap_or_default();
        let label = |v: &str| Patch::Merge(json!({"metadata": {"labels": {"step": v}}}));
        nodes.patch("node-000001", &PatchParams::default(), &label("one")).await.or_fail("patch one");
        // Resume from the list: the change is there, in order.
        let wp = WatchParams::default().fields("metadata.name=node-000001").timeout(5);
        let mut stream = nodes.watch(&wp, &rv).await.or_fail("watch").boxed();
        let mut seen_rv = String::new();
        while let Some(ev) = stream.try_next().await.or_fail("event") {
            if let WatchEvent::Modified(n) = ev
                && n.metadata.labels.as_ref().and_then(|l| l.get("step")).map(String::as_str) == Some("one")
            {
                seen_rv = n.metadata.resource_version.unwrap_or_default();
                break;
            }
        }
        assert!(!seen_rv.is_empty());
        drop(stream);
        nodes.patch("node-000001", &PatchParams::default(), &label("two")).await.or_fail("patch two");
        let mut stream = nodes.watch(&wp, &seen_rv).await.or_fail("resume").boxed();
        match stream.try_next().await.or_fail("resumed event") {
            Some(WatchEvent::Modified(n)) => {
                assert_eq!(n.metadata.labels.and_then(|l| l.get("step").cloned()).as_deref(), Some("two"));
            }
            other => panic!("expected the second change first, got {other:?}"),
        }
        drop(stream);
        // Bookmarks arrive, and the server ends the watch at its timeout.
        let started = Instant::now();
        let wp = WatchParams::default().timeout(2);
        let mut stream = nodes.watch(&wp, &seen_rv).await.or_fail("bookmark watch").boxed();
        let mut bookmarks = 0;
        while let Some(ev) = stream.try_next().await.or_fail("event") {
            if matches!(ev, WatchEvent::Bookmark(_)) {
                bookmarks += 1;
            }
        }
        let took = started.elapsed();
        assert!(bookmarks >= 2, "{bookmarks} bookmarks");
        assert!(took >= Duration::from_millis(1900) && took < Duration::from_secs(5), "{took:?}");
        // The kubelets' status posts roll the 50-change window on: the
        // first resourceVersion is long gone.
        tokio::time::sleep(Duration::from_millis(200)).await;
        for i in 0..60 {
            nodes.patch("node-000000", &PatchParams::default(), &label(&format!("x{i}"))).await.or_fail("churn");
        }
        let mut stream = nodes.watch(&WatchParams::default(), &rv).await.or_fail("old watch").boxed();
        match stream.try_next().await.or_fail("410 event") {
            Some(WatchEvent::Error(e)) => {
                assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
                assert!(e.message.starts_with("too old resource version:"), "{}", e.message);
            }
            other => panic!("expected 410, got {other:?}"),
        }
        // kube-runtime's watcher relists after a 410 and keeps going.
        let stream = kube::runtime::watcher(nodes.clone(), kube::runtime::watcher::Config::default());
        let first = kube::runtime::WatchStreamExt::applied_objects(stream)
            .take(2)
            .try_collect::<Vec<_>>()
            .await
            .or_fail("watcher");
        assert_eq!(first.len(), 2);
    })
    .await
    .or_fail("timed out");
    served.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_updates_conflict_and_deletes_honour_preconditions() {
    let served = start(options(2, 3)).await;
    let c = client(&served, true).await;
    bounded(async {
        let nodes: Api<Node> = Api::all(c.clone());
        let mut stale = nodes.get("node-000000").await.or_fail("get");
        nodes
            .patch("node-000000", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"a": "1"}}})))
            .await
            .or_fail("patch");
        stale.metadata.labels.get_or_insert_default().insert("b".into(), "2".into());
        let e = nodes.replace("node-000000", &PostParams::default(), &stale).await.err();
        assert_eq!(e.as_ref().and_then(code), Some(409), "{e:?}");
        // A JSON patch with a resourceVersion test is refused when stale too.
        let fresh = nodes.get("node-000000").await.or_fail("get");
        let mut updated = fresh.clone();
        updated.spec.get_or_insert_default().unschedulable = Some(true);
        let done = nodes.replace("node-000000", &PostParams::default(), &updated).await.or_fail("replace");
        assert_ne!(done.metadata.resource_version, fresh.metadata.resource_version);
        assert_eq!(done.spec.and_then(|s| s.unschedulable), Some(true));

        let pods: Api<Pod> = Api::namespaced(c.clone(), "apps");
        let name =
            pods.list(&ListParams::default()).await.or_fail("pods").items[0].metadata.name.clone().unwrap_or_default();
        let pod = pods.get(&name).await.or_fail("get pod");
        let wrong_uid =
            DeleteParams::default().preconditions(Preconditions { uid: Some("nope".into()), resource_version: None });
        assert_eq!(pods.delete(&name, &wrong_uid).await.err().as_ref().and_then(code), Some(409));
        let wrong_rv =
            DeleteParams::default().preconditions(Preconditions { uid: None, resource_version: Some("1".into()) });
        assert_eq!(pods.delete(&name, &wrong_rv).await.err().as_ref().and_then(code), Some(409));
        assert!(pods.get(&name).await.is_ok(), "a refused delete changes nothing");
        let right = DeleteParams::default().preconditions(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: pod.metadata.resource_version.clone(),
        });
        pods.delete(&name, &right).await.or_fail("delete");
        assert_eq!(pods.get(&name).await.err().as_ref().and_then(code), Some(404), "a deleted pod is gone");
    })
    .await
    .or_fail("timed out");
    served.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_is_refused_with_429_when_a_budget_forbids() {
    let served = start(options(2, 4)).await;
    let c = client(&served, false).await;
    bounded(async {
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(c.clone(), "apps");
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "workload"},
            "spec": {"minAvailable": 5, "selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}},
        }))
        .or_fail("pdb json");
        pdbs.create(&PostParams::default(), &pdb).await.or_fail("create pdb");
        let pods: Api<Pod> = Api::namespaced(c.clone(), "apps");
        let names: Vec<String> = pods
            .list(&ListParams::default())
            .await
            .or_fail("pods")
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        assert_eq!(names.len(), 6);
        pods.evict(&names[0], &EvictParams::default()).await.or_fail("first eviction is allowed");
        assert_eq!(pods.get(&names[0]).await.err().as_ref().and_then(code), Some(404));
        let e = pods.evict(&names[1], &EvictParams::default()).await.err();
        match &e {
            Some(kube::Error::Api(s)) => {
                assert_eq!((s.code, s.reason.as_str()), (429, "TooManyRequests"));
                assert!(s.message.contains("disruption budget"), "{}", s.message);
            }
            other => panic!("expected 429, got {other:?}"),
        }
        assert!(pods.get(&names[1]).await.is_ok(), "the refused eviction deleted nothing");
        // The disruption controller's status comes within a second.
        tokio::time::sleep(Duration::from_millis(1300)).await;
        let st = pdbs.get("workload").await.or_fail("get pdb").status.or_fail_none();
        assert_eq!((st.expected_pods, st.current_healthy, st.desired_healthy, st.disruptions_allowed), (5, 5, 5, 0));
    })
    .await
    .or_fail("timed out");
    served.stop();
}

/// What the critical-addon rescheduler relies on: budgets watched with
/// `status.disruptionsAllowed` kept current as pods change, evictions
/// with a grace period (seen in the DELETED event), nodes' allocatable,
/// and a scheduler's writes (PodScheduled=False/Unschedulable through the
/// status subresource, then a Binding).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_evictions_with_grace_and_bindings_serve_the_rescheduler() {
    let served = start(options(2, 4)).await;
    let c = client(&served, false).await;
    bounded(async {
        let node = Api::<Node>::all(c.clone()).get("node-000000").await.or_fail("node");
        let alloc = node.status.and_then(|s| s.allocatable).or_fail_none();
        assert_eq!(alloc.get("pods").map(|q| q.0.as_str()), Some("110"));
        assert!(alloc.contains_key("cpu") && alloc.contains_key("memory"));

        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(c.clone(), "apps");
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "workload"},
            "spec": {"minAvailable": 5, "selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}},
        }))
        .or_fail("pdb json");
        let created = pdbs.create(&PostParams::default(), &pdb).await.or_fail("create pdb");
        let rv = created.metadata.resource_version.clone().or_fail_none();
        let mut budget_events = pdbs.watch(&WatchParams::default(), &rv).await.or_fail("watch pdbs").boxed();
        // The disruption controller's status arrives through the watch: six
        // healthy pods, five needed.
        let allowed_seen = |want: i32| {
            move |e: &WatchEvent<PodDisruptionBudget>| {
                matches!(e, WatchEvent::Modified(b) if b.status.as_ref().is_some_and(|s| s.disruptions_allowed == want))
            }
        };
        loop {
            let e = budget_events.try_next().await.or_fail("pdb watch").or_fail_none();
            if allowed_seen(1)(&e) {
                break;
            }
        }

        let pods: Api<Pod> = Api::namespaced(c.clone(), "apps");
        let names: Vec<String> =
            pods.list(&ListParams::default()).await.or_fail("pods").items.into_iter().filter_map(|p| p.metadata.name).collect();
        let rv = pods.list(&ListParams::default()).await.or_fail("pods").metadata.resource_version.or_fail_none();
        let mut pod_events = pods.watch(&WatchParams::default(), &rv).await.or_fail("watch pods").boxed();
        // As policy/v1 spells it (kube-rs 5's `evict` writes `delete_options`,
        // which an API server drops).
        let evict = |name: &str, grace: Value| {
            let body = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name},
                              "deleteOptions": {"gracePeriodSeconds": grace}});
            hyper::Request::post(format!("/api/v1/namespaces/apps/pods/{name}/eviction"))
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&body).unwrap_or_default())
                .or_fail("request")
        };
        c.request::<Value>(evict(&names[0], json!(10))).await.or_fail("eviction allowed by the budget");
        loop {
            match pod_events.try_next().await.or_fail("pod watch").or_fail_none() {
                WatchEvent::Deleted(p) if p.metadata.name.as_deref() == Some(names[0].as_str()) => {
                    assert_eq!(p.metadata.deletion_grace_period_seconds, Some(10));
                    assert!(p.metadata.deletion_timestamp.is_some());
                    break;
                }
                _ => {}
            }
        }
        // One pod fewer: the budget allows no more, and says so.
        loop {
            let e = budget_events.try_next().await.or_fail("pdb watch").or_fail_none();
            if allowed_seen(0)(&e) {
                break;
            }
        }
        let e = c.request::<Value>(evict(&names[1], json!("ten"))).await.err();
        assert_eq!(e.as_ref().and_then(code), Some(400), "{e:?}");

        // A scheduler's writes: Unschedulable, then a binding.
        let addon: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "dns", "namespace": "apps"},
            "spec": {"priorityClassName": "system-cluster-critical",
                     "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}]},
        }))
        .or_fail("addon");
        pods.create(&PostParams::default(), &addon).await.or_fail("create addon");
        let mut p = pods.get_status("dns").await.or_fail("status");
        p.status.get_or_insert_default().conditions = Some(vec![serde_json::from_value(json!({
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}))
        .or_fail("condition")]);
        pods.replace_status("dns", &PostParams::default(), &p).await.or_fail("status");
        let got = pods.get("dns").await.or_fail("get");
        let cond = got.status.and_then(|s| s.conditions).or_fail_none();
        assert_eq!((cond[0].reason.as_deref(), cond[0].status.as_str()), (Some("Unschedulable"), "False"));

        let bind = |node: &str| {
            let body = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "dns"},
                              "target": {"kind": "Node", "name": node}});
            hyper::Request::post("/api/v1/namespaces/apps/pods/dns/binding")
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&body).unwrap_or_default())
                .or_fail("request")
        };
        c.request::<Value>(bind("node-000001")).await.or_fail("bind");
        let bound = pods.get("dns").await.or_fail("get");
        assert_eq!(bound.spec.and_then(|s| s.node_name).as_deref(), Some("node-000001"));
        let st = bound.status.or_fail_none();
        assert_eq!(st.phase.as_deref(), Some("Running"));
        assert!(st.conditions.or_fail_none().iter().any(|c| c.type_ == "PodScheduled" && c.status == "True"));
        let again = c.request::<Value>(bind("node-000000")).await.err();
        assert_eq!(again.as_ref().and_then(code), Some(409), "already bound: {again:?}");
    })
    .await
    .or_fail("timed out");
    served.stop();
}

trait OrFailNone<T> {
    fn or_fail_none(self) -> T;
}

impl<T> OrFailNone<T> for Option<T> {
    fn or_fail_none(self) -> T {
        match self {
            Some(v) => v,
            None => panic!("missing"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_api_fault_kind() {
    let served = start(options(2, 1)).await;
    let raw = client(&served, false).await;
    let retrying = client(&served, true).await;
    bounded(async {
        let nodes: Api<Node> = Api::all(raw.clone());
        // 5xx storm.
        served.faults().inject(ApiFault::Errors { rate: 1.0, code: 503 }, None);
        assert_eq!(nodes.get("node-000000").await.err().as_ref().and_then(code), Some(503));
        served.faults().clear();
        served.faults().inject(ApiFault::Errors { rate: 1.0, code: 500 }, None);
        assert_eq!(nodes.get("node-000000").await.err().as_ref().and_then(code), Some(500));
        served.faults().clear();
        // 429 with Retry-After: a raw client sees it; kube's default retry
        // waits as told and gets through once the throttling ends.
        served.faults().inject(ApiFault::Throttle { rate: 1.0, retry_after: 1 }, Some(Duration::from_millis(1500)));
        assert_eq!(nodes.get("node-000000").await.err().as_ref().and_then(code), Some(429));
        let started = Instant::now();
        Api::<Node>::all(retrying.clone()).get("node-000000").await.or_fail("retried through 429");
        assert!(started.elapsed() >= Duration::from_millis(900), "{:?}", started.elapsed());
        // Latency.
        served.faults().inject(ApiFault::Latency(Duration::from_millis(300)), Some(Duration::from_secs(2)));
        let started = Instant::now();
        nodes.get("node-000000").await.or_fail("slow get");
        assert!(started.elapsed() >= Duration::from_millis(300));
        served.faults().clear();
        // Dropped watches end (cleanly: the client resumes).
        let mut stream = nodes.watch(&WatchParams::default().timeout(30), "0").await.or_fail("watch").boxed();
        for _ in 0..2 {
            stream.try_next().await.or_fail("initial");
        }
        served.faults().inject(ApiFault::DropWatches, None);
        let started = Instant::now();
        while let Ok(Some(_)) = stream.try_next().await {}
        assert!(started.elapsed() < Duration::from_secs(5));
        // A full outage: connections are cut, then everything works again.
        let mut stream = nodes.watch(&WatchParams::default().timeout(30), "0").await.or_fail("watch").boxed();
        stream.try_next().await.or_fail("initial");
        served.faults().inject(ApiFault::Outage, Some(Duration::from_millis(800)));
        // The connection is cut mid-stream (kube-rs reads that as the end
        // of the watch, as it does when a real API server goes away).
        let started = Instant::now();
        while let Some(Ok(_)) = stream.next().await {}
        assert!(started.elapsed() < Duration::from_secs(5), "an outage cuts open watches");
        let fresh = client(&served, false).await;
        let e = Api::<Node>::all(fresh).get("node-000000").await.err();
        assert!(e.is_some() && code(e.as_ref().or_fail_none()).is_none(), "no API answer during an outage: {e:?}");
        tokio::time::sleep(Duration::from_millis(900)).await;
        Api::<Node>::all(client(&served, false).await).get("node-000000").await.or_fail("after the outage");
    })
    .await
    .or_fail("timed out");
    served.stop();
}
