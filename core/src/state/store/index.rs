//! Derived lookup structures that keep every entry's cost proportional to what it affects.
//!
//! Nothing here is replicated or hashed: `Index::rebuild` recomputes it all from `Data` on
//! restore, and the handlers keep it in step incrementally. If the two ever disagreed, two nodes
//! would still hold the same `Data`, but their future decisions could differ; tests compare a
//! restored state's behaviour with the original's to catch that.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::table::Keyed;
use crate::model::{Cluster, FederatedObject, Health, ObjectKey, PlacedCluster};
use crate::policy::Resources;
use crate::state::Data;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Index {
    /// Health alarms: (log time, cluster), one per cluster that is Ready or recovering, at or
    /// before its `health_deadline`. A heartbeat leaves the alarm where it is (so a heartbeat
    /// costs no index update); when an alarm rings early, it is re-armed at the real deadline.
    pub alarms: BTreeSet<(u64, String)>,
    /// cluster -> its alarm time in `alarms`.
    pub armed: BTreeMap<String, u64>,
    /// cluster -> objects with replicas there.
    pub placed_on: Keyed<BTreeSet<SharedKey>>,
    /// cluster -> requests booked there (one entry per registered cluster).
    pub booked: Keyed<Resources>,
    /// Objects without an explicit cluster list: any new cluster may concern them.
    pub wide: BTreeSet<SharedKey>,
    /// cluster name -> objects whose explicit cluster list names it.
    pub named: Keyed<BTreeSet<SharedKey>>,
    /// Objects that may want a cluster that becomes usable: Duplicated, rebalancing, or short of
    /// replicas. Others are stable by design and ignore new clusters.
    pub hungry: BTreeSet<SharedKey>,
    /// Objects with unplaced replicas: new capacity anywhere may help them.
    pub short: BTreeSet<SharedKey>,
    /// namespace -> owning tenant.
    pub ns_owner: BTreeMap<String, String>,
    /// Membership of `Data::pending`, to enqueue each object once.
    pub pending_set: BTreeSet<ObjectKey>,
    /// namespace -> objects and template bytes stored there (tenant limits).
    pub ns_usage: BTreeMap<String, NsUsage>,
}

/// An object's key as the per-object sets hold it: one allocation shared by the object's
/// entries in `placed_on`, `named`, `wide`, `hungry` and `short` (four or so per object), where
/// each entry held its own copy of both names. Ordered, compared and looked up as the key
/// itself.
pub(crate) type SharedKey = Arc<ObjectKey>;

/// What one namespace stores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct NsUsage {
    pub objects: u64,
    pub template_bytes: u64,
}

/// When a cluster's current heartbeat run breaks without another heartbeat: Ready clusters turn
/// NotReady then, recovering clusters restart their run. None for other clusters. Silence counts
/// from the later of the last heartbeat and `judged_from_ms` (the end of the latest log stall,
/// `crate::health::LogStall`).
pub(crate) fn health_deadline(c: &Cluster, judged_from_ms: u64) -> Option<u64> {
    let last = c.status.last_heartbeat_ms?;
    let watched = c.status.health == Health::Ready || c.status.recovering_since_ms.is_some();
    watched.then(|| {
        last.max(judged_from_ms)
            .saturating_add(c.spec.failure_threshold_seconds.saturating_mul(1000))
    })
}

impl Index {
    /// The indexes of `d`, health alarms at the deadlines judged from `judged_from_ms`.
    pub fn rebuild(d: &Data, judged_from_ms: u64) -> Index {
        let mut ix = Index::default();
        for (name, c) in d.clusters.iter() {
            ix.booked.insert(name, Resources::ZERO);
            ix.rearm(name, health_deadline(c, judged_from_ms));
        }
        for obj in d.objects.iter() {
            ix.add_object(obj);
        }
        for t in d.tenants.values() {
            for ns in &t.spec.namespaces {
                ix.ns_owner.insert(ns.clone(), t.spec.name.clone());
            }
        }
        ix.pending_set = d.pending.iter().cloned().collect();
        ix
    }

    /// Sets (or clears) a cluster's health alarm.
    pub fn rearm(&mut self, cluster: &str, at: Option<u64>) {
        if let Some(old) = self.armed.remove(cluster) {
            self.alarms.remove(&(old, cluster.to_string()));
        }
        if let Some(at) = at {
            self.alarms.insert((at, cluster.to_string()));
            self.armed.insert(cluster.to_string(), at);
        }
    }

