//! apiVersion/kind -> the member cluster's resource (plural name, scope), by discovery.
//!
//! Each distinct kind costs one discovery request per cluster per executor lifetime; the answer
//! is cached. A kind the cluster does not serve is an error of the objects that use it, shown in
//! their status, and asked again on their next retry (a CRD may be installed meanwhile).
//!
//! Must not: guess plural names; a wrong guess would write to the wrong path.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube::core::GroupVersionKind;
use kube::discovery::{pinned_kind, ApiResource, Scope};
use kube::Client;
use tokio::sync::Mutex;

use crate::error::ExecError;
use crate::live_id::LiveType;
use crate::plan::split_api_version;

/// A kind as the member cluster serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub resource: ApiResource,
    pub namespaced: bool,
    /// The kind's names as ids hold them, made once here so that the ids of every prepared
    /// and watched object of the kind share them.
    pub live_type: Arc<LiveType>,
}

impl Resolved {
    pub fn new(resource: ApiResource, namespaced: bool) -> Self {
        let live_type = LiveType::new(&resource.api_version, &resource.kind);
        Resolved {
            resource,
            namespaced,
            live_type,
        }
    }
}

/// Per-cluster discovery cache.
pub struct Resolver {
    client: Client,
    timeout: Duration,
    /// Shared with every prepared object of the kind: one copy of its names per cluster.
    cache: Mutex<HashMap<(String, String), Arc<Resolved>>>,
}

impl Resolver {
    pub fn new(client: Client, timeout: Duration) -> Self {
        Resolver {
            client,
            timeout,
            cache: Mutex::new(HashMap::new()),
        }
    }

    pub async fn resolve(&self, api_version: &str, kind: &str) -> Result<Arc<Resolved>, ExecError> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(r) = self.cache.lock().await.get(&key) {
            return Ok(r.clone());
        }
        let (group, version) = split_api_version(api_version);
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let answer = tokio::time::timeout(self.timeout, pinned_kind(&self.client, &gvk))
            .await
            .map_err(|_| ExecError::Timeout {
                action: format!("discovering {api_version}/{kind}"),
                waited_ms: self.timeout.as_millis() as u64,
            })?;
        let (resource, caps) = answer.map_err(|e| match e {
            kube::Error::Api(ref s) if s.code == 404 => ExecError::UnknownKind {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                reason: crate::error::describe_kube(&e),
            },
            kube::Error::Discovery(d) => ExecError::UnknownKind {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                reason: d.to_string(),
            },
            other => ExecError::kube(format!("discovering {api_version}/{kind}"), other),
        })?;
        let resolved = Arc::new(Resolved::new(resource, caps.scope == Scope::Namespaced));
        self.cache.lock().await.insert(key, resolved.clone());
        Ok(resolved)
    }
}
