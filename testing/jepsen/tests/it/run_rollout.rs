//! The rollout workload under faults: a Deployment-like object Divided over the simulated members,
//! a new template every few seconds rolled out one member per wave, and drains and uncordons now
//! and then, under the kill, partition and member-dark nemeses. Each run must pass every checker,
//! the floor checker among them (ready replicas over members not dark never below the promised
//! floor, and no member running a revision the log did not roll out to it), and the floor verdict
//! must have judged samples. Runs are serialised with the other end-to-end runs; together about
//! two minutes.

use crate::run_nemeses::run;

#[test]
fn rollout_under_kill() {
    run("kill", "rollout", 30, 2, &[]);
}

#[test]
fn rollout_under_partition() {
    run("partition", "rollout", 30, 2, &[]);
}

#[test]
fn rollout_under_member_dark() {
    // One dark window past the failure threshold (8 s here) and the failover grace, then recovery.
    run(
        "member-dark",
        "rollout",
        36,
        5,
        &["--failure-threshold-s", "8"],
    );
}
