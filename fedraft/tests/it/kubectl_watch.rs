//! Watching the door's policy documents with the stock kubectl against three `fedraft server`
//! processes: discovery offers `watch` for them, `kubectl get propagationpolicies -w` prints a
//! policy's ADDED, MODIFIED (a label, then a spec change) and DELETED as they happen (as
//! objects and as table rows), a watch from a list's resourceVersion sees only what came
//! after, label and field selectors filter the stream (a DELETED still matching the labels the
//! document had), and the other policy kinds (cluster-wide, override, KubeFed's) stream too.

use std::io::BufReader;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::kubectl_door::{have_kubectl, kubectl_for, Kubectl};
use crate::support::*;

const GROUP_PATH: &str = "/apis/policy.karmada.io/v1alpha1";

fn propagation(name: &str, tier: &str, clusters: &str) -> String {
    format!(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata:\n  \
         name: {name}\n  namespace: shop\n  labels: {{tier: {tier}}}\nspec:\n  \
         resourceSelectors:\n  - {{apiVersion: v1, kind: ConfigMap}}\n  placement:\n    \
         clusterAffinity:\n      clusterNames: [{clusters}]\n"
    )
}

const OTHERS: &str = r#"apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: everywhere
spec:
  resourceSelectors:
  - {apiVersion: v1, kind: Secret}
  placement:
    clusterAffinity:
      clusterNames: [dc1, dc2, dc3]
---
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata:
  name: tweak
  namespace: shop
spec:
  resourceSelectors:
  - {apiVersion: v1, kind: ConfigMap}
  overrideRules:
  - targetCluster: {clusterNames: [dc1]}
    overriders:
      plaintext:
      - {path: /data/where, operator: add, value: dc1}
---
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterOverridePolicy
metadata:
  name: tweak-all
spec:
  resourceSelectors:
  - {apiVersion: v1, kind: ConfigMap}
  overrideRules:
  - targetCluster: {clusterNames: [dc2]}
    overriders:
      plaintext:
      - {path: /data/where, operator: add, value: dc2}
---
apiVersion: scheduling.kubefed.io/v1alpha1
kind: ReplicaSchedulingPreference
metadata:
  name: web
  namespace: shop
spec:
  targetKind: FederatedDeployment
  totalReplicas: 6
"#;

/// A running `kubectl get -w` and the documents it has printed so far.
struct Watch {
    child: Child,
    docs: mpsc::Receiver<Value>,
}

impl Watch {
    /// `kubectl get ARGS -w --output-watch-events -o json`: one JSON document per event.
    fn json(k: &Kubectl, args: &[&str]) -> Watch {
        let mut all = vec!["get"];
        all.extend(args);
        all.extend(["-w", "--output-watch-events", "-o", "json"]);
        let mut child = k
            .command(&all)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kubectl get -w runs");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, docs) = mpsc::channel();
        std::thread::spawn(move || {
            let stream = serde_json::Deserializer::from_reader(BufReader::new(stdout));
            for doc in stream.into_iter::<Value>().map_while(Result::ok) {
                if tx.send(doc).is_err() {
                    break;
                }
            }
        });
        Watch { child, docs }
    }

    /// The first `n` events, or panics after `limit` saying what came.
    fn take(&mut self, n: usize, limit: Duration) -> Vec<Value> {
        let deadline = Instant::now() + limit;
        let mut out = Vec::new();
        while out.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.docs.recv_timeout(left) {
                Ok(doc) => out.push(doc),
                Err(_) => panic!("{} of {n} watch events: {out:#?}", out.len()),
            }
        }
        out
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (type, name) of each event.
fn summary(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|e| {
            let s = |p: &str| {
                e.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            (s("/type"), s("/object/metadata/name"))
        })
        .collect()
}

fn pairs(want: &[(&str, &str)]) -> Vec<(String, String)> {
    want.iter()
        .map(|(t, n)| (t.to_string(), n.to_string()))
        .collect()
}

/// The events a raw watch of `path` streams for two seconds (the server ends it then).
fn raw_watch(k: &Kubectl, path: &str, query: &str) -> Vec<Value> {
    let url = format!("{path}?watch=1&timeoutSeconds=2&{query}");
    k.ok(&["get", "--raw", &url])
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("one JSON event per line"))
        .collect()
}

