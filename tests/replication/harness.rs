//! The Sentinel deployment the tests start (`tests/common/sentinel.rs`): it forms with
//! both replicas in sync, Sentinel replaces a killed or frozen primary, redis-rs's
//! Sentinel client follows, forced failovers run back to back, and a frozen replica holds
//! `WAIT` back. Prints how long the deployment took to start and each failover took.

use std::time::{Duration, Instant};

use crate::common;
use crate::common::sentinel::{Sentinels, State};
use redis::aio::MultiplexedConnection;

/// `WAIT <replicas> <timeout_ms>` on `conn`: how many replicas acknowledged the writes
/// before it.
async fn wait_acks(conn: &MultiplexedConnection, replicas: usize, timeout_ms: u64) -> usize {
    redis::cmd("WAIT")
        .arg(replicas)
        .arg(timeout_ms)
        .query_async(&mut conn.clone())
        .await
        .expect("WAIT")
}

/// `SET key value` on `conn`, as the server answered it.
async fn set(conn: &MultiplexedConnection, key: &str, value: &str) -> redis::RedisResult<()> {
    redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query_async(&mut conn.clone())
        .await
}

/// The port the server behind `conn` listens on, from `INFO server`.
async fn served_by(conn: &MultiplexedConnection) -> u16 {
    let info: String = common::raw::cmd(conn, "INFO", &["server"]).await;
    info.lines()
        .find_map(|line| line.strip_prefix("tcp_port:"))
        .expect("INFO server has tcp_port")
        .trim()
        .parse()
        .expect("a port")
}

/// Starts a deployment on a blocking thread, printing how long it took.
async fn start() -> Sentinels {
    let started = Instant::now();
    let deployment = tokio::task::spawn_blocking(Sentinels::start)
        .await
        .expect("the deployment started");
    println!("start-up: {:?}", started.elapsed());
    deployment
}

