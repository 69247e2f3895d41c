//! What each member cluster should run, as the executors read it: the objects placed on it (or
//! kept there mid-move), the replicas it runs of each, and each object rendered for it with its
//! overrides, rollout revision and carried labels.
//!
//! Must not: change the state; every function here is a read the executors and the API share,
//! so that both see one rendering.

use std::collections::BTreeMap;

use crate::model::{FederatedObject, ObjectKey};
use crate::render;
use crate::state::State;

/// One object as a member cluster should run it.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredObject {
    pub key: ObjectKey,
    /// Replicas on this cluster.
    pub replicas: u32,
    /// The rendered manifest, or why rendering failed for this cluster (e.g. an override's
    /// JSON patch does not apply to the template).
    pub manifest: Result<serde_json::Value, render::RenderError>,
    /// The identity and scope the object was admitted with (None when its template cannot
    /// be read; `manifest` then says why). Executors write nothing that differs from it.
    pub admitted: Option<crate::admission::Admitted>,
}

impl State {
    /// Manifests a member cluster should run, rendered with that cluster's overrides: the
    /// objects placed there and those it keeps while they move away (`handover`), then the
    /// tenant quotas derived for it (`member_quota`), in key order.
    pub fn desired_for_cluster(&self, cluster: &str) -> Vec<DesiredObject> {
        let Some(c) = self.d.clusters.get(cluster) else {
            return Vec::new();
        };
        let mut out: Vec<DesiredObject> = self
            .objects_on(cluster)
            .into_iter()
            .map(|obj| {
                let replicas = self.replicas_running(obj, cluster);
                let (manifest, admitted) = self.render_for(obj, cluster, &c.spec.labels);
                DesiredObject {
                    key: obj.key(),
                    replicas,
                    manifest,
                    admitted,
                }
            })
            .collect();
        let derived = self.derived_for_cluster(cluster);
        if !derived.is_empty() {
            out.extend(derived.into_iter().map(|(_, d)| d));
            out.sort_by(|a, b| a.key.cmp(&b.key));
        }
        out
    }

    /// The objects `cluster` should run ([`Self::runs_on`]: placed there, or kept while they
    /// move away), in key order, found by the placement index: a member's executor scans its
    /// own objects, not the whole federation's.
    pub fn objects_on(&self, cluster: &str) -> Vec<&FederatedObject> {
        let placed = self.ix.placed_on.get(cluster).into_iter().flatten();
        let placed = placed.map(|k| &**k);
        let mut keys: Vec<&ObjectKey> = placed.chain(self.held_keys_on(cluster)).collect();
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .filter_map(|k| self.object(&k.namespace, &k.name))
            .collect()
    }

    /// Replicas `cluster` should run of `obj`: its placement there, or more while it keeps
    /// replicas the object is moving away (`handover`).
    pub fn replicas_running(&self, obj: &FederatedObject, cluster: &str) -> u32 {
        let placed = obj.replicas_on(cluster);
        if self.holds_nothing() {
            return placed;
        }
        self.held_on(&obj.key(), cluster)
            .map_or(placed, |h| h.max(placed))
    }

    /// Whether `cluster` should run `obj` at all: placed there, or keeping it mid-move.
    pub fn runs_on(&self, obj: &FederatedObject, cluster: &str) -> bool {
        obj.replicas_on(cluster) > 0
            || (!self.holds_nothing() && self.held_on(&obj.key(), cluster).is_some())
    }

    /// One object rendered for one cluster: the template revision that cluster runs, its
    /// overrides, its replicas when divided, checked against the admitted identity. Executors
    /// render through here too (`DesiredCache`), so both stay one rendering.
    pub fn render_for(
        &self,
        obj: &FederatedObject,
        cluster: &str,
        labels: &BTreeMap<String, String>,
    ) -> (
        Result<serde_json::Value, render::RenderError>,
        Option<crate::admission::Admitted>,
    ) {
        let replicas = self.replicas_running(obj, cluster);
        let divided = obj.spec.placement.replicas.mode.divides();
        let (template, revision) = self.template_for(obj, cluster);
        let (mut manifest, admitted) = crate::admission::render_admitted_template(
            obj,
            template,
            cluster,
            labels,
            divided.then_some(replicas),
        );
        if let (Some(n), Ok(m)) = (revision, manifest.as_mut()) {
            crate::rollout::stamp_revision(m, n);
        }
        if let Ok(m) = manifest.as_mut() {
            self.stamp_preserved(obj, cluster, m);
        }
        (manifest, admitted)
    }
}
