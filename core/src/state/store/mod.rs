//! The structures the state is kept in and read through: name-keyed tables (`table`), the
//! copy-on-write maps and sequences a checkpoint image shares (`sharded`, `shared_seq`), the
//! request-id memo (`dedupe`), the derived index (`index`, rebuilt on restore), the direct
//! reader of a template's fields (`template_fast`) and what deleted objects last were, for
//! watchers (`tombstones`, never read by a handler).
//!
//! Must not: interpret commands or decide anything: the handlers in `state/handlers/` do, and
//! these only keep and find what they are given, encoded exactly as the plain collections they
//! stand in for (the snapshot and the state hash depend on those bytes).

pub mod dedupe;
pub mod index;
pub mod sharded;
pub mod shared_seq;
pub mod table;
pub mod template_fast;
pub mod tombstones;
