//! Response rate limiting (RRL) for UDP answers: a token bucket per source network, so that
//! fedraft's DNS server cannot be used to reflect and amplify floods at a spoofed victim, and one
//! noisy network cannot take every answer the server can give.
//!
//! Sources are grouped by prefix (default /24 for IPv4, /56 for IPv6, as BIND does): a spoofer
//! who varies the low bits still lands in one bucket. Each bucket holds up to one second of
//! responses (`responses_per_second`) and refills continuously. A response over the limit is
//! dropped, except that every `slip`-th dropped response is sent as an empty answer with TC=1:
//! a real client behind a busy network then retries over TCP (which is never limited, since a
//! TCP handshake cannot be spoofed), while a reflection gains nothing from a truncated reply
//! no larger than the query.
//!
//! Must not: read the clock (the caller passes `now`) or grow without bound: at most
//! `max_tracked_prefixes` buckets exist; past that, idle buckets are swept, and prefixes that
//! still find no room share one overflow bucket.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::RateLimitConfig;

/// Token amounts are kept in millionths of a response, so refill needs no floating point:
/// a bucket refills `responses_per_second` units per elapsed microsecond.
const UNIT: u64 = 1_000_000;
/// A bucket untouched this long is full again, so forgetting it changes nothing.
const IDLE: Duration = Duration::from_secs(1);

/// What to do with one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Within the limit: answer normally.
    Send,
    /// Over the limit, but this one slips: answer empty with TC=1.
    Slip,
    /// Over the limit: send nothing.
    Drop,
}

/// Counters of what the limiter decided, for logs and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitStats {
    pub sent: u64,
    pub slipped: u64,
    pub dropped: u64,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Available responses, in `UNIT`s.
    tokens: u64,
    last: Instant,
    /// Responses over the limit so far, for the slip count.
    over: u64,
}

impl Bucket {
    fn full(capacity: u64, now: Instant) -> Self {
        Bucket {
            tokens: capacity,
            last: now,
            over: 0,
        }
    }

    fn take(&mut self, now: Instant, per_second: u64, capacity: u64, slip: u64) -> Verdict {
        let elapsed_us =
            u64::try_from(now.saturating_duration_since(self.last).as_micros()).unwrap_or(u64::MAX);
        // elapsed_us * per_second saturates long before it could wrap: 2^64 UNITs is ~5 hours
        // at 10^6 responses/s, and any refill past `capacity` is clipped anyway.
        self.tokens = self
            .tokens
            .saturating_add(elapsed_us.saturating_mul(per_second))
            .min(capacity);
        if now > self.last {
            self.last = now;
        }
        if self.tokens >= UNIT {
            self.tokens -= UNIT;
            return Verdict::Send;
        }
        self.over = self.over.wrapping_add(1);
        if slip > 0 && self.over.is_multiple_of(slip) {
            Verdict::Slip
        } else {
            Verdict::Drop
        }
    }
}

struct Table {
    buckets: HashMap<IpAddr, Bucket>,
    /// Shared by prefixes that found no room in `buckets`.
    overflow: Bucket,
    last_sweep: Instant,
}

/// The per-source-prefix limiter; one per server, shared by its UDP tasks.
pub struct RateLimiter {
    cfg: RateLimitConfig,
    table: Mutex<Table>,
    sent: AtomicU64,
    slipped: AtomicU64,
    dropped: AtomicU64,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("cfg", &self.cfg)
            .field("stats", &self.stats())
            .finish()
    }
}

/// The network `ip` belongs to, at the configured prefix length (IPv4-mapped IPv6 addresses
/// count as IPv4, so one client cannot get two buckets).
fn prefix(ip: IpAddr, v4_len: u8, v6_len: u8) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let mask = u32::MAX
                .checked_shl(32 - u32::from(v4_len.min(32)))
                .unwrap_or(0);
            IpAddr::from((bits & mask).to_be_bytes())
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let mask = u128::MAX
                .checked_shl(128 - u32::from(v6_len.min(128)))
                .unwrap_or(0);
            IpAddr::from((bits & mask).to_be_bytes())
        }
    }
}

