//! The two per-candidate parts of a decision record, `Decision::candidates` and
//! `Decision::weights`, kept as one shared buffer of names instead of one `String` each.
//!
//! Why: a decision over 1,000 clusters names ~1,000 candidates twice; a `String` per name plus a
//! `BTreeMap` node per weight cost more than the whole placement computation (measured ~100 µs
//! of allocation against ~40 µs of scheduling). Here a record costs two allocations for all
//! names, shared by both fields through an `Arc`.
//!
//! The public shape does not change: `ClusterNames` reads as a `Vec<String>` and
//! `ClusterWeights` as a `BTreeMap<String, u64>` (through `Deref`, materialized on first use
//! and cached), compares equal to them, and serializes exactly as they do (same serde form,
//! same bincode bytes), without ever materializing. Mutable access converts to the plain
//! form. Must not: decide anything; these are containers.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Names back to back in one string; `ends[i]` is where name `i` stops.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct NameBuf {
    text: String,
    ends: Vec<u32>,
}

impl NameBuf {
    pub(crate) fn with_capacity(names: usize, bytes: usize) -> Self {
        Self {
            text: String::with_capacity(bytes),
            ends: Vec::with_capacity(names),
        }
    }

    pub(crate) fn push(&mut self, name: &str) {
        self.text.push_str(name);
        // Cluster names are DNS labels; even 10^6 of them stay far below 4 GiB.
        self.ends
            .push(u32::try_from(self.text.len()).unwrap_or(u32::MAX));
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    /// Name `i` as bytes (no UTF-8 boundary checks: the planner hashes and compares bytes).
    pub(crate) fn bytes(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text.as_bytes()[start..self.ends[i] as usize]
    }

    fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.len()).map(move |i| self.get(i))
    }
}

/// `Decision::candidates`: cluster names, read as a `Vec<String>`.
pub struct ClusterNames {
    /// Some: the list is exactly these names (`plain`, if set, is a copy). None: `plain` holds
    /// the list.
    shared: Option<Arc<NameBuf>>,
    plain: OnceLock<Vec<String>>,
}

impl ClusterNames {
    pub(crate) fn shared(names: Arc<NameBuf>) -> Self {
        Self {
            shared: Some(names),
            plain: OnceLock::new(),
        }
    }

    /// The names without building `String`s.
    pub fn iter_str(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        let (shared, plain) = match (&self.shared, self.plain.get()) {
            (Some(s), _) => (Some(s.as_ref()), None),
            (None, p) => (None, p),
        };
        let n = shared.map_or_else(|| plain.map_or(0, Vec::len), NameBuf::len);
        (0..n).map(move |i| match (shared, plain) {
            (Some(s), _) => s.get(i),
            (None, Some(p)) => p[i].as_str(),
            (None, None) => unreachable!("an empty list has no index {i}"),
        })
    }

    pub fn into_vec(self) -> Vec<String> {
        let mut s = self;
        std::mem::take(&mut *s)
    }
}

impl Default for ClusterNames {
    fn default() -> Self {
        Vec::new().into()
    }
}

impl From<Vec<String>> for ClusterNames {
    fn from(v: Vec<String>) -> Self {
        Self {
            shared: None,
            plain: OnceLock::from(v),
        }
    }
}

impl From<ClusterNames> for Vec<String> {
    fn from(c: ClusterNames) -> Self {
        c.into_vec()
    }
}

impl FromIterator<String> for ClusterNames {
    fn from_iter<I: IntoIterator<Item = String>>(iter: I) -> Self {
        iter.into_iter().collect::<Vec<_>>().into()
    }
}

impl Deref for ClusterNames {
    type Target = Vec<String>;
    fn deref(&self) -> &Vec<String> {
        self.plain.get_or_init(|| match &self.shared {
            Some(s) => s.iter().map(str::to_owned).collect(),
            None => Vec::new(),
        })
    }
}

impl DerefMut for ClusterNames {
    fn deref_mut(&mut self) -> &mut Vec<String> {
        let _ = Deref::deref(self);
        self.shared = None;
        match self.plain.get_mut() {
            Some(v) => v,
            None => unreachable!("deref initialized the plain list"),
        }
    }
}

impl Clone for ClusterNames {
    fn clone(&self) -> Self {
        match &self.shared {
            Some(s) => Self::shared(Arc::clone(s)),
            None => Vec::clone(self).into(),
        }
    }
}

impl<'a> IntoIterator for &'a ClusterNames {
    type Item = &'a String;
    type IntoIter = std::slice::Iter<'a, String>;
    fn into_iter(self) -> Self::IntoIter {
        self.deref().iter()
    }
}

impl IntoIterator for ClusterNames {
    type Item = String;
    type IntoIter = std::vec::IntoIter<String>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl PartialEq for ClusterNames {
    fn eq(&self, other: &Self) -> bool {
        self.iter_str().eq(other.iter_str())
    }
}

impl Eq for ClusterNames {}

impl<T> PartialEq<Vec<T>> for ClusterNames
where
    for<'a> &'a str: PartialEq<T>,
{
    fn eq(&self, other: &Vec<T>) -> bool {
        self.iter_str().len() == other.len() && self.iter_str().zip(other).all(|(a, b)| a == *b)
    }
}

impl PartialEq<ClusterNames> for Vec<String> {
    fn eq(&self, other: &ClusterNames) -> bool {
        other == self
    }
}

impl fmt::Debug for ClusterNames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter_str()).finish()
    }
}

