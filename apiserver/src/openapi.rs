//! The OpenAPI 3.0 document served at `/v1/openapi.json`.
//!
//! Assembled by hand from the wire types in `crate::wire` (core's policy types carry serde
//! attributes, not schema derives, so a derive-based generator would need changes in core). The
//! test below checks that every route in the router is described and that the schemas name the
//! fields the wire types accept.

use serde_json::{json, Value};

fn error_responses(codes: &[&str]) -> Value {
    let mut m = serde_json::Map::new();
    for c in codes {
        m.insert((*c).to_string(), json!({"description": describe(c), "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}));
    }
    Value::Object(m)
}

fn describe(code: &str) -> &'static str {
    match code {
        "400" => "malformed body, unknown kind, invalid name, missing or wrong-typed field (named in error.field)",
        "401" => "missing or invalid bearer token",
        "403" => "the principal may not do this",
        "404" => "not found",
        "409" => "resource version mismatch or already exists",
        "410" => "resourceVersion older than the retained watch history",
        "413" => "body larger than the limit",
        "422" => "refused by the state machine (e.g. quota)",
        "503" => "no quorum; retry after Retry-After seconds",
        _ => "error",
    }
}

fn op(summary: &str, ok: &str, schema: Option<&str>, body: Option<&str>, errors: &[&str]) -> Value {
    let mut responses = error_responses(errors);
    let ok_content = match schema {
        Some(s) => {
            json!({"application/json": {"schema": {"$ref": format!("#/components/schemas/{s}")}}})
        }
        None => json!({"application/json": {}}),
    };
    responses[ok] = json!({"description": "success", "content": ok_content});
    let mut o = json!({"summary": summary, "responses": responses, "security": [{"bearer": []}]});
    if let Some(b) = body {
        let schema = json!({"$ref": format!("#/components/schemas/{b}")});
        o["requestBody"] = json!({"required": true, "content": {
            "application/json": {"schema": schema.clone()},
            "application/yaml": {"schema": schema},
        }});
    }
    o
}

/// A list operation with the filter and paging parameters of `routes/paging.rs`; `health` for
/// clusters.
fn paged(mut o: Value, health: bool) -> Value {
    let mut params = vec![
        json!({"name": "q", "in": "query", "schema": {"type": "string"},
            "description": "case-insensitive substring of the name, of namespace/name, or of a key=value label"}),
        json!({"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 10000},
            "description": "at most this many items; metadata.continue then resumes after the last one"}),
        json!({"name": "continue", "in": "query", "schema": {"type": "string"},
            "description": "metadata.continue of the previous page"}),
    ];
    if health {
        params.push(json!({"name": "health", "in": "query",
            "schema": {"type": "string", "enum": ["Unknown", "Ready", "NotReady"]}}));
    }
    o["parameters"] = Value::Array(params);
    o
}

const READ: &[&str] = &["400", "401", "403", "404", "503"];
const WRITE: &[&str] = &["400", "401", "403", "404", "409", "413", "422", "503"];

/// The whole document.
pub fn document() -> Value {
    let write_headers = json!([
        {"name": "Idempotency-Key", "in": "header", "required": false, "schema": {"type": "string", "maxLength": 128},
         "description": "a retry with the same key gets the first answer"},
        {"name": "If-Match", "in": "header", "required": false, "schema": {"type": "string"},
         "description": "expected resource version, \"N\""}
    ]);
    let stale = json!([{"name": "stale", "in": "query", "required": false, "schema": {"type": "boolean"},
        "description": "serve local (possibly stale) state instead of a linearizable read"}]);
    let mut paths = json!({
        "/v1/clusters": {
            "get": paged(op("List clusters (filtered and paged on request)", "200", Some("ClusterList"), None, READ), true),
            "post": op("Register a cluster", "201", Some("Cluster"), Some("ClusterInput"), WRITE),
        },
        "/v1/clusters/{name}": {
            "get": op("Read a cluster", "200", Some("Cluster"), None, READ),
            "put": op("Create or replace a cluster (absent credentials are kept)", "200", Some("Cluster"), Some("ClusterInput"), WRITE),
            "delete": op("Deregister a cluster", "200", Some("Status"), None, WRITE),
        },
        "/v1/clusters/{name}/cordon": {"post": op("No new replicas on this cluster", "200", Some("Cluster"), None, WRITE)},
        "/v1/clusters/{name}/uncordon": {"post": op("Undo cordon or drain", "200", Some("Cluster"), None, WRITE)},
        "/v1/clusters/{name}/drain": {"post": op("Cordon and evict every replica", "200", Some("Cluster"), None, WRITE)},
        "/v1/objects": {"get": paged(op("List objects in every namespace you may read (filtered and paged on request)", "200", Some("FederatedObjectList"), None, READ), false)},
        "/v1/namespaces/{ns}/objects": {"get": paged(op("List objects in a namespace (filtered and paged on request)", "200", Some("FederatedObjectList"), None, READ), false)},
        "/v1/namespaces/{ns}/objects/{name}": {
            "get": op("Read an object with status and the scheduler's reasons", "200", Some("FederatedObject"), None, READ),
            "put": op("Create or replace an object", "200", Some("FederatedObject"), Some("FederatedObjectInput"), WRITE),
            "delete": op("Delete an object", "200", Some("Status"), None, WRITE),
        },
        "/v1/namespaces/{ns}/objects/{name}/rendered": {"get": op("The manifest written to each member cluster the object is placed on (Secret values redacted)", "200", None, None, READ)},
        "/v1/namespaces/{ns}/objects/{name}/rollout": {"get": op("An object's rollout: strategy, phase, waves, per-cluster revision and workload status, story", "200", None, None, READ)},
        "/v1/namespaces/{ns}/objects/{name}/reschedule": {"post": op("Forget the object's placement and schedule it from scratch (fail-back, rebalance of one object)", "200", Some("FederatedObject"), None, WRITE)},
        "/v1/namespaces/{ns}/objects/{name}/rollout/{action}": {"post": op("pause, resume, abort, undo or promote the object's rollout", "200", None, None, WRITE)},
        "/v1/tenants": {"get": op("List tenants", "200", Some("TenantList"), None, READ)},
        "/v1/tenants/{name}": {
            "get": op("Read a tenant", "200", Some("Tenant"), None, READ),
            "put": op("Create or replace a tenant", "200", Some("Tenant"), Some("TenantInput"), WRITE),
            "delete": op("Delete a tenant (refused while it has objects)", "200", Some("Status"), None, WRITE),
        },
        "/v1/tenants/{name}/queue": {
            "get": op("The tenant's work waiting for capacity, in fair order", "200", Some("TenantQueue"), None, READ),
        },
        "/v1/schedule/dry-run": {"post": op("Schedule an object on the current state; nothing is written", "200", Some("ScheduleDecision"), Some("FederatedObjectInput"), WRITE)},
        "/v1/watch": {"get": {
            "summary": "Stream events as newline-delimited JSON",
            "parameters": [
                {"name": "resourceVersion", "in": "query", "schema": {"type": "integer"}, "description": "resume after this version; absent = list then watch"},
                {"name": "kind", "in": "query", "schema": {"type": "string", "enum": ["Cluster", "FederatedObject", "Tenant"]}},
                {"name": "namespace", "in": "query", "schema": {"type": "string"}}
            ],
            "security": [{"bearer": []}],
            "responses": {"200": {"description": "one WatchEvent per line", "content": {"application/x-ndjson": {"schema": {"$ref": "#/components/schemas/WatchEvent"}}}},
                          "410": {"description": describe("410")}, "401": {"description": describe("401")}}
        }},
        "/healthz": {"get": {"summary": "Liveness", "responses": {"200": {"description": "alive"}}}},
        "/readyz": {"get": {"summary": "Ready when the node sees a leader", "responses": {"200": {"description": "ready"}, "503": {"description": "no leader"}}}},
        "/v1/system/state": {"get": {"summary": "This node's applied command index, state hash and log time (one local snapshot)", "responses": {"200": {"description": "nodeId, raftAppliedIndex, stateIndex, stateHash, logTimeMs"}}}},
        "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {"200": {"description": "text exposition", "content": {"text/plain": {}}}}}},
        "/v1/status/node": {"get": {
            "summary": "This node about itself: term, leader, commit and applied index, state hash, bytes on disk of the log, archive, snapshots and WAL (operators, admins)",
            "parameters": [{"name": "at", "in": "query", "schema": {"type": "integer"},
                "description": "also the state hash right after the command at this index (replayed from the audit archive)"}],
            "security": [{"bearer": []}],
            "responses": {"200": {"description": "NodeHealth: nodeId, term, leaderId, isLeader, lastLogIndex, commitIndex, raftAppliedIndex, stateIndex, stateHash, logTimeMs, hashAt, disk"},
                          "401": {"description": describe("401")}, "403": {"description": describe("403")}}
        }},
        "/v1/status/nodes": {"get": op("Every raft member's health, gathered over the peer transport, with the state hashes compared at the lowest applied index (compared.agree false is an alarm)", "200", None, None, READ)},
        "/v1/policies": {"get": op("Every placement policy written through the door (Karmada, KubeFed) with the objects it selects and where each is placed (paged: q, limit, continue; operators, admins)", "200", None, None, READ)},
        "/v1/placement/clusters": {"get": op("Replicas placed on each cluster, summed over every object (operators, admins)", "200", None, None, READ)},
        "/v1/openapi.json": {"get": {"summary": "This document", "responses": {"200": {"description": "OpenAPI 3.0"}}}},
        "/v1/admin/health-policy": {
            "get": {"summary": "The failover brake's policy (fleetPercent, regionPercent, regionLabel, windowSeconds, minClusters) and where the brake holds failover now (brake)", "security": [{"bearer": []}], "responses": {"200": {"description": "HealthPolicy"}}},
            "put": {"summary": "Replace the failover brake's policy (admins; one log entry)", "security": [{"bearer": []}], "responses": {"200": {"description": "HealthPolicy"}, "400": {"description": describe("400")}, "403": {"description": describe("403")}}}
        },
        "/v1/admin/admission": {
            "get": {"summary": "The admission policy (clusterScopedKinds, bindableClusterRoles, tenantMaxObjects, tenantMaxTemplateBytes)", "security": [{"bearer": []}], "responses": {"200": {"description": "AdmissionPolicy"}}},
            "put": {"summary": "Replace the admission policy (admins)", "security": [{"bearer": []}], "responses": {"200": {"description": "AdmissionPolicy"}, "400": {"description": describe("400")}, "403": {"description": describe("403")}}}
        },
        "/v1/users": {
            "get": op("List users and service accounts (not tenant members)", "200", Some("UserList"), None, READ),
            "post": op("Create a user (admins)", "201", Some("User"), Some("UserInput"), WRITE),
        },
        "/v1/users/{name}": {
            "get": op("Read a user", "200", Some("User"), None, READ),
            "put": op("Create a user or set its role (admins)", "200", Some("User"), Some("UserInput"), WRITE),
            "delete": op("Delete a user and its tokens (admins)", "200", Some("Status"), None, WRITE),
        },
        "/v1/users/{name}/tokens": {
            "get": op("List a user's tokens (metadata only)", "200", Some("TokenList"), None, READ),
            "post": op("Issue a token (admins); the answer is the only place its text appears", "201", Some("IssuedToken"), Some("TokenInput"), WRITE),
        },
        "/v1/users/{name}/tokens/{id}": {
            "delete": op("Revoke a token (admins)", "200", Some("Status"), None, WRITE),
        },
    });
    for (path, item) in paths.as_object_mut().into_iter().flatten() {
        for (method, o) in item.as_object_mut().into_iter().flatten() {
            let mut params: Vec<Value> = Vec::new();
            for seg in path.split('/') {
                if let Some(p) = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                    params.push(json!({"name": p, "in": "path", "required": true, "schema": {"type": "string"}}));
                }
            }
            match method.as_str() {
                "get"
                    if path.starts_with("/v1/")
                        && path != "/v1/watch"
                        && path != "/v1/openapi.json" =>
                {
                    params.extend(stale.as_array().cloned().unwrap_or_default())
                }
                "put" | "post" | "delete" => {
                    params.extend(write_headers.as_array().cloned().unwrap_or_default())
                }
                _ => {}
            }
            if let Some(existing) = o.get("parameters").and_then(Value::as_array) {
                params.extend(existing.iter().cloned());
            }
            if !params.is_empty() {
                o["parameters"] = Value::Array(params);
            }
        }
    }
    json!({
        "openapi": "3.0.3",
        "info": {"title": "fedraft API", "version": "v1",
                 "description": "Raft-replicated federation of Kubernetes clusters. Errors: {\"error\": {\"code\", \"message\", \"field\"}}."},
        "paths": paths,
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}, "schemas": with_user_schemas(schemas())},
    })
}

