//! Why a pod was deleted: the facts behind every deletion, recorded when it
//! is issued, so an operator can check it against the node's history.
//!
//! An [`Explanation`] travels on the [`DeletePod`](crate::ActionKind::DeletePod)
//! action; its one-line form is the message of the deletion's Event, and
//! `nodewarden replay --explain ns/pod` prints the full form.

use std::fmt::Write as _;

use nodewarden_model::{ConditionStatus, Span, Taint, Timestamp, Toleration, ZoneKey, ZoneState};

/// How the controller came to add a NoExecute taint to a node.
#[derive(Clone, Debug, PartialEq)]
pub struct TaintingFacts {
    /// The taint, with its `time_added`.
    pub taint: Taint,
    /// When the node entered its zone's queue (`None` for an immediate
    /// not-ready/unreachable swap, which is not rate limited).
    pub queued_at: Option<Timestamp>,
    /// The zone whose queue released it.
    pub zone: ZoneKey,
    /// The zone's rate when the taint went on, nodes per second.
    pub zone_rate: f64,
    /// The zone's state when the taint went on.
    pub zone_state: Option<ZoneState>,
}

/// What the controller knew of the node's heartbeats at deletion time.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeFacts {
    /// The node's Ready status.
    pub ready: Option<ConditionStatus>,
    /// When the controller saw Ready last change (its ready-transition time).
    pub ready_since: Option<Timestamp>,
    /// When the controller last observed a new heartbeat (its probe time).
    pub last_heartbeat_seen: Option<Timestamp>,
    /// The Ready condition's `lastHeartbeatTime`.
    pub status_heartbeat: Option<Timestamp>,
    /// The Lease's `renewTime`.
    pub lease_renewed: Option<Timestamp>,
    /// The grace period that applied.
    pub grace: Span,
}

/// Which rule made the deletion due.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Taint-based: this NoExecute taint has no matching toleration.
    NotTolerated {
        /// The untolerated taint.
        taint: Taint,
    },
    /// Taint-based: every taint tolerated; this toleration (the first match
    /// of some taint) has the smallest `tolerationSeconds`.
    TolerationExpired {
        /// The deciding toleration.
        toleration: Toleration,
        /// Its seconds, as applied (<= 0 means at once).
        seconds: i64,
    },
    /// Legacy: the node was not Ready for longer than `pod-eviction-timeout`.
    EvictionTimeout {
        /// Ready status that counted.
        status: ConditionStatus,
        /// Since when (probe time for Unknown, ready-transition for False).
        since: Timestamp,
        /// The timeout.
        timeout: Span,
        /// The zone's rate when the node's eviction was released.
        zone_rate: f64,
    },
}

/// The recorded causal chain of one pod deletion.
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    /// The pod.
    pub pod: String,
    /// The node it was bound to.
    pub node: String,
    /// What the controller knew of the node; `None` when the node object
    /// was gone (pending deletions survive a node's deletion).
    pub node_facts: Option<NodeFacts>,
    /// The NoExecute taints in force when the deletion was scheduled.
    pub taints: Vec<Taint>,
    /// How the controller's own taint got there, if it did.
    pub tainting: Option<TaintingFacts>,
    /// The rule that applied.
    pub verdict: Verdict,
    /// When the deletion was scheduled.
    pub scheduled_at: Timestamp,
    /// When it was due.
    pub due_at: Timestamp,
    /// When it was issued.
    pub deleted_at: Timestamp,
}

fn opt(t: Option<Timestamp>) -> String {
    t.map_or_else(|| "never".to_string(), |t| t.to_string())
}

fn toleration_text(t: &Toleration) -> String {
    let key = if t.key.is_empty() { "*" } else { &t.key };
    let effect = t.effect.map_or("*", |e| e.as_str());
    let value = if t.value.is_empty() { String::new() } else { format!("={}", t.value) };
    let seconds = t.seconds.map_or_else(|| "forever".to_string(), |s| format!("{s}s"));
    format!("{key}{value}:{effect} ({:?}, {seconds})", t.operator)
}

