//! Feature `metrics`: the names, labels and values the crate records (the metrics guide,
//! `redismutex::guide::metrics`), read from a metrics-util `DebuggingRecorder` installed on
//! the test's thread (each test runs on a current-thread runtime, so the refresher's task
//! records there too). The gauges come back to 0 after every way a guard or a wait ends.
#![cfg(feature = "metrics")]

use std::future::IntoFuture;
use std::time::{Duration, SystemTime};

use crate::common::quorum::{Fault, Nodes};
use crate::common::recorded::Recorded;
use crate::common::{self, raw, RedisServer, LIVENESS};
use metrics_util::debugging::DebuggingRecorder;
use redismutex::{CancelReason, Error, RwMutex, Semaphore};
use tokio_util::sync::CancellationToken;

const ACQUIRE: &str = "redismutex_acquire_duration_seconds";
const HELD_DURATION: &str = "redismutex_held_duration_seconds";
const LOST: &str = "redismutex_lost_total";
const REFRESH: &str = "redismutex_refresh_total";
const HELD: &str = "redismutex_held";
const WAITING: &str = "redismutex_waiting";
const NODE_ERRORS: &str = "redismutex_node_errors_total";
const EXEC: &str = "redismutex_exec_total";

/// Polls `check` on what was recorded every 10 ms until it holds, for at most
/// [`LIVENESS`]; returns whether it did.
async fn until(recorded: &mut Recorded, mut check: impl FnMut(&mut Recorded) -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + LIVENESS;
    while tokio::time::Instant::now() < deadline {
        if check(recorded) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// Asserts that nothing is held or waited for, of any kind.
fn assert_idle(recorded: &mut Recorded, after: &str) {
    assert_eq!(recorded.gauge_total(HELD), 0.0, "held after {after}");
    assert_eq!(recorded.gauge_total(WAITING), 0.0, "waiting after {after}");
}

#[tokio::test]
async fn each_request_is_timed_under_its_kind_and_outcome_and_never_labelled_with_its_key() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let recorder = DebuggingRecorder::new();
    let _local = metrics::set_default_local_recorder(&recorder);
    let mut recorded = Recorded::of(&recorder);
    let mx = common::mutex(&conn, "timed", Duration::from_secs(2));
    let sem = Semaphore::builder(conn.clone(), "timed-sem", 1)
        .build()
        .unwrap();

    let write = mx.write().key("a").await.unwrap();
    assert_eq!(recorded.gauge(HELD, &[("kind", "write")]), 1.0);
    assert!(mx.try_write().key("a").await.unwrap().is_none());
    let timed_out = mx.write().key("a").timeout(Duration::from_millis(50)).await;
    assert!(matches!(timed_out, Err(Error::Timeout)), "{timed_out:?}");
    let parent = CancellationToken::new();
    parent.cancel();
    let cancelled = mx.read().key("a").parent(parent).await;
    assert!(matches!(cancelled, Err(Error::Cancelled)), "{cancelled:?}");
    let _: i64 = raw::cmd(&conn, "RPUSH", &["timed:list", "x"]).await;
    assert!(mx.read().key("list").await.is_err());
    write.unlock().await.unwrap();
    let read = mx.read().key("a").await.unwrap();
    let permit = sem.acquire().await.unwrap();
    let upgradable = mx.upgradable_read().key("a").await.unwrap();
    assert_eq!(recorded.gauge(HELD, &[("kind", "read")]), 1.0);
    assert_eq!(recorded.gauge(HELD, &[("kind", "permit")]), 1.0);
    assert_eq!(recorded.gauge(HELD, &[("kind", "upgradable")]), 1.0);
    drop((read, permit, upgradable));
    // A set: timed under `set`; each key held under its own mode.
    let blocker = mx.write().key("c").await.unwrap();
    assert!(mx.try_lock_all().write(["b", "c"]).await.unwrap().is_none());
    blocker.unlock().await.unwrap();
    let set = mx.lock_all().write(["b", "c"]).read(["d"]).await.unwrap();
    assert_eq!(recorded.gauge(HELD, &[("kind", "write")]), 2.0);
    assert_eq!(recorded.gauge(HELD, &[("kind", "read")]), 1.0);
    drop(set);

    for (kind, outcome, count) in [
        ("write", "acquired", 2),
        ("write", "busy", 1),
        ("write", "timeout", 1),
        ("read", "cancelled", 1),
        ("read", "error", 1),
        ("read", "acquired", 1),
        ("permit", "acquired", 1),
        ("upgradable", "acquired", 1),
        ("set", "busy", 1),
        ("set", "acquired", 1),
    ] {
        let samples = recorded.histogram(ACQUIRE, &[("kind", kind), ("outcome", outcome)]);
        assert_eq!(samples.len(), count, "{kind} {outcome}: {samples:?}");
        assert!(samples
            .iter()
            .all(|s| (0.0..LIVENESS.as_secs_f64()).contains(s)));
    }
    let timeout = recorded.histogram(ACQUIRE, &[("kind", "write"), ("outcome", "timeout")]);
    assert!(
        timeout[0] >= 0.05,
        "waited its 50 ms timeout: {timeout:?} s"
    );
    let held = recorded.histogram(HELD_DURATION, &[("kind", "write")]);
    assert_eq!(
        held.len(),
        4,
        "four write locks ended: one alone, the blocker, the set's two"
    );
    for (name, labels) in recorded.series() {
        assert!(name.starts_with("redismutex_"), "{name}");
        for (label, value) in &labels {
            assert!(
                ["kind", "outcome", "reason"].contains(&label.as_str()),
                "{name} {labels:?}"
            );
            assert!(
                !value.contains("timed"),
                "{name} {labels:?}: no key, no name"
            );
        }
    }
    assert_idle(&mut recorded, "every guard went");
}

#[tokio::test]
async fn the_name_label_is_opt_in() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let recorder = DebuggingRecorder::new();
    let _local = metrics::set_default_local_recorder(&recorder);
    let mut recorded = Recorded::of(&recorder);
    let named = RwMutex::builder(conn.clone(), "orders")
        .name_label(true)
        .build()
        .unwrap();
    named
        .write()
        .key("42")
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let labels = [
        ("kind", "write"),
        ("outcome", "acquired"),
        ("name", "orders"),
    ];
    assert_eq!(recorded.histogram(ACQUIRE, &labels).len(), 1);
    let held = [("kind", "write"), ("name", "orders")];
    assert_eq!(recorded.histogram(HELD_DURATION, &held).len(), 1);
    assert_eq!(recorded.gauge(HELD, &held), 0.0);
    assert!(
        recorded.series().iter().all(|(_, labels)| labels
            .iter()
            .all(|(label, value)| label != "name" || value == "orders")),
        "the name, never the lock key orders:42"
    );
}

