//! The controller's configuration: kube-controller-manager's node-lifecycle
//! flags, with the same names, defaults and meaning, read from a YAML (or
//! JSON) mapping by [`ControllerConfig::from_yaml`] and checked by
//! [`ControllerConfig::validate`].

use serde::{Deserialize, Serialize};

use crate::time::Span;
use crate::version::KubeVersion;

/// A configuration as a YAML mapping of flag names to values.
fn to_mapping(config: &ControllerConfig) -> Result<serde_yaml_ng::Mapping, ConfigParseError> {
    match serde_yaml_ng::to_value(config).map_err(ConfigParseError::Merge)? {
        serde_yaml_ng::Value::Mapping(m) => Ok(m),
        other => Err(ConfigParseError::Merge(serde::ser::Error::custom(format!("not a mapping: {other:?}")))),
    }
}

/// Node-lifecycle configuration. Its flags, with their names in files and
/// on the command line (upstream's, without `--`: `node-monitor-period`),
/// are the table [`crate::flags::FLAGS`], which also reads and writes it
/// as a mapping of those names (serde).
#[derive(Clone, Debug, PartialEq)]
pub struct ControllerConfig {
    /// How often the health monitor looks at every node (5s).
    pub node_monitor_period: Span,
    /// Silence after which a node's conditions become Unknown (40s; upstream
    /// 1.32+ uses 50s).
    pub node_monitor_grace_period: Span,
    /// The same, for a node whose kubelet never posted a Ready condition (1m).
    pub node_startup_grace_period: Span,
    /// Legacy mode only: how long a node is NotReady/Unknown before its pods
    /// are deleted (5m).
    pub pod_eviction_timeout: Span,
    /// Nodes per second tainted (or evicted) in a zone (0.1).
    pub node_eviction_rate: f64,
    /// Nodes per second in a large PartialDisruption zone (0.01).
    pub secondary_node_eviction_rate: f64,
    /// Zones with at most this many nodes stop tainting in PartialDisruption (50).
    pub large_cluster_size_threshold: u32,
    /// Share of not-ready nodes (with at least 3) that makes a zone
    /// PartialDisruption (0.55).
    pub unhealthy_zone_threshold: f64,
    /// Taint-based eviction (true) or legacy direct deletion (false).
    pub enable_taint_manager: bool,
    /// `node-lifecycle-controller` of kube-controller-manager's
    /// `--controllers` (on by default): the health monitor, Unknown
    /// conditions, NoSchedule and NoExecute tainting (or, in legacy mode,
    /// direct eviction). Off, nodewarden only evicts by taints others set.
    pub node_lifecycle: bool,
    /// `taint-eviction-controller` of `--controllers` (on by default):
    /// deleting pods that do not tolerate a node's NoExecute taints. Off,
    /// nodes are still tainted but no pod is deleted for it, as upstream
    /// since 1.29 when the controller is switched off. Taint mode only:
    /// legacy eviction belongs to the node lifecycle controller.
    pub taint_eviction: bool,
    /// How pods are removed (nodewarden's own flag): `delete` as upstream,
    /// or `evict` through the Eviction API, which honours
    /// PodDisruptionBudgets (a refused eviction is retried with backoff).
    pub pod_deletion_mode: DeletionMode,
    /// Run the critical-addon rescheduler (nodewarden's own flag; off by
    /// default, as upstream shipped its rescheduler off): make room for
    /// `kube-system` critical addons the scheduler cannot place.
    pub enable_rescheduler: bool,
    /// How often the rescheduler looks for addons that need help
    /// (upstream rescheduler's `--housekeeping-interval`, 10s).
    pub rescheduler_housekeeping_interval: Span,
    /// How long an addon must have been Unschedulable before the
    /// rescheduler acts for it (10s), so the scheduler's own retries come
    /// first.
    pub rescheduler_unschedulable_grace: Span,
    /// The termination grace period the rescheduler's evictions use at most
    /// (10s): longer ones are shortened to it, and pods whose own is no
    /// longer are the first choice.
    pub rescheduler_eviction_grace: Span,
    /// How long a prepared node waits for its addon to be bound before it
    /// is released and the addon reconsidered (upstream rescheduler's
    /// `--pod-scheduled-timeout`, 10m).
    pub rescheduler_pod_scheduled_timeout: Span,
}

