//! Server-side filtering and paging of the list endpoints (`/v1/clusters`, `/v1/objects`,
//! `/v1/namespaces/{ns}/objects`): `?q=` (a case-insensitive substring of the name, of
//! `namespace/name`, or of a `key=value` label), `?health=` (clusters), `?limit=` and
//! `?continue=`, so a console or a script over a fleet of thousands reads one page at a time.
//!
//! Items come in key order (cluster name; namespace then name), and a continue token is the
//! last key served, so each page starts strictly after it: an item that exists throughout is
//! served exactly once, though each page reads the state as it is then (like Kubernetes' lists
//! after their snapshot expired). Without `limit` the answer is the whole list, as before.
//! Must not: hold the state's lock for more than the filter (rendering happens after).

use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ApiError;

/// Largest page; a bigger `limit` is refused rather than silently cut.
pub const MAX_LIMIT: usize = 10_000;

/// Query parameters of a list.
#[derive(Debug, Default, Deserialize)]
pub struct ListParams {
    /// Serve local (possibly stale) state instead of a linearizable read.
    #[serde(default)]
    pub stale: bool,
    pub limit: Option<usize>,
    #[serde(rename = "continue")]
    pub cont: Option<String>,
    pub q: Option<String>,
    pub health: Option<String>,
}

/// What a list request asks for, checked.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub limit: Option<usize>,
    /// Serve keys strictly after this one.
    pub after: Option<String>,
    /// Lower-cased substring filter.
    pub q: Option<String>,
    pub health: Option<String>,
}

impl ListParams {
    pub fn page(&self) -> Result<Page, ApiError> {
        if let Some(l) = self.limit {
            if l == 0 || l > MAX_LIMIT {
                return Err(ApiError::invalid(
                    "limit",
                    format!("expected 1 to {MAX_LIMIT}"),
                ));
            }
        }
        let after = match self.cont.as_deref() {
            None | Some("") => None,
            Some(t) => Some(decode_token(t)?),
        };
        Ok(Page {
            limit: self.limit,
            after,
            q: self
                .q
                .as_deref()
                .map(str::trim)
                .filter(|q| !q.is_empty())
                .map(str::to_lowercase),
            health: self.health.clone().filter(|h| !h.is_empty()),
        })
    }
}

/// The token is the key in hex: opaque to clients, and free of characters a URL would mangle.
fn encode_token(key: &str) -> String {
    hex::encode(key.as_bytes())
}

fn decode_token(t: &str) -> Result<String, ApiError> {
    hex::decode(t)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| ApiError::invalid("continue", "not a token this API gave out"))
}

impl Page {
    /// Whether `text` (already in its searchable form) passes `q`.
    pub fn matches(&self, texts: &[&str]) -> bool {
        match &self.q {
            None => true,
            Some(q) => texts.iter().any(|t| t.to_lowercase().contains(q.as_str())),
        }
    }

    /// Whether an item keyed `key` lies after the continue token.
    pub fn after_token(&self, key: &str) -> bool {
        self.after.as_deref().is_none_or(|a| key > a)
    }

    /// Whether the object `namespace/name` lies after the continue token. Compared as a pair,
    /// the order the state keeps: as one string, `a-b/x` would sort before `a/x` (`-` < `/`).
    pub fn after_object(&self, namespace: &str, name: &str) -> bool {
        self.after.as_deref().is_none_or(|a| {
            let (ns, n) = a.split_once('/').unwrap_or((a, ""));
            (namespace, name) > (ns, n)
        })
    }

    /// Cuts the matching items (in key order, after the token) to one page; returns the page and
    /// the list's `metadata` (`continue`, `remainingItemCount`) when `limit` was given.
    pub fn cut<T>(&self, mut items: Vec<T>, key: impl Fn(&T) -> String) -> (Vec<T>, Option<Value>) {
        let Some(limit) = self.limit else {
            return (items, None);
        };
        let remaining = items.len().saturating_sub(limit);
        items.truncate(limit);
        let cont = (remaining > 0)
            .then(|| items.last().map(|i| encode_token(&key(i))))
            .flatten();
        (
            items,
            Some(json!({"continue": cont, "remainingItemCount": remaining})),
        )
    }
}

/// `list` with `metadata` added when the page has some.
pub fn with_metadata(mut list: Value, metadata: Option<Value>) -> Value {
    if let Some(m) = metadata {
        list["metadata"] = m;
    }
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(limit: Option<usize>, cont: Option<&str>, q: Option<&str>) -> ListParams {
        ListParams {
            limit,
            cont: cont.map(Into::into),
            q: q.map(Into::into),
            ..ListParams::default()
        }
    }

    #[test]
    fn pages_follow_each_other_without_repeating_or_skipping() {
        let keys: Vec<String> = (0..25).map(|i| format!("dc{i:02}")).collect();
        let mut token: Option<String> = None;
        let mut seen = Vec::new();
        loop {
            let page = params(Some(10), token.as_deref(), None).page().unwrap();
            let items: Vec<String> = keys
                .iter()
                .filter(|k| page.after_token(k))
                .cloned()
                .collect();
            let (items, meta) = page.cut(items, Clone::clone);
            seen.extend(items);
            let meta = meta.unwrap();
            match meta["continue"].as_str() {
                Some(t) => token = Some(t.to_string()),
                None => {
                    assert_eq!(meta["remainingItemCount"], 0);
                    break;
                }
            }
        }
        assert_eq!(seen, keys);
    }

    #[test]
    fn objects_resume_in_the_states_order_of_namespace_then_name() {
        let page = params(Some(1), Some(&encode_token("a/x")), None)
            .page()
            .unwrap();
        assert!(
            page.after_object("a-b", "a"),
            "a-b sorts after a as a namespace"
        );
        assert!(page.after_object("a", "y"));
        assert!(!page.after_object("a", "x"));
        assert!(!page.after_object("0", "z"));
    }

    #[test]
    fn filters_are_case_insensitive_substrings_and_bad_input_is_refused() {
        let page = params(None, None, Some(" EU-West ")).page().unwrap();
        assert!(page.matches(&["dc1", "region=eu-west-1"]));
        assert!(!page.matches(&["dc1", "region=us-east-1"]));
        assert!(params(Some(0), None, None).page().is_err());
        assert!(params(Some(MAX_LIMIT + 1), None, None).page().is_err());
        assert!(params(None, Some("zz-not-hex"), None).page().is_err());
        let (all, meta) = params(None, None, None)
            .page()
            .unwrap()
            .cut(vec![1, 2, 3], |i| i.to_string());
        assert_eq!(all, vec![1, 2, 3]);
        assert!(meta.is_none(), "no limit: the whole list, as before");
    }
}
