//! Service discovery facts in the state: each federated Service's discovery section and the
//! endpoints executors observed per member cluster. The view served from them lives in
//! `crate::discovery`.
//!
//! Commands with their home here:
//! - `PutObjectWithDiscovery`: propose = the API validates the section and the template; apply =
//!   check the section and that the template is a v1 Service named by a DNS label, then run the
//!   ordinary put (all its checks) and only if it was accepted store the section. A section
//!   change alone moves the object's resource version. The caller gets the put's outcome.
//! - `ServiceEndpoints`: a batch of observations. Each is validated first (one bad item refuses
//!   the batch, nothing changes); then an observation of an existing object with a discovery
//!   section is stored only when it differs from the stored one, so an unchanged report changes
//!   neither the state nor its hash. Reports for unknown objects or clusters are skipped (the
//!   executor raced a delete).
//!
//! Follow-ups of other commands ([`State::services_follow`]): a plain `PutObject` drops the
//! section (a put replaces the whole spec), `DeleteObject` drops section and observations, and
//! `DeregisterCluster` drops that cluster's observations.
//!
//! Kept apart from `Data` (and encoded after it in the snapshot) so the rest of the state's
//! layout is untouched.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::command::Command;
use crate::model::{ObjectKey, ObjectSpec};
use crate::service::{validate_service_template, DiscoverySpec, EndpointsReport, ServicePort};
use crate::state::{check_batch_len, ChangeKind, ChangeOp, Ctx, HandlerResult, State};

/// The latest observation of one Service in one member cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObservedEndpoints {
    pub addresses: Vec<String>,
    pub ports: Vec<ServicePort>,
    pub ready_endpoints: u32,
    /// Index and log time of the entry that last changed this observation.
    pub changed_index: u64,
    pub changed_ms: u64,
}

/// Discovery sections and observations, keyed by object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Services {
    pub discovery: BTreeMap<ObjectKey, DiscoverySpec>,
    /// object -> cluster -> observation.
    pub endpoints: BTreeMap<ObjectKey, BTreeMap<String, ObservedEndpoints>>,
}

impl Services {
    pub fn is_empty(&self) -> bool {
        self.discovery.is_empty() && self.endpoints.is_empty()
    }
}

impl State {
    pub(crate) fn on_put_object_with_discovery(
        &mut self,
        namespace: &str,
        name: &str,
        spec: &ObjectSpec,
        discovery: &DiscoverySpec,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        discovery.validate("discovery")?;
        validate_service_template(&spec.template, name, "discovery")?;
        let rv = self.on_put_object(namespace, name, spec, expected, ctx)?;
        let key = ObjectKey::new(namespace, name);
        if self.svc.discovery.get(&key) == Some(discovery) {
            return Ok(rv);
        }
        self.svc.discovery.insert(key.clone(), discovery.clone());
        if let Some(obj) = self.d.objects.get_mut(namespace, name) {
            if obj.resource_version != ctx.index {
                obj.resource_version = ctx.index;
                ctx.change(ChangeKind::Object, key.path(), ChangeOp::Modified);
            }
        }
        Ok(Some(ctx.index))
    }

    pub(crate) fn on_service_endpoints(
        &mut self,
        batch: &[EndpointsReport],
        ctx: &mut Ctx,
    ) -> HandlerResult {
        check_batch_len(batch.len(), "reports")?;
        for (i, r) in batch.iter().enumerate() {
            r.validate(&format!("reports[{i}]"))?;
        }
        for r in batch {
            let key = ObjectKey::new(r.namespace.clone(), r.name.clone());
            if !self.svc.discovery.contains_key(&key) || !self.d.clusters.contains_key(&r.cluster) {
                continue;
            }
            let per_cluster = self.svc.endpoints.entry(key).or_default();
            let same = per_cluster.get(&r.cluster).is_some_and(|o| {
                o.addresses == r.addresses
                    && o.ports == r.ports
                    && o.ready_endpoints == r.ready_endpoints
            });
            if same {
                continue;
            }
            per_cluster.insert(
                r.cluster.clone(),
                ObservedEndpoints {
                    addresses: r.addresses.clone(),
                    ports: r.ports.clone(),
                    ready_endpoints: r.ready_endpoints,
                    changed_index: ctx.index,
                    changed_ms: ctx.now_ms,
                },
            );
        }
        Ok(None)
    }

    /// Keeps discovery facts in step with an accepted command handled elsewhere.
    pub(crate) fn services_follow(&mut self, command: &Command) {
        match command {
            Command::PutObject {
                namespace, name, ..
            } => {
                self.svc
                    .discovery
                    .remove(&ObjectKey::new(namespace.clone(), name.clone()));
            }
            Command::DeleteObject {
                namespace, name, ..
            } => {
                let key = ObjectKey::new(namespace.clone(), name.clone());
                self.svc.discovery.remove(&key);
                self.svc.endpoints.remove(&key);
            }
            Command::DeregisterCluster { name, .. } => {
                for per_cluster in self.svc.endpoints.values_mut() {
                    per_cluster.remove(name);
                }
                self.svc.endpoints.retain(|_, m| !m.is_empty());
            }
            _ => {}
        }
    }

    // ---- read accessors ----

    /// The discovery section of an object, if it has one.
    pub fn discovery(&self, namespace: &str, name: &str) -> Option<&DiscoverySpec> {
        self.svc.discovery.get(&ObjectKey::new(namespace, name))
    }

    /// Every object with a discovery section, ordered by namespace then name.
    pub fn discovery_keys(&self) -> impl Iterator<Item = (&ObjectKey, &DiscoverySpec)> {
        self.svc.discovery.iter()
    }

    /// What executors last observed of an object's Service, per cluster.
    pub fn observed_endpoints(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<&BTreeMap<String, ObservedEndpoints>> {
        self.svc.endpoints.get(&ObjectKey::new(namespace, name))
    }
}
