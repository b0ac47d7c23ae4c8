//! Serves the crate's metrics (feature `metrics`) to Prometheus while a few tasks take
//! and release locks: two writers and two readers share one key of a mutex, one task
//! holds a semaphore's permits long enough for them to be renewed, and one loses a lock
//! now and then (its key deleted behind its back). Both handles are labelled by their
//! `name` (`Builder::name_label`).
//!
//! Run with `cargo run --example metrics --features metrics`, then look at
//! `curl http://127.0.0.1:9000/metrics`. Options (all optional):
//!
//! - `--listen ADDR`: where to serve `/metrics` (else `METRICS_ADDR`, else
//!   `127.0.0.1:9000`);
//! - `--redis URL`: the Redis server (else `REDIS_URL`, else `redis://127.0.0.1/`); the
//!   example uses keys starting with `redismutex-example-metrics`;
//! - `--seconds N`: how long to run (default 30; 0 runs until it is killed).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redismutex::{Guard, RwMutex, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long each request took (the guide `redismutex::guide::metrics`).
const ACQUIRE_DURATION: &str = "redismutex_acquire_duration_seconds";
/// How long each lock or permit was held.
const HELD_DURATION: &str = "redismutex_held_duration_seconds";
/// The histogram buckets of both `_seconds` histograms, from 1 ms to 10 s.
const BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// The example's options, from the command line and the environment.
#[derive(Debug)]
struct Options {
    listen: SocketAddr,
    redis: String,
    /// When the tasks stop; `None` to run forever.
    until: Option<Instant>,
}

impl Options {
    /// Reads `--listen ADDR`, `--redis URL` and `--seconds N`, with their defaults.
    fn parse() -> Result<Self, BoxError> {
        let mut listen = std::env::var("METRICS_ADDR").unwrap_or("127.0.0.1:9000".into());
        let mut redis = std::env::var("REDIS_URL").unwrap_or("redis://127.0.0.1/".into());
        let mut seconds = 30;
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let value = args.next().ok_or(format!("{arg} needs a value"))?;
            match arg.as_str() {
                "--listen" => listen = value,
                "--redis" => redis = value,
                "--seconds" => seconds = value.parse()?,
                _ => return Err(format!("unknown option {arg}").into()),
            }
        }
        let until = (seconds > 0).then(|| Instant::now() + Duration::from_secs(seconds));
        Ok(Self {
            listen: listen.parse()?,
            redis,
            until,
        })
    }

    /// Whether the tasks should go on.
    fn running(&self) -> bool {
        self.until.is_none_or(|until| Instant::now() < until)
    }
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let options = Arc::new(Options::parse()?);
    let mut exporter = PrometheusBuilder::new().with_http_listener(options.listen);
    for name in [ACQUIRE_DURATION, HELD_DURATION] {
        exporter = exporter.set_buckets_for_metric(Matcher::Full(name.into()), &BUCKETS)?;
    }
    exporter.install()?;
    redismutex::describe_metrics();
    println!("serving metrics at http://{}/metrics", options.listen);

    let client = redis::Client::open(options.redis.as_str())?;
    let conn = client.get_multiplexed_async_connection().await?;
    let mx = RwMutex::builder(conn.clone(), "redismutex-example-metrics")
        .ttl(Duration::from_secs(1))
        .notifier(client.clone())
        .name_label(true)
        .build()?;
    let sem = Semaphore::builder(conn.clone(), "redismutex-example-metrics-permits", 2)
        .ttl(Duration::from_secs(1))
        .notifier(client)
        .name_label(true)
        .build()?;
    let mut tasks = JoinSet::new();
    for n in 0..4 {
        let (mx, options) = (mx.clone(), Arc::clone(&options));
        tasks.spawn(async move { share(&mx, n < 2, n, &options).await });
    }
    let permits = Arc::clone(&options);
    tasks.spawn(async move { permits_held_long(&sem, &permits).await });
    tasks.spawn(async move { lose_locks(&mx, conn, &options).await });
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    println!("done");
    Ok(())
}

/// Writes (or reads) the key `shared` over and over, holding it a few milliseconds.
async fn share(
    mx: &RwMutex<MultiplexedConnection>,
    write: bool,
    n: u64,
    options: &Options,
) -> Result<(), BoxError> {
    while options.running() {
        let hold = Duration::from_millis(20 + 10 * n);
        if write {
            hold_and_unlock(mx.write().key("shared").await?, hold).await?;
        } else {
            hold_and_unlock(mx.read().key("shared").await?, hold).await?;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// Holds `guard` (a writer's or a reader's) for `hold`, then unlocks it.
async fn hold_and_unlock(guard: impl Guard, hold: Duration) -> Result<(), BoxError> {
    tokio::time::sleep(hold).await;
    guard.unlock().await?;
    Ok(())
}

/// Holds a permit for 700 ms at a time, longer than half its TTL: each is renewed once
/// (`redismutex_refresh_total`).
async fn permits_held_long(
    sem: &Semaphore<MultiplexedConnection>,
    options: &Options,
) -> Result<(), BoxError> {
    while options.running() {
        let permit = sem.acquire().key("jobs").await?;
        tokio::time::sleep(Duration::from_millis(700)).await;
        permit.unlock().await?;
    }
    Ok(())
}

/// Every two seconds, takes the key `doomed` and deletes it behind the guard's back, as
/// an operator or a failover might: the next renewal finds the lock gone and the guard's
/// token fires (`redismutex_lost_total{reason="lost"}`).
async fn lose_locks(
    mx: &RwMutex<MultiplexedConnection>,
    mut conn: MultiplexedConnection,
    options: &Options,
) -> Result<(), BoxError> {
    while options.running() {
        let guard = mx.write().key("doomed").await?;
        conn.del::<_, ()>(guard.key()).await?;
        let _ = tokio::time::timeout(Duration::from_secs(2), guard.cancelled()).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    Ok(())
}
