//! What the statePreservation rules of an object's propagation policy read on a member: each
//! path (`fedraft_core::karmada::jsonpath`) evaluated on the live copy's `status`, as the label
//! value it would give, sent as `StatusValues` when it differs from what the state holds. Core
//! keeps the last values per object and cluster and, when a failover moves the object, carries
//! them to the new cluster as labels (`fedraft_core::state` preserve).
//!
//! Must not: decide anything with the values (core does), talk to member clusters (it reads
//! objects the watches already hold), or propose: the reporter (`crate::report`) does.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use fedraft_core::command::StatusValuesReport;
use fedraft_core::karmada::jsonpath::JsonPath;
use fedraft_core::model::ObjectKey;
use fedraft_core::state::{State, MAX_BATCH_ITEMS};
use serde_json::Value;

/// A proposed report not reflected by the state after this long is proposed again.
const RESEND_AFTER: Duration = Duration::from_secs(5);

/// The paths to evaluate for each of `keys` whose policy has statePreservation rules.
pub fn paths_for<'k>(
    state: &State,
    keys: impl IntoIterator<Item = &'k ObjectKey>,
) -> HashMap<ObjectKey, Vec<JsonPath>> {
    keys.into_iter()
        .filter_map(|k| Some((k.clone(), state.preserved_paths(k)?)))
        .collect()
}

/// The values `paths` give on `live`'s status; None without paths or a live object. A path
/// that names nothing usable as a label value is left out.
pub fn status_values(
    key: &ObjectKey,
    cluster: &str,
    live: Option<&Value>,
    paths: Option<&Vec<JsonPath>>,
) -> Option<StatusValuesReport> {
    let paths = paths?;
    let status = live?.get("status").unwrap_or(&Value::Null);
    let values = paths
        .iter()
        .filter_map(|p| Some((p.to_string(), p.label_value(status)?)))
        .collect();
    Some(StatusValuesReport {
        namespace: key.namespace.clone(),
        name: key.name.clone(),
        cluster: cluster.to_string(),
        values,
    })
}

/// The latest pass's values per cluster, shared by the per-cluster tasks and the reporter.
#[derive(Default)]
pub struct ValueObservations {
    latest: Mutex<BTreeMap<String, Vec<StatusValuesReport>>>,
}

/// An object's values on one cluster: (namespace, name, cluster).
type Id = (String, String, String);

/// What was proposed and when, to avoid re-sending while an entry is in flight.
#[derive(Default)]
pub struct SentValues {
    sent: HashMap<Id, (BTreeMap<String, String>, Instant)>,
}

impl ValueObservations {
    /// Replaces `cluster`'s values with those of its latest pass.
    pub fn set(&self, cluster: &str, reports: Vec<StatusValuesReport>) {
        let mut g = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        g.insert(cluster.to_string(), reports);
    }

    pub fn forget(&self, cluster: &str) {
        let mut g = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        g.remove(cluster);
    }

    /// Values that differ from the state and are not in flight, at most [`MAX_BATCH_ITEMS`].
    pub fn take(
        &self,
        state: &State,
        sent: &mut SentValues,
        now: Instant,
    ) -> Vec<StatusValuesReport> {
        let g = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::new();
        for r in g.values().flatten() {
            let key = ObjectKey::new(r.namespace.clone(), r.name.clone());
            let placed = state
                .object(&r.namespace, &r.name)
                .is_some_and(|o| o.replicas_on(&r.cluster) > 0);
            if !placed || state.preserved_paths(&key).is_none() {
                continue; // core would skip it
            }
            let id = (r.namespace.clone(), r.name.clone(), r.cluster.clone());
            if state.status_values(&key, &r.cluster) == Some(&r.values) {
                sent.sent.remove(&id);
                continue;
            }
            let in_flight = sent.sent.get(&id).is_some_and(|(v, t)| {
                *v == r.values && now.saturating_duration_since(*t) < RESEND_AFTER
            });
            if in_flight {
                continue;
            }
            sent.sent.insert(id, (r.values.clone(), now));
            out.push(r.clone());
            if out.len() == MAX_BATCH_ITEMS {
                break;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_read_from_the_status_and_absent_paths_left_out() {
        let key = ObjectKey::new("app", "flinkdeployment.flink.apache.org:foo");
        let live = json!({"spec": {"jobStatus": {"jobID": "spec-is-not-read"}},
            "status": {"jobStatus": {"jobID": "a1b2", "state": "RUNNING", "note": "two words"}}});
        let paths: Vec<JsonPath> = [
            "{.jobStatus.jobID}",
            "{.jobStatus.gone}",
            "{.jobStatus.note}",
        ]
        .iter()
        .map(|p| JsonPath::parse(p).unwrap())
        .collect();
        let r = status_values(&key, "m1", Some(&live), Some(&paths)).expect("a report");
        assert_eq!(
            r.values,
            BTreeMap::from([("{.jobStatus.jobID}".to_string(), "a1b2".to_string())])
        );
        assert_eq!(r.cluster, "m1");
        // Without paths or a live object: nothing to report. Without a status: no values.
        assert!(status_values(&key, "m1", Some(&live), None).is_none());
        assert!(status_values(&key, "m1", None, Some(&paths)).is_none());
        let bare = status_values(&key, "m1", Some(&json!({})), Some(&paths)).expect("report");
        assert!(bare.values.is_empty());
    }
}
