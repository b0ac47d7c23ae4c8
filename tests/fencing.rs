//! Fencing tokens: strictly increasing per lock key, in the order the lock passes, across
//! clients, client restarts, unlocks, the lock key's and the fence key's expiry, server
//! restarts without persistence and Go peers; bad fence keys are typed errors; the
//! counter is small.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::go_peer::GoPeer;
use common::{eventually, every_result, raw, RedisServer, LIVENESS};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redismutex::{Error, Mode, RwMutex};

/// The server clock in microseconds, as the scripts read it.
async fn server_time_us(conn: &MultiplexedConnection) -> u64 {
    let time: Vec<String> = raw::cmd(conn, "TIME", &[]).await;
    let secs: u64 = time[0].parse().unwrap();
    let micros: u64 = time[1].parse().unwrap();
    secs * 1_000_000 + micros
}

/// The counter stored at `fence`, parsed.
async fn stored_token(conn: &MultiplexedConnection, fence: &str) -> u64 {
    raw::get(conn, fence)
        .await
        .unwrap_or_else(|| panic!("{fence} is missing"))
        .parse()
        .unwrap_or_else(|err| panic!("{fence} is not an integer: {err}"))
}

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
        let acquire = match mode {
            Mode::Write => mx.write(),
            Mode::Read => mx.read(),
        };
        let guard = acquire
            .key("doc")
            .timeout(LIVENESS)
            .await
            .unwrap_or_else(|err| panic!("client {client} round {round}: {err}"));
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

#[tokio::test]
async fn tokens_increase_across_unlocks_and_the_lock_keys_expiry() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = common::mutex(&conn, "lk", Duration::from_secs(4));
    let mut tokens = Vec::new();

    // Unlocks, by every way of taking the lock.
    for _ in 0..2 {
        for mode in 0..4 {
            let guard = match mode {
                0 => mx.write().await.unwrap(),
                1 => mx.read().await.unwrap(),
                2 => mx.try_write().await.unwrap().expect("free"),
                _ => mx.try_read().await.unwrap().expect("free"),
            };
            tokens.push(guard.fencing_token());
            assert!(guard.unlock().await.unwrap());
        }
    }

    // A Go-protocol holder with a 100 ms TTL that never unlocks: its key expires.
    let go = GoPeer::new(server.conn().await, 100);
    assert_eq!(go.write("lk", &GoPeer::new_id(), false).await, None);
    assert!(
        mx.try_write().await.unwrap().is_none(),
        "the Go writer holds it"
    );
    assert!(eventually(|| async { raw::pttl(&conn, "lk").await == -2 }).await);
    let after_go = mx.write().timeout(LIVENESS).await.unwrap();
    tokens.push(after_go.fencing_token());
    assert!(after_go.unlock().await.unwrap());

    // Our own holder whose key expires under it before its next refresh (in 2 s).
    let stalled = mx.write().await.unwrap();
    tokens.push(stalled.fencing_token());
    raw::cmd::<i64>(&conn, "PEXPIRE", &["lk", "30"]).await;
    assert!(eventually(|| async { raw::pttl(&conn, "lk").await == -2 }).await);
    let other = common::mutex(&server.conn().await, "lk", Duration::from_secs(4));
    let next = other.write().timeout(LIVENESS).await.unwrap();
    tokens.push(next.fencing_token());
    assert!(
        !stalled.unlock().await.unwrap(),
        "the stalled holder had lost it"
    );
    assert_eq!(raw::get(&conn, "lk").await.as_deref(), Some(next.id()));
    assert!(next.unlock().await.unwrap());

    assert_eq!(tokens.len(), 11);
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "tokens must strictly increase: {tokens:?}"
    );
    assert_eq!(stored_token(&conn, "lk:fence").await, tokens[10]);
}

