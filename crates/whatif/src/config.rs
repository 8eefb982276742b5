//! A what-if's configuration file: the controller's flags
//! (kube-controller-manager's names, as `--config` everywhere), plus the
//! two kube-apiserver flags that decide most pods' eviction time,
//! `default-not-ready-toleration-seconds` and
//! `default-unreachable-toleration-seconds`.
//!
//! Those two are what "300 s tolerations against 60 s" means: the
//! DefaultTolerationSeconds admission plugin writes them into every pod
//! that does not tolerate the taint itself, so in a snapshot they are part
//! of the pods. Setting one here rewrites, in the played copy of the
//! snapshot, every toleration that has the exact shape the plugin adds
//! (that key, `operator: Exists`, `effect: NoExecute`, no value) and the
//! plugin's default of 300 s, as if the pods had been admitted with the
//! new value. A pod that asked for exactly 300 s in that same shape cannot
//! be told apart and is rewritten too.

use nodewarden_model::keys::{TAINT_NOT_READY, TAINT_UNREACHABLE};
use nodewarden_model::{ControllerConfig, KubeVersion, TaintEffect, TolerationOperator};
use serde_yaml_ng::{Mapping, Value};

use crate::snapshot::Snapshot;

/// The DefaultTolerationSeconds plugin's own default.
pub const ADMISSION_DEFAULT_SECONDS: i64 = 300;

/// The kube-apiserver flags a what-if config may set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TolerationDefaults {
    /// `default-not-ready-toleration-seconds`.
    pub not_ready: Option<i64>,
    /// `default-unreachable-toleration-seconds`.
    pub unreachable: Option<i64>,
}

/// Why a what-if config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Not a YAML mapping, or a toleration default that is not a number.
    #[error("{0}")]
    Syntax(String),
    /// The controller's flags are refused.
    #[error(transparent)]
    Controller(#[from] nodewarden_model::ConfigParseError),
}

/// Where the Kubernetes version a what-if plays the defaults of came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionSource {
    /// `--kube-version`.
    Flag,
    /// The snapshot's own `/version`.
    Snapshot,
    /// Neither says: `nodewarden run`'s defaults are played.
    Unknown,
}

/// The defaults a what-if's config files are laid over: those of the
/// kube-controller-manager of the snapshot's version, since a snapshot of
/// a 1.31 cluster was running with 1.31's grace period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Defaults {
    /// Whose kube-controller-manager.
    pub version: KubeVersion,
    /// How that version was learnt.
    pub source: VersionSource,
}

impl Defaults {
    /// `--kube-version` when given, else the snapshot's, else the oldest
    /// supported release, whose defaults are `nodewarden run`'s.
    pub fn pick(flag: Option<KubeVersion>, snapshot: Option<KubeVersion>) -> Defaults {
        match (flag, snapshot) {
            (Some(version), _) => Defaults { version, source: VersionSource::Flag },
            (None, Some(version)) => Defaults { version, source: VersionSource::Snapshot },
            (None, None) => Defaults { version: KubeVersion::OLDEST_SUPPORTED, source: VersionSource::Unknown },
        }
    }

    /// The configuration with no file.
    pub fn config(&self) -> ControllerConfig {
        ControllerConfig::of_kube_controller_manager(self.version)
    }

    /// One line for the report: which defaults, why, and the flag that
    /// moved between versions.
    pub fn describe(&self) -> String {
        let why = match self.source {
            VersionSource::Flag => "--kube-version",
            VersionSource::Snapshot => "the snapshot's /version",
            VersionSource::Unknown => "the snapshot does not say its version; --kube-version sets it",
        };
        format!(
            "kube-controller-manager {}'s defaults ({why}): node-monitor-grace-period {}",
            self.version,
            self.config().node_monitor_grace_period
        )
    }

    /// How the source is named in `--json`.
    pub fn source_name(&self) -> &'static str {
        match self.source {
            VersionSource::Flag => "flag",
            VersionSource::Snapshot => "snapshot",
            VersionSource::Unknown => "unknown",
        }
    }
}

