//! Serde for the persistent sequences in the state (`imbl`), encoded exactly as the standard
//! collections they replaced, so snapshots and state hashes keep their bytes.
//!
//! Must not: change an encoding. A field names [`serialize`] and the `from_*` of the collection
//! it replaced.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Writes a persistent set or vector as its standard counterpart does: its items in order, the
/// length up front (imbl's iterators know it exactly, as bincode needs).
pub(crate) fn serialize<'a, C, S>(items: &'a C, s: S) -> Result<S::Ok, S::Error>
where
    &'a C: IntoIterator,
    <&'a C as IntoIterator>::Item: Serialize,
    S: Serializer,
{
    s.collect_seq(items)
}

/// Reads what a `BTreeSet` wrote into an `imbl::OrdSet`.
pub(crate) fn from_btree_set<'de, T, D>(d: D) -> Result<imbl::OrdSet<T>, D::Error>
where
    T: Deserialize<'de> + Ord + Clone,
    D: Deserializer<'de>,
{
    Ok(std::collections::BTreeSet::<T>::deserialize(d)?
        .into_iter()
        .collect())
}

/// Reads what a `VecDeque` wrote into an `imbl::Vector`.
pub(crate) fn from_vec_deque<'de, T, D>(d: D) -> Result<imbl::Vector<T>, D::Error>
where
    T: Deserialize<'de> + Clone,
    D: Deserializer<'de>,
{
    Ok(std::collections::VecDeque::<T>::deserialize(d)?
        .into_iter()
        .collect())
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, VecDeque};

    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Persistent {
        #[serde(
            serialize_with = "super::serialize",
            deserialize_with = "super::from_btree_set"
        )]
        set: imbl::OrdSet<(u64, String)>,
        #[serde(
            serialize_with = "super::serialize",
            deserialize_with = "super::from_vec_deque"
        )]
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
