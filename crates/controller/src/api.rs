//! The place actions are carried out: the seam between the control loop
//! and whatever stores the cluster.

use nodewarden_engine::{Action, ObjectRef, Observation, WriteOutcome};
use nodewarden_model::Timestamp;

/// What carrying out one action did, as the back end tells it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Applied {
    /// To feed back to the engine, in order: the write's
    /// `WriteFinished`, then the object as it now is (after a refusal, its
    /// current state, so the engine converges on the truth). Empty for
    /// Events, and for a back end that answers later (it then hands the
    /// answer in as an observation of its own).
    pub observations: Vec<Observation>,
    /// The write's outcome when it is known now; `None` for Events, which
    /// are not writes, and for writes whose answer comes later.
    pub outcome: Option<WriteOutcome>,
    /// Set when the back end itself saw the controller break its contract
    /// (for example a write to a pod that was already deleted). The
    /// simulated API server checks this; a real one does not say.
    pub violation: Option<String>,
}

impl Applied {
    /// The answer came with the object's state (accepted: the object as
    /// the write left it; refused: as it is): the engine has something to
    /// act on in the same instant, as it would once a watch delivered it.
    pub fn brought_state(&self) -> bool {
        self.observations.iter().any(|o| !matches!(o, Observation::WriteFinished { .. }))
    }
}

/// Where the controller's actions are carried out: the in-memory cluster of
/// the simulator, or an adapter to a real API server.
///
/// Observations that do not answer an action (watch events, kubelet
/// heartbeats) reach the engine through
/// [`Controller::observe`](crate::Controller::observe), from whoever
/// produces them; this trait only carries actions out.
pub trait ClusterApi {
    /// Carries out one action at `now` and says what happened. Called only
    /// for actions the safety interlock let through, in the order the
    /// engine issued them.
    fn apply(&mut self, now: Timestamp, action: &Action) -> Applied;

    /// Whether `action`, handed over at `now`, goes out to the cluster at
    /// once, with nobody to judge it on the way: the simulator's in-memory
    /// cluster, or its wire when no earlier write to the object is on its
    /// way. The loop then judges it just before handing it over
    /// ([`Controller::still_true`](crate::Controller::still_true)), so
    /// that every write is judged when it is sent, as the kube adapter's
    /// writer judges each request it sends. A write decided and sent in
    /// the same instant is then judged against the very view that decided
    /// it: one withdrawn there shows that the deciding rule and the
    /// send-time check disagree.
    ///
    /// The default, false, is for a back end that judges each write
    /// itself as it goes out (the adapter's writer, the simulator's wire
    /// for a write that waits its turn).
    fn sends_at_once(&self, now: Timestamp, action: &Action) -> bool {
        let _ = (now, action);
        false
    }

    /// How many writes decided but not yet built it has room for now: the
    /// loop pulls that many from the engine after each tick
    /// ([`Engine::pull`](nodewarden_engine::Engine::pull)), so a decision
    /// waits as state in the engine, not as a write in the back end,
    /// until the back end can send it. The default, no limit, is for a
    /// back end that sends what it is handed at once (the simulator's
    /// cluster and wire); the adapter's writer has room for a few beyond
    /// what its rate limit is sending.
    fn room(&self) -> usize {
        usize::MAX
    }

    /// The object as it is now (its upsert, or its deletion), for a sender
    /// that withdrew a write to it before sending it: node lifecycle
    /// applied the write to its own view when it decided, and the object
    /// as it is puts that view right. Empty when the back end cannot say
    /// (the engine then waits for the object's next watch event).
    fn read(&mut self, object: &ObjectRef) -> Vec<Observation> {
        let _ = object;
        Vec::new()
    }
}
