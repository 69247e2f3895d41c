//! The short words of a workload status (its kind, a condition's type and reason), kept once
//! for the whole process when Kubernetes' controllers or fedraft write them.
//!
//! A fleet holds a workload status per object and cluster, in the state and again in the
//! executors' live copies and reports, and these few words were most of each status's
//! allocations. A [`Word`] is a `Cow`: one of [`KNOWN`] is borrowed from the table, anything
//! else is owned as before. It encodes as the string it holds, so snapshots and log entries
//! do not change. Must not: change what a word says (a lookup either finds the same text or
//! keeps the text given).

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};

/// A workload kind, condition type or reason.
pub type Word = Cow<'static, str>;

/// The words the built-in workload controllers and fedraft write, sorted for the search.
const KNOWN: &[&str] = &[
    "Available",
    "BackoffLimitExceeded",
    "Complete",
    "CompletionsReached",
    "CronJob",
    "DaemonSet",
    "DeadlineExceeded",
    "Deployment",
    "DeploymentPaused",
    "DeploymentResumed",
    "Failed",
    "FailedCreate",
    "FailureTarget",
    "FoundNewReplicaSet",
    "Job",
    "JobSuspended",
    "MinimumReplicasAvailable",
    "MinimumReplicasUnavailable",
    "NewReplicaSetAvailable",
    "NewReplicaSetCreated",
    "Pod",
    "PodFailurePolicy",
    "ProgressDeadlineExceeded",
    "Progressing",
    "ReplicaFailure",
    "ReplicaSet",
    "ReplicaSetUpdated",
    "StatefulSet",
    "SuccessCriteriaMet",
    "Suspended",
    "fedraft.io/HealthRule",
    "fedraft.io/PodsUnschedulable",
];

/// The table's copy of `s`, if it holds one.
fn known(s: &str) -> Option<&'static str> {
    KNOWN.binary_search(&s).ok().map(|i| KNOWN[i])
}

/// `s` as a [`Word`]: borrowed from the table when known, owned otherwise.
pub fn word(s: &str) -> Word {
    known(s).map_or_else(|| Cow::Owned(s.to_string()), Cow::Borrowed)
}

/// Decodes a string into a [`Word`] (serde's own `Cow` decoding always owns), keeping the
/// decoded string itself when the table does not hold it.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Word, D::Error> {
    let s = String::deserialize(d)?;
    Ok(known(&s).map_or(Cow::Owned(s), Cow::Borrowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_so_every_word_is_found() {
        assert!(
            KNOWN.windows(2).all(|w| w[0] < w[1]),
            "KNOWN must stay sorted"
        );
        for k in KNOWN {
            assert!(matches!(word(k), Cow::Borrowed(b) if b == *k));
        }
        assert!(matches!(word("SomethingNew"), Cow::Owned(s) if s == "SomethingNew"));
        assert!(matches!(word(""), Cow::Owned(s) if s.is_empty()));
    }

    #[test]
    fn a_word_encodes_as_its_string() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Holder {
            #[serde(deserialize_with = "deserialize")]
            w: Word,
        }
        #[derive(serde::Serialize)]
        struct Plain {
            w: String,
        }
        for text in ["Available", "Custom"] {
            let h = Holder { w: word(text) };
            let bytes = bincode::serde::encode_to_vec(&h, bincode::config::standard()).unwrap();
            let plain = Plain { w: text.into() };
            let want = bincode::serde::encode_to_vec(&plain, bincode::config::standard()).unwrap();
            assert_eq!(bytes, want);
            let (back, _): (Holder, _) =
                bincode::serde::decode_from_slice(&bytes, bincode::config::standard()).unwrap();
            assert_eq!(back, h);
            assert_eq!(
                serde_json::to_string(&h).unwrap(),
                format!("{{\"w\":\"{text}\"}}")
            );
        }
    }
}
