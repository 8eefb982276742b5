//! A client's token bucket and whose turn its next token is: client-go's
//! flowcontrol limiter (`qps` tokens a second, at most `burst` saved), with
//! the order the writer hands tokens out in.
//!
//! When requests of several classes wait, the most urgent [`WriteClass`]
//! goes first: a node's status and taints, then pod deletions, then pods
//! marked not ready, then Events. Without the order, the status writes of
//! a large failure (one per pod) would hold the writes that matter behind
//! them for minutes at 20 requests a second. Two guards keep the order
//! from starving anyone who matters:
//! - after [`NODE_STREAK`] node requests in a row, a waiting deletion goes
//!   next, so node writes that fail and come back every pass cannot hold
//!   every deletion back (when both share a bucket, in legacy mode);
//! - Events only spend tokens above half the bucket: a quiet client keeps
//!   half its burst for the writes that follow (startup's `RegisteredNode`
//!   Events, one per node, cannot drain the bucket ahead of the first
//!   Unknown statuses).
//!
//! Time is given as seconds elapsed ([`Bucket::refill`]), so the adapter
//! (its `Instant`s, compressed by `wall` under `cargo xtask wire`) and the
//! simulation (its virtual clock) run the same arithmetic.

use super::WriteClass;

/// Node requests granted in a row after which a waiting deletion goes
/// next, when both share a bucket (legacy mode): node status and taints
/// keep their precedence, and deletions still get at least a quarter of a
/// saturated client.
pub const NODE_STREAK: u32 = 3;

/// Whose turn the next token is, and whether it can be had now.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Turn {
    /// Nothing waits.
    Idle,
    /// `class` takes a token now ([`Bucket::grant`]).
    Go(WriteClass),
    /// `class` is next, once the bucket has refilled for this many
    /// seconds (a more urgent request arriving meanwhile goes first).
    Wait(WriteClass, f64),
}

/// See the module's description.
#[derive(Clone, Debug)]
pub struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    node_streak: u32,
}

impl Bucket {
    /// A full bucket: `qps` tokens a second, at most `burst` saved.
    pub fn new(qps: f64, burst: u32) -> Bucket {
        let burst = f64::from(burst.max(1));
        Bucket { qps: qps.max(0.001), burst, tokens: burst, node_streak: 0 }
    }

    /// `seconds` more have passed.
    pub fn refill(&mut self, seconds: f64) {
        if seconds > 0.0 {
            self.tokens = (self.tokens + seconds * self.qps).min(self.burst);
        }
    }

    /// Tokens an Event needs in the bucket: the half of the burst below
    /// it is kept for writes.
    fn event_need(&self) -> f64 {
        (self.burst / 2.0 + 1.0).min(self.burst)
    }

    /// Whose turn it is among the classes that `waits`.
    pub fn turn(&mut self, mut waits: impl FnMut(WriteClass) -> bool) -> Turn {
        let write = if self.node_streak >= NODE_STREAK && waits(WriteClass::Deletion) {
            Some(WriteClass::Deletion)
        } else {
            [WriteClass::Node, WriteClass::Deletion, WriteClass::PodStatus].into_iter().find(|c| waits(*c))
        };
        let (class, need) = match write {
            Some(c) => (c, 1.0),
            None if waits(WriteClass::Event) => (WriteClass::Event, self.event_need()),
            None => {
                // Idle: a streak is of requests that waited in a row.
                self.node_streak = 0;
                return Turn::Idle;
            }
        };
        // Within a rounding of the need: a sender that waited the time
        // this said holds the token, whatever the floating point left.
        if self.tokens + 1e-9 < need { Turn::Wait(class, (need - self.tokens) / self.qps) } else { Turn::Go(class) }
    }

    /// `class` had its turn ([`Turn::Go`]); `spent` when a request took
    /// the token (a waiter that gave up costs nothing).
    pub fn grant(&mut self, class: WriteClass, spent: bool) {
        self.node_streak = match class {
            WriteClass::Node => self.node_streak + 1,
            _ => 0,
        };
        if spent {
            self.tokens -= 1.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_urgent_class_goes_first_and_events_leave_half_the_burst() {
        let mut b = Bucket::new(2.0, 4);
        let all = |_: WriteClass| true;
        assert_eq!(b.turn(all), Turn::Go(WriteClass::Node));
        assert_eq!(b.turn(|c| c != WriteClass::Node), Turn::Go(WriteClass::Deletion));
        assert_eq!(b.turn(|c| c == WriteClass::Event), Turn::Go(WriteClass::Event));
        for _ in 0..2 {
            b.grant(WriteClass::Event, true);
        }
        // Two tokens left: an Event needs three, a write one.
        assert_eq!(b.turn(|c| c == WriteClass::Event), Turn::Wait(WriteClass::Event, 0.5));
        assert_eq!(b.turn(all), Turn::Go(WriteClass::Node));
        b.grant(WriteClass::PodStatus, true);
        b.grant(WriteClass::PodStatus, true);
        assert_eq!(b.turn(all), Turn::Wait(WriteClass::Node, 0.5));
        b.refill(0.25);
        assert_eq!(b.turn(all), Turn::Wait(WriteClass::Node, 0.25));
        b.refill(100.0);
        assert_eq!(b.tokens, 4.0, "at most the burst is saved");
        assert_eq!(b.turn(|_| false), Turn::Idle);
    }

    #[test]
    fn a_waiting_deletion_goes_after_a_streak_of_node_requests() {
        let mut b = Bucket::new(1000.0, 100);
        let mut order = Vec::new();
        for _ in 0..5 {
            let Turn::Go(class) = b.turn(|c| matches!(c, WriteClass::Node | WriteClass::Deletion)) else {
                panic!("tokens enough")
            };
            b.grant(class, true);
            order.push(class);
        }
        use WriteClass::{Deletion, Node};
        assert_eq!(order, [Node, Node, Node, Deletion, Node]);
    }
}
