//! Simulated kubelets: deterministic Lease renewals and status posts for
//! nodes with `kubelet: true` (scenario rules 2 and 13).
//!
//! A kubelet started at `s` renews its Lease at `s, s+I, s+2I, ...`
//! (I = lease duration / 4), computes its status at `s, s+U, ...` and posts
//! Ready=True then if the stored Ready is not True, and re-posts its status
//! (fresh heartbeat) at `s, s+R, ...` even when nothing changed. It never
//! touches other conditions.
//!
//! The load simulation adds what the replay contract leaves out: Lease
//! renewal jitter ([`Kubelets::with_jitter`]), kubelets started at
//! different phases ([`Kubelets::schedule_phased`]), and partitions
//! ([`Kubelets::set_partitioned`]): a kubelet that keeps running but cannot
//! reach the API server.

use std::collections::HashMap;

use nodewarden_engine::Observation;
use nodewarden_model::{CompactName, ConditionStatus, Span, Timestamp};

use crate::due::{DueQueue, Entry};
use crate::rng::mix;
use crate::scenario::KubeletSpec;

/// A node as its kubelet addresses it: the name (inline, so the kubelet
/// reads it where it reads its cadence), and the row a [`KubeletApi`] that
/// keeps its nodes in a table handed out for it ([`KubeletApi::handle`]),
/// so that a renewal reaches the node without a search by name. The API
/// honours a row only while the row holds that same name.
#[derive(Clone, Debug)]
pub struct NodeHandle {
    name: CompactName,
    row: Option<u32>,
}

impl NodeHandle {
    /// A handle by name only.
    pub fn new(name: &str) -> NodeHandle {
        NodeHandle { name: CompactName::from(name), row: None }
    }

    /// The handle of the node `name` at `row` of an API's table.
    pub(crate) fn at_row(name: CompactName, row: u32) -> NodeHandle {
        NodeHandle { name, row: Some(row) }
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// The node's name, as kept.
    pub(crate) fn compact_name(&self) -> &CompactName {
        &self.name
    }

    /// The row, if an API handed one out.
    pub(crate) fn row(&self) -> Option<u32> {
        self.row
    }
}

/// What a simulated kubelet reads and writes: the in-memory
/// [`Cluster`](crate::cluster::Cluster) of replay and `nodewarden sim`, or
/// the object store of the served cluster (`nodewarden sim --serve`), so
/// both run the same kubelets with the same timing, jitter and partitions.
/// The kubelets know only this trait; each cluster implements it where it
/// keeps its nodes, so the kubelets sit below every cluster.
///
/// The `*_of` methods are what the kubelets call; by default they go by
/// name to the three required ones. An API that keeps its nodes in a table
/// (the in-memory cluster) hands out rows with [`KubeletApi::handle`] and
/// answers them directly: at 100k nodes that is 20,000 calls a simulated
/// second.
pub trait KubeletApi {
    /// The node's stored Ready status: `None` when the node does not exist
    /// (its kubelet has nothing to do), `Some(None)` when it has no Ready
    /// condition.
    fn ready_status(&self, node: &str) -> Option<Option<ConditionStatus>>;
    /// Renews the node's Lease at `now` (creating it if needed); returns
    /// what the watches deliver.
    fn renew_lease(&mut self, node: &str, now: Timestamp) -> Vec<Observation>;
    /// Posts Ready=True with heartbeat `now` (the transition time moves only
    /// when the status changes); returns what the watches deliver.
    fn post_ready(&mut self, node: &str, now: Timestamp) -> Vec<Observation>;

