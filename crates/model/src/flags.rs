//! The controller's flags as one table: each flag's name (on the command
//! line without `--`, and as the key of a scenario file's or a what-if's
//! `config:`), its help, its type and where it is read and written in a
//! [`ControllerConfig`].
//!
//! Everything that spells a flag reads it from here: `nodewarden run`'s
//! command line (the cli builds its arguments from [`FLAGS`]), the
//! `config:` reader and writer ([`ControllerConfig`]'s serde impls below),
//! and the harnesses that start `run` with a file's configuration
//! ([`command_line`]). A default is written once, in
//! [`ControllerConfig::default`] and
//! [`ControllerConfig::of_kube_controller_manager`] for the versions where
//! upstream's moved; a flag's default for a version is read back from
//! that configuration ([`Flag::text`]).

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::config::{ControllerConfig, DeletionMode};
use crate::time::Span;

/// Where a flag is set on `nodewarden run`'s command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnCommandLine {
    /// As `--name=value`.
    Flag,
    /// Through kube-controller-manager's `--controllers` list: the key
    /// names a controller that the list switches on or off.
    Controllers {
        /// The controller's name in the list.
        controller: &'static str,
    },
}

/// A flag's type, with how to read and write it in a configuration.
#[derive(Clone, Copy)]
pub enum Field {
    /// A duration (`40s`, `1m30s`).
    Span(fn(&ControllerConfig) -> Span, fn(&mut ControllerConfig, Span)),
    /// A number (a rate or a share).
    Number(fn(&ControllerConfig) -> f64, fn(&mut ControllerConfig, f64)),
    /// A count.
    Count(fn(&ControllerConfig) -> u32, fn(&mut ControllerConfig, u32)),
    /// `true` or `false`.
    Switch(fn(&ControllerConfig) -> bool, fn(&mut ControllerConfig, bool)),
    /// How pods are removed ([`DeletionMode`]).
    Deletion(fn(&ControllerConfig) -> DeletionMode, fn(&mut ControllerConfig, DeletionMode)),
}

/// One controller flag.
#[derive(Clone, Copy)]
pub struct Flag {
    /// kube-controller-manager's name without `--` (nodewarden's own flags
    /// are named in the same manner).
    pub name: &'static str,
    /// One paragraph for `--help`.
    pub help: &'static str,
    /// Its type and place in a [`ControllerConfig`].
    pub field: Field,
    /// How `nodewarden run` takes it.
    pub on_command_line: OnCommandLine,
}

impl fmt::Debug for Flag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Flag").field("name", &self.name).finish_non_exhaustive()
    }
}

/// The values a flag of type [`Field::Deletion`] takes.
pub const DELETION_MODES: [&str; 2] = ["delete", "evict"];

impl Flag {
    /// The flag's value in `config`, as it is written on a command line or
    /// in a file (`40s`, `0.1`, `true`, `evict`). Read back by
    /// [`Flag::set_text`] to the same value.
    pub fn text(&self, config: &ControllerConfig) -> String {
        match self.field {
            Field::Span(get, _) => get(config).to_string(),
            Field::Number(get, _) => get(config).to_string(),
            Field::Count(get, _) => get(config).to_string(),
            Field::Switch(get, _) => get(config).to_string(),
            Field::Deletion(get, _) => deletion_text(get(config)).to_string(),
        }
    }

    /// Sets the flag in `config` from its text; the error says what was
    /// expected (the caller names the flag).
    pub fn set_text(&self, config: &mut ControllerConfig, text: &str) -> Result<(), String> {
        match self.field {
            Field::Span(_, set) => set(config, text.parse().map_err(|e| format!("{e}"))?),
            Field::Number(_, set) => {
                set(config, text.trim().parse().map_err(|_| format!("expected a number, got {text:?}"))?)
            }
            Field::Count(_, set) => {
                set(config, text.trim().parse().map_err(|_| format!("expected a whole number, got {text:?}"))?)
            }
            Field::Switch(_, set) => {
                set(config, text.trim().parse().map_err(|_| format!("expected true or false, got {text:?}"))?)
            }
            Field::Deletion(_, set) => set(
                config,
                match text.trim() {
                    "delete" => DeletionMode::Delete,
                    "evict" => DeletionMode::Evict,
                    _ => return Err(format!("expected one of {}, got {text:?}", DELETION_MODES.join(", "))),
                },
            ),
        }
        Ok(())
    }

