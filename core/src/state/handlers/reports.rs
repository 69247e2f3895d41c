//! Status reports from executors: per object and cluster, applied or not, ready replicas, a
//! message. Reports are facts about the past: one about an object that is gone, or from a
//! cluster the object no longer runs on, is skipped, not refused.
//!
//! This is the busiest command: every executor reports about every object it runs, in
//! batches, so the lookups are arranged for the memory system (see [`locate`]).
//!
//! Exact reports (`StatusReportsAt`, version 11): "applied" must mean the member holds what
//! the state asks of it now, not what it asked when the executor looked. Each report names the
//! applied index of the state its executor's pass read, and counts only if
//! - ownership is not in force, or it comes from the cluster's owner, read after that owner
//!   took the cluster (a stale owner's report, or one its predecessor's runner read, is
//!   dropped: the new owner has not written yet);
//! - the object has not changed since (its resource version before the batch is at most that
//!   index): a report about an older template, replica count or placement is dropped, and
//!   the executor's next pass, which the change woke, reports again. Another cluster's report
//!   also moves the version; such a report is dropped too and comes again, a pass later.
//!
//! And from version 11, a put that changes an object's spec (`objects.rs`), and a decision
//! that changes a staying cluster's replica count (`placement.rs`), mark the clusters
//! concerned not applied; before, the flag of the older version stayed. Dropped reports are
//! skipped, not refused (a stale report is no bad input).
//!
//! Not covered by the reset (the version check still drops their stale reports): a rollout
//! moving a cluster to another revision, an override policy or a cluster's labels changing
//! what is rendered.

use super::validate;
use crate::command::{ObjectStatusReport, StatusReportAt, EXACT_REPORTS_SINCE};
use crate::error::FieldError;
use crate::model::{FederatedObject, ObjectKey, PlacedCluster};
use crate::state::store::table::ObjectTable;
use crate::state::{check_batch_len, ChangeKind, ChangeOp, Ctx, HandlerResult, State};

/// Status messages longer than this are cut (at a character boundary): executors relay
/// Kubernetes messages, which can be long, and every byte is replicated.
pub const MAX_STATUS_MESSAGE_BYTES: usize = 1024;

/// Reports located together: enough independent memory loads in flight to hide most of the
/// latency, few enough that the per-group arrays stay on the stack.
const GROUP: usize = 16;

/// Placed clusters touched ahead of the binary search; objects on more clusters just search.
const TOUCH_AHEAD: usize = 4;

impl State {
    pub(crate) fn on_status_reports(
        &mut self,
        batch: &[ObjectStatusReport],
        ctx: &mut Ctx,
    ) -> HandlerResult {
        self.status_batch(batch, ctx, |_, _, _| true)
    }

    pub(crate) fn on_status_reports_at(
        &mut self,
        batch: &[StatusReportAt],
        ctx: &mut Ctx,
    ) -> HandlerResult {
        if ctx.version < EXACT_REPORTS_SINCE {
            return Err(FieldError::new(
                "reports",
                format!("reports naming a state need envelope version {EXACT_REPORTS_SINCE}"),
            )
            .into());
        }
        for (i, r) in batch.iter().enumerate() {
            // The executor's node read that state before this entry existed.
            if r.as_of >= ctx.index {
                return Err(FieldError::new(
                    format!("reports[{i}].asOf"),
                    format!("{} is not before this entry ({})", r.as_of, ctx.index),
                )
                .into());
            }
        }
        self.status_batch(batch, ctx, |s, r, ctx| s.report_counts(r, ctx))
    }

    /// Whether an exact report still speaks of what the member must hold (module doc).
    fn report_counts(&self, at: &StatusReportAt, ctx: &Ctx) -> bool {
        let r = &at.report;
        if self.owners.in_force() {
            match self.owners.owner(&r.cluster) {
                Some(o) if o.node == ctx.actor_id && at.as_of >= o.since_index => {}
                _ => return false,
            }
        }
        self.d
            .objects
            .get(&r.namespace, &r.name)
            .is_some_and(|o| o.resource_version <= at.as_of)
    }

