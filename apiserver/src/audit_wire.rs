//! JSON shapes of the audit archive, shared by `/v1/audit*` and `fedraft audit`: one archived
//! record, with what a tenant may see of it. Credentials never appear: a record shows which
//! cluster a command named, not its spec.

use fedraft_core::audit::time::format_rfc3339;
use fedraft_core::audit::Record;
use fedraft_core::command::Command;
use fedraft_core::state::Outcome;
use serde_json::{json, Value};

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
        | Command::RevokePlacement { namespace, name } => format!("{namespace}/{name}"),
        Command::Heartbeats(hb) => hb
            .iter()
            .map(|h| h.cluster.as_str())
            .collect::<Vec<_>>()
            .join(","),
        Command::ClusterUnreachable { cluster } => cluster.clone(),
        Command::StatusReports(r) => format!("{} reports", r.len()),
        Command::ServiceEndpoints(r) => format!("{} endpoint reports", r.len()),
        Command::Tick => String::new(),
    }
}

/// One record as JSON. `namespaces` (a tenant's) hides changes, decisions and targets outside
/// them.
pub fn record_json(r: &Record, namespaces: Option<&[String]>) -> Value {
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
        "time": format_rfc3339(r.entry.timestamp_ms),
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