    /// The flag named `name`.
    pub fn named(name: &str) -> Option<&'static Flag> {
        FLAGS.iter().find(|f| f.name == name)
    }
}

fn deletion_text(mode: DeletionMode) -> &'static str {
    match mode {
        DeletionMode::Delete => DELETION_MODES[0],
        DeletionMode::Evict => DELETION_MODES[1],
    }
}

/// kube-controller-manager's `--controllers` name of the node lifecycle
/// controller.
pub const NODE_LIFECYCLE_CONTROLLER: &str = "node-lifecycle-controller";
/// kube-controller-manager's `--controllers` name of the taint eviction
/// controller.
pub const TAINT_EVICTION_CONTROLLER: &str = "taint-eviction-controller";

/// Every controller flag, in [`ControllerConfig`]'s order (the order a
/// configuration is written in, and the order an unknown key's error lists
/// the known ones in).
pub const FLAGS: &[Flag] = &[
    Flag {
        name: "node-monitor-period",
        help: "How often node health is checked.",
        field: Field::Span(|c| c.node_monitor_period, |c, v| c.node_monitor_period = v),
        on_command_line: OnCommandLine::Flag,
    },
    Flag {
        name: "node-monitor-grace-period",
        help: "How long a node may go without a heartbeat before its conditions are Unknown (kube-controller-manager's default moved from 40s to 50s in 1.32; scenario files keep their documented 40s).",
        field: Field::Span(|c| c.node_monitor_grace_period, |c, v| c.node_monitor_grace_period = v),
        on_command_line: OnCommandLine::Flag,
    },
    Flag {
        name: "node-startup-grace-period",
        help: "The same, for a node whose kubelet has not posted a Ready condition yet.",
        field: Field::Span(|c| c.node_startup_grace_period, |c, v| c.node_startup_grace_period = v),
        on_command_line: OnCommandLine::Flag,
    },
    Flag {
        name: "pod-eviction-timeout",
        help: "Legacy mode: how long a node is unready before its pods are deleted.",
        field: Field::Span(|c| c.pod_eviction_timeout, |c, v| c.pod_eviction_timeout = v),
        on_command_line: OnCommandLine::Flag,
    },
    Flag {
        name: "node-eviction-rate",
        help: "Nodes tainted (legacy mode: evicted) per second in a zone.",
        field: Field::Number(|c| c.node_eviction_rate, |c, v| c.node_eviction_rate = v),
        on_command_line: OnCommandLine::Flag,
    },
    Flag {
        name: "secondary-node-eviction-rate",
        help: "Nodes tainted per second in a partially disrupted large zone.",
        field: Field::Number(|c| c.secondary_node_eviction_rate, |c, v| c.secondary_node_eviction_rate = v),
        on_command_line: OnCommandLine::Flag,
    },
    Flag {
        name: "large-cluster-size-threshold",
        help: "Zones with more nodes than this are large (a partially disrupted small zone stops tainting).",
        field: Field::Count(|c| c.large_cluster_size_threshold, |c, v| c.large_cluster_size_threshold = v),
        on_command_line: OnCommandLine::Flag,
    },
    Flag {
        name: "unhealthy-zone-threshold",
        help: "Share of unready nodes (at least 3) that makes a zone partially disrupted.",
        field: Field::Number(|c| c.unhealthy_zone_threshold, |c, v| c.unhealthy_zone_threshold = v),
        on_command_line: OnCommandLine::Flag,
    },
    Flag {
        name: "enable-taint-manager",
        help: "false: legacy eviction (no NoExecute taints; pods deleted after --pod-eviction-timeout).",
        field: Field::Switch(|c| c.enable_taint_manager, |c, v| c.enable_taint_manager = v),
        on_command_line: OnCommandLine::Flag,
    },
    Flag {
        name: "node-lifecycle",
        help: "The node lifecycle controller: health, Unknown conditions, tainting.",
        field: Field::Switch(|c| c.node_lifecycle, |c, v| c.node_lifecycle = v),
        on_command_line: OnCommandLine::Controllers { controller: NODE_LIFECYCLE_CONTROLLER },
    },
    Flag {
        name: "taint-eviction",
        help: "The taint eviction controller: deleting pods that do not tolerate a node's NoExecute taints.",
        field: Field::Switch(|c| c.taint_eviction, |c, v| c.taint_eviction = v),
        on_command_line: OnCommandLine::Controllers { controller: TAINT_EVICTION_CONTROLLER },
    },
    Flag {
        name: "pod-deletion-mode",
        help: "delete (as upstream) or evict (through the Eviction API, honouring PodDisruptionBudgets).",
        field: Field::Deletion(|c| c.pod_deletion_mode, |c, v| c.pod_deletion_mode = v),
        on_command_line: OnCommandLine::Flag,
    },
    Flag {
        name: "enable-rescheduler",
        help: "Run the critical-addon rescheduler: when a kube-system pod marked critical (system-cluster-critical, system-node-critical or the critical-pod annotation) stays unschedulable, pick a node, taint it CriticalAddonsOnly and evict pods there to make room. Off by default, as upstream shipped its rescheduler.",
        field: Field::Switch(|c| c.enable_rescheduler, |c, v| c.enable_rescheduler = v),
        on_command_line: OnCommandLine::Flag,
    },
    Flag {
        name: "rescheduler-housekeeping-interval",
        help: "How often the rescheduler looks for critical addons that need help.",
        field: Field::Span(|c| c.rescheduler_housekeeping_interval, |c, v| c.rescheduler_housekeeping_interval = v),
        on_command_line: OnCommandLine::Flag,
    },
    Flag {
        name: "rescheduler-unschedulable-grace",
        help: "How long a critical addon must have been unschedulable before the rescheduler makes room for it.",
        field: Field::Span(|c| c.rescheduler_unschedulable_grace, |c, v| c.rescheduler_unschedulable_grace = v),
        on_command_line: OnCommandLine::Flag,
    },
    Flag {
        name: "rescheduler-eviction-grace",
        help: "The longest termination grace period the rescheduler's evictions give a pod (a longer one is shortened to this).",
        field: Field::Span(|c| c.rescheduler_eviction_grace, |c, v| c.rescheduler_eviction_grace = v),
        on_command_line: OnCommandLine::Flag,
    },
    Flag {
        name: "rescheduler-pod-scheduled-timeout",
        help: "How long a node prepared for an addon is held for it before it is released and the addon reconsidered.",
        field: Field::Span(|c| c.rescheduler_pod_scheduled_timeout, |c, v| c.rescheduler_pod_scheduled_timeout = v),
        on_command_line: OnCommandLine::Flag,
    },
];

