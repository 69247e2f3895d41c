//! End to end, spread ownership: three `fedraft server` processes with `owner_lease_ms` set and
//! six simulated member clusters. The clusters are shared out over all three nodes (the API
//! shows each one's `owner`), each written only with its owner's token; a killed node's
//! clusters are taken over within the lease plus a few seconds and converge again; and the
//! simulators' write logs show that no cluster ever had writes from two owners interleaved (an
//! older token never writes after a newer one).
//!
//! Spread ownership is what the shared e2e config runs (`support::layout`); this scenario
//! spreads six clusters to see two per node.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use fedraft_kubesim::writelog::interleaved;
use fedraft_kubesim::SimHandle;
use fedraft_testkit::members::start_sims;
use fedraft_testkit::procs::Cluster;
use serde_json::{json, Value};

use crate::support::{deployment, eventually, layout, replicas_of, OWNER_LEASE_MS};

const NAMES: [&str; 6] = ["m1", "m2", "m3", "m4", "m5", "m6"];
const LEASE_MS: u64 = OWNER_LEASE_MS;
/// Longer than a lease plus a takeover: a handover must not look like a dead cluster.
const FAILURE_S: u64 = 12;
/// Any one condition; the whole scenario stays well under 90 s on an idle machine.
const LIMIT: Duration = Duration::from_secs(30);
const OWNER: &str = "fedraft.io/owner";

struct Spread {
    procs: Cluster,
    sims: Vec<SimHandle>,
    _dir: tempfile::TempDir,
}

impl Spread {
    async fn start() -> Spread {
        let sims = start_sims(&NAMES).await;
        let dir = fedraft_testkit::temp_dir("e2e-owners");
        let mut procs = Cluster::layout(dir.path(), "fed", &layout());
        procs.start_all();
        procs.wait_agreed_leader(Duration::from_secs(60)).await;
        Spread {
            procs,
            sims,
            _dir: dir,
        }
    }

    /// One request to the first live node that answers with a success; None otherwise.
    async fn try_call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Option<Value> {
        for i in (0..self.procs.nodes.len()).filter(|i| self.procs.nodes[*i].running()) {
            let mut req = self.procs.req(i, method.clone(), path);
            if let Some(b) = body {
                req = req.json(b);
            }
            let Ok(resp) = req.send().await else { continue };
            if resp.status().is_success() {
                return resp.json().await.ok();
            }
        }
        None
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let what = format!("{method} {path}");
        eventually(LIMIT, &what, || {
            self.try_call(method.clone(), path, body.as_ref())
        })
        .await
    }

    /// cluster -> (node, token) as the API shows the owners; clusters without one left out.
    async fn owners(&self) -> BTreeMap<String, (String, String)> {
        let mut out = BTreeMap::new();
        for c in NAMES {
            let Some(v) = self
                .try_call(reqwest::Method::GET, &format!("/v1/clusters/{c}"), None)
                .await
            else {
                continue;
            };
            let node = v.pointer("/owner/node").and_then(Value::as_str);
            let token = v.pointer("/owner/token").and_then(Value::as_str);
            if let (Some(n), Some(t)) = (node, token) {
                out.insert(c.to_string(), (n.to_string(), t.to_string()));
            }
        }
        out
    }

    async fn health(&self, cluster: &str) -> String {
        let v = self
            .call(
                reqwest::Method::GET,
                &format!("/v1/clusters/{cluster}"),
                None,
            )
            .await;
        v.pointer("/status/health")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    }

    /// (replicas, owner token) of shop/web as member `i` holds it.
    async fn web(&self, i: usize) -> Option<(u64, String)> {
        let url = format!(
            "{}/apis/apps/v1/namespaces/shop/deployments/web",
            self.sims[i].url()
        );
        let resp = self.procs.http.get(url).send().await.ok()?;
        if !resp.status().is_success() {
            return None;
        }
        let d: Value = resp.json().await.ok()?;
        let token = d
            .pointer("/metadata/annotations")?
            .get(OWNER)?
            .as_str()?
            .to_string();
        Some((replicas_of(&d), token))
    }

    /// Waits until every member holds shop/web with `per` replicas, written with the token its
    /// owner holds now.
    async fn converged(&self, per: u64) {
        for (i, c) in NAMES.iter().enumerate() {
            eventually(
                LIMIT,
                &format!("{c}: shop/web x{per} written by its owner"),
                || async {
                    let owners = self.owners().await;
                    let (_, token) = owners.get(*c)?;
                    let (n, t) = self.web(i).await?;
                    (n == per && &t == token).then_some(())
                },
            )
            .await;
        }
    }

