//! The log entry envelope and the closed set of commands it carries.
//!
//! A `LogEntry` is the only thing fedraft replicates. It is versioned so a newer binary can replay
//! an older log; a binary refuses entries newer than it knows (`CodecError::UnsupportedVersion`)
//! instead of guessing. Commands are either intents (a user or operator asked for something) or
//! events (an executor observed something). The state machine (`crate::state`) is the only place
//! that interprets them; this module only defines and encodes them.

mod fast;
mod version;

pub use fast::EntryDecoder;
pub use version::{
    DESCHEDULE_SINCE, EXACT_REPORTS_SINCE, FAILOVER_OVERDUE_SINCE, HEALTH_VANTAGE_SINCE,
    LOG_ENTRY_VERSION, LOG_STALL_SINCE, PODLESS_SINCE, SCOPED_REQUEST_IDS_SINCE,
    STEADY_SPREAD_SINCE, WIDER_DRAIN_SINCE,
};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::admission::AdmissionPolicy;
use crate::door::ResourceKey;
use crate::error::CodecError;
use crate::health::{HealthPolicy, ProbeFailure};
use crate::karmada::ClusterCondition;
use crate::model::{Capacity, ClusterSpec, Credentials, ObjectSpec, SealedCredentials, TenantSpec};
use crate::owners::ExecutorLease;
use crate::policy::{ClusterQuota, Extended, ExtendedCapacity};
use crate::rollout::deschedule::Descheduling;
use crate::rollout::failback::FailBack;
use crate::rollout::{RolloutStrategy, WorkloadObservation};
use crate::service::{DiscoverySpec, EndpointsReport};
use crate::users::{TokenIssue, UserSpec};

/// One replicated log entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    /// Envelope format version (`LOG_ENTRY_VERSION` when written by this binary).
    pub version: u16,
    /// Client-chosen id used to recognise retries; empty means "do not deduplicate".
    pub request_id: String,
    /// Authenticated principal (user, operator or executor node) that proposed the entry.
    pub actor: String,
    /// Leader wall clock when proposed, milliseconds since the Unix epoch. The state machine
    /// never lets log time go backwards, whatever this says.
    pub timestamp_ms: u64,
    pub command: Command,
}

impl LogEntry {
    /// An entry in the current format.
    pub fn new(
        request_id: impl Into<String>,
        actor: impl Into<String>,
        timestamp_ms: u64,
        command: Command,
    ) -> Self {
        Self {
            version: LOG_ENTRY_VERSION,
            request_id: request_id.into(),
            actor: actor.into(),
            timestamp_ms,
            command,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        // Encoding plain owned data into a Vec cannot fail: no I/O, no size limit, and every type
        // here is bincode-encodable by construction (see `crate::model`).
        bincode::serde::encode_to_vec(self, bincode::config::standard())
            .unwrap_or_else(|e| unreachable!("log entry encoding failed: {e}"))
    }

    /// Decodes one entry. Many in a row: [`EntryDecoder`], which reuses allocations.
    pub fn decode(bytes: &[u8]) -> Result<LogEntry, CodecError> {
        let mut entry = LogEntry::new(String::new(), String::new(), 0, Command::Tick);
        if fast::decode_into(&mut entry, &mut Default::default(), bytes) {
            return Ok(entry);
        }
        Self::decode_serde(bytes)
    }

    /// The reference decoder: every layout, every error.
    fn decode_serde(bytes: &[u8]) -> Result<LogEntry, CodecError> {
        // Read the version alone first: a newer layout may not decode as this one at all.
        let (version, _): (u16, usize) =
            bincode::decode_from_slice(bytes, bincode::config::standard())
                .map_err(|e| CodecError::Decode(e.to_string()))?;
        if version > LOG_ENTRY_VERSION {
            return Err(CodecError::UnsupportedVersion {
                found: version,
                supported: LOG_ENTRY_VERSION,
            });
        }
        // bincode allocates a string's claimed length before reading it; without a bound, a
        // damaged length prefix asked the allocator for exabytes and aborted the process (a
        // tampered archive must fail its decode, not kill `fedraft audit verify`). Real entries
        // are far below the bound: the API and the peer transport refuse bodies of a few MiB.
        let config = bincode::config::standard().with_limit::<ENTRY_DECODE_LIMIT>();
        let (entry, read): (LogEntry, usize) = bincode::serde::decode_from_slice(bytes, config)
            .map_err(|e| CodecError::Decode(e.to_string()))?;
        if read != bytes.len() {
            return Err(CodecError::TrailingBytes {
                trailing: bytes.len() - read,
            });
        }
        Ok(entry)
    }
}

/// Most bytes one entry's strings and byte strings may claim when decoded.
const ENTRY_DECODE_LIMIT: usize = 1 << 30;

/// Decodes a whole bincode (serde, standard config) value, refusing trailing bytes.
pub(crate) fn decode_exact<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    let (value, read): (T, usize) =
        bincode::serde::decode_from_slice(bytes, bincode::config::standard())
            .map_err(|e| CodecError::Decode(e.to_string()))?;
    if read != bytes.len() {
        return Err(CodecError::TrailingBytes {
            trailing: bytes.len() - read,
        });
    }
    Ok(value)
}

