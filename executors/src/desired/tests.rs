//! Unit tests of the desired cache: that it renders what `desired_for_cluster` renders, lets
//! bodies go and brings them back only for the version they were prepared at, and keeps one
//! key and one id per object across versions.

use super::*;
use fedraft_core::command::{Command, LogEntry};
use fedraft_core::model::{ClusterSpec, ObjectSpec};
use serde_json::json;

fn apply(s: &mut State, i: &mut u64, cmd: Command) {
    *i += 1;
    let a = s.apply(*i, &LogEntry::new(format!("r{i}"), "admin", 1000 + *i, cmd));
    assert!(a.outcome.is_accepted(), "{:?}", a.outcome);
}

fn spec(weights: serde_json::Value, tag: &str) -> ObjectSpec {
    serde_json::from_value(json!({
        "template": json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"replicas": 6, "template": {"spec": {"containers": [
                {"name": "app", "image": "nginx:1"}]}}},
        }).to_string(),
        "placement": {"replicas": {"mode": "Divided",
            "division": {"staticWeights": {"weights": weights}}}},
        "overrides": [{"clusterName": "b", "image": {"tag": tag}}],
    }))
    .unwrap()
}

/// A state with clusters `a` and `b` registered and Ready (nothing is placed on a cluster
/// that never answered), and its last index.
fn two_ready_clusters() -> (State, u64) {
    let (mut s, mut i) = (State::new(), 0);
    for c in ["a", "b"] {
        apply(
            &mut s,
            &mut i,
            Command::RegisterCluster(ClusterSpec::new(c, format!("http://{c}:1"))),
        );
    }
    let beat = |c: &str| fedraft_core::command::Heartbeat {
        cluster: c.into(),
        capacity: None,
    };
    apply(
        &mut s,
        &mut i,
        Command::Heartbeats(vec![beat("a"), beat("b")]),
    );
    (s, i)
}

fn manifests(v: &[DesiredObject]) -> Vec<(ObjectKey, u32, String)> {
    v.iter()
        .map(|d| (d.key.clone(), d.replicas, format!("{:?}", d.manifest)))
        .collect()
}

/// The cache's view (rendered now or earlier) equals `desired_for_cluster` after every
/// kind of change: new objects, new weights, new overrides, new cluster labels, removal.
#[test]
fn matches_desired_for_cluster() {
    let (mut s, mut i) = two_ready_clusters();
    let mut caches: BTreeMap<&str, (DesiredCache, BTreeMap<ObjectKey, DesiredObject>)> =
        BTreeMap::new();
    let steps: Vec<Command> = vec![
        Command::PutObject {
            namespace: "ns".into(),
            name: "web".into(),
            spec: spec(json!({"a": {"weight": 1}, "b": {"weight": 1}}), "2"),
            expected_version: None,
        },
        Command::PutObject {
            namespace: "ns".into(),
            name: "api".into(),
            spec: spec(json!({"a": {"weight": 1}, "b": {"weight": 2}}), "2"),
            expected_version: None,
        },
        Command::PutObject {
            namespace: "ns".into(),
            name: "web".into(),
            spec: spec(json!({"a": {"weight": 1}, "b": {"weight": 5}}), "3"),
            expected_version: None,
        },
        Command::UpdateCluster {
            spec: {
                let mut c = ClusterSpec::new("b", "http://b:1");
                c.labels.insert("region".into(), "x".into());
                c
            },
            expected_version: None,
        },
        Command::DeleteObject {
            namespace: "ns".into(),
            name: "api".into(),
            expected_version: None,
        },
    ];
    let mut placed = 0;
    for cmd in steps {
        apply(&mut s, &mut i, cmd);
        for c in ["a", "b"] {
            let (cache, seen) = caches.entry(c).or_default();
            let scan = cache.scan(&s, c);
            for (v, d) in scan.rendered {
                cache.insert(Arc::new(d.key.clone()), v, Entry::Unusable(String::new()));
                seen.insert(d.key.clone(), d);
            }
            cache.retain(&scan.keys);
            seen.retain(|k, _| scan.keys.contains(k));
            let got: Vec<DesiredObject> = seen.values().cloned().collect();
            assert_eq!(manifests(&got), manifests(&s.desired_for_cluster(c)));
            placed += got.len();
        }
    }
    assert!(placed >= 8, "compared {placed} placements");
}

/// `ns/web` put with the override tag `tag`, equally weighted over `a` and `b`.
fn put(tag: &str) -> Command {
    Command::PutObject {
        namespace: "ns".into(),
        name: "web".into(),
        spec: spec(json!({"a": {"weight": 1}, "b": {"weight": 1}}), tag),
        expected_version: None,
    }
}

fn deployments() -> Arc<Resolved> {
    Arc::new(Resolved::new(
        kube::api::ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
        true,
    ))
}

