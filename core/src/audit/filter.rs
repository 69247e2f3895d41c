//! Which records a query selects: index range, log-time range, actor, object, cluster, and the
//! namespaces a tenant may see. Every field narrows; an empty filter selects everything.

use super::Record;

/// A query over the archive; `None` fields do not restrict.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Lowest index (inclusive).
    pub from: Option<u64>,
    /// Highest index (inclusive).
    pub to: Option<u64>,
    /// Earliest entry timestamp, ms (inclusive).
    pub since_ms: Option<u64>,
    /// Latest entry timestamp, ms (inclusive).
    pub until_ms: Option<u64>,
    pub actor: Option<String>,
    /// `namespace/name`.
    pub object: Option<String>,
    pub cluster: Option<String>,
    /// Only records touching one of these namespaces (a tenant's view); `None` = all records.
    pub namespaces: Option<Vec<String>>,
}

impl Filter {
    /// The index range to scan, `[lo, hi)`.
    pub fn index_range(&self) -> (u64, u64) {
        (
            self.from.unwrap_or(0),
            self.to.map_or(u64::MAX, |t| t.saturating_add(1)),
        )
    }

    pub fn matches(&self, r: &Record) -> bool {
        let (lo, hi) = self.index_range();
        if r.index < lo || r.index >= hi {
            return false;
        }
        let t = r.entry.timestamp_ms;
        if self.since_ms.is_some_and(|s| t < s) || self.until_ms.is_some_and(|u| t > u) {
            return false;
        }
        if self
            .actor
            .as_ref()
            .is_some_and(|a| !actor_matches(a, &r.entry.actor))
        {
            return false;
        }
        if let Some(o) = &self.object {
            if !r.objects().contains(o) {
                return false;
            }
        }
        if let Some(c) = &self.cluster {
            if !r.clusters().contains(c.as_str()) {
                return false;
            }
        }
        if let Some(allowed) = &self.namespaces {
            if !r.namespaces().iter().any(|ns| allowed.contains(ns)) {
                return false;
            }
        }
        true
    }
}

/// Whether a query's `actor` selects an entry's: exactly, or by the principal's name when the
/// entry names a tenant member (`tenant:TENANT/NAME`, see `crate::admission::Actor`) or a
/// replicated user (`user:NAME`, see `crate::users`).
fn actor_matches(wanted: &str, actor: &str) -> bool {
    if wanted == actor || actor.strip_prefix(crate::users::USER_ACTOR_PREFIX) == Some(wanted) {
        return true;
    }
    match crate::admission::Actor::parse(actor) {
        crate::admission::Actor::Tenant { name, .. } => name == wanted,
        crate::admission::Actor::Admin | crate::admission::Actor::Legacy => false,
    }
}
