//! Leader election on a `coordination.k8s.io/v1` Lease, and the fence that
//! keeps a replica that is no longer sure it leads from writing.
//!
//! The rules are client-go's `leaderelection` package, the one
//! kube-controller-manager uses, with its flags and defaults
//! (`--leader-elect-lease-duration` 15 s, `--leader-elect-renew-deadline`
//! 10 s, `--leader-elect-retry-period` 2 s):
//!
//! - a candidate reads the Lease every retry period; it may take it when
//!   nobody holds it, or when the record it sees has not changed for the
//!   record's `leaseDurationSeconds`, measured on the candidate's own clock
//!   from the moment it first saw that record (clocks of different machines
//!   are never compared);
//! - every take and renewal is an update guarded by the Lease's
//!   resourceVersion, so of two candidates at most one wins;
//! - the leader renews every retry period, on the Lease its last renewal
//!   returned, without reading it first (client-go's optimistic renewal;
//!   a conflict falls back to reading); a failed renewal is tried again
//!   after a quarter of the retry period. Leader election has a client of
//!   its own, never waiting behind the writer's rate limit.
//!
//! The fence is where nodewarden is stricter than client-go, whose callers
//! learn of a lost lease only when a renewal round gives up. Here every
//! write is checked against a deadline: the instant the last successful
//! renewal was *sent*, plus the renew deadline, on this process's monotonic
//! clock ([`Fence`]). Another replica cannot take the Lease before it has
//! seen that renewal's record unchanged for the lease duration, which starts
//! after the renewal reached the server, hence after it was sent. So writes
//! stop at least `lease duration - renew deadline` (5 s by default) before
//! anyone else may start, whatever the renewing task is doing (stuck,
//! starved, partitioned from the API server but not from the nodes).
//!
//! [`Elector`] is the decision, free of I/O and clocks, so it is tested
//! step by step; [`campaign`] and [`Leadership`] are the async shell.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::task::JoinHandle;

/// client-go's `JitterFactor`: a candidate waits between one and 1.2 retry
/// periods, so replicas started together do not move in lockstep.
pub const JITTER_FACTOR: f64 = 1.2;

/// Gauge: 1 while this replica holds the Lease (upstream's
/// `leader_election_master_status`, labelled by the Lease's name).
pub const MASTER_STATUS_METRIC: &str = "leader_election_master_status";

/// Where the Lease lives, who we are, and the three timings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectionConfig {
    /// `--leader-elect-resource-namespace`.
    pub namespace: String,
    /// `--leader-elect-resource-name`.
    pub name: String,
    /// `holderIdentity` written while this replica leads: unique per
    /// process, so a restarted replica never mistakes its predecessor's
    /// record for its own.
    pub identity: String,
    /// `--leader-elect-lease-duration`: how long others wait, after the
    /// record last changed, before taking the Lease.
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline`: how long after the last renewal
    /// sent this replica may still write.
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period`: how often candidates look and the
    /// leader renews.
    pub retry_period: Duration,
}

