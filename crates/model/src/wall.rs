//! The process's wall clock, optionally running faster than real time.
//!
//! `cargo xtask wire` plays a scenario file's hours through a real
//! `nodewarden sim --serve` and a real `nodewarden run` in minutes. Both
//! processes then read one compressed clock: at real Unix time `W`, the
//! time every part of the process reads is `A + R × (W − A)` for a rate `R`
//! and an anchor `A` given to both through [`ENV`]. Since both compute it
//! from the same machine clock, they agree on every instant: a kubelet's
//! heartbeat stamped by the server is as old, to the controller, as it
//! would be in real time, and every period, grace, toleration and rate
//! limit keeps its meaning. What cannot be compressed is the time the
//! processes themselves take (a request's round trip, a context switch):
//! it is `R` times larger on this clock. Without [`ENV`] the rate is 1 and
//! this is the plain system clock.
//!
//! The engine never reads it: drivers pass `now` in. Only the served
//! cluster and the kube adapter do, so the whole process keeps one time.

use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The environment variable that compresses time: `RATE@ANCHOR`, the rate
/// (a number from 1 to 1000) and the anchor in Unix seconds (`20@1764100000.5`).
pub const ENV: &str = "NODEWARDEN_CLOCK";

/// How this process's clock relates to the machine's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dilation {
    /// Clock seconds per real second.
    pub rate: f64,
    /// Unix nanoseconds at which the clock equals real time.
    pub anchor_unix_nanos: i64,
}

/// A malformed [`ENV`] value.
#[derive(Debug, thiserror::Error)]
#[error("{ENV}={value:?}: {why} (expected RATE@ANCHOR, e.g. 20@1764100000.5: a rate from 1 to 1000 and Unix seconds)")]
pub struct DilationError {
    value: String,
    why: &'static str,
}

impl Dilation {
    /// Real time.
    pub const REAL: Dilation = Dilation { rate: 1.0, anchor_unix_nanos: 0 };

    /// Reads `RATE@ANCHOR`.
    pub fn parse(value: &str) -> Result<Dilation, DilationError> {
        let bad = |why| DilationError { value: value.to_string(), why };
        let (rate, anchor) = value.split_once('@').ok_or_else(|| bad("no '@'"))?;
        let rate: f64 = rate.trim().parse().map_err(|_| bad("the rate is not a number"))?;
        if !(1.0..=1000.0).contains(&rate) {
            return Err(bad("the rate must be from 1 to 1000"));
        }
        let anchor: f64 = anchor.trim().parse().map_err(|_| bad("the anchor is not a number"))?;
        if !anchor.is_finite() || !(0.0..=1e10).contains(&anchor) {
            return Err(bad("the anchor must be Unix seconds"));
        }
        Ok(Dilation { rate, anchor_unix_nanos: (anchor * 1e9) as i64 })
    }

    /// The clock's Unix nanoseconds at a real Unix time.
    pub fn at(&self, real_unix_nanos: i64) -> i64 {
        if self.rate == 1.0 {
            return real_unix_nanos;
        }
        let ahead = (real_unix_nanos - self.anchor_unix_nanos) as f64 * self.rate;
        self.anchor_unix_nanos.saturating_add(ahead as i64)
    }

    /// The real Unix time at which the clock reads `clock_unix_nanos`.
    pub fn real_at(&self, clock_unix_nanos: i64) -> i64 {
        if self.rate == 1.0 {
            return clock_unix_nanos;
        }
        let ahead = (clock_unix_nanos - self.anchor_unix_nanos) as f64 / self.rate;
        self.anchor_unix_nanos.saturating_add(ahead as i64)
    }
}

static DILATION: OnceLock<Dilation> = OnceLock::new();

/// Reads [`ENV`] and sets this process's clock from it (real time when
/// unset). Called once, at the start of a binary; later calls change
/// nothing.
pub fn install_from_env() -> Result<Dilation, DilationError> {
    let d = match std::env::var(ENV) {
        Ok(v) if !v.trim().is_empty() => Dilation::parse(&v)?,
        _ => Dilation::REAL,
    };
    Ok(*DILATION.get_or_init(|| d))
}

/// This process's dilation (real time unless installed).
pub fn dilation() -> Dilation {
    DILATION.get().copied().unwrap_or(Dilation::REAL)
}

/// Clock seconds per real second (1 unless compressed).
pub fn rate() -> f64 {
    dilation().rate
}

/// The machine's Unix time, in nanoseconds.
pub fn real_unix_nanos() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// The clock's Unix time now, in nanoseconds.
pub fn unix_now_nanos() -> i64 {
    dilation().at(real_unix_nanos())
}

/// How long to really wait for `d` to pass on the clock (a sleep, a
/// timer, a retry's backoff).
pub fn real(d: Duration) -> Duration {
    let r = rate();
    if r == 1.0 { d } else { d.div_f64(r) }
}

/// How much clock time has passed since a monotonic instant.
pub fn since(start: Instant) -> Duration {
    let r = rate();
    let e = start.elapsed();
    if r == 1.0 { e } else { e.mul_f64(r) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_maps_both_ways() {
        let d = Dilation::parse("20@1000").expect("valid");
        assert_eq!(d.rate, 20.0);
        assert_eq!(d.anchor_unix_nanos, 1_000_000_000_000);
        // One real second after the anchor is twenty on the clock.
        assert_eq!(d.at(1_001_000_000_000), 1_020_000_000_000);
        assert_eq!(d.real_at(1_020_000_000_000), 1_001_000_000_000);
        // Before the anchor it runs as fast, backwards.
        assert_eq!(d.at(999_000_000_000), 980_000_000_000);
        assert_eq!(Dilation::REAL.at(5), 5);
    }

    #[test]
    fn refuses_what_is_not_a_dilation() {
        for bad in ["20", "x@1", "0.5@1", "2000@1", "20@-1", "20@nan", "20@abc"] {
            let e = Dilation::parse(bad).expect_err(bad).to_string();
            assert!(e.contains(ENV) && e.contains("RATE@ANCHOR"), "{e}");
        }
    }
}
