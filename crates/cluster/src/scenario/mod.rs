//! The scenario file format (`docs/scenarios.md`, a public contract), as Rust
//! types that deserialize from YAML or JSON.
//!
//! Every struct refuses unknown fields, so a typo is an error naming its
//! path instead of a silently ignored line. Field names are the kebab-case
//! spellings of the format. An event or an expectation is read as one flat
//! mapping and then checked for "exactly one action" (or "exactly one
//! subject") while the YAML position is still known, so those errors carry a
//! line number too. Cross-references (unknown nodes, duplicate names, ...)
//! are checked afterwards by [`crate::validate()`].
//!
//! One file a part of the format: `nodes_pods` (the cluster a file starts
//! from), `events` (the timeline), `expectations` (what must hold when);
//! this file holds the whole scenario, the cluster-wide settings, times and
//! the deserializing helpers they share. Every item is re-exported here,
//! under the paths other crates use.
//!
//! Invariant: these are plain values read from text; nothing here knows the
//! cluster, the engine's state or the clock.

use std::fmt;
use std::marker::PhantomData;

use nodewarden_model::{ControllerConfig, Span, Timestamp};
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

mod events;
mod expectations;
mod nodes_pods;

pub use events::*;
pub use expectations::*;
pub use nodes_pods::*;

/// A whole scenario: a cluster, a timeline and what must hold when.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Scenario {
    /// A title for humans; echoed in the summary line.
    #[serde(default)]
    pub name: Option<String>,
    /// The last instant simulated; `None` = latest `at` in events/expect + 1s.
    #[serde(default)]
    pub run_until: Option<Span>,
    /// The controller's flags, spelled as on the command line.
    #[serde(default, deserialize_with = "null_as_default")]
    pub config: ControllerConfig,
    /// What the surrounding cluster does (admission defaults, kubelets).
    #[serde(default, deserialize_with = "null_as_default")]
    pub cluster: ClusterSpec,
    /// The nodes present at t=0.
    #[serde(default, deserialize_with = "null_as_default")]
    pub nodes: Vec<NodeSpec>,
    /// The pods present at t=0.
    #[serde(default, deserialize_with = "null_as_default")]
    pub pods: Vec<PodSpec>,
    /// PodDisruptionBudgets present at t=0 (an addition to the contract:
    /// evictions honour them, and the rescheduler reads them).
    #[serde(default, deserialize_with = "null_as_default")]
    pub budgets: Vec<BudgetSpec>,
    /// What happens to the cluster, and when.
    #[serde(default, deserialize_with = "null_as_default")]
    pub events: Vec<EventEntry>,
    /// What must hold, and when.
    #[serde(default, deserialize_with = "null_as_default")]
    pub expect: Vec<Expectation>,
}

impl Scenario {
    /// The last instant to simulate: `run-until`, or the latest `at` of any
    /// event or expectation (0 if none is later) plus one second.
    pub fn end(&self) -> Timestamp {
        if let Some(end) = self.run_until {
            return Timestamp::EPOCH + end;
        }
        let latest = self
            .events
            .iter()
            .map(|e| e.at)
            .chain(self.expect.iter().map(|e| e.at))
            .max()
            .unwrap_or(Span::ZERO)
            .max(Span::ZERO);
        Timestamp::EPOCH + latest + Span::from_secs(1)
    }
}

/// Admission defaults and simulated kubelet settings.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ClusterSpec {
    /// `tolerationSeconds` of the not-ready toleration admission adds to
    /// pods lacking one; `None` (`null` in the file) = none added. Default 300.
    #[serde(default = "default_toleration_seconds", deserialize_with = "nullable")]
    pub default_not_ready_toleration_seconds: Option<i64>,
    /// The same for the unreachable toleration. Default 300.
    #[serde(default = "default_toleration_seconds", deserialize_with = "nullable")]
    pub default_unreachable_toleration_seconds: Option<i64>,
    /// Settings of the simulated kubelets (`kubelet: true` nodes).
    #[serde(default, deserialize_with = "null_as_default")]
    pub kubelet: KubeletSpec,
    /// Run the simulated kube-scheduler ([`crate::scheduler`]): pending
    /// pods are bound, or marked Unschedulable. Default false, so a file
    /// without it keeps its pods unscheduled until `bind-pod`, as the
    /// contract has it.
    #[serde(default)]
    pub scheduler: bool,
    /// How slow the API server between the controller and the cluster is
    /// (`{write-latency: 20ms..200ms, watch-delay: 50ms..500ms}`); absent,
    /// the instant world: each write lands at once and each change is seen
    /// in the same instant. `--api-latency` overrides it.
    #[serde(default, deserialize_with = "null_as_default")]
    pub api: crate::latency::ApiLatency,
}

