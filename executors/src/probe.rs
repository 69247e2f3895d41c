//! Observing one member cluster: a health probe (`GET /readyz`) every probe interval, bounded by
//! the probe timeout, and after a successful probe a capacity report when one is due. An answer
//! that misses the timeout is reported as a timeout and still awaited for as long as any member
//! request is ([`probe_patiently`]): when it comes, it is a successful probe.
//!
//! Capacity comes from an inventory the probe keeps with two watches, nodes and pods (kube's
//! watcher: a paged list, then a watch from its resourceVersion, relisting after a 410), each
//! object reduced to its [`NodeShare`] or [`PodShare`]. A capacity report is then arithmetic
//! over that inventory, with no request at all: a 5,000-node member costs its watch events, not
//! a full node-and-pod LIST every capacity interval. The first report waits (at most the request
//! timeout) for the node list; pods that cannot be watched (forbidden, say) leave the foreign
//! usage invisible and available equal to allocatable, as before. While the cluster is
//! unreachable the inventory keeps its last view and the watches retry with kube's backoff.
//!
//! Results go to [`Observations`]; the reporter turns them into log entries, a failure with its
//! error text or timeout ([`failure_of`]). A failed probe is only an observation: the state machine decides from missing heartbeats whether the cluster is
//! NotReady.
//!
//! Must not: decide health, delay another cluster (each probe loop is its own task), or keep
//! whole node or pod objects.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fedraft_core::health::{FailureKind, ProbeFailure};
use fedraft_core::model::Capacity;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Resource;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::capacity::{self, NodeShare, PodShare};
use crate::error::ExecError;
use crate::lateness::Lateness;
use crate::reconciler::ClusterCtx;
use crate::report::Observations;

/// Objects per page of the watches' initial (and re-) lists, as kubectl pages.
const LIST_PAGE: u32 = 500;

/// `GET /readyz` within `timeout`, widened by as much as this node ran late meanwhile
/// ([`crate::lateness`]): a late node is not a dead member.
pub async fn probe(
    client: &kube::Client,
    timeout: Duration,
    lateness: &Lateness,
) -> Result<(), ExecError> {
    let started = Instant::now();
    let answer = client.request_text(readyz()?);
    tokio::pin!(answer);
    match within(answer.as_mut(), started, timeout, lateness).await {
        Some(r) => r,
        None => Err(timed_out(started)),
    }
}

/// The owner's probe: as [`probe`], but an answer that misses the timeout is still awaited up
/// to `patience` from the start. The timeout is handed to `on_timeout` when it passes (the
/// cluster's views show it), and a late answer is an answer: a member apiserver slowed by load
/// still serves, and failing it over for slowness piles its work onto members as loaded.
pub async fn probe_patiently(
    client: &kube::Client,
    timeout: Duration,
    patience: Duration,
    lateness: &Lateness,
    on_timeout: impl FnOnce(&ExecError),
) -> Result<(), ExecError> {
    let started = Instant::now();
    let answer = client.request_text(readyz()?);
    tokio::pin!(answer);
    if let Some(r) = within(answer.as_mut(), started, timeout, lateness).await {
        return r;
    }
    on_timeout(&timed_out(started));
    match tokio::time::timeout_at(started + patience, answer).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(ExecError::kube("GET /readyz", e)),
        Err(_) => Err(timed_out(started)),
    }
}

fn readyz() -> Result<http::Request<Vec<u8>>, ExecError> {
    http::Request::get("/readyz")
        .body(Vec::new())
        .map_err(|e| ExecError::Manifest(format!("probe request: {e}")))
}