/// The flags' names, for serde's "expected one of" when a key is unknown.
static NAMES: [&str; FLAGS.len()] = {
    let mut names = [""; FLAGS.len()];
    let mut i = 0;
    while i < FLAGS.len() {
        names[i] = FLAGS[i].name;
        i += 1;
    }
    names
};

/// `config` as `nodewarden run`'s arguments, every flag spelled out
/// (`--name=value`, and `--controllers` for the controllers switched
/// off), so `run`'s own defaults never decide for it.
pub fn command_line(config: &ControllerConfig) -> Vec<String> {
    let mut args = Vec::new();
    let mut controllers = vec!["*".to_string()];
    for flag in FLAGS {
        match flag.on_command_line {
            OnCommandLine::Flag => args.push(format!("--{}={}", flag.name, flag.text(config))),
            OnCommandLine::Controllers { controller } => {
                let on = match flag.field {
                    Field::Switch(get, _) => get(config),
                    _ => true,
                };
                if !on && !legacy_eviction_without_taint_eviction(flag, config) {
                    controllers.push(format!("-{controller}"));
                }
            }
        }
    }
    args.push(format!("--controllers={}", controllers.join(",")));
    args
}

/// Legacy eviction has no taint eviction controller to switch off: there
/// the key is false and `--controllers` leaves it alone (switching it off by
/// name is refused in that mode).
fn legacy_eviction_without_taint_eviction(flag: &Flag, config: &ControllerConfig) -> bool {
    matches!(flag.on_command_line, OnCommandLine::Controllers { controller: TAINT_EVICTION_CONTROLLER })
        && !config.enable_taint_manager
}