#[tokio::test]
async fn the_held_gauge_returns_to_0_however_a_guard_ends() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let recorder = DebuggingRecorder::new();
    let _local = metrics::set_default_local_recorder(&recorder);
    let mut recorded = Recorded::of(&recorder);
    let mx = common::mutex(&conn, "ends", Duration::from_millis(400));
    let write = [("kind", "write")];

    let guard = mx.write().await.unwrap();
    guard.unlock().await.unwrap();
    assert_idle(&mut recorded, "unlock");

    drop(mx.write().await.unwrap());
    assert_idle(&mut recorded, "drop");

    let guard = mx.write().await.unwrap();
    guard.cancellation_token().cancel();
    assert!(
        until(&mut recorded, |recorded| recorded.gauge(HELD, &write)
            == 0.0)
        .await,
        "cancel"
    );
    drop(guard);
    assert_idle(&mut recorded, "cancel");

    let parent = CancellationToken::new();
    let guard = mx.write().parent(parent.clone()).await.unwrap();
    parent.cancel();
    assert!(
        until(&mut recorded, |recorded| recorded.gauge(HELD, &write)
            == 0.0)
        .await,
        "parent"
    );
    assert_eq!(guard.cancel_reason(), Some(CancelReason::ParentCancelled));
    drop(guard);

    let guard = mx.write().await.unwrap();
    let _: i64 = raw::cmd(&conn, "DEL", &["ends"]).await;
    guard.cancelled().await;
    assert_eq!(guard.cancel_reason(), Some(CancelReason::Lost));
    assert_eq!(recorded.gauge(HELD, &write), 0.0, "lost, guard still alive");
    assert_eq!(
        recorded.counter(LOST, &[("kind", "write"), ("reason", "lost")]),
        1
    );
    drop(guard);

    let guard = mx.write().await.unwrap();
    server.pause();
    guard.cancelled().await;
    let expired = until(&mut recorded, |recorded| {
        recorded.gauge(HELD, &write) == 0.0
    })
    .await;
    server.resume();
    assert_eq!(guard.cancel_reason(), Some(CancelReason::Expired));
    assert!(expired, "expired while the server is frozen");
    let unanswered = recorded.counter(REFRESH, &[("outcome", "error")]);
    assert!(
        unanswered >= 1,
        "a renewal with no reply before the deadline"
    );
    assert_eq!(
        recorded.counter(LOST, &[("kind", "write"), ("reason", "expired")]),
        1
    );
    drop(guard);

    let holder = mx.clone();
    let panicked = tokio::spawn(async move {
        let _guard = holder.write().await.unwrap();
        panic!("the holding task panics");
    })
    .await;
    assert!(panicked.unwrap_err().is_panic());
    assert_idle(&mut recorded, "a panic of the holding task");

    // Every end was timed: unlock, drop, cancel, parent, lost, expired, panic.
    assert_eq!(recorded.histogram(HELD_DURATION, &write).len(), 7);
    assert!(recorded.counter(REFRESH, &[("outcome", "lost")]) >= 1);
}

