//! The register checker on hand-written histories: it accepts linearizable ones (some only thanks to an
//! indeterminate operation taking effect, late or never) and rejects the classic anomalies with a
//! counterexample.

use std::time::Duration;

use crate::common::*;
use fedraft_jepsen::check::register::{check_registers, RegisterCheck};
use fedraft_jepsen::history::{Call, Op};
use fedraft_jepsen::Verdict;

fn verdict(history: &[Op]) -> Verdict {
    check_registers(history, &RegisterCheck::default())
        .unwrap()
        .0
}

fn assert_invalid(history: &[Op], needle: &str) {
    match verdict(history) {
        Verdict::Invalid { description } => {
            assert!(
                description.contains(needle),
                "counterexample should mention {needle:?}:\n{description}"
            )
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn sequential_history_is_valid() {
    let h = [
        read(1, (0, 1), None, 0),
        cas(1, (2, 3), 0, 10, 5),
        read(2, (4, 5), Some(10), 5),
        cas(2, (6, 7), 5, 11, 8),
        write(1, (8, 9), 12, 9),
        read(1, (10, 11), Some(12), 9),
    ];
    assert_eq!(verdict(&h), Verdict::Valid);
}

#[test]
fn concurrent_reads_may_see_either_side_of_a_write() {
    let h = [
        cas(1, (0, 1), 0, 1, 3),
        write(1, (10, 50), 2, 7),
        read(2, (12, 20), Some(1), 3),
        read(3, (15, 45), Some(2), 7),
        read(2, (21, 40), Some(2), 7),
    ];
    assert_eq!(verdict(&h), Verdict::Valid);
}

#[test]
fn stale_read_after_completed_write_is_invalid() {
    let h = [cas(1, (0, 10), 0, 1, 4), read(2, (20, 30), None, 0)];
    assert_invalid(&h, "Read");
    // A read at the old version of an existing value too.
    let h = [
        cas(1, (0, 10), 0, 1, 4),
        write(1, (11, 20), 2, 6),
        read(2, (30, 40), Some(1), 4),
    ];
    assert_invalid(&h, "value: Some(1)");
}

#[test]
fn two_successful_cas_on_one_version_is_invalid() {
    let h = [
        cas(1, (0, 10), 0, 1, 4),
        // Both expect version 4 and both claim success: one of them must have seen version 6 or 7 instead.
        cas(2, (20, 40), 4, 2, 6),
        cas(3, (21, 41), 4, 3, 7),
    ];
    assert_invalid(&h, "Cas { expected: 4");
}

#[test]
fn two_successful_creates_are_invalid() {
    let h = [cas(1, (0, 10), 0, 1, 4), cas(2, (1, 11), 0, 2, 5)];
    assert_invalid(&h, "expected: 0");
}

#[test]
fn read_of_a_value_never_written_is_invalid() {
    let h = [cas(1, (0, 10), 0, 1, 4), read(2, (20, 30), Some(99), 4)];
    assert_invalid(&h, "Some(99)");
}

#[test]
fn version_going_backwards_is_invalid() {
    // The second write reports an older version than the first: log indexes never go back.
    let h = [cas(1, (0, 10), 0, 1, 8), write(1, (20, 30), 2, 5)];
    assert_invalid(&h, "Write { value: 2");
}

#[test]
fn indeterminate_write_may_take_effect() {
    let h = [
        op(1, "r", (0, 5), Call::Write { value: 7 }, info()),
        // The write timed out, yet a later read sees it, at a version nobody reported.
        read(2, (100, 110), Some(7), 12),
    ];
    assert_eq!(verdict(&h), Verdict::Valid);
}

#[test]
fn indeterminate_write_may_never_take_effect() {
    let h = [
        cas(1, (0, 1), 0, 1, 3),
        op(
            2,
            "r",
            (2, 5),
            Call::Cas {
                expected: 3,
                value: 2,
            },
            info(),
        ),
        read(3, (100, 110), Some(1), 3),
    ];
    assert_eq!(verdict(&h), Verdict::Valid);
}

#[test]
fn indeterminate_write_may_take_effect_after_later_ops() {
    // Process 1's write is invoked first, times out, and lands after process 2's completed write.
    let h = [
        cas(3, (0, 1), 0, 1, 2),
        op(1, "r", (10, 20), Call::Write { value: 5 }, info()),
        write(2, (30, 40), 6, 8),
        read(2, (50, 60), Some(6), 8),
        read(2, (70, 80), Some(5), 9),
    ];
    assert_eq!(verdict(&h), Verdict::Valid);
    // But it cannot land before process 2's write and still be read at a version below it.
    let h = [
        cas(3, (0, 1), 0, 1, 2),
        op(1, "r", (10, 20), Call::Write { value: 5 }, info()),
        write(2, (30, 40), 6, 8),
        read(2, (70, 80), Some(5), 7),
    ];
    assert_invalid(&h, "Some(5)");
}

#[test]
fn indeterminate_cas_is_bound_by_what_later_ops_observe() {
    // The CAS on version 3 timed out; a later CAS that expects its (unreported) version 9 succeeded.
    let h = [
        cas(1, (0, 1), 0, 1, 3),
        op(
            2,
            "r",
            (2, 5),
            Call::Cas {
                expected: 3,
                value: 2,
            },
            info(),
        ),
        cas(3, (10, 20), 9, 4, 11),
        read(3, (30, 40), Some(4), 11),
    ];
    assert_eq!(verdict(&h), Verdict::Valid);
}

#[test]
fn failed_ops_are_ignored() {
    let h = [
        cas(1, (0, 1), 0, 1, 3),
        op(
            2,
            "r",
            (2, 5),
            Call::Cas {
                expected: 2,
                value: 9,
            },
            fail(),
        ),
        read(3, (10, 20), Some(1), 3),
    ];
    assert_eq!(verdict(&h), Verdict::Valid);
}

#[test]
fn keys_are_checked_independently() {
    let mut other: Vec<Op> = [cas(1, (0, 10), 0, 1, 4), read(2, (20, 30), None, 0)].into();
    for o in &mut other {
        o.key = "broken".into();
    }
    let mut h: Vec<Op> = vec![cas(3, (0, 10), 0, 1, 4), read(3, (20, 30), Some(1), 4)];
    h.extend(other);
    let (overall, keys) = check_registers(&h, &RegisterCheck::default()).unwrap();
    assert!(
        matches!(overall, Verdict::Invalid { ref description } if description.contains("\"broken\""))
    );
    assert_eq!(keys.len(), 2);
    assert_eq!(
        keys.iter().find(|k| k.key == "r").unwrap().verdict,
        Verdict::Valid
    );
}

#[test]
fn version_bumps_allow_reads_at_higher_versions_only_when_enabled() {
    let h = [
        cas(1, (0, 10), 0, 1, 4),
        read(2, (20, 30), Some(1), 9),
        cas(2, (40, 50), 9, 2, 12),
    ];
    assert!(matches!(verdict(&h), Verdict::Invalid { .. }));
    let lenient = RegisterCheck {
        version_bumps: true,
        ..RegisterCheck::default()
    };
    assert_eq!(check_registers(&h, &lenient).unwrap().0, Verdict::Valid);
    // Even with bumps, versions never go back and the value never changes by itself.
    let h = [
        cas(1, (0, 10), 0, 1, 4),
        read(2, (20, 30), Some(1), 9),
        read(2, (40, 50), Some(1), 6),
    ];
    assert!(matches!(
        check_registers(&h, &lenient).unwrap().0,
        Verdict::Invalid { .. }
    ));
}

#[test]
fn duplicate_written_values_are_refused_as_input() {
    let h = [cas(1, (0, 10), 0, 1, 4), write(1, (20, 30), 1, 6)];
    assert!(check_registers(&h, &RegisterCheck::default()).is_err());
}

#[test]
fn a_hard_history_gives_unknown_not_a_hang() {
    // Forty concurrent indeterminate writes and an indeterminate CAS expecting a version nobody reported (so
    // none can be pruned), then a read of a value nobody wrote. Proving that impossible means trying every
    // subset of the writes: far beyond the small budget, so the answer must be Unknown, and quickly.
    let mut h: Vec<Op> = (0..40)
        .map(|i| op(i, "r", (i, i + 1), Call::Write { value: 100 + i }, info()))
        .collect();
    h.push(op(
        98,
        "r",
        (2, 3),
        Call::Cas {
            expected: 55,
            value: 999,
        },
        info(),
    ));
    h.push(read(99, (1000, 1001), Some(5000), 78));
    let limits = RegisterCheck {
        max_steps_per_key: 20_000,
        time_limit: Duration::from_secs(30),
        ..Default::default()
    };
    let started = std::time::Instant::now();
    let v = check_registers(&h, &limits).unwrap().0;
    assert!(matches!(v, Verdict::Unknown { .. }), "{v:?}");
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn unread_indeterminate_writes_are_pruned_and_verdicts_hold() {
    // The same forty writes, none read: they cannot matter, so the impossible read is rejected at once even
    // with a budget far too small to enumerate them.
    let mut h: Vec<Op> = (0..40)
        .map(|i| op(i, "r", (i, i + 1), Call::Write { value: 100 + i }, info()))
        .collect();
    h.push(read(99, (1000, 1001), Some(5000), 78));
    let limits = RegisterCheck {
        max_steps_per_key: 1_000,
        ..Default::default()
    };
    assert!(matches!(
        check_registers(&h, &limits).unwrap().0,
        Verdict::Invalid { .. }
    ));
    // And a read that one of them explains is still accepted.
    h.pop();
    h.push(read(99, (1000, 1001), Some(117), 78));
    assert_eq!(check_registers(&h, &limits).unwrap().0, Verdict::Valid);
}

#[test]
fn an_unknown_version_cannot_be_one_another_write_reported() {
    // The indeterminate write (value 2) cannot have produced version 6: that index belongs to the write of 3.
    let h = [
        cas(1, (0, 1), 0, 1, 3),
        op(2, "r", (2, 5), Call::Write { value: 2 }, info()),
        read(3, (10, 20), Some(2), 6),
        write(4, (30, 40), 3, 6),
    ];
    assert!(matches!(verdict(&h), Verdict::Invalid { .. }));
}