/// A flag's value, for serde: each type as it serializes on its own.
#[derive(Serialize)]
#[serde(untagged)]
enum Value {
    Span(Span),
    Number(f64),
    Count(u32),
    Switch(bool),
    Deletion(DeletionMode),
}

impl Serialize for ControllerConfig {
    /// A mapping of every flag's name to its value, in [`FLAGS`]' order.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(FLAGS.len()))?;
        for flag in FLAGS {
            let value = match flag.field {
                Field::Span(get, _) => Value::Span(get(self)),
                Field::Number(get, _) => Value::Number(get(self)),
                Field::Count(get, _) => Value::Count(get(self)),
                Field::Switch(get, _) => Value::Switch(get(self)),
                Field::Deletion(get, _) => Value::Deletion(get(self)),
            };
            map.serialize_entry(flag.name, &value)?;
        }
        map.end()
    }
}

/// A key of a configuration mapping: the flag's place in [`FLAGS`]. An
/// unknown name is refused while the key is read, so the error's path
/// names it (`config.node-monitor-grace`).
struct FlagKey(usize);

impl<'de> Deserialize<'de> for FlagKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<FlagKey, D::Error> {
        struct Name;
        impl Visitor<'_> for Name {
            type Value = FlagKey;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a controller flag's name")
            }

            fn visit_str<E: de::Error>(self, key: &str) -> Result<FlagKey, E> {
                match FLAGS.iter().position(|f| f.name == key) {
                    Some(i) => Ok(FlagKey(i)),
                    None => Err(E::unknown_field(key, &NAMES)),
                }
            }
        }
        d.deserialize_identifier(Name)
    }
}

