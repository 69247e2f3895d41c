//! The fleet report's renderings, from samples given by hand.

use super::super::fleet_gauges::NodeMemory;
use super::*;
use std::time::Duration;

/// A report of a run with the bench's defaults but for its size.
fn report(clusters: u32, objects: u32) -> Report {
    let args = <FleetArgs as clap::FromArgMatches>::from_arg_matches(
        &<FleetArgs as clap::Args>::augment_args(clap::Command::new("t")).get_matches_from([
            "t".to_string(),
            "--clusters".into(),
            clusters.to_string(),
            "--objects".into(),
            objects.to_string(),
        ]),
    )
    .unwrap();
    Report::new(&args)
}

/// A sample of nodes whose heap and log cache hold the given MiB, RSS equal to the heap.
fn nodes_holding(nodes: &[(f64, f64)]) -> Resources {
    let mib = 1048576.0;
    Resources {
        nodes: nodes.iter().map(|n| (n.0, 0.0)).collect(),
        fleet: (0.0, 0.0),
        gauges: nodes
            .iter()
            .map(|&(heap, cache)| NodeGauges {
                memory: Some(NodeMemory {
                    heap: heap * mib,
                    log_cache: cache * mib,
                    rocksdb_caches: 0.0,
                    table_readers: 0.0,
                }),
                ..NodeGauges::default()
            })
            .collect(),
        data_bytes: 0,
        at_s: 0.0,
    }
}

#[test]
fn renderings_carry_every_error_and_the_curve() {
    let mut r = report(30, 10);
    r.curve = vec![(0.0, 0), (5.0, 4), (9.0, 10)];
    r.converged_s = 9.0;
    r.check("after convergence", 2, vec!["m0001: holds x".into()]);
    let s = Samples {
        writes: vec![Duration::from_millis(4), Duration::from_millis(9)],
        reads: vec![],
        errors: 3,
        retries: 1,
    };
    r.phase(Phase::Converge, &s);
    let text = r.render();
    assert!(text.contains("ERROR: 2 differences"), "{text}");
    assert!(
        text.contains("ERROR: converge: 3 API calls failed"),
        "{text}"
    );
    let j = r.to_json();
    assert_eq!(j["errors"].as_array().unwrap().len(), 2);
    assert_eq!(j["api"][0]["writeP99Ms"], 9.0);
    let pic = super::super::fleet_plot::svg(&r);
    assert!(
        pic.contains("<polyline") && pic.contains("50.0,310.0"),
        "{pic}"
    );
}

#[test]
fn memory_per_object_is_given_at_convergence_once_settled_and_after_the_steady_writes() {
    let mut r = report(3, 1024);
    // One node whose heap grows by 4 MiB to convergence and gives back 2 MiB once settled.
    let at = |heap_mib: f64, at_s: f64| Resources {
        nodes: vec![(heap_mib, 0.0)],
        fleet: (0.0, 0.0),
        gauges: vec![NodeGauges {
            memory: Some(NodeMemory {
                heap: heap_mib * 1048576.0,
                log_cache: 0.0,
                rocksdb_caches: 0.0,
                table_readers: 0.0,
            }),
            checkpoints: None,
            disk: None,
            leader: None,
        }],
        data_bytes: 0,
        at_s,
    };
    r.resources.push((Phase::Start, at(9.0, 0.0)));
    r.resources.push((Phase::Register, at(10.0, 1.0)));
    r.resources.push((Phase::Converge, at(14.0, 5.0)));
    r.resources.push((Phase::Settled, at(12.0, 35.0)));
    r.resources.push((Phase::Steady, at(11.0, 70.0)));
    let held = |p| r.memory_per_object(p).map(|g| g.held());
    assert_eq!(held(Phase::Converge), Some(4.0));
    assert_eq!(held(Phase::Settled), Some(2.0));
    assert_eq!(held(Phase::Steady), Some(1.0));
    let text = r.render();
    assert!(
        text.contains("node grown most, at convergence: 4.0 KiB per object held"),
        "{text}"
    );
    assert!(
        text.contains("node grown most, settled (30 s after convergence): 2.0 KiB"),
        "{text}"
    );
    let j = r.to_json();
    assert_eq!(j["memoryKiB"]["settledAfterS"], 30.0, "{j}");
    assert_eq!(j["memoryKiB"]["perObjectSettled"]["held"], 2.0, "{j}");
    assert_eq!(j["memoryKiB"]["perObjectAfterSteady"]["held"], 1.0, "{j}");
    assert!(
        text.contains("node grown most, after the steady writes: 1.0 KiB"),
        "{text}"
    );
}

#[test]
fn growth_per_object_counts_from_the_spread_of_ownership_on_the_node_grown_most() {
    let mut r = report(3, 1024);
    // Node heaps in MiB. The leader (node 0) held every cluster's executors when registered
    // and handed two thirds over; node 1's heap grew most once ownership spread.
    let at = |heaps: [f64; 2]| nodes_holding(&heaps.map(|h| (h, 0.0)));
    r.resources.push((Phase::Start, at([1.0, 1.0])));
    r.resources.push((Phase::Register, at([9.0, 1.0])));
    r.resources.push((Phase::Owned, at([4.0, 4.0])));
    r.resources.push((Phase::Converge, at([7.0, 8.0])));
    let held = r.memory_per_object(Phase::Converge).map(|g| g.held());
    assert_eq!(held, Some(4.0), "node 1, from the owned sample");
    // Without the spread (leader-only executors), from registering.
    r.resources.retain(|(p, _)| *p != Phase::Owned);
    let held = r.memory_per_object(Phase::Converge).map(|g| g.held());
    assert_eq!(held, Some(7.0), "node 1, from the register sample");
}

#[test]
fn one_more_object_is_the_growth_between_the_settled_samples_around_the_last_phase() {
    let mut r = report(3, 4096);
    // Per node: (heap MiB, log cache MiB).
    let at = |nodes: [(f64, f64); 2]| nodes_holding(&nodes);
    r.resources
        .push((Phase::Start, at([(1.0, 0.0), (1.0, 0.0)])));
    r.resources
        .push((Phase::Register, at([(2.0, 0.0), (2.0, 0.0)])));
    r.resources
        .push((Phase::Converge, at([(30.0, 4.0), (30.0, 4.0)])));
    assert!(r.memory_per_further_object().is_none(), "no last phase yet");
    r.resources
        .push((Phase::BeforeMore, at([(40.0, 1.0), (41.0, 1.0)])));
    // 1,024 more objects of 256 manifest bytes each: node 0 holds 2 MiB more, node 1 grew its
    // heap by 4 MiB of which 3 are the log cache's.
    r.resources
        .push((Phase::More, at([(42.0, 1.0), (45.0, 4.0)])));
    r.more = Some((1024, 1024 * 256));
    let g = r.memory_per_further_object().unwrap();
    assert_eq!((g.held(), g.beyond_manifest()), (2.0, 1.75));
    let text = r.render();
    assert!(
        text.contains("one more object (1024 written onto the settled fleet, both samples settled), node grown most: 2.0 KiB per object held, 1.8 beyond"),
        "{text}"
    );
    let j = r.to_json();
    assert_eq!(
        j["memoryKiB"]["perFurtherObject"]["beyondManifest"], 1.75,
        "{j}"
    );
    assert_eq!(j["memoryKiB"]["furtherObjects"], 1024, "{j}");
}
