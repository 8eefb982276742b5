//! Control-plane faults, as clients of the served API see them: a full
//! outage (connections refused and dropped), 5xx storms, 429s with
//! `Retry-After`, added latency, and dropped watches. The simulated
//! kubelets live inside the server and are not affected, as in the
//! simulator's own control-plane outage.
//!
//! Invariant: a fault acts only on what goes through the API (HTTP
//! requests and watches, the in-process controller's writes and watches);
//! it never changes the store.

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nodewarden_model::Span;
use tokio::sync::watch;

use crate::error::ApiError;

/// One kind of API fault: the troubles a real control plane gives its
/// clients, so their handling of each can be tested on purpose.
#[derive(Clone, Debug, PartialEq)]
pub enum ApiFault {
    /// The API server is gone: new connections are closed at once, open
    /// ones (watches included) are cut.
    Outage,
    /// A share of requests fails with this 5xx code.
    Errors {
        /// Share of requests, 0 to 1.
        rate: f64,
        /// 500, 502, 503 or 504.
        code: u16,
    },
    /// A share of requests gets 429 Too Many Requests with `Retry-After`.
    Throttle {
        /// Share of requests, 0 to 1.
        rate: f64,
        /// Seconds the client is told to wait.
        retry_after: u64,
    },
    /// Every response is delayed by this much.
    Latency(Duration),
    /// Every open watch is closed now (clients resume from their last
    /// resourceVersion).
    DropWatches,
    /// The server and its kubelets stop, as a process stopped with
    /// SIGSTOP: requests are held unanswered until the freeze ends, open
    /// watches fall silent (no event, no bookmark) without being closed,
    /// and no kubelet heartbeats meanwhile.
    Freeze,
}

impl fmt::Display for ApiFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiFault::Outage => write!(f, "full API outage"),
            ApiFault::Errors { rate, code } => write!(f, "{:.0}% of requests fail with {code}", rate * 100.0),
            ApiFault::Throttle { rate, retry_after } => {
                write!(f, "{:.0}% of requests get 429 (Retry-After {retry_after}s)", rate * 100.0)
            }
            ApiFault::Latency(d) => write!(f, "{}ms added latency", d.as_millis()),
            ApiFault::DropWatches => write!(f, "every watch dropped"),
            ApiFault::Freeze => write!(f, "the API server and its kubelets frozen"),
        }
    }
}

/// A fault at an offset from the start, for a while: the API's fault plan,
/// played out on the wall clock beside the scenario's.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedApiFault {
    /// When it starts, from the server's start.
    pub at: Duration,
    /// How long it lasts (`None`: until the end; ignored for
    /// [`ApiFault::DropWatches`]).
    pub lasts: Option<Duration>,
    /// What happens.
    pub fault: ApiFault,
}

/// A fault spec that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid API fault {spec:?}: {why}; expected KIND[:ARGS]@START[+DURATION], e.g. outage@60s+30s, \
     errors:0.5:503@10s+20s, throttle:1:2@0s+10s, latency:200ms@0s+1m, drop-watches@30s, freeze@60s+100s"
)]
pub struct BadFault {
    /// What was given.
    pub spec: String,
    /// Why it is refused.
    pub why: String,
}

fn duration(s: &str) -> Result<Duration, String> {
    let span: Span = s.parse().map_err(|e| format!("{s:?} is not a duration ({e})"))?;
    if span < Span::ZERO {
        return Err(format!("{s:?} is negative"));
    }
    Ok(Duration::from_nanos(span.as_nanos().unsigned_abs()))
}

fn rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("rate {s:?} must be a number from 0 to 1")),
    }
}

impl FromStr for PlannedApiFault {
    type Err = BadFault;
    fn from_str(spec: &str) -> Result<Self, BadFault> {
        let bad = |why: String| BadFault { spec: spec.to_string(), why };
        let (what, when) = spec.split_once('@').ok_or_else(|| bad("no @START".into()))?;
        let (start, lasts) = match when.split_once('+') {
            Some((s, d)) => (s, Some(duration(d).map_err(bad)?)),
            None => (when, None),
        };
        let at = duration(start).map_err(bad)?;
        let mut parts = what.split(':');
        let kind = parts.next().unwrap_or_default();
        let args: Vec<&str> = parts.collect();
        let fault = match (kind, args.as_slice()) {
            ("outage", []) => ApiFault::Outage,
            ("drop-watches", []) => ApiFault::DropWatches,
            ("freeze", []) if lasts.is_some() => ApiFault::Freeze,
            ("freeze", []) => return Err(bad("a freeze needs a +DURATION".into())),
            ("latency", [d]) => ApiFault::Latency(duration(d).map_err(bad)?),
            ("errors", [r]) => ApiFault::Errors { rate: rate(r).map_err(bad)?, code: 503 },
            ("errors", [r, c]) => {
                let code = match c.parse::<u16>() {
                    Ok(code @ (500 | 502 | 503 | 504)) => code,
                    _ => return Err(bad(format!("code {c:?} must be 500, 502, 503 or 504"))),
                };
                ApiFault::Errors { rate: rate(r).map_err(bad)?, code }
            }
            ("throttle", [r]) => ApiFault::Throttle { rate: rate(r).map_err(bad)?, retry_after: 1 },
            ("throttle", [r, s]) => ApiFault::Throttle {
                rate: rate(r).map_err(bad)?,
                retry_after: s.parse().map_err(|_| bad(format!("Retry-After {s:?} must be whole seconds")))?,
            },
            _ => return Err(bad(format!("unknown kind or arguments {what:?}"))),
        };
        Ok(PlannedApiFault { at, lasts, fault })
    }
}

