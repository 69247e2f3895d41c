//! The parts of a propagation policy that say what happens to placed copies over time rather
//! than where they go: `failover`, `suspension`, `preserveResourcesOnDeletion` and
//! `schedulePriority`, read from log entry version [`PEER_WIDENED_SINCE`] on (older entries
//! refuse them as "not implemented yet", as they did when written).
//!
//! The mapping onto fedraft:
//! - `failover.application`: a workload whose status verdict on a cluster stays unhealthy
//!   (Degraded, or Progressing but for a running Job) for `decisionConditions.tolerationSeconds` (default 300) is
//!   evicted from that cluster and re-placed (`state/handlers/app_failover.rs`). `purgeMode`
//!   says what the cluster it leaves keeps: `Immediately` nothing, `Graciously` (the default)
//!   its copy until the new placement is ready or `gracePeriodSeconds` (default 600) pass
//!   (make-before-break, `state/handlers/handover.rs`), `Never` its copy until the template is
//!   changed or deleted.
//! - `failover.cluster.purgeMode`: `Directly` is what fedraft does when a cluster fails (its
//!   replicas go elsewhere once the failover grace period passed, nothing is kept there);
//!   `Gracefully` keeps the failed cluster's copy until the new placement is ready or the
//!   hand-over deadline passes, should the cluster come back meanwhile.
//! - `statePreservation` (either kind), from log entry version [`STATE_PRESERVATION_SINCE`]
//!   (older entries refuse it as they did): each rule names a label key (`aliasLabelName`) and
//!   a path into the object's `status` (`jsonPath`, the subset `jsonpath` reads). Executors
//!   report the paths' values; when a failover moves the object off a cluster, the values last
//!   reported there become labels of the copy on the newly chosen cluster
//!   (`state/handlers/preserve.rs`).
//! - `suspension`: the template each suspended cluster runs is kept while suspended
//!   (`state/handlers/suspension.rs`); members keep what they hold and report status.
//! - `preserveResourcesOnDeletion: true`: deleting a bound template releases the member copies
//!   instead of deleting them (as `kubectl delete --cascade=orphan` does in one cluster).
//! - `schedulePriority`: a `KubePriorityClass`'s value is the template's priority in the wait
//!   queue; the class is looked up when the policy is written (`state/handlers/door.rs`).
//!
//! Must not: look at the state. Whether a named priority class exists is the door handler's
//! check, so a stored policy parses the same on restore whatever was deleted since.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::Value;

use super::jsonpath::JsonPath;
use super::{typed, unsupported, PEER_WIDENED_SINCE, STATE_PRESERVATION_SINCE};
use crate::error::FieldError;
use crate::policy::validate_dns_label;

/// What happens to the copy on the cluster a workload is moved away from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PurgeMode {
    /// Removed at once.
    Immediately,
    /// Kept until the new placement is ready or a deadline passes (make-before-break).
    Graciously,
    /// Kept until the template changes or is deleted.
    Never,
}

/// `failover.application`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppFailover {
    pub toleration_seconds: u64,
    pub purge: PurgeMode,
    /// The bound of `Graciously`.
    pub grace_period_seconds: u64,
}

/// One `statePreservation.rules[]` entry: the label key a value is carried under, and where
/// in the object's `status` the value is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreserveRule {
    pub alias: String,
    pub path: JsonPath,
}

/// `spec.failover`, read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Failover {
    pub application: Option<AppFailover>,
    /// `failover.cluster.purgeMode` (`Immediately` or `Graciously`); None: fedraft's own
    /// behaviour, which is `Directly`.
    pub cluster: Option<PurgeMode>,
    /// `failover.application.statePreservation.rules` (empty without it).
    pub application_preserve: Vec<PreserveRule>,
    /// `failover.cluster.statePreservation.rules` (empty without it).
    pub cluster_preserve: Vec<PreserveRule>,
}

