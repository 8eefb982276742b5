//! The health monitor's pass at 10k and 100k nodes, and the ingest of a
//! whole cluster, through the engine's public API.
//!
//! - `health_pass/quiet`: a whole tick (every loop due) over nodes that
//!   nothing happens to (the grace period is out of reach and no heartbeat
//!   arrives): the floor of a pass.
//! - `health_pass/healthy`: the monitor pass alone (the `health_monitor`
//!   phase, timed with the clock lent to the engine) while half the nodes
//!   renew their Lease before each pass, as 10 s renewals and a 5 s period
//!   make them: the steady state of a large healthy cluster.
//! - `health_pass/zone_down`: the same with one zone of three silent for
//!   longer than the grace period: its nodes are Unknown, queued or tainted,
//!   the zone fully disrupted, the others renewing.
//! - `ingest/full_cluster`: the first tick of an engine handed a whole
//!   cluster (10k nodes and their Leases, 300k pods), as at startup or after
//!   a restart; the observations are made outside the measured time.

use std::hint::black_box;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use nodewarden_engine::Engine;
use nodewarden_model::{ControllerConfig, Timestamp};

mod common;

use common::{PERIOD, Renewing, cluster_state, quiet_cluster};

fn quiet(c: &mut Criterion) {
    let mut group = c.benchmark_group("health_pass/quiet");
    group.sample_size(50);
    for nodes in [10_000usize, 100_000] {
        let mut engine = quiet_cluster(nodes);
        let mut now = Timestamp::EPOCH;
        let mut writes = 0;
        group.bench_with_input(BenchmarkId::from_parameter(nodes), &nodes, |b, _| {
            b.iter(|| {
                now += PERIOD;
                writes += engine.tick(black_box(now)).len();
            })
        });
        assert_eq!(writes, 0, "healthy nodes must cause no writes");
        let zones = engine.zones();
        assert!(zones.iter().all(|z| z.not_ready == 0 && z.size > 0), "{zones:?}");
    }
    group.finish();
}

fn renewing(c: &mut Criterion) {
    for (group_name, down) in [("health_pass/healthy", false), ("health_pass/zone_down", true)] {
        let mut group = c.benchmark_group(group_name);
        group.sample_size(30);
        for nodes in [10_000usize, 100_000] {
            let mut r = Renewing::new(nodes, down);
            group.bench_with_input(BenchmarkId::from_parameter(nodes), &nodes, |b, _| {
                b.iter_custom(|iters| (0..iters).map(|_| r.pass()).sum())
            });
            let zones = r.engine.zones();
            let down_zones = zones.iter().filter(|z| z.not_ready == z.size).count();
            assert_eq!(down_zones, usize::from(down), "{zones:?}");
        }
        group.finish();
    }
}

fn ingest(c: &mut Criterion) {
    let mut group = c.benchmark_group("ingest");
    group.sample_size(10);
    let (nodes, pods_per_node) = (10_000usize, 30usize);
    group.bench_function(BenchmarkId::new("full_cluster", format!("{nodes}n-{}p", nodes * pods_per_node)), |b| {
        b.iter_batched(
            || cluster_state(nodes, 3, pods_per_node),
            |state| {
                let mut engine = Engine::new(ControllerConfig::default(), Timestamp::EPOCH).expect("valid config");
                for o in state {
                    engine.observe(o);
                }
                black_box(engine.tick(Timestamp::EPOCH).len());
                engine
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, quiet, renewing, ingest);
criterion_main!(benches);
