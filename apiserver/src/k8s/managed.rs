//! Field ownership (`metadata.managedFields`) for objects written through the door, so that
//! server-side apply has its conflicts and its removals, as kube-apiserver's does.
//!
//! Core keeps a manifest as written and drops the fields a server populates, so the door keeps
//! managedFields in the annotation [`MANAGED_FIELDS_ANNOTATION`]: [`stow`] moves them there
//! before a write is proposed, [`lift`] moves them back when an object is answered. Updates
//! (create, PUT, merge, JSON and strategic patches) record their manager with [`record_update`];
//! apply records its own (`fedraft_kubeapi::apply`). A write that changes nothing but the
//! managers' timestamps keeps the stored ones ([`keep_times`]), so it changes nothing at all.
//!
//! Must not: decide conflicts (`fedraft_kubeapi::apply` does), or let a client set the
//! annotation: what a write carries there is replaced by the managedFields it computed.

use axum::http::header;
use fedraft_core::door::MANAGED_FIELDS_ANNOTATION;
use fedraft_kubeapi::{fields, meta};
use serde_json::{Map, Value};

use super::render;
use super::{Call, Store, Target};

/// Whether the target keeps a manifest, and with it managedFields (`managed`).
pub(super) fn keeps_manifest(t: &Target) -> bool {
    match t.store() {
        Store::Template | Store::Namespace => true,
        Store::Policy(tag) => !tag.is_member(),
        Store::Cluster | Store::Tenant | Store::User | Store::UserToken | Store::Internal(_) => {
            false
        }
    }
}

/// Records `call`'s manager as an Update from `current` to `next` (see `managed`), keeping
/// the stored timestamps when nothing else changed.
pub(super) fn record_update(call: &Call, current: Option<&Value>, next: &mut Value) {
    if !keeps_manifest(&call.target) {
        return;
    }
    // A write that sets managedFields itself (kubectl moving client-side apply's fields to its
    // server-side manager, say) replaces them, as kube-apiserver lets it.
    let managed_of = |v: &Value| {
        meta::metadata(v)
            .and_then(|m| m.get("managedFields"))
            .cloned()
    };
    if current.is_some_and(|c| managed_of(c) != managed_of(next)) {
        return;
    }
    let api_version = next
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let has_status = call.target.served.def.has_status();
    fields::record_update(
        current,
        next,
        &manager(call),
        &api_version,
        has_status,
        &now(),
    );
    if let Some(c) = current {
        keep_times(c, next);
    }
}

/// The field manager of a write (`fields::manager_name`).
pub(super) fn manager(call: &Call) -> String {
    fields::manager_name(
        call.params.get("fieldManager"),
        call.header(header::USER_AGENT),
    )
}

/// Now, as managedFields timestamps are written.
pub(super) fn now() -> String {
    render::rfc3339(u64::try_from(jiff::Timestamp::now().as_millisecond()).unwrap_or(0))
}

/// Moves `metadata.managedFields` into the annotation (dropping any value a client put there).
pub fn stow(obj: &mut Value) {
    let m = meta::metadata_mut(obj);
    let managed = m.remove("managedFields");
    let annotations = m
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(a) = annotations.as_object_mut() else {
        return;
    };
    a.remove(MANAGED_FIELDS_ANNOTATION);
    if let Some(list @ Value::Array(_)) =
        managed.filter(|v| v.as_array().is_some_and(|l| !l.is_empty()))
    {
        a.insert(
            MANAGED_FIELDS_ANNOTATION.into(),
            Value::String(list.to_string()),
        );
    }
    if a.is_empty() {
        m.remove("annotations");
    }
}

/// Moves the annotation back into `metadata.managedFields`. An unreadable value is dropped.
pub fn lift(obj: &mut Value) {
    let m = meta::metadata_mut(obj);
    let Some(a) = m.get_mut("annotations").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(Value::String(text)) = a.remove(MANAGED_FIELDS_ANNOTATION) else {
        return;
    };
    if a.is_empty() {
        m.remove("annotations");
    }
    if let Ok(list @ Value::Array(_)) = serde_json::from_str::<Value>(&text) {
        m.insert("managedFields".into(), list);
    }
}

/// When `next` differs from `current` in nothing but the managers' timestamps, gives it
/// `current`'s managedFields, so the write stores what is stored already.
pub fn keep_times(current: &Value, next: &mut Value) {
    if !meta::same_content(current, next) {
        return;
    }
    let m = meta::metadata_mut(next);
    match meta::metadata(current).and_then(|c| c.get("managedFields")) {
        Some(v) => m.insert("managedFields".into(), v.clone()),
        None => m.remove("managedFields"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stow_and_lift_round_trip_and_a_client_value_is_replaced() {
        let managed =
            json!([{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:data": {}}}]);
        let mut obj = json!({"metadata": {"name": "a", "managedFields": managed.clone(),
            "annotations": {MANAGED_FIELDS_ANNOTATION: "forged", "x": "y"}}});
        stow(&mut obj);
        assert!(obj["metadata"].get("managedFields").is_none());
        let kept = obj["metadata"]["annotations"][MANAGED_FIELDS_ANNOTATION]
            .as_str()
            .unwrap();
        assert_eq!(serde_json::from_str::<Value>(kept).unwrap(), managed);
        lift(&mut obj);
        assert_eq!(obj["metadata"]["managedFields"], managed);
        assert_eq!(obj["metadata"]["annotations"], json!({"x": "y"}));

        // Nothing managed: no annotation, and no empty annotations map either.
        let mut bare = json!({"metadata": {"name": "a", "annotations": {MANAGED_FIELDS_ANNOTATION: "forged"}}});
        stow(&mut bare);
        assert_eq!(bare, json!({"metadata": {"name": "a"}}));
        let mut junk =
            json!({"metadata": {"annotations": {MANAGED_FIELDS_ANNOTATION: "not json"}}});
        lift(&mut junk);
        assert_eq!(junk, json!({"metadata": {}}));
    }

    #[test]
    fn a_write_that_only_moves_timestamps_keeps_the_stored_ones() {
        let current = json!({"metadata": {"name": "a", "managedFields": [{"manager": "m", "time": "t1"}]}, "data": {"k": "v"}});
        let mut same = json!({"metadata": {"name": "a", "managedFields": [{"manager": "m", "time": "t2"}]}, "data": {"k": "v"}});
        keep_times(&current, &mut same);
        assert_eq!(same, current);
        let mut changed = json!({"metadata": {"name": "a", "managedFields": [{"manager": "m", "time": "t2"}]}, "data": {"k": "w"}});
        keep_times(&current, &mut changed);
        assert_eq!(changed["metadata"]["managedFields"][0]["time"], "t2");
    }
}
