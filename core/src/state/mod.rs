//! The deterministic state machine: applies committed log entries to fedraft's state.
//!
//! Start at [`State::apply`]: it stamps log time, answers retried request ids from the memo,
//! expires health deadlines and failover timers, dispatches the command to exactly one `on_*`
//! handler (one `match`), then re-places a bounded number of queued objects. Each handler
//! validates its command completely against the current state before it changes anything, so a
//! rejected command changes nothing; the entry still advances the applied index, its request id
//! remembers the refusal (a retry gets the same answer), and the log time it carries still
//! passes (expiries due by then happen and queued re-placements proceed: they belong to the
//! log, not to the command).
//!
//! Layout, in two folders:
//! - `handlers/`: the commands' homes, one file per group, each an `impl State` block of `on_*`
//!   functions: `clusters` (register/update/deregister/cordon/drain), `health` (heartbeats, log
//!   time, hysteresis), `objects` (put/delete/revoke), `reports` (status reports), `tenants`
//!   (quota, slices), `services` (service discovery facts), `credentials` (key rotation), `users` (the user database),
//!   `rollout` (rollout strategies, revisions, gates and workload status),
//!   `placement` (calling the scheduler, booking capacity, the reschedule queue); with what
//!   they share: `validate`
//!   (input checks) and `outcome` (what an entry's caller gets back).
//! - `store/`: the structures the state is kept in and read through, which know no command:
//!   `table` (clusters and objects by name), `sharded` and `shared_seq` (maps and sequences a
//!   checkpoint image shares instead of copying), `dedupe` (request-id memo), `index` (derived
//!   lookup structures, rebuilt on restore), `template_fast` (reading a template's fields
//!   without building a JSON tree).
//!
//! Must not: do I/O, read clocks, or let anything but the entries decide the state. Hash and
//! snapshot cover `Data`; `Index` is derived, rebuilt on restore, and `check_consistency`
//! (run by the property tests after every entry) compares the incremental one with a rebuild.

mod handlers;
#[cfg(debug_assertions)]
mod invariants;
mod snapshot;
mod store;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use handlers::desired::DesiredObject;
pub use handlers::handover::{Handover, HANDOVER_DEADLINE_MS};
pub use handlers::member_quota::{is_derived_key, TENANT_QUOTA_KEY, TENANT_QUOTA_NAME};
pub use handlers::outcome::{
    Applied, Change, ChangeKind, ChangeOp, Outcome, RejectCode, Rejection,
};
pub use handlers::placement::{reschedule_objects_per_entry, RESCHEDULE_OBJECTS_PER_ENTRY};
pub use handlers::services::ObservedEndpoints;
pub use handlers::validate;
use snapshot::encode_snapshot;
pub use snapshot::{StateImage, SNAPSHOT_VERSION};
pub use store::dedupe::{DEDUPE_MAX_ENTRIES, DEDUPE_MAX_PER_ACTOR, DEDUPE_RETENTION_MS};
pub use store::tombstones::{Tombstone, TOMBSTONES_KEPT, TOMBSTONE_BYTES};

use crate::admission::{Actor, AdmissionPolicy};
use crate::command::{Command, LogEntry};
use crate::door::{DoorTables, PolicyRef};
use crate::error::CodecError;
use crate::health::HealthBook;
use crate::karmada::PolicySpec;
use crate::model::{Cluster, FederatedObject, ObjectKey, Tenant};
use crate::owners::Owners;
use crate::policy::{Extended, EXTENDED_SINCE};
use crate::scheduler::Decision;
use crate::users::Users;
use handlers::deschedule::Deschedules;
use handlers::extended::ExtendedTables;
use handlers::failback::FailBacks;
use handlers::lifecycle::Lifecycles;
use handlers::preserve::Preservations;
use handlers::rollout::Rollouts;
use handlers::services::Services;
use handlers::taint_policy::TaintTables;
use store::dedupe::{Dedupe, Memo, Seen};
use store::index::Index;
use store::table::{Keyed, ObjectTable};

/// Most items in one heartbeat or status batch; executors split larger batches.
pub const MAX_BATCH_ITEMS: usize = 10_000;