impl Explanation {
    /// One line, for Event messages and logs.
    pub fn one_line(&self) -> String {
        let mut s = String::new();
        if let Some(n) = &self.node_facts {
            let _ = write!(
                s,
                "node {} {} since {} (last heartbeat seen {}, grace {})",
                self.node,
                n.ready.map_or("without Ready", |r| r.as_str()),
                opt(n.ready_since),
                opt(n.last_heartbeat_seen),
                n.grace
            );
        } else {
            let _ = write!(s, "node {} gone", self.node);
        }
        if let Some(t) = &self.tainting {
            let _ = write!(s, "; {} added {}", t.taint.short(), opt(t.taint.time_added));
            match t.queued_at {
                Some(q) => {
                    let _ = write!(s, " (queued {q}, zone {} at {}/s)", t.zone, t.zone_rate);
                }
                None => s.push_str(" (immediate swap)"),
            }
        }
        match &self.verdict {
            Verdict::NotTolerated { taint } => {
                let _ = write!(s, "; {} not tolerated", taint.short());
            }
            Verdict::TolerationExpired { toleration, .. } => {
                let _ = write!(s, "; tolerated by {}", toleration_text(toleration));
            }
            Verdict::EvictionTimeout { status, since, timeout, zone_rate } => {
                let _ =
                    write!(s, "; {status} since {since} > pod-eviction-timeout {timeout} (zone rate {zone_rate}/s)");
            }
        }
        let _ = write!(s, "; due {}", self.due_at);
        s
    }

    /// Several lines, for a person reading one deletion.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "pod {} on node {} deleted at {}", self.pod, self.node, self.deleted_at);
        match &self.node_facts {
            Some(n) => {
                let _ = writeln!(s, "  last status heartbeat:   {}", opt(n.status_heartbeat));
                let _ = writeln!(s, "  last Lease renewal:      {}", opt(n.lease_renewed));
                let _ = writeln!(
                    s,
                    "  last heartbeat seen:     {} (the controller's probe time)",
                    opt(n.last_heartbeat_seen)
                );
                let _ = writeln!(s, "  grace period:            {}", n.grace);
                let _ = writeln!(
                    s,
                    "  Ready:                   {} since {}",
                    n.ready.map_or("missing", |r| r.as_str()),
                    opt(n.ready_since)
                );
            }
            None => {
                let _ = writeln!(s, "  node:                    deleted before the pod");
            }
        }
        for t in &self.taints {
            let _ = writeln!(s, "  NoExecute taint:         {} added {}", t.short(), opt(t.time_added));
        }
        if let Some(t) = &self.tainting {
            match t.queued_at {
                Some(q) => {
                    let _ = writeln!(
                        s,
                        "  tainted by nodewarden:   queued {q} in zone {:?}, released at {}/s ({})",
                        t.zone.to_string(),
                        t.zone_rate,
                        t.zone_state.map_or("no state", ZoneState::as_str)
                    );
                }
                None => {
                    let _ = writeln!(s, "  tainted by nodewarden:   swapped at once from the opposite taint");
                }
            }
        }
        match &self.verdict {
            Verdict::NotTolerated { taint } => {
                let _ =
                    writeln!(s, "  rule:                    no toleration matches {}: delete at once", taint.short());
            }
            Verdict::TolerationExpired { toleration, seconds } => {
                let _ = writeln!(
                    s,
                    "  rule:                    smallest matching toleration {} -> {seconds}s",
                    toleration_text(toleration)
                );
            }
            Verdict::EvictionTimeout { status, since, timeout, zone_rate } => {
                let _ = writeln!(
                    s,
                    "  rule:                    legacy: {status} since {since}, pod-eviction-timeout {timeout}, zone rate {zone_rate}/s"
                );
            }
        }
        let scheduled = if matches!(self.verdict, Verdict::EvictionTimeout { .. }) { "queued" } else { "scheduled" };
        let _ = writeln!(s, "  {:<25}{}", format!("{scheduled}:"), self.scheduled_at);
        let _ = write!(s, "  due:                     {}", self.due_at);
        s
    }
}

