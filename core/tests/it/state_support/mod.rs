//! Test support for the state machine tests: a harness that numbers entries and keeps log time
//! as a live log does (a tick at least every `LOG_STALL_MS` while time passes, unless a test
//! stalls the log on purpose), and builders for specs and templates.
#![allow(dead_code)]

use std::collections::BTreeMap;

use fedraft_core::command::{Command, Heartbeat, LogEntry, ObjectStatusReport};
use fedraft_core::health::LOG_STALL_MS;
use fedraft_core::model::{Capacity, ClusterSpec, FederatedObject, ObjectSpec};
use fedraft_core::policy::{
    ClusterPreference, Division, Placement, ReplicaMode, ReplicaPolicy, Resources,
};
use fedraft_core::state::{Applied, Outcome, State};

/// Log time the harness starts at (an arbitrary wall-clock-like value).
pub const T0: u64 = 1_700_000_000_000;

pub struct Harness {
    pub state: State,
    pub index: u64,
    pub now_ms: u64,
    /// The next entry follows a stalled log: no ticks fill the gap before it.
    pub stalled: bool,
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness {
    pub fn new() -> Self {
        Self {
            state: State::new(),
            index: 0,
            now_ms: T0,
            stalled: false,
        }
    }

    /// Applies a command at the next index, stamped with the harness clock, no request id.
    pub fn apply(&mut self, command: Command) -> Applied {
        self.apply_with_id("", command)
    }

    pub fn apply_with_id(&mut self, request_id: &str, command: Command) -> Applied {
        self.fill_gap();
        self.index += 1;
        let entry = LogEntry::new(request_id, "test", self.now_ms, command);
        self.state.apply(self.index, &entry)
    }

    /// Applies and asserts the command was accepted.
    pub fn ok(&mut self, command: Command) -> Applied {
        let kind = command.kind();
        let a = self.apply(command);
        assert!(a.outcome.is_accepted(), "{kind} refused: {:?}", a.outcome);
        a
    }

    /// Applies and returns the refusal, asserting there was one.
    pub fn refused(&mut self, command: Command) -> fedraft_core::state::Rejection {
        let kind = command.kind();
        match self.apply(command).outcome {
            Outcome::Rejected(r) => r,
            other => panic!("{kind} unexpectedly accepted: {other:?}"),
        }
    }

    /// Lets `ms` of log time pass on a live log: the leader's ticks fill any gap longer than a
    /// stall before the next entry.
    pub fn advance(&mut self, ms: u64) {
        self.now_ms += ms;
    }

    /// Lets `ms` pass in which nothing commits (no quorum): the next entry ends a stalled log.
    pub fn stall(&mut self, ms: u64) {
        self.now_ms += ms;
        self.stalled = true;
    }

    /// Applies the ticks a live leader would have committed since the last entry, one per
    /// `LOG_STALL_MS`, and returns their times (for tests that keep a log to replay).
    pub fn fill_gap(&mut self) -> Vec<u64> {
        let mut ticks = Vec::new();
        if std::mem::take(&mut self.stalled) {
            return ticks;
        }
        let mut at = self.state.log_time_ms();
        // An empty state has no log time yet: the first entry ends no stall.
        if at == 0 {
            return ticks;
        }
        while self.now_ms.saturating_sub(at) > LOG_STALL_MS {
            at += LOG_STALL_MS;
            self.index += 1;
            self.state
                .apply(self.index, &LogEntry::new("", "test", at, Command::Tick));
            ticks.push(at);
        }
        ticks
    }

    pub fn tick(&mut self, ms: u64) -> Applied {
        self.advance(ms);
        self.ok(Command::Tick)
    }

    pub fn register(&mut self, name: &str, labels: &[(&str, &str)]) {
        self.ok(Command::RegisterCluster(cluster_spec(name, labels)));
    }

    /// Registers the clusters and makes them Ready with ample capacity.
    pub fn fleet(&mut self, names: &[&str]) {
        for n in names {
            self.register(n, &[]);
        }
        self.heartbeat(names, Some(big_capacity()));
    }

    pub fn heartbeat(&mut self, names: &[&str], capacity: Option<Capacity>) -> Applied {
        self.ok(Command::Heartbeats(
            names
                .iter()
                .map(|n| Heartbeat {
                    cluster: n.to_string(),
                    capacity,
                })
                .collect(),
        ))
    }

    /// Heartbeats `names` every `step_ms` for `total_ms` of log time.
    pub fn heartbeat_for(&mut self, names: &[&str], total_ms: u64, step_ms: u64) {
        let mut t = 0;
        while t < total_ms {
            self.advance(step_ms);
            t += step_ms;
            self.heartbeat(names, None);
        }
    }

    pub fn put(&mut self, ns: &str, name: &str, spec: ObjectSpec) -> Applied {
        self.ok(Command::PutObject {
            namespace: ns.into(),
            name: name.into(),
            spec,
            expected_version: None,
        })
    }

    pub fn obj(&self, ns: &str, name: &str) -> &FederatedObject {
        self.state.object(ns, name).expect("object exists")
    }

    pub fn placement(&self, ns: &str, name: &str) -> BTreeMap<String, u32> {
        self.obj(ns, name).placement_map()
    }

    pub fn report(
        &mut self,
        ns: &str,
        name: &str,
        cluster: &str,
        applied: bool,
        ready: u32,
    ) -> Applied {
        self.ok(Command::StatusReports(vec![ObjectStatusReport {
            namespace: ns.into(),
            name: name.into(),
            cluster: cluster.into(),
            applied,
            ready_replicas: ready,
            message: None,
        }]))
    }
}

pub fn cluster_spec(name: &str, labels: &[(&str, &str)]) -> ClusterSpec {
    let mut spec = ClusterSpec::new(name, format!("https://{name}.example:6443"));
    spec.labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    spec
}

pub fn big_capacity() -> Capacity {
    let r = Resources {
        cpu_millis: 1_000_000,
        memory_bytes: 1 << 40,
        pods: 10_000,
    };
    Capacity {
        allocatable: r,
        available: r,
    }
}

pub fn capacity(cpu_millis: u64) -> Capacity {
    let r = Resources {
        cpu_millis,
        memory_bytes: 1 << 40,
        pods: 10_000,
    };
    Capacity {
        allocatable: r,
        available: r,
    }
}

/// A Deployment template with `replicas` replicas of one container requesting `cpu_millis`.
pub fn deployment(name: &str, replicas: u32, cpu_millis: u64) -> String {
    serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "template": {"spec": {"containers": [{
                "name": "app",
                "image": "nginx:1.27",
                "resources": {"requests": {"cpu": format!("{cpu_millis}m")}}
            }]}}
        }
    })
    .to_string()
}

