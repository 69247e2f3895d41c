//! Karmada's `placement.workloadAffinity` through the door: templates of one group (the same
//! value of a label) co-located, kept apart, or both; a template without the label left free;
//! the refusal when no cluster is left, naming the rule and the peer; and snapshots.

use std::collections::BTreeSet;

use fedraft_core::command::Command;
use fedraft_core::model::ObjectKey;
use fedraft_core::state::State;
use proptest::prelude::*;
use serde_json::{json, Value};

use crate::state_support::Harness;

fn put(v: Value) -> Command {
    Command::PutResource {
        manifest: v.to_string(),
        expected_version: None,
    }
}

/// A propagation policy of namespace `default` for `kind` of `api_version`, on `clusters`, one
/// cluster per template (spread over clusters, at most one), with `workload` as its
/// `workloadAffinity`.
fn policy(api_version: &str, kind: &str, clusters: &[&str], workload: Value) -> Value {
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "grouped", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": api_version, "kind": kind}],
            "placement": {"clusterAffinity": {"clusterNames": clusters},
                "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1}],
                "workloadAffinity": workload}}})
}

fn job(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "trainer", "image": "training:latest"}]}}}})
}

fn flink(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"image": "flink:1.17", "flinkVersion": "v1_17", "jobManager": {"replicas": 1}}})
}

fn deployment(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}}})
}

fn clusters_of(h: &Harness, object: &str) -> Vec<String> {
    h.placement("default", object).into_keys().collect()
}

fn fleet() -> Harness {
    let mut h = Harness::new();
    h.fleet(&["member1", "member2", "member3"]);
    h
}

const ALL: [&str; 3] = ["member1", "member2", "member3"];

#[test]
fn a_group_follows_its_first_workload_and_other_groups_go_their_own_way() {
    let mut h = fleet();
    let wa = json!({"affinity": {"groupByLabelKey": "app.group"}});
    h.ok(put(policy("batch/v1", "Job", &ALL, wa)));
    // The first of the group lands on member3 while the others are cordoned; a job alone
    // then takes the first cluster by name, so it is the rule that keeps the group on member3.
    for c in ["member1", "member2"] {
        h.ok(Command::Cordon { name: c.into() });
    }
    h.ok(put(job(
        "training-job-1",
        json!({"app.group": "ml-training"}),
    )));
    let first = clusters_of(&h, "job.batch:training-job-1");
    assert_eq!(first, ["member3"]);
    for c in ["member1", "member2"] {
        h.ok(Command::Uncordon { name: c.into() });
    }
    h.ok(put(job("solo", json!({"app.group": "solo"}))));
    assert_eq!(clusters_of(&h, "job.batch:solo"), ["member1"]);
    for i in 2..6 {
        let name = format!("training-job-{i}");
        h.ok(put(job(&name, json!({"app.group": "ml-training"}))));
        assert_eq!(
            clusters_of(&h, &format!("job.batch:{name}")),
            first,
            "{name}"
        );
    }
    let key = ObjectKey::new("default", "job.batch:training-job-2");
    let cause = h.state.policy_cause(&key).unwrap_or_default();
    assert!(
        cause.contains("workloadAffinity affinity by app.group"),
        "{cause}"
    );
    let decision = h
        .state
        .explain("default", "job.batch:training-job-2")
        .unwrap_or_else(|| panic!("no decision"));
    let others: Vec<String> = ALL
        .iter()
        .filter(|c| first[0] != **c)
        .map(|c| c.to_string())
        .collect();
    for d in &decision.dropped {
        assert!(others.contains(&d.cluster), "{d:?}");
        assert!(
            d.reason.describe().contains("workloadAffinity"),
            "{:?}",
            d.reason
        );
    }
    assert_eq!(decision.dropped.len(), 2);
}

#[test]
fn the_published_co_location_sample_places_both_jobs_alike() {
    let mut h = fleet();
    let mut p = policy(
        "batch/v1",
        "Job",
        &ALL,
        json!({"affinity": {"groupByLabelKey": "app.group"}}),
    );
    p["spec"]["placement"]
        .as_object_mut()
        .map(|o| o.remove("spreadConstraints"));
    p["spec"]["resourceSelectors"][0]["labelSelector"] =
        json!({"matchLabels": {"workload.type": "training"}});
    h.ok(put(p));
    for n in ["training-job-1", "training-job-2"] {
        let labels = json!({"app.group": "ml-training", "workload.type": "training"});
        h.ok(put(job(n, labels)));
        // Duplicated, as Karmada places a template without replicas: every allowed cluster.
        assert_eq!(clusters_of(&h, &format!("job.batch:{n}")), ALL);
    }
}

