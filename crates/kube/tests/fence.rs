//! The writer asks the leader-election fence before every request: with a
//! closed fence the controller decides (the crashed node's Unknown status
//! and taints are due) but nothing reaches the API server; and it asks
//! after the write's last judgement, right before the request leaves.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{CRASHED, fast_config as config, options, serve};
use nodewarden_apiserver::ServerConfig;
use nodewarden_kube::{Fence, RunOptions, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_fence_sends_nothing_and_an_open_one_sends() {
    let mut opts = options();
    opts.server = ServerConfig { record_writes: true, ..opts.server };
    let served = serve(opts).await;
    let client = kube::Client::try_from(common::kube_config(&served).await).expect("client");
    let fence = Fence::closed();
    let running =
        start(client.clone(), RunOptions { config: config(), fence: Some(fence.clone()), ..RunOptions::default() })
            .expect("config");
    // Crash at ~1 s, grace 2 s: by 6 s the engine has wanted to write.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(running.health.synced.load(Ordering::Relaxed));
    assert_eq!(served.writes(), Vec::new(), "a fenced replica wrote");
    let fenced = running.stop();
    assert!(fenced.is_empty());

    // The same, unfenced: the writes go out.
    let running = start(client, RunOptions { config: config(), fence: None, ..RunOptions::default() }).expect("config");
    tokio::time::sleep(Duration::from_secs(5)).await;
    running.stop();
    assert!(served.writes().iter().any(|w| w.path.ends_with(&format!("/nodes/{CRASHED}"))), "{:#?}", served.writes());
    served.stop();
}

/// The fence closes while the engine thread is still judging the write
/// (its verdict waits behind a long batch): the verdict says "still true",
/// and the request must not go. Asked before the judgement, as it once
/// was, the fence let it through seconds after the lapse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_closed_during_the_last_judgement_holds_the_request() {
    use nodewarden_engine::{ActionKind, WriteOutcome};
    let fence = Fence::unfenced();
    let closing = fence.clone();
    // One request, no read before it: the node's Unknown status, guarded
    // by the version it was decided on.
    let unknown = common::unknown_ready();
    let status = ActionKind::UpdateNodeConditions { node: "n1".into(), conditions: vec![unknown], version: 3 };
    // A write is judged before it waits for a token and again right
    // before it goes: leadership lapses while that last verdict is being
    // reached.
    let judged = std::sync::atomic::AtomicUsize::new(0);
    let judge = move |_: &nodewarden_engine::Action| {
        if judged.fetch_add(1, Ordering::Relaxed) == 1 {
            closing.close();
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    };
    let node = serde_json::json!({"apiVersion": "v1", "kind": "Node",
                                  "metadata": {"name": "n1", "resourceVersion": "3"}, "spec": {}});
    let driven = common::drive_writer(status, fence, judge, move |_| (200, node.to_string())).await;
    // Reads may follow (the node read back after the write failed); no
    // write may.
    let writes: Vec<_> = driven.asked.iter().filter(|a| a.method != "GET").collect();
    assert!(writes.is_empty(), "a write left after the fence closed: {:?}", driven.asked);
    assert!(matches!(driven.outcome, WriteOutcome::Failed(_)), "{:?}", driven.outcome);
}
