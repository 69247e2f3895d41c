//! What the simulated cluster does on its own: the nodes it starts with and the defaults it
//! fills in on create (`defaults`), and the status controllers.
//!
//! Every `tick` the controller packs the pods of all deployments and statefulsets onto Ready
//! nodes (`packing`: oldest first, first-fit, by requests and allocatable). Pods that fit are
//! ready; the rest stay unready, so capacity
//! pressure shows as `readyReplicas < replicas` and as Pending pods (`pending`). A workload's
//! status converges to that packing once `status_delay` has passed since its generation last
//! changed, its new replicas updated over time when a rollout fault is set (`rollout`: slow
//! rollouts, never-ready images). LoadBalancer services get an ingress address after the same
//! delay. Writes happen only when the status differs (so the controller does not churn
//! resourceVersions) and are counted apart from client writes.
//!
//! A tick reads the stored objects shared, never copied. A tick with no change to the kinds it
//! reads (its own writes aside) and no status falling due does nothing, and a full tick is
//! followed by an idle spell 20 times its length, so a fleet host of a thousand clusters spends
//! its CPU on their APIs, not on re-reading them. This module must not serve HTTP.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod defaults;
mod packing;
mod pending;
mod rollout;

pub(crate) use defaults::defaults_on_create;
pub use defaults::node_object;
use packing::replicas;
pub use packing::{
    pack, parse_quantity_milli, CapacityReport, NodeUsage, PackCache, Resources, Workload,
    WorkloadUsage,
};

use crate::discovery::{find, ResourceDef};
use crate::meta;
use crate::store::{Change, Store};
use crate::Shared;

fn condition(kind: &str, ok: bool, reason: &str, message: String, now: &str) -> Value {
    json!({
        "type": kind, "status": if ok { "True" } else { "False" }, "reason": reason,
        "message": message, "lastUpdateTime": now, "lastTransitionTime": now,
    })
}

/// Keeps the old timestamps of conditions that did not change, so an unchanged status compares
/// equal and is not rewritten.
fn keep_condition_times(new: &mut Value, old: &Value) {
    let Some(conds) = new.get_mut("conditions").and_then(Value::as_array_mut) else {
        return;
    };
    let old_conds = old.get("conditions").and_then(Value::as_array);
    for c in conds.iter_mut() {
        let prev = old_conds.and_then(|o| o.iter().find(|p| p["type"] == c["type"]));
        let Some(prev) = prev else { continue };
        if prev["status"] == c["status"] {
            c["lastTransitionTime"] = prev["lastTransitionTime"].clone();
            if prev["reason"] == c["reason"] && prev["message"] == c["message"] {
                c["lastUpdateTime"] = prev["lastUpdateTime"].clone();
            }
        }
    }
}

fn set_count(status: &mut Value, key: &str, n: i64) {
    // Kubernetes omits zero counts (omitempty); do the same.
    if n > 0 {
        status[key] = json!(n);
    }
}

