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
use nodewarden_model::{ControllerConfig, TaintEffect, TolerationOperator};
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

/// Reads a what-if config: the controller's flags and the toleration
/// defaults (unknown names are refused, as by `--config` elsewhere).
pub fn read(text: &str) -> Result<(ControllerConfig, TolerationDefaults), ConfigError> {
    if text.trim().is_empty() {
        return Ok((ControllerConfig::default(), TolerationDefaults::default()));
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
    Ok((ControllerConfig::from_yaml(&rest)?, defaults))
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

    #[test]
    fn flags_of_both_components_read_and_unknown_ones_are_refused() {
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
}
