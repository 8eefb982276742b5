//! The shadow through its facade, as `nodewarden run --dry-run` drives it:
//! observations and judgements in, verdicts, metrics and a summary out.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use common::*;
use nodewarden_engine::explain::Verdict as Rule;
use nodewarden_engine::{Judged, Observation, ZoneReport};
use nodewarden_model::{ConditionStatus, ControllerConfig, Span, ZoneKey, ZoneState};
use nodewarden_shadow::{DecisionKind, Shadow, ShadowSettings, Summary, Verdict};

/// The count of `verdict` for `kind`.
fn of(s: &Summary, kind: DecisionKind, verdict: Verdict) -> u64 {
    s.kinds.iter().find(|k| k.kind == kind).map_or(0, |k| k.counts.of(verdict))
}

// One test per verdict.

#[test]
fn agree_within_the_tolerance() {
    let mut s = synced_shadow(ControllerConfig::default(), &["n1"]);
    // 5 s period, a 100 ms tainting pass, and no latency measured yet: the
    // floor of a second (stamps are kept to the second).
    assert_eq!(s.tolerance(), Span::from_millis(6_100));
    // kube-controller-manager wrote Unknown within second 50 (stamped 50,
    // kept to the second, seen at 52); nodewarden judged the silence at 54:
    // at least 3 s apart, within 5 s + 1 s of latency.
    s.observe(t(52), &unknown("n1", 50, Vec::new()));
    s.judged(t(54), silent("n1", 54, 10));
    let sum = summary(&s, 60);
    assert_eq!(of(&sum, DecisionKind::Unknown, Verdict::Agree), 1, "{sum:#?}");
    assert_eq!((sum.decisions, sum.counts.disagreements()), (1, 0));
    assert_eq!(sum.watch_latency_seconds, 1.0, "seen 1 s after the second the stamp stands for");
    assert_eq!(sum.tolerance_seconds, 6.1);
    let unknown = &sum.kinds[0];
    assert_eq!(unknown.largest_difference_seconds, Some(3.0), "from the end of second 50");
    assert_eq!(unknown.differences.counts.iter().sum::<u64>(), 1);
    assert!(sum.disagreements.is_empty());
}

#[test]
fn earlier_when_nodewarden_decides_before_the_tolerance() {
    let mut s = synced_shadow(ControllerConfig::default(), &["n1"]);
    s.judged(t(40), silent("n1", 40, 0));
    s.observe(t(50), &unknown("n1", 50, Vec::new()));
    let sum = summary(&s, 60);
    assert_eq!(of(&sum, DecisionKind::Unknown, Verdict::Earlier), 1, "{sum:#?}");
    let d = &sum.disagreements[0];
    assert_eq!((d.kind, d.verdict, d.object.as_str()), (DecisionKind::Unknown, Verdict::Earlier, "n1"));
    assert_eq!(d.difference_seconds, Some(-10.0));
    assert_eq!(d.nodewarden_at.as_deref(), Some("2027-01-15T08:00:40Z"));
    assert_eq!(d.upstream_at.as_deref(), Some("2027-01-15T08:00:50Z"));
    assert_eq!(d.reason, "last heartbeat seen 2027-01-15T08:00:00Z, grace 40s");
}

#[test]
fn later_when_nodewarden_decides_after_the_tolerance() {
    let mut s = synced_shadow(ControllerConfig::default(), &["n1"]);
    s.observe(t(100), &unknown("n1", 100, vec![taint(UNREACHABLE, NO_EXECUTE, Some(100))]));
    s.judged(t(101), silent("n1", 101, 60));
    s.judged(t(130), tainted("n1", 130, UNREACHABLE, NO_EXECUTE, 101));
    let sum = summary(&s, 140);
    assert_eq!(of(&sum, DecisionKind::NoExecuteUnreachable, Verdict::Later), 1, "{sum:#?}");
    assert_eq!(of(&sum, DecisionKind::Unknown, Verdict::Agree), 1);
    let d = sum.disagreements.last().unwrap();
    assert_eq!(d.difference_seconds, Some(30.0));
    assert_eq!(d.reason, "zone /z1 Normal at 0.1/s, queued 2027-01-15T08:01:41Z");
}

