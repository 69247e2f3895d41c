//! Progressive rollouts and the workload status they gate on: what a placement's rollout
//! strategy says, the record core keeps per object (a bounded revision history, the waves, where
//! the rollout stands and its story), and the per-cluster status of a workload with its health
//! verdict.
//!
//! Plain data and pure decisions only: [`waves::plan`] cuts the placed clusters into waves,
//! [`gate::step`] moves a rollout forward from reported status and log time, [`verdict`] reads a
//! workload's health by kind. The state machine owns the records and calls these
//! (`state/handlers/rollout.rs`); executors only read which revision each cluster should run
//! ([`RolloutRecord::revision_for`]) and report what they see. Must not: read clocks, touch the
//! state's tables, or let map order reach a decision (clusters are sorted by name).
//!
//! Encoding: like `crate::model`, everything here round-trips through bincode's serde mode
//! (no untagged or internally tagged enums, no `flatten`).

pub mod deschedule;
pub mod failback;
pub mod gate;
pub mod shared_conditions;
pub mod waves;
pub mod words;

pub use words::{word, Word};

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::FieldError;

/// Revisions kept per object: enough for `undo` to go back several times, few enough that the
/// templates kept stay a small multiple of the object.
pub const MAX_REVISIONS: usize = 10;
/// Story lines kept per rollout record (oldest dropped first); the audit archive keeps all.
pub const MAX_EVENTS: usize = 64;
/// The annotation core stamps on a rendered manifest of an object with a rollout record: the
/// template revision that cluster runs. Executors read it back from the live object.
pub const REVISION_ANNOTATION: &str = "fedraft.io/template-revision";

/// Writes [`REVISION_ANNOTATION`] into a rendered manifest's metadata.
pub(crate) fn stamp_revision(m: &mut serde_json::Value, n: u32) {
    let Some(meta) = m.get_mut("metadata").and_then(|v| v.as_object_mut()) else {
        return;
    };
    let ann = meta
        .entry("annotations")
        .or_insert_with(|| serde_json::Value::Object(Default::default()));
    if let Some(a) = ann.as_object_mut() {
        a.insert(
            REVISION_ANNOTATION.to_string(),
            serde_json::Value::String(n.to_string()),
        );
    }
}
/// Most conditions kept per workload report; reasons are cut to this many bytes.
pub const MAX_CONDITIONS: usize = 8;
pub const MAX_REASON_BYTES: usize = 128;

fn default_progress_deadline() -> u64 {
    600
}

/// All at once (today's behaviour) or in waves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum RolloutType {
    #[default]
    All,
    Progressive,
}

/// How the placed clusters are grouped before `maxConcurrency` cuts the groups into waves.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum WaveGrouping {
    /// One group, clusters in name order.
    #[default]
    ClusterOrder,
    /// One group per value of this cluster label, in value order; clusters without it last.
    Label(String),
    /// These groups in this order; placed clusters in none of them form a last group.
    Groups(Vec<Vec<String>>),
}

/// Most clusters updated at once within a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Concurrency {
    /// At most this many clusters per wave; 0 means the whole group.
    Count(u32),
    /// At most this percentage (1..=100) of the placed clusters per wave, at least one.
    Percent(u32),
}

impl Default for Concurrency {
    fn default() -> Self {
        Concurrency::Count(0)
    }
}

/// A placement's rollout strategy (Open Cluster Management's rolloutStrategy, recorded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutStrategy {
    #[serde(rename = "type", default)]
    pub type_: RolloutType,
    #[serde(default)]
    pub grouping: WaveGrouping,
    #[serde(default)]
    pub max_concurrency: Concurrency,
    /// Clusters updated alone in a first canary wave (0: no canary wave).
    #[serde(default)]
    pub canary: u32,
    /// Log time a wave must stay fully rolled out and healthy before the next starts.
    #[serde(default)]
    pub min_success_seconds: u64,
    /// Log time after a wave started at which its clusters not yet healthy count as failed.
    #[serde(default = "default_progress_deadline")]
    pub progress_deadline_seconds: u64,
    /// Failed clusters tolerated over the whole rollout before it pauses.
    #[serde(default)]
    pub max_failures: u32,
    /// On a failed gate, roll the updated clusters back instead of pausing.
    #[serde(default)]
    pub auto_rollback: bool,
    /// For kinds whose status fedraft does not read: when the object counts as healthy.
    #[serde(default)]
    pub health_rule: Option<HealthRule>,
}

