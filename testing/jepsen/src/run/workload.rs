//! Client workers that drive fedraft's object API and record every operation into the history.
//!
//! - register: a few objects `jepsen/r<k>`; each worker reads one (linearizable GET) or compare-and-sets it
//!   with the resource version it last read (`If-Match`), writing a value no one wrote before into the
//!   template's annotation `jepsen.fedraft.io/value`.
//! - set: unique creates `jepsen-set/e<n>` (`If-Match: "0"`, create only); the final linearizable list is
//!   recorded by `final_set_read`.
//!
//! Outcomes: 2xx is ok; 409 is fail (the version did not match: nothing was written); a request that never
//! reached a server is fail; anything else (503, timeouts, resets, 5xx) is indeterminate, after which the
//! worker continues under a new process id, as Jepsen requires. Workers stop at the deadline or when the
//! shared request budget is spent. This module judges nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::Method;
use serde_json::{json, Value};

use super::api::{Api, Reply};
use crate::history::{Call, Op, Outcome, Ret};

pub const REGISTER_NS: &str = "jepsen";
pub const SET_NS: &str = "jepsen-set";
pub const SET_KEY: &str = "set";
pub const VALUE_ANNOTATION: &str = "jepsen.fedraft.io/value";
/// How long a member stays NotReady before its replicas fail over, on every object.
pub const FAILOVER_GRACE_S: u64 = 2;
/// Registers (objects) the register workload spreads over.
pub const REGISTER_KEYS: u64 = 3;

/// Shared by all workers of a run.
pub struct Recorder {
    start: Instant,
    ops: Mutex<Vec<Op>>,
    next_process: AtomicU64,
    next_value: AtomicU64,
    budget: AtomicU64,
}

impl Recorder {
    pub fn new(start: Instant, max_requests: u64) -> Arc<Recorder> {
        Arc::new(Recorder {
            start,
            ops: Mutex::new(Vec::new()),
            next_process: AtomicU64::new(0),
            next_value: AtomicU64::new(1),
            budget: AtomicU64::new(max_requests),
        })
    }

    pub fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    pub(crate) fn process(&self) -> u64 {
        self.next_process.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn value(&self) -> u64 {
        self.next_value.fetch_add(1, Ordering::Relaxed)
    }

    /// Takes one request from the budget; false when it is spent.
    pub(crate) fn spend(&self) -> bool {
        self.budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| b.checked_sub(1))
            .is_ok()
    }

    pub fn push(&self, op: Op) {
        if let Ok(mut ops) = self.ops.lock() {
            ops.push(op);
        }
    }

    pub fn take(&self) -> Vec<Op> {
        let mut ops = self
            .ops
            .lock()
            .map(|mut o| std::mem::take(&mut *o))
            .unwrap_or_default();
        ops.sort_by_key(|o| (o.invoke_ns, o.process));
        ops
    }
}

/// A Deployment template that carries `value`; one replica per cluster at most, small requests.
pub fn template(name: &str, value: u64, replicas: u32) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "labels": {"app": name},
            "annotations": {VALUE_ANNOTATION: value.to_string()},
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "app", "image": "registry.invalid/jepsen:1",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }]},
            },
        },
    })
}

/// The object body: spread over every cluster by equal weights, failing over after a short grace.
pub fn object_body(name: &str, value: u64, replicas: u32, clusters: &[&str]) -> Value {
    let weights: serde_json::Map<String, Value> = clusters
        .iter()
        .map(|c| (c.to_string(), json!({"weight": 1})))
        .collect();
    json!({
        "template": template(name, value, replicas),
        "placement": {
            "replicas": {"mode": "Divided", "division": {"staticWeights": {"weights": weights}}},
            "failover": {"enabled": true, "gracePeriodSeconds": FAILOVER_GRACE_S},
        },
    })
}

/// The value annotation of an object as the API returns it.
pub fn object_value(doc: &Value) -> Option<u64> {
    doc.pointer("/template/metadata/annotations")?
        .get(VALUE_ANNOTATION)?
        .as_str()?
        .parse()
        .ok()
}

pub(crate) fn classify_write(reply: &Reply) -> Outcome {
    match reply {
        Reply::Answered { status, .. } if (200..300).contains(status) => Outcome::Ok {
            // The PUT answer shows the object as this node holds it after the write, possibly already
            // changed again, so the write's own version is not known for certain.
            ret: Ret::Written { version: None },
        },
        Reply::Answered { status: 409, .. } | Reply::NotSent(_) => Outcome::Fail {
            error: reply.describe(),
        },
        Reply::Answered { status, .. } if (400..500).contains(status) && *status != 408 => {
            // A request fedraft refused as malformed changed nothing; it is a harness bug worth seeing.
            tracing::warn!(reply = %reply.describe(), "write refused");
            Outcome::Fail {
                error: reply.describe(),
            }
        }
        _ => Outcome::Info {
            error: reply.describe(),
        },
    }
}

/// What one worker does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Register,
    Set,
}

