//! The snapshot format of the replicated state and the frozen image a checkpoint encodes.
//!
//! Owns: the versioned layout (`SNAPSHOT_VERSION`; the layouts of every older version it still
//! reads are in `layouts`), encoding, and decoding into the replicated parts. Must not: rebuild derived indexes
//! or interpret the state (`State::from_snapshot` does, after `decode`).

use serde::{Deserialize, Serialize};

mod layouts;

use super::handlers::deschedule::Deschedules;
use super::handlers::extended::ExtendedTables;
use super::handlers::failback::FailBacks;
use super::handlers::lifecycle::Lifecycles;
use super::handlers::preserve::Preservations;
use super::handlers::rollout::Rollouts;
use super::handlers::services::Services;
use super::handlers::taint_policy::TaintTables;
use super::store::index::Index;
use super::Data;
use crate::admission::AdmissionPolicy;
use crate::command::decode_exact;
use crate::door::DoorTables;
use crate::error::CodecError;
use crate::health::HealthBook;
use crate::owners::Owners;
use crate::users::Users;
use layouts::{
    SnapshotOwnedV1, SnapshotOwnedV10, SnapshotOwnedV11, SnapshotOwnedV2, SnapshotOwnedV3,
    SnapshotOwnedV4, SnapshotOwnedV5, SnapshotOwnedV6, SnapshotOwnedV7, SnapshotOwnedV8,
    SnapshotOwnedV9,
};

/// Snapshot format this binary writes; it reads this, 11 (before the health book recorded the
/// latest log stall), 10 (before the statePreservation
/// tables and the taint tables of Karmada's ClusterTaintPolicy), 9 (before the lifecycle tables of
/// Karmada's suspension, preserveResourcesOnDeletion and application failover), 8 (before the
/// descheduler's tables), 7
/// (before the health book, the fail-back
/// tables, the owners' book and per-cluster tenant quotas in the extended-resource tables), 6
/// (before the extended-resource tables), 5 (before rollouts), 4 (before the user database), 3
/// (before the door's tables), 2 (before the admission policy) and 1 (before service
/// discovery).
pub const SNAPSHOT_VERSION: u16 = 12;

#[derive(Serialize)]
struct SnapshotRef<'a> {
    version: u16,
    applied_index: u64,
    data: &'a Data,
    services: &'a Services,
    admission: &'a AdmissionPolicy,
    door: &'a DoorTables,
    users: &'a Users,
    rollouts: &'a Rollouts,
    ext: &'a ExtendedTables,
    health: &'a HealthBook,
    failbacks: &'a FailBacks,
    owners: &'a Owners,
    deschedules: &'a Deschedules,
    life: &'a Lifecycles,
    pres: &'a Preservations,
    taints: &'a TaintTables,
}

#[derive(Deserialize)]
struct SnapshotOwned {
    /// Already checked by decoding it alone first.
    _version: u16,
    applied_index: u64,
    data: Data,
    services: Services,
    admission: AdmissionPolicy,
    door: DoorTables,
    users: Users,
    rollouts: Rollouts,
    ext: ExtendedTables,
    health: HealthBook,
    failbacks: FailBacks,
    owners: Owners,
    deschedules: Deschedules,
    life: Lifecycles,
    pres: Preservations,
    taints: TaintTables,
}

// One argument per replicated part, in snapshot order: the layout reads off the signature.
#[allow(clippy::too_many_arguments)]
pub(super) fn encode_snapshot(
    applied_index: u64,
    data: &Data,
    services: &Services,
    admission: &AdmissionPolicy,
    door: &DoorTables,
    users: &Users,
    rollouts: &Rollouts,
    ext: &ExtendedTables,
    health: &HealthBook,
    failbacks: &FailBacks,
    owners: &Owners,
    deschedules: &Deschedules,
    life: &Lifecycles,
    pres: &Preservations,
    taints: &TaintTables,
) -> Vec<u8> {
    let snap = SnapshotRef {
        version: SNAPSHOT_VERSION,
        applied_index,
        data,
        services,
        admission,
        door,
        users,
        rollouts,
        ext,
        health,
        failbacks,
        owners,
        deschedules,
        life,
        pres,
        taints,
    };
    // Plain owned data into a Vec: cannot fail (see `LogEntry::encode`).
    bincode::serde::encode_to_vec(&snap, bincode::config::standard())
        .unwrap_or_else(|e| unreachable!("snapshot encoding failed: {e}"))
}