#[tokio::test]
async fn the_waiting_gauge_returns_to_0_however_a_wait_ends() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let recorder = DebuggingRecorder::new();
    let _local = metrics::set_default_local_recorder(&recorder);
    let mut recorded = Recorded::of(&recorder);
    let mx = common::mutex(&conn, "waits", Duration::from_secs(2));
    let (write, read) = ([("kind", "write")], [("kind", "read")]);
    let holder = mx.write().await.unwrap();

    // Acquired after a wait.
    let waiter = tokio::spawn(mx.read().into_future());
    assert!(
        until(&mut recorded, |recorded| recorded.gauge(WAITING, &read)
            == 1.0)
        .await
    );
    holder.unlock().await.unwrap();
    let reader = waiter.await.unwrap().unwrap();
    assert_eq!(recorded.gauge(WAITING, &read), 0.0, "acquired");

    // Timeout, parent cancelled, future dropped, task aborted, task panicked, error.
    let timeout = mx.write().timeout(Duration::from_millis(100)).await;
    assert!(matches!(timeout, Err(Error::Timeout)));
    assert_eq!(recorded.gauge(WAITING, &write), 0.0, "timeout");

    let parent = CancellationToken::new();
    let waiter = tokio::spawn(mx.write().parent(parent.clone()).into_future());
    assert!(
        until(&mut recorded, |recorded| recorded.gauge(WAITING, &write)
            == 1.0)
        .await
    );
    parent.cancel();
    assert!(matches!(waiter.await.unwrap(), Err(Error::Cancelled)));
    assert_eq!(recorded.gauge(WAITING, &write), 0.0, "parent cancelled");

    let dropped = tokio::time::timeout(Duration::from_millis(100), mx.write().into_future());
    assert!(dropped.await.is_err());
    assert_eq!(recorded.gauge(WAITING, &write), 0.0, "future dropped");

    let waiter = tokio::spawn(mx.write().into_future());
    assert!(
        until(&mut recorded, |recorded| recorded.gauge(WAITING, &write)
            == 1.0)
        .await
    );
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    assert_eq!(recorded.gauge(WAITING, &write), 0.0, "task aborted");

    let waiting = mx.clone();
    let panicked = tokio::spawn(async move {
        tokio::select! {
            _ = waiting.write().into_future() => {}
            () = tokio::time::sleep(Duration::from_millis(100)) => panic!("the waiting task panics"),
        }
    })
    .await;
    assert!(panicked.unwrap_err().is_panic());
    assert_eq!(recorded.gauge(WAITING, &write), 0.0, "task panicked");

    let _: () = raw::cmd(&conn, "SET", &["waits:string", "x"]).await;
    assert!(mx.read().key("string").await.is_err());
    assert_eq!(recorded.gauge(WAITING, &read), 0.0, "error");

    drop(reader);
    assert_idle(&mut recorded, "every wait");
    let cancelled = recorded.histogram(ACQUIRE, &[("kind", "write"), ("outcome", "cancelled")]);
    assert_eq!(
        cancelled.len(),
        4,
        "parent, dropped, aborted, panicked: {cancelled:?}"
    );
}