fn default_toleration_seconds() -> Option<i64> {
    Some(300)
}

impl Default for ClusterSpec {
    fn default() -> Self {
        ClusterSpec {
            default_not_ready_toleration_seconds: default_toleration_seconds(),
            default_unreachable_toleration_seconds: default_toleration_seconds(),
            kubelet: KubeletSpec::default(),
            scheduler: false,
            api: crate::latency::ApiLatency::NONE,
        }
    }
}

/// The kubelet configuration the simulated kubelets follow (kubelet
/// defaults).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct KubeletSpec {
    /// `nodeLeaseDurationSeconds`: the Lease is renewed every quarter of it (40).
    pub node_lease_duration_seconds: u64,
    /// `nodeStatusUpdateFrequency`: how often the kubelet computes its
    /// status and posts it if Ready is not True (10s).
    pub node_status_update_frequency: Span,
    /// `nodeStatusReportFrequency`: how often the status is posted even
    /// when nothing changed (5m).
    pub node_status_report_frequency: Span,
}

impl Default for KubeletSpec {
    fn default() -> Self {
        KubeletSpec {
            node_lease_duration_seconds: 40,
            node_status_update_frequency: Span::from_secs(10),
            node_status_report_frequency: Span::from_secs(300),
        }
    }
}

/// A time in the file: a duration from t=0, or `now` (the instant of the
/// event that sets it; t=0 under `nodes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSpec {
    /// The instant the enclosing event (or the scenario start) happens.
    Now,
    /// This offset from t=0 (may be negative).
    At(Span),
}

impl TimeSpec {
    /// The instant meant, given the current one.
    pub fn resolve(self, now: Timestamp) -> Timestamp {
        match self {
            TimeSpec::Now => now,
            TimeSpec::At(s) => Timestamp::EPOCH + s,
        }
    }
}

impl<'de> Deserialize<'de> for TimeSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<TimeSpec, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = TimeSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as 45s, 1m30s, 500ms or -1h, or `now`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<TimeSpec, E> {
                if v.trim() == "now" {
                    return Ok(TimeSpec::Now);
                }
                v.parse().map(TimeSpec::At).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<TimeSpec, E> {
                if v == 0 {
                    Ok(TimeSpec::At(Span::ZERO))
                } else {
                    Err(E::custom(format!("duration {v} has no unit: write {v}s, {v}m or {v}ms")))
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<TimeSpec, E> {
                self.visit_u64(v.unsigned_abs())
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for TimeSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            TimeSpec::Now => s.serialize_str("now"),
            TimeSpec::At(span) => span.serialize(s),
        }
    }
}

/// Reads a mapping as `R`, then converts it to `T`, raising the conversion's
/// error while the deserializer still knows where the mapping is, so the
/// error carries its line.
pub(super) fn deserialize_checked<'de, D, R, T>(d: D, expecting: &'static str) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    R: Deserialize<'de>,
    T: TryFrom<R, Error = String>,
{
    struct V<R, T>(&'static str, PhantomData<fn() -> (R, T)>);
    impl<'de, R, T> Visitor<'de> for V<R, T>
    where
        R: Deserialize<'de>,
        T: TryFrom<R, Error = String>,
    {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            let raw = R::deserialize(MapAccessDeserializer::new(map))?;
            T::try_from(raw).map_err(de::Error::custom)
        }
    }
    d.deserialize_map(V::<R, T>(expecting, PhantomData))
}

/// `null` (or an empty YAML value) reads as the type's default.
pub(super) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Present-but-`null` reads as `None`; the field's `default` covers absence.
pub(super) fn nullable<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)
}

/// Absent = `None`, `null` = `Some(None)`, a value = `Some(Some(v))`.
pub(super) fn double_option<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}
