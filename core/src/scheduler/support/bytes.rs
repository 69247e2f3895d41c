//! Comparisons of cluster names and label strings, inline, for the scheduler's per-cluster
//! loops. Must not: define any order other than `str`'s (bytewise lexicographic).
//!
//! Why: a decision over 1,000 clusters compares names and labels thousands of times, and the
//! standard comparisons call the C library's `memcmp` for every one; on strings of a dozen
//! bytes the call and its set-up cost more than the comparison. Here eight bytes are compared
//! per step as one integer.

use std::cmp::Ordering;

/// `a.cmp(b)` for byte strings (and so for `str`s).
#[inline]
pub(crate) fn cmp(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let (x, y) = (&a[..n], &b[..n]);
    let mut i = 0;
    while let (Some(p), Some(q)) = (x[i..].first_chunk::<8>(), y[i..].first_chunk::<8>()) {
        if p != q {
            // Big-endian: the first differing byte decides, as in a bytewise comparison.
            return u64::from_be_bytes(*p).cmp(&u64::from_be_bytes(*q));
        }
        i += 8;
    }
    if i < n && n >= 8 {
        // The last eight bytes, overlapping bytes already found equal: one more integer
        // comparison instead of up to seven byte steps.
        if let (Some(p), Some(q)) = (x[n - 8..].first_chunk::<8>(), y[n - 8..].first_chunk::<8>()) {
            if p != q {
                return u64::from_be_bytes(*p).cmp(&u64::from_be_bytes(*q));
            }
            i = n;
        }
    }
    while i < n {
        if x[i] != y[i] {
            return x[i].cmp(&y[i]);
        }
        i += 1;
    }
    a.len().cmp(&b.len())
}

/// `a == b` for byte strings.
#[inline]
pub(crate) fn eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && cmp(a, b) == Ordering::Equal
}

/// The first index at or after `from` whose name is not below `key`, in a slice sorted by
/// `name`: galloping (1, 2, 4, … ahead) and then bisecting, so walking a sorted list of
/// keys through a long sorted slice costs O(keys · log(gap)) comparisons.
pub(crate) fn lower_bound_from<T>(
    items: &[T],
    from: usize,
    key: &[u8],
    name: impl Fn(&T) -> &[u8],
) -> usize {
    let below = |i: usize| cmp(name(&items[i]), key) == Ordering::Less;
    let n = items.len();
    let (mut lo, mut hi) = (from, from);
    let mut step = 1;
    while hi < n && below(hi) {
        lo = hi + 1;
        hi += step;
        step *= 2;
    }
    let mut hi = hi.min(n);
    // Invariant: everything before `lo` is below `key`; `hi` is n or not below it.
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if below(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORDS: &[&str] = &[
        "",
        "a",
        "ab",
        "abc",
        "abcdefgh",
        "abcdefghi",
        "abcdefgh\u{0}",
        "abcdefgi",
        "cluster-00012",
        "cluster-00013",
        "cluster-0001",
        "cluster-000120",
        "eu-west-1-a-much-longer-name",
        "eu-west-1-a-much-longer-namf",
        "z",
        "\u{e9}t\u{e9}",
    ];

    #[test]
    fn order_is_strs_order() {
        for a in WORDS {
            for b in WORDS {
                assert_eq!(cmp(a.as_bytes(), b.as_bytes()), a.cmp(b), "{a:?} vs {b:?}");
                assert_eq!(eq(a.as_bytes(), b.as_bytes()), a == b, "{a:?} == {b:?}");
            }
        }
    }

    #[test]
    fn lower_bound_finds_the_first_not_below() {
        let mut v: Vec<&str> = WORDS.to_vec();
        v.push("cluster-00013");
        v.sort();
        for from in 0..=v.len() {
            for key in WORDS.iter().chain(&["b", "cluster-00012x", "zz"]) {
                let want = from + v[from..].partition_point(|w| *w < *key);
                let got = lower_bound_from(&v, from, key.as_bytes(), |w| w.as_bytes());
                assert_eq!(got, want, "from {from} key {key:?}");
            }
        }
    }
}
