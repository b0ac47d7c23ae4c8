//! Held locks across Sentinel failovers (feature `sentinel`). In each round a mutex with
//! `replicas(1)` takes a burst of locks, then, with replication stopped (the replicas'
//! links dropped and kept from coming back, as when a primary fails before it has sent its
//! last writes), a mutex without it takes a burst too; the primary is killed and Sentinel
//! promotes a replica. An acknowledged lock is always on the new primary, and another
//! client never takes it while its guard holds it (0 overlaps), and while replication is
//! stopped an acknowledged try is refused (`NotReplicated`); the test counts how many plain
//! locks the failover lost, and how often another client then took one whose guard still
//! held it (the Sentinel guide, `redismutex::guide::sentinel`). After each failover every
//! key of both bursts is taken again (with and without `replicas(1)`): each token is
//! larger than the one minted on the key before the failover, though the new primary
//! never saw the plain burst's increments (tokens over a `SentinelConnection` are
//! floored at the server clock).
//!
//! CI runs 3 failovers; `SENTINEL_FAILOVERS=20 cargo test --release --features sentinel
//! --test replication failovers:: -- --nocapture` runs the long version.
//!
//! The frozen primary: in each round a `replicas(1)` burst is taken, the primary is
//! frozen until Sentinel has promoted a replica, then thawed, a master still until a
//! Sentinel demotes it (about 10 s). A client that still talks to it directly gets no
//! acknowledged lock there (`NotReplicated`: its replicas follow the new primary), while
//! a plain lock is taken there and, at the same time, by a client of the new primary:
//! counted. CI runs 1 round; `SENTINEL_FREEZES=20` the long version (about 6 minutes).
#![cfg(feature = "sentinel")]

use std::future::IntoFuture;
use std::time::Duration;

use crate::common::raw;
use crate::common::sentinel::Sentinels;
use futures_util::future::join_all;
use redis::aio::MultiplexedConnection;
use redismutex::{Error, RwMutex, SentinelConnection, WriteGuard};

/// Locks each mutex takes in a round, all at once, right before the kill.
const BURST: usize = 25;
/// Long enough that no held lock needs a renewal across a failover (4–15 s).
const TTL: Duration = Duration::from_secs(40);

