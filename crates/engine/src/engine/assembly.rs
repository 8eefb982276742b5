//! How an engine is put together, and put back: the World's resources in
//! a fixed order, the tick's schedules for the eviction mode, and the reset
//! that returns a used engine to exactly that state. Kept apart from the
//! tick because what must hold here (a reset engine is laid out as a new
//! one, entity for entity) is about the World's layout, not about what a
//! tick decides.

use bevy_ecs::component::ComponentId;
use bevy_ecs::entity_disabling::DefaultQueryFilters;
use bevy_ecs::prelude::*;
use bevy_ecs::resource::IsResource;
use bevy_ecs::schedule::{IntoScheduleConfigs, Schedule, Schedules};
use nodewarden_model::{ConfigError, ControllerConfig, Timestamp};

use crate::ingest;
use crate::monitor::{NodeTimers, ZoneCounts};
use crate::reschedule::{ReschedulerState, SchedFacts};
use crate::resources::*;
use crate::systems::{disruption, health, legacy, node_handlers, pods, rescheduler, taint_manager, tainting};

use super::{Engine, Phase, TickPhase};

impl Engine {
    /// An engine that starts at `start` (its first monitor pass runs at the
    /// first tick at or after `start`). Refuses a configuration that cannot
    /// work.
    pub fn new(config: ControllerConfig, start: Timestamp) -> Result<Engine, ConfigError> {
        config.validate()?;
        let mut world = World::new();
        install(&mut world, config, start);
        Engine::around(world)
    }

    /// Puts the engine in the state [`Engine::new`] with `config` and
    /// `start` would give it: nothing of what it knew is kept (entities,
    /// queues, timers, writes in flight, the lent clock). Building an
    /// engine is mostly building its schedules; this keeps them when the
    /// eviction mode (which decides what they hold) is the same, and builds
    /// a new engine otherwise. What the engine then does is what a new one
    /// would do: its World holds the same entities as a new engine's, in
    /// the same places, and allocates the next ones as a new World would.
    /// A shadow's engine goes on keeping judgements
    /// ([`Engine::keep_judgements`]).
    pub fn reset(&mut self, config: ControllerConfig, start: Timestamp) -> Result<(), ConfigError> {
        let judging = self.world.resource::<crate::judgement::Judgements>().on;
        self.reset_world(config, start)?;
        if judging {
            self.keep_judgements();
        }
        Ok(())
    }

    /// [`Engine::reset`], judgements aside.
    fn reset_world(&mut self, config: ControllerConfig, start: Timestamp) -> Result<(), ConfigError> {
        config.validate()?;
        if !self.resets_cheaply_to(&config) {
            *self = Engine::new(config, start)?;
            return Ok(());
        }
        if !self.clear_world(config.clone(), start) {
            // Laid out otherwise than expected: no shortcut.
            *self = Engine::new(config, start)?;
            return Ok(());
        }
        self.stopwatch = None;
        self.timings.clear();
        self.pending.clear();
        self.last_tick = None;
        self.standby = false;
        Ok(())
    }

    /// Empties the World and puts a new engine's resources back in it, in
    /// the entities that held them; false when the World did not come out
    /// as a new engine's (it is then unusable: the caller builds a new
    /// engine).
    ///
    /// Resources are entities too, and a new engine's are the first its
    /// World spawned: bevy's own, ours as `install` inserts them, and the
    /// one its schedules' first initialization adds (see
    /// [`Engine::around`]). Clearing the World's entities restarts entity
    /// allocation but leaves the World's record of which entity holds each
    /// resource; spawning as many empty entities as there were resources
    /// brings exactly those entities back, and inserting each resource
    /// again puts it where that record says. Taking each resource out
    /// first instead (an archetype move, a hook and a command apiece) cost
    /// as much as all the rest of a reset.
    pub(crate) fn clear_world(&mut self, config: ControllerConfig, start: Timestamp) -> bool {
        self.world.flush();
        // Resources added since the engine was built (none are expected)
        // are taken out properly, so the World forgets them.
        let added: Vec<Entity> = self
            .world
            .resource_entities()
            .iter()
            .filter(|held| !self.resources.contains(held))
            .map(|(_, e)| e)
            .collect();
        for e in added {
            self.world.entity_mut(e).remove::<IsResource>();
        }
        self.world.flush();
        self.world.clear_entities();
        for _ in 0..self.resources.len() {
            self.world.spawn_empty();
        }
        if !self.resources.iter().all(|&(_, e)| self.world.get_entity(e).is_ok()) {
            return false;
        }
        self.world.init_resource::<DefaultQueryFilters>();
        install(&mut self.world, config, start);
        self.world.init_resource::<Schedules>();
        let mut now: Vec<(ComponentId, Entity)> = self.world.resource_entities().iter().collect();
        now.sort_unstable();
        now == self.resources
            && self.resources.iter().all(|&(id, e)| self.world.get_entity(e).is_ok_and(|r| r.contains_id(id)))
            && self.world.entities().count_spawned() as usize == self.resources.len()
    }