/// Everything the state machine can be asked to do. Closed on purpose: a new command is a new
/// variant, a new `on_*` function, and a new envelope version if old binaries must refuse it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    // ---- intents: clusters ----
    /// Add a member cluster (AlreadyExists if the name is taken). It starts Unknown.
    RegisterCluster(ClusterSpec),
    /// Replace a cluster's spec; cordon/drain flags and status are kept.
    UpdateCluster {
        spec: ClusterSpec,
        expected_version: Option<u64>,
    },
    /// Remove a cluster; its objects are rescheduled elsewhere.
    DeregisterCluster {
        name: String,
        expected_version: Option<u64>,
    },
    /// No new replicas on this cluster; existing ones stay.
    Cordon { name: String },
    /// Undo a cordon or a drain.
    Uncordon { name: String },
    /// Cordon plus the NoExecute taint `fedraft.io/drain`: every replica leaves the cluster.
    Drain { name: String },

    // ---- intents: objects ----
    /// Create or replace a federated object. `expected_version`: `Some(0)` = must not exist,
    /// `Some(v)` = must exist at resource version `v`, `None` = unconditional.
    PutObject {
        namespace: String,
        name: String,
        spec: ObjectSpec,
        expected_version: Option<u64>,
    },
    DeleteObject {
        namespace: String,
        name: String,
        expected_version: Option<u64>,
    },
    /// Forget the object's placement and schedule it from scratch (a forced rebalance).
    RevokePlacement { namespace: String, name: String },

    // ---- intents: tenants ----
    /// Create or replace a tenant.
    PutTenant(TenantSpec),
    /// Remove a tenant; refused while its namespaces still hold objects.
    DeleteTenant {
        name: String,
        expected_version: Option<u64>,
    },

    // ---- events from executors ----
    /// A batch of heartbeats (with capacity when a scan ran) from one executor.
    Heartbeats(Vec<Heartbeat>),
    /// An executor could not reach the cluster. A hint only: it never shortcuts the failure
    /// threshold, it just does not count as a heartbeat and breaks a recovery run.
    ClusterUnreachable { cluster: String },
    /// A batch of per-cluster object status observations.
    StatusReports(Vec<ObjectStatusReport>),
    /// Log time advances (expiring health deadlines, firing failovers, draining queued work).
    Tick,

    // ---- appended later: new variants go at the end so older entries keep their encoding ----
    /// `PutObject` of a v1 Service that also sets its discovery section
    /// (`state/handlers/services.rs`).
    PutObjectWithDiscovery {
        namespace: String,
        name: String,
        spec: ObjectSpec,
        discovery: DiscoverySpec,
        expected_version: Option<u64>,
    },
    /// A batch of Service endpoint observations, sent only when they changed.
    ServiceEndpoints(Vec<EndpointsReport>),
    /// Credentials key rotation: clusters' credentials re-wrapped under the newest key, all or
    /// none (`state/handlers/credentials.rs`).
    RewrapCredentials(Vec<CredentialsRewrap>),
    /// Replace the admission policy (admins only; `crate::admission`).
    SetAdmissionPolicy(AdmissionPolicy),
    /// Create or replace an object through the Kubernetes-compatible door: a resource template,
    /// or a `policy.karmada.io` policy. The manifest is JSON text; core reads its identity.
    PutResource {
        manifest: String,
        expected_version: Option<u64>,
    },
    /// Delete an object written through the door.
    DeleteResource {
        key: ResourceKey,
        expected_version: Option<u64>,
    },
    /// Create or replace a user of the replicated user database (admins only; `crate::users`).
    /// `expected_version`: `Some(0)` = must not exist, `Some(v)` = must be at version `v`.
    PutUser {
        spec: UserSpec,
        expected_version: Option<u64>,
    },
    /// Remove a user and every token it holds (admins only).
    DeleteUser {
        name: String,
        expected_version: Option<u64>,
    },
    /// Record a new API token of a user: its id and the SHA-256 of its text, never the secret.
    IssueToken(TokenIssue),
    /// Revoke a user's token: it stops authenticating on each node as that node applies this.
    RevokeToken { user: String, id: String },
    /// `PutObject` that also sets the object's rollout strategy (`crate::rollout`); a plain put
    /// keeps the strategy an object already has.
    PutObjectWithRollout {
        namespace: String,
        name: String,
        spec: ObjectSpec,
        rollout: RolloutStrategy,
        expected_version: Option<u64>,
    },
    /// A user's move on an object's rollout: pause, resume, abort, undo, promote.
    Rollout {
        namespace: String,
        name: String,
        action: RolloutAction,
    },
    /// A batch of workload status observations (revision, generations, replica counts,
    /// conditions), sent only when they changed.
    WorkloadReports(Vec<WorkloadReport>),
    /// A batch of detailed capacity scans: extended resources and node shapes
    /// (`state/handlers/extended.rs`; version 7).
    CapacityDetails(Vec<CapacityDetail>),
    /// `PutTenant` with quotas on extended resources such as `nvidia.com/gpu` (version 7).
    PutTenantWithExtended { spec: TenantSpec, quota: Extended },
    /// A `cluster.karmada.io` Cluster or a `core.kubefed.io` KubeFedCluster written through the
    /// door (`state/handlers/members.rs`): the document (JSON text), and the credentials the
    /// API edge sealed for the cluster from the Secret the document names (None while that
    /// Secret is absent: the document waits for it).
    PutMemberCluster {
        manifest: String,
        binding: Option<MemberBinding>,
        expected_version: Option<u64>,
    },
    /// A member's credentials Secret written through the door: the Secret without its data
    /// (JSON text), the credentials the edge read from the data and sealed, and the same
    /// credentials sealed for every cluster document that names the Secret.
    PutMemberSecret {
        manifest: String,
        credentials: Credentials,
        bindings: Vec<MemberBinding>,
        expected_version: Option<u64>,
    },
    /// What one vantage point (the entry's actor: a node's executors or prober) sees of member
    /// clusters: only changes, and an empty batch to renew its lease (`crate::health`). A
    /// failure from the owner also breaks a recovery run, as `ClusterUnreachable` does.
    Reachability(Vec<ReachabilityReport>),
    /// Replace the health policy (the failover brake's settings); admins only.
    SetHealthPolicy(HealthPolicy),
    /// `PutTenantWithExtended` plus quotas per cluster (`state/handlers/cluster_quota.rs`;
    /// version 9): what the tenant may use on each named member, on top of its whole quota.
    PutTenantWithQuotas {
        spec: TenantSpec,
        quota: Extended,
        per_cluster: BTreeMap<String, ClusterQuota>,
    },
    /// `PutObject` (or `PutObjectWithRollout` with `rollout`) that also sets the object's
    /// fail-back choice (`state/handlers/failback.rs`; version 9); a plain put keeps the choice
    /// an object already has.
    PutObjectWithFailBack {
        namespace: String,
        name: String,
        spec: ObjectSpec,
        rollout: Option<RolloutStrategy>,
        failback: FailBack,
        expected_version: Option<u64>,
    },
    /// A node's executors renew their ownership lease (the actor is the node's executor
    /// actor); `crate::owners`.
    ExecutorLease(ExecutorLease),
    /// `StatusReports`, each naming the applied index of the state the executor converged the
    /// member against (version 11, `state/handlers/reports.rs`): a report counts only from the
    /// cluster's current owner and only if the object has not changed since.
    StatusReportsAt(Vec<StatusReportAt>),
    /// A put that also sets the object's descheduling policy
    /// (`state/handlers/deschedule.rs`; version 11), with the rollout strategy and fail-back
    /// choice the put may carry too; a plain put keeps the policy an object has.
    PutObjectWithDescheduling {
        namespace: String,
        name: String,
        spec: ObjectSpec,
        rollout: Option<RolloutStrategy>,
        failback: Option<FailBack>,
        descheduling: Descheduling,
        expected_version: Option<u64>,
    },
    /// The values the statePreservation paths of objects' propagation policies name in their
    /// live status on members (version 14, `state/handlers/preserve.rs`), sent only when they
    /// changed.
    StatusValues(Vec<StatusValuesReport>),
    /// The conditions a status write of a member's Karmada `Cluster` gives it (all of them but
    /// `Ready`, which fedraft derives), which `ClusterTaintPolicy` documents read (version 14,
    /// `state/handlers/taint_policy.rs`).
    ClusterConditions {
        cluster: String,
        conditions: Vec<ClusterCondition>,
    },
}

