//! Everything `nodewarden run` starts, in one place: the watchers, the
//! writer (or the dry-run recorder) and the engine thread, wired through
//! one crossbeam channel.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;
use kube::Client;
use nodewarden_controller::Controller;
use nodewarden_controller::write_order::EvictionClient;
use nodewarden_engine::Action;
use nodewarden_model::{ConfigError, ControllerConfig};

use crate::engine_thread::{EngineClock, EngineThread, Health};
use crate::input::Input;
use crate::input::Watched;
use crate::leader::Fence;
use crate::probe::{Change, Outcome, PROBE_METRIC, Probe};
use crate::shadow::{ShadowBoard, ShadowFeed};
use crate::watch::{Watches, spawn_watchers};
use crate::writer::{DryRunApi, WriterOptions, spawn_writer};
use nodewarden_objects::Detail;

/// What to run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// The engine's configuration (kube-controller-manager's flags).
    pub config: ControllerConfig,
    /// Decide and log, write nothing (`--dry-run`).
    pub dry_run: bool,
    /// Rate limits, retries, Event identity.
    pub writer: WriterOptions,
    /// The leader-election fence every write asks first; `None` when there
    /// is no election (`--leader-elect=false`: one replica by the
    /// operator's word).
    pub fence: Option<Arc<Fence>>,
    /// Start the engine at this time of the process's clock rather than at
    /// once ([`EngineThread::start_at`]).
    pub start_at: Option<nodewarden_model::Timestamp>,
    /// Start as a warm standby ([`Controller::stand_by`]): watch and keep
    /// health records, decide nothing until [`Running::take_over`].
    pub standby: bool,
    /// The client the API probe asks `/version` through: one of its own
    /// (its own connections), so a probe never waits behind the writer's
    /// requests on a saturated connection. `None`: the controller's.
    pub probe_client: Option<ProbeClient>,
    /// With `dry_run`: how long a decision of one side waits for the
    /// other's before the shadow calls it one-sided
    /// ([`nodewarden_shadow::ShadowSettings::window`]).
    pub shadow_window: Option<nodewarden_model::Span>,
}

/// A client for the API probe alone ([`RunOptions::probe_client`]).
#[derive(Clone)]
pub struct ProbeClient(pub Client);

impl std::fmt::Debug for ProbeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProbeClient")
    }
}

/// A running controller.
pub struct Running {
    /// Read by `/readyz` and `/healthz`.
    pub health: Arc<Health>,
    /// A `--dry-run` replica's shadow summary, read by `/shadow`.
    pub shadow: Option<ShadowBoard>,
    tx: Sender<Input>,
    engine: Option<std::thread::JoinHandle<Vec<Action>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Starts the watchers, the writer and the engine thread on the current
/// tokio runtime. Refuses a configuration that cannot work.
pub fn start(client: Client, opts: RunOptions) -> Result<Running, ConfigError> {
    let clock = EngineClock::starting_now();
    let mut controller = Controller::new(opts.config.clone(), clock.now())?;
    controller.measure_with(std::time::Instant::now);
    if opts.standby {
        controller.stand_by();
    }
    let (tx, rx) = crossbeam_channel::unbounded();
    let health = Arc::new(Health::default());
    let rescheduler = opts.config.enable_rescheduler;
    let mut tasks = spawn_watchers(&client, &tx, Watches { rescheduler });
    let probe_client = opts.probe_client.clone().map_or_else(|| client.clone(), |p| p.0);
    tasks.push(tokio::spawn(probe_api(probe_client, tx.clone(), opts.config.node_monitor_period)));
    let watches = Watched::needed(rescheduler);
    let (shadow, board) = if opts.dry_run {
        let window = opts.shadow_window.unwrap_or(nodewarden_shadow::DEFAULT_WINDOW);
        let (feed, board) = ShadowFeed::new(&mut controller, clock.now(), window);
        (Some(feed), Some(board))
    } else {
        (None, None)
    };
    let mut thread =
        EngineThread { controller, clock, health: health.clone(), watches, start_at: opts.start_at, shadow };
    let engine = if opts.dry_run {
        std::thread::Builder::new().name("nodewarden-engine".into()).spawn(move || {
            let mut api = DryRunApi::default();
            thread.run(&rx, &mut api, &mut |_| {});
            api.actions
        })
    } else {
        let fence = opts.fence.clone().unwrap_or_else(Fence::unfenced);
        let mut writer_opts = opts.writer;
        writer_opts.detail = if rescheduler { Detail::Scheduling } else { Detail::Lifecycle };
        writer_opts.eviction_client = EvictionClient::for_mode(opts.config.enable_taint_manager);
        writer_opts.stale_after =
            Duration::from_nanos(u64::try_from(opts.config.node_monitor_period.as_nanos()).unwrap_or(0));
        let (mut api, writer) = spawn_writer(client, tx.clone(), writer_opts, fence);
        tasks.push(writer);
        std::thread::Builder::new().name("nodewarden-engine".into()).spawn(move || {
            thread.run(&rx, &mut api, &mut |_| {});
            Vec::new()
        })
    };
    let engine = match engine {
        Ok(h) => Some(h),
        Err(e) => {
            tracing::error!(error = %e, "could not start the engine thread");
            None
        }
    };
    Ok(Running { health, shadow: board, tx, engine, tasks })
}

impl Running {
    /// A warm standby won the election: its engine decides from now on.
    /// The writer is held by the leader-election fence until then, which
    /// opened when the Lease was taken.
    pub fn take_over(&self) {
        let _ = self.tx.send(Input::TakeOver);
    }

