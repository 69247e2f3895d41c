//! Placement upkeep: calling the scheduler for one object, booking its capacity, and the queue
//! that re-places objects affected by cluster changes at a bounded rate.
//!
//! Who is rescheduled when:
//! - put (placement or sizing changed) and revoke: that object, immediately;
//! - a cluster that becomes usable (registered, Ready, uncordoned, taints or labels changed):
//!   the "hungry" objects that could use it (Duplicated, rebalancing, or short of replicas);
//! - a cluster that evicts (NoExecute taint, drain, labels changed, deregistered): the objects
//!   placed there;
//! - a cluster that turns NotReady: the objects placed there, once their grace period is over
//!   (a failover timer each);
//! - new capacity reported: objects short of replicas.
//!
//! Cluster-driven work goes through `Data::pending` and at most
//! `RESCHEDULE_OBJECTS_PER_ENTRY` objects are re-placed per entry (256 in entries older than
//! `WIDER_DRAIN_SINCE`), so one entry's cost stays bounded however many objects a cluster held;
//! ticks drain the rest in order.

use std::collections::{BTreeMap, BTreeSet};

use crate::command::{
    EXACT_REPORTS_SINCE, FAILOVER_OVERDUE_SINCE, LOG_ENTRY_VERSION, STEADY_SPREAD_SINCE,
    WIDER_DRAIN_SINCE,
};
use crate::model::{
    Cluster, FederatedObject, Health, ObjectKey, PlacedCluster, ShortfallStatus, Tenant,
};
use crate::policy::{Extended, ExtendedCapacity, Resources, EXTENDED_SINCE};
use crate::scheduler::{self, ClusterView, Decision, ExtendedFree, HealthView, ScheduleRequest};
use crate::state::store::index;
use crate::state::store::table::Keyed;
use crate::state::{ChangeKind, ChangeOp, Ctx, Data, State};

/// Most objects re-placed from the queue per entry. A decision over 1,000 clusters costs tens
/// of microseconds, so an entry stays within tens of milliseconds of apply, while a failover of
/// ten thousand workloads takes ten entries rather than forty: a loaded leader commits a handful
/// of entries a second, and the drain waits on commits, not on apply.
pub const RESCHEDULE_OBJECTS_PER_ENTRY: usize = 1024;

/// The bound of entries older than `WIDER_DRAIN_SINCE`, which replay with it.
const RESCHEDULE_OBJECTS_PER_ENTRY_BEFORE_16: usize = 256;

/// Most objects an entry of envelope `version` re-places from the queue.
pub fn reschedule_objects_per_entry(version: u16) -> usize {
    if version >= WIDER_DRAIN_SINCE {
        RESCHEDULE_OBJECTS_PER_ENTRY
    } else {
        RESCHEDULE_OBJECTS_PER_ENTRY_BEFORE_16
    }
}

/// When a placement is decided: the log time and envelope version of the entry applying, which
/// say how old rules read (`command::version`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct At {
    pub now_ms: u64,
    pub version: u16,
}

impl Ctx<'_> {
    /// The entry's log time and version, as a placement decision needs them.
    pub(crate) fn at(&self) -> At {
        At {
            now_ms: self.now_ms,
            version: self.version,
        }
    }
}

/// `held`: the failover brake holds this cluster's replicas where they are.
pub(crate) fn health_view(c: &Cluster, held: bool) -> HealthView {
    match c.status.health {
        Health::Ready => HealthView::Ready,
        Health::NotReady if held => HealthView::Held {
            since_ms: c.status.health_since_ms,
        },
        Health::NotReady => HealthView::NotReady {
            since_ms: c.status.health_since_ms,
        },
        Health::Unknown => HealthView::Unknown {
            since_ms: c.status.health_since_ms,
        },
    }
}

/// The cluster's last reported available capacity.
fn cluster_available(c: &Cluster) -> Option<Resources> {
    c.status.capacity.map(|cap| cap.available)
}

fn view<'a>(c: &'a Cluster, available: Option<Resources>, held: bool) -> ClusterView<'a> {
    ClusterView {
        name: &c.spec.name,
        labels: &c.spec.labels,
        taints: &c.effective_taints,
        cordoned: c.cordoned,
        health: health_view(c, held),
        available,
        extended: None,
        held_to: None,
    }
}

