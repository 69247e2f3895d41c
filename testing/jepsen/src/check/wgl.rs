//! The linearizability search: Wing & Gong's backtracking over a time-ordered list of call and return entries,
//! with Lowe's refinements (linearized entries are unlinked from the list and relinked on backtrack, and every
//! visited (linearized-set, model-state) pair is memoised so no configuration is explored twice).
//!
//! Indeterminate operations have a call entry and no return entry: the search may linearize them anywhere after
//! their call, and a history is accepted once every determinate operation is linearized, so they may also never
//! take effect. The search is bounded by a step budget and a deadline and answers `Unknown` past either.
//! This module knows nothing about registers or histories on disk: it works on any [`Model`].

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;
use std::time::Instant;

/// A sequential specification: `step` returns the state after `op`, or `None` when `op` (with the result it
/// recorded) is impossible in `state`.
pub trait Model {
    type State: Clone + Eq + Hash + Debug;
    type Op: Debug;
    fn init(&self) -> Self::State;
    fn step(&self, state: &Self::State, op: &Self::Op) -> Option<Self::State>;
}

/// One operation as the search sees it.
#[derive(Debug, Clone)]
pub struct Entry<O> {
    pub op: O,
    pub invoke_ns: u64,
    /// `None` for an indeterminate operation: it never returns.
    pub complete_ns: Option<u64>,
}

/// Where the search must give up.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Maximum loop iterations; each memoised configuration costs at least one, so this also bounds memory.
    pub max_steps: u64,
    pub deadline: Option<Instant>,
}

/// The deepest point the search reached before proving no linearization exists.
#[derive(Debug, Clone)]
pub struct Stuck<S> {
    /// Indexes (into the entries) of a longest linearizable prefix, in linearization order.
    pub prefix: Vec<usize>,
    /// The model state after that prefix.
    pub state: S,
    /// An operation that completed before it could be linearized after that prefix.
    pub blocked: usize,
}

/// The search's answer.
#[derive(Debug, Clone)]
pub enum Search<S> {
    /// Every determinate operation was linearized; `order` is one witness (indeterminate ones included only if
    /// the witness needed them).
    Linearizable {
        order: Vec<usize>,
    },
    NotLinearizable(Stuck<S>),
    /// The budget ran out; `steps` were spent.
    Unknown {
        steps: u64,
        reason: &'static str,
    },
}

const END: usize = usize::MAX;
/// How often (in steps) the deadline is read; the clock is cheap but not free.
const CLOCK_EVERY_STEPS: u64 = 1024;

#[derive(Clone, Copy)]
enum Node {
    Call(usize),
    Return(usize),
}

/// A doubly linked list over call/return nodes, in time order, that supports unlinking an operation and
/// relinking it in LIFO order (dancing links).
struct Timeline {
    nodes: Vec<Node>,
    prev: Vec<usize>,
    next: Vec<usize>,
    head: usize,
    call_node: Vec<usize>,
    return_node: Vec<Option<usize>>,
}

impl Timeline {
    fn new<O>(entries: &[Entry<O>]) -> Self {
        // Calls sort before returns at equal times: touching intervals count as concurrent, which can only
        // accept more histories, never reject a correct one.
        let mut events: Vec<(u64, u8, usize)> = Vec::with_capacity(entries.len() * 2);
        for (i, e) in entries.iter().enumerate() {
            events.push((e.invoke_ns, 0, i));
            if let Some(c) = e.complete_ns {
                events.push((c, 1, i));
            }
        }
        events.sort_unstable();
        let n = events.len();
        let mut call_node = vec![0; entries.len()];
        let mut return_node = vec![None; entries.len()];
        let nodes = events
            .iter()
            .enumerate()
            .map(|(pos, &(_, kind, i))| {
                if kind == 0 {
                    call_node[i] = pos;
                    Node::Call(i)
                } else {
                    return_node[i] = Some(pos);
                    Node::Return(i)
                }
            })
            .collect();
        let prev = (0..n).map(|p| if p == 0 { END } else { p - 1 }).collect();
        let next = (0..n)
            .map(|p| if p + 1 == n { END } else { p + 1 })
            .collect();
        Timeline {
            nodes,
            prev,
            next,
            head: if n == 0 { END } else { 0 },
            call_node,
            return_node,
        }
    }

    fn unlink(&mut self, p: usize) {
        let (a, b) = (self.prev[p], self.next[p]);
        if a == END {
            self.head = b;
        } else {
            self.next[a] = b;
        }
        if b != END {
            self.prev[b] = a;
        }
    }

    fn relink(&mut self, p: usize) {
        let (a, b) = (self.prev[p], self.next[p]);
        if a == END {
            self.head = p;
        } else {
            self.next[a] = p;
        }
        if b != END {
            self.prev[b] = p;
        }
    }

    fn lift(&mut self, op: usize) {
        self.unlink(self.call_node[op]);
        if let Some(r) = self.return_node[op] {
            self.unlink(r);
        }
    }

    fn unlift(&mut self, op: usize) {
        if let Some(r) = self.return_node[op] {
            self.relink(r);
        }
        self.relink(self.call_node[op]);
    }
}

/// A fixed-size bitset over operation indexes; part of the memo key.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Self {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn clear(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
}