    /// A handle with a row for the node's kubelet to keep, when this API
    /// keeps its nodes in a table; `None` (the default) otherwise.
    fn handle(&mut self, _node: &str) -> Option<NodeHandle> {
        None
    }
    /// Reads what a kubelet's next call through `node` will read, and
    /// returns something of it: the kubelets read a group of handles
    /// before running them, so that the cache misses of a large table
    /// overlap instead of coming one after another. Nothing (the default)
    /// for an API that keeps no table.
    fn touch(&self, _node: &NodeHandle) -> u64 {
        0
    }
    /// [`KubeletApi::ready_status`] through a handle.
    fn ready_status_of(&self, node: &NodeHandle) -> Option<Option<ConditionStatus>> {
        self.ready_status(node.name())
    }
    /// [`KubeletApi::renew_lease`] through a handle, appending what the
    /// watches deliver to `out`.
    fn renew_lease_of(&mut self, node: &NodeHandle, now: Timestamp, out: &mut Vec<Observation>) {
        out.extend(self.renew_lease(node.name(), now));
    }
    /// [`KubeletApi::post_ready`] through a handle, appending what the
    /// watches deliver to `out`.
    fn post_ready_of(&mut self, node: &NodeHandle, now: Timestamp, out: &mut Vec<Observation>) {
        out.extend(self.post_ready(node.name(), now));
    }
}

/// The three periods every simulated kubelet follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KubeletTiming {
    /// Lease renewal period: a quarter of the lease duration.
    pub lease_every: Span,
    /// Status computation period (`node-status-update-frequency`).
    pub update_every: Span,
    /// Unconditional status post period (`node-status-report-frequency`).
    pub report_every: Span,
}

impl From<&KubeletSpec> for KubeletTiming {
    fn from(k: &KubeletSpec) -> Self {
        let secs = i64::try_from(k.node_lease_duration_seconds).unwrap_or(i64::MAX);
        KubeletTiming {
            // 0.25 x seconds = 250 ms per second of lease duration.
            lease_every: Span::from_millis(secs.saturating_mul(250)),
            update_every: k.node_status_update_frequency,
            report_every: k.node_status_report_frequency,
        }
    }
}