impl Default for ElectionConfig {
    fn default() -> Self {
        ElectionConfig {
            namespace: "kube-system".into(),
            name: "nodewarden".into(),
            identity: String::new(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Election settings that cannot work, or an API error while electing.
#[derive(Debug, thiserror::Error)]
pub enum ElectionError {
    /// A flag out of range, named as the command line names it.
    #[error("{flag}: {why}")]
    Config {
        /// The flag.
        flag: &'static str,
        /// What is wrong with it.
        why: String,
    },
    /// The Lease could not be read or written for a reason retrying will
    /// not cure (for example, no permission).
    #[error("leader election Lease {namespace}/{name}: {source}")]
    Api {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// What the API server said.
        source: kube::Error,
    },
}

impl ElectionConfig {
    /// client-go's checks: lease duration > renew deadline > 1.2 x retry
    /// period > 0, and names a Lease may have.
    pub fn validate(&self) -> Result<(), ElectionError> {
        let bad = |flag, why: String| Err(ElectionError::Config { flag, why });
        if self.retry_period.is_zero() {
            return bad("--leader-elect-retry-period", "must be greater than zero".into());
        }
        if self.lease_duration <= self.renew_deadline {
            return bad(
                "--leader-elect-lease-duration",
                format!(
                    "{:?} must be greater than --leader-elect-renew-deadline ({:?})",
                    self.lease_duration, self.renew_deadline
                ),
            );
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return bad(
                "--leader-elect-renew-deadline",
                format!(
                    "{:?} must be greater than {JITTER_FACTOR} x --leader-elect-retry-period ({:?})",
                    self.renew_deadline, self.retry_period
                ),
            );
        }
        if self.lease_duration.as_secs() == 0 || self.lease_duration.subsec_nanos() != 0 {
            return bad(
                "--leader-elect-lease-duration",
                format!("{:?} must be a whole number of seconds (a Lease records whole seconds)", self.lease_duration),
            );
        }
        for (flag, v) in
            [("--leader-elect-resource-name", &self.name), ("--leader-elect-resource-namespace", &self.namespace)]
        {
            if !is_dns_subdomain(v) {
                return bad(flag, format!("{v:?} is not a valid object name (lower-case DNS subdomain)"));
            }
        }
        if self.identity.is_empty() {
            return bad("identity", "the replica's identity is empty".into());
        }
        Ok(())
    }
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// A unique identity for this process: `host_` and 16 random hex digits,
/// as kube-controller-manager uses `host_` and a UUID.
pub fn process_identity(host: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the operating system's randomness.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    format!("{host}_{:016x}", h.finish())
}

/// Until when this replica may write. Shared by the elector, which moves
/// it forward on each renewal, and the writer, which asks before each
/// request.
#[derive(Debug)]
pub struct Fence {
    base: Instant,
    /// Nanoseconds after `base`; 0 is closed, `u64::MAX` never closes.
    until: AtomicU64,
}

impl Fence {
    /// Closed until an election is won.
    pub fn closed() -> Arc<Fence> {
        Arc::new(Fence { base: Instant::now(), until: AtomicU64::new(0) })
    }

    /// Always open: `--leader-elect=false`, a single replica by the
    /// operator's word.
    pub fn unfenced() -> Arc<Fence> {
        Arc::new(Fence { base: Instant::now(), until: AtomicU64::new(u64::MAX) })
    }

    /// Writes are allowed now.
    pub fn allows(&self) -> bool {
        self.allows_at(Instant::now())
    }

    /// Writes are allowed at `at`.
    pub fn allows_at(&self, at: Instant) -> bool {
        let until = self.until.load(Ordering::Acquire);
        until == u64::MAX || nanos_since(self.base, at) < until
    }

    /// The instant writes stop, unless renewed (`None`: never).
    pub fn deadline(&self) -> Option<Instant> {
        match self.until.load(Ordering::Acquire) {
            u64::MAX => None,
            n => Some(self.base + Duration::from_nanos(n)),
        }
    }

    /// Waits for a request that has left, for no longer than writes are
    /// allowed: `None` when the fence closed first (its deadline passed
    /// with no renewal), the request then dropped, so none of this
    /// replica's requests outlives its leadership by more than the time it
    /// takes to cut the connection. A renewal meanwhile moves the deadline.
    pub async fn bound<T>(&self, request: impl std::future::Future<Output = T>) -> Option<T> {
        let mut request = std::pin::pin!(request);
        loop {
            let Some(deadline) = self.deadline() else { return Some(request.await) };
            tokio::select! {
                answer = &mut request => return Some(answer),
                () = tokio::time::sleep_until(deadline.into()) => {
                    if !self.allows() {
                        return None;
                    }
                }
            }
        }
    }

    /// Allows writes until `at` (never moves the deadline back).
    fn extend_to(&self, at: Instant) {
        let n = nanos_since(self.base, at).min(u64::MAX - 1);
        self.until.fetch_max(n, Ordering::AcqRel);
    }

    /// Stops writes now.
    pub fn close(&self) {
        self.until.store(0, Ordering::Release);
    }
}

fn nanos_since(base: Instant, at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(base).as_nanos()).unwrap_or(u64::MAX - 1)
}

/// What the candidate or leader should do with the Lease it just read.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// No Lease exists: create this one.
    Create(Lease),
    /// Take or renew: replace the Lease with this one (it carries the
    /// resourceVersion read, so a concurrent change makes it fail).
    Update(Lease),
    /// Someone else holds it; look again later.
    HeldBy {
        /// Their identity.
        holder: String,
        /// When, on our clock, the Lease expires unless they renew.
        expires: Instant,
    },
}

/// The election's decisions (client-go's `tryAcquireOrRenew`), without
/// I/O: given the Lease as read and the time, what to write.
#[derive(Debug)]
pub struct Elector {
    config: ElectionConfig,
    /// The last record seen and when we first saw it, on our clock.
    observed: Option<(LeaseSpec, Instant)>,
}

impl Elector {
    /// A candidate that has seen nothing yet.
    pub fn new(config: ElectionConfig) -> Elector {
        Elector { config, observed: None }
    }

    /// Its configuration.
    pub fn config(&self) -> &ElectionConfig {
        &self.config
    }

    /// Decides from `current` (the Lease as just read; `None`: it does not
    /// exist), at `now` on our monotonic clock and `wall` for the times
    /// written into the record.
    pub fn plan(&mut self, now: Instant, wall: MicroTime, current: Option<&Lease>) -> Plan {
        let secs = i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let Some(current) = current else {
            return Plan::Create(Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    lease_duration_seconds: Some(secs),
                    acquire_time: Some(wall.clone()),
                    renew_time: Some(wall),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            });
        };
        let spec = current.spec.clone().unwrap_or_default();
        let changed = self.observed.as_ref().is_none_or(|(seen, _)| *seen != spec);
        if changed {
            self.observed = Some((spec.clone(), now));
        }
        let seen_at = self.observed.as_ref().map_or(now, |(_, at)| *at);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let mine = holder == self.config.identity;
        if !holder.is_empty() && !mine {
            let their = u64::try_from(spec.lease_duration_seconds.unwrap_or(0).max(0)).unwrap_or(0);
            let expires = seen_at + Duration::from_secs(their);
            if expires > now {
                return Plan::HeldBy { holder, expires };
            }
        }
        let transitions = spec.lease_transitions.unwrap_or(0);
        let mut next = LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(secs),
            renew_time: Some(wall.clone()),
            acquire_time: if mine { spec.acquire_time.clone() } else { Some(wall) },
            lease_transitions: Some(if mine { transitions } else { transitions.saturating_add(1) }),
            ..spec
        };
        if !mine {
            // A preferred holder or strategy was meant for the last
            // holder's coordination; a new holder starts clean.
            next.preferred_holder = None;
        }
        Plan::Update(Lease { metadata: current.metadata.clone(), spec: Some(next) })
    }

    /// The record just written is ours: remember it as seen, so a later
    /// read of the same record does not restart anyone's wait.
    pub fn wrote(&mut self, now: Instant, lease: &Lease) {
        self.observed = Some((lease.spec.clone().unwrap_or_default(), now));
    }
}

/// The release record client-go writes on a clean stop: no holder, a
/// one-second duration, transitions kept, so a candidate may take it at
/// once.
pub fn released(current: &Lease, wall: MicroTime) -> Lease {
    let spec = current.spec.clone().unwrap_or_default();
    Lease {
        metadata: current.metadata.clone(),
        spec: Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(wall.clone()),
            renew_time: Some(wall),
            lease_transitions: spec.lease_transitions,
            ..LeaseSpec::default()
        }),
    }
}