/// Refuses an event batch longer than [`MAX_BATCH_ITEMS`], naming the batch's field.
pub(crate) fn check_batch_len(len: usize, field: &str) -> Result<(), Rejection> {
    if len > MAX_BATCH_ITEMS {
        return Err(Rejection::from(crate::error::FieldError::new(
            field,
            format!("{len} items exceed the batch limit of {MAX_BATCH_ITEMS}"),
        )));
    }
    Ok(())
}

/// The replicated part of the state: everything the snapshot carries and the hash covers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Data {
    /// Never decreases: max of every accepted entry's timestamp.
    pub log_time_ms: u64,
    pub clusters: Keyed<Cluster>,
    /// namespace -> name -> object (see `table` for why it is not a plain B-tree).
    pub objects: ObjectTable,
    pub tenants: BTreeMap<String, Tenant>,
    pub dedupe: Dedupe,
    /// (log time at which to re-place, object): failover after a cluster's grace period.
    /// Persistent, like the queue below: after a cluster fails both hold an entry per object
    /// it ran, and a checkpoint image (`State::image`) shares them instead of copying them.
    #[serde(
        serialize_with = "store::shared_seq::serialize",
        deserialize_with = "store::shared_seq::from_btree_set"
    )]
    pub failover_timers: imbl::OrdSet<(u64, ObjectKey)>,
    /// Objects waiting to be re-placed, oldest first; drained at a bounded rate per entry.
    #[serde(
        serialize_with = "store::shared_seq::serialize",
        deserialize_with = "store::shared_seq::from_vec_deque"
    )]
    pub pending: imbl::Vector<ObjectKey>,
}

/// What one `apply` accumulates for its caller.
pub(crate) struct Ctx<'e> {
    pub index: u64,
    /// The entry's envelope version: what its commands may mean (`LOG_ENTRY_VERSION`).
    pub version: u16,
    /// The entry's actor, as far as rights go (`admission::Actor`).
    pub actor: Actor,
    /// The entry's actor as written (the user database resolves `user:NAME` by it), borrowed
    /// from the entry: most commands never read it.
    pub actor_id: &'e str,
    pub now_ms: u64,
    pub changes: Vec<Change>,
    pub decisions: Vec<(ObjectKey, Decision)>,
    /// The door template being put, while its put decides its placement before the template's
    /// record is stored (`handlers/workload_affinity.rs`); None outside such a put.
    pub door_subject: Option<handlers::workload_affinity::Subject>,
}

impl Ctx<'_> {
    pub fn change(&mut self, kind: ChangeKind, key: impl Into<String>, op: ChangeOp) {
        self.changes.push(Change {
            kind,
            key: key.into(),
            op,
        });
    }
}

/// Result of a command handler: the target's resource version (None for events) or a refusal.
pub(crate) type HandlerResult = Result<Option<u64>, Rejection>;

/// fedraft's whole replicated state plus derived indexes.
#[derive(Debug, Clone, Default)]
pub struct State {
    applied_index: u64,
    pub(crate) d: Data,
    pub(crate) ix: Index,
    /// Service discovery facts (`handlers/services.rs`); replicated, encoded after `d`.
    pub(crate) svc: Services,
    /// The admission policy (`handlers/admission.rs`); replicated, encoded after `svc`.
    pub(crate) adm: AdmissionPolicy,
    /// The Kubernetes-compatible door's templates and policies (`handlers/door.rs`);
    /// replicated, encoded after `adm`.
    pub(crate) door: DoorTables,
    /// The door's policies parsed (derived from `door.policies`, rebuilt on restore).
    pub(crate) door_ix: BTreeMap<PolicyRef, PolicySpec>,
    /// The user database (`handlers/users.rs`); replicated, encoded after `door`.
    pub(crate) users: Users,
    /// Rollout records and workload status (`handlers/rollout.rs`); replicated, encoded after
    /// `users`.
    pub(crate) rollouts: Rollouts,
    /// Extended resources: detailed capacity, objects' requests, tenants' quotas
    /// (`handlers/extended.rs`); replicated, encoded after `users`.
    pub(crate) ext: ExtendedTables,
    /// Vantage points' views and the failover brake (`crate::health`); replicated, encoded
    /// after `ext`.
    pub(crate) health: HealthBook,
    /// Fail-back choices, where objects failed over from and their timers
    /// (`handlers/failback.rs`); replicated, encoded after `health`.
    pub(crate) failbacks: FailBacks,
    /// Executor leases and cluster owners (`crate::owners`); replicated, encoded after
    /// `failbacks`.
    pub(crate) owners: Owners,
    /// Descheduling policies, replicas stuck Pending, their timers and the clusters held to
    /// an estimate (`handlers/deschedule.rs`); replicated, encoded after `owners`.
    pub(crate) deschedules: Deschedules,
    /// What bound Karmada policies' suspension, preserveResourcesOnDeletion and application
    /// failover keep per object (`handlers/lifecycle.rs`); replicated, encoded after
    /// `deschedules`.
    pub(crate) life: Lifecycles,
    /// What statePreservation rules keep: reported values and what failovers carried
    /// (`handlers/preserve.rs`); replicated, encoded after `life`.
    pub(crate) pres: Preservations,
    /// Cluster conditions and the taints `ClusterTaintPolicy` documents added
    /// (`handlers/taint_policy.rs`); replicated, encoded after `life`.
    pub(crate) taints: TaintTables,
    /// The latest deleted objects as they were, for watch events; local, never encoded.
    pub(crate) gone: store::tombstones::Tombstones,
}