/// Reported available minus `booked` (saturating); None if never reported.
fn free(c: &Cluster, booked: Resources) -> Option<Resources> {
    c.status
        .capacity
        .map(|cap| cap.available.saturating_sub(&booked))
}

/// Views of every registered cluster with what fedraft's placements left free.
pub(crate) fn fleet_views<'a>(
    clusters: &'a Keyed<Cluster>,
    booked: &Keyed<Resources>,
) -> Vec<ClusterView<'a>> {
    clusters
        .values()
        .map(|c| view(c, free(c, booked_on(booked, &c.spec.name)), false))
        .collect()
}

fn booked_on(booked: &Keyed<Resources>, cluster: &str) -> Resources {
    booked.get(cluster).copied().unwrap_or_default()
}

/// The clusters holding slices of the tenant owning `namespace`, if it schedules two-level.
fn allowed_for(
    d: &Data,
    ns_owner: &BTreeMap<String, String>,
    namespace: &str,
) -> Option<BTreeSet<String>> {
    let tenant: &Tenant = d.tenants.get(ns_owner.get(namespace)?)?;
    tenant.spec.slice_size?;
    Some(
        tenant
            .status
            .slices
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(c, _)| c.clone())
            .collect(),
    )
}

impl State {
    /// Failover timers armed and not yet fired: one per object and NotReady cluster it has
    /// replicas on, until the object's grace period there is over.
    pub fn failover_timers_pending(&self) -> usize {
        self.d.failover_timers.len()
    }

    /// Runs the scheduler for `obj` against the current fleet without changing anything.
    /// `fresh` ignores the current placement (revoke).
    pub(crate) fn decide(&self, obj: &FederatedObject, fresh: bool, at: At) -> Decision {
        let key = ObjectKey::new(obj.namespace.clone(), obj.name.clone());
        match self.ext.objects.get(&key) {
            Some(per) => self.decide_with(obj, per, fresh, at, None),
            None => self.decide_with(obj, &Extended::new(), fresh, at, None),
        }
    }