#[tokio::test(flavor = "multi_thread")]
async fn it_starts_with_both_replicas_in_sync() {
    let deployment = start().await;
    assert_eq!(deployment.primary(), 0);
    assert_eq!(deployment.replicas(), vec![1, 2]);
    assert_eq!(deployment.sentinel_urls().len(), 3);
    let conn = deployment.server(0).conn().await;
    set(&conn, "k", "v").await.unwrap();
    assert_eq!(wait_acks(&conn, 2, 1000).await, 2);
    for replica in [1, 2] {
        let conn = deployment.server(replica).conn().await;
        assert_eq!(common::raw::get(&conn, "k").await.as_deref(), Some("v"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_primary_is_replaced_and_the_sentinel_client_follows() {
    let mut deployment = start().await;
    let old = deployment.primary();
    let conn = deployment.server(old).conn().await;
    set(&conn, "k", "v").await.unwrap();
    assert_eq!(wait_acks(&conn, 2, 1000).await, 2);

    let killed = Instant::now();
    assert_eq!(deployment.kill_primary(), old);
    let new = deployment.failover().await;
    println!("failover after kill: {:?}", killed.elapsed());
    assert_ne!(new, old);
    assert_eq!(deployment.primary(), new);
    let err = set(&conn, "k", "w").await.unwrap_err();
    println!("a write on the killed primary's connection: {err}");
    let err = deployment
        .server(old)
        .client()
        .get_multiplexed_async_connection()
        .await;
    println!(
        "a new connection to the killed primary: {:?}",
        err.unwrap_err()
    );

    let new_conn = deployment.server(new).conn().await;
    assert_eq!(common::raw::get(&new_conn, "k").await.as_deref(), Some("v"));
    let mut client = deployment.sentinel_client();
    let followed = client
        .get_async_connection()
        .await
        .expect("Sentinel client");
    assert_eq!(served_by(&followed).await, deployment.server(new).port());
    set(&followed, "k", "w").await.unwrap();
    assert_eq!(wait_acks(&followed, 1, 1000).await, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn forced_failovers_run_back_to_back() {
    let mut deployment = start().await;
    let killed_at = Instant::now();
    let killed = deployment.kill_primary();
    deployment.failover().await;
    println!("failover after kill: {:?}", killed_at.elapsed());
    let restarted = Instant::now();
    deployment.restart_as_replica(killed).await;
    println!("restart as a replica: {:?}", restarted.elapsed());
    assert_eq!(deployment.state(killed), State::Running);

    for round in 0..5 {
        let old = deployment.primary();
        let forced = Instant::now();
        let new = deployment.fast_sentinel_failover().await;
        println!(
            "fast forced failover {round}: {old} -> {new} in {:?}",
            forced.elapsed()
        );
        assert_ne!(new, old);
        let conn = deployment.server(new).conn().await;
        set(&conn, "round", &round.to_string()).await.unwrap();
        assert_eq!(wait_acks(&conn, 2, 1000).await, 2);
        let demoted = deployment.server(old).conn().await;
        let err = set(&demoted, "round", "stale").await.unwrap_err();
        assert_eq!(err.code(), Some("READONLY"), "{err}");
    }
}

/// Writes 1, 2, 3, ... to `seq` on `conn` every 20 ms until a write fails; returns the
/// last value written and the error.
async fn write_until_refused(conn: MultiplexedConnection) -> (u64, redis::RedisError) {
    let mut written = 0;
    loop {
        match set(&conn, "seq", &(written + 1).to_string()).await {
            Ok(()) => written += 1,
            Err(err) => return (written, err),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forced_failover_leaves_the_old_primary_writable_until_sentinel_demotes_it() {
    let mut deployment = start().await;
    let old = deployment.primary();
    let writer = tokio::spawn(write_until_refused(deployment.server(old).conn().await));
    let forced = Instant::now();
    let new = deployment.sentinel_failover().await;
    println!(
        "forced failover {old} -> {new}, old one demoted, in {:?}",
        forced.elapsed()
    );
    let (written, err) = writer.await.unwrap();
    println!("a write on the demoted primary's connection: {err}");
    let conn = deployment.server(new).conn().await;
    let kept: u64 = common::raw::stored_token(&conn, "seq").await;
    println!("the old primary acknowledged {written} writes, the new one kept {kept}");
    assert!(
        kept < written,
        "no acknowledged write was lost: {kept} of {written}"
    );
    let demoted = deployment.server(old).conn().await;
    let err = set(&demoted, "seq", "stale").await.unwrap_err();
    assert_eq!(err.code(), Some("READONLY"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_frozen_primary_is_replaced_and_rejoins_as_a_replica() {
    let mut deployment = start().await;
    let conn = deployment.server(0).conn().await;
    let frozen = Instant::now();
    assert_eq!(deployment.freeze_primary(), 0);
    let new = deployment.failover().await;
    println!("failover after freeze: {:?}", frozen.elapsed());
    let thawed = Instant::now();
    deployment.thaw(0);
    let early = set(&conn, "k", "split").await;
    println!("a write on the thawed former primary at once: {early:?}");
    assert_eq!(deployment.settle().await, new);
    println!("thawed former primary rejoined in {:?}", thawed.elapsed());
    let err = set(&conn, "k", "late").await.unwrap_err();
    println!("a write on the thawed former primary after it rejoined: {err}");
    let demoted = deployment.server(0).conn().await;
    let err = set(&demoted, "k", "late").await.unwrap_err();
    assert_eq!(err.code(), Some("READONLY"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_frozen_replica_holds_wait_back() {
    let mut deployment = start().await;
    let conn = deployment.server(0).conn().await;
    deployment.freeze_replica(2);
    set(&conn, "k", "v").await.unwrap();
    let asked = Instant::now();
    assert_eq!(wait_acks(&conn, 2, 200).await, 1);
    let took = asked.elapsed();
    println!("WAIT 2 200 with a frozen replica: {took:?}");
    assert!(took < Duration::from_millis(1000), "WAIT took {took:?}");
    deployment.thaw(2);
    assert_eq!(wait_acks(&conn, 2, 1000).await, 2);
}
