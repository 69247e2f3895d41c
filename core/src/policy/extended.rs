//! Extended resources (`nvidia.com/gpu`, `amd.com/gpu`, any domain-prefixed name) and the
//! node-level headroom a capacity scan reports, with the arithmetic fit checks need.
//!
//! Owns: `Extended` (whole units per resource name), `NodeShape` (how many nodes have exactly
//! this much free), `ExtendedCapacity` (one cluster's extended sums and node shapes) and
//! [`replicas_fit`], the one definition of "how many replicas of this shape fit here".
//!
//! Why apart from `Resources`: `Resources` is a `Copy` triple carried by every log entry since
//! the first, on the hot paths of apply and schedule. Extended resources are rare, named and
//! open-ended, so they travel in types and commands of their own (log entry version
//! [`EXTENDED_SINCE`]) and cost nothing to objects and clusters that do not use them.
//!
//! Must not: read JSON or decide placement; amounts are integers, maps are ordered.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{validate_dns_subdomain, validate_label_key, Resources};
use crate::error::FieldError;

/// The first log entry version whose objects' extended requests count, whose tenants may
/// carry extended quotas and whose executors report extended capacity and node shapes. An
/// older entry's template asked for nothing fedraft counted, and replays that way.
pub const EXTENDED_SINCE: u16 = 7;

/// Most node shapes one cluster reports: a 5,000-node member with many distinct free amounts is
/// folded into this many (see [`compact_shapes`]), so a report stays a few KiB.
pub const MAX_NODE_SHAPES: usize = 32;

/// Most extended resource names one report, request or quota may carry.
pub const MAX_EXTENDED_NAMES: usize = 32;

/// Checks an extended resource name with Kubernetes' rules: a qualified name with a domain
/// prefix (`vendor.example/thing`), outside the reserved `kubernetes.io` domain and not starting
/// with `requests.` (the quota form of a name).
pub fn validate_extended_name(name: &str, field: &str) -> Result<(), FieldError> {
    let Some((prefix, _)) = name.split_once('/') else {
        return Err(FieldError::new(
            field,
            format!("{name:?} is not an extended resource name: it needs a domain prefix, as in nvidia.com/gpu"),
        ));
    };
    validate_label_key(name, field)?;
    validate_dns_subdomain(prefix, field)?;
    if prefix == "kubernetes.io" || prefix.ends_with(".kubernetes.io") {
        return Err(FieldError::new(
            field,
            format!("{name:?} is in the reserved kubernetes.io domain"),
        ));
    }
    if prefix.starts_with("requests.") {
        return Err(FieldError::new(
            field,
            format!("{name:?} must not start with \"requests.\""),
        ));
    }
    Ok(())
}

/// Whole units of extended resources by name. A name absent and a name at zero mean the same;
/// operations keep zeros out so equal amounts compare equal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Extended(pub BTreeMap<String, u64>);

/// No extended resources, to borrow where a request asks for none.
pub static NO_EXTENDED: Extended = Extended(BTreeMap::new());

impl Extended {
    pub fn new() -> Self {
        Self::default()
    }

    /// From (name, amount) pairs; zeros are dropped, a repeated name adds up.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, u64)>) -> Self {
        let mut out = Extended::new();
        for (name, n) in pairs {
            out.add(name, n);
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, name: &str) -> u64 {
        self.0.get(name).copied().unwrap_or(0)
    }

    pub fn add(&mut self, name: &str, n: u64) {
        if n == 0 {
            return;
        }
        let slot = self.0.entry(name.to_string()).or_insert(0);
        *slot = slot.saturating_add(n);
    }

    /// Keeps the larger amount per name (init containers run one at a time).
    pub fn max_with(&mut self, other: &Extended) {
        for (name, &n) in &other.0 {
            let slot = self.0.entry(name.clone()).or_insert(0);
            *slot = (*slot).max(n);
        }
    }

    pub fn saturating_add(&self, other: &Extended) -> Extended {
        let mut out = self.clone();
        for (name, &n) in &other.0 {
            out.add(name, n);
        }
        out
    }