/// Searches for a linearization of `entries` under `model`.
pub fn search<M: Model>(model: &M, entries: &[Entry<M::Op>], budget: Budget) -> Search<M::State> {
    let mut timeline = Timeline::new(entries);
    let mut required = entries.iter().filter(|e| e.complete_ns.is_some()).count();
    let mut linearized = Bits::new(entries.len());
    let mut seen: HashSet<(Bits, M::State)> = HashSet::new();
    let mut stack: Vec<(usize, M::State)> = Vec::new();
    let mut state = model.init();
    let mut best: Option<Stuck<M::State>> = None;
    let mut cur = timeline.head;
    let mut steps: u64 = 0;

    loop {
        if required == 0 {
            return Search::Linearizable {
                order: stack.iter().map(|(i, _)| *i).collect(),
            };
        }
        steps += 1;
        if steps > budget.max_steps {
            return Search::Unknown {
                steps,
                reason: "step budget exhausted",
            };
        }
        if steps.is_multiple_of(CLOCK_EVERY_STEPS)
            && budget.deadline.is_some_and(|d| Instant::now() >= d)
        {
            return Search::Unknown {
                steps,
                reason: "time limit reached",
            };
        }
        let node = if cur == END {
            None
        } else {
            Some(timeline.nodes[cur])
        };
        match node {
            Some(Node::Call(i)) => {
                if let Some(next_state) = model.step(&state, &entries[i].op) {
                    linearized.set(i);
                    if seen.insert((linearized.clone(), next_state.clone())) {
                        stack.push((i, std::mem::replace(&mut state, next_state)));
                        timeline.lift(i);
                        if entries[i].complete_ns.is_some() {
                            required -= 1;
                        }
                        cur = timeline.head;
                        continue;
                    }
                    linearized.clear(i);
                }
                cur = timeline.next[cur];
            }
            // A return of an unlinearized operation (or the end of the list, only reachable with indeterminate
            // calls left that cannot apply): this prefix is a dead end.
            Some(Node::Return(_)) | None => {
                let blocked = match node {
                    Some(Node::Return(r)) => Some(r),
                    _ => None,
                };
                if let Some(blocked) = blocked {
                    if best.as_ref().is_none_or(|b| stack.len() > b.prefix.len()) {
                        best = Some(Stuck {
                            prefix: stack.iter().map(|(i, _)| *i).collect(),
                            state: state.clone(),
                            blocked,
                        });
                    }
                }
                let Some((i, previous)) = stack.pop() else {
                    return match best {
                        Some(stuck) => Search::NotLinearizable(stuck),
                        None => Search::Unknown {
                            steps,
                            reason: "search ended without a blocking operation",
                        },
                    };
                };
                state = previous;
                linearized.clear(i);
                timeline.unlift(i);
                if entries[i].complete_ns.is_some() {
                    required += 1;
                }
                cur = timeline.next[timeline.call_node[i]];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A counter that only accepts increments to an expected value: `op` is the value after incrementing.
    struct Counter;
    impl Model for Counter {
        type State = u32;
        type Op = u32;
        fn init(&self) -> u32 {
            0
        }
        fn step(&self, s: &u32, op: &u32) -> Option<u32> {
            (*op == s + 1).then_some(*op)
        }
    }

    fn e(op: u32, inv: u64, comp: Option<u64>) -> Entry<u32> {
        Entry {
            op,
            invoke_ns: inv,
            complete_ns: comp,
        }
    }

    const BIG: Budget = Budget {
        max_steps: 1_000_000,
        deadline: None,
    };

    #[test]
    fn concurrent_ops_may_reorder() {
        let h = [e(2, 0, Some(10)), e(1, 1, Some(9))];
        match search(&Counter, &h, BIG) {
            Search::Linearizable { order } => assert_eq!(order, vec![1, 0]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn real_time_order_is_enforced() {
        let h = [e(2, 0, Some(5)), e(1, 6, Some(9))];
        match search(&Counter, &h, BIG) {
            Search::NotLinearizable(stuck) => {
                assert!(stuck.prefix.is_empty());
                assert_eq!(stuck.blocked, 0);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn indeterminate_op_may_apply_late_or_never() {
        // Op 1 (value 1) never returned; op 0 needs it first, op 2 does not care.
        let late = [e(2, 5, Some(9)), e(1, 0, None)];
        assert!(matches!(
            search(&Counter, &late, BIG),
            Search::Linearizable { .. }
        ));
        let never = [e(1, 5, Some(9)), e(1, 0, None)];
        assert!(matches!(
            search(&Counter, &never, BIG),
            Search::Linearizable { .. }
        ));
    }

    #[test]
    fn budget_gives_unknown() {
        let h: Vec<_> = (0..40).map(|i| e(1000 + i, 0, Some(100))).collect();
        let budget = Budget {
            max_steps: 10,
            deadline: None,
        };
        assert!(matches!(
            search(&Counter, &h, budget),
            Search::Unknown { .. }
        ));
    }

    #[test]
    fn empty_history_is_linearizable() {
        assert!(matches!(
            search(&Counter, &[], BIG),
            Search::Linearizable { .. }
        ));
    }
}
