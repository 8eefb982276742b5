//! Reading a scenario: YAML or JSON text into a [`Scenario`], serde's
//! errors named by field path and line, and then the whole-file checks
//! ([`validate`]). Its tests pin the format as a file
//! spells it.

use std::path::Path;

use super::validate;
use crate::error::ScenarioError;
use crate::scenario::Scenario;

/// Parses a scenario from YAML or JSON text and validates it.
pub fn parse_scenario(text: &str) -> Result<Scenario, ScenarioError> {
    let de = serde_yaml_ng::Deserializer::from_str(text);
    let scenario: Scenario = serde_path_to_error::deserialize(de).map_err(ScenarioError::from_yaml)?;
    validate(&scenario)?;
    Ok(scenario)
}

/// Reads, parses and validates the scenario file at `path`.
pub fn load_scenario(path: &Path) -> Result<Scenario, ScenarioError> {
    let bytes = std::fs::read(path).map_err(|cause| ScenarioError::Read { path: path.to_path_buf(), cause })?;
    let text = String::from_utf8(bytes).map_err(|e| ScenarioError::Parse {
        path: ".".to_string(),
        location: None,
        message: format!("not UTF-8 text: {}", e.utf8_error()),
    })?;
    parse_scenario(&text)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use nodewarden_engine::ZoneState;
    use nodewarden_model::{ConditionStatus, ConditionType, Span, TaintEffect, Timestamp, TolerationOperator};

    use super::*;
    use crate::scenario::{EventAction, Subject, TimeSpec, ZoneStateSpec};
    use crate::validate::tests::{error, parse};

    fn secs(s: i64) -> Span {
        Span::from_secs(s)
    }

    const FULL: &str = r#"
name: everything
run-until: 10m
config:
  node-monitor-period: 5s
  node-monitor-grace-period: 40s
  node-startup-grace-period: 1m
  pod-eviction-timeout: 5m
  node-eviction-rate: 0.1
  secondary-node-eviction-rate: 0.01
  large-cluster-size-threshold: 50
  unhealthy-zone-threshold: 0.55
  enable-taint-manager: false
cluster:
  default-not-ready-toleration-seconds: null
  default-unreachable-toleration-seconds: 20
  kubelet:
    node-lease-duration-seconds: 20
    node-status-update-frequency: 7s
    node-status-report-frequency: 1m
nodes:
- name: node-a
  zone: region1/zone-a
  labels: {kubernetes.io/os: linux}
  created: -1h
  ready: "True"
  heartbeat: 0s
  transition: -1h
  conditions: {MemoryPressure: "False", DiskPressure: "True", PIDPressure: "False", NetworkUnavailable: "False"}
  lease: 0s
  taints: [{key: example.com/k, value: v, effect: NoSchedule}]
  unschedulable: true
  kubelet: true
- {name: node-b, zone: /zone-b, ready: Unknown}
pods:
- name: default/web-1
  node: node-a
  daemonset: true
  ready: false
  terminating: true
  tolerations:
  - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, seconds: -20}
  - {operator: Exists}