impl State {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies the committed entry at `index`. Never fails: a refused command is an outcome.
    /// Indexes at or below the applied index are answered with a refusal and change nothing
    /// (a caller re-delivering an entry must not apply it twice).
    pub fn apply(&mut self, index: u64, entry: &LogEntry) -> Applied {
        if index <= self.applied_index {
            let rejection = Rejection::new(
                RejectCode::FailedPrecondition,
                None,
                format!(
                    "entry {index} is not after the applied index {}",
                    self.applied_index
                ),
            );
            return Applied {
                index,
                outcome: Outcome::Rejected(rejection),
                changes: Vec::new(),
                decisions: Vec::new(),
                duplicate_of: None,
            };
        }
        self.applied_index = index;
        let was_ms = self.d.log_time_ms;
        // Clamped: an old log may carry a stamp below its predecessor's, and replays it as then.
        let now_ms = was_ms.max(entry.timestamp_ms);
        // Request ids are scoped by actor and command from envelope version 2 on; a version-1
        // entry keeps the one scope all ids shared when it was written, so it replays as it
        // applied then.
        let unscoped = entry.version < crate::command::SCOPED_REQUEST_IDS_SINCE;
        let (scope, fingerprint) = if entry.request_id.is_empty() || unscoped {
            ("", 0)
        } else {
            (
                entry.actor.as_str(),
                store::dedupe::fingerprint(&entry.command),
            )
        };
        match self
            .d
            .dedupe
            .lookup(scope, &entry.request_id, fingerprint, now_ms)
        {
            Seen::New => {}
            Seen::Retry(memo) => {
                return Applied {
                    index,
                    outcome: memo.outcome.clone(),
                    changes: Vec::new(),
                    decisions: Vec::new(),
                    duplicate_of: Some(memo.index),
                }
            }
            // Answering with the first command's outcome would drop this one silently.
            Seen::Reused(memo) => {
                let rejection = Rejection::new(
                    RejectCode::FailedPrecondition,
                    None,
                    format!(
                        "request id {:?} was already used by {} for a different request (entry {})",
                        entry.request_id, entry.actor, memo.index
                    ),
                );
                return Applied {
                    index,
                    outcome: Outcome::Rejected(rejection),
                    changes: Vec::new(),
                    decisions: Vec::new(),
                    duplicate_of: None,
                };
            }
        }
        let mut ctx = Ctx {
            index,
            version: entry.version,
            actor: Actor::of_entry(entry.version, &entry.actor),
            actor_id: &entry.actor,
            now_ms,
            changes: Vec::new(),
            decisions: Vec::new(),
            door_subject: None,
        };
        // Time passes whatever the command turns out to be: log time belongs to the log.
        self.advance_time(&mut ctx);
        let result = self.dispatch(&entry.command, &mut ctx);
        if result.is_ok() {
            self.services_follow(&entry.command);
        }
        self.drain_pending(&mut ctx);
        let outcome = match result {
            Ok(resource_version) => Outcome::Accepted { resource_version },
            Err(rejection) => Outcome::Rejected(rejection),
        };
        self.d.dedupe.remember(
            scope,
            &entry.request_id,
            fingerprint,
            Memo {
                index,
                time_ms: now_ms,
                outcome: outcome.clone(),
            },
        );
        // Whatever the handlers did, log time is the clamped stamp and did not go back.
        debug_assert!(
            self.d.log_time_ms == now_ms && now_ms >= was_ms,
            "log time {was_ms} -> {} at entry {index}",
            self.d.log_time_ms
        );
        #[cfg(debug_assertions)]
        self.assert_invariants(index, &ctx.decisions);
        Applied {
            index,
            outcome,
            changes: ctx.changes,
            decisions: ctx.decisions,
            duplicate_of: None,
        }
    }

