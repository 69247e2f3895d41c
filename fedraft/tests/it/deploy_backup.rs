//! Backup and restore on real processes: `fedraft backup -o FILE` through a follower's API while
//! the cluster is live, `fedraft restore` seeding three fresh data directories of a NEW cluster
//! (new cluster id, new ports), and the restored cluster serving the same state: the same state
//! hash on every node, every object present, and new writes continuing after the backup's
//! resource versions. Also: only admins may take backups, and a restore never touches a data
//! directory that holds data.

use std::time::{Duration, Instant};

use crate::deploy_common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_then_restore_into_a_new_cluster_keeps_the_state_hash() {
    let root = tempfile::tempdir().unwrap();
    let mut old = Cluster::layout(
        root.path(),
        "old",
        &Layout {
            nodes: 3,
            ..layout()
        },
    );
    old.start_all();
    old.wait_all_ready(Duration::from_secs(60)).await;
    register_cluster(&old, 0, "dc1").await;
    register_cluster(&old, 1, "dc2").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    for i in 0..20 {
        put_object_retrying(&old, i % 3, "shop", &format!("web-{i}"), deadline)
            .await
            .unwrap();
    }

    // Operators may read status but not take backups.
    let r = old
        .http
        .get(old.url(1, "/v1/admin/backup"))
        .bearer_auth(OPERATOR)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    let file = root.path().join("fedraft.backup");
    let (code, out, err) = old.cli(1, &["backup", "-o", file.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{err}");
    let hash = out
        .split("state hash ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .unwrap()
        .to_string();
    assert_eq!(hash.len(), 64, "{out}");
    let header: serde_json::Value = {
        let bytes = std::fs::read(&file).unwrap();
        let line = bytes.split(|b| *b == b'\n').nth(1).unwrap().to_vec();
        serde_json::from_slice(&line).unwrap()
    };
    assert_eq!(header["stateHash"], hash.as_str());
    let applied = header["appliedIndex"].as_u64().unwrap();
    drop(old);

    // The new cluster: other ports, another cluster id, no ticks so the state stays exactly the
    // backup's until someone writes.
    let mut new = Cluster::layout(
        root.path(),
        "new",
        &Layout {
            nodes: 3,
            cluster_id: "fedraft-restored".into(),
            raft: vec!["tick_interval_ms = 3600000".into()],
            ..layout()
        },
    );
    let mut args = vec!["restore", "--from", file.to_str().unwrap()];
    let configs: Vec<String> = new
        .nodes
        .iter()
        .map(|n| n.config.display().to_string())
        .collect();
    for c in &configs {
        args.extend(["--config", c.as_str()]);
    }
    let (code, out, err) = new.cli(0, &args, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("seeded").count(), 3, "{out}");
    // A second restore into the now-populated directories is refused.
    let (code, _, err) = new.cli(0, &args, &[]);
    assert_ne!(code, 0);
    assert!(err.contains("not empty"), "{err}");

    new.start_all();
    new.wait_all_ready(Duration::from_secs(60)).await;
    for i in 0..3 {
        let st = new.get(i, "/v1/status").await.unwrap();
        assert_eq!(st["stateHash"], hash.as_str(), "node {}: {st}", i + 1);
        assert_eq!(st["appliedIndex"], applied);
        assert_eq!(st["clusterId"], "fedraft-restored");
    }
    let objs = new.get(2, "/v1/namespaces/shop/objects").await.unwrap();
    assert_eq!(objs["items"].as_array().unwrap().len(), 20, "{objs}");
    let clusters = new.get(1, "/v1/clusters").await.unwrap();
    assert_eq!(clusters["items"].as_array().unwrap().len(), 2);

    // The restored cluster takes writes; resource versions continue after the backup's.
    let deadline = Instant::now() + Duration::from_secs(30);
    let rv = put_object_retrying(&new, 1, "shop", "after-restore", deadline)
        .await
        .unwrap();
    assert!(rv > applied, "rv {rv} <= {applied}");
}