/// A settled object's body is dropped, and rendered again byte for byte while the object
/// stays at the version it was prepared at; once it moved on (a status report too),
/// restoring declines and the next scan prepares it again.
#[test]
fn a_settled_body_is_restored_only_for_the_version_it_was_prepared_at() {
    let (mut s, mut i) = two_ready_clusters();
    apply(&mut s, &mut i, put("2"));
    let resolved = deployments();
    let mut cache = DesiredCache::default();
    let scan = cache.scan(&s, "b");
    let (version, d) = scan
        .rendered
        .into_iter()
        .next()
        .expect("web is placed on b");
    let (manifest, id) = identity(&d).expect("a manifest");
    let key = Arc::new(d.key.clone());
    let first = Arc::new(prepared_as(&d, manifest, id, (key, resolved)).expect("prepared"));
    cache.insert(first.key.clone(), version, Entry::Ready(first.clone()));

    cache.settle(&d.key);
    let Some(Entry::Ready(bare)) = cache.get(&d.key).cloned() else {
        panic!("still prepared")
    };
    assert_eq!(bare.body, None);
    assert_eq!((&bare.hash, &bare.id), (&first.hash, &first.id));
    let whole = cache.restore(&s, "b", &bare).expect("same version");
    assert_eq!(whole.body, first.body);
    assert!(whole.id.shares(&first.id), "restored under the id it had");
    assert!(
        matches!(cache.get(&d.key), Some(Entry::Ready(p)) if p.body == first.body),
        "the cache keeps the restored body"
    );

    // A status report moves the object on: its next scan prepares it again.
    cache.settle(&d.key);
    let report = fedraft_core::command::ObjectStatusReport {
        namespace: "ns".into(),
        name: "web".into(),
        cluster: "a".into(),
        applied: true,
        ready_replicas: 3,
        message: None,
    };
    let as_of = s.applied_index();
    apply(
        &mut s,
        &mut i,
        Command::StatusReportsAt(vec![fedraft_core::command::StatusReportAt {
            report,
            as_of,
        }]),
    );
    let moved = s.object("ns", "web").map(|o| o.resource_version);
    assert_ne!(moved, Some(version), "the report changed the object");
    assert!(cache.restore(&s, "b", &bare).is_none(), "moved on since");
    let scan = cache.scan(&s, "b");
    let (version, d) = scan.rendered.into_iter().next().expect("rendered again");
    cache.insert(first.key.clone(), version, Entry::Ready(first.clone()));
    cache.settle(&d.key);
    let again = cache
        .restore(&s, "b", &bare)
        .expect("at the version it was prepared at");
    assert_eq!(again.body, first.body);

    cache.settle(&d.key);
    apply(&mut s, &mut i, put("3"));
    assert!(cache.restore(&s, "b", &bare).is_none(), "changed since");
    assert!(whole.body_value().is_ok());
    assert!(
        bare.body_value().is_err(),
        "a body never restored is an error, not a guess"
    );
}

/// Prepares what a scan of `b` renders first, as `prepare_rendered` does, and keeps it.
fn prepared_now(cache: &mut DesiredCache, s: &State, resolved: &Arc<Resolved>) -> Arc<Prepared> {
    let scan = cache.scan(s, "b");
    let (version, d) = scan.rendered.into_iter().next().expect("web is rendered");
    let (manifest, identity) = identity(&d).expect("a manifest");
    let key = cache.key_of(&d.key);
    let p = prepared_as(&d, manifest, identity, (key.clone(), resolved.clone()));
    let p = Arc::new(cache.keep_id(p.expect("prepared")));
    cache.insert(key, version, Entry::Ready(p.clone()));
    p
}

/// A new version of an object is prepared under the key and the id its entry holds: the live
/// cache keys the object's copy by that id, and a second copy would last as long as the object.
#[test]
fn an_object_prepared_again_keeps_its_key_and_its_id() {
    let (mut s, mut i) = two_ready_clusters();
    let resolved = deployments();
    let mut cache = DesiredCache::default();
    apply(&mut s, &mut i, put("2"));
    let first = prepared_now(&mut cache, &s, &resolved);
    apply(&mut s, &mut i, put("3"));
    let second = prepared_now(&mut cache, &s, &resolved);
    assert_ne!(second.hash, first.hash, "a new manifest");
    assert!(Arc::ptr_eq(&second.key, &first.key));
    assert!(second.id.shares(&first.id));
    assert!(Arc::ptr_eq(second.id.live_type(), &resolved.live_type));
    assert_eq!(
        cache
            .items
            .get_key_value(&*first.key)
            .map(|(k, _)| Arc::strong_count(k)),
        Some(3),
        "the entry, and the two manifests this test holds"
    );
    // An id naming another member object is its own.
    let mut other = (*second).clone();
    other.id = LiveId::new("apps/v1", "Deployment", "ns", "api");
    assert_eq!(cache.keep_id(other).id.name(), "api");
}
