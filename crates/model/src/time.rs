//! Virtual time.
//!
//! The engine never reads a wall clock: every decision takes `now` as an
//! argument. [`Timestamp`] is a signed offset in nanoseconds from an epoch the
//! driver chooses (replay uses t=0 = controller start; the adapter uses the
//! Unix epoch), and [`Span`] a signed length of time. Integers, not floats,
//! so that a replay at the same times gives the same answers bit for bit.

use std::fmt;
use std::ops::{Add, AddAssign, Neg, Sub};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

const NANOS_PER_SEC: i64 = 1_000_000_000;

/// A signed length of time with nanosecond resolution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span(i64);

impl Span {
    /// The empty span.
    pub const ZERO: Span = Span(0);
    /// The largest span, used as "never".
    pub const MAX: Span = Span(i64::MAX);

    /// A span of `n` nanoseconds.
    pub const fn from_nanos(n: i64) -> Span {
        Span(n)
    }
    /// A span of `ms` milliseconds.
    pub const fn from_millis(ms: i64) -> Span {
        Span(ms.saturating_mul(1_000_000))
    }
    /// A span of `s` whole seconds (saturating).
    pub const fn from_secs(s: i64) -> Span {
        Span(s.saturating_mul(NANOS_PER_SEC))
    }
    /// A standard library duration as a span, saturating at [`Span::MAX`]:
    /// for flags whose owner keeps its defaults as `Duration`s.
    pub fn from_duration(d: std::time::Duration) -> Span {
        Span(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    }
    /// A span of `s` seconds given as a float, rounded to the nanosecond.
    /// `None` when `s` is not finite or does not fit.
    pub fn from_secs_f64(s: f64) -> Option<Span> {
        let n = (s * NANOS_PER_SEC as f64).round();
        (n.is_finite() && n.abs() < i64::MAX as f64).then_some(Span(n as i64))
    }
    /// Length in nanoseconds.
    pub const fn as_nanos(self) -> i64 {
        self.0
    }
    /// Length in seconds, as a float (for metrics and display only).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NANOS_PER_SEC as f64
    }
    /// True when shorter than zero.
    pub const fn is_negative(self) -> bool {
        self.0 < 0
    }
    /// Multiplies by an integer, saturating.
    pub const fn saturating_mul(self, k: i64) -> Span {
        Span(self.0.saturating_mul(k))
    }
}

impl Neg for Span {
    type Output = Span;
    fn neg(self) -> Span {
        Span(self.0.saturating_neg())
    }
}

impl Add for Span {
    type Output = Span;
    fn add(self, rhs: Span) -> Span {
        Span(self.0.saturating_add(rhs.0))
    }
}

/// Why a duration string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpanParseError {
    /// Nothing to parse.
    #[error("empty duration")]
    Empty,
    /// The text does not follow the `1h2m3.5s` / `500ms` grammar. The
    /// examples are ones every duration flag takes (none is negative).
    #[error("invalid duration {0:?}: expected a number with a unit (h, m, s, ms, us, ns), e.g. 45s, 1m30s, 500ms")]
    Invalid(String),
    /// A number without a unit (`10`): the suggestion is the same number
    /// with one.
    #[error("invalid duration {0:?}: a number needs a unit, e.g. {0}s or {0}m (h, m, s, ms, us, ns)")]
    NoUnit(String),
    /// The value is too large to represent.
    #[error("duration {0:?} is out of range")]
    OutOfRange(String),
}

impl FromStr for Span {
    type Err = SpanParseError;