#[tokio::test]
async fn renewals_are_counted_by_outcome_and_on_the_guard() {
    let mut server = RedisServer::start();
    let conn = server.conn().await;
    let recorder = DebuggingRecorder::new();
    let _local = metrics::set_default_local_recorder(&recorder);
    let mut recorded = Recorded::of(&recorder);
    let ttl = Duration::from_millis(200);
    let mx = common::mutex(&conn, "renewals", ttl);

    let before = SystemTime::now();
    let guard = mx.write().await.unwrap();
    assert!((before..=SystemTime::now()).contains(&guard.acquired_at()));
    assert_eq!(guard.refreshes(), 0, "nothing renewed yet");
    tokio::time::sleep(ttl * 3 + ttl / 4).await;
    let refreshes = guard.refreshes();
    assert!(
        (4..=7).contains(&refreshes),
        "every ttl/2 for 3.25 ttl: {refreshes}"
    );
    assert_eq!(recorded.counter(REFRESH, &[("outcome", "ok")]), refreshes);

    assert_eq!(recorded.counter(REFRESH, &[("outcome", "lost")]), 0);

    // The server goes: the renewals fail at once until the deadline passes.
    server.stop();
    guard.cancelled().await;
    assert_eq!(guard.cancel_reason(), Some(CancelReason::Expired));
    assert!(recorded.counter(REFRESH, &[("outcome", "error")]) >= 1);
    assert_eq!(guard.refreshes(), refreshes, "no renewal succeeded since");
    drop(guard);
    assert!(
        until(&mut recorded, |recorded| recorded.gauge_total(HELD) == 0.0).await,
        "expired"
    );
    assert_idle(&mut recorded, "expiry");
}

#[tokio::test]
async fn guarded_pipelines_are_counted_by_outcome_and_a_lost_lock_found_by_one_too() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let recorder = DebuggingRecorder::new();
    let _local = metrics::set_default_local_recorder(&recorder);
    let mut recorded = Recorded::of(&recorder);
    let mx = common::mutex(&conn, "execs", Duration::from_secs(30));
    let guard = mx.write().await.unwrap();
    let mut ok = redis::pipe();
    ok.set("data", 1).ignore();
    let mut failing = redis::pipe();
    failing.hset("data", "f", "v");
    let mut invalid = redis::pipe();
    invalid.cmd("MULTI");
    guard.exec::<()>(&ok).await.unwrap();
    guard.exec::<()>(&ok).await.unwrap();
    assert!(matches!(
        guard.exec::<()>(&failing).await,
        Err(Error::CommandFailed { .. })
    ));
    assert!(matches!(
        guard.exec::<()>(&invalid).await,
        Err(Error::InvalidPipeline { .. })
    ));
    let _: () = raw::cmd(&conn, "DEL", &["execs"]).await;
    assert!(matches!(
        guard.exec::<()>(&ok).await,
        Err(Error::NotHeld { .. })
    ));
    // Refused at once, without a request: not counted.
    assert!(matches!(
        guard.exec::<()>(&ok).await,
        Err(Error::NotHeld { .. })
    ));
    for (outcome, count) in [("ran", 2), ("failed", 1), ("error", 1), ("not_held", 1)] {
        assert_eq!(
            recorded.counter(EXEC, &[("outcome", outcome)]),
            count,
            "{outcome}"
        );
    }
    assert_eq!(
        recorded.counter(LOST, &[("kind", "write"), ("reason", "lost")]),
        1,
        "the loss exec found"
    );
    drop(guard);
    assert!(
        until(&mut recorded, |recorded| recorded.gauge_total(HELD) == 0.0).await,
        "lost"
    );
}