/// Reads a what-if config over `base` (what a flag it does not name is):
/// the controller's flags and the toleration defaults (unknown names are
/// refused, as by `--config` elsewhere).
pub fn read(text: &str, base: &ControllerConfig) -> Result<(ControllerConfig, TolerationDefaults), ConfigError> {
    if text.trim().is_empty() {
        return Ok((base.clone(), TolerationDefaults::default()));
    }
    let mut map: Mapping = serde_yaml_ng::from_str(text)
        .map_err(|e| ConfigError::Syntax(format!("not a YAML mapping of flag names to values: {e}")))?;
    let mut take = |flag: &str| -> Result<Option<i64>, ConfigError> {
        match map.remove(flag) {
            None => Ok(None),
            Some(Value::Number(n)) if n.as_i64().is_some_and(|s| s >= 0) => Ok(n.as_i64()),
            Some(other) => Err(ConfigError::Syntax(format!("{flag}: expected whole seconds (>= 0), got {other:?}"))),
        }
    };
    let defaults = TolerationDefaults {
        not_ready: take("default-not-ready-toleration-seconds")?,
        unreachable: take("default-unreachable-toleration-seconds")?,
    };
    let rest = if map.is_empty() {
        String::new()
    } else {
        serde_yaml_ng::to_string(&map).map_err(|e| ConfigError::Syntax(e.to_string()))?
    };
    Ok((ControllerConfig::from_yaml_over(base, &rest)?, defaults))
}

impl TolerationDefaults {
    /// True when nothing is to be rewritten.
    pub fn is_empty(&self) -> bool {
        self.not_ready.is_none() && self.unreachable.is_none()
    }

    /// Rewrites the admission-added tolerations of every pod; returns how
    /// many were rewritten.
    pub fn apply(&self, snap: &mut Snapshot) -> usize {
        let mut n = 0;
        for p in &mut snap.pods {
            for t in &mut p.pod.tolerations {
                let seconds = match t.key.as_str() {
                    TAINT_NOT_READY => self.not_ready,
                    TAINT_UNREACHABLE => self.unreachable,
                    _ => None,
                };
                let Some(seconds) = seconds else { continue };
                let admission_shape = t.operator == TolerationOperator::Exists
                    && t.effect == Some(TaintEffect::NoExecute)
                    && t.value.is_empty()
                    && t.seconds == Some(ADMISSION_DEFAULT_SECONDS);
                if admission_shape {
                    t.seconds = Some(seconds);
                    n += 1;
                }
            }
        }
        n
    }

    /// One line for the summary.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(s) = self.not_ready {
            parts.push(format!("default-not-ready-toleration-seconds {s}"));
        }
        if let Some(s) = self.unreachable {
            parts.push(format!("default-unreachable-toleration-seconds {s}"));
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewarden_model::Span;

    #[test]
    fn flags_of_both_components_read_and_unknown_ones_are_refused() {
        let read = |text: &str| read(text, &ControllerConfig::default());
        let (c, d) = read("node-eviction-rate: 0.05\ndefault-unreachable-toleration-seconds: 60\n").expect("reads");
        assert_eq!(c.node_eviction_rate, 0.05);
        assert_eq!(d, TolerationDefaults { not_ready: None, unreachable: Some(60) });
        let (c, d) = read("default-not-ready-toleration-seconds: 30").expect("reads");
        assert_eq!((c, d.not_ready), (ControllerConfig::default(), Some(30)));
        assert!(read("no-such-flag: 1").is_err());
        assert!(read("default-unreachable-toleration-seconds: soon").is_err());
        assert!(read("- a list").is_err());
        assert_eq!(read("").expect("empty").1, TolerationDefaults::default());
    }

    #[test]
    fn the_flag_then_the_snapshot_pick_the_version_and_files_lay_over_it() {
        let (v31, v34) = (KubeVersion::new(1, 31), KubeVersion::new(1, 34));
        assert_eq!(Defaults::pick(Some(v34), Some(v31)), Defaults { version: v34, source: VersionSource::Flag });
        assert_eq!(Defaults::pick(None, Some(v31)), Defaults { version: v31, source: VersionSource::Snapshot });
        let unknown = Defaults::pick(None, None);
        assert_eq!(unknown.version, KubeVersion::OLDEST_SUPPORTED);
        assert!(unknown.describe().contains("--kube-version sets it"), "{}", unknown.describe());
        let old = Defaults::pick(None, Some(v31));
        assert!(old.describe().ends_with("node-monitor-grace-period 40s"), "{}", old.describe());
        let (c, _) = read("node-eviction-rate: 0.05", &old.config()).expect("reads");
        assert_eq!((c.node_eviction_rate, c.node_monitor_grace_period), (0.05, Span::from_secs(40)));
        let (c, _) = read("", &unknown.config()).expect("reads");
        assert_eq!(c.node_monitor_grace_period, Span::from_secs(50));
    }
}
