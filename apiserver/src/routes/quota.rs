//! Tenant quotas as the API reads them, and the tenant's view of the wait queue
//! (`GET /v1/tenants/{name}/queue`).
//!
//! A quota is one JSON object in either form, or both mixed: the original integers
//! (`cpuMillis`, `memoryBytes`, `pods`) or Kubernetes quantities (`cpu: "100"`,
//! `memory: "512Gi"`, `pods: 50`) plus any extended resource (`nvidia.com/gpu: 16`), whose name
//! is checked with Kubernetes' rules. A key that is none of these is refused naming it. Must
//! not: decide whether a write fits a quota (core does, at apply).

use std::collections::BTreeMap;

use axum::extract::State;
use axum::{Extension, Json};
use fedraft_core::policy::{
    validate_extended_name, validate_per_cluster, ClusterQuota, Extended, Resources,
};
use fedraft_core::render::parse_quantity;
use serde_json::{json, Value};

use super::common::{allow, member_scope, read, ReadParams, P, Q};
use crate::auth::{Access, Principal};
use crate::error::ApiError;
use crate::wire::valid_label;
use crate::App;

/// A quota body: any JSON object, read by [`parse_quota`].
pub type QuotaIn = BTreeMap<String, Value>;

/// The cpu, memory and pods of a quota, and its extended resources.
pub fn parse_quota(field: &str, q: &QuotaIn) -> Result<(Resources, Extended), ApiError> {
    let mut base = Resources::ZERO;
    let mut ext = Extended::new();
    for (key, v) in q {
        let f = format!("{field}.{key}");
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => {
                return Err(ApiError::invalid(
                    &f,
                    "must be a number or a quantity string",
                ))
            }
        };
        let amount =
            |scale: u64| parse_quantity(&text, scale).map_err(|e| ApiError::invalid(&f, e));
        match key.as_str() {
            "cpuMillis" => base.cpu_millis = amount(1)?,
            "memoryBytes" | "memory" => base.memory_bytes = amount(1)?,
            "pods" => base.pods = amount(1)?,
            "cpu" => base.cpu_millis = amount(1000)?,
            name => {
                validate_extended_name(name, &f)
                    .map_err(|e| ApiError::invalid(e.field, e.message))?;
                ext.add(name, amount(1)?);
            }
        }
    }
    Ok((base, ext))
}

/// The `perCluster` map of a tenant put: each cluster's quota read as [`parse_quota`] reads one,
/// then the names and limits checked against the whole quota (errors name
/// `perCluster.CLUSTER.RESOURCE`, or `perCluster.CLUSTER` for a bad name).
pub fn parse_per_cluster(
    input: &BTreeMap<String, QuotaIn>,
    base: &Resources,
    extended: &Extended,
) -> Result<BTreeMap<String, ClusterQuota>, ApiError> {
    let mut out = BTreeMap::new();
    for (cluster, q) in input {
        let field = format!("perCluster.{cluster}");
        let (b, e) = parse_quota(&field, q)?;
        out.insert(
            cluster.clone(),
            ClusterQuota {
                base: b,
                extended: e,
            },
        );
    }
    validate_per_cluster(&out, base, extended, "perCluster")
        .map_err(|e| ApiError::invalid(e.field, e.message))?;
    Ok(out)
}

/// A tenant's per-cluster quotas as its document shows them: per cluster, the limited
/// dimensions in the integer form `parse_quota` reads back.
pub fn per_cluster_json(s: &fedraft_core::state::State, tenant: &str) -> Value {
    let mut doc = serde_json::Map::new();
    for (cluster, q) in s.tenant_per_cluster(tenant) {
        let mut one = serde_json::Map::new();
        for (k, v) in [
            ("cpuMillis", q.base.cpu_millis),
            ("memoryBytes", q.base.memory_bytes),
            ("pods", q.base.pods),
        ] {
            if v > 0 {
                one.insert(k.to_string(), json!(v));
            }
        }
        for (name, n) in &q.extended.0 {
            one.insert(name.clone(), json!(n));
        }
        doc.insert(cluster.clone(), Value::Object(one));
    }
    Value::Object(doc)
}

