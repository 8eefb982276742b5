//! Target (c2): the engine's `RateLimitedTimedQueue` and token bucket
//! against the plain reference queue (`nodewarden_reference::model::queue`):
//! same answers to every add and remove, same items drained in the same
//! order at the same times, same rate, and a next-due time never later
//! than the reference's (both counted from now).

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nodewarden_engine::internals::{Attempt, RateLimitedTimedQueue};
use nodewarden_model::{Span, Timestamp};
use nodewarden_reference::model::queue::{RefAttempt, RefQueue};

const RATES: [f64; 7] = [0.1, 1.0, 0.5, 0.0, 0.05, 3.0, 10.0];

#[derive(Arbitrary, Debug)]
enum Op {
    Add(u8),
    Remove(u8),
    Clear,
    Advance(u16),
    Swap(u8),
    /// Drain; each handled item is retried after this many ms, or done
    /// (`None`), taken in turn from the list.
    Drain(Vec<Option<u8>>),
}

fuzz_target!(|input: (u8, Vec<Op>)| {
    let mut now = Timestamp::EPOCH;
    let rate = RATES[usize::from(input.0) % RATES.len()];
    let mut engine: RateLimitedTimedQueue<u8> = RateLimitedTimedQueue::new(rate, now);
    let mut reference: RefQueue<u8> = RefQueue::new(rate);
    for op in input.1.into_iter().take(200) {
        match op {
            Op::Add(k) => assert_eq!(engine.add(k % 8, now), reference.add(k % 8, now), "add {k}"),
            Op::Remove(k) => assert_eq!(engine.remove(&(k % 8)), reference.remove(&(k % 8)), "remove {k}"),
            Op::Clear => {
                engine.clear();
                reference.clear();
            }
            Op::Advance(ms) => now += Span::from_millis(i64::from(ms)),
            Op::Swap(r) => {
                let q = RATES[usize::from(r) % RATES.len()];
                engine.swap_rate(q, now);
                reference.bucket.swap(q, now);
            }
            Op::Drain(decisions) => {
                let (mut got, mut want) = (vec![], vec![]);
                let (mut i, mut j) = (0, 0);
                engine.try_drain(now, |k, _| {
                    got.push(*k);
                    let d = decisions.get(i).copied().flatten();
                    i += 1;
                    d.map_or(Attempt::Done, |ms| Attempt::RetryAfter(Span::from_millis(i64::from(ms))))
                });
                reference.try_drain(now, |k| {
                    want.push(*k);
                    let d = decisions.get(j).copied().flatten();
                    j += 1;
                    d.map_or(RefAttempt::Done, |ms| RefAttempt::Retry(Span::from_millis(i64::from(ms))))
                });
                assert_eq!(got, want, "drained at {now}");
            }
        }
        assert_eq!(engine.len(), reference.items.len());
        assert_eq!(engine.qps() as f32, reference.bucket.rate() as f32);
        for k in 0..8u8 {
            assert_eq!(engine.contains(&k), reference.contains(&k), "contains {k}");
        }
        match (engine.next_due(), reference.next_due()) {
            (None, None) => {}
            // Anything at or before now means "now".
            (Some(e), Some(r)) => {
                assert!(e.max(now) <= r.max(now), "engine next due {e} later than the reference's {r} (now {now})")
            }
            (e, r) => panic!("next due: engine {e:?}, reference {r:?}"),
        }
    }
});
