//! Two tenants on one simulated member: tenant A's objects, namespaces and cluster-scoped
//! attempts never touch tenant B's namespace or anything cluster-scoped; an override that would
//! rename an object only on a cluster labelled later is refused by the executor (no write, a
//! status message); and placing, then removing, a `v1/Namespace` object prunes neither tenant's
//! namespace.

use std::time::Duration;

use crate::common::local::LocalNode;
use crate::common::*;
use fedraft_core::admission::{Actor, AdmissionPolicy};
use fedraft_core::command::Command;
use fedraft_core::model::{Health, ObjectSpec, TenantSpec};
use fedraft_core::state::{Outcome, RejectCode};
use fedraft_executors::ExecutorSet;
use fedraft_kubesim::SimHandle;
use k8s_openapi::api::core::v1::Namespace;
use serde_json::{json, Value};

const LIMIT: Duration = Duration::from_secs(30);

fn tenant(name: &str, ns: &str) -> Command {
    Command::PutTenant(TenantSpec {
        name: name.into(),
        namespaces: vec![ns.into()],
        quota: Default::default(),
        slice_size: None,
        members: vec![],
    })
}

fn spec(template: Value, overrides: Value) -> ObjectSpec {
    serde_json::from_value(json!({
        "template": template.to_string(),
        "overrides": overrides,
    }))
    .unwrap()
}

fn refused(node: &LocalNode, actor: &str, command: Command) -> RejectCode {
    match node.apply(actor, command).outcome {
        Outcome::Rejected(r) => r.code,
        other => panic!("accepted: {other:?}"),
    }
}

async fn namespaces(sim: &SimHandle) -> Vec<String> {
    let api: kube::Api<Namespace> = kube::Api::all(kube_client(sim));
    let list = api.list(&Default::default()).await.unwrap();
    list.items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_stay_in_their_namespaces_on_a_member() {
    init_tracing();
    let dc1 = start_sim("dc1").await;
    let node = LocalNode::new();
    node.must(register(cluster_spec("dc1", &dc1, "east")));
    node.must(tenant("a", "team-a"));
    node.must(tenant("b", "team-b"));
    let a = Actor::tenant_actor("a", "alice");
    let b = Actor::tenant_actor("b", "bob");
    let set = ExecutorSet::start(node.clone(), executor_config());
    eventually(LIMIT, "dc1 Ready", || {
        let ok = node.read(|s| s.cluster("dc1").map(|c| c.status.health) == Some(Health::Ready));
        async move { ok.then_some(()) }
    })
    .await;

    // B's workload.
    let web = deployment("web", 1, "nginx:1");
    assert!(node
        .apply(&b, put("team-b", "web", spec(web.clone(), json!([]))))
        .outcome
        .is_accepted());
    eventually(LIMIT, "team-b/web", || async {
        get_deployment(&dc1, "team-b", "web").await.map(|_| ())
    })
    .await;

    // A's attempts on B's namespace and on cluster-scoped kinds: refused at apply.
    let attempts = [
        put("team-b", "web", spec(web.clone(), json!([]))),
        put(
            "team-a",
            "ns",
            spec(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}}),
                json!([]),
            ),
        ),
        put(
            "team-a",
            "crb",
            spec(
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": {"name": "mine"},
                    "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"}}),
                json!([]),
            ),
        ),
        Command::DeleteObject {
            namespace: "team-b".into(),
            name: "web".into(),
            expected_version: None,
        },
    ];
    for cmd in attempts {
        assert_eq!(refused(&node, &a, cmd), RejectCode::Forbidden);
    }
    // An override moving A's object into B's namespace: refused as a changed identity.
    let moving = json!([{"patches": [{"op": "add", "path": "/metadata/namespace",
        "value": "\"team-b\""}]}]);
    assert_eq!(
        refused(&node, &a, put("team-a", "web", spec(web.clone(), moving))),
        RejectCode::FailedPrecondition
    );

    // An override chain that renames the object only on clusters labelled `region: evil`
    // (none yet): admission cannot see it, the executor must refuse it once dc1 is labelled.
    let sneaky = json!([
        {"clusterSelector": {"matchLabels": {"region": "evil"}},
         "patches": [{"op": "add", "path": "/metadata/labels/x", "value": "\"y\""}]},
        {"clusterSelector": {"matchLabels": {"env": "prod"}},
         "patches": [{"op": "remove", "path": "/metadata/labels/x"}]},
        {"clusterSelector": {"matchLabels": {"region": "evil"}},
         "patches": [{"op": "test", "path": "/metadata/labels/x", "value": "\"y\""},
                     {"op": "replace", "path": "/metadata/name", "value": "\"web\""}]},
    ]);
    let own = deployment("own", 1, "nginx:1");
    assert!(node
        .apply(&a, put("team-a", "own", spec(own, sneaky)))
        .outcome
        .is_accepted());
    eventually(LIMIT, "team-a/own", || async {
        get_deployment(&dc1, "team-a", "own").await.map(|_| ())
    })
    .await;
    let mut evil = cluster_spec("dc1", &dc1, "evil");
    evil.labels.insert("region".into(), "evil".into());
    node.must(Command::UpdateCluster {
        spec: evil,
        expected_version: None,
    });
    eventually(LIMIT, "the executor refuses the renamed manifest", || {
        let msg = node.read(|s| {
            s.object("team-a", "own")
                .and_then(|o| o.status.clusters.first().and_then(|p| p.message.clone()))
        });
        async move { msg.filter(|m| m.contains("admitted")) }
    })
    .await;
    assert!(get_deployment(&dc1, "team-a", "web").await.is_none());
    let web_b = get_deployment(&dc1, "team-b", "web").await.unwrap();
    assert_eq!(
        web_b["metadata"]["annotations"]["fedraft.io/object"],
        "team-b/web"
    );

    // An admin places a namespace object, then removes it: only it goes, the tenants'
    // namespaces (created by fedraft for their placements) stay, with B's workload.
    node.must(Command::SetAdmissionPolicy(AdmissionPolicy {
        cluster_scoped_kinds: vec!["Namespace".into()],
        ..AdmissionPolicy::default()
    }));
    let infra = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "infra"}});
    node.must(put("admin", "infra", spec(infra, json!([]))));
    eventually(LIMIT, "namespace infra", || async {
        namespaces(&dc1)
            .await
            .contains(&"infra".to_string())
            .then_some(())
    })
    .await;
    node.must(Command::DeleteObject {
        namespace: "admin".into(),
        name: "infra".into(),
        expected_version: None,
    });
    eventually(LIMIT, "namespace infra removed", || async {
        (!namespaces(&dc1).await.contains(&"infra".to_string())).then_some(())
    })
    .await;
    // A few more passes: nothing else may go.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let left = namespaces(&dc1).await;
    for ns in ["team-a", "team-b"] {
        assert!(left.contains(&ns.to_string()), "{ns} pruned: {left:?}");
    }
    assert!(get_deployment(&dc1, "team-b", "web").await.is_some());
    set.shutdown().await;
}
