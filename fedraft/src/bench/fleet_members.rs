//! The member-side truth of `fedraft bench fleet`: what each simulated cluster holds of
//! fedraft's, compared with what fedraft placed once every object settled.
//!
//! Must not: write to a member cluster (the members are only read).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::Value;

use super::fleet_work::{read_all, FedApi, Members, Placed, MANAGED};

/// What one member cluster holds of fedraft's: "ns/name" -> (kind, replicas for Deployments).
pub async fn member_holds(
    http: &reqwest::Client,
    url: &str,
) -> anyhow::Result<BTreeMap<String, (String, Option<u64>)>> {
    let mut out = BTreeMap::new();
    for (path, kind) in [
        ("/apis/apps/v1/deployments", "Deployment"),
        ("/api/v1/configmaps", "ConfigMap"),
        ("/api/v1/services", "Service"),
    ] {
        let body: Value = http
            .get(format!("{url}{path}?labelSelector={MANAGED}"))
            .send()
            .await
            .with_context(|| format!("listing {path} of {url}"))?
            .error_for_status()?
            .json()
            .await?;
        for o in body["items"].as_array().context("member list items")? {
            if o.pointer("/metadata/deletionTimestamp").is_some() {
                continue;
            }
            let ns = o
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            let name = o
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let replicas = o.pointer("/spec/replicas").and_then(Value::as_u64);
            out.insert(format!("{ns}/{name}"), (kind.to_string(), replicas));
        }
    }
    Ok(out)
}

/// Differences between what fedraft placed and what the members hold, as readable lines (at
/// most `limit`), and their count.
pub async fn compare_members(
    http: &reqwest::Client,
    members: &Members,
    placed: &BTreeMap<String, Placed>,
    skip: &BTreeSet<String>,
    limit: usize,
) -> anyhow::Result<(usize, Vec<String>)> {
    let mut want: BTreeMap<&str, BTreeMap<&str, (&str, Option<u64>)>> = BTreeMap::new();
    for (id, p) in placed {
        for (c, r) in &p.placement {
            let replicas = (p.kind == "Deployment").then_some(*r);
            want.entry(c.as_str())
                .or_default()
                .insert(id.as_str(), (p.kind.as_str(), replicas));
        }
    }
    let (mut count, mut lines) = (0usize, Vec::new());
    for (name, (_, url)) in &members.clusters {
        if skip.contains(name) {
            continue;
        }
        let held = member_holds(http, url).await?;
        let empty = BTreeMap::new();
        let expected = want.get(name.as_str()).unwrap_or(&empty);
        for (id, (kind, replicas)) in expected {
            match held.get(*id) {
                Some((k, r)) if k == kind && r == replicas => {}
                other => {
                    count += 1;
                    if lines.len() < limit {
                        lines.push(format!(
                            "{name}: {id} want {kind} {replicas:?}, holds {other:?}"
                        ));
                    }
                }
            }
        }
        for id in held.keys() {
            if !expected.contains_key(id.as_str()) {
                count += 1;
                if lines.len() < limit {
                    lines.push(format!(
                        "{name}: holds {id}, which fedraft did not place there"
                    ));
                }
            }
        }
    }
    Ok((count, lines))
}

/// What a settled comparison found: fedraft's placement it compared against, and the
/// differences (count and readable lines).
pub struct Settled {
    pub placed: BTreeMap<String, Placed>,
    pub differences: usize,
    pub lines: Vec<String>,
}

/// Compares the members with fedraft's placement read afresh once every object reports
/// converged (objects placed on a `skip` cluster excepted). A loaded fleet may still move
/// objects while the members are read, e.g. the replicas of a member whose probes timed out:
/// a comparison during which fedraft's placement changed is made again from the new one, up to
/// `attempts` times, so only differences that outlast fedraft's own decisions count.
pub async fn settled_comparison(
    api: &FedApi,
    http: &reqwest::Client,
    members: &Members,
    skip: &BTreeSet<String>,
    attempts: usize,
) -> anyhow::Result<Settled> {
    let mut replaced_meanwhile = 0;
    loop {
        let placed = all_converged(api, skip, Duration::from_secs(300)).await?;
        let (differences, lines) = compare_members(http, members, &placed, skip, 10).await?;
        let moved = differences > 0 && {
            let again = read_all(api).await?;
            placed
                .iter()
                .any(|(id, p)| again.get(id).is_none_or(|a| a.placement != p.placement))
        };
        if !moved || replaced_meanwhile + 1 >= attempts {
            return Ok(Settled {
                placed,
                differences,
                lines,
            });
        }
        replaced_meanwhile += 1;
        println!("fedraft re-placed objects while the members were read; comparing again");
    }
}

/// Every object as fedraft reports it once each is settled (or placed on a `skip` cluster);
/// after `limit`, an error naming a few that were not, with their placement.
async fn all_converged(
    api: &FedApi,
    skip: &BTreeSet<String>,
    limit: Duration,
) -> anyhow::Result<BTreeMap<String, Placed>> {
    let deadline = Instant::now() + limit;
    let mut left = Vec::new();
    loop {
        if let Ok(now) = read_all(api).await {
            let waiting =
                |p: &Placed| !p.settled() && !p.placement.keys().any(|c| skip.contains(c));
            left = now
                .iter()
                .filter(|(_, p)| waiting(p))
                .map(|(id, p)| format!("{id} {} on {:?}", p.kind, p.placement))
                .collect();
            if left.is_empty() {
                return Ok(now);
            }
        }
        if Instant::now() > deadline {
            let n = left.len();
            left.truncate(5);
            bail!(
                "every object converged: not within {limit:?}; {n} not, e.g. {}",
                left.join("; ")
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
