//! Upstream's `RateLimitedTimedQueue`: a per-zone, de-duplicated queue of
//! nodes drained through a token bucket.
//!
//! Two properties carry the controller's safety story and are easy to get
//! subtly wrong, so they live here, away from the ECS, with their own tests:
//! - the queue is unique per key and ordered by the time an item is due
//!   (the time it was added, unless a retry pushed it back); a processed key
//!   stays "seen" and cannot be queued again until it is removed;
//! - the bucket has burst 1 and starts full, a token is spent before each
//!   item is looked at (even when the item then turns out to need nothing),
//!   rate 0 drains nothing, and swapping rates follows `SwapLimiter`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::Hash;

use nodewarden_model::{Span, Timestamp};

/// A token bucket with burst 1, as a "theoretical arrival time": a token is
/// available once `now >= ready_at`. Equivalent to Go's `rate.Limiter` with
/// burst 1 (idle time never stores more than one token), but exact in
/// integer nanoseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenBucket {
    /// Tokens per second; `<= 0` never grants one.
    qps: f64,
    /// Nanoseconds between tokens (unused when `qps <= 0`).
    interval: Span,
    /// When the next token is available.
    ready_at: Timestamp,
}

impl TokenBucket {
    /// A full bucket at `now`. `qps <= 0` gives a bucket that never grants.
    pub fn full(qps: f64, now: Timestamp) -> TokenBucket {
        let interval = if qps > 0.0 { Span::from_secs_f64(1.0 / qps).unwrap_or(Span::MAX) } else { Span::MAX };
        TokenBucket { qps, interval, ready_at: now }
    }

    /// The configured rate (0 for a never-granting bucket).
    pub fn qps(&self) -> f64 {
        if self.qps > 0.0 { self.qps } else { 0.0 }
    }

    /// Takes a token if one is available at `now` (`TryAccept`).
    pub fn try_take(&mut self, now: Timestamp) -> bool {
        if self.qps <= 0.0 || now < self.ready_at {
            return false;
        }
        self.ready_at = now + self.interval;
        true
    }

    /// When the next token becomes available (`Timestamp::MAX` for never).
    pub fn next_token_at(&self) -> Timestamp {
        if self.qps <= 0.0 { Timestamp::MAX } else { self.ready_at }
    }

    /// Upstream `SwapLimiter`: the same rate changes nothing; a rate `<= 0`
    /// installs a never-granting bucket; any other rate installs a full
    /// bucket, drained by one token when the old bucket had none to give
    /// (spending one of the old bucket's if it had), so that leaving a pause
    /// or switching while throttled waits a full interval.
    pub fn swap_rate(&mut self, qps: f64, now: Timestamp) {
        // Upstream compares float32 QPS values.
        if (qps as f32) == (self.qps as f32) || (qps <= 0.0 && self.qps <= 0.0) {
            return;
        }
        if qps <= 0.0 {
            *self = TokenBucket::full(0.0, now);
            return;
        }
        let old_had_token = self.try_take(now);
        let mut fresh = TokenBucket::full(qps, now);
        if !old_had_token {
            fresh.try_take(now);
        }
        *self = fresh;
    }
}

/// One queued item.
#[derive(Clone, Debug)]
struct Entry<K> {
    key: K,
    process_at: Timestamp,
    added_at: Timestamp,
    seq: u64,
}

/// Where a key stands in the queue's set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Membership {
    /// Waiting in the heap; the number is the live entry's sequence number.
    Queued(u64),
    /// Processed successfully; blocks re-adding until removed.
    Done,
}

/// What the handler decided about an item ([`RateLimitedTimedQueue::try_drain`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// Handled: the key leaves the heap but stays in the set.
    Done,
    /// Try again after this long (from now, plus 1 ns as upstream does).
    RetryAfter(Span),
}