    pub fn saturating_sub(&self, other: &Extended) -> Extended {
        Extended(
            self.0
                .iter()
                .map(|(name, &n)| (name.clone(), n.saturating_sub(other.get(name))))
                .filter(|(_, n)| *n > 0)
                .collect(),
        )
    }

    pub fn saturating_mul(&self, k: u64) -> Extended {
        if k == 0 {
            return Extended::new();
        }
        Extended(
            self.0
                .iter()
                .map(|(name, &n)| (name.clone(), n.saturating_mul(k)))
                .collect(),
        )
    }

    /// How many times `per` fits: the minimum over the names `per` asks for (a name missing
    /// here holds zero); `u64::MAX` when `per` asks for nothing.
    pub fn fits_times(&self, per: &Extended) -> u64 {
        per.0
            .iter()
            .filter(|(_, &need)| need > 0)
            .map(|(name, &need)| self.get(name) / need)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// The names where `self` exceeds a `limit` that names them (a name the limit does not
    /// name is not limited), as (name, have, limit).
    pub fn over<'a>(&'a self, limit: &'a Extended) -> impl Iterator<Item = (&'a str, u64, u64)> {
        limit
            .0
            .iter()
            .filter(|(_, &cap)| cap > 0)
            .filter_map(|(name, &cap)| {
                let have = self.get(name);
                (have > cap).then_some((name.as_str(), have, cap))
            })
    }

    pub fn validate(&self, field_prefix: &str) -> Result<(), FieldError> {
        if self.0.len() > MAX_EXTENDED_NAMES {
            return Err(FieldError::new(
                field_prefix,
                format!("at most {MAX_EXTENDED_NAMES} extended resources"),
            ));
        }
        for name in self.0.keys() {
            validate_extended_name(name, &format!("{field_prefix}.{name}"))?;
        }
        Ok(())
    }
}

/// `count` Ready, schedulable nodes of one member with exactly this much free for fedraft.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeShape {
    pub count: u32,
    pub free: Resources,
    #[serde(default)]
    pub extended: Extended,
}

impl NodeShape {
    /// Replicas of (`per`, `per_ext`) one such node holds.
    fn holds(&self, per: &Resources, per_ext: &Extended) -> u64 {
        self.free
            .fits_times(per)
            .min(self.extended.fits_times(per_ext))
    }
}

/// What a capacity scan saw beyond the cluster sums of `model::Capacity`: the extended
/// resources' sums and the free amount of each node, grouped into shapes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtendedCapacity {
    /// Extended resources of the Ready, schedulable nodes.
    #[serde(default)]
    pub allocatable: Extended,
    /// `allocatable` minus what the running pods fedraft does not manage request.
    #[serde(default)]
    pub available: Extended,
    /// Free per node (allocatable minus the requests of every running pod on it), largest
    /// first, at most [`MAX_NODE_SHAPES`].
    #[serde(default)]
    pub nodes: Vec<NodeShape>,
}

impl ExtendedCapacity {
    pub fn validate(&self, field_prefix: &str) -> Result<(), FieldError> {
        self.allocatable
            .validate(&format!("{field_prefix}.allocatable"))?;
        self.available
            .validate(&format!("{field_prefix}.available"))?;
        if self.nodes.len() > MAX_NODE_SHAPES {
            return Err(FieldError::new(
                format!("{field_prefix}.nodes"),
                format!("at most {MAX_NODE_SHAPES} node shapes"),
            ));
        }
        for (i, n) in self.nodes.iter().enumerate() {
            n.extended
                .validate(&format!("{field_prefix}.nodes[{i}].extended"))?;
        }
        Ok(())
    }

    /// The largest free amount of `name` on any one node.
    pub fn largest_chunk(&self, name: &str) -> u64 {
        self.nodes
            .iter()
            .map(|n| n.extended.get(name))
            .max()
            .unwrap_or(0)
    }
}

