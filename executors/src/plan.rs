//! Planning one reconcile pass of one cluster, purely: which desired objects need a write, and
//! which managed live objects must go.
//!
//! Inputs are the rendered desired objects (already resolved to a resource and stamped with
//! their hash), the live managed objects seen by the watches, and the memo of what this
//! executor applied itself. Output is a verdict per desired object and the list to delete.
//! The skip rule (see [`verdict`]) is what makes applying the same desired state twice write
//! nothing, on this node or on a new leader.
//!
//! Must not: perform requests, or choose to delete anything that lacks fedraft's ownership label
//! (the watches only ever see labelled objects, and [`prunable`] checks the label again).

use std::collections::{BTreeMap, BTreeSet};

use fedraft_core::admission::{Admitted, Scope};
use serde_json::Value;

use crate::compare::ManifestHash;
use crate::live_object::LiveObject;

use crate::live_id::LiveId;

/// What this executor last wrote for an object: the manifest's hash and the resourceVersion
/// the member cluster answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memo {
    pub hash: ManifestHash,
    pub resource_version: Option<String>,
}

/// Why an object needs a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyReason {
    /// Not in the member cluster.
    Missing,
    /// The desired manifest is not the one the live object was applied from.
    Changed,
    /// Applied from the same manifest, but a field fedraft sets was edited since.
    Drifted,
}

/// The decision for one desired object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing to write. `verified`: this copy of the live object, at its resourceVersion, is
    /// known to hold the manifest its applied-hash annotation names (compared, or answered to
    /// this executor's own write), so the cache need not keep its body ([`LiveObject::settled`]).
    UpToDate {
        verified: bool,
    },
    Apply(ApplyReason),
}

/// Decides whether `desired` (a manifest carrying its hash annotation, `hash`, as compact JSON)
/// must be applied.
///
/// - absent live object: apply;
/// - this executor applied `hash` and the live resourceVersion is the one it got back, or an
///   older one the watch has not caught up from: nothing can have changed, skip without
///   comparing;
/// - otherwise the live object must carry `hash` in its annotation (it came from this manifest)
///   and still hold every field the manifest sets (no drift): compared, unless a pass already
///   verified this very copy (it is settled).
pub fn verdict(
    desired: Option<&str>,
    hash: ManifestHash,
    live: Option<&LiveObject>,
    memo: Option<&Memo>,
) -> Verdict {
    if let Some(v) = verdict_without_manifest(hash, live, memo) {
        return v;
    }
    // The only comparison that needs both whole objects, so the only place they are parsed. A
    // manifest that is not held or does not parse (never: a pass restores it, and it was
    // serialized here) is applied again.
    let desired: Option<Value> = desired.and_then(|d| serde_json::from_str(d).ok());
    match (desired, live) {
        (Some(d), Some(live)) if live.holds(&d) => Verdict::UpToDate { verified: true },
        _ => Verdict::Apply(ApplyReason::Drifted),
    }
}

/// What [`verdict`] decides from the hash alone; `None` when it must compare the manifest
/// with the live copy.
fn verdict_without_manifest(
    hash: ManifestHash,
    live: Option<&LiveObject>,
    memo: Option<&Memo>,
) -> Option<Verdict> {
    let Some(live) = live else {
        return Some(Verdict::Apply(ApplyReason::Missing));
    };
    let own_hash = live.applied_hash() == Some(hash);
    if let Some(m) = memo.filter(|m| m.hash == hash) {
        if let (Some(ours), Some(seen)) = (&m.resource_version, &live.resource_version) {
            if **ours == **seen {
                return Some(Verdict::UpToDate { verified: own_hash });
            }
            if version_older(seen, ours) {
                return Some(Verdict::UpToDate { verified: false });
            }
        }
    }
    if !own_hash {
        return Some(Verdict::Apply(ApplyReason::Changed));
    }
    if live.is_settled() {
        return Some(Verdict::UpToDate { verified: true });
    }
    None
}

/// Whether [`verdict`], or the write it may call for, reads the manifest's body: a pass
/// restores the bodies its settled objects dropped (`DesiredCache::restore`) for these only.
pub fn needs_manifest(hash: ManifestHash, live: Option<&LiveObject>, memo: Option<&Memo>) -> bool {
    !matches!(
        verdict_without_manifest(hash, live, memo),
        Some(Verdict::UpToDate { .. })
    )
}

