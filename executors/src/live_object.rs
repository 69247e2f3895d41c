//! One managed member object as an executor keeps it between passes: small, because a node
//! holds one per object per cluster it runs (a hundred thousand and more in a large fleet).
//!
//! A watch delivers the whole object. Held as a `serde_json::Value`, a Deployment took about
//! 15 KiB with its `managedFields` and 6 KiB without: every JSON object is a B-tree whose
//! smallest node has room for eleven entries, and a Deployment's metadata, labels,
//! annotations, status and conditions are a dozen of them. So nothing stays parsed. On
//! delivery, what every pass reads of every object is read once into small typed fields
//! ([`Marks`] for the plan and the fence, [`Summary`] for the status reports); the object
//! itself is kept as compact JSON, parsed only when a pass must compare it with a manifest or
//! read a path only a rule knows ([`LiveObject::full`]), which the skip rule and the rarity of
//! rules keep off the every-pass path. `metadata.managedFields` is dropped: nothing reads it.
//!
//! Once a pass has shown that a copy holds the manifest its applied-hash annotation names, the
//! body has served its purpose: [`LiveObject::settled`] is the same copy without it, and the
//! next delivery (a new resourceVersion) brings a body again. So the bodies held are those of
//! objects changed since the last pass, and of the few a health rule or preserved path reads.
//!
//! The settled form is what a node holds for most of its objects, so it is kept to jemalloc's
//! 128-byte class with its `Arc` (a test checks): what only workloads have is boxed apart, and
//! what many copies hold equal is shared by the copies a watch reads ([`SharedReads`]): the
//! owner token, the same on every object a node wrote, and the workload's condition list, one
//! of a few on nearly every Deployment of a cluster.
//!
//! Must not: lose a field a manifest can set (`full` gives back everything but managedFields
//! while the body is kept), parse the compact object on the every-pass path, or claim a copy
//! settled that no pass verified.

use std::sync::Arc;

use serde_json::{Map, Value};

use fedraft_core::owners::OWNER_ANNOTATION;
use fedraft_core::render::{MANAGED_BY_LABEL, MANAGED_BY_VALUE, OBJECT_ANNOTATION};
use fedraft_core::rollout::{WorkloadCondition, WorkloadObservation};

use crate::compare::{ManifestHash, APPLIED_HASH_ANNOTATION};

/// A live object as the watch last delivered it.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveObject {
    pub resource_version: Option<Box<str>>,
    marks: Marks,
    /// `None` for kinds with neither a ready count nor a rollout (ConfigMaps, Services).
    summary: Option<Box<Summary>>,
    /// The whole object but managedFields, as compact JSON; `None` once settled.
    body: Option<Box<str>>,
}

/// What the plan and the fence read of every object on every pass: the three of fedraft's
/// annotations they consult, typed, and nothing else of the metadata. (The template revision is
/// read once, into [`Summary::workload`].)
#[derive(Debug, Clone, PartialEq, Default)]
struct Marks {
    managed: bool,
    deleting: bool,
    /// [`APPLIED_HASH_ANNOTATION`]; `None` when absent or not a hash fedraft stamps.
    applied_hash: Option<ManifestHash>,
    /// [`OWNER_ANNOTATION`]: the token of the owner that wrote the object ([`SharedReads`]).
    owner: Option<Arc<str>>,
    /// [`OBJECT_ANNOTATION`]: the federated object the copy belongs to.
    object: Option<Box<str>>,
}

/// What a status report reads of every object on every pass.
#[derive(Debug, Clone, PartialEq, Default)]
struct Summary {
    /// The kind's ready count (`crate::plan::ready_replicas`); none for kinds without one.
    ready: Option<u32>,
    /// The rollout observation without a health rule (`crate::workload::observe_workload`),
    /// its condition list shared ([`SharedReads`]).
    workload: Option<WorkloadObservation>,
}

/// How many distinct condition lists [`SharedReads`] remembers. A watch reads one kind, whose
/// settled objects report one of a few lists (a Deployment's `Available` and `Progressing`
/// with their steady reasons, or none at all); a list past these is kept by its copy alone.
const REMEMBERED_CONDITIONS: usize = 8;