pub fn divided(clusters: Option<&[&str]>) -> Placement {
    Placement {
        clusters: clusters.map(|c| c.iter().map(|s| s.to_string()).collect()),
        replicas: ReplicaPolicy {
            mode: ReplicaMode::Divided,
            division: None,
        },
        ..Placement::default()
    }
}

pub fn duplicated() -> Placement {
    Placement {
        replicas: ReplicaPolicy {
            mode: ReplicaMode::Duplicated,
            division: None,
        },
        ..Placement::default()
    }
}

pub fn static_weights(weights: &[(&str, u64)], rebalance: bool) -> Placement {
    let weights = weights
        .iter()
        .map(|(c, w)| {
            (
                c.to_string(),
                ClusterPreference {
                    weight: *w,
                    min_replicas: 0,
                    max_replicas: None,
                },
            )
        })
        .collect();
    Placement {
        replicas: ReplicaPolicy {
            mode: ReplicaMode::Divided,
            division: Some(Box::new(Division::StaticWeights { weights, rebalance })),
        },
        ..Placement::default()
    }
}

pub fn dynamic(rebalance: bool) -> Placement {
    Placement {
        replicas: ReplicaPolicy {
            mode: ReplicaMode::Divided,
            division: Some(Box::new(Division::DynamicByCapacity { rebalance })),
        },
        ..Placement::default()
    }
}

pub fn spec(template: String, placement: Placement) -> ObjectSpec {
    ObjectSpec {
        template,
        placement,
        overrides: Vec::new(),
    }
}

pub fn total(p: &BTreeMap<String, u32>) -> u32 {
    p.values().sum()
}
