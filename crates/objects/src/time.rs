//! The API's times: RFC 3339 text to the engine's [`Timestamp`] and back,
//! on the clock the reader or writer lives on.
//!
//! The simulator's [`Timestamp`] counts nanoseconds from an epoch the driver
//! chooses; the served cluster anchors that epoch to a moment of the wall
//! clock ([`TimeBase`]) so that every `creationTimestamp`, heartbeat and
//! Lease renew time a client reads is a real UTC time, and every time a
//! client writes maps back onto the simulator's clock. The in-process
//! controller lives on Unix time, as the kube adapter does
//! ([`TimeBase::UNIX`], [`TimeBase::unix_timestamp`]).
//!
//! Invariant: a time written through a [`TimeBase`] and read back through
//! the same one is the same instant (to the format's precision), so what
//! a client reads and writes back never drifts.

use nodewarden_model::Timestamp;

/// Where the simulator's [`Timestamp::EPOCH`] sits on the Unix time line:
/// the one anchor that makes the scenario's times real times for clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeBase {
    /// Unix time, in nanoseconds, of `Timestamp::EPOCH`.
    pub unix_nanos_at_epoch: i64,
}

const NANOS: i64 = 1_000_000_000;

impl TimeBase {
    /// `Timestamp` is Unix time itself (what a real cluster's adapter uses).
    pub const UNIX: TimeBase = TimeBase { unix_nanos_at_epoch: 0 };

    /// `Timestamp::EPOCH` is now, on the wall clock.
    pub fn starting_now() -> TimeBase {
        TimeBase { unix_nanos_at_epoch: unix_now_nanos() }
    }

    /// The simulator's time of this Unix instant.
    pub fn from_unix_nanos(&self, unix: i64) -> Timestamp {
        Timestamp::from_nanos(unix.saturating_sub(self.unix_nanos_at_epoch))
    }

    /// The Unix instant of a simulator time.
    pub fn to_unix_nanos(&self, t: Timestamp) -> i64 {
        (t - Timestamp::EPOCH).as_nanos().saturating_add(self.unix_nanos_at_epoch)
    }

    /// The same instant as a Unix-time [`Timestamp`]: the clock of the
    /// in-process controller, which reads objects as `nodewarden run` does.
    pub fn unix_timestamp(&self, t: Timestamp) -> Timestamp {
        Timestamp::from_nanos(self.to_unix_nanos(t))
    }

    /// The simulator's time now, on the wall clock.
    pub fn now(&self) -> Timestamp {
        self.from_unix_nanos(unix_now_nanos())
    }

    /// `metav1.Time`: RFC 3339, whole seconds, UTC (`2025-01-02T03:04:05Z`).
    pub fn time(&self, t: Timestamp) -> String {
        format_rfc3339(self.to_unix_nanos(t), false)
    }

    /// `metav1.MicroTime`: RFC 3339 with microseconds (Lease renew times,
    /// `events.k8s.io` event times).
    pub fn micro_time(&self, t: Timestamp) -> String {
        format_rfc3339(self.to_unix_nanos(t), true)
    }

    /// Parses an RFC 3339 time (any precision, `Z` or an offset) into the
    /// simulator's time; `None` when it is not one.
    pub fn parse(&self, s: &str) -> Option<Timestamp> {
        parse_rfc3339(s).map(|unix| self.from_unix_nanos(unix))
    }
}

/// Unix time now, in nanoseconds, on the process's clock
/// ([`nodewarden_model::wall`]: faster than real time under `cargo xtask
/// wire`).
fn unix_now_nanos() -> i64 {
    nodewarden_model::wall::unix_now_nanos()
}

/// Now, on the engine's production clock (Unix nanoseconds): the
/// `seen_at` of an object decoded now.
pub fn wall_clock_now() -> Timestamp {
    Timestamp::from_nanos(unix_now_nanos())
}

/// Timestamps outside 2000-01-01 .. 2200-01-01 are absurd: no cluster
/// object was written before, and a time so far ahead is a corrupted one.
const SANE_FROM_UNIX_SECS: i64 = 946_684_800;
const SANE_UNTIL_UNIX_SECS: i64 = 7_258_118_400;

/// An API timestamp (RFC 3339) within the sane range, as Unix time, or
/// `None`. The readings read a time that fails this conservatively.
pub(crate) fn sane_time(s: &str) -> Option<Timestamp> {
    let unix = parse_rfc3339(s)?;
    (SANE_FROM_UNIX_SECS..SANE_UNTIL_UNIX_SECS).contains(&unix.div_euclid(NANOS)).then(|| Timestamp::from_nanos(unix))
}

/// The days of a month (the Gregorian leap rule).
fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Formats Unix nanoseconds as RFC 3339 UTC, as the served objects carry
/// times, for tools that write or compare them.
pub fn format_rfc3339(unix_nanos: i64, micros: bool) -> String {
    let secs = unix_nanos.div_euclid(NANOS);
    let frac = unix_nanos.rem_euclid(NANOS);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let (hh, mm, ss) = (rem / 3600, rem % 3600 / 60, rem % 60);
    if micros {
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{:06}Z", frac / 1000)
    } else {
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
    }
}

/// Parses RFC 3339 into Unix nanoseconds: the reverse, for tools that
/// read the served objects' times.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        if part.bytes().all(|c| c.is_ascii_digit()) { part.parse().ok() } else { None }
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') || b[13] != b':' {
        return None;
    }
    if b[16] != b':' {
        return None;
    }
    let (y, mo, d, h, mi, sec) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=days_in_month(y, mo)).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac: i64 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let digits = s.get(start..i)?;
        if digits.is_empty() {
            return None;
        }
        let mut padded: String = digits.chars().take(9).collect();
        while padded.len() < 9 {
            padded.push('0');
        }
        frac = padded.parse().ok()?;
    }
    let offset = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let o = num(i + 1..i + 3)? * 3600 + num(i + 4..i + 6)? * 60;
            if *sign == b'+' { o } else { -o }
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec - offset;
    secs.checked_mul(NANOS)?.checked_add(frac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_offsets() {
        let t = parse_rfc3339("2025-03-01T12:34:56Z");
        assert_eq!(t.map(|n| format_rfc3339(n, false)).as_deref(), Some("2025-03-01T12:34:56Z"));
        let m = parse_rfc3339("2024-02-29T23:59:59.123456Z");
        assert_eq!(m.map(|n| format_rfc3339(n, true)).as_deref(), Some("2024-02-29T23:59:59.123456Z"));
        assert_eq!(parse_rfc3339("2025-03-01T14:34:56+02:00"), t);
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert!(parse_rfc3339("2000-02-29T00:00:00Z").is_some(), "a leap day of a leap century");
        for bad in [
            "",
            "2025-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2025-04-31T00:00:00Z",
            "2025-03-01 00:00",
            "2025-03-01T00:00:00",
            "2025-03-01T00:00:00.Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
        let base = TimeBase { unix_nanos_at_epoch: 1_000 * NANOS };
        assert_eq!(base.time(Timestamp::EPOCH), "1970-01-01T00:16:40Z");
        assert_eq!(base.parse("1970-01-01T00:16:41Z"), Some(Timestamp::from_nanos(NANOS)));
        // One instant, written the same from either clock.
        let t = Timestamp::from_nanos(3 * NANOS);
        assert_eq!(base.unix_timestamp(t), Timestamp::from_nanos(1_003 * NANOS));
        assert_eq!(TimeBase::UNIX.time(base.unix_timestamp(t)), base.time(t));
    }
}
