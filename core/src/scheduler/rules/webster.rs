//! Webster / Sainte-Laguë highest-averages apportionment with per-cluster bounds.
//!
//! Each cluster's next replica has priority `weight / (2 * current + 1)`; replicas go one by one
//! to the highest priority, ties to the cluster with fewer replicas, then the smaller name.
//! Priorities are compared by cross-multiplication in `u128`, never as fractions.
//!
//! Computing that one replica at a time costs O(replicas * log clusters). Instead we use the
//! equivalent divisor form: counts are `clamp(round_half_up(weight / d), lo, hi)` for a common
//! divisor `d`, which is what the one-by-one process produces for some house size. We pick `d`
//! from the totals (a few rounds, re-deriving it over the clusters not pinned at a bound), then
//! add or remove the last few replicas one by one with a heap. Cost: O(clusters + k log
//! clusters) where k, the distance left after rounding, is small in practice.
//!
//! Must not: know about filters, capacity reports or cluster state; it only divides numbers.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// One cluster's share of an apportionment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seat {
    pub weight: u64,
    /// At least this many (e.g. replicas kept for stability).
    pub lo: u64,
    /// At most this many (capacity, maxReplicas); a zero weight never gets more than `lo`.
    pub hi: u64,
}

/// Divides `total` among `seats`, which the caller lists in cluster-name order: ties between
/// equal priorities and equal counts go to the earlier seat, i.e. the smaller name (comparing
/// positions instead of strings keeps the heap cheap). When `total`
/// exceeds what the bounds allow the result is every `hi` (the caller reports the shortfall);
/// when it is below the sum of `lo`, the lower bounds are dropped.
pub fn apportion(total: u64, seats: &[Seat]) -> Vec<u64> {
    let mut lo: Vec<u64> = seats.iter().map(|s| s.lo).collect();
    let hi: Vec<u64> = seats
        .iter()
        .map(|s| if s.weight == 0 { s.lo } else { s.hi.max(s.lo) })
        .collect();
    let sum_hi: u128 = hi.iter().map(|&h| u128::from(h)).sum();
    let mut sum_lo: u128 = lo.iter().map(|&l| u128::from(l)).sum();
    if u128::from(total) < sum_lo {
        lo.iter_mut().for_each(|l| *l = 0);
        sum_lo = 0;
    }
    let target = u128::from(total).clamp(sum_lo, sum_hi);
    if target == sum_hi {
        return hi;
    }
    if target == sum_lo {
        return lo;
    }

    let mut counts = seed(target, seats, &lo, &hi);
    let mut sum: u128 = counts.iter().map(|&c| u128::from(c)).sum();
    if sum < target {
        let mut heap: BinaryHeap<AddKey> = (0..seats.len())
            .filter(|&i| counts[i] < hi[i])
            .map(|i| AddKey {
                w: seats[i].weight,
                s: counts[i],
                i,
            })
            .collect();
        while sum < target {
            let Some(top) = heap.pop() else { break };
            counts[top.i] += 1;
            sum += 1;
            if counts[top.i] < hi[top.i] {
                heap.push(AddKey {
                    s: counts[top.i],
                    ..top
                });
            }
        }
    } else if sum > target {
        let mut heap: BinaryHeap<RemoveKey> = (0..seats.len())
            .filter(|&i| counts[i] > lo[i])
            .map(|i| RemoveKey {
                w: seats[i].weight,
                s: counts[i],
                i,
            })
            .collect();
        while sum > target {
            let Some(top) = heap.pop() else { break };
            counts[top.i] -= 1;
            sum -= 1;
            if counts[top.i] > lo[top.i] {
                heap.push(RemoveKey {
                    s: counts[top.i],
                    ..top
                });
            }
        }
    }
    counts
}

/// Rounds at a common divisor, re-deriving the divisor over the clusters not pinned at a bound
/// so that caps and floors do not leave a long one-by-one tail. Every round's result is a valid
/// bounded divisor-method allocation, so the heap phase continues the one-by-one process exactly.
fn seed(target: u128, seats: &[Seat], lo: &[u64], hi: &[u64]) -> Vec<u64> {
    let n = seats.len();
    let mut counts = vec![0u64; n];
    let mut pinned = vec![false; n];
    // Divisor d = weight_sum / seats_left; round_half_up(w / d) = floor((2 w left + ws) / (2 ws)).
    let mut last_divisor = (0u128, 0i128);
    for _round in 0..4 {
        let mut weight_sum: u128 = 0;
        let mut left: i128 = target as i128;
        for i in 0..n {
            if pinned[i] {
                left -= i128::from(counts[i]);
            } else {
                weight_sum += u128::from(seats[i].weight);
            }
        }
        // Same divisor as last round: the counts would not change.
        if weight_sum == 0 || left <= 0 || (weight_sum, left) == last_divisor {
            break;
        }
        last_divisor = (weight_sum, left);
        let left = left as u128;
        let mut sum: u128 = 0;
        let mut free = 0usize;
        for i in 0..n {
            let w = u128::from(seats[i].weight);
            let raw = div_fast(2 * w * left + weight_sum, 2 * weight_sum);
            let c = raw.clamp(u128::from(lo[i]), u128::from(hi[i])) as u64;
            counts[i] = c;
            sum += u128::from(c);
            pinned[i] = raw != u128::from(c);
            free += usize::from(!pinned[i] && seats[i].weight > 0);
        }
        // Close enough for the heap when the gap is within one replica per free cluster.
        if sum.abs_diff(target) <= (free as u128).div_ceil(2).max(1) {
            break;
        }
    }
    counts
}