/// The replicated state as it was at one applied index ([`State::image`]): what a checkpoint or
/// a raft snapshot encodes, without holding up the state that goes on applying.
#[derive(Debug, Clone)]
pub struct StateImage {
    pub(super) applied_index: u64,
    pub(super) d: Data,
    pub(super) svc: Services,
    pub(super) adm: AdmissionPolicy,
    pub(super) door: DoorTables,
    pub(super) users: Users,
    pub(super) rollouts: Rollouts,
    pub(super) ext: ExtendedTables,
    pub(super) health: HealthBook,
    pub(super) failbacks: FailBacks,
    pub(super) owners: Owners,
    pub(super) deschedules: Deschedules,
    pub(super) life: Lifecycles,
    pub(super) pres: Preservations,
    pub(super) taints: TaintTables,
    /// The indexes' aggregates at that index, in an image taken to be checked
    /// ([`State::checked_image`](super::State::checked_image)).
    pub(super) ix: Option<Index>,
}

impl StateImage {
    pub fn applied_index(&self) -> u64 {
        self.applied_index
    }

    pub fn log_time_ms(&self) -> u64 {
        self.d.log_time_ms
    }

    /// The same bytes as [`State::to_snapshot`] at that index.
    pub fn to_snapshot(&self) -> Vec<u8> {
        encode_snapshot(
            self.applied_index,
            &self.d,
            &self.svc,
            &self.adm,
            &self.door,
            &self.users,
            &self.rollouts,
            &self.ext,
            &self.health,
            &self.failbacks,
            &self.owners,
            &self.deschedules,
            &self.life,
            &self.pres,
            &self.taints,
        )
    }

    /// [`State::check_consistency`] of the image's aggregates (booked capacity against the
    /// placements, health alarms, namespace usage), off the live state's lock; `Ok` for an
    /// image taken without them.
    pub fn check_consistency(&self) -> Result<(), String> {
        let Some(ix) = &self.ix else { return Ok(()) };
        ix.matches_rebuild(&Index::rebuild(&self.d, self.health.judged_from_ms()).aggregates())
    }
}

/// What [`decode`] gives back, in snapshot order.
pub(super) type SnapshotParts = (
    u64,
    Data,
    Services,
    AdmissionPolicy,
    DoorTables,
    Users,
    Rollouts,
    ExtendedTables,
    HealthBook,
    FailBacks,
    Owners,
    Deschedules,
    Lifecycles,
    Preservations,
    TaintTables,
);

