//! Exponential backoff with full jitter for retrying member-API errors.
//!
//! Pure: the random draw is passed in, so tests pin it. Delay for attempt n (1-based) is a
//! uniform draw in [min, min(max, min * 2^(n-1))]; "full jitter" spreads retries of many
//! objects that failed together (one dark cluster) instead of retrying them in lockstep.

use std::time::Duration;

/// Bounds of the retry delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub min: Duration,
    pub max: Duration,
}

/// Doublings after which the ceiling stops growing; 2^20 x 1 ms is already ~17 minutes, so
/// the cap is `max` long before this, and the shift cannot overflow.
const MAX_DOUBLINGS: u32 = 20;

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Self {
        Backoff {
            min,
            max: max.max(min),
        }
    }

    /// The ceiling of the delay before retry `attempt` (1 = first retry).
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(MAX_DOUBLINGS);
        let grown = self.min.saturating_mul(1u32 << doublings);
        grown.min(self.max)
    }

    /// The delay before retry `attempt`, with `unit` a uniform draw in [0, 1).
    pub fn delay(&self, attempt: u32, unit: f64) -> Duration {
        let ceiling = self.ceiling(attempt);
        let span = ceiling.saturating_sub(self.min);
        let unit = if unit.is_finite() {
            unit.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self.min + span.mul_f64(unit)
    }

    /// `delay` with a fresh random draw.
    pub fn delay_random(&self, attempt: u32) -> Duration {
        self.delay(attempt, rand::random::<f64>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn ceiling_doubles_then_caps() {
        let b = Backoff::new(ms(100), ms(1000));
        let got: Vec<u64> = (1..=6).map(|n| b.ceiling(n).as_millis() as u64).collect();
        assert_eq!(got, vec![100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.ceiling(u32::MAX), ms(1000));
    }

    #[test]
    fn delay_stays_within_bounds() {
        let b = Backoff::new(ms(100), ms(1000));
        assert_eq!(b.delay(3, 0.0), ms(100));
        assert_eq!(b.delay(3, 1.0), ms(400));
        assert_eq!(b.delay(3, 0.5), ms(250));
        assert_eq!(b.delay(3, f64::NAN), ms(100));
        for n in 1..40 {
            let d = b.delay_random(n);
            assert!(d >= ms(100) && d <= ms(1000), "attempt {n}: {d:?}");
        }
    }

    #[test]
    fn max_below_min_is_raised() {
        let b = Backoff::new(ms(500), ms(10));
        assert_eq!(b.delay(9, 0.9), ms(500));
    }
}