    /// The one place every command is routed; each arm hands off to its handler.
    fn dispatch(&mut self, command: &Command, ctx: &mut Ctx) -> HandlerResult {
        match command {
            Command::RegisterCluster(spec) => self.on_register_cluster(spec, ctx),
            Command::UpdateCluster {
                spec,
                expected_version,
            } => self.on_update_cluster(spec, *expected_version, ctx),
            Command::DeregisterCluster {
                name,
                expected_version,
            } => self.on_deregister_cluster(name, *expected_version, ctx),
            Command::Cordon { name } => self.on_cordon(name, ctx),
            Command::Uncordon { name } => self.on_uncordon(name, ctx),
            Command::Drain { name } => self.on_drain(name, ctx),
            Command::PutObject {
                namespace,
                name,
                spec,
                expected_version,
            } => self.on_put_object(namespace, name, spec, *expected_version, ctx),
            Command::DeleteObject {
                namespace,
                name,
                expected_version,
            } => self.on_delete_object(namespace, name, *expected_version, ctx),
            Command::RevokePlacement { namespace, name } => {
                self.on_revoke_placement(namespace, name, ctx)
            }
            // Since extended quotas exist, a plain put replaces them too (with none).
            Command::PutTenant(spec) if ctx.version >= EXTENDED_SINCE => {
                self.on_put_tenant_extended(spec, &Extended::new(), ctx)
            }
            Command::PutTenant(spec) => self.on_put_tenant(spec, ctx),
            Command::DeleteTenant {
                name,
                expected_version,
            } => self.on_delete_tenant(name, *expected_version, ctx),
            Command::Heartbeats(batch) => self.on_heartbeats(batch, ctx),
            Command::ClusterUnreachable { cluster } => self.on_cluster_unreachable(cluster, ctx),
            Command::StatusReports(batch) => self.on_status_reports(batch, ctx),
            Command::StatusReportsAt(batch) => self.on_status_reports_at(batch, ctx),
            Command::Tick => Ok(None),
            Command::PutObjectWithDiscovery {
                namespace,
                name,
                spec,
                discovery,
                expected_version,
            } => self.on_put_object_with_discovery(
                namespace,
                name,
                spec,
                discovery,
                *expected_version,
                ctx,
            ),
            Command::ServiceEndpoints(batch) => self.on_service_endpoints(batch, ctx),
            Command::RewrapCredentials(batch) => self.on_rewrap_credentials(batch, ctx),
            Command::SetAdmissionPolicy(policy) => self.on_set_admission_policy(policy, ctx),
            Command::PutResource {
                manifest,
                expected_version,
            } => self.on_put_resource(manifest, *expected_version, ctx),
            Command::DeleteResource {
                key,
                expected_version,
            } => self.on_delete_resource(key, *expected_version, ctx),
            Command::PutUser {
                spec,
                expected_version,
            } => self.on_put_user(spec, *expected_version, ctx),
            Command::DeleteUser {
                name,
                expected_version,
            } => self.on_delete_user(name, *expected_version, ctx),
            Command::IssueToken(issue) => self.on_issue_token(issue, ctx),
            Command::RevokeToken { user, id } => self.on_revoke_token(user, id, ctx),
            Command::PutObjectWithRollout {
                namespace,
                name,
                spec,
                rollout,
                expected_version,
            } => self.on_put_object_with_rollout(
                namespace,
                name,
                spec,
                rollout,
                *expected_version,
                ctx,
            ),
            Command::Rollout {
                namespace,
                name,
                action,
            } => self.on_rollout(namespace, name, *action, ctx),
            Command::WorkloadReports(batch) => self.on_workload_reports(batch, ctx),
            Command::CapacityDetails(batch) => self.on_capacity_details(batch, ctx),
            Command::PutTenantWithExtended { spec, quota } => {
                self.on_put_tenant_extended(spec, quota, ctx)
            }
            Command::PutMemberCluster {
                manifest,
                binding,
                expected_version,
            } => self.on_put_member_cluster(manifest, binding.as_ref(), *expected_version, ctx),
            Command::PutMemberSecret {
                manifest,
                credentials,
                bindings,
                expected_version,
            } => self.on_put_member_secret(manifest, credentials, bindings, *expected_version, ctx),
            Command::Reachability(batch) => self.on_reachability(batch, ctx),
            Command::SetHealthPolicy(policy) => self.on_set_health_policy(policy, ctx),
            Command::PutTenantWithQuotas {
                spec,
                quota,
                per_cluster,
            } => self.on_put_tenant_quotas(spec, quota, per_cluster, ctx),
            Command::PutObjectWithFailBack {
                namespace,
                name,
                spec,
                rollout,
                failback,
                expected_version,
            } => self.on_put_object_with_failback(
                namespace,
                name,
                spec,
                rollout.as_ref(),
                *failback,
                *expected_version,
                ctx,
            ),
            Command::ExecutorLease(lease) => self.on_executor_lease(lease, ctx),
            Command::PutObjectWithDescheduling {
                namespace,
                name,
                spec,
                rollout,
                failback,
                descheduling,
                expected_version,
            } => self.on_put_object_with_descheduling(
                namespace,
                name,
                spec,
                rollout.as_ref(),
                *failback,
                *descheduling,
                *expected_version,
                ctx,
            ),
            Command::StatusValues(batch) => self.on_status_values(batch, ctx),
            Command::ClusterConditions {
                cluster,
                conditions,
            } => self.on_cluster_conditions(cluster, conditions, ctx),
        }
    }