/// Health of a kind fedraft does not know, read from one status field: healthy when the value
/// at `path` (a JSON pointer into the live object, e.g. `/status/phase`) equals `value` (a
/// string as is; any other JSON value in its JSON text, e.g. `true` or `3`). The executor
/// reads it and reports the result as the [`HEALTH_RULE_CONDITION`] condition; [`verdict`]
/// decides from that condition, so the verdict stays a function of the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HealthRule {
    pub path: String,
    pub value: String,
}

/// The condition an executor reports for a [`HealthRule`]: status true when the rule held,
/// the reason the value it found (cut to [`MAX_REASON_BYTES`]).
pub const HEALTH_RULE_CONDITION: &str = "fedraft.io/HealthRule";
/// Longest health rule path and value accepted.
pub const MAX_HEALTH_RULE_BYTES: usize = 256;

impl HealthRule {
    fn validate(&self, at: &str) -> Result<(), FieldError> {
        if !self.path.starts_with('/') || self.path.len() > MAX_HEALTH_RULE_BYTES {
            return Err(FieldError::new(
                format!("{at}.healthRule.path"),
                format!(
                    "must be a JSON pointer starting with '/' of at most {MAX_HEALTH_RULE_BYTES} bytes, e.g. /status/phase"
                ),
            ));
        }
        if self.value.len() > MAX_HEALTH_RULE_BYTES {
            return Err(FieldError::new(
                format!("{at}.healthRule.value"),
                format!("longer than {MAX_HEALTH_RULE_BYTES} bytes"),
            ));
        }
        Ok(())
    }
}

impl Default for RolloutStrategy {
    fn default() -> Self {
        RolloutStrategy {
            type_: RolloutType::All,
            grouping: WaveGrouping::ClusterOrder,
            max_concurrency: Concurrency::default(),
            canary: 0,
            min_success_seconds: 0,
            progress_deadline_seconds: default_progress_deadline(),
            max_failures: 0,
            auto_rollback: false,
            health_rule: None,
        }
    }
}