    /// The per-cluster and per-namespace parts (booked capacity, health alarms, namespace owners
    /// and usage), the per-object sets left empty: what a checkpoint copies under the state's
    /// lock to check against a rebuild. Copying the per-object sets too cost hundreds of
    /// milliseconds at 10^5 objects (docs/performance.md).
    pub fn aggregates(&self) -> Index {
        Index {
            alarms: self.alarms.clone(),
            armed: self.armed.clone(),
            booked: self.booked.clone(),
            ns_owner: self.ns_owner.clone(),
            ns_usage: self.ns_usage.clone(),
            ..Index::default()
        }
    }

    /// Equality with a rebuilt index, except that alarms may ring earlier than the deadline.
    pub fn matches_rebuild(&self, rebuilt: &Index) -> Result<(), String> {
        let mut a = self.clone();
        if a.armed.len() != a.alarms.len() || rebuilt.armed.keys().ne(a.armed.keys()) {
            return Err(format!(
                "armed clusters {:?}, expected {:?}",
                a.armed, rebuilt.armed
            ));
        }
        for (name, at) in &a.armed {
            let exact = rebuilt.armed[name];
            if *at > exact || !a.alarms.contains(&(*at, name.clone())) {
                return Err(format!("alarm of {name} at {at}, deadline {exact}"));
            }
        }
        a.alarms = rebuilt.alarms.clone();
        a.armed = rebuilt.armed.clone();
        if a == *rebuilt {
            Ok(())
        } else {
            Err(format!(
                "derived indexes drifted from the data:\n kept:    {a:?}\n rebuilt: {rebuilt:?}"
            ))
        }
    }

    /// Records an object's spec and placement in every index.
    pub fn add_object(&mut self, obj: &FederatedObject) {
        let shared = SharedKey::new(obj.key());
        let u = self.ns_usage.entry(obj.namespace.clone()).or_default();
        u.objects += 1;
        u.template_bytes += obj.spec.template.len() as u64;
        self.add_placement(obj, &shared);
        match &obj.spec.placement.clusters {
            None => {
                self.wide.insert(shared.clone());
            }
            Some(names) => {
                for n in names {
                    self.named
                        .get_or_insert_with(n, BTreeSet::new)
                        .insert(shared.clone());
                }
            }
        }
        if is_hungry(obj) {
            self.hungry.insert(shared.clone());
        }
        if obj.status.shortfall.is_some() {
            self.short.insert(shared);
        }
    }

    pub fn remove_object(&mut self, obj: &FederatedObject) {
        let key = obj.key();
        if let Some(u) = self.ns_usage.get_mut(&obj.namespace) {
            u.objects = u.objects.saturating_sub(1);
            u.template_bytes = u
                .template_bytes
                .saturating_sub(obj.spec.template.len() as u64);
            if u.objects == 0 {
                self.ns_usage.remove(&obj.namespace);
            }
        }
        self.remove_placement(obj, &key);
        match &obj.spec.placement.clusters {
            None => {
                self.wide.remove(&key);
            }
            Some(names) => {
                for n in names {
                    if let Some(set) = self.named.get_mut(n) {
                        set.remove(&key);
                        if set.is_empty() {
                            self.named.remove(n);
                        }
                    }
                }
            }
        }
        self.hungry.remove(&key);
        self.short.remove(&key);
    }

    /// An object of `namespace` changed its template from `old` to `new` bytes.
    pub fn template_resized(&mut self, namespace: &str, old: usize, new: usize) {
        if let Some(u) = self.ns_usage.get_mut(namespace) {
            u.template_bytes = u
                .template_bytes
                .saturating_sub(old as u64)
                .saturating_add(new as u64);
        }
    }

    /// Books the object's replicas and indexes where they run.
    fn add_placement(&mut self, obj: &FederatedObject, key: &SharedKey) {
        for pc in &obj.status.clusters {
            let need = obj
                .template_info
                .per_replica
                .saturating_mul(u64::from(pc.replicas));
            let booked = self
                .booked
                .get_or_insert_with(&pc.cluster, Resources::default);
            *booked = booked.saturating_add(&need);
            self.placed_on
                .get_or_insert_with(&pc.cluster, BTreeSet::new)
                .insert(key.clone());
        }
    }

    fn remove_placement(&mut self, obj: &FederatedObject, key: &ObjectKey) {
        for pc in &obj.status.clusters {
            let need = obj
                .template_info
                .per_replica
                .saturating_mul(u64::from(pc.replicas));
            if let Some(booked) = self.booked.get_mut(&pc.cluster) {
                *booked = booked.saturating_sub(&need);
            }
            if let Some(set) = self.placed_on.get_mut(&pc.cluster) {
                set.remove(key);
                if set.is_empty() {
                    self.placed_on.remove(&pc.cluster);
                }
            }
        }
    }

