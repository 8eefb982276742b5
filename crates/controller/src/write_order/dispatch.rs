//! Which write starts next: the writer's queue, as a state machine with no
//! I/O and no clock. The kube adapter's writer (an async shell) starts what
//! it hands out and reports back what finished; the simulated API server
//! with a client rate (`nodewarden_cluster`'s `SlowApi`) does the same on the
//! virtual clock, so replay and `nodewarden run` send in one order.
//!
//! Why it exists: a large incident decides tens of thousands of writes at
//! once (a status and a NoSchedule taint for every node of a zone, then
//! its deletions; its pods' not-ready marks wait in the engine as
//! decisions, at most `MARKS_HELD` of them built here), and the client
//! sends 20 a second. A task per waiting write cost about 9 KiB each (its
//! future, its channels): 3.7 GiB for a 40k-node zone outage. Here a
//! waiting write is its [`Action`] and a place in a queue, a few hundred
//! bytes. A write is started (given a task, judged, put in
//! line for a token) only when fewer than a few of its class are in line
//! already ([`DEFAULT_CAP`]); once its first request has gone out it no
//! longer counts, so the cap bounds the line, not the requests in flight,
//! and the rate limit, not the cap, sets the pace. Writes that have not
//! started can still be changed: that is what the two rules below use.
//!
//! Rules, each kept from the task-per-write writer:
//! - writes to one object go out one at a time, in the order the engine
//!   issued them (a node's Unknown status before its taint);
//! - an object's next write waits at the most urgent class of everything
//!   queued for it (a deletion lends its class to the pod's not-ready
//!   status ahead of it);
//! - the next write of an object whose previous write just finished goes
//!   before writes of objects not started (a chain under way is finished
//!   before new ones begin);
//! - a NoExecute taint goes before the node writes not started
//!   ([`goes_first`]), and takes its node's earlier writes that wait with
//!   it: a zone outage queues a status and a NoSchedule taint for every
//!   node of the zone, and the NoExecute taints its limiter lets through
//!   one at a time must not wait behind them all.
//!
//! - a legacy-mode deletion ([`after_status_of`]) waits while its node
//!   has a status write waiting or under way: upstream queues a node for
//!   eviction only once its status update has returned, so its pods never
//!   go while the API server still shows the node Ready; under a client
//!   rate a zone's statuses wait for minutes, and the deletions, on a
//!   bucket of their own, would otherwise overtake them.
//!
//! And three that save requests under a backlog:
//! - consecutive pod status writes to one pod that have not started are
//!   one write ([`Write::absorb`]): a not-ready mark still waiting when its
//!   pod's `DisruptionTarget` is decided goes out in the same patch;
//! - a pod's deletion does not wait behind a not-ready mark that has not
//!   started ([`Dispatch::push`]): it goes first, and the mark, judged
//!   after it, finds the pod terminating and is withdrawn (a terminating
//!   pod has left its Services' ready endpoints);
//! - an Event about the same object, with the same reason and type, as
//!   one still waiting is folded into it ([`Dispatch::push`]): one Event
//!   goes out with a count, its message the newest, prefixed
//!   `(combined from similar events): ` when the messages differed (what
//!   upstream's event correlator sends for a run of similar Events).

use std::collections::{HashMap, VecDeque};

use nodewarden_engine::{Action, ActionKind, ObjectRef};

use super::WriteClass;

/// Writes per class in line for a token at once, by default. Enough that
/// the limiter always has one of each class to hand a token to (a started
/// write is judged by the engine before it gets in line, a round trip),
/// few enough that what waits stays data that later decisions can merge
/// into or go ahead of.
pub const DEFAULT_CAP: usize = 8;

/// Events waiting beyond which new ones are dropped (client-go's
/// broadcaster queues 1000).
pub const MAX_QUEUED_EVENTS: usize = 1000;

/// One write as it waits: an action, or several pod status actions to one
/// pod carried by one request, and when the first was handed over (`D`:
/// the adapter's `Instant`, the simulation's `Timestamp`). The first
/// action is kept inline: most writes are one action, and a backlog is
/// hundreds of thousands of them.
#[derive(Debug)]
pub struct Write<D> {
    first: Action,
    more: Vec<Action>,
    /// When the first was handed to the writer.
    pub decided: D,
    /// For an Event: how many similar Events were folded into it.
    pub folded: u32,
}

impl<D> Write<D> {
    fn new(action: Action, decided: D) -> Write<D> {
        Write { first: action, more: Vec::new(), decided, folded: 0 }
    }

    /// Its actions, in the order the engine issued them.
    pub fn actions(&self) -> impl Iterator<Item = &Action> {
        std::iter::once(&self.first).chain(&self.more)
    }

    /// Its actions, taken out.
    pub fn into_actions(self) -> Vec<Action> {
        let mut all = Vec::with_capacity(1 + self.more.len());
        all.push(self.first);
        all.extend(self.more);
        all
    }