/// Runs one worker until `deadline` or the budget is spent.
pub async fn worker(
    kind: Kind,
    id: u64,
    seed: u64,
    api: Api,
    rec: Arc<Recorder>,
    deadline: Instant,
    clusters: Vec<&'static str>,
) {
    let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(1_000_003).wrapping_add(id));
    let mut process = rec.process();
    // Per key: the version this worker last read (for its next CAS).
    let mut known: HashMap<u64, u64> = HashMap::new();
    while Instant::now() < deadline && rec.spend() {
        let node = rng.random_range(0..api.nodes());
        let op = match kind {
            Kind::Register => {
                let k = rng.random_range(0..REGISTER_KEYS);
                match known.get(&k).copied() {
                    Some(expected) if rng.random_bool(0.5) => {
                        cas(&api, &rec, node, process, k, expected, &clusters).await
                    }
                    _ => read(&api, &rec, node, process, k).await,
                }
            }
            Kind::Set => add(&api, &rec, node, process, &clusters).await,
        };
        match (&op.call, &op.outcome) {
            (
                Call::Read,
                Outcome::Ok {
                    ret: Ret::Read { version, .. },
                },
            ) => {
                if let Some(k) = op.key.strip_prefix('r').and_then(|k| k.parse().ok()) {
                    known.insert(k, *version);
                }
            }
            (Call::Cas { .. }, _) => {
                // Whatever happened, the version is stale now: read before the next CAS on this key.
                if let Some(k) = op.key.strip_prefix('r').and_then(|k| k.parse().ok()) {
                    known.remove(&k);
                }
            }
            _ => {}
        }
        let indeterminate = op.outcome.is_indeterminate();
        rec.push(op);
        if indeterminate {
            process = rec.process();
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..20))).await;
    }
}

async fn read(api: &Api, rec: &Recorder, node: usize, process: u64, k: u64) -> Op {
    let key = format!("r{k}");
    let invoke_ns = rec.now_ns();
    let reply = api
        .call(
            node,
            Method::GET,
            &format!("/v1/namespaces/{REGISTER_NS}/objects/{key}"),
            None,
            &[],
        )
        .await;
    let outcome = match &reply {
        Reply::Answered { status: 404, body }
            if body.pointer("/error/code").and_then(Value::as_str) == Some("NotFound") =>
        {
            Outcome::Ok {
                ret: Ret::Read {
                    value: None,
                    version: 0,
                },
            }
        }
        Reply::Answered { status: 200, body } => match (
            object_value(body),
            body.get("resourceVersion").and_then(Value::as_u64),
        ) {
            (Some(value), Some(version)) => Outcome::Ok {
                ret: Ret::Read {
                    value: Some(value),
                    version,
                },
            },
            _ => Outcome::Info {
                error: format!("unreadable object: {body}"),
            },
        },
        Reply::NotSent(_) => Outcome::Fail {
            error: reply.describe(),
        },
        _ => Outcome::Info {
            error: reply.describe(),
        },
    };
    Op {
        process,
        key,
        invoke_ns,
        complete_ns: rec.now_ns(),
        call: Call::Read,
        outcome,
    }
}

async fn cas(
    api: &Api,
    rec: &Recorder,
    node: usize,
    process: u64,
    k: u64,
    expected: u64,
    clusters: &[&str],
) -> Op {
    let key = format!("r{k}");
    let value = rec.value();
    let body = object_body(&key, value, 2, clusters);
    let invoke_ns = rec.now_ns();
    let reply = api
        .call(
            node,
            Method::PUT,
            &format!("/v1/namespaces/{REGISTER_NS}/objects/{key}"),
            Some(&body),
            &[("if-match", format!("\"{expected}\""))],
        )
        .await;
    Op {
        process,
        key,
        invoke_ns,
        complete_ns: rec.now_ns(),
        call: Call::Cas { expected, value },
        outcome: classify_write(&reply),
    }
}

async fn add(api: &Api, rec: &Recorder, node: usize, process: u64, clusters: &[&str]) -> Op {
    let element = rec.value();
    let name = format!("e{element}");
    let body = object_body(&name, element, 1, clusters);
    let invoke_ns = rec.now_ns();
    let reply = api
        .call(
            node,
            Method::PUT,
            &format!("/v1/namespaces/{SET_NS}/objects/{name}"),
            Some(&body),
            &[("if-match", "\"0\"".to_string())],
        )
        .await;
    Op {
        process,
        key: SET_KEY.into(),
        invoke_ns,
        complete_ns: rec.now_ns(),
        call: Call::Add { element },
        outcome: classify_write(&reply),
    }
}

/// The final linearizable read of the set, retried on every node until one answers or `limit` passes;
/// recorded (also when it never succeeded, as indeterminate).
pub async fn final_set_read(api: &Api, rec: &Recorder, limit: Duration) {
    let deadline = Instant::now() + limit;
    let process = rec.process();
    let mut attempt = 0usize;
    loop {
        let invoke_ns = rec.now_ns();
        let reply = api
            .call(
                attempt % api.nodes(),
                Method::GET,
                &format!("/v1/namespaces/{SET_NS}/objects"),
                None,
                &[],
            )
            .await;
        let elements: Option<Vec<u64>> = reply.ok_body().and_then(|b| {
            b.get("items")?
                .as_array()?
                .iter()
                .map(|o| o.get("name")?.as_str()?.strip_prefix('e')?.parse().ok())
                .collect()
        });
        if let Some(elements) = elements {
            rec.push(Op {
                process,
                key: SET_KEY.into(),
                invoke_ns,
                complete_ns: rec.now_ns(),
                call: Call::ReadAll,
                outcome: Outcome::Ok {
                    ret: Ret::Elements { elements },
                },
            });
            return;
        }
        attempt += 1;
        if Instant::now() >= deadline {
            rec.push(Op {
                process,
                key: SET_KEY.into(),
                invoke_ns,
                complete_ns: rec.now_ns(),
                call: Call::ReadAll,
                outcome: Outcome::Info {
                    error: reply.describe(),
                },
            });
            return;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