/// What a request meets.
#[derive(Debug)]
pub enum Verdict {
    /// Cut the connection.
    Abort,
    /// Answer with this error, after the delay.
    Fail(ApiError, Duration),
    /// Go on, after the delay.
    Proceed(Duration),
}

struct Active {
    fault: ApiFault,
    until: Option<Instant>,
    only: Option<FaultTarget>,
}

/// The requests a fault is aimed at, for tests that cut one client off
/// (one replica of a controller) while others go on. Both parts are
/// substrings; an empty one matches every request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultTarget {
    /// Part of the client's `User-Agent`.
    pub user_agent: String,
    /// Part of the request path (`/leases/` for leases only).
    pub path: String,
}

impl FaultTarget {
    fn matches(&self, user_agent: Option<&str>, path: Option<&str>) -> bool {
        let (Some(agent), Some(path)) = (user_agent, path) else { return false };
        agent.contains(&self.user_agent) && path.contains(&self.path)
    }
}

/// The faults in force now. One switchboard, read by every request, watch
/// and in-process write, so a fault hits every client alike.
pub struct ApiFaults {
    active: Mutex<(Vec<Active>, u64)>,
    drops: watch::Sender<u64>,
}

impl Default for ApiFaults {
    fn default() -> Self {
        ApiFaults { active: Mutex::new((Vec::new(), 0x2545_F491_4F6C_DD1D)), drops: watch::channel(0).0 }
    }
}

impl ApiFaults {
    /// Puts a fault in force for `lasts` (`None`: until cleared).
    pub fn inject(&self, fault: ApiFault, lasts: Option<Duration>) {
        tracing::info!(%fault, ?lasts, "API fault injected");
        let drop_watches = matches!(fault, ApiFault::DropWatches | ApiFault::Outage);
        if fault != ApiFault::DropWatches {
            let until = lasts.map(|d| Instant::now() + d);
            let mut a = self.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            a.0.push(Active { fault, until, only: None });
        }
        // After the outage is in force, so a watch that wakes sees it.
        if drop_watches {
            self.drops.send_modify(|g| *g += 1);
        }
    }

    /// Puts a fault in force for `lasts` for the requests `target` names
    /// only. A targeted outage cuts those requests (watches included, when
    /// they next send) but leaves the listener open for everyone else;
    /// [`ApiFault::DropWatches`] cannot be targeted and is ignored here.
    pub fn inject_for(&self, target: FaultTarget, fault: ApiFault, lasts: Option<Duration>) {
        tracing::info!(%fault, ?lasts, agent = %target.user_agent, path = %target.path, "targeted API fault injected");
        if fault == ApiFault::DropWatches {
            return;
        }
        let until = lasts.map(|d| Instant::now() + d);
        let mut a = self.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        a.0.push(Active { fault, until, only: Some(target) });
    }

