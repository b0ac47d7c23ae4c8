//! Feature `metrics` as an application installs it: one global recorder, a multi-thread
//! runtime, guards taken, refreshed and dropped on other worker threads than the
//! refresher's. The gauges still come back to 0, and every lock is timed once. (A global
//! recorder is one per process: this file holds one test.)
#![cfg(feature = "metrics")]

mod common;

use std::time::Duration;

use common::either::Either;
use common::recorded::Recorded;
use common::{RedisServer, LIVENESS};
use metrics_util::debugging::DebuggingRecorder;
use redismutex::{RwMutex, Semaphore};

const TASKS: usize = 8;
const CYCLES: usize = 25;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_global_recorder_sees_every_lock_and_the_gauges_return_to_0() {
    let recorder = DebuggingRecorder::new();
    let mut recorded = Recorded::of(&recorder);
    recorder
        .install()
        .expect("the only recorder of this test binary");
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "global")
        .ttl(Duration::from_millis(200))
        .name_label(true)
        .build()
        .unwrap();
    let sem = Semaphore::builder(conn, "global-sem", 2)
        .ttl(Duration::from_millis(200))
        .build()
        .unwrap();

    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let (mx, sem) = (mx.clone(), sem.clone());
        tasks.spawn(async move {
            for cycle in 0..CYCLES {
                let key = format!("k{}", cycle % 3);
                let guard = if task % 2 == 0 {
                    Either::from(mx.write().key(key).await.unwrap())
                } else {
                    Either::from(mx.read().key(key).await.unwrap())
                };
                let permit = sem.acquire().await.unwrap();
                // Some holds outlast a renewal (ttl/2 = 100 ms), on whichever thread.
                if cycle % 8 == 0 {
                    tokio::time::sleep(Duration::from_millis(130)).await;
                }
                drop(permit);
                // Given to another task to drop, maybe on another worker thread.
                tokio::spawn(async move { drop(guard) }).await.unwrap();
            }
        });
    }
    common::join_within(&mut tasks, LIVENESS * 6, "every task's cycles").await;

    let total = TASKS * CYCLES;
    let name = ("name", "global");
    let acquired = |kind| [("kind", kind), ("outcome", "acquired"), name];
    let written = recorded.histogram("redismutex_acquire_duration_seconds", &acquired("write"));
    let read = recorded.histogram("redismutex_acquire_duration_seconds", &acquired("read"));
    assert_eq!(written.len() + read.len(), total);
    let mut held = |kind| recorded_len(&mut recorded, kind, name);
    assert_eq!(held("write") + held("read"), total, "every lock timed once");
    let permits = recorded.histogram("redismutex_held_duration_seconds", &[("kind", "permit")]);
    assert_eq!(permits.len(), total);
    assert!(recorded.counter("redismutex_refresh_total", &[("outcome", "ok"), name]) >= 1);
    assert_eq!(recorded.gauge_total("redismutex_held"), 0.0);
    assert_eq!(recorded.gauge_total("redismutex_waiting"), 0.0);
}

/// How many `kind` locks of the mutex named by `name` were timed as held.
fn recorded_len(recorded: &mut Recorded, kind: &str, name: (&str, &str)) -> usize {
    let labels = [("kind", kind), name];
    recorded
        .histogram("redismutex_held_duration_seconds", &labels)
        .len()
}
