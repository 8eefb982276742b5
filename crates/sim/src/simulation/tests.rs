//! Whole runs of the built-in scenarios and of a file, checked against
//! what the configuration predicts.

use nodewarden_engine::ZoneState;

use super::*;
use crate::statistics::ZoneTally;

#[test]
fn ceil_step_rounds_up_to_the_grid() {
    let ms = |n| Timestamp::EPOCH + Span::from_millis(n);
    assert_eq!(ceil_step(ms(0)), ms(0));
    assert_eq!(ceil_step(ms(1)), ms(100));
    assert_eq!(ceil_step(ms(100)), ms(100));
    assert_eq!(ceil_step(ms(-150)), ms(-100));
}

fn run_with(builtin: Builtin, nodes: usize, config: ControllerConfig, duration: Option<Span>) -> Outcome {
    let fleet = FleetSpec { nodes, zones: 3, pods_per_node: 10, seed: 7 };
    let opts =
        SimOptions { source: Source::Builtin(builtin, fleet), config, duration, seed: 7, measure: false, api: None };
    match Simulation::new(opts).and_then(Simulation::run) {
        Ok(o) => o,
        Err(e) => panic!("{builtin}: {e}"),
    }
}

fn run(builtin: Builtin, nodes: usize) -> Outcome {
    run_with(builtin, nodes, ControllerConfig::default(), None)
}

/// Every run must be safe, and every deletion at or after its
/// toleration's end (to the 100 ms grid).
fn assert_safe(o: &Outcome) {
    assert!(o.safe(), "{}: {:?} {:?}", o.scenario, o.safety, o.violations);
    for late in &o.latencies.eviction_vs_toleration {
        assert!((0.0..0.15).contains(late), "{}: deletion {late}s after its toleration ended", o.scenario);
    }
}

#[test]
fn critical_addon_loses_its_addons_and_reports_each() {
    let o = run(Builtin::CriticalAddon, 30);
    assert_safe(&o);
    assert!(o.config.enable_rescheduler, "the scenario turns the rescheduler on");
    let names: Vec<&str> = o.addons.iter().map(|a| a.addon.as_str()).collect();
    assert_eq!(names, ["kube-system/coredns-a", "kube-system/coredns-b", "kube-system/metrics-server"]);
    // Lost with their node: deleted when their tolerations ran out
    // (1m crash, 30 to 50s to notice, 300s), and nothing has room for
    // them; all three at once.
    let lost = o.addons[0].unschedulable_since.map(|t| t - Timestamp::EPOCH);
    assert!(lost.is_some_and(|l| l >= Span::from_secs(390) && l <= Span::from_secs(410)), "{lost:?}");
    for a in &o.addons {
        assert_eq!(a.unschedulable_since, o.addons[0].unschedulable_since, "{a:?}");
        assert!(a.minimum.is_some_and(|m| m >= 1), "{a:?}");
    }
    let run = crate::report::RunInfo {
        wall_seconds: 1.0,
        seed: 7,
        peak_rss_bytes: None,
        rss_before_controller_bytes: None,
        cpu_seconds: None,
    };
    let json = crate::report::to_json(&o, &run, false);
    let lost = lost.map_or(0.0, |l| l.as_secs_f64());
    assert_eq!(json["addons"][2]["unschedulable_seconds"], lost);
    let text = crate::report::render_text(&o, &run);
    assert!(text.contains("Critical addons (rescheduler on)"), "{text}");
    // As the report reads with one addon bound and two not (whatever
    // this run's controller did).
    let mut done = o.clone();
    for a in &mut done.addons {
        a.bound = None;
        a.evicted = 0;
    }
    let since = done.addons[0].unschedulable_since.unwrap_or(Timestamp::EPOCH);
    done.addons[0].bound = Some((since + Span::from_secs(25), "node-000007".into()));
    done.addons[0].evicted = 2;
    let text = crate::report::render_text(&done, &run);
    assert!(text.contains("bound to node-000007 at"), "{text}");
    assert!(text.contains("1 of 3 lost addon(s) scheduled again (the slowest 25s after"), "{text}");
    assert!(text.contains("2 pod(s) evicted against a minimum of"), "{text}");
    // The other scenarios' reports do not change.
    let other = run_with(Builtin::NodeCrash, 30, ControllerConfig::default(), Some(Span::from_secs(120)));
    assert!(other.addons.is_empty());
    assert!(crate::report::to_json(&other, &run, false).get("addons").is_none());
}

