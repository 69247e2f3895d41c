//! The set checker flags lost acknowledged adds, phantoms and adds that failed yet appear, tolerates
//! indeterminate adds either way, and answers Unknown without a final read.

use crate::common::*;
use fedraft_jepsen::check::set::check_sets;
use fedraft_jepsen::history::{Call, Op, Ret};
use fedraft_jepsen::Verdict;

fn add(p: u64, t: u64, element: u64, outcome: fedraft_jepsen::history::Outcome) -> Op {
    op(p, "s", (t, t + 5), Call::Add { element }, outcome)
}

fn final_read(t: u64, elements: &[u64]) -> Op {
    op(
        9,
        "s",
        (t, t + 5),
        Call::ReadAll,
        ok(Ret::Elements {
            elements: elements.to_vec(),
        }),
    )
}

#[test]
fn all_acknowledged_present_is_valid_and_indeterminate_may_go_either_way() {
    let h = [
        add(1, 0, 1, ok(Ret::Added)),
        add(2, 0, 2, ok(Ret::Added)),
        add(3, 0, 3, info()),
        add(4, 0, 4, info()),
        add(5, 0, 5, fail()),
        // An earlier, partial read is not the final one.
        final_read(3, &[1]),
        final_read(100, &[1, 2, 3]),
    ];
    let (verdict, reports) = check_sets(&h);
    assert_eq!(verdict, Verdict::Valid);
    let r = &reports[0];
    assert_eq!(
        (r.attempted, r.acknowledged, r.indeterminate, r.recovered),
        (5, 2, 2, 1)
    );
    assert_eq!(r.final_read, Some(3));
}

#[test]
fn lost_acknowledged_add_is_flagged() {
    let h = [
        add(1, 0, 1, ok(Ret::Added)),
        add(2, 0, 2, ok(Ret::Added)),
        final_read(100, &[1]),
    ];
    let (verdict, reports) = check_sets(&h);
    assert!(matches!(verdict, Verdict::Invalid { .. }));
    assert_eq!(reports[0].lost, vec![2]);
}

#[test]
fn phantom_element_is_flagged() {
    let h = [add(1, 0, 1, ok(Ret::Added)), final_read(100, &[1, 42])];
    let (verdict, reports) = check_sets(&h);
    assert!(matches!(verdict, Verdict::Invalid { ref description } if description.contains("42")));
    assert_eq!(reports[0].phantom, vec![42]);
    assert!(reports[0].lost.is_empty());
}

#[test]
fn failed_add_that_appears_is_flagged() {
    let h = [add(1, 0, 1, fail()), final_read(100, &[1])];
    let (verdict, reports) = check_sets(&h);
    assert!(matches!(verdict, Verdict::Invalid { .. }));
    assert_eq!(reports[0].failed_but_present, vec![1]);
}

#[test]
fn no_final_read_is_unknown() {
    let h = [add(1, 0, 1, ok(Ret::Added))];
    assert!(matches!(check_sets(&h).0, Verdict::Unknown { .. }));
}
