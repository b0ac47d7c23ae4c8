//! The uncontended lock cycles whose allocations `benches/alloc.rs`,
//! `tests/allocations.rs` and `examples/perf/` count, each on a key of its own through
//! one shared connection: the library's, through its public API, and the raw redis-rs
//! write cycle of `benches/raw.rs` (`SET NX PX`, then the compare-and-delete script by
//! EVALSHA) as their baseline. Needs the includer's `raw` module (`benches/raw.rs`).

use redis::aio::MultiplexedConnection;
use redismutex::tokio_util::task::TaskTracker;
use redismutex::{RwMutex, Semaphore};

use crate::raw::{raw_cycle, raw_id};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The PX of raw locks, the library's default TTL.
const TTL_MS: u64 = 4000;
/// Permits of the semaphore.
const PERMITS: u32 = 4;

/// One kind of lock cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cycle {
    /// `SET key id NX PX ttl`, then the compare-and-delete script: the baseline.
    Raw,
    /// `write()`, then `unlock()`.
    Write,
    /// `read()`, then `unlock()`.
    Read,
    /// `try_write()` (which finds the lock free), then `unlock()`.
    TryWrite,
    /// `Semaphore::acquire()` (4 permits), then `unlock()`.
    Permit,
    /// `write()`, then the guard dropped; the cycle ends when the release that the drop
    /// started has ended (the mutex's task tracker is empty).
    WriteDrop,
}

impl Cycle {
    /// Every cycle, the baseline first.
    pub const ALL: [Self; 6] = [
        Self::Raw,
        Self::Write,
        Self::Read,
        Self::TryWrite,
        Self::Permit,
        Self::WriteDrop,
    ];

    /// What the cycle does, for a table.
    pub fn name(self) -> &'static str {
        match self {
            Self::Raw => "raw: SET NX PX → compare-and-delete EVALSHA",
            Self::Write => "write() → unlock()",
            Self::Read => "read() → unlock()",
            Self::TryWrite => "try_write() → unlock()",
            Self::Permit => "semaphore acquire() → unlock()",
            Self::WriteDrop => "write() → drop(guard), until released",
        }
    }
}

/// What the cycles run on: one connection, the mutexes and the semaphore over it.
#[derive(Debug)]
pub struct Subjects {
    conn: MultiplexedConnection,
    mx: RwMutex<MultiplexedConnection>,
    sem: Semaphore<MultiplexedConnection>,
    /// The mutex of [`Cycle::WriteDrop`], whose background tasks `tracker` tracks.
    dropping: RwMutex<MultiplexedConnection>,
    tracker: TaskTracker,
    raw_id: String,
}

impl Subjects {
    /// The subjects over `conn`, with the library's defaults (TTL 4 s, no notifier).
    pub fn new(conn: MultiplexedConnection) -> Result<Self, BoxError> {
        let tracker = TaskTracker::new();
        Ok(Self {
            mx: RwMutex::new(conn.clone(), "alloc"),
            sem: Semaphore::new(conn.clone(), "alloc-permit", PERMITS),
            dropping: RwMutex::builder(conn.clone(), "alloc-drop")
                .task_tracker(tracker.clone())
                .build()?,
            tracker,
            raw_id: raw_id(0),
            conn,
        })
    }

    /// The mutex of [`Cycle::Write`] and [`Cycle::Read`].
    pub fn mutex(&self) -> &RwMutex<MultiplexedConnection> {
        &self.mx
    }

    /// Runs one `cycle`; an error if a lock was not taken or not released as held.
    pub async fn run(&self, cycle: Cycle) -> Result<(), BoxError> {
        let held = match cycle {
            Cycle::Raw => {
                let mut conn = self.conn.clone();
                raw_cycle(&mut conn, "alloc-raw:k", &self.raw_id, TTL_MS).await;
                true
            }
            Cycle::Write => self.mx.write().key("w").await?.unlock().await?,
            Cycle::Read => self.mx.read().key("r").await?.unlock().await?,
            Cycle::TryWrite => match self.mx.try_write().key("t").await? {
                Some(guard) => guard.unlock().await?,
                None => return Err("try_write found alloc:t taken".into()),
            },
            Cycle::Permit => self.sem.acquire().key("p").await?.unlock().await?,
            Cycle::WriteDrop => {
                drop(self.dropping.write().key("d").await?);
                self.tracker.close();
                self.tracker.wait().await;
                self.tracker.reopen();
                true
            }
        };
        if !held {
            return Err(format!("{cycle:?}: unlock found the lock gone").into());
        }
        Ok(())
    }
}
