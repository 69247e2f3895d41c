//! The load generator: one HTTP client implementation for every target, and the request
//! builders (fedraft's object PUT, the same through the Kubernetes-compatible door as a
//! server-side apply, etcd's JSON-gateway put). Closed loop: each client sends a
//! request, waits for the answer, records the latency and sends the next, with no think time.
//!
//! Must not: treat the two systems differently anywhere except in [`Target::request`] and
//! [`Target::accepted`]; both go through the same reqwest configuration, connection reuse and
//! timing code.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use reqwest::StatusCode;

/// Longest a single put may take before it counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Which system a target is, with what its request builder needs.
#[derive(Debug, Clone)]
pub enum System {
    /// `PUT {base}/v1/namespaces/{namespace}/objects/k{key}` with a ConfigMap template.
    Fedraft {
        base: String,
        token: String,
        namespace: String,
    },
    /// `PATCH {base}/api/v1/namespaces/{namespace}/configmaps/k{key}` through the
    /// Kubernetes-compatible door: a server-side apply of a ConfigMap, as `kubectl apply
    /// --server-side` sends it (creates, then updates).
    Door {
        base: String,
        token: String,
        namespace: String,
    },
    /// `POST {base}/v3/kv/put` with base64 key and value, as etcd's v3 JSON gateway wants.
    Etcd { base: String },
}

/// One system under load.
pub struct Target {
    pub name: &'static str,
    pub system: System,
    http: reqwest::Client,
    /// The processes serving this target when the bench started them (empty when attached):
    /// their CPU time over each measured window is reported per put.
    pub pids: Vec<u32>,
    /// The value after its per-put prefix, pre-rendered for this system's body (so no request
    /// pays for encoding more than the prefix).
    value_tail: String,
}

/// Bytes at the start of every value that change with every put (the put's sequence number), so
/// no put is a no-op rewrite of identical bytes. 9 is a multiple of 3: the base64 of the prefix
/// and of the tail concatenate to the base64 of the whole value.
pub const VALUE_PREFIX_BYTES: usize = 9;

fn prefix(seq: u64) -> [u8; VALUE_PREFIX_BYTES] {
    let mut p = [0u8; VALUE_PREFIX_BYTES];
    p[1..].copy_from_slice(&seq.to_be_bytes());
    p
}

impl Target {
    /// `value` is the raw payload (at least `VALUE_PREFIX_BYTES`); both systems carry the same
    /// bytes, the first `VALUE_PREFIX_BYTES` replaced by each put's sequence number.
    pub fn new(name: &'static str, system: System, value: &[u8]) -> anyhow::Result<Target> {
        anyhow::ensure!(value.len() >= VALUE_PREFIX_BYTES, "value too short");
        let tail = &value[VALUE_PREFIX_BYTES..];
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(REQUEST_TIMEOUT)
            .pool_max_idle_per_host(1024)
            .tcp_nodelay(true)
            .build()
            .context("building the HTTP client")?;
        let value_tail = match &system {
            // JSON string of the value's hex digits: no escaping needed, same size class.
            System::Fedraft { .. } | System::Door { .. } => hex(tail),
            System::Etcd { .. } => base64(tail),
        };
        Ok(Target {
            name,
            system,
            http,
            pids: Vec::new(),
            value_tail,
        })
    }

    /// The only place the two systems' requests differ.
    fn request(&self, key: u64, seq: u64) -> reqwest::RequestBuilder {
        match &self.system {
            System::Fedraft {
                base,
                token,
                namespace,
            } => {
                let name = format!("k{key:08}");
                let body = format!(
                    r#"{{"template":{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"v":"{}{}"}}}}}}"#,
                    hex(&prefix(seq)),
                    self.value_tail
                );
                self.http
                    .put(format!("{base}/v1/namespaces/{namespace}/objects/{name}"))
                    .bearer_auth(token)
                    .header("content-type", "application/json")
                    .body(body)
            }
            System::Door {
                base,
                token,
                namespace,
            } => {
                let name = format!("k{key:08}");
                let body = format!(
                    r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"{namespace}"}},"data":{{"v":"{}{}"}}}}"#,
                    hex(&prefix(seq)),
                    self.value_tail
                );
                self.http
                    .patch(format!(
                        "{base}/api/v1/namespaces/{namespace}/configmaps/{name}?fieldManager=bench&force=true"
                    ))
                    .bearer_auth(token)
                    .header("content-type", "application/apply-patch+yaml")
                    .body(body)
            }
            System::Etcd { base } => {
                // etcd's benchmark uses 8-byte keys; so does this one.
                let key = format!("{:08}", key % 100_000_000);
                let body = format!(
                    r#"{{"key":"{}","value":"{}{}"}}"#,
                    base64(key.as_bytes()),
                    base64(&prefix(seq)),
                    self.value_tail
                );
                self.http
                    .post(format!("{base}/v3/kv/put"))
                    .header("content-type", "application/json")
                    .body(body)
            }
        }
    }

    /// Whether an answer is a successful put.
    fn accepted(&self, status: StatusCode, body: &[u8]) -> bool {
        match self.system {
            System::Fedraft { .. } => status == StatusCode::OK,
            System::Door { .. } => status == StatusCode::OK || status == StatusCode::CREATED,
            // The gateway answers 200 with a `header` on success, an `error` object otherwise.
            System::Etcd { .. } => {
                status == StatusCode::OK && body.windows(8).any(|w| w == b"\"header\"")
            }
        }
    }

    /// One put of `key` with a value that carries `seq`: Ok(latency) or Err(why).
    pub async fn put(&self, key: u64, seq: u64) -> Result<Duration, String> {
        let started = Instant::now();
        let resp = self
            .request(key, seq)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| e.to_string())?;
        let took = started.elapsed();
        if self.accepted(status, &body) {
            Ok(took)
        } else {
            let text = String::from_utf8_lossy(&body);
            Err(format!(
                "{status}: {}",
                text.chars().take(200).collect::<String>()
            ))
        }
    }
}

