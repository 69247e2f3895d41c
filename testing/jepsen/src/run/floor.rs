//! What the floor checker needs of a rollout run, gathered: a sampler that reads every member
//! cluster's own view of the rollout workload (its Deployment's `status.readyReplicas` and the
//! template revision annotation fedraft stamps on it) into [`FloorSample`]s on the history's
//! clock, and, after the run, the rollout steps of the audit archive (which revision went to which
//! member at which log time) as a [`RolledOut`] map. [`judge`] runs `check::floor` on them and
//! builds the verdict document, with the floor it promised and why.
//!
//! It only reads (members directly, fedraft through `/v1/audit/explain`); it never decides a
//! verdict itself.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use super::api::{Api, Reply};
use super::rollout::{ALLOWED_UNAVAILABLE, REPLICAS, ROLLOUT_NAME, ROLLOUT_NS};
use crate::check::clock::DarkWindow;
use crate::check::floor::{check_floor, check_revisions, judged, FloorCheck, FloorSample};
use crate::check::floor::{MemberView, RolledOut};
use crate::check::Verdict;

/// The annotation fedraft stamps on a member's copy of an object with a rollout record: the
/// template revision that member runs (core's `rollout::REVISION_ANNOTATION`; the harness sees
/// fedraft only from outside, so it keeps its own copy of the name).
pub const REVISION_ANNOTATION: &str = "fedraft.io/template-revision";

/// Bounds one member read, so a slow member delays only its own part of a sweep.
const SAMPLE_TIMEOUT: Duration = Duration::from_millis(1000);

/// One member's view, `None` when it did not answer (it then counts 0 ready).
async fn member_view(api: &Api, url: &str) -> Option<MemberView> {
    let reply = api
        .plain_get_quick(
            &format!("{url}/apis/apps/v1/namespaces/{ROLLOUT_NS}/deployments/{ROLLOUT_NAME}"),
            SAMPLE_TIMEOUT,
        )
        .await;
    match &reply {
        Reply::Answered { status: 404, .. } => Some(MemberView {
            ready: 0,
            revisions: BTreeSet::new(),
        }),
        r => r.ok_body().map(view_of),
    }
}

