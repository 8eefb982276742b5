//! Pairs nodewarden's decisions with kube-controller-manager's, by kind and
//! object, and judges each pair.
//!
//! The first side to arrive waits, keyed by (kind, object). When the other
//! side arrives the pair is judged on d = nodewarden's time minus
//! kube-controller-manager's: within the tolerance either way they agree;
//! below it nodewarden was earlier, above it later. A side that waits longer
//! than the window (counted from its arrival) is judged one-sided when the
//! shadow next ticks.
//!
//! A judged key is settled: a repeat of it within the window is ignored
//! (the engine may judge a node again after an update, and a watch may
//! show a change twice), and when its node is Ready again its node-keyed
//! settlements are cleared, since a new episode may follow. A node-keyed
//! claim still waiting when its node is Ready again belongs to the episode
//! that ended: the other side's late claim (decided before the end) still
//! pairs with it, but a claim decided after the end is the next episode's,
//! so the old one is judged one-sided at once and the new one waits.
//!
//! Memory stays bounded however long the shadow runs: every waiting entry
//! is either matched and forgotten or aged out and forgotten, and every
//! settled key expires after the window. Expiries are kept in arrival
//! order, so ageing costs only what ages.

use std::collections::{HashMap, VecDeque};

use nodewarden_model::{Span, Timestamp};

use crate::facts::NO_SUCH_DECISION;
use crate::kind::Side;
use crate::kind::{DecisionKind, Verdict};
use crate::tally::{Decided, index_of};

/// One side's decision, offered for pairing.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Claim {
    /// The kind of decision.
    pub kind: DecisionKind,
    /// The node, or the pod for a pod deletion.
    pub object: Box<str>,
    /// The node (the pod's node for a pod deletion).
    pub node: Box<str>,
    /// When this side decided.
    pub at: Timestamp,
    /// How much later than `at` it may have decided (a stamp kept to the
    /// second; see `upstream::Change::spread`).
    pub spread: Span,
    /// For nodewarden, the facts behind it in one line.
    pub reason: Option<Box<str>>,
}

/// What became of an offered claim.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Offered {
    /// The first of its key: it waits for the other side.
    Waiting,
    /// A repeat of a key waiting on the same side, or already judged:
    /// ignored.
    Repeat,
    /// The other side was waiting: the pair is judged.
    Judged(Decided),
    /// A claim of the node's episode that ended was waiting: it is judged
    /// one-sided, and the new claim waits.
    Superseded(Decided),
}

/// A claim waiting for the other side.
#[derive(Clone, Debug)]
struct Waiting {
    side: Side,
    /// When the shadow received it: the window counts from here.
    opened: Timestamp,
    at: Timestamp,
    spread: Span,
    /// The pod's node, for a pod deletion (node-keyed claims are keyed by
    /// their node already).
    pod_node: Option<Box<str>>,
    reason: Option<Box<str>>,
    /// When its node was seen Ready again, if it was while this waited:
    /// its episode is over.
    ended: Option<Timestamp>,
}

/// The pairing of both sides' decisions.
#[derive(Debug)]
pub(crate) struct Matcher {
    window: Span,
    /// Per kind (by index in [`DecisionKind::ALL`]), the claims waiting,
    /// by object.
    waiting: Vec<HashMap<Box<str>, Waiting>>,
    /// Per kind, the keys judged and when.
    settled: Vec<HashMap<Box<str>, Timestamp>>,
    /// Waiting claims in arrival order: (opened, kind, object).
    waiting_order: VecDeque<(Timestamp, DecisionKind, Box<str>)>,
    /// Settled keys in settling order: (settled, kind, object).
    settled_order: VecDeque<(Timestamp, DecisionKind, Box<str>)>,
    /// Claims waiting, per kind (by index in [`DecisionKind::ALL`]) and
    /// side (nodewarden, upstream).
    waiting_by_kind: [[usize; 2]; DecisionKind::ALL.len()],
    /// kube-controller-manager's pod deletions waiting: whether dropping a
    /// node's claims needs to look through them.
    waiting_upstream_pods: usize,
}

impl Matcher {
    /// An empty matcher whose sides wait at most `window`.
    pub fn new(window: Span) -> Matcher {
        let n = DecisionKind::ALL.len();
        Matcher {
            window,
            waiting: (0..n).map(|_| HashMap::new()).collect(),
            settled: (0..n).map(|_| HashMap::new()).collect(),
            waiting_order: VecDeque::new(),
            settled_order: VecDeque::new(),
            waiting_by_kind: [[0; 2]; DecisionKind::ALL.len()],
            waiting_upstream_pods: 0,
        }
    }

