//! The envelope's version history: [`LOG_ENTRY_VERSION`], what each version changed, and the
//! first version of each rule that apply gates on, so an older log replays exactly as it
//! applied when written.
//!
//! Must not: hold anything but versions; what a version means lives with the rule that checks it.

/// The envelope format this binary writes; it reads this and every older one.
///
/// Versions: 1, the first; 2, the same layout, whose object writes are admitted at apply
/// (`crate::admission`: the actor's rights, kinds, rendered identity, tenant limits) and whose
/// request ids are scoped by actor and command. A version-1 entry replays without either, exactly
/// as it applied when written. 3, the same envelope, whose placements may carry the replica mode
/// `ByKind` (what an omitted mode now means: kinds without replicas go to every selected
/// cluster) and whose commands include the door's `PutResource` and `DeleteResource`; a
/// version-2 entry always carries `Duplicated` or `Divided`, so it replays as it did, and a
/// binary that knows only version 2 declines a version-3 entry instead of misreading it. 4, the
/// same envelope, whose placements may name a cluster by `policy::CLUSTER_NAME_KEY` and whose
/// Karmada policies may use `exclude` without `clusterNames`, `spreadByField: cluster`, a
/// toleration with an empty key and operator `Equal` and the `Aggregated` division (all refused
/// before; the native API's `aggregated` division and the user database's commands are new in
/// the same version). 5, the same envelope, whose `PutResource` and `DeleteResource` may carry
/// KubeFed's documents (`crate::kubefed`: FederatedX, ReplicaSchedulingPreference), read as
/// such; in a version-4 entry such a manifest is an ordinary resource template, as it was. 6,
/// the same envelope, whose commands include the rollout commands (`PutObjectWithRollout`,
/// `Rollout`, `WorkloadReports`; `crate::rollout`), which a binary that knows only version 5
/// declines rather than misreads. 7, the same envelope, whose object puts count their templates'
/// extended resource requests (`nvidia.com/gpu`...; `policy::EXTENDED_SINCE`), whose `PutTenant`
/// clears a tenant's extended quotas, and whose commands include `CapacityDetails` and
/// `PutTenantWithExtended`; a version-6 template's extended requests counted for nothing, and
/// still do. 8, the same envelope, with the member commands `PutMemberCluster` and
/// `PutMemberSecret` (`crate::door::MEMBERS_SINCE`); in an older entry a Secret in a credentials
/// namespace or a KubeFedCluster is an ordinary resource template, as it was. 9, the same
/// envelope, whose commands include `Reachability` (a node's view of member clusters, with the
/// probe error) and `SetHealthPolicy`, whose time advances may hold a cluster Ready on a broken
/// link and engage the failover brake (`crate::health`), whose `PutResource` may carry a
/// cluster-scoped template (no namespace; kept in `door::CLUSTER_SCOPE_NAMESPACE`), and whose
/// `DeleteResource` of a CustomResourceDefinition is refused while objects of its kind are
/// stored (`door::CLUSTER_TEMPLATES_SINCE`); with `PutTenantWithQuotas` (per-cluster tenant
/// quotas), whose object puts count a Duplicated object's cpu, memory and pods once per cluster
/// it would run in against its tenant's quota (`policy::PER_CLUSTER_QUOTA_SINCE`), and whose
/// `PutTenant` and `PutTenantWithExtended` clear a tenant's per-cluster quotas; with
/// `PutObjectWithFailBack` (a put that sets the object's fail-back choice,
/// `crate::rollout::failback`); whose Karmada propagation policies may set `propagateDeps`
/// (`crate::karmada::DEPS_SINCE`: the ConfigMaps, Secrets, ServiceAccounts and claims a
/// workload names follow it; an older entry's policy was refused the field); whose commands
/// include `ExecutorLease` (a node's executors renew their lease and say where they are) and
/// whose time advances expire those leases and move the clusters of expired nodes
/// (`crate::owners`). An older entry
/// does none of these (a template without a namespace is refused, a Duplicated object counts
/// once), so it replays as it did. 10, the same envelope, whose entries that turn a cluster
/// NotReady already past an object's failover grace period (a grace shorter than the time it
/// took to notice) queue the object for failover at once ([`FAILOVER_OVERDUE_SINCE`]); in an
/// older entry such an object waited for the next placement change, as it did. Also in 10: a
/// `PutUser` may give a role scoped to some namespaces of a tenant (`tenant:T/NS1,NS2`, or
/// `tenant-reader:T/...` that writes nothing; `crate::users::SCOPED_ROLES_SINCE`), and a tenant
/// actor of such a user writes only there; an older entry could not carry that role and is
/// refused it, so every older entry applies as it did. And in 10: an object put that
/// every cluster its placement could use has a per-cluster quota too small for is refused
/// (`state::handlers::cluster_quota`, `PER_CLUSTER_WRITE_SINCE`), where an older entry's waited.
/// 11, the same envelope, with `StatusReportsAt` (status reports that name the state they were
/// observed against, counted only if that is still what the member must hold and only from the
/// cluster's current owner), and whose puts and placement decisions that change what a placed
/// cluster must hold mark it not applied until such a report comes ([`EXACT_REPORTS_SINCE`]);
/// also in 11, door templates roll out under the strategy their propagation policy's
/// `fedraft.io/rollout-strategy` annotation gives, a Deployment's `spec.paused` pausing that
/// rollout (`door::DOOR_ROLLOUTS_SINCE`). An older entry kept the applied flag of an earlier
/// version, ignored the annotation and kept `spec.paused` in the template, and applies as it did.
/// And in 11: `PutObjectWithDescheduling` (a put that sets the object's descheduling policy,
/// `crate::rollout::deschedule`), and `WorkloadReports` that record, per object and cluster,
/// the replicas Pending unschedulable and since when ([`DESCHEDULE_SINCE`]); an older entry's
/// reports recorded only the workload status. A binary that knows only version 10 declines a
/// version-11 entry rather than misreads it. 12: peer documents, managedFields (`door`).
/// 13, the same envelope and commands, whose puts admit a `Namespace` template named after its
/// own namespace without the admission policy listing the kind (`door::NAMESPACES_SINCE`); an
/// older entry's was refused unless `clusterScopedKinds` listed `Namespace`, and still is. Also
/// in 13, a propagation policy may set `placement.workloadAffinity`, which co-locates or
/// separates the templates it binds by a label's value (`karmada::WORKLOAD_AFFINITY_SINCE`); an
/// older entry is refused the field as it was. 14, the same envelope: propagation policies may
/// give an affinity group `overflowAffinities`, further tiers of clusters its replicas overflow
/// into once the group's own clusters are full (`karmada::OVERFLOW_AFFINITIES_SINCE`), and may
/// set `failover.application.statePreservation` and `failover.cluster.statePreservation`
/// (`karmada::STATE_PRESERVATION_SINCE`); an older entry is refused those fields as it was. The
/// commands include `StatusValues` (the values of those rules' paths on members), which a binary
/// that knows only version 13 declines rather than misreads. Also in 14, Karmada's
/// `ClusterTaintPolicy` is kept and taints clusters on their conditions, and `ClusterConditions`
/// records the conditions a status write gives a cluster (`karmada::TAINT_POLICIES_SINCE`); in an
/// older entry the document was a resource template and its delete refused, and they replay so.
/// Also in 14, override policies may use `fieldOverrider` and image `add`, `remove` and
/// `predicate` (`karmada::OVERRIDERS_WIDENED_SINCE`); an older entry is refused them as it was.
/// 15: the same encoding; a gap of log time in which nothing committed no longer counts against
/// member clusters' health ([`LOG_STALL_SINCE`]); older entries judge health as they did. Also in
/// 15, a put of a template that runs no pods (no pod template, not a Pod: a ConfigMap, a
/// Service) records no per-replica requests, so it books no pod on the clusters it goes to
/// ([`PODLESS_SINCE`]); an older entry's booked one pod per cluster, and replays so.
/// 16: the same encoding and commands; each entry re-places up to 1,024 objects of the
/// reschedule queue instead of 256 ([`WIDER_DRAIN_SINCE`]), so a region's failover drains in a
/// quarter of the entries; an older entry re-placed 256, and replays so.
/// 17: the same encoding and commands; a Divided object under a spread constraint gives each
/// group's required replica to a cluster that can take it, and keeps the replica a group already
/// runs where it is instead of moving it to the group's heaviest cluster
/// ([`STEADY_SPREAD_SINCE`]); an older entry chose the heaviest, first by name, even one without
/// room, and replays so. Also in 17, a cluster whose labels change is looked at again by the
/// taint policies (`karmada::TAINT_POLICIES_ON_LABELS_SINCE`); in an older entry it waited for its
/// next condition change, and replays so.
pub const LOG_ENTRY_VERSION: u16 = 17;