    async fn put_web(&self, per: u64) {
        let weights: serde_json::Map<String, Value> = NAMES
            .iter()
            .map(|c| (c.to_string(), json!({"weight": 1})))
            .collect();
        let body = json!({
            "template": deployment("web", per * NAMES.len() as u64, "nginx:1"),
            "placement": {
                "replicas": {"mode": "Divided", "division": {"staticWeights": {"weights": weights, "rebalance": true}}},
            },
        });
        self.call(
            reqwest::Method::PUT,
            "/v1/namespaces/shop/objects/web",
            Some(body),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_spread_over_every_node_and_a_dead_nodes_move_with_one_writer_each() {
    let started = Instant::now();
    let mut fed = Spread::start().await;
    for (c, sim) in NAMES.iter().zip(&fed.sims) {
        let body = json!({
            "name": c,
            "labels": {"region": "east"},
            "apiEndpoint": sim.url(),
            "failureThresholdSeconds": FAILURE_S,
            "successThresholdSeconds": 1,
        });
        fed.call(reqwest::Method::POST, "/v1/clusters", Some(body))
            .await;
    }

    // Shared out over all three nodes, two each (balanced, no locality declared), and Ready
    // through the owners' heartbeats before anything is placed.
    eventually(LIMIT, "two clusters owned by each node", || async {
        let owners = fed.owners().await;
        let mut per: BTreeMap<String, usize> = BTreeMap::new();
        for (node, _) in owners.values() {
            *per.entry(node.clone()).or_default() += 1;
        }
        (owners.len() == NAMES.len() && per.len() == 3 && per.values().all(|n| *n == 2))
            .then_some(())
    })
    .await;
    for c in NAMES {
        eventually(LIMIT, &format!("{c} Ready"), || async {
            (fed.health(c).await == "Ready").then_some(())
        })
        .await;
    }
    fed.put_web(1).await;
    fed.converged(1).await;
    let before = fed.owners().await;

    // Kill a node that does not lead (so only ownership moves, not leadership).
    let leader = fed.procs.wait_agreed_leader(LIMIT).await;
    let victim = fed
        .procs
        .nodes
        .iter()
        .map(|n| n.id)
        .find(|id| *id != leader)
        .expect("a follower");
    let victim_name = format!("node{victim}");
    let lost: BTreeSet<String> = before
        .iter()
        .filter(|(_, (n, _))| *n == victim_name)
        .map(|(c, _)| c.clone())
        .collect();
    assert_eq!(lost.len(), 2, "{victim_name} owned {lost:?} of {before:?}");
    let i = fed.procs.index(victim);
    fed.procs.kill(i);
    let killed_at = Instant::now();

    // Its clusters move to the live nodes within the lease and a few seconds; the others stay.
    let takeover = Duration::from_millis(LEASE_MS) + Duration::from_secs(8);
    let after = eventually(takeover, "the dead node's clusters taken over", || async {
        let owners = fed.owners().await;
        let moved = lost
            .iter()
            .all(|c| owners.get(c).is_some_and(|(n, _)| *n != victim_name));
        (owners.len() == NAMES.len() && moved).then_some(owners)
    })
    .await;
    let took = killed_at.elapsed();
    eprintln!("takeover after {took:?}");
    for (c, o) in &before {
        if !lost.contains(c) {
            assert_eq!(after.get(c), Some(o), "{c} moved though its owner lives");
        }
    }

    // The new owners converge a change with their own tokens; no cluster went NotReady.
    fed.put_web(2).await;
    fed.converged(2).await;
    for c in NAMES {
        assert_eq!(fed.health(c).await, "Ready", "{c} after the handover");
    }

    // One writer at a time: in every member's write log the tokens never go back, and every
    // write fedraft made carries one.
    for (c, sim) in NAMES.iter().zip(&fed.sims) {
        let log = sim.admin().write_log();
        assert_eq!(log.dropped, 0, "{c}: write log cut");
        if let Some((newer, older)) = interleaved(&log.records) {
            panic!("{c}: {older:?} written after {newer:?}");
        }
        let web: Vec<_> = log
            .records
            .iter()
            .filter(|r| r.object == "deployments/shop/web" && r.verb != "delete")
            .collect();
        assert!(!web.is_empty(), "{c}: no write of shop/web");
        assert!(
            web.iter().all(|r| r.owner.is_some()),
            "{c}: a write without a token: {web:?}"
        );
        if lost.contains(*c) {
            let tokens: BTreeSet<&str> = web.iter().filter_map(|r| r.owner.as_deref()).collect();
            assert!(
                tokens.len() >= 2,
                "{c}: written by one owner only: {tokens:?}"
            );
        }
    }
    eprintln!("scenario took {:?}", started.elapsed());
    assert!(
        started.elapsed() < Duration::from_secs(90),
        "bounded scenario"
    );
}
