//! Raft membership changes against the running [`Env`], made the way an operator makes them: the
//! runbook's replace-a-node through the admin API (`/v1/admin/members`, `/v1/admin/voters`), sent to
//! whichever node leads at that moment. It changes only the membership and the replaced node's process
//! and data; when to do it is `faults`' decision, and whether the history stayed correct the checkers'.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use reqwest::Method;
use serde_json::{json, Value};

use super::api::Reply;
use super::env::Env;

/// A membership call may wait this long: adding a learner returns once it has caught up, which can
/// take a whole snapshot (the server gives up after six propose timeouts, 18 s in the harness config).
const CHANGE_TIMEOUT: Duration = Duration::from_secs(25);

/// The voters and learners, as the leader reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Members {
    pub voters: BTreeSet<u64>,
    pub learners: BTreeSet<u64>,
}

fn ids(body: &Value, key: &str) -> Result<BTreeSet<u64>> {
    body.get(key)
        .and_then(Value::as_array)
        .with_context(|| format!("the members answer has no {key}: {body}"))?
        .iter()
        .map(|v| v.as_u64().context("a member id is not a number"))
        .collect()
}

/// Sends a membership request to the current leader, trying again (another leader, an election in
/// progress, a timeout) until `deadline`. Every request it sends is idempotent, so a retry after a
/// lost answer is safe.
async fn on_leader(
    env: &Env,
    method: Method,
    path: &str,
    body: Option<&Value>,
    deadline: Instant,
) -> Result<Value> {
    let mut last = String::from("no leader");
    loop {
        if let Some(leader) = env.leader().await {
            let reply = env
                .api
                .call_timeout(leader, method.clone(), path, body, CHANGE_TIMEOUT)
                .await;
            match reply {
                Reply::Answered { status, body } if (200..300).contains(&status) => {
                    return Ok(body)
                }
                // A refused change (400, 409, 422) will not succeed by trying again.
                Reply::Answered { status, .. } if (400..500).contains(&status) => {
                    bail!("{method} {path}: {}", reply.describe())
                }
                other => last = other.describe(),
            }
        }
        if Instant::now() >= deadline {
            bail!("{method} {path}: no success before the deadline (last: {last})");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The membership as the leader sees it.
pub async fn members(env: &Env, deadline: Instant) -> Result<Members> {
    let body = on_leader(env, Method::GET, "/v1/admin/members", None, deadline).await?;
    Ok(Members {
        voters: ids(&body, "voters")?,
        learners: ids(&body, "learners")?,
    })
}

async fn set_voters(env: &Env, voters: &BTreeSet<u64>, deadline: Instant) -> Result<()> {
    let body = json!({ "voters": voters });
    on_leader(env, Method::PUT, "/v1/admin/voters", Some(&body), deadline).await?;
    Ok(())
}

async fn add_learner(env: &Env, slot: usize, deadline: Instant) -> Result<()> {
    let node = &env.nodes[slot];
    let body = json!({ "id": node.id, "peerAddr": node.peer.to_string() });
    on_leader(
        env,
        Method::POST,
        "/v1/admin/members",
        Some(&body),
        deadline,
    )
    .await?;
    Ok(())
}

/// The first half of replacing the node in `slot`: remove its voter, wipe it and start it under a new
/// id, and add that as a learner (which returns once it has caught up). Returns the old and new ids.
/// The cluster runs on two voters until [`restore`] promotes the learner.
pub async fn replace(env: &mut Env, slot: usize, limit: Duration) -> Result<(u64, u64)> {
    let deadline = Instant::now() + limit;
    let old = env.nodes[slot].id;
    let mut voters = members(env, deadline).await?.voters;
    if !voters.remove(&old) {
        bail!("node {old} is not a voter");
    }
    if voters.len() < 2 {
        bail!("removing node {old} would leave {} voter(s)", voters.len());
    }
    set_voters(env, &voters, deadline)
        .await
        .with_context(|| format!("removing voter {old}"))?;
    let new = env.rejoin_fresh(slot)?;
    add_learner(env, slot, deadline)
        .await
        .with_context(|| format!("adding node {new} as a learner"))?;
    Ok((old, new))
}

/// Makes every running slot's node a voter and leaves no learner: adds any slot not yet a member as a
/// learner, then sets the voters. A no-op when the membership is already that.
pub async fn restore(env: &Env, limit: Duration) -> Result<Members> {
    let deadline = Instant::now() + limit;
    let want: BTreeSet<u64> = env.nodes.iter().map(|n| n.id).collect();
    let now = members(env, deadline).await?;
    for (slot, node) in env.nodes.iter().enumerate() {
        if !now.voters.contains(&node.id) && !now.learners.contains(&node.id) {
            add_learner(env, slot, deadline)
                .await
                .with_context(|| format!("adding node {} as a learner", node.id))?;
        }
    }
    if now.voters != want || !now.learners.is_empty() {
        set_voters(env, &want, deadline)
            .await
            .with_context(|| format!("setting the voters to {want:?}"))?;
    }
    let after = members(env, deadline).await?;
    if after.voters != want || !after.learners.is_empty() {
        bail!("membership is {after:?} after setting the voters to {want:?}");
    }
    Ok(after)
}
