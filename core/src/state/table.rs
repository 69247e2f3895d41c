//! The object table: federated objects by namespace and name, with O(1) lookups and ordered
//! iteration.
//!
//! Executors report status for random objects many times a second; a B-tree lookup by string
//! key costs a cache miss per comparison, so each namespace keeps its objects in a hash map for
//! lookups and a sorted set of names for iteration. Determinism: the hash map is never iterated
//! (its order is random per process); every iteration, the snapshot and the hash go through the
//! sorted names, and the encoding is exactly that of `BTreeMap<String, FederatedObject>`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::model::FederatedObject;

/// A hash-table key that keeps names of up to 22 bytes inside the table itself, so checking a
/// candidate slot does not chase a pointer (a cache miss per status report with 10^5 objects).
/// Hashes and compares exactly as the `str` it holds.
#[derive(Clone)]
enum Name {
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

impl std::fmt::Debug for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}

/// Objects of one namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Namespace {
    /// Boxed: moving an object never copies it, and the table stays small.
    by_name: HashMap<Name, Box<FederatedObject>>,
    /// The same names, sorted: the only way this namespace is iterated.
    names: BTreeSet<String>,
}

impl Namespace {
    pub fn get(&self, name: &str) -> Option<&FederatedObject> {
        self.by_name.get(name).map(|o| &**o)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut FederatedObject> {
        self.by_name.get_mut(name).map(|o| &mut **o)
    }

    pub fn insert(&mut self, obj: FederatedObject) {
        if !self.by_name.contains_key(obj.name.as_str()) {
            self.names.insert(obj.name.clone());
        }
        self.by_name.insert(Name::new(&obj.name), Box::new(obj));
    }

    pub fn remove(&mut self, name: &str) -> Option<FederatedObject> {
        self.names.remove(name);
        self.by_name.remove(name).map(|o| *o)
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Objects sorted by name.
    pub fn values(&self) -> impl Iterator<Item = &FederatedObject> {
        self.names.iter().filter_map(|n| self.get(n))
    }
}

impl Serialize for Namespace {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        // bincode needs the length up front; `names` and `by_name` hold the same keys.
        let mut map = s.serialize_map(Some(self.names.len()))?;
        for (n, o) in self
            .names
            .iter()
            .filter_map(|n| self.by_name.get(n.as_str()).map(|o| (n, o)))
        {
            map.serialize_entry(n, o)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Namespace {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let sorted = BTreeMap::<String, Box<FederatedObject>>::deserialize(d)?;
        let names = sorted.keys().cloned().collect();
        Ok(Namespace {
            by_name: sorted
                .into_iter()
                .map(|(k, v)| (Name::new(&k), v))
                .collect(),
            names,
        })
    }
}

/// All objects: namespace -> `Namespace`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct ObjectTable {
    namespaces: BTreeMap<String, Namespace>,
}

impl ObjectTable {
    pub fn get(&self, namespace: &str, name: &str) -> Option<&FederatedObject> {
        self.namespaces.get(namespace)?.get(name)
    }

    pub fn get_mut(&mut self, namespace: &str, name: &str) -> Option<&mut FederatedObject> {
        self.namespaces.get_mut(namespace)?.get_mut(name)
    }

    pub fn insert(&mut self, obj: FederatedObject) {
        self.namespaces
            .entry(obj.namespace.clone())
            .or_default()
            .insert(obj);
    }

    pub fn remove(&mut self, namespace: &str, name: &str) -> Option<FederatedObject> {
        let ns = self.namespaces.get_mut(namespace)?;
        let obj = ns.remove(name);
        if ns.is_empty() {
            self.namespaces.remove(namespace);
        }
        obj
    }

    /// Every object, by namespace then name.
    pub fn iter(&self) -> impl Iterator<Item = &FederatedObject> {
        self.namespaces.values().flat_map(Namespace::values)
    }

    /// The objects of one namespace, by name.
    pub fn iter_ns(&self, namespace: &str) -> impl Iterator<Item = &FederatedObject> {
        self.namespaces
            .get(namespace)
            .into_iter()
            .flat_map(Namespace::values)
    }

    pub fn len(&self) -> usize {
        self.namespaces.values().map(Namespace::len).sum()
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
        assert_eq!(t.remove("a", "x").map(|o| o.name), Some("x".to_string()));
        assert_eq!(t.len(), 3);
        assert!(t.remove("a", "x").is_none());
    }
}