#[test]
fn noexecute_taints_compare_at_the_same_place_in_the_zone_queue() {
    let mut s = synced_shadow(ControllerConfig::default(), &["n1", "n2", "n3"]);
    // kube-controller-manager released n1 at 100 and n2 at 110;
    // nodewarden, which queued them the other way round, n2 at 101 and n1
    // at 111: the same nodes at the same pace, 1 s apart.
    s.observe(t(100), &unknown("n1", 99, vec![taint(UNREACHABLE, NO_EXECUTE, Some(100))]));
    s.observe(t(110), &unknown("n2", 109, vec![taint(UNREACHABLE, NO_EXECUTE, Some(110))]));
    s.judged(t(101), tainted("n2", 101, UNREACHABLE, NO_EXECUTE, 96));
    s.judged(t(111), tainted("n1", 111, UNREACHABLE, NO_EXECUTE, 96));
    // n3: third on both sides, but nodewarden 30 s behind its pace: more
    // than the tolerance and a token of the zone's bucket (10 s at 0.1/s).
    s.observe(t(120), &unknown("n3", 119, vec![taint(UNREACHABLE, NO_EXECUTE, Some(120))]));
    s.judged(t(150), tainted("n3", 150, UNREACHABLE, NO_EXECUTE, 96));
    let sum = summary(&s, 160);
    assert_eq!(sum.tolerance_seconds, 6.1, "{sum:#?}");
    assert_eq!(of(&sum, DecisionKind::NoExecuteUnreachable, Verdict::Agree), 2, "{sum:#?}");
    assert_eq!(of(&sum, DecisionKind::NoExecuteUnreachable, Verdict::Later), 1, "{sum:#?}");
    let k = sum.kinds.iter().find(|k| k.kind == DecisionKind::NoExecuteUnreachable).expect("listed");
    assert_eq!(k.largest_difference_seconds, Some(30.0), "node by node the swapped pair is 10 s apart: {sum:#?}");
    let late = &sum.disagreements[0];
    assert_eq!((late.object.as_str(), late.difference_seconds), ("n3", Some(30.0)));
}

#[test]
fn a_release_a_token_apart_agrees() {
    // Each side's zone bucket fills on its own phase: the same place 8 s
    // apart at 0.1/s (one token is 10 s) is the same pace.
    let mut s = synced_shadow(ControllerConfig::default(), &["n1"]);
    s.observe(t(100), &unknown("n1", 99, vec![taint(UNREACHABLE, NO_EXECUTE, Some(100))]));
    s.judged(t(108), tainted("n1", 108, UNREACHABLE, NO_EXECUTE, 96));
    let sum = summary(&s, 120);
    assert_eq!(of(&sum, DecisionKind::NoExecuteUnreachable, Verdict::Agree), 1, "{sum:#?}");
}

#[test]
fn only_nodewarden_once_the_window_has_passed() {
    let mut s = synced_shadow(ControllerConfig::default(), &["n1"]);
    s.judged(t(300), deletion("ns/p", "n1", 300));
    assert_eq!(summary(&s, 300).pending_nodewarden, 1);
    s.tick(t(900));
    assert_eq!(summary(&s, 900).decisions, 0, "exactly the window: still waiting");
    s.tick(t(901));
    let sum = summary(&s, 901);
    assert_eq!(of(&sum, DecisionKind::PodDeletion, Verdict::OnlyNodewarden), 1, "{sum:#?}");
    assert_eq!((sum.pending_nodewarden, sum.pending_upstream), (0, 0));
    let d = &sum.disagreements[0];
    assert_eq!((d.object.as_str(), d.upstream_at.as_deref(), d.difference_seconds), ("ns/p", None, None));
    assert_eq!(d.reason, "untolerated taint node.kubernetes.io/unreachable:NoExecute, scheduled 2027-01-15T08:05:00Z");
}

