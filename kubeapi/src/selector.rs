//! Label selectors (equality and set-based, and the `matchLabels`/`matchExpressions` form objects
//! carry) and field selectors, parsed and matched against objects. Pure; no storage.

use serde_json::Value;

use crate::meta;
use crate::status::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum Req {
    Exists(String),
    NotExists(String),
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

impl Req {
    fn key(&self) -> &str {
        match self {
            Req::Exists(k)
            | Req::NotExists(k)
            | Req::Eq(k, _)
            | Req::NotEq(k, _)
            | Req::In(k, _)
            | Req::NotIn(k, _) => k,
        }
    }
}

/// A parsed `labelSelector`; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<Req>);

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top_level(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            reqs.push(parse_req(part).ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "unable to parse requirement: found '{part}', expected a valid selector"
                ))
            })?);
        }
        Ok(LabelSelector(reqs))
    }

    /// A structured `metav1.LabelSelector` (`matchLabels` and `matchExpressions`) as found in a
    /// Deployment's `spec.selector`. A missing or null selector matches everything.
    pub fn from_object(sel: &Value) -> Result<Self, ApiError> {
        let bad = |what: String| ApiError::BadRequest(format!("invalid label selector: {what}"));
        let mut reqs = Vec::new();
        if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in m {
                let v = v.as_str().ok_or_else(|| bad(format!("matchLabels.{k}")))?;
                reqs.push(Req::Eq(k.clone(), v.to_string()));
            }
        }
        for e in sel
            .get("matchExpressions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let key = e
                .get("key")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let values: Vec<String> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|vs| {
                    vs.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
            reqs.push(match op {
                "In" if !values.is_empty() => Req::In(key, values),
                "NotIn" if !values.is_empty() => Req::NotIn(key, values),
                "Exists" if values.is_empty() => Req::Exists(key),
                "DoesNotExist" if values.is_empty() => Req::NotExists(key),
                _ => return Err(bad(format!("operator {op:?} with {} values", values.len()))),
            });
        }
        Ok(LabelSelector(reqs))
    }

    /// The same requirements ordered by key, as Kubernetes prints selectors.
    pub fn sorted(mut self) -> Self {
        self.0.sort_by(|a, b| a.key().cmp(b.key()));
        self
    }

    /// Whether the selector has no requirement (matches everything).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.matches_labels(&meta::labels(obj))
    }

    /// Matches a label map directly (a pod template's labels, say).
    pub fn matches_labels(&self, labels: &serde_json::Map<String, Value>) -> bool {
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::NotEq(k, v) => get(k) != Some(v.as_str()),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Req::NotIn(k, vs) => !get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
        })
    }
}

/// The selector in query-string syntax, as kubectl prints it (`app=web,tier in (a,b)`).
impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|r| match r {
                Req::Exists(k) => k.clone(),
                Req::NotExists(k) => format!("!{k}"),
                Req::Eq(k, v) => format!("{k}={v}"),
                Req::NotEq(k, v) => format!("{k}!={v}"),
                Req::In(k, vs) => format!("{k} in ({})", vs.join(",")),
                Req::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

fn valid_value(v: &str) -> bool {
    v.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

fn parse_req(part: &str) -> Option<Req> {
    if let Some(open) = part.find('(') {
        let close = part.rfind(')')?;
        if close != part.len() - 1 || close < open {
            return None;
        }
        let values: Vec<String> = part[open + 1..close]
            .split(',')
            .map(|v| v.trim().to_string())
            .collect();
        if !values.iter().all(|v| valid_value(v)) {
            return None;
        }
        let head: Vec<&str> = part[..open].split_whitespace().collect();
        return match head.as_slice() {
            [k, "in"] if valid_key(k) => Some(Req::In(k.to_string(), values)),
            [k, "notin"] if valid_key(k) => Some(Req::NotIn(k.to_string(), values)),
            _ => None,
        };
    }
    let pair = |sep: &str| {
        part.split_once(sep)
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .filter(|(k, v)| valid_key(k) && valid_value(v))
    };
    if let Some(k) = part.strip_prefix('!') {
        let k = k.trim();
        return valid_key(k).then(|| Req::NotExists(k.to_string()));
    }
    if part.contains("!=") {
        return pair("!=").map(|(k, v)| Req::NotEq(k, v));
    }
    if part.contains("==") {
        return pair("==").map(|(k, v)| Req::Eq(k, v));
    }
    if part.contains('=') {
        return pair("=").map(|(k, v)| Req::Eq(k, v));
    }
    valid_key(part).then(|| Req::Exists(part.to_string()))
}

/// A parsed `fieldSelector`: conjunction of `path=value` / `path!=value` over dotted paths.
#[derive(Debug, Clone, Default)]
pub struct FieldSelector(Vec<(Vec<String>, String, bool)>);

impl FieldSelector {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (path, value, equal) = if let Some((k, v)) = part.split_once("!=") {
                (k, v, false)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, v, true)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, v, true)
            } else {
                return Err(ApiError::BadRequest(format!(
                    "invalid selector: '{part}'; can't understand '{part}'"
                )));
            };
            let path = path.trim().split('.').map(str::to_string).collect();
            out.push((path, value.trim().to_string(), equal));
        }
        Ok(FieldSelector(out))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, value, equal)| {
            let mut cur = obj;
            for p in path {
                cur = cur.get(p).unwrap_or(&Value::Null);
            }
            let actual = match cur {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (actual == *value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj() -> Value {
        json!({"metadata": {"name": "a", "labels": {"app": "web", "tier": "front"}}})
    }

    #[test]
    fn label_selector_cases() {
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app=db", false),
            ("app in (db, web)", true),
            ("app notin (db,web)", false),
            ("tier,app=web", true),
            ("!tier", false),
            ("!missing", true),
            ("missing", false),
            ("app=web,tier in (back)", false),
        ];
        for (sel, want) in cases {
            let s = LabelSelector::parse(sel).unwrap();
            assert_eq!(s.matches(&obj()), want, "{sel}");
        }
    }

    #[test]
    fn bad_label_selectors() {
        for sel in ["app in db", "a=b=c d", "app in (x", "!"] {
            assert!(LabelSelector::parse(sel).is_err(), "{sel}");
        }
    }

    #[test]
    fn structured_selectors() {
        let cases = [
            (json!({"matchLabels": {"app": "web"}}), true, "app=web"),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]}]}),
                true,
                "tier in (front,back)",
            ),
            (
                json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "x", "operator": "Exists"}]}),
                false,
                "app=web,x",
            ),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}),
                true,
                "!x",
            ),
            (json!(null), true, ""),
        ];
        for (sel, want, text) in cases {
            let s = LabelSelector::from_object(&sel).unwrap();
            assert_eq!(s.matches(&obj()), want, "{sel}");
            assert_eq!(s.to_string(), text);
            assert_eq!(LabelSelector::parse(text).unwrap(), s, "{text} round-trips");
        }
        let bad = json!({"matchExpressions": [{"key": "x", "operator": "In", "values": []}]});
        assert!(LabelSelector::from_object(&bad).is_err());
    }

    #[test]
    fn field_selector() {
        let s = FieldSelector::parse("metadata.name=a").unwrap();
        assert!(s.matches(&obj()));
        let s = FieldSelector::parse("metadata.name!=a").unwrap();
        assert!(!s.matches(&obj()));
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
