//! Tables keyed by name with fast lookups and ordered iteration: the clusters, and the objects
//! by namespace and name.
//!
//! Executors report heartbeats and status for random clusters and objects many times a
//! second; a B-tree lookup by string key costs a cache miss per comparison, so a [`Keyed`]
//! table keeps its values in a hash map for lookups, next to a sorted set of the names for
//! iteration. Determinism: the hash maps are never iterated (their order is random per
//! process); every iteration, the snapshot and the hash go through the sorted names, and the
//! encoding is exactly that of a `BTreeMap<String, V>`.
//!
//! A checkpoint image (`State::image`) copies the replicated tables while the node's applies
//! wait. Copying ordinary maps copied each of 10^5 objects' entries and held a loaded node for
//! up to 100 ms, so the object tables keep maps a copy shares ([`Shared`]). Other tables keep
//! ordinary maps ([`Plain`]): they are small, or derived and never copied.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::marker::PhantomData;
use std::sync::Arc;

use super::sharded::{Hasher, ShardedMap};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::model::FederatedObject;

/// A hash-table key that keeps names of up to 22 bytes inside the table itself, so checking a
/// candidate slot does not chase a pointer (a cache miss per status report with 10^5 objects).
/// Hashes and compares exactly as the `str` it holds.
#[derive(Clone)]
pub(crate) enum Name {
    Inline { len: u8, bytes: [u8; 22] },
    Heap(Box<str>),
}

impl Name {
    fn new(s: &str) -> Name {
        let mut bytes = [0u8; 22];
        match bytes.get_mut(..s.len()) {
            Some(dst) => {
                dst.copy_from_slice(s.as_bytes());
                Name::Inline {
                    len: s.len() as u8,
                    bytes,
                }
            }
            None => Name::Heap(s.into()),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            Name::Inline { len, bytes } => &bytes[..*len as usize],
            Name::Heap(s) => s.as_bytes(),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            // Built from a whole `str` in `new`, so the prefix is valid UTF-8.
            Name::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..*len as usize]).unwrap_or_default()
            }
            Name::Heap(s) => s,
        }
    }
}

impl std::borrow::Borrow<str> for Name {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl std::hash::Hash for Name {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Name {}

// Ordered exactly as the `str` it holds (`str` orders by bytes), so a set of names iterates and
// encodes as a set of strings would. Bytes, not `as_str`: a B-tree compares many times per
// lookup, and `as_str` checks UTF-8 each time.
impl Ord for Name {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Debug for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}

/// How a [`Keyed`] table holds each value, always behind a pointer so that moving a value never
/// copies it and the table stays small. `Box` by default; `Arc` for values that others keep as
/// they were at some point (objects, whose versions the watch history holds): handing one out
/// costs a reference count, and the table copies a value only when it changes one that is still
/// held elsewhere (`Arc::make_mut`).
pub(crate) trait Slot<V> {
    fn new(value: V) -> Self;
    fn get(&self) -> &V;
    fn get_mut(&mut self) -> &mut V;
}

impl<V> Slot<V> for Box<V> {
    fn new(value: V) -> Self {
        Box::new(value)
    }
    fn get(&self) -> &V {
        self
    }
    fn get_mut(&mut self) -> &mut V {
        self
    }
}

impl<V: Clone> Slot<V> for Arc<V> {
    fn new(value: V) -> Self {
        Arc::new(value)
    }
    fn get(&self) -> &V {
        self
    }
    fn get_mut(&mut self) -> &mut V {
        Arc::make_mut(self)
    }
}

/// Where a [`Keyed`] table keeps its slots by name and its sorted names.
pub(crate) trait Maps<P>: Default {
    fn slot(&self, name: &str) -> Option<&P>;
    fn slot_mut(&mut self, name: &str) -> Option<&mut P>;
    /// Adds a name that is not there yet.
    fn add(&mut self, name: &str, slot: P);
    fn take(&mut self, name: &str) -> Option<P>;
    fn len(&self) -> usize;
    fn sorted(&self) -> impl Iterator<Item = &Name>;
    fn from_sorted(sorted: BTreeMap<String, P>) -> Self;
}

/// Ordinary maps: the fastest lookups, and a copy copies every entry. For tables that are
/// small, or derived and never copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plain<P> {
    by_name: HashMap<Name, P, Hasher>,
    names: BTreeSet<Name>,
}

/// Maps a copy shares with the original ([`ShardedMap`] and a persistent sorted set): a change
/// to either copies one shard, and the nodes on the name's path if it adds or removes one. For
/// the tables a checkpoint image (`State::image`) copies that grow with the federation: the
/// objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shared<P> {
    by_name: ShardedMap<Name, P>,
    names: imbl::OrdSet<Name>,
}

impl<P> Default for Plain<P> {
    fn default() -> Self {
        Plain {
            by_name: HashMap::default(),
            names: BTreeSet::new(),
        }
    }
}

impl<P> Default for Shared<P> {
    fn default() -> Self {
        Shared {
            by_name: ShardedMap::default(),
            names: imbl::OrdSet::new(),
        }
    }
}