fn wall_now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

fn jittered(period: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    let unit = (h.finish() >> 11) as f64 / (1u64 << 53) as f64;
    period.mul_f64(1.0 + (JITTER_FACTOR - 1.0) * unit)
}

/// True for errors a later attempt may not meet (network, 5xx, 429,
/// conflicts); false for refusals that will not change (403, 400, 422).
fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 409 || s.code == 429 || s.code >= 500 || s.code == 404,
        kube::Error::SerdeError(_) | kube::Error::BuildRequest(_) | kube::Error::InferConfig(_) => false,
        _ => true,
    }
}

/// One read-decide-write round. `Ok(Some(deadline))` when we hold the
/// Lease (writes allowed until `deadline`), `Ok(None)` when someone else
/// does or the attempt met a transient error.
///
/// `ours` is the Lease as our last renewal left it: the leader renews on
/// it directly, without reading first (client-go's optimistic renewal),
/// so a renewal is one request, not two, and stands twice the chance of
/// getting through a throttling API server. A conflict (someone wrote the
/// Lease since) falls back to reading it.
async fn round(
    api: &Api<Lease>,
    elector: &mut Elector,
    ours: Option<&Lease>,
) -> Result<Option<(Instant, Lease)>, ElectionError> {
    let cfg = elector.config().clone();
    let api_err = |source| ElectionError::Api { namespace: cfg.namespace.clone(), name: cfg.name.clone(), source };
    // Bounded, so a hung request cannot hold a round past the deadline.
    let limit = cfg.retry_period.max(Duration::from_millis(500));
    if let Some(ours) = ours {
        let sent = Instant::now();
        if let Plan::Update(l) = elector.plan(sent, wall_now(), Some(ours)) {
            match tokio::time::timeout(limit, api.replace(&cfg.name, &PostParams::default(), &l)).await {
                Ok(Ok(l)) => {
                    elector.wrote(Instant::now(), &l);
                    return Ok(Some((sent + cfg.renew_deadline, l)));
                }
                Ok(Err(kube::Error::Api(s))) if s.code == 409 => {
                    tracing::debug!("the leader election Lease changed since our renewal; reading it");
                }
                Ok(Err(e)) if transient(&e) => {
                    tracing::debug!(error = %e, "could not renew the leader election Lease; trying again");
                    return Ok(None);
                }
                Ok(Err(e)) => return Err(api_err(e)),
                Err(_) => return Ok(None),
            }
        }
    }
    let current = match tokio::time::timeout(limit, api.get_opt(&cfg.name)).await {
        Ok(Ok(l)) => l,
        Ok(Err(e)) if transient(&e) => {
            tracing::debug!(error = %e, "could not read the leader election Lease; trying again");
            return Ok(None);
        }
        Ok(Err(e)) => return Err(api_err(e)),
        Err(_) => return Ok(None),
    };
    let sent = Instant::now();
    let (creating, written) = match elector.plan(sent, wall_now(), current.as_ref()) {
        Plan::HeldBy { holder, expires } => {
            tracing::debug!(%holder, expires_in_ms = expires.saturating_duration_since(sent).as_millis() as u64, "the Lease is held");
            return Ok(None);
        }
        Plan::Create(l) => (true, tokio::time::timeout(limit, api.create(&PostParams::default(), &l)).await),
        Plan::Update(l) => {
            (false, tokio::time::timeout(limit, api.replace(&cfg.name, &PostParams::default(), &l)).await)
        }
    };
    match written {
        Ok(Ok(l)) => {
            elector.wrote(Instant::now(), &l);
            Ok(Some((sent + cfg.renew_deadline, l)))
        }
        // Creating answers 404 only when the namespace does not exist.
        Ok(Err(kube::Error::Api(s))) if creating && s.code == 404 => Err(api_err(kube::Error::Api(s))),
        Ok(Err(e)) if transient(&e) => {
            tracing::debug!(error = %e, "could not write the leader election Lease; trying again");
            Ok(None)
        }
        Ok(Err(e)) => Err(api_err(e)),
        Err(_) => Ok(None),
    }
}

