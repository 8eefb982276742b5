//! The kubelets' due times: a timing wheel of 100 ms buckets.
//!
//! A 100k-node fleet has 100k kubelets, each due again about 10 s after it
//! last ran, and the simulation takes them 100 ms at a time. A binary heap
//! over all of them paid a sift through 17 levels for every pop and push;
//! here an entry is pushed onto the bucket of its due time (an append), and
//! a bucket is sorted once, when it becomes the front. Entries come out in
//! exactly the heap's order: ascending `(due, slot, generation)`.
//!
//! Buckets `base .. base + RING` live in a ring of vectors that keep their
//! capacity; an entry due further ahead waits in a small heap (`far`) until
//! the ring reaches it, and an entry due before the front bucket is put in
//! the front bucket, whose sort places it first. Stale entries are the
//! caller's to recognise, as with the heap: the queue only orders.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use nodewarden_model::Timestamp;

/// `(due, slot, generation)`, ordered as the heap ordered them.
pub(crate) type Entry = (Timestamp, u32, u32);

/// Width of a bucket: the simulation's 100 ms step.
const WIDTH: i64 = 100_000_000;

/// Buckets in the ring (a power of two): 102.4 s of due times.
const RING: i64 = 1024;

fn bucket(due: Timestamp) -> i64 {
    due.as_nanos().div_euclid(WIDTH)
}

fn ring_index(bucket: i64) -> usize {
    bucket.rem_euclid(RING) as usize
}

/// Due times, earliest first. See the module documentation.
#[derive(Clone, Debug, Default)]
pub(crate) struct DueQueue {
    /// `RING` buckets once the first entry arrives; bucket `b` (for `b` in
    /// `base .. base + RING`) is `ring[b mod RING]`.
    ring: Vec<Vec<Entry>>,
    /// The front bucket's number.
    base: i64,
    /// Entries of the front bucket already taken.
    taken: usize,
    /// The front bucket's untaken entries are sorted.
    sorted: bool,
    /// Untaken entries in the ring.
    len: usize,
    /// Entries due at or after bucket `base + RING`.
    far: BinaryHeap<Reverse<Entry>>,
}

impl DueQueue {
    /// Adds an entry.
    pub(crate) fn push(&mut self, entry: Entry) {
        if self.ring.is_empty() {
            self.ring = vec![Vec::new(); RING as usize];
        }
        let b = bucket(entry.0);
        if b >= self.base + RING {
            self.far.push(Reverse(entry));
        } else {
            self.put(b, entry);
        }
    }

    /// Places an entry of a bucket within the ring (or before it).
    fn put(&mut self, b: i64, entry: Entry) {
        self.len += 1;
        if b > self.base {
            self.ring[ring_index(b)].push(entry);
            return;
        }
        let front = &mut self.ring[ring_index(self.base)];
        if self.sorted {
            let at = self.taken + front[self.taken..].partition_point(|e| *e < entry);
            front.insert(at, entry);
        } else {
            front.push(entry);
        }
    }

    /// Makes the front bucket hold the earliest untaken entry, sorted;
    /// false when the queue is empty.
    fn settle(&mut self) -> bool {
        if self.ring.is_empty() {
            return false;
        }
        loop {
            let i = ring_index(self.base);
            if self.taken < self.ring[i].len() {
                if !self.sorted {
                    let taken = self.taken;
                    self.ring[i][taken..].sort_unstable();
                    self.sorted = true;
                }
                return true;
            }
            // The front bucket is used up: move to the next one (or, with
            // nothing left in the ring, straight to the earliest far entry).
            self.ring[i].clear();
            self.taken = 0;
            self.sorted = false;
            if self.len == 0 {
                let Some(&Reverse(first)) = self.far.peek() else { return false };
                self.base = bucket(first.0).max(self.base + 1);
            } else {
                self.base += 1;
            }
            while let Some(&Reverse(e)) = self.far.peek() {
                let b = bucket(e.0);
                if b >= self.base + RING {
                    break;
                }
                self.far.pop();
                self.put(b, e);
            }
        }
    }

    /// The earliest entry.
    pub(crate) fn peek(&mut self) -> Option<Entry> {
        if !self.settle() {
            return None;
        }
        self.ring[ring_index(self.base)].get(self.taken).copied()
    }