    /// Whether [`Engine::reset`] to `config` keeps the schedules (the
    /// eviction mode is the same), so a driver that alternates between
    /// modes can keep an engine of each.
    pub fn resets_cheaply_to(&self, config: &ControllerConfig) -> bool {
        config.enable_taint_manager == self.world.resource::<Settings>().0.enable_taint_manager
    }

    /// The engine around a World with its resources installed: builds the
    /// schedules for the World's eviction mode.
    fn around(mut world: World) -> Result<Engine, ConfigError> {
        let phase = |phase, due: fn(&LoopTimers, &ControllerConfig) -> bool, schedule| Phase { phase, due, schedule };
        let single = |system: bevy_ecs::schedule::ScheduleConfigs<bevy_ecs::system::ScheduleSystem>| {
            let mut s = Schedule::default();
            s.add_systems(system);
            s
        };
        let always = |_: &LoopTimers, _: &ControllerConfig| true;
        // The health pass hands each judged node's Ready verdict to the
        // system of the eviction mode, which is fixed for the engine's life.
        let act_on_verdicts = if world.resource::<Settings>().0.enable_taint_manager {
            tainting::taint_decisions.into_configs()
        } else {
            legacy::eviction_decisions.into_configs()
        };
        let mut phases = vec![
            phase(TickPhase::PodAssignment, always, single(pods::pod_assignment.into_configs())),
            phase(
                TickPhase::HealthMonitor,
                |t, c| t.monitor_now && c.node_lifecycle,
                single(
                    (
                        health::update_node_health,
                        health::decide,
                        act_on_verdicts,
                        health::restore_node_order,
                        disruption::handle_disruption,
                        health::file_worked,
                    )
                        .chain(),
                ),
            ),
            phase(
                TickPhase::NodeHandlers,
                |_, c| c.node_lifecycle,
                single(node_handlers::noschedule_and_labels.into_configs()),
            ),
            phase(
                TickPhase::TaintingPass,
                |t, c| t.tainting_now && c.enable_taint_manager && c.node_lifecycle,
                single(tainting::tainting_pass.into_configs()),
            ),
            phase(
                TickPhase::LegacyEvictionPass,
                |t, c| t.tainting_now && !c.enable_taint_manager && c.node_lifecycle,
                single(legacy::eviction_pass.into_configs()),
            ),
            phase(
                TickPhase::TaintManager,
                |_, c| c.enable_taint_manager,
                single(taint_manager::taint_manager.into_configs()),
            ),
            // Last: the rescheduler decides on what node lifecycle made of
            // this instant (conditions, taints, deletions, zone states).
            phase(
                TickPhase::Rescheduler,
                |t, c| t.rescheduler_now && c.enable_rescheduler,
                single(rescheduler::housekeeping.into_configs()),
            ),
        ];
        // Pod deletions are issued by the taint manager, or by legacy
        // eviction when it runs instead; the mode is fixed for the engine's
        // life, so only the owner's answer is installed.
        let mut refusals = if world.resource::<Settings>().0.enable_taint_manager {
            single(taint_manager::retry_refused_deletions.into_configs())
        } else {
            single(legacy::refused_deletions.into_configs())
        };
        let mut standby_pass = single((health::update_node_health, health::forget_work).chain());
        let leases = ingest::LeaseIngest::new(&mut world);
        // Each schedule would be initialized on its first run, which adds
        // bevy's `Schedules` resource in the middle of whatever entities
        // the first tick spawned. Done now, it leaves a new engine's World
        // holding its resources and nothing else, which is what `reset`
        // restores. Nothing the engine decides depends on it: entities keep
        // the order they are spawned in either way.
        for schedule in phases
            .iter_mut()
            .map(|p| &mut p.schedule)
            .chain(std::iter::once(&mut refusals))
            .chain(std::iter::once(&mut standby_pass))
        {
            schedule.initialize(&mut world).expect("the engine's schedules build");
        }
        let mut resources: Vec<(ComponentId, Entity)> = world.resource_entities().iter().collect();
        resources.sort_unstable();
        Ok(Engine {
            leases,
            world,
            phases,
            refusals,
            stopwatch: None,
            timings: Vec::new(),
            pending: Vec::new(),
            last_tick: None,
            resources,
            standby_pass,
            standby: false,
        })
    }
}

/// Installs the engine's resources in a World without any, always in the
/// same order (they are entities, so the order decides their ids).
fn install(world: &mut World, config: ControllerConfig, start: Timestamp) {
    let config_rescheduler = config.enable_rescheduler;
    world.insert_resource(Settings(config));
    world.insert_resource(Now(start));
    world.insert_resource(LoopTimers {
        start,
        next_monitor: start,
        next_tainting: start,
        monitor_now: false,
        tainting_now: false,
        next_rescheduler: start,
        rescheduler_now: false,
        monitor_passes: 0,
    });
    world.init_resource::<NodeIndex>();
    world.init_resource::<PodIndex>();
    world.init_resource::<TolerationSets>();
    world.init_resource::<ZoneIndex>();
    world.init_resource::<OrphanLeases>();
    world.init_resource::<Tombstones>();
    world.init_resource::<PassScratch>();
    world.init_resource::<NodeTimers>();
    world.init_resource::<ZoneCounts>();
    world.init_resource::<ChangedNodes>();
    world.init_resource::<TaintManagerInbox>();
    world.init_resource::<AssignedPods>();
    world.init_resource::<RefusedDeletions>();
    world.init_resource::<DeletionTimers>();
    world.init_resource::<DisruptionMode>();
    world.init_resource::<Outbox>();
    world.init_resource::<crate::judgement::Judgements>();
    // Empty, and never written, while the rescheduler is off.
    world.insert_resource(SchedFacts { enabled: config_rescheduler, ..SchedFacts::default() });
    world.init_resource::<ReschedulerState>();
}