/// What one round of one target measured.
#[derive(Debug, Default, Clone)]
pub struct Round {
    /// Latency of every successful put started inside the measured window, in microseconds.
    pub latencies_us: Vec<u32>,
    pub errors: u64,
    pub first_error: Option<String>,
    pub measured: Duration,
    /// CPU time the target's processes used inside the measured window (None when unknown).
    pub cpu: Option<Duration>,
}

/// CPU time (user + system, all threads) of `pids` so far, from /proc; None if any is unreadable.
pub fn cpu_time(pids: &[u32]) -> Option<Duration> {
    // /proc reports in USER_HZ, which Linux fixes at 100 for user space.
    const TICKS_PER_S: u64 = 100;
    if pids.is_empty() {
        return None;
    }
    let mut ticks = 0u64;
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name (field 2) may hold spaces; the fields after its ')' are fixed.
        let rest = &stat[stat.rfind(')')? + 1..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 overall: 12 and 13 after the name.
        ticks += f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    }
    Some(Duration::from_millis(ticks * 1000 / TICKS_PER_S))
}

/// Runs `clients` closed-loop clients for `warmup + measure`; only puts that start inside the
/// measured window count. Keys: client `c` writes `first_key + c`, `+ clients`, ... modulo
/// `key_space`, so clients never share a key within a round. The clients are tasks of a
/// `JoinSet`, so dropping the round (Ctrl-C) stops them at once.
pub async fn round(
    target: Arc<Target>,
    clients: usize,
    warmup: Duration,
    measure: Duration,
    key_space: u64,
    first_key: u64,
) -> anyhow::Result<Round> {
    let start = Instant::now();
    let window_start = start + warmup;
    let end = window_start + measure;
    let mut set = tokio::task::JoinSet::new();
    for c in 0..clients {
        let target = target.clone();
        set.spawn(async move {
            let mut r = Round::default();
            let mut seq = first_key + c as u64;
            loop {
                let now = Instant::now();
                if now >= end {
                    break;
                }
                let counted = now >= window_start;
                let result = target.put(seq % key_space.max(1), seq).await;
                seq += clients as u64;
                match result {
                    Ok(lat) if counted => r
                        .latencies_us
                        .push(lat.as_micros().min(u32::MAX as u128) as u32),
                    Ok(_) => {}
                    Err(e) => {
                        if counted {
                            r.errors += 1;
                        }
                        if r.first_error.is_none() {
                            r.first_error = Some(e);
                        }
                        // A refused connection fails in microseconds: do not spin on it.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
            r
        });
    }
    // The target's CPU time over the measured window, sampled beside the clients.
    tokio::time::sleep_until(window_start.into()).await;
    let cpu_start = cpu_time(&target.pids);
    tokio::time::sleep_until(end.into()).await;
    let cpu = match (cpu_start, cpu_time(&target.pids)) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let mut total = Round {
        measured: measure,
        cpu,
        ..Round::default()
    };
    while let Some(joined) = set.join_next().await {
        let r = joined.context("a load client panicked")?;
        total.latencies_us.extend(r.latencies_us);
        total.errors += r.errors;
        if total.first_error.is_none() {
            total.first_error = r.first_error;
        }
    }
    Ok(total)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Standard base64 with padding (RFC 4648), as etcd's gateway decodes `bytes` fields.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (raw, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(raw.as_bytes()), enc, "{raw:?}");
        }
    }

    #[test]
    fn prefix_and_tail_encode_like_the_whole_value() {
        let value: Vec<u8> = (0u8..40).collect();
        let mut whole = prefix(0x0102_0304_0506_0708).to_vec();
        whole.extend_from_slice(&value[VALUE_PREFIX_BYTES..]);
        assert_eq!(
            format!(
                "{}{}",
                base64(&prefix(0x0102_0304_0506_0708)),
                base64(&value[VALUE_PREFIX_BYTES..])
            ),
            base64(&whole)
        );
        assert_eq!(hex(&prefix(255)), "0000000000000000ff");
    }
}
