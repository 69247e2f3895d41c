//! JSON shapes of the audit archive, shared by `/v1/audit*` and `fedraft audit`: one archived
//! record with what a tenant may see of it, the state at one point, a diff and a placement
//! history. Credentials never appear: a record shows which cluster a command named, not its
//! spec.
//!
//! This is where log time becomes text: core hands over milliseconds since the epoch, and every
//! time field here is RFC 3339 in UTC (`rfc3339`) next to its `...Ms` number. Query parameters
//! come back the other way through [`parse_rfc3339`]. Must not: decide what a tenant may see
//! beyond the namespaces it is given, or read a clock.

use std::collections::BTreeMap;

use fedraft_core::audit::diff::DiffOp;
use fedraft_core::audit::view::{ObjectView, TenantView};
use fedraft_core::audit::{
    FieldChange, FieldKind, ItemDiff, PlacementChange, Record, StateDiff, StateView,
};
use fedraft_core::command::Command;
use fedraft_core::model::Health;
use fedraft_core::scheduler::decision::ReplicaMove;
use fedraft_core::state::Outcome;
use serde::Serialize;
use serde_json::{json, Value};

/// `2026-11-30T03:11:42.125Z`: milliseconds only when not zero, always three digits then.
pub fn rfc3339(ms: u64) -> String {
    let Some(ts) = i64::try_from(ms)
        .ok()
        .and_then(|m| jiff::Timestamp::from_millisecond(m).ok())
    else {
        // Past the year 9999: no calendar text, the number says it all.
        return format!("{ms} ms");
    };
    if ms.is_multiple_of(1000) {
        format!("{ts:.0}")
    } else {
        format!("{ts:.3}")
    }
}

/// RFC 3339 with an offset (`Z` or `±HH:MM`) and optional fractional seconds, to milliseconds
/// since the epoch (digits past the millisecond are dropped). None when malformed, without an
/// offset, or before 1970.
pub fn parse_rfc3339(text: &str) -> Option<u64> {
    let ts: jiff::Timestamp = text.parse().ok()?;
    u64::try_from(ts.as_millisecond()).ok()
}

