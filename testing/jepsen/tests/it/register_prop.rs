//! Property: any history produced by a real sequential register, with each operation taking effect at a
//! random point inside its own random interval, is accepted, including crashed clients whose operations
//! took effect late or never, version bumps, and two keys sharing one log. The same histories with one read
//! corrupted to a value nobody wrote are rejected.

use std::collections::BTreeMap;

use crate::common::*;
use fedraft_jepsen::check::register::{check_registers, RegisterCheck};
use fedraft_jepsen::history::{validate, Call, Op, Outcome, Ret};
use fedraft_jepsen::Verdict;
use proptest::prelude::*;

/// One generated operation before simulation.
#[derive(Debug, Clone)]
struct Spec {
    client: u64,
    key: bool,
    /// 0 read, 1 write, 2 CAS on the current version, 3 CAS on a wrong version.
    kind: u8,
    gap: u64,
    len: u64,
    /// Where in (or, for a crash, after) the interval the operation takes effect, in thousandths.
    point: u64,
    crash: bool,
    crash_applies: bool,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        0..4u64,
        any::<bool>(),
        0..4u8,
        0..30u64,
        1..60u64,
        0..=1000u64,
        prop::bool::weighted(0.1),
        any::<bool>(),
    )
        .prop_map(
            |(client, key, kind, gap, len, point, crash, crash_applies)| Spec {
                client,
                key,
                kind,
                gap,
                len,
                point,
                crash,
                crash_applies,
            },
        )
}

#[derive(Default)]
struct Object {
    value: Option<u64>,
    version: u64,
}

/// Lays out each client's operations back to back, then runs them through a real register in the order of
/// their effect points, recording what each returned.
fn simulate(specs: &[Spec], bumps: bool) -> Vec<Op> {
    // (effect point, index, op with a placeholder outcome, applies)
    let mut planned = Vec::new();
    let mut clock: BTreeMap<u64, u64> = BTreeMap::new();
    let mut generation: BTreeMap<u64, u64> = BTreeMap::new();
    for (i, s) in specs.iter().enumerate() {
        let now = clock.entry(s.client).or_insert(0);
        // Times are scaled so effect points rarely tie; ties are harmless anyway.
        let invoke = (*now + s.gap) * 1000;
        let complete = invoke + s.len * 1000;
        *now = complete / 1000 + 1;
        let reach = if s.crash { 3 } else { 1 };
        let point = invoke + s.point * s.len * reach;
        let gen = generation.entry(s.client).or_insert(0);
        // A crashed client's successor gets a fresh process id, as in Jepsen.
        let process = s.client * 1000 + *gen;
        if s.crash {
            *gen += 1;
        }
        let value = i as u64 + 1;
        let call = match s.kind {
            0 => Call::Read,
            1 => Call::Write { value },
            // The expected version is filled in when the operation takes effect.
            _ => Call::Cas { expected: 0, value },
        };
        let key = if s.key { "a" } else { "b" };
        let placeholder = Outcome::Fail {
            error: String::new(),
        };
        let op = op(process, key, (invoke, complete), call, placeholder);
        planned.push((point, i, op, !s.crash || s.crash_applies));
    }
    planned.sort_by_key(|(point, i, _, _)| (*point, *i));

    let mut objects: BTreeMap<String, Object> = BTreeMap::new();
    let mut log_index = 0u64;
    let mut history = Vec::new();
    for (_, i, mut op, applies) in planned {
        let s = &specs[i];
        let obj = objects.entry(op.key.clone()).or_default();
        if bumps && obj.value.is_some() && s.gap.is_multiple_of(3) {
            // A status change bumps the version without touching the value.
            log_index += 1;
            obj.version = log_index;
        }
        let outcome = match (&mut op.call, applies) {
            (Call::Read, _) => ok(Ret::Read {
                value: obj.value,
                version: obj.version,
            }),
            (_, false) => info(),
            (Call::Write { value }, true) => {
                log_index += 1 + s.gap % 2;
                obj.value = Some(*value);
                obj.version = log_index;
                ok(Ret::Written {
                    version: Some(log_index),
                })
            }
            (Call::Cas { expected, value }, true) => {
                *expected = if s.kind == 2 {
                    obj.version
                } else {
                    obj.version + 1 + s.gap
                };
                if *expected == obj.version {
                    log_index += 1;
                    obj.value = Some(*value);
                    obj.version = log_index;
                    ok(Ret::Written {
                        version: Some(log_index),
                    })
                } else {
                    fail()
                }
            }
            _ => unreachable!("set calls are never generated"),
        };
        // A crashed client never learns the outcome, whatever happened on the server.
        op.outcome = if s.crash { info() } else { outcome };
        history.push(op);
    }
    history.sort_by_key(|o| o.invoke_ns);
    history
}