/// Which of the rescheduler's preference tiers a node was chosen in
/// (the first tier with any node where the addon fits wins).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PreparationTier {
    /// Every pod evicted is allowed by its budgets and terminates within
    /// the rescheduler's eviction grace.
    AllowedAndQuick,
    /// Every pod evicted is allowed by its budgets.
    Allowed,
    /// Some pod evicted is not (yet) allowed by a budget: the Eviction API
    /// may refuse it, and the refusal is retried.
    Any,
}

impl PreparationTier {
    /// 1, 2 or 3, as the rules number them.
    pub fn number(self) -> u8 {
        match self {
            PreparationTier::AllowedAndQuick => 1,
            PreparationTier::Allowed => 2,
            PreparationTier::Any => 3,
        }
    }

    /// What the tier means, in words.
    pub fn describe(self) -> &'static str {
        match self {
            PreparationTier::AllowedAndQuick => "budgets allow every eviction and every pod stops within the grace",
            PreparationTier::Allowed => "budgets allow every eviction",
            PreparationTier::Any => "some evictions need a budget to allow them",
        }
    }
}

/// The recorded reasons for one eviction the critical-addon rescheduler
/// issued: which addon it is for, since when it waits, where it goes and
/// why these pods.
#[derive(Clone, Debug, PartialEq)]
pub struct AddonEviction {
    /// The evicted pod.
    pub pod: String,
    /// The node it runs on, which is being prepared for the addon.
    pub node: String,
    /// The critical addon the room is made for.
    pub addon: String,
    /// When the scheduler marked the addon Unschedulable.
    pub unschedulable_since: Timestamp,
    /// The addon's requests.
    pub needed: nodewarden_model::Resources,
    /// The node's free room before any eviction (allocatable minus the
    /// requests of the pods bound there).
    pub free_before: nodewarden_model::Resources,
    /// The tier the node was chosen in.
    pub tier: PreparationTier,
    /// Every pod evicted from the node for the addon, this one included,
    /// in the order chosen.
    pub victims: Vec<String>,
    /// The requests of all of them together.
    pub freed: nodewarden_model::Resources,
    /// The budgets covering this pod (`namespace/name`), with the
    /// disruptions each allowed when the node was chosen.
    pub budgets: Vec<(String, u32)>,
    /// The pod's own termination grace period.
    pub pod_grace: Span,
    /// The grace period the eviction asks for.
    pub grace: Span,
    /// When the node was chosen.
    pub decided_at: Timestamp,
}

impl AddonEviction {
    /// One line, for Event messages and logs.
    pub fn one_line(&self) -> String {
        let mut s = format!(
            "making room on {} for critical addon {} (unschedulable since {}, needs {}; tier {}: {}); {} of {} pod(s) evicted, freeing {}",
            self.node,
            self.addon,
            self.unschedulable_since,
            self.needed,
            self.tier.number(),
            self.tier.describe(),
            self.pod,
            self.victims.len(),
            self.freed
        );
        if self.grace < self.pod_grace {
            let _ = write!(s, "; grace shortened from {} to {}", self.pod_grace, self.grace);
        }
        s
    }

    /// Several lines, for a person reading one eviction.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "pod {} on node {} evicted at {}", self.pod, self.node, self.decided_at);
        let _ = writeln!(s, "  for critical addon:      {}", self.addon);
        let _ = writeln!(s, "  unschedulable since:     {}", self.unschedulable_since);
        let _ = writeln!(s, "  addon needs:             {}", self.needed);
        let _ = writeln!(s, "  node free before:        {}", self.free_before);
        let _ = writeln!(s, "  tier:                    {} ({})", self.tier.number(), self.tier.describe());
        let _ = writeln!(s, "  pods evicted:            {} (freeing {})", self.victims.join(", "), self.freed);
        if self.budgets.is_empty() {
            let _ = writeln!(s, "  budgets:                 none covers this pod");
        }
        for (budget, allowed) in &self.budgets {
            let _ = writeln!(s, "  budget:                  {budget} allowed {allowed} disruption(s)");
        }
        let _ = write!(s, "  grace period:            {} (the pod's own: {})", self.grace, self.pod_grace);
        s
    }
}