fn zone<'a>(o: &'a Outcome, name: &str) -> &'a ZoneTally {
    match o.zones.iter().find(|z| z.key.ends_with(name)) {
        Some(z) => z,
        None => panic!("no zone {name}"),
    }
}

fn quiet(z: &ZoneTally) -> bool {
    z.failures == 0 && z.seen_dead.0 == 0 && z.tainted.0 == 0 && z.evicted.0 == 0 && z.false_alarms == 0
}

#[test]
fn node_crash_detects_taints_and_evicts_only_the_crashed_node() {
    let o = run(Builtin::NodeCrash, 60);
    assert_safe(&o);
    let failed: Vec<&ZoneTally> = o.zones.iter().filter(|z| z.failures > 0).collect();
    assert_eq!(failed.len(), 1, "{:?}", o.zones);
    let z = failed[0];
    assert_eq!((z.nodes_failed, z.seen_dead.0, z.tainted.0), (1, 1, 1));
    assert!(z.evicted.0 > 0 && z.daemonset_evicted == 0, "{z:?}");
    // The node's 2 DaemonSet pods and any pod tolerating forever stay.
    assert!(z.evicted.0 <= 8, "{z:?}");
    assert!(o.zones.iter().filter(|x| x.key != z.key).all(quiet));
    // Detection within grace -/+ what heartbeats and passes allow.
    for d in &o.latencies.detection {
        assert!((30.0..=50.0).contains(d), "detected after {d}s");
    }
}

#[test]
fn zone_outage_taints_the_dead_zone_at_its_rate_and_recovers() {
    let o = run_with(Builtin::ZoneOutage, 60, ControllerConfig::default(), Some(Span::from_secs(55 * 60)));
    assert_safe(&o);
    let a = zone(&o, "zone-a");
    assert_eq!((a.nodes, a.nodes_failed, a.seen_dead.0, a.tainted.0), (20, 20, 20, 20));
    // One node per 10 s at the primary rate: 20 nodes take 190 s.
    let (first, last) = a.tainted.1.unwrap_or((Timestamp::MAX, Timestamp::MIN));
    assert!(last - first >= Span::from_secs(190), "{first} .. {last}");
    assert!(a.evicted.0 > 100 && a.daemonset_evicted == 0, "{a:?}");
    // Reconnected at 50m: every taint removed, every node Ready again.
    assert_eq!(a.untainted, 20);
    let (_, end) = o.timeline.last().cloned().unwrap_or_default();
    assert_eq!(end[0].ready, 20);
    assert!(quiet(zone(&o, "zone-b")) && quiet(zone(&o, "zone-c")));
    // Each pod went exactly when its toleration ran out.
    assert!(o.latencies.eviction.iter().all(|&l| l >= 30.0));
}

#[test]
fn partial_zone_stops_tainting_a_small_zone() {
    let o = run(Builtin::PartialZone, 60);
    assert_safe(&o);
    let a = zone(&o, "zone-a");
    assert_eq!(a.nodes_failed, 12);
    assert_eq!(a.seen_dead.0, 12);
    // Once the zone is PartialDisruption and small (<= 50 nodes), its
    // rate is 0: the nodes seen dead before that may be tainted, no
    // more after.
    let partial = a.states.iter().find(|(_, s, _)| *s == Some(ZoneState::PartialDisruption));
    let Some(&(since, _, rate)) = partial else { panic!("zone-a never PartialDisruption: {:?}", a.states) };
    assert_eq!(rate, 0.0);
    assert!(a.tainted.0 < 12, "{a:?}");
    assert!(a.tainted.1.is_none_or(|(_, last)| last <= since), "{a:?}");
}

