//! Apply throughput and memory per object of the state machine.
//!
//! Setup: 1,000 Ready clusters and 100,000 objects (Divided, 3 replicas over an explicit list
//! of 3 clusters). Then 1,000,000 mixed entries, as executors and users produce them:
//! 50% heartbeat batches (10 clusters each, capacity on every tenth), 40% status report
//! batches (10 reports each), 10% object puts (half image edits, half replica changes that
//! reschedule), and a tick every 1,000 entries. Entries are generated in chunks outside the
//! timed section. Memory is measured with a counting global allocator: bytes held per object
//! beyond its template text (the manifest).
//!
//! Entries/s is printed twice: by wall time around each `apply` (the goal's figure) and per
//! CPU-second the applying thread actually ran (steadier on a machine shared with builds).
//!
//! Run: `cargo bench -p fedraft-core --bench apply` (release). `APPLY_BENCH_ENTRIES` and
//! `APPLY_BENCH_OBJECTS` shrink the run for a quick check.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

use fedraft_core::command::{Command, Heartbeat, LogEntry, ObjectStatusReport};
use fedraft_core::model::{Capacity, ClusterSpec, ObjectSpec};
use fedraft_core::policy::{Placement, Resources};
use fedraft_core::state::State;

struct Counting;

static HELD: AtomicIsize = AtomicIsize::new(0);

// SAFETY: delegates to the system allocator and only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        HELD.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const CLUSTERS: usize = 1_000;
const CHUNK: usize = 10_000;
const T0: u64 = 1_700_000_000_000;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU time this thread has run, from the kernel's scheduler statistics (Linux only).
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

fn cluster(i: usize) -> String {
    format!("c{i:04}")
}

fn template(name: &str, replicas: u32, image: u32) -> String {
    format!(
        r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"{name}","labels":{{"app":"{name}"}}}},"spec":{{"replicas":{replicas},"selector":{{"matchLabels":{{"app":"{name}"}}}},"template":{{"metadata":{{"labels":{{"app":"{name}"}}}},"spec":{{"containers":[{{"name":"app","image":"registry.example.com/team/app:1.{image}","resources":{{"requests":{{"cpu":"100m","memory":"128Mi"}}}}}}]}}}}}}}}"#
    )
}

/// Deterministic pseudo-random numbers (xorshift), so every run does the same work.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn object_spec(i: usize, replicas: u32, image: u32) -> ObjectSpec {
    let a = i % CLUSTERS;
    let names = [
        cluster(a),
        cluster((a + 1) % CLUSTERS),
        cluster((a + 2) % CLUSTERS),
    ];
    ObjectSpec {
        template: template(&format!("app-{i}"), replicas, image),
        placement: Placement {
            clusters: Some(names.to_vec()),
            ..Placement::default()
        },
        overrides: Vec::new(),
    }
}

fn capacity() -> Capacity {
    let r = Resources {
        cpu_millis: 10_000_000,
        memory_bytes: 1 << 45,
        pods: 1_000_000,
    };
    Capacity {
        allocatable: r,
        available: r,
    }
}