    /// Parses Go-style durations: an optional sign, then one or more
    /// `<number><unit>` parts (`1h30m`, `10.5s`, `500ms`). A bare `0` is
    /// accepted, as Go does; any other number needs a unit.
    fn from_str(text: &str) -> Result<Span, SpanParseError> {
        let s = text.trim();
        if s.is_empty() {
            return Err(SpanParseError::Empty);
        }
        let invalid = || SpanParseError::Invalid(text.to_string());
        let (negative, mut rest) = match s.as_bytes()[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        if rest == "0" {
            return Ok(Span::ZERO);
        }
        if rest.is_empty() {
            return Err(invalid());
        }
        let number = rest.bytes().all(|b| b.is_ascii_digit() || b == b'.') && rest.matches('.').count() <= 1;
        if number && rest.bytes().any(|b| b.is_ascii_digit()) {
            return Err(SpanParseError::NoUnit(s.to_string()));
        }
        let mut total: i128 = 0;
        while !rest.is_empty() {
            let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(invalid)?;
            let (num, tail) = rest.split_at(num_len);
            if num.is_empty() || num == "." || num.matches('.').count() > 1 {
                return Err(invalid());
            }
            let unit_len = tail.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(tail.len());
            let (unit, tail) = tail.split_at(unit_len);
            let scale: i128 = match unit {
                "h" => 3_600 * NANOS_PER_SEC as i128,
                "m" => 60 * NANOS_PER_SEC as i128,
                "s" => NANOS_PER_SEC as i128,
                "ms" => 1_000_000,
                "us" | "µs" => 1_000,
                "ns" => 1,
                _ => return Err(invalid()),
            };
            let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
            let int: i128 = if int_part.is_empty() {
                0
            } else {
                int_part.parse().map_err(|_| SpanParseError::OutOfRange(text.to_string()))?
            };
            let mut part = int.checked_mul(scale).ok_or_else(|| SpanParseError::OutOfRange(text.to_string()))?;
            // Fractions are exact down to the nanosecond; digits below it are dropped.
            let mut place = scale;
            for digit in frac_part.bytes() {
                place /= 10;
                if place == 0 {
                    break;
                }
                part += (digit - b'0') as i128 * place;
            }
            total = total.checked_add(part).ok_or_else(|| SpanParseError::OutOfRange(text.to_string()))?;
            rest = tail;
        }
        let total = if negative { -total } else { total };
        i64::try_from(total).map(Span).map_err(|_| SpanParseError::OutOfRange(text.to_string()))
    }
}

impl fmt::Display for Span {
    /// Seconds with the fraction trimmed: `45s`, `0.1s`, `-3600s`. One unit
    /// keeps timelines easy to read and to sort by eye.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        let secs = abs / NANOS_PER_SEC as u64;
        let frac = abs % NANOS_PER_SEC as u64;
        if frac == 0 {
            write!(f, "{sign}{secs}s")
        } else {
            let digits = format!("{frac:09}");
            write!(f, "{sign}{secs}.{}s", digits.trim_end_matches('0'))
        }
    }
}