    fn count(&mut self, side: Side, kind: DecisionKind, by: isize) {
        let c = &mut self.waiting_by_kind[index_of(kind)][side_index(side)];
        *c = c.saturating_add_signed(by);
        if side == Side::Upstream && kind == DecisionKind::PodDeletion {
            self.waiting_upstream_pods = self.waiting_upstream_pods.saturating_add_signed(by);
        }
    }

    /// Offers `claim` from `side`, received at `now`; a pair is judged
    /// with `tolerance`.
    pub fn offer(&mut self, now: Timestamp, side: Side, claim: Claim, tolerance: Span) -> Offered {
        let k = index_of(claim.kind);
        if self.settled[k].contains_key(&*claim.object) {
            return Offered::Repeat;
        }
        if let Some(w) = self.waiting[k].get(&*claim.object) {
            if w.ended.is_some_and(|end| claim.at > end) {
                // Decided after the episode of the waiting claim ended.
                let Some(old) = self.waiting[k].remove(&*claim.object) else { return Offered::Repeat };
                self.count(old.side, claim.kind, -1);
                let decided = one_sided(claim.kind, claim.object.clone(), old);
                self.wait(now, side, claim);
                return Offered::Superseded(decided);
            }
            if w.side == side {
                return Offered::Repeat;
            }
            let Some(w) = self.waiting[k].remove(&*claim.object) else { return Offered::Repeat };
            self.count(w.side, claim.kind, -1);
            let (nodewarden, upstream, spread, reason) = match side {
                Side::Nodewarden => (claim.at, w.at, w.spread, claim.reason),
                Side::Upstream => (w.at, claim.at, claim.spread, w.reason),
            };
            // Nodewarden's time against the nearest instant upstream's
            // time may stand for.
            let d = match nodewarden - upstream {
                d if d > spread => d + -spread,
                d if d.is_negative() => d,
                _ => Span::ZERO,
            };
            let verdict = verdict_for(d, tolerance);
            self.settle(now, claim.kind, claim.object.clone());
            return Offered::Judged(Decided {
                kind: claim.kind,
                object: claim.object,
                verdict,
                nodewarden_at: Some(nodewarden),
                difference: Some(d),
                upstream_at: Some(upstream),
                reason: reason.unwrap_or_default(),
            });
        }
        self.wait(now, side, claim);
        Offered::Waiting
    }

    /// `claim` waits for the other side, from `now`.
    fn wait(&mut self, now: Timestamp, side: Side, claim: Claim) {
        let pod_node = (!claim.kind.is_about_node()).then_some(claim.node);
        self.waiting_order.push_back((now, claim.kind, claim.object.clone()));
        let w = Waiting {
            side,
            opened: now,
            at: claim.at,
            spread: claim.spread,
            pod_node,
            reason: claim.reason,
            ended: None,
        };
        self.waiting[index_of(claim.kind)].insert(claim.object, w);
        self.count(side, claim.kind, 1);
    }

    fn settle(&mut self, now: Timestamp, kind: DecisionKind, object: Box<str>) {
        self.settled_order.push_back((now, kind, object.clone()));
        self.settled[index_of(kind)].insert(object, now);
    }

    /// Judges one-sided every claim that has waited longer than the
    /// window at `now`, into `out` in arrival order, and forgets settled
    /// keys older than the window.
    pub fn age(&mut self, now: Timestamp, out: &mut Vec<Decided>) {
        while let Some((opened, kind)) = self.waiting_order.front().map(|e| (e.0, e.1)) {
            if now - opened <= self.window {
                break;
            }
            let Some((_, _, object)) = self.waiting_order.pop_front() else { break };
            let k = index_of(kind);
            // Matched, dropped or opened again since: not this entry's to age.
            if self.waiting[k].get(&object).is_none_or(|w| w.opened != opened) {
                continue;
            }
            let Some(w) = self.waiting[k].remove(&object) else { continue };
            self.count(w.side, kind, -1);
            // Settled against late repeats, unless its episode is over:
            // then the next episode's claims must not be taken for repeats.
            if w.ended.is_none() {
                self.settle(now, kind, object.clone());
            }
            out.push(one_sided(kind, object, w));
        }
        while let Some((settled, kind)) = self.settled_order.front().map(|e| (e.0, e.1)) {
            if now - settled <= self.window {
                break;
            }
            let Some((_, _, object)) = self.settled_order.pop_front() else { break };
            let map = &mut self.settled[index_of(kind)];
            if map.get(&object) == Some(&settled) {
                map.remove(&object);
            }
        }
    }