fn timed_out(started: Instant) -> ExecError {
    ExecError::Timeout {
        action: "GET /readyz".into(),
        waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}

/// The answer's result if it comes within `timeout` (widened by this node's lateness), None
/// once that passed.
async fn within<F, T>(
    mut answer: std::pin::Pin<&mut F>,
    started: Instant,
    timeout: Duration,
    lateness: &Lateness,
) -> Option<Result<(), ExecError>>
where
    F: std::future::Future<Output = Result<T, kube::Error>>,
{
    let late_before = lateness.late();
    let mut deadline = started + timeout;
    loop {
        match tokio::time::timeout_at(deadline, answer.as_mut()).await {
            Ok(Ok(_)) => return Some(Ok(())),
            Ok(Err(e)) => return Some(Err(ExecError::kube("GET /readyz", e))),
            Err(_) => {
                let late = lateness.late().saturating_sub(late_before);
                let widened = started + crate::lateness::widened(timeout, late);
                if widened <= deadline {
                    return None;
                }
                deadline = widened;
            }
        }
    }
}

/// What a failed probe reports: a timeout as such, anything else as an error, with its text.
pub fn failure_of(e: &ExecError) -> ProbeFailure {
    let kind = match e {
        ExecError::Timeout { .. } => FailureKind::Timeout,
        _ => FailureKind::Error,
    };
    ProbeFailure::new(kind, &e.to_string())
}

/// One kind's objects, reduced to what capacity needs, keyed by namespace/name.
struct Reduced<S> {
    items: Mutex<BTreeMap<String, S>>,
    /// True once the first list completed (and stays true through reconnects).
    ready: watch::Sender<bool>,
}

impl<S> Reduced<S> {
    fn new() -> Arc<Self> {
        Arc::new(Reduced {
            items: Mutex::new(BTreeMap::new()),
            ready: watch::channel(false).0,
        })
    }

    fn items(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, S>> {
        // A panic mid-update leaves at worst one stale entry, replaced at the next relist.
        self.items.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Waits until ready or `deadline`; returns whether ready.
    async fn wait_ready(&self, deadline: Instant) -> bool {
        let mut rx = self.ready.subscribe();
        tokio::time::timeout_at(deadline, rx.wait_for(|r| *r))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

/// Pods Pending unschedulable per workload (namespace, name), handed from the probe's
/// inventory to the reconciler, which reports each workload's count with its status.
pub struct Unschedulable {
    counts: Mutex<BTreeMap<(String, String), u32>>,
    /// Wakes the cluster's reconciler, so a new count is reported without waiting for the
    /// workload itself to change.
    wake: Arc<tokio::sync::Notify>,
}

impl Unschedulable {
    pub fn new(wake: Arc<tokio::sync::Notify>) -> Self {
        Unschedulable {
            counts: Mutex::default(),
            wake,
        }
    }

    /// Replaces the counts; wakes the reconciler when they changed.
    pub fn set(&self, counts: BTreeMap<(String, String), u32>) {
        let mut g = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if *g != counts {
            *g = counts;
            self.wake.notify_one();
        }
    }

    /// Pods of the workload `key` Pending unschedulable.
    pub fn of(&self, key: &fedraft_core::model::ObjectKey) -> u32 {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(key.namespace.clone(), key.name.clone()))
            .copied()
            .unwrap_or(0)
    }
}

/// Aborts the watch tasks when the probe loop ends.
struct Watches(Vec<JoinHandle<()>>);

impl Drop for Watches {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// The node and pod inventory of one cluster, kept by two watches.
pub struct Inventory {
    nodes: Arc<Reduced<NodeShare>>,
    pods: Arc<Reduced<PodShare>>,
    /// Whether a report already waited for the pod list once (later ones do not wait).
    waited_for_pods: Mutex<bool>,
    _watches: Watches,
}

impl Inventory {
    /// Starts the watches of `client`'s cluster.
    pub fn start(client: &kube::Client, cluster: &str) -> Inventory {
        let nodes = Reduced::new();
        let pods = Reduced::new();
        let tasks = vec![
            tokio::spawn(keep(
                Api::<Node>::all(client.clone()),
                cluster.to_string(),
                nodes.clone(),
                |n| Some(NodeShare::of(n)),
            )),
            tokio::spawn(keep(
                Api::<Pod>::all(client.clone()),
                cluster.to_string(),
                pods.clone(),
                |p| Some(PodShare::of(p)).filter(PodShare::running),
            )),
        ];
        Inventory {
            nodes,
            pods,
            waited_for_pods: Mutex::new(false),
            _watches: Watches(tasks),
        }
    }

    /// The capacity fedraft reports, from the inventory. Fails only if the node list has not
    /// completed within `limit`.
    pub async fn capacity(&self, ctx: &ClusterCtx, limit: Duration) -> Result<Capacity, ExecError> {
        let deadline = Instant::now() + limit;
        if !self.nodes.wait_ready(deadline).await {
            return Err(ExecError::Timeout {
                action: "listing nodes".into(),
                waited_ms: limit.as_millis() as u64,
            });
        }
        let first = !std::mem::replace(
            &mut *self
                .waited_for_pods
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
            true,
        );
        if first && !self.pods.is_ready() {
            self.pods.wait_ready(deadline).await;
        }
        let pods_visible = self.pods.is_ready();
        if !pods_visible {
            tracing::debug!(cluster = %ctx.cluster, "pods not visible for the capacity report");
        }
        let managed = ctx.live.managed_names();
        let nodes = self.nodes.items();
        let pods = self.pods.items();
        Ok(capacity::capacity_of(
            nodes.values(),
            pods_visible.then(|| pods.values()),
            &managed,
        ))
    }

    /// Extended resources and node shapes from the inventory (after [`Inventory::capacity`],
    /// whose waits it relies on).
    pub fn extended(&self, ctx: &ClusterCtx) -> fedraft_core::policy::ExtendedCapacity {
        let managed = ctx.live.managed_names();
        let nodes = self.nodes.items();
        let pods = self.pods.items();
        capacity::extended_capacity_of(
            nodes.values(),
            self.pods.is_ready().then(|| pods.values()),
            &managed,
        )
    }

    /// Pods Pending unschedulable per workload; None until the pod list is complete (a
    /// partial list would report replicas as schedulable that are not).
    pub fn unschedulable(&self) -> Option<BTreeMap<(String, String), u32>> {
        if !self.pods.is_ready() {
            return None;
        }
        Some(capacity::unschedulable_by_workload(
            self.pods.items().values(),
        ))
    }

    /// Nodes and running pods held.
    pub fn held(&self) -> (usize, usize) {
        (self.nodes.items().len(), self.pods.items().len())
    }
}

fn key<K: Resource>(o: &K) -> Option<String> {
    let m = o.meta();
    let name = m.name.as_deref()?;
    Some(match m.namespace.as_deref() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    })
}

/// Keeps `into`'s map equal to the watched objects, each reduced by `reduce` (None: not kept).
async fn keep<K, S>(
    api: Api<K>,
    cluster: String,
    into: Arc<Reduced<S>>,
    reduce: fn(&K) -> Option<S>,
) where
    K: Resource
        + Clone
        + std::fmt::Debug
        + k8s_openapi::serde::de::DeserializeOwned
        + Send
        + 'static,
    K::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let config = watcher::Config::default().page_size(LIST_PAGE);
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let mut relist = BTreeMap::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => relist.clear(),
            Ok(Event::InitApply(o)) => {
                if let (Some(k), Some(v)) = (key(&o), reduce(&o)) {
                    relist.insert(k, v);
                }
            }
            Ok(Event::InitDone) => {
                *into.items() = std::mem::take(&mut relist);
                into.ready.send_replace(true);
            }
            Ok(Event::Apply(o)) => {
                if let Some(k) = key(&o) {
                    match reduce(&o) {
                        Some(v) => into.items().insert(k, v),
                        None => into.items().remove(&k),
                    };
                }
            }
            Ok(Event::Delete(o)) => {
                if let Some(k) = key(&o) {
                    into.items().remove(&k);
                }
            }
            Err(e) => {
                tracing::debug!(%cluster, %kind, error = %e, "inventory watch interrupted; retrying");
            }
        }
    }
}

/// The probe loop of one cluster.
pub async fn run_probe(ctx: Arc<ClusterCtx>, obs: Arc<Observations>) {
    let cfg = &ctx.cfg;
    let inventory = Inventory::start(&ctx.client, &ctx.cluster);
    let mut next_scan = Instant::now();
    loop {
        let started = Instant::now();
        // A late answer still counts, within the time any other member request is given.
        let patience = cfg.request_timeout.max(cfg.probe_timeout);
        let slow = |e: &ExecError| {
            tracing::info!(cluster = %ctx.cluster, error = %e, "health probe slow; still waiting");
            obs.probe_failed(&ctx.cluster, failure_of(e));
        };
        let probed = probe_patiently(
            &ctx.client,
            cfg.probe_timeout,
            patience,
            &cfg.lateness,
            slow,
        )
        .await;
        match probed {
            Ok(()) => {
                let mut capacity = None;
                if started >= next_scan {
                    match inventory.capacity(&ctx, cfg.request_timeout).await {
                        Ok(c) => {
                            capacity = Some(c);
                            obs.capacity_detail(&ctx.cluster, inventory.extended(&ctx));
                            next_scan = started + cfg.capacity_interval;
                        }
                        Err(e) => {
                            tracing::warn!(cluster = %ctx.cluster, error = %e, "capacity scan failed")
                        }
                    }
                }
                obs.probe_ok(&ctx.cluster, capacity);
                if let Some(stuck) = inventory.unschedulable() {
                    ctx.unschedulable.set(stuck);
                }
            }
            Err(e) => {
                tracing::info!(cluster = %ctx.cluster, error = %e, "health probe failed");
                obs.probe_failed(&ctx.cluster, failure_of(&e));
            }
        }
        tokio::time::sleep_until(started + cfg.probe_interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member on its own thread (so a stall of the test's runtime does not hold it up) that
    /// answers `/readyz` after `delay`.
    fn member(delay: Duration) -> Result<std::net::SocketAddr, std::io::Error> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::spawn(move || {
            rt.block_on(async move {
                let readyz = move || async move {
                    tokio::time::sleep(delay).await;
                    "ok"
                };
                let app = axum::Router::new().route("/readyz", axum::routing::get(readyz));
                if let Ok(l) = tokio::net::TcpListener::from_std(listener) {
                    let _ = axum::serve(l, app).await;
                }
            })
        });
        Ok(addr)
    }

    fn client(addr: std::net::SocketAddr) -> kube::Client {
        let url = format!("http://{addr}").parse().expect("a literal URL");
        kube::Client::try_from(kube::Config::new(url)).expect("a plain-HTTP client")
    }

    /// The member answers after 650 ms, the timeout is 500 ms, and the node's one thread is
    /// blocked for 450 ms of the wait: without widening the probe would fail at 500 ms; with
    /// it, the node's lateness buys the answer time.
    #[test]
    fn a_late_node_waits_longer_for_its_member() -> Result<(), std::io::Error> {
        let addr = member(Duration::from_millis(650))?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async {
            let (client, lateness) = (client(addr), Lateness::default());
            let timeout = Duration::from_millis(500);
            let probing = tokio::spawn(async move { probe(&client, timeout, &lateness).await });
            // Long enough for the request to be on its way before the node stalls.
            tokio::time::sleep(Duration::from_millis(20)).await;
            std::thread::sleep(Duration::from_millis(450));
            let r = probing.await.expect("the probe task");
            assert!(r.is_ok(), "{r:?}");
        });
        Ok(())
    }

    /// The owner's probe: an answer after the timeout but within the patience is an answer, and
    /// the timeout was reported when it passed; no answer at all fails after the patience.
    #[tokio::test]
    async fn a_late_answer_is_an_answer_and_the_timeout_is_reported() -> Result<(), std::io::Error>
    {
        let addr = member(Duration::from_millis(600))?;
        let (timeout, patience) = (Duration::from_millis(200), Duration::from_secs(5));
        let mut reported = Vec::new();
        let r = probe_patiently(
            &client(addr),
            timeout,
            patience,
            &Lateness::default(),
            |e| reported.push(e.to_string()),
        )
        .await;
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(reported.len(), 1, "{reported:?}");
        assert!(reported[0].contains("GET /readyz"), "{reported:?}");

        let silent = std::net::TcpListener::bind("127.0.0.1:0")?;
        let started = std::time::Instant::now();
        let mut reported = 0;
        let r = probe_patiently(
            &client(silent.local_addr()?),
            timeout,
            Duration::from_millis(500),
            &Lateness::default(),
            |_| reported += 1,
        )
        .await;
        assert!(matches!(r, Err(ExecError::Timeout { .. })), "{r:?}");
        assert_eq!(reported, 1);
        assert!(started.elapsed() >= Duration::from_millis(500));
        drop(silent);
        Ok(())
    }

    /// A member that never answers still fails, at most one timeout later than without lateness.
    #[tokio::test]
    async fn a_silent_member_times_out() -> Result<(), std::io::Error> {
        // Accepted by the kernel's backlog, never read or answered.
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let timeout = Duration::from_millis(200);
        let started = std::time::Instant::now();
        let r = probe(&client(addr), timeout, &Lateness::default()).await;
        assert!(matches!(r, Err(ExecError::Timeout { .. })), "{r:?}");
        assert!(started.elapsed() < timeout * 10, "{:?}", started.elapsed());
        drop(listener);
        Ok(())
    }
}