/// The user database's wire types (`routes/users.rs`) added to `base`.
fn with_user_schemas(mut base: Value) -> Value {
    let token = json!({"type": "object", "properties": {
        "kind": {"type": "string"}, "id": {"type": "string"}, "user": {"type": "string"},
        "createdMs": {"type": "integer"}, "expiresMs": {"type": "integer", "nullable": true},
        "revokedMs": {"type": "integer", "nullable": true}, "issuedBy": {"type": "string"},
        "live": {"type": "boolean"}}});
    let mut issued = token.clone();
    issued["properties"]["token"] =
        json!({"type": "string", "description": "the token text, shown once"});
    let extra = json!({
        "User": {"type": "object", "properties": {
            "kind": {"type": "string"}, "name": {"type": "string"},
            "userKind": {"type": "string", "enum": ["user", "serviceAccount"]},
            "role": {"type": "string", "description": "admin, operator, auditor or tenant:TENANT"},
            "createdMs": {"type": "integer"}, "resourceVersion": {"type": "integer"}}},
        "UserInput": {"type": "object", "required": ["role"], "properties": {
            "name": {"type": "string"}, "userKind": {"type": "string", "enum": ["user", "serviceAccount"]},
            "role": {"type": "string", "description": "admin, operator, auditor or tenant:TENANT"},
            "resourceVersion": {"type": "integer"}}},
        "UserList": list_of("User"),
        "Token": token,
        "IssuedToken": issued,
        "TokenList": list_of("Token"),
        "TokenInput": {"type": "object", "properties": {
            "ttlSeconds": {"type": "integer", "description": "lifetime; absent = never expires"}}},
    });
    if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    base
}