/// What the statePreservation paths of one object name in its live status on one cluster:
/// each path's canonical text (`karmada::jsonpath`) and the label value it gives; a path that
/// names nothing usable is absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusValuesReport {
    pub namespace: String,
    pub name: String,
    pub cluster: String,
    pub values: BTreeMap<String, String>,
}

/// What a user may do to a rollout (`crate::rollout::gate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RolloutAction {
    /// Stop at the current wave.
    Pause,
    /// Continue a paused rollout at its wave, with a fresh deadline and failure budget.
    Resume,
    /// Stop for good where it is.
    Abort,
    /// Roll the updated clusters back to the previous revision.
    Undo,
    /// Skip the remaining gates: every cluster gets the target now.
    Promote,
}

impl RolloutAction {
    pub fn as_str(self) -> &'static str {
        match self {
            RolloutAction::Pause => "pause",
            RolloutAction::Resume => "resume",
            RolloutAction::Abort => "abort",
            RolloutAction::Undo => "undo",
            RolloutAction::Promote => "promote",
        }
    }
}

/// What an executor read of one object's live status on one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadReport {
    pub namespace: String,
    pub name: String,
    pub cluster: String,
    pub observed: WorkloadObservation,
}

impl Command {
    /// Short name for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Command::RegisterCluster(_) => "RegisterCluster",
            Command::UpdateCluster { .. } => "UpdateCluster",
            Command::DeregisterCluster { .. } => "DeregisterCluster",
            Command::Cordon { .. } => "Cordon",
            Command::Uncordon { .. } => "Uncordon",
            Command::Drain { .. } => "Drain",
            Command::PutObject { .. } => "PutObject",
            Command::DeleteObject { .. } => "DeleteObject",
            Command::RevokePlacement { .. } => "RevokePlacement",
            Command::PutTenant(_) => "PutTenant",
            Command::DeleteTenant { .. } => "DeleteTenant",
            Command::Heartbeats(_) => "Heartbeats",
            Command::ClusterUnreachable { .. } => "ClusterUnreachable",
            Command::StatusReports(_) => "StatusReports",
            Command::Tick => "Tick",
            Command::PutObjectWithDiscovery { .. } => "PutObjectWithDiscovery",
            Command::ServiceEndpoints(_) => "ServiceEndpoints",
            Command::RewrapCredentials(_) => "RewrapCredentials",
            Command::SetAdmissionPolicy(_) => "SetAdmissionPolicy",
            Command::PutResource { .. } => "PutResource",
            Command::DeleteResource { .. } => "DeleteResource",
            Command::PutUser { .. } => "PutUser",
            Command::DeleteUser { .. } => "DeleteUser",
            Command::IssueToken(_) => "IssueToken",
            Command::RevokeToken { .. } => "RevokeToken",
            Command::PutObjectWithRollout { .. } => "PutObjectWithRollout",
            Command::Rollout { .. } => "Rollout",
            Command::WorkloadReports(_) => "WorkloadReports",
            Command::CapacityDetails(_) => "CapacityDetails",
            Command::PutTenantWithExtended { .. } => "PutTenantWithExtended",
            Command::PutMemberCluster { .. } => "PutMemberCluster",
            Command::PutMemberSecret { .. } => "PutMemberSecret",
            Command::Reachability(_) => "Reachability",
            Command::SetHealthPolicy(_) => "SetHealthPolicy",
            Command::PutTenantWithQuotas { .. } => "PutTenantWithQuotas",
            Command::PutObjectWithFailBack { .. } => "PutObjectWithFailBack",
            Command::ExecutorLease(_) => "ExecutorLease",
            Command::StatusReportsAt(_) => "StatusReportsAt",
            Command::PutObjectWithDescheduling { .. } => "PutObjectWithDescheduling",
            Command::StatusValues(_) => "StatusValues",
            Command::ClusterConditions { .. } => "ClusterConditions",
        }
    }
}