    /// `node` was seen Ready again at `now`: its node-keyed settlements
    /// are cleared and its waiting claims marked as of an ended episode,
    /// so the decisions of a new episode are compared afresh.
    pub fn new_episode(&mut self, now: Timestamp, node: &str) {
        for kind in DecisionKind::ALL.into_iter().filter(|k| k.is_about_node()) {
            let k = index_of(kind);
            self.settled[k].remove(node);
            if let Some(w) = self.waiting[k].get_mut(node) {
                w.ended.get_or_insert(now);
            }
        }
    }

    /// Drops kube-controller-manager's claims about `node` (its node-keyed
    /// ones and pod deletions on it) that wait for nodewarden: the node
    /// turned out to be in trouble before nodewarden looked. Returns how
    /// many were dropped.
    pub fn drop_upstream_of(&mut self, node: &str) -> usize {
        let mut dropped = 0;
        for kind in DecisionKind::ALL.into_iter().filter(|k| k.is_about_node()) {
            let map = &mut self.waiting[index_of(kind)];
            if map.get(node).is_some_and(|w| w.side == Side::Upstream) {
                map.remove(node);
                dropped += 1;
                self.count(Side::Upstream, kind, -1);
            }
        }
        if self.waiting_upstream_pods > 0 {
            let map = &mut self.waiting[index_of(DecisionKind::PodDeletion)];
            let before = map.len();
            map.retain(|_, w| !(w.side == Side::Upstream && w.pod_node.as_deref() == Some(node)));
            let pods = before - map.len();
            for _ in 0..pods {
                self.count(Side::Upstream, DecisionKind::PodDeletion, -1);
            }
            dropped += pods;
        }
        dropped
    }

    /// Claims waiting from `side`.
    pub fn waiting(&self, side: Side) -> usize {
        self.waiting_by_kind.iter().map(|k| k[side_index(side)]).sum()
    }

    /// Claims of `kind` waiting from `side`.
    pub fn waiting_of(&self, kind: DecisionKind, side: Side) -> usize {
        self.waiting_by_kind[index_of(kind)][side_index(side)]
    }

    /// Keys settled and not yet expired.
    pub fn settled(&self) -> usize {
        self.settled.iter().map(HashMap::len).sum()
    }

    /// Expiry entries queued (waiting and settled), live or stale.
    pub fn queued(&self) -> usize {
        self.waiting_order.len() + self.settled_order.len()
    }
}

/// The verdict on a pair `d` apart (nodewarden's time minus
/// kube-controller-manager's): agree within `tolerance` either way.
pub(crate) fn verdict_for(d: Span, tolerance: Span) -> Verdict {
    if d < -tolerance {
        Verdict::Earlier
    } else if d > tolerance {
        Verdict::Later
    } else {
        Verdict::Agree
    }
}

/// Where a side's counts are kept in [`Matcher::waiting_by_kind`].
fn side_index(side: Side) -> usize {
    match side {
        Side::Nodewarden => 0,
        Side::Upstream => 1,
    }
}