/// What the copies one watch reads hold equal, remembered from the copies read before and
/// handed out again instead of a fresh allocation: the owner token of the copy read last (a
/// node stamps every object it writes with its token), and the last few distinct condition
/// lists (about 48 bytes a workload object when each copy holds its own). Bounded: a token
/// and [`REMEMBERED_CONDITIONS`] lists, however many objects the watch reads. Sharing changes
/// no value: what is handed out is equal to what was read.
#[derive(Debug, Default)]
pub struct SharedReads {
    owner: Option<Arc<str>>,
    /// Distinct lists, the one used last first.
    conditions: Vec<Arc<[WorkloadCondition]>>,
}

impl SharedReads {
    fn owner(&mut self, token: &str) -> Arc<str> {
        match &self.owner {
            Some(last) if **last == *token => last.clone(),
            _ => self.owner.insert(Arc::from(token)).clone(),
        }
    }

    /// The remembered list equal to `list`, or `list` itself, now remembered in place of the
    /// one used longest ago.
    fn conditions(&mut self, list: Arc<[WorkloadCondition]>) -> Arc<[WorkloadCondition]> {
        match self.conditions.iter().position(|l| *l == list) {
            Some(i) => self.conditions[..=i].rotate_right(1),
            None => {
                self.conditions.truncate(REMEMBERED_CONDITIONS - 1);
                self.conditions.insert(0, list);
            }
        }
        self.conditions[0].clone()
    }
}

impl LiveObject {
    /// A copy that shares nothing with others ([`LiveObject::read`]).
    pub fn from_value(object: Value) -> Self {
        Self::read(object, &mut SharedReads::default())
    }

    /// The copy of `object` to keep, sharing what it holds equal to copies read before through
    /// `shared`.
    pub fn read(mut object: Value, shared: &mut SharedReads) -> Self {
        if let Some(Value::Object(meta)) = object.get_mut("metadata") {
            meta.remove("managedFields");
        }
        let meta = object.get("metadata");
        let resource_version = meta
            .and_then(|m| m.get("resourceVersion"))
            .and_then(Value::as_str)
            .map(Box::from);
        let annotations = meta.and_then(|m| m.get("annotations"));
        let annotation = |key: &str| annotations.and_then(|a| a.get(key)).and_then(Value::as_str);
        let managed = meta
            .and_then(|m| m.get("labels"))
            .and_then(|l| l.get(MANAGED_BY_LABEL))
            .and_then(Value::as_str)
            == Some(MANAGED_BY_VALUE);
        let marks = Marks {
            managed,
            deleting: meta.and_then(|m| m.get("deletionTimestamp")).is_some(),
            applied_hash: annotation(APPLIED_HASH_ANNOTATION).and_then(ManifestHash::parse),
            owner: annotation(OWNER_ANNOTATION).map(|t| shared.owner(t)),
            object: annotation(OBJECT_ANNOTATION).map(Box::from),
        };
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
        let summary = Summary {
            ready: crate::plan::ready_field(kind).map(|f| crate::plan::count_at(&object, f)),
            workload: crate::workload::observe_workload(kind, &object, None).map(|mut o| {
                o.conditions = shared.conditions(o.conditions);
                o
            }),
        };
        let summary = (summary != Summary::default()).then(|| Box::new(summary));
        // Serializing plain JSON values cannot fail.
        let body = serde_json::to_string(&object).unwrap_or_else(|_| "{}".into());
        LiveObject {
            resource_version,
            marks,
            summary,
            body: Some(body.into_boxed_str()),
        }
    }

    /// The whole object (without managedFields), parsed again; `None` once settled.
    pub fn full(&self) -> Option<Value> {
        let body = self.body.as_deref()?;
        Some(serde_json::from_str(body).unwrap_or_else(|_| Value::Object(Map::new())))
    }

    /// Whether the object holds every field of `desired` with an equal value
    /// ([`crate::compare::covers`]). A settled copy has nothing to compare and says no (a write
    /// is the safe answer); `plan::verdict` takes settled copies before it compares.
    pub fn holds(&self, desired: &Value) -> bool {
        self.full()
            .is_some_and(|whole| crate::compare::covers(desired, &whole))
    }

