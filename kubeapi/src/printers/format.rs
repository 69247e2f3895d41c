//! The pieces every printed Table shares: a column's definition, and kubectl's way of writing
//! times, ages and label sets. Must not: know any kind's columns (those are `printers`').

use serde_json::{json, Map, Value};

use crate::meta;

/// One column of a Table (`TableColumnDefinition`).
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub name: String,
    /// "string", "integer", "number", "boolean" or "date".
    pub kind: String,
    /// "name" for the column kubectl uses as the object's name, else "".
    pub format: String,
    pub description: String,
    /// 0: always shown; 1: only with `-o wide`.
    pub priority: i32,
}

impl Column {
    pub fn new(name: &str, kind: &str, priority: i32, description: &str) -> Self {
        Column {
            name: name.into(),
            kind: kind.into(),
            format: if name == "Name" {
                "name".into()
            } else {
                String::new()
            },
            description: description.into(),
            priority,
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.kind,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// Seconds since the Unix epoch of an RFC 3339 time (`metav1.Time`).
pub fn unix_seconds(rfc3339: &str) -> Option<i64> {
    rfc3339
        .parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_second())
}

/// An object's age in kubectl's words, or `<unknown>` without a creation time.
pub fn age(obj: &Value, now: i64) -> String {
    match meta::meta_str(obj, "creationTimestamp").and_then(unix_seconds) {
        Some(t) => human_duration(now - t),
        None => "<unknown>".into(),
    }
}

/// A duration as kubectl prints ages: `45s`, `3m12s`, `2h5m`, `4d3h`, `2y31d` (the rounding of
/// apimachinery's `duration.HumanDuration`).
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// Formats a string-keyed map (`labels`, `nodeSelector`) as `k=v,k2=v2` sorted by key,
/// or `<none>`, as kubectl formats label sets.
pub fn format_labels(m: Option<&Map<String, Value>>) -> String {
    let mut pairs: Vec<String> = m
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}
