//! End-to-end harness: three real `fedraft server` processes (the binary under test, one Raft
//! group on loopback, executors on every node, each converging the member clusters it owns by
//! lease, `owner_lease_ms`) and three simulated member clusters (fedraft-kubesim in
//! the test process, labels region=dc1/dc2/dc3), driven only through the HTTP API and the
//! simulators' own Kubernetes API and fault switches.
//!
//! Timings are shortened in the node configs (probe 300 ms, election 1-2 s, lease 5 s) and every wait
//! polls a condition with a generous deadline, so a loaded machine slows the tests down
//! instead of failing them. On a failure the last lines of each node's log are printed.
//! Processes, simulators and waiting come from fedraft-testkit; this module adds the e2e
//! config and the API verbs the scenarios speak.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use fedraft_kubesim::{DarkMode, SimHandle};
pub use fedraft_testkit::eventually;
pub use fedraft_testkit::manifests::{deployment, image_of, replicas_of};
use fedraft_testkit::members::start_sims;
use fedraft_testkit::procs::{Cluster, Layout};
use serde_json::{json, Value};

pub const BIN: &str = env!("CARGO_BIN_EXE_fedraft");
pub const TOKEN: &str = "e2e-admin-token-0123456789abcdef";
pub const CLUSTERS: [&str; 3] = ["dc1", "dc2", "dc3"];
pub const HEARTBEAT_MS: u64 = 200;
pub const ELECTION_MIN_MS: u64 = 1000;
pub const ELECTION_MAX_MS: u64 = 2000;
pub const PROBE_MS: u64 = 300;
/// Spread ownership (`owner_lease_ms`), with a lease shortened like the other timings:
/// a dead node's clusters move after it, the others never stop converging. Longer than an
/// election here (leases lapse in log time: a leader change measured at over 3 s on a loaded
/// machine would drop every lease and reassign every cluster), shorter than the scenarios'
/// failure thresholds (10 s), so a handover never looks like a dead cluster.
pub const OWNER_LEASE_MS: u64 = 5000;
/// How long any single condition may take on a loaded machine before the test fails.
pub const LIMIT: Duration = Duration::from_secs(40);
pub const MANAGED: &str = "fedraft.io/managed-by=fedraft";

/// Three fedraft nodes and three member clusters.
pub struct Fed {
    pub procs: Cluster,
    pub sims: Vec<SimHandle>,
    dir: tempfile::TempDir,
    seq: std::sync::atomic::AtomicU64,
}