#[test]
fn only_upstream_once_the_window_has_passed() {
    let mut s = synced_shadow(ControllerConfig::default(), &["n1"]);
    s.observe(t(20), &node("n1", ConditionStatus::False, 20, vec![taint(NOT_READY, NO_SCHEDULE, None)]));
    assert_eq!(summary(&s, 20).pending_upstream, 1);
    s.tick(t(621));
    let sum = summary(&s, 621);
    assert_eq!(of(&sum, DecisionKind::NoScheduleNotReady, Verdict::OnlyUpstream), 1, "{sum:#?}");
    let d = &sum.disagreements[0];
    assert_eq!(d.nodewarden_at, None);
    assert_eq!(d.reason, "nodewarden reached no such decision within the window");
}

// The restart rule.

#[test]
fn the_baseline_before_the_first_list_reports_nothing() {
    let mut s = Shadow::new(ShadowSettings::default(), t(-10));
    s.observe(t(-5), &ready("n1"));
    s.observe(t(-5), &unknown("n1", -6, vec![taint(UNREACHABLE, NO_EXECUTE, Some(-6))]));
    s.observe(t(-5), &pod("ns/p", "n1", false, true));
    s.judged(t(-4), silent("n1", -4, -50));
    s.tick(t(-3));
    let sum = summary(&s, -3);
    assert!(!sum.synced);
    assert_eq!((sum.decisions, sum.pending_nodewarden, sum.pending_upstream), (0, 0, 0), "{sum:#?}");
    assert_eq!(sum.excused, 1, "the judgement before the list");
    s.synced(t(0));
    // Already terminating in the baseline: its deletion is nobody's. And
    // n1, Ready at first sight, was Unknown when the list was in: what
    // follows about it (its pods seen not Ready) is excused.
    s.observe(t(1), &pod("ns/p", "n1", false, true));
    s.tick(t(2_000));
    let sum = summary(&s, 2_000);
    assert_eq!((sum.decisions, sum.excused), (0, 2), "{sum:#?}");
}

#[test]
fn a_node_unknown_at_first_sight_is_excused_until_ready() {
    let mut s = Shadow::new(ShadowSettings::default(), t(-10));
    s.observe(t(-5), &unknown("old", -500, vec![taint(UNREACHABLE, NO_SCHEDULE, None)]));
    s.synced(t(0));
    // Both sides go on deciding about it: none of it is compared.
    let tainted_old = vec![taint(UNREACHABLE, NO_SCHEDULE, None), taint(UNREACHABLE, NO_EXECUTE, Some(10))];
    s.observe(t(10), &unknown("old", -500, tainted_old));
    s.judged(t(12), tainted("old", 12, UNREACHABLE, NO_EXECUTE, 0));
    s.observe(t(20), &pod("ns/p", "old", false, true));
    s.judged(t(20), deletion("ns/p", "old", 20));
    s.tick(t(2_000));
    let sum = summary(&s, 2_000);
    assert_eq!((sum.decisions, sum.pending_nodewarden, sum.pending_upstream), (0, 0, 0), "{sum:#?}");
    // The taint and the pod deletion on each side, and its pods not Ready.
    assert_eq!(sum.excused, 5);
    // Ready again: its next episode is compared.
    s.observe(t(2_010), &ready("old"));
    s.observe(t(2_100), &unknown("old", 2_100, Vec::new()));
    s.judged(t(2_101), silent("old", 2_101, 2_060));
    assert_eq!(of(&summary(&s, 2_102), DecisionKind::Unknown, Verdict::Agree), 1);
}