/// What the command addressed, in a few words ("default/web", "dc1,dc3", "12 reports").
pub fn target(c: &Command) -> String {
    match c {
        Command::RegisterCluster(s) | Command::UpdateCluster { spec: s, .. } => s.name.clone(),
        Command::DeregisterCluster { name, .. }
        | Command::Cordon { name }
        | Command::Uncordon { name }
        | Command::Drain { name }
        | Command::DeleteTenant { name, .. } => name.clone(),
        Command::PutTenant(t) => t.name.clone(),
        Command::PutObject {
            namespace, name, ..
        }
        | Command::PutObjectWithDiscovery {
            namespace, name, ..
        }
        | Command::DeleteObject {
            namespace, name, ..
        }
        | Command::RevokePlacement { namespace, name }
        | Command::PutObjectWithRollout {
            namespace, name, ..
        }
        | Command::PutObjectWithFailBack {
            namespace, name, ..
        }
        | Command::PutObjectWithDescheduling {
            namespace, name, ..
        }
        | Command::Rollout {
            namespace, name, ..
        } => format!("{namespace}/{name}"),
        Command::WorkloadReports(r) => format!("{} workload reports", r.len()),
        Command::StatusValues(r) => format!("{} status value reports", r.len()),
        Command::Heartbeats(hb) => hb
            .iter()
            .map(|h| h.cluster.as_str())
            .collect::<Vec<_>>()
            .join(","),
        Command::ClusterUnreachable { cluster } => cluster.clone(),
        Command::StatusReports(r) => format!("{} reports", r.len()),
        Command::StatusReportsAt(r) => format!("{} reports", r.len()),
        Command::ServiceEndpoints(r) => format!("{} endpoint reports", r.len()),
        Command::RewrapCredentials(r) => r
            .iter()
            .map(|i| i.cluster.as_str())
            .collect::<Vec<_>>()
            .join(","),
        Command::Tick => String::new(),
        Command::SetAdmissionPolicy(_) => "admission policy".to_string(),
        Command::PutResource { manifest, .. }
        | Command::PutMemberCluster { manifest, .. }
        | Command::PutMemberSecret { manifest, .. } => manifest_target(manifest),
        Command::DeleteResource { key, .. } => key.to_string(),
        Command::PutUser { spec, .. } => format!("user {}", spec.name),
        Command::DeleteUser { name, .. } => format!("user {name}"),
        Command::IssueToken(i) => format!("user {} token {}", i.user, i.id),
        Command::RevokeToken { user, id } => format!("user {user} token {id}"),
        Command::CapacityDetails(batch) => format!("{} cluster(s)", batch.len()),
        Command::PutTenantWithExtended { spec, .. } | Command::PutTenantWithQuotas { spec, .. } => {
            format!("tenant {}", spec.name)
        }
        // "m1 unreachable (timeout: ...), m2 reachable": a vantage point's changed views.
        Command::Reachability(rs) => rs
            .iter()
            .map(|r| match &r.failure {
                Some(f) => format!("{} unreachable ({})", r.cluster, f.describe()),
                None => format!("{} reachable", r.cluster),
            })
            .collect::<Vec<_>>()
            .join(", "),
        Command::SetHealthPolicy(_) => "health policy".to_string(),
        Command::ExecutorLease(l) => format!("ownership lease {} ms", l.lease_ms),
        // "m1: KubeComponentsHealthy=False": what a taint policy may match on.
        Command::ClusterConditions {
            cluster,
            conditions,
        } => format!(
            "{cluster}: {}",
            conditions
                .iter()
                .map(|c| format!("{}={}", c.condition_type, c.status))
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

/// `Kind namespace/name` of a manifest written through the Kubernetes-compatible door, read
/// leniently: a record of a refused write may hold anything.
fn manifest_target(manifest: &str) -> String {
    let Ok(doc) = serde_json::from_str::<Value>(manifest) else {
        return "(unreadable manifest)".to_string();
    };
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_string();
    let kind = text(doc.get("kind"));
    let ns = text(doc.pointer("/metadata/namespace"));
    let name = text(doc.pointer("/metadata/name"));
    if ns.is_empty() {
        format!("{kind} {name}")
    } else {
        format!("{kind} {ns}/{name}")
    }
}

/// One record as JSON. `namespaces` (a tenant's) hides changes, decisions and targets outside
/// them.
/// `namespaces` and `slices` are set for a tenant member: the namespaces it may see and the
/// clusters of its tenant's slices (decisions name no other cluster, as on the object's own view).
pub fn record_json(
    r: &Record,
    namespaces: Option<&[String]>,
    slices: Option<&std::collections::BTreeSet<String>>,
) -> Value {
    let visible = |key: &str| {
        namespaces.is_none_or(|a| {
            key.split_once('/')
                .is_some_and(|(ns, _)| a.iter().any(|x| x == ns))
        })
    };
    let own_target = match (namespaces, r.command_object()) {
        (None, _) => true,
        (Some(a), Some((ns, _))) => a.iter().any(|x| x == ns),
        (Some(_), None) => false,
    };
    let outcome = match &r.applied.outcome {
        Outcome::Accepted { resource_version } => {
            json!({"status": "Accepted", "resourceVersion": resource_version})
        }
        Outcome::Rejected(rej) => json!({
            "status": "Rejected", "code": format!("{:?}", rej.code),
            "field": rej.field, "message": rej.message,
        }),
    };
    let changes: Vec<Value> = r
        .applied
        .changes
        .iter()
        .filter(|c| namespaces.is_none() || visible(&c.key))
        .map(
            |c| json!({"kind": format!("{:?}", c.kind), "key": c.key, "op": format!("{:?}", c.op)}),
        )
        .collect();
    let decisions: Vec<Value> = r
        .applied
        .decisions
        .iter()
        .filter(|(k, _)| visible(&k.to_string()))
        .map(|(k, d)| {
            let redacted = slices.map(|v| crate::wire::redact_for_tenant(v, d));
            let d = redacted.as_ref().unwrap_or(d);
            json!({
                "object": k.to_string(),
                "summary": d.summary(),
                "placement": d.placement,
                "moved": d.moved,
                "dropped": d.dropped.iter()
                    .map(|x| json!({"cluster": x.cluster, "reason": x.reason.describe()}))
                    .collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "index": r.index,
        "term": r.term,
        "time": rfc3339(r.entry.timestamp_ms),
        "timeMs": r.entry.timestamp_ms,
        "actor": r.entry.actor,
        "requestId": r.entry.request_id,
        "command": r.entry.command.kind(),
        "target": if own_target { target(&r.entry.command) } else { String::new() },
        "outcome": outcome,
        "duplicateOf": r.applied.duplicate_of,
        "changes": changes,
        "decisions": decisions,
    })
}

/// One cluster of [`StateJson`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterJson<'a> {
    pub name: &'a str,
    pub health: Health,
    pub health_since: String,
    pub cordoned: bool,
    pub drained: bool,
    pub labels: &'a BTreeMap<String, String>,
    pub taints: &'a [String],
    pub resource_version: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<&'a str>,
}

/// `/v1/audit/state` and `fedraft audit replay -o json`: a [`StateView`] with its times as text.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StateJson<'a> {
    pub index: u64,
    pub log_time: String,
    pub log_time_ms: u64,
    pub state_hash: &'a str,
    pub clusters: Vec<ClusterJson<'a>>,
    pub objects: &'a [ObjectView],
    pub tenants: &'a [TenantView],
}

impl<'a> StateJson<'a> {
    pub fn of(v: &'a StateView) -> StateJson<'a> {
        StateJson {
            index: v.index,
            log_time: rfc3339(v.log_time_ms),
            log_time_ms: v.log_time_ms,
            state_hash: &v.state_hash,
            clusters: v
                .clusters
                .iter()
                .map(|c| ClusterJson {
                    name: &c.name,
                    health: c.health,
                    health_since: rfc3339(c.health_since_ms),
                    cordoned: c.cordoned,
                    drained: c.drained,
                    labels: &c.labels,
                    taints: &c.taints,
                    resource_version: c.resource_version,
                    condition: c.condition.as_deref(),
                })
                .collect(),
            objects: &v.objects,
            tenants: &v.tenants,
        }
    }
}

/// One field of a [`ItemJson`]: a log time becomes RFC 3339.
#[derive(Debug, Serialize)]
pub struct FieldJson<'a> {
    pub field: &'a str,
    pub before: String,
    pub after: String,
}

impl<'a> FieldJson<'a> {
    pub fn of(f: &'a FieldChange) -> FieldJson<'a> {
        let text = |v: &str| match f.kind {
            FieldKind::Text => v.to_string(),
            FieldKind::EpochMs => v.parse::<u64>().map_or_else(|_| v.to_string(), rfc3339),
        };
        FieldJson {
            field: &f.field,
            before: text(&f.before),
            after: text(&f.after),
        }
    }
}

/// One cluster, object or tenant of a [`DiffJson`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemJson<'a> {
    pub key: &'a str,
    pub op: DiffOp,
    pub fields: Vec<FieldJson<'a>>,
    pub moves: &'a [ReplicaMove],
}

/// `/v1/audit/diff` and `fedraft audit diff -o json`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffJson<'a> {
    pub from_index: u64,
    pub to_index: u64,
    pub from_hash: &'a str,
    pub to_hash: &'a str,
    pub clusters: Vec<ItemJson<'a>>,
    pub objects: Vec<ItemJson<'a>>,
    pub tenants: Vec<ItemJson<'a>>,
}

impl<'a> DiffJson<'a> {
    pub fn of(d: &'a StateDiff) -> DiffJson<'a> {
        let items = |v: &'a [ItemDiff]| -> Vec<ItemJson<'a>> {
            v.iter()
                .map(|i| ItemJson {
                    key: &i.key,
                    op: i.op,
                    fields: i.fields.iter().map(FieldJson::of).collect(),
                    moves: &i.moves,
                })
                .collect()
        };
        DiffJson {
            from_index: d.from_index,
            to_index: d.to_index,
            from_hash: &d.from_hash,
            to_hash: &d.to_hash,
            clusters: items(&d.clusters),
            objects: items(&d.objects),
            tenants: items(&d.tenants),
        }
    }
}

/// One entry of `/v1/audit/explain` and `fedraft audit explain -o json`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeJson<'a> {
    pub index: u64,
    pub term: u64,
    pub time: String,
    pub time_ms: u64,
    pub actor: &'a str,
    pub request_id: &'a str,
    pub command: &'a str,
    pub before: &'a BTreeMap<String, u32>,
    pub after: &'a BTreeMap<String, u32>,
    pub moves: &'a [ReplicaMove],
    pub cause: &'a str,
    pub explanation: &'a str,
}

impl<'a> ChangeJson<'a> {
    pub fn of(c: &'a PlacementChange) -> ChangeJson<'a> {
        ChangeJson {
            index: c.index,
            term: c.term,
            time: rfc3339(c.time_ms),
            time_ms: c.time_ms,
            actor: &c.actor,
            request_id: &c.request_id,
            command: &c.command,
            before: &c.before,
            after: &c.after,
            moves: &c.moves,
            cause: &c.cause,
            explanation: &c.explanation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cases core's own RFC 3339 code was held to before the edges took the job over.
    #[test]
    fn rfc3339_both_ways() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        // 2026-11-30T03:11:42Z = 1_796_008_302 s (checked with `date -u -d @1796008302`).
        assert_eq!(
            parse_rfc3339("2026-11-30T03:11:42Z"),
            Some(1_796_008_302_000)
        );
        assert_eq!(rfc3339(1_796_008_302_000), "2026-11-30T03:11:42Z");
        assert_eq!(rfc3339(1_796_008_302_125), "2026-11-30T03:11:42.125Z");
        assert_eq!(rfc3339(1_796_008_302_500), "2026-11-30T03:11:42.500Z");
        for ms in [0, 1, 951_782_400_000, 1_796_008_302_125, 4_102_444_800_999] {
            assert_eq!(parse_rfc3339(&rfc3339(ms)), Some(ms), "{ms}");
        }
        assert_eq!(
            parse_rfc3339("2026-11-30T05:11:42.5+02:00"),
            Some(1_796_008_302_500)
        );
        assert_eq!(
            parse_rfc3339("2026-11-30t03:11:42.125999z"),
            Some(1_796_008_302_125)
        );
        assert_eq!(
            parse_rfc3339("2026-11-29T23:11:42-04:00"),
            Some(1_796_008_302_000)
        );
        for bad in [
            "",
            "2026-11-30",
            "2026-13-01T00:00:00Z",
            "2026-11-30T03:11:42",
            "1969-12-31T23:59:59Z",
            "x",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn time_fields_of_a_diff_become_text() {
        let f = FieldChange {
            field: "healthSince".into(),
            before: "0".into(),
            after: "1796008302125".into(),
            kind: FieldKind::EpochMs,
        };
        let j = FieldJson::of(&f);
        assert_eq!(
            (j.before.as_str(), j.after.as_str()),
            ("1970-01-01T00:00:00Z", "2026-11-30T03:11:42.125Z")
        );
        let f = FieldChange {
            kind: FieldKind::Text,
            ..f
        };
        assert_eq!(FieldJson::of(&f).after, "1796008302125");
    }
}