/// After [`verdict`] found `live` up to date: the memo to keep so that the next pass skips the
/// comparison, if it differs from `memo` (the live version is newer than the one remembered).
pub fn verified_memo(
    hash: ManifestHash,
    live: Option<&LiveObject>,
    memo: Option<&Memo>,
) -> Option<Memo> {
    let seen = live?.resource_version.as_deref()?;
    let newer = match memo
        .filter(|m| m.hash == hash)
        .and_then(|m| m.resource_version.as_deref())
    {
        None => true,
        Some(ours) => ours != seen && !version_older(seen, ours),
    };
    newer.then(|| Memo {
        hash,
        resource_version: Some(seen.to_string()),
    })
}

/// resourceVersions are opaque in general; when both are integers (etcd revisions, and the
/// simulator's counter) a smaller one is an older view of the object.
fn version_older(seen: &str, ours: &str) -> bool {
    match (seen.parse::<u64>(), ours.parse::<u64>()) {
        (Ok(a), Ok(b)) => a < b,
        _ => false,
    }
}

/// The managed live objects to delete: labelled as fedraft's, not desired any more, and not
/// belonging to an object whose manifest failed to render this time (its identity is unknown,
/// so what runs stays until the manifest is fixed or the object is removed).
///
/// Namespaces are special: one fedraft created to hold a placement (labelled, but carrying no
/// federated object's annotation) is never pruned, and no namespace a desired object still
/// lives in (`in_use`) is pruned, whichever federated object once wrote it. Before this rule,
/// placing a single `v1/Namespace` object made every namespace fedraft had created look like
/// an orphan of it.
pub fn prunable<'a>(
    live: impl IntoIterator<Item = (&'a LiveId, &'a LiveObject)>,
    desired: &BTreeSet<LiveId>,
    unrendered: &BTreeSet<String>,
    in_use: &BTreeSet<String>,
) -> Vec<LiveId> {
    live.into_iter()
        .filter(|(id, obj)| obj.is_managed() && !desired.contains(*id))
        .filter(|(id, obj)| {
            !is_namespace(id) || (obj.federated_object().is_some() && !in_use.contains(id.name()))
        })
        .filter(|(_, obj)| {
            obj.federated_object()
                .is_none_or(|k| !unrendered.contains(k))
        })
        .filter(|(_, obj)| !obj.is_deleting())
        .map(|(id, _)| id.clone())
        .collect()
}

fn is_namespace(id: &LiveId) -> bool {
    id.api_version() == "v1" && id.kind() == "Namespace"
}

/// The last check before a write: the identity about to be written (read from the rendered
/// manifest) and the scope the member's discovery gives its kind must be the ones core
/// admitted. Core renders with the same check, so a mismatch here means a scope core could
/// only guess (a custom resource) or a manifest changed on the way.
pub fn check_admitted(
    admitted: Option<&Admitted>,
    writing: (&str, &str, &str, &str),
    member_namespaced: bool,
) -> Result<(), String> {
    let Some(a) = admitted else {
        return Err("the object's admitted identity is unknown; nothing is written".into());
    };
    let (api_version, kind, namespace, name) = writing;
    if (api_version, kind, name) != (a.api_version.as_str(), a.kind.as_str(), a.name.as_str())
        || namespace != a.namespace
    {
        return Err(format!(
            "refusing to write {api_version}/{kind} {namespace}/{name}: admitted as {}/{} {}/{}",
            a.api_version, a.kind, a.namespace, a.name
        ));
    }
    let admitted_namespaced = a.scope == Scope::Namespaced;
    if member_namespaced != admitted_namespaced {
        let say = |n: bool| if n { "namespaced" } else { "cluster-scoped" };
        return Err(format!(
            "refusing to write {api_version}/{kind} {name}: admitted as {}, but this cluster              serves it {}",
            say(admitted_namespaced),
            say(member_namespaced)
        ));
    }
    Ok(())
}

