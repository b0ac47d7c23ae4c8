//! The fault suite's worker processes against a primary under Sentinel (feature
//! `sentinel`): four workers (TTL 4 s, 30 % readers, two keys) over `SentinelConnection`
//! with `replicas(1)`, checked by the referee, while the primary is killed twice and
//! Sentinel fails over. Exclusion and fencing hold throughout (no overlap, no lost
//! update, no stale fenced write accepted, no key left), and work goes on after each
//! failover. (`cargo test --features sentinel --test faults sentinel:: -- --nocapture`
//! prints the report.)
#![cfg(feature = "sentinel")]

use std::time::Duration;

use crate::harness::fault_checks::{assert_safe, SERIAL};
use crate::harness::fleet::{Fleet, Spec};
use crate::harness::sentinel_fleet::SentinelFleet;

/// Long enough for a held lock to outlive a failover's usual 4 s without a renewal
/// answered: its renewals fail meanwhile and are retried until the validity ends.
const TTL_MS: u64 = 8_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_stay_exclusive_across_primary_kills() {
    let _serial = SERIAL.lock().await;
    let mut fleet = SentinelFleet::start(TTL_MS).await;
    let spec = Spec {
        keys: 2,
        read_pct: 30,
        work_ms: (5, 20),
        ..Spec::default()
    };
    for worker in ["w1", "w2", "w3", "w4"] {
        fleet.spawn(worker, &spec).await;
    }
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        fleet.kill_primary().await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let report = fleet.finish("sentinel: primary killed twice").await;
    assert_safe(&report);
    assert!(
        report.referee.sections >= 40,
        "too little work: {} sections",
        report.referee.sections
    );
}