- {name: default/web-2, ready: null}
events:
- {at: 10s, renew-lease: [node-a]}
- {at: 10s, set-ready: {node: node-a, status: "False"}}
- {at: 10s, set-condition: {node: node-a, type: DiskPressure, status: "True"}}
- {at: 15s, kubelet-stop: [node-a]}
- {at: 60s, kubelet-start: node-a}
- {at: 20s, add-node: {name: node-z, zone: region1/}}
- {at: 20s, delete-node: node-b}
- {at: 20s, add-pod: {name: default/p, node: node-z}}
- {at: 20s, delete-pod: default/web-2}
- {at: 20s, set-taints: {node: node-a, taints: [{key: k, effect: NoExecute}]}}
- {at: 20s, set-unschedulable: {node: node-a, value: true}}
- {at: 20s, set-lease: {node: node-a, renew: now}}
- {at: 20.5s, set-lease: {node: node-a, renew: 5s}}
- {at: 500ms, remove-condition: {node: node-a, type: DiskPressure}}
- {at: 20s, set-tolerations: {pod: default/web-1, tolerations: []}}
- {at: 20s, bind-pod: {pod: default/p, node: node-a}}
- {at: 20s, set-labels: {node: node-a, labels: {k: v, gone: null}}}
- {at: 30s, restart-controller: true}
expect:
- {at: 45s, node: node-a, ready: Unknown, taints: ["a:NoExecute"], has-taints: ["b:NoSchedule"], lacks-taints: ["c:PreferNoSchedule"]}
- {at: 60s, node: node-a, conditions: {MemoryPressure: Unknown, Gone: null}, condition-reasons: {Ready: NodeStatusUnknown}}
- {at: 60s, node: node-a, labels: {kubernetes.io/os: linux}, writes: 1, deleted: false}
- {at: 400s, pod: default/web-1, deleted: true, ready: false, reason: NodeLost, conditions: {DisruptionTarget: "True"}, writes: 2}
- {at: 50s, zone: region1/zone-a, state: FullDisruption, rate: 0.01, tainted: 2}
- {at: 50s, zone: "", state: null}
- {at: 60s, events-include: [{reason: NodeNotReady, object: node-a}, {reason: X, count: 0}]}
- {at: 60s, events-exclude: [{reason: NodeControllerEviction, object: default/web-2}]}
"#;

    #[test]
    fn every_field_parses() {
        let s = parse(FULL);
        assert_eq!(s.name.as_deref(), Some("everything"));
        assert_eq!(s.run_until, Some(secs(600)));
        assert_eq!(s.end(), Timestamp::EPOCH + secs(600));
        assert!(!s.config.enable_taint_manager);
        assert_eq!(s.config.node_startup_grace_period, secs(60));
        assert_eq!(s.cluster.default_not_ready_toleration_seconds, None);
        assert_eq!(s.cluster.default_unreachable_toleration_seconds, Some(20));
        assert_eq!(s.cluster.kubelet.node_lease_duration_seconds, 20);
        assert_eq!(s.cluster.kubelet.node_status_update_frequency, secs(7));
        assert_eq!(s.cluster.kubelet.node_status_report_frequency, secs(60));

        let a = &s.nodes[0];
        assert_eq!(a.zone.as_deref(), Some("region1/zone-a"));
        assert_eq!(a.labels["kubernetes.io/os"], "linux");
        assert_eq!(a.created, Some(TimeSpec::At(secs(-3600))));
        assert_eq!(a.ready, Some(ConditionStatus::True));
        assert_eq!(a.heartbeat, Some(TimeSpec::At(Span::ZERO)));
        assert_eq!(a.transition, Some(TimeSpec::At(secs(-3600))));
        assert_eq!(a.conditions.len(), 4);
        assert_eq!(a.conditions[&ConditionType::DiskPressure], ConditionStatus::True);
        assert_eq!(a.conditions[&ConditionType::PidPressure], ConditionStatus::False);
        assert_eq!(a.lease, Some(TimeSpec::At(Span::ZERO)));
        assert_eq!(a.taints[0].value, "v");
        assert_eq!(a.taints[0].effect, TaintEffect::NoSchedule);
        assert!(a.unschedulable && a.kubelet);
        assert_eq!(s.nodes[1].ready, Some(ConditionStatus::Unknown));
        assert_eq!(s.nodes[1].lease, None);

        let p = &s.pods[0];
        assert_eq!(p.node.as_deref(), Some("node-a"));
        assert!(p.daemonset && p.terminating);
        assert_eq!(p.ready, Some(false));
        assert_eq!(p.tolerations[0].seconds, Some(-20));
        assert_eq!(p.tolerations[1].key, "");
        assert_eq!(p.tolerations[1].operator, TolerationOperator::Exists);
        assert_eq!(p.tolerations[1].effect, None);
        assert_eq!(s.pods[1].ready, None);
        assert_eq!(s.pods[1].node, None);

        let names: Vec<&str> = s.events.iter().map(|e| e.action.name()).collect();
        assert_eq!(
            names,
            [
                "renew-lease",
                "set-ready",
                "set-condition",
                "kubelet-stop",
                "kubelet-start",
                "add-node",
                "delete-node",
                "add-pod",
                "delete-pod",
                "set-taints",
                "set-unschedulable",
                "set-lease",
                "set-lease",
                "remove-condition",
                "set-tolerations",
                "bind-pod",
                "set-labels",
                "restart-controller",
            ]
        );
        assert_eq!(s.events[4].action, EventAction::KubeletStart(vec!["node-a".into()]));
        assert_eq!(s.events[12].at, Span::from_millis(20_500));
        assert_eq!(s.events[13].at, Span::from_millis(500));
        let EventAction::SetLease(l) = &s.events[11].action else { panic!() };
        assert_eq!(l.renew, TimeSpec::Now);
        let EventAction::SetLabels(l) = &s.events[16].action else { panic!() };
        assert_eq!(l.labels, BTreeMap::from([("k".into(), Some("v".into())), ("gone".into(), None)]));

        let Subject::Node { name, checks } = &s.expect[0].subject else { panic!() };
        assert_eq!(name, "node-a");
        assert_eq!(checks.ready, Some(ConditionStatus::Unknown));
        assert_eq!(checks.taints.as_ref().unwrap()[0].to_string(), "a:NoExecute");
        assert_eq!(checks.lacks_taints.as_ref().unwrap()[0].effect, TaintEffect::PreferNoSchedule);
        let Subject::Node { checks, .. } = &s.expect[1].subject else { panic!() };
        assert_eq!(checks.conditions.as_ref().unwrap()["Gone"], None);
        let Subject::Pod { checks, .. } = &s.expect[3].subject else { panic!() };
        assert_eq!((checks.deleted, checks.ready, checks.writes), (Some(true), Some(false), Some(2)));
        assert_eq!(checks.reason, Some(Some("NodeLost".into())));
        let Subject::Zone { zone, checks } = &s.expect[4].subject else { panic!() };
        assert_eq!(zone, "region1/zone-a");
        assert_eq!(checks.state, Some(Some(ZoneStateSpec(ZoneState::FullDisruption))));
        assert_eq!((checks.rate, checks.tainted), (Some(0.01), Some(2)));
        let Subject::Zone { checks, .. } = &s.expect[5].subject else { panic!() };
        assert_eq!(checks.state, Some(None));
        let Subject::EventsInclude(list) = &s.expect[6].subject else { panic!() };
        assert_eq!(list[1].count, Some(0));
        assert!(matches!(&s.expect[7].subject, Subject::EventsExclude(l) if l.len() == 1));
    }

    #[test]
    fn json_is_accepted_too() {
        let s = parse(
            r#"{"nodes": [{"name": "a", "ready": "True", "heartbeat": "0s"}],
            "expect": [{"at": "1s", "node": "a", "ready": "True"}]}"#,
        );
        assert_eq!(s.nodes.len(), 1);
        assert_eq!(s.end(), Timestamp::EPOCH + secs(2));
    }

    #[test]
    fn defaults() {
        let s = parse("nodes: [{name: a}]\npods: [{name: ns/p}]\nevents:\nexpect:\n");
        assert_eq!(s.cluster.default_not_ready_toleration_seconds, Some(300));
        assert_eq!(s.cluster.default_unreachable_toleration_seconds, Some(300));
        assert_eq!(s.cluster.kubelet.node_lease_duration_seconds, 40);
        assert_eq!(s.pods[0].ready, Some(true));
        assert!(!s.nodes[0].kubelet);
        assert_eq!(s.end(), Timestamp::EPOCH + secs(1));
        let s = parse("events: [{at: 3s, restart-controller: true}]\nexpect: [{at: 90s, zone: r/z, tainted: 0}]");
        assert_eq!(s.end(), Timestamp::EPOCH + secs(91));
    }

    #[test]
    fn unknown_fields_are_refused_with_their_path() {
        for (text, path) in [
            ("nmes: []", "nmes"),
            ("nodes: [{name: a, zonee: x}]", "nodes[0].zonee"),
            ("pods: [{name: a/b, tolerations: [{key: k, secs: 1}]}]", "pods[0].tolerations[0].secs"),
            ("cluster: {kubelet: {lease: 1}}", "cluster.kubelet.lease"),
            ("config: {node-monitor-grace: 1s}", "config.node-monitor-grace"),
            (
                "nodes: [{name: a}]\nevents: [{at: 1s, set-ready: {node: a, status: 'True', x: 1}}]",
                "events[0].set-ready.x",
            ),
            ("events: [{at: 1s, frobnicate: [a]}]", "events[0].frobnicate"),
            ("expect: [{at: 1s, zone: z, tainted: 1, colour: red}]", "expect[0].colour"),
            ("expect: [{at: 1s, events-include: [{reason: R, objekt: o}]}]", "expect[0].events-include[0].objekt"),
        ] {
            let e = error(text);
            assert_eq!(e.path(), Some(path), "{text}: {e}");
            assert!(e.to_string().contains("unknown field"), "{e}");
        }
    }

    #[test]
    fn bad_durations() {
        for (text, path, needle) in [
            ("run-until: 10", "run-until", "has no unit"),
            ("run-until: 10 minutes", "run-until", "invalid duration"),
            ("events: [{at: 1x, restart-controller: true}]", "events[0].at", "invalid duration"),
            ("nodes: [{name: a, created: yesterday}]", "nodes[0].created", "invalid duration"),
            ("nodes: [{name: a, lease: 5}]", "nodes[0].lease", "has no unit"),
            ("config: {node-monitor-period: 5}", "config.node-monitor-period", "has no unit"),
            (
                "cluster: {kubelet: {node-status-update-frequency: 1.5.0s}}",
                "cluster.kubelet.node-status-update-frequency",
                "invalid duration",
            ),
            ("expect: [{at: now, zone: z, tainted: 0}]", "expect[0].at", "invalid duration"),
        ] {
            let e = error(text);
            assert_eq!(e.path(), Some(path), "{text}: {e}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
        // Fractional and negative durations are fine.
        let s = parse("nodes: [{name: a, lease: -1h, created: 10.5s}]");
        assert_eq!(s.nodes[0].lease, Some(TimeSpec::At(secs(-3600))));
        assert_eq!(s.nodes[0].created, Some(TimeSpec::At(Span::from_millis(10_500))));
    }

    #[test]
    fn errors_carry_yaml_line_and_column() {
        let text =
            "nodes:\n- name: a\n  ready: 'True'\nevents:\n- at: 1s\n  set-ready:\n    node: a\n    status: Maybe\n";
        let e = error(text);
        assert_eq!(e.path(), Some("events[0].set-ready.status"));
        let loc = e.location().expect("a location");
        assert_eq!((loc.line, loc.column), (8, 13));
        assert_eq!(
            e.to_string(),
            "events[0].set-ready.status (line 8, column 13): unknown variant `Maybe`, expected one of `True`, `False`, `Unknown`"
        );
        // Structural errors point at the entry.
        let e = error(
            "nodes: [{name: a}]\nevents:\n- {at: 1s, renew-lease: [a]}\n- at: 2s\n  renew-lease: [a]\n  kubelet-stop: [a]\n",
        );
        assert_eq!(e.path(), Some("events[1]"));
        assert_eq!(e.location().map(|l| l.line), Some(4));
        assert!(e.to_string().contains("exactly one action"), "{e}");
        // Syntax errors have a position (and the path reached so far).
        let e = error("nodes:\n  - name: a\n   bad: [\n");
        assert_eq!(e.location().map(|l| l.line), Some(3), "{e}");
        assert!(e.to_string().contains("did not find expected"), "{e}");
        let e = error("name: x\n\tnodes: []\n");
        assert!(e.location().is_some(), "{e}");
    }

    #[test]
    fn statuses_are_strings_and_pod_flags_booleans() {
        let e = error("nodes: [{name: a, ready: 'Maybe'}]");
        assert_eq!(e.path(), Some("nodes[0].ready"));
        let e = error("nodes: [{name: a, ready: true}]");
        assert_eq!(e.path(), Some("nodes[0].ready"), "{e}");
        let e = error("pods: [{name: a/b, ready: 'yes'}]");
        assert_eq!(e.path(), Some("pods[0].ready"), "{e}");
        let e = error("nodes: [{name: a}]\nexpect: [{at: 1s, node: a, ready: true}]");
        assert!(e.to_string().contains("condition status"), "{e}");
        let e = error("pods: [{name: a/b}]\nexpect: [{at: 1s, pod: a/b, ready: Unknown}]");
        assert!(e.to_string().contains("boolean"), "{e}");
        let s = parse("pods: [{name: a/b}]\nexpect: [{at: 1s, pod: a/b, ready: false, deleted: false}]");
        assert!(matches!(&s.expect[0].subject, Subject::Pod { checks, .. } if checks.ready == Some(false)));
    }

    #[test]
    fn events_need_at_and_exactly_one_action() {
        let e = error("nodes: [{name: a}]\nevents: [{renew-lease: [a]}]");
        assert!(e.to_string().contains("missing field `at`"), "{e}");
        let e = error("events: [{at: 1s}]");
        assert!(e.to_string().contains("needs an action"), "{e}");
        let e = error("nodes: [{name: a}]\nevents: [{at: 1s, renew-lease: [a], kubelet-stop: [a]}]");
        assert!(e.to_string().contains("found 2: renew-lease, kubelet-stop"), "{e}");
        let e = error("events: [{at: 1s, restart-controller: false}]");
        assert!(e.to_string().contains("only value is `true`"), "{e}");
    }

    #[test]
    fn expectations_need_one_subject_and_a_check() {
        for (text, needle) in [
            ("expect: [{at: 1s, ready: 'True'}]", "needs a subject"),
            ("nodes: [{name: a}]\nexpect: [{at: 1s, node: a, zone: r/z, writes: 1}]", "found 2: node, zone"),
            ("nodes: [{name: a}]\nexpect: [{at: 1s, node: a}]", "at least one check"),
            ("pods: [{name: a/b}]\nexpect: [{at: 1s, pod: a/b, taints: []}]", "`taints` is not a check for a pod"),
            ("expect: [{at: 1s, zone: z, rate: .nan}]", "non-negative"),
            ("expect: [{at: 1s, events-include: []}]", "at least one"),
            ("expect: [{at: 1s, events-exclude: [{reason: R, count: 1}]}]", "count"),
            ("expect: [{at: 1s, events-include: [{reason: R}], writes: 1}]", "not a check"),
            ("expect: [{at: 1s, zone: z, state: Sleepy}]", "unknown variant `Sleepy`"),
            ("nodes: [{name: a}]\nexpect: [{at: 1s, node: a, taints: [NoExecute]}]", "key:Effect"),
            ("nodes: [{name: a}]\nexpect: [{at: 1s, node: a, taints: ['k:NoExecution']}]", "key:Effect"),
        ] {
            let e = error(text);
            assert!(e.to_string().contains(needle), "{text}: {e}");
            assert!(e.path().is_some_and(|p| p.starts_with("expect[0]")), "{text}: {e}");
        }
    }

    const RESCHEDULER: &str = r#"
config: {enable-rescheduler: true}
cluster: {scheduler: true}
nodes:
- {name: a, ready: "True", allocatable: {cpu: 3500m, memory: 8Gi, pods: 50}}
- {name: b, ready: "True", allocatable: {cpu: 2, memory: 1e9}}
budgets:
- {name: default/web, selector: {matchLabels: {app: web}}, min-available: "50%"}
- name: default/db
  selector: {matchExpressions: [{key: app, operator: In, values: [db]}]}
  max-unavailable: 1
pods:
- name: kube-system/dns
  requests: {cpu: 100m, memory: 70Mi}
  priority-class: system-cluster-critical
  critical: true
  labels: {k8s-app: kube-dns}
  owner: ReplicaSet
  grace-period: 45s
  node-selector: {kubernetes.io/os: linux}
  affinity: {nodeSelectorTerms: [{matchExpressions: [{key: disk, operator: Exists}]}]}
  unschedulable-since: -5s
- {name: kube-system/etcd-a, node: a, mirror: true, requests: {cpu: 0.5}}
events:
- {at: 5s, add-budget: {name: default/x, max-unavailable: 10%}}
- {at: 6s, delete-budget: default/db}
- {at: 7s, set-allocatable: {node: b, allocatable: {cpu: 4}}}
expect:
- {at: 10s, pod: kube-system/dns, node: a, terminating: false, unschedulable: false}
- {at: 10s, pod: kube-system/etcd-a, node: null}
- {at: 10s, node: a, has-taints: ["CriticalAddonsOnly:NoSchedule"]}
"#;

    #[test]
    fn rescheduler_fields_parse() {
        use nodewarden_model::Resources;

        use crate::scenario::{DEFAULT_ALLOCATABLE, IntOrPercent};
        let s = parse(RESCHEDULER);
        assert!(s.cluster.scheduler);
        assert_eq!(
            s.nodes[0].allocatable.as_ref().map(|a| a.resources()),
            Some(Resources { cpu_millis: 3500, memory_bytes: 8 << 30, pods: 50 })
        );
        assert_eq!(
            s.nodes[1].allocatable.as_ref().map(|a| a.resources()),
            Some(Resources { cpu_millis: 2000, memory_bytes: 1_000_000_000, pods: DEFAULT_ALLOCATABLE.pods })
        );
        assert_eq!(s.budgets[0].min_available, Some(IntOrPercent::Percent(50)));
        assert_eq!(s.budgets[1].max_unavailable, Some(IntOrPercent::Int(1)));
        assert_eq!(s.budgets[1].selector.match_expressions[0].values, ["db"]);
        let dns = &s.pods[0].scheduling;
        assert_eq!(dns.requests.resources(), Resources::pod(100, 70 << 20));
        assert_eq!(dns.priority_class.as_deref(), Some("system-cluster-critical"));
        assert!(dns.critical);
        assert_eq!(dns.owner.as_deref(), Some("ReplicaSet"));
        assert_eq!(dns.grace_period, Some(secs(45)));
        assert_eq!(dns.node_selector["kubernetes.io/os"], "linux");
        assert_eq!(dns.affinity.as_ref().map(|a| a.node_selector_terms.len()), Some(1));
        assert_eq!(dns.unschedulable_since, Some(TimeSpec::At(secs(-5))));
        assert!(s.pods[1].scheduling.mirror);
        assert_eq!(s.pods[1].scheduling.requests.resources().cpu_millis, 500);
        assert!(
            matches!(&s.events[0].action, EventAction::AddBudget(b) if b.max_unavailable == Some(IntOrPercent::Percent(10)))
        );
        assert!(matches!(&s.events[1].action, EventAction::DeleteBudget(b) if b == "default/db"));
        assert!(
            matches!(&s.events[2].action, EventAction::SetAllocatable(a) if a.allocatable.resources().cpu_millis == 4000)
        );
        let Subject::Pod { checks, .. } = &s.expect[0].subject else { panic!("{:?}", s.expect[0]) };
        assert_eq!(checks.node, Some(Some("a".to_string())));
        assert_eq!((checks.terminating, checks.unschedulable), (Some(false), Some(false)));
        let Subject::Pod { checks, .. } = &s.expect[1].subject else { panic!("{:?}", s.expect[1]) };
        assert_eq!(checks.node, Some(None));
        assert!(matches!(&s.expect[2].subject, Subject::Node { name, .. } if name == "a"));
        // Without any of it, a pod is what the contract describes.
        let plain = parse("pods: [{name: a/b}]");
        assert_eq!(*plain.pods[0].scheduling, crate::scenario::PodSchedulingSpec::default());
        assert!(!plain.cluster.scheduler && plain.budgets.is_empty());
    }

    #[test]
    fn garbage_never_panics() {
        for text in [
            "",
            "~",
            "[]",
            "42",
            "\"x\"",
            "nodes: 3",
            "nodes: [3]",
            "events: [[]]",
            "expect: {}",
            "{",
            ":",
            "- - -",
            "nodes: [{name: [a]}]",
            "run-until: 999999999999h",
            "&a [*a]",
            "nodes: [{name: a, labels: {k: [1]}}]",
            "\t",
            "a: b\n---\nc: d",
        ] {
            let _ = parse_scenario(text);
        }
    }
}
