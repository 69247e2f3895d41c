//! When the members disagree with fedraft after a phase of `fedraft bench fleet`, the evidence
//! for each difference, printed: what fedraft says about the object now (per cluster: replicas,
//! applied, ready, when it was last reported) next to the placement the bench compared the
//! members with, and every write the member's simulator took for it (time, verb, owner
//! token). A difference is otherwise a bare count, and whether fedraft moved the object later,
//! reported it applied too early, or a stale owner wrote cannot be told apart.
//!
//! Must not: change anything (reads only), or fail the bench (it only prints).

use std::collections::BTreeMap;

use serde_json::Value;

use super::fleet_work::{FedApi, Members, Placed};

/// Prints the evidence for up to `limit` differing objects named in `lines`
/// (`compare_members`' lines: `cluster: ns/name ...` or `cluster: holds ns/name, ...`).
pub async fn explain(
    api: &FedApi,
    http: &reqwest::Client,
    members: &Members,
    placed: &BTreeMap<String, Placed>,
    lines: &[String],
    limit: usize,
) {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    println!("explaining differences at {now_ms} ms since the epoch");
    for line in lines.iter().take(limit) {
        let Some((cluster, rest)) = line.split_once(": ") else {
            continue;
        };
        let id = rest.strip_prefix("holds ").unwrap_or(rest);
        let id = id.split([' ', ',']).next().unwrap_or("");
        let Some((ns, name)) = id.split_once('/') else {
            continue;
        };
        println!("difference: {line}");
        println!("  compared against: {:?}", placed.get(id));
        match api
            .get(&format!("/v1/namespaces/{ns}/objects/{name}"))
            .await
        {
            Ok((_, o)) => println!(
                "  fedraft now: version {} status {}",
                o.pointer("/resourceVersion")
                    .or(o.pointer("/metadata/resourceVersion"))
                    .unwrap_or(&Value::Null),
                o.get("status").unwrap_or(&Value::Null)
            ),
            Err(e) => println!("  fedraft now: {e:#}"),
        }
        let Some((_, url)) = members.clusters.get(cluster) else {
            continue;
        };
        let writes = match http.get(format!("{url}/_sim/writes")).send().await {
            Ok(r) => r.json::<Value>().await.unwrap_or(Value::Null),
            Err(e) => {
                println!("  member writes: {e}");
                continue;
            }
        };
        let needle = format!("/{ns}/{name}");
        for w in writes["records"].as_array().into_iter().flatten() {
            let object = w["object"].as_str().unwrap_or("");
            if object.ends_with(&needle) {
                println!(
                    "  member write at {} {} {} owner {}",
                    w["atMs"], w["verb"], object, w["owner"]
                );
            }
        }
    }
}
