//! The KubeFed planner's order (rules 1 and 2 of `static_weights`): weight descending, then
//! the 32-bit FNV-1 hash of the cluster name followed by a salt, then name, then input
//! position. Must not: look at replicas, capacity or anything else the rules decide with.
//!
//! Why it is not a hash per name and a comparison sort: at 1,000 clusters those two cost more
//! than all the planner's rules together. Instead:
//! - Hashing reuses shared prefixes. The FNV state after a name's first `j` bytes depends on
//!   those bytes only, and the names of a sorted fleet share long prefixes (`cluster-0012…`),
//!   so each name starts from the state its prefix already reached in an earlier name, and
//!   eight names go side by side through the rest (tail and salt), so that their multiply
//!   chains overlap. The result is exactly [`fnv1_32`](crate::scheduler::static_weights::fnv1_32).
//! - Sorting packs weight, hash and position into one integer key per cluster, so the sort
//!   compares integers and only runs of equal weight and hash look at names. (A radix sort
//!   over the same keys was measured no faster at 100 to 10,000 clusters and was removed:
//!   docs/performance.md.)

pub(crate) const FNV_BASIS: u32 = 0x811c_9dc5;
pub(crate) const FNV_PRIME: u32 = 0x0100_0193;

/// Continues an FNV-1 hash over `bytes`.
pub(crate) fn fnv1_32_from(mut h: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        h = h.wrapping_mul(FNV_PRIME) ^ u32::from(b);
    }
    h
}

