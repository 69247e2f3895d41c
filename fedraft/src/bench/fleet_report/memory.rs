//! The report's memory figures: growth per cluster and per object between samples, on the node
//! that grew most, as text and as JSON.
//!
//! Two per-object figures answer different questions. The growth over the convergence phase
//! divided by its objects is what this fleet holds per object, and includes what comes with a
//! cluster's first objects whatever their number (a watch and a connection per type and
//! cluster). The last phase's figure is what one more object costs: objects added to a fleet
//! already holding every type on every cluster, between two settled samples.
//!
//! Must not: count a bounded cache (the raft log's, RocksDB's) as grown per object.

use serde_json::{json, Value};
use std::fmt::Write as _;

use super::super::fleet_gauges::PerObject;
use super::{Phase, Report, Resources};

impl Report {
    /// The heaviest node's RSS growth, in KiB: per cluster while registering (the leader's
    /// executors then hold every cluster), and per object (its manifest included) while
    /// converging, from [`Report::before_objects`]. A slope, not a total, so the runtime's fixed
    /// cost stays out; meaningful only for large runs, where the allocator's noise is small.
    fn memory_slopes(&self) -> Option<(f64, f64)> {
        let peak = |phase: Phase| {
            self.resources_at(phase)?
                .nodes
                .iter()
                .map(|n| n.0)
                .reduce(f64::max)
        };
        let (start, registered, converged) = (
            peak(Phase::Start)?,
            peak(Phase::Register)?,
            peak(Phase::Converge)?,
        );
        let owned = peak(Phase::Owned).unwrap_or(registered);
        let per_cluster = (registered - start) * 1024.0 / f64::from(self.clusters.max(1));
        let per_object = (converged - owned) * 1024.0 / self.objects.max(1) as f64;
        Some((per_cluster, per_object))
    }

    /// Seconds from the convergence sample to the settled one (0 without both).
    fn settled_after_s(&self) -> f64 {
        match (
            self.resources_at(Phase::Converge),
            self.resources_at(Phase::Settled),
        ) {
            (Some(c), Some(s)) => s.at_s - c.at_s,
            _ => 0.0,
        }
    }

    /// The sample objects' growth is measured from: once ownership spread (each node's
    /// executors then hold their share of the clusters; counting from `Register` would credit
    /// the leader with the executors it handed over and charge the others with theirs), else
    /// once registered.
    fn before_objects(&self) -> Option<&Resources> {
        self.resources_at(Phase::Owned)
            .or_else(|| self.resources_at(Phase::Register))
    }

    /// Where the growth per object went from [`Report::before_objects`] to the end of `phase`
    /// on the node whose held memory grew most (see `fleet_gauges`): at convergence it holds
    /// what passes still verify (live bodies, write memos, guards of reports in flight); once
    /// settled, what every object keeps.
    pub(super) fn memory_per_object(&self, phase: Phase) -> Option<PerObject> {
        let manifest = self.manifest_bytes as f64 / self.objects.max(1) as f64;
        let (before, after) = (self.before_objects()?, self.resources_at(phase)?);
        most_grown(before, after, self.objects, manifest)
    }

    /// What one more object costs: the growth per further object between the settled samples
    /// before and after the last phase's objects, on the node whose held memory grew most.
    pub(super) fn memory_per_further_object(&self) -> Option<PerObject> {
        let (count, bytes) = self.more?;
        let before = self.resources_at(Phase::BeforeMore)?;
        let after = self.resources_at(Phase::More)?;
        most_grown(before, after, count, bytes as f64 / count.max(1) as f64)
    }

    pub(super) fn render_memory(&self, o: &mut String) {
        if let Some((cluster, object)) = self.memory_slopes() {
            let _ = writeln!(
                o,
                "heaviest node's memory growth: {cluster:.0} KiB per cluster, {object:.1} KiB per object (manifest included)"
            );
        }
        if let Some(g) = self.memory_per_object(Phase::Converge) {
            let _ = writeln!(o, "node grown most, at convergence: {}", g.render());
        }
        if let Some(g) = self.memory_per_object(Phase::Settled) {
            let _ = writeln!(
                o,
                "node grown most, settled ({:.0} s after convergence): {}",
                self.settled_after_s(),
                g.render()
            );
        }
        // The steady phase's objects count as growth, not as objects: a bound from above.
        if let Some(g) = self.memory_per_object(Phase::Steady) {
            let _ = writeln!(
                o,
                "node grown most, after the steady writes: {}",
                g.render()
            );
        }
        if let (Some(g), Some((count, _))) = (self.memory_per_further_object(), self.more) {
            let _ = writeln!(
                o,
                "one more object ({count} written onto the settled fleet, both samples settled), node grown most: {}",
                g.render()
            );
        }
    }

    pub(super) fn memory_json(&self) -> Option<Value> {
        let (cluster, object) = self.memory_slopes()?;
        let json = |g: Option<PerObject>| g.map(|g| g.to_json());
        Some(json!({"perCluster": cluster, "perObject": object,
            "perObjectBreakdown": json(self.memory_per_object(Phase::Converge)),
            "perObjectSettled": json(self.memory_per_object(Phase::Settled)),
            "perObjectAfterSteady": json(self.memory_per_object(Phase::Steady)),
            "perFurtherObject": json(self.memory_per_further_object()),
            "furtherObjects": self.more.map(|(n, _)| n),
            "settledAfterS": self.settled_after_s()}))
    }
}

/// The growth per object from `before` to `after` of the node whose held memory grew most,
/// `manifest` bytes of it the objects' own.
fn most_grown(
    before: &Resources,
    after: &Resources,
    objects: u64,
    manifest: f64,
) -> Option<PerObject> {
    let node = |r: &Resources, n: usize| Some((r.nodes.get(n)?.0, r.gauges.get(n)?.memory?));
    (0..after.nodes.len())
        .filter_map(|n| {
            let g = PerObject::between(node(before, n)?, node(after, n)?, objects);
            Some(g.with_manifest(manifest))
        })
        .max_by(|a, b| a.held().total_cmp(&b.held()))
}
