//! Aggregated: the fewest candidates that can hold the replicas, before `divided` shares them
//! out by capacity among those alone.
//!
//! Order of choice: a candidate that must get a replica (a spread constraint's `need_one`),
//! then, without rebalance, the candidates already running the object (most replicas first, so
//! the workload stays where it is and shrinks onto its largest parts), then by the replicas
//! they can still hold, then by name. Candidates are taken in that order until their capacity
//! covers the budget; the rest get a seat of weight 0 and no room. Must not: compute counts.

use std::cmp::Reverse;

use super::webster::Seat;

/// Leaves room only in the seats `divided` may fill. `seats` and `current` are parallel to
/// the name-ordered candidates; a seat's `hi` is what that candidate can hold.
pub(crate) fn narrow(seats: &mut [Seat], current: &[u64], budget: u64, rebalance: bool) {
    let mut order: Vec<usize> = (0..seats.len()).filter(|&k| seats[k].hi > 0).collect();
    order.sort_by_key(|&k| {
        let running = if rebalance { 0 } else { current[k] };
        (
            Reverse(seats[k].lo > 0),
            Reverse(running),
            Reverse(seats[k].hi),
            k,
        )
    });
    let mut chosen = vec![false; seats.len()];
    let mut room = 0u64;
    for k in order {
        if room >= budget && seats[k].lo == 0 {
            break;
        }
        chosen[k] = true;
        room = room.saturating_add(seats[k].hi);
    }
    for (seat, chosen) in seats.iter_mut().zip(chosen) {
        if !chosen {
            *seat = Seat {
                weight: 0,
                lo: 0,
                hi: 0,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seats(caps: &[u64]) -> Vec<Seat> {
        caps.iter()
            .map(|&hi| Seat {
                weight: hi,
                lo: 0,
                hi,
            })
            .collect()
    }

    fn open(s: &[Seat]) -> Vec<usize> {
        (0..s.len()).filter(|&k| s[k].hi > 0).collect()
    }

    #[test]
    fn the_largest_until_the_budget_is_covered() {
        let mut s = seats(&[3, 10, 4, 0]);
        narrow(&mut s, &[0; 4], 12, false);
        assert_eq!(open(&s), [1, 2]);
        let mut s = seats(&[3, 10, 4, 0]);
        narrow(&mut s, &[0; 4], 10, false);
        assert_eq!(open(&s), [1]);
        // Not enough anywhere: every candidate with room.
        let mut s = seats(&[3, 10, 4, 0]);
        narrow(&mut s, &[0; 4], 50, false);
        assert_eq!(open(&s), [0, 1, 2]);
    }

    #[test]
    fn running_clusters_first_unless_rebalancing_and_forced_ones_always() {
        let mut s = seats(&[3, 10, 4]);
        narrow(&mut s, &[2, 0, 0], 5, false);
        assert_eq!(open(&s), [0, 1], "keeps the cluster that runs it");
        let mut s = seats(&[3, 10, 4]);
        narrow(&mut s, &[2, 0, 0], 5, true);
        assert_eq!(open(&s), [1]);
        let mut s = seats(&[3, 10, 4]);
        s[2].lo = 1;
        narrow(&mut s, &[0; 3], 5, false);
        assert_eq!(open(&s), [1, 2]);
    }
}
