//! The writer's queue against an API server that never answers, with the
//! engine's side played by the test: what a backlog costs in memory, and
//! that a write withdrawn before it went lets its object's next one go.
//!
//! A zone outage decides a write per pod of the zone at once: at 40k nodes
//! and 1M pods, 333k not-ready marks within seconds, sent at 20 a second.
//! When each waiting write had a task of its own (about 9 KiB), that
//! backlog took `run` from 0.5 to 3.7 GiB. The memory test reads how much
//! the process's resident memory grows while the writer holds a backlog it
//! cannot send, and bounds the cost per waiting write. It measures memory,
//! not time.

mod common;

use std::sync::Arc;
use std::time::Duration;

use nodewarden_controller::ClusterApi;
use nodewarden_engine::{Action, ActionId, ActionKind, Changed, Withdrawal};
use nodewarden_kube::{Fence, Input, WriterOptions, spawn_writer};
use nodewarden_model::Timestamp;

/// The process's resident memory, in bytes (Linux's `/proc`; the crates
/// forbid the `unsafe` a counting allocator would take). The backlog is
/// large enough that what it costs dwarfs the noise of the rest.
fn resident() -> isize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status (Linux)");
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<isize>().ok())
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}

/// Waiting writes in the backlog.
const BACKLOG: usize = 50_000;

/// What one waiting write may cost, all of it counted: the action as the
/// engine handed it over (its pod's name and uid), its place in the queue,
/// its share of the writer's bookkeeping, and the allocator's overhead.
const BYTES_PER_WRITE: isize = 1024;

/// A writer whose API server accepts connections and never answers:
/// nothing it sends ever finishes. `verdict` plays the engine thread's
/// side of each judgement; the ids judged are counted in order.
struct Silent {
    api: nodewarden_kube::KubeApi,
    writer: tokio::task::JoinHandle<()>,
    server: tokio::task::JoinHandle<()>,
    judged: Arc<std::sync::Mutex<Vec<u64>>>,
}

impl Silent {
    async fn start(verdict: impl Fn(&Action) -> Result<(), Withdrawal> + Send + 'static) -> Silent {
        let (client, server) = common::silent_server().await;
        let (answers, inputs) = crossbeam_channel::unbounded::<Input>();
        let judged = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = judged.clone();
        std::thread::spawn(move || {
            for input in inputs {
                if let Input::Judge { action, reply } = input {
                    seen.lock().expect("judged").push(action.id.0);
                    let _ = reply.send(verdict(&action));
                }
            }
        });
        let opts = WriterOptions { qps: 1.0, burst: 1, ..WriterOptions::default() };
        let (api, writer) = spawn_writer(client, answers, opts, Fence::unfenced());
        Silent { api, writer, server, judged }
    }

    fn judged(&self) -> Vec<u64> {
        self.judged.lock().expect("judged").clone()
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.writer.abort();
        self.server.abort();
    }
}

