//! Scheduling decisions per second for one Divided object over 100, 1,000 and 10,000 clusters.
//!
//! Run: `cargo bench -p fedraft-core --bench schedule`. Each iteration is one full `schedule`
//! call (filters, apportionment, decision record with names, diff against the current
//! placement) for an object with 50 replicas already placed, which is the reschedule the state
//! machine runs on every heartbeat or cluster change that touches the object. Criterion prints
//! time per decision; decisions/s = 1 / that time (also shown as "thrpt" elements/s).

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fedraft_core::policy::*;
use fedraft_core::scheduler::*;

struct Fleet {
    names: Vec<String>,
    labels: Vec<BTreeMap<String, String>>,
    taints: Vec<Vec<Taint>>,
}

fn fleet(n: usize) -> Fleet {
    let names = (0..n).map(|i| format!("cluster-{i:05}")).collect();
    let labels = (0..n)
        .map(|i| {
            [
                ("region".to_string(), format!("r{}", i % 8)),
                ("env".to_string(), "prod".to_string()),
            ]
            .into()
        })
        .collect();
    // Every 50th cluster carries a NoSchedule taint, so the filter path is exercised.
    let taints = (0..n)
        .map(|i| {
            if i % 50 == 0 {
                vec![Taint {
                    key: "maintenance".into(),
                    value: String::new(),
                    effect: TaintEffect::NoSchedule,
                }]
            } else {
                Vec::new()
            }
        })
        .collect();
    Fleet {
        names,
        labels,
        taints,
    }
}

fn views<'a>(f: &'a Fleet, cpu: bool) -> Vec<ClusterView<'a>> {
    (0..f.names.len())
        .map(|i| ClusterView {
            name: &f.names[i],
            labels: &f.labels[i],
            taints: &f.taints[i],
            cordoned: i % 97 == 0,
            health: if i % 89 == 0 {
                HealthView::NotReady { since_ms: 0 }
            } else {
                HealthView::Ready
            },
            available: cpu.then_some(Resources {
                cpu_millis: 8_000 + (i as u64 % 7) * 1_000,
                memory_bytes: 64 << 30,
                pods: 110,
            }),
            extended: None,
            held_to: None,
        })
        .collect()
}

fn placements() -> Vec<(&'static str, Placement)> {
    let selector = Some(Box::new(LabelSelector {
        match_labels: [("env".to_string(), "prod".to_string())].into(),
        match_expressions: vec![],
    }));
    let divided = |division| Placement {
        cluster_selector: selector.clone(),
        replicas: ReplicaPolicy {
            mode: ReplicaMode::Divided,
            division,
        },
        ..Default::default()
    };
    let kubefed: BTreeMap<String, ClusterPreference> = [
        (
            "*".to_string(),
            ClusterPreference {
                weight: 1,
                min_replicas: 0,
                max_replicas: Some(3),
            },
        ),
        (
            "cluster-00001".to_string(),
            ClusterPreference {
                weight: 5,
                min_replicas: 2,
                max_replicas: None,
            },
        ),
    ]
    .into();
    vec![
        ("webster", divided(None)),
        (
            "kubefed",
            divided(Some(Box::new(Division::StaticWeights {
                weights: kubefed,
                rebalance: false,
            }))),
        ),
        (
            "dynamic",
            divided(Some(Box::new(Division::DynamicByCapacity {
                rebalance: false,
            }))),
        ),
    ]
}

/// CPU time this thread has run, from the kernel's scheduler statistics (Linux only).
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Decisions per second of CPU time actually received: on a machine shared with other builds,
/// wall-clock figures understate the scheduler's own cost, so both are printed.
fn cpu_rate(label: &str, n: usize, req: &ScheduleRequest<'_>) {
    let iters = (2_000_000 / n).clamp(50, 5_000) as u64;
    for _ in 0..iters / 10 {
        black_box(schedule(black_box(req)));
    }
    let (Some(cpu0), wall0) = (thread_cpu_ns(), std::time::Instant::now()) else {
        return;
    };
    for _ in 0..iters {
        black_box(schedule(black_box(req)));
    }
    let wall = wall0.elapsed().as_nanos().max(1) as f64;
    let Some(cpu1) = thread_cpu_ns() else { return };
    let cpu = (cpu1 - cpu0).max(1) as f64;
    println!(
        "{label}/{n}: {:.0} decisions per CPU-second, {:.0} per wall-second ({iters} decisions)",
        iters as f64 * 1e9 / cpu,
        iters as f64 * 1e9 / wall
    );
}

fn bench(c: &mut Criterion) {
    let per = Resources {
        cpu_millis: 500,
        memory_bytes: 512 << 20,
        pods: 1,
    };
    let mut group = c.benchmark_group("schedule_divided");
    group.throughput(Throughput::Elements(1));
    for n in [100usize, 1_000, 10_000] {
        let f = fleet(n);
        let v = views(&f, true);
        for (label, p) in placements() {
            // The object's current placement: what a first decision produced.
            let empty = BTreeMap::new();
            let first = schedule(&ScheduleRequest {
                object_key: "bench/web",
                placement: &p,
                total_replicas: 50,
                per_replica: per,
                per_replica_extended: &NO_EXTENDED,
                clusters: &v,
                current: &empty,
                allowed: None,
                peers: None,
                overflow: None,
                now_ms: 1_000,
                steady_spread: true,
            });
            let current = first.placement.clone();
            let req = ScheduleRequest {
                object_key: "bench/web",
                placement: &p,
                total_replicas: 60,
                per_replica: per,
                per_replica_extended: &NO_EXTENDED,
                clusters: &v,
                current: &current,
                allowed: None,
                peers: None,
                overflow: None,
                now_ms: 120_000,
                steady_spread: true,
            };
            cpu_rate(label, n, &req);
            group.bench_with_input(BenchmarkId::new(label, n), &n, |b, _| {
                b.iter(|| {
                    black_box(schedule(black_box(&ScheduleRequest {
                        object_key: "bench/web",
                        placement: &p,
                        total_replicas: 60,
                        per_replica: per,
                        per_replica_extended: &NO_EXTENDED,
                        clusters: &v,
                        current: &current,
                        allowed: None,
                        peers: None,
                        overflow: None,
                        now_ms: 120_000,
                        steady_spread: true,
                    })))
                })
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
