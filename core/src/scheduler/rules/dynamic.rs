//! DynamicByCapacity: each candidate's weight is the number of replicas that fit in its free
//! capacity (`available.fits_times(per_replica)`), and that number is also its hard cap, so a
//! decision never books more than a cluster reported free. Must not: place anything itself; it
//! only turns capacity into Webster seats.

use super::webster::Seat;

/// The Webster seat of a candidate that fits `fits` replicas, keeping `current` when not
/// rebalancing (the caller applies the stability bounds).
pub(crate) fn seat(fits: u64) -> Seat {
    Seat {
        weight: fits,
        lo: 0,
        hi: fits,
    }
}

/// The weight recorded in the decision for a candidate: the replicas that fit.
pub(crate) fn weight(fits: Option<u64>) -> u64 {
    fits.unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use crate::policy::Resources;

    #[test]
    fn fits_is_the_tightest_requested_dimension() {
        let avail = Resources {
            cpu_millis: 4000,
            memory_bytes: 8 << 30,
            pods: 100,
        };
        let per = Resources {
            cpu_millis: 500,
            memory_bytes: 2 << 30,
            pods: 1,
        };
        assert_eq!(avail.fits_times(&per), 4);
        let cpu_only = Resources {
            cpu_millis: 300,
            memory_bytes: 0,
            pods: 0,
        };
        assert_eq!(avail.fits_times(&cpu_only), 13);
        assert_eq!(avail.fits_times(&Resources::ZERO), u64::MAX);
    }
}