/// Namespaces the desired objects live in, in order.
pub fn namespaces_needed<'a>(ids: impl IntoIterator<Item = &'a LiveId>) -> BTreeSet<String> {
    ids.into_iter()
        .filter(|id| !id.namespace().is_empty())
        .map(|id| id.namespace().to_string())
        .collect()
}

/// Ready replicas an object reports, read from its live status. Kinds without a notion of
/// readiness (ConfigMap, Service, ...) count as ready with the replicas placed once applied.
pub fn ready_replicas(kind: &str, live: Option<&Value>, placed: u32) -> u32 {
    match (ready_field(kind), live) {
        (_, None) => 0,
        (Some(field), Some(v)) => count_at(v, field),
        (None, Some(_)) => placed,
    }
}

/// Where a kind's status counts its ready replicas; none for kinds without replicas.
pub fn ready_field(kind: &str) -> Option<&'static str> {
    match kind {
        "Deployment" | "StatefulSet" | "ReplicaSet" | "ReplicationController" => {
            Some("/status/readyReplicas")
        }
        "DaemonSet" => Some("/status/numberReady"),
        "Job" => Some("/status/ready"),
        _ => None,
    }
}

/// The count at a fixed path: 0 when absent or not a count, capped at `u32::MAX`.
pub fn count_at(v: &Value, path: &str) -> u32 {
    at(v, path)
        .and_then(Value::as_u64)
        .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// The value at a fixed path of object keys (`/status/readyReplicas`). For the literal paths
/// read on every pass of every object: `Value::pointer` unescapes each token into a new string,
/// which showed in profiles of a thousand clusters. Paths with `~` escapes or array indices
/// still go through `Value::pointer`.
pub fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('/').skip(1).try_fold(v, |v, key| v.get(key))
}

/// Splits `apiVersion` into (group, version); the core group is "".
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

