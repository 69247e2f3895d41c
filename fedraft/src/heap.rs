//! The Rust heap as jemalloc counts it, for `/metrics`: what is allocated and what it keeps
//! resident. Beside the process's RSS these tell what fedraft holds from what the allocator
//! keeps around, and with the raft log's and RocksDB's gauges what grows per object from what
//! is a bounded cache.
//!
//! Must not: change the allocator's behaviour (it only reads statistics), or fail a scrape: a
//! statistic jemalloc cannot give is left out.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use tikv_jemalloc_ctl::{epoch, stats};

/// Reads jemalloc's statistics when scraped.
#[derive(Debug)]
pub struct HeapCollector;

impl Collector for HeapCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // jemalloc caches its statistics; advancing the epoch refreshes them.
        if epoch::advance().is_err() {
            return Ok(());
        }
        let gauges = [
            (
                "fedraft_heap_allocated_bytes",
                "Bytes of the Rust heap allocated and not yet freed (jemalloc)",
                stats::allocated::read().ok(),
            ),
            (
                "fedraft_heap_resident_bytes",
                "Bytes of physical memory jemalloc holds: allocated, its metadata and pages freed \
                 but not yet returned",
                stats::resident::read().ok(),
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(value) = value {
                fedraft_raft::encode_gauge(&mut encoder, name, help, value as u64)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrape_counts_what_is_held() {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(HeapCollector));
        let held = vec![1u8; 8 << 20];
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let value = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<u64>().ok())
        };
        let allocated = value("fedraft_heap_allocated_bytes").unwrap();
        assert!(allocated >= held.len() as u64, "{text}");
        assert!(
            value("fedraft_heap_resident_bytes").unwrap() >= allocated,
            "{text}"
        );
        drop(held);
    }
}