impl Default for KubeletTiming {
    fn default() -> Self {
        KubeletTiming::from(&KubeletSpec::default())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cadence {
    next_lease: Timestamp,
    next_update: Timestamp,
    next_report: Timestamp,
    /// Renewals done so far (drives the jitter of the next one).
    renewals: u64,
    /// Cut off from the API server: keeps its cadence, but nothing lands.
    partitioned: bool,
    /// Bumped at every (re)schedule, so stale queue entries are recognised.
    generation: u32,
}

impl Cadence {
    fn due(&self) -> Timestamp {
        self.next_lease.min(self.next_update).min(self.next_report)
    }
}

/// One node's kubelet: its node, and its cadence while it runs.
#[derive(Clone, Debug)]
struct Kubelet {
    node: NodeHandle,
    cadence: Option<Cadence>,
}

/// How many due kubelets have their node's row read ahead
/// ([`KubeletApi::touch`]) before they run.
const TOUCH_GROUP: usize = 32;

/// Every running simulated kubelet, by node name.
///
/// Due times are kept in a timing wheel of 100 ms buckets
/// (`due.rs`), so finding what is due costs what is due, not the
/// number of kubelets: a 100k-node simulation renews about 10,000 Leases
/// per simulated second.
#[derive(Clone, Debug, Default)]
pub struct Kubelets {
    timing: KubeletTiming,
    /// Lease renewal jitter: each interval is `lease_every x (1 + j x u)`,
    /// u in [0, 1) (the kubelet's `JitterUntil` factor, 0.04); 0 = exact.
    jitter: f64,
    seed: u64,
    slots: HashMap<String, u32>,
    kubelets: Vec<Kubelet>,
    /// `(due, slot, generation)`; the first entry is always current.
    queue: DueQueue,
    /// The entries of one [`Kubelets::run_until`] round (kept for its
    /// buffer).
    due: Vec<Entry>,
}

/// The next instant of a cadence strictly after `now`. A non-positive
/// period (refused by validation) never fires again.
fn advance(next: Timestamp, now: Timestamp, every: Span) -> Timestamp {
    if next > now {
        return next;
    }
    if every <= Span::ZERO {
        return Timestamp::MAX;
    }
    let behind = (now - next).as_nanos() / every.as_nanos() + 1;
    next + every.saturating_mul(behind)
}

impl Kubelets {
    /// No kubelet running yet.
    pub fn new(timing: KubeletTiming) -> Kubelets {
        Kubelets { timing, ..Kubelets::default() }
    }

    /// Renews Leases with jitter, as real kubelets do: each renewal interval
    /// is stretched by up to `fraction` (the kubelet uses 0.04), drawn
    /// deterministically from `seed`, the node and the renewal count.
    pub fn with_jitter(mut self, fraction: f64, seed: u64) -> Kubelets {
        self.jitter = if fraction.is_finite() { fraction.max(0.0) } else { 0.0 };
        self.seed = seed;
        self
    }

    fn slot(&mut self, node: &str) -> u32 {
        if let Some(&s) = self.slots.get(node) {
            return s;
        }
        let s = u32::try_from(self.kubelets.len()).unwrap_or(u32::MAX);
        self.slots.insert(node.to_string(), s);
        self.kubelets.push(Kubelet { node: NodeHandle::new(node), cadence: None });
        s
    }

    fn cadence(&self, slot: u32) -> Option<Cadence> {
        self.kubelets.get(slot as usize).and_then(|k| k.cadence)
    }

    fn put(&mut self, slot: u32, mut cadence: Cadence) {
        let Some(k) = self.kubelets.get_mut(slot as usize) else { return };
        cadence.generation = k.cadence.map_or(0, |c| c.generation.wrapping_add(1));
        self.queue.push((cadence.due(), slot, cadence.generation));
        k.cadence = Some(cadence);
        self.clean_top();
    }

    /// True when the queue entry is the kubelet's current due time.
    fn current(&self, (due, slot, generation): Entry) -> bool {
        self.cadence(slot).is_some_and(|c| c.generation == generation && c.due() == due)
    }

    /// Drops stale entries from the front of the queue, so
    /// [`Kubelets::next_due`] is exact.
    fn clean_top(&mut self) {
        while let Some(e) = self.queue.peek() {
            if self.current(e) {
                return;
            }
            self.queue.pop();
        }
    }

    /// Starts the node's kubelet with its first renewal and post due at
    /// `at`, done by the [`Kubelets::run_due`] call for that instant (how
    /// the kubelets of the initial nodes start at t=0).
    pub fn schedule(&mut self, node: &str, at: Timestamp) {
        self.schedule_phased(node, at, at, at);
    }

    /// Starts the node's kubelet with its first Lease renewal, status
    /// computation and unconditional status post due at these instants (a
    /// fleet whose kubelets started at different times).
    pub fn schedule_phased(&mut self, node: &str, lease: Timestamp, update: Timestamp, report: Timestamp) {
        let slot = self.slot(node);
        let cadence = Cadence {
            next_lease: lease,
            next_update: update,
            next_report: report,
            renewals: 0,
            partitioned: false,
            generation: 0,
        };
        self.put(slot, cadence);
    }

    /// Starts (or restarts) the node's kubelet now: it renews the Lease
    /// and posts Ready=True at once, then keeps its cadence from `now`.
    pub fn start<C: KubeletApi + ?Sized>(&mut self, node: &str, now: Timestamp, cluster: &mut C) -> Vec<Observation> {
        self.schedule(node, now);
        let slot = self.slot(node);
        let mut out = Vec::new();
        self.run_slot(slot, now, cluster, &mut out);
        self.clean_top();
        out
    }

    /// Stops the node's kubelet (a crash).
    pub fn stop(&mut self, node: &str) {
        if let Some(&slot) = self.slots.get(node)
            && let Some(k) = self.kubelets.get_mut(slot as usize)
        {
            k.cadence = None;
            self.clean_top();
        }
    }

    /// Moves every running kubelet's cadence `by` later, phases kept. A
    /// served fleet takes a while to build (about 20 s at 100k nodes) on a
    /// clock that already runs: without this, every kubelet would be
    /// overdue when serving begins and all of them would renew and post at
    /// once, one long pass holding the store while the API waits.
    pub fn postpone(&mut self, by: Span) {
        if by <= Span::ZERO {
            return;
        }
        for slot in 0..self.kubelets.len() {
            let slot = slot as u32;
            if let Some(mut c) = self.cadence(slot) {
                c.next_lease += by;
                c.next_update += by;
                c.next_report += by;
                self.put(slot, c);
            }
        }
    }

    /// Cuts the running kubelet off from the API server (`true`) or
    /// reconnects it (`false`). A partitioned kubelet keeps its cadence, but
    /// its renewals and posts do not land; once reconnected, its next
    /// renewal and status computation land as usual.
    pub fn set_partitioned(&mut self, node: &str, partitioned: bool) {
        if let Some(&slot) = self.slots.get(node)
            && let Some(Kubelet { cadence: Some(c), .. }) = self.kubelets.get_mut(slot as usize)
        {
            c.partitioned = partitioned;
        }
    }

    /// True while the node's kubelet runs.
    pub fn is_running(&self, node: &str) -> bool {
        self.slots.get(node).is_some_and(|&s| self.cadence(s).is_some())
    }

    /// True while the node's kubelet runs cut off from the API server.
    pub fn is_partitioned(&self, node: &str) -> bool {
        self.slots.get(node).and_then(|&s| self.cadence(s)).is_some_and(|c| c.partitioned)
    }

    /// The earliest instant some kubelet has something to do.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.queue.first_due()
    }

    /// Takes every current queue entry due at or before `now` into
    /// `self.due`, earliest first.
    fn pop_due(&mut self, now: Timestamp) {
        let mut due = std::mem::take(&mut self.due);
        due.clear();
        self.queue.pop_until(now, &mut due);
        due.retain(|&e| self.current(e));
        self.due = due;
    }

    /// Does what every kubelet has due at or before `now`, in node-name
    /// order, and returns what the cluster's watches deliver.
    pub fn run_due<C: KubeletApi + ?Sized>(&mut self, now: Timestamp, cluster: &mut C) -> Vec<Observation> {
        self.pop_due(now);
        let mut due = std::mem::take(&mut self.due);
        due.sort_by(|a, b| self.kubelets[a.1 as usize].node.name.cmp(&self.kubelets[b.1 as usize].node.name));
        let mut out = Vec::new();
        for &(_, slot, _) in &due {
            self.run_slot(slot, now, cluster, &mut out);
        }
        self.due = due;
        self.clean_top();
        out
    }

    /// Does what every kubelet has due at or before `now`, each renewal and
    /// post at its own instant (in time order), and returns what the
    /// watches deliver. A driver that moves in steps uses this so Lease
    /// renew times and heartbeats keep the kubelets' own times.
    pub fn run_until<C: KubeletApi + ?Sized>(&mut self, now: Timestamp, cluster: &mut C) -> Vec<Observation> {
        let mut out = Vec::new();
        self.run_until_into(now, cluster, &mut out);
        out
    }

    /// [`Kubelets::run_until`], appending to `out` (a driver's buffer, kept
    /// from step to step).
    pub fn run_until_into<C: KubeletApi + ?Sized>(
        &mut self,
        now: Timestamp,
        cluster: &mut C,
        out: &mut Vec<Observation>,
    ) {
        self.run_until_chunked(now, cluster, out, usize::MAX, &mut |_| {});
    }

    /// [`Kubelets::run_until_into`], calling `full` with `out` whenever it
    /// holds at least `chunk` observations (`full` takes them away), so a
    /// consumer on another thread can start on them while the kubelets go
    /// on. What is left when the kubelets are done stays in `out`.
    pub fn run_until_chunked<C: KubeletApi + ?Sized>(
        &mut self,
        now: Timestamp,
        cluster: &mut C,
        out: &mut Vec<Observation>,
        chunk: usize,
        full: &mut dyn FnMut(&mut Vec<Observation>),
    ) {
        loop {
            self.pop_due(now);
            if self.due.is_empty() {
                break;
            }
            let due = std::mem::take(&mut self.due);
            for group in due.chunks(TOUCH_GROUP) {
                let mut touched = 0u64;
                for &(_, slot, _) in group {
                    if let Some(k) = self.kubelets.get(slot as usize) {
                        touched ^= cluster.touch(&k.node);
                    }
                }
                std::hint::black_box(touched);
                for &(at, slot, _) in group {
                    self.run_slot(slot, at, cluster, out);
                    if out.len() >= chunk {
                        full(out);
                    }
                }
            }
            self.due = due;
        }
        self.clean_top();
    }

    /// How many kubelets there are (running or not).
    pub fn len(&self) -> usize {
        self.kubelets.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.kubelets.is_empty()
    }

    fn run_slot<C: KubeletApi + ?Sized>(
        &mut self,
        slot: u32,
        now: Timestamp,
        cluster: &mut C,
        out: &mut Vec<Observation>,
    ) {
        let timing = self.timing;
        let (jitter, seed) = (self.jitter, self.seed);
        let Some(Kubelet { node, cadence: Some(c) }) = self.kubelets.get_mut(slot as usize) else { return };
        let lease_due = c.next_lease <= now;
        let update_due = c.next_update <= now;
        let report_due = c.next_report <= now;
        if lease_due && jitter > 0.0 && timing.lease_every > Span::ZERO {
            c.renewals += 1;
            let u = (mix(seed ^ (u64::from(slot) << 32) ^ c.renewals) >> 11) as f64 / (1u64 << 53) as f64;
            let stretch = Span::from_secs_f64(timing.lease_every.as_secs_f64() * jitter * u).unwrap_or(Span::ZERO);
            let mut next = c.next_lease;
            while next <= now {
                next = next + timing.lease_every + stretch;
            }
            c.next_lease = next;
        } else {
            c.next_lease = advance(c.next_lease, now, timing.lease_every);
        }
        c.next_update = advance(c.next_update, now, timing.update_every);
        c.next_report = advance(c.next_report, now, timing.report_every);
        let partitioned = c.partitioned;
        self.queue.push((c.due(), slot, c.generation));
        // A partitioned kubelet's writes do not reach the API server; a
        // kubelet whose node is gone has nothing to renew or post.
        if partitioned {
            return;
        }
        if node.row.is_none()
            && let Some(handle) = cluster.handle(node.name())
        {
            *node = handle;
        }
        let Some(ready) = cluster.ready_status_of(node) else {
            return;
        };
        let ready_is_true = ready == Some(ConditionStatus::True);
        if lease_due {
            cluster.renew_lease_of(node, now, out);
        }
        if report_due || (update_due && !ready_is_true) {
            cluster.post_ready_of(node, now, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use nodewarden_model::{ConditionType, Span};

    use super::*;
    use crate::admission::AdmissionDefaults;
    use crate::cluster::Cluster;
    use crate::scenario::{NodeSpec, TimeSpec};

    fn cluster(ready: Option<ConditionStatus>) -> Cluster {
        let mut c = Cluster::new(AdmissionDefaults::default());
        c.add_node(
            &NodeSpec {
                name: "n".into(),
                zone: None,
                labels: BTreeMap::new(),
                created: Some(TimeSpec::At(Span::from_secs(-3600))),
                ready,
                heartbeat: ready.map(|_| TimeSpec::At(Span::from_secs(-100))),
                transition: None,
                conditions: BTreeMap::new(),
                lease: None,
                taints: vec![],
                unschedulable: false,
                kubelet: true,
                allocatable: None,
            },
            Timestamp::EPOCH,
        );
        c
    }

    fn ready(c: &Cluster) -> (ConditionStatus, Timestamp, Timestamp) {
        let r = c.node("n").unwrap().conditions.iter().find(|c| c.kind == ConditionType::Ready).unwrap();
        (r.status, r.last_heartbeat, r.last_transition)
    }

    /// Steps through every due instant up to `end`, as the runner does.
    fn run_until(k: &mut Kubelets, c: &mut Cluster, end: Timestamp) -> Vec<Timestamp> {
        let mut times = Vec::new();
        while let Some(next) = k.next_due() {
            if next > end {
                break;
            }
            k.run_due(next, c);
            times.push(next);
        }
        times
    }

    #[test]
    fn default_timing() {
        let tm = KubeletTiming::default();
        assert_eq!(tm.lease_every, Span::from_secs(10));
        assert_eq!(tm.update_every, Span::from_secs(10));
        assert_eq!(tm.report_every, Span::from_secs(300));
    }

    #[test]
    fn renews_lease_every_quarter_duration_from_zero() {
        let mut c = cluster(Some(ConditionStatus::True));
        let mut k = Kubelets::new(KubeletTiming {
            lease_every: Span::from_secs(10),
            update_every: Span::from_secs(7),
            report_every: Span::from_secs(300),
        });
        k.schedule("n", Timestamp::from_millis(0));
        k.run_due(Timestamp::from_millis(0), &mut c);
        assert_eq!(c.lease("n"), Some(Timestamp::from_millis(0)));
        // Ready posted at 0 (a report time) with heartbeat 0, no transition change.
        assert_eq!(ready(&c), (ConditionStatus::True, Timestamp::from_millis(0), Timestamp::from_millis(-3_600_000)));
        let times = run_until(&mut k, &mut c, Timestamp::from_millis(30_000));
        assert_eq!(
            times,
            [
                Timestamp::from_millis(7000),
                Timestamp::from_millis(10_000),
                Timestamp::from_millis(14_000),
                Timestamp::from_millis(20_000),
                Timestamp::from_millis(21_000),
                Timestamp::from_millis(28_000),
                Timestamp::from_millis(30_000)
            ]
        );
        assert_eq!(c.lease("n"), Some(Timestamp::from_millis(30_000)));
        // Ready stayed True and nothing was due to re-post: heartbeat unchanged.
        assert_eq!(ready(&c).1, Timestamp::from_millis(0));
    }

    /// A postponed kubelet keeps its phase from the new start: nothing is
    /// overdue at the moment it was postponed to, and a stopped kubelet
    /// stays stopped.
    #[test]
    fn postponed_kubelets_keep_their_phases_and_are_not_overdue() {
        let mut c = cluster(Some(ConditionStatus::True));
        let mut k = Kubelets::new(KubeletTiming {
            lease_every: Span::from_secs(10),
            update_every: Span::from_secs(10),
            report_every: Span::from_secs(300),
        });
        k.schedule_phased(
            "n",
            Timestamp::from_millis(3_000),
            Timestamp::from_millis(6_000),
            Timestamp::from_millis(200_000),
        );
        k.schedule("gone", Timestamp::from_millis(1_000));
        k.stop("gone");
        k.postpone(Span::from_secs(25));
        assert_eq!(k.next_due(), Some(Timestamp::from_millis(28_000)));
        // At 25 s, where the build ended, nothing is due yet.
        assert!(run_until(&mut k, &mut c, Timestamp::from_millis(25_000)).is_empty());
        let times = run_until(&mut k, &mut c, Timestamp::from_millis(40_000));
        assert_eq!(
            times,
            [28_000, 31_000, 38_000].map(Timestamp::from_millis),
            "the lease at 3 s and the update at 6 s past the new start, then every 10 s"
        );
        assert_eq!(c.lease("n"), Some(Timestamp::from_millis(38_000)));
        assert!(!k.is_running("gone"));
    }

    #[test]
    fn reposts_at_report_times_and_repairs_within_update_frequency() {
        let mut c = cluster(Some(ConditionStatus::True));
        let mut k = Kubelets::new(KubeletTiming {
            lease_every: Span::from_secs(10),
            update_every: Span::from_secs(10),
            report_every: Span::from_secs(60),
        });
        k.schedule("n", Timestamp::from_millis(0));
        run_until(&mut k, &mut c, Timestamp::from_millis(60_000));
        assert_eq!(ready(&c).1, Timestamp::from_millis(60_000));
        // The controller marks it Unknown at 65s; the kubelet posts True at 70s.
        c.set_ready("n", ConditionStatus::Unknown, Timestamp::from_millis(65_000));
        run_until(&mut k, &mut c, Timestamp::from_millis(69_999));
        assert_eq!(ready(&c).0, ConditionStatus::Unknown);
        run_until(&mut k, &mut c, Timestamp::from_millis(70_000));
        assert_eq!(ready(&c), (ConditionStatus::True, Timestamp::from_millis(70_000), Timestamp::from_millis(70_000)));
    }

    #[test]
    fn a_node_without_status_gets_ready_at_start() {
        let mut c = cluster(None);
        let mut k = Kubelets::new(KubeletTiming::default());
        k.schedule("n", Timestamp::from_millis(0));
        let obs = k.run_due(Timestamp::from_millis(0), &mut c);
        assert_eq!(obs.len(), 2, "{obs:?}");
        assert_eq!(ready(&c), (ConditionStatus::True, Timestamp::from_millis(0), Timestamp::from_millis(0)));
    }

    #[test]
    fn stop_and_start() {
        let mut c = cluster(Some(ConditionStatus::True));
        let mut k = Kubelets::new(KubeletTiming::default());
        k.schedule("n", Timestamp::from_millis(0));
        run_until(&mut k, &mut c, Timestamp::from_millis(10_000));
        k.stop("n");
        assert!(!k.is_running("n"));
        assert_eq!(k.next_due(), None);
        c.set_ready("n", ConditionStatus::Unknown, Timestamp::from_millis(50_000));
        let obs = k.start("n", Timestamp::from_millis(61_500), &mut c);
        assert_eq!(obs.len(), 2);
        assert_eq!(c.lease("n"), Some(Timestamp::from_millis(61_500)));
        assert_eq!(ready(&c), (ConditionStatus::True, Timestamp::from_millis(61_500), Timestamp::from_millis(61_500)));
        // Cadence restarts from the start time.
        assert_eq!(k.next_due(), Some(Timestamp::from_millis(71_500)));
    }

    #[test]
    fn nothing_changes_means_no_observation() {
        let mut c = cluster(Some(ConditionStatus::True));
        let mut k = Kubelets::new(KubeletTiming {
            lease_every: Span::from_secs(10),
            update_every: Span::from_secs(3),
            report_every: Span::from_secs(300),
        });
        k.schedule("n", Timestamp::from_millis(0));
        k.run_due(Timestamp::from_millis(0), &mut c);
        assert!(k.run_due(Timestamp::from_millis(3000), &mut c).is_empty());
    }

    #[test]
    fn kubelet_of_a_deleted_node_does_nothing() {
        let mut c = cluster(Some(ConditionStatus::True));
        let mut k = Kubelets::new(KubeletTiming::default());
        k.schedule("n", Timestamp::from_millis(0));
        c.delete_node("n");
        assert!(k.run_due(Timestamp::from_millis(0), &mut c).is_empty());
        assert_eq!(c.lease("n"), None);
    }

    #[test]
    fn a_partitioned_kubelet_keeps_its_cadence_but_nothing_lands() {
        let mut c = cluster(Some(ConditionStatus::True));
        let mut k = Kubelets::new(KubeletTiming::default());
        k.schedule("n", Timestamp::from_millis(0));
        k.run_due(Timestamp::from_millis(0), &mut c);
        k.set_partitioned("n", true);
        assert!(k.is_partitioned("n") && k.is_running("n"));
        assert!(k.run_until(Timestamp::from_millis(30_000), &mut c).is_empty());
        assert_eq!(c.lease("n"), Some(Timestamp::from_millis(0)));
        assert_eq!(k.next_due(), Some(Timestamp::from_millis(40_000)));
        k.set_partitioned("n", false);
        let obs = k.run_until(Timestamp::from_millis(40_000), &mut c);
        assert_eq!(obs.len(), 1, "{obs:?}");
        assert_eq!(c.lease("n"), Some(Timestamp::from_millis(40_000)));
    }

    #[test]
    fn jittered_renewals_land_at_their_own_instants_within_four_percent() {
        let mut c = cluster(Some(ConditionStatus::True));
        let mut k = Kubelets::new(KubeletTiming::default()).with_jitter(0.04, 9);
        k.schedule_phased(
            "n",
            Timestamp::from_millis(3_000),
            Timestamp::from_millis(5_000),
            Timestamp::from_millis(100_000),
        );
        let mut renewals = Vec::new();
        for step in 1..=600 {
            // Steps of 100 ms, as the simulation takes them.
            for o in k.run_until(Timestamp::from_millis(step * 100), &mut c) {
                if let Observation::LeaseUpserted { renew: Some(r), .. } = o {
                    renewals.push(r);
                }
            }
        }
        assert_eq!(renewals[0], Timestamp::from_millis(3_000));
        assert!(renewals.len() >= 5, "{renewals:?}");
        for w in renewals.windows(2) {
            let gap = (w[1] - w[0]).as_nanos();
            assert!((10_000_000_000..=10_400_000_000).contains(&gap), "{gap}");
        }
        // Not every gap is the same: the jitter is there.
        assert!(renewals.windows(2).map(|w| w[1] - w[0]).collect::<std::collections::BTreeSet<_>>().len() > 1);
    }

    #[test]
    fn advance_skips_missed_instants() {
        assert_eq!(
            advance(Timestamp::from_millis(0), Timestamp::from_millis(25_000), Span::from_secs(10)),
            Timestamp::from_millis(30_000)
        );
        assert_eq!(
            advance(Timestamp::from_millis(0), Timestamp::from_millis(20_000), Span::from_secs(10)),
            Timestamp::from_millis(30_000)
        );
        assert_eq!(
            advance(Timestamp::from_millis(40_000), Timestamp::from_millis(20_000), Span::from_secs(10)),
            Timestamp::from_millis(40_000)
        );
        assert_eq!(advance(Timestamp::from_millis(0), Timestamp::from_millis(0), Span::ZERO), Timestamp::MAX);
    }
}