fn list_of(item: &str) -> Value {
    json!({"type": "object", "properties": {
        "kind": {"type": "string"}, "resourceVersion": {"type": "integer"},
        "items": {"type": "array", "items": {"$ref": format!("#/components/schemas/{item}")}},
        "metadata": {"type": "object", "description": "present when limit was given",
            "properties": {"continue": {"type": "string", "nullable": true}, "remainingItemCount": {"type": "integer"}}}}})
}

fn schemas() -> Value {
    let resources = json!({"type": "object", "properties": {
        "cpuMillis": {"type": "integer"}, "memoryBytes": {"type": "integer"}, "pods": {"type": "integer"}}});
    let taint = json!({"type": "object", "required": ["key", "effect"], "properties": {
        "key": {"type": "string"}, "value": {"type": "string"}, "effect": {"type": "string", "enum": ["NoSchedule", "NoExecute"]}}});
    let selector = json!({"type": "object", "properties": {
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        "matchExpressions": {"type": "array", "items": {"type": "object", "properties": {
            "key": {"type": "string"}, "operator": {"type": "string", "enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
            "values": {"type": "array", "items": {"type": "string"}}}}}}});
    let envelope = json!({
        "kind": {"type": "string"}, "apiVersion": {"type": "string"},
        "metadata": {"type": "object", "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}, "resourceVersion": {"type": "string"}}},
        "resourceVersion": {"type": "integer", "description": "expected resource version (compare-and-swap)"}});
    let mut cluster_in = json!({"type": "object", "required": ["apiEndpoint"], "properties": {
        "name": {"type": "string", "description": "DNS-1123 label (from the path on PUT)"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "apiEndpoint": {"type": "string"},
        "credentials": {"type": "object", "writeOnly": true, "description": "{\"bearerToken\": \"...\"} or {\"kubeconfig\": \"...\"}; never returned",
                        "properties": {"bearerToken": {"type": "string"}, "kubeconfig": {"type": "string"}}},
        "taints": {"type": "array", "items": taint.clone()},
        "failureThresholdSeconds": {"type": "integer"}, "successThresholdSeconds": {"type": "integer"}}});
    let mut object_in = json!({"type": "object", "required": ["template"], "properties": {
        "template": {"type": "object", "description": "any Kubernetes manifest with apiVersion, kind, metadata.name (at most 1 MiB)"},
        "placement": {"$ref": "#/components/schemas/Placement"},
        "overrides": {"type": "array", "items": {"type": "object", "properties": {
            "clusterName": {"type": "string"}, "clusterSelector": selector.clone(),
            "patches": {"type": "array", "items": {"type": "object"}},
            "image": {"type": "object"}, "labels": {"type": "object"}, "annotations": {"type": "object"}}}},
        "namespace": {"type": "string", "description": "from the path; required for dry-run"},
        "name": {"type": "string", "description": "from the path; required for dry-run"},
        "rollout": {"type": "object", "description": "rollout strategy; absent keeps the object's", "properties": {
            "type": {"type": "string", "enum": ["All", "Progressive"]},
            "grouping": {"description": "\"clusterOrder\", {\"label\": KEY} or {\"groups\": [[CLUSTER...]...]}"},
            "maxConcurrency": {"type": "object", "description": "{\"count\": N} (0: whole group) or {\"percent\": P}"},
            "canary": {"type": "integer"}, "minSuccessSeconds": {"type": "integer"},
            "progressDeadlineSeconds": {"type": "integer"}, "maxFailures": {"type": "integer"},
            "autoRollback": {"type": "boolean"},
            "healthRule": {"type": "object", "description": "for kinds whose status fedraft does not read: healthy when the value at this JSON pointer equals value", "properties": {
                "path": {"type": "string", "description": "e.g. /status/phase"}, "value": {"type": "string"}}}}},
        "failBack": {"description": "after failover, whether replicas return to the recovered cluster: \"never\" (the default) or {\"afterRecoveryHeld\": SECONDS} (Ready that long in log time, then re-placed make-before-break); absent keeps the object's"},
        "descheduling": {"description": "whether replicas a cluster leaves Pending unschedulable move elsewhere: {\"pendingSeconds\": N} (stuck N seconds of log time, a Divided object's share there shrinks by the stuck count, never below its ready replicas, and the scheduler places the rest elsewhere, make-before-break); 0 turns it off (the default); absent keeps the object's"}}});
    let mut tenant_in = json!({"type": "object", "properties": {
        "namespaces": {"type": "array", "items": {"type": "string"}},
        "quota": {"type": "object", "description": "cpuMillis/memoryBytes/pods as integers, or Kubernetes quantities: cpu \"100\", memory \"512Gi\", pods, and extended resources such as nvidia.com/gpu: 16", "additionalProperties": {"oneOf": [{"type": "integer"}, {"type": "string"}]}},
        "perCluster": {"type": "object", "description": "a quota per cluster name, in the quota's form; caps what the tenant places there (a limit above the tenant's quota is refused) and is the member's ResourceQuota", "additionalProperties": {"type": "object", "additionalProperties": {"oneOf": [{"type": "integer"}, {"type": "string"}]}}},
        "sliceSize": resources.clone(), "members": {"type": "array", "items": {"type": "string"}}}});
    for doc in [&mut cluster_in, &mut object_in, &mut tenant_in] {
        for (k, v) in envelope.as_object().into_iter().flatten() {
            doc["properties"][k] = v.clone();
        }
    }
    json!({
        "Error": {"type": "object", "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {
            "code": {"type": "string"}, "message": {"type": "string"}, "field": {"type": "string", "nullable": true}}}}},
        "Status": {"type": "object", "properties": {"kind": {"type": "string"}, "status": {"type": "string"}, "resourceVersion": {"type": "integer"}}},
        "Resources": resources,
        "Taint": taint,
        "LabelSelector": selector,
        "Placement": {"type": "object", "properties": {
            "clusters": {"type": "array", "items": {"type": "string"}},
            "clusterSelector": {"$ref": "#/components/schemas/LabelSelector"},
            "tolerations": {"type": "array", "items": {"type": "object"}},
            "spreadConstraints": {"type": "array", "items": {"type": "object", "properties": {
                "labelKey": {"type": "string"}, "minGroups": {"type": "integer"}, "maxGroups": {"type": "integer"}}}},
            "replicas": {"type": "object", "properties": {"mode": {"type": "string", "enum": ["Duplicated", "Divided", "ByKind"], "default": "ByKind"}, "division": {"type": "object"}}},
            "failover": {"type": "object", "properties": {"enabled": {"type": "boolean"}, "gracePeriodSeconds": {"type": "integer"}}}}},
        "ClusterInput": cluster_in,
        "Cluster": {"type": "object", "properties": {
            "kind": {"type": "string"}, "name": {"type": "string"}, "labels": {"type": "object"}, "apiEndpoint": {"type": "string"},
            "taints": {"type": "array", "items": {"$ref": "#/components/schemas/Taint"}}, "cordoned": {"type": "boolean"},
            "drained": {"type": "boolean"}, "resourceVersion": {"type": "integer"},
            "status": {"type": "object", "properties": {"health": {"type": "string", "enum": ["Unknown", "Ready", "NotReady"]},
                "healthSinceMs": {"type": "integer"}, "lastHeartbeatMs": {"type": "integer"}, "capacity": {"type": "object"},
                "extended": {"type": "object", "description": "last detailed scan: extended resources allocatable and available, the largest free amount of each on one node (largestFreeOnNode) and the nodeShapes"}}}}},
        "ClusterList": list_of("Cluster"),
        "FederatedObjectInput": object_in,
        "FederatedObject": {"type": "object", "properties": {
            "kind": {"type": "string"}, "namespace": {"type": "string"}, "name": {"type": "string"},
            "template": {"type": "object"}, "placement": {"$ref": "#/components/schemas/Placement"},
            "overrides": {"type": "array", "items": {"type": "object"}}, "resourceVersion": {"type": "integer"},
            "status": {"type": "object", "properties": {
                "placement": {"type": "object", "additionalProperties": {"type": "integer"}},
                "clusters": {"type": "object"}, "readyReplicas": {"type": "integer"},
                "conditions": {"type": "array", "items": {"type": "object", "properties": {
                    "type": {"type": "string", "enum": ["Scheduled", "Unschedulable", "Applied"]},
                    "status": {"type": "string"}, "message": {"type": "string"}}}},
                "lastDecision": {"type": "object"}}}}},
        "FederatedObjectList": list_of("FederatedObject"),
        "TenantInput": tenant_in,
        "Tenant": {"type": "object", "properties": {
            "kind": {"type": "string"}, "name": {"type": "string"}, "namespaces": {"type": "array", "items": {"type": "string"}},
            "quota": {"$ref": "#/components/schemas/Resources"}, "members": {"type": "array", "items": {"type": "string"}},
            "extendedQuota": {"type": "object", "additionalProperties": {"type": "integer"}},
            "perCluster": {"type": "object", "additionalProperties": {"type": "object", "additionalProperties": {"type": "integer"}}},
            "resourceVersion": {"type": "integer"}, "status": {"type": "object", "properties": {
                "used": {"$ref": "#/components/schemas/Resources"},
                "extendedUsed": {"type": "object", "additionalProperties": {"type": "integer"}},
                "waiting": {"type": "integer"}}}}},
        "TenantList": list_of("Tenant"),
        "TenantQueue": {"type": "object", "properties": {
            "kind": {"type": "string"}, "name": {"type": "string"}, "resourceVersion": {"type": "integer"},
            "items": {"type": "array", "items": {"type": "object", "properties": {
                "namespace": {"type": "string"}, "name": {"type": "string"}, "tenant": {"type": "string", "nullable": true},
                "position": {"type": "integer", "description": "place in the fleet's fair order (dominant-resource fairness between tenants, fedraft.io/priority within one)"},
                "replicas": {"type": "integer"}, "waitingFor": {"type": "string"}, "sinceIndex": {"type": "integer"},
                "priority": {"type": "integer"}}}}}},
        "ScheduleDecision": {"type": "object", "properties": {
            "basedOnResourceVersion": {"type": "integer"},
            "decision": {"type": "object", "properties": {
                "placement": {"type": "object"}, "candidates": {"type": "array", "items": {"type": "string"}},
                "dropped": {"type": "array", "items": {"type": "object"}}, "weights": {"type": "object"},
                "unschedulable": {"type": "object", "nullable": true}, "moved": {"type": "array"}, "summary": {"type": "string"}}}}},
        "WatchEvent": {"type": "object", "required": ["type", "resourceVersion"], "properties": {
            "type": {"type": "string", "enum": ["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]},
            "kind": {"type": "string"}, "namespace": {"type": "string"}, "name": {"type": "string"},
            "resourceVersion": {"type": "integer"}, "object": {"type": "object"}}},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_every_route_and_wire_field() {
        let doc = document();
        for path in [
            "/v1/clusters",
            "/v1/clusters/{name}",
            "/v1/clusters/{name}/cordon",
            "/v1/clusters/{name}/uncordon",
            "/v1/clusters/{name}/drain",
            "/v1/objects",
            "/v1/namespaces/{ns}/objects",
            "/v1/namespaces/{ns}/objects/{name}",
            "/v1/namespaces/{ns}/objects/{name}/rendered",
            "/v1/namespaces/{ns}/objects/{name}/rollout",
            "/v1/namespaces/{ns}/objects/{name}/reschedule",
            "/v1/namespaces/{ns}/objects/{name}/rollout/{action}",
            "/v1/tenants",
            "/v1/tenants/{name}",
            "/v1/tenants/{name}/queue",
            "/v1/schedule/dry-run",
            "/v1/watch",
            "/healthz",
            "/readyz",
            "/metrics",
            "/v1/system/state",
            "/v1/status/node",
            "/v1/status/nodes",
            "/v1/policies",
            "/v1/placement/clusters",
            "/v1/openapi.json",
            "/v1/users",
            "/v1/users/{name}",
            "/v1/users/{name}/tokens",
            "/v1/users/{name}/tokens/{id}",
        ] {
            assert!(doc["paths"][path].is_object(), "{path} missing");
        }
        let cluster = &doc["components"]["schemas"]["ClusterInput"]["properties"];
        for f in [
            "name",
            "labels",
            "apiEndpoint",
            "credentials",
            "taints",
            "resourceVersion",
        ] {
            assert!(cluster[f].is_object(), "ClusterInput.{f} missing");
        }
        assert!(doc["components"]["schemas"]["Cluster"]["properties"]["credentials"].is_null());
    }
}
