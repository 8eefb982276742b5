//! What the writer says about itself, kept proportionate under load: each
//! object's allowance of Events, and failed writes logged once a burst.
//!
//! A large failure makes thousands of Events (one per pod) and, while the
//! API server is failing, thousands of failed requests. Neither may crowd
//! out what matters: the Events are capped per object, as client-go's
//! `EventSourceObjectSpamFilter` caps them (25 at once, then one every five
//! minutes), and the failures are summed into one line every
//! [`FAILURE_WINDOW`] instead of one line each.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Events an object may have at once (client-go's spam filter burst).
pub const EVENT_BURST: f64 = 25.0;

/// One more Event an object may have every this often (client-go's spam
/// filter refills one token every 300 s).
pub const EVENT_REFILL: Duration = Duration::from_secs(300);

/// Objects whose allowance is remembered before the full ones are
/// forgotten (a full allowance is what a forgotten object starts with).
const REMEMBERED: usize = 4096;

/// Each object's allowance of Events: a token bucket per object.
#[derive(Default)]
pub struct EventBudget {
    state: Mutex<Buckets>,
}

#[derive(Default)]
struct Buckets {
    by_object: HashMap<String, (f64, Instant)>,
    /// The size at which full allowances are next forgotten: at least
    /// [`REMEMBERED`], and twice what the last sweep left, so a sweep that
    /// frees little (a hundred thousand nodes' `RegisteredNode` Events at
    /// start, none of them full again for five minutes) is not repeated for
    /// every new object. Each sweep so pays for the objects added since.
    sweep_at: usize,
    /// Sweeps so far (for tests).
    sweeps: usize,
}

impl EventBudget {
    /// Whether `object` may have one more Event at `now`; takes it if so.
    pub fn allows(&self, object: &str, now: Instant) -> bool {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let refill = |(tokens, at): (f64, Instant)| {
            let gained = now.saturating_duration_since(at).as_secs_f64() / EVENT_REFILL.as_secs_f64();
            (tokens + gained).min(EVENT_BURST)
        };
        let Buckets { by_object: buckets, sweep_at, sweeps } = &mut *state;
        if buckets.len() >= (*sweep_at).max(REMEMBERED) && !buckets.contains_key(object) {
            buckets.retain(|_, b| refill(*b) < EVENT_BURST);
            *sweep_at = (2 * buckets.len()).max(REMEMBERED);
            *sweeps += 1;
        }
        let bucket = buckets.entry(object.to_string()).or_insert((EVENT_BURST, now));
        let tokens = refill(*bucket);
        if tokens < 1.0 {
            *bucket = (tokens, now);
            return false;
        }
        *bucket = (tokens - 1.0, now);
        true
    }
}

/// Failed writes are summed over this long before they are logged again.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Burst {
    /// When the first failure of the burst was logged.
    since: Option<Instant>,
    /// Failures since, by write.
    counts: BTreeMap<&'static str, u64>,
    /// The last error seen.
    last: String,
}

/// Failed writes, logged once a burst: the first failure at once (with its
/// error), then one summary line (counts by write, the last error) when
/// the burst is over or every [`FAILURE_WINDOW`] while it lasts.
#[derive(Default)]
pub struct FailureLog {
    burst: Mutex<Burst>,
}

impl FailureLog {
    /// A write failed with `error`.
    pub fn failed(&self, write: &'static str, error: &str) {
        let mut b = self.burst.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        match b.since {
            None => {
                tracing::warn!(action = write, %error, "write failed (further failures are summed every {}s)", FAILURE_WINDOW.as_secs());
                b.since = Some(now);
            }
            Some(since) => {
                *b.counts.entry(write).or_default() += 1;
                b.last = error.to_string();
                if now.duration_since(since) >= FAILURE_WINDOW {
                    Self::summarise(&mut b, now, true);
                }
            }
        }
    }

    /// A write succeeded: a burst of failures is over.
    pub fn succeeded(&self) {
        let mut b = self.burst.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if b.since.is_some() {
            Self::summarise(&mut b, Instant::now(), false);
        }
    }

    fn summarise(b: &mut Burst, now: Instant, ongoing: bool) {
        let total: u64 = b.counts.values().sum();
        if total > 0 {
            let by_write = b.counts.iter().map(|(w, n)| format!("{w}={n}")).collect::<Vec<_>>().join(",");
            let secs = b.since.map_or(0, |s| now.duration_since(s).as_secs());
            tracing::warn!(failed = total, by_write = %by_write, last_error = %b.last, ongoing, "{total} more writes failed in the last {secs}s");
        }
        b.counts.clear();
        b.since = ongoing.then_some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_gets_its_burst_then_one_event_every_refill() {
        let budget = EventBudget::default();
        let t0 = Instant::now();
        for _ in 0..25 {
            assert!(budget.allows("Pod ns/p", t0));
        }
        assert!(!budget.allows("Pod ns/p", t0));
        assert!(budget.allows("Pod ns/q", t0), "another object has its own allowance");
        assert!(!budget.allows("Pod ns/p", t0 + Duration::from_secs(200)));
        assert!(budget.allows("Pod ns/p", t0 + Duration::from_secs(301)));
        assert!(!budget.allows("Pod ns/p", t0 + Duration::from_secs(302)));
    }

    #[test]
    fn full_allowances_are_forgotten_first() {
        let budget = EventBudget::default();
        let t0 = Instant::now();
        for i in 0..REMEMBERED {
            budget.allows(&format!("o{i}"), t0);
        }
        // Much later every one of those is full again: forgotten to make
        // room, while a spent allowance is kept.
        let later = t0 + EVENT_REFILL * 30;
        for _ in 0..25 {
            assert!(budget.allows("spent", later));
        }
        assert!(!budget.allows("spent", later), "a spent allowance is remembered");
        assert!(budget.state.lock().expect("lock").by_object.len() < 10);
    }

    #[test]
    fn a_sweep_that_frees_nothing_is_not_repeated_for_every_new_object() {
        // One Event each for 50,000 objects at once (a large cluster's
        // start): no allowance is full again, so no sweep can free any.
        // Sweeping on every new object past the first 4,096 made this
        // quadratic; sweeps now come as the map doubles.
        let budget = EventBudget::default();
        let t0 = Instant::now();
        for i in 0..50_000 {
            assert!(budget.allows(&format!("Node n{i}"), t0));
        }
        let state = budget.state.lock().expect("lock");
        assert_eq!(state.by_object.len(), 50_000, "every spent allowance is remembered");
        assert!(state.sweeps <= 4, "{} sweeps for 50,000 objects", state.sweeps);
    }
}