fn main() {
    let objects = env_or("APPLY_BENCH_OBJECTS", 100_000);
    let entries = env_or("APPLY_BENCH_ENTRIES", 1_000_000);
    let mut state = State::new();
    let mut index = 0u64;
    let mut now = T0;
    let mut apply = |state: &mut State, now: u64, cmd: Command| {
        index += 1;
        let a = state.apply(index, &LogEntry::new("", "bench", now, cmd));
        assert!(a.outcome.is_accepted(), "{:?}", a.outcome);
    };

    for i in 0..CLUSTERS {
        apply(
            &mut state,
            now,
            Command::RegisterCluster(ClusterSpec::new(cluster(i), "https://k8s.example:6443")),
        );
    }
    let all: Vec<Heartbeat> = (0..CLUSTERS)
        .map(|i| Heartbeat {
            cluster: cluster(i),
            capacity: Some(capacity()),
        })
        .collect();
    apply(&mut state, now, Command::Heartbeats(all.clone()));

    // ---- objects: throughput of creates and memory per object ----
    let specs: Vec<ObjectSpec> = (0..objects).map(|i| object_spec(i, 3, 0)).collect();
    let template_bytes: usize = specs.iter().map(|s| s.template.len()).sum();
    let held_before = HELD.load(Ordering::Relaxed);
    let start = Instant::now();
    for (i, spec) in specs.into_iter().enumerate() {
        now += 1;
        // Log time moves 1 ms per entry: keep every cluster Ready through the setup.
        if i % 10_000 == 9_999 {
            apply(&mut state, now, Command::Heartbeats(all.clone()));
        }
        apply(
            &mut state,
            now,
            Command::PutObject {
                namespace: format!("ns-{}", i % 100),
                name: format!("app-{i}"),
                spec,
                expected_version: None,
            },
        );
    }
    let put_secs = start.elapsed().as_secs_f64();
    let placed = state
        .objects()
        .filter(|o| o.status.shortfall.is_none() && !o.status.clusters.is_empty())
        .count();
    assert_eq!(
        placed, objects,
        "every object must be fully placed after setup"
    );
    let held_after = HELD.load(Ordering::Relaxed);
    let per_object = (held_after - held_before) as f64 / objects as f64;
    let manifest = template_bytes as f64 / objects as f64;
    println!(
        "setup: {CLUSTERS} clusters, {objects} objects created in {put_secs:.2} s ({:.0} puts/s)",
        objects as f64 / put_secs
    );
    println!(
        "memory: {per_object:.0} bytes held per object, of which {manifest:.0} template text => {:.0} bytes overhead per object (goal <= 2048)",
        per_object - manifest
    );

    // ---- mixed entries ----
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut applied = 0usize;
    let mut timed = 0f64;
    let mut kinds = [0usize; 4];
    let mut per_kind = [0f64; 4];
    let mut round = 0u32;
    let mut cpu_ns = 0u64;
    while applied < entries {
        let n = CHUNK.min(entries - applied);
        let mut chunk = Vec::with_capacity(n);
        for k in 0..n {
            now += 1;
            let seq = applied + k;
            let r = rng.below(100);
            let cmd = if seq % 1000 == 999 {
                kinds[3] += 1;
                Command::Tick
            } else if r < 50 {
                kinds[0] += 1;
                let base = rng.below(CLUSTERS);
                let with_cap = rng.below(10) == 0;
                Command::Heartbeats(
                    (0..10)
                        .map(|j| Heartbeat {
                            cluster: cluster((base + j) % CLUSTERS),
                            capacity: with_cap.then(capacity),
                        })
                        .collect(),
                )
            } else if r < 90 {
                kinds[1] += 1;
                Command::StatusReports(
                    (0..10)
                        .map(|_| {
                            let o = rng.below(objects);
                            ObjectStatusReport {
                                namespace: format!("ns-{}", o % 100),
                                name: format!("app-{o}"),
                                cluster: cluster((o + rng.below(3)) % CLUSTERS),
                                applied: true,
                                ready_replicas: (rng.below(3)) as u32,
                                message: None,
                            }
                        })
                        .collect(),
                )
            } else {
                kinds[2] += 1;
                let o = rng.below(objects);
                round += 1;
                let (replicas, image) = if r < 95 {
                    (3, round)
                } else {
                    (2 + (round % 3), 0)
                };
                Command::PutObject {
                    namespace: format!("ns-{}", o % 100),
                    name: format!("app-{o}"),
                    spec: object_spec(o, replicas, image),
                    expected_version: None,
                }
            };
            chunk.push(LogEntry::new("", "bench", now, cmd));
        }
        let cpu0 = thread_cpu_ns();
        for e in &chunk {
            index += 1;
            let start = Instant::now();
            let a = state.apply(index, e);
            let took = start.elapsed().as_secs_f64();
            timed += took;
            let kind = match e.command {
                Command::Heartbeats(_) => 0,
                Command::StatusReports(_) => 1,
                Command::PutObject { .. } => 2,
                _ => 3,
            };
            per_kind[kind] += took;
            debug_assert!(a.outcome.is_accepted());
        }
        if let (Some(c0), Some(c1)) = (cpu0, thread_cpu_ns()) {
            cpu_ns += c1 - c0;
        }
        applied += n;
    }
    println!(
        "mixed: {applied} entries ({} heartbeat batches x10, {} status batches x10, {} puts, {} ticks) in {timed:.2} s",
        kinds[0], kinds[1], kinds[2], kinds[3]
    );
    println!(
        "throughput: {:.0} entries/s (goal >= 200000)",
        applied as f64 / timed
    );
    if cpu_ns > 0 {
        println!(
            "throughput per CPU-second of the applying thread: {:.0} entries/s (on a shared machine wall time also counts time spent descheduled)",
            applied as f64 * 1e9 / cpu_ns as f64
        );
    }
    let names = ["heartbeat batch", "status batch", "put", "tick"];
    for k in 0..4 {
        println!(
            "  {:>15}: {:6.2} us/entry",
            names[k],
            per_kind[k] * 1e6 / kinds[k].max(1) as f64
        );
    }
    let start = Instant::now();
    let image = state.image();
    let image_secs = start.elapsed().as_secs_f64();
    println!("image: taken in {:.1} ms", image_secs * 1e3);
    assert_eq!(image.to_snapshot(), state.to_snapshot());
    drop(image);
    // What every checkpoint adds (raft/src/checkpointer.rs): copying the indexes' aggregates
    // under the state's lock, then rebuilding and comparing them on the checkpoint thread,
    // against encoding the checkpoint there; and the whole check, for comparison.
    let start = Instant::now();
    let checked = state.checked_image();
    let copy_secs = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let consistent = checked.check_consistency();
    let check_secs = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let encoded = checked.to_snapshot().len();
    let encode_secs = start.elapsed().as_secs_f64();
    assert_eq!(consistent, Ok(()));
    println!(
        "checked image: aggregates copied in {:.1} ms, checked in {:.1} ms; encoding it ({} MiB) {:.1} ms",
        copy_secs * 1e3,
        check_secs * 1e3,
        encoded >> 20,
        encode_secs * 1e3
    );
    drop(checked);
    let start = Instant::now();
    assert_eq!(state.check_consistency(), Ok(()));
    println!(
        "whole consistency check (all indexes, under the lock): {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    let start = Instant::now();
    let snap = state.to_snapshot();
    let hash = state.state_hash_hex();
    println!(
        "snapshot: {} MiB, snapshot+hash in {:.2} s, hash {}",
        snap.len() >> 20,
        start.elapsed().as_secs_f64(),
        &hash[..16]
    );
}