impl Failover {
    /// Every path either kind of rule reads, once each, in order: what executors report.
    pub fn preserved_paths(&self) -> Vec<&JsonPath> {
        let mut paths: Vec<&JsonPath> = self
            .application_preserve
            .iter()
            .chain(&self.cluster_preserve)
            .map(|r| &r.path)
            .collect();
        paths.sort();
        paths.dedup();
        paths
    }
}

/// `spec.suspension`: the clusters template changes are not dispatched to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Suspension {
    /// `dispatching: true`: every cluster.
    pub all: bool,
    /// `dispatchingOnClusters.clusterNames`.
    pub clusters: BTreeSet<String>,
}

impl Suspension {
    pub fn is_none(&self) -> bool {
        !self.all && self.clusters.is_empty()
    }

    pub fn holds(&self, cluster: &str) -> bool {
        self.all || self.clusters.contains(cluster)
    }
}

/// The four fields, read (a [`PropagationSpec`](super::PropagationSpec)'s `lifecycle`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lifecycle {
    pub failover: Failover,
    pub suspension: Suspension,
    pub preserve_on_deletion: bool,
    pub priority_class: Option<String>,
}

/// The raw fields as `RawPropagationSpec` keeps them.
pub(super) struct RawLifecycle<'a> {
    pub failover: Option<&'a Value>,
    pub activation_preference: Option<&'a str>,
    pub suspension: Option<&'a Value>,
    pub preserve_resources_on_deletion: Option<bool>,
    pub schedule_priority: Option<&'a Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawFailover {
    #[serde(default)]
    application: Option<RawAppFailover>,
    #[serde(default)]
    cluster: Option<RawClusterFailover>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawAppFailover {
    #[serde(default)]
    decision_conditions: Option<RawDecisionConditions>,
    #[serde(default)]
    purge_mode: Option<String>,
    #[serde(default)]
    grace_period_seconds: Option<i64>,
    #[serde(default)]
    state_preservation: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawStatePreservation {
    rules: Vec<RawPreserveRule>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawPreserveRule {
    alias_label_name: String,
    json_path: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawDecisionConditions {
    #[serde(default)]
    toleration_seconds: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawClusterFailover {
    #[serde(default)]
    purge_mode: Option<String>,
    #[serde(default)]
    state_preservation: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSuspension {
    #[serde(default)]
    dispatching: Option<bool>,
    #[serde(default)]
    dispatching_on_clusters: Option<RawSuspendClusters>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSuspendClusters {
    #[serde(default)]
    cluster_names: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSchedulePriority {
    #[serde(default)]
    priority_class_source: Option<String>,
    #[serde(default)]
    priority_class_name: Option<String>,
}

/// Karmada's defaults: tolerate 300 s of unhealthiness, purge graciously within 600 s.
const DEFAULT_TOLERATION_SECONDS: u64 = 300;
const DEFAULT_GRACE_PERIOD_SECONDS: u64 = 600;
/// Karmada keeps these in an int32.
const MAX_SECONDS: i64 = i32::MAX as i64;

impl RawLifecycle<'_> {
    pub(super) fn check(self, version: u16) -> Result<Lifecycle, FieldError> {
        if version < PEER_WIDENED_SINCE {
            // Exactly the refusals of the versions before: the first present field, in order.
            for (field, present) in [
                ("spec.failover", self.failover.is_some()),
                (
                    "spec.activationPreference",
                    self.activation_preference.is_some(),
                ),
                ("spec.suspension", self.suspension.is_some()),
                ("spec.schedulePriority", self.schedule_priority.is_some()),
                (
                    "spec.preserveResourcesOnDeletion",
                    self.preserve_resources_on_deletion == Some(true),
                ),
            ] {
                if present {
                    return Err(unsupported(field, "not implemented yet"));
                }
            }
            return Ok(Lifecycle::default());
        }
        // activationPreference is the placement's business (`super::affinities::lazy`).
        let failover = match self.failover {
            None | Some(Value::Null) => Failover::default(),
            Some(v) => typed::<RawFailover>(v, "spec.failover")?.check(version)?,
        };
        let suspension = match self.suspension {
            None | Some(Value::Null) => Suspension::default(),
            Some(v) => typed::<RawSuspension>(v, "spec.suspension")?.check()?,
        };
        let priority_class = match self.schedule_priority {
            None | Some(Value::Null) => None,
            Some(v) => Some(typed::<RawSchedulePriority>(v, "spec.schedulePriority")?.check()?),
        };
        Ok(Lifecycle {
            failover,
            suspension,
            preserve_on_deletion: self.preserve_resources_on_deletion == Some(true),
            priority_class,
        })
    }
}

fn seconds(v: i64, field: &str, min: i64) -> Result<u64, FieldError> {
    if !(min..=MAX_SECONDS).contains(&v) {
        return Err(FieldError::new(
            field,
            format!("must be between {min} and {MAX_SECONDS}"),
        ));
    }
    // In range and not negative: the conversion cannot fail.
    Ok(u64::try_from(v).unwrap_or_default())
}

/// Karmada's purge modes, the current names and the ones they replaced.
fn purge_mode(s: &str) -> Option<PurgeMode> {
    match s {
        "Immediately" | "Directly" => Some(PurgeMode::Immediately),
        "Graciously" | "Gracefully" => Some(PurgeMode::Graciously),
        "Never" => Some(PurgeMode::Never),
        _ => None,
    }
}

const STATE_PRESERVATION_WHY: &str = "it copies fields of the failed copy's live status onto the \
     new copy, and fedraft keeps only the replica counts and conditions members report, not \
     arbitrary status fields";

/// Most rules one `statePreservation` may hold: each is a value every report of the object
/// carries.
pub const MAX_PRESERVE_RULES: usize = 16;

/// Reads `statePreservation` (at `f`) as an entry of `version` means it.
fn state_preservation(
    raw: Option<&Value>,
    f: &str,
    version: u16,
) -> Result<Vec<PreserveRule>, FieldError> {
    let Some(raw) = raw.filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    if version < STATE_PRESERVATION_SINCE {
        return Err(unsupported(f, STATE_PRESERVATION_WHY));
    }
    let raw: RawStatePreservation = typed(raw, f)?;
    if raw.rules.len() > MAX_PRESERVE_RULES {
        return Err(FieldError::new(
            format!("{f}.rules"),
            format!("at most {MAX_PRESERVE_RULES} rules"),
        ));
    }
    let mut rules = Vec::with_capacity(raw.rules.len());
    for (i, r) in raw.rules.into_iter().enumerate() {
        let field = format!("{f}.rules[{i}]");
        let alias_field = format!("{field}.aliasLabelName");
        crate::policy::validate_label_key(&r.alias_label_name, &alias_field)?;
        if r.alias_label_name.starts_with(FEDRAFT_PREFIX) {
            return Err(FieldError::new(
                alias_field,
                format!("{FEDRAFT_PREFIX} labels are fedraft's own"),
            ));
        }
        let path = JsonPath::parse(&r.json_path)
            .map_err(|why| FieldError::new(format!("{field}.jsonPath"), why))?;
        rules.push(PreserveRule {
            alias: r.alias_label_name,
            path,
        });
    }
    Ok(rules)
}

/// The label prefix fedraft stamps on member copies; a rule may not write under it.
const FEDRAFT_PREFIX: &str = "fedraft.io/";

impl RawFailover {
    fn check(self, version: u16) -> Result<Failover, FieldError> {
        let mut out = Failover::default();
        if let Some(app) = self.application {
            let f = "spec.failover.application";
            out.application_preserve = state_preservation(
                app.state_preservation.as_ref(),
                &format!("{f}.statePreservation"),
                version,
            )?;
            let toleration_seconds =
                match app.decision_conditions.and_then(|d| d.toleration_seconds) {
                    None => DEFAULT_TOLERATION_SECONDS,
                    Some(s) => seconds(s, &format!("{f}.decisionConditions.tolerationSeconds"), 0)?,
                };
            let purge = match app.purge_mode.as_deref() {
                None => PurgeMode::Graciously,
                Some(s) => purge_mode(s).ok_or_else(|| {
                    FieldError::new(
                        format!("{f}.purgeMode"),
                        format!("{s:?}: must be Immediately, Graciously or Never"),
                    )
                })?,
            };
            let grace_period_seconds = match app.grace_period_seconds {
                None => DEFAULT_GRACE_PERIOD_SECONDS,
                Some(_) if purge != PurgeMode::Graciously => {
                    return Err(FieldError::new(
                        format!("{f}.gracePeriodSeconds"),
                        "only read with purgeMode Graciously",
                    ))
                }
                Some(s) => seconds(s, &format!("{f}.gracePeriodSeconds"), 1)?,
            };
            out.application = Some(AppFailover {
                toleration_seconds,
                purge,
                grace_period_seconds,
            });
        }
        if let Some(cluster) = self.cluster {
            let f = "spec.failover.cluster";
            out.cluster_preserve = state_preservation(
                cluster.state_preservation.as_ref(),
                &format!("{f}.statePreservation"),
                version,
            )?;
            out.cluster = Some(match cluster.purge_mode.as_deref() {
                None => PurgeMode::Graciously,
                Some(s) => match purge_mode(s) {
                    Some(m @ (PurgeMode::Immediately | PurgeMode::Graciously)) => m,
                    _ => {
                        return Err(FieldError::new(
                            format!("{f}.purgeMode"),
                            format!("{s:?}: must be Directly or Gracefully"),
                        ))
                    }
                },
            });
        }
        Ok(out)
    }
}

impl RawSuspension {
    fn check(self) -> Result<Suspension, FieldError> {
        let f = "spec.suspension";
        let all = self.dispatching == Some(true);
        let Some(on) = self.dispatching_on_clusters else {
            return Ok(Suspension {
                all,
                clusters: BTreeSet::new(),
            });
        };
        if all {
            return Err(FieldError::new(
                format!("{f}.dispatchingOnClusters"),
                "give dispatching or dispatchingOnClusters, not both",
            ));
        }
        let mut clusters = BTreeSet::new();
        for (i, name) in on.cluster_names.into_iter().enumerate() {
            let field = format!("{f}.dispatchingOnClusters.clusterNames[{i}]");
            validate_dns_label(&name, &field)?;
            clusters.insert(name);
        }
        Ok(Suspension { all, clusters })
    }
}

/// The built-in classes every Kubernetes cluster has, with their values.
pub const BUILT_IN_PRIORITY_CLASSES: [(&str, i64); 2] = [
    ("system-cluster-critical", 2_000_000_000),
    ("system-node-critical", 2_000_001_000),
];

impl RawSchedulePriority {
    fn check(self) -> Result<String, FieldError> {
        let f = "spec.schedulePriority";
        match self.priority_class_source.as_deref() {
            Some("KubePriorityClass") => {}
            None => {
                return Err(FieldError::new(
                    format!("{f}.priorityClassSource"),
                    "required (KubePriorityClass)",
                ))
            }
            Some(other) => {
                return Err(unsupported(
                    format!("{f}.priorityClassSource"),
                    &format!("{other:?}: only KubePriorityClass is read"),
                ))
            }
        }
        let name = self.priority_class_name.unwrap_or_default();
        if name.is_empty() {
            return Err(FieldError::new(
                format!("{f}.priorityClassName"),
                "required",
            ));
        }
        crate::policy::validate_dns_subdomain(&name, &format!("{f}.priorityClassName"))?;
        Ok(name)
    }
}