    /// Whether the body was dropped after a pass verified this copy ([`LiveObject::settled`]).
    pub fn is_settled(&self) -> bool {
        self.body.is_none()
    }

    /// This copy without its body, for the cache to keep once a pass found that it holds the
    /// manifest its applied-hash annotation names (`plan::Verdict::UpToDate { verified }`).
    pub fn settled(&self) -> LiveObject {
        LiveObject {
            resource_version: self.resource_version.clone(),
            marks: self.marks.clone(),
            summary: self.summary.clone(),
            body: None,
        }
    }

    /// The ready count a status report gives for `placed` replicas: the kind's ready field,
    /// or `placed` for kinds without one (being there is being ready).
    pub fn ready_replicas(&self, placed: u32) -> u32 {
        self.summary
            .as_ref()
            .and_then(|s| s.ready)
            .unwrap_or(placed)
    }

    /// What the object's status says of its rollout, without a health rule; none for objects
    /// that are neither workloads nor carry a template revision.
    pub fn workload(&self) -> Option<&WorkloadObservation> {
        self.summary.as_ref()?.workload.as_ref()
    }

    /// The manifest hash the object's applied-hash annotation names, if it names one.
    pub fn applied_hash(&self) -> Option<ManifestHash> {
        self.marks.applied_hash
    }

    /// The owner token the object's owner annotation carries.
    pub fn owner(&self) -> Option<&str> {
        self.marks.owner.as_deref()
    }

    /// The federated object (`namespace/name`) the object's annotation names.
    pub fn federated_object(&self) -> Option<&str> {
        self.marks.object.as_deref()
    }

    pub fn is_managed(&self) -> bool {
        self.marks.managed
    }