/// The replicated parts of a snapshot of any version this binary reads: applied index, data,
/// services, admission policy, door tables, user database, rollout tables, extended-resource
/// tables, health book, fail-back tables, owners' book, descheduler tables, lifecycle tables,
/// statePreservation tables and taint tables (the parts an older version lacks are defaults,
/// per-cluster quotas included).
pub(super) fn decode(bytes: &[u8]) -> Result<SnapshotParts, CodecError> {
    let (version, _): (u16, usize) = bincode::decode_from_slice(bytes, bincode::config::standard())
        .map_err(|e| CodecError::Decode(e.to_string()))?;
    if version > SNAPSHOT_VERSION {
        return Err(CodecError::UnsupportedVersion {
            found: version,
            supported: SNAPSHOT_VERSION,
        });
    }
    let (applied_index, data, services, admission, door) = match version {
        1 => {
            let snap: SnapshotOwnedV1 = decode_exact(bytes)?;
            let svc = Services::default();
            (
                snap.applied_index,
                snap.data,
                svc,
                AdmissionPolicy::default(),
                DoorTables::default(),
            )
        }
        2 => {
            let snap: SnapshotOwnedV2 = decode_exact(bytes)?;
            let adm = AdmissionPolicy::default();
            let door = DoorTables::default();
            (snap.applied_index, snap.data, snap.services, adm, door)
        }
        3 => {
            let snap: SnapshotOwnedV3 = decode_exact(bytes)?;
            let door = DoorTables::default();
            (
                snap.applied_index,
                snap.data,
                snap.services,
                snap.admission,
                door,
            )
        }
        4 => {
            let snap: SnapshotOwnedV4 = decode_exact(bytes)?;
            (
                snap.applied_index,
                snap.data,
                snap.services,
                snap.admission,
                snap.door,
            )
        }
        5 => {
            let snap: SnapshotOwnedV5 = decode_exact(bytes)?;
            return Ok((
                snap.applied_index,
                snap.data,
                snap.services,
                snap.admission,
                snap.door,
                snap.users,
                Rollouts::default(),
                ExtendedTables::default(),
                HealthBook::default(),
                FailBacks::default(),
                Owners::default(),
                Deschedules::default(),
                Lifecycles::default(),
                Preservations::default(),
                TaintTables::default(),
            ));
        }
        6 => {
            let snap: SnapshotOwnedV6 = decode_exact(bytes)?;
            return Ok((
                snap.applied_index,
                snap.data,
                snap.services,
                snap.admission,
                snap.door,
                snap.users,
                snap.rollouts,
                ExtendedTables::default(),
                HealthBook::default(),
                FailBacks::default(),
                Owners::default(),
                Deschedules::default(),
                Lifecycles::default(),
                Preservations::default(),
                TaintTables::default(),
            ));
        }
        7 => {
            let snap: SnapshotOwnedV7 = decode_exact(bytes)?;
            return Ok((
                snap.applied_index,
                snap.data,
                snap.services,
                snap.admission,
                snap.door,
                snap.users,
                snap.rollouts,
                snap.ext.into(),
                HealthBook::default(),
                FailBacks::default(),
                Owners::default(),
                Deschedules::default(),
                Lifecycles::default(),
                Preservations::default(),
                TaintTables::default(),
            ));
        }
        8 => {
            let snap: SnapshotOwnedV8 = decode_exact(bytes)?;
            return Ok((
                snap.applied_index,
                snap.data,
                snap.services,
                snap.admission,
                snap.door,
                snap.users,
                snap.rollouts,
                snap.ext,
                snap.health.into(),
                snap.failbacks,
                snap.owners,
                Deschedules::default(),
                Lifecycles::default(),
                Preservations::default(),
                TaintTables::default(),
            ));
        }
        9 => {
            let snap: SnapshotOwnedV9 = decode_exact(bytes)?;
            return Ok((
                snap.applied_index,
                snap.data,
                snap.services,
                snap.admission,
                snap.door,
                snap.users,
                snap.rollouts,
                snap.ext,
                snap.health.into(),
                snap.failbacks,
                snap.owners,
                snap.deschedules,
                Lifecycles::default(),
                Preservations::default(),
                TaintTables::default(),
            ));
        }
        10 => {
            let snap: SnapshotOwnedV10 = decode_exact(bytes)?;
            return Ok((
                snap.applied_index,
                snap.data,
                snap.services,
                snap.admission,
                snap.door,
                snap.users,
                snap.rollouts,
                snap.ext,
                snap.health.into(),
                snap.failbacks,
                snap.owners,
                snap.deschedules,
                snap.life,
                Preservations::default(),
                TaintTables::default(),
            ));
        }
        11 => {
            let snap: SnapshotOwnedV11 = decode_exact(bytes)?;
            return Ok((
                snap.applied_index,
                snap.data,
                snap.services,
                snap.admission,
                snap.door,
                snap.users,
                snap.rollouts,
                snap.ext,
                snap.health.into(),
                snap.failbacks,
                snap.owners,
                snap.deschedules,
                snap.life,
                snap.pres,
                snap.taints,
            ));
        }
        _ => {
            let snap: SnapshotOwned = decode_exact(bytes)?;
            return Ok((
                snap.applied_index,
                snap.data,
                snap.services,
                snap.admission,
                snap.door,
                snap.users,
                snap.rollouts,
                snap.ext,
                snap.health,
                snap.failbacks,
                snap.owners,
                snap.deschedules,
                snap.life,
                snap.pres,
                snap.taints,
            ));
        }
    };
    let users = Users::default();
    Ok((
        applied_index,
        data,
        services,
        admission,
        door,
        users,
        Rollouts::default(),
        ExtendedTables::default(),
        HealthBook::default(),
        FailBacks::default(),
        Owners::default(),
        Deschedules::default(),
        Lifecycles::default(),
        Preservations::default(),
        TaintTables::default(),
    ))
}
