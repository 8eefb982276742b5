//! Domain types and pure rules of nodewarden, with no dependency on bevy,
//! kube or tokio.
//!
//! Everything here is a plain value plus the upstream rule that goes with it
//! (toleration matching, zone keys, flag defaults and validation), so the
//! engine, the simulator, the adapter and the tests all agree on one
//! definition of each.

pub mod budget;
pub mod condition;
pub mod config;
pub mod flags;
pub mod keys;
pub mod name;
pub mod pod;
pub mod resources;
pub mod scheduling;
pub mod taint;
pub mod time;
pub mod version;
pub mod wall;
pub mod zone;

pub use budget::{BudgetAmounts, IntOrPercent};
pub use condition::{ConditionStatus, ConditionType, NodeCondition};
pub use config::{ConfigError, ConfigParseError, ControllerConfig, DeletionMode};
pub use flags::{FLAGS, Flag};
pub use name::CompactName;
pub use pod::PodKey;
pub use resources::{QuantityError, Resources};
pub use scheduling::{LabelSelector, NodeAffinity, Placement, PodScheduling};
pub use taint::{Taint, TaintEffect, Toleration, TolerationOperator, TolerationVerdict};
pub use time::{Clock, ManualClock, Span, SpanParseError, Timestamp};
pub use version::{KubeVersion, VersionParseError};
pub use zone::{ZoneKey, ZoneState};