    /// The most urgent class of its actions.
    pub fn class(&self) -> WriteClass {
        self.actions().map(|a| WriteClass::of(&a.kind)).min().unwrap_or(WriteClass::Event)
    }

    /// Takes `next` in when both are pod status writes to the same pod
    /// (same uid): one patch sets every condition and reason they ask for.
    /// `Err(next)` gives it back otherwise.
    fn absorb(&mut self, next: Action) -> Result<(), Action> {
        let uid = pod_status_uid(&next.kind);
        if uid.is_some() && self.actions().all(|a| pod_status_uid(&a.kind) == uid) {
            self.more.push(next);
            Ok(())
        } else {
            Err(next)
        }
    }

    /// Takes in a similar Event (see [`event_key`]): counted, and its
    /// message kept, marked as combined when it differs.
    fn fold_event(&mut self, next: Action) {
        let (ActionKind::RecordEvent(kept), ActionKind::RecordEvent(new)) = (&mut self.first.kind, next.kind) else {
            return;
        };
        // Once combined, the prefix stays: "m" differs from "(combined
        // from similar events): m" too.
        if kept.message != new.message {
            kept.message = format!("{COMBINED}{}", new.message);
        }
        self.folded += 1;
    }

    /// Only not-ready marks: nothing a deletion must follow.
    fn only_marks(&self) -> bool {
        self.actions().all(|a| matches!(a.kind, ActionKind::MarkPodNotReady { .. }))
    }
}

/// What upstream's event correlator prefixes to the message of Events
/// it combined.
pub const COMBINED: &str = "(combined from similar events): ";