fn workload_status(
    res: &ResourceDef,
    w: &Value,
    scheduled: i64,
    p: &rollout::Progress,
    now: &str,
) -> Value {
    let desired = replicas(w);
    // Capacity caps what the rollout would have ready.
    let scheduled = scheduled.min(p.ready);
    let gen = meta::metadata(w)
        .and_then(|m| m.get("generation"))
        .cloned()
        .unwrap_or(json!(1));
    let mut st = json!({ "observedGeneration": gen });
    set_count(&mut st, "replicas", desired);
    set_count(&mut st, "updatedReplicas", p.updated);
    set_count(&mut st, "readyReplicas", scheduled);
    set_count(&mut st, "availableReplicas", scheduled);
    let name = meta::name(w);
    if res.plural == "statefulsets" {
        // Pods at the current revision: all once the update is through, the rest before.
        let current = if p.updated >= desired {
            desired
        } else {
            desired - p.updated
        };
        set_count(&mut st, "currentReplicas", current);
        st["currentRevision"] = json!(format!("{name}-kubesim"));
        st["updateRevision"] = json!(format!("{name}-kubesim"));
        return st;
    }
    set_count(&mut st, "unavailableReplicas", desired - scheduled);
    let max_unavailable = desired / 4; // the default maxUnavailable of 25%, rounded down
    let available = scheduled >= desired - max_unavailable;
    let (reason, msg) = if available {
        (
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        (
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    let progressing = if p.deadline_exceeded {
        condition(
            "Progressing",
            false,
            "ProgressDeadlineExceeded",
            format!("ReplicaSet \"{name}-kubesim\" has timed out progressing."),
            now,
        )
    } else if p.updated < desired {
        condition(
            "Progressing",
            true,
            "ReplicaSetUpdated",
            format!(
                "ReplicaSet \"{name}-kubesim\" is progressing: {} of {desired} pods updated.",
                p.updated
            ),
            now,
        )
    } else if scheduled == desired {
        condition(
            "Progressing",
            true,
            "NewReplicaSetAvailable",
            format!("ReplicaSet \"{name}-kubesim\" has successfully progressed."),
            now,
        )
    } else {
        condition(
            "Progressing",
            true,
            "ReplicaSetUpdated",
            format!(
                "ReplicaSet \"{name}-kubesim\" is progressing; {} of {desired} pods do not fit \
                 on any node (insufficient cpu, memory or pods).",
                desired - scheduled
            ),
            now,
        )
    };
    st["conditions"] = json!([
        condition("Available", available, reason, msg.into(), now),
        progressing
    ]);
    st
}

/// Every kind a tick reads or writes. A ConfigMap, a Secret or a namespace changes nothing a
/// tick computes, so their writes do not wake it.
fn watched_kinds() -> Vec<&'static ResourceDef> {
    [
        ("", "nodes"),
        ("apps", "deployments"),
        ("apps", "statefulsets"),
        ("", "services"),
        ("", "pods"),
        ("discovery.k8s.io", "endpointslices"),
    ]
    .into_iter()
    .filter_map(|(group, plural)| find(group, "v1", plural))
    .collect()
}

/// The controller's memory between ticks.
pub(crate) struct Controller {
    shared: Arc<Shared>,
    /// (resource key, namespace, name) -> (generation, when first seen at that generation,
    /// ready replicas of the generation before).
    seen: HashMap<(String, String, String), (i64, Instant, i64)>,
    next_lb: u32,
    /// Changes to the kinds the controller reads, counted by the store, as of the end of the
    /// last full tick; and when the earliest status that tick left waiting for its delay falls
    /// due. A tick with neither a new change nor a due status skips the listing: in a fleet
    /// host of a thousand clusters that listing, not the API, would otherwise eat the CPU.
    last_seen: Option<u64>,
    next_due: Option<Instant>,
    /// Workloads whose status the last full tick found settled: written as computed, with no
    /// change of their own to come. Keyed by the stored version's address, and holding that
    /// version so the address cannot be reused; with the scheduled count it was computed for.
    /// A later tick skips a workload whose stored version and count are the same, unless the
    /// faults changed: nothing its status depends on did.
    settled: HashMap<usize, (Arc<Value>, i64)>,
    settled_under: Option<crate::faults::FaultSettings>,
    /// What packing read of the workload versions listed last tick.
    packing: PackCache,
    /// Changes to services, workloads and slices as of the last EndpointSlice pass.
    slices_seen: Option<u64>,
}

impl Controller {
    pub fn new(shared: Arc<Shared>) -> Self {
        Controller {
            shared,
            seen: HashMap::new(),
            next_lb: 0,
            last_seen: None,
            next_due: None,
            settled: HashMap::new(),
            settled_under: None,
            packing: PackCache::default(),
            slices_seen: None,
        }
    }

    pub async fn run(mut self, tick: Duration, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        let mut interval = tokio::time::interval(tick);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = interval.tick() => {
                    // A full tick costs time proportional to the objects stored; idle at least
                    // 20 times as long, so a big simulated cluster keeps answering its API.
                    let started = Instant::now();
                    self.tick();
                    let rest = started.elapsed() * 20;
                    if rest > tick {
                        tokio::time::sleep(rest - tick).await;
                    }
                }
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Whether `obj` has sat at its current generation for at least the configured delay; if
    /// not, remembers when it will have.
    fn due(&mut self, res: &ResourceDef, obj: &Value) -> bool {
        let gen = meta::metadata(obj)
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let key = (
            res.key(),
            meta::meta_str(obj, "namespace").unwrap_or("").to_string(),
            meta::name(obj).to_string(),
        );
        let old_ready = obj
            .pointer("/status/readyReplicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let entry = self
            .seen
            .entry(key)
            .or_insert((gen, Instant::now(), old_ready));
        if entry.0 != gen {
            *entry = (gen, Instant::now(), old_ready);
        }
        let at = entry.1 + self.shared.config.status_delay;
        if Instant::now() >= at {
            return true;
        }
        self.next_due = Some(self.next_due.map_or(at, |d| d.min(at)));
        false
    }

    pub fn tick(&mut self) {
        let shared = self.shared.clone();
        let store: &Store = &shared.store;
        let (Some(nodes_res), Some(deploy), Some(sts), Some(svc), Some(slices_res)) = (
            find("", "v1", "nodes"),
            find("apps", "v1", "deployments"),
            find("apps", "v1", "statefulsets"),
            find("", "v1", "services"),
            find("discovery.k8s.io", "v1", "endpointslices"),
        ) else {
            return;
        };
        let read = watched_kinds();
        let seen = store.changes_of(&read);
        let waiting = self.next_due.is_some_and(|d| Instant::now() >= d);
        if self.last_seen == Some(seen) && !waiting {
            return;
        }
        self.next_due = None;
        let (nodes, _) = store.list(nodes_res, None);
        let mut workloads: Vec<Workload> = Vec::new();
        for res in [deploy, sts] {
            workloads.extend(store.list(res, None).0.into_iter().map(|w| (res, w)));
        }
        let report = packing::pack_cached(&nodes, &workloads, &mut self.packing);
        let now = meta::now_rfc3339();
        // Replicas that do not fit stay Pending, as pods a real scheduler could not place.
        let mut own_writes = pending::sync(store, &report, &workloads, &now);
        for _ in 0..own_writes {
            self.shared.stats.controller_write();
        }
        let faults = self.shared.faults.settings();
        if self.settled_under.as_ref() != Some(&faults) {
            self.settled.clear();
        }
        let mut settled = HashMap::with_capacity(self.settled.len());
        for ((res, w), &usage) in workloads.iter().zip(&report.scheduled) {
            let at = Arc::as_ptr(w) as usize;
            if self.settled.get(&at).is_some_and(|(_, u)| *u == usage) {
                settled.insert(at, (w.clone(), usage));
                continue;
            }
            if !self.due(res, w) {
                continue;
            }
            let p = self.progress(res, w, &faults);
            if let Some(after) = p.next_change {
                let at = Instant::now() + after;
                self.next_due = Some(self.next_due.map_or(at, |d| d.min(at)));
            }
            let mut status = workload_status(res, w, usage, &p, &now);
            let old = w.get("status").unwrap_or(&Value::Null);
            keep_condition_times(&mut status, old);
            if status != *old {
                if self.write_status(res, w, status) {
                    own_writes += 1;
                }
            } else if p.next_change.is_none() {
                settled.insert(at, (w.clone(), usage));
            }
        }
        self.settled = settled;
        self.settled_under = Some(faults);
        for s in store.list(svc, None).0 {
            let wants_lb = s.pointer("/spec/type") == Some(&json!("LoadBalancer"));
            let has_lb = s
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
            if wants_lb && !has_lb && self.due(svc, &s) {
                self.next_lb += 1;
                let n = self.next_lb;
                let ip = format!("{}.{}.{}", self.shared.lb_prefix, n / 250, n % 250);
                let status =
                    json!({ "loadBalancer": { "ingress": [{ "ip": ip, "ipMode": "VIP" }] } });
                if self.write_status(svc, &s, status) {
                    own_writes += 1;
                }
            }
        }
        // Forget objects that are gone so the map stays bounded by the live object count.
        let live: std::collections::HashSet<(String, String, String)> = workloads
            .iter()
            .map(|(r, w)| {
                (
                    r.key(),
                    meta::meta_str(w, "namespace").unwrap_or("").to_string(),
                    meta::name(w).to_string(),
                )
            })
            .collect();
        self.seen
            .retain(|k, _| k.0 == svc.key() || live.contains(k));
        *self
            .shared
            .capacity
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = report;
        // Slices follow services and workloads only: a tick that changed neither (a node
        // turning Ready, a pending pod) leaves them as they are.
        let slice_inputs = [svc, deploy, sts, slices_res];
        let before = store.changes_of(&slice_inputs);
        if self.slices_seen != Some(before) {
            let wrote = crate::endpoints::sync(&self.shared);
            own_writes += wrote;
            let ours = before + wrote as u64;
            self.slices_seen = Some(if store.changes_of(&slice_inputs) == ours {
                ours
            } else {
                before
            });
        }
        // The next tick need not look again only because of this tick's own writes: each
        // changed write is one change of a kind read here, so a count exactly that far on means
        // no client wrote those kinds meanwhile. Anything else (a client's write, a delete
        // cascading through a namespace) leaves another count and the next tick runs in full.
        let ours = seen + own_writes as u64;
        self.last_seen = Some(if store.changes_of(&read) == ours {
            ours
        } else {
            seen
        });
    }

    /// Where the rollout of a due workload stands (see `rollout`).
    fn progress(
        &self,
        res: &ResourceDef,
        w: &Value,
        faults: &crate::faults::FaultSettings,
    ) -> rollout::Progress {
        let key = (
            res.key(),
            meta::meta_str(w, "namespace").unwrap_or("").to_string(),
            meta::name(w).to_string(),
        );
        let (since, old_ready) = self
            .seen
            .get(&key)
            .map_or((Instant::now(), 0), |s| (s.1, s.2));
        let deadline_s = w
            .pointer("/spec/progressDeadlineSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(600);
        rollout::progress(&rollout::Rollout {
            desired: replicas(w),
            old_ready,
            elapsed: Instant::now()
                .saturating_duration_since(since + self.shared.config.status_delay),
            step: Duration::from_millis(faults.rollout_step_ms),
            never_ready: rollout::uses_any(w, &faults.never_ready_images),
            deadline: Duration::from_secs(deadline_s),
            statefulset: res.plural == "statefulsets",
        })
    }

    /// Stores `status` on `obj` unless the object changed since it was listed; whether a new
    /// version was stored.
    fn write_status(&self, res: &'static ResourceDef, obj: &Value, status: Value) -> bool {
        let ns = meta::meta_str(obj, "namespace").unwrap_or("").to_string();
        let name = meta::name(obj).to_string();
        let seen_rv = meta::meta_str(obj, "resourceVersion").map(str::to_string);
        let out = self.shared.store.write(res, &ns, &name, false, |cur| {
            // Deleted since the list: a Delete of nothing makes the store answer NotFound.
            let Some(cur) = cur else {
                return Ok(Change::Delete);
            };
            // Another write landed since the list: skip, the next tick recomputes from it.
            if meta::meta_str(cur, "resourceVersion").map(str::to_string) != seen_rv {
                return Ok(Change::Replace(cur.clone()));
            }
            let mut next = cur.clone();
            next["status"] = status;
            Ok(Change::Replace(next))
        });
        match out {
            Ok(o) if o.changed() => {
                self.shared.stats.controller_write();
                true
            }
            Ok(_) => false,
            Err(e) => {
                tracing::debug!(error = %e, %name, "status write skipped");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(name: &str, created: &str, replicas: i64, cpu: &str) -> Value {
        json!({
            "metadata": {"name": name, "namespace": "a", "creationTimestamp": created},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
            ]}}}
        })
    }

    #[test]
    fn only_others_writes_to_the_kinds_it_reads_wake_a_tick() {
        let shared = Shared::new(crate::SimConfig {
            status_delay: Duration::ZERO,
            ..Default::default()
        })
        .expect("a simulated cluster");
        let d = find("apps", "v1", "deployments").unwrap();
        let create = |name: &str| {
            let obj = deployment(name, "2026-01-01T00:00:00Z", 2, "100m");
            shared
                .store
                .write(d, "default", name, false, |_| Ok(Change::Create(obj)))
                .expect("created");
        };
        create("web");
        let mut c = Controller::new(shared.clone());
        let read = watched_kinds();
        let before = shared.store.changes_of(&read);
        c.tick();
        let after = shared.store.changes_of(&read);
        assert!(after > before, "the tick wrote the deployment's status");
        let web = shared.store.get(d, "default", "web").expect("stored");
        assert_eq!(web["status"]["readyReplicas"], 2);
        assert_eq!(
            c.last_seen,
            Some(after),
            "its own writes leave nothing to look at"
        );
        // A ConfigMap is nothing the controller reads.
        let cm = find("", "v1", "configmaps").unwrap();
        let obj = json!({"metadata": {"name": "settings"}, "data": {"a": "1"}});
        shared
            .store
            .write(cm, "default", "settings", false, |_| {
                Ok(Change::Create(obj))
            })
            .expect("created");
        assert_eq!(shared.store.changes_of(&read), after);
        // A workload written between ticks makes the next tick run in full.
        create("api");
        c.tick();
        let api = shared.store.get(d, "default", "api").expect("stored");
        assert_eq!(api["status"]["readyReplicas"], 2);
        assert_eq!(c.last_seen, Some(shared.store.changes_of(&read)));
    }

    #[test]
    fn packing_respects_capacity_oldest_first() {
        let nodes = vec![
            node_object("c", 0, "2", "8Gi", 110),
            node_object("c", 1, "2", "8Gi", 110),
        ];
        let d = find("apps", "v1", "deployments").unwrap();
        let workloads = vec![
            (d, deployment("new", "2026-01-02T00:00:00Z", 3, "1")),
            (d, deployment("old", "2026-01-01T00:00:00Z", 3, "1")),
        ];
        let workloads: Vec<Workload> = workloads
            .into_iter()
            .map(|(d, w)| (d, Arc::new(w)))
            .collect();
        let r = pack(&nodes, &workloads);
        let old = r.workloads.iter().find(|w| w.name == "old").unwrap();
        let new = r.workloads.iter().find(|w| w.name == "new").unwrap();
        assert_eq!((old.scheduled, new.scheduled), (3, 1));
        // The per-input counts follow the order the workloads were given in.
        assert_eq!(r.scheduled, [1, 3]);
        assert_eq!(r.nodes[0].requested.cpu_milli, 2000);
        let full = rollout::Progress {
            updated: 3,
            ready: 3,
            deadline_exceeded: false,
            next_change: None,
        };
        let st = workload_status(d, &workloads[0].1, 1, &full, "t");
        assert_eq!(st["readyReplicas"], 1);
        assert_eq!(st["unavailableReplicas"], 2);
        assert_eq!(st["conditions"][0]["status"], "False");
    }
}