#[tokio::test]
async fn an_end_at_the_cap_on_holding_counts_as_max_hold() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let recorder = DebuggingRecorder::new();
    let _local = metrics::set_default_local_recorder(&recorder);
    let mut recorded = Recorded::of(&recorder);
    let mx = RwMutex::builder(conn.clone(), "capped")
        .ttl(Duration::from_millis(200))
        .max_hold(Duration::from_millis(300))
        .build()
        .unwrap();
    let guard = mx.write().await.unwrap();
    guard.cancelled().await;
    assert_eq!(guard.cancel_reason(), Some(CancelReason::MaxHold));
    assert_eq!(
        recorded.counter(LOST, &[("kind", "write"), ("reason", "max_hold")]),
        1
    );
    assert_eq!(
        recorded.counter(LOST, &[("kind", "write"), ("reason", "expired")]),
        0
    );
    drop(guard);
    assert!(
        until(&mut recorded, |recorded| recorded.gauge_total(HELD) == 0.0).await,
        "released"
    );
}

#[tokio::test]
async fn a_quorum_counts_the_errors_of_each_node_by_its_index() {
    let mut nodes = Nodes::start(3);
    let quorum = nodes.quorum().await;
    let recorder = DebuggingRecorder::new();
    let _local = metrics::set_default_local_recorder(&recorder);
    let mut recorded = Recorded::of(&recorder);
    let mx = RwMutex::builder(quorum, "nodes")
        .ttl(Duration::from_secs(1))
        .build()
        .unwrap();
    mx.write().await.unwrap().unlock().await.unwrap();
    assert_eq!(recorded.counter(NODE_ERRORS, &[("node", "2")]), 0);

    nodes.fault(Fault::Kill, [2]);
    for _ in 0..3 {
        mx.write().await.unwrap().unlock().await.unwrap();
    }
    assert!(
        until(&mut recorded, |recorded| recorded
            .counter(NODE_ERRORS, &[("node", "2")])
            >= 3)
        .await,
        "each write and unlock fails on node 2"
    );
    assert_eq!(recorded.counter(NODE_ERRORS, &[("node", "0")]), 0);
    assert_eq!(recorded.counter(NODE_ERRORS, &[("node", "1")]), 0);
    assert_idle(&mut recorded, "the quorum's locks");
}

#[tokio::test]
async fn describe_metrics_gives_each_metric_its_unit() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    redismutex::describe_metrics();
    let server = RedisServer::start();
    let conn = server.conn().await;
    common::mutex(&conn, "described", Duration::from_secs(1))
        .write()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let units: Vec<_> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, unit, text, _)| (key.key().name().to_owned(), unit, text.is_some()))
        .collect();
    let unit_of = |name: &str| {
        units
            .iter()
            .find(|(n, ..)| n == name)
            .map(|(_, unit, text)| (*unit, *text))
    };
    assert_eq!(unit_of(ACQUIRE), Some((Some(metrics::Unit::Seconds), true)));
    assert_eq!(
        unit_of(HELD_DURATION),
        Some((Some(metrics::Unit::Seconds), true))
    );
    assert_eq!(unit_of(HELD), Some((Some(metrics::Unit::Count), true)));
}