fn mark(id: u64, pod: &str) -> Action {
    Action {
        id: ActionId(id),
        kind: ActionKind::MarkPodNotReady { pod: pod.into(), uid: format!("5c3a9d2e-0000-4000-8000-{id:012}") },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_costs_a_bounded_amount_per_waiting_write() {
    let mut silent = Silent::start(|_| Ok(())).await;
    // Let the writer and the client set themselves up before counting.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let before = resident();
    for i in 0..BACKLOG {
        let _ = silent.api.apply(Timestamp::from_millis(0), &mark(i as u64, &format!("zone-a/pod-{i:07}")));
    }
    // Until the writer has taken every action in and the memory it holds
    // has settled (the channel's blocks freed, the first writes started).
    let mut last = resident();
    let mut steady = 0;
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = resident();
        steady = if now == last && !silent.judged().is_empty() { steady + 1 } else { 0 };
        last = now;
        if steady >= 4 {
            break;
        }
    }
    assert!(steady >= 4, "the writer's memory did not settle");
    let per_write = (last - before) / BACKLOG as isize;
    let started = silent.judged().len();
    println!("{BACKLOG} waiting writes: {} bytes resident more, {per_write} a write; {started} started", last - before);
    assert!(
        per_write <= BYTES_PER_WRITE,
        "a waiting write costs {per_write} bytes (at most {BYTES_PER_WRITE}); {} held for {BACKLOG} writes",
        last - before
    );
    // Only a bounded number were started (judged before waiting for a
    // token); the rest wait as data.
    assert!(started < BACKLOG / 10, "{started} of {BACKLOG} writes were started at once");
}

/// A write withdrawn before it went (its only action no longer true)
/// finishes its object's turn: the object's next write is judged and goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_withdrawn_write_lets_its_objects_next_write_go() {
    let gone = || Withdrawal::NoLongerTrue(Changed::PodGone);
    let mut silent = Silent::start(move |a| if a.id.0 == 1 { Err(gone()) } else { Ok(()) }).await;
    let _ = silent.api.apply(Timestamp::from_millis(0), &mark(1, "ns/p"));
    for _ in 0..100 {
        if !silent.judged().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = silent.api.apply(Timestamp::from_millis(0), &mark(2, "ns/p"));
    for _ in 0..250 {
        if silent.judged().contains(&2) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the pod's next write never went: judged {:?}", silent.judged());
}

/// Similar Events that waited together go out as one, with a count, as
/// upstream's event correlator sends a run of them. A node's first
/// `NodeNotReady` Event takes the only token; of the four decided after it
/// went, the first is in line for the next token (one write of a class in
/// line at a time here) and the three behind it leave as one Event
/// counted three times, its message the newest, marked as combined
/// (their messages differed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn similar_events_that_waited_together_are_sent_once_with_a_count() {
    use k8s_openapi::api::events::v1::Event as KEvent;
    use nodewarden_engine::{Event, EventType, ObjectRef};

    let served = nodewarden_testkit::served::serve(nodewarden_testkit::served::node_crash_fleet()).await;
    let client = nodewarden_testkit::served::client(&served, "nodewarden-kube-test", false).await;
    let (answers, _inputs) = crossbeam_channel::unbounded::<Input>();
    // One write of a class in line at a time: the rest wait as data.
    let opts = WriterOptions { qps: 0.5, burst: 1, in_line: 1, ..WriterOptions::default() };
    let (mut api, writer) = spawn_writer(client.clone(), answers, opts, Fence::unfenced());
    let event = |id: u64, message: &str| Action {
        id: ActionId(id),
        kind: ActionKind::RecordEvent(Event {
            object: ObjectRef::Node("node-000000".into()),
            kind: EventType::Normal,
            reason: "NodeNotReady",
            message: message.into(),
        }),
    };
    let _ = api.apply(Timestamp::from_millis(0), &event(1, "first"));
    // The first is sent; these wait for the next tokens, 2 s apart.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (id, message) in [(2, "m1"), (3, "m1"), (4, "m2"), (5, "m3")] {
        let _ = api.apply(Timestamp::from_millis(0), &event(id, message));
    }
    let events: kube::Api<KEvent> = kube::Api::namespaced(client, "default");
    let mut sent = Vec::new();
    for _ in 0..100 {
        sent = events.list(&Default::default()).await.expect("events").items;
        sent.retain(|e| e.reason.as_deref() == Some("NodeNotReady"));
        if sent.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Another token's worth of time: nothing more goes out.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let mut all = events.list(&Default::default()).await.expect("events").items;
    all.retain(|e| e.reason.as_deref() == Some("NodeNotReady"));
    writer.abort();
    let mut summary: Vec<(String, Option<i32>)> =
        all.iter().map(|e| (e.note.clone().unwrap_or_default(), e.series.as_ref().map(|s| s.count))).collect();
    summary.sort();
    assert_eq!(
        summary,
        vec![
            ("(combined from similar events): m3".to_string(), Some(3)),
            ("first".to_string(), None),
            ("m1".to_string(), None)
        ],
        "{sent:?}"
    );
}