/// The first envelope version whose placements give a spread group's required replica to a
/// cluster that can take it, one already running some if any
/// (`scheduler::ScheduleRequest::steady_spread`).
pub const STEADY_SPREAD_SINCE: u16 = 17;

/// The first envelope version whose entries re-place up to 1,024 queued objects each
/// (`state::reschedule_objects_per_entry`).
pub const WIDER_DRAIN_SINCE: u16 = 16;

/// The first envelope version whose puts give templates that run no pods zero requests.
pub const PODLESS_SINCE: u16 = 15;

/// The first envelope version whose time advances record a stalled log and count failure
/// thresholds from its end (`crate::health::LogStall`).
pub const LOG_STALL_SINCE: u16 = 15;

/// The first envelope version whose entries may carry `StatusReportsAt` and whose changes of
/// what a placed cluster must hold (a new template, a new replica count) reset its applied
/// flag (`state/handlers/reports.rs`).
pub const EXACT_REPORTS_SINCE: u16 = 11;

/// The first envelope version whose workload reports record replicas stuck Pending
/// (`state/handlers/deschedule.rs`).
pub const DESCHEDULE_SINCE: u16 = 11;

/// The first envelope version whose entries fail over at once an object whose grace period had
/// already run out when its cluster was seen NotReady.
pub const FAILOVER_OVERDUE_SINCE: u16 = 10;

/// The first envelope version whose entries apply vantage points and the brake.
pub const HEALTH_VANTAGE_SINCE: u16 = 9;

/// The first envelope version whose request ids are scoped by actor and command.
pub const SCOPED_REQUEST_IDS_SINCE: u16 = 2;
