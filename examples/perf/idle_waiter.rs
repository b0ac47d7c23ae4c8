//! Row 8: one waiter blocked behind a live holder, and the commands it sends meanwhile,
//! with and without a notifier, next to the raw Pub/Sub waiter.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redismutex::RwMutex;

use crate::commands::{breakdown, calls_between, commandstats, evals, total};
use crate::locking::{raw_subscribe, raw_wait};
use crate::raw::raw_id;
use crate::server::RedisServer;
use crate::table::Row;
use crate::{BoxError, Result, TTL_MS};

/// How long the waiter waits, and how often the raw holder renews its key.
const IDLE_WAIT: Duration = Duration::from_secs(2);
const HOLDER_RENEW: Duration = Duration::from_millis(500);

/// Commands per second (all of them, and script invocations) sent while one waiter of
/// `kind` waits [`IDLE_WAIT`] behind a raw holder on a server used for nothing else;
/// the holder's own commands are counted and subtracted.
async fn idle_waiter(kind: &str) -> Result<(f64, f64, BTreeMap<String, u64>)> {
    let server = RedisServer::try_start()?;
    let client = server.client();
    let mut info = server.conn().await;
    let mut holder = server.conn().await;
    let waiter_conn = server.conn().await;
    let lock_key = "perf-idle:k";
    let _: () = redis::cmd("SET")
        .arg(lock_key)
        .arg(raw_id(1))
        .arg("PX")
        .arg(TTL_MS)
        .query_async(&mut holder)
        .await?;
    let mx = match kind {
        "notifier" => RwMutex::builder(waiter_conn.clone(), "perf-idle")
            .notifier(client.clone())
            .build()?,
        _ => RwMutex::new(waiter_conn.clone(), "perf-idle"),
    };
    let before = commandstats(&mut info).await?;
    let start = Instant::now();
    let waiter = {
        let (client, mut conn) = (client.clone(), waiter_conn.clone());
        let raw = kind == "raw";
        tokio::spawn(async move {
            if raw {
                let mut messages = raw_subscribe(&client, lock_key).await?;
                raw_wait(&mut conn, &mut messages, lock_key, &raw_id(2)).await?;
            } else {
                let _guard = mx.write().key("k").await?;
            }
            Ok::<_, BoxError>(())
        })
    };
    let renewals = hold(&mut holder, lock_key, start).await?;
    let after = commandstats(&mut info).await?;
    let elapsed = start.elapsed().as_secs_f64();
    if waiter.is_finished() {
        return Err(format!("the {kind} waiter stopped waiting: {:?}", waiter.await).into());
    }
    waiter.abort();
    let mut calls = calls_between(&before, &after);
    if let Some(pexpire) = calls.get_mut("pexpire") {
        *pexpire = pexpire
            .checked_sub(renewals)
            .ok_or("fewer PEXPIREs than the holder sent")?;
    }
    calls.retain(|_, n| *n > 0);
    Ok((
        total(&calls) as f64 / elapsed,
        evals(&calls) as f64 / elapsed,
        calls,
    ))
}

/// The raw holder: renews `lock_key` every [`HOLDER_RENEW`] until [`IDLE_WAIT`] has
/// passed since `start`; how many renewals it sent.
async fn hold(holder: &mut MultiplexedConnection, lock_key: &str, start: Instant) -> Result<u64> {
    let mut renewals = 0u64;
    while start.elapsed() + HOLDER_RENEW <= IDLE_WAIT {
        tokio::time::sleep(HOLDER_RENEW).await;
        let _: i64 = redis::cmd("PEXPIRE")
            .arg(lock_key)
            .arg(TTL_MS)
            .query_async(holder)
            .await?;
        renewals += 1;
    }
    tokio::time::sleep(IDLE_WAIT.saturating_sub(start.elapsed())).await;
    Ok(renewals)
}

/// Row 8: the waiter polling (8a) and with a notifier (8b), next to the raw waiter.
pub(crate) async fn rows(notes: &mut Vec<String>) -> Result<Vec<Row>> {
    let (raw, raw_evals, raw_calls) = idle_waiter("raw").await?;
    let mut rows = Vec::new();
    for (id, kind, label) in [
        ("8a", "poll", "without notifier"),
        ("8b", "notifier", "with .notifier(..)"),
    ] {
        let (all, evals, calls) = idle_waiter(kind).await?;
        notes.push(format!(
            "row 8 {label}: commands per second: {}",
            breakdown(&calls, IDLE_WAIT.as_secs_f64())
        ));
        rows.push(Row::new(
            id,
            format!(
                "one waiter blocked {} s behind a live holder, {label}: Redis commands/s sent \
                 by the waiter (commandstats, incl. inside scripts; holder's subtracted)",
                IDLE_WAIT.as_secs()
            ),
            format!("{all:.1} /s ({evals:.1} EVALSHA/s)"),
            format!("{raw:.1} /s ({raw_evals:.1} EVALSHA/s) (Pub/Sub waiter)"),
            format!(
                "{:.1}× raw (lower is better)",
                all / raw.max(f64::MIN_POSITIVE)
            ),
        ));
    }
    notes.push(format!(
        "row 8 raw Pub/Sub waiter: commands per second: {}",
        breakdown(&raw_calls, IDLE_WAIT.as_secs_f64())
    ));
    Ok(rows)
}
