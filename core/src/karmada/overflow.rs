//! Karmada's `placement.clusterAffinities[].overflowAffinities` (Karmada v1.18, "hybrid cloud
//! overflow scheduling"), read from log entry version `OVERFLOW_AFFINITIES_SINCE` on.
//!
//! What Karmada means by it (its API comments, the overflow proposal, its user guide, its
//! validation and scheduler), in short:
//! - An affinity term's own cluster affinity is its primary group; `overflowAffinities` lists
//!   further groups, each with an `affinityName` and a cluster affinity of its own, in order of
//!   preference. They do not replace the ordered groups of `clusterAffinities`: the term as a
//!   whole (primary plus its overflow groups) is one candidate, and only when all of its tiers
//!   together cannot hold the replicas does scheduling move on to the next term, as before.
//! - Replicas fill the primary group first. What it cannot hold goes to the first overflow
//!   group, up to that group's capacity, the rest to the next, and so on; inside a group the
//!   replicas are divided as the policy's `replicaScheduling` says. Replicas left over after
//!   the last group make the term fail.
//! - A cluster's capacity counts the replicas it already runs, so a scale down gives up the
//!   replicas of the last overflow group first and a scale up fills earlier groups first.
//!   Capacity coming back to the primary group moves nothing by itself (no flapping): the next
//!   time the workload is scheduled (a scale, a policy change, a rebalance) the primary is
//!   filled again first and the overflow groups shrink.
//! - A cluster selected by several groups belongs to the first of them (the primary before
//!   any overflow group). A primary cluster that fails leaves its replicas to the tiers after
//!   it.
//! - Only `Divided` with a division that knows capacity: `Weighted` with `dynamicWeight`, or
//!   `Aggregated`. Duplicated and static weights are refused. The primary's own cluster
//!   affinity may not be empty; overflow names are label keys, unique within the term and
//!   different from the term's own name. A workload without replicas (a ConfigMap, a Service)
//!   uses the primary group only.
//!
//! fedraft's mapping: each overflow group becomes a tier of clusters (`scheduler::Overflow`)
//! kept on the affinity group it belongs to, never in the stored placement (so
//! `affinity_groups::group_in_use` keeps finding the group by its placement); the state
//! machine hands the tiers of the group in use to the scheduler, which fills them in order
//! from the clusters' reported capacity (`scheduler/rules/overflow.rs`) and records which
//! term each cluster's replicas came from. Refused besides what Karmada refuses, because
//! fedraft could not honour them as Karmada does: `spreadConstraints` together with overflow
//! groups, and two affinity terms whose primary groups select the same clusters when one of
//! them has overflow groups (the group in use is told apart by its clusters).
//!
//! Must not: decide placement, or read the field for entries before
//! `OVERFLOW_AFFINITIES_SINCE` (they are refused it in the words they were refused with).

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::Value;

use super::propagation::{ClusterAffinity, FieldSelector};
use super::{typed, unsupported, OVERFLOW_AFFINITIES_SINCE};
use crate::error::FieldError;
use crate::policy::{validate_label_key, Division, LabelSelector, Placement, ReplicaMode};
use crate::scheduler::{Overflow, OverflowTier};

/// Karmada's `OverflowClusterAffinity`: a `ClusterAffinity` with a name.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawOverflowTerm {
    #[serde(default)]
    affinity_name: String,
    #[serde(default)]
    label_selector: Option<LabelSelector>,
    #[serde(default)]
    field_selector: Option<FieldSelector>,
    #[serde(default)]
    cluster_names: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
}

/// A term's overflow groups as read: each name and cluster affinity, in order.
pub(super) type RawOverflow = Vec<(String, ClusterAffinity)>;