#[cfg(test)]
mod reset_tests {
    //! A reset engine is a new one: same entities in the same places, same
    //! decisions.

    use std::collections::BTreeMap;

    use nodewarden_model::{
        ConditionStatus, ConditionType, ControllerConfig, NodeCondition, Span, Timestamp, Toleration, keys,
    };

    use super::Engine;
    use crate::observation::{NodeSnapshot, Observation, PodSnapshot};

    /// Five nodes in two zones, one of them NotReady, each with two pods
    /// that tolerate `not-ready` for 0 and 30 s.
    fn cluster(now: Timestamp) -> Vec<Observation> {
        let mut out = Vec::new();
        for (i, zone) in ["a", "a", "b", "b", "a"].into_iter().enumerate() {
            let name = format!("n{i}");
            out.push(Observation::NodeUpserted(NodeSnapshot {
                version: 0,
                name: name.clone(),
                created: now - Span::from_secs(600),
                labels: BTreeMap::from([(keys::LABEL_TOPOLOGY_ZONE.to_string(), zone.to_string())]),
                conditions: vec![NodeCondition {
                    kind: ConditionType::Ready,
                    status: if i == 4 { ConditionStatus::False } else { ConditionStatus::True },
                    reason: String::new(),
                    message: String::new(),
                    last_heartbeat: now,
                    last_transition: now,
                }],
                taints: vec![],
                unschedulable: false,
                allocatable: None,
            }));
            for p in 0..2 {
                out.push(Observation::PodUpserted(PodSnapshot {
                    version: 0,
                    node_lost: false,
                    key: format!("ns/{name}-{p}"),
                    uid: format!("u-{name}-{p}"),
                    node: Some(name.clone()),
                    daemonset: false,
                    ready: Some(true),
                    terminating: false,
                    tolerations: vec![Toleration {
                        key: keys::TAINT_NOT_READY.into(),
                        operator: nodewarden_model::TolerationOperator::Exists,
                        seconds: Some(30 * p),
                        ..Toleration::default()
                    }],
                    scheduling: None,
                }));
            }
        }
        out
    }

    /// Every entity with the types of its components (component ids
    /// differ between Worlds that registered components in another order).
    fn layout(engine: &Engine) -> Vec<(bevy_ecs::entity::Entity, Vec<std::any::TypeId>)> {
        let world = engine.world();
        let mut out: Vec<_> = world
            .iter_entities()
            .map(|e| {
                let mut types: Vec<std::any::TypeId> = e
                    .archetype()
                    .components()
                    .iter()
                    .map(|&id| world.components().get_info(id).and_then(|i| i.type_id()).expect("a Rust type"))
                    .collect();
                types.sort();
                (e.id(), types)
            })
            .collect();
        out.sort();
        out
    }

    /// Runs two minutes of the cluster from `start`; every tick's actions.
    fn run(engine: &mut Engine, start: Timestamp) -> Vec<String> {
        for o in cluster(start) {
            engine.observe(o);
        }
        (0..=24).map(|i| format!("{:?}", engine.tick(start + Span::from_secs(5 * i)))).collect()
    }

    #[test]
    fn a_reset_engine_is_laid_out_and_decides_as_a_new_one() {
        for config in [
            ControllerConfig::default(),
            ControllerConfig { enable_rescheduler: true, ..ControllerConfig::default() },
            ControllerConfig { enable_taint_manager: false, ..ControllerConfig::default() },
        ] {
            let mut used = Engine::new(config.clone(), Timestamp::from_secs(0)).unwrap();
            let _ = run(&mut used, Timestamp::from_secs(0));
            // What `reset` does when the mode stays, and without falling
            // back on building a new engine.
            assert!(used.resets_cheaply_to(&config));
            assert!(
                used.clear_world(config.clone(), Timestamp::from_secs(1000)),
                "the World came out as a new engine's"
            );
            used.reset(config.clone(), Timestamp::from_secs(1000)).unwrap();
            let fresh = Engine::new(config.clone(), Timestamp::from_secs(1000)).unwrap();
            assert_eq!(layout(&used), layout(&fresh), "after a reset, before any input");

            let mut fresh = fresh;
            let (a, b) = (run(&mut used, Timestamp::from_secs(1000)), run(&mut fresh, Timestamp::from_secs(1000)));
            assert!(a.iter().any(|t| t != "[]"), "the run does something");
            assert_eq!(a, b);
            assert_eq!(layout(&used), layout(&fresh), "after the same input");
        }
    }
}