    // ---- snapshot and hash ----

    /// The whole replicated state, bincode-encoded (derived indexes are rebuilt on restore).
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

    /// A frozen copy of the replicated state, to encode elsewhere while this one moves on.
    ///
    /// Much cheaper than a clone of the whole state: the derived indexes are left out, what
    /// grows with the objects (their tables, the request-id memo, failover timers and the
    /// re-placement queue) shares its shards and nodes with the copy, and objects are shared,
    /// not copied. A change made while the image lives copies the one shard or path it touches
    /// (and the object it changes, see `store::table::Slot`). What is copied is the clusters and
    /// tenants: about 3 ms at 10^3 clusters, whatever the number of objects.
    pub fn image(&self) -> StateImage {
        StateImage {
            applied_index: self.applied_index,
            d: self.d.clone(),
            svc: self.svc.clone(),
            adm: self.adm.clone(),
            door: self.door.clone(),
            users: self.users.clone(),
            rollouts: self.rollouts.clone(),
            ext: self.ext.clone(),
            health: self.health.clone(),
            failbacks: self.failbacks.clone(),
            owners: self.owners.clone(),
            deschedules: self.deschedules.clone(),
            life: self.life.clone(),
            pres: self.pres.clone(),
            taints: self.taints.clone(),
            ix: None,
        }
    }

    /// [`State::image`] with a copy of the indexes' aggregates (per cluster and namespace), so
    /// that the image can be checked elsewhere ([`StateImage::check_consistency`]).
    pub fn checked_image(&self) -> StateImage {
        StateImage {
            ix: Some(self.ix.aggregates()),
            ..self.image()
        }
    }

    pub fn from_snapshot(bytes: &[u8]) -> Result<State, CodecError> {
        let (
            applied_index,
            data,
            svc,
            adm,
            door,
            users,
            mut rollouts,
            ext,
            health,
            failbacks,
            owners,
            deschedules,
            life,
            pres,
            taints,
        ) = snapshot::decode(bytes)?;
        let ix = Index::rebuild(&data, health.judged_from_ms());
        rollouts.share_restored(&ix, &data.objects);
        let door_ix = handlers::door::parse_policies(&door)?;
        Ok(State {
            applied_index,
            d: data,
            ix,
            svc,
            adm,
            door,
            door_ix,
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
            gone: Default::default(),
        })
    }

