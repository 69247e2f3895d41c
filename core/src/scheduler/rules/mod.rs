//! The placement rules, in the order a run applies them: `filter` (candidate, frozen or
//! evicted, with a reason), `spread` (label groups), then the replica counts: `divided` picks
//! among `static_weights` (KubeFed's planner), `webster` (plain weights) and `dynamic` (weights
//! from free capacity, over the fewest clusters that hold them all with `aggregated`), tier by
//! tier when the object has `overflow` tiers; `slices` places a tenant's quota slices;
//! `decision` is the record a run returns and how two records differ.
//!
//! Must not: read clocks, use floating point, or iterate a hash map into a result; the shared
//! helpers they stand on (`scheduler/support/`) decide nothing.

mod aggregated;
pub mod decision;
pub(super) mod divided;
mod dynamic;
pub(super) mod filter;
pub(super) mod overflow;
pub(super) mod slices;
pub(super) mod spread;
pub mod static_weights;
pub mod webster;
