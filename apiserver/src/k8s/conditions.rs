//! What a federated workload's status shows of its progress: the federation rollout's view
//! (`RolloutView`, the revision each member runs), and a Deployment's `Available` and
//! `Progressing` conditions from the replica counts summed over its members, so tools that
//! judge readiness by conditions (Helm's `--wait`, kstatus, Argo CD, Flux) see a ready
//! Deployment where the members hold one.
//!
//! Must not: hold the state beyond `RolloutView::load` (it is cloned out under the lock).

use std::collections::BTreeMap;

use fedraft_core::door::ResourceKey;
use fedraft_core::rollout::Phase;
use fedraft_core::state::State;
use serde_json::{json, Value};

/// What a template's status shows of its rollout (kept small: it is cloned under the lock).
#[derive(Debug, Clone)]
pub struct RolloutView {
    pub phase: Phase,
    pub reason: String,
    pub target: u32,
    /// Per cluster: the revision it should run, and what it last reported.
    pub clusters: BTreeMap<String, (u32, Option<Reported>)>,
}

/// One cluster's report of the workload, as far as the rolled-out counts need it.
#[derive(Debug, Clone, Copy)]
pub struct Reported {
    pub revision: Option<u32>,
    /// The member's controller has seen its latest spec.
    pub caught_up: bool,
    pub updated: u32,
    pub available: u32,
}

impl RolloutView {
    pub fn load(s: &State, key: &ResourceKey) -> Option<Box<RolloutView>> {
        let (ns, name) = (key.object_namespace(), key.object_name());
        let rec = s.rollout(ns, &name)?;
        let reports = s.workload_status(ns, &name);
        let obj = s.object(ns, &name)?;
        let clusters = obj
            .status
            .clusters
            .iter()
            .map(|p| {
                let w = reports.and_then(|m| m.get(&*p.cluster)).map(|w| Reported {
                    revision: w.observed.revision,
                    caught_up: w.observed.observed_generation >= w.observed.generation,
                    updated: w.observed.updated,
                    available: w.observed.available,
                });
                (String::from(&*p.cluster), (rec.revision_for(&p.cluster), w))
            })
            .collect();
        Some(Box::new(RolloutView {
            phase: rec.phase,
            reason: rec.reason.clone(),
            target: rec.target,
            clusters,
        }))
    }

    /// Replicas on `cluster` that run the target revision, as its member reports them.
    pub fn updated_on(&self, cluster: &str, replicas: u32) -> u32 {
        match self.clusters.get(cluster) {
            Some((want, Some(r)))
                if *want == self.target && r.revision == Some(self.target) && r.caught_up =>
            {
                r.updated.min(replicas)
            }
            _ => 0,
        }
    }

    pub fn available_on(&self, cluster: &str, replicas: u32) -> u32 {
        match self.clusters.get(cluster) {
            Some((_, Some(r))) => r.available.min(replicas),
            _ => 0,
        }
    }

    /// Kubernetes' `Progressing` condition for the rollout: kubectl's `rollout status` stops
    /// with an error on reason `ProgressDeadlineExceeded`, which is what a failed gate is.
    pub fn progressing(&self) -> Value {
        let (status, reason, message) = match self.phase {
            Phase::Complete => (
                "True",
                "NewReplicaSetAvailable",
                format!("revision {} rolled out to every cluster", self.target),
            ),
            Phase::Progressing => (
                "True",
                "ReplicaSetUpdated",
                format!("rolling out revision {} in waves", self.target),
            ),
            Phase::Paused if self.reason.starts_with("paused by") => {
                ("Unknown", "DeploymentPaused", self.reason.clone())
            }
            Phase::Paused => ("False", "ProgressDeadlineExceeded", self.reason.clone()),
            Phase::Aborted => ("False", "RolloutAborted", self.reason.clone()),
            Phase::RolledBack => ("False", "RolloutRolledBack", self.reason.clone()),
        };
        json!({"type": "Progressing", "status": status, "reason": reason, "message": message})
    }
}