impl RolloutStrategy {
    /// Input checks that need no state; `at` is the field path of the strategy.
    pub fn validate(&self, at: &str) -> Result<(), FieldError> {
        if let Concurrency::Percent(p) = self.max_concurrency {
            if !(1..=100).contains(&p) {
                return Err(FieldError::new(
                    format!("{at}.maxConcurrency.percent"),
                    format!("{p} is not within 1..=100"),
                ));
            }
        }
        // A day bounds every wait: beyond it a rollout is better paused by hand.
        const DAY: u64 = 86_400;
        for (v, f) in [
            (self.min_success_seconds, "minSuccessSeconds"),
            (self.progress_deadline_seconds, "progressDeadlineSeconds"),
        ] {
            if v > DAY {
                return Err(FieldError::new(
                    format!("{at}.{f}"),
                    format!("{v} exceeds {DAY} seconds"),
                ));
            }
        }
        if self.progress_deadline_seconds == 0 {
            return Err(FieldError::new(
                format!("{at}.progressDeadlineSeconds"),
                "must be positive",
            ));
        }
        if let Some(rule) = &self.health_rule {
            rule.validate(at)?;
        }
        match &self.grouping {
            WaveGrouping::Label(k) if k.is_empty() => {
                return Err(FieldError::new(format!("{at}.grouping.label"), "empty"))
            }
            WaveGrouping::Groups(gs) => {
                let mut seen = std::collections::BTreeSet::new();
                for (i, g) in gs.iter().enumerate() {
                    for c in g {
                        if !seen.insert(c) {
                            return Err(FieldError::new(
                                format!("{at}.grouping.groups[{i}]"),
                                format!("cluster {c} is in more than one group"),
                            ));
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// One template an object had, numbered from 1 in the order it was put.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Revision {
    pub number: u32,
    pub template: String,
    /// The entry that put it.
    pub index: u64,
}

/// Where a rollout stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// Every placed cluster runs the target revision (also: nothing was ever rolled out).
    Complete,
    /// Waves are being rolled out.
    Progressing,
    /// Stopped by a user or a failed gate; `resume` continues the current wave.
    Paused,
    /// Stopped for good where it was; the next template starts a new rollout.
    Aborted,
    /// The updated clusters went back to the previous revision.
    RolledBack,
}

/// One step of a rollout's story, in log time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutEvent {
    pub index: u64,
    pub time_ms: u64,
    pub message: String,
}

/// What core keeps about one object's rollouts. Exists only for objects put with a strategy,
/// so objects without one apply, snapshot and hash exactly as before rollouts existed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutRecord {
    pub strategy: RolloutStrategy,
    /// Oldest first, at most [`MAX_REVISIONS`]; `stable` and `target` are always among them.
    pub revisions: Vec<Revision>,
    /// The revision clusters run unless `assigned` says otherwise.
    pub stable: u32,
    /// The revision being rolled out (equal to `stable` once complete).
    pub target: u32,
    pub phase: Phase,
    /// Why the rollout is paused, aborted or rolled back (empty otherwise).
    pub reason: String,
    /// The waves of the current rollout, each a list of cluster names.
    pub waves: Vec<Vec<String>>,
    /// The wave being rolled out (== `waves.len()` once every wave passed).
    pub wave: u32,
    pub wave_started_ms: u64,
    /// Since when every cluster of the current wave has been healthy on the target.
    pub healthy_since_ms: Option<u64>,
    /// Clusters counted as failed so far in this rollout.
    pub failures: u32,
    /// Clusters moved to the target so far (cluster -> revision).
    pub assigned: BTreeMap<String, u32>,
    /// The story, oldest first, at most [`MAX_EVENTS`].
    pub events: Vec<RolloutEvent>,
}

impl RolloutRecord {
    /// A record whose only revision is `template`, fully rolled out.
    pub fn new(strategy: RolloutStrategy, template: &str, index: u64) -> Self {
        RolloutRecord {
            strategy,
            revisions: vec![Revision {
                number: 1,
                template: template.to_string(),
                index,
            }],
            stable: 1,
            target: 1,
            phase: Phase::Complete,
            reason: String::new(),
            waves: Vec::new(),
            wave: 0,
            wave_started_ms: 0,
            healthy_since_ms: None,
            failures: 0,
            assigned: BTreeMap::new(),
            events: Vec::new(),
        }
    }

    /// The revision `cluster` should run.
    pub fn revision_for(&self, cluster: &str) -> u32 {
        self.assigned.get(cluster).copied().unwrap_or(self.stable)
    }

    pub fn revision(&self, number: u32) -> Option<&Revision> {
        self.revisions.iter().find(|r| r.number == number)
    }

    /// The newest revision (the object's current template).
    pub fn latest(&self) -> &Revision {
        // Never empty: `new` creates one and `push_revision` only drops older ones.
        &self.revisions[self.revisions.len() - 1]
    }

    /// The revision put before `number`, if still kept.
    pub fn previous(&self, number: u32) -> Option<&Revision> {
        self.revisions.iter().rev().find(|r| r.number < number)
    }

    /// Records a new template as the newest revision and drops the oldest ones beyond
    /// [`MAX_REVISIONS`], never `stable` or `target`.
    pub fn push_revision(&mut self, template: &str, index: u64) -> u32 {
        let number = self.latest().number + 1;
        self.revisions.push(Revision {
            number,
            template: template.to_string(),
            index,
        });
        while self.revisions.len() > MAX_REVISIONS {
            let Some(pos) = self
                .revisions
                .iter()
                .position(|r| r.number != self.stable && r.number != self.target)
            else {
                break;
            };
            self.revisions.remove(pos);
        }
        number
    }

    pub fn log(&mut self, index: u64, time_ms: u64, message: String) {
        if self.events.len() == MAX_EVENTS {
            self.events.remove(0);
        }
        self.events.push(RolloutEvent {
            index,
            time_ms,
            message,
        });
    }

    /// Whether waves still move on their own (gates are evaluated for it).
    pub fn is_active(&self) -> bool {
        self.phase == Phase::Progressing
    }
}

/// A workload's health as read from its status, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// Nothing reported yet, or a kind whose status fedraft cannot read.
    Unknown,
    /// Still converging: a newer generation not observed, replicas being updated or readied.
    Progressing,
    /// Observed the current generation, every replica updated, ready and available (a Job:
    /// complete).
    Healthy,
    /// The workload says it cannot get there: a progress deadline exceeded, a replica failure,
    /// a failed Job.
    Degraded,
}

/// A Job's outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobState {
    /// Not a Job.
    #[default]
    None,
    Running,
    Complete,
    Failed,
}

/// One condition of a workload's status (message left out: it is long and changes often).
/// Ordered so the state can keep each distinct list once ([`shared_conditions`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadCondition {
    #[serde(rename = "type", deserialize_with = "words::deserialize")]
    pub type_: Word,
    pub status: bool,
    #[serde(deserialize_with = "words::deserialize")]
    pub reason: Word,
}

