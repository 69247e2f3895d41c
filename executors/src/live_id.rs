//! Where an object lives in a member cluster ([`LiveId`]): its type ([`LiveType`]) and its
//! name, shared behind one pointer by every table and pass that names it.
//!
//! Must not: hold anything but the four names (what a copy holds is `live_object`'s), order
//! ids other than by type first (passes group one type's ids together), or let sharing show:
//! two ids of the same names compare, hash and order alike whether or not they share memory.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A resource type as ids name it. Every object of a type has the same two names, so a cluster
/// keeps them once (`Resolved::live_type`) and its ids point at them; an id reads as its type
/// (`Deref`).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LiveType {
    /// `group/version` or `version` for the core group.
    pub api_version: Box<str>,
    pub kind: Box<str>,
}

impl LiveType {
    pub fn new(api_version: &str, kind: &str) -> Arc<LiveType> {
        Arc::new(LiveType {
            api_version: api_version.into(),
            kind: kind.into(),
        })
    }

    pub fn api_version(&self) -> &str {
        &self.api_version
    }

    pub fn kind(&self) -> &str {
        &self.kind
    }

    pub fn is(&self, api_version: &str, kind: &str) -> bool {
        *self.api_version == *api_version && *self.kind == *kind
    }

    /// The type as the live cache and a pass's tables key it: (apiVersion, kind).
    pub fn type_key(&self) -> (String, String) {
        (self.api_version.to_string(), self.kind.to_string())
    }
}

/// Where an object lives in a member cluster: its type and its name.
///
/// Cheap to clone: everything sits behind one shared pointer. The live cache keys its copies
/// by it, a prepared manifest carries it, the write memo and the retries key by it, and every
/// pass copies the live cache and collects the ids it wants: with four owned strings a
/// placement kept three copies and each pass made more. A node holds one per member object,
/// so it is small too: the type is shared with the cluster's other objects of the type, and
/// namespace and name sit in one string.
#[derive(Clone)]
pub struct LiveId(Arc<LiveName>);

struct LiveName {
    ty: Arc<LiveType>,
    /// The namespace (empty for cluster-scoped kinds) followed by the name.
    names: Box<str>,
    /// Where the name starts in `names`.
    split: usize,
}

impl LiveId {
    /// An id with a type of its own; [`LiveId::of_type`] shares one already held.
    pub fn new(api_version: &str, kind: &str, namespace: &str, name: &str) -> Self {
        Self::of_type(&LiveType::new(api_version, kind), namespace, name)
    }

    pub fn of_type(ty: &Arc<LiveType>, namespace: &str, name: &str) -> Self {
        let mut names = String::with_capacity(namespace.len() + name.len());
        names.push_str(namespace);
        names.push_str(name);
        LiveId(Arc::new(LiveName {
            ty: ty.clone(),
            names: names.into_boxed_str(),
            split: namespace.len(),
        }))
    }

    pub fn live_type(&self) -> &Arc<LiveType> {
        &self.0.ty
    }

    /// Empty for cluster-scoped kinds.
    pub fn namespace(&self) -> &str {
        self.0.names.get(..self.0.split).unwrap_or_default()
    }

    pub fn name(&self) -> &str {
        self.0.names.get(self.0.split..).unwrap_or_default()
    }

    /// Takes `held`'s allocation when both name the same object: how a table that replaces
    /// an object's entry keeps one id per object.
    pub fn share_with(&mut self, held: &LiveId) {
        if *self == *held {
            *self = held.clone();
        }
    }

    /// Whether both are the same allocation: the tables that can share an id do.
    pub fn shares(&self, other: &LiveId) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::ops::Deref for LiveId {
    type Target = LiveType;

    fn deref(&self) -> &LiveType {
        &self.0.ty
    }
}

impl PartialEq for LiveId {
    fn eq(&self, other: &Self) -> bool {
        self.shares(other)
            || (self.0.ty == other.0.ty
                && self.0.split == other.0.split
                && self.0.names == other.0.names)
    }
}

impl Eq for LiveId {}

impl Ord for LiveId {
    fn cmp(&self, other: &Self) -> Ordering {
        if self.shares(other) {
            return Ordering::Equal;
        }
        let ty = match Arc::ptr_eq(&self.0.ty, &other.0.ty) {
            true => Ordering::Equal,
            false => self.0.ty.cmp(&other.0.ty),
        };
        ty.then_with(|| self.namespace().cmp(other.namespace()))
            .then_with(|| self.name().cmp(other.name()))
    }
}

impl PartialOrd for LiveId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Hash for LiveId {
    /// The four names in order, as a struct of four strings hashes them.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.api_version().hash(state);
        self.kind().hash(state);
        self.namespace().hash(state);
        self.name().hash(state);
    }
}

