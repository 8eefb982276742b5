//! What travels on the engine thread's channel: the watchers' and the
//! writer's messages to it ([`Input`]), and which watch one is about
//! ([`Watched`]).
//!
//! Its own module because three sides speak it: the watchers and the writer
//! send, the engine thread receives. Keeping it out of each keeps the
//! dependencies one way (senders and receiver both depend on this, never
//! on one another).

use std::collections::HashSet;

use nodewarden_engine::{Action, ObjectKind, Observation, Withdrawal};

/// What reaches the engine thread.
#[derive(Debug)]
pub enum Input {
    /// A watched change, or a write's answer (`WriteFinished`, then the
    /// object's state).
    Observe(Observation),
    /// This watch has completed its first list.
    Synced(Watched),
    /// This watch listed again (it had lost track): these keys exist. What
    /// the engine holds of the kind beyond them was deleted meanwhile.
    Relisted(Watched, HashSet<String>),
    /// This watch is failing (the API cannot be reached or refuses it):
    /// what the engine knows of its objects is getting old.
    WatchDown(Watched),
    /// This watch is delivering again, and has caught up.
    WatchUp(Watched),
    /// The writer is about to send this write: is it still true? Answered
    /// on `reply` once everything that arrived before it has been taken
    /// in ([`Controller::still_true`](nodewarden_controller::Controller::still_true)); a write asked about while the
    /// engine is blind (a heartbeat watch down, caches not synced) is
    /// withdrawn, as nothing decided from an aging view may go out.
    Judge {
        /// The write.
        action: Box<Action>,
        /// Where the verdict goes: `Err` says why it must not be sent.
        reply: tokio::sync::oneshot::Sender<Result<(), Withdrawal>>,
    },
    /// The API server has not answered a probe within its time: the
    /// watches may be stalled without an error (a frozen server keeps its
    /// connections open), so what the engine knows is getting old.
    ApiUnanswered,
    /// The API server answers again after a silence this long; decisions
    /// resume once the watches have had time to deliver what happened
    /// meanwhile (as long as the silence, at most a grace period).
    ApiAnswered {
        /// From the first unanswered probe to this answer.
        silence: std::time::Duration,
    },
    /// This replica won the election: a warm standby's engine starts
    /// deciding now, from the records it kept ([`Controller::take_over`](nodewarden_controller::Controller::take_over)).
    TakeOver,
    /// Stop stepping and return (shutdown, or leadership lost).
    Stop,
}

/// The caches the engine waits for before its first decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Watched {
    /// `nodes`.
    Nodes,
    /// `pods`, every namespace.
    Pods,
    /// `leases` in `kube-node-lease`.
    Leases,
    /// `poddisruptionbudgets` (policy/v1), every namespace; only with the
    /// rescheduler.
    Budgets,
}

impl Watched {
    /// The watches node lifecycle needs.
    pub const LIFECYCLE: [Watched; 3] = [Watched::Nodes, Watched::Pods, Watched::Leases];

    /// Every watch the engine needs: with the rescheduler, budgets too.
    pub fn needed(rescheduler: bool) -> Vec<Watched> {
        let mut w = Watched::LIFECYCLE.to_vec();
        if rescheduler {
            w.push(Watched::Budgets);
        }
        w
    }

    /// For logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Watched::Nodes => "nodes",
            Watched::Pods => "pods",
            Watched::Leases => "leases",
            Watched::Budgets => "poddisruptionbudgets",
        }
    }

    /// The engine's name for the kind ([`Engine::known_keys`]).
    ///
    /// [`Engine::known_keys`]: nodewarden_engine::Engine::known_keys
    pub fn kind(self) -> ObjectKind {
        match self {
            Watched::Nodes => ObjectKind::Node,
            Watched::Pods => ObjectKind::Pod,
            Watched::Leases => ObjectKind::Lease,
            Watched::Budgets => ObjectKind::Budget,
        }
    }

    /// The observation that an object of this kind, by its key, is gone.
    pub fn deleted(self, key: String) -> Observation {
        Observation::deletion(self.kind(), key)
    }

    /// Whether the engine stops deciding while this watch is down. Nodes
    /// and Leases carry the heartbeats: a node whose heartbeats stop
    /// arriving because the watch is down would look dead. Pods and
    /// budgets carry none: a decision on a stale pod fails on its uid, and
    /// an eviction against a stale budget is judged by the API server,
    /// which refuses (429) what the budget forbids.
    pub fn blinds(self) -> bool {
        matches!(self, Watched::Nodes | Watched::Leases)
    }
}