    /// SHA-256 over the canonical encoding of the replicated state. The applied index is left
    /// out so a refused entry (which changes nothing else) leaves the hash alone; resource
    /// versions inside the state still tie it to the log.
    pub fn state_hash(&self) -> [u8; 32] {
        let bytes = bincode::serde::encode_to_vec(&self.d, bincode::config::standard())
            .unwrap_or_else(|e| unreachable!("state encoding failed: {e}"));
        let mut h = Sha256::new();
        h.update(&bytes);
        // Without discovery facts the hash is what it was before they existed.
        if !self.svc.is_empty() {
            let svc = bincode::serde::encode_to_vec(&self.svc, bincode::config::standard())
                .unwrap_or_else(|e| unreachable!("services encoding failed: {e}"));
            h.update(&svc);
        }
        // Likewise for the admission policy while it is the default.
        if self.adm != AdmissionPolicy::default() {
            let adm = bincode::serde::encode_to_vec(&self.adm, bincode::config::standard())
                .unwrap_or_else(|e| unreachable!("policy encoding failed: {e}"));
            h.update(&adm);
        }
        // And for the door's tables while they are empty.
        if !self.door.is_empty() {
            let door = bincode::serde::encode_to_vec(&self.door, bincode::config::standard())
                .unwrap_or_else(|e| unreachable!("door encoding failed: {e}"));
            h.update(&door);
        }
        // And for the user database while it is empty.
        if !self.users.is_empty() {
            let users = bincode::serde::encode_to_vec(&self.users, bincode::config::standard())
                .unwrap_or_else(|e| unreachable!("users encoding failed: {e}"));
            h.update(&users);
        }
        // And for the rollout tables while they are empty.
        if !self.rollouts.is_empty() {
            let r = bincode::serde::encode_to_vec(&self.rollouts, bincode::config::standard())
                .unwrap_or_else(|e| unreachable!("rollouts encoding failed: {e}"));
            h.update(&r);
        }
        // And for the extended-resource tables while they are empty.
        if !self.ext.is_empty() {
            let ext = bincode::serde::encode_to_vec(&self.ext, bincode::config::standard())
                .unwrap_or_else(|e| unreachable!("extended tables encoding failed: {e}"));
            h.update(&ext);
        }
        // And for the health book while it holds nothing a version-8 log could have made.
        if !self.health.is_trivial() {
            h.update(self.health.hash_bytes());
        }
        // And for the fail-back tables while they are empty.
        if !self.failbacks.is_empty() {
            let fb = bincode::serde::encode_to_vec(&self.failbacks, bincode::config::standard())
                .unwrap_or_else(|e| unreachable!("fail-back tables encoding failed: {e}"));
            h.update(&fb);
        }
        // And for the owners' book while it holds nothing (always, before version 9).
        if !self.owners.is_empty() {
            let owners = bincode::serde::encode_to_vec(&self.owners, bincode::config::standard())
                .unwrap_or_else(|e| unreachable!("owners encoding failed: {e}"));
            h.update(&owners);
        }
        // And for the descheduler's tables while they are empty (always, before version 11).
        if !self.deschedules.is_empty() {
            let ds = bincode::serde::encode_to_vec(&self.deschedules, bincode::config::standard())
                .unwrap_or_else(|e| unreachable!("descheduler tables encoding failed: {e}"));
            h.update(&ds);
        }
        // And for the lifecycle tables while they are empty (always, before version 12).
        if !self.life.is_empty() {
            let life = bincode::serde::encode_to_vec(&self.life, bincode::config::standard())
                .unwrap_or_else(|e| unreachable!("lifecycle tables encoding failed: {e}"));
            h.update(&life);
        }
        // And for the statePreservation tables while they are empty (always, before 14).
        if !self.pres.is_empty() {
            let pres = bincode::serde::encode_to_vec(&self.pres, bincode::config::standard())
                .unwrap_or_else(|e| unreachable!("preservation tables encoding failed: {e}"));
            h.update(&pres);
        }
        // And for the taint tables while they are empty (always, before version 14).
        if self.taints != TaintTables::default() {
            let t = bincode::serde::encode_to_vec(&self.taints, bincode::config::standard())
                .unwrap_or_else(|e| unreachable!("taint tables encoding failed: {e}"));
            h.update(&t);
        }
        h.finalize().into()
    }

    pub fn state_hash_hex(&self) -> String {
        hex::encode(self.state_hash())
    }