impl<'de> Deserialize<'de> for ControllerConfig {
    /// A mapping of flag names to values; a flag not named keeps
    /// [`ControllerConfig::default`]'s value, an unknown or repeated one is
    /// refused, naming it.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ControllerConfig, D::Error> {
        struct Flags;
        impl<'de> Visitor<'de> for Flags {
            type Value = ControllerConfig;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping of controller flags to values")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ControllerConfig, A::Error> {
                let mut config = ControllerConfig::default();
                let mut seen = [false; FLAGS.len()];
                while let Some(FlagKey(i)) = map.next_key()? {
                    if std::mem::replace(&mut seen[i], true) {
                        return Err(de::Error::duplicate_field(FLAGS[i].name));
                    }
                    match FLAGS[i].field {
                        Field::Span(_, set) => set(&mut config, map.next_value()?),
                        Field::Number(_, set) => set(&mut config, map.next_value()?),
                        Field::Count(_, set) => set(&mut config, map.next_value()?),
                        Field::Switch(_, set) => set(&mut config, map.next_value()?),
                        Field::Deletion(_, set) => set(&mut config, map.next_value()?),
                    }
                }
                Ok(config)
            }
        }
        d.deserialize_map(Flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::KubeVersion;

    #[test]
    fn every_field_of_the_configuration_has_one_flag_that_reads_and_writes_it() {
        // Each flag, set to a value other than the default through its
        // text, changes the configuration, and reads back the same text.
        let other = |flag: &Flag, c: &ControllerConfig| match flag.field {
            Field::Span(get, _) => (get(c) + Span::from_secs(1)).to_string(),
            Field::Number(get, _) => (get(c) / 2.0).to_string(),
            Field::Count(get, _) => (get(c) + 1).to_string(),
            Field::Switch(get, _) => (!get(c)).to_string(),
            Field::Deletion(..) => "evict".to_string(),
        };
        let base = ControllerConfig::default();
        let mut changed = base.clone();
        for flag in FLAGS {
            let before = changed.clone();
            let text = other(flag, &base);
            flag.set_text(&mut changed, &text).unwrap_or_else(|e| panic!("{}: {e}", flag.name));
            assert_ne!(changed, before, "{} changes nothing", flag.name);
            assert_eq!(flag.text(&changed), text, "{}", flag.name);
        }
        // Every field was reached: a flag per field, none twice.
        let names: std::collections::BTreeSet<&str> = FLAGS.iter().map(|f| f.name).collect();
        assert_eq!(names.len(), FLAGS.len());
        let serialized = serde_json::to_value(&changed).expect("serializes");
        assert_eq!(serialized.as_object().map(|m| m.len()), Some(FLAGS.len()));
    }

    #[test]
    fn a_configuration_reads_back_what_it_writes() {
        let c = ControllerConfig::of_kube_controller_manager(KubeVersion::OLDEST_SUPPORTED);
        let text = serde_json::to_string(&c).expect("serializes");
        assert!(text.starts_with(r#"{"node-monitor-period":"5s","node-monitor-grace-period":"50s""#), "{text}");
        assert_eq!(serde_json::from_str::<ControllerConfig>(&text).expect("reads"), c);
        let e = serde_json::from_str::<ControllerConfig>(r#"{"node-eviction-rate":0.1,"node-eviction-rate":0.2}"#)
            .expect_err("repeated");
        assert!(e.to_string().contains("duplicate field `node-eviction-rate`"), "{e}");
        let e = serde_json::from_str::<ControllerConfig>(r#"{"pod-deletion-mode":"drain"}"#).expect_err("bad mode");
        assert!(e.to_string().contains("drain"), "{e}");
    }

    #[test]
    fn the_command_line_spells_out_every_flag_and_the_controllers_switched_off() {
        let c = ControllerConfig {
            enable_taint_manager: false,
            pod_deletion_mode: DeletionMode::Evict,
            node_monitor_period: Span::from_millis(1500),
            ..ControllerConfig::default()
        };
        let args = command_line(&c);
        assert!(args.contains(&"--node-monitor-period=1.5s".to_string()), "{args:?}");
        assert!(args.contains(&"--enable-taint-manager=false".to_string()));
        assert!(args.contains(&"--pod-deletion-mode=evict".to_string()));
        assert!(args.contains(&"--controllers=*".to_string()));
        assert_eq!(args.len(), FLAGS.len() - 1);
        let off = ControllerConfig { taint_eviction: false, ..ControllerConfig::default() };
        assert!(command_line(&off).contains(&"--controllers=*,-taint-eviction-controller".to_string()));
        let off = ControllerConfig { node_lifecycle: false, ..ControllerConfig::default() };
        assert!(command_line(&off).contains(&"--controllers=*,-node-lifecycle-controller".to_string()));
        // Every value reads back exactly (a span to the nanosecond).
        let mut back = ControllerConfig::default();
        for arg in command_line(&c) {
            let (name, value) = arg.trim_start_matches("--").split_once('=').expect("name=value");
            if let Some(flag) = Flag::named(name) {
                flag.set_text(&mut back, value).expect("reads");
            }
        }
        assert_eq!(ControllerConfig { node_lifecycle: true, taint_eviction: true, ..back }, c);
    }
}
