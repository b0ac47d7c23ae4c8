//! Row 8c: one waiter behind a holder that publishes nothing when it releases (a Go
//! client: the Go package's scripts as `tests/common/go_peer.rs` sends them), the time
//! from the holder's release to the waiter's acquisition, with a notifier, with a
//! notifier on keyspace events (`Notifier::keyspace_events`, the server set to
//! `notify-keyspace-events Kgx`) and without one (it polls), in alternation on one
//! server; each waiter's first hand-off apart (the notified waiter's first comes at a
//! probe, then it polls; the keyspace waiter's is woken by the key's `del` event).

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redismutex::{Notifier, RwMutex};

use crate::go_peer::GoPeer;
use crate::server::RedisServer;
use crate::table::Row;
use crate::{BoxError, Result, TTL_MS};

/// Hand-offs per waiter; the first of the notified waiter's comes at a probe (then it
/// knows the lock's releases come without a message, and polls).
const HANDOFFS: usize = 30;
/// How long the Go holder holds each lock before it releases.
const GO_HOLDS: Duration = Duration::from_millis(300);

/// One hand-off: the Go holder takes `prefix:k`, `mx`'s waiter waits for it, the holder
/// releases after [`GO_HOLDS`]; the time from that release to the waiter's acquisition.
async fn handoff(
    mx: &RwMutex<MultiplexedConnection>,
    go: &GoPeer,
    prefix: &str,
) -> Result<Duration> {
    let key = format!("{prefix}:k");
    let go_id = GoPeer::new_id();
    if let Some(pttl) = go.write(&key, &go_id, false).await {
        return Err(format!("the Go holder found {key} held (PTTL {pttl} ms)").into());
    }
    let waiter = {
        let mx = mx.clone();
        tokio::spawn(async move {
            let guard = mx.write().key("k").await?;
            Ok::<_, BoxError>((Instant::now(), guard))
        })
    };
    tokio::time::sleep(GO_HOLDS).await;
    go.unlock(&key, &go_id).await;
    let released = Instant::now();
    let (acquired, guard) = waiter.await??;
    guard.unlock().await?;
    Ok(acquired.saturating_duration_since(released))
}

/// The median and the largest of `samples`, in milliseconds.
fn median_max(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() - 1]),
    )
}

/// Row 8c.
pub(crate) async fn row(notes: &mut Vec<String>) -> Result<Row> {
    let server = RedisServer::try_start()?;
    let conn = server.conn().await;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("Kgx")
        .query_async(&mut conn.clone())
        .await?;
    let go = GoPeer::new(server.conn().await, TTL_MS);
    let notified = RwMutex::builder(conn.clone(), "perf-silent-n")
        .notifier(server.client())
        .build()?;
    let keyspace_notifier = Notifier::new(server.client()).keyspace_events();
    keyspace_notifier.check_keyspace_events().await?;
    let keyspace = RwMutex::builder(conn.clone(), "perf-silent-k")
        .notifier(keyspace_notifier)
        .build()?;
    let polling = RwMutex::new(conn.clone(), "perf-silent-p");
    let (mut with, mut by_keyspace, mut without) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..HANDOFFS {
        with.push(handoff(&notified, &go, "perf-silent-n").await?);
        by_keyspace.push(handoff(&keyspace, &go, "perf-silent-k").await?);
        without.push(handoff(&polling, &go, "perf-silent-p").await?);
    }
    let first = |samples: &[Duration]| samples[0].as_secs_f64() * 1e3;
    let (with_first, keyspace_first, without_first) =
        (first(&with), first(&by_keyspace), first(&without));
    let ms = |samples: &[Duration]| {
        samples
            .iter()
            .map(|d| format!("{:.1}", d.as_secs_f64() * 1e3))
            .collect::<Vec<_>>()
            .join(" ")
    };
    notes.push(format!(
        "row 8c release → acquired (ms), in order: with a notifier {}; with keyspace \
         events {}; without {}",
        ms(&with),
        ms(&by_keyspace),
        ms(&without)
    ));
    let ((with_p50, with_max), (keyspace_p50, keyspace_max), (without_p50, without_max)) = (
        median_max(&mut with),
        median_max(&mut by_keyspace),
        median_max(&mut without),
    );
    let ratio = |a: f64, b: f64| a / b.max(f64::MIN_POSITIVE);
    Ok(Row::new(
        "8c",
        format!(
            "one waiter behind a holder that publishes nothing (Go's scripts; it holds {} ms, \
             {HANDOFFS} times): from its release to the waiter's acquisition, p50 (max) and \
             the first hand-off, with .notifier(..) / with .notifier(..) on keyspace events \
             / without",
            GO_HOLDS.as_millis()
        ),
        format!(
            "notifier {with_p50:.1} ms ({with_max:.0} ms), first {with_first:.0} ms; keyspace \
             events {keyspace_p50:.1} ms ({keyspace_max:.0} ms), first {keyspace_first:.1} ms"
        ),
        format!(
            "{without_p50:.1} ms ({without_max:.0} ms), first {without_first:.1} ms (polling \
             waiter)"
        ),
        format!(
            "first hand-off with keyspace events {:.2}× the polling waiter's; p50 notifier \
             {:.2}×, keyspace events {:.2}× without (lower is better)",
            ratio(keyspace_first, without_first),
            ratio(with_p50, without_p50),
            ratio(keyspace_p50, without_p50)
        ),
    ))
}
