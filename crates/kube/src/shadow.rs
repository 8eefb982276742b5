//! The shadow of a `--dry-run` replica: every observation the engine is
//! handed and every judgement it reaches go to a
//! [`nodewarden_shadow::Shadow`], which matches nodewarden's decisions with
//! what the writing controller (kube-controller-manager) did; its summary
//! is published for `GET /shadow` at most once a second.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nodewarden_controller::Controller;
use nodewarden_engine::Observation;
use nodewarden_model::{Span, Timestamp};
use nodewarden_shadow::{Shadow, ShadowSettings, Summary};

/// Where the engine thread publishes the shadow's summary and the HTTP
/// endpoint reads it: `None` until the first summary.
pub type ShadowBoard = Arc<Mutex<Option<Summary>>>;

/// How often the summary is rebuilt for the board: it walks every zone and
/// the per-kind tallies, cheap but not free, and nobody reads it faster.
const PUBLISH_EVERY: Duration = Duration::from_secs(1);

/// The engine thread's side of the shadow.
pub struct ShadowFeed {
    shadow: Shadow,
    board: ShadowBoard,
    published: Option<Instant>,
}

impl ShadowFeed {
    /// A shadow of `controller` (which it tells to keep its judgements),
    /// watching from `now`, matching within `window`.
    pub fn new(controller: &mut Controller, now: Timestamp, window: Span) -> (ShadowFeed, ShadowBoard) {
        controller.keep_judgements();
        let settings = ShadowSettings { config: controller.config().clone(), window };
        let board = ShadowBoard::default();
        (ShadowFeed { shadow: Shadow::new(settings, now), board: board.clone(), published: None }, board)
    }

    /// An observation as it is handed to the engine.
    pub fn observed(&mut self, at: Timestamp, observation: &Observation) {
        self.shadow.observe(at, observation);
    }

    /// Every watch has listed once: what they showed so far is the
    /// baseline, and changes count from now on.
    pub fn synced(&mut self, at: Timestamp) {
        self.shadow.synced(at);
    }

    /// After a step at `at`: the judgements it reached, the sides waiting
    /// past the window, and the board.
    pub fn stepped(&mut self, at: Timestamp, controller: &mut Controller) {
        for judgement in controller.take_judgements() {
            self.shadow.judged(at, judgement);
        }
        self.shadow.tick(at);
        if self.published.is_none_or(|t| t.elapsed() >= PUBLISH_EVERY) {
            self.published = Some(Instant::now());
            let summary = self.shadow.summary(at, &controller.engine().zones());
            if let Ok(mut board) = self.board.lock() {
                *board = Some(summary);
            }
        }
    }
}