/// `n / d`, in 64-bit hardware division when both fit: 128-bit division is a slow library
/// call, and this runs once per cluster per seeding round.
#[inline]
pub(crate) fn div_fast(n: u128, d: u128) -> u128 {
    match (u64::try_from(n), u64::try_from(d)) {
        (Ok(n), Ok(d)) => u128::from(n / d),
        _ => n / d,
    }
}

struct AddKey {
    w: u64,
    s: u64,
    i: usize,
}

impl Ord for AddKey {
    /// Greater = gets the next replica: higher w/(2s+1), then fewer replicas, then earlier seat.
    fn cmp(&self, other: &Self) -> Ordering {
        let a = u128::from(self.w) * (2 * u128::from(other.s) + 1);
        let b = u128::from(other.w) * (2 * u128::from(self.s) + 1);
        a.cmp(&b)
            .then(other.s.cmp(&self.s))
            .then(other.i.cmp(&self.i))
    }
}

impl PartialOrd for AddKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for AddKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for AddKey {}

/// The exact reverse of `AddKey`: the replica the one-by-one process would have added last.
struct RemoveKey {
    w: u64,
    s: u64,
    i: usize,
}

impl Ord for RemoveKey {
    /// Greater = loses a replica first: lower w/(2s-1), then more replicas, then later seat.
    fn cmp(&self, other: &Self) -> Ordering {
        let a = u128::from(self.w) * (2 * u128::from(other.s) - 1);
        let b = u128::from(other.w) * (2 * u128::from(self.s) - 1);
        b.cmp(&a)
            .then(self.s.cmp(&other.s))
            .then(self.i.cmp(&other.i))
    }
}

impl PartialOrd for RemoveKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for RemoveKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for RemoveKey {}

/// The one-replica-at-a-time reference process, O(total * clusters): used by tests to check
/// `apportion` against the definition.
pub fn apportion_one_by_one(total: u64, seats: &[Seat]) -> Vec<u64> {
    let mut counts: Vec<u64> = seats.iter().map(|s| s.lo).collect();
    let mut sum: u64 = counts.iter().sum();
    if sum > total {
        counts.iter_mut().for_each(|c| *c = 0);
        sum = 0;
    }
    while sum < total {
        let best = (0..seats.len())
            .filter(|&i| seats[i].weight > 0 && counts[i] < seats[i].hi)
            .max_by(|&a, &b| {
                AddKey {
                    w: seats[a].weight,
                    s: counts[a],
                    i: a,
                }
                .cmp(&AddKey {
                    w: seats[b].weight,
                    s: counts[b],
                    i: b,
                })
            });
        let Some(i) = best else { break };
        counts[i] += 1;
        sum += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seats(w: &[u64]) -> Vec<Seat> {
        w.iter()
            .map(|&weight| Seat {
                weight,
                lo: 0,
                hi: u64::MAX,
            })
            .collect()
    }

    #[test]
    fn equal_weights_tie_to_smaller_name() {
        assert_eq!(apportion(50, &seats(&[1, 1, 1])), vec![17, 17, 16]);
        assert_eq!(apportion(1, &seats(&[1, 1, 1])), vec![1, 0, 0]);
        assert_eq!(apportion(2, &seats(&[1, 1, 1])), vec![1, 1, 0]);
    }

    #[test]
    fn sainte_lague_textbook_example() {
        // Parties with 53k, 24k, 23k votes and 7 seats: Sainte-Laguë gives 3, 2, 2.
        assert_eq!(
            apportion(7, &seats(&[53_000, 24_000, 23_000])),
            vec![3, 2, 2]
        );
    }

    #[test]
    fn bounds_are_respected() {
        let s = [
            Seat {
                weight: 10,
                lo: 0,
                hi: 2,
            },
            Seat {
                weight: 1,
                lo: 3,
                hi: 100,
            },
            Seat {
                weight: 1,
                lo: 0,
                hi: 100,
            },
        ];
        let got = apportion(20, &s);
        assert_eq!(got.iter().sum::<u64>(), 20);
        assert_eq!(got[0], 2);
        assert!(got[1] >= 3);
        assert_eq!(got, apportion_one_by_one(20, &s));
    }

    #[test]
    fn zero_weight_gets_only_its_floor() {
        let s = [
            Seat {
                weight: 0,
                lo: 1,
                hi: 10,
            },
            Seat {
                weight: 1,
                lo: 0,
                hi: 3,
            },
        ];
        assert_eq!(apportion(10, &s), vec![1, 3]);
    }

    #[test]
    fn matches_one_by_one_on_many_shapes() {
        for total in 0..60u64 {
            for shape in 0..20u64 {
                let s: Vec<Seat> = (0..7u64)
                    .map(|i| Seat {
                        weight: (i * 7 + shape * 3) % 11,
                        lo: if (i + shape) % 5 == 0 { 2 } else { 0 },
                        hi: if (i + shape) % 3 == 0 { 4 } else { 1000 },
                    })
                    .collect();
                let want = apportion_one_by_one(total, &s);
                let want_sum: u64 = want.iter().sum();
                let got = apportion(total, &s);
                if s.iter().map(|x| x.lo).sum::<u64>() <= total {
                    assert_eq!(got, want, "total {total} shape {shape}");
                } else {
                    assert!(got.iter().sum::<u64>() <= want_sum.max(total));
                }
            }
        }
    }
}