#[test]
fn anti_affine_workloads_take_different_clusters_until_none_is_left() {
    let mut h = fleet();
    let wa = json!({"antiAffinity": {"groupByLabelKey": "pipeline.id"}});
    let two = ["member1", "member2"];
    h.ok(put(policy(
        "flink.apache.org/v1beta1",
        "FlinkDeployment",
        &two,
        wa,
    )));
    let labels = json!({"pipeline.id": "payment-processing", "ha.enabled": "true"});
    h.ok(put(flink("flink-pipeline-primary", labels.clone())));
    h.ok(put(flink("flink-pipeline-backup", labels.clone())));
    let primary = clusters_of(
        &h,
        "flinkdeployment.flink.apache.org:flink-pipeline-primary",
    );
    let backup = clusters_of(&h, "flinkdeployment.flink.apache.org:flink-pipeline-backup");
    assert_eq!(primary.len(), 1);
    assert_eq!(backup.len(), 1);
    assert_ne!(primary, backup);
    // A third of the pipeline has no cluster left: unschedulable, saying which rule and who.
    h.ok(put(flink("flink-pipeline-third", labels)));
    let third = "flinkdeployment.flink.apache.org:flink-pipeline-third";
    assert!(clusters_of(&h, third).is_empty());
    let shortfall = h.obj("default", third).status.shortfall.clone();
    let message = shortfall.map(|s| s.message).unwrap_or_default();
    assert!(message.contains("workloadAffinity"), "{message}");
    assert!(message.contains("flink-pipeline-primary"), "{message}");
    assert!(message.contains("flink-pipeline-backup"), "{message}");
    assert!(
        message.contains("pipeline.id=payment-processing"),
        "{message}"
    );
    // Another pipeline, and a template without the label, are not held back by this one.
    h.ok(put(flink(
        "other-pipeline",
        json!({"pipeline.id": "fraud", "ha.enabled": "true"}),
    )));
    h.ok(put(flink("unlabelled", json!({"ha.enabled": "true"}))));
    for free in ["other-pipeline", "unlabelled"] {
        let name = format!("flinkdeployment.flink.apache.org:{free}");
        assert_eq!(clusters_of(&h, &name).len(), 1, "{free}");
        assert!(h.obj("default", &name).status.shortfall.is_none(), "{free}");
    }
    // When the backup leaves, the third is placed where it was, on its next decision.
    h.ok(Command::DeleteResource {
        key: fedraft_core::door::ResourceKey {
            group: "flink.apache.org".into(),
            kind: "FlinkDeployment".into(),
            namespace: "default".into(),
            name: "flink-pipeline-backup".into(),
        },
        expected_version: None,
    });
    let relabelled = json!({"pipeline.id": "payment-processing", "ha.enabled": "true",
        "note": "retry"});
    h.ok(put(flink("flink-pipeline-third", relabelled)));
    assert_eq!(clusters_of(&h, third), backup);
}

#[test]
fn combined_terms_co_locate_a_stack_and_separate_its_instances() {
    let mut h = fleet();
    let wa = json!({"affinity": {"groupByLabelKey": "app.stack"},
        "antiAffinity": {"groupByLabelKey": "app.instance"}});
    h.ok(put(policy("apps/v1", "Deployment", &ALL, wa)));
    let labels = |instance: &str| json!({"app.stack": "shop", "app.instance": instance});
    h.ok(put(deployment("shop-a", labels("a"))));
    h.ok(put(deployment("cart-a", labels("a"))));
    let a = clusters_of(&h, "deployment.apps:shop-a");
    assert_eq!(a.len(), 1);
    // Same stack, same instance: co-location wants a's cluster, separation forbids it.
    let cart = "deployment.apps:cart-a";
    assert!(clusters_of(&h, cart).is_empty());
    let message = h
        .obj("default", cart)
        .status
        .shortfall
        .clone()
        .map(|s| s.message)
        .unwrap_or_default();
    assert!(message.contains("app.instance=a"), "{message}");
    // Same stack, another instance: where the stack is (the anti-affinity peer is elsewhere).
    h.ok(put(deployment("shop-b", labels("b"))));
    assert_eq!(clusters_of(&h, "deployment.apps:shop-b"), a);
}