    /// Moves an object's bookings and `placed_on` memberships from its `old` placement (with
    /// `old_per` requests per replica) to `new`. Both lists are sorted by cluster name. Same
    /// result as `remove_placement` then `add_placement` (all releases happen before any
    /// booking, so saturation behaves the same), but a cluster in both lists keeps its set
    /// membership untouched: a replica-count change costs no set operation. `named` is the
    /// object's explicit cluster list, where its shared key is found before its first placement.
    pub fn move_placement<'a>(
        &mut self,
        key: &ObjectKey,
        named: &[String],
        old_per: Resources,
        old: impl Iterator<Item = (&'a str, u32)> + Clone,
        new_per: Resources,
        new: impl Iterator<Item = (&'a str, u32)> + Clone,
    ) {
        for (c, n) in old.clone() {
            if let Some(booked) = self.booked.get_mut(c) {
                *booked = booked.saturating_sub(&old_per.saturating_mul(u64::from(n)));
            }
        }
        for (c, n) in new.clone() {
            let need = new_per.saturating_mul(u64::from(n));
            match self.booked.get_mut(c) {
                Some(booked) => *booked = booked.saturating_add(&need),
                None => {
                    self.booked.insert(c, need);
                }
            }
        }
        // The object's shared key, from a set it leaves or stays in, else (a first placement)
        // from the sets `add_object` put it in.
        let mut shared = old
            .clone()
            .find_map(|(c, _)| self.placed_on.get(c)?.get(key).cloned());
        let mut a = old.map(|(c, _)| c).peekable();
        let mut b = new.map(|(c, _)| c).peekable();
        loop {
            match (a.peek().copied(), b.peek().copied()) {
                (None, None) => break,
                (Some(x), Some(y)) if x == y => {
                    a.next();
                    b.next();
                }
                (Some(x), y) if y.is_none_or(|y| x < y) => {
                    a.next();
                    if let Some(set) = self.placed_on.get_mut(x) {
                        set.remove(key);
                        if set.is_empty() {
                            self.placed_on.remove(x);
                        }
                    }
                }
                (_, Some(y)) => {
                    b.next();
                    let k = shared
                        .get_or_insert_with(|| self.shared_key(key, named, &[]))
                        .clone();
                    match self.placed_on.get_mut(y) {
                        Some(set) => {
                            set.insert(k);
                        }
                        None => {
                            self.placed_on.insert(y, BTreeSet::from([k]));
                        }
                    }
                }
                (Some(_), None) => unreachable!("covered by the arm above"),
            }
        }
    }

    /// Replaces an object's entries in `wide` / `named` when its cluster list changes.
    pub fn move_cluster_list(
        &mut self,
        key: &ObjectKey,
        old: &Option<Vec<String>>,
        new: &Option<Vec<String>>,
    ) {
        if old == new {
            return;
        }
        let shared = self.shared_key(key, old.as_deref().unwrap_or_default(), &[]);
        match old {
            None => {
                self.wide.remove(key);
            }
            Some(names) => {
                for n in names {
                    if let Some(set) = self.named.get_mut(n) {
                        set.remove(key);
                        if set.is_empty() {
                            self.named.remove(n);
                        }
                    }
                }
            }
        }
        match new {
            None => {
                self.wide.insert(shared);
            }
            Some(names) => {
                for n in names {
                    self.named
                        .get_or_insert_with(n, BTreeSet::new)
                        .insert(shared.clone());
                }
            }
        }
    }

    /// Puts the object in or out of `hungry` and `short` after a change, given its `flags`
    /// from before the change; sets are touched only when membership changes.
    pub fn refresh_flags(&mut self, key: &ObjectKey, before: (bool, bool), obj: &FederatedObject) {
        let (hungry, short) = flags(obj);
        if hungry == before.0 && short == before.1 {
            return;
        }
        let names = obj.spec.placement.named_clusters();
        let shared = self.shared_key(key, names, &obj.status.clusters);
        if hungry != before.0 {
            set_member(&mut self.hungry, shared.clone(), hungry);
        }
        if short != before.1 {
            set_member(&mut self.short, shared, short);
        }
    }

    /// The allocation the sets already share for `key` (found through the clusters it names or
    /// is placed on, or the flag sets), or a new one for an object in none of them.
    pub fn shared_key(
        &self,
        key: &ObjectKey,
        named: &[String],
        placed: &[PlacedCluster],
    ) -> SharedKey {
        let found = (self.wide.get(key))
            .or_else(|| named.iter().find_map(|n| self.named.get(n)?.get(key)))
            .or_else(|| {
                placed
                    .iter()
                    .find_map(|p| self.placed_on.get(&p.cluster)?.get(key))
            })
            .or_else(|| self.hungry.get(key))
            .or_else(|| self.short.get(key));
        found
            .cloned()
            .unwrap_or_else(|| SharedKey::new(key.clone()))
    }

    /// Objects interested in cluster `name` becoming usable, among `set`, in key order.
    ///
    /// Walks the smaller side of each intersection: `set` may hold every Duplicated object of
    /// the federation while the objects naming one cluster are few, and a fleet's clusters come
    /// back (registration, recovery) a thousand at a time.
    pub fn interested_in<'a>(
        &'a self,
        set: &'a BTreeSet<SharedKey>,
        name: &str,
    ) -> Vec<&'a ObjectKey> {
        let mut out = Vec::new();
        if let Some(named) = self.named.get(name) {
            intersect(named, set, &mut out);
        }
        intersect(&self.wide, set, &mut out);
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Appends `a ∩ b`, probing the larger set with the smaller one's keys.
fn intersect<'a>(
    a: &'a BTreeSet<SharedKey>,
    b: &'a BTreeSet<SharedKey>,
    out: &mut Vec<&'a ObjectKey>,
) {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    out.extend(small.iter().map(|k| &**k).filter(|k| large.contains(*k)));
}