/// Groups per-node free amounts into at most [`MAX_NODE_SHAPES`] shapes, largest first. Beyond
/// the limit, the smallest shapes fold into one whose amounts are their minimum per dimension:
/// a fold only ever under-states what a node holds, so a fit it allows is a real one.
pub fn compact_shapes(free: impl IntoIterator<Item = (Resources, Extended)>) -> Vec<NodeShape> {
    let mut groups: BTreeMap<ShapeKey, u32> = BTreeMap::new();
    for (r, e) in free {
        let c = groups.entry(ShapeKey(r, e)).or_insert(0);
        *c = c.saturating_add(1);
    }
    // Largest first: by total extended units, then cpu, memory, pods, then names.
    let mut shapes: Vec<NodeShape> = groups
        .into_iter()
        .map(|(ShapeKey(free, extended), count)| NodeShape {
            count,
            free,
            extended,
        })
        .collect();
    shapes.sort_by(|a, b| {
        let weight = |s: &NodeShape| {
            (
                s.extended
                    .0
                    .values()
                    .fold(0u64, |a, n| a.saturating_add(*n)),
                s.free.cpu_millis,
                s.free.memory_bytes,
                s.free.pods,
            )
        };
        weight(b)
            .cmp(&weight(a))
            .then_with(|| b.extended.0.cmp(&a.extended.0))
    });
    if shapes.len() > MAX_NODE_SHAPES {
        let rest = shapes.split_off(MAX_NODE_SHAPES - 1);
        let mut folded = rest[0].clone();
        for s in &rest[1..] {
            folded.count = folded.count.saturating_add(s.count);
            folded.free = Resources {
                cpu_millis: folded.free.cpu_millis.min(s.free.cpu_millis),
                memory_bytes: folded.free.memory_bytes.min(s.free.memory_bytes),
                pods: folded.free.pods.min(s.free.pods),
            };
            folded.extended = Extended(
                folded
                    .extended
                    .0
                    .iter()
                    .map(|(name, &n)| (name.clone(), n.min(s.extended.get(name))))
                    .filter(|(_, n)| *n > 0)
                    .collect(),
            );
        }
        shapes.push(folded);
    }
    shapes
}

/// Orders shapes for grouping only (`Resources` has no `Ord`).
#[derive(PartialEq, Eq)]
struct ShapeKey(Resources, Extended);

impl PartialOrd for ShapeKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ShapeKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let k = |s: &ShapeKey| (s.0.cpu_millis, s.0.memory_bytes, s.0.pods);
        k(self)
            .cmp(&k(other))
            .then_with(|| self.1 .0.cmp(&other.1 .0))
    }
}

