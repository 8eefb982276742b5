//! Whether the API server is there: the probe's answers, read as a state
//! machine with no I/O (the async shell, `runner::probe_api`, asks
//! `/version` every half second and hands each outcome in).
//!
//! Why it exists: a frozen API server (stopped, or hung) keeps its watch
//! connections open and silent, so no watch reports an error, and an
//! engine that went on deciding would judge every node by a heartbeat that
//! stopped moving. While the server is silent, the engine is blind.
//!
//! Why it is careful: blindness costs as much as it saves. An API server
//! shedding load after a partition heals (thousands of kubelets posting at
//! once) answers some requests with 429 or 503, drops one now and then,
//! and is very much there; an engine that went blind on each of those
//! would stop acting exactly when it is needed. So:
//! - an answer that is not an error of the server (a 2xx, a 429, a 403) is
//!   the server answering: it is alive, and its watches are too;
//! - it is unreachable only once the probes have failed in a row for a
//!   whole probe time (one monitor period, at least a second): a probe
//!   unanswered that long, or, for failures that come back fast (a
//!   connection refused or reset), every probe sent meanwhile, about ten
//!   at the defaults. When some were 5xx answers ([`Outcome::Failing`]),
//!   twice that long: a load balancer answers 503 for a server that is
//!   gone, and an overloaded server for one request in twenty;
//! - after it answers again, the engine waits as long as the silence
//!   lasted, at most a grace period ([`Probe::settle`]), for the watches
//!   to deliver what happened meanwhile: a node had that long to be heard
//!   from and could not be.

use std::time::{Duration, Instant};

/// Counter {outcome}: probes of the API server that got no 2xx
/// (`loaded`: a 4xx such as 429; `failing`: a 5xx; `silent`: no answer in
/// time, or no connection).
pub const PROBE_METRIC: &str = "nodewarden_api_probe_failures_total";

/// What one probe came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx.
    Answered,
    /// A 4xx (a 429 above all): the server is busy or refusing, but there.
    Loaded,
    /// A 5xx: the server, or a load balancer in front of one that is
    /// gone.
    Failing,
    /// No answer within the probe's time, or no connection at all.
    Silent,
}

impl Outcome {
    /// Reads a probe's result: `None` when it timed out.
    pub fn of<T>(result: Option<&Result<T, kube::Error>>) -> Outcome {
        match result {
            None => Outcome::Silent,
            Some(Ok(_)) => Outcome::Answered,
            Some(Err(kube::Error::Api(s))) if s.code >= 500 => Outcome::Failing,
            Some(Err(kube::Error::Api(_))) => Outcome::Loaded,
            Some(Err(_)) => Outcome::Silent,
        }
    }
}

impl Outcome {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Answered => "answered",
            Outcome::Loaded => "loaded",
            Outcome::Failing => "failing",
            Outcome::Silent => "silent",
        }
    }
}

/// The current run of probes without an answer.
#[derive(Clone, Copy, Debug)]
struct Run {
    /// When its first probe started.
    since: Instant,
    /// 5xx answers in it.
    failing: u32,
}

impl Run {
    /// Long enough, at `now`, to call the server unreachable: failing for
    /// a whole probe time (`allowed`), twice that with 5xx answers in it.
    /// The detection comes no later than before the run was counted (a
    /// frozen server's first probe goes unanswered for `allowed`), so a
    /// heartbeat seen just before a freeze is still well inside its grace
    /// when the engine stops deciding.
    fn long_enough(&self, now: Instant, allowed: Duration) -> bool {
        let needed = if self.failing > 0 { allowed * 2 } else { allowed };
        now.saturating_duration_since(self.since) >= needed
    }
}

/// A change the engine is told of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Failing in a row for long enough: decide nothing.
    Silent,
    /// Answering again after a silence that began this long ago.
    Back {
        /// From the first silent probe's start to this answer.
        silence: Duration,
    },
}

/// See the module's description.
#[derive(Debug)]
pub struct Probe {
    /// How long one probe may wait for its answer.
    allowed: Duration,
    /// The current run of probes without an answer.
    run: Option<Run>,
    /// The engine was told the server is silent.
    told_silent: bool,
}

impl Probe {
    /// Probes that wait `allowed` for each answer.
    pub fn new(allowed: Duration) -> Probe {
        Probe { allowed, run: None, told_silent: false }
    }