fn set_member(set: &mut BTreeSet<SharedKey>, key: SharedKey, member: bool) {
    if member {
        set.insert(key);
    } else {
        set.remove(&*key);
    }
}

/// (in `hungry`, in `short`) for an object.
pub(crate) fn flags(obj: &FederatedObject) -> (bool, bool) {
    (is_hungry(obj), obj.status.shortfall.is_some())
}

/// Whether a newly usable cluster can change this object's placement without a revoke.
pub(crate) fn is_hungry(obj: &FederatedObject) -> bool {
    let r = &obj.spec.placement.replicas;
    !r.mode.divides()
        || r.division.as_deref().is_some_and(|d| d.rebalance())
        || obj.status.shortfall.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(i: u8) -> ObjectKey {
        ObjectKey {
            namespace: "ns".into(),
            name: format!("o{i:03}"),
        }
    }

    /// A first placement shares the key the object's other sets hold (found through `wide` or
    /// its named clusters) instead of allocating another.
    #[test]
    fn a_first_placement_shares_the_key_of_the_other_sets() {
        let none = Resources::ZERO;
        let mut ix = Index::default();
        let wide = SharedKey::new(key(1));
        ix.wide.insert(wide.clone());
        ix.move_placement(
            &key(1),
            &[],
            none,
            [].into_iter(),
            none,
            [("a", 1)].into_iter(),
        );
        let placed = ix.placed_on.get("a").and_then(|s| s.get(&key(1)));
        assert!(placed.is_some_and(|k| Arc::ptr_eq(k, &wide)));

        let named = SharedKey::new(key(2));
        ix.named.insert("b", BTreeSet::from([named.clone()]));
        let list = ["b".to_string()];
        let moves = [("a", 1), ("b", 2)];
        ix.move_placement(
            &key(2),
            &list,
            none,
            [].into_iter(),
            none,
            moves.into_iter(),
        );
        for c in ["a", "b"] {
            let placed = ix.placed_on.get(c).and_then(|s| s.get(&key(2)));
            assert!(placed.is_some_and(|k| Arc::ptr_eq(k, &named)), "{c}");
        }
    }

    proptest! {
        /// The intersection walk finds exactly what filtering the whole set finds, in order.
        #[test]
        fn interested_in_is_the_filtered_set(
            set in prop::collection::btree_set(0u8..60, 0..40),
            wide in prop::collection::btree_set(0u8..60, 0..40),
            named_a in prop::collection::btree_set(0u8..60, 0..20),
            named_b in prop::collection::btree_set(0u8..60, 0..20),
        ) {
            let mut ix = Index {
                wide: wide.iter().map(|&i| SharedKey::new(key(i))).collect(),
                ..Index::default()
            };
            for (cluster, names) in [("a", &named_a), ("b", &named_b)] {
                for &n in names.iter() {
                    ix.named.get_or_insert_with(cluster, BTreeSet::new).insert(SharedKey::new(key(n)));
                }
            }
            let set: BTreeSet<SharedKey> = set.into_iter().map(|i| SharedKey::new(key(i))).collect();
            for cluster in ["a", "b", "c"] {
                let named = ix.named.get(cluster);
                let want: Vec<&ObjectKey> = set
                    .iter()
                    .map(|k| &**k)
                    .filter(|k| ix.wide.contains(*k) || named.is_some_and(|n| n.contains(*k)))
                    .collect();
                prop_assert_eq!(ix.interested_in(&set, cluster), want);
            }
        }
    }
}