#[test]
fn a_silence_judged_at_first_sight_is_excused_with_what_upstream_already_said() {
    let mut s = synced_shadow(ControllerConfig::default(), &["n1", "n2"]);
    // n1 was Ready in the list, but its kubelet had already stopped:
    // kube-controller-manager marks it first, then nodewarden judges its
    // silence from its first sight of it.
    s.observe(t(5), &unknown("n1", 5, Vec::new()));
    s.observe(t(6), &pod("ns/p", "n1", false, false));
    assert_eq!(summary(&s, 6).pending_upstream, 2, "unknown and pods-not-ready");
    let first_sight = Judged::Silent { probe: t(-5), grace: Span::from_secs(40), first_sight: true };
    s.judged(t(35), judgement("n1", 35, first_sight));
    let sum = summary(&s, 35);
    assert_eq!((sum.pending_upstream, sum.excused), (0, 3), "{sum:#?}");
    // What follows about n1 is excused too; n2 is compared as ever.
    s.observe(t(36), &unknown("n1", 5, vec![taint(UNREACHABLE, NO_SCHEDULE, None)]));
    s.judged(t(36), tainted("n1", 36, UNREACHABLE, NO_SCHEDULE, 0));
    s.observe(t(40), &unknown("n2", 40, Vec::new()));
    s.tick(t(2_000));
    let sum = summary(&s, 2_000);
    assert_eq!(sum.excused, 5);
    assert_eq!(sum.decisions, 1, "{sum:#?}");
    assert_eq!(of(&sum, DecisionKind::Unknown, Verdict::OnlyUpstream), 1, "n2's");
}

// Repeats and episodes.

#[test]
fn repeats_are_ignored_after_a_verdict_and_a_new_episode_counts_again() {
    let mut s = synced_shadow(ControllerConfig::default(), &["n1"]);
    s.observe(t(50), &unknown("n1", 50, Vec::new()));
    s.judged(t(51), silent("n1", 51, 10));
    // The engine judges the node again after an update; the watch shows
    // the same state again.
    s.judged(t(60), silent("n1", 60, 10));
    s.observe(t(61), &unknown("n1", 50, Vec::new()));
    s.tick(t(2_000));
    let sum = summary(&s, 2_000);
    assert_eq!((sum.decisions, sum.counts.agree), (1, 1), "{sum:#?}");
    // Ready, then silent again: a new episode, compared again.
    s.observe(t(2_010), &ready("n1"));
    s.observe(t(2_100), &unknown("n1", 2_100, Vec::new()));
    s.judged(t(2_102), silent("n1", 2_102, 2_060));
    assert_eq!(of(&summary(&s, 2_103), DecisionKind::Unknown, Verdict::Agree), 2);
}

// Pod deletions.

#[test]
fn pod_deletions_are_attributed_to_the_taint_manager_only_on_tainted_nodes() {
    let mut s = synced_shadow(ControllerConfig::default(), &["sick", "healthy"]);
    s.observe(t(100), &unknown("sick", 100, vec![taint(UNREACHABLE, NO_EXECUTE, Some(100))]));
    s.judged(t(100), silent("sick", 100, 60));
    s.judged(t(101), tainted("sick", 101, UNREACHABLE, NO_EXECUTE, 100));
    s.observe(t(400), &pod("ns/a", "sick", false, true));
    s.judged(t(401), deletion("ns/a", "sick", 400));
    // A user deletes a pod on a healthy node: nobody's decision to compare.
    s.observe(t(410), &pod("ns/b", "healthy", true, true));
    s.observe(t(411), &Observation::PodDeleted { key: "ns/b".into() });
    s.tick(t(2_000));
    let sum = summary(&s, 2_000);
    assert_eq!(of(&sum, DecisionKind::PodDeletion, Verdict::Agree), 1, "{sum:#?}");
    assert_eq!(sum.kinds.iter().find(|k| k.kind == DecisionKind::PodDeletion).unwrap().decisions, 1);
    assert_eq!(of(&sum, DecisionKind::PodsNotReady, Verdict::OnlyUpstream), 1, "nodewarden judged none here");
    assert_eq!(sum.counts.disagreements(), 1, "{sum:#?}");
}

#[test]
fn legacy_deletions_are_one_per_node_and_episode() {
    let legacy = ControllerConfig { enable_taint_manager: false, ..ControllerConfig::default() };
    let mut s = synced_shadow(legacy, &["n1"]);
    s.observe(t(50), &unknown("n1", 50, Vec::new()));
    s.judged(t(50), silent("n1", 50, 10));
    let rule = Rule::EvictionTimeout {
        status: ConditionStatus::Unknown,
        since: t(10),
        timeout: Span::from_secs(300),
        zone_rate: 0.1,
    };
    s.judged(t(351), judgement("n1", 351, Judged::LegacyEviction { pods: 3, verdict: rule }));
    for i in 0..3 {
        s.observe(t(352 + i), &pod(&format!("ns/p{i}"), "n1", true, true));
    }
    s.tick(t(2_000));
    let sum = summary(&s, 2_000);
    assert_eq!(of(&sum, DecisionKind::LegacyDeletion, Verdict::Agree), 1, "{sum:#?}");
    assert_eq!(sum.decisions, 2, "the Unknown and one legacy deletion");
}

