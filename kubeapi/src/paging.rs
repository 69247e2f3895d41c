//! `limit` and `continue` on lists: the continue token and the cut of one page.
//!
//! A token is `{list resourceVersion}/{namespace}/{name}` of the last item served: pages are
//! cut from a list ordered by (namespace, name), so the next page starts after that key, and
//! the version lets the server refuse a token older than its retained history (410). This
//! module must not read storage; the caller lists, filters and orders.

use std::borrow::Borrow;

use serde_json::Value;

use crate::meta;
use crate::status::ApiError;

/// Where the next page of a list starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinueToken {
    /// The resourceVersion of the list the pages belong to.
    pub resource_version: u64,
    /// The key of the last item served.
    pub namespace: String,
    pub name: String,
}

impl ContinueToken {
    /// Parses a `continue` query value; anything malformed is a 400.
    pub fn parse(tok: &str) -> Result<Self, ApiError> {
        let bad = || ApiError::BadRequest(format!("invalid continue token {tok:?}"));
        let mut parts = tok.splitn(3, '/');
        let resource_version = parts.next().and_then(|r| r.parse().ok()).ok_or_else(bad)?;
        let namespace = parts.next().ok_or_else(bad)?.to_string();
        let name = parts.next().ok_or_else(bad)?.to_string();
        Ok(ContinueToken {
            resource_version,
            namespace,
            name,
        })
    }

    /// The token that continues after `last`, an item of the list at `resource_version`.
    pub fn after(resource_version: u64, last: &Value) -> Self {
        let (namespace, name) = key(last);
        ContinueToken {
            resource_version,
            namespace,
            name,
        }
    }

    pub fn encode(&self) -> String {
        format!("{}/{}/{}", self.resource_version, self.namespace, self.name)
    }
}

/// The (namespace, name) a list is ordered by.
pub fn key(obj: &Value) -> (String, String) {
    (
        meta::meta_str(obj, "namespace").unwrap_or("").to_string(),
        meta::name(obj).to_string(),
    )
}

/// Parses `limit` (absent or 0: no limit).
pub fn parse_limit(v: Option<&str>) -> Result<Option<usize>, ApiError> {
    match v {
        None => Ok(None),
        Some(s) => s
            .parse::<u64>()
            .map(|l| (l > 0).then_some(l as usize))
            .map_err(|_| ApiError::BadRequest(format!("invalid limit: {s:?}"))),
    }
}

/// One page of `items` (ordered by [`key`]): those after `after`'s key, at most `limit`; and
/// how many items remain after the page.
pub fn page<T: Borrow<Value>>(
    items: impl IntoIterator<Item = T>,
    after: Option<&ContinueToken>,
    limit: Option<usize>,
) -> (Vec<T>, usize) {
    let mut items = items.into_iter();
    let mut out = Vec::new();
    for o in items.by_ref() {
        if let Some(a) = after {
            let (ns, name) = key(o.borrow());
            if (ns.as_str(), name.as_str()) <= (a.namespace.as_str(), a.name.as_str()) {
                continue;
            }
        }
        out.push(o);
        if limit.is_some_and(|l| out.len() >= l) {
            break;
        }
    }
    (out, items.count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(ns: &str, name: &str) -> Value {
        json!({"metadata": {"namespace": ns, "name": name}})
    }

    #[test]
    fn tokens_round_trip_and_reject_garbage() {
        let t = ContinueToken::after(42, &obj("default", "web"));
        assert_eq!(t.encode(), "42/default/web");
        assert_eq!(ContinueToken::parse(&t.encode()).unwrap(), t);
        let cluster = ContinueToken::after(7, &json!({"metadata": {"name": "n1"}}));
        assert_eq!(ContinueToken::parse(&cluster.encode()).unwrap(), cluster);
        let parsed =
            |t: &str| ContinueToken::parse(t).map(|c| (c.resource_version, c.namespace, c.name));
        assert_eq!(parsed("7/ns/n").unwrap(), (7, "ns".into(), "n".into()));
        assert_eq!(parsed("7//n").unwrap(), (7, "".into(), "n".into()));
        assert!(parsed("x/ns/n").is_err());
        for bad in ["", "x/a/b", "12", "12/ns"] {
            assert_eq!(ContinueToken::parse(bad).unwrap_err().code(), 400, "{bad}");
        }
    }

    #[test]
    fn pages_walk_the_whole_list_once() {
        let items: Vec<Value> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|n| obj("ns", n))
            .collect();
        let mut seen = Vec::new();
        let mut token: Option<ContinueToken> = None;
        loop {
            let (page, remaining) = page(items.clone(), token.as_ref(), Some(2));
            seen.extend(page.iter().map(|o| meta::name(o).to_string()));
            if remaining == 0 {
                break;
            }
            token = page.last().map(|l| ContinueToken::after(1, l));
        }
        assert_eq!(seen, ["a", "b", "c", "d", "e"]);
        assert_eq!(page(items, None, None).0.len(), 5);
        assert_eq!(parse_limit(Some("0")).unwrap(), None);
        assert_eq!(parse_limit(Some("3")).unwrap(), Some(3));
        assert!(parse_limit(Some("-1")).is_err());
    }
}