impl RateLimiter {
    /// A limiter with `cfg` (validated by `DnsConfig::validate`); `now` starts the clock.
    pub fn new(cfg: RateLimitConfig, now: Instant) -> Self {
        let capacity = cfg.capacity();
        RateLimiter {
            table: Mutex::new(Table {
                buckets: HashMap::new(),
                overflow: Bucket::full(capacity, now),
                last_sweep: now,
            }),
            cfg,
            sent: AtomicU64::new(0),
            slipped: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Decides one response to `source` at `now`.
    pub fn check(&self, source: IpAddr, now: Instant) -> Verdict {
        let cfg = &self.cfg;
        let verdict = if !cfg.enabled || cfg.exempt.iter().any(|n| n.contains(&source)) {
            Verdict::Send
        } else {
            let key = prefix(source, cfg.ipv4_prefix_len, cfg.ipv6_prefix_len);
            let per_second = u64::from(cfg.responses_per_second);
            let capacity = cfg.capacity();
            let slip = u64::from(cfg.slip);
            let mut guard = self
                .table
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let t = &mut *guard;
            if !t.buckets.contains_key(&key) && t.buckets.len() >= cfg.max_tracked_prefixes {
                // Sweep at most once per idle period: a table full of active prefixes would
                // otherwise be walked on every query from a new one.
                if now.saturating_duration_since(t.last_sweep) >= IDLE {
                    t.buckets
                        .retain(|_, b| now.saturating_duration_since(b.last) < IDLE);
                    t.last_sweep = now;
                }
            }
            let room = t.buckets.len() < cfg.max_tracked_prefixes;
            match t.buckets.entry(key) {
                Entry::Occupied(mut b) => b.get_mut().take(now, per_second, capacity, slip),
                Entry::Vacant(slot) if room => slot
                    .insert(Bucket::full(capacity, now))
                    .take(now, per_second, capacity, slip),
                Entry::Vacant(_) => t.overflow.take(now, per_second, capacity, slip),
            }
        };
        let counter = match verdict {
            Verdict::Send => &self.sent,
            Verdict::Slip => &self.slipped,
            Verdict::Drop => &self.dropped,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        verdict
    }

    pub fn stats(&self) -> RateLimitStats {
        RateLimitStats {
            sent: self.sent.load(Ordering::Relaxed),
            slipped: self.slipped.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }

    /// Source prefixes currently tracked (at most `max_tracked_prefixes`).
    pub fn tracked_prefixes(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .buckets
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(rps: u32, slip: u32) -> RateLimitConfig {
        RateLimitConfig {
            responses_per_second: rps,
            slip,
            ..RateLimitConfig::default()
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// Verdicts for `n` responses to `source` at one instant.
    fn burst(l: &RateLimiter, source: &str, now: Instant, n: usize) -> Vec<Verdict> {
        (0..n).map(|_| l.check(ip(source), now)).collect()
    }

    #[test]
    fn prefixes_group_networks() {
        let cases = [
            ("192.0.2.77", 24, 56, "192.0.2.0"),
            ("192.0.2.77", 32, 56, "192.0.2.77"),
            ("192.0.2.77", 0, 56, "0.0.0.0"),
            ("2001:db8:aa:bbcc::1", 24, 56, "2001:db8:aa:bb00::"),
            ("2001:db8:aa:bbcc::1", 24, 128, "2001:db8:aa:bbcc::1"),
            ("::ffff:192.0.2.77", 24, 56, "192.0.2.0"),
        ];
        for (input, v4, v6, want) in cases {
            assert_eq!(prefix(ip(input), v4, v6), ip(want), "{input} /{v4} /{v6}");
        }
    }

    #[test]
    fn a_burst_past_the_limit_drops_and_slips_every_second_one() {
        let t0 = Instant::now();
        let l = RateLimiter::new(cfg(10, 2), t0);
        let v = burst(&l, "192.0.2.1", t0, 20);
        assert!(v[..10].iter().all(|v| *v == Verdict::Send), "{v:?}");
        let over: Vec<Verdict> = v[10..].to_vec();
        let expected: Vec<Verdict> = (1..=10)
            .map(|i| {
                if i % 2 == 0 {
                    Verdict::Slip
                } else {
                    Verdict::Drop
                }
            })
            .collect();
        assert_eq!(over, expected);
        // Same /24, another host: the same bucket.
        assert_eq!(l.check(ip("192.0.2.200"), t0), Verdict::Drop);
        // Another /24: its own bucket.
        assert_eq!(l.check(ip("192.0.3.1"), t0), Verdict::Send);
        assert_eq!(
            l.stats(),
            RateLimitStats {
                sent: 11,
                slipped: 5,
                dropped: 6
            }
        );
    }

    #[test]
    fn buckets_refill_with_time_up_to_one_second_of_responses() {
        let t0 = Instant::now();
        let l = RateLimiter::new(cfg(10, 0), t0);
        assert_eq!(burst(&l, "192.0.2.1", t0, 10), vec![Verdict::Send; 10]);
        assert_eq!(l.check(ip("192.0.2.1"), t0), Verdict::Drop);
        // 100 ms refill one response at 10/s.
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(l.check(ip("192.0.2.1"), t1), Verdict::Send);
        assert_eq!(l.check(ip("192.0.2.1"), t1), Verdict::Drop);
        // A long pause refills to the capacity, never beyond.
        let t2 = t1 + Duration::from_secs(60);
        let v = burst(&l, "192.0.2.1", t2, 11);
        assert_eq!(v.iter().filter(|v| **v == Verdict::Send).count(), 10);
        assert_eq!(v[10], Verdict::Drop, "slip 0 never slips");
    }

    #[test]
    fn disabled_or_exempt_sources_always_get_answers() {
        let t0 = Instant::now();
        let off = RateLimiter::new(
            RateLimitConfig {
                enabled: false,
                ..cfg(1, 2)
            },
            t0,
        );
        assert_eq!(burst(&off, "192.0.2.1", t0, 50), vec![Verdict::Send; 50]);
        let exempt = RateLimiter::new(
            RateLimitConfig {
                exempt: vec!["10.1.0.0/16".parse().unwrap()],
                ..cfg(1, 2)
            },
            t0,
        );
        assert_eq!(burst(&exempt, "10.1.2.3", t0, 50), vec![Verdict::Send; 50]);
        assert_eq!(burst(&exempt, "10.2.2.3", t0, 2)[1], Verdict::Drop);
    }

    #[test]
    fn the_table_is_bounded_and_forgets_idle_prefixes() {
        let t0 = Instant::now();
        let l = RateLimiter::new(
            RateLimitConfig {
                max_tracked_prefixes: 4,
                ..cfg(1, 0)
            },
            t0,
        );
        for i in 0..4 {
            assert_eq!(l.check(ip(&format!("192.0.{i}.1")), t0), Verdict::Send);
        }
        assert_eq!(l.tracked_prefixes(), 4);
        // Full: new prefixes share the overflow bucket (one response per second between them).
        assert_eq!(l.check(ip("198.51.100.1"), t0), Verdict::Send);
        assert_eq!(l.check(ip("203.0.113.1"), t0), Verdict::Drop);
        assert_eq!(l.tracked_prefixes(), 4);
        // After an idle second the old buckets are swept and a new prefix gets its own.
        let t1 = t0 + Duration::from_secs(2);
        assert_eq!(l.check(ip("203.0.113.1"), t1), Verdict::Send);
        assert_eq!(l.tracked_prefixes(), 1);
    }
}