#[test]
fn a_relabelled_template_is_placed_again_and_a_snapshot_restores_the_same_state() {
    let mut h = fleet();
    let wa = json!({"antiAffinity": {"groupByLabelKey": "pipeline.id"}});
    h.ok(put(policy("apps/v1", "Deployment", &ALL, wa)));
    h.ok(put(deployment("one", json!({"pipeline.id": "p"}))));
    h.ok(put(deployment("two", json!({"pipeline.id": "q"}))));
    let one = clusters_of(&h, "deployment.apps:one");
    let two = clusters_of(&h, "deployment.apps:two");
    // Joining one's group moves two off one's cluster, though its placement did not change.
    h.ok(put(deployment("two", json!({"pipeline.id": "p"}))));
    let moved = clusters_of(&h, "deployment.apps:two");
    assert_eq!(moved.len(), 1);
    assert_ne!(moved, one);
    if two != one {
        assert_eq!(moved, two, "it stays where it was when that is allowed");
    }
    let restored = State::from_snapshot(&h.state.to_snapshot()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(restored.state_hash(), h.state.state_hash());
    assert_eq!(restored.door(), h.state.door());
    // The restored state reads the terms too: a third of the group avoids both.
    h.state = restored;
    h.ok(put(deployment("three", json!({"pipeline.id": "p"}))));
    let three = clusters_of(&h, "deployment.apps:three");
    assert_eq!(three.len(), 1);
    assert!(three != one && three != moved, "{three:?}");
}

#[test]
fn a_policy_that_gains_workload_affinity_places_its_templates_again() {
    let mut h = fleet();
    let mut alone = policy("apps/v1", "Deployment", &ALL, json!(null));
    alone["spec"]["placement"]
        .as_object_mut()
        .map(|o| o.remove("workloadAffinity"));
    h.ok(put(alone.clone()));
    // Four of one group on three clusters: two of them share one.
    let mut names = Vec::new();
    for i in 0..4 {
        let name = format!("w{i}");
        h.ok(put(deployment(&name, json!({"pipeline.id": "p"}))));
        names.push(name);
    }
    let placed = |h: &Harness| -> Vec<Vec<String>> {
        names
            .iter()
            .map(|n| clusters_of(h, &format!("deployment.apps:{n}")))
            .collect()
    };
    let before = placed(&h);
    assert!(before.iter().all(|c| c.len() == 1));
    let mut apart = alone;
    apart["spec"]["placement"]["workloadAffinity"] =
        json!({"antiAffinity": {"groupByLabelKey": "pipeline.id"}});
    h.ok(put(apart));
    // Re-decided in key order under the new rule: three clusters for four, one left out.
    let after = placed(&h);
    let used: Vec<&String> = after.iter().flatten().collect();
    let distinct: BTreeSet<&String> = used.iter().copied().collect();
    assert_eq!(used.len(), distinct.len(), "{after:?}");
    assert_eq!(distinct.len(), 3, "{after:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// However templates are spread over anti-affinity groups and in whatever order they are
    /// put, no two of one group share a cluster, and each is placed while its group has no
    /// more members than there are clusters.
    #[test]
    fn anti_affine_peers_never_share_a_cluster(groups in prop::collection::vec(0u8..3, 1..8)) {
        let mut h = fleet();
        let wa = json!({"antiAffinity": {"groupByLabelKey": "pipeline.id"}});
        h.ok(put(policy("apps/v1", "Deployment", &ALL, wa)));
        for (i, g) in groups.iter().enumerate() {
            h.ok(put(deployment(&format!("w{i}"), json!({"pipeline.id": format!("g{g}")}))));
        }
        for g in 0u8..3 {
            let members: Vec<usize> = (0..groups.len()).filter(|i| groups[*i] == g).collect();
            let mut seen = BTreeSet::new();
            for (n, i) in members.iter().enumerate() {
                let c = clusters_of(&h, &format!("deployment.apps:w{i}"));
                prop_assert_eq!(c.is_empty(), n >= ALL.len(), "w{} of g{}: {:?}", i, g, c);
                for cluster in c {
                    prop_assert!(seen.insert(cluster), "g{} shares a cluster", g);
                }
            }
        }
    }
}