/// Replica counts of one federated workload, summed over the members.
#[derive(Debug, Clone, Copy)]
pub struct Counts {
    pub replicas: u32,
    pub updated: u32,
    pub available: u32,
}

/// `Available` as the Deployment controller sets it: true once at least `replicas` less the
/// strategy's `maxUnavailable` replicas are available.
pub fn available(spec: Option<&Value>, c: Counts) -> Value {
    let needed = c.replicas.saturating_sub(max_unavailable(spec, c.replicas));
    if c.available >= needed {
        json!({"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
            "message": "Deployment has minimum availability."})
    } else {
        json!({"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
            "message": format!("{} of {needed} replicas needed are available.", c.available)})
    }
}

/// `Progressing` without a federation rollout: complete once every placed replica is updated
/// and available on its member.
pub fn progressing(c: Counts) -> Value {
    if c.updated >= c.replicas && c.available >= c.replicas {
        json!({"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
            "message": "every member runs the current template with all replicas available"})
    } else {
        json!({"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated",
            "message": format!("{} of {} replicas updated and {} available on the members",
                c.updated, c.replicas, c.available)})
    }
}

/// The strategy's `maxUnavailable` over `replicas`: an integer, or a percentage rounded down
/// (25 % when unset), and none for `Recreate`, as Kubernetes computes it.
fn max_unavailable(spec: Option<&Value>, replicas: u32) -> u32 {
    let strategy = spec.and_then(|s| s.get("strategy"));
    if strategy.and_then(|s| s.get("type")).and_then(Value::as_str) == Some("Recreate") {
        return 0;
    }
    let value = strategy.and_then(|s| s.pointer("/rollingUpdate/maxUnavailable"));
    let n = match value {
        Some(Value::Number(n)) => n.as_u64().map_or(0, |n| n.min(u64::from(replicas))),
        Some(Value::String(p)) => percent_of(p, replicas),
        _ => percent_of("25%", replicas),
    };
    u32::try_from(n).unwrap_or(replicas)
}

fn percent_of(p: &str, replicas: u32) -> u64 {
    p.strip_suffix('%')
        .and_then(|n| n.parse::<u64>().ok())
        .map_or(0, |pct| u64::from(replicas) * pct.min(100) / 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(replicas: u32, updated: u32, available: u32) -> Counts {
        Counts {
            replicas,
            updated,
            available,
        }
    }

    #[test]
    fn available_allows_the_strategys_unavailable_replicas() {
        let status = |spec: Value, c| available(Some(&spec), c)["status"].clone();
        // Default 25 % of 8: 6 available are enough, 5 are not.
        assert_eq!(status(json!({}), counts(8, 8, 6)), "True");
        assert_eq!(status(json!({}), counts(8, 8, 5)), "False");
        let ru = |v: Value| json!({"strategy": {"rollingUpdate": {"maxUnavailable": v}}});
        assert_eq!(status(ru(json!(0)), counts(4, 4, 3)), "False");
        assert_eq!(status(ru(json!(2)), counts(4, 4, 2)), "True");
        assert_eq!(status(ru(json!("50%")), counts(4, 4, 2)), "True");
        assert_eq!(status(ru(json!("bad")), counts(4, 4, 3)), "False");
        let recreate = json!({"strategy": {"type": "Recreate"}});
        assert_eq!(status(recreate, counts(3, 3, 2)), "False");
        assert_eq!(available(None, counts(0, 0, 0))["status"], "True");
    }

    #[test]
    fn progressing_completes_when_every_replica_is_updated_and_available() {
        assert_eq!(
            progressing(counts(4, 4, 4))["reason"],
            "NewReplicaSetAvailable"
        );
        assert_eq!(progressing(counts(4, 4, 3))["reason"], "ReplicaSetUpdated");
        assert_eq!(progressing(counts(4, 2, 4))["reason"], "ReplicaSetUpdated");
    }
}
