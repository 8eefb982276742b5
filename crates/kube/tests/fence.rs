//! The writer asks the leader-election fence before every request: with a
//! closed fence the controller decides (the crashed node's Unknown status
//! and taints are due) but nothing reaches the API server.

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