// Memory.

#[test]
fn after_days_of_matched_and_aged_decisions_nothing_is_held() {
    let nodes: Vec<String> = (0..50).map(|i| format!("n{i}")).collect();
    let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let mut s = synced_shadow(ControllerConfig::default(), &names);
    let mut now = 0;
    for round in 0..200i64 {
        for (i, n) in names.iter().enumerate() {
            let at = now + i as i64;
            // Matched: the Unknown. One-sided: nodewarden's NoSchedule
            // taint and kube-controller-manager's pod deletion.
            s.observe(t(at), &unknown(n, at, vec![taint(UNREACHABLE, NO_EXECUTE, Some(at))]));
            s.judged(t(at), silent(n, at, at - 40));
            s.judged(t(at), tainted(n, at, UNREACHABLE, NO_SCHEDULE, at));
            s.observe(t(at + 1), &pod(&format!("ns/{n}-{round}"), n, true, true));
            s.observe(t(at + 2), &Observation::PodDeleted { key: format!("ns/{n}-{round}") });
            s.tick(t(at + 2));
        }
        now += 1_000;
        for n in &names {
            s.observe(t(now - 100), &ready(n));
        }
        s.tick(t(now));
        assert!(s.len() < 50 * 6, "bounded by what one window holds: {}", s.len());
    }
    s.tick(t(now + 1_300));
    let sum = summary(&s, now + 1_300);
    assert_eq!(of(&sum, DecisionKind::Unknown, Verdict::Agree), 200 * 50);
    assert_eq!(of(&sum, DecisionKind::NoScheduleUnreachable, Verdict::OnlyNodewarden), 200 * 50);
    assert_eq!(of(&sum, DecisionKind::PodDeletion, Verdict::OnlyUpstream), 200 * 50);
    assert_eq!(of(&sum, DecisionKind::NoExecuteUnreachable, Verdict::OnlyUpstream), 200 * 50);
    assert_eq!(s.len(), 0, "{:?}", s.footprint());
    let f = s.footprint();
    assert_eq!((f.terminating_pods, f.disagreements, f.nodes), (0, 1_000, 50));
    assert_eq!(sum.disagreements.len(), 1_000);
}

// The summary.

#[test]
fn zones_show_nodewardens_state_beside_kube_controller_managers_pace() {
    let nodes: Vec<String> = (0..6).map(|i| format!("n{i}")).collect();
    let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let mut s = synced_shadow(ControllerConfig::default(), &names);
    for (i, n) in names.iter().enumerate() {
        let at = 100 + 10 * i as i64;
        s.observe(t(at), &unknown(n, 50, vec![taint(UNREACHABLE, NO_EXECUTE, Some(at))]));
    }
    let report = ZoneReport {
        key: ZoneKey::new("", "z1"),
        state: Some(ZoneState::Normal),
        rate: 0.1,
        size: 6,
        not_ready: 6,
        queued: 0,
    };
    let sum = s.summary(t(200), &[report]);
    assert_eq!(sum.zones.len(), 1, "{:#?}", sum.zones);
    let z = &sum.zones[0];
    assert_eq!(z.zone, "/z1");
    assert_eq!((z.nodewarden_state.as_deref(), z.nodewarden_rate), (Some("Normal"), Some(0.1)));
    assert_eq!((z.upstream_taints, z.upstream_pace_per_second), (6, Some(0.1)));
    assert_eq!(z.upstream_state_inferred.as_deref(), Some("Normal"));
}

