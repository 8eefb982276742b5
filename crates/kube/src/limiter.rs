//! The writer's client-side rate limits, handed out by priority.
//!
//! kube-controller-manager gives its node lifecycle controller and its
//! taint-eviction controller a client each, built from the same
//! `--kube-api-qps` and `--kube-api-burst`, so each has its own token
//! bucket (client-go's flowcontrol limiter: that many tokens a second, at
//! most the burst saved). [`Budgets`] keeps the same two: the deletions
//! and the status writes that go with them spend the taint-eviction
//! client's, everything else node lifecycle's. In legacy mode
//! (`--enable-taint-manager=false`) node lifecycle deletes pods itself,
//! through its own client: one bucket for everything.
//!
//! Within a bucket, requests are handed tokens in the order
//! [`Bucket`] gives (the most urgent class first, with its two guards):
//! that order is shared with the simulated API server, which sends a
//! scenario's writes under the same rate.
//!
//! The Lease is not renewed through this limiter (leader election has a
//! client of its own, as kube-controller-manager's has), and a `Retry-After`
//! pauses only the request that received it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use nodewarden_controller::write_order::{Bucket, Turn};
pub use nodewarden_controller::write_order::{EvictionClient, WriteClass};
use tokio::sync::{mpsc, oneshot};

type Waiter = oneshot::Sender<()>;

/// What waits for a token: its class, whether a request of the same write
/// went out already, and where the token goes.
struct Ask {
    class: WriteClass,
    continuing: bool,
    waiter: Waiter,
}

/// See the module's description.
pub struct Limiter {
    asks: mpsc::UnboundedSender<Ask>,
}

/// The waiting requests, by class, a write's later requests (the update
/// after its read, a retry) ahead of the first requests of writes not
/// started yet: otherwise every write of a large batch would make its read
/// before any made its update, and the first update would wait for the
/// whole batch's reads.
#[derive(Default)]
struct Waiting {
    queues: [[VecDeque<Waiter>; 2]; 4],
}

impl Waiting {
    fn push(&mut self, ask: Ask) {
        self.queues[ask.class as usize][usize::from(!ask.continuing)].push_back(ask.waiter);
    }

    fn pop(&mut self, class: WriteClass) -> Option<Waiter> {
        let [continuing, starting] = &mut self.queues[class as usize];
        continuing.pop_front().or_else(|| starting.pop_front())
    }

    fn has(&self, class: WriteClass) -> bool {
        self.queues[class as usize].iter().any(|q| !q.is_empty())
    }
}

impl Limiter {
    /// Starts the dispenser task on the current tokio runtime.
    pub fn new(qps: f64, burst: u32) -> Limiter {
        // Tokens come per second of the process's clock, which runs faster
        // than real time under `cargo xtask wire` (`wall`).
        let mut bucket = Bucket::new(qps.max(0.001) * nodewarden_model::wall::rate(), burst);
        let (asks, mut rx) = mpsc::unbounded_channel::<Ask>();
        tokio::spawn(async move {
            let mut last = Instant::now();
            let mut waiting = Waiting::default();
            let mut open = true;
            loop {
                while let Ok(ask) = rx.try_recv() {
                    waiting.push(ask);
                }
                let now = Instant::now();
                bucket.refill(now.duration_since(last).as_secs_f64());
                last = now;
                match bucket.turn(|c| waiting.has(c)) {
                    Turn::Idle => {
                        if !open {
                            return;
                        }
                        match rx.recv().await {
                            Some(ask) => waiting.push(ask),
                            None => open = false,
                        }
                    }
                    Turn::Wait(_, seconds) => {
                        // Until the bucket holds enough, or a more urgent
                        // ask arrives (an Event's wait is cut short by a
                        // write).
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_secs_f64(seconds)) => {}
                            ask = rx.recv(), if open => match ask {
                                Some(ask) => waiting.push(ask),
                                None => open = false,
                            },
                        }
                    }
                    Turn::Go(class) => {
                        // A waiter that gave up (its task was aborted)
                        // costs nothing.
                        let spent = waiting.pop(class).is_some_and(|w| w.send(()).is_ok());
                        bucket.grant(class, spent);
                    }
                }
            }
        });
        Limiter { asks }
    }

    /// Waits for a token at `class`'s turn; `continuing` when a request of
    /// the same write went out already.
    pub async fn acquire(&self, class: WriteClass, continuing: bool) {
        let (waiter, rx) = oneshot::channel();
        if self.asks.send(Ask { class, continuing, waiter }).is_ok() {
            let _ = rx.await;
        }
    }
}

