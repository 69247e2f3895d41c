//! Turning rounds into figures: per target and concurrency, puts/s over all measured rounds,
//! latency percentiles over all puts, the spread of the per-round rates, and fedraft/etcd ratios.
//! Also the machine facts printed above the table (CPUs, background load).
//!
//! Must not: drop or smooth samples; a percentile is a nearest-rank over every counted put.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::load::Round;

/// The merged figures of one target at one concurrency level.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub target: String,
    pub clients: usize,
    pub rounds: usize,
    pub puts: u64,
    pub puts_per_s: f64,
    /// Slowest and fastest round, puts/s: how stable the figure is.
    pub round_min_per_s: f64,
    pub round_max_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    /// The target's own CPU time per counted put, in microseconds (the bench started it).
    pub cpu_us_per_put: Option<f64>,
    pub errors: u64,
    pub first_error: Option<String>,
}

/// Collects rounds per (clients, target), in the order targets were first seen.
#[derive(Default)]
pub struct Results {
    rounds: BTreeMap<(usize, String), Vec<Round>>,
    order: Vec<String>,
}

impl Results {
    pub fn add(&mut self, target: &str, clients: usize, round: Round) {
        if !self.order.iter().any(|t| t == target) {
            self.order.push(target.to_string());
        }
        self.rounds
            .entry((clients, target.to_string()))
            .or_default()
            .push(round);
    }

    pub fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        let levels: Vec<usize> = {
            let mut l: Vec<usize> = self.rounds.keys().map(|(c, _)| *c).collect();
            l.dedup();
            l
        };
        for clients in levels {
            for target in &self.order {
                if let Some(rounds) = self.rounds.get(&(clients, target.clone())) {
                    rows.push(row(target, clients, rounds));
                }
            }
        }
        rows
    }
}

fn row(target: &str, clients: usize, rounds: &[Round]) -> Row {
    let mut lat: Vec<u32> = rounds
        .iter()
        .flat_map(|r| r.latencies_us.iter().copied())
        .collect();
    lat.sort_unstable();
    let secs: f64 = rounds.iter().map(|r| r.measured.as_secs_f64()).sum();
    let rates: Vec<f64> = rounds
        .iter()
        .map(|r| r.latencies_us.len() as f64 / r.measured.as_secs_f64().max(1e-9))
        .collect();
    Row {
        target: target.to_string(),
        clients,
        rounds: rounds.len(),
        puts: lat.len() as u64,
        puts_per_s: lat.len() as f64 / secs.max(1e-9),
        round_min_per_s: rates.iter().copied().fold(f64::INFINITY, f64::min),
        round_max_per_s: rates.iter().copied().fold(0.0, f64::max),
        p50_ms: percentile_ms(&lat, 0.50),
        p99_ms: percentile_ms(&lat, 0.99),
        p999_ms: percentile_ms(&lat, 0.999),
        cpu_us_per_put: rounds
            .iter()
            .map(|r| r.cpu)
            .sum::<Option<Duration>>()
            .filter(|_| !lat.is_empty())
            .map(|cpu| cpu.as_secs_f64() * 1e6 / lat.len() as f64),
        errors: rounds.iter().map(|r| r.errors).sum(),
        first_error: rounds.iter().find_map(|r| r.first_error.clone()),
    }
}

/// Nearest-rank percentile of sorted microsecond samples, in milliseconds (NaN when empty).
pub fn percentile_ms(sorted_us: &[u32], p: f64) -> f64 {
    if sorted_us.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted_us.len() as f64).ceil() as usize;
    let i = rank.clamp(1, sorted_us.len()) - 1;
    f64::from(sorted_us[i]) / 1000.0
}