    /// Ends every fault.
    pub fn clear(&self) {
        self.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner).0.clear();
    }

    /// Watches end when this changes.
    pub fn drops(&self) -> watch::Receiver<u64> {
        self.drops.subscribe()
    }

    /// True during an outage.
    pub fn outage(&self) -> bool {
        let mut a = self.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        a.0.retain(|f| f.until.is_none_or(|u| u > now));
        a.0.iter().any(|f| f.fault == ApiFault::Outage && f.only.is_none())
    }

    /// True while the server is frozen ([`ApiFault::Freeze`]).
    pub fn frozen(&self) -> bool {
        let mut a = self.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        a.0.retain(|f| f.until.is_none_or(|u| u > now));
        a.0.iter().any(|f| f.fault == ApiFault::Freeze && f.only.is_none())
    }

    /// What a request from inside the server (the in-process controller)
    /// meets now: untargeted faults only.
    pub fn verdict(&self) -> Verdict {
        self.verdict_for(None, None)
    }

    /// What a request with this `User-Agent` and path meets now.
    pub fn verdict_for(&self, user_agent: Option<&str>, path: Option<&str>) -> Verdict {
        let mut guard = self.active.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (active, seed) = &mut *guard;
        let now = Instant::now();
        active.retain(|f| f.until.is_none_or(|u| u > now));
        let mut draw = || {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            (*seed >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut delay = Duration::ZERO;
        let mut fail = None;
        for f in active.iter() {
            if f.only.as_ref().is_some_and(|t| !t.matches(user_agent, path)) {
                continue;
            }
            match &f.fault {
                ApiFault::Outage => return Verdict::Abort,
                ApiFault::Latency(d) => delay += *d,
                // Held until the server wakes (a freeze always has an end).
                ApiFault::Freeze => delay += f.until.map_or(Duration::ZERO, |u| u.saturating_duration_since(now)),
                ApiFault::Errors { rate, code } if fail.is_none() && draw() < *rate => {
                    fail = Some(match code {
                        500 => ApiError::Internal("injected fault: etcdserver: request timed out".into()),
                        503 => ApiError::Unavailable("the server is currently unable to handle the request".into()),
                        504 => ApiError::Timeout("the server was unable to return a response in the time allotted, but may still be processing the request".into()),
                        _ => ApiError::Code { code: *code, reason: "InternalError", message: "injected fault: bad gateway".into() },
                    });
                }
                ApiFault::Throttle { rate, retry_after } if fail.is_none() && draw() < *rate => {
                    fail = Some(ApiError::TooManyRequests {
                        message: "Too many requests, please try again later.".into(),
                        retry_after: Some(*retry_after),
                        causes: Vec::new(),
                    });
                }
                _ => {}
            }
        }
        match fail {
            Some(e) => Verdict::Fail(e, delay),
            None => Verdict::Proceed(delay),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_bad_ones_say_why() {
        let f: Result<PlannedApiFault, _> = "errors:0.5:500@10s+20s".parse();
        assert_eq!(
            f,
            Ok(PlannedApiFault {
                at: Duration::from_secs(10),
                lasts: Some(Duration::from_secs(20)),
                fault: ApiFault::Errors { rate: 0.5, code: 500 }
            })
        );
        assert!(
            matches!("outage@1m".parse::<PlannedApiFault>(), Ok(p) if p.fault == ApiFault::Outage && p.lasts.is_none())
        );
        assert!(matches!("freeze@1s+5s".parse::<PlannedApiFault>(), Ok(p) if p.fault == ApiFault::Freeze));
        for bad in
            ["freeze@1s", "outage", "errors:2@0s", "errors:0.5:404@0s", "nap@1s", "latency@1s", "throttle:1:x@0s"]
        {
            assert!(bad.parse::<PlannedApiFault>().is_err(), "{bad}");
        }
    }

    #[test]
    fn verdicts_follow_the_faults_in_force() {
        let f = ApiFaults::default();
        assert!(matches!(f.verdict(), Verdict::Proceed(d) if d.is_zero()));
        f.inject(ApiFault::Throttle { rate: 1.0, retry_after: 2 }, None);
        f.inject(ApiFault::Latency(Duration::from_millis(5)), None);
        assert!(
            matches!(f.verdict(), Verdict::Fail(e, d) if e.code() == 429 && e.retry_after() == Some(2) && d == Duration::from_millis(5))
        );
        f.clear();
        let drops = f.drops();
        f.inject(ApiFault::Outage, Some(Duration::from_secs(60)));
        assert!(f.outage() && matches!(f.verdict(), Verdict::Abort));
        assert!(drops.has_changed().unwrap_or(false));
    }

    #[test]
    fn targeted_faults_meet_only_their_requests() {
        let f = ApiFaults::default();
        let target = FaultTarget { user_agent: "replica-a".into(), path: "/leases/".into() };
        f.inject_for(target, ApiFault::Errors { rate: 1.0, code: 503 }, None);
        let lease = Some("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/nodewarden");
        assert!(matches!(f.verdict_for(Some("nodewarden (replica-a)"), lease), Verdict::Fail(e, _) if e.code() == 503));
        assert!(matches!(f.verdict_for(Some("nodewarden (replica-b)"), lease), Verdict::Proceed(_)));
        assert!(matches!(f.verdict_for(Some("nodewarden (replica-a)"), Some("/api/v1/nodes/n1")), Verdict::Proceed(_)));
        assert!(matches!(f.verdict(), Verdict::Proceed(_)), "the in-process controller is nobody's replica");
        f.inject_for(FaultTarget { user_agent: "replica-a".into(), path: String::new() }, ApiFault::Outage, None);
        assert!(!f.outage(), "the listener stays open for others");
        assert!(matches!(f.verdict_for(Some("x (replica-a)"), Some("/api")), Verdict::Abort));
    }
}