/// How the controller removes a pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeletionMode {
    /// `DELETE` on the pod, as upstream does: fast, ignores
    /// PodDisruptionBudgets.
    #[default]
    Delete,
    /// A `pods/eviction` subresource call: the API server refuses it while
    /// a PodDisruptionBudget forbids the disruption, so a dead node's pods
    /// may stay (not running) until the budget allows it.
    Evict,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            node_monitor_period: Span::from_secs(5),
            node_monitor_grace_period: Span::from_secs(40),
            node_startup_grace_period: Span::from_secs(60),
            pod_eviction_timeout: Span::from_secs(300),
            node_eviction_rate: 0.1,
            secondary_node_eviction_rate: 0.01,
            large_cluster_size_threshold: 50,
            unhealthy_zone_threshold: 0.55,
            enable_taint_manager: true,
            node_lifecycle: true,
            taint_eviction: true,
            pod_deletion_mode: DeletionMode::Delete,
            enable_rescheduler: false,
            rescheduler_housekeeping_interval: Span::from_secs(10),
            rescheduler_unschedulable_grace: Span::from_secs(10),
            rescheduler_eviction_grace: Span::from_secs(10),
            rescheduler_pod_scheduled_timeout: Span::from_secs(600),
        }
    }
}

/// A configuration value that cannot work, named by its flag.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{flag}: {problem}")]
pub struct ConfigError {
    /// The flag, spelled as on the command line without `--`.
    pub flag: &'static str,
    /// What is wrong with its value.
    pub problem: String,
}

/// Why a configuration text could not be used: it could not be read, or
/// what it says cannot work.
#[derive(Debug, thiserror::Error)]
pub enum ConfigParseError {
    /// The text is not a mapping of known flags to values of the right
    /// kind; the message names the field path (and, for YAML, the line).
    #[error("{}", describe_syntax(.0))]
    Syntax(serde_path_to_error::Error<serde_yaml_ng::Error>),
    /// The flags were read, but could not be laid over the base
    /// configuration (not expected: both sides were read as flags).
    #[error("cannot lay the flags over the defaults: {0}")]
    Merge(serde_yaml_ng::Error),
    /// The flags were read, but a value cannot work.
    #[error("the engine refused the configuration: {0}")]
    Invalid(#[from] ConfigError),
}

/// `flag (line L, column C): what is wrong`, each said once: the YAML
/// reader writes the flag and the position into its own message too, and
/// an unknown flag is named by the message itself. A path the tracker
/// could not follow (`?`, broken YAML) is left out.
fn describe_syntax(e: &serde_path_to_error::Error<serde_yaml_ng::Error>) -> String {
    let path = e.path().to_string();
    let location = e.inner().location();
    let mut message = e.inner().to_string();
    if let Some(l) = &location {
        message = message.replacen(&format!(" at line {} column {}", l.line(), l.column()), "", 1);
    }
    if let Some((prefix, rest)) = message.split_once(": ")
        && !prefix.is_empty()
        && !prefix.contains(' ')
        && path.starts_with(prefix)
    {
        message = rest.to_string();
    }
    let named = !(path.is_empty() || path == "." || path.contains('?') || message.starts_with("unknown field"));
    match (named, location) {
        (true, Some(l)) => format!("{path} (line {}, column {}): {message}", l.line(), l.column()),
        (true, None) => format!("{path}: {message}"),
        (false, Some(l)) => format!("line {}, column {}: {message}", l.line(), l.column()),
        (false, None) => message,
    }
}

impl ControllerConfig {
    /// Reads controller flags from a YAML (or JSON) mapping with upstream's
    /// names (`node-monitor-grace-period: 50s`); unknown flags are refused.
    /// Empty text is the default configuration. The result is validated.
    pub fn from_yaml(text: &str) -> Result<ControllerConfig, ConfigParseError> {
        ControllerConfig::from_yaml_over(&ControllerConfig::default(), text)
    }

