//! Simulated nodes with extended resources (GPUs): groups of nodes whose allocatable carries
//! an extended resource such as `nvidia.com/gpu`, given at start (`--extended-nodes 2x4`,
//! `8x1:amd.com/gpu`) so a test can build members with GPU nodes of different sizes.
//!
//! Must not: schedule by extended resources (the simulator's packing reads cpu, memory and
//! pods only); the nodes exist so that fedraft's capacity scan sees them.

use serde_json::{json, Value};

use crate::SimError;

/// The extended resource a group names when it names none.
pub const DEFAULT_RESOURCE: &str = "nvidia.com/gpu";

/// `count` nodes, each with `amount` of `resource` allocatable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedNodes {
    pub count: u32,
    pub amount: u64,
    pub resource: String,
}

impl std::str::FromStr for ExtendedNodes {
    type Err = SimError;

    /// `COUNTxAMOUNT` or `COUNTxAMOUNT:RESOURCE`.
    fn from_str(s: &str) -> Result<Self, SimError> {
        let bad = || {
            SimError::Config(format!(
                "extended nodes {s:?}: expected COUNTxAMOUNT[:RESOURCE], e.g. 2x4:nvidia.com/gpu"
            ))
        };
        let (sizes, resource) = match s.split_once(':') {
            Some((a, r)) if r.contains('/') => (a, r.to_string()),
            Some(_) => return Err(bad()),
            None => (s, DEFAULT_RESOURCE.to_string()),
        };
        let (count, amount) = sizes.split_once('x').ok_or_else(bad)?;
        Ok(ExtendedNodes {
            count: count.trim().parse().map_err(|_| bad())?,
            amount: amount.trim().parse().map_err(|_| bad())?,
            resource,
        })
    }
}

/// `node` (a generated node object) with `group`'s resource added to its capacity and
/// allocatable, and a label saying how many it has.
pub fn with_extended(mut node: Value, group: &ExtendedNodes) -> Value {
    let amount = group.amount.to_string();
    for part in ["capacity", "allocatable"] {
        if let Some(map) = node
            .pointer_mut(&format!("/status/{part}"))
            .and_then(Value::as_object_mut)
        {
            map.insert(group.resource.clone(), json!(amount));
        }
    }
    if let Some(labels) = node
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.insert(
            "kubesim.fedraft.io/extended".into(),
            json!(format!("{}-{}", group.resource.replace('/', "_"), amount)),
        );
    }
    node
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_parse_and_reach_allocatable() {
        let g: ExtendedNodes = "2x4".parse().unwrap();
        assert_eq!(
            g,
            ExtendedNodes {
                count: 2,
                amount: 4,
                resource: DEFAULT_RESOURCE.into()
            }
        );
        let amd: ExtendedNodes = "8x1:amd.com/gpu".parse().unwrap();
        assert_eq!(amd.resource, "amd.com/gpu");
        for bad in ["4", "x4", "2x", "2x4:gpu"] {
            assert!(bad.parse::<ExtendedNodes>().is_err(), "{bad}");
        }
        let node = crate::controller::node_object("dc1", 0, "8", "32Gi", 110);
        let node = with_extended(node, &g);
        assert_eq!(
            node.pointer("/status/allocatable/nvidia.com~1gpu"),
            Some(&json!("4"))
        );
    }
}