/// This replica leads: the fence is open and a task renews the Lease.
pub struct Leadership {
    fence: Arc<Fence>,
    api: Api<Lease>,
    config: ElectionConfig,
    renewer: JoinHandle<()>,
}

/// Competes for the Lease until this replica holds it, then starts
/// renewing it and opens `fence`. Returns an error only for a refusal
/// retrying cannot cure (a bad namespace, no permission).
pub async fn campaign(client: Client, config: ElectionConfig, fence: Arc<Fence>) -> Result<Leadership, ElectionError> {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let mut elector = Elector::new(config.clone());
    let mut announced: Option<String> = None;
    let last = loop {
        match round(&api, &mut elector, None).await? {
            Some((deadline, lease)) => {
                fence.extend_to(deadline);
                break lease;
            }
            None => {
                let holder = elector.observed.as_ref().and_then(|(s, _)| s.holder_identity.clone());
                if holder.is_some() && holder != announced {
                    tracing::info!(
                        lease = format!("{}/{}", config.namespace, config.name),
                        holder = holder.as_deref().unwrap_or_default(),
                        "standing by: another replica leads"
                    );
                    announced = holder;
                }
                tokio::time::sleep(jittered(config.retry_period)).await;
            }
        }
    };
    let transitions = last.spec.as_ref().and_then(|s| s.lease_transitions).unwrap_or(0);
    tracing::info!(
        lease = format!("{}/{}", config.namespace, config.name),
        identity = %config.identity,
        transitions,
        "became the leader"
    );
    metrics::gauge!(MASTER_STATUS_METRIC, "name" => config.name.clone()).set(1.0);
    let renewer = tokio::spawn(renew(api.clone(), elector, fence.clone(), last));
    Ok(Leadership { fence, api, config, renewer })
}