/// The nodes' config: shortened raft and executor timings, so failover fits in a test.
/// `fedraft certs` for three loopback nodes under `dir/tls`; the directory it wrote.
pub fn node_certs(dir: &std::path::Path) -> std::path::PathBuf {
    let certs = dir.join("tls");
    let out = std::process::Command::new(BIN)
        .arg("certs")
        .arg("--out")
        .arg(&certs)
        .args(["--node", "1=127.0.0.1,localhost", "--node", "2=127.0.0.1"])
        .args(["--node", "3=127.0.0.1"])
        .output()
        .expect("fedraft certs runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    certs
}

pub fn layout() -> Layout {
    let mut l = Layout::new(BIN, TOKEN);
    l.cluster_id = "fedraft-e2e".into();
    l.secret = "e2e-cluster-secret-0123456789abcdef".into();
    l.tokens = vec![format!("{TOKEN} e2e-admin admin")];
    l.raft = vec![
        format!("heartbeat_interval_ms = {HEARTBEAT_MS}"),
        format!("election_timeout_min_ms = {ELECTION_MIN_MS}"),
        format!("election_timeout_max_ms = {ELECTION_MAX_MS}"),
        "tick_interval_ms = 500".into(),
        "propose_timeout_ms = 10000".into(),
    ];
    l.executors = vec![
        format!("probe_interval_ms = {PROBE_MS}"),
        "probe_timeout_ms = 1000".into(),
        "capacity_interval_ms = 1000".into(),
        "resync_period_ms = 3000".into(),
        "status_flush_interval_ms = 200".into(),
        "backoff_max_ms = 1000".into(),
        format!("owner_lease_ms = {OWNER_LEASE_MS}"),
    ];
    l.log_filter = "info,openraft=warn,fedraft_apiserver=warn,kube_client=warn".into();
    l.http_timeout = Duration::from_secs(5);
    l
}

impl Fed {
    /// Starts the simulators and the three nodes, and waits for a leader all nodes agree on.
    pub async fn start() -> Fed {
        Fed::start_with(false, false).await
    }

    /// [`Fed::start`] with the API on TLS (certificates from `fedraft certs`): kubectl sends a
    /// bearer token over https only.
    pub async fn start_tls() -> Fed {
        Fed::start_with(true, false).await
    }

    /// [`Fed::start_tls`] with a `[credentials]` key in every node's config: member
    /// credentials are sealed at rest, as in production (without a key they are refused).
    pub async fn start_tls_sealed() -> Fed {
        Fed::start_with(true, true).await
    }

    async fn start_with(tls: bool, sealed: bool) -> Fed {
        Fed::start_on(start_sims(&CLUSTERS).await, tls, sealed).await
    }

    /// [`Fed::start`] with simulators of the caller's making, named as [`CLUSTERS`] in order
    /// (GPU nodes, other sizes).
    pub async fn start_with_members(sims: Vec<SimHandle>) -> Fed {
        assert_eq!(
            sims.len(),
            CLUSTERS.len(),
            "one simulator per name in CLUSTERS"
        );
        Fed::start_on(sims, false, false).await
    }

    /// [`Fed::start_with_members`] with the API on TLS, for kubectl.
    pub async fn start_tls_with_members(sims: Vec<SimHandle>) -> Fed {
        assert_eq!(
            sims.len(),
            CLUSTERS.len(),
            "one simulator per name in CLUSTERS"
        );
        Fed::start_on(sims, true, false).await
    }

    async fn start_on(sims: Vec<SimHandle>, tls: bool, sealed: bool) -> Fed {
        let dir = fedraft_testkit::temp_dir("e2e");
        let mut l = layout();
        if tls {
            let certs = node_certs(dir.path());
            l.tls = Some(fedraft_testkit::procs::TlsDir { dir: certs });
        }
        let mut procs = Cluster::layout(dir.path(), "fed", &l);
        if sealed {
            use std::os::unix::fs::PermissionsExt;
            let key = dir.path().join("credentials.key");
            std::fs::write(&key, [7u8; 32]).expect("writing the credentials key");
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
                .expect("key permissions");
            let section = format!(
                "\n[credentials]\ncurrent = \"k1\"\nkeys = [{{ id = \"k1\", file = \"{}\" }}]\n",
                key.display()
            );
            for n in &procs.nodes {
                let text = std::fs::read_to_string(&n.config).expect("node config");
                std::fs::write(&n.config, format!("{text}{section}")).expect("node config");
            }
        }
        procs.start_all();
        let fed = Fed {
            procs,
            sims,
            dir,
            seq: Default::default(),
        };
        fed.wait_leader(Duration::from_secs(60)).await;
        fed
    }

    /// The directory the federation's files live in (`tls/` with [`Fed::start_tls`]).
    pub fn root(&self) -> &std::path::Path {
        self.dir.path()
    }

    pub fn sim(&self, cluster: &str) -> &SimHandle {
        let i = CLUSTERS.iter().position(|c| *c == cluster).unwrap();
        &self.sims[i]
    }

    /// The leader every live node agrees on, if any.
    pub async fn leader(&self) -> Option<u64> {
        self.procs.agreed_leader().await
    }

    pub async fn wait_leader(&self, limit: Duration) -> u64 {
        self.procs.wait_agreed_leader(limit).await
    }

    /// SIGKILL (no shutdown path runs) and reap the node's process.
    pub fn kill(&mut self, id: u64) {
        let i = self.procs.index(id);
        self.procs.kill(i);
    }

    /// One API request, sent to the live nodes in turn until one answers other than 503 or a
    /// connection error (followers forward writes; during an election nobody can). An
    /// idempotency key makes a retried write apply once.
    pub async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let key = format!(
            "e2e-{}-{}",
            std::process::id(),
            self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let what = format!("{method} {path}");
        eventually(LIMIT, &what, || {
            let (method, key, body) = (method.clone(), key.clone(), body.clone());
            async move {
                let nodes = &self.procs.nodes;
                for i in (0..nodes.len()).filter(|i| nodes[*i].running()) {
                    let mut req = self
                        .procs
                        .req(i, method.clone(), path)
                        .header("idempotency-key", &key);
                    if let Some(b) = &body {
                        req = req.json(b);
                    }
                    let Ok(resp) = req.send().await else { continue };
                    let status = resp.status();
                    let v: Value = resp.json().await.unwrap_or(Value::Null);
                    if status.is_success() {
                        return Some(v);
                    }
                    if status.is_server_error() {
                        continue;
                    }
                    panic!("{method} {path} answered {status}: {v}");
                }
                None
            }
        })
        .await
    }

    pub async fn get(&self, path: &str) -> Value {
        self.call(reqwest::Method::GET, path, None).await
    }

    /// Registers dc1..dc3 (label region=<name>) with the given health thresholds.
    pub async fn register_all(&self, failure_s: u64, success_s: u64) {
        for c in CLUSTERS {
            self.register(c, failure_s, success_s).await;
        }
        for c in CLUSTERS {
            self.wait_health(c, "Ready").await;
        }
    }

    pub async fn register(&self, cluster: &str, failure_s: u64, success_s: u64) {
        let body = json!({
            "name": cluster,
            "labels": { "region": cluster },
            "apiEndpoint": self.sim(cluster).url(),
            "failureThresholdSeconds": failure_s,
            "successThresholdSeconds": success_s,
        });
        self.call(reqwest::Method::POST, "/v1/clusters", Some(body))
            .await;
    }

    pub async fn health(&self, cluster: &str) -> String {
        let v = self.get(&format!("/v1/clusters/{cluster}")).await;
        v.pointer("/status/health")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    }

    pub async fn wait_health(&self, cluster: &str, want: &str) {
        eventually(LIMIT, &format!("{cluster} {want}"), || async {
            (self.health(cluster).await == want).then_some(())
        })
        .await;
    }

    pub async fn put(&self, ns: &str, name: &str, spec: Value) {
        self.call(
            reqwest::Method::PUT,
            &format!("/v1/namespaces/{ns}/objects/{name}"),
            Some(spec),
        )
        .await;
    }

    pub async fn delete(&self, ns: &str, name: &str) {
        self.call(
            reqwest::Method::DELETE,
            &format!("/v1/namespaces/{ns}/objects/{name}"),
            None,
        )
        .await;
    }

    /// Replicas per cluster as the replicated placement has them (clusters with 0 omitted).
    pub async fn placement(&self, ns: &str, name: &str) -> BTreeMap<String, u64> {
        let v = self
            .get(&format!("/v1/namespaces/{ns}/objects/{name}"))
            .await;
        v.pointer("/status/placement")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
                    .filter(|(_, n)| *n > 0)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The Deployment as the member cluster holds it.
    pub async fn deployment(&self, cluster: &str, ns: &str, name: &str) -> Option<Value> {
        let url = format!(
            "{}/apis/apps/v1/namespaces/{ns}/deployments/{name}",
            self.sim(cluster).url()
        );
        let resp = self.procs.http.get(url).send().await.ok()?;
        if !resp.status().is_success() {
            return None;
        }
        resp.json().await.ok()
    }

    /// Every Deployment carrying fedraft's ownership label in the member cluster, as
    /// "namespace/name" -> replicas. None while the cluster does not answer.
    pub async fn managed(&self, cluster: &str) -> Option<BTreeMap<String, u64>> {
        let url = format!(
            "{}/apis/apps/v1/deployments?labelSelector={MANAGED}",
            self.sim(cluster).url()
        );
        let resp = self.procs.http.get(url).send().await.ok()?;
        if !resp.status().is_success() {
            return None;
        }
        let v: Value = resp.json().await.ok()?;
        Some(
            v.get("items")?
                .as_array()?
                .iter()
                .map(|d| {
                    let ns = d.pointer("/metadata/namespace").and_then(Value::as_str);
                    let name = d.pointer("/metadata/name").and_then(Value::as_str);
                    (
                        format!("{}/{}", ns.unwrap_or(""), name.unwrap_or("")),
                        replicas_of(d),
                    )
                })
                .collect(),
        )
    }

    /// Creates a Deployment fedraft does not manage, straight in the member cluster.
    pub async fn create_unmanaged(&self, cluster: &str, ns: &str, name: &str) {
        let url = format!(
            "{}/apis/apps/v1/namespaces/{ns}/deployments",
            self.sim(cluster).url()
        );
        let mut body = deployment(name, 1, "busybox:1");
        body["metadata"]["namespace"] = json!(ns);
        let resp = self.procs.http.post(url).json(&body).send().await.unwrap();
        assert!(resp.status().is_success(), "{}", resp.status());
    }

    /// Mutating requests the member cluster has received so far (fedraft's writes: the test
    /// itself writes only through `create_unmanaged` and the simulator's drift switch).
    pub fn writes(&self, cluster: &str) -> u64 {
        self.sim(cluster).admin().stats().mutating_requests
    }

    pub fn go_dark(&self, cluster: &str, for_: Option<Duration>) {
        let admin = self.sim(cluster).admin();
        match for_ {
            Some(d) => admin.go_dark_for(DarkMode::Refuse, d),
            None => admin.go_dark(DarkMode::Refuse),
        }
    }

    pub fn come_back(&self, cluster: &str) {
        self.sim(cluster).admin().come_back();
    }

    /// Waits until `cluster` holds `name` with `want` replicas and `image`.
    pub async fn wait_deployment(
        &self,
        cluster: &str,
        ns: &str,
        name: &str,
        want: u64,
        image: &str,
    ) {
        eventually(
            LIMIT,
            &format!("{cluster}: {ns}/{name} with {want} replicas of {image}"),
            || async {
                let d = self.deployment(cluster, ns, name).await?;
                (replicas_of(&d) == want && image_of(&d) == image).then_some(())
            },
        )
        .await;
    }

    pub async fn wait_absent(&self, cluster: &str, ns: &str, name: &str) {
        eventually(
            LIMIT,
            &format!("{ns}/{name} gone from {cluster}"),
            || async {
                self.managed(cluster)
                    .await
                    .filter(|m| !m.contains_key(&format!("{ns}/{name}")))
                    .map(|_| ())
            },
        )
        .await;
    }
}

/// A Divided FederatedObject body: static weights (rebalanced when they change), failover after
/// `grace_s`, and optionally an image-tag override for one cluster.
pub fn divided(
    name: &str,
    replicas: u64,
    image: &str,
    weights: &[(&str, u64)],
    grace_s: u64,
    override_tag: Option<(&str, &str)>,
) -> Value {
    let weights: serde_json::Map<String, Value> = weights
        .iter()
        .map(|(c, w)| (c.to_string(), json!({ "weight": w })))
        .collect();
    let overrides = match override_tag {
        Some((cluster, tag)) => json!([{ "clusterName": cluster, "image": { "tag": tag } }]),
        None => json!([]),
    };
    json!({
        "template": deployment(name, replicas, image),
        "placement": {
            "replicas": { "mode": "Divided", "division": { "staticWeights": { "weights": weights, "rebalance": true } } },
            "failover": { "enabled": true, "gracePeriodSeconds": grace_s },
        },
        "overrides": overrides,
    })
}