/// The resourceVersion a list of `path` answers (kubectl prints a list of its own, without it).
fn list_version(k: &Kubectl, path: &str) -> String {
    let list: Value = serde_json::from_str(&k.ok(&["get", "--raw", path])).expect("a list");
    let v = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(v.parse::<u64>().is_ok(), "list resourceVersion {v:?}");
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_watches_policies() {
    if !have_kubectl() {
        return;
    }
    let fed = Fed::start_tls().await;
    let (_home, k) = kubectl_for(&fed);

    // Discovery offers watch for every policy kind.
    let wide = k.ok(&[
        "api-resources",
        "--api-group=policy.karmada.io",
        "-o",
        "wide",
    ]);
    for plural in [
        "propagationpolicies",
        "clusterpropagationpolicies",
        "overridepolicies",
        "clusteroverridepolicies",
    ] {
        let line = wide
            .lines()
            .find(|l| l.starts_with(&format!("{plural} ")))
            .unwrap_or_else(|| panic!("{plural} missing:\n{wide}"));
        assert!(line.contains("watch"), "{line}");
    }

    // One policy's life, seen by a watch as objects and by one as table rows.
    let mut objects = Watch::json(&k, &["propagationpolicies", "-n", "shop"]);
    let mut rows = k
        .command(&["get", "pp", "-n", "shop", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl get -w runs");
    std::thread::sleep(Duration::from_secs(2));
    k.ok_in(
        &["apply", "-f", "-"],
        Some(&propagation("web", "gold", "dc1")),
    );
    k.ok(&["label", "pp", "web", "-n", "shop", "reviewed=yes"]);
    k.ok_in(
        &["apply", "-f", "-"],
        Some(&propagation("web", "gold", "dc1, dc2")),
    );
    k.ok(&["delete", "pp", "web", "-n", "shop"]);
    let events = objects.take(4, Duration::from_secs(30));
    assert_eq!(
        summary(&events),
        pairs(&[
            ("ADDED", "web"),
            ("MODIFIED", "web"),
            ("MODIFIED", "web"),
            ("DELETED", "web")
        ])
    );
    assert_eq!(events[0]["object"]["kind"], "PropagationPolicy");
    assert_eq!(events[0]["object"]["metadata"]["namespace"], "shop");
    assert_eq!(events[1]["object"]["metadata"]["labels"]["reviewed"], "yes");
    // A label is metadata; the new placement is a new generation.
    assert_eq!(events[1]["object"]["metadata"]["generation"], 1);
    assert_eq!(events[2]["object"]["metadata"]["generation"], 2);
    let rvs: Vec<u64> = events
        .iter()
        .map(|e| {
            e["object"]["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|v| v.parse().ok())
                .expect("a resourceVersion")
        })
        .collect();
    assert!(rvs.windows(2).all(|w| w[0] < w[1]), "{rvs:?}");
    // The delete shows the document as it last was.
    let gone = &events[3]["object"];
    assert_eq!(gone["metadata"]["labels"]["reviewed"], "yes");
    assert_eq!(
        gone["spec"]["placement"]["clusterAffinity"]["clusterNames"][1],
        "dc2"
    );
    drop(objects);
    std::thread::sleep(Duration::from_secs(1));
    let _ = rows.kill();
    let out = rows.wait_with_output().expect("kubectl get -w ends");
    let table = String::from_utf8_lossy(&out.stdout);
    let seen: Vec<&str> = table
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("web"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        seen,
        ["ADDED", "MODIFIED", "MODIFIED", "DELETED"],
        "{table}"
    );

    // From a list's resourceVersion: later changes only; selectors filter them.
    k.ok_in(
        &["apply", "-f", "-"],
        Some(&propagation("before", "gold", "dc1")),
    );
    let pp = format!("{GROUP_PATH}/namespaces/shop/propagationpolicies");
    let rv = list_version(&k, &pp);
    k.ok_in(
        &["apply", "-f", "-"],
        Some(&propagation("gold", "gold", "dc1")),
    );
    k.ok_in(
        &["apply", "-f", "-"],
        Some(&propagation("silver", "silver", "dc2")),
    );
    k.ok(&["delete", "pp", "gold", "-n", "shop"]);
    let from = format!("resourceVersion={rv}");
    let all = raw_watch(&k, &pp, &from);
    assert_eq!(
        summary(&all),
        pairs(&[("ADDED", "gold"), ("ADDED", "silver"), ("DELETED", "gold")])
    );
    let labelled = raw_watch(&k, &pp, &format!("{from}&labelSelector=tier%3Dgold"));
    assert_eq!(
        summary(&labelled),
        pairs(&[("ADDED", "gold"), ("DELETED", "gold")])
    );
    let named = raw_watch(
        &k,
        &pp,
        &format!("{from}&fieldSelector=metadata.name%3Dsilver"),
    );
    assert_eq!(summary(&named), pairs(&[("ADDED", "silver")]));
    // Without a resourceVersion: what is there now, as ADDED.
    let now = raw_watch(&k, &pp, "");
    assert_eq!(
        summary(&now),
        pairs(&[("ADDED", "before"), ("ADDED", "silver")])
    );

    // The other kinds stream through the same ring.
    let rv = list_version(&k, &format!("{GROUP_PATH}/clusterpropagationpolicies"));
    k.ok_in(&["apply", "-f", "-"], Some(OTHERS));
    let from = format!("resourceVersion={rv}");
    for (path, name) in [
        (
            format!("{GROUP_PATH}/clusterpropagationpolicies"),
            "everywhere",
        ),
        (
            format!("{GROUP_PATH}/namespaces/shop/overridepolicies"),
            "tweak",
        ),
        (format!("{GROUP_PATH}/clusteroverridepolicies"), "tweak-all"),
        (
            "/apis/scheduling.kubefed.io/v1alpha1/namespaces/shop/replicaschedulingpreferences"
                .to_string(),
            "web",
        ),
    ] {
        let events = raw_watch(&k, &path, &from);
        assert_eq!(summary(&events), pairs(&[("ADDED", name)]), "{path}");
    }
    let mut cluster_wide = Watch::json(&k, &["clusterpropagationpolicies"]);
    k.ok(&["annotate", "cpp", "everywhere", "note=watched"]);
    let events = cluster_wide.take(2, Duration::from_secs(30));
    assert_eq!(
        summary(&events),
        pairs(&[("ADDED", "everywhere"), ("MODIFIED", "everywhere")])
    );
    assert_eq!(
        events[1]["object"]["metadata"]["annotations"]["note"],
        "watched"
    );
}