impl std::fmt::Debug for LiveId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveId")
            .field("api_version", &self.api_version())
            .field("kind", &self.kind())
            .field("namespace", &self.namespace())
            .field("name", &self.name())
            .finish()
    }
}

impl std::fmt::Display for LiveId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (api_version, kind, name) = (self.api_version(), self.kind(), self.name());
        match self.namespace() {
            "" => write!(f, "{api_version}/{kind} {name}"),
            namespace => write!(f, "{api_version}/{kind} {namespace}/{name}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::DefaultHasher;

    fn hash_of(v: &impl Hash) -> u64 {
        let mut h = DefaultHasher::new();
        v.hash(&mut h);
        h.finish()
    }

    /// The four names as owned strings: what ids compared, hashed and ordered by before their
    /// names were shared.
    fn names(id: &LiveId) -> (String, String, String, String) {
        let (a, k, ns, n) = (id.api_version(), id.kind(), id.namespace(), id.name());
        (a.into(), k.into(), ns.into(), n.into())
    }

    #[test]
    fn ids_compare_hash_and_order_by_their_names_whether_or_not_they_share() {
        let apps = LiveType::new("apps/v1", "Deployment");
        let core = LiveType::new("v1", "ConfigMap");
        let ids = [
            LiveId::of_type(&apps, "shop", "web"),
            LiveId::new("apps/v1", "Deployment", "shop", "web"),
            LiveId::of_type(&apps, "shop", "api"),
            LiveId::of_type(&apps, "sho", "pweb"),
            LiveId::of_type(&apps, "", "shopweb"),
            LiveId::of_type(&core, "shop", "web"),
            LiveId::new("v1", "Namespace", "", "shop"),
            LiveId::new("apps/v1", "DaemonSet", "shop", "web"),
        ];
        for a in &ids {
            for b in &ids {
                let (na, nb) = (names(a), names(b));
                assert_eq!(a == b, na == nb, "{a:?} {b:?}");
                assert_eq!(a.cmp(b), na.cmp(&nb), "{a:?} {b:?}");
                assert_eq!(a.partial_cmp(b), na.partial_cmp(&nb));
                if a == b {
                    assert_eq!(hash_of(a), hash_of(b));
                }
            }
            assert_eq!(hash_of(a), hash_of(&names(a)), "hashed as its four names");
        }
        assert!(ids[0] == ids[1] && !ids[0].shares(&ids[1]));
        assert!(Arc::ptr_eq(ids[0].live_type(), ids[2].live_type()));
    }

    #[test]
    fn names_come_back_as_given() {
        let id = LiveId::new("apps/v1", "Deployment", "shop", "web");
        assert_eq!(names(&id), names(&id.clone()));
        assert_eq!(
            (id.api_version(), id.kind(), id.namespace(), id.name()),
            ("apps/v1", "Deployment", "shop", "web")
        );
        assert_eq!(id.to_string(), "apps/v1/Deployment shop/web");
        let ns = LiveId::new("v1", "Namespace", "", "shop");
        assert_eq!((ns.namespace(), ns.name()), ("", "shop"));
        assert_eq!(ns.to_string(), "v1/Namespace shop");
    }

    #[test]
    fn an_id_is_one_small_allocation_and_its_names() {
        // An Arc adds two counters: 48 bytes is jemalloc's 48-byte class, where four owned
        // strings took 112.
        assert!(std::mem::size_of::<LiveName>() + 16 <= 48);
        assert_eq!(std::mem::size_of::<LiveId>(), 8);
    }
}
