//! A plain `RateLimitedTimedQueue` with a burst-1 token bucket: a `Vec`, a
//! set of processed keys and the time the bucket was last emptied. Written
//! from docs/upstream.md §E5, §E6 and §F, for clarity, not speed.

use std::collections::BTreeSet;

use nodewarden_model::{Span, Timestamp};

/// A burst-1 token bucket, kept as "empty since": a token is available when
/// the bucket was never emptied, or one interval has passed since it was.
#[derive(Clone, Debug, PartialEq)]
pub struct RefBucket {
    /// Tokens per second; `<= 0` never grants.
    pub qps: f64,
    /// When the last token was taken; `None` = full.
    pub emptied_at: Option<Timestamp>,
}

impl RefBucket {
    /// A full bucket.
    pub fn full(qps: f64) -> RefBucket {
        RefBucket { qps, emptied_at: None }
    }

    /// Time between two tokens.
    pub fn interval(&self) -> Option<Span> {
        (self.qps > 0.0).then(|| Span::from_secs_f64(1.0 / self.qps).unwrap_or(Span::MAX))
    }

    /// Whether a token can be taken at `now`.
    pub fn has_token(&self, now: Timestamp) -> bool {
        match (self.interval(), self.emptied_at) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(every), Some(at)) => now >= at + every,
        }
    }

    /// `TryAccept`.
    pub fn try_take(&mut self, now: Timestamp) -> bool {
        let ok = self.has_token(now);
        if ok {
            self.emptied_at = Some(now);
        }
        ok
    }

    /// The first instant a token is available; `None` for never.
    pub fn next_token(&self) -> Option<Timestamp> {
        let every = self.interval()?;
        Some(self.emptied_at.map_or(Timestamp::MIN, |at| at + every))
    }

    /// The rate as reported (0 for a never-granting bucket).
    pub fn rate(&self) -> f64 {
        self.qps.max(0.0)
    }

    /// `SwapLimiter` (§F2): the same rate (compared as `f32`) changes
    /// nothing; `<= 0` installs a never-granting bucket; otherwise a new full
    /// bucket, drained by one token when the old one had none to give.
    pub fn swap(&mut self, qps: f64, now: Timestamp) {
        if (qps as f32) == (self.rate() as f32) {
            return;
        }
        if qps <= 0.0 {
            *self = RefBucket::full(0.0);
            return;
        }
        let old_had = self.try_take(now);
        *self = RefBucket::full(qps);
        if !old_had {
            self.try_take(now);
        }
    }
}

/// One waiting item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefItem<K> {
    /// The key.
    pub key: K,
    /// Not before this.
    pub process_at: Timestamp,
    /// Insertion order, for ties.
    pub seq: u64,
}

/// What the handler made of an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefAttempt {
    /// Processed: leaves the queue, stays in the set.
    Done,
    /// Retry after this long (plus 1 ns).
    Retry(Span),
}

/// The queue.
#[derive(Clone, Debug)]
pub struct RefQueue<K> {
    /// Waiting items, unordered.
    pub items: Vec<RefItem<K>>,
    /// Keys processed and not removed since.
    pub done: BTreeSet<K>,
    /// The limiter.
    pub bucket: RefBucket,
    seq: u64,
}

impl<K: Clone + Ord> RefQueue<K> {
    /// Empty, with a full bucket at `qps`.
    pub fn new(qps: f64) -> RefQueue<K> {
        RefQueue { items: Vec::new(), done: BTreeSet::new(), bucket: RefBucket::full(qps), seq: 0 }
    }

    /// Whether the key is waiting or processed.
    pub fn contains(&self, key: &K) -> bool {
        self.done.contains(key) || self.items.iter().any(|i| &i.key == key)
    }

    /// `Add`: only when the key is neither waiting nor processed.
    pub fn add(&mut self, key: K, now: Timestamp) -> bool {
        if self.contains(&key) {
            return false;
        }
        self.seq += 1;
        self.items.push(RefItem { key, process_at: now, seq: self.seq });
        true
    }

    /// `Remove`: forgets the key entirely.
    pub fn remove(&mut self, key: &K) -> bool {
        let before = self.items.len();
        self.items.retain(|i| &i.key != key);
        let was_done = self.done.remove(key);
        was_done || self.items.len() != before
    }

    /// `Clear`.
    pub fn clear(&mut self) {
        self.items.clear();
        self.done.clear();
    }

    fn head(&self) -> Option<usize> {
        (0..self.items.len()).min_by_key(|&i| (self.items[i].process_at, self.items[i].seq))
    }

    /// `Try`: a token is taken before each look at the head.
    pub fn try_drain(&mut self, now: Timestamp, mut handle: impl FnMut(&K) -> RefAttempt) {
        while let Some(i) = self.head() {
            if !self.bucket.try_take(now) {
                return;
            }
            if now < self.items[i].process_at {
                return;
            }
            let item = self.items.remove(i);
            match handle(&item.key) {
                RefAttempt::Done => {
                    self.done.insert(item.key);
                }
                RefAttempt::Retry(wait) => {
                    self.seq += 1;
                    self.items.push(RefItem {
                        key: item.key,
                        process_at: now + wait + Span::from_nanos(1),
                        seq: self.seq,
                    });
                }
            }
        }
    }

    /// When a drain could next do something; `None` when empty or paused.
    pub fn next_due(&self) -> Option<Timestamp> {
        let head = &self.items[self.head()?];
        Some(head.process_at.max(self.bucket.next_token()?))
    }
}