/// One body for both: the std and imbl collections spell these operations the same way.
macro_rules! maps_by_name_and_sorted_names {
    ($maps:ident) => {
        impl<P: Clone> Maps<P> for $maps<P> {
            fn slot(&self, name: &str) -> Option<&P> {
                self.by_name.get(name)
            }
            fn slot_mut(&mut self, name: &str) -> Option<&mut P> {
                self.by_name.get_mut(name)
            }
            fn add(&mut self, name: &str, slot: P) {
                self.names.insert(Name::new(name));
                self.by_name.insert(Name::new(name), slot);
            }
            fn take(&mut self, name: &str) -> Option<P> {
                self.names.remove(name);
                self.by_name.remove(name)
            }
            fn len(&self) -> usize {
                self.names.len()
            }
            fn sorted(&self) -> impl Iterator<Item = &Name> {
                self.names.iter()
            }
            fn from_sorted(sorted: BTreeMap<String, P>) -> Self {
                $maps {
                    names: sorted.keys().map(|k| Name::new(k)).collect(),
                    by_name: sorted
                        .into_iter()
                        .map(|(k, v)| (Name::new(&k), v))
                        .collect(),
                }
            }
        }
    };
}

maps_by_name_and_sorted_names!(Plain);
maps_by_name_and_sorted_names!(Shared);

/// Values by name: hashed for lookups, sorted for iteration, encoded as a `BTreeMap`. `M` says
/// how it keeps them ([`Plain`] or [`Shared`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Keyed<V, P = Box<V>, M = Plain<P>> {
    maps: M,
    _values: PhantomData<(V, P)>,
}

impl<V, P, M: Default> Default for Keyed<V, P, M> {
    fn default() -> Self {
        Keyed {
            maps: M::default(),
            _values: PhantomData,
        }
    }
}

impl<V, P: Slot<V>, M: Maps<P>> Keyed<V, P, M> {
    pub fn get(&self, name: &str) -> Option<&V> {
        self.maps.slot(name).map(P::get)
    }

    /// The slot itself, for sharing a value (see [`Slot`]).
    pub fn slot(&self, name: &str) -> Option<&P> {
        self.maps.slot(name)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut V> {
        self.maps.slot_mut(name).map(P::get_mut)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.maps.slot(name).is_some()
    }

    /// Inserts or replaces; returns the slot that was there.
    pub fn insert(&mut self, name: &str, value: V) -> Option<P> {
        if let Some(slot) = self.maps.slot_mut(name) {
            return Some(std::mem::replace(slot, P::new(value)));
        }
        self.maps.add(name, P::new(value));
        None
    }

    /// The value under `name`, inserting `make()` first when there is none.
    pub fn get_or_insert_with(&mut self, name: &str, make: impl FnOnce() -> V) -> &mut V {
        if self.maps.slot(name).is_none() {
            self.maps.add(name, P::new(make()));
        }
        // Present: found or inserted just above.
        match self.maps.slot_mut(name) {
            Some(v) => v.get_mut(),
            None => unreachable!("value inserted above"),
        }
    }

    pub fn remove(&mut self, name: &str) -> Option<P> {
        self.maps.take(name)
    }

    pub fn len(&self) -> usize {
        self.maps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.maps.len() == 0
    }

    /// Entries sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.maps.sorted().filter_map(|n| {
            let n = n.as_str();
            self.maps.slot(n).map(|v| (n, v.get()))
        })
    }

    /// Slots sorted by name, for sharing every value (see [`Slot`]).
    pub fn slots(&self) -> impl Iterator<Item = &P> {
        self.maps
            .sorted()
            .filter_map(|n| self.maps.slot(n.as_str()))
    }

    /// Values sorted by name.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }
}

impl<V: Serialize, P: Slot<V>, M: Maps<P>> Serialize for Keyed<V, P, M> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        // bincode needs the length up front; the sorted names and the slots hold the same keys.
        let mut map = s.serialize_map(Some(self.len()))?;
        for (n, v) in self.iter() {
            map.serialize_entry(n, v)?;
        }
        map.end()
    }
}

impl<'de, V, P: Deserialize<'de>, M: Maps<P>> Deserialize<'de> for Keyed<V, P, M> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Keyed {
            maps: M::from_sorted(BTreeMap::<String, P>::deserialize(d)?),
            _values: PhantomData,
        })
    }
}

/// All objects: namespace -> name -> object. Empty namespaces are dropped. Objects are shared
/// ([`Slot`]): the watch history keeps the versions it reports without copying them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct ObjectTable {
    namespaces: Keyed<Objects>,
}

type Objects = Keyed<FederatedObject, Arc<FederatedObject>, Shared<Arc<FederatedObject>>>;

impl ObjectTable {
    pub fn get(&self, namespace: &str, name: &str) -> Option<&FederatedObject> {
        self.namespaces.get(namespace)?.get(name)
    }

    /// The stored object itself: holding it copies nothing, and a later change to the object
    /// copies it first, so the holder keeps this version.
    pub fn get_shared(&self, namespace: &str, name: &str) -> Option<Arc<FederatedObject>> {
        self.namespaces.get(namespace)?.slot(name).cloned()
    }