fn failovers() -> usize {
    std::env::var("SENTINEL_FAILOVERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3)
}

fn freezes() -> usize {
    std::env::var("SENTINEL_FREEZES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// A mutex named `name` over `SentinelConnection`, whose writes wait for a replica's
/// acknowledgement when `acked`.
fn over_sentinel(deployment: &Sentinels, name: &str, acked: bool) -> RwMutex<SentinelConnection> {
    let conn = SentinelConnection::new(deployment.sentinel_client());
    let builder = RwMutex::builder(conn, name).ttl(TTL);
    let builder = if acked {
        builder.replicas(1, Duration::from_millis(300))
    } else {
        builder
    };
    builder.build().unwrap()
}

/// `BURST` write locks of `mx` on keys `<round>-<i>`, taken at once.
async fn burst(mx: &RwMutex<SentinelConnection>, round: usize) -> Vec<WriteGuard> {
    let taken = (0..BURST).map(|i| mx.write().key(format!("{round}-{i}")).into_future());
    join_all(taken)
        .await
        .into_iter()
        .map(|guard| guard.expect("taken before the kill"))
        .collect()
}

/// Takes and releases the locks `burst` takes, and waits until both replicas have
/// everything the primary has.
async fn warm(deployment: &Sentinels, mx: &RwMutex<SentinelConnection>, round: usize) {
    for guard in burst(mx, round).await {
        assert!(guard.unlock().await.unwrap());
    }
    let primary = deployment.server(deployment.primary()).conn().await;
    let acked: i64 = raw::cmd(&primary, "WAIT", &["2", "5000"]).await;
    assert_eq!(acked, 2, "both replicas have the warm-up");
}

/// How many of `guards` the primary behind `primary` still has, by id.
async fn kept(primary: &MultiplexedConnection, guards: &[WriteGuard]) -> usize {
    let mut kept = 0;
    for guard in guards {
        if raw::get(primary, guard.key()).await.as_deref() == Some(guard.id()) {
            kept += 1;
        }
    }
    kept
}

/// How many of `guards` (of the mutex `name`) another client takes while the guard
/// still holds it (each an overlap), and how many of those it takes with a token not
/// larger than the guard's (each a repeated token).
async fn taken_while_held(
    deployment: &Sentinels,
    name: &str,
    guards: &[WriteGuard],
) -> (usize, usize) {
    let other = over_sentinel(deployment, name, false);
    let (mut overlaps, mut repeated) = (0, 0);
    for guard in guards {
        let key = guard
            .key()
            .trim_start_matches(&format!("{name}:"))
            .to_owned();
        if let Some(taken) = other.try_write().key(key).await.unwrap() {
            if !guard.is_cancelled() {
                overlaps += 1;
            }
            if taken.fencing_token() <= guard.fencing_token() {
                repeated += 1;
            }
            drop(taken);
        }
    }
    (overlaps, repeated)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_locks_survive_every_failover_and_plain_ones_are_counted() {
    let mut deployment = Sentinels::start();
    let acked = over_sentinel(&deployment, "acked", true);
    let plain = over_sentinel(&deployment, "plain", false);
    // Each connects to the primary before the password below is set.
    for mx in [&acked, &plain] {
        assert!(mx
            .write()
            .key("warm")
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap());
    }
    let (mut acked_kept, mut plain_kept, mut overlaps, mut plain_overlaps) = (0, 0, 0, 0);
    let mut repeated = 0;
    let rounds = failovers();
    for round in 0..rounds {
        // The plain burst's keys are used once first, and the replicas have their fence
        // counters: a failover that loses the burst's increments brings them back older.
        warm(&deployment, &plain, round).await;
        let acked_guards = burst(&acked, round).await;
        // Replication stops: the replicas' links are dropped, and a password they do not
        // have keeps them from coming back (connections already open stay open).
        let old = deployment.server(deployment.primary()).conn().await;
        let _: () = raw::cmd(&old, "CONFIG", &["SET", "requirepass", "lag"]).await;
        let _: i64 = raw::cmd(&old, "CLIENT", &["KILL", "TYPE", "replica"]).await;
        let plain_guards = burst(&plain, round).await;
        // With replication stopped, an acknowledged request is refused rather than given
        // a lock the failover would lose.
        let refused = acked.try_write().key(format!("{round}-refused")).await;
        assert!(
            matches!(refused, Err(Error::NotReplicated { acked: 0, .. })),
            "{refused:?}"
        );
        let killed = deployment.kill_primary();
        let new = deployment.failover().await;
        let primary = deployment.server(new).conn().await;
        acked_kept += kept(&primary, &acked_guards).await;
        plain_kept += kept(&primary, &plain_guards).await;
        let (acked_taken, acked_repeated) =
            taken_while_held(&deployment, "acked", &acked_guards).await;
        let (plain_taken, plain_repeated) =
            taken_while_held(&deployment, "plain", &plain_guards).await;
        (overlaps, plain_overlaps) = (overlaps + acked_taken, plain_overlaps + plain_taken);
        repeated += acked_repeated + plain_repeated;
        let minted: Vec<(String, u64)> = acked_guards
            .iter()
            .chain(&plain_guards)
            .map(|guard| (guard.key().to_owned(), guard.fencing_token()))
            .collect();
        drop((acked_guards, plain_guards));
        deployment.restart_as_replica(killed).await;
        repeated += repeated_tokens(&deployment, &minted).await;
    }
    let total = rounds * BURST;
    println!(
        "{rounds} failovers (primary killed, replicas lagging for the plain burst), {BURST} \
         locks per mutex per round: replicas(1) kept {acked_kept}/{total}, overlaps \
         {overlaps}; plain kept {plain_kept}/{total}, taken by another client while held \
         {plain_overlaps}; tokens after a failover not above the key's last one before it \
         {repeated}"
    );
    assert_eq!(overlaps, 0, "another client took a held, acknowledged lock");
    assert_eq!(
        repeated, 0,
        "a token minted after a failover repeated or went below one minted before it"
    );
    assert_eq!(
        acked_kept, total,
        "an acknowledged lock was lost in a failover"
    );
}

/// Takes each lock key of `minted` again after a failover, alternately with and without
/// `replicas(1)`, and counts the tokens not larger than the one minted on that key before
/// the failover (which the new primary may never have seen: the plain burst was taken
/// while replication was stopped).
async fn repeated_tokens(deployment: &Sentinels, minted: &[(String, u64)]) -> usize {
    let mut repeated = 0;
    for (at, (lock_key, before)) in minted.iter().enumerate() {
        let (name, key) = lock_key.split_once(':').expect("<name>:<key>");
        let mx = over_sentinel(deployment, name, at % 2 == 0);
        let after = take_when_replicated(&mx, key).await;
        if after.fencing_token() <= *before {
            repeated += 1;
        }
    }
    repeated
}

/// The write lock on `key`, taken within 30 s: a mutex with `replicas(1)` is refused
/// until the replicas follow the new primary.
async fn take_when_replicated(mx: &RwMutex<SentinelConnection>, key: &str) -> WriteGuard {
    for _ in 0..300 {
        match mx.write().key(key).timeout(Duration::from_secs(5)).await {
            Ok(guard) => return guard,
            Err(Error::NotReplicated { .. }) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(err) => panic!("{key} after a failover: {err}"),
        }
    }
    panic!("{key}: no acknowledged lock within 30 s of a failover");
}

/// A direct connection to data node `i` whose response timeout (5 s) outlasts a `WAIT`.
async fn direct(deployment: &Sentinels, i: usize) -> MultiplexedConnection {
    let config =
        redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(5)));
    deployment
        .server(i)
        .client()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("connect to the primary")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thawed_old_primary_gives_no_acknowledged_lock_and_plain_ones_overlap() {
    let mut deployment = Sentinels::start();
    let acked = over_sentinel(&deployment, "acked", true);
    let warm = acked.write().key("warm").await.unwrap();
    assert!(warm.unlock().await.unwrap());
    let rounds = freezes();
    let (mut acked_kept, mut overlaps, mut refused, mut stale_taken, mut stale_overlaps) =
        (0, 0, 0, 0, 0);
    for round in 0..rounds {
        let acked_guards = burst(&acked, round).await;
        let old = deployment.primary();
        // A client that keeps talking to the old primary, connected before the freeze.
        let conn = direct(&deployment, old).await;
        let stale_acked = RwMutex::builder(conn.clone(), "stale-acked")
            .ttl(TTL)
            .replicas(1, Duration::from_millis(300))
            .build()
            .unwrap();
        let stale = RwMutex::builder(conn, "stale").ttl(TTL).build().unwrap();
        let frozen = deployment.freeze_primary();
        let new = deployment.failover().await;
        deployment.thaw(frozen);

        let key = format!("{round}");
        match stale_acked.try_write().key(&key).await {
            Err(Error::NotReplicated { acked: 0, .. }) => refused += 1,
            other => panic!("an acknowledged lock on the deposed primary: {other:?}"),
        }
        let stale_guard = stale.try_write().key(&key).await.unwrap();
        stale_taken += usize::from(stale_guard.is_some());
        let other = over_sentinel(&deployment, "stale", false);
        if let Some(taken) = other.try_write().key(&key).await.unwrap() {
            let held = stale_guard
                .as_ref()
                .is_some_and(|guard| !guard.is_cancelled());
            stale_overlaps += usize::from(held);
            drop(taken);
        }
        let primary = deployment.server(new).conn().await;
        acked_kept += kept(&primary, &acked_guards).await;
        let (taken, repeated) = taken_while_held(&deployment, "acked", &acked_guards).await;
        assert_eq!(
            (taken, repeated),
            (0, 0),
            "acknowledged locks are held on the new primary"
        );
        overlaps += taken;
        drop((acked_guards, stale_guard));
        deployment.settle().await;
    }
    let total = rounds * BURST;
    println!(
        "{rounds} failovers (primary frozen, then thawed): replicas(1) kept {acked_kept}/{total}, \
         overlaps {overlaps}; on the thawed old primary {refused}/{rounds} acknowledged \
         tries refused, {stale_taken}/{rounds} plain locks taken, {stale_overlaps} of them \
         taken at the same time on the new primary"
    );
    assert_eq!(overlaps, 0, "another client took a held, acknowledged lock");
    assert_eq!(
        acked_kept, total,
        "an acknowledged lock was lost in a failover"
    );
    assert_eq!(refused, rounds);
}
