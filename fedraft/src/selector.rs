//! `-l/--selector`: Kubernetes label selectors, matched on the client against the labels each
//! listed item carries (a cluster's `labels`, an object's template `metadata.labels`). The
//! syntax is kubectl's: requirements separated by commas, each `key=value`, `key==value`,
//! `key!=value`, `key` (has the label), `!key` (lacks it), `key in (a,b)` or
//! `key notin (a,b)`; all must hold.
//!
//! Must not: send the selector to the server (the API lists everything a caller may see).

use std::collections::BTreeMap;

/// Why a selector does not parse.
#[derive(Debug, thiserror::Error)]
#[error("selector {text:?}: {message}")]
pub struct SelectorError {
    text: String,
    message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    Exists(String),
    Absent(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed selector; the empty one selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector(Vec<Req>);

/// Splits on commas outside parentheses.
fn split_top(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn set(text: &str) -> Option<Vec<String>> {
    let inner = text.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(inner.split(',').map(|v| v.trim().to_string()).collect())
}

impl Selector {
    pub fn parse(text: &str) -> Result<Selector, SelectorError> {
        let err = |message: &str| SelectorError {
            text: text.to_string(),
            message: message.to_string(),
        };
        let mut reqs = Vec::new();
        for part in split_top(text).into_iter().map(str::trim) {
            if part.is_empty() {
                return Err(err("empty requirement"));
            }
            let req = if let Some((k, v)) = part.split_once("!=") {
                Req::Ne(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==") {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('=') {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some(k) = part.strip_prefix('!') {
                Req::Absent(k.trim().into())
            } else if let Some((k, vs)) = part.split_once(" notin ") {
                Req::NotIn(
                    k.trim().into(),
                    set(vs).ok_or_else(|| err("notin needs (a,b)"))?,
                )
            } else if let Some((k, vs)) = part.split_once(" in ") {
                Req::In(
                    k.trim().into(),
                    set(vs).ok_or_else(|| err("in needs (a,b)"))?,
                )
            } else {
                Req::Exists(part.into())
            };
            let key = match &req {
                Req::Eq(k, _)
                | Req::Ne(k, _)
                | Req::Exists(k)
                | Req::Absent(k)
                | Req::In(k, _)
                | Req::NotIn(k, _) => k,
            };
            if !valid_key(key) {
                return Err(err(&format!("{key:?} is not a label key")));
            }
            reqs.push(req);
        }
        Ok(Selector(reqs))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => labels.get(k) == Some(v),
            Req::Ne(k, v) => labels.get(k) != Some(v),
            Req::Exists(k) => labels.contains_key(k),
            Req::Absent(k) => !labels.contains_key(k),
            Req::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Req::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn kubectl_forms() {
        let eu = labels(&[("region", "eu"), ("tier", "gold")]);
        let us = labels(&[("region", "us")]);
        let check = |sel: &str, want: [bool; 2]| {
            let s = Selector::parse(sel).unwrap();
            assert_eq!([s.matches(&eu), s.matches(&us)], want, "{sel}");
        };
        check("region=eu", [true, false]);
        check("region==us", [false, true]);
        check("region!=eu", [false, true]);
        check("tier", [true, false]);
        check("!tier", [false, true]);
        check("region in (eu, us)", [true, true]);
        check("region notin (eu)", [false, true]);
        check("region in (eu,us),tier=gold", [true, false]);
        check("missing!=x", [true, true]);
        for bad in ["", "region=eu,", "a b", "region in eu"] {
            assert!(Selector::parse(bad).is_err(), "{bad}");
        }
    }
}