/// Reads the identity parts of a rendered manifest.
pub fn manifest_identity(manifest: &Value) -> Result<(String, String, String, String), String> {
    let s = |p: &str| {
        manifest
            .pointer(p)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let api_version = s("/apiVersion").ok_or("apiVersion is missing")?;
    let kind = s("/kind").ok_or("kind is missing")?;
    let name = s("/metadata/name").ok_or("metadata.name is missing")?;
    let namespace = s("/metadata/namespace").unwrap_or("");
    Ok((
        api_version.to_string(),
        kind.to_string(),
        namespace.to_string(),
        name.to_string(),
    ))
}

/// Groups ids by their type, for per-type bookkeeping.
pub fn by_type(ids: &BTreeSet<LiveId>) -> BTreeMap<(String, String), Vec<&LiveId>> {
    let mut out: BTreeMap<(String, String), Vec<&LiveId>> = BTreeMap::new();
    for id in ids {
        out.entry(id.type_key()).or_default().push(id);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{manifest_hash, APPLIED_HASH_ANNOTATION};
    use fedraft_core::render::OBJECT_ANNOTATION;
    use fedraft_core::render::{MANAGED_BY_LABEL, MANAGED_BY_VALUE};
    use serde_json::json;

    #[test]
    fn at_reads_what_pointer_reads_on_plain_key_paths() {
        let v = json!({"status": {"readyReplicas": 3, "conditions": [{"type": "Ready"}]},
            "metadata": {"annotations": {"a/b": "x"}}});
        for path in [
            "/status/readyReplicas",
            "/status/conditions",
            "/status/missing",
            "/none",
        ] {
            assert_eq!(at(&v, path), v.pointer(path), "{path}");
        }
        assert_eq!(at(&v, ""), Some(&v));
        assert_eq!(at(&json!(7), "/status"), None);
    }

    fn id(name: &str) -> LiveId {
        LiveId::new("apps/v1", "Deployment", "web", name)
    }

    fn desired(replicas: u32) -> (Value, ManifestHash) {
        let mut m = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "a", "namespace": "web", "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}},
            "spec": {"replicas": replicas},
        });
        let h = manifest_hash(&m);
        m["metadata"]["annotations"] = json!({ APPLIED_HASH_ANNOTATION: h.to_string() });
        (m, h)
    }

    fn live_from(m: &Value, rv: &str, extra: Value) -> LiveObject {
        let mut o = m.clone();
        o["metadata"]["resourceVersion"] = json!(rv);
        o["status"] = extra;
        LiveObject::from_value(o)
    }

    #[test]
    fn verdicts() {
        let (m, h) = desired(3);
        let live = live_from(&m, "10", json!({"readyReplicas": 3}));
        assert_eq!(
            verdict(Some(&m.to_string()), h, None, None),
            Verdict::Apply(ApplyReason::Missing)
        );
        assert_eq!(
            verdict(Some(&m.to_string()), h, Some(&live), None),
            Verdict::UpToDate { verified: true },
            "fresh executor, same manifest"
        );
        assert_eq!(
            verdict(Some(&m.to_string()), h, Some(&live.settled()), None),
            Verdict::UpToDate { verified: true },
            "a settled copy is not compared again"
        );
        let (m4, h4) = desired(4);
        assert_eq!(
            verdict(Some(&m4.to_string()), h4, Some(&live), None),
            Verdict::Apply(ApplyReason::Changed)
        );

        let mut drifted = m.clone();
        drifted["spec"]["replicas"] = json!(7);
        let drifted = live_from(&drifted, "11", json!({"readyReplicas": 3}));
        assert_eq!(
            verdict(Some(&m.to_string()), h, Some(&drifted), None),
            Verdict::Apply(ApplyReason::Drifted)
        );
        let ours = Memo {
            hash: h,
            resource_version: Some("11".into()),
        };
        assert_eq!(
            verdict(Some(&m.to_string()), h, Some(&drifted), Some(&ours)),
            Verdict::UpToDate { verified: true },
            "the copy our own write was answered with holds what we wrote"
        );
        let memo = Memo {
            hash: h,
            resource_version: Some("10".into()),
        };
        assert_eq!(
            verdict(Some(&m.to_string()), h, Some(&drifted), Some(&memo)),
            Verdict::Apply(ApplyReason::Drifted),
            "a newer version than ours is compared"
        );

        // The watch has not delivered our write yet: the cache is older than the memo.
        let memo = Memo {
            hash: h,
            resource_version: Some("12".into()),
        };
        let stale = live_from(&desired(1).0, "9", json!({}));
        assert_eq!(
            verdict(Some(&m.to_string()), h, Some(&stale), Some(&memo)),
            Verdict::UpToDate { verified: false },
            "an older copy is skipped, never taken as verified"
        );
        // A memo for another manifest does not count.
        assert_eq!(
            verdict(Some(&m4.to_string()), h4, Some(&stale), Some(&memo)),
            Verdict::Apply(ApplyReason::Changed)
        );
    }

    /// A body is needed exactly when the verdict compares or writes; without one, a copy that
    /// must be compared is applied, never taken as up to date.
    #[test]
    fn the_manifest_is_needed_only_to_compare_or_write() {
        let (m, h) = desired(3);
        let live = live_from(&m, "10", json!({"readyReplicas": 3}));
        let (_, h4) = desired(4);
        let ours = Memo {
            hash: h,
            resource_version: Some("10".into()),
        };
        assert!(needs_manifest(h, None, None), "missing: written");
        assert!(needs_manifest(h4, Some(&live), None), "changed: written");
        assert!(
            needs_manifest(h, Some(&live), None),
            "unverified copy: compared"
        );
        assert!(!needs_manifest(h, Some(&live.settled()), None), "settled");
        assert!(
            !needs_manifest(h, Some(&live), Some(&ours)),
            "our own write's copy"
        );
        assert_eq!(
            verdict(None, h, Some(&live), None),
            Verdict::Apply(ApplyReason::Drifted)
        );
        assert_eq!(
            verdict(None, h, Some(&live.settled()), None),
            Verdict::UpToDate { verified: true }
        );
    }

    #[test]
    fn prune_only_managed_undesired() {
        let (m, _) = desired(1);
        let managed = LiveObject::from_value(m.clone());
        let mut foreign = m.clone();
        foreign["metadata"]["labels"] = json!({"app": "x"});
        let foreign = LiveObject::from_value(foreign);
        let mut broken = m.clone();
        broken["metadata"]["annotations"] = json!({ OBJECT_ANNOTATION: "web/broken" });
        let broken = LiveObject::from_value(broken);
        let mut going = m.clone();
        going["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let going = LiveObject::from_value(going);
        let live = [
            (id("keep"), managed.clone()),
            (id("gone"), managed),
            (id("foreign"), foreign),
            (id("broken"), broken),
            (id("going"), going),
        ];
        let want: BTreeSet<LiveId> = [id("keep")].into_iter().collect();
        let unrendered: BTreeSet<String> = ["web/broken".to_string()].into_iter().collect();
        let got = prunable(
            live.iter().map(|(i, o)| (i, o)),
            &want,
            &unrendered,
            &BTreeSet::new(),
        );
        assert_eq!(got, vec![id("gone")]);
    }

    fn ns_id(name: &str) -> LiveId {
        LiveId::new("v1", "Namespace", "", name)
    }

    fn ns_live(name: &str, owner: Option<&str>) -> LiveObject {
        let mut o = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}}});
        if let Some(k) = owner {
            o["metadata"]["annotations"] = json!({ OBJECT_ANNOTATION: k });
        }
        LiveObject::from_value(o)
    }

    /// Once a `v1/Namespace` object is placed, the namespaces fedraft created for placements
    /// (and those still in use) are not its orphans; only the federated namespace that is no
    /// longer desired and holds nothing desired goes.
    #[test]
    fn namespaces_created_for_placement_are_never_pruned() {
        let live = [
            (ns_id("team-a"), ns_live("team-a", None)),
            (ns_id("team-b"), ns_live("team-b", None)),
            (ns_id("shared"), ns_live("shared", Some("admin/shared"))),
            (ns_id("old"), ns_live("old", Some("admin/old"))),
            (ns_id("kept"), ns_live("kept", Some("admin/kept"))),
        ];
        let desired: BTreeSet<LiveId> = [ns_id("kept")].into_iter().collect();
        let in_use: BTreeSet<String> = ["shared".to_string()].into_iter().collect();
        let got = prunable(
            live.iter().map(|(i, o)| (i, o)),
            &desired,
            &BTreeSet::new(),
            &in_use,
        );
        assert_eq!(got, vec![ns_id("old")]);
    }

    #[test]
    fn admitted_identity_and_scope() {
        use fedraft_core::admission::Admitted;
        let a = Admitted::from_template(
            &json!({"apiVersion": "example.com/v1", "kind": "Widget",
                    "metadata": {"name": "w", "namespace": "team-a"}}),
            "team-a",
        )
        .unwrap();
        let w = ("example.com/v1", "Widget", "team-a", "w");
        assert!(check_admitted(Some(&a), w, true).is_ok());
        let err = check_admitted(Some(&a), w, false).unwrap_err();
        assert!(err.contains("cluster-scoped"), "{err}");
        assert!(
            check_admitted(Some(&a), ("example.com/v1", "Widget", "team-b", "w"), true).is_err()
        );
        assert!(
            check_admitted(Some(&a), ("example.com/v1", "Gadget", "team-a", "w"), true).is_err()
        );
        assert!(check_admitted(None, w, true).is_err());
    }

    #[test]
    fn ready_replicas_by_kind() {
        let st = json!({"status": {"readyReplicas": 2, "numberReady": 5}});
        assert_eq!(ready_replicas("Deployment", Some(&st), 3), 2);
        assert_eq!(ready_replicas("DaemonSet", Some(&st), 3), 5);
        assert_eq!(ready_replicas("Deployment", Some(&json!({})), 3), 0);
        assert_eq!(ready_replicas("ConfigMap", Some(&json!({})), 1), 1);
        assert_eq!(ready_replicas("ConfigMap", None, 1), 0);
    }

    #[test]
    fn identity() {
        let (m, _) = desired(1);
        assert_eq!(
            manifest_identity(&m).unwrap(),
            (
                "apps/v1".into(),
                "Deployment".into(),
                "web".into(),
                "a".into()
            )
        );
        assert!(manifest_identity(&json!({"kind": "X"}))
            .unwrap_err()
            .contains("apiVersion"));
        assert_eq!(split_api_version("apps/v1"), ("apps", "v1"));
        assert_eq!(split_api_version("v1"), ("", "v1"));
    }
}