#[tokio::test]
async fn tokens_increase_after_the_fence_key_expires() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "short")
        .ttl(Duration::from_millis(100))
        .fence_retention(Duration::from_millis(200))
        .build()
        .unwrap();

    let first = mx.write().await.unwrap();
    let before = first.fencing_token();
    assert_eq!(stored_token(&conn, "short:fence").await, before);
    let pttl = raw::pttl(&conn, "short:fence").await;
    assert!((1..=200).contains(&pttl), "fence PTTL {pttl}");
    assert!(first.unlock().await.unwrap());
    assert!(eventually(|| async { raw::pttl(&conn, "short:fence").await == -2 }).await);

    let clock = server_time_us(&conn).await;
    let reader = mx.read().await.unwrap();
    assert!(
        reader.fencing_token() > before,
        "{} after {before}",
        reader.fencing_token()
    );
    assert!(
        reader.fencing_token() >= clock,
        "with no counter the server clock seeds the token: {} < {clock}",
        reader.fencing_token()
    );
    assert!(reader.unlock().await.unwrap());
}

#[tokio::test]
async fn tokens_increase_across_a_server_restart_without_persistence() {
    let mut server = RedisServer::start();
    let before = {
        let mx = RwMutex::new(server.conn().await, "rs");
        let guard = mx.write().await.unwrap();
        let token = guard.fencing_token();
        assert!(guard.unlock().await.unwrap());
        token
    };

    server.restart();
    let conn = server.conn().await;
    assert!(
        !raw::exists(&conn, "rs:fence").await,
        "the server came back empty"
    );
    let clock = server_time_us(&conn).await;
    let mx = RwMutex::new(conn.clone(), "rs");
    let guard = mx.write().await.unwrap();
    assert!(
        guard.fencing_token() > before,
        "{} after {before}",
        guard.fencing_token()
    );
    assert!(guard.fencing_token() >= clock, "the server clock seeds it");
    assert!(guard.unlock().await.unwrap());
}

#[tokio::test]
async fn go_clients_mint_nothing_and_tokens_after_a_go_holder_are_larger() {
    const KEY: &str = "shared:doc";
    const FENCE: &str = "shared:doc:fence";
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "shared")
        .lock_intent(true)
        .build()
        .unwrap();
    let go = GoPeer::new(server.conn().await, 4000);
    let mut minted = Vec::new();

    let guard = mx.write().key("doc").await.unwrap();
    minted.push(guard.fencing_token());
    assert!(
        go.write(KEY, &GoPeer::new_id(), false).await.is_some(),
        "Rust excludes Go"
    );
    assert!(guard.unlock().await.unwrap());
    let reader = mx.read().key("doc").await.unwrap();
    minted.push(reader.fencing_token());
    assert!(reader.unlock().await.unwrap());

    // A Go writer holds the key: ours are kept out, and nothing touches the counter.
    let fence_before: Vec<u8> = raw::cmd(&conn, "DUMP", &[FENCE]).await;
    let go_id = GoPeer::new_id();
    assert_eq!(go.write(KEY, &go_id, false).await, None);
    assert!(mx.try_write().key("doc").await.unwrap().is_none());
    assert!(mx.try_read().key("doc").await.unwrap().is_none());
    let waited = mx
        .write()
        .key("doc")
        .timeout(Duration::from_millis(100))
        .await;
    assert!(matches!(waited, Err(Error::Timeout)), "{waited:?}");
    let fence_after: Vec<u8> = raw::cmd(&conn, "DUMP", &[FENCE]).await;
    assert_eq!(
        fence_before, fence_after,
        "Go and blocked attempts minted nothing"
    );
    go.unlock(KEY, &go_id).await;

    let after_go = mx.write().key("doc").await.unwrap();
    assert!(
        minted.iter().all(|&t| t < after_go.fencing_token()),
        "{} after {minted:?}",
        after_go.fencing_token()
    );
    minted.push(after_go.fencing_token());
    assert!(after_go.unlock().await.unwrap());

    // A Go reader beside ours: only ours mints.
    let go_reader = GoPeer::new_id();
    assert_eq!(go.read(KEY, &go_reader).await, None);
    let unchanged = stored_token(&conn, FENCE).await;
    assert_eq!(unchanged, minted[2], "the Go reader minted nothing");
    let reader = mx.read().key("doc").await.unwrap();
    assert!(reader.fencing_token() > minted[2]);
    assert_eq!(stored_token(&conn, FENCE).await, reader.fencing_token());
    go.unlock(KEY, &go_reader).await;
    assert!(reader.unlock().await.unwrap());
}