/// Extended quota and use of a tenant, to add to its document.
pub fn extended_json(s: &fedraft_core::state::State, tenant: &str) -> (Value, Value) {
    let (quota, used) = s.tenant_extended(tenant);
    (json!(quota), json!(used))
}

/// `GET /v1/tenants/{name}/queue`: the tenant's waiting objects, each with its place in the
/// whole fleet's fair order and what it waits for.
pub async fn queue(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P(name): P<String>,
    Q(q): Q<ReadParams>,
) -> Result<Json<Value>, ApiError> {
    valid_label(&name, "name")?;
    allow(&app, &p, Access::ReadTenant(&name))?;
    let n = name.clone();
    let doc = read(&app, q.stale, move |s| {
        // A member scoped to some namespaces sees the waiting work of those only.
        let scope = member_scope(s, &p);
        s.tenant(&n).map(|_| {
            let mut items = s.waiting(Some(&n));
            if let Some(ns) = &scope {
                items.retain(|w| ns.contains(&w.namespace));
            }
            json!({
                "kind": "TenantQueue",
                "name": n,
                "resourceVersion": s.applied_index(),
                "items": items,
            })
        })
    })
    .await?;
    doc.map(Json)
        .ok_or_else(|| ApiError::not_found("tenant", &name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(v: Value) -> QuotaIn {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn quantities_and_the_old_form_are_both_read() {
        let (base, ext) = parse_quota(
            "quota",
            &q(json!({"cpu": "100", "memory": "512Gi", "nvidia.com/gpu": 16})),
        )
        .unwrap();
        assert_eq!(base.cpu_millis, 100_000);
        assert_eq!(base.memory_bytes, 512 << 30);
        assert_eq!(ext.get("nvidia.com/gpu"), 16);
        let (base, ext) = parse_quota(
            "quota",
            &q(json!({"cpuMillis": 4000, "memoryBytes": 1024, "pods": 3})),
        )
        .unwrap();
        assert_eq!(
            (base.cpu_millis, base.memory_bytes, base.pods),
            (4000, 1024, 3)
        );
        assert!(ext.is_empty());
    }

    #[test]
    fn a_bad_key_or_amount_names_the_field() {
        for (body, field) in [
            (json!({"gpu": 1}), "quota.gpu"),
            (json!({"kubernetes.io/gpu": 1}), "quota.kubernetes.io/gpu"),
            (json!({"cpu": "lots"}), "quota.cpu"),
            (json!({"nvidia.com/gpu": true}), "quota.nvidia.com/gpu"),
        ] {
            match parse_quota("quota", &q(body)) {
                Err(ApiError::InvalidField { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
    }

    #[test]
    fn per_cluster_quotas_are_read_and_checked_against_the_whole_quota() {
        let whole = Resources {
            cpu_millis: 8000,
            ..Resources::ZERO
        };
        let gpus = Extended::from_pairs([("nvidia.com/gpu", 8)]);
        let input: BTreeMap<String, QuotaIn> = serde_json::from_value(json!({
            "dc1": {"cpu": "2", "nvidia.com/gpu": 4},
            "dc2": {"memory": "1Gi"},
        }))
        .unwrap();
        let per = parse_per_cluster(&input, &whole, &gpus).unwrap();
        assert_eq!(per["dc1"].base.cpu_millis, 2000);
        assert_eq!(per["dc1"].extended.get("nvidia.com/gpu"), 4);
        assert_eq!(per["dc2"].base.memory_bytes, 1 << 30);
        for (body, field) in [
            (
                json!({"dc1": {"nvidia.com/gpu": 9}}),
                "perCluster.dc1.nvidia.com/gpu",
            ),
            (json!({"dc1": {"cpu": "9"}}), "perCluster.dc1.cpu"),
            (json!({"dc1": {"gpu": 1}}), "perCluster.dc1.gpu"),
            (json!({"DC1": {"cpu": "1"}}), "perCluster.DC1"),
        ] {
            let input: BTreeMap<String, QuotaIn> = serde_json::from_value(body).unwrap();
            match parse_per_cluster(&input, &whole, &gpus) {
                Err(ApiError::InvalidField { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
    }
}