impl Serialize for ClusterNames {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter_str())
    }
}

impl<'de> Deserialize<'de> for ClusterNames {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<String>::deserialize(d).map(Into::into)
    }
}

/// `Decision::weights`: cluster -> weight, read as a `BTreeMap<String, u64>`.
pub struct ClusterWeights {
    /// Some: names sorted and unique, with `values` parallel (`plain`, if set, is a copy).
    /// None: `plain` holds the map.
    shared: Option<(Arc<NameBuf>, Vec<u64>)>,
    plain: OnceLock<BTreeMap<String, u64>>,
}

impl ClusterWeights {
    /// `names` must be sorted and free of duplicates, `values` parallel to it.
    pub(crate) fn shared(names: Arc<NameBuf>, values: Vec<u64>) -> Self {
        debug_assert_eq!(names.len(), values.len());
        debug_assert!(names.iter().zip(names.iter().skip(1)).all(|(a, b)| a < b));
        Self {
            shared: Some((names, values)),
            plain: OnceLock::new(),
        }
    }

    /// The entries in name order without building `String`s.
    pub fn iter_str(&self) -> Box<dyn ExactSizeIterator<Item = (&str, u64)> + '_> {
        match (&self.shared, self.plain.get()) {
            (Some((names, values)), _) => Box::new(names.iter().zip(values.iter().copied())),
            (None, Some(m)) => Box::new(m.iter().map(|(k, v)| (k.as_str(), *v))),
            (None, None) => Box::new(std::iter::empty()),
        }
    }

    /// The weight of one cluster, by binary search (no map needed).
    pub fn weight_of(&self, cluster: &str) -> Option<u64> {
        match &self.shared {
            Some((names, values)) => {
                let (mut lo, mut hi) = (0, names.len());
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    match names.get(mid).cmp(cluster) {
                        std::cmp::Ordering::Less => lo = mid + 1,
                        std::cmp::Ordering::Greater => hi = mid,
                        std::cmp::Ordering::Equal => return Some(values[mid]),
                    }
                }
                None
            }
            None => self.get(cluster).copied(),
        }
    }

    pub fn into_map(self) -> BTreeMap<String, u64> {
        let mut s = self;
        std::mem::take(&mut *s)
    }
}

impl Default for ClusterWeights {
    fn default() -> Self {
        BTreeMap::new().into()
    }
}

impl From<BTreeMap<String, u64>> for ClusterWeights {
    fn from(m: BTreeMap<String, u64>) -> Self {
        Self {
            shared: None,
            plain: OnceLock::from(m),
        }
    }
}

impl From<ClusterWeights> for BTreeMap<String, u64> {
    fn from(w: ClusterWeights) -> Self {
        w.into_map()
    }
}

impl FromIterator<(String, u64)> for ClusterWeights {
    fn from_iter<I: IntoIterator<Item = (String, u64)>>(iter: I) -> Self {
        iter.into_iter().collect::<BTreeMap<_, _>>().into()
    }
}

impl Deref for ClusterWeights {
    type Target = BTreeMap<String, u64>;
    fn deref(&self) -> &BTreeMap<String, u64> {
        self.plain.get_or_init(|| match &self.shared {
            Some((names, values)) => names
                .iter()
                .map(str::to_owned)
                .zip(values.iter().copied())
                .collect(),
            None => BTreeMap::new(),
        })
    }
}

impl DerefMut for ClusterWeights {
    fn deref_mut(&mut self) -> &mut BTreeMap<String, u64> {
        let _ = Deref::deref(self);
        self.shared = None;
        match self.plain.get_mut() {
            Some(m) => m,
            None => unreachable!("deref initialized the plain map"),
        }
    }
}

impl Clone for ClusterWeights {
    fn clone(&self) -> Self {
        match &self.shared {
            Some((names, values)) => Self::shared(Arc::clone(names), values.clone()),
            None => BTreeMap::clone(self).into(),
        }
    }
}

impl<'a> IntoIterator for &'a ClusterWeights {
    type Item = (&'a String, &'a u64);
    type IntoIter = std::collections::btree_map::Iter<'a, String, u64>;
    fn into_iter(self) -> Self::IntoIter {
        self.deref().iter()
    }
}

impl IntoIterator for ClusterWeights {
    type Item = (String, u64);
    type IntoIter = std::collections::btree_map::IntoIter<String, u64>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_map().into_iter()
    }
}

impl PartialEq for ClusterWeights {
    fn eq(&self, other: &Self) -> bool {
        self.iter_str().eq(other.iter_str())
    }
}

impl Eq for ClusterWeights {}

impl PartialEq<BTreeMap<String, u64>> for ClusterWeights {
    fn eq(&self, other: &BTreeMap<String, u64>) -> bool {
        self.iter_str().len() == other.len()
            && self
                .iter_str()
                .zip(other)
                .all(|((ka, va), (kb, vb))| ka == kb && va == *vb)
    }
}

impl PartialEq<ClusterWeights> for BTreeMap<String, u64> {
    fn eq(&self, other: &ClusterWeights) -> bool {
        other == self
    }
}

impl fmt::Debug for ClusterWeights {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter_str()).finish()
    }
}

impl Serialize for ClusterWeights {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter_str())
    }
}

impl<'de> Deserialize<'de> for ClusterWeights {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        BTreeMap::<String, u64>::deserialize(d).map(Into::into)
    }
}