    /// [`State::decide`] for `obj` asking `per_ext` of extended resources per replica (an
    /// object not yet stored is asked about before its put), `subject` the door template being
    /// put if any (`workload_affinity`).
    pub(crate) fn decide_with(
        &self,
        obj: &FederatedObject,
        per_ext: &Extended,
        fresh: bool,
        at: At,
        subject: Option<&super::workload_affinity::Subject>,
    ) -> Decision {
        let now_ms = at.now_ms;
        let booked = &self.ix.booked;
        let per = obj.template_info.per_replica;
        // Free capacity for this object: its own booking on a cluster is not "taken".
        let view_for = |c: &'_ Cluster| -> Option<Resources> {
            let own = per.saturating_mul(u64::from(obj.replicas_on(&c.spec.name)));
            free(c, booked_on(booked, &c.spec.name).saturating_sub(&own))
        };
        let key = ObjectKey::new(obj.namespace.clone(), obj.name.clone());
        let overflow = self.overflow_for(&key, &obj.spec.placement, subject);
        let listed: Vec<&Cluster> = match &obj.spec.placement.clusters {
            // Only named clusters can receive replicas, plus those it runs on now (so the
            // scheduler sees them and drops them), plus those overflow tiers name; this keeps
            // the cost O(listed).
            Some(names) if !overflow.is_some_and(|o| o.selects_by_label()) => {
                let mut wanted: BTreeSet<&str> = names.iter().map(String::as_str).collect();
                wanted.extend(overflow.into_iter().flat_map(|o| o.listed()));
                wanted.extend(obj.status.clusters.iter().map(|p| &*p.cluster));
                wanted
                    .into_iter()
                    .filter_map(|n| self.d.clusters.get(n))
                    .collect()
            }
            _ => self.d.clusters.values().collect(),
        };
        // Extended sums free for this object: only objects asking for extended resources
        // book any, and only clusters with a detailed report have any to book.
        let ext_booked = if per_ext.is_empty() || self.ext.objects.is_empty() {
            BTreeMap::new()
        } else {
            self.extended_booked(&key)
        };
        // A tenant's per-cluster quotas cap what it may take on those clusters.
        let rooms = self.quota_rooms(obj);
        let room_on = |c: &Cluster| rooms.as_ref().and_then(|r| r.get(c.spec.name.as_str()));
        let ext_free: Vec<Option<(&ExtendedCapacity, Extended)>> = if self.ext.clusters.is_empty() {
            Vec::new()
        } else {
            listed
                .iter()
                .map(|c| {
                    let report = self.ext.clusters.get(&c.spec.name)?;
                    let free = match ext_booked.get(c.spec.name.as_str()) {
                        Some(b) => report.available.saturating_sub(b),
                        None => report.available.clone(),
                    };
                    let free = match room_on(c) {
                        Some(room) => room.cap_extended(free),
                        None => free,
                    };
                    Some((report, free))
                })
                .collect()
        };
        // Clusters application failover moved this object away from carry a taint for it.
        let evicted: Vec<Option<Vec<crate::policy::Taint>>> = if self.life.evicted.is_empty() {
            Vec::new()
        } else {
            listed
                .iter()
                .map(|c| {
                    self.app_evicted(&key, &c.spec.name, now_ms).then(|| {
                        let mut t = c.effective_taints.clone();
                        t.push(super::app_failover::eviction_taint());
                        t
                    })
                })
                .collect()
        };
        let views: Vec<ClusterView<'_>> = listed
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let available = match room_on(c) {
                    Some(room) => room.cap_base(view_for(c)),
                    None => view_for(c),
                };
                let mut v = view(c, available, self.failover_held(c));
                v.extended = ext_free
                    .get(i)
                    .and_then(Option::as_ref)
                    .map(|(report, free)| ExtendedFree { report, free });
                v.held_to = self.held_to(&key, &c.spec.name, cluster_available(c), now_ms);
                if let Some(Some(t)) = evicted.get(i) {
                    v.taints = t;
                }
                v
            })
            .collect();
        let current = if fresh {
            BTreeMap::new()
        } else {
            obj.placement_map()
        };
        let allowed = allowed_for(&self.d, &self.ix.ns_owner, &obj.namespace);
        let peers = self.workload_peers(&key, subject);
        let object_key = ObjectKey::join(&obj.namespace, &obj.name);
        let req = ScheduleRequest {
            object_key: &object_key,
            placement: &obj.spec.placement,
            total_replicas: obj.template_info.replicas,
            per_replica: per,
            per_replica_extended: per_ext,
            clusters: &views,
            current: &current,
            allowed: allowed.as_ref(),
            peers: peers.as_ref(),
            overflow,
            now_ms,
            steady_spread: at.version >= STEADY_SPREAD_SINCE,
        };
        scheduler::schedule(&req)
    }

    /// Re-places one object now and records the decision. Returns whether its status changed.
    pub(crate) fn reschedule(&mut self, key: &ObjectKey, fresh: bool, ctx: &mut Ctx) -> bool {
        let Some(obj) = self.object(&key.namespace, &key.name) else {
            return false;
        };
        let decision = self.decide_in_entry(obj, fresh, ctx);
        // An object placed by an affinity group that has no room left moves to the next group
        // that has some; that put re-places it (`affinity_groups`).
        if !super::affinity_groups::feasible(&decision) {
            if let Some(moved) = self.next_affinity_group(key, fresh, ctx) {
                return moved;
            }
        }
        let changed = self.apply_decision(key, &decision, ctx);
        ctx.decisions.push((key.clone(), decision));
        changed
    }

    fn apply_decision(&mut self, key: &ObjectKey, decision: &Decision, ctx: &mut Ctx) -> bool {
        let Some(obj) = self.d.objects.get_mut(&key.namespace, &key.name) else {
            return false;
        };
        let shortfall = decision.unschedulable.as_ref().map(|s| {
            Box::new(ShortfallStatus {
                replicas: s.replicas,
                message: s.message.clone(),
            })
        });
        let same_placement = obj.status.clusters.len() == decision.placement.len()
            && obj
                .status
                .clusters
                .iter()
                .zip(&decision.placement)
                .all(|(p, (c, n))| *p.cluster == **c && p.replicas == *n);
        let summary = decision.summary();
        obj.status.decided_index = ctx.index;
        if same_placement && obj.status.shortfall == shortfall {
            obj.status.decision_summary = summary.into();
            return false;
        }
        let before = index::flags(obj);
        let departed: Vec<(String, u32)> = obj
            .status
            .clusters
            .iter()
            .map(|p| (String::from(&*p.cluster), p.replicas))
            .collect();
        let per = obj.template_info.per_replica;
        let named = obj.spec.placement.named_clusters();
        self.ix.move_placement(
            key,
            named,
            per,
            obj.status
                .clusters
                .iter()
                .map(|p| (&*p.cluster, p.replicas)),
            per,
            decision
                .placement
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(c, n)| (c.as_str(), *n)),
        );
        // Keep what executors reported for clusters that stay; new clusters start unreported.
        // From version 11 a staying cluster's new replica count is not applied until reported.
        let exact = ctx.version >= EXACT_REPORTS_SINCE;
        let mut old: BTreeMap<Box<str>, PlacedCluster> = std::mem::take(&mut obj.status.clusters)
            .into_vec()
            .into_iter()
            .map(|p| (p.cluster.clone(), p))
            .collect();
        obj.status.clusters = decision
            .placement
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(c, n)| match old.remove(c.as_str()) {
                Some(p) => PlacedCluster {
                    replicas: *n,
                    applied: p.applied && (!exact || p.replicas == *n),
                    ..p
                },
                None => PlacedCluster {
                    cluster: c.as_str().into(),
                    replicas: *n,
                    applied: false,
                    ready_replicas: 0,
                    message: None,
                    reported_ms: None,
                },
            })
            .collect();
        obj.status.ready_replicas = obj.status.clusters.iter().map(|p| p.ready_replicas).sum();
        let short = shortfall.is_some();
        obj.status.shortfall = shortfall;
        obj.status.decision_summary = summary.into();
        if obj.resource_version != ctx.index {
            ctx.change(ChangeKind::Object, key.path(), ChangeOp::Modified);
        }
        obj.resource_version = ctx.index;
        self.ix.refresh_flags(key, before, obj);
        let timers = failover_timers(obj, &self.d.clusters, ctx.now_ms);
        self.d
            .failover_timers
            .extend(timers.into_iter().map(|t| (t, key.clone())));
        self.rollouts_placement_changed(key);
        self.hold_departing(key, &departed, ctx);
        self.preserve_placement_changed(key, &departed, ctx);
        self.failback_note(key, &departed);
        self.deschedule_placement_changed(key);
        if ctx.version >= EXTENDED_SINCE {
            self.note_waiting(key, short, ctx.index);
        }
        self.workload_moved(key, ctx);
        true
    }

    /// Queues an object for a bounded-rate reschedule (once, however often it is asked).
    pub(crate) fn enqueue(&mut self, key: &ObjectKey) {
        if self.ix.pending_set.insert(key.clone()) {
            self.d.pending.push_back(key.clone());
        }
    }

    /// Re-places up to [`reschedule_objects_per_entry`] queued objects, oldest first.
    pub(crate) fn drain_pending(&mut self, ctx: &mut Ctx) {
        for _ in 0..reschedule_objects_per_entry(ctx.version) {
            let Some(key) = self.d.pending.pop_front() else {
                break;
            };
            self.ix.pending_set.remove(&key);
            self.reschedule(&key, false, ctx);
        }
    }

    /// Moves expired failover timers to the reschedule queue. Two-level tenants' slices are
    /// re-placed first, so objects failing over may follow their slices to healthy clusters.
    pub(crate) fn fire_failover_timers(&mut self, ctx: &mut Ctx) {
        let mut fired = false;
        while let Some((at, _)) = self.d.failover_timers.get_min() {
            if *at > ctx.now_ms {
                break;
            }
            let Some((_, key)) = self.d.failover_timers.remove_min() else {
                break;
            };
            if self.object(&key.namespace, &key.name).is_some() {
                self.enqueue(&key);
                fired = true;
            }
        }
        // While the brake holds, slices stay too: moving them would evict what it holds.
        if fired && !self.health.brake.is_engaged() {
            self.replace_all_slices(ctx);
        }
    }

    /// A cluster became usable for new replicas: hungry objects that may use it are re-placed,
    /// and two-level tenants may get slices there.
    pub(crate) fn cluster_gained(&mut self, name: &str, ctx: &mut Ctx) {
        let keys: Vec<ObjectKey> = self
            .ix
            .interested_in(&self.ix.hungry, name)
            .into_iter()
            .cloned()
            .collect();
        for k in &keys {
            self.enqueue(k);
        }
        self.failback_cluster_gained(name);
        self.replace_all_slices(ctx);
    }

    /// A cluster may evict what runs there: every object placed there is re-placed.
    pub(crate) fn cluster_evicts(&mut self, name: &str, ctx: &mut Ctx) {
        let keys: Vec<index::SharedKey> = self
            .ix
            .placed_on
            .get(name)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        for k in &keys {
            self.enqueue(k);
        }
        self.replace_all_slices(ctx);
    }

    /// A cluster turned NotReady at `since_ms`: each object there gets a failover timer at the
    /// end of its grace period (the scheduler keeps replicas on it until then). Slices stay
    /// too: they move when those timers fire, so a short outage moves nothing.
    pub(crate) fn cluster_unhealthy(&mut self, name: &str, ctx: &mut Ctx) {
        let keys: Vec<index::SharedKey> = self
            .ix
            .placed_on
            .get(name)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        for k in keys {
            let Some(obj) = self.object(&k.namespace, &k.name) else {
                continue;
            };
            let overdue = ctx.version >= FAILOVER_OVERDUE_SINCE
                && failover_due(obj, &self.d.clusters).any(|t| t <= ctx.now_ms);
            for t in failover_timers(obj, &self.d.clusters, ctx.now_ms) {
                self.d.failover_timers.insert((t, ObjectKey::clone(&k)));
            }
            // A grace shorter than the time it took to notice the cluster has already run out:
            // no timer is left to fire, so the object is queued now.
            if overdue {
                self.enqueue(&k);
            }
        }
    }

    /// New capacity was reported on `name`: objects short of replicas may now fit.
    pub(crate) fn capacity_grew(&mut self, name: &str) {
        let keys: Vec<ObjectKey> = self
            .ix
            .interested_in(&self.ix.short, name)
            .into_iter()
            .cloned()
            .collect();
        for k in &keys {
            self.enqueue(k);
        }
    }

    /// The decision the scheduler would make for this object now, changing nothing (dry run).
    pub fn explain(&self, namespace: &str, name: &str) -> Option<Decision> {
        let obj = self.object(namespace, name)?;
        let at = At {
            now_ms: self.d.log_time_ms,
            version: LOG_ENTRY_VERSION,
        };
        Some(self.decide(obj, false, at))
    }
}

/// Failover deadlines for the object's replicas on unhealthy clusters that are still ahead.
fn failover_timers(obj: &FederatedObject, clusters: &Keyed<Cluster>, now_ms: u64) -> Vec<u64> {
    failover_due(obj, clusters)
        .filter(|t| *t > now_ms)
        .collect()
}

/// When each of the object's clusters that is not Ready has been so for longer than the
/// object's grace period (none when failover is off).
fn failover_due<'a>(
    obj: &'a FederatedObject,
    clusters: &'a Keyed<Cluster>,
) -> impl Iterator<Item = u64> + 'a {
    let failover = &obj.spec.placement.failover;
    obj.status
        .clusters
        .iter()
        .filter(move |_| failover.enabled)
        .filter_map(|p| clusters.get(&p.cluster))
        .filter(|c| c.status.health != Health::Ready)
        // The scheduler moves replicas once now - since > grace, hence the +1.
        .map(move |c| {
            c.status
                .health_since_ms
                .saturating_add(failover.grace_period_ms())
                .saturating_add(1)
        })
}
