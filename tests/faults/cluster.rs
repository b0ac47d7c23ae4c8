//! The fault suite's worker processes against a Redis Cluster (feature `cluster`): four
//! workers (TTL 2 s, 30 % readers, eight keys spread over the three masters) over
//! `ClusterConnection`, checked by the referee, while masters are killed (their replica
//! takes over, then they come back as replicas) and frozen for less than a failover
//! takes, and a worker is killed and replaced. Exclusion and fencing hold throughout (no
//! overlap, no lost update, no stale fenced write accepted, no key left), and work goes
//! on after the last failover. Workers are not frozen here: a worker frozen between its
//! check and its leave may overlap the next holder (the soak tells those apart).
//! (`cargo test --features cluster --test faults cluster:: -- --nocapture` prints the
//! report.)
#![cfg(feature = "cluster")]

use std::time::{Duration, Instant};

use crate::common::cluster::slot;
use crate::common::events::now_us;
use crate::common::record::FaultKind;
use crate::harness::cluster_fleet::{ClusterFleet, HELD_TIMEOUT, MUTEX};
use crate::harness::fault_checks::{assert_safe, SERIAL};
use crate::harness::fleet::{Fleet, Spec};

const TTL_MS: u64 = 2_000;
const KEYS: u64 = 8;

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_stay_exclusive_across_master_kills_and_freezes() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let mut fleet = ClusterFleet::start(TTL_MS).await;
    println!(
        "the cluster and the referee started in {:?}",
        started.elapsed()
    );
    held_is_bounded_by_a_frozen_master(&fleet).await;
    let spec = Spec {
        keys: KEYS,
        read_pct: 30,
        work_ms: (5, 20),
        ..Spec::default()
    };
    for worker in ["w1", "w2", "w3", "w4"] {
        fleet.spawn(worker, &spec).await;
    }
    tokio::time::sleep(ms(2000)).await;
    fleet.freeze_master(ms(400)).await;
    tokio::time::sleep(ms(1000)).await;
    fleet.kill_master().await;
    tokio::time::sleep(ms(1500)).await;
    check_held(&fleet).await;
    fleet.crew.kill("w2").await;
    fleet.spawn("w5", &spec).await;
    tokio::time::sleep(ms(1500)).await;
    fleet.freeze_master(ms(300)).await;
    tokio::time::sleep(ms(1500)).await;
    fleet.kill_master().await;
    let last_failover = now_us();
    tokio::time::sleep(ms(3000)).await;
    let report = fleet.finish("cluster: masters killed and frozen").await;

    for fault in &fleet.crew.faults {
        let took = (fault.end_us - fault.start_us) / 1000;
        println!("   {:?} {:?}: {took} ms", fault.kind, fault.target);
    }
    assert_safe(&report);
    let count = |kind| fleet.crew.faults.iter().filter(|f| f.kind == kind).count();
    assert_eq!(count(FaultKind::KillMaster), 2);
    assert_eq!(count(FaultKind::FreezeMaster), 2);
    assert_eq!(count(FaultKind::KillWorker), 1);
    assert!(
        report.referee.sections >= 200,
        "too little work: {} sections",
        report.referee.sections
    );
    let after = fleet
        .crew
        .log
        .count(|e| e.is("RELEASED") && e.us > last_failover && e.last() == "held=true");
    assert!(
        after >= 20,
        "{after} sections released after the last failover"
    );
}

/// Before any worker: with the master of the one lock key frozen, `held` gives up on it
/// within its bound.
async fn held_is_bounded_by_a_frozen_master(fleet: &ClusterFleet) {
    let port = fleet
        .cluster
        .master_of_slot(slot(&format!("{MUTEX}:{{k0}}")));
    fleet.cluster.pause(port);
    let started = Instant::now();
    let held = fleet.held().await;
    let took = started.elapsed();
    fleet.cluster.resume(port);
    assert!(held.is_empty(), "{held:?}");
    assert!(took < HELD_TIMEOUT + ms(300), "held() took {took:?}");
}

/// `held` reads lock keys of the workers' mutex, each expiring within a TTL.
async fn check_held(fleet: &ClusterFleet) {
    let held = fleet.held().await;
    println!("held: {held:?}");
    let keys: Vec<String> = (0..KEYS).map(|k| format!("{MUTEX}:{{k{k}}}")).collect();
    for lock in &held {
        assert!(keys.contains(&lock.key), "{lock:?}");
        assert!(
            lock.expiry_us + 2_000 >= lock.read_us
                && lock.expiry_us <= lock.read_us + (TTL_MS + 100) * 1000,
            "{lock:?}"
        );
    }
}