/// What an executor read from one object's live status on one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadObservation {
    #[serde(deserialize_with = "words::deserialize")]
    pub kind: Word,
    /// The template revision the live object carries (its [`REVISION_ANNOTATION`]).
    pub revision: Option<u32>,
    pub generation: i64,
    pub observed_generation: i64,
    /// Desired replicas as the member sees them (`spec.replicas`, or the DaemonSet's count).
    pub replicas: u32,
    pub updated: u32,
    pub ready: u32,
    pub available: u32,
    /// Shared: most workloads of a kind report the same few conditions, and the state keeps
    /// one copy of each distinct list for all of them ([`shared_conditions`]).
    pub conditions: Arc<[WorkloadCondition]>,
    pub job: JobState,
}

/// One object's [`WorkloadStatus`] per placed cluster, by cluster name. A sorted vector, not a
/// `BTreeMap`: there is one per workload object and it holds a few clusters, where a B-tree's
/// smallest node has room for eleven statuses (about 1.5 KiB each time). Encodes as the map did.
pub type WorkloadStatuses = litemap::LiteMap<String, WorkloadStatus>;

/// Adds a cluster's status to `per`, whose vector is then no larger than its statuses: a vector
/// grows to room for four, and most objects run on one or two clusters.
pub fn insert_status(per: &mut WorkloadStatuses, cluster: String, status: WorkloadStatus) {
    per.insert(cluster, status);
    let mut sorted = std::mem::take(per).into_tuple_vec();
    sorted.shrink_to_fit();
    *per = WorkloadStatuses::from_sorted_store_unchecked(sorted);
}

/// The status core keeps per object and cluster: the observation, its verdict, and since when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadStatus {
    pub observed: WorkloadObservation,
    pub verdict: Verdict,
    /// Log time at which `verdict` took its value.
    pub verdict_since_ms: u64,
}

/// `s` cut to at most [`MAX_REASON_BYTES`] on a character boundary: what core keeps of a
/// condition's type and reason, so executors cut the same way and compare exactly.
pub fn cut_reason(s: &str) -> Word {
    let mut end = s.len().min(MAX_REASON_BYTES);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    word(&s[..end])
}

/// The health verdict of an observation, by kind. Kinds without a status fedraft reads are
/// Healthy once present (applied, as before) unless the strategy's [`HealthRule`] did not hold;
/// the executor reports them only for rollouts.
pub fn verdict(o: &WorkloadObservation) -> Verdict {
    let cond = |t: &str| o.conditions.iter().find(|c| c.type_ == t);
    match &*o.kind {
        "Job" => match o.job {
            JobState::Complete => Verdict::Healthy,
            JobState::Failed => Verdict::Degraded,
            JobState::Running | JobState::None => Verdict::Progressing,
        },
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" => {
            let deadline = cond("Progressing")
                .is_some_and(|c| !c.status && c.reason == "ProgressDeadlineExceeded");
            let replica_failure = cond("ReplicaFailure").is_some_and(|c| c.status);
            if deadline || replica_failure {
                return Verdict::Degraded;
            }
            if o.observed_generation < o.generation {
                return Verdict::Progressing;
            }
            let r = o.replicas;
            if o.updated >= r && o.ready >= r && o.available >= r {
                Verdict::Healthy
            } else {
                Verdict::Progressing
            }
        }
        // Kinds fedraft does not read: the strategy's health rule when it has one, else
        // present means healthy.
        _ => match cond(HEALTH_RULE_CONDITION) {
            Some(c) if !c.status => Verdict::Progressing,
            _ => Verdict::Healthy,
        },
    }
}