#[tokio::test]
async fn a_fence_key_of_a_foreign_type_or_value_is_a_wrong_type_error() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "lk")
        .lock_intent(true)
        .build()
        .unwrap();
    let setups: [(&str, &[&str]); 13] = [
        ("hash", &["HSET", "lk:fence", "f", "v"]),
        ("list", &["RPUSH", "lk:fence", "1"]),
        ("set", &["SADD", "lk:fence", "1"]),
        ("zset", &["ZADD", "lk:fence", "1", "m"]),
        ("stream", &["XADD", "lk:fence", "*", "f", "v"]),
        ("non-integer string", &["SET", "lk:fence", "abc"]),
        ("non-integer string", &["SET", "lk:fence", ""]),
        ("non-integer string", &["SET", "lk:fence", "1.5"]),
        ("non-integer string", &["SET", "lk:fence", "nan"]),
        ("non-integer string", &["SET", "lk:fence", "-1"]),
        (
            "non-integer string",
            &["SET", "lk:fence", "9007199254740992"],
        ),
        (
            "non-integer string",
            &["SET", "lk:fence", "18446744073709551616"],
        ),
        ("non-integer string", &["SET", "lk:fence", "inf"]),
    ];
    for (found_expected, setup) in setups {
        raw::cmd::<i64>(&conn, "DEL", &["lk:fence"]).await;
        raw::cmd::<redis::Value>(&conn, setup[0], &setup[1..]).await;
        raw::cmd::<i64>(&conn, "PEXPIRE", &["lk:fence", "600000"]).await;
        let before: Vec<u8> = raw::cmd(&conn, "DUMP", &["lk:fence"]).await;
        for result in every_result(&mx).await {
            match result {
                Err(Error::WrongType { key, found }) => {
                    assert_eq!((key.as_str(), found.as_str()), ("lk:fence", found_expected));
                }
                other => panic!("{setup:?}: expected WrongType, got {other:?}"),
            }
        }
        let after: Vec<u8> = raw::cmd(&conn, "DUMP", &["lk:fence"]).await;
        assert_eq!(before, after, "{setup:?} was changed");
        assert!(
            raw::pttl(&conn, "lk:fence").await > 500_000,
            "{setup:?}: TTL changed"
        );
        assert!(
            !raw::exists(&conn, "lk").await,
            "{setup:?}: lock key created"
        );
        assert!(
            !raw::exists(&conn, "lk:lock-intent").await,
            "{setup:?}: intent set"
        );
    }
}

#[tokio::test]
async fn a_fence_key_without_ttl_is_a_no_expiry_error() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "lk")
        .lock_intent(true)
        .build()
        .unwrap();
    raw::cmd::<()>(&conn, "SET", &["lk:fence", "12345"]).await;
    let before: Vec<u8> = raw::cmd(&conn, "DUMP", &["lk:fence"]).await;

    for result in every_result(&mx).await {
        match result {
            Err(Error::NoExpiry { key }) => assert_eq!(key, "lk:fence"),
            other => panic!("expected NoExpiry, got {other:?}"),
        }
    }
    let after: Vec<u8> = raw::cmd(&conn, "DUMP", &["lk:fence"]).await;
    assert_eq!(before, after);
    assert_eq!(raw::pttl(&conn, "lk:fence").await, -1);
    assert!(!raw::exists(&conn, "lk").await, "lock key created");
    assert!(!raw::exists(&conn, "lk:lock-intent").await, "intent set");
}

