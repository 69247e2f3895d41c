//! The figures of `fedraft bench fleet`: what each phase measured, the processes' CPU and
//! memory at phase ends (and each node's memory breakdown, disk growth and checkpoints), the
//! correctness checks, printed as text and written as JSON (`fleet_plot` draws the curve).
//!
//! Must not: drop an error or a failed check from either rendering.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use super::fleet_args::{FleetArgs, Samples};
use super::fleet_gauges::{Disk, NodeGauges};
use super::fleet_work::percentile;
use super::load::cpu_time;

const MIB: f64 = (1 << 20) as f64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Start,
    Register,
    /// Cluster ownership spread over the nodes: each node's executors hold their share of the
    /// clusters, where at `Register` the leader's held all of them and the others' none.
    Owned,
    Converge,
    /// A while after convergence, once passes verified the copies they wrote.
    Settled,
    Steady,
    Dark,
    Brake,
    /// The fleet healed and settled again after the fault phases, before more objects.
    BeforeMore,
    /// Settled after the further objects converged.
    More,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Start => "start",
            Phase::Register => "register",
            Phase::Owned => "owned",
            Phase::Converge => "converge",
            Phase::Settled => "settled",
            Phase::Steady => "steady",
            Phase::Dark => "dark",
            Phase::Brake => "brake",
            Phase::BeforeMore => "healed",
            Phase::More => "more",
        }
    }
}

/// API latencies of one phase.
#[derive(Debug, Default, Clone)]
pub struct Api {
    pub writes: u64,
    pub write_p50_ms: f64,
    pub write_p99_ms: f64,
    pub reads: u64,
    pub read_p50_ms: f64,
    pub read_p99_ms: f64,
    pub errors: u64,
    pub retries: u64,
}

/// Resources at the end of a phase.
#[derive(Debug, Default, Clone)]
pub struct Resources {
    /// Per fedraft node: (RSS MiB, CPU seconds so far).
    pub nodes: Vec<(f64, f64)>,
    /// The fleet host: (RSS MiB, CPU seconds so far).
    pub fleet: (f64, f64),
    /// Per fedraft node, in the order of `nodes`: its own figures, where it gave them.
    pub gauges: Vec<NodeGauges>,
    /// Bytes of the bench directory (the three data directories and logs).
    pub data_bytes: u64,
    pub at_s: f64,
}

#[derive(Debug, Default, Clone)]
pub struct Distribution {
    pub rate: f64,
    pub writes: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub missing: u64,
    /// The same latencies by the node owning the member (leader-only ownership: "leader"):
    /// (samples, p50 ms, p99 ms). A follower-owned member sees a write only once its owner
    /// applied it, so the split shows what the path through a follower adds.
    pub by_owner: BTreeMap<String, (u64, f64, f64)>,
}

#[derive(Debug, Default, Clone)]
pub struct Dark {
    pub not_ready_s: f64,
    pub affected: u64,
    pub replaced_s: f64,
    pub moved_from_healthy: u64,
}

pub struct Report {
    pub clusters: u32,
    pub objects: u64,
    /// Bytes of manifest (template text) written over all objects.
    pub manifest_bytes: u64,
    /// The further objects of the last phase: (count, bytes of their manifests).
    pub more: Option<(u64, u64)>,
    pub grace_s: u64,
    pub failure_s: u64,
    pub registered_s: f64,
    pub write_s: f64,
    pub converged_s: f64,
    pub member_objects: u64,
    pub curve: Vec<(f64, u64)>,
    pub distribution: Distribution,
    pub dark: Dark,
    pub brake: Option<super::fleet_brake::BrakeFigures>,
    pub api: Vec<(Phase, Api)>,
    pub resources: Vec<(Phase, Resources)>,
    pub notes: Vec<String>,
    pub errors: Vec<String>,
    started: std::time::Instant,
}

fn rss_mib(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = text
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(f64::NAN);
    kib / 1024.0
}

fn cpu_s(pid: u32) -> f64 {
    cpu_time(&[pid]).map_or(f64::NAN, |d| d.as_secs_f64())
}