/// How many leading bytes `a` and `b` share.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut i = 0;
    while let (Some(x), Some(y)) = (a[i..].first_chunk::<8>(), b[i..].first_chunk::<8>()) {
        let diff = u64::from_le_bytes(*x) ^ u64::from_le_bytes(*y);
        if diff != 0 {
            // Little-endian: the first differing byte holds the lowest set bit.
            return i + (diff.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    if i < n && n >= 8 {
        // The last eight bytes, overlapping bytes already found equal.
        if let (Some(x), Some(y)) = (a[n - 8..].first_chunk::<8>(), b[n - 8..].first_chunk::<8>()) {
            let diff = u64::from_le_bytes(*x) ^ u64::from_le_bytes(*y);
            return if diff == 0 {
                n
            } else {
                n - 8 + (diff.trailing_zeros() / 8) as usize
            };
        }
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// Calls `out(k, fnv1_32(name(k) ++ salt))` for every `k` in `0..n`, in order.
pub(crate) fn fnv1_32_many<'a>(
    n: usize,
    name: impl Fn(usize) -> &'a [u8],
    salt: &[u8],
    mut out: impl FnMut(usize, u32),
) {
    const LANES: usize = 8;
    // `states[j]` is the FNV state after the first `j` bytes of `anchor`, the last name of
    // the previous batch; a name sharing `j` bytes with it starts from there.
    let mut anchor: &[u8] = &[];
    let mut states: Vec<u32> = vec![FNV_BASIS];
    let mut k = 0;
    while k < n {
        let m = LANES.min(n - k);
        let mut h = [FNV_BASIS; LANES];
        let mut rest: [&[u8]; LANES] = [&[]; LANES];
        for (l, (lane, tail)) in h.iter_mut().zip(rest.iter_mut()).take(m).enumerate() {
            let nm = name(k + l);
            let p = common_prefix(anchor, nm);
            *lane = states[p];
            *tail = &nm[p..];
        }
        if m == LANES {
            let common = rest.iter().map(|r| r.len()).min().unwrap_or(0);
            let heads: [&[u8]; LANES] = rest.map(|r| &r[..common]);
            for j in 0..common {
                for (h, head) in h.iter_mut().zip(&heads) {
                    *h = h.wrapping_mul(FNV_PRIME) ^ u32::from(head[j]);
                }
            }
            for (h, r) in h.iter_mut().zip(&rest) {
                *h = fnv1_32_from(*h, &r[common..]);
            }
        } else {
            for (h, r) in h.iter_mut().zip(&rest) {
                *h = fnv1_32_from(*h, r);
            }
        }
        for &b in salt {
            for h in h.iter_mut() {
                *h = h.wrapping_mul(FNV_PRIME) ^ u32::from(b);
            }
        }
        for (l, &h) in h.iter().take(m).enumerate() {
            out(k + l, h);
        }
        let last = name(k + m - 1);
        let p = common_prefix(anchor, last);
        states.truncate(p + 1);
        let mut s = states[p];
        for &b in &last[p..] {
            s = s.wrapping_mul(FNV_PRIME) ^ u32::from(b);
            states.push(s);
        }
        anchor = last;
        k += m;
    }
}

/// Indexes `0..weights.len()` in planning order: `weights` descending, then `hashes`
/// ascending, then `name` ascending, then index ascending.
pub(crate) fn planning_order<'a>(
    weights: &[u64],
    hashes: &[u32],
    name: impl Fn(usize) -> &'a [u8],
) -> Vec<u32> {
    debug_assert_eq!(weights.len(), hashes.len());
    let mut keys = packed(weights, hashes);
    keys.sort_unstable();
    let mut order: Vec<u32> = keys.into_iter().map(|k| k as u32).collect();
    name_ties(&mut order, weights, hashes, name);
    order
}

/// One sortable key per index: (weight descending, hash, index).
fn packed(weights: &[u64], hashes: &[u32]) -> Vec<u128> {
    weights
        .iter()
        .zip(hashes)
        .enumerate()
        .map(|(j, (&w, &h))| (u128::from(u64::MAX - w) << 64) | (u128::from(h) << 32) | j as u128)
        .collect()
}

/// Puts runs of equal weight and hash (a 32-bit hash collision, or one name listed twice) in
/// name order. Each run must be in index order already, so a stable sort by name finishes it.
fn name_ties<'a>(
    order: &mut [u32],
    weights: &[u64],
    hashes: &[u32],
    name: impl Fn(usize) -> &'a [u8],
) {
    let same = |a: u32, b: u32| {
        let (a, b) = (a as usize, b as usize);
        weights[a] == weights[b] && hashes[a] == hashes[b]
    };
    let n = order.len();
    let mut start = 0;
    while start < n {
        let mut end = start + 1;
        while end < n && same(order[start], order[end]) {
            end += 1;
        }
        if end - start > 1 {
            order[start..end].sort_by(|&a, &b| name(a as usize).cmp(name(b as usize)));
        }
        start = end;
    }
}

/// How many positions a head selection produces: about what a decision that places a few
/// dozen replicas over many clusters reads.
const HEAD: usize = 128;

/// The planning order, produced only as far as the planner reads it. A planner that places a
/// few dozen replicas over a thousand clusters reads a few dozen positions: those come from
/// one selection (O(n)) and a sort of the selected; only a read past them pays for the whole
/// order (`planning_order`), whose first positions are the same.
pub(crate) struct Order {
    weights: Vec<u64>,
    hashes: Vec<u32>,
    /// The first `known.len()` indexes in planning order.
    known: Vec<u32>,
}

impl Order {
    pub(crate) fn new(weights: Vec<u64>, hashes: Vec<u32>) -> Self {
        debug_assert_eq!(weights.len(), hashes.len());
        Self {
            weights,
            hashes,
            known: Vec::new(),
        }
    }

    /// The index at position `t` of the planning order (`t` below the number of indexes).
    pub(crate) fn at<'a>(&mut self, t: usize, name: impl Fn(usize) -> &'a [u8]) -> usize {
        if t >= self.known.len() {
            let n = self.weights.len();
            let head = if self.known.is_empty() && t < HEAD && 2 * HEAD < n {
                self.head(name)
            } else {
                Err(name)
            };
            match head {
                Ok(head) => self.known = head,
                Err(name) => self.known = planning_order(&self.weights, &self.hashes, name),
            }
        }
        self.known[t] as usize
    }

    /// The first `HEAD` positions, or `name` back when a run of equal weight and hash crosses
    /// the edge of the selection (its name order would need both sides).
    fn head<'a, F: Fn(usize) -> &'a [u8]>(&self, name: F) -> Result<Vec<u32>, F> {
        let mut keys = packed(&self.weights, &self.hashes);
        keys.select_nth_unstable(HEAD - 1);
        let edge = keys[HEAD - 1] >> 32;
        if keys[HEAD..].iter().any(|&k| k >> 32 == edge) {
            return Err(name);
        }
        keys.truncate(HEAD);
        keys.sort_unstable();
        let mut head: Vec<u32> = keys.iter().map(|&k| k as u32).collect();
        name_ties(&mut head, &self.weights, &self.hashes, name);
        Ok(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::static_weights::fnv1_32;

    /// A small deterministic generator, so the cases below need no extra dependency.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    fn names(seed: u64, n: usize, sorted: bool) -> Vec<String> {
        let mut s = seed | 1;
        let mut v: Vec<String> = (0..n)
            .map(|i| match next(&mut s) % 4 {
                0 => format!("cluster-{i:05}"),
                1 => format!("c{}", next(&mut s) % 30),
                2 => "ab-c0z".repeat((next(&mut s) % 4) as usize),
                _ => format!("eu-west-{}-a-much-longer-suffix", next(&mut s) % 50),
            })
            .collect();
        if sorted {
            v.sort();
        }
        v
    }

    #[test]
    fn prefix_reuse_gives_plain_fnv() {
        for seed in 1..40 {
            let v = names(seed, (seed * 7 % 60) as usize, seed % 3 != 0);
            for salt in ["", "ns/web", "default/a-much-longer-object-name"] {
                let mut got = Vec::new();
                fnv1_32_many(
                    v.len(),
                    |k| v[k].as_bytes(),
                    salt.as_bytes(),
                    |k, h| {
                        assert_eq!(k, got.len());
                        got.push(h);
                    },
                );
                let want: Vec<u32> = v.iter().map(|n| fnv1_32(n, salt)).collect();
                assert_eq!(got, want, "seed {seed} salt {salt:?}");
            }
        }
    }

    #[test]
    fn common_prefix_counts_shared_bytes() {
        assert_eq!(common_prefix(b"", b"abc"), 0);
        assert_eq!(common_prefix(b"cluster-00012", b"cluster-00013"), 12);
        assert_eq!(common_prefix(b"cluster-0", b"cluster-00013"), 9);
        assert_eq!(common_prefix(b"cluster-", b"cluster-"), 8);
        assert_eq!(common_prefix(b"abcdefghij", b"abcdefghXj"), 8);
        assert_eq!(common_prefix(b"abcdefghij", b"abcdefghiX"), 9);
        assert_eq!(common_prefix(b"abcdefghij", b"abcdefghij"), 10);
        assert_eq!(common_prefix(b"abcdefghij", b"abcdefghijk"), 10);
        for a in [
            "",
            "a",
            "abcdefg",
            "abcdefgh",
            "cluster-00012",
            "cluster-00112",
        ] {
            for b in [
                "",
                "a",
                "abcdefgX",
                "abcdefgh",
                "cluster-00013",
                "cluster-0011",
            ] {
                let want = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
                assert_eq!(common_prefix(a.as_bytes(), b.as_bytes()), want, "{a} {b}");
            }
        }
    }

    #[test]
    fn planning_order_matches_its_definition() {
        for seed in 1..60u64 {
            let mut s = seed;
            let n = (next(&mut s) % 300) as usize;
            let v = names(seed, n, seed % 2 == 0);
            let weights: Vec<u64> = (0..n)
                .map(|_| match seed % 4 {
                    0 => 3,
                    1 => next(&mut s) % 4,
                    2 => next(&mut s),
                    _ => u64::MAX - next(&mut s) % 3,
                })
                .collect();
            // Few distinct hashes, so that runs of equal weight and hash get name order.
            let hashes: Vec<u32> = (0..n)
                .map(|_| {
                    let h = next(&mut s) as u32;
                    if seed % 3 == 0 {
                        h % 5
                    } else {
                        h
                    }
                })
                .collect();
            let got = planning_order(&weights, &hashes, |j| v[j].as_bytes());
            let mut want: Vec<u32> = (0..n as u32).collect();
            want.sort_by(|&a, &b| {
                let (a, b) = (a as usize, b as usize);
                weights[b]
                    .cmp(&weights[a])
                    .then(hashes[a].cmp(&hashes[b]))
                    .then(v[a].cmp(&v[b]))
                    .then(a.cmp(&b))
            });
            assert_eq!(got, want, "seed {seed}");
        }
    }

    #[test]
    fn lazy_order_reads_as_the_whole_order() {
        for seed in 1..40u64 {
            let mut s = seed;
            let n = 2 * HEAD + 1 + (next(&mut s) % 400) as usize;
            let v = names(seed, n, seed % 2 == 0);
            let weights: Vec<u64> = (0..n)
                .map(|_| if seed % 4 == 0 { next(&mut s) % 3 } else { 1 })
                .collect();
            // Few distinct hashes in some cases, so that equal runs cross the head's edge.
            let hashes: Vec<u32> = (0..n)
                .map(|_| match seed % 3 {
                    0 => (next(&mut s) as u32) % 7,
                    _ => next(&mut s) as u32,
                })
                .collect();
            let want = planning_order(&weights, &hashes, |j| v[j].as_bytes());
            // Read the head, then on past it; and from a fresh order, straight past it.
            let mut order = Order::new(weights.clone(), hashes.clone());
            let got: Vec<u32> = (0..n)
                .map(|t| order.at(t, |j| v[j].as_bytes()) as u32)
                .collect();
            assert_eq!(got, want, "seed {seed}");
            let mut order = Order::new(weights, hashes);
            assert_eq!(
                order.at(HEAD + 3, |j| v[j].as_bytes()) as u32,
                want[HEAD + 3]
            );
        }
    }
}