    /// Validates a batch, then records the reports that `counts`.
    fn status_batch<R: AsRef<ObjectStatusReport>>(
        &mut self,
        batch: &[R],
        ctx: &mut Ctx,
        counts: impl Fn(&State, &R, &Ctx) -> bool,
    ) -> HandlerResult {
        check_batch_len(batch.len(), "reports")?;
        let found = locate(&self.d.objects, batch);
        // A report that landed names an existing object and one of its placed clusters, whose
        // names were validated when they entered the state; only the others need checking.
        // Still all of them before anything changes: one bad name refuses the whole batch.
        for (i, (r, at)) in batch.iter().zip(&found).enumerate() {
            if at.is_some() {
                continue;
            }
            let r = r.as_ref();
            let at = |what: &'static str| {
                move |e: FieldError| FieldError::new(format!("reports[{i}].{what}"), e.message)
            };
            validate::dns_label(&r.namespace, "").map_err(at("namespace"))?;
            validate::dns_subdomain(&r.name, "").map_err(at("name"))?;
            validate::dns_label(&r.cluster, "").map_err(at("cluster"))?;
        }
        // Reports never change which clusters an object is placed on, so the positions found
        // above stay valid while the batch is written.
        // Judged on the state before the batch: its own reports bump the objects' versions.
        let counted: Vec<bool> = batch.iter().map(|r| counts(self, r, ctx)).collect();
        for ((r, at), counts) in batch.iter().zip(found).zip(&counted) {
            if let (Some(i), true) = (at, counts) {
                self.status_report(r.as_ref(), i, ctx);
            }
        }
        if !self.rollouts.handovers.is_empty() {
            let keys: Vec<ObjectKey> = batch
                .iter()
                .zip(&counted)
                .filter(|(_, counts)| **counts)
                .map(|(r, _)| {
                    let r = r.as_ref();
                    ObjectKey::new(r.namespace.clone(), r.name.clone())
                })
                .collect();
            self.handovers_reported(&keys, ctx);
        }
        Ok(None)
    }

    /// Records one report about the object's `i`th placed cluster.
    fn status_report(&mut self, r: &ObjectStatusReport, i: usize, ctx: &mut Ctx) {
        let Some(obj) = self.d.objects.get_mut(&r.namespace, &r.name) else {
            return;
        };
        let message = r.message.as_deref().map(truncate);
        let pc = &mut obj.status.clusters[i];
        let same = pc.applied == r.applied
            && pc.ready_replicas == r.ready_replicas
            && pc.message.as_deref() == message;
        pc.reported_ms = Some(ctx.now_ms);
        if same {
            return;
        }
        pc.applied = r.applied;
        pc.ready_replicas = r.ready_replicas;
        pc.message = message.map(Box::from);
        obj.status.ready_replicas = obj.status.clusters.iter().map(|p| p.ready_replicas).sum();
        if obj.resource_version != ctx.index {
            ctx.change(
                ChangeKind::Object,
                ObjectKey::join(&r.namespace, &r.name),
                ChangeOp::Modified,
            );
        }
        obj.resource_version = ctx.index;
    }
}

/// For each report, the position of its cluster in its object's placement, if both exist.
///
/// With many objects, finding one report's target is a chain of four dependent cache misses:
/// the table slot, the boxed object, its placement list, the cluster name's bytes. Done report
/// by report, the processor waits for each in turn. Done level by level over a group of
/// reports, the loads of one level do not depend on each other, so the processor keeps many of
/// them in flight and a group costs about one chain instead of sixteen. Read-only: the writing
/// pass then finds everything in cache.
fn locate<R: AsRef<ObjectStatusReport>>(objects: &ObjectTable, batch: &[R]) -> Vec<Option<usize>> {
    let mut found = Vec::with_capacity(batch.len());
    for group in batch.chunks(GROUP) {
        // Level 1: the table slots, which hold pointers to the objects.
        let objs: [Option<&FederatedObject>; GROUP] = std::array::from_fn(|k| {
            let r = group.get(k)?.as_ref();
            objects.get(&r.namespace, &r.name)
        });
        // Level 2: the objects, which point to their placement lists.
        let lists: [&[PlacedCluster]; GROUP] =
            std::array::from_fn(|k| objs[k].map_or(&[][..], |o| &o.status.clusters[..]));
        // Level 3: the lists, which point to the names.
        let names: [[&[u8]; TOUCH_AHEAD]; GROUP] = std::array::from_fn(|k| {
            std::array::from_fn(|j| lists[k].get(j).map_or(&[][..], |p| p.cluster.as_bytes()))
        });
        // Level 4: the names' bytes. The sum only keeps the loads from being optimized away.
        let touched = names
            .iter()
            .flatten()
            .fold(0u8, |acc, n| acc ^ n.first().copied().unwrap_or(0));
        std::hint::black_box(touched);
        // The searches, now on cached data.
        for (r, placed) in group.iter().zip(lists) {
            let r = r.as_ref();
            // Reports from clusters the object no longer runs on are stale: executors report
            // while they remove what fedraft moved away.
            found.push(
                placed
                    .binary_search_by(|p| p.cluster.as_ref().cmp(&r.cluster))
                    .ok(),
            );
        }
    }
    found
}

fn truncate(message: &str) -> &str {
    if message.len() <= MAX_STATUS_MESSAGE_BYTES {
        return message;
    }
    let mut end = MAX_STATUS_MESSAGE_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_cuts_at_a_character_boundary() {
        let long = "é".repeat(MAX_STATUS_MESSAGE_BYTES);
        let cut = truncate(&long);
        assert!(cut.len() <= MAX_STATUS_MESSAGE_BYTES);
        assert!(cut.len() >= MAX_STATUS_MESSAGE_BYTES - 1);
        assert_eq!(truncate("short"), "short");
    }
}