fn view_of(d: &Value) -> MemberView {
    let ready = d
        .pointer("/status/readyReplicas")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let revisions = d
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(REVISION_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(|r| r.parse().ok())
        .into_iter()
        .collect();
    MemberView { ready, revisions }
}

/// One sweep over the members, concurrently; stamped when the last answer came in (a member's
/// ready count only matters against the dark windows, which are seconds long).
pub async fn sweep(api: &Api, sims: &[(String, String)], now_ns: impl Fn() -> u64) -> FloorSample {
    let views = futures::future::join_all(sims.iter().map(|(_, url)| member_view(api, url))).await;
    let members = sims
        .iter()
        .zip(views)
        .filter_map(|((name, _), v)| Some((name.clone(), v?)))
        .collect();
    FloorSample {
        t_ns: now_ns(),
        members,
    }
}

/// Sweeps every `period` until `stop` flips.
pub async fn run(
    api: Api,
    sims: Vec<(String, String)>,
    samples: Arc<Mutex<Vec<FloorSample>>>,
    now_ns: impl Fn() -> u64 + Clone + Send + Sync + 'static,
    period: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let s = sweep(&api, &sims, now_ns.clone()).await;
        if let Ok(mut all) = samples.lock() {
            all.push(s);
        }
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Which members a rollout story line gives which revision: `Some((None, r))` for every member,
/// `Some((Some(list), r))` for the listed ones, `None` for lines that move no revision (pauses,
/// gates passed, superseded revisions whose members go back to the stable one, which they already
/// had).
fn step_of(message: &str) -> Option<(Option<Vec<String>>, u32)> {
    let number = |s: &str| s.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok();
    if let Some(rest) = message.strip_prefix("revision ") {
        // "revision 1 recorded; ..." and "revision N rolled out to every cluster at once".
        let (n, tail) = rest.split_once(' ')?;
        if tail.starts_with("recorded") || tail.starts_with("rolled out to every cluster") {
            return Some((None, n.parse().ok()?));
        }
        return None;
    }
    if let Some(rest) = message.strip_prefix("rollout of revision ") {
        // "rollout of revision R complete: ...": every member now runs R unless assigned.
        let (n, tail) = rest.split_once(' ')?;
        return tail
            .starts_with("complete")
            .then(|| n.parse().ok())
            .flatten()
            .map(|n| (None, n));
    }
    if let Some(rest) = message.strip_prefix("rolled back to revision ") {
        return Some((None, number(rest)?));
    }
    if message.starts_with("wave ") {
        // "wave i/n started: dc1, dc2 updated to revision R".
        let (_, rest) = message.split_once(" started: ")?;
        let (names, r) = rest.split_once(" updated to revision ")?;
        let list = names.split(", ").map(str::to_string).collect();
        return Some((Some(list), number(r)?));
    }
    None
}

/// Adds one story line's step at `t_ns` to `rolled`.
fn add_step(rolled: &mut RolledOut, clusters: &[String], message: &str, t_ns: u64) -> bool {
    let Some((who, revision)) = step_of(message) else {
        return false;
    };
    for c in who.as_deref().unwrap_or(clusters) {
        let at = rolled
            .entry(c.clone())
            .or_default()
            .entry(revision)
            .or_insert(t_ns);
        *at = (*at).min(t_ns);
    }
    true
}

/// Reads the rollout steps of the workload from the audit archive of the first node that gives
/// all of it, page by page; log times become history times through `start_wall_ms` (the wall
/// clock when the history's clock read zero). Returns the map and how many steps it holds.
pub async fn rolled_out(
    api: &Api,
    clusters: &[String],
    start_wall_ms: u64,
) -> Result<(RolledOut, usize), String> {
    let mut last_error = String::from("no node");
    'nodes: for node in 0..api.nodes() {
        let mut rolled = RolledOut::new();
        let mut steps = 0;
        let mut from: Option<String> = None;
        for _page in 0..1000 {
            let path = format!(
                "/v1/audit/explain/{ROLLOUT_NS}/{ROLLOUT_NAME}{}",
                from.as_ref()
                    .map(|f| format!("?from={f}"))
                    .unwrap_or_default()
            );
            let reply = api
                .call_timeout(node, Method::GET, &path, None, Duration::from_secs(30))
                .await;
            let Some(body) = reply.ok_body() else {
                last_error = format!("node{}: {}", node + 1, reply.describe());
                continue 'nodes;
            };
            for ch in body
                .get("changes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let (Some(cause), Some(time_ms)) = (
                    ch.get("cause").and_then(Value::as_str),
                    ch.get("timeMs").and_then(Value::as_u64),
                ) else {
                    continue;
                };
                let Some(message) = cause.strip_prefix("rollout: ") else {
                    continue;
                };
                let t_ns = time_ms
                    .saturating_sub(start_wall_ms)
                    .saturating_mul(1_000_000);
                steps += usize::from(add_step(&mut rolled, clusters, message, t_ns));
            }
            match body.get("continue").and_then(Value::as_str) {
                Some(next) => from = Some(next.to_string()),
                None => return Ok((rolled, steps)),
            }
        }
        last_error = format!("node{}: more than 1000 pages", node + 1);
    }
    Err(format!(
        "no node gave the audit's rollout steps: {last_error}"
    ))
}