/// Replicas of one shape (`per` plus `per_ext`) a cluster may hold in total, from what its
/// scan reported:
///
/// - the cluster sums: `free_ext` (extended available minus what fedraft's other placements
///   booked) must hold `per_ext` that many times (`Resources` sums are the caller's, as before);
/// - the nodes: each replica must fit on one node, so the count is the sum over nodes of the
///   replicas each holds. The shapes count every running pod, this object's too, so its
///   `current` replicas there are added back: a replica that runs already holds its place.
///
/// Without a report (`None`) only a replica that asks for no extended resource fits, without
/// a limit (`u64::MAX`).
pub fn replicas_fit(
    report: Option<&ExtendedCapacity>,
    free_ext: &Extended,
    per: &Resources,
    per_ext: &Extended,
    current: u32,
) -> u64 {
    let Some(report) = report else {
        return if per_ext.is_empty() { u64::MAX } else { 0 };
    };
    let sums = free_ext.fits_times(per_ext);
    if report.nodes.is_empty() {
        return sums;
    }
    let on_nodes = report.nodes.iter().fold(0u64, |acc, n| {
        acc.saturating_add(n.holds(per, per_ext).saturating_mul(u64::from(n.count)))
    });
    sums.min(on_nodes.saturating_add(u64::from(current)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus(n: u64) -> Extended {
        Extended::from_pairs([("nvidia.com/gpu", n)])
    }

    fn node(count: u32, cpu: u64, g: u64) -> NodeShape {
        NodeShape {
            count,
            free: Resources {
                cpu_millis: cpu,
                memory_bytes: 64 << 30,
                pods: 110,
            },
            extended: gpus(g),
        }
    }

    #[test]
    fn names_follow_kubernetes_rules() {
        for ok in ["nvidia.com/gpu", "amd.com/gpu", "example.org/fpga-x1"] {
            assert!(validate_extended_name(ok, "f").is_ok(), "{ok}");
        }
        for bad in [
            "gpu",
            "nvidia.com/",
            "kubernetes.io/gpu",
            "node.kubernetes.io/x",
            "requests.nvidia.com/gpu",
            "nvidia.com/g pu",
            "-bad.com/x",
        ] {
            let e = validate_extended_name(bad, "spec.quota").unwrap_err();
            assert_eq!(e.field, "spec.quota", "{bad}");
        }
    }

    #[test]
    fn a_four_gpu_replica_needs_a_four_gpu_node() {
        let per = Resources {
            cpu_millis: 1000,
            ..Resources::ZERO
        };
        let ones = ExtendedCapacity {
            allocatable: gpus(8),
            available: gpus(8),
            nodes: vec![node(8, 8000, 1)],
        };
        assert_eq!(replicas_fit(Some(&ones), &gpus(8), &per, &gpus(4), 0), 0);
        assert_eq!(replicas_fit(Some(&ones), &gpus(8), &per, &gpus(1), 0), 8);
        let mixed = ExtendedCapacity {
            allocatable: gpus(12),
            available: gpus(12),
            nodes: vec![node(1, 8000, 8), node(4, 8000, 1)],
        };
        assert_eq!(replicas_fit(Some(&mixed), &gpus(12), &per, &gpus(4), 0), 2);
        // Booked elsewhere: the sums bind first.
        assert_eq!(replicas_fit(Some(&mixed), &gpus(4), &per, &gpus(4), 0), 1);
        // Its own replica already runs on the big node: it keeps its place.
        let busy = ExtendedCapacity {
            nodes: vec![node(1, 8000, 4), node(4, 8000, 1)],
            ..mixed.clone()
        };
        assert_eq!(replicas_fit(Some(&busy), &gpus(12), &per, &gpus(4), 1), 2);
        // CPU per node binds too, for replicas without extended requests.
        let big_cpu = Resources {
            cpu_millis: 9000,
            ..Resources::ZERO
        };
        assert_eq!(
            replicas_fit(
                Some(&mixed),
                &Extended::new(),
                &big_cpu,
                &Extended::new(),
                0
            ),
            0
        );
        assert_eq!(replicas_fit(None, &Extended::new(), &per, &gpus(1), 0), 0);
        assert_eq!(
            replicas_fit(None, &Extended::new(), &per, &Extended::new(), 0),
            u64::MAX
        );
    }

    #[test]
    fn compaction_only_understates() {
        let many = (0..100u64).map(|i| {
            (
                Resources {
                    cpu_millis: 1000 + i,
                    memory_bytes: 1 << 30,
                    pods: 10,
                },
                gpus(i % 3),
            )
        });
        let shapes = compact_shapes(many);
        assert_eq!(shapes.len(), MAX_NODE_SHAPES);
        assert_eq!(shapes.iter().map(|s| u64::from(s.count)).sum::<u64>(), 100);
        let last = shapes.last().unwrap();
        assert_eq!(last.extended, Extended::new());
        assert_eq!(shapes[0].extended, gpus(2));
        let same = compact_shapes(std::iter::repeat_n((Resources::ZERO, gpus(1)), 5));
        assert_eq!(same.len(), 1);
        assert_eq!(same[0].count, 5);
    }

    #[test]
    fn arithmetic_keeps_zeros_out() {
        let a = gpus(4);
        assert_eq!(a.saturating_sub(&gpus(4)), Extended::new());
        assert_eq!(a.saturating_mul(0), Extended::new());
        assert_eq!(a.fits_times(&Extended::new()), u64::MAX);
        let (five, four) = (gpus(5), gpus(4));
        let over: Vec<_> = five.over(&four).collect();
        assert_eq!(over, vec![("nvidia.com/gpu", 5, 4)]);
        assert_eq!(gpus(5).over(&Extended::new()).count(), 0);
    }
}
