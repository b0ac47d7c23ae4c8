//! Acquires cancelled at random points and guards dropped at random: no lock is refreshed
//! after its guard is gone, no intent outlives its writer, and nothing is left in Redis.
//!
//! A `MONITOR` connection records every refresh the server runs, with the server's
//! timestamp, so the test can compare it with the moment each guard went away.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::common::either::Either;
use crate::common::{eventually, raw, scripts, RedisServer, LIVENESS};
use rand::RngExt;
use redis::aio::MultiplexedConnection;
use redismutex::RwMutex;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

const TTL: Duration = Duration::from_secs(1);
const KEYS: [&str; 3] = ["a", "b", "c"];
const TASKS: usize = 8;
const RUN: Duration = Duration::from_secs(3);
/// A refresh already on the wire when its guard went away may still land this late.
const IN_FLIGHT_GRACE: Duration = Duration::from_millis(150);

fn now() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap()
}

/// Every refresh the server runs: lock id → server timestamps.
type Refreshes = Arc<Mutex<HashMap<String, Vec<Duration>>>>;

/// Records refreshes from a `MONITOR` connection until `stop` fires: `refresh.lua`'s
/// (one key) and `renew.lua`'s (a batch: its keys, the TTL, the writer hints, then one
/// id per key).
async fn monitor(port: u16, stop: CancellationToken) -> Refreshes {
    let refresh_sha = scripts::sha("refresh.lua");
    let renew_sha = scripts::sha("renew.lua");
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(b"MONITOR\r\n").await.unwrap();
    let mut lines = BufReader::new(stream).lines();
    let seen: Refreshes = Arc::default();
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let line = tokio::select! {
                () = stop.cancelled() => return,
                line = lines.next_line() => match line {
                    Ok(Some(line)) => line,
                    _ => return,
                },
            };
            // +1700000000.123456 [0 127.0.0.1:5000] "EVALSHA" "<sha>" "<n>" "<key>"... then
            // refresh.lua: "<id>" "<ttl>"; renew.lua: "<ttl>" "<hints>" "<id>"...
            let fields: Vec<&str> = line.split('"').collect();
            if fields.get(1) != Some(&"EVALSHA") {
                continue;
            }
            let keys: usize = fields.get(5).and_then(|n| n.parse().ok()).unwrap_or(0);
            let ids: Vec<String> = match fields.get(3) {
                Some(sha) if *sha == refresh_sha => vec![fields[9].to_owned()],
                Some(sha) if *sha == renew_sha => (0..keys)
                    .map(|i| fields[11 + 2 * keys + 2 * i].to_owned())
                    .collect(),
                _ => continue,
            };
            let at: f64 = line[1..].split(' ').next().unwrap().parse().unwrap();
            let mut seen = record.lock().unwrap();
            for id in ids {
                seen.entry(id)
                    .or_default()
                    .push(Duration::from_secs_f64(at));
            }
        }
    });
    seen
}

/// One contender: acquires with random cancellation, holds at random, lets go at random.
/// Returns the ids it held with the time each guard went away.
async fn contend(mx: RwMutex<MultiplexedConnection>) -> Vec<(String, Duration)> {
    let mut gone = Vec::new();
    let until = tokio::time::Instant::now() + RUN;
    while tokio::time::Instant::now() < until {
        let (key, write, cut, hold, how) = {
            let mut rng = rand::rng();
            (
                KEYS[rng.random_range(0..KEYS.len())],
                rng.random_bool(0.5),
                Duration::from_micros(rng.random_range(0..20_000)),
                Duration::from_millis(rng.random_range(0..1_200)),
                rng.random_range(0..4),
            )
        };
        let parent = CancellationToken::new();
        // The acquire future is dropped wherever it is when `cut` runs out: before its
        // request, while it is in flight, or while it backs off.
        let attempt = async {
            if write {
                mx.write()
                    .key(key)
                    .parent(parent.clone())
                    .await
                    .map(Either::from)
            } else {
                mx.read()
                    .key(key)
                    .parent(parent.clone())
                    .await
                    .map(Either::from)
            }
        };
        let Ok(Ok(guard)) = tokio::time::timeout(cut, attempt).await else {
            continue;
        };
        tokio::time::sleep(hold).await;
        let id = guard.id().to_string();
        match how {
            0 => drop(guard),
            1 => {
                guard.unlock().await.unwrap();
            }
            2 => {
                guard.cancellation_token().cancel();
                drop(guard);
            }
            _ => {
                parent.cancel();
                drop(guard);
            }
        }
        gone.push((id, now()));
    }
    gone
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquires_and_dropped_guards_leave_nothing_behind() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let stop = CancellationToken::new();
    let refreshes = monitor(server.port(), stop.clone()).await;
    let mx = RwMutex::builder(conn.clone(), "churn")
        .ttl(TTL)
        .lock_intent(true)
        .build()
        .unwrap();
    // Half the tasks wait by release notifications: their queue places and
    // subscriptions must go with them.
    let notified = RwMutex::builder(conn.clone(), "churn")
        .ttl(TTL)
        .lock_intent(true)
        .notifier(server.client())
        .build()
        .unwrap();

    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let mx = if i % 2 == 0 { &mx } else { &notified };
            tokio::spawn(contend(mx.clone()))
        })
        .collect();
    let mut gone = Vec::new();
    for task in tasks {
        gone.extend(
            tokio::time::timeout(LIVENESS * 2, task)
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let last_gone = now();
    assert!(gone.len() >= 20, "too few locks were held: {}", gone.len());

    // Every lock and intent goes within a moment, far sooner than the TTL.
    let lock_keys = || async {
        let keys: Vec<String> = raw::cmd(&conn, "KEYS", &["churn:*"]).await;
        keys.into_iter()
            .filter(|key| !key.ends_with(":fence"))
            .collect::<Vec<_>>()
    };
    let mut left = lock_keys().await;
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        left = lock_keys().await;
    }
    let cleared_in = now() - last_gone;
    assert!(left.is_empty(), "left after 500 ms: {left:?}");
    assert!(cleared_in < TTL / 2, "cleared only after {cleared_in:?}");
    let channels = || async {
        let channels: Vec<String> = raw::cmd(&conn, "PUBSUB", &["CHANNELS", "churn*"]).await;
        channels
    };
    assert!(
        eventually(|| async { channels().await.is_empty() }).await,
        "subscribed with nobody waiting: {:?}",
        channels().await
    );

    // Past a TTL and a refresh period, the server has run no refresh for a gone guard.
    tokio::time::sleep(TTL + TTL / 2).await;
    stop.cancel();
    assert!(lock_keys().await.is_empty(), "something came back");
    let refreshes = refreshes.lock().unwrap();
    let total: usize = refreshes.values().map(Vec::len).sum();
    let mut late = Vec::new();
    for (id, at) in &gone {
        for ran in refreshes.get(id).into_iter().flatten() {
            if *ran > *at + IN_FLIGHT_GRACE {
                late.push((id.clone(), *ran - *at));
            }
        }
    }
    println!(
        "churn: {} guards, {total} refreshes seen, {} late",
        gone.len(),
        late.len()
    );
    assert!(total > 0, "no guard lived long enough to be refreshed");
    assert!(
        late.is_empty(),
        "refreshed after the guard was gone: {late:?}"
    );
}
