//! Unit tests of wave planning, verdicts and the gate.

use std::collections::BTreeMap;

use super::gate::{self, Observed};
use super::*;

fn labels(region: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("region".to_string(), region.to_string())])
}

fn progressive(grouping: WaveGrouping, concurrency: Concurrency, canary: u32) -> RolloutStrategy {
    RolloutStrategy {
        type_: RolloutType::Progressive,
        grouping,
        max_concurrency: concurrency,
        canary,
        ..Default::default()
    }
}

#[test]
fn waves_by_label_canary_and_concurrency() {
    let (eu, us) = (labels("eu"), labels("us"));
    let none = BTreeMap::new();
    let placed = [("a", &us), ("b", &eu), ("c", &eu), ("d", &none), ("e", &us)];
    let all = RolloutStrategy::default();
    assert_eq!(
        waves::plan(&all, &placed),
        vec![vec!["a", "b", "c", "d", "e"]]
    );
    let by_region = progressive(
        WaveGrouping::Label("region".into()),
        Concurrency::Count(0),
        0,
    );
    assert_eq!(
        waves::plan(&by_region, &placed),
        vec![vec!["b", "c"], vec!["a", "e"], vec!["d"]]
    );
    let canary = progressive(
        WaveGrouping::Label("region".into()),
        Concurrency::Count(0),
        1,
    );
    assert_eq!(
        waves::plan(&canary, &placed),
        vec![vec!["b"], vec!["c"], vec!["a", "e"], vec!["d"]]
    );
    // 40% of five clusters: two at a time.
    let pct = progressive(WaveGrouping::ClusterOrder, Concurrency::Percent(40), 0);
    assert_eq!(
        waves::plan(&pct, &placed),
        vec![vec!["a", "b"], vec!["c", "d"], vec!["e"]]
    );
    let groups = progressive(
        WaveGrouping::Groups(vec![vec!["e".into(), "x".into()], vec!["c".into()]]),
        Concurrency::Count(1),
        0,
    );
    assert_eq!(
        waves::plan(&groups, &placed),
        vec![vec!["e"], vec!["c"], vec!["a"], vec!["b"], vec!["d"]]
    );
    assert!(waves::plan(&by_region, &[]).is_empty());
}

#[test]
fn strategy_validation_and_json() {
    let s: RolloutStrategy = serde_json::from_value(serde_json::json!({
        "type": "Progressive", "grouping": {"label": "region"},
        "maxConcurrency": {"percent": 50}, "canary": 1, "minSuccessSeconds": 30,
        "maxFailures": 1, "autoRollback": true
    }))
    .unwrap();
    assert_eq!(s.progress_deadline_seconds, 600);
    assert!(s.validate("rollout").is_ok());
    let bad = RolloutStrategy {
        max_concurrency: Concurrency::Percent(0),
        ..s.clone()
    };
    assert_eq!(
        bad.validate("rollout").unwrap_err().field,
        "rollout.maxConcurrency.percent"
    );
    let twice = RolloutStrategy {
        grouping: WaveGrouping::Groups(vec![vec!["a".into()], vec!["a".into()]]),
        ..s
    };
    assert!(twice.validate("rollout").is_err());
    let bytes = bincode::serde::encode_to_vec(&twice, bincode::config::standard()).unwrap();
    let (back, _): (RolloutStrategy, usize) =
        bincode::serde::decode_from_slice(&bytes, bincode::config::standard()).unwrap();
    assert_eq!(back, twice);
}

fn obs(kind: &str, gen: (i64, i64), counts: (u32, u32, u32, u32)) -> WorkloadObservation {
    WorkloadObservation {
        kind: crate::rollout::word(kind),
        revision: Some(1),
        generation: gen.0,
        observed_generation: gen.1,
        replicas: counts.0,
        updated: counts.1,
        ready: counts.2,
        available: counts.3,
        conditions: Arc::new([]),
        job: JobState::None,
    }
}

#[test]
fn verdicts_by_kind() {
    assert_eq!(
        verdict(&obs("Deployment", (2, 2), (3, 3, 3, 3))),
        Verdict::Healthy
    );
    assert_eq!(
        verdict(&obs("Deployment", (3, 2), (3, 3, 3, 3))),
        Verdict::Progressing
    );
    assert_eq!(
        verdict(&obs("StatefulSet", (1, 1), (3, 3, 2, 2))),
        Verdict::Progressing
    );
    let mut stuck = obs("Deployment", (2, 2), (3, 1, 2, 2));
    stuck.conditions = Arc::new([WorkloadCondition {
        type_: "Progressing".into(),
        status: false,
        reason: "ProgressDeadlineExceeded".into(),
    }]);
    assert_eq!(verdict(&stuck), Verdict::Degraded);
    let mut job = obs("Job", (1, 0), (1, 0, 0, 0));
    job.job = JobState::Running;
    assert_eq!(verdict(&job), Verdict::Progressing);
    job.job = JobState::Failed;
    assert_eq!(verdict(&job), Verdict::Degraded);
    job.job = JobState::Complete;
    assert_eq!(verdict(&job), Verdict::Healthy);
    assert_eq!(
        verdict(&obs("ConfigMap", (0, 0), (0, 0, 0, 0))),
        Verdict::Healthy
    );
    // A kind fedraft does not read, with the strategy's health rule reported by the executor.
    let mut custom = obs("Certificate", (0, 0), (0, 0, 0, 0));
    let mut rule = WorkloadCondition {
        type_: HEALTH_RULE_CONDITION.into(),
        status: false,
        reason: "Pending".into(),
    };
    custom.conditions = Arc::new([rule.clone()]);
    assert_eq!(verdict(&custom), Verdict::Progressing);
    rule.status = true;
    custom.conditions = Arc::new([rule]);
    assert_eq!(verdict(&custom), Verdict::Healthy);
}

