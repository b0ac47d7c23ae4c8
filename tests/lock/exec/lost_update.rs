//! The reason `exec` exists: holders do a read-modify-write of a counter while another
//! task keeps deleting the lock key, so a holder's lock may go, and another holder take
//! it, between its read and its write. Written through `exec`, the counter equals the
//! writes Redis accepted; written with plain commands, updates are lost.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::{self, join_within, raw, RedisServer};
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redismutex::{Error, RwMutex};

const HOLDERS: usize = 4;
const SECTIONS: usize = 25;
/// Between a holder's read and its write: room for the lock to go and another to take it.
const GAP: Duration = Duration::from_millis(5);
/// How often the lock key is deleted.
const CHAOS_EVERY: Duration = Duration::from_millis(10);

#[derive(Debug, Default)]
struct Outcome {
    /// Writes that went through: accepted by `exec`, or sent plain.
    written: AtomicU64,
    /// Writes `exec` refused (the lock was not the holder's any more).
    refused: AtomicU64,
}

/// Runs the holders and the deleter; the counter at the end and what the holders saw.
async fn run(through_exec: bool) -> (i64, Outcome) {
    let server = RedisServer::start();
    let conn = server.conn().await;
    // A TTL long enough that no refresh notices the deletions: the token stays quiet.
    let mx = common::mutex(&conn, "counter-lock", Duration::from_secs(30));
    let outcome = Arc::new(Outcome::default());
    let done = Arc::new(AtomicBool::new(false));
    let deleter = {
        let (conn, done) = (conn.clone(), Arc::clone(&done));
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                tokio::time::sleep(CHAOS_EVERY).await;
                let _: () = raw::cmd(&conn, "DEL", &["counter-lock"]).await;
            }
        })
    };
    let mut holders = tokio::task::JoinSet::new();
    for _ in 0..HOLDERS {
        let (mx, conn, outcome) = (mx.clone(), conn.clone(), Arc::clone(&outcome));
        holders.spawn(holder(mx, conn, outcome, through_exec));
    }
    join_within(&mut holders, Duration::from_secs(60), "a holder stalled").await;
    done.store(true, Ordering::Relaxed);
    deleter.await.unwrap();
    let counter: Option<i64> = conn.clone().get("counter").await.unwrap();
    let outcome = Arc::into_inner(outcome).unwrap();
    (counter.unwrap_or(0), outcome)
}

async fn holder(
    mx: RwMutex<MultiplexedConnection>,
    mut conn: MultiplexedConnection,
    outcome: Arc<Outcome>,
    through_exec: bool,
) {
    for _ in 0..SECTIONS {
        // Polls every millisecond, so a deleted lock is taken again at once.
        let guard = loop {
            if let Some(guard) = mx.try_write().await.unwrap() {
                break guard;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        let seen: Option<i64> = conn.get("counter").await.unwrap();
        tokio::time::sleep(GAP).await;
        let next = seen.unwrap_or(0) + 1;
        if through_exec {
            let mut pipe = redis::pipe();
            pipe.set("counter", next).ignore();
            match guard.exec::<()>(&pipe).await {
                Ok(()) => outcome.written.fetch_add(1, Ordering::Relaxed),
                Err(Error::NotHeld { .. }) => outcome.refused.fetch_add(1, Ordering::Relaxed),
                Err(other) => panic!("{other}"),
            };
        } else if !guard.is_cancelled() {
            let _: () = conn.set("counter", next).await.unwrap();
            outcome.written.fetch_add(1, Ordering::Relaxed);
        }
        let _ = guard.unlock().await;
    }
}

#[tokio::test]
async fn through_exec_the_counter_equals_the_accepted_writes() {
    let (counter, outcome) = run(true).await;
    let (written, refused) = (outcome.written.into_inner(), outcome.refused.into_inner());
    println!("exec: {written} accepted, {refused} refused, counter {counter}");
    assert!(refused > 0, "no write was refused: the test proved nothing");
    assert!(
        written > 0,
        "no write was accepted: the test proved nothing"
    );
    assert_eq!(
        counter, written as i64,
        "an accepted write was lost ({refused} refused)"
    );
}

#[tokio::test]
async fn with_plain_writes_updates_are_lost() {
    let (counter, outcome) = run(false).await;
    let written = outcome.written.into_inner();
    println!("plain: {written} written, counter {counter}");
    assert!(
        counter < written as i64,
        "{written} plain writes, counter {counter}: none was lost"
    );
}