fn thousands(x: f64) -> String {
    let n = x.round() as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// The table, then one ratio line per concurrency level where both targets ran.
pub fn render(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<8} {:>7} {:>9} {:>19} {:>8} {:>8} {:>8} {:>11} {:>7}\n",
        "target",
        "clients",
        "puts/s",
        "rounds min..max",
        "p50 ms",
        "p99 ms",
        "p999 ms",
        "cpu µs/put",
        "errors"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<8} {:>7} {:>9} {:>19} {:>8.2} {:>8.2} {:>8.2} {:>11} {:>7}\n",
            r.target,
            r.clients,
            thousands(r.puts_per_s),
            format!(
                "{}..{}",
                thousands(r.round_min_per_s),
                thousands(r.round_max_per_s)
            ),
            r.p50_ms,
            r.p99_ms,
            r.p999_ms,
            r.cpu_us_per_put.map_or("-".into(), |c| format!("{c:.0}")),
            r.errors
        ));
    }
    for (clients, f, e) in ratios(rows) {
        out.push_str(&format!(
            "ratio fedraft/etcd at {clients:>2} clients: puts/s x{:.2}, p99 x{:.2} (below 1 = fedraft faster)\n",
            f.puts_per_s / e.puts_per_s.max(1e-9),
            f.p99_ms / e.p99_ms.max(1e-9),
        ));
        if let (Some(fc), Some(ec)) = (f.cpu_us_per_put, e.cpu_us_per_put) {
            out.push_str(&format!(
                "  server CPU per put at {clients:>2} clients: fedraft {fc:.0} µs, etcd {ec:.0} µs (x{:.2})\n",
                fc / ec.max(1e-9)
            ));
        }
    }
    for r in rows.iter().filter(|r| r.errors > 0) {
        if let Some(e) = &r.first_error {
            out.push_str(&format!(
                "first error of {} at {} clients: {e}\n",
                r.target, r.clients
            ));
        }
    }
    out
}

/// (clients, fedraft row, etcd row) for every level both ran.
pub fn ratios(rows: &[Row]) -> Vec<(usize, &Row, &Row)> {
    rows.iter()
        .filter(|r| r.target == "fedraft")
        .filter_map(|f| {
            rows.iter()
                .find(|e| e.target == "etcd" && e.clients == f.clients)
                .map(|e| (f.clients, f, e))
        })
        .collect()
}

/// Busy cores of the whole machine over `over` (from /proc/stat; None where unavailable).
pub async fn busy_cores(over: Duration) -> Option<f64> {
    fn sample() -> Option<(u64, u64)> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        let line = text.lines().next()?;
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        let total: u64 = v.iter().sum();
        // idle and iowait are fields 4 and 5.
        let idle = v.get(3)? + v.get(4)?;
        Some((total - idle, total))
    }
    let (b0, t0) = sample()?;
    tokio::time::sleep(over).await;
    let (b1, t1) = sample()?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    (t1 > t0).then(|| cpus * (b1 - b0) as f64 / (t1 - t0) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let us: Vec<u32> = (1..=1000).map(|i| i * 1000).collect();
        assert_eq!(percentile_ms(&us, 0.50), 500.0);
        assert_eq!(percentile_ms(&us, 0.99), 990.0);
        assert_eq!(percentile_ms(&us, 0.999), 999.0);
        assert_eq!(percentile_ms(&[7000], 0.999), 7.0);
        assert!(percentile_ms(&[], 0.5).is_nan());
    }

    #[test]
    fn rows_merge_rounds_and_ratios_pair_levels() {
        let round = |n: u32, lat_us: u32| Round {
            latencies_us: vec![lat_us; n as usize],
            errors: 0,
            first_error: None,
            measured: Duration::from_secs(1),
            cpu: Some(Duration::from_millis(n as u64)),
        };
        let mut r = Results::default();
        r.add("fedraft", 64, round(300, 2000));
        r.add("etcd", 64, round(100, 4000));
        r.add("fedraft", 64, round(100, 2000));
        r.add("etcd", 64, round(100, 4000));
        let rows = r.rows();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].target, "fedraft");
        assert_eq!(rows[0].puts_per_s, 200.0);
        assert_eq!(
            (rows[0].round_min_per_s, rows[0].round_max_per_s),
            (100.0, 300.0)
        );
        let ratios = ratios(&rows);
        assert_eq!(ratios.len(), 1);
        assert_eq!(ratios[0].1.puts_per_s / ratios[0].2.puts_per_s, 2.0);
        let text = render(&rows);
        assert!(text.contains("puts/s x2.00, p99 x0.50"), "{text}");
        // 400 ms of CPU over 400 puts; 200 ms over 200.
        assert_eq!(rows[0].cpu_us_per_put, Some(1000.0));
        assert!(
            text.contains("fedraft 1000 µs, etcd 1000 µs (x1.00)"),
            "{text}"
        );
    }
}
