//! The layouts of the snapshot versions before the current one, as they were written, and
//! how their parts that changed since convert to today's.
//!
//! Must not: change a layout once released (a snapshot of that version would no longer read).

use serde::Deserialize;

use crate::admission::AdmissionPolicy;
use crate::door::DoorTables;
use crate::health::HealthBook;
use crate::owners::Owners;
use crate::state::handlers::deschedule::Deschedules;
use crate::state::handlers::extended::ExtendedTables;
use crate::state::handlers::failback::FailBacks;
use crate::state::handlers::lifecycle::Lifecycles;
use crate::state::handlers::preserve::Preservations;
use crate::state::handlers::rollout::Rollouts;
use crate::state::handlers::services::Services;
use crate::state::handlers::taint_policy::TaintTables;
use crate::state::Data;
use crate::users::Users;

/// Version 1 snapshots: no service discovery yet.
#[derive(Deserialize)]
pub(super) struct SnapshotOwnedV1 {
    pub(super) _version: u16,
    pub(super) applied_index: u64,
    pub(super) data: Data,
}

/// Version 11 snapshots: the health book without the log stall.
#[derive(Deserialize)]
pub(super) struct SnapshotOwnedV11 {
    pub(super) _version: u16,
    pub(super) applied_index: u64,
    pub(super) data: Data,
    pub(super) services: Services,
    pub(super) admission: AdmissionPolicy,
    pub(super) door: DoorTables,
    pub(super) users: Users,
    pub(super) rollouts: Rollouts,
    pub(super) ext: ExtendedTables,
    pub(super) health: HealthBookV11,
    pub(super) failbacks: FailBacks,
    pub(super) owners: Owners,
    pub(super) deschedules: Deschedules,
    pub(super) life: Lifecycles,
    pub(super) pres: Preservations,
    pub(super) taints: TaintTables,
}

/// `HealthBook` as versions 8 to 11 wrote it: no log stall.
#[derive(Deserialize)]
pub(super) struct HealthBookV11 {
    pub(super) policy: crate::health::HealthPolicy,
    pub(super) owner: String,
    pub(super) vantages: std::collections::BTreeMap<String, u64>,
    pub(super) reach: std::collections::BTreeMap<
        String,
        std::collections::BTreeMap<String, crate::health::Reach>,
    >,
    pub(super) links: std::collections::BTreeMap<String, u64>,
    pub(super) brake: crate::health::Brake,
}

impl From<HealthBookV11> for HealthBook {
    fn from(v: HealthBookV11) -> Self {
        HealthBook {
            policy: v.policy,
            owner: v.owner,
            vantages: v.vantages,
            reach: v.reach,
            links: v.links,
            brake: v.brake,
            stall: None,
        }
    }
}

/// Version 10 snapshots: no statePreservation or taint tables yet.
#[derive(Deserialize)]
pub(super) struct SnapshotOwnedV10 {
    pub(super) _version: u16,
    pub(super) applied_index: u64,
    pub(super) data: Data,
    pub(super) services: Services,
    pub(super) admission: AdmissionPolicy,
    pub(super) door: DoorTables,
    pub(super) users: Users,
    pub(super) rollouts: Rollouts,
    pub(super) ext: ExtendedTables,
    pub(super) health: HealthBookV11,
    pub(super) failbacks: FailBacks,
    pub(super) owners: Owners,
    pub(super) deschedules: Deschedules,
    pub(super) life: Lifecycles,
}

/// Version 9 snapshots: no lifecycle tables yet.
#[derive(Deserialize)]
pub(super) struct SnapshotOwnedV9 {
    pub(super) _version: u16,
    pub(super) applied_index: u64,
    pub(super) data: Data,
    pub(super) services: Services,
    pub(super) admission: AdmissionPolicy,
    pub(super) door: DoorTables,
    pub(super) users: Users,
    pub(super) rollouts: Rollouts,
    pub(super) ext: ExtendedTables,
    pub(super) health: HealthBookV11,
    pub(super) failbacks: FailBacks,
    pub(super) owners: Owners,
    pub(super) deschedules: Deschedules,
}