#[test]
fn partial_zone_uses_the_secondary_rate_in_a_large_zone() {
    let o = run_with(Builtin::PartialZone, 180, ControllerConfig::default(), Some(Span::from_secs(20 * 60)));
    assert_safe(&o);
    let a = zone(&o, "zone-a");
    assert_eq!(a.nodes_failed, 36);
    assert!(a.states.iter().any(|(_, s, r)| *s == Some(ZoneState::PartialDisruption) && *r == 0.01), "{:?}", a.states);
    // At 0.01/s, far fewer than the 36 dead nodes in 18 minutes.
    assert!(a.tainted.0 < 36 && a.tainted.0 > 0, "{a:?}");
}

#[test]
fn flapping_nodes_are_untainted_and_keep_their_default_pods() {
    let o = run(Builtin::Flapping, 60);
    assert_safe(&o);
    let failures: usize = o.zones.iter().map(|z| z.failures).sum();
    let seen: usize = o.zones.iter().map(|z| z.seen_dead.0).sum();
    let untainted: usize = o.zones.iter().map(|z| z.untainted).sum();
    assert!(failures >= 6, "{failures}");
    assert_eq!(seen, failures, "every 90 s outage is longer than the grace period");
    assert!(untainted >= failures - 1, "{untainted}");
    // Down 90 s at a time: only pods tolerating less than that can go;
    // the default 300 s ones never do.
    assert!(o.latencies.eviction.iter().all(|&l| l < 90.0), "{:?}", o.latencies.eviction);
}

#[test]
fn control_plane_outage_taints_and_evicts_nothing() {
    let o = run(Builtin::ControlPlaneOutage, 60);
    assert_safe(&o);
    for z in &o.zones {
        assert_eq!((z.tainted.0, z.evicted.0, z.false_alarms), (0, 0, 0), "{z:?}");
    }
    assert!(o.writes_failed > 0, "the controller tried to write and could not");
    let (_, end) = o.timeline.last().cloned().unwrap_or_default();
    assert!(end.iter().all(|s| s.unknown == 0 && s.tainted == 0), "{end:?}");
}

#[test]
fn controller_restart_resumes_without_double_or_early_deletions() {
    let o = run(Builtin::ControllerRestart, 60);
    assert_safe(&o);
    assert_eq!(o.contract_violations, 0, "no pod deleted twice");
    let a = zone(&o, "zone-a");
    // The restarted controller starts from a clean slate, as upstream
    // does: it removes the NoExecute taints it finds and adds them back
    // through the zone's rate limiter, so each node is tainted twice.
    assert_eq!((a.tainted.0, a.untainted), (40, 20));
    let (_, last) = a.evicted.1.unwrap_or_default();
    assert!(last > Timestamp::EPOCH + Span::from_secs(6 * 60), "evictions go on after the restart");
    assert!(quiet(zone(&o, "zone-b")));
}

#[test]
fn rolling_failure_evicts_after_tolerations_and_recovers_each_node() {
    let o = run(Builtin::RollingFailure, 60);
    assert_safe(&o);
    let total = |f: fn(&ZoneTally) -> usize| o.zones.iter().map(f).sum::<usize>();
    assert_eq!(total(|z| z.failures), 3);
    assert_eq!(total(|z| z.seen_dead.0), 3);
    assert_eq!(total(|z| z.tainted.0), 3);
    assert_eq!(total(|z| z.untainted), 3);
    assert!(total(|z| z.evicted.0) > 0);
    assert_eq!(total(|z| z.daemonset_evicted), 0);
}

#[test]
fn legacy_mode_never_deletes_daemonset_pods() {
    let config = ControllerConfig { enable_taint_manager: false, ..ControllerConfig::default() };
    let o = run_with(Builtin::ZoneOutage, 60, config, Some(Span::from_secs(15 * 60)));
    assert!(o.safe(), "{:?}", o.violations);
    let a = zone(&o, "zone-a");
    assert!(a.evicted.0 > 0, "{a:?}");
    assert_eq!(a.daemonset_evicted, 0);
    assert_eq!(a.tainted.0, 0, "legacy mode does not taint NoExecute");
}

