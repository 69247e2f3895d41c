//! Two-level (Clusterless) scheduling, first level: a tenant's quota cut into equal slices,
//! placed on clusters by how many slices their free capacity holds.
//!
//! Eligible: Ready, not cordoned, no NoSchedule/NoExecute taint (tenants carry no
//! tolerations), reported capacity for at least one slice. Slices are shared by Webster over
//! "slices that fit", capped by that number; slices already placed stay where still eligible
//! (only the difference moves). Slices that fit nowhere are left out: the caller sees the sum.
//! Must not: schedule workloads; the tenant's objects are then scheduled among the returned
//! clusters via `ScheduleRequest::allowed`.

use std::collections::BTreeMap;

use super::webster::{apportion, Seat};
use crate::policy::Resources;
use crate::scheduler::{ClusterView, HealthView};

pub fn place_slices(
    slices: u32,
    slice: &Resources,
    clusters: &[ClusterView<'_>],
    current: &BTreeMap<String, u32>,
) -> BTreeMap<String, u32> {
    let mut eligible: Vec<(&str, u64)> = clusters
        .iter()
        .filter(|c| c.health == HealthView::Ready && !c.cordoned && c.taints.is_empty())
        .filter_map(|c| {
            let fits = c.available?.fits_times(slice);
            (fits > 0).then_some((c.name, fits))
        })
        .collect();
    eligible.sort_by(|a, b| a.0.cmp(b.0));
    eligible.dedup_by(|a, b| a.0 == b.0);
    let cur: Vec<u64> = eligible
        .iter()
        .map(|(n, fits)| u64::from(current.get(*n).copied().unwrap_or(0)).min(*fits))
        .collect();
    let sum_cur: u64 = cur.iter().sum();
    let total = u64::from(slices);
    let seats: Vec<Seat> = eligible
        .iter()
        .zip(&cur)
        .map(|(&(_, fits), &c)| {
            if sum_cur <= total {
                Seat {
                    weight: fits,
                    lo: c,
                    hi: fits,
                }
            } else {
                Seat {
                    weight: fits,
                    lo: 0,
                    hi: c,
                }
            }
        })
        .collect();
    let names: Vec<&str> = eligible.iter().map(|(n, _)| *n).collect();
    let got = apportion(total, &seats);
    names
        .iter()
        .zip(got)
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| (name.to_string(), u32::try_from(n).unwrap_or(u32::MAX)))
        .collect()
}