/// Version 8 snapshots: no descheduler tables yet.
#[derive(Deserialize)]
pub(super) struct SnapshotOwnedV8 {
    pub(super) _version: u16,
    pub(super) applied_index: u64,
    pub(super) data: Data,
    pub(super) services: Services,
    pub(super) admission: AdmissionPolicy,
    pub(super) door: DoorTables,
    pub(super) users: Users,
    pub(super) rollouts: Rollouts,
    pub(super) ext: ExtendedTables,
    pub(super) health: HealthBookV11,
    pub(super) failbacks: FailBacks,
    pub(super) owners: Owners,
}

/// Version 7 snapshots: no health book or fail-back tables, and extended-resource tables without
/// per-cluster quotas.
#[derive(Deserialize)]
pub(super) struct SnapshotOwnedV7 {
    pub(super) _version: u16,
    pub(super) applied_index: u64,
    pub(super) data: Data,
    pub(super) services: Services,
    pub(super) admission: AdmissionPolicy,
    pub(super) door: DoorTables,
    pub(super) users: Users,
    pub(super) rollouts: Rollouts,
    pub(super) ext: ExtendedTablesV7,
}

/// `ExtendedTables` as version 7 wrote them.
#[derive(Deserialize)]
pub(super) struct ExtendedTablesV7 {
    pub(super) clusters: std::collections::BTreeMap<String, crate::policy::ExtendedCapacity>,
    pub(super) objects:
        std::collections::BTreeMap<crate::model::ObjectKey, crate::policy::Extended>,
    pub(super) tenants: std::collections::BTreeMap<String, crate::policy::Extended>,
    pub(super) waiting: std::collections::BTreeMap<crate::model::ObjectKey, u64>,
    pub(super) priorities: std::collections::BTreeMap<crate::model::ObjectKey, i64>,
}

impl From<ExtendedTablesV7> for ExtendedTables {
    fn from(v: ExtendedTablesV7) -> Self {
        ExtendedTables {
            clusters: v.clusters,
            objects: v.objects,
            tenants: v.tenants,
            waiting: v.waiting,
            priorities: v.priorities,
            per_cluster: Default::default(),
        }
    }
}

/// Version 6 snapshots: no extended-resource tables yet.
#[derive(Deserialize)]
pub(super) struct SnapshotOwnedV6 {
    pub(super) _version: u16,
    pub(super) applied_index: u64,
    pub(super) data: Data,
    pub(super) services: Services,
    pub(super) admission: AdmissionPolicy,
    pub(super) door: DoorTables,
    pub(super) users: Users,
    pub(super) rollouts: Rollouts,
}

/// Version 5 snapshots: no rollout tables yet.
#[derive(Deserialize)]
pub(super) struct SnapshotOwnedV5 {
    pub(super) _version: u16,
    pub(super) applied_index: u64,
    pub(super) data: Data,
    pub(super) services: Services,
    pub(super) admission: AdmissionPolicy,
    pub(super) door: DoorTables,
    pub(super) users: Users,
}

/// Version 4 snapshots: no user database yet.
#[derive(Deserialize)]
pub(super) struct SnapshotOwnedV4 {
    pub(super) _version: u16,
    pub(super) applied_index: u64,
    pub(super) data: Data,
    pub(super) services: Services,
    pub(super) admission: AdmissionPolicy,
    pub(super) door: DoorTables,
}

/// Version 3 snapshots: no door tables yet.
#[derive(Deserialize)]
pub(super) struct SnapshotOwnedV3 {
    pub(super) _version: u16,
    pub(super) applied_index: u64,
    pub(super) data: Data,
    pub(super) services: Services,
    pub(super) admission: AdmissionPolicy,
}

/// Version 2 snapshots: no admission policy yet (the default applies).
#[derive(Deserialize)]
pub(super) struct SnapshotOwnedV2 {
    pub(super) _version: u16,
    pub(super) applied_index: u64,
    pub(super) data: Data,
    pub(super) services: Services,
}