fn limits(bumps: bool) -> RegisterCheck {
    RegisterCheck {
        version_bumps: bumps,
        ..RegisterCheck::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn histories_of_a_real_register_are_linearizable(specs in prop::collection::vec(spec(), 1..80), bumps in any::<bool>()) {
        let history = simulate(&specs, bumps);
        validate(&history).unwrap();
        let (verdict, _) = check_registers(&history, &limits(bumps)).unwrap();
        prop_assert_eq!(verdict, Verdict::Valid);
    }

    #[test]
    fn a_read_of_an_unwritten_value_is_caught(specs in prop::collection::vec(spec(), 1..80), pick in any::<prop::sample::Index>()) {
        let mut history = simulate(&specs, false);
        let reads: Vec<usize> = history
            .iter()
            .enumerate()
            .filter(|(_, o)| matches!(o.outcome, Outcome::Ok { ret: Ret::Read { .. } }))
            .map(|(i, _)| i)
            .collect();
        prop_assume!(!reads.is_empty());
        let victim = reads[pick.index(reads.len())];
        history[victim].outcome = ok(Ret::Read { value: Some(u64::MAX), version: 1 });
        let (verdict, _) = check_registers(&history, &limits(false)).unwrap();
        prop_assert!(matches!(verdict, Verdict::Invalid { .. }), "{:?}", verdict);
    }
}

/// Changes one `ok` read into a plausible but possibly wrong one: another write's value, or a neighbouring
/// version.
fn corrupt(
    history: &mut [Op],
    read: prop::sample::Index,
    source: prop::sample::Index,
    mode: u8,
) -> bool {
    let reads: Vec<usize> = (0..history.len())
        .filter(|&i| {
            matches!(
                history[i].outcome,
                Outcome::Ok {
                    ret: Ret::Read { .. }
                }
            )
        })
        .collect();
    let values: Vec<u64> = history
        .iter()
        .filter_map(|o| match o.call {
            Call::Write { value } | Call::Cas { value, .. } => Some(value),
            _ => None,
        })
        .collect();
    if reads.is_empty() || values.is_empty() {
        return false;
    }
    let victim = reads[read.index(reads.len())];
    if let Outcome::Ok {
        ret: Ret::Read { value, version },
    } = &mut history[victim].outcome
    {
        match mode {
            0 => *value = Some(values[source.index(values.len())]),
            1 => *version += 1,
            _ => *version = version.saturating_sub(1),
        }
    }
    true
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Pruning unread indeterminate writes never changes a decided verdict, on valid and corrupted histories.
    #[test]
    fn pruning_preserves_verdicts(
        specs in prop::collection::vec(spec(), 1..60),
        bumps in any::<bool>(),
        read in any::<prop::sample::Index>(),
        source in any::<prop::sample::Index>(),
        mode in 0..4u8,
    ) {
        let mut history = simulate(&specs, bumps);
        if mode < 3 {
            corrupt(&mut history, read, source, mode);
        }
        let pruned = check_registers(&history, &limits(bumps)).unwrap().0;
        let full = check_registers(&history, &RegisterCheck { prune: false, ..limits(bumps) }).unwrap().0;
        let decided = |v: &Verdict| !matches!(v, Verdict::Unknown { .. });
        if decided(&pruned) && decided(&full) {
            prop_assert_eq!(pruned.is_valid(), full.is_valid(), "pruned {:?} vs full {:?}", pruned, full);
        }
    }
}

/// A long history (5000 operations over 8 clients, 2 keys, some crashes) is decided well within the default
/// budget. Prints the time taken; run with `--nocapture` to see it.
#[test]
fn long_history_is_decided() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |m: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % m
    };
    let specs: Vec<Spec> = (0..5000)
        .map(|_| Spec {
            client: next(8),
            key: next(2) == 0,
            kind: next(4) as u8,
            gap: next(30),
            len: 1 + next(60),
            point: next(1001),
            crash: next(50) == 0,
            crash_applies: next(2) == 0,
        })
        .collect();
    let history = simulate(&specs, false);
    let started = std::time::Instant::now();
    let (verdict, keys) = check_registers(&history, &limits(false)).unwrap();
    eprintln!(
        "checked {} ops on {} keys in {:?}: {:?}",
        history.len(),
        keys.len(),
        started.elapsed(),
        verdict
    );
    assert_eq!(verdict, Verdict::Valid);
}
