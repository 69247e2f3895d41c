//! `fedraft bench fleet` at CI size: three nodes and 30 simulated clusters in 5 regions
//! converge 300 objects (the bench's mix of Divided, spread and Duplicated workloads,
//! ConfigMaps and Services); every member then holds exactly what fedraft placed (the bench
//! compares each member's managed objects with fedraft's placement and fails on any
//! difference); a region of 6 clusters goes dark, its workloads are re-placed without taking a
//! replica off a healthy cluster, and the members agree with fedraft again; then 60 % of the
//! fleet goes dark at once and the failover brake holds every replica where it is; healed, the
//! fleet takes half as many objects again and the members agree once more. Ownership spreads
//! over the nodes before anything is measured.
//! Correctness, not speed: the figures of a real run come from the command in
//! docs/performance.md.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_fedraft");

#[test]
fn a_small_fleet_converges_exactly_and_survives_a_dark_region() {
    let _slot = fedraft_testkit::heavy_slot();
    let dir = fedraft_testkit::temp_dir("fleet");
    let json = dir.path().join("fleet.json");
    let done = Command::new(BIN)
        .args(["bench", "fleet", "--clusters", "30", "--objects", "300"])
        .args([
            "--regions",
            "5",
            "--steady-secs",
            "5",
            "--steady-rate",
            "20",
            "--writers",
            "8",
            "--settle-secs",
            "2",
        ])
        .args(["--grace-secs", "5", "--failure-secs", "4"])
        .args(["--converge-timeout-secs", "180", "--nodes", "2"])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&done.stdout).to_string();
    let err = String::from_utf8_lossy(&done.stderr);
    eprintln!("{out}");
    assert!(done.status.success(), "{out}\n{err}");
    let settled = [
        "after convergence",
        "after the region went dark",
        "after the further objects",
    ];
    for when in settled {
        let line = format!("members hold exactly what fedraft placed ({when})");
        assert!(out.contains(&line), "missing {line:?}:\n{out}");
    }
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["errors"], serde_json::json!([]), "{report}");
    assert_eq!(report["dark"]["movedFromHealthy"], 0, "{report}");
    assert!(report["dark"]["affected"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(report["distribution"]["missing"], 0, "{report}");
    // Measured with ownership spread over the nodes, each owner's latencies apart.
    let notes = report["notes"].as_array().unwrap();
    assert!(
        notes
            .iter()
            .any(|n| n.as_str().unwrap().starts_with("ownership spread")),
        "{report}"
    );
    let by_owner = report["distribution"]["byOwner"].as_object().unwrap();
    assert!(!by_owner.is_empty(), "{report}");
    assert!(by_owner.keys().all(|o| o.starts_with("node")), "{report}");
    // 60 % of the fleet dark at once: the brake holds every replica, then lets go.
    let brake = &report["brake"];
    assert_eq!(brake["dark"], 18, "{report}");
    assert_eq!(brake["moved"], 0, "{report}");
    assert!(brake["notReady"].as_u64().unwrap() > 15, "{report}");
    assert!(brake["heldS"].as_f64().unwrap() >= 15.0, "{report}");
    // The further objects' memory figure is there (its size is a large run's to judge).
    assert_eq!(report["memoryKiB"]["furtherObjects"], 150, "{report}");
    assert!(
        report["memoryKiB"]["perFurtherObject"]["held"].is_f64(),
        "{report}"
    );
    // Every object placed somewhere: about two member objects per federated object (300).
    let member_objects = report["memberObjects"].as_u64().unwrap();
    assert!((450..1200).contains(&member_objects), "{report}");
}