    /// As [`ControllerConfig::from_yaml`], but a flag the text does not
    /// name keeps its value in `base` rather than the scenario format's
    /// default: a what-if's config file over the defaults of the snapshot's
    /// Kubernetes version.
    pub fn from_yaml_over(base: &ControllerConfig, text: &str) -> Result<ControllerConfig, ConfigParseError> {
        let config: ControllerConfig = if text.trim().is_empty() {
            base.clone()
        } else {
            // Read once in full, so a bad flag is named with its line ...
            let de = serde_yaml_ng::Deserializer::from_str(text);
            let read: ControllerConfig = serde_path_to_error::deserialize(de).map_err(ConfigParseError::Syntax)?;
            // ... then only the flags the text names are laid over `base`.
            let named: serde_yaml_ng::Mapping = serde_yaml_ng::from_str(text).map_err(ConfigParseError::Merge)?;
            let (mut merged, read) = (to_mapping(base)?, to_mapping(&read)?);
            for key in named.keys() {
                if let Some(v) = read.get(key) {
                    merged.insert(key.clone(), v.clone());
                }
            }
            serde_yaml_ng::from_value(serde_yaml_ng::Value::Mapping(merged)).map_err(ConfigParseError::Merge)?
        };
        config.validate()?;
        Ok(config)
    }

    /// The defaults of kube-controller-manager at `version`. One flag has
    /// moved among those nodewarden takes: `node-monitor-grace-period`,
    /// 40 s before 1.32 and 50 s since (kubernetes#126287). The rest, and
    /// nodewarden's own flags, are [`ControllerConfig::default`]'s.
    pub fn of_kube_controller_manager(version: KubeVersion) -> ControllerConfig {
        let grace = if version >= KubeVersion::new(1, 32) { 50 } else { 40 };
        ControllerConfig { node_monitor_grace_period: Span::from_secs(grace), ..ControllerConfig::default() }
    }