#[test]
fn health_rules_are_checked() {
    let rule = |path: &str, value: &str| RolloutStrategy {
        health_rule: Some(HealthRule {
            path: path.into(),
            value: value.into(),
        }),
        ..RolloutStrategy::default()
    };
    assert!(rule("/status/phase", "Ready").validate("rollout").is_ok());
    let e = rule("status.phase", "Ready").validate("rollout").err();
    assert_eq!(
        e.map(|e| e.field),
        Some("rollout.healthRule.path".to_string())
    );
    let long = "x".repeat(MAX_HEALTH_RULE_BYTES + 1);
    let e = rule("/status/phase", &long).validate("rollout").err();
    assert_eq!(
        e.map(|e| e.field),
        Some("rollout.healthRule.value".to_string())
    );
    let parsed: RolloutStrategy = serde_json::from_value(serde_json::json!({
        "healthRule": {"path": "/status/phase", "value": "Ready"}
    }))
    .expect("parses");
    assert_eq!(parsed, rule("/status/phase", "Ready"));
}

fn status(revision: u32, v: Verdict) -> WorkloadStatus {
    let mut o = obs("Deployment", (1, 1), (1, 1, 1, 1));
    o.revision = Some(revision);
    WorkloadStatus {
        observed: o,
        verdict: v,
        verdict_since_ms: 0,
    }
}

#[test]
fn degraded_past_the_budget_rolls_back_at_once() {
    let strategy = RolloutStrategy {
        auto_rollback: true,
        ..progressive(WaveGrouping::ClusterOrder, Concurrency::Count(1), 0)
    };
    let mut rec = RolloutRecord::new(strategy, "t1", 1);
    rec.push_revision("t2", 2);
    gate::start(
        &mut rec,
        2,
        vec![vec!["a".into()], vec!["b".into()]],
        2,
        1000,
    );
    let placed = ["a", "b"];
    let degraded = WorkloadStatuses::from_iter([("a".to_string(), status(2, Verdict::Degraded))]);
    let observed = Observed {
        placed: &placed,
        status: Some(&degraded),
    };
    assert!(gate::step(&mut rec, &observed, 3, 2000));
    assert_eq!(rec.phase, Phase::RolledBack);
    assert_eq!((rec.revision_for("a"), rec.revision_for("b")), (1, 1));
    // A report of the old revision does not pass a gate of the new one.
    let mut rec = RolloutRecord::new(RolloutStrategy::default(), "t1", 1);
    rec.push_revision("t2", 2);
    gate::start(&mut rec, 2, vec![vec!["a".into()]], 2, 1000);
    let old = WorkloadStatuses::from_iter([("a".to_string(), status(1, Verdict::Healthy))]);
    let observed = Observed {
        placed: &placed,
        status: Some(&old),
    };
    assert!(!gate::step(&mut rec, &observed, 3, 2000));
    assert_eq!(rec.phase, Phase::Progressing);
}

#[test]
fn revision_history_is_bounded_and_keeps_stable_and_target() {
    let mut rec = RolloutRecord::new(RolloutStrategy::default(), "t1", 1);
    for i in 2..=25u32 {
        rec.push_revision(&format!("t{i}"), u64::from(i));
    }
    assert_eq!(rec.revisions.len(), MAX_REVISIONS);
    assert!(rec.revision(1).is_some(), "stable kept");
    assert_eq!(rec.latest().number, 25);
    assert_eq!(rec.previous(25).map(|r| r.number), Some(24));
}

#[test]
fn workload_statuses_encode_as_the_ordered_map_they_replaced() {
    let statuses = [
        ("b".to_string(), status(2, Verdict::Degraded)),
        ("a".to_string(), status(1, Verdict::Healthy)),
    ];
    let old: BTreeMap<String, WorkloadStatus> = statuses.clone().into_iter().collect();
    let new: WorkloadStatuses = statuses.into_iter().collect();
    let cfg = bincode::config::standard();
    let (old_bytes, new_bytes) = (
        bincode::serde::encode_to_vec(&old, cfg).unwrap(),
        bincode::serde::encode_to_vec(&new, cfg).unwrap(),
    );
    assert_eq!(old_bytes, new_bytes, "snapshots and state hashes unchanged");
    let (decoded, _): (WorkloadStatuses, usize) =
        bincode::serde::decode_from_slice(&old_bytes, cfg).unwrap();
    assert_eq!(decoded, new);
    assert_eq!(decoded.keys().collect::<Vec<_>>(), ["a", "b"]);
}

#[test]
fn statuses_take_no_more_room_than_they_need_and_stay_sorted() {
    let mut per = WorkloadStatuses::new();
    for (cluster, revision) in [("b", 1), ("a", 2)] {
        insert_status(&mut per, cluster.into(), status(revision, Verdict::Healthy));
    }
    assert_eq!(per.get("a").map(|s| s.observed.revision), Some(Some(2)));
    let sorted = per.into_tuple_vec();
    assert_eq!(sorted.capacity(), 2);
    assert_eq!(sorted[0].0, "a");
}
