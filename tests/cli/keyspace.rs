//! `lock --keyspace-events`: checked first (a server with keyspace notifications off
//! fails the run with exit code 69, naming it and what to set), and with them on, a Go
//! holder's silent `DEL` ends the wait at once.
#![cfg(feature = "cli")]

use std::time::{Duration, Instant};

use crate::common::cli_run::{self, finish};
use crate::common::go_peer::GoPeer;
use crate::common::raw::{self, subscribers};
use crate::common::{eventually, RedisServer};

/// A server with `notify-keyspace-events` set to `flags` (never the default).
async fn server(flags: &str) -> RedisServer {
    let server = RedisServer::start();
    let conn = server.conn().await;
    raw::cmd::<()>(&conn, "CONFIG", &["SET", "notify-keyspace-events", flags]).await;
    server
}

#[tokio::test]
async fn with_keyspace_events_off_the_run_fails_naming_the_server_and_what_to_set() {
    let server = server("").await;
    let run = finish(cli_run::spawn(
        &[&server.url()],
        &["lock", "--keyspace-events", "jobs", "--", "true"],
    ))
    .await;
    assert_eq!(run.code, Some(69), "{run:?}");
    assert!(run.stderr.contains(&server.port().to_string()), "{run:?}");
    assert!(
        run.stderr.contains("CONFIG SET notify-keyspace-events Kgx"),
        "{run:?}"
    );
    // Without the flag the same run goes ahead.
    let run = finish(cli_run::spawn(
        &[&server.url()],
        &["lock", "jobs", "--", "true"],
    ))
    .await;
    assert_eq!(run.code, Some(0), "{run:?}");
}

/// The wait behind a Go holder that releases 1 s after the run subscribed ends within
/// 500 ms of its `DEL`: neither the fallback timer (5 s with a 10 s TTL) nor the probe
/// of a lock never heard from (at 0.75 s, then 2.25 s) would.
#[tokio::test]
async fn with_keyspace_events_on_a_go_holders_del_ends_the_wait_at_once() {
    let server = server("Kgx").await;
    let conn = server.conn().await;
    let go = GoPeer::new(conn.clone(), 60_000);
    let go_id = GoPeer::new_id();
    assert_eq!(go.write("jobs", &go_id, false).await, None);
    let child = cli_run::spawn(
        &[&server.url()],
        &[
            "lock",
            "--keyspace-events",
            "--ttl",
            "10s",
            "jobs",
            "--",
            "true",
        ],
    );
    assert!(
        eventually(|| async { subscribers(&conn, "__keyspace@0__:jobs").await == 1 }).await,
        "the run listens to the lock key's keyspace channel"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    go.unlock("jobs", &go_id).await;
    let released = Instant::now();
    let run = finish(child).await;
    let waited = released.elapsed();
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        waited < Duration::from_millis(500),
        "ended {waited:?} after the DEL"
    );
}
