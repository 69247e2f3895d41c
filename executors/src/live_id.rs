//! Where an object lives in a member cluster ([`LiveId`]): its type and its name, shared
//! behind one pointer by every table and pass that names it.
//!
//! Must not: hold anything but the four names (what a copy holds is `live_object`'s), or order
//! ids other than by type first (passes group one type's ids together).

use std::sync::Arc;

/// Where an object lives in a member cluster: its type and its name.
///
/// Cheap to clone: the four names sit in one shared allocation. The live cache keys its copies
/// by it, a prepared manifest carries it, the write memo and the retries key by it, and every
/// pass copies the live cache and collects the ids it wants: with four owned strings a
/// placement kept three copies and each pass made more.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LiveId(Arc<LiveName>);

/// The names a [`LiveId`] holds. Ordered by type first, so one type's ids sort together.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LiveName {
    /// `group/version` or `version` for the core group.
    pub api_version: String,
    pub kind: String,
    /// Empty for cluster-scoped kinds.
    pub namespace: String,
    pub name: String,
}

impl LiveId {
    pub fn new(
        api_version: impl Into<String>,
        kind: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        LiveId(Arc::new(LiveName {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }))
    }
}

impl std::ops::Deref for LiveId {
    type Target = LiveName;

    fn deref(&self) -> &LiveName {
        &self.0
    }
}

impl std::fmt::Debug for LiveId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::fmt::Display for LiveId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{} {}", self.api_version, self.kind, self.name)
        } else {
            write!(
                f,
                "{}/{} {}/{}",
                self.api_version, self.kind, self.namespace, self.name
            )
        }
    }
}