#[tokio::test]
async fn permits_downgrades_nested_guards_tries_and_refusals_leave_the_gauges_at_0() {
    let mut server = RedisServer::start();
    let conn = server.conn().await;
    let recorder = DebuggingRecorder::new();
    let _local = metrics::set_default_local_recorder(&recorder);
    let mut recorded = Recorded::of(&recorder);

    // Only tries: they are timed, and never counted as waiting.
    let mx = RwMutex::builder(conn.clone(), "kinds")
        .reentrant(true)
        .build()
        .unwrap();
    let held = mx.try_write().await.unwrap().unwrap();
    let busy = tokio::spawn(mx.try_read().into_future()).await.unwrap();
    assert!(busy.unwrap().is_none());
    assert!(recorded.series().iter().all(|(name, _)| name != WAITING));
    let busy = recorded.histogram(ACQUIRE, &[("kind", "read"), ("outcome", "busy")]);
    assert_eq!(busy.len(), 1);

    // Nested guards hold no lock of their own; a write inside a read is refused.
    let nested = mx.read().await.unwrap();
    assert_eq!(recorded.gauge(HELD, &[("kind", "write")]), 1.0);
    assert_eq!(
        recorded.gauge_total(HELD),
        1.0,
        "the nested read is not counted"
    );
    drop(nested);
    assert_eq!(recorded.gauge_total(HELD), 1.0);
    drop(held);
    assert_idle(&mut recorded, "the outer guard");
    let reader = mx.read().await.unwrap();
    assert!(matches!(mx.write().await, Err(Error::WouldDeadlock { .. })));
    drop(reader);
    let refused = recorded.histogram(ACQUIRE, &[("kind", "write"), ("outcome", "error")]);
    assert_eq!(refused.len(), 1, "WouldDeadlock");
    assert_idle(&mut recorded, "a refused nested write");

    // A downgraded lock stays `write` until it ends.
    let plain = common::mutex(&conn, "downgraded", Duration::from_secs(10));
    let reader = plain.write().await.unwrap().downgrade().await.unwrap();
    assert_eq!(recorded.gauge(HELD, &[("kind", "write")]), 1.0);
    assert_eq!(recorded.gauge(HELD, &[("kind", "read")]), 0.0);
    assert!(reader.unlock().await.unwrap());
    assert_idle(&mut recorded, "a downgraded lock's unlock");

    // An unlock that finds its lock taken over counts it lost.
    let guard = plain.write().await.unwrap();
    let _: () = raw::cmd(&conn, "SET", &["downgraded", "someone-else", "PX", "10000"]).await;
    assert!(!guard.unlock().await.unwrap());
    let lost = [("kind", "write"), ("reason", "lost")];
    assert_eq!(recorded.counter(LOST, &lost), 1, "found gone at the unlock");

    // Permits end as locks do: lost, cancelled, expired.
    let sem = Semaphore::builder(conn.clone(), "permits", 2)
        .ttl(Duration::from_millis(400))
        .build()
        .unwrap();
    let permit = [("kind", "permit")];
    let lost_permit = sem.acquire().await.unwrap();
    let _: i64 = raw::cmd(&conn, "ZREM", &["permits", lost_permit.id()]).await;
    lost_permit.cancelled().await;
    assert_eq!(lost_permit.cancel_reason(), Some(CancelReason::Lost));
    assert_eq!(recorded.gauge(HELD, &permit), 0.0, "a lost permit");
    let cancelled = sem.acquire().await.unwrap();
    cancelled.cancellation_token().cancel();
    assert!(
        until(&mut recorded, |recorded| recorded.gauge(HELD, &permit)
            == 0.0)
        .await
    );
    let expiring = sem.acquire().await.unwrap();
    server.stop();
    expiring.cancelled().await;
    assert_eq!(expiring.cancel_reason(), Some(CancelReason::Expired));
    assert!(
        until(&mut recorded, |recorded| recorded.gauge(HELD, &permit)
            == 0.0)
        .await
    );
    drop((lost_permit, cancelled, expiring));
    for reason in ["lost", "expired"] {
        let labels = [("kind", "permit"), ("reason", reason)];
        assert_eq!(recorded.counter(LOST, &labels), 1, "{reason}");
    }
    assert_eq!(recorded.histogram(HELD_DURATION, &permit).len(), 3);
    assert_idle(&mut recorded, "every permit");
}