#[test]
fn the_summary_round_trips_through_json_in_snake_case() {
    let mut s = synced_shadow(ControllerConfig::default(), &["n1", "n2"]);
    s.observe(t(51), &unknown("n1", 50, vec![taint(UNREACHABLE, NO_EXECUTE, Some(51))]));
    s.judged(t(53), silent("n1", 53, 10));
    s.judged(t(90), tainted("n1", 90, UNREACHABLE, NO_EXECUTE, 53));
    s.judged(t(95), deletion("ns/<p>", "n2", 95));
    s.tick(t(1_000));
    let report = ZoneReport { key: ZoneKey::new("", "z1"), state: None, rate: 0.0, size: 2, not_ready: 1, queued: 0 };
    let sum = s.summary(t(1_000), &[report]);
    let json = serde_json::to_string_pretty(&sum).unwrap();
    let back: Summary = serde_json::from_str(&json).unwrap();
    assert_eq!(back, sum);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    for key in [
        "since",
        "now",
        "window_seconds",
        "tolerance_seconds",
        "watch_latency_seconds",
        "decisions",
        "agree",
        "earlier",
        "later",
        "only_nodewarden",
        "only_upstream",
        "pending_nodewarden",
        "pending_upstream",
        "excused",
        "kinds",
        "zones",
        "disagreements",
    ] {
        assert!(v.get(key).is_some(), "{key} missing from {json}");
    }
    assert_eq!(v["since"], "2027-01-15T07:59:50Z");
    assert_eq!(v["kinds"][0]["kind"], "unknown");
    assert_eq!(v["kinds"][4]["kind"], "noexecute-unreachable");
    assert_eq!(v["kinds"][4]["later"], 1);
    assert_eq!(v["disagreements"][1]["verdict"], "only-nodewarden");
    assert_eq!(v["disagreements"][1]["object"], "ns/<p>");
    assert_eq!(v["decisions"], 3);
}

// Where verdicts are said.

type Seen = Arc<Mutex<BTreeMap<String, Vec<f64>>>>;

/// A recorder that keeps every counter increment and histogram sample by
/// `name{label=value,...}`.
struct Recorder(Seen);

struct Handle(Seen, String);

impl metrics::CounterFn for Handle {
    fn increment(&self, value: u64) {
        self.0.lock().unwrap().entry(self.1.clone()).or_default().push(value as f64);
    }
    fn absolute(&self, _: u64) {}
}

impl metrics::HistogramFn for Handle {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().entry(self.1.clone()).or_default().push(value);
    }
}

impl Recorder {
    fn handle(&self, key: &metrics::Key) -> Arc<Handle> {
        let labels: Vec<String> = key.labels().map(|l| format!("{}={}", l.key(), l.value())).collect();
        Arc::new(Handle(self.0.clone(), format!("{}{{{}}}", key.name(), labels.join(","))))
    }
}

impl metrics::Recorder for Recorder {
    fn describe_counter(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}
    fn describe_gauge(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}
    fn describe_histogram(&self, _: metrics::KeyName, _: Option<metrics::Unit>, _: metrics::SharedString) {}
    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::from_arc(self.handle(key))
    }
    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }
    fn register_histogram(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Histogram {
        metrics::Histogram::from_arc(self.handle(key))
    }
}

#[test]
fn verdicts_are_counted_and_differences_recorded_on_the_metrics() {
    let seen = Seen::default();
    let recorder = Recorder(seen.clone());
    metrics::with_local_recorder(&recorder, || {
        let mut s = synced_shadow(ControllerConfig::default(), &["n1"]);
        s.judged(t(40), silent("n1", 40, 0));
        s.observe(t(50), &unknown("n1", 50, Vec::new()));
        s.observe(t(60), &unknown("n1", 50, vec![taint(UNREACHABLE, NO_SCHEDULE, None)]));
        s.tick(t(700));
    });
    let seen = seen.lock().unwrap();
    assert_eq!(seen["nodewarden_shadow_decisions_total{kind=unknown,verdict=earlier}"], [1.0]);
    assert_eq!(seen["nodewarden_shadow_decisions_total{kind=noschedule-unreachable,verdict=only-upstream}"], [1.0]);
    assert_eq!(seen["nodewarden_shadow_difference_seconds{kind=unknown}"], [-10.0]);
    assert_eq!(seen.len(), 3, "{seen:#?}");
}
