//! A progressive rollout over a real three-node raft group and three simulated members (one
//! region each, one wave each): a leader kill mid-rollout and the rollout still completes; a
//! release whose image never turns ready on one member pauses on that wave and leaves the next
//! member on the old version; undo restores the updated members; promote finishes a rollout at
//! once. Gates are decided by core from what the executors report.

use std::time::Duration;

use crate::common::raft::{must, start_group, wait_leader};
use crate::common::*;
use fedraft_core::command::{Command, RolloutAction};
use fedraft_core::model::{Health, ObjectSpec};
use fedraft_core::rollout::{Phase, RolloutStrategy};
use fedraft_executors::ExecutorSet;
use fedraft_kubesim::faults::FaultSettings;
use fedraft_kubesim::SimHandle;
use fedraft_raft::FedNode;
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(60);

fn spec(image: &str) -> ObjectSpec {
    serde_json::from_value(json!({
        "template": deployment("web", 2, image).to_string(),
        "placement": {"replicas": {"mode": "Duplicated"}},
    }))
    .unwrap()
}

fn strategy() -> RolloutStrategy {
    serde_json::from_value(json!({
        "type": "Progressive", "grouping": {"label": "region"},
        "minSuccessSeconds": 1, "progressDeadlineSeconds": 6,
    }))
    .unwrap()
}

fn put_rollout(image: &str) -> Command {
    Command::PutObjectWithRollout {
        namespace: "default".into(),
        name: "web".into(),
        spec: spec(image),
        rollout: strategy(),
        expected_version: None,
    }
}

fn control(action: RolloutAction) -> Command {
    Command::Rollout {
        namespace: "default".into(),
        name: "web".into(),
        action,
    }
}

async fn image_on(sim: &SimHandle) -> Option<String> {
    get_deployment(sim, "default", "web")
        .await
        .map(|d| image_of(&d))
}

/// Waits until the members run exactly `images` (in order dc1, dc2, dc3).
async fn members_run(sims: &[SimHandle], images: [&str; 3], what: &str) {
    eventually(LIMIT, what, || async {
        for (sim, want) in sims.iter().zip(images) {
            if image_on(sim).await.as_deref() != Some(want) {
                return None;
            }
        }
        Some(())
    })
    .await;
}

async fn phase_is(node: &FedNode, phase: Phase, what: &str) {
    eventually(LIMIT, what, || {
        let p = node.read_stale(|s| s.rollout("default", "web").map(|r| r.phase));
        async move { (p == Some(phase)).then_some(()) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progressive_rollout_pauses_undoes_promotes_and_survives_a_leader_kill() {
    let _slot = fedraft_testkit::heavy_slot();
    init_tracing();
    let root = tempfile::tempdir().unwrap();
    let sims = vec![
        start_sim("dc1").await,
        start_sim("dc2").await,
        start_sim("dc3").await,
    ];
    let mut nodes = start_group(&root, 3).await;
    let mut sets: Vec<Option<ExecutorSet>> = nodes
        .iter()
        .map(|n| Some(ExecutorSet::start(n.node.clone(), executor_config())))
        .collect();
    let any = nodes[0].node.clone();
    for (name, sim, region) in [
        ("dc1", &sims[0], "a"),
        ("dc2", &sims[1], "b"),
        ("dc3", &sims[2], "c"),
    ] {
        must(&any, register(cluster_spec(name, sim, region))).await;
    }
    for c in ["dc1", "dc2", "dc3"] {
        eventually(LIMIT, &format!("{c} Ready"), || {
            let h = any.read_stale(|s| s.cluster(c).map(|x| x.status.health));
            async move { (h == Some(Health::Ready)).then_some(()) }
        })
        .await;
    }
    must(&any, put_rollout("nginx:1")).await;
    members_run(&sims, ["nginx:1"; 3], "revision 1 everywhere").await;

    // Revision 2 rolls out slowly on dc1 (one replica every 400 ms); the leader dies during
    // the first wave, and the new leader finishes the rollout from where the log says it is.
    sims[0]
        .admin()
        .set_faults(FaultSettings {
            rollout_step_ms: 400,
            ..FaultSettings::default()
        })
        .unwrap();
    must(&any, put_rollout("nginx:2")).await;
    members_run(&sims, ["nginx:2", "nginx:1", "nginx:1"], "wave 1 on dc1").await;
    let leader = wait_leader(&nodes, LIMIT).await;
    let i = nodes.iter().position(|n| n.id == leader).unwrap();
    let old = nodes.remove(i);
    let old_set = sets.remove(i);
    old.stop().await;
    if let Some(s) = old_set {
        s.shutdown().await;
    }
    wait_leader(&nodes, LIMIT).await;
    let any = nodes[0].node.clone();
    phase_is(
        &any,
        Phase::Complete,
        "revision 2 complete after the leader kill",
    )
    .await;
    members_run(&sims, ["nginx:2"; 3], "revision 2 everywhere").await;

    // A release that never turns ready on dc2: wave 2 misses its deadline, the rollout pauses
    // and dc3 keeps revision 2.
    sims[1]
        .admin()
        .set_faults(FaultSettings {
            never_ready_images: vec!["nginx:bad".into()],
            ..FaultSettings::default()
        })
        .unwrap();
    must(&any, put_rollout("nginx:bad")).await;
    phase_is(&any, Phase::Paused, "paused on the bad wave").await;
    let reason = any.read_stale(|s| s.rollout("default", "web").map(|r| r.reason.clone()));
    assert!(
        reason.as_deref().unwrap_or("").contains("dc2"),
        "{reason:?}"
    );
    members_run(
        &sims,
        ["nginx:bad", "nginx:bad", "nginx:2"],
        "dc3 left on the old version",
    )
    .await;
    let verdict = any.read_stale(|s| {
        s.workload_status("default", "web")
            .and_then(|m| m.get("dc2"))
            .map(|w| (w.observed.revision, w.verdict))
    });
    assert_eq!(
        verdict,
        Some((Some(3), fedraft_core::rollout::Verdict::Progressing))
    );

    // Undo: the updated members go back to revision 2.
    must(&any, control(RolloutAction::Undo)).await;
    members_run(&sims, ["nginx:2"; 3], "undo restored revision 2").await;

    // Revision 4, promoted at once.
    must(&any, put_rollout("nginx:4")).await;
    must(&any, control(RolloutAction::Promote)).await;
    members_run(&sims, ["nginx:4"; 3], "promote finished revision 4").await;
    let story: Vec<String> = any.read_stale(|s| {
        s.rollout("default", "web")
            .map(|r| r.events.iter().map(|e| e.message.clone()).collect())
            .unwrap_or_default()
    });
    for needle in [
        "rollout of revision 2 complete",
        "paused: wave 2/3 failed on dc2",
        "rolled back to revision 2",
        "promoted by admin",
    ] {
        assert!(
            story.iter().any(|s| s.contains(needle)),
            "{needle}: {story:#?}"
        );
    }

    for s in sets.into_iter().flatten() {
        s.shutdown().await;
    }
    for n in nodes {
        n.stop().await;
    }
}
