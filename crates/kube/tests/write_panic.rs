//! A write whose task panics, in a process of its own: the panic's
//! backtrace is read from the binary's debug information, tens of
//! megabytes that would blur `writer_queue`'s memory test beside it.

mod common;

use std::time::Duration;

use nodewarden_controller::ClusterApi;
use nodewarden_engine::{Action, ActionId, ActionKind};
use nodewarden_kube::{Fence, Input, WriterOptions, spawn_writer};
use nodewarden_model::Timestamp;

/// A write whose task panics is contained: it and the write queued behind
/// it for the same node are answered failed (the engine decides again),
/// and the node's next write goes. The panic is injected once the first
/// write is judged; the judgement waits until the second is queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_write_fails_with_the_writes_queued_behind_it() {
    use nodewarden_engine::{Observation, WriteOutcome};
    let (client, server) = common::silent_server().await;
    let (answers, inputs) = crossbeam_channel::unbounded::<Input>();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let (finished_tx, finished) = std::sync::mpsc::channel::<(u64, WriteOutcome)>();
    let (judged_tx, judged) = std::sync::mpsc::channel::<u64>();
    std::thread::spawn(move || {
        for input in inputs {
            match input {
                Input::Judge { action, reply } => {
                    if action.id.0 == 1 {
                        let _ = released.recv();
                    }
                    let _ = judged_tx.send(action.id.0);
                    let _ = reply.send(Ok(()));
                }
                Input::Observe(Observation::WriteFinished { id, outcome }) => {
                    let _ = finished_tx.send((id.0, outcome));
                }
                _ => {}
            }
        }
    });
    let opts = WriterOptions { panic_on: Some(1), ..WriterOptions::default() };
    let (mut api, writer) = spawn_writer(client, answers, opts, Fence::unfenced());
    let status = |id: u64| Action {
        id: ActionId(id),
        kind: ActionKind::PatchNodeLabels { node: "n1".into(), labels: Default::default() },
    };
    let _ = api.apply(Timestamp::from_millis(0), &status(1));
    let _ = api.apply(Timestamp::from_millis(0), &status(2));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = release.send(());
    let mut failed = Vec::new();
    while failed.len() < 2 {
        match finished.recv_timeout(Duration::from_secs(10)) {
            Ok((id, WriteOutcome::Failed(why))) => failed.push((id, why)),
            Ok(other) => panic!("an answer other than a failure: {other:?}"),
            Err(_) => panic!("not every write was answered: {failed:?}"),
        }
    }
    failed.sort();
    assert_eq!(failed.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [1, 2], "{failed:?}");
    assert!(failed[0].1.contains("task ended"), "{failed:?}");
    assert!(failed[1].1.starts_with("not sent: "), "{failed:?}");
    // The node is free again: its next write is judged.
    let _ = api.apply(Timestamp::from_millis(0), &status(3));
    let next =
        (0..3).map(|_| judged.recv_timeout(Duration::from_secs(10))).find(|j| j.as_ref().is_ok_and(|id| *id == 3));
    assert!(next.is_some(), "the node's next write was never judged");
    writer.abort();
    server.abort();
}