/// One cluster answered a health probe; `capacity` is present when a capacity scan ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub cluster: String,
    pub capacity: Option<Capacity>,
}

/// One cluster's detailed capacity scan (sent with a heartbeat's capacity when it changed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapacityDetail {
    pub cluster: String,
    pub capacity: ExtendedCapacity,
}

/// One vantage point's view of one cluster: it answers (`failure: None`) or why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReachabilityReport {
    pub cluster: String,
    pub failure: Option<ProbeFailure>,
}

/// One cluster's credentials as a rotation re-sealed them. Applied only if the cluster still
/// holds what the rotation read: the same sealed payload (rotation changes only the wrapping),
/// or, for credentials that were stored in the clear, the same resource version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialsRewrap {
    pub cluster: String,
    /// The cluster's resource version when the rotation read it.
    pub expected_version: u64,
    pub credentials: SealedCredentials,
}

/// A member cluster's credentials as the edge sealed them for it (bound to its name) from the
/// other side of the join it read: applied only if that side is still at `read_version` (the
/// Secret's resource version in `PutMemberCluster`, the cluster document's in
/// `PutMemberSecret`); otherwise the write is refused as a conflict and the edge reads again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberBinding {
    pub cluster: String,
    pub read_version: u64,
    pub credentials: Credentials,
}

/// What an executor saw of one object on one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectStatusReport {
    pub namespace: String,
    pub name: String,
    pub cluster: String,
    pub applied: bool,
    pub ready_replicas: u32,
    pub message: Option<String>,
}

/// A status report and the applied index of the state its executor's pass read: the member
/// held what that state asked of it (applied), or failed to take it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusReportAt {
    pub report: ObjectStatusReport,
    pub as_of: u64,
}

impl AsRef<ObjectStatusReport> for ObjectStatusReport {
    fn as_ref(&self) -> &ObjectStatusReport {
        self
    }
}

impl AsRef<ObjectStatusReport> for StatusReportAt {
    fn as_ref(&self) -> &ObjectStatusReport {
        &self.report
    }
}

#[cfg(test)]
mod tests;
