//! Serde for the persistent sequences in the state (`imbl`), encoded exactly as the standard
//! collections they replaced, so snapshots and state hashes keep their bytes.
//!
//! Must not: change an encoding. Each module here is the `#[serde(with)]` of one field type.

use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Writes `len` items as a sequence whose length is known up front, as bincode needs.
fn seq<'a, T: Serialize + 'a, S: Serializer>(
    len: usize,
    items: impl Iterator<Item = &'a T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut out = s.serialize_seq(Some(len))?;
    for item in items {
        out.serialize_element(item)?;
    }
    out.end()
}

/// An `imbl::OrdSet` encoded as a `BTreeSet`.
pub(crate) mod as_btree_set {
    use super::*;

    pub fn serialize<T: Serialize + Ord + Clone, S: Serializer>(
        set: &imbl::OrdSet<T>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        seq(set.len(), set.iter(), s)
    }

    pub fn deserialize<'de, T, D>(d: D) -> Result<imbl::OrdSet<T>, D::Error>
    where
        T: Deserialize<'de> + Ord + Clone,
        D: Deserializer<'de>,
    {
        Ok(std::collections::BTreeSet::<T>::deserialize(d)?
            .into_iter()
            .collect())
    }
}

/// An `imbl::Vector` encoded as a `VecDeque`.
pub(crate) mod as_vec_deque {
    use super::*;

    pub fn serialize<T: Serialize + Clone, S: Serializer>(
        items: &imbl::Vector<T>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        seq(items.len(), items.iter(), s)
    }

    pub fn deserialize<'de, T, D>(d: D) -> Result<imbl::Vector<T>, D::Error>
    where
        T: Deserialize<'de> + Clone,
        D: Deserializer<'de>,
    {
        Ok(std::collections::VecDeque::<T>::deserialize(d)?
            .into_iter()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, VecDeque};

    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Persistent {
        #[serde(with = "super::as_btree_set")]
        set: imbl::OrdSet<(u64, String)>,
        #[serde(with = "super::as_vec_deque")]
        queue: imbl::Vector<String>,
    }

    #[derive(Serialize)]
    struct Standard {
        set: BTreeSet<(u64, String)>,
        queue: VecDeque<String>,
    }

    #[test]
    fn encodes_as_the_standard_collections_and_back() {
        let items = [(3, "c"), (1, "a"), (2, "b"), (1, "z")];
        let standard = Standard {
            set: items.iter().map(|(t, k)| (*t, k.to_string())).collect(),
            queue: items.iter().map(|(_, k)| k.to_string()).collect(),
        };
        let persistent = Persistent {
            set: items.iter().map(|(t, k)| (*t, k.to_string())).collect(),
            queue: items.iter().map(|(_, k)| k.to_string()).collect(),
        };
        let config = bincode::config::standard();
        let bytes = bincode::serde::encode_to_vec(&persistent, config).unwrap();
        assert_eq!(
            bytes,
            bincode::serde::encode_to_vec(&standard, config).unwrap()
        );
        let (back, _): (Persistent, usize) =
            bincode::serde::decode_from_slice(&bytes, config).unwrap();
        assert_eq!(back, persistent);
    }
}