    /// The earliest entry's due time, without changing anything: the first
    /// of the front bucket once [`DueQueue::peek`] has sorted it (what
    /// the kubelets do after every change), a search otherwise.
    pub(crate) fn first_due(&self) -> Option<Timestamp> {
        let front = self.ring.get(ring_index(self.base))?;
        let rest = front.get(self.taken..).unwrap_or_default();
        let first = if self.sorted { rest.first() } else { rest.iter().min() };
        first
            .or_else(|| {
                (1..RING)
                    .map(|k| &self.ring[ring_index(self.base + k)])
                    .find(|b| !b.is_empty())
                    .and_then(|b| b.iter().min())
                    .or_else(|| self.far.peek().map(|Reverse(e)| e))
            })
            .map(|e| e.0)
    }

    /// Removes and returns the earliest entry.
    pub(crate) fn pop(&mut self) -> Option<Entry> {
        let e = self.peek()?;
        self.taken += 1;
        self.len -= 1;
        Some(e)
    }

    /// Moves every entry due at or before `now` into `out`, earliest first.
    pub(crate) fn pop_until(&mut self, now: Timestamp, out: &mut Vec<Entry>) {
        while self.settle() {
            let i = ring_index(self.base);
            let front = &self.ring[i][self.taken..];
            let n = front.partition_point(|e| e.0 <= now);
            out.extend_from_slice(&front[..n]);
            self.taken += n;
            self.len -= n;
            if self.taken < self.ring[i].len() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// Against a binary heap, on random pushes (near, past, far and never)
    /// and pops up to random instants.
    #[test]
    fn pops_in_the_heap_order() {
        for seed in 0..20 {
            let mut rng = Rng::new(seed);
            let mut queue = DueQueue::default();
            let mut heap: BinaryHeap<Reverse<Entry>> = BinaryHeap::new();
            let mut now = rng.below(5_000) as i64 - 2_500;
            for round in 0..400u32 {
                for k in 0..rng.below(40) as u32 {
                    let due = match rng.below(10) {
                        0 => Timestamp::from_millis(now - rng.below(3_000) as i64),
                        1 => Timestamp::from_millis(now + 100_000 + rng.below(400_000) as i64),
                        2 if k == 0 => Timestamp::MAX,
                        _ => Timestamp::from_millis(now + rng.below(11_000) as i64),
                    };
                    let e = (due, rng.below(50) as u32, round);
                    queue.push(e);
                    heap.push(Reverse(e));
                }
                assert_eq!(queue.first_due(), heap.peek().map(|Reverse(e)| e.0), "seed {seed} round {round}");
                assert_eq!(queue.peek(), heap.peek().map(|Reverse(e)| *e), "seed {seed} round {round}");
                let jump = if rng.chance(0.1) { 200_000 } else { 400 };
                now += rng.below(jump) as i64;
                let mut got = Vec::new();
                if rng.chance(0.5) {
                    queue.pop_until(Timestamp::from_millis(now), &mut got);
                } else {
                    while queue.peek().is_some_and(|e| e.0 <= Timestamp::from_millis(now)) {
                        got.extend(queue.pop());
                    }
                }
                let mut want = Vec::new();
                while let Some(&Reverse(e)) = heap.peek() {
                    if e.0 > Timestamp::from_millis(now) {
                        break;
                    }
                    heap.pop();
                    want.push(e);
                }
                assert_eq!(got, want, "seed {seed} round {round}");
            }
        }
    }

    #[test]
    fn empty_and_far_only() {
        let mut q = DueQueue::default();
        assert_eq!((q.peek(), q.first_due()), (None, None));
        q.push((Timestamp::from_millis(3_600_000), 1, 0));
        q.push((Timestamp::from_millis(3_600_000), 0, 0));
        assert_eq!(q.first_due(), Some(Timestamp::from_millis(3_600_000)));
        assert_eq!(q.pop(), Some((Timestamp::from_millis(3_600_000), 0, 0)));
        assert_eq!(q.pop(), Some((Timestamp::from_millis(3_600_000), 1, 0)));
        assert_eq!(q.pop(), None);
        // Behind the front by now: still first.
        q.push((Timestamp::from_millis(5), 2, 0));
        assert_eq!(q.peek(), Some((Timestamp::from_millis(5), 2, 0)));
    }
}