impl Serialize for Span {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Span, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Span;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as 45s, 1m30s, 500ms or -1h")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Span, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Span, E> {
                if v == 0 {
                    Ok(Span::ZERO)
                } else {
                    Err(E::custom(format!("duration {v} has no unit: write {v}s, {v}m or {v}ms")))
                }
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Span, E> {
                self.visit_u64(v.unsigned_abs())
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// A point in (virtual) time: nanoseconds after the driver's epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The driver's epoch (t=0 in replay).
    pub const EPOCH: Timestamp = Timestamp(0);
    /// The earliest representable time.
    pub const MIN: Timestamp = Timestamp(i64::MIN);
    /// The latest representable time, used as "never".
    pub const MAX: Timestamp = Timestamp(i64::MAX);

    /// The instant `n` nanoseconds after the epoch.
    pub const fn from_nanos(n: i64) -> Timestamp {
        Timestamp(n)
    }
    /// The instant `ms` milliseconds after the epoch (saturating): how
    /// tests and scenario offsets write an instant.
    pub const fn from_millis(ms: i64) -> Timestamp {
        Timestamp(ms.saturating_mul(1_000_000))
    }
    /// The instant `s` seconds after the epoch (saturating).
    pub const fn from_secs(s: i64) -> Timestamp {
        Timestamp(s.saturating_mul(1_000_000_000))
    }
    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> i64 {
        self.0
    }
    /// The span from the epoch to this instant.
    pub const fn since_epoch(self) -> Span {
        Span(self.0)
    }
}

impl Add<Span> for Timestamp {
    type Output = Timestamp;
    fn add(self, rhs: Span) -> Timestamp {
        Timestamp(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign<Span> for Timestamp {
    fn add_assign(&mut self, rhs: Span) {
        *self = *self + rhs;
    }
}

impl Sub<Span> for Timestamp {
    type Output = Timestamp;
    fn sub(self, rhs: Span) -> Timestamp {
        Timestamp(self.0.saturating_sub(rhs.0))
    }
}

impl Sub for Timestamp {
    type Output = Span;
    fn sub(self, rhs: Timestamp) -> Span {
        Span(self.0.saturating_sub(rhs.0))
    }
}

/// 2000-01-01T00:00:00Z in Unix seconds: a [`Timestamp`] from then on is
/// shown as a date. A driver that counts from its own start (replay, the
/// simulator) stays far below it; the adapter's, counted from the Unix
/// epoch, are above it.
const DATES_FROM_UNIX_SECS: i64 = 946_684_800;

impl fmt::Display for Timestamp {
    /// As a [`Span`] from the epoch (`65s`, `0.1s`) for a driver's own
    /// clock; as an RFC 3339 UTC date (`2026-11-23T19:18:27.5Z`) from
    /// 2000 on, where the epoch is Unix's: "unschedulable since
    /// 1795463711s" would help nobody reading an Event at 3 a.m.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.div_euclid(NANOS_PER_SEC);
        if secs < DATES_FROM_UNIX_SECS {
            return Span(self.0).fmt(f);
        }
        let frac = self.0.rem_euclid(NANOS_PER_SEC);
        let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (y, m, d) = civil_from_days(days);
        write!(f, "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}", day_secs / 3600, day_secs % 3600 / 60, day_secs % 60)?;
        if frac != 0 {
            let digits = format!("{frac:09}");
            write!(f, ".{}", digits.trim_end_matches('0'))?;
        }
        f.write_str("Z")
    }
}

/// The proleptic Gregorian date of a day counted from 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Span(self.0).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        Span::deserialize(d).map(|s| Timestamp(s.0))
    }
}

/// A source of "now" for drivers (the engine itself only takes `now` as an
/// argument). Production uses the system clock, replay and tests a
/// [`ManualClock`].
pub trait Clock {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// A clock that moves only when told to, for replay, simulation and tests.
#[derive(Debug, Default, Clone)]
pub struct ManualClock {
    now: std::cell::Cell<Timestamp>,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: Timestamp) -> ManualClock {
        ManualClock { now: std::cell::Cell::new(start) }
    }
    /// Moves the clock to `t`; moving backwards is refused (returns false).
    pub fn set(&self, t: Timestamp) -> bool {
        if t < self.now.get() {
            return false;
        }
        self.now.set(t);
        true
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        self.now.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unix_time_shows_as_a_date_and_a_drivers_own_as_seconds() {
        assert_eq!(Timestamp::EPOCH.to_string(), "0s");
        assert_eq!((Timestamp::EPOCH + Span::from_millis(65_500)).to_string(), "65.5s");
        let unix = |s: i64| Timestamp::EPOCH + Span::from_secs(s);
        assert_eq!(unix(946_684_799).to_string(), "946684799s", "the day before 2000 stays a span");
        assert_eq!(unix(946_684_800).to_string(), "2000-01-01T00:00:00Z");
        assert_eq!(unix(1_795_463_711).to_string(), "2026-11-23T19:55:11Z");
        assert_eq!(unix(951_868_800).to_string(), "2000-03-01T00:00:00Z", "after a leap day");
        assert_eq!((unix(1_709_210_096) + Span::from_millis(250)).to_string(), "2024-02-29T12:34:56.25Z");
    }

    fn p(s: &str) -> Span {
        s.parse().unwrap()
    }

    #[test]
    fn parses_go_style_durations() {
        assert_eq!(p("0s"), Span::ZERO);
        assert_eq!(p("0"), Span::ZERO);
        assert_eq!(p("45s"), Span::from_secs(45));
        assert_eq!(p("1m30s"), Span::from_secs(90));
        assert_eq!(p("5m"), Span::from_secs(300));
        assert_eq!(p("-1h"), Span::from_secs(-3600));
        assert_eq!(p("10.5s"), Span::from_millis(10_500));
        assert_eq!(p("500ms"), Span::from_millis(500));
        assert_eq!(p(".5s"), Span::from_millis(500));
        assert_eq!(p("1h2m3s4ms"), Span::from_millis(3_723_004));
        assert_eq!(p("7ns"), Span::from_nanos(7));
    }

    #[test]
    fn refuses_malformed_durations() {
        for bad in ["", "5", "s", "1x", "1.2.3s", "--1s", "1s2", "h1"] {
            assert!(bad.parse::<Span>().is_err(), "{bad:?} should be refused");
        }
        assert!(matches!("99999999999h".parse::<Span>(), Err(SpanParseError::OutOfRange(_))));
    }

    /// The messages suggest what a duration flag takes: `10` gets `10s`,
    /// and no example is negative (a flag would read `-1h` as flags).
    #[test]
    fn refusals_suggest_durations_a_flag_takes() {
        let err = |s: &str| s.parse::<Span>().expect_err(s).to_string();
        assert_eq!(err("10"), r#"invalid duration "10": a number needs a unit, e.g. 10s or 10m (h, m, s, ms, us, ns)"#);
        assert_eq!(
            err(" 1.5 "),
            r#"invalid duration "1.5": a number needs a unit, e.g. 1.5s or 1.5m (h, m, s, ms, us, ns)"#
        );
        assert!(matches!("1.2.3".parse::<Span>(), Err(SpanParseError::Invalid(_))));
        assert_eq!(
            err("5x"),
            r#"invalid duration "5x": expected a number with a unit (h, m, s, ms, us, ns), e.g. 45s, 1m30s, 500ms"#
        );
    }

    #[test]
    fn displays_in_seconds() {
        assert_eq!(Span::from_secs(45).to_string(), "45s");
        assert_eq!(Span::from_millis(100).to_string(), "0.1s");
        assert_eq!(Span::from_millis(-1500).to_string(), "-1.5s");
        assert_eq!(Timestamp::from_nanos(355_100_000_000).to_string(), "355.1s");
    }

    #[test]
    fn display_round_trips() {
        for s in ["45s", "0.1s", "-3600s", "0.000000001s"] {
            assert_eq!(p(s).to_string(), s);
        }
    }

    #[test]
    fn manual_clock_never_goes_back() {
        let c = ManualClock::new(Timestamp::EPOCH);
        assert!(c.set(Timestamp::from_nanos(5)));
        assert!(!c.set(Timestamp::from_nanos(4)));
        assert_eq!(c.now(), Timestamp::from_nanos(5));
    }
}