/// The one-sided verdict on `w`, a claim that waited alone.
fn one_sided(kind: DecisionKind, object: Box<str>, w: Waiting) -> Decided {
    match w.side {
        Side::Nodewarden => Decided {
            kind,
            object,
            verdict: Verdict::OnlyNodewarden,
            nodewarden_at: Some(w.at),
            upstream_at: None,
            difference: None,
            reason: w.reason.unwrap_or_default(),
        },
        Side::Upstream => Decided {
            kind,
            object,
            verdict: Verdict::OnlyUpstream,
            nodewarden_at: None,
            upstream_at: Some(w.at),
            difference: None,
            reason: NO_SUCH_DECISION.into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOLERANCE: Span = Span::from_secs(5);

    fn t(s: i64) -> Timestamp {
        Timestamp::from_secs(1_800_000_000 + s)
    }

    fn claim(kind: DecisionKind, object: &str, at: i64) -> Claim {
        Claim {
            kind,
            object: object.into(),
            node: object.into(),
            at: t(at),
            spread: Span::ZERO,
            reason: Some("facts".into()),
        }
    }

    fn verdict(o: Offered) -> Option<Verdict> {
        match o {
            Offered::Judged(d) => Some(d.verdict),
            _ => None,
        }
    }

    #[test]
    fn the_difference_against_the_tolerance_decides_either_way_round() {
        let mut m = Matcher::new(Span::from_secs(600));
        let k = DecisionKind::Unknown;
        let cases = [(0, 0, Verdict::Agree), (45, 40, Verdict::Agree), (40, 45, Verdict::Agree)]
            .into_iter()
            .chain([(30, 40, Verdict::Earlier), (50, 40, Verdict::Later)]);
        for (i, (nw, up, want)) in cases.enumerate() {
            let (a, b) = (format!("a{i}"), format!("b{i}"));
            assert_eq!(m.offer(t(0), Side::Nodewarden, claim(k, &a, nw), TOLERANCE), Offered::Waiting);
            assert_eq!(verdict(m.offer(t(0), Side::Upstream, claim(k, &a, up), TOLERANCE)), Some(want), "{nw} {up}");
            assert_eq!(m.offer(t(0), Side::Upstream, claim(k, &b, up), TOLERANCE), Offered::Waiting);
            assert_eq!(verdict(m.offer(t(0), Side::Nodewarden, claim(k, &b, nw), TOLERANCE)), Some(want), "{nw} {up}");
        }
        assert_eq!((m.waiting(Side::Nodewarden), m.waiting(Side::Upstream)), (0, 0));
    }

    #[test]
    fn a_side_alone_past_the_window_is_one_sided_and_memory_drains() {
        let mut m = Matcher::new(Span::from_secs(600));
        m.offer(t(0), Side::Nodewarden, claim(DecisionKind::NoExecuteUnreachable, "n1", 0), TOLERANCE);
        m.offer(t(10), Side::Upstream, claim(DecisionKind::NoExecuteNotReady, "n2", 10), TOLERANCE);
        let mut out = Vec::new();
        m.age(t(600), &mut out);
        assert!(out.is_empty(), "exactly the window is not longer than it");
        m.age(t(601), &mut out);
        assert_eq!(out.iter().map(|d| d.verdict).collect::<Vec<_>>(), [Verdict::OnlyNodewarden]);
        m.age(t(611), &mut out);
        assert_eq!(out[1].verdict, Verdict::OnlyUpstream);
        assert_eq!(&*out[1].reason, NO_SUCH_DECISION);
        assert_eq!(
            verdict(m.offer(t(612), Side::Upstream, claim(DecisionKind::NoExecuteUnreachable, "n1", 612), TOLERANCE)),
            None,
            "settled: the late other side is a repeat"
        );
        m.age(t(1300), &mut out);
        assert_eq!((m.settled(), m.queued(), m.waiting(Side::Upstream)), (0, 0, 0));
    }

    #[test]
    fn a_claim_of_an_ended_episode_pairs_only_with_what_was_decided_before_the_end() {
        let mut m = Matcher::new(Span::from_secs(600));
        let k = DecisionKind::NoScheduleUnreachable;
        m.offer(t(0), Side::Nodewarden, claim(k, "late", 0), TOLERANCE);
        m.offer(t(0), Side::Nodewarden, claim(k, "next", 0), TOLERANCE);
        m.new_episode(t(100), "late");
        m.new_episode(t(100), "next");
        // Decided at 2, handed over after the end: the same episode.
        assert_eq!(verdict(m.offer(t(101), Side::Upstream, claim(k, "late", 2), TOLERANCE)), Some(Verdict::Agree));
        // Decided at 200: the next episode's; the old claim is one-sided.
        match m.offer(t(200), Side::Upstream, claim(k, "next", 200), TOLERANCE) {
            Offered::Superseded(d) => assert_eq!(d.verdict, Verdict::OnlyNodewarden),
            other => panic!("{other:?}"),
        }
        assert_eq!(m.waiting(Side::Upstream), 1, "the new claim waits");
        // An ended claim that ages out does not settle its key.
        m.offer(t(300), Side::Nodewarden, claim(k, "aged", 300), TOLERANCE);
        m.new_episode(t(400), "aged");
        let mut out = Vec::new();
        m.age(t(901), &mut out);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(m.offer(t(902), Side::Nodewarden, claim(k, "aged", 902), TOLERANCE), Offered::Waiting);
    }

    #[test]
    fn dropping_a_nodes_upstream_claims_takes_its_pod_deletions_too() {
        let mut m = Matcher::new(Span::from_secs(600));
        let pod = Claim { node: "n1".into(), ..claim(DecisionKind::PodDeletion, "ns/p", 0) };
        let other = Claim { node: "n2".into(), ..claim(DecisionKind::PodDeletion, "ns/q", 0) };
        m.offer(t(0), Side::Upstream, pod, TOLERANCE);
        m.offer(t(0), Side::Upstream, other, TOLERANCE);
        m.offer(t(0), Side::Upstream, claim(DecisionKind::Unknown, "n1", 0), TOLERANCE);
        m.offer(t(0), Side::Nodewarden, claim(DecisionKind::NoScheduleUnreachable, "n1", 0), TOLERANCE);
        assert_eq!(m.drop_upstream_of("n1"), 2);
        assert_eq!((m.waiting(Side::Upstream), m.waiting(Side::Nodewarden)), (1, 1));
        let mut out = Vec::new();
        m.age(t(700), &mut out);
        assert_eq!(out.len(), 2, "ns/q and nodewarden's taint; the dropped ones are gone");
    }
}