/// The per-zone queue. Keys are unique; items come out ordered by
/// `process_at`, ties in the order they were added.
#[derive(Clone, Debug)]
pub struct RateLimitedTimedQueue<K: Clone + Eq + Hash> {
    heap: BinaryHeap<Reverse<(Timestamp, u64)>>,
    entries: HashMap<u64, Entry<K>, foldhash::fast::RandomState>,
    set: HashMap<K, Membership, foldhash::fast::RandomState>,
    next_seq: u64,
    limiter: TokenBucket,
}

impl<K: Clone + Eq + Hash> RateLimitedTimedQueue<K> {
    /// An empty queue with a full bucket at `qps` (`addPodEvictorForNewZone`).
    pub fn new(qps: f64, now: Timestamp) -> Self {
        RateLimitedTimedQueue {
            heap: BinaryHeap::new(),
            entries: HashMap::default(),
            set: HashMap::default(),
            next_seq: 0,
            limiter: TokenBucket::full(qps, now),
        }
    }

    /// Queues `key` at `now` unless it is already in the set (queued or
    /// done). Returns whether it was added.
    pub fn add(&mut self, key: K, now: Timestamp) -> bool {
        if self.set.contains_key(&key) {
            return false;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.set.insert(key.clone(), Membership::Queued(seq));
        self.entries.insert(seq, Entry { key, process_at: now, added_at: now, seq });
        self.heap.push(Reverse((now, seq)));
        true
    }

    /// Removes `key` from the queue and the set, so it can be added again.
    /// Returns whether it was there.
    pub fn remove(&mut self, key: &K) -> bool {
        match self.set.remove(key) {
            Some(Membership::Queued(seq)) => {
                // The heap entry becomes stale and is skipped when reached.
                self.entries.remove(&seq);
                self.compact_if_stale();
                true
            }
            Some(Membership::Done) => true,
            None => false,
        }
    }

    /// Whether `key` is queued or done-but-not-removed. The engine asks the
    /// narrower [`is_queued`](Self::is_queued); the tests and the fuzz target
    /// check the set itself against the reference queue.
    #[cfg(any(test, feature = "internals"))]
    pub fn contains(&self, key: &K) -> bool {
        self.set.contains_key(key)
    }

    /// Whether `key` is waiting to be processed.
    pub fn is_queued(&self, key: &K) -> bool {
        matches!(self.set.get(key), Some(Membership::Queued(_)))
    }

    /// Items waiting to be processed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Empties the queue and the set (`Clear`). The engine never clears a
    /// whole queue (master disruption mode unqueues node by node); kept for
    /// the fuzz target, which models upstream's `Clear`.
    #[cfg(feature = "internals")]
    pub fn clear(&mut self) {
        self.heap.clear();
        self.entries.clear();
        self.set.clear();
    }

    /// The current rate, 0 when paused.
    pub fn qps(&self) -> f64 {
        self.limiter.qps()
    }

    /// Changes the rate (`SwapLimiter`).
    pub fn swap_rate(&mut self, qps: f64, now: Timestamp) {
        self.limiter.swap_rate(qps, now);
    }

    /// Rebuilds the heap from the live entries once stale ones (left by
    /// removals) outnumber them. Upstream's remove-before-add re-queues
    /// every still-untainted node on every monitor pass, so without this a
    /// long outage would grow the heap by the number of waiting nodes each
    /// pass. Amortised O(1) per removal.
    fn compact_if_stale(&mut self) {
        if self.heap.len() > 2 * self.entries.len() + 64 {
            self.heap = self.entries.values().map(|e| Reverse((e.process_at, e.seq))).collect();
        }
    }

    fn drop_stale_head(&mut self) {
        while let Some(Reverse((_, seq))) = self.heap.peek() {
            if self.entries.contains_key(seq) {
                return;
            }
            self.heap.pop();
        }
    }

    /// The earliest time at which a drain could do something: `None` when
    /// the queue is empty or paused. May be early (a removed item still at
    /// the head), never late.
    pub fn next_due(&self) -> Option<Timestamp> {
        if self.entries.is_empty() {
            return None;
        }
        let Reverse((process_at, _)) = *self.heap.peek()?;
        let token = self.limiter.next_token_at();
        (token != Timestamp::MAX).then(|| process_at.max(token))
    }

    /// Upstream `Try`: while a token can be taken (taken *before* looking at
    /// the head) and the head is due, hand it to `handle`. The handler gets
    /// the key and the time it was first added.
    pub fn try_drain(&mut self, now: Timestamp, mut handle: impl FnMut(&K, Timestamp) -> Attempt) {
        loop {
            self.drop_stale_head();
            let Some(&Reverse((process_at, seq))) = self.heap.peek() else {
                return;
            };
            if !self.limiter.try_take(now) {
                return;
            }
            if now < process_at {
                return;
            }
            self.heap.pop();
            let Some(mut entry) = self.entries.remove(&seq) else {
                continue;
            };
            match handle(&entry.key, entry.added_at) {
                Attempt::Done => {
                    self.set.insert(entry.key, Membership::Done);
                }
                Attempt::RetryAfter(wait) => {
                    let seq = self.next_seq;
                    self.next_seq += 1;
                    entry.process_at = now + wait + Span::from_nanos(1);
                    entry.seq = seq;
                    self.set.insert(entry.key.clone(), Membership::Queued(seq));
                    self.heap.push(Reverse((entry.process_at, seq)));
                    self.entries.insert(seq, entry);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(m: i64) -> Timestamp {
        Timestamp::EPOCH + Span::from_millis(m)
    }

    fn drain_all(q: &mut RateLimitedTimedQueue<&'static str>, now: Timestamp) -> Vec<&'static str> {
        let mut out = vec![];
        q.try_drain(now, |k, _| {
            out.push(*k);
            Attempt::Done
        });
        out
    }

    #[test]
    fn bucket_starts_full_and_refills_one_token_per_interval() {
        let mut b = TokenBucket::full(0.1, Timestamp::from_secs(0));
        assert!(b.try_take(Timestamp::from_secs(0)));
        assert!(!b.try_take(Timestamp::from_secs(9)));
        assert!(b.try_take(Timestamp::from_secs(10)));
        // Idle time never stores more than one token.
        assert!(b.try_take(Timestamp::from_secs(100)));
        assert!(!b.try_take(Timestamp::from_secs(100)));
        assert!(!b.try_take(ms(109_999)));
        assert!(b.try_take(Timestamp::from_secs(110)));
    }

    #[test]
    fn zero_rate_never_grants() {
        let mut b = TokenBucket::full(0.0, Timestamp::from_secs(0));
        assert!(!b.try_take(Timestamp::from_secs(1_000_000)));
        assert_eq!(b.qps(), 0.0);
        assert_eq!(b.next_token_at(), Timestamp::MAX);
    }

    #[test]
    fn swap_to_same_rate_keeps_state() {
        let mut b = TokenBucket::full(0.1, Timestamp::from_secs(0));
        assert!(b.try_take(Timestamp::from_secs(0)));
        b.swap_rate(0.1, Timestamp::from_secs(1));
        assert!(!b.try_take(Timestamp::from_secs(5)));
        assert!(b.try_take(Timestamp::from_secs(10)));
    }

    #[test]
    fn swap_from_full_spends_the_old_token_and_starts_full() {
        let mut b = TokenBucket::full(0.1, Timestamp::from_secs(0));
        b.swap_rate(0.01, Timestamp::from_secs(5));
        assert!(b.try_take(Timestamp::from_secs(5)));
        assert!(!b.try_take(Timestamp::from_secs(104)));
        assert!(b.try_take(Timestamp::from_secs(105)));
    }

    #[test]
    fn swap_from_empty_drains_the_new_bucket() {
        let mut b = TokenBucket::full(0.1, Timestamp::from_secs(0));
        assert!(b.try_take(Timestamp::from_secs(0)));
        b.swap_rate(0.01, Timestamp::from_secs(1));
        assert!(!b.try_take(Timestamp::from_secs(1)));
        assert!(!b.try_take(Timestamp::from_secs(100)));
        assert!(b.try_take(Timestamp::from_secs(101)));
    }

    #[test]
    fn leaving_a_pause_waits_a_full_interval() {
        let mut b = TokenBucket::full(0.0, Timestamp::from_secs(0));
        b.swap_rate(0.1, Timestamp::from_secs(50));
        assert!(!b.try_take(Timestamp::from_secs(50)));
        assert!(!b.try_take(ms(59_999)));
        assert!(b.try_take(Timestamp::from_secs(60)));
        // And pausing again from any state stops everything.
        b.swap_rate(0.0, Timestamp::from_secs(61));
        assert!(!b.try_take(Timestamp::from_secs(1000)));
    }

    #[test]
    fn queue_is_unique_and_ordered_by_time_added() {
        let mut q = RateLimitedTimedQueue::new(1000.0, Timestamp::from_secs(0));
        assert!(q.add("b", Timestamp::from_secs(1)));
        assert!(q.add("a", Timestamp::from_secs(2)));
        assert!(!q.add("b", Timestamp::from_secs(3)));
        assert!(q.add("c", Timestamp::from_secs(1)));
        assert_eq!(q.len(), 3);
        let mut out = vec![];
        for s in 3..10 {
            out.extend(drain_all(&mut q, Timestamp::from_secs(s)));
        }
        // b and c tie at t=1: insertion order; then a.
        assert_eq!(out, ["b", "c", "a"]);
    }

    #[test]
    fn processed_keys_stay_seen_until_removed() {
        let mut q = RateLimitedTimedQueue::new(1000.0, Timestamp::from_secs(0));
        q.add("n", Timestamp::from_secs(0));
        assert_eq!(drain_all(&mut q, Timestamp::from_secs(0)), ["n"]);
        assert!(q.contains(&"n"));
        assert!(!q.is_queued(&"n"));
        assert!(!q.add("n", Timestamp::from_secs(1)), "a done key cannot be queued again");
        assert!(q.remove(&"n"));
        assert!(q.add("n", Timestamp::from_secs(2)));
        assert!(q.is_queued(&"n"));
    }

    #[test]
    fn removed_items_are_skipped() {
        let mut q = RateLimitedTimedQueue::new(1000.0, Timestamp::from_secs(0));
        q.add("a", Timestamp::from_secs(0));
        q.add("b", Timestamp::from_secs(0));
        assert!(q.remove(&"a"));
        assert!(!q.remove(&"a"));
        assert_eq!(drain_all(&mut q, Timestamp::from_secs(1)), ["b"]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_token_is_spent_even_on_an_item_that_needs_nothing() {
        let mut q = RateLimitedTimedQueue::new(0.1, Timestamp::from_secs(0));
        q.add("ready-now", Timestamp::from_secs(0));
        q.add("dead", Timestamp::from_secs(0));
        let mut seen = vec![];
        q.try_drain(Timestamp::from_secs(0), |k, _| {
            seen.push(*k);
            Attempt::Done
        });
        assert_eq!(seen, ["ready-now"]);
        assert!(drain_all(&mut q, Timestamp::from_secs(9)).is_empty());
        assert_eq!(drain_all(&mut q, Timestamp::from_secs(10)), ["dead"]);
    }

    #[test]
    fn retry_pushes_the_item_back_and_wastes_the_token_when_not_due() {
        let mut q = RateLimitedTimedQueue::new(1000.0, Timestamp::from_secs(0));
        q.add("x", Timestamp::from_secs(0));
        let mut calls = 0;
        q.try_drain(Timestamp::from_secs(0), |_, _| {
            calls += 1;
            Attempt::RetryAfter(Span::from_millis(50))
        });
        assert_eq!(calls, 1);
        assert!(q.is_queued(&"x"));
        assert_eq!(drain_all(&mut q, ms(50)), Vec::<&str>::new());
        assert_eq!(drain_all(&mut q, ms(51)), ["x"]);
    }

    #[test]
    fn re_queueing_the_same_keys_does_not_grow_the_heap() {
        let mut q = RateLimitedTimedQueue::new(0.0, Timestamp::from_secs(0));
        for pass in 0..1000 {
            for key in 0..100u32 {
                q.remove(&key);
                q.add(key, Timestamp::from_secs(pass));
            }
        }
        assert_eq!(q.len(), 100);
        assert!(q.heap.len() <= 3 * 100 + 64, "heap holds {} entries", q.heap.len());
        // Order is still by time added, then insertion order.
        q.swap_rate(1e6, Timestamp::from_secs(2000));
        let mut out = vec![];
        for i in 0..200 {
            q.try_drain(Timestamp::from_secs(3000 + i), |k, _| {
                out.push(*k);
                Attempt::Done
            });
        }
        assert_eq!(out, (0..100u32).collect::<Vec<_>>());
    }

    #[test]
    fn paused_queue_reports_no_due_time() {
        let mut q = RateLimitedTimedQueue::new(0.0, Timestamp::from_secs(0));
        q.add("x", Timestamp::from_secs(0));
        assert_eq!(q.next_due(), None);
        q.swap_rate(0.1, Timestamp::from_secs(5));
        assert_eq!(q.next_due(), Some(Timestamp::from_secs(15)));
    }

    proptest! {
        /// Whatever is added, the drain order is by time added, then by
        /// insertion order, each key once.
        #[test]
        fn drains_in_time_added_order(adds in proptest::collection::vec((0u8..20, 0i64..50), 1..60)) {
            let mut q = RateLimitedTimedQueue::new(1e6, Timestamp::from_secs(0));
            let mut expected: Vec<(i64, usize, u8)> = vec![];
            let mut seen = std::collections::HashSet::new();
            let mut sorted_adds = adds.clone();
            sorted_adds.sort_by_key(|&(_, at)| at);
            for (i, (key, at)) in sorted_adds.iter().enumerate() {
                if q.add(*key, Timestamp::from_secs(*at)) {
                    prop_assert!(seen.insert(*key));
                    expected.push((*at, i, *key));
                } else {
                    prop_assert!(seen.contains(key));
                }
            }
            expected.sort();
            let mut out = vec![];
            // Burst 1: one item per instant, so poll once a second.
            for i in 0..100 {
                q.try_drain(Timestamp::from_secs(1000 + i), |k, _| { out.push(*k); Attempt::Done });
            }
            prop_assert_eq!(out, expected.into_iter().map(|(_, _, k)| k).collect::<Vec<_>>());
        }

        /// Over any window, no more than 1 + window x rate items are drained,
        /// however often the queue is polled.
        #[test]
        fn never_exceeds_rate_plus_burst(
            qps_milli in 1u32..5_000,
            polls in proptest::collection::vec(0i64..100_000, 1..200),
        ) {
            let qps = qps_milli as f64 / 1000.0;
            let mut q = RateLimitedTimedQueue::new(qps, Timestamp::from_secs(0));
            for i in 0..500u32 { q.add(i, Timestamp::from_secs(0)); }
            let mut polls = polls;
            polls.sort();
            let mut drained: Vec<Timestamp> = vec![];
            for p in polls {
                let now = ms(p);
                q.try_drain(now, |_, _| { drained.push(now); Attempt::Done });
            }
            // With burst 1, "at most 1 + window x rate in any window" is the
            // same as consecutive drains being at least one interval apart.
            let interval = Span::from_secs_f64(1.0 / qps).unwrap();
            for pair in drained.windows(2) {
                prop_assert!(pair[1] - pair[0] >= interval,
                    "drains at {} and {} are closer than {} at {qps}/s", pair[0], pair[1], interval);
            }
        }
    }
}