#[test]
fn same_seed_same_outcome() {
    let a = run_with(Builtin::NodeCrash, 30, ControllerConfig::default(), Some(Span::from_secs(8 * 60)));
    let b = run_with(Builtin::NodeCrash, 30, ControllerConfig::default(), Some(Span::from_secs(8 * 60)));
    assert_eq!(a.zones, b.zones);
    assert_eq!(a.latencies, b.latencies);
    assert_eq!((a.observations, a.actions), (b.observations, b.actions));
}

/// Running the kubelets beside the controller changes nothing the
/// controller sees, so nothing it does: every builtin gives the same
/// outcome with every step pipelined and with none.
#[test]
fn pipelined_steps_give_the_same_outcome() {
    for builtin in Builtin::ALL {
        let run = |pipeline_from: usize| {
            let fleet = FleetSpec { nodes: 60, zones: 3, pods_per_node: 10, seed: 3 };
            let opts = SimOptions {
                source: Source::Builtin(builtin, fleet),
                config: ControllerConfig::default(),
                duration: Some(Span::from_secs(12 * 60)),
                seed: 3,
                measure: true,
                // The kubelets run beside the controller only when
                // the API answers at once.
                api: Some(ApiLatency::NONE),
            };
            let mut sim = match Simulation::new(opts) {
                Ok(s) => s,
                Err(e) => panic!("{builtin}: {e}"),
            };
            sim.pipeline_from = pipeline_from;
            match sim.run() {
                Ok(o) => o,
                Err(e) => panic!("{builtin}: {e}"),
            }
        };
        let (a, b) = (run(usize::MAX), run(0));
        assert_eq!(a.zones, b.zones, "{builtin}");
        assert_eq!(a.latencies, b.latencies, "{builtin}");
        assert_eq!(a.timeline, b.timeline, "{builtin}");
        assert_eq!(a.safety, b.safety, "{builtin}");
        assert_eq!(a.violations, b.violations, "{builtin}");
        assert_eq!(a.addons, b.addons, "{builtin}");
        assert_eq!(
            (a.steps, a.observations, a.actions, a.writes_failed),
            (b.steps, b.observations, b.actions, b.writes_failed),
            "{builtin}"
        );
        // The ingest done beside the kubelets is counted in the ticks.
        assert_eq!(a.costs.tick.len(), b.costs.tick.len(), "{builtin}");
        assert!(a.observations > 0 && a.actions > 0, "{builtin}: {} {}", a.observations, a.actions);
    }
}

#[test]
fn a_scenario_file_runs_with_its_own_cluster_and_events() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/zone-outage.yaml");
    let scenario = match nodewarden_cluster::validate::load_scenario(std::path::Path::new(path)) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    let opts = SimOptions {
        source: Source::File(Box::new(scenario)),
        config: ControllerConfig::default(),
        duration: None,
        seed: 1,
        measure: true,
        api: None,
    };
    let o = match Simulation::new(opts).and_then(Simulation::run) {
        Ok(o) => o,
        Err(e) => panic!("{e}"),
    };
    assert_safe(&o);
    assert!(o.zones.iter().map(|z| z.evicted.0).sum::<usize>() > 0, "{:?}", o.zones);
    assert!(!o.costs.tick.is_empty());
}

#[test]
fn bad_fleets_are_refused() {
    for (nodes, zones) in [(0, 1), (10, 0), (2, 3)] {
        let fleet = FleetSpec { nodes, zones, pods_per_node: 1, seed: 1 };
        let opts = SimOptions {
            source: Source::Builtin(Builtin::NodeCrash, fleet),
            config: ControllerConfig::default(),
            duration: None,
            seed: 1,
            measure: false,
            api: None,
        };
        assert!(matches!(Simulation::new(opts), Err(SimError::Fleet(_))));
    }
}
