//! Fencing tokens in the order the lock passes: strictly increasing per lock key across
//! concurrent clients (readers between two writers lie between their tokens) and across
//! client restarts.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::either::Either;
use crate::common::{RedisServer, LIVENESS};
use redis::aio::ConnectionLike;
use redismutex::{Mode, RwMutex};

/// What one holder saw while it held the lock.
#[derive(Debug, Clone, Copy)]
struct Turn {
    mode: Mode,
    token: u64,
    client: usize,
}

/// The turns in the order the lock passed, recorded while each was held.
#[derive(Default)]
struct Log {
    turns: Mutex<Vec<Turn>>,
    readers: AtomicUsize,
    most_readers: AtomicUsize,
    writers: AtomicUsize,
}

const CLIENTS: usize = 6;
const ROUNDS: usize = 8;

/// One client taking the lock in turns: every third round a write, else a read.
async fn take_turns<C>(mx: RwMutex<C>, client: usize, log: Arc<Log>)
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    for round in 0..ROUNDS {
        let mode = if (client + round).is_multiple_of(3) {
            Mode::Write
        } else {
            Mode::Read
        };
        let acquired = match mode {
            Mode::Write => {
                let acquire = mx.write().key("doc").timeout(LIVENESS);
                acquire.await.map(Either::from)
            }
            Mode::Read => {
                let acquire = mx.read().key("doc").timeout(LIVENESS);
                acquire.await.map(Either::from)
            }
        };
        let guard = acquired.unwrap_or_else(|err| panic!("client {client} round {round}: {err}"));
        let (counter, hold) = match mode {
            Mode::Write => (&log.writers, Duration::from_millis(2)),
            Mode::Read => (&log.readers, Duration::from_millis(15)),
        };
        let inside = counter.fetch_add(1, Ordering::SeqCst) + 1;
        match mode {
            Mode::Write => {
                assert_eq!(inside, 1, "two writers at once");
                assert_eq!(
                    log.readers.load(Ordering::SeqCst),
                    0,
                    "a writer among readers"
                );
            }
            Mode::Read => {
                assert_eq!(
                    log.writers.load(Ordering::SeqCst),
                    0,
                    "a reader beside a writer"
                );
                log.most_readers.fetch_max(inside, Ordering::SeqCst);
            }
        }
        log.turns.lock().unwrap().push(Turn {
            mode,
            token: guard.fencing_token(),
            client,
        });
        tokio::time::sleep(hold).await;
        counter.fetch_sub(1, Ordering::SeqCst);
        assert!(
            guard.unlock().await.unwrap(),
            "client {client} lost its lock"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_increase_in_the_order_the_lock_passes_between_clients() {
    let server = RedisServer::start();
    let log = Arc::new(Log::default());
    let mut tasks = Vec::new();
    for client in 0..CLIENTS {
        // Half on multiplexed connections, half on connection managers, each its own.
        let task = if client.is_multiple_of(2) {
            let mx = RwMutex::builder(server.conn().await, "fenced")
                .lock_intent(true)
                .build()
                .unwrap();
            tokio::spawn(take_turns(mx, client, Arc::clone(&log)))
        } else {
            let mx = RwMutex::builder(server.manager().await, "fenced")
                .lock_intent(true)
                .build()
                .unwrap();
            tokio::spawn(take_turns(mx, client, Arc::clone(&log)))
        };
        tasks.push(task);
    }
    for task in tasks {
        tokio::time::timeout(LIVENESS * 4, task)
            .await
            .expect("clients finish")
            .expect("client task");
    }

    let turns = log.turns.lock().unwrap().clone();
    assert_eq!(turns.len(), CLIENTS * ROUNDS);
    let writes = turns.iter().filter(|t| t.mode == Mode::Write).count();
    assert!(writes >= CLIENTS * ROUNDS / 4, "{writes} writes");
    assert!(
        log.most_readers.load(Ordering::SeqCst) >= 2,
        "readers never overlapped, so this run proved nothing about concurrent readers"
    );
    let mut tokens: Vec<u64> = turns.iter().map(|t| t.token).collect();
    for (i, turn) in turns.iter().enumerate() {
        if turn.mode != Mode::Write {
            continue;
        }
        assert!(turn.client < CLIENTS);
        // A writer's token is above every earlier token and below every later one, so
        // readers between two writers lie strictly between their tokens.
        for (j, other) in turns.iter().enumerate() {
            assert!(
                (j < i && other.token < turn.token)
                    || (j > i && other.token > turn.token)
                    || j == i,
                "turn {j} {other:?} is out of order with writer turn {i} {turn:?}:\n{turns:#?}"
            );
        }
    }
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), turns.len(), "tokens repeat:\n{turns:#?}");
}

#[tokio::test]
async fn a_restarted_client_gets_larger_tokens() {
    let server = RedisServer::start();
    let mut last = 0;
    // Each "process": a new redis::Client, connection and mutex, dropped at the end.
    for process in 0..3 {
        let client = redis::Client::open(server.url()).unwrap();
        let conn = client.get_multiplexed_async_connection().await.unwrap();
        let mx = RwMutex::new(conn, "jobs");
        let write = mx.write().key("7").await.unwrap();
        assert!(
            write.fencing_token() > last,
            "process {process}: write token {} after {last}",
            write.fencing_token()
        );
        last = write.fencing_token();
        assert!(write.unlock().await.unwrap());
        let read = mx.try_read().key("7").await.unwrap().expect("free");
        assert!(read.fencing_token() > last, "process {process}: read token");
        last = read.fencing_token();
        assert!(read.unlock().await.unwrap());
        drop((mx, client));
    }
}