    /// Takes in a probe started at `started`; what the engine must be told,
    /// if anything.
    pub fn observe(&mut self, outcome: Outcome, started: Instant, now: Instant) -> Option<Change> {
        if matches!(outcome, Outcome::Silent | Outcome::Failing) {
            let run = self.run.get_or_insert(Run { since: started, failing: 0 });
            run.failing += u32::from(outcome == Outcome::Failing);
            if run.long_enough(now, self.allowed) && !self.told_silent {
                self.told_silent = true;
                return Some(Change::Silent);
            }
            return None;
        }
        let run = self.run.take();
        if !std::mem::take(&mut self.told_silent) {
            return None;
        }
        let silence = run.map_or(Duration::ZERO, |r| now.saturating_duration_since(r.since));
        Some(Change::Back { silence })
    }

    /// How long the engine waits after the server is back before it
    /// decides again: as long as the silence, at most `grace`.
    pub fn settle(silence: Duration, grace: Duration) -> Duration {
        silence.min(grace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALLOWED: Duration = Duration::from_secs(1);

    fn at(ms: u64, base: Instant) -> Instant {
        base + Duration::from_millis(ms)
    }

    #[test]
    fn a_dropped_probe_or_a_busy_server_blinds_nothing() {
        let base = Instant::now();
        let mut p = Probe::new(ALLOWED);
        // Refused twice, a 429, refused twice more: never a second of
        // failing in a row.
        for (i, outcome) in
            [Outcome::Silent, Outcome::Silent, Outcome::Loaded, Outcome::Silent, Outcome::Silent, Outcome::Answered]
                .into_iter()
                .enumerate()
        {
            let t = at(400 * i as u64, base);
            assert_eq!(p.observe(outcome, t, t), None, "probe {i}: {outcome:?}");
        }
        // 429s for a minute, and one request in four answered 503: the
        // server is there.
        for i in 0..120 {
            let t = at(10_000 + 500 * i, base);
            let outcome = if i % 4 == 0 { Outcome::Failing } else { Outcome::Loaded };
            assert_eq!(p.observe(outcome, t, t), None, "probe {i}");
        }
    }

    #[test]
    fn a_probe_unanswered_for_its_time_blinds_and_the_settle_time_follows_the_silence() {
        let base = Instant::now();
        let mut p = Probe::new(ALLOWED);
        // A frozen server: the first probe times out after its second.
        assert_eq!(p.observe(Outcome::Silent, at(0, base), at(1000, base)), Some(Change::Silent));
        assert_eq!(p.observe(Outcome::Silent, at(1000, base), at(2000, base)), None, "told once");
        // Back 20 s after the first silent probe began, with a 503: the
        // server answers.
        let back = p.observe(Outcome::Loaded, at(19_500, base), at(20_000, base));
        assert_eq!(back, Some(Change::Back { silence: Duration::from_secs(20) }));
        assert_eq!(p.observe(Outcome::Answered, at(20_500, base), at(20_600, base)), None);
        let grace = Duration::from_secs(50);
        assert_eq!(Probe::settle(Duration::from_secs(20), grace), Duration::from_secs(20));
        assert_eq!(Probe::settle(Duration::from_secs(600), grace), grace, "at most a grace period");
        // Connections refused at once, every half second: blind once they
        // have failed for a second in a row.
        let told: Vec<bool> = (0..4)
            .map(|i| {
                let t = at(30_000 + 500 * i, base);
                p.observe(Outcome::Silent, t, t).is_some()
            })
            .collect();
        assert_eq!(told, [false, false, true, false]);
        let back = p.observe(Outcome::Answered, at(32_000, base), at(32_000, base));
        assert_eq!(back, Some(Change::Back { silence: Duration::from_secs(2) }));
    }

    #[test]
    fn a_load_balancer_answering_503_for_a_server_that_is_gone_blinds_after_twice_as_long() {
        let base = Instant::now();
        let mut p = Probe::new(ALLOWED);
        let told: Vec<bool> = (0..6)
            .map(|i| {
                let t = at(500 * i, base);
                p.observe(Outcome::Failing, t, t).is_some()
            })
            .collect();
        assert_eq!(told, [false, false, false, false, true, false]);
    }
}