    pub fn is_deleting(&self) -> bool {
        self.marks.deleting
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedraft_core::rollout::REVISION_ANNOTATION;
    use serde_json::json;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {
                "name": "web", "namespace": "shop", "resourceVersion": "42", "generation": 2,
                "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE},
                "annotations": {"a": "b", "fedraft.io/owner": "n1@7", REVISION_ANNOTATION: "3"},
                "managedFields": [{"manager": "fedraft", "fieldsV1": {"f:spec": {}}}],
            },
            "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
            "status": {"readyReplicas": 2, "observedGeneration": 2,
                "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]},
        })
    }

    #[test]
    fn full_gives_back_everything_but_managed_fields() {
        let live = LiveObject::from_value(deployment());
        let mut want = deployment();
        want["metadata"]
            .as_object_mut()
            .map(|m| m.remove("managedFields"));
        assert_eq!(live.full(), Some(want));
        let body = live.body.as_deref().unwrap_or_default();
        assert!(!body.contains("managedFields"), "{body}");
        assert_eq!(live.resource_version.as_deref(), Some("42"));
        assert!(live.is_managed() && !live.is_deleting());
    }

    #[test]
    fn the_annotations_a_pass_reads_are_kept_typed() {
        let live = LiveObject::from_value(deployment());
        assert_eq!(live.owner(), Some("n1@7"));
        assert_eq!(live.federated_object(), None);
        assert_eq!(live.applied_hash(), None);
        let hash = crate::compare::manifest_hash(&json!({"a": 1}));
        let mut stamped = deployment();
        stamped["metadata"]["annotations"][APPLIED_HASH_ANNOTATION] = json!(hash.to_string());
        stamped["metadata"]["annotations"][OBJECT_ANNOTATION] = json!("shop/web");
        let live = LiveObject::from_value(stamped);
        assert_eq!(live.applied_hash(), Some(hash));
        assert_eq!(live.federated_object(), Some("shop/web"));
        // An annotation that is not a hash fedraft stamps names none.
        let mut edited = deployment();
        edited["metadata"]["annotations"][APPLIED_HASH_ANNOTATION] = json!("edited");
        assert_eq!(LiveObject::from_value(edited).applied_hash(), None);
    }

    #[test]
    fn the_summary_agrees_with_reading_the_whole_object() {
        for object in [
            deployment(),
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"},
                "status": {"numberReady": 4, "desiredNumberScheduled": 5}}),
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                "spec": {"completions": 2}, "status": {"ready": 1}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
            json!({"apiVersion": "v1", "kind": "Deployment", "metadata": {"name": "no-status"}}),
        ] {
            let live = LiveObject::from_value(object.clone());
            let kind = object["kind"].as_str().unwrap_or_default();
            for placed in [0, 1, 7] {
                assert_eq!(
                    live.ready_replicas(placed),
                    crate::plan::ready_replicas(kind, Some(&object), placed),
                    "{kind}"
                );
            }
            assert_eq!(
                live.workload(),
                crate::workload::observe_workload(kind, &object, None).as_ref(),
                "{kind}"
            );
        }
        let live = LiveObject::from_value(deployment());
        let observed = live.workload().map(|o| (o.revision, o.ready, o.replicas));
        assert_eq!(observed, Some((Some(3), 2, 3)));
    }

    #[test]
    fn deletion_and_release_are_marked() {
        let mut going = deployment();
        going["metadata"]["deletionTimestamp"] = json!("2026-12-01T00:00:00Z");
        assert!(LiveObject::from_value(going).is_deleting());
        let mut released = deployment();
        released["metadata"]["labels"] = json!({});
        assert!(!LiveObject::from_value(released).is_managed());
    }

    /// A manifest as fedraft would apply it: no status, no managedFields.
    fn manifest() -> Value {
        let mut m = deployment();
        m.as_object_mut().map(|m| m.remove("status"));
        m["metadata"]
            .as_object_mut()
            .map(|m| m.remove("managedFields"));
        m
    }

    #[test]
    fn holds_compares_with_the_whole_object() {
        let live = LiveObject::from_value(deployment());
        assert!(live.holds(&manifest()));
        let edits = [
            ("/spec/replicas", json!(4)),
            // An annotation the marks do not keep.
            ("/metadata/annotations/a", json!("c")),
            ("/spec/template/spec/containers/0/image", json!("j")),
        ];
        for (path, value) in edits {
            let mut desired = manifest();
            if let Some(v) = desired.pointer_mut(path) {
                *v = value;
            }
            assert!(!live.holds(&desired), "{path}");
        }
        let mut extra = manifest();
        extra["data"] = json!({});
        assert!(live.holds(&extra), "an empty field asks for nothing");
    }

    #[test]
    fn objects_without_spec_or_status_round_trip() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "shop"}, "data": {"k": "v"}});
        let live = LiveObject::from_value(cm.clone());
        assert_eq!(live.full(), Some(cm));
        assert_eq!(live.workload(), None);
    }

    #[test]
    fn a_settled_copy_keeps_what_passes_read_and_drops_the_body() {
        let live = LiveObject::from_value(deployment());
        let settled = live.settled();
        assert!(settled.is_settled() && !live.is_settled());
        assert_eq!(settled.full(), None);
        assert_eq!(settled.resource_version, live.resource_version);
        assert_eq!(settled.owner(), Some("n1@7"));
        assert_eq!(settled.ready_replicas(5), live.ready_replicas(5));
        assert_eq!(settled.workload(), live.workload());
        assert!(settled.is_managed() && !settled.is_deleting());
    }

    #[test]
    fn the_copies_a_watch_reads_share_their_owner_token() {
        let mut shared = SharedReads::default();
        let token = |l: &LiveObject| l.marks.owner.clone();
        let first = LiveObject::read(deployment(), &mut shared);
        let second = LiveObject::read(deployment(), &mut shared);
        let (a, b) = (token(&first), token(&second));
        assert!(matches!((&a, &b), (Some(a), Some(b)) if Arc::ptr_eq(a, b)));
        let settled = token(&second.settled());
        assert!(matches!((&a, &settled), (Some(a), Some(s)) if Arc::ptr_eq(a, s)));
        let mut other = deployment();
        other["metadata"]["annotations"][OWNER_ANNOTATION] = json!("n2@9");
        let other = LiveObject::read(other, &mut shared);
        assert_eq!(other.owner(), Some("n2@9"));
        assert_eq!(second.owner(), Some("n1@7"));
        assert_eq!(
            first,
            LiveObject::from_value(deployment()),
            "sharing changes no value"
        );
    }

    fn conditions(l: &LiveObject) -> Option<Arc<[WorkloadCondition]>> {
        l.workload().map(|o| o.conditions.clone())
    }

    /// A Deployment whose status reports `Available` with `reason`, and `Progressing`.
    fn reporting(reason: &str) -> Value {
        let mut d = deployment();
        d["status"]["conditions"] = json!([
            {"type": "Available", "status": "True", "reason": reason},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
        ]);
        d
    }

    #[test]
    fn the_copies_a_watch_reads_share_equal_condition_lists() {
        let mut shared = SharedReads::default();
        let first = LiveObject::read(reporting("MinimumReplicasAvailable"), &mut shared);
        let other = LiveObject::read(reporting("MinimumReplicasUnavailable"), &mut shared);
        let second = LiveObject::read(reporting("MinimumReplicasAvailable"), &mut shared);
        let (a, b, o) = (conditions(&first), conditions(&second), conditions(&other));
        assert!(matches!((&a, &b), (Some(a), Some(b)) if Arc::ptr_eq(a, b)));
        assert!(matches!((&a, &o), (Some(a), Some(o)) if !Arc::ptr_eq(a, o)));
        let settled = conditions(&second.settled());
        assert!(matches!((&a, &settled), (Some(a), Some(s)) if Arc::ptr_eq(a, s)));
        // Sharing changes no value: each copy is what a read on its own gives.
        for (live, reason) in [
            (&first, "MinimumReplicasAvailable"),
            (&other, "MinimumReplicasUnavailable"),
            (&second, "MinimumReplicasAvailable"),
        ] {
            assert_eq!(*live, LiveObject::from_value(reporting(reason)));
            let reasons: Vec<_> = live
                .workload()
                .map(|o| o.conditions.iter().map(|c| c.reason.to_string()).collect())
                .unwrap_or_default();
            assert_eq!(reasons, [reason, "NewReplicaSetAvailable"]);
        }
        // Copies read apart share nothing.
        let apart = conditions(&LiveObject::from_value(reporting(
            "MinimumReplicasAvailable",
        )));
        assert!(matches!((&a, &apart), (Some(a), Some(p)) if !Arc::ptr_eq(a, p)));
    }

    #[test]
    fn a_watch_remembers_a_bounded_number_of_condition_lists() {
        let mut shared = SharedReads::default();
        let steady = LiveObject::read(reporting("MinimumReplicasAvailable"), &mut shared);
        for i in 0..100 {
            let live = LiveObject::read(reporting(&format!("Reason{i}")), &mut shared);
            assert!(shared.conditions.len() <= REMEMBERED_CONDITIONS);
            // A list read again while still remembered is the one held.
            let again = LiveObject::read(reporting(&format!("Reason{i}")), &mut shared);
            let (a, b) = (conditions(&live), conditions(&again));
            assert!(matches!((&a, &b), (Some(a), Some(b)) if Arc::ptr_eq(a, b)));
            // The list read between others stays remembered: it was used last but one.
            let kept = LiveObject::read(reporting("MinimumReplicasAvailable"), &mut shared);
            let (s, k) = (conditions(&steady), conditions(&kept));
            assert!(matches!((&s, &k), (Some(s), Some(k)) if Arc::ptr_eq(s, k)));
        }
        assert_eq!(shared.conditions.len(), REMEMBERED_CONDITIONS);
        // A list pushed out is read into a copy of its own, equal to the one it was.
        let first = LiveObject::read(reporting("Reason0"), &mut shared);
        assert_eq!(first, LiveObject::from_value(reporting("Reason0")));
        assert!(shared.conditions.len() <= REMEMBERED_CONDITIONS);
        let distinct = shared
            .conditions
            .iter()
            .enumerate()
            .all(|(i, l)| shared.conditions[..i].iter().all(|m| m != l));
        assert!(distinct, "a list is remembered once");
    }

    #[test]
    fn a_settled_copy_fits_a_128_byte_allocation() {
        // With the Arc's two counters: jemalloc's 128-byte class, down from 256.
        assert!(std::mem::size_of::<LiveObject>() + 16 <= 128);
        let config_map =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        assert_eq!(LiveObject::from_value(config_map).summary, None);
        assert!(LiveObject::from_value(deployment()).summary.is_some());
    }
}
