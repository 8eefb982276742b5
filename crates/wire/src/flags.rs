//! A scenario file's `config:` as `nodewarden run`'s flags: every flag
//! spelled out, so `run`'s defaults never decide for the file.

use nodewarden_cluster::ApiLatency;
use nodewarden_model::{ControllerConfig, DeletionMode, Span};

fn span(s: Span) -> String {
    format!("{}ns", s.as_nanos())
}

/// The flags, as `--name=value` arguments.
pub fn run_flags(c: &ControllerConfig) -> Vec<String> {
    let mut controllers = vec!["*".to_string()];
    if !c.node_lifecycle {
        controllers.push("-node-lifecycle-controller".into());
    }
    if !c.taint_eviction && c.enable_taint_manager {
        controllers.push("-taint-eviction-controller".into());
    }
    let flags: Vec<(&str, String)> = vec![
        ("node-monitor-period", span(c.node_monitor_period)),
        ("node-monitor-grace-period", span(c.node_monitor_grace_period)),
        ("node-startup-grace-period", span(c.node_startup_grace_period)),
        ("pod-eviction-timeout", span(c.pod_eviction_timeout)),
        ("node-eviction-rate", c.node_eviction_rate.to_string()),
        ("secondary-node-eviction-rate", c.secondary_node_eviction_rate.to_string()),
        ("large-cluster-size-threshold", c.large_cluster_size_threshold.to_string()),
        ("unhealthy-zone-threshold", c.unhealthy_zone_threshold.to_string()),
        ("enable-taint-manager", c.enable_taint_manager.to_string()),
        ("controllers", controllers.join(",")),
        (
            "pod-deletion-mode",
            match c.pod_deletion_mode {
                DeletionMode::Delete => "delete".into(),
                DeletionMode::Evict => "evict".into(),
            },
        ),
        ("enable-rescheduler", c.enable_rescheduler.to_string()),
        ("rescheduler-housekeeping-interval", span(c.rescheduler_housekeeping_interval)),
        ("rescheduler-unschedulable-grace", span(c.rescheduler_unschedulable_grace)),
        ("rescheduler-eviction-grace", span(c.rescheduler_eviction_grace)),
        ("rescheduler-pod-scheduled-timeout", span(c.rescheduler_pod_scheduled_timeout)),
    ];
    flags.into_iter().map(|(k, v)| format!("--{k}={v}")).collect()
}

/// The file's client rate (`cluster.api.kube-api-qps` and
/// `kube-api-burst`), as `run`'s flags, so the wire sends under the rate
/// replay plays; none when the file gives no rate (then `run` sends at its
/// defaults, 20 and 30, where replay has no limit).
pub fn client_flags(api: &ApiLatency) -> Vec<String> {
    match api.client_rate() {
        Some((qps, burst)) => vec![format!("--kube-api-qps={qps}"), format!("--kube-api-burst={burst}")],
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_is_spelled_out() {
        let c = ControllerConfig {
            enable_taint_manager: false,
            pod_deletion_mode: DeletionMode::Evict,
            node_monitor_period: Span::from_millis(1500),
            ..ControllerConfig::default()
        };
        let f = run_flags(&c);
        assert!(f.contains(&"--node-monitor-period=1500000000ns".to_string()), "{f:?}");
        assert!(f.contains(&"--enable-taint-manager=false".to_string()));
        assert!(f.contains(&"--pod-deletion-mode=evict".to_string()));
        assert!(f.contains(&"--controllers=*".to_string()));
        assert_eq!(f.len(), 16);
        let off = ControllerConfig { taint_eviction: false, ..ControllerConfig::default() };
        assert!(run_flags(&off).contains(&"--controllers=*,-taint-eviction-controller".to_string()));
    }

    #[test]
    fn a_files_client_rate_is_runs_and_no_rate_leaves_runs_defaults() {
        let rated: ApiLatency = "qps=5".parse().expect("parses");
        assert_eq!(client_flags(&rated), ["--kube-api-qps=5", "--kube-api-burst=30"]);
        assert!(client_flags(&ApiLatency::REALISTIC).is_empty());
    }
}