    /// Checks every flag; the first problem found is returned. A config that
    /// passes cannot make the engine divide by zero, spin, or evict by
    /// accident of a typo (a grace period shorter than the monitor period
    /// would declare healthy nodes dead between two heartbeats).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |flag, problem: String| Err(ConfigError { flag, problem });
        if self.node_monitor_period <= Span::ZERO {
            return err("node-monitor-period", format!("must be positive, got {}", self.node_monitor_period));
        }
        for (flag, grace) in [
            ("node-monitor-grace-period", self.node_monitor_grace_period),
            ("node-startup-grace-period", self.node_startup_grace_period),
        ] {
            if grace < self.node_monitor_period {
                return err(
                    flag,
                    format!(
                        "{grace} is shorter than node-monitor-period ({}); nodes would be declared dead between two checks",
                        self.node_monitor_period
                    ),
                );
            }
        }
        if self.pod_eviction_timeout.is_negative() {
            return err("pod-eviction-timeout", format!("must not be negative, got {}", self.pod_eviction_timeout));
        }
        for (flag, rate) in [
            ("node-eviction-rate", self.node_eviction_rate),
            ("secondary-node-eviction-rate", self.secondary_node_eviction_rate),
        ] {
            if !rate.is_finite() || rate < 0.0 {
                return err(flag, format!("must be a non-negative number of nodes per second, got {rate}"));
            }
            if rate > 0.0 && rate < 1e-9 {
                return err(flag, format!("{rate} nodes per second is too small to represent; use 0 to stop tainting"));
            }
        }
        let t = self.unhealthy_zone_threshold;
        if !(t > 0.0 && t <= 1.0) {
            return err("unhealthy-zone-threshold", format!("must be in (0, 1], got {t}"));
        }
        if !self.enable_taint_manager && !self.taint_eviction {
            return err(
                "controllers",
                "taint-eviction-controller cannot be switched off in legacy eviction mode \
                 (enable-taint-manager=false): there pods are deleted by node-lifecycle-controller"
                    .into(),
            );
        }
        if !self.node_lifecycle && (!self.taint_eviction || !self.enable_taint_manager) {
            return err(
                "controllers",
                "node-lifecycle-controller is off and no taint-eviction-controller runs: nothing left to run".into(),
            );
        }
        if self.rescheduler_housekeeping_interval <= Span::ZERO {
            return err(
                "rescheduler-housekeeping-interval",
                format!("must be positive, got {}", self.rescheduler_housekeeping_interval),
            );
        }
        for (flag, span) in [
            ("rescheduler-unschedulable-grace", self.rescheduler_unschedulable_grace),
            ("rescheduler-eviction-grace", self.rescheduler_eviction_grace),
        ] {
            if span.is_negative() {
                return err(flag, format!("must not be negative, got {span}"));
            }
        }
        if self.rescheduler_pod_scheduled_timeout < self.rescheduler_housekeeping_interval {
            return err(
                "rescheduler-pod-scheduled-timeout",
                format!(
                    "{} is shorter than rescheduler-housekeeping-interval ({}); a prepared node would be released before it is looked at again",
                    self.rescheduler_pod_scheduled_timeout, self.rescheduler_housekeeping_interval
                ),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_upstreams_and_valid() {
        let c = ControllerConfig::default();
        assert_eq!(c.node_monitor_period, Span::from_secs(5));
        assert_eq!(c.node_monitor_grace_period, Span::from_secs(40));
        assert_eq!(c.node_startup_grace_period, Span::from_secs(60));
        assert_eq!(c.pod_eviction_timeout, Span::from_secs(300));
        assert_eq!(c.node_eviction_rate, 0.1);
        assert_eq!(c.secondary_node_eviction_rate, 0.01);
        assert_eq!(c.large_cluster_size_threshold, 50);
        assert_eq!(c.unhealthy_zone_threshold, 0.55);
        assert!(c.enable_taint_manager);
        assert!(c.node_lifecycle && c.taint_eviction);
        assert!(!c.enable_rescheduler, "off by default, as upstream shipped it");
        assert_eq!(c.rescheduler_housekeeping_interval, Span::from_secs(10));
        assert_eq!(c.rescheduler_pod_scheduled_timeout, Span::from_secs(600));
        c.validate().unwrap();
    }

    #[test]
    fn reads_flag_names_and_refuses_unknown_ones() {
        let c: ControllerConfig =
            serde_json::from_str(r#"{"node-monitor-grace-period":"50s","enable-taint-manager":false}"#).unwrap();
        assert_eq!(c.node_monitor_grace_period, Span::from_secs(50));
        assert!(!c.enable_taint_manager);
        let e = serde_json::from_str::<ControllerConfig>(r#"{"node-monitor-grace":"50s"}"#).unwrap_err();
        assert!(e.to_string().contains("node-monitor-grace"), "{e}");
    }

    #[test]
    fn config_text_is_checked() {
        assert!(
            ControllerConfig::from_yaml("node-monitor-grace-period: 50s")
                .is_ok_and(|c| c.node_monitor_grace_period == Span::from_secs(50))
        );
        assert!(matches!(ControllerConfig::from_yaml("node-monitor-grace: 50s"), Err(ConfigParseError::Syntax(_))));
        assert!(matches!(ControllerConfig::from_yaml("node-eviction-rate: -1"), Err(ConfigParseError::Invalid(_))));
    }

    #[test]
    fn config_text_errors_name_the_flag() {
        assert_eq!(ControllerConfig::from_yaml(" \n").ok(), Some(ControllerConfig::default()));
        // The flag and the position, once each.
        let e = ControllerConfig::from_yaml("node-monitor-period: abc").unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"node-monitor-period (line 1, column 22): invalid duration "abc": expected a number with a unit (h, m, s, ms, us, ns), e.g. 45s, 1m30s, 500ms"#
        );
        // An unknown flag: the message names it.
        let e = ControllerConfig::from_yaml("\nnodes-monitor-period: 5s").unwrap_err().to_string();
        assert!(e.starts_with("line 2, column 1: unknown field `nodes-monitor-period`, expected one of"), "{e}");
        assert_eq!(e.matches("nodes-monitor-period").count(), 1, "{e}");
        // Broken YAML: no `?` for the path it could not follow.
        let e = ControllerConfig::from_yaml("node-monitor-period: 5s\n- 1\n").unwrap_err().to_string();
        assert!(e.starts_with("line 2, column "), "{e}");
        let e = ControllerConfig::from_yaml("node-eviction-rate: -1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "the engine refused the configuration: node-eviction-rate: must be a non-negative number of nodes per second, got -1"
        );
    }

    #[test]
    fn refuses_values_that_cannot_work() {
        let bad = |f: fn(&mut ControllerConfig), flag: &str| {
            let mut c = ControllerConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert_eq!(e.flag, flag, "{e}");
        };
        bad(|c| c.node_eviction_rate = -0.1, "node-eviction-rate");
        bad(|c| c.secondary_node_eviction_rate = f64::NAN, "secondary-node-eviction-rate");
        bad(|c| c.unhealthy_zone_threshold = 0.0, "unhealthy-zone-threshold");
        bad(|c| c.unhealthy_zone_threshold = 1.5, "unhealthy-zone-threshold");
        bad(|c| c.node_monitor_grace_period = Span::from_secs(4), "node-monitor-grace-period");
        bad(|c| c.node_startup_grace_period = Span::from_secs(1), "node-startup-grace-period");
        bad(|c| c.node_monitor_period = Span::ZERO, "node-monitor-period");
        bad(|c| c.pod_eviction_timeout = Span::from_secs(-1), "pod-eviction-timeout");
        bad(|c| (c.node_lifecycle, c.taint_eviction) = (false, false), "controllers");
        bad(|c| (c.enable_taint_manager, c.taint_eviction) = (false, false), "controllers");
        bad(|c| (c.enable_taint_manager, c.node_lifecycle) = (false, false), "controllers");
        bad(|c| c.rescheduler_housekeeping_interval = Span::ZERO, "rescheduler-housekeeping-interval");
        bad(|c| c.rescheduler_eviction_grace = Span::from_secs(-1), "rescheduler-eviction-grace");
        bad(|c| c.rescheduler_unschedulable_grace = Span::from_secs(-1), "rescheduler-unschedulable-grace");
        bad(|c| c.rescheduler_pod_scheduled_timeout = Span::from_secs(1), "rescheduler-pod-scheduled-timeout");
    }

    #[test]
    fn zero_rate_and_threshold_one_are_valid() {
        let c = ControllerConfig { node_eviction_rate: 0.0, unhealthy_zone_threshold: 1.0, ..Default::default() };
        c.validate().unwrap();
    }

    #[test]
    fn a_file_over_a_versions_defaults_changes_only_what_it_names() {
        let old = ControllerConfig::of_kube_controller_manager(KubeVersion::new(1, 31));
        let new = ControllerConfig::of_kube_controller_manager(KubeVersion::new(1, 32));
        assert_eq!(old.node_monitor_grace_period, Span::from_secs(40));
        assert_eq!(new.node_monitor_grace_period, Span::from_secs(50));
        assert_eq!(ControllerConfig { node_monitor_grace_period: Span::from_secs(40), ..new.clone() }, old);

        let c = ControllerConfig::from_yaml_over(&new, "node-eviction-rate: 0.05\n").unwrap();
        assert_eq!((c.node_eviction_rate, c.node_monitor_grace_period), (0.05, Span::from_secs(50)));
        let c = ControllerConfig::from_yaml_over(&new, "node-monitor-grace-period: 45s").unwrap();
        assert_eq!(c.node_monitor_grace_period, Span::from_secs(45));
        assert_eq!(ControllerConfig::from_yaml_over(&new, " ").unwrap(), new);
        // Errors are named as without a base, with their line.
        let e =
            ControllerConfig::from_yaml_over(&new, "node-eviction-rate: 0.1\nnode-monitor-period: abc").unwrap_err();
        assert!(e.to_string().starts_with("node-monitor-period (line 2, column 22)"), "{e}");
        // The merged result is validated: a period the base's grace is
        // shorter than is refused.
        let e = ControllerConfig::from_yaml_over(&new, "node-monitor-period: 1m").unwrap_err();
        assert!(e.to_string().contains("node-monitor-grace-period"), "{e}");
    }
}