    // ---- read accessors ----

    pub fn applied_index(&self) -> u64 {
        self.applied_index
    }

    pub fn log_time_ms(&self) -> u64 {
        self.d.log_time_ms
    }

    pub fn clusters(&self) -> impl Iterator<Item = &Cluster> {
        self.d.clusters.values()
    }

    pub fn cluster(&self, name: &str) -> Option<&Cluster> {
        self.d.clusters.get(name)
    }

    /// Vantage points' views of the clusters, the failover brake and its policy.
    pub fn health(&self) -> &HealthBook {
        &self.health
    }

    /// Executor leases and the owner of each member cluster.
    pub fn owners(&self) -> &Owners {
        &self.owners
    }

    /// Every object, ordered by namespace then name.
    pub fn objects(&self) -> impl Iterator<Item = &FederatedObject> {
        self.d.objects.iter()
    }

    pub fn objects_in(&self, namespace: &str) -> impl Iterator<Item = &FederatedObject> {
        self.d.objects.iter_ns(namespace)
    }

    /// The objects of several namespaces (a tenant's), namespace by namespace.
    pub fn objects_in_each<'a, I>(
        &'a self,
        namespaces: I,
    ) -> impl Iterator<Item = &'a FederatedObject>
    where
        I: IntoIterator<Item = &'a String>,
        I::IntoIter: 'a,
    {
        namespaces.into_iter().flat_map(|ns| self.objects_in(ns))
    }

    pub fn object(&self, namespace: &str, name: &str) -> Option<&FederatedObject> {
        self.d.objects.get(namespace, name)
    }

    /// [`State::object`] without a copy: the state keeps this version intact for the holder
    /// (applying a change to a held object changes a copy of it).
    pub fn object_shared(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<std::sync::Arc<FederatedObject>> {
        self.d.objects.get_shared(namespace, name)
    }

    /// The object the entry at `index` deleted, as it last was, with its template's record if
    /// the door made it; None once forgotten (see `store::tombstones`). For watch events only.
    pub fn deleted_object(&self, namespace: &str, name: &str, index: u64) -> Option<Tombstone> {
        self.gone.find(index, namespace, name).cloned()
    }

    /// Every object as stored, by namespace then name, as [`State::object_shared`] gives one.
    pub fn objects_shared(&self) -> impl Iterator<Item = &std::sync::Arc<FederatedObject>> {
        self.d.objects.iter_shared()
    }

    /// The objects of one namespace as stored, by name, as [`State::object_shared`] gives one.
    pub fn objects_in_shared(
        &self,
        namespace: &str,
    ) -> impl Iterator<Item = &std::sync::Arc<FederatedObject>> {
        self.d.objects.iter_ns_shared(namespace)
    }

    pub fn object_count(&self) -> usize {
        self.d.objects.len()
    }

    pub fn tenants(&self) -> impl Iterator<Item = &Tenant> {
        self.d.tenants.values()
    }

    /// The Kubernetes-compatible door's templates and policies.
    pub fn door(&self) -> &DoorTables {
        &self.door
    }

    pub fn tenant(&self, name: &str) -> Option<&Tenant> {
        self.d.tenants.get(name)
    }

    /// The tenant owning `namespace`, if any.
    pub fn tenant_of_namespace(&self, namespace: &str) -> Option<&Tenant> {
        self.ix
            .ns_owner
            .get(namespace)
            .and_then(|t| self.d.tenants.get(t))
    }

    /// Objects waiting for a bounded-rate reschedule (failover, drain, new capacity).
    pub fn pending_reschedules(&self) -> usize {
        self.d.pending.len()
    }

    /// Request ids currently remembered for retries.
    pub fn remembered_requests(&self) -> usize {
        self.d.dedupe.len()
    }

    /// Compares the incrementally maintained indexes with a rebuild from the replicated data.
    /// For tests and debug checks: O(state).
    pub fn check_consistency(&self) -> Result<(), String> {
        self.ix
            .matches_rebuild(&Index::rebuild(&self.d, self.health.judged_from_ms()))
    }

    /// Requests booked on a cluster by fedraft's placements (replicas x per-replica requests).
    pub fn booked(&self, cluster: &str) -> Option<crate::policy::Resources> {
        self.ix.booked.get(cluster).copied()
    }
}