/// Events with the same key are similar: the same object, reason and
/// type, whatever their message (upstream's aggregation key, without the
/// source, which is always this controller).
type EventKey = (ObjectRef, &'static str, nodewarden_engine::EventType);

fn event_key(kind: &ActionKind) -> Option<EventKey> {
    match kind {
        ActionKind::RecordEvent(e) => Some((e.object.clone(), e.reason, e.kind)),
        _ => None,
    }
}

/// The pod uid of a pod status write; `None` for any other write.
pub fn pod_status_uid(kind: &ActionKind) -> Option<&str> {
    match kind {
        ActionKind::MarkPodNotReady { uid, .. }
        | ActionKind::AddPodDisruptionTarget { uid, .. }
        | ActionKind::SetPodNodeLost { uid, .. } => Some(uid),
        _ => None,
    }
}

/// A NoExecute taint added or taken off: few (each zone's limiter paces
/// them, a node's recovery takes them off), and the write that starts, or
/// stops, a zone's evictions. Upstream's tainting pass takes its turn at
/// the client's rate limit among a dozen status workers, not behind every
/// node's status; here it goes ahead of the node writes not started, so a
/// zone is tainted at its pace while thousands of statuses wait.
fn goes_first(kind: &ActionKind) -> bool {
    matches!(kind, ActionKind::PatchNodeTaints { slot: nodewarden_engine::WriteSlot::NoExecuteTaints, .. })
}

fn is_deletion(kind: &ActionKind) -> bool {
    matches!(kind, ActionKind::DeletePod { .. } | ActionKind::EvictForAddon { .. })
}

/// The node whose status a write must follow: a legacy-mode deletion's
/// (decided on the node's Unknown or False status, which the node's own
/// status write puts on the API server).
pub fn after_status_of(kind: &ActionKind) -> Option<ObjectRef> {
    match kind {
        ActionKind::DeletePod { why, .. }
            if matches!(why.verdict, nodewarden_engine::explain::Verdict::EvictionTimeout { .. }) =>
        {
            Some(ObjectRef::Node(why.node.clone()))
        }
        _ => None,
    }
}

fn is_status(kind: &ActionKind) -> bool {
    matches!(kind, ActionKind::UpdateNodeConditions { .. })
}

/// One object's writes: whether one is under way, and those waiting.
#[derive(Debug)]
struct Chain<D> {
    busy: bool,
    /// The write under way is a node status write.
    busy_status: bool,
    /// Its next write waits for this node's status writes to finish
    /// ([`after_status_of`]).
    after: Option<ObjectRef>,
    /// Once a write of it finished: its next goes as a chain under way.
    continued: bool,
    waiting: VecDeque<Write<D>>,
}

impl<D> Chain<D> {
    /// The class its next write waits at: the most urgent of all waiting.
    fn class(&self) -> Option<WriteClass> {
        self.waiting.iter().map(Write::class).min()
    }

    fn new() -> Chain<D> {
        // Most objects have one write waiting: room for one, not four.
        Chain { busy: false, busy_status: false, after: None, continued: false, waiting: VecDeque::with_capacity(1) }
    }

    /// A status write of this node waits or is under way.
    fn status_pending(&self) -> bool {
        self.busy_status || self.waiting.iter().any(|w| w.actions().any(|a| is_status(&a.kind)))
    }
}

/// A write to start now, and how it stands.
#[derive(Debug)]
pub struct Start<D> {
    /// The write.
    pub write: Write<D>,
    /// The class it waits at (its own, or one lent by writes behind it).
    pub class: WriteClass,
    /// The object's previous write finished just before: its requests go
    /// as a started write's do.
    pub chained: bool,
}

/// What a new action did to the queue.
#[derive(Debug, PartialEq, Eq)]
pub enum Pushed {
    /// It waits (alone or absorbed into a waiting write).
    Queued,
    /// An Event dropped: too many waiting.
    EventDropped,
    /// An Event folded into a similar one still waiting.
    EventFolded,
    /// It waits behind a write under way, which should now wait at this
    /// more urgent class (the shell raises it).
    Raise(ObjectRef, WriteClass),
}

/// See the module's description.
#[derive(Debug)]
pub struct Dispatch<D> {
    cap: usize,
    chains: HashMap<ObjectRef, Chain<D>>,
    /// Objects whose next write may start, by the class it waits at.
    /// An entry may be stale (the object's class was raised since, or it
    /// started): it is checked when popped.
    ready: [VecDeque<ObjectRef>; 4],
    /// Nodes with a NoExecute taint waiting and no write under way, in
    /// the order the taints came ([`goes_first`]): their writes start
    /// before the node writes not started, the node's earlier writes
    /// first. Checked when popped, as `ready` is.
    first: VecDeque<ObjectRef>,
    /// Events waiting (they touch no object: no chain, no order).
    events: VecDeque<Write<D>>,
    /// Where each Event waiting is: its number (the count of Events
    /// queued before it), by key; those started are `< events_started`.
    event_at: HashMap<EventKey, u64>,
    /// Events queued so far, and started so far.
    events_queued: u64,
    events_started: u64,
    /// Writes started and not yet sent (in line for a token), by the
    /// class they started at.
    in_line: [usize; 4],
    /// Writes waiting, not started (an absorbed or folded action is part
    /// of a write already counted).
    queued: usize,
    /// Objects whose next write waits for a node's status writes to
    /// finish, by node ([`after_status_of`]); back in `ready` when they
    /// have.
    held: HashMap<ObjectRef, Vec<ObjectRef>>,
}

impl<D> Dispatch<D> {
    /// A queue with at most `cap` writes per class in line for a token.
    pub fn new(cap: usize) -> Dispatch<D> {
        Dispatch {
            cap: cap.max(1),
            chains: HashMap::new(),
            ready: Default::default(),
            first: VecDeque::new(),
            events: VecDeque::new(),
            event_at: HashMap::new(),
            events_queued: 0,
            events_started: 0,
            in_line: [0; 4],
            queued: 0,
            held: HashMap::new(),
        }
    }

    /// Whether `kind` may not go now: a write that follows a node's status
    /// ([`after_status_of`]) while one waits or is under way.
    pub fn must_wait(&self, kind: &ActionKind) -> bool {
        after_status_of(kind).is_some_and(|node| self.status_pending(&node))
    }

    /// Whether `node` has a status write waiting or under way.
    fn status_pending(&self, node: &ObjectRef) -> bool {
        self.chains.get(node).is_some_and(Chain::status_pending)
    }

    /// Hands an action over.
    pub fn push(&mut self, action: Action, decided: D) -> Pushed {
        let Some((object, _)) = action.kind.slot() else {
            return self.push_event(action, decided);
        };
        let after = after_status_of(&action.kind).filter(|node| self.status_pending(node));
        let chain = self.chains.entry(object.clone()).or_insert_with(Chain::new);
        if after.is_some() {
            chain.after = after;
        }
        let class = WriteClass::of(&action.kind);
        let first = goes_first(&action.kind);
        let before = chain.class();
        let action = match chain.waiting.back_mut() {
            Some(last) => last.absorb(action).err(),
            None => Some(action),
        };
        if let Some(action) = action {
            if is_deletion(&action.kind) && chain.waiting.back().is_some_and(Write::only_marks) {
                // Ahead of the marks that have not started: once the pod
                // is terminating they are withdrawn when judged.
                let at = chain.waiting.iter().rposition(|w| !w.only_marks()).map_or(0, |i| i + 1);
                chain.waiting.insert(at, Write::new(action, decided));
                self.queued += 1;
            } else {
                chain.waiting.push_back(Write::new(action, decided));
                self.queued += 1;
            }
        }
        if chain.busy {
            return if before.is_none_or(|b| class < b) { Pushed::Raise(object, class) } else { Pushed::Queued };
        }
        if first {
            // Even behind writes of its own node that wait at the back of
            // the line (its status finished before its NoSchedule taint
            // was handed over, so the taint queued behind every node not
            // started): the node's writes go now, in their order.
            self.first.push_back(object.clone());
        }
        if before.is_none_or(|b| class < b) {
            self.ready[class as usize].push_back(object);
        }
        Pushed::Queued
    }

    /// An Event: folded into a similar one waiting, else queued unless
    /// the queue is full.
    fn push_event(&mut self, action: Action, decided: D) -> Pushed {
        let key = event_key(&action.kind);
        let waiting = key.as_ref().and_then(|k| self.event_at.get(k)).copied().filter(|&n| n >= self.events_started);
        if let Some(n) = waiting
            && let Some(similar) = usize::try_from(n - self.events_started).ok().and_then(|i| self.events.get_mut(i))
        {
            similar.fold_event(action);
            return Pushed::EventFolded;
        }
        if self.events.len() >= MAX_QUEUED_EVENTS {
            return Pushed::EventDropped;
        }
        if let Some(k) = key {
            self.event_at.insert(k, self.events_queued);
        }
        self.events_queued += 1;
        self.events.push_back(Write::new(action, decided));
        self.queued += 1;
        Pushed::Queued
    }

    /// The writes to start now, most urgent class first, within each
    /// class's cap. Each is counted in line until [`Dispatch::sent`].
    pub fn starts(&mut self) -> Vec<Start<D>> {
        let mut out = Vec::new();
        for class in WriteClass::ALL {
            while self.in_line[class as usize] < self.cap {
                let Some(start) = self.start(class) else { break };
                out.push(start);
            }
        }
        out
    }

    /// The next write of `class` to start, whatever the cap (a sender that
    /// starts a write only when it has a token for it, as the simulated
    /// API server does, keeps nothing in line). Counted in line until
    /// [`Dispatch::sent`].
    pub fn start(&mut self, class: WriteClass) -> Option<Start<D>> {
        let c = class as usize;
        if class == WriteClass::Event {
            let write = self.events.pop_front()?;
            if let Some(k) = event_key(&write.first.kind)
                && self.event_at.get(&k) == Some(&self.events_started)
            {
                self.event_at.remove(&k);
            }
            self.events_started += 1;
            self.in_line[c] += 1;
            self.queued -= 1;
            return Some(Start { write, class, chained: false });
        }
        loop {
            let first = if class == WriteClass::Node { self.first.pop_front() } else { None };
            let object = first.or_else(|| self.ready[c].pop_front())?;
            let Some(after) = self.chains.get(&object).map(|c| c.after.clone()) else { continue };
            if let Some(node) = after
                && self.status_pending(&node)
            {
                // Back in `ready` when the node's status is done.
                self.held.entry(node).or_default().push(object);
                continue;
            }
            let Some(chain) = self.chains.get_mut(&object) else { continue };
            chain.after = None;
            // Stale: started already, or waiting at another class now.
            if chain.busy || chain.class() != Some(class) {
                continue;
            }
            let Some(write) = chain.waiting.pop_front() else { continue };
            chain.busy = true;
            chain.busy_status = write.actions().any(|a| is_status(&a.kind));
            let lent = chain.class().map_or(class, |l| l.min(write.class()));
            self.in_line[c] += 1;
            self.queued -= 1;
            return Some(Start { write, class: lent, chained: std::mem::take(&mut chain.continued) });
        }
    }

    /// Whether a write of `class` may start now ([`Dispatch::start`] would
    /// give one). Drops the stale entries it passes.
    pub fn has(&mut self, class: WriteClass) -> bool {
        let c = class as usize;
        if class == WriteClass::Event {
            return !self.events.is_empty();
        }
        let startable = |chains: &HashMap<ObjectRef, Chain<D>>, o: &ObjectRef| {
            chains.get(o).is_some_and(|ch| {
                !ch.busy
                    && ch.class() == Some(class)
                    && !ch.waiting.is_empty()
                    && ch.after.as_ref().is_none_or(|n| !chains.get(n).is_some_and(Chain::status_pending))
            })
        };
        if class == WriteClass::Node {
            while let Some(o) = self.first.front() {
                if startable(&self.chains, o) {
                    return true;
                }
                self.first.pop_front();
            }
        }
        while let Some(o) = self.ready[c].front() {
            if startable(&self.chains, o) {
                return true;
            }
            self.ready[c].pop_front();
        }
        false
    }

    /// A write of `object` went out without waiting here (nothing of the
    /// object was queued, and the sender had a token): later writes to the
    /// object wait until [`Dispatch::finished`], as behind a started one.
    pub fn went_out(&mut self, object: ObjectRef, kind: &ActionKind) {
        let chain = self.chains.entry(object).or_insert_with(Chain::new);
        chain.busy = true;
        // Several on their way at once (a restart's): any status counts.
        chain.busy_status |= is_status(kind);
    }

    /// Takes out the writes of `object` that wait (not started), for a
    /// sender that answers them itself (a write of the object ended in a
    /// way its successors must not follow). The object's chain is left as
    /// it was otherwise; [`Dispatch::finished`] still ends the write under
    /// way.
    pub fn drop_waiting(&mut self, object: &ObjectRef) -> Vec<Write<D>> {
        let Some(chain) = self.chains.get_mut(object) else { return Vec::new() };
        let dropped: Vec<Write<D>> = chain.waiting.drain(..).collect();
        self.queued -= dropped.len();
        dropped
    }

    /// When the oldest write waiting (not started) of each class was
    /// handed over, by a write's own class (a mark waiting behind its
    /// pod's deletion counts as a mark). One pass over what waits: for a
    /// gauge read every few seconds, not for every write.
    pub fn oldest(&self) -> [Option<D>; 4]
    where
        D: Copy + Ord,
    {
        let mut out = [None; 4];
        let mut note = |class: WriteClass, at: D| {
            let o: &mut Option<D> = &mut out[class as usize];
            *o = Some(o.map_or(at, |x| x.min(at)));
        };
        for w in self.chains.values().flat_map(|c| &c.waiting) {
            note(w.class(), w.decided);
        }
        // Events wait in the order they came: the first is the oldest.
        if let Some(e) = self.events.front() {
            note(WriteClass::Event, e.decided);
        }
        out
    }

    /// Writes waiting that have not started.
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// Whether a write of `object` is under way or waits.
    pub fn holds(&self, object: &ObjectRef) -> bool {
        self.chains.contains_key(object)
    }

    /// A write that started at `class` is out of line: its first request
    /// went out, or it ended without one. Once per started write.
    pub fn sent(&mut self, class: WriteClass) {
        self.in_line[class as usize] = self.in_line[class as usize].saturating_sub(1);
    }

    /// A write of `object` finished (answered, withdrawn or given up): the
    /// object's next write may start. Events have no object.
    pub fn finished(&mut self, object: &ObjectRef) {
        let Some(chain) = self.chains.get_mut(object) else { return };
        chain.busy = false;
        chain.busy_status = false;
        match chain.class() {
            None => {
                self.chains.remove(object);
            }
            Some(next) => {
                chain.continued = true;
                // Ahead of objects not started.
                self.ready[next as usize].push_front(object.clone());
            }
        }
        // The writes that waited for this node's status, once none is left.
        if !self.status_pending(object)
            && let Some(held) = self.held.remove(object)
        {
            for o in held {
                if let Some(class) = self.chains.get(&o).filter(|c| !c.busy).and_then(Chain::class) {
                    self.ready[class as usize].push_back(o);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use nodewarden_engine::{ActionId, Event, EventType};
    use nodewarden_model::{Resources, Span, Timestamp};

    use super::*;

    fn act(id: u64, kind: ActionKind) -> Action {
        Action { id: ActionId(id), kind }
    }

    fn mark(id: u64, pod: &str) -> Action {
        act(id, ActionKind::MarkPodNotReady { pod: pod.into(), uid: format!("u-{pod}") })
    }

    fn target(id: u64, pod: &str) -> Action {
        act(id, ActionKind::AddPodDisruptionTarget { pod: pod.into(), uid: format!("u-{pod}") })
    }

    fn delete(id: u64, pod: &str) -> Action {
        act(
            id,
            ActionKind::EvictForAddon {
                pod: pod.into(),
                uid: format!("u-{pod}"),
                grace: None,
                why: Box::new(nodewarden_engine::AddonEviction {
                    pod: pod.into(),
                    node: "n".into(),
                    addon: "kube-system/dns".into(),
                    unschedulable_since: Timestamp::from_millis(0),
                    needed: Resources::ZERO,
                    free_before: Resources::ZERO,
                    tier: nodewarden_engine::PreparationTier::Any,
                    victims: vec![pod.into()],
                    freed: Resources::ZERO,
                    budgets: vec![],
                    pod_grace: Span::ZERO,
                    grace: Span::ZERO,
                    decided_at: Timestamp::from_millis(0),
                }),
            },
        )
    }

    #[test]
    fn an_objects_waiting_writes_can_be_taken_out() {
        let mut d = Dispatch::new(8);
        d.push(status(1, "n1"), Timestamp::EPOCH);
        let started = d.starts();
        assert_eq!(ids(&started), vec![vec![1]]);
        d.push(status(2, "n1"), Timestamp::EPOCH);
        d.push(status(3, "n2"), Timestamp::EPOCH);
        let n1 = ObjectRef::Node("n1".into());
        let dropped: Vec<u64> = d.drop_waiting(&n1).iter().flat_map(|w| w.actions().map(|a| a.id.0)).collect();
        assert_eq!(dropped, [2]);
        assert_eq!(d.queued(), 1);
        d.finished(&n1);
        assert!(!d.holds(&n1), "nothing of n1 left");
        assert_eq!(ids(&d.starts()), vec![vec![3]]);
    }

    #[test]
    fn the_oldest_write_waiting_is_found_per_class() {
        let mut d = Dispatch::new(8);
        let at = |s: i64| Timestamp::from_millis(s * 1000);
        d.push(status(1, "n1"), at(5));
        d.push(status(2, "n2"), at(3));
        d.push(mark(3, "ns/p"), at(4));
        assert_eq!(d.oldest(), [Some(at(3)), None, Some(at(4)), None]);
        let started = d.starts();
        assert_eq!(started.len(), 3);
        assert_eq!(d.oldest(), [None; 4], "started writes no longer wait here");
        assert_eq!(d.queued(), 0);
    }

    fn status(id: u64, node: &str) -> Action {
        act(id, ActionKind::UpdateNodeConditions { node: node.into(), conditions: Vec::new(), version: 0 })
    }

    fn ids(starts: &[Start<Timestamp>]) -> Vec<Vec<u64>> {
        starts.iter().map(|s| s.write.actions().map(|a| a.id.0).collect()).collect()
    }

    #[test]
    fn at_most_cap_writes_per_class_are_in_line_and_the_rest_wait_as_actions() {
        let mut d = Dispatch::new(2);
        let now = Timestamp::EPOCH;
        for i in 0..5 {
            d.push(mark(i, &format!("ns/p{i}")), now);
        }
        d.push(status(10, "n1"), now);
        let started = d.starts();
        assert_eq!(ids(&started), vec![vec![10], vec![0], vec![1]], "the node first, then two marks");
        assert!(d.starts().is_empty(), "every class at its cap");
        d.sent(WriteClass::PodStatus);
        assert_eq!(ids(&d.starts()), vec![vec![2]], "one left the line: the next starts, before the first finished");
    }

    #[test]
    fn one_objects_writes_go_one_at_a_time_in_order_and_a_chain_under_way_goes_first() {
        let mut d = Dispatch::new(1);
        let now = Timestamp::EPOCH;
        let taint = act(
            2,
            ActionKind::PatchNodeTaints {
                node: "n1".into(),
                add: Vec::new(),
                remove: Vec::new(),
                slot: nodewarden_engine::WriteSlot::NoExecuteTaints,
            },
        );
        d.push(status(1, "n1"), now);
        d.push(taint, now);
        d.push(status(3, "n2"), now);
        d.push(status(4, "n3"), now);
        assert_eq!(ids(&d.starts()), vec![vec![1]]);
        d.sent(WriteClass::Node);
        assert_eq!(ids(&d.starts()), vec![vec![3]], "n1's taint waits for its status to finish; n2 goes meanwhile");
        d.finished(&ObjectRef::Node("n1".into()));
        d.sent(WriteClass::Node);
        let second = d.starts();
        assert_eq!(ids(&second), vec![vec![2]], "n1's taint before n3's status: its chain is under way");
        assert!(second[0].chained);
    }

    /// A zone outage's shape: a status and a NoSchedule taint for each of
    /// a thousand nodes, eight in line, one token at a time. Each node's
    /// taint follows its status within a line's length, not behind every
    /// other node's status.
    #[test]
    fn a_nodes_taint_follows_its_status_not_every_other_status() {
        let mut d = Dispatch::new(8);
        let now = Timestamp::EPOCH;
        for i in 0..1000u64 {
            let node = format!("n{i:04}");
            d.push(status(i, &node), now);
            let slot = nodewarden_engine::WriteSlot::NoScheduleTaints;
            let taint = ActionKind::PatchNodeTaints { node, add: Vec::new(), remove: Vec::new(), slot };
            d.push(act(10_000 + i, taint), now);
        }
        let mut in_line: VecDeque<Start<Timestamp>> = d.starts().into();
        let mut order = Vec::new();
        while order.len() < 100 {
            // A token: the first in line is sent, and answered.
            let Some(s) = in_line.pop_front() else { break };
            let first = s.write.actions().next().expect("an action");
            order.push(first.id.0);
            let (object, _) = first.kind.slot().expect("a node write");
            d.sent(WriteClass::Node);
            d.finished(&object);
            in_line.extend(d.starts());
        }
        for i in 0..40 {
            let status_at = order.iter().position(|&id| id == i).expect("sent");
            let taint_at = order.iter().position(|&id| id == 10_000 + i).expect("its taint sent");
            assert!(taint_at > status_at && taint_at - status_at <= 16, "n{i}: {status_at} then {taint_at}: {order:?}");
        }
    }

    #[test]
    fn a_noexecute_taint_goes_before_node_writes_not_started() {
        let mut d = Dispatch::new(1);
        let now = Timestamp::EPOCH;
        let noexecute = |id, node: &str| {
            act(
                id,
                ActionKind::PatchNodeTaints {
                    node: node.into(),
                    add: Vec::new(),
                    remove: Vec::new(),
                    slot: nodewarden_engine::WriteSlot::NoExecuteTaints,
                },
            )
        };
        for i in 1..=3 {
            d.push(status(i, &format!("n{i}")), now);
        }
        d.push(noexecute(9, "n9"), now);
        // n2's taint brings n2's status, which has not started, ahead
        // with it: the node's order stands, and neither waits for n1.
        d.push(noexecute(10, "n2"), now);
        let mut order = Vec::new();
        for _ in 0..6 {
            let started = d.starts();
            for s in &started {
                let object = s.write.actions().next().and_then(|a| a.kind.slot()).map(|(o, _)| o);
                order.extend(s.write.actions().map(|a| a.id.0));
                d.sent(WriteClass::Node);
                if let Some(o) = object {
                    d.finished(&o);
                }
            }
        }
        assert_eq!(order, vec![9, 2, 10, 1, 3]);
    }

    /// Seen at 40k nodes: a node's Unknown status went out and finished
    /// before its NoSchedule taint was handed over (the writer was still
    /// taking in the pass's 26k writes), so the taint queued behind every
    /// status not started, and the NoExecute taint behind it: 2.5 minutes
    /// at 20 QPS for the zone's first taint. A NoExecute taint takes its
    /// node's waiting writes to the front.
    #[test]
    fn a_noexecute_taint_takes_its_nodes_waiting_writes_ahead() {
        let mut d = Dispatch::new(1);
        let now = Timestamp::EPOCH;
        let taint = |id, node: &str, slot| {
            act(id, ActionKind::PatchNodeTaints { node: node.into(), add: Vec::new(), remove: Vec::new(), slot })
        };
        d.push(status(1, "n1"), now);
        let started = d.starts();
        assert_eq!(ids(&started), vec![vec![1]]);
        d.sent(WriteClass::Node);
        d.finished(&ObjectRef::Node("n1".into()));
        for i in 2..=100 {
            d.push(status(i, &format!("n{i}")), now);
        }
        d.push(taint(101, "n1", nodewarden_engine::WriteSlot::NoScheduleTaints), now);
        d.push(taint(102, "n1", nodewarden_engine::WriteSlot::NoExecuteTaints), now);
        let mut order = Vec::new();
        for _ in 0..4 {
            for s in d.starts() {
                let object = s.write.actions().next().and_then(|a| a.kind.slot()).map(|(o, _)| o);
                order.extend(s.write.actions().map(|a| a.id.0));
                d.sent(WriteClass::Node);
                if let Some(o) = object {
                    d.finished(&o);
                }
            }
        }
        assert_eq!(order, vec![101, 102, 2, 3]);
    }

    #[test]
    fn pod_status_writes_waiting_together_are_one_write_at_the_most_urgent_class() {
        let mut d = Dispatch::new(8);
        let now = Timestamp::EPOCH;
        d.push(mark(1, "ns/a"), now);
        d.push(target(2, "ns/a"), now);
        let started = d.starts();
        assert_eq!(ids(&started), vec![vec![1, 2]]);
        assert_eq!(started[0].class, WriteClass::Deletion, "the DisruptionTarget's class");
    }

    #[test]
    fn a_pods_deletion_goes_before_a_mark_that_has_not_started() {
        let mut d = Dispatch::new(8);
        let now = Timestamp::EPOCH;
        d.push(mark(1, "ns/a"), now);
        d.push(delete(2, "ns/a"), now);
        assert_eq!(ids(&d.starts()), vec![vec![2]]);
        d.sent(WriteClass::Deletion);
        d.finished(&ObjectRef::Pod("ns/a".into()));
        assert_eq!(ids(&d.starts()), vec![vec![1]], "the mark follows, to be judged against the terminating pod");
    }

    #[test]
    fn a_write_behind_one_under_way_lends_it_its_class_once() {
        let mut d = Dispatch::new(8);
        let now = Timestamp::EPOCH;
        d.push(mark(1, "ns/a"), now);
        assert_eq!(d.starts().len(), 1);
        assert_eq!(d.push(delete(2, "ns/a"), now), Pushed::Raise(ObjectRef::Pod("ns/a".into()), WriteClass::Deletion));
        assert_eq!(d.push(delete(3, "ns/a"), now), Pushed::Queued, "no more urgent than what waits");
    }

    fn event(id: u64, node: &str, reason: &'static str, message: &str) -> Action {
        act(
            id,
            ActionKind::RecordEvent(Event {
                object: ObjectRef::Node(node.into()),
                kind: EventType::Normal,
                reason,
                message: message.into(),
            }),
        )
    }

    fn folded(start: &Start<Timestamp>) -> (u32, String) {
        let ActionKind::RecordEvent(e) = &start.write.actions().next().expect("an action").kind else {
            panic!("not an Event")
        };
        (start.write.folded, e.message.clone())
    }

    #[test]
    fn similar_events_waiting_are_one_with_a_count() {
        let mut d = Dispatch::new(1);
        let now = Timestamp::EPOCH;
        assert_eq!(d.push(event(1, "a", "NodeNotReady", "m1"), now), Pushed::Queued);
        assert_eq!(d.push(event(2, "b", "NodeNotReady", "m1"), now), Pushed::Queued, "another object");
        assert_eq!(d.push(event(3, "a", "RemovingNode", "m1"), now), Pushed::Queued, "another reason");
        assert_eq!(d.push(event(4, "a", "NodeNotReady", "m1"), now), Pushed::EventFolded);
        let first = d.starts();
        assert_eq!(folded(&first[0]), (1, "m1".to_string()), "the same message, counted twice");
        // Once it started, a similar Event waits on its own.
        assert_eq!(d.push(event(5, "a", "NodeNotReady", "m2"), now), Pushed::Queued);
        assert_eq!(d.push(event(6, "a", "NodeNotReady", "m3"), now), Pushed::EventFolded);
        assert_eq!(d.push(event(7, "a", "NodeNotReady", "m3"), now), Pushed::EventFolded);
        for _ in 0..2 {
            d.sent(WriteClass::Event);
            let _ = d.starts();
        }
        d.sent(WriteClass::Event);
        let last = d.starts();
        assert_eq!(folded(&last[0]), (2, format!("{COMBINED}m3")), "messages differed: combined");
        assert!(d.event_at.is_empty(), "nothing waits");
    }

    #[test]
    fn events_beyond_the_bound_are_dropped() {
        let mut d = Dispatch::new(1);
        let now = Timestamp::EPOCH;
        let ev = |i| event(i, &format!("n{i}"), "R", "");
        for i in 0..MAX_QUEUED_EVENTS as u64 {
            assert_eq!(d.push(ev(i), now), Pushed::Queued);
        }
        assert_eq!(d.push(ev(5000), now), Pushed::EventDropped);
        assert_eq!(d.starts().len(), 1);
        assert!(d.starts().is_empty(), "one Event in line at a time");
        d.sent(WriteClass::Event);
        assert_eq!(d.starts().len(), 1, "the next goes once the first was sent");
    }

    /// A legacy-mode deletion waits while its node's status write waits or
    /// is under way, and starts once it finished; a taint-based one (or
    /// one of another node's pod) does not wait.
    #[test]
    fn a_legacy_deletion_follows_its_nodes_status() {
        use nodewarden_engine::explain::{Explanation, Verdict};
        use nodewarden_model::{ConditionStatus, TaintEffect};
        let legacy = |id: u64, pod: &str, node: &str| {
            let verdict = Verdict::EvictionTimeout {
                status: ConditionStatus::Unknown,
                since: Timestamp::from_millis(0),
                timeout: Span::from_secs(300),
                zone_rate: 0.1,
            };
            act(
                id,
                ActionKind::DeletePod {
                    pod: pod.into(),
                    uid: format!("u-{pod}"),
                    mode: nodewarden_model::DeletionMode::Delete,
                    why: Box::new(Explanation {
                        pod: pod.into(),
                        node: node.into(),
                        node_facts: None,
                        taints: vec![],
                        tainting: None,
                        verdict,
                        scheduled_at: Timestamp::from_millis(0),
                        due_at: Timestamp::from_millis(0),
                        deleted_at: Timestamp::from_millis(0),
                    }),
                },
            )
        };
        let ids =
            |starts: &[Start<u32>]| starts.iter().map(|s| s.write.actions().next().unwrap().id.0).collect::<Vec<_>>();
        let mut d = Dispatch::<u32>::new(8);
        d.push(status(1, "n1"), 0);
        d.push(legacy(2, "ns/a", "n1"), 0);
        d.push(legacy(3, "ns/b", "n2"), 0);
        assert!(d.must_wait(&legacy(9, "ns/c", "n1").kind));
        // n1's status starts; its pod's deletion waits for it, n2's does not.
        assert_eq!(ids(&d.starts()), [1, 3]);
        d.sent(WriteClass::Node);
        d.sent(WriteClass::Deletion);
        assert!(d.starts().is_empty(), "the status is under way");
        assert!(!d.has(WriteClass::Deletion));
        d.finished(&ObjectRef::Node("n1".into()));
        assert_eq!(ids(&d.starts()), [2], "released once the status finished");
        // Without a status pending, no wait; nor for a taint-based deletion.
        assert!(!d.must_wait(&legacy(9, "ns/c", "n1").kind));
        let mut d = Dispatch::<u32>::new(8);
        d.push(status(1, "n"), 0);
        let untolerated = Verdict::NotTolerated {
            taint: nodewarden_model::Taint::new("node.kubernetes.io/unreachable", TaintEffect::NoExecute),
        };
        let mut taint_based = legacy(2, "ns/a", "n");
        if let ActionKind::DeletePod { why, .. } = &mut taint_based.kind {
            why.verdict = untolerated;
        }
        d.push(taint_based, 0);
        assert_eq!(ids(&d.starts()), [1, 2]);
    }
}
