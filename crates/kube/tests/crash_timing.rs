//! A node crash end to end, timed against the rules the replay engine
//! follows: the node is marked Unknown at the first monitor pass after its
//! last Lease renewal + the grace period, and tainted NoExecute within a
//! tainting pass of that (the zone's rate limiter has a token). The crash
//! time is the Lease's last renewTime (microseconds, written by the
//! simulated kubelet); the Unknown status and the taint are timed when the
//! test first sees them, polling every 20 ms (their own timestamps are
//! `metav1.Time`, whole seconds, too coarse here). Seeing is never before
//! writing, so "not too early" is checked exactly and "not too late" with
//! the polling's slack.

mod common;

use std::time::Duration;

use common::{CRASHED, fast_config, options, serve};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use nodewarden_kube::{RunOptions, start};

const GRACE: Duration = Duration::from_secs(2);
const PERIOD: Duration = Duration::from_millis(200);
/// Polling interval plus a request's round trip, on a busy machine.
const SLACK: f64 = 0.15;

fn seconds(t: &k8s_openapi::jiff::Timestamp) -> f64 {
    t.as_nanosecond() as f64 / 1e9
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detection_and_tainting_follow_the_replay_rules_to_within_a_monitor_period() {
    let served = serve(options()).await;
    let client = kube::Client::try_from(common::kube_config(&served).await).expect("client");
    let config = fast_config();
    let running = start(client.clone(), RunOptions { config, ..RunOptions::default() }).expect("config");
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let unix_now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs_f64();
    let (mut unknown_at, mut tainted_at) = (None, None);
    tokio::time::timeout(Duration::from_secs(30), async {
        while tainted_at.is_none() {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let n = nodes.get(CRASHED).await.expect("get");
            let seen = unix_now();
            let ready =
                n.status.and_then(|s| s.conditions).unwrap_or_default().into_iter().find(|c| c.type_ == "Ready");
            if unknown_at.is_none() && ready.is_some_and(|r| r.status == "Unknown") {
                unknown_at = Some(seen);
            }
            let tainted = n
                .spec
                .and_then(|s| s.taints)
                .unwrap_or_default()
                .iter()
                .any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute");
            if tainted {
                tainted_at = Some(seen);
            }
        }
    })
    .await
    .expect("the crashed node was not marked Unknown and tainted within 30 s");
    let (unknown_at, tainted_at) = (unknown_at.expect("Unknown seen"), tainted_at.expect("taint seen"));
    running.stop();
    let lease = leases.get(CRASHED).await.expect("lease");
    let renewed = lease.spec.and_then(|s| s.renew_time).map(|t| seconds(&t.0)).expect("renewTime");
    let detection = unknown_at - renewed;
    // The replay engine: the first pass after renewal + grace, so within
    // [grace, grace + period]; one more period for the wall clock.
    let (lo, hi) = (GRACE.as_secs_f64(), (GRACE + PERIOD * 2).as_secs_f64() + SLACK);
    assert!((lo..=hi).contains(&detection), "Unknown {detection:.3}s after the last renewal; expected {lo}..{hi}");
    let taint = tainted_at - unknown_at;
    // Tainting runs every 100 ms with a token in hand: within a monitor
    // period of the Unknown write.
    assert!((0.0..=PERIOD.as_secs_f64() + SLACK).contains(&taint), "tainted {taint:.3}s after Unknown");
    served.stop();
}
