//! An in-process control plane over the real `fedraft_core::state::State`: commands are stamped
//! with the wall clock and applied in order, like a single-node log without replication. Used
//! where a test needs to flip leadership at will.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use fedraft_core::command::{Command, LogEntry};
use fedraft_core::state::{Applied, Outcome, State};
use fedraft_executors::wake::WakeScope;
use fedraft_executors::ControlPlane;
use tokio::sync::broadcast;

#[derive(Clone)]
pub struct LocalNode {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    index: AtomicU64,
    leader: AtomicBool,
    tx: broadcast::Sender<WakeScope>,
    log: Mutex<Vec<LogEntry>>,
}

impl LocalNode {
    pub fn new() -> Self {
        let (tx, _) = broadcast::channel(4096);
        LocalNode {
            inner: Arc::new(Inner {
                state: Mutex::new(State::new()),
                index: AtomicU64::new(0),
                leader: AtomicBool::new(true),
                tx,
                log: Mutex::new(Vec::new()),
            }),
        }
    }

    pub fn set_leader(&self, leader: bool) {
        self.inner.leader.store(leader, Ordering::SeqCst);
    }

    pub fn apply(&self, actor: &str, command: Command) -> Applied {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let mut state = self.inner.state.lock().unwrap();
        let index = self.inner.index.fetch_add(1, Ordering::SeqCst) + 1;
        let entry = LogEntry::new(format!("local-{index}"), actor, now, command);
        let applied = state.apply(index, &entry);
        // What a raft node's entry would tell the executors, so tests run the narrowed wake-ups.
        let scope = WakeScope::of(&entry.command, &applied);
        self.inner.log.lock().unwrap().push(entry);
        drop(state);
        let _ = self.inner.tx.send(scope);
        applied
    }

    /// Applies and asserts the command was accepted.
    pub fn must(&self, command: Command) -> Applied {
        let a = self.apply("admin", command);
        assert!(
            matches!(a.outcome, Outcome::Accepted { .. }),
            "rejected: {:?}",
            a.outcome
        );
        a
    }

    pub fn read<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        f(&self.inner.state.lock().unwrap())
    }

    /// Commands proposed by anyone but "admin", by kind.
    pub fn executor_entries(&self) -> Vec<Command> {
        self.inner
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.actor != "admin")
            .map(|e| e.command.clone())
            .collect()
    }
}

impl ControlPlane for LocalNode {
    type Applied = WakeScope;

    fn is_leader(&self) -> bool {
        self.inner.leader.load(Ordering::SeqCst)
    }

    fn read_state<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        self.read(f)
    }

    fn subscribe(&self) -> broadcast::Receiver<WakeScope> {
        self.inner.tx.subscribe()
    }

    fn wake_scope(applied: &WakeScope) -> WakeScope {
        applied.clone()
    }

    fn propose(
        &self,
        _request_id: String,
        actor: String,
        command: Command,
    ) -> impl std::future::Future<Output = Result<(), String>> + Send {
        let me = self.clone();
        async move {
            match me.apply(&actor, command).outcome {
                Outcome::Accepted { .. } => Ok(()),
                Outcome::Rejected(r) => Err(format!("{r:?}")),
            }
        }
    }
}