/// Renews every retry period until the fence closes: by time (renewals
/// failed for the renew deadline) or because another replica's record was
/// read.
async fn renew(api: Api<Lease>, mut elector: Elector, fence: Arc<Fence>, mut ours: Lease) {
    let period = elector.config().retry_period;
    let mut pause = period;
    loop {
        tokio::time::sleep(pause).await;
        if !fence.allows() {
            return;
        }
        // A failed attempt (throttled, timed out) is tried again after a
        // quarter of the retry period rather than a whole one, so a
        // throttling API server has to refuse many more attempts in a row
        // before the renew deadline passes; the Lease is the one request
        // that must not wait its turn. An attempt that failed leaves the
        // Lease as it was; one that someone else changed answers 409 and
        // is read.
        pause = period / 4;
        match round(&api, &mut elector, Some(&ours)).await {
            Ok(Some((deadline, lease))) => {
                fence.extend_to(deadline);
                ours = lease;
                pause = period;
            }
            Ok(None) => {
                let holder = elector.observed.as_ref().and_then(|(s, _)| s.holder_identity.clone());
                if holder.is_some_and(|h| h != elector.config().identity) {
                    tracing::error!("another replica holds the leader election Lease");
                    fence.close();
                    return;
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot renew the leader election Lease"),
        }
    }
}

impl Leadership {
    /// Resolves when this replica may no longer write: its renewals have
    /// not succeeded for the renew deadline, or another replica holds the
    /// Lease. The fence is closed by then.
    pub async fn lost(&self) {
        loop {
            match self.fence.deadline() {
                None => std::future::pending::<()>().await,
                Some(d) if Instant::now() >= d => break,
                Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await,
            }
        }
        self.fence.close();
        metrics::gauge!(MASTER_STATUS_METRIC, "name" => self.config.name.clone()).set(0.0);
    }

    /// When writes stop unless the next renewal succeeds.
    pub fn deadline(&self) -> Option<Instant> {
        self.fence.deadline()
    }

    /// Stops renewing and closes the fence. Call it after the writer has
    /// stopped; then, if the Lease is still ours, gives it up so a standby
    /// takes over at once rather than after the lease duration.
    pub async fn release(self) {
        let still_ours = self.fence.allows();
        self.renewer.abort();
        self.fence.close();
        metrics::gauge!(MASTER_STATUS_METRIC, "name" => self.config.name.clone()).set(0.0);
        if !still_ours {
            return;
        }
        let lease = match self.api.get_opt(&self.config.name).await {
            Ok(Some(l)) => l,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the Lease to release it; it expires on its own");
                return;
            }
        };
        let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref());
        if holder != Some(self.config.identity.as_str()) {
            return;
        }
        match self.api.replace(&self.config.name, &PostParams::default(), &released(&lease, wall_now())).await {
            Ok(_) => {
                tracing::info!(lease = format!("{}/{}", self.config.namespace, self.config.name), "released the lease")
            }
            Err(e) => tracing::warn!(error = %e, "could not release the Lease; it expires on its own"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(id: &str) -> ElectionConfig {
        ElectionConfig { identity: id.into(), ..ElectionConfig::default() }
    }

    fn wall(secs: i64) -> MicroTime {
        MicroTime(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + secs).expect("time"))
    }

    fn stored(plan: Plan, rv: &str) -> Lease {
        let mut l = match plan {
            Plan::Create(l) | Plan::Update(l) => l,
            Plan::HeldBy { .. } => panic!("expected a write, got {plan:?}"),
        };
        l.metadata.resource_version = Some(rv.into());
        l
    }

    #[test]
    fn defaults_are_kube_controller_managers_and_valid() {
        let c = config("a");
        assert_eq!(
            (c.lease_duration, c.renew_deadline, c.retry_period),
            (Duration::from_secs(15), Duration::from_secs(10), Duration::from_secs(2))
        );
        c.validate().expect("defaults are valid");
    }

    #[test]
    fn validation_names_the_flag() {
        let mut c = config("a");
        c.renew_deadline = Duration::from_secs(15);
        assert!(c.validate().unwrap_err().to_string().starts_with("--leader-elect-lease-duration"));
        let mut c = config("a");
        c.retry_period = Duration::from_secs(9);
        assert!(c.validate().unwrap_err().to_string().starts_with("--leader-elect-renew-deadline"));
        let mut c = config("a");
        c.retry_period = Duration::ZERO;
        assert!(c.validate().unwrap_err().to_string().starts_with("--leader-elect-retry-period"));
        let mut c = config("a");
        c.name = "Bad_Name".into();
        assert!(c.validate().unwrap_err().to_string().starts_with("--leader-elect-resource-name"));
        let mut c = config("a");
        c.lease_duration = Duration::from_millis(15_500);
        assert!(c.validate().unwrap_err().to_string().contains("whole number of seconds"));
    }

    #[test]
    fn a_missing_lease_is_created_and_held_by_us() {
        let mut e = Elector::new(config("a"));
        let Plan::Create(l) = e.plan(Instant::now(), wall(0), None) else { panic!("expected create") };
        let s = l.spec.expect("spec");
        assert_eq!(s.holder_identity.as_deref(), Some("a"));
        assert_eq!(s.lease_duration_seconds, Some(15));
        assert_eq!(s.lease_transitions, Some(0));
        assert_eq!(l.metadata.namespace.as_deref(), Some("kube-system"));
    }

    #[test]
    fn a_held_lease_is_taken_only_after_it_stays_unchanged_for_its_duration() {
        let t0 = Instant::now();
        let mut a = Elector::new(config("a"));
        let lease = stored(a.plan(t0, wall(0), None), "1");
        let mut b = Elector::new(config("b"));
        // b first sees a's record at t0 + 3 s: the wait starts then, not
        // at the record's renewTime (another machine's clock).
        let seen = t0 + Duration::from_secs(3);
        match b.plan(seen, wall(100), Some(&lease)) {
            Plan::HeldBy { holder, expires } => {
                assert_eq!(holder, "a");
                assert_eq!(expires, seen + Duration::from_secs(15));
            }
            other => panic!("expected held, got {other:?}"),
        }
        assert!(matches!(b.plan(seen + Duration::from_millis(14_999), wall(100), Some(&lease)), Plan::HeldBy { .. }));
        let Plan::Update(taken) = b.plan(seen + Duration::from_secs(15), wall(200), Some(&lease)) else {
            panic!("expected b to take the expired lease")
        };
        let s = taken.spec.expect("spec");
        assert_eq!(s.holder_identity.as_deref(), Some("b"));
        assert_eq!(s.lease_transitions, Some(1));
        assert_eq!(s.acquire_time, Some(wall(200)));
        assert_eq!(taken.metadata.resource_version.as_deref(), Some("1"), "guarded by the version read");
    }

    #[test]
    fn a_renewal_seen_restarts_the_wait() {
        let t0 = Instant::now();
        let mut a = Elector::new(config("a"));
        let first = stored(a.plan(t0, wall(0), None), "1");
        let mut b = Elector::new(config("b"));
        assert!(matches!(b.plan(t0, wall(0), Some(&first)), Plan::HeldBy { .. }));
        let renewed = stored(a.plan(t0 + Duration::from_secs(10), wall(10), Some(&first)), "2");
        match b.plan(t0 + Duration::from_secs(14), wall(14), Some(&renewed)) {
            Plan::HeldBy { expires, .. } => assert_eq!(expires, t0 + Duration::from_secs(29)),
            other => panic!("expected held, got {other:?}"),
        }
    }

    #[test]
    fn the_leader_renews_keeping_acquire_time_and_transitions() {
        let t0 = Instant::now();
        let mut a = Elector::new(config("a"));
        let first = stored(a.plan(t0, wall(0), None), "1");
        let Plan::Update(r) = a.plan(t0 + Duration::from_secs(2), wall(2), Some(&first)) else {
            panic!("expected renewal")
        };
        let s = r.spec.expect("spec");
        assert_eq!(s.acquire_time, Some(wall(0)));
        assert_eq!(s.renew_time, Some(wall(2)));
        assert_eq!(s.lease_transitions, Some(0));
    }

    #[test]
    fn a_released_lease_is_taken_at_once() {
        let t0 = Instant::now();
        let mut a = Elector::new(config("a"));
        let first = stored(a.plan(t0, wall(0), None), "1");
        let mut rel = released(&first, wall(5));
        rel.metadata.resource_version = Some("2".into());
        let mut b = Elector::new(config("b"));
        let Plan::Update(taken) = b.plan(t0, wall(5), Some(&rel)) else { panic!("expected take") };
        assert_eq!(taken.spec.and_then(|s| s.lease_transitions), Some(1));
    }

    #[test]
    fn a_lease_with_no_duration_is_expired() {
        let mut b = Elector::new(config("b"));
        let l = Lease {
            metadata: ObjectMeta { name: Some("nodewarden".into()), ..ObjectMeta::default() },
            spec: Some(LeaseSpec { holder_identity: Some("a".into()), ..LeaseSpec::default() }),
        };
        assert!(matches!(b.plan(Instant::now(), wall(0), Some(&l)), Plan::Update(_)));
    }

    #[test]
    fn the_fence_closes_at_its_deadline_and_never_moves_back() {
        let f = Fence::closed();
        assert!(!f.allows());
        let t = Instant::now() + Duration::from_secs(10);
        f.extend_to(t);
        assert!(f.allows_at(t - Duration::from_millis(1)));
        assert!(!f.allows_at(t));
        f.extend_to(t - Duration::from_secs(5));
        assert_eq!(f.deadline(), Some(t));
        f.close();
        assert!(!f.allows());
        assert!(Fence::unfenced().allows_at(Instant::now() + Duration::from_secs(1_000_000)));
    }

    /// A request still unanswered when the fence closes is given up; one
    /// whose fence is renewed meanwhile is waited for. (The fence reads
    /// the real clock, so this runs on it: a few hundred milliseconds.)
    #[tokio::test]
    async fn a_request_is_waited_for_no_longer_than_the_fence_allows() {
        let f = Fence::closed();
        f.extend_to(Instant::now() + Duration::from_millis(200));
        let started = Instant::now();
        assert_eq!(f.bound(std::future::pending::<()>()).await, None, "cut off when the fence closed");
        assert!(started.elapsed() >= Duration::from_millis(200));

        let f = Fence::closed();
        f.extend_to(Instant::now() + Duration::from_secs(1));
        let answer = f.bound(async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            // The renewal, while the request is on its way.
            f.extend_to(Instant::now() + Duration::from_secs(10));
            tokio::time::sleep(Duration::from_millis(1400)).await;
            7
        });
        assert_eq!(answer.await, Some(7), "renewed at 0.1 s, answered at 1.5 s");
        assert_eq!(Fence::unfenced().bound(async { 1 }).await, Some(1));
    }

    #[test]
    fn identities_differ_per_call() {
        assert_ne!(process_identity("h"), process_identity("h"));
        assert!(process_identity("h").starts_with("h_"));
    }
}
