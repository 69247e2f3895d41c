//! What the most recently deleted objects last were, for watchers: a Kubernetes watch's
//! `DELETED` event carries the object as it was before the delete, so that a label selector
//! still matches it and an informer's delete handler gets the whole object.
//!
//! The watch hub reads a tombstone right after the delete's entry is applied, so a short list,
//! bounded in count and in manifest bytes, suffices; a reader that fell further behind finds
//! nothing and names the object only. Kept per node and derived from what was applied: empty
//! after a restore.
//!
//! Must not: be encoded, hashed or read by any handler: nothing replicated may depend on it.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::door::TemplateRecord;
use crate::model::FederatedObject;

/// Deletes remembered. A mass delete of more objects in one go than this leaves the oldest of
/// them without a tombstone by the time the hub gets to them.
pub const TOMBSTONES_KEPT: usize = 1024;
/// Manifest bytes the tombstones may hold: a template may take a MiB, and a thousand of them
/// would otherwise stay in memory until as many newer deletes pushed them out.
pub const TOMBSTONE_BYTES: usize = 16 << 20;

/// One deleted object as it was, and the door's record of its template if it had one.
#[derive(Debug, Clone)]
pub struct Tombstone {
    /// The index of the entry that deleted it.
    pub index: u64,
    pub object: Arc<FederatedObject>,
    pub template: Option<Arc<TemplateRecord>>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Tombstones {
    kept: VecDeque<Tombstone>,
    /// Manifest bytes of `kept`.
    bytes: usize,
}

impl Tombstones {
    pub fn push(&mut self, index: u64, object: Arc<FederatedObject>) {
        self.bytes += object.spec.template.len();
        self.kept.push_back(Tombstone {
            index,
            object,
            template: None,
        });
        while self.kept.len() > TOMBSTONES_KEPT || self.bytes > TOMBSTONE_BYTES {
            let Some(old) = self.kept.pop_front() else {
                break;
            };
            self.bytes -= old.object.spec.template.len();
        }
    }

    /// Adds the template's record (if it had one) to the object the same entry deleted.
    pub fn attach_template(
        &mut self,
        index: u64,
        namespace: &str,
        name: &str,
        rec: Option<TemplateRecord>,
    ) {
        let at = self.position(index, namespace, name);
        if let (Some(rec), Some(t)) = (rec, at.and_then(|i| self.kept.get_mut(i))) {
            t.template = Some(Arc::new(rec));
        }
    }

    /// The object `index` deleted, if still remembered.
    pub fn find(&self, index: u64, namespace: &str, name: &str) -> Option<&Tombstone> {
        self.kept.get(self.position(index, namespace, name)?)
    }

    /// Where that tombstone is: searched from the newest, as far back as `index`.
    fn position(&self, index: u64, namespace: &str, name: &str) -> Option<usize> {
        let newest_first = self.kept.iter().enumerate().rev();
        newest_first
            .take_while(|(_, t)| t.index >= index)
            .find(|(_, t)| {
                t.index == index && t.object.namespace == namespace && t.object.name == name
            })
            .map(|(i, _)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str) -> Arc<FederatedObject> {
        sized(name, 2)
    }

    fn sized(name: &str, template_bytes: usize) -> Arc<FederatedObject> {
        Arc::new(FederatedObject {
            namespace: "ns".into(),
            name: name.into(),
            spec: crate::model::ObjectSpec {
                template: "x".repeat(template_bytes),
                placement: Default::default(),
                overrides: Vec::new(),
            },
            template_info: Default::default(),
            status: Default::default(),
            resource_version: 1,
        })
    }

    #[test]
    fn finds_the_object_an_entry_deleted_and_forgets_the_oldest() {
        let mut t = Tombstones::default();
        t.push(5, obj("a"));
        t.push(7, obj("b"));
        t.push(7, obj("c"));
        assert_eq!(
            t.find(7, "ns", "b").map(|x| x.object.name.as_str()),
            Some("b")
        );
        assert!(t.find(5, "ns", "b").is_none(), "another entry's delete");
        assert!(t.find(7, "other", "b").is_none());
        let rec = TemplateRecord {
            api_version: "v1".into(),
            labels: [("app".to_string(), "web".to_string())].into(),
            generation: 1,
            created_ms: 0,
            created_index: 1,
            bound_to: None,
        };
        t.attach_template(7, "ns", "c", Some(rec));
        assert!(t.find(7, "ns", "c").is_some_and(|x| x.template.is_some()));
        assert!(t.find(7, "ns", "b").is_some_and(|x| x.template.is_none()));

        for i in 0..TOMBSTONES_KEPT as u64 {
            t.push(10 + i, obj("x"));
        }
        assert_eq!(t.kept.len(), TOMBSTONES_KEPT);
        assert!(t.find(5, "ns", "a").is_none(), "forgotten");
        assert!(t.find(9 + TOMBSTONES_KEPT as u64, "ns", "x").is_some());
    }

    #[test]
    fn large_manifests_are_forgotten_sooner() {
        let mut t = Tombstones::default();
        let mib = 1 << 20;
        for i in 0..20u64 {
            t.push(i, sized(&format!("big{i}"), mib));
        }
        assert!(t.bytes <= TOMBSTONE_BYTES, "{}", t.bytes);
        assert_eq!(t.kept.len(), TOMBSTONE_BYTES / mib);
        assert!(t.find(19, "ns", "big19").is_some(), "the newest stays");
        assert!(t.find(0, "ns", "big0").is_none());
        let held: usize = t.kept.iter().map(|x| x.object.spec.template.len()).sum();
        assert_eq!(held, t.bytes);
    }
}
