//! The convergence checker: after healing, every member cluster must hold exactly what the replicated
//! placement says: each placed object as a Deployment with the placed replica count and the template's
//! value, and no fedraft-managed Deployment that placement does not put there. The harness polls until
//! [`diff`] is empty or its bound passes; the verdict says which. Pure: it never contacts anything.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Verdict;

/// What one cluster should hold (or holds) for one object, keyed by `(namespace, name)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    pub replicas: u64,
    /// The value the template carries (the harness's annotation), when it has one.
    pub value: Option<u64>,
}

/// Cluster -> (namespace, name) -> workload.
pub type Holdings = BTreeMap<String, BTreeMap<(String, String), Workload>>;

/// Every difference between what placement wants and what the clusters hold, as readable lines. An object
/// placed with 0 replicas on a cluster may be absent there or present with 0 replicas.
pub fn diff(want: &Holdings, have: &Holdings) -> Vec<String> {
    let mut out = Vec::new();
    let empty = BTreeMap::new();
    let clusters: std::collections::BTreeSet<&String> = want.keys().chain(have.keys()).collect();
    for c in clusters {
        let w = want.get(c).unwrap_or(&empty);
        let h = have.get(c).unwrap_or(&empty);
        for ((ns, name), wl) in w {
            match h.get(&(ns.clone(), name.clone())) {
                None if wl.replicas > 0 => out.push(format!(
                    "{c}: {ns}/{name} missing (want {} replicas)",
                    wl.replicas
                )),
                None => {}
                Some(got) if got.replicas != wl.replicas => out.push(format!(
                    "{c}: {ns}/{name} has {} replicas, placement says {}",
                    got.replicas, wl.replicas
                )),
                Some(got) if wl.replicas > 0 && got.value != wl.value => out.push(format!(
                    "{c}: {ns}/{name} holds value {:?}, the object says {:?}",
                    got.value, wl.value
                )),
                Some(_) => {}
            }
        }
        for ((ns, name), got) in h {
            if !w.contains_key(&(ns.clone(), name.clone())) && got.replicas > 0 {
                out.push(format!(
                    "{c}: {ns}/{name} ({} replicas) is not placed there",
                    got.replicas
                ));
            }
        }
    }
    out
}

/// The verdict after polling: `last` is the final diff, `waited_ms` how long convergence was awaited.
pub fn verdict(last: &[String], waited_ms: u64, objects: usize) -> Verdict {
    if last.is_empty() {
        if objects == 0 {
            return Verdict::Unknown {
                reason: "no objects were placed, nothing to converge".into(),
            };
        }
        return Verdict::Valid;
    }
    let mut shown: Vec<&str> = last.iter().map(String::as_str).take(10).collect();
    if last.len() > shown.len() {
        shown.push("...");
    }
    Verdict::Invalid {
        description: format!(
            "member clusters did not converge within {waited_ms} ms ({} differences): {}",
            last.len(),
            shown.join("; ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holdings(items: &[(&str, &str, u64, Option<u64>)]) -> Holdings {
        let mut h = Holdings::new();
        for (c, name, replicas, value) in items {
            h.entry(c.to_string()).or_default().insert(
                ("ns".into(), name.to_string()),
                Workload {
                    replicas: *replicas,
                    value: *value,
                },
            );
        }
        h
    }

    #[test]
    fn exact_match_and_zero_placements_converge() {
        let want = holdings(&[("dc1", "a", 2, Some(1)), ("dc2", "a", 0, Some(1))]);
        let have = holdings(&[("dc1", "a", 2, Some(1))]);
        assert!(diff(&want, &have).is_empty());
        assert_eq!(verdict(&[], 10, 1), Verdict::Valid);
    }

    #[test]
    fn missing_extra_wrong_count_and_stale_value_are_reported() {
        let want = holdings(&[
            ("dc1", "a", 2, Some(1)),
            ("dc2", "b", 1, Some(5)),
            ("dc3", "c", 1, Some(7)),
        ]);
        let have = holdings(&[
            ("dc1", "a", 1, Some(1)),
            ("dc2", "b", 1, Some(4)),
            ("dc2", "x", 3, None),
        ]);
        let d = diff(&want, &have);
        assert_eq!(d.len(), 4, "{d:?}");
        assert!(d.iter().any(|l| l.contains("dc1: ns/a has 1 replicas")));
        assert!(d
            .iter()
            .any(|l| l.contains("dc2: ns/b holds value Some(4)")));
        assert!(d
            .iter()
            .any(|l| l.contains("dc2: ns/x (3 replicas) is not placed")));
        assert!(d.iter().any(|l| l.contains("dc3: ns/c missing")));
        assert!(matches!(verdict(&d, 5, 3), Verdict::Invalid { .. }));
    }
}