const CLOCK_JUMPS: &str = "redismutex_server_clock_jumps_total";

/// The server's clock moved under a held guard (TTL 1 s, renewed every 500 ms): 3 s back,
/// then 3 s forward. The renewal after the jump back counts it under `back` and the guard
/// holds on (its key only lives longer); the renewal after the jump forward counts it
/// under `forward` and finds the key expired early, so the token fires `ClockJump`,
/// counted as a loss of that reason.
#[tokio::test]
async fn a_server_clock_jump_is_counted_and_a_lock_it_expired_fires_clock_jump() {
    let (server, clock) = crate::common::clock::server_on_a_clock(&[]);
    let conn = server.conn().await;
    let recorder = DebuggingRecorder::new();
    let _local = metrics::set_default_local_recorder(&recorder);
    let mut recorded = Recorded::of(&recorder);
    let mx = common::mutex(&conn, "clocked", Duration::from_secs(1));
    let guard = mx.write().await.unwrap();
    // The first renewal reads the server's clock; the next compares.
    tokio::time::sleep(Duration::from_millis(600)).await;
    clock.jump(-3000);
    let back = until(&mut recorded, |recorded| {
        recorded.counter(CLOCK_JUMPS, &[("direction", "back")]) == 1
    })
    .await;
    assert!(back, "the jump back counted");
    assert!(!guard.is_cancelled(), "{:?}", guard.cancel_reason());
    assert_eq!(
        recorded.counter(CLOCK_JUMPS, &[("direction", "forward")]),
        0
    );

    clock.jump(3000);
    let fired = tokio::time::timeout(LIVENESS, guard.cancelled()).await;
    assert!(fired.is_ok(), "the token fired");
    assert_eq!(guard.cancel_reason(), Some(CancelReason::ClockJump));
    assert_eq!(
        recorded.counter(CLOCK_JUMPS, &[("direction", "forward")]),
        1
    );
    assert_eq!(
        recorded.counter(LOST, &[("kind", "write"), ("reason", "clock_jump")]),
        1
    );
    assert_eq!(
        recorded.counter(LOST, &[("kind", "write"), ("reason", "lost")]),
        0
    );
}

/// Leases: a detached lock leaves `redismutex_held` (and is not counted lost); its attach
/// is timed as a request of its kind and held again under that kind; a refused attach is
/// an error.
#[tokio::test]
async fn a_detached_lock_leaves_the_held_gauge_and_its_attach_is_timed_and_held() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let recorder = DebuggingRecorder::new();
    let _local = metrics::set_default_local_recorder(&recorder);
    let mut recorded = Recorded::of(&recorder);
    let mx = common::mutex(&conn, "leased", Duration::from_secs(2));

    let lease = mx.write().key("a").await.unwrap().detach();
    assert_idle(&mut recorded, "detach");
    let lost = recorded.counter(LOST, &[("kind", "write"), ("reason", "lost")]);
    assert_eq!(lost, 0, "a detached lock is not lost");
    let guard = mx.attach_write(&lease).await.unwrap();
    assert_eq!(recorded.gauge(HELD, &[("kind", "write")]), 1.0);
    let attached = recorded.histogram(ACQUIRE, &[("kind", "write"), ("outcome", "acquired")]);
    assert_eq!(
        attached.len(),
        2,
        "the acquire and the attach: {attached:?}"
    );
    assert!(mx.attach_write(&lease).await.is_err());
    let refused = recorded.histogram(ACQUIRE, &[("kind", "write"), ("outcome", "error")]);
    assert_eq!(refused.len(), 1);
    guard.unlock().await.unwrap();
    assert_idle(&mut recorded, "unlock");
}