fn dir_bytes(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

impl Report {
    pub fn new(a: &FleetArgs) -> Report {
        Report {
            clusters: a.clusters,
            objects: a.objects,
            manifest_bytes: 0,
            more: None,
            grace_s: a.grace_secs,
            failure_s: a.failure_secs,
            registered_s: 0.0,
            write_s: 0.0,
            converged_s: 0.0,
            member_objects: 0,
            curve: Vec::new(),
            distribution: Distribution::default(),
            dark: Dark::default(),
            brake: None,
            api: Vec::new(),
            resources: Vec::new(),
            notes: Vec::new(),
            errors: Vec::new(),
            started: std::time::Instant::now(),
        }
    }

    pub fn note(&mut self, n: String) {
        println!("{n}");
        self.notes.push(n);
    }

    pub fn phase(&mut self, p: Phase, s: &Samples) {
        let api = Api {
            writes: s.writes.len() as u64,
            write_p50_ms: percentile(&s.writes, 0.50),
            write_p99_ms: percentile(&s.writes, 0.99),
            reads: s.reads.len() as u64,
            read_p50_ms: percentile(&s.reads, 0.50),
            read_p99_ms: percentile(&s.reads, 0.99),
            errors: s.errors,
            retries: s.retries,
        };
        if api.errors > 0 {
            self.errors
                .push(format!("{}: {} API calls failed", p.name(), api.errors));
        }
        self.api.push((p, api));
    }

    pub fn sample(
        &mut self,
        p: Phase,
        nodes: &[u32],
        fleet: &[u32],
        dir: &Path,
        gauges: Vec<NodeGauges>,
    ) {
        let r = Resources {
            gauges,
            nodes: nodes
                .iter()
                .map(|&pid| (rss_mib(pid), cpu_s(pid)))
                .collect(),
            fleet: fleet
                .first()
                .map_or((f64::NAN, f64::NAN), |&pid| (rss_mib(pid), cpu_s(pid))),
            data_bytes: dir_bytes(dir),
            at_s: self.started.elapsed().as_secs_f64(),
        };
        self.resources.push((p, r));
    }

    pub fn check(&mut self, when: &str, differences: usize, lines: Vec<String>) {
        if differences == 0 {
            self.note(format!("members hold exactly what fedraft placed ({when})"));
        } else {
            self.errors.push(format!(
                "{differences} differences between fedraft's placement and the members {when}: {}",
                lines.join("; ")
            ));
        }
    }

    /// CPU seconds each process spent in phase `p` (since the previous sample).
    fn cpu_in(&self, i: usize) -> (Vec<f64>, f64, f64) {
        let (_, now) = &self.resources[i];
        let Some((_, prev)) = i.checked_sub(1).map(|j| &self.resources[j]) else {
            return (
                now.nodes.iter().map(|n| n.1).collect(),
                now.fleet.1,
                now.at_s,
            );
        };
        let nodes = now
            .nodes
            .iter()
            .zip(&prev.nodes)
            .map(|(a, b)| a.1 - b.1)
            .collect();
        (nodes, now.fleet.1 - prev.fleet.1, now.at_s - prev.at_s)
    }

    /// Bytes on disk gained per hour in each phase (from the previous sample), by kind, the
    /// most any node gained.
    fn disk_growth(&self) -> Vec<(Phase, Disk)> {
        self.resources
            .windows(2)
            .filter_map(|w| {
                let ((_, before), (p, after)) = (&w[0], &w[1]);
                let hours = (after.at_s - before.at_s) / 3600.0;
                if hours <= 0.0 {
                    return None;
                }
                let mut most = Disk::default();
                for (b, a) in before.gauges.iter().zip(&after.gauges) {
                    let (Some(b), Some(a)) = (b.disk, a.disk) else {
                        continue;
                    };
                    most.log = most.log.max((a.log - b.log) / hours);
                    most.archive = most.archive.max((a.archive - b.archive) / hours);
                    most.wal = most.wal.max((a.wal - b.wal) / hours);
                    most.total = most.total.max((a.total - b.total) / hours);
                }
                Some((*p, most))
            })
            .collect()
    }

    /// Each node's checkpoints over the whole run: how many, their mean size and time.
    fn checkpoints(&self) -> Vec<String> {
        let Some((_, last)) = self.resources.last() else {
            return Vec::new();
        };
        last.gauges
            .iter()
            .enumerate()
            .filter_map(|(i, g)| {
                let c = g.checkpoints?;
                let n = c.count.max(1.0);
                Some(format!(
                    "node {}: {} (mean {:.1} MiB, {:.2} s)",
                    i + 1,
                    c.count,
                    c.bytes / n / MIB,
                    c.seconds / n
                ))
            })
            .collect()
    }

    /// The resources sampled at the end of `phase`, if it ran.
    fn resources_at(&self, phase: Phase) -> Option<&Resources> {
        self.resources
            .iter()
            .find(|(p, _)| *p == phase)
            .map(|(_, r)| r)
    }

    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "\nfleet: {} clusters, {} objects ({} member objects), build {}",
            self.clusters,
            self.objects,
            self.member_objects,
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            }
        );
        let _ = writeln!(o, "registered and Ready: {:.1} s", self.registered_s);
        let _ = writeln!(
            o,
            "converge from empty: {:.1} s (writes took {:.1} s, {:.0} objects/s)",
            self.converged_s,
            self.write_s,
            self.objects as f64 / self.write_s.max(1e-9)
        );
        let d = &self.distribution;
        let _ = writeln!(
            o,
            "distribution at {}/s: p50 {:.0} ms, p99 {:.0} ms ({} writes, {} never seen)",
            d.rate, d.p50_ms, d.p99_ms, d.writes, d.missing
        );
        for (owner, (n, p50, p99)) in &d.by_owner {
            let _ = writeln!(
                o,
                "  owned by {owner}: p50 {p50:.0} ms, p99 {p99:.0} ms ({n} writes)"
            );
        }
        // Only a run that took the region dark has figures of it.
        if self.api.iter().any(|(p, _)| *p == Phase::Dark) {
            let k = &self.dark;
            let replaced = match k.replaced_s.is_nan() {
                true => "not re-placed".to_string(),
                false => format!("re-placed {:.1} s", k.replaced_s),
            };
            let _ = writeln!(
                o,
                "region dark: NotReady {:.1} s, {} workloads {replaced} (grace {} s, failure {} s), {} replicas moved off healthy clusters",
                k.not_ready_s, k.affected, self.grace_s, self.failure_s, k.moved_from_healthy
            );
        }
        if let Some(b) = &self.brake {
            let _ = writeln!(
                o,
                "brake: {} of {} clusters dark at once (fleet settled {} before), engaged {:.1} s, {} of them NotReady and {} replicas moved after {:.0} s held, released {:.1} s after the fault cleared",
                b.dark,
                b.total,
                b.settled_s
                    .map_or("not".to_string(), |s| format!("{s:.1} s")),
                b.engaged_s,
                b.not_ready,
                b.moved,
                b.held_s,
                b.released_s
            );
        }
        let _ = writeln!(
            o,
            "{:<9} {:>7} {:>9} {:>9} {:>7} {:>9} {:>9} {:>6} {:>7}",
            "phase",
            "writes",
            "w p50 ms",
            "w p99 ms",
            "reads",
            "r p50 ms",
            "r p99 ms",
            "errors",
            "retries"
        );
        for (p, a) in &self.api {
            let _ = writeln!(
                o,
                "{:<9} {:>7} {:>9.1} {:>9.1} {:>7} {:>9.1} {:>9.1} {:>6} {:>7}",
                p.name(),
                a.writes,
                a.write_p50_ms,
                a.write_p99_ms,
                a.reads,
                a.read_p50_ms,
                a.read_p99_ms,
                a.errors,
                a.retries
            );
        }
        for (i, (p, r)) in self.resources.iter().enumerate() {
            let (cpu, fleet_cpu, secs) = self.cpu_in(i);
            let nodes: Vec<String> = r
                .nodes
                .iter()
                .zip(&cpu)
                .enumerate()
                .map(|(n, ((rss, _), c))| {
                    let g = r.gauges.get(n).copied().unwrap_or_default();
                    let heap = g
                        .memory
                        .map_or(String::new(), |m| format!(" (heap {:.0})", m.heap / MIB));
                    let leader = if g.leader == Some(true) {
                        " leader"
                    } else {
                        ""
                    };
                    format!("{rss:.0} MiB{heap}/{:.2} cores{leader}", c / secs.max(1e-9))
                })
                .collect();
            let _ = writeln!(
                o,
                "after {:<9} fedraft nodes [{}]; fleet host {:.0} MiB/{:.2} cores; bench dir {:.1} MiB",
                p.name(),
                nodes.join(", "),
                r.fleet.0,
                fleet_cpu / secs.max(1e-9),
                r.data_bytes as f64 / (1 << 20) as f64
            );
        }
        self.render_memory(&mut o);
        for (p, d) in self.disk_growth() {
            let _ = writeln!(
                o,
                "disk growth per hour during {}, most on any node: raft log tables {:.0} MiB, \
                 archive tables {:.0} MiB, WAL {:.0} MiB, data directory {:.0} MiB",
                p.name(),
                d.log / MIB,
                d.archive / MIB,
                d.wal / MIB,
                d.total / MIB
            );
        }
        let checkpoints = self.checkpoints();
        if !checkpoints.is_empty() {
            let _ = writeln!(
                o,
                "checkpoints written per node: {}",
                checkpoints.join(", ")
            );
        }
        for e in &self.errors {
            let _ = writeln!(o, "ERROR: {e}");
        }
        o
    }

    pub fn to_json(&self) -> Value {
        let api: Vec<Value> = self
            .api
            .iter()
            .map(|(p, a)| {
                json!({"phase": p.name(), "writes": a.writes, "writeP50Ms": a.write_p50_ms,
                    "writeP99Ms": a.write_p99_ms, "reads": a.reads, "readP50Ms": a.read_p50_ms,
                    "readP99Ms": a.read_p99_ms, "errors": a.errors, "retries": a.retries})
            })
            .collect();
        let resources: Vec<Value> = self
            .resources
            .iter()
            .enumerate()
            .map(|(i, (p, r))| {
                let (cpu, fleet_cpu, secs) = self.cpu_in(i);
                json!({"phase": p.name(), "atS": r.at_s,
                    "nodes": r.nodes.iter().zip(&cpu).enumerate().map(|(n, ((rss, _), c))| {
                        let g = r.gauges.get(n).copied().unwrap_or_default();
                        json!({"rssMiB": rss, "cores": c / secs.max(1e-9),
                            "heapMiB": g.memory.map(|m| m.heap / MIB), "leader": g.leader})
                    }).collect::<Vec<_>>(),
                    "fleetHost": {"rssMiB": r.fleet.0, "cores": fleet_cpu / secs.max(1e-9)},
                    "benchDirBytes": r.data_bytes})
            })
            .collect();
        json!({
            "build": if cfg!(debug_assertions) { "debug" } else { "release" },
            "clusters": self.clusters, "objects": self.objects, "memberObjects": self.member_objects,
            "registeredS": self.registered_s, "writeS": self.write_s, "convergedS": self.converged_s,
            "writeRate": self.objects as f64 / self.write_s.max(1e-9),
            "distribution": {"rate": self.distribution.rate, "writes": self.distribution.writes,
                "p50Ms": self.distribution.p50_ms, "p99Ms": self.distribution.p99_ms, "missing": self.distribution.missing,
                "byOwner": self.distribution.by_owner.iter().map(|(o, (n, p50, p99))| (o.clone(), json!({"writes": n, "p50Ms": p50, "p99Ms": p99}))).collect::<serde_json::Map<_, _>>()},
            "dark": {"notReadyS": self.dark.not_ready_s, "affected": self.dark.affected,
                "replacedS": self.dark.replaced_s, "movedFromHealthy": self.dark.moved_from_healthy,
                "graceS": self.grace_s, "failureS": self.failure_s},
            "brake": self.brake.as_ref().map(|b| json!({"dark": b.dark, "total": b.total,
                "engagedS": b.engaged_s, "notReady": b.not_ready, "heldS": b.held_s,
                "moved": b.moved, "releasedS": b.released_s, "settledBeforeS": b.settled_s})),
            "api": api, "resources": resources,
            "diskGrowthPerHour": self.disk_growth().iter().map(|(p, d)| json!({"phase": p.name(),
                "logBytes": d.log, "archiveBytes": d.archive, "walBytes": d.wal, "totalBytes": d.total})).collect::<Vec<_>>(),
            "checkpoints": self.checkpoints(),
            "memoryKiB": self.memory_json(),
            "curve": self.curve.iter().map(|(t, n)| json!([t, n])).collect::<Vec<_>>(),
            "notes": self.notes, "errors": self.errors,
        })
    }
}

mod memory;
#[cfg(test)]
mod tests;
