//! One resource request as the verbs see it: what its path names ([`Target`]), its query
//! parameters ([`Params`]), headers and body ([`Call`]), and the shape of a verb's answer
//! ([`Reply`]). The router builds a `Call`; the read verbs (`routes`) and the write verbs
//! (`writes`) take it. Must not: serve HTTP or touch the store.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, Uri};
use serde_json::Value;

use crate::discovery::{self, ResourceDef};
use crate::status::{ApiError, Subject};
use crate::Shared;

/// What a resource path names.
#[derive(Debug)]
pub struct Target {
    pub res: &'static ResourceDef,
    /// Namespace from the path; None for cluster-scoped kinds and all-namespace lists.
    pub ns: Option<String>,
    pub name: Option<String>,
    /// Only "status" is served.
    pub sub: Option<String>,
}

impl Target {
    pub fn ns_str(&self) -> &str {
        self.ns.as_deref().unwrap_or("")
    }

    pub fn subject(&self, name: &str) -> Subject {
        Subject {
            group: self.res.group.to_string(),
            kind: self.res.plural.to_string(),
            name: name.to_string(),
        }
    }
}

fn unknown_resource(group: &str, version: &str, rest: &str) -> ApiError {
    ApiError::NotFound {
        subject: Subject::default(),
        message: format!(
            "the server could not find the requested resource ({group}/{version}/{rest})"
        ),
    }
}

pub fn parse_target(group: &str, version: &str, rest: &str) -> Result<Target, ApiError> {
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let lookup = |plural: &str| {
        discovery::find(group, version, plural)
            .ok_or_else(|| unknown_resource(group, version, rest))
    };
    let owned = |s: &&str| s.to_string();
    // namespaces/{ns}/{plural}... names a namespaced resource, unless {plural} is a
    // subresource of the namespace itself.
    let namespaced_path = segs.len() >= 3
        && segs[0] == "namespaces"
        && discovery::find(group, version, segs[2]).is_some_and(|r| r.namespaced);
    let (res, ns, name, sub) = if namespaced_path {
        (
            lookup(segs[2])?,
            segs.get(1).map(owned),
            segs.get(3).map(owned),
            segs.get(4).map(owned),
        )
    } else {
        if segs.len() > 3 {
            return Err(unknown_resource(group, version, rest));
        }
        let res = lookup(segs.first().copied().unwrap_or(""))?;
        if res.namespaced && segs.len() > 1 {
            // A namespaced kind addressed without its namespace.
            return Err(unknown_resource(group, version, rest));
        }
        (res, None, segs.get(1).map(owned), segs.get(2).map(owned))
    };
    if segs.len() > 5 || (sub.is_some() && (sub.as_deref() != Some("status") || !res.has_status()))
    {
        return Err(unknown_resource(group, version, rest));
    }
    Ok(Target { res, ns, name, sub })
}

/// Query parameters; repeated keys keep the last value.
pub struct Params(HashMap<String, String>);

impl Params {
    pub(crate) fn from_uri(uri: &Uri) -> Result<Self, ApiError> {
        let q = axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri)
            .map_err(|e| ApiError::BadRequest(format!("invalid query: {e}")))?;
        Ok(Params(q.0.into_iter().collect()))
    }

    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str).filter(|v| !v.is_empty())
    }

    pub fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true" | "1"))
    }

    pub fn dry_run(&self) -> bool {
        self.get("dryRun") == Some("All")
    }

    pub(crate) fn u64(&self, k: &str) -> Result<Option<u64>, ApiError> {
        self.get(k)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| ApiError::BadRequest(format!("invalid {k}: {v:?}")))
            })
            .transpose()
    }
}

/// Everything a resource handler needs from the request.
pub struct Call {
    pub shared: Arc<Shared>,
    pub target: Target,
    pub params: Params,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// A handler's reply: HTTP code, whether stored state changed, body.
pub type Reply = Result<(StatusCode, bool, Value), ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let t = parse_target("", "v1", "namespaces").unwrap();
        assert_eq!((t.res.plural.as_str(), t.name), ("namespaces", None));
        let t = parse_target("", "v1", "namespaces/a").unwrap();
        assert_eq!(
            (t.res.plural.as_str(), t.name.as_deref()),
            ("namespaces", Some("a"))
        );
        let t = parse_target("", "v1", "namespaces/a/status").unwrap();
        assert_eq!(
            (t.res.plural.as_str(), t.sub.as_deref()),
            ("namespaces", Some("status"))
        );
        let t = parse_target("", "v1", "namespaces/a/configmaps/c").unwrap();
        assert_eq!(
            (t.res.plural.as_str(), t.ns.as_deref(), t.name.as_deref()),
            ("configmaps", Some("a"), Some("c"))
        );
        let t = parse_target("apps", "v1", "namespaces/a/deployments/d/status").unwrap();
        assert_eq!(
            (t.res.plural.as_str(), t.sub.as_deref()),
            ("deployments", Some("status"))
        );
        let t = parse_target("apps", "v1", "deployments").unwrap();
        assert!(t.ns.is_none() && t.name.is_none());
        assert!(parse_target("apps", "v1", "widgets").is_err());
        assert!(parse_target("", "v1", "namespaces/a/configmaps/c/scale").is_err());
        assert!(parse_target("", "v1", "configmaps/c").is_err());
    }
}