    pub fn get_mut(&mut self, namespace: &str, name: &str) -> Option<&mut FederatedObject> {
        self.namespaces.get_mut(namespace)?.get_mut(name)
    }

    pub fn insert(&mut self, obj: FederatedObject) {
        let ns = self
            .namespaces
            .get_or_insert_with(&obj.namespace, Keyed::default);
        let name = obj.name.clone();
        ns.insert(&name, obj);
    }

    pub fn remove(&mut self, namespace: &str, name: &str) -> Option<Arc<FederatedObject>> {
        let ns = self.namespaces.get_mut(namespace)?;
        let obj = ns.remove(name);
        if ns.is_empty() {
            self.namespaces.remove(namespace);
        }
        obj
    }

    /// Every object, by namespace then name.
    pub fn iter(&self) -> impl Iterator<Item = &FederatedObject> {
        self.namespaces.values().flat_map(Keyed::values)
    }

    /// Every object as stored, by namespace then name (see [`ObjectTable::get_shared`]).
    pub fn iter_shared(&self) -> impl Iterator<Item = &Arc<FederatedObject>> {
        self.namespaces.values().flat_map(Keyed::slots)
    }

    /// The stored objects of one namespace, by name, for sharing (see [`Slot`]).
    pub fn iter_ns_shared(&self, namespace: &str) -> impl Iterator<Item = &Arc<FederatedObject>> {
        self.namespaces
            .get(namespace)
            .into_iter()
            .flat_map(Keyed::slots)
    }

    /// The objects of one namespace, by name.
    pub fn iter_ns(&self, namespace: &str) -> impl Iterator<Item = &FederatedObject> {
        self.namespaces
            .get(namespace)
            .into_iter()
            .flat_map(Keyed::values)
    }

    pub fn len(&self) -> usize {
        self.namespaces.values().map(Keyed::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ObjectSpec, ObjectStatus, TemplateInfo};

    fn obj(ns: &str, name: &str) -> FederatedObject {
        FederatedObject {
            namespace: ns.into(),
            name: name.into(),
            spec: ObjectSpec {
                template: "{}".into(),
                placement: Default::default(),
                overrides: vec![],
            },
            template_info: TemplateInfo::default(),
            status: ObjectStatus::default(),
            resource_version: 1,
        }
    }

    #[test]
    fn iterates_sorted_and_encodes_like_a_btree_map() {
        let mut t = ObjectTable::default();
        for (ns, n) in [("b", "z"), ("a", "y"), ("b", "a"), ("a", "x")] {
            t.insert(obj(ns, n));
        }
        let order: Vec<_> = t
            .iter()
            .map(|o| (o.namespace.as_str(), o.name.as_str()))
            .collect();
        assert_eq!(order, [("a", "x"), ("a", "y"), ("b", "a"), ("b", "z")]);
        let mut plain: BTreeMap<String, BTreeMap<String, FederatedObject>> = BTreeMap::new();
        for o in t.iter() {
            plain
                .entry(o.namespace.clone())
                .or_default()
                .insert(o.name.clone(), o.clone());
        }
        let cfg = bincode::config::standard();
        let a = bincode::serde::encode_to_vec(&t, cfg).unwrap();
        assert_eq!(a, bincode::serde::encode_to_vec(&plain, cfg).unwrap());
        let (back, _): (ObjectTable, usize) = bincode::serde::decode_from_slice(&a, cfg).unwrap();
        assert_eq!(back, t);
        assert_eq!(
            t.remove("a", "x").map(|o| o.name.clone()),
            Some("x".to_string())
        );
        assert_eq!(t.len(), 3);
        assert!(t.remove("a", "x").is_none());
    }

    #[test]
    fn a_shared_object_keeps_its_version_while_the_table_moves_on() {
        let mut t = ObjectTable::default();
        t.insert(obj("a", "x"));
        let held = t.get_shared("a", "x").unwrap();
        // Sharing copies nothing.
        assert!(std::ptr::eq(&*held, t.get("a", "x").unwrap()));

        // A change made while it is held goes to a copy.
        t.get_mut("a", "x").unwrap().resource_version = 2;
        assert_eq!(held.resource_version, 1);
        assert_eq!(t.get("a", "x").unwrap().resource_version, 2);

        // Replacing and removing leave the holder's version alone too.
        let second = t.get_shared("a", "x").unwrap();
        let mut replacement = obj("a", "x");
        replacement.resource_version = 3;
        t.insert(replacement);
        assert_eq!(second.resource_version, 2);
        let removed = t.remove("a", "x").unwrap();
        assert_eq!(removed.resource_version, 3);
        assert!(t.get("a", "x").is_none());
        assert_eq!((held.resource_version, second.resource_version), (1, 2));

        // Unshared, a change is made in place.
        t.insert(obj("a", "y"));
        let before: *const FederatedObject = t.get("a", "y").unwrap();
        t.get_mut("a", "y").unwrap().resource_version = 5;
        assert!(std::ptr::eq(before, t.get("a", "y").unwrap()));
    }
}