/// Judges the samples and builds `verdict-floor.json`: the combined verdict, the floor and why,
/// and how much was judged.
pub fn judge(
    samples: &[FloorSample],
    dark: &[DarkWindow],
    rolled: &Result<(RolledOut, usize), String>,
    limits: &FloorCheck,
) -> (Verdict, Value) {
    let ready = check_floor(samples, dark, limits);
    let revisions = match rolled {
        Ok((map, _)) => check_revisions(samples, map, limits),
        Err(e) => Verdict::Unknown {
            reason: format!("rollout steps unknown: {e}"),
        },
    };
    let verdict = Verdict::combine([&ready, &revisions]);
    let mut doc = json!(verdict);
    let seen: BTreeMap<&str, BTreeSet<u32>> =
        samples
            .iter()
            .flat_map(|s| s.members.iter())
            .fold(BTreeMap::new(), |mut m, (c, v)| {
                m.entry(c.as_str())
                    .or_default()
                    .extend(v.revisions.iter().copied());
                m
            });
    let extra = json!({
        "object": format!("{ROLLOUT_NS}/{ROLLOUT_NAME}"),
        "floor": limits.floor,
        "desired": REPLICAS,
        "allowedUnavailable": ALLOWED_UNAVAILABLE,
        "floorWhy": "desired replicas minus what the rollout allows unavailable: waves of one \
                     member whose Deployment surges before it retires (maxUnavailable 0); \
                     drains and fail-backs are make-before-break, so they keep every desired replica",
        "samples": samples.len(),
        "judged": judged(samples, dark, limits),
        "excuseS": limits.excuse_ns / 1_000_000_000,
        "skewMs": limits.skew_ns / 1_000_000,
        "ready": ready,
        "revisions": revisions,
        "rolloutSteps": rolled.as_ref().map(|(_, n)| *n).unwrap_or(0),
        "rolledOut": rolled.as_ref().map(|(m, _)| json!(m)).unwrap_or(Value::Null),
        "revisionsSeen": seen,
    });
    if let (Some(d), Some(e)) = (doc.as_object_mut(), extra.as_object()) {
        d.extend(e.clone());
    }
    (verdict, doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clusters() -> Vec<String> {
        ["dc1", "dc2", "dc3"]
            .iter()
            .map(|c| c.to_string())
            .collect()
    }

    #[test]
    fn story_lines_become_steps() {
        let all = clusters();
        let mut rolled = RolledOut::new();
        let lines = [
            ("revision 1 recorded; rollout strategy Progressive", 0),
            (
                "rollout of revision 2 started over 3 waves (stable revision 1)",
                5,
            ),
            ("wave 1/3 started: dc1 updated to revision 2", 5),
            ("wave 1/3 passed its gate: healthy on revision 2 for 1 s", 7),
            ("wave 2/3 started: dc2, dc3 updated to revision 2", 7),
            (
                "revision 2 superseded by revision 3; its clusters go back to revision 1 until their wave",
                8,
            ),
            ("wave 1/3 started: dc1 updated to revision 3", 8),
            ("rollout of revision 3 complete: every wave passed", 12),
            ("rolled back to revision 2 (dc1): undo by admin", 20),
            ("revision 4 rolled out to every cluster at once", 30),
        ];
        let steps: usize = lines
            .iter()
            .map(|(m, t)| usize::from(add_step(&mut rolled, &all, m, *t)))
            .sum();
        assert_eq!(steps, 7);
        assert_eq!(rolled["dc1"], [(1, 0), (2, 5), (3, 8), (4, 30)].into());
        assert_eq!(rolled["dc2"], [(1, 0), (2, 7), (3, 12), (4, 30)].into());
        assert_eq!(rolled["dc3"], rolled["dc2"]);
    }

    #[test]
    fn a_member_view_reads_ready_and_revision() {
        let d = json!({"metadata": {"annotations": {REVISION_ANNOTATION: "4"}},
                       "status": {"readyReplicas": 2}});
        let v = view_of(&d);
        assert_eq!(v.ready, 2);
        assert_eq!(v.revisions, [4].into());
        let v = view_of(&json!({"metadata": {}}));
        assert_eq!((v.ready, v.revisions.len()), (0, 0));
    }

    #[test]
    fn the_verdict_document_states_the_floor() {
        let limits = FloorCheck {
            floor: 6,
            excuse_ns: 0,
            skew_ns: 0,
        };
        let s = FloorSample {
            t_ns: 1,
            members: [(
                "dc1".to_string(),
                MemberView {
                    ready: 6,
                    revisions: [1].into(),
                },
            )]
            .into(),
        };
        let rolled = Ok(([("dc1".to_string(), [(1, 0)].into())].into(), 1));
        let (v, doc) = judge(&[s.clone(), s], &[], &rolled, &limits);
        assert_eq!(v, Verdict::Valid);
        assert_eq!(doc["verdict"], "valid");
        assert_eq!(doc["floor"], 6);
        assert_eq!(doc["judged"], 1);
        let (v, doc) = judge(&[], &[], &Err("down".into()), &limits);
        assert!(matches!(v, Verdict::Unknown { .. }), "{v:?}");
        assert_eq!(doc["samples"], 0);
    }
}