/// The writer's buckets: node lifecycle's, and the taint-eviction
/// controller's when it has its own client ([`EvictionClient`]).
pub struct Budgets {
    client: EvictionClient,
    lifecycle: Limiter,
    /// Started only when the deletions have a client of their own.
    eviction: Option<Limiter>,
}

impl Budgets {
    /// Starts the buckets' dispensers on the current tokio runtime.
    pub fn new(qps: f64, burst: u32, client: EvictionClient) -> Budgets {
        let eviction = (client == EvictionClient::Own).then(|| Limiter::new(qps, burst));
        Budgets { client, lifecycle: Limiter::new(qps, burst), eviction }
    }

    /// Waits for a token from the bucket `class` spends, at its turn.
    pub async fn acquire(&self, class: WriteClass, continuing: bool) {
        match &self.eviction {
            Some(eviction) if self.client.spends_own(class) => eviction.acquire(class, continuing).await,
            _ => self.lifecycle.acquire(class, continuing).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use nodewarden_controller::write_order::NODE_STREAK;

    use super::*;

    async fn take(limiter: Arc<Limiter>, class: WriteClass, order: Arc<Mutex<Vec<WriteClass>>>) {
        limiter.acquire(class, false).await;
        order.lock().expect("order").push(class);
    }

    #[tokio::test]
    async fn held_back_requests_go_most_urgent_first_at_the_configured_rate() {
        // Two tokens saved (an Event takes one only while both are there),
        // then 20 a second.
        let limiter = Arc::new(Limiter::new(20.0, 2));
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for _ in 0..6 {
            tasks.push(tokio::spawn(take(limiter.clone(), WriteClass::Event, order.clone())));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        let started = Instant::now();
        for class in [WriteClass::PodStatus, WriteClass::Deletion, WriteClass::Node] {
            tasks.push(tokio::spawn(take(limiter.clone(), class, order.clone())));
        }
        for t in tasks {
            t.await.expect("task");
        }
        let order = order.lock().expect("order").clone();
        // The first Event took a saved token; the writes come before the
        // Events still waiting, most urgent first.
        assert_eq!(
            &order[..4],
            &[WriteClass::Event, WriteClass::Node, WriteClass::Deletion, WriteClass::PodStatus],
            "{order:?}"
        );
        // Eight tokens after the two saved at 20 a second: about 400 ms.
        assert!(started.elapsed() >= Duration::from_millis(300), "{:?}", started.elapsed());
    }

    #[tokio::test]
    async fn events_leave_half_the_burst_to_the_writes_that_follow() {
        let limiter = Arc::new(Limiter::new(1.0, 10));
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for _ in 0..10 {
            tasks.push(tokio::spawn(take(limiter.clone(), WriteClass::Event, order.clone())));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Five Events took the tokens above half the bucket; the rest wait.
        assert_eq!(order.lock().expect("order").len(), 5);
        let started = Instant::now();
        for _ in 0..5 {
            limiter.acquire(WriteClass::Deletion, false).await;
        }
        assert!(started.elapsed() < Duration::from_millis(500), "the reserve was there: {:?}", started.elapsed());
        for t in tasks {
            t.abort();
        }
    }

    /// A zone outage's node writes saturate node lifecycle's bucket; the
    /// deletions due go through the taint-eviction client's own, as
    /// kube-controller-manager's two controllers each have a client. Told
    /// by order, not by time: how many of the waiting node requests were
    /// granted before the deletion was.
    #[tokio::test]
    async fn deletions_spend_a_bucket_of_their_own_unless_shared() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        for eviction in [EvictionClient::Own, EvictionClient::Shared] {
            // One token saved, then 2 a second (a node request granted
            // every 500 ms, far longer than a grant from a full bucket
            // takes); eight node requests wait behind the first.
            let budgets = Arc::new(Budgets::new(2.0, 1, eviction));
            budgets.acquire(WriteClass::Node, false).await;
            let granted = Arc::new(AtomicUsize::new(0));
            let mut nodes = Vec::new();
            for _ in 0..8 {
                let (b, g) = (budgets.clone(), granted.clone());
                nodes.push(tokio::spawn(async move {
                    b.acquire(WriteClass::Node, false).await;
                    g.fetch_add(1, Ordering::SeqCst);
                }));
            }
            tokio::task::yield_now().await;
            budgets.acquire(WriteClass::Deletion, false).await;
            let before = granted.load(Ordering::SeqCst);
            match eviction {
                EvictionClient::Own => assert_eq!(before, 0, "a full bucket of its own"),
                // Behind a streak of node requests in the shared bucket.
                EvictionClient::Shared => assert!(before >= NODE_STREAK as usize, "{before} node requests first"),
            }
            for t in nodes {
                t.abort();
            }
        }
    }

    #[tokio::test]
    async fn a_waiting_deletion_goes_after_a_streak_of_node_requests() {
        // One token saved, then 50 a second; eight node requests and one
        // deletion wait behind the first node request.
        let limiter = Arc::new(Limiter::new(50.0, 1));
        let order = Arc::new(Mutex::new(Vec::new()));
        limiter.acquire(WriteClass::Node, false).await;
        let mut tasks = Vec::new();
        for _ in 0..8 {
            tasks.push(tokio::spawn(take(limiter.clone(), WriteClass::Node, order.clone())));
        }
        tasks.push(tokio::spawn(take(limiter.clone(), WriteClass::Deletion, order.clone())));
        for t in tasks {
            t.await.expect("task");
        }
        let order = order.lock().expect("order").clone();
        let deletion = order.iter().position(|u| *u == WriteClass::Deletion);
        // Node requests keep precedence, but not for ever.
        assert_eq!(deletion, Some(NODE_STREAK as usize), "{order:?}");
    }

    #[tokio::test]
    async fn a_started_write_goes_before_writes_not_started() {
        let limiter = Arc::new(Limiter::new(50.0, 1));
        let order = Arc::new(Mutex::new(Vec::new()));
        limiter.acquire(WriteClass::Deletion, false).await;
        let mut tasks = Vec::new();
        for continuing in [false, false, false, true] {
            let (l, o) = (limiter.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                l.acquire(WriteClass::Deletion, continuing).await;
                o.lock().expect("order").push(continuing);
            }));
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        for t in tasks {
            t.await.expect("task");
        }
        assert_eq!(order.lock().expect("order").first(), Some(&true), "the update after a read goes first");
    }

    #[tokio::test]
    async fn a_waiter_that_gave_up_costs_no_token() {
        let limiter = Arc::new(Limiter::new(1.0, 1));
        limiter.acquire(WriteClass::Node, false).await;
        // This one waits ~1 s for a token; abort it at once.
        let gone = tokio::spawn({
            let l = limiter.clone();
            async move { l.acquire(WriteClass::Node, false).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        gone.abort();
        let started = Instant::now();
        limiter.acquire(WriteClass::Node, false).await;
        assert!(started.elapsed() < Duration::from_millis(1500), "{:?}", started.elapsed());
    }
}
