//! Row 7: workers on one key, with their own connections, taking turns at the write lock
//! (the library with one shared notifier client, or the raw waiter).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::{MultiplexedConnection, PubSubStream};
use redismutex::RwMutex;
use tokio::task::JoinSet;

use crate::commands::{breakdown, calls_between, commandstats, evals, total};
use crate::locking::{check_unlocked, raw_release, raw_subscribe, raw_wait};
use crate::raw::{raw_id, RELEASE_PUBLISH};
use crate::server::RedisServer;
use crate::table::{per_s, ratio, spread, Row};
use crate::Result;

/// Workers, how long each holds the lock, how long the run lasts.
pub(crate) const WORKERS: usize = 8;
const HOLD: Duration = Duration::from_micros(200);
const CONTENDED_FOR: Duration = Duration::from_secs(3);

/// What one contended run measured.
struct Contended {
    acquisitions: u64,
    rate: f64,
    waits: Vec<i128>,
    busiest_share: f64,
    calls: BTreeMap<String, u64>,
    mean_hold: Duration,
}

/// Holds the lock for [`HOLD`] without blocking the runtime's other tasks.
fn hold() -> Duration {
    let start = Instant::now();
    tokio::task::block_in_place(|| std::thread::sleep(HOLD));
    start.elapsed()
}

/// One of the workers: its number, its connection, its mutex (over that connection, with
/// the shared notifier client) and, for the raw waiter, its release messages.
struct Worker {
    number: usize,
    conn: MultiplexedConnection,
    mx: RwMutex<MultiplexedConnection>,
    messages: Option<PubSubStream>,
}

impl Worker {
    /// Takes turns at the write lock on `key` until `deadline`, holding it for [`HOLD`]
    /// each time (added to `held_ns`): how long each turn waited, in ns.
    async fn take_turns(
        mut self,
        key: &'static str,
        deadline: Instant,
        held_ns: Arc<AtomicU64>,
    ) -> Result<Vec<i128>> {
        let id = raw_id(self.number);
        let mut waits = Vec::new();
        while Instant::now() < deadline {
            let asked = Instant::now();
            let guard = match self.messages.as_mut() {
                None => Some(self.mx.write().key(key).await?),
                Some(messages) => {
                    raw_wait(&mut self.conn, messages, key, &id).await?;
                    None
                }
            };
            waits.push(asked.elapsed().as_nanos() as i128);
            let held = hold();
            held_ns.fetch_add(held.as_nanos() as u64, Ordering::Relaxed);
            match guard {
                Some(guard) => check_unlocked(guard).await?,
                None => raw_release(&mut self.conn, &RELEASE_PUBLISH, key, &id).await?,
            }
        }
        Ok(waits)
    }
}

/// [`WORKERS`] workers with their own connections taking turns on one key for
/// [`CONTENDED_FOR`]: the library (one shared notifier client) or the raw waiter.
async fn contended(server: &RedisServer, library: bool) -> Result<Contended> {
    let client = server.client();
    let mut info = server.conn().await;
    let key = if library { "k" } else { "perf-contended-raw" };
    let mut workers = Vec::new();
    for number in 0..WORKERS {
        let conn = server.conn().await;
        let mx = RwMutex::builder(conn.clone(), "perf-contended")
            .notifier(client.clone())
            .build()?;
        let messages = if library {
            None
        } else {
            Some(raw_subscribe(&client, key).await?)
        };
        workers.push(Worker {
            number,
            conn,
            mx,
            messages,
        });
    }
    let before = commandstats(&mut info).await?;
    let start = Instant::now();
    let deadline = start + CONTENDED_FOR;
    let held_ns = Arc::new(AtomicU64::new(0));
    let mut set = JoinSet::new();
    for worker in workers {
        set.spawn(worker.take_turns(key, deadline, Arc::clone(&held_ns)));
    }
    let mut waits = Vec::new();
    let mut busiest = 0;
    while let Some(done) = set.join_next().await {
        let worker = done??;
        busiest = busiest.max(worker.len());
        waits.extend(worker);
    }
    let elapsed = start.elapsed();
    let after = commandstats(&mut info).await?;
    let acquisitions = waits.len() as u64;
    Ok(Contended {
        acquisitions,
        rate: acquisitions as f64 / elapsed.as_secs_f64(),
        busiest_share: busiest as f64 / acquisitions as f64,
        calls: calls_between(&before, &after),
        mean_hold: Duration::from_nanos(held_ns.load(Ordering::Relaxed) / acquisitions.max(1)),
        waits,
    })
}

impl Contended {
    /// The run's cell: its rate, its waits, the busiest worker's share of the turns and
    /// the commands per acquisition.
    fn describe(&mut self) -> String {
        let n = self.acquisitions as f64;
        format!(
            "{}; wait {}; busiest worker {:.0}%; {:.1} cmds/acq ({:.2} EVALSHA/EVAL)",
            per_s(self.rate),
            spread(&mut self.waits),
            self.busiest_share * 100.0,
            total(&self.calls) as f64 / n,
            evals(&self.calls) as f64 / n,
        )
    }
}

/// Row 7: the library's turns next to the raw waiter's, on a server of its own.
pub(crate) async fn row(notes: &mut Vec<String>) -> Result<Row> {
    let server = RedisServer::try_start()?;
    let mut raw = contended(&server, false).await?;
    let mut library = contended(&server, true).await?;
    for (name, run) in [("library", &library), ("raw", &raw)] {
        notes.push(format!(
            "row 7 {name}: {} acquisitions, mean hold {:.3} ms; commands per acquisition: {}",
            run.acquisitions,
            run.mean_hold.as_secs_f64() * 1e3,
            breakdown(&run.calls, run.acquisitions as f64)
        ));
    }
    Ok(Row::new(
        "7",
        format!(
            "{WORKERS} workers (own connections, one shared notifier client), one key, \
             write lock held ~{} ms, {} s: acquisitions/s; wait p50/p99/max; busiest \
             worker's share; Redis commands per acquisition (commandstats, incl. inside scripts)",
            HOLD.as_secs_f64() * 1e3,
            CONTENDED_FOR.as_secs()
        ),
        library.describe(),
        format!("{} (Pub/Sub wake + SET NX)", raw.describe()),
        format!("acquisitions/s {}", ratio(library.rate, raw.rate)),
    ))
}