/// `overflowAffinities` of the term named `primary` at `field` (`...clusterAffinities[i]`).
/// `primary_empty`: the term's own cluster affinity selects by nothing.
pub(super) fn read(
    value: Option<Value>,
    primary: &str,
    primary_empty: bool,
    field: &str,
    version: u16,
) -> Result<Option<RawOverflow>, FieldError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let f = format!("{field}.overflowAffinities");
    if version < OVERFLOW_AFFINITIES_SINCE {
        return Err(unsupported(
            f,
            "a group's replicas do not overflow into further tiers; list the overflow \
             clusters as a later group (used when this one cannot hold the replicas) or \
             in this group with dynamicWeight: AvailableReplicas",
        ));
    }
    let raw: Vec<RawOverflowTerm> = typed(&value, &f)?;
    if primary_empty {
        return Err(FieldError::new(
            f,
            "needs the group's own clusters (clusterNames, labelSelector, fieldSelector or \
             exclude) as the primary tier it overflows from",
        ));
    }
    let mut names = BTreeSet::from([primary.to_string()]);
    let mut out = Vec::with_capacity(raw.len());
    for (i, t) in raw.into_iter().enumerate() {
        let name_field = format!("{f}[{i}].affinityName");
        if t.affinity_name.is_empty() {
            return Err(FieldError::new(name_field, "required"));
        }
        validate_label_key(&t.affinity_name, &name_field)?;
        if !names.insert(t.affinity_name.clone()) {
            return Err(FieldError::new(
                name_field,
                format!(
                    "{:?} names the group or another of its overflow groups",
                    t.affinity_name
                ),
            ));
        }
        out.push((
            t.affinity_name,
            ClusterAffinity::new(
                t.label_selector,
                t.field_selector,
                t.cluster_names,
                t.exclude,
            ),
        ));
    }
    Ok(Some(out))
}

/// The tiers of a group whose primary is `primary`, each overflow group's clusters read as a
/// placement's (`apply` is `propagation::apply_affinity`).
pub(super) fn tiers(
    primary: &str,
    raw: RawOverflow,
    field: &str,
    mut apply: impl FnMut(&mut Placement, ClusterAffinity, &str) -> Result<(), FieldError>,
) -> Result<Overflow, FieldError> {
    let mut tiers = Vec::with_capacity(raw.len());
    for (i, (name, aff)) in raw.into_iter().enumerate() {
        let f = format!("{field}.overflowAffinities[{i}]");
        let mut p = Placement::default();
        apply(&mut p, aff, &f)?;
        p.validate(&f)?;
        tiers.push(OverflowTier {
            name,
            clusters: p.clusters,
            cluster_selector: p.cluster_selector.map(|s| *s),
        });
    }
    Ok(Overflow {
        primary: primary.to_string(),
        tiers,
    })
}

/// What the whole placement must be for a group at `field` to have overflow groups: Divided
/// by capacity (Karmada's rule), without spread constraints.
pub(super) fn check_placement(placement: &Placement, field: &str) -> Result<(), FieldError> {
    let f = format!("{field}.overflowAffinities");
    let by_capacity = placement
        .replicas
        .division
        .as_deref()
        .is_some_and(Division::by_capacity);
    if placement.replicas.mode != ReplicaMode::Divided || !by_capacity {
        return Err(FieldError::new(
            f,
            "overflow groups need replicaScheduling Divided with dynamicWeight: \
             AvailableReplicas or replicaDivisionPreference: Aggregated (a tier is full \
             only by its clusters' capacity), as in Karmada",
        ));
    }
    if !placement.spread_constraints.is_empty() {
        return Err(unsupported(
            f,
            "overflow groups together with spreadConstraints; spread the replicas within \
             one group, or leave spreadConstraints out",
        ));
    }
    Ok(())
}

/// Two groups whose primary tiers select the same clusters cannot be told apart by the
/// placement an object stores; refused when either has overflow groups. `groups`: each
/// group's placement and whether it has overflow groups.
pub(super) fn check_distinct(groups: &[(&Placement, bool)], field: &str) -> Result<(), FieldError> {
    for (j, (b, b_tiers)) in groups.iter().enumerate() {
        let same = groups[..j].iter().position(|(a, a_tiers)| {
            (*a_tiers || *b_tiers)
                && a.clusters == b.clusters
                && a.cluster_selector == b.cluster_selector
        });
        if let Some(i) = same {
            return Err(unsupported(
                format!("{field}[{j}]"),
                &format!(
                    "this group selects the same clusters as {field}[{i}], and one of them \
                     has overflowAffinities; fedraft tells groups apart by their clusters"
                ),
            ));
        }
    }
    Ok(())
}
