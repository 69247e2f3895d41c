//! Per-cluster tenant quotas: what a tenant may use on one member cluster, on top of what it may
//! use in the whole fleet.
//!
//! Must not: decide anything. The scheduler caps a tenant's replicas on a cluster by it
//! (`state/handlers/cluster_quota.rs`) and members get it as their `ResourceQuota`
//! (`state/handlers/member_quota.rs`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{validate_dns_label, Extended, Resources};
use crate::error::FieldError;

/// The first log entry version whose tenants may carry per-cluster quotas, whose object puts
/// count a Duplicated object's cpu, memory and pods once per cluster it runs in (as extended
/// resources already were counted), and whose heartbeats reporting more capacity queue the
/// waiting objects in fair order (as deletes and detailed reports already did).
pub const PER_CLUSTER_QUOTA_SINCE: u16 = 9;

/// Most clusters one tenant may name in its per-cluster quotas: bounds the entry and the
/// scheduler's work per decision.
pub const MAX_QUOTA_CLUSTERS: usize = 1024;

/// A tenant's quota on one cluster. A zero dimension (or an absent extended resource) is not
/// limited there, beyond the tenant's whole quota.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterQuota {
    pub base: Resources,
    pub extended: Extended,
}

impl ClusterQuota {
    pub fn is_empty(&self) -> bool {
        self.base.is_zero() && self.extended.0.values().all(|n| *n == 0)
    }
}

/// Checks per-cluster quotas against the tenant's whole quota (`base`, `extended`): cluster
/// names are DNS labels, at most [`MAX_QUOTA_CLUSTERS`], and no limit exceeds a limited
/// dimension of the whole quota (it could never be used). Errors name
/// `FIELD.CLUSTER.RESOURCE`.
pub fn validate_per_cluster(
    per_cluster: &BTreeMap<String, ClusterQuota>,
    base: &Resources,
    extended: &Extended,
    field: &str,
) -> Result<(), FieldError> {
    if per_cluster.len() > MAX_QUOTA_CLUSTERS {
        return Err(FieldError::new(
            field,
            format!("at most {MAX_QUOTA_CLUSTERS} clusters"),
        ));
    }
    for (cluster, q) in per_cluster {
        let at = format!("{field}.{cluster}");
        validate_dns_label(cluster, &at)?;
        q.extended.validate(&at)?;
        for (what, have, cap) in [
            ("cpu", q.base.cpu_millis, base.cpu_millis),
            ("memory", q.base.memory_bytes, base.memory_bytes),
            ("pods", q.base.pods, base.pods),
        ] {
            if cap > 0 && have > cap {
                return Err(FieldError::new(
                    format!("{at}.{what}"),
                    format!("{have} is more than the tenant's quota {cap}"),
                ));
            }
        }
        for (name, &have) in &q.extended.0 {
            let cap = extended.get(name);
            if cap > 0 && have > cap {
                return Err(FieldError::new(
                    format!("{at}.{name}"),
                    format!("{have} is more than the tenant's quota {cap}"),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_per_cluster_limit_above_the_whole_quota_names_its_field() {
        let base = Resources {
            cpu_millis: 4000,
            ..Resources::ZERO
        };
        let ext = Extended::from_pairs([("nvidia.com/gpu", 8)]);
        let mut per = BTreeMap::new();
        per.insert(
            "dc1".to_string(),
            ClusterQuota {
                base: Resources {
                    cpu_millis: 2000,
                    memory_bytes: 1 << 30,
                    pods: 0,
                },
                extended: Extended::from_pairs([("nvidia.com/gpu", 4)]),
            },
        );
        assert!(validate_per_cluster(&per, &base, &ext, "perCluster").is_ok());
        per.insert(
            "dc2".to_string(),
            ClusterQuota {
                base: Resources::ZERO,
                extended: Extended::from_pairs([("nvidia.com/gpu", 9)]),
            },
        );
        let e = validate_per_cluster(&per, &base, &ext, "perCluster").unwrap_err();
        assert_eq!(e.field, "perCluster.dc2.nvidia.com/gpu");
        per.remove("dc2");
        per.insert("Bad".to_string(), ClusterQuota::default());
        let e = validate_per_cluster(&per, &base, &ext, "perCluster").unwrap_err();
        assert_eq!(e.field, "perCluster.Bad");
    }
}