#[tokio::test]
async fn a_fence_key_takes_under_100_bytes() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::new(conn.clone(), "orders");
    let guard = mx.write().key("42").await.unwrap();
    assert!(guard.unlock().await.unwrap());

    let usage: i64 = raw::cmd(&conn, "MEMORY", &["USAGE", "orders:42:fence"]).await;
    let encoding: String = raw::cmd(&conn, "OBJECT", &["ENCODING", "orders:42:fence"]).await;
    println!("MEMORY USAGE orders:42:fence = {usage} bytes (encoding {encoding})");
    assert!((1..100).contains(&usage), "{usage} bytes");
    assert!(!raw::exists(&conn, "orders:42").await);

    // Many sub-locks: what each fence key adds to used_memory, with its TTL entry and
    // its share of the keyspace tables.
    let used = || async {
        let info: String = raw::cmd(&conn, "INFO", &["memory"]).await;
        info.lines()
            .find_map(|line| line.strip_prefix("used_memory:"))
            .and_then(|n| n.trim().parse::<i64>().ok())
            .expect("used_memory in INFO")
    };
    const KEYS: usize = 10_000;
    let bulk = RwMutex::new(conn.clone(), "bulk");
    let start = used().await;
    let tasks: Vec<_> = (0..8)
        .map(|task| {
            let mx = bulk.clone();
            tokio::spawn(async move {
                for n in (task..KEYS).step_by(8) {
                    let guard = mx.try_write().key(n.to_string()).await.unwrap().unwrap();
                    assert!(guard.unlock().await.unwrap());
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let keys: i64 = raw::cmd(&conn, "DBSIZE", &[]).await;
    assert_eq!(keys, KEYS as i64 + 1, "only the fence keys remain");
    let per_key = (used().await - start) / KEYS as i64;
    println!("used_memory per fence key over {KEYS} sub-locks = {per_key} bytes");
    assert!(per_key < 200, "{per_key} bytes per fence key");
}

#[tokio::test]
async fn a_hash_tagged_name_keeps_the_fence_key_in_the_lock_keys_cluster_slot() {
    // One cluster node that serves every slot: a script whose keys span two slots fails
    // with CROSSSLOT, so an acquire succeeds only if all three keys share one slot.
    let server = RedisServer::start_with(&["--cluster-enabled", "yes"]);
    let conn = server.conn().await;
    raw::cmd::<()>(&conn, "CLUSTER", &["ADDSLOTSRANGE", "0", "16383"]).await;
    assert!(
        eventually(|| async {
            let info: String = raw::cmd(&conn, "CLUSTER", &["INFO"]).await;
            info.contains("cluster_state:ok")
        })
        .await
    );

    let tagged = RwMutex::new(conn.clone(), "{orders}");
    let guard = tagged.write().key("42").await.unwrap();
    let slot: i64 = raw::cmd(&conn, "CLUSTER", &["KEYSLOT", "{orders}:42"]).await;
    let fence_slot: i64 = raw::cmd(&conn, "CLUSTER", &["KEYSLOT", "{orders}:42:fence"]).await;
    assert_eq!(fence_slot, slot);
    assert_eq!(
        stored_token(&conn, "{orders}:42:fence").await,
        guard.fencing_token()
    );
    assert!(guard.unlock().await.unwrap());
    let reader = tagged.try_read().key("42").await.unwrap().expect("free");
    assert!(reader.unlock().await.unwrap());

    // Without a tag the keys span slots: as README says, Cluster needs the tag.
    let untagged = RwMutex::new(conn.clone(), "orders");
    match untagged.try_write().key("42").await {
        Err(Error::Redis { source, .. }) => {
            assert_eq!(source.code(), Some("CROSSSLOT"), "{source}");
        }
        other => panic!("expected CROSSSLOT, got {other:?}"),
    }
}

#[tokio::test]
async fn a_counter_ahead_of_the_clock_still_counts_up() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ahead = server_time_us(&conn).await + 3_600_000_000; // an hour ahead
    let ahead_text = ahead.to_string();
    raw::cmd::<()>(&conn, "SET", &["lk:fence", &ahead_text, "PX", "600000"]).await;
    let mx = RwMutex::new(conn.clone(), "lk");

    let writer = mx.write().await.unwrap();
    assert_eq!(
        writer.fencing_token(),
        ahead + 1,
        "last + 1 beats the clock"
    );
    assert!(writer.unlock().await.unwrap());
    let reader = mx.read().await.unwrap();
    assert_eq!(reader.fencing_token(), ahead + 2);
    let pttl = raw::pttl(&conn, "lk:fence").await;
    assert!(pttl > 86_000_000, "the mint renewed the retention: {pttl}");
    assert!(reader.unlock().await.unwrap());
}

#[tokio::test]
async fn a_fence_key_holding_a_non_canonical_number_is_a_wrong_type_error() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::new(conn.clone(), "lk");
    for value in ["1e5", "0x10", " 7", "7.0", "00012", "-0"] {
        raw::cmd::<()>(&conn, "SET", &["lk:fence", value, "PX", "600000"]).await;
        let before: Vec<u8> = raw::cmd(&conn, "DUMP", &["lk:fence"]).await;
        match mx.try_write().await {
            Err(Error::WrongType { key, found }) => {
                assert_eq!(
                    (key.as_str(), found.as_str()),
                    ("lk:fence", "non-integer string")
                );
            }
            Ok(Some(guard)) => {
                let token = guard.fencing_token();
                assert!(guard.unlock().await.unwrap());
                panic!("{value:?} was taken for a counter and overwritten by token {token}");
            }
            other => panic!("{value:?}: expected WrongType, got {other:?}"),
        }
        let after: Vec<u8> = raw::cmd(&conn, "DUMP", &["lk:fence"]).await;
        assert_eq!(before, after, "{value:?} was changed");
    }
}

#[tokio::test]
async fn a_counter_at_the_largest_exact_integer_is_refused_not_wrapped() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let max = (1u64 << 53) - 1;
    let below = (max - 1).to_string();
    raw::cmd::<()>(&conn, "SET", &["lk:fence", &below, "PX", "600000"]).await;
    let mx = RwMutex::new(conn.clone(), "lk");
    let last = mx.try_write().await.unwrap().expect("free");
    assert_eq!(last.fencing_token(), max, "the last exact token is minted");
    assert!(last.unlock().await.unwrap());
    for result in [mx.try_write().await, mx.try_read().await] {
        match result {
            Err(Error::WrongType { key, found }) => {
                assert_eq!(
                    (key.as_str(), found.as_str()),
                    ("lk:fence", "exhausted counter")
                );
            }
            other => panic!("expected an exhausted counter, got {other:?}"),
        }
    }
    assert_eq!(raw::get(&conn, "lk:fence").await, Some(max.to_string()));
}

#[tokio::test]
async fn a_sub_lock_that_would_be_another_locks_fence_or_intent_key_is_refused() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::new(conn.clone(), "a");

    let whole = mx.try_write().await.unwrap().expect("free");
    for key in ["fence", "lock-intent", "x:fence", "x:lock-intent"] {
        match mx.try_write().key(key).await {
            Err(Error::InvalidKey {
                key: lock_key,
                reason,
            }) => {
                assert_eq!(lock_key, format!("a:{key}"));
                assert!(reason.contains("key of lock"), "{reason}");
            }
            other => panic!("{key:?}: expected InvalidKey, got {other:?}"),
        }
        let read = mx.read().key(key).await;
        assert!(matches!(read, Err(Error::InvalidKey { .. })), "{read:?}");
    }
    assert!(!whole.is_cancelled(), "the whole lock was not touched");
    assert!(whole.unlock().await.unwrap());
    let named = RwMutex::builder(conn.clone(), "a:fence").build();
    assert!(matches!(named, Err(Error::InvalidOptions(_))), "{named:?}");
    let fence: String = raw::cmd(&conn, "TYPE", &["a:fence"]).await;
    assert_eq!(
        fence, "string",
        "only the whole lock's counter is at a:fence"
    );
}