    /// Stops writing at once (the writer and the watchers are aborted, so
    /// no request is sent after this returns), then ends the engine
    /// thread. Returns, in `--dry-run`, every action it would have taken.
    pub fn stop(mut self) -> Vec<Action> {
        for t in &self.tasks {
            t.abort();
        }
        let _ = self.tx.send(Input::Stop);
        self.engine.take().and_then(|h| h.join().ok()).unwrap_or_default()
    }
}

/// Asks the API server for its version every half second, each ask allowed
/// one `--node-monitor-period` (and at least a second of real time: the
/// network and the server do not run faster when the process's clock does,
/// as under `cargo xtask wire`), and tells the engine thread when the
/// server goes silent and when it is back ([`Input::ApiUnanswered`],
/// [`Input::ApiAnswered`]), as [`crate::probe::Probe`] reads the answers.
/// A watch reports a server that refuses or drops it; only a request with
/// a deadline notices one that has stopped answering.
async fn probe_api(client: Client, tx: Sender<Input>, monitor_period: nodewarden_model::Span) {
    // On the process's clock (`wall`), as everything the engine waits for,
    // but never under a second of real time: at 20 times real time a
    // 5 s period would allow a server 250 ms, and a busy machine's
    // scheduling hiccup would blind the engine for a grace period.
    let allowed =
        nodewarden_model::wall::real(Duration::from_nanos(u64::try_from(monitor_period.as_nanos()).unwrap_or(0)))
            .max(Duration::from_secs(1));
    let every = nodewarden_model::wall::real(Duration::from_millis(500));
    let mut probe = Probe::new(allowed);
    loop {
        let started = tokio::time::Instant::now();
        let result = tokio::time::timeout(allowed, client.apiserver_version()).await.ok();
        let outcome = Outcome::of(result.as_ref());
        if outcome != Outcome::Answered {
            metrics::counter!(PROBE_METRIC, "outcome" => outcome.as_str()).increment(1);
        }
        let change = probe.observe(outcome, started.into_std(), std::time::Instant::now());
        let input = match change {
            None => None,
            Some(Change::Silent) => Some(Input::ApiUnanswered),
            Some(Change::Back { silence }) => Some(Input::ApiAnswered { silence }),
        };
        if let Some(input) = input
            && tx.send(input).is_err()
        {
            return;
        }
        tokio::time::sleep_until(started + every).await;
    }
}
