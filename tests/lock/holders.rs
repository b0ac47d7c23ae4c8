//! Holder identity (`Builder::describe_holder`, `lua/describe.lua`): who holds, for a
//! writer (by script and by the write fast path), each reader, a permit and every key of
//! a set; the label; the pid and the process's start; renewals keep the description, and
//! it leaves with the hold: after a release, after expiry, after `force_unlock`, and
//! after its process is killed (`examples/fault_worker.rs`). A handle that does not
//! describe leaves no `:holders` key.

use std::time::{Duration, SystemTime};

use crate::common::lone_worker::LoneWorker;
use crate::common::proxy::{Fault, Proxy};
use crate::common::{eventually, raw, RedisServer};
use redis::aio::MultiplexedConnection;
use redismutex::{Error, HolderInfo, LockState, RwMutex, Semaphore};

type C = MultiplexedConnection;

const TTL: Duration = Duration::from_secs(30);

fn described(conn: &C, name: &str) -> RwMutex<C> {
    RwMutex::builder(conn.clone(), name)
        .ttl(TTL)
        .holder_label("billing")
        .build()
        .unwrap()
}

/// The holders key of `lock`: whether it exists, its field count and its PTTL.
async fn holders_key(conn: &C, lock: &str) -> (bool, i64, i64) {
    let key = format!("{lock}:holders");
    let exists: i64 = raw::cmd(conn, "EXISTS", &[&key]).await;
    let fields: i64 = raw::cmd(conn, "HLEN", &[&key]).await;
    let pttl: i64 = raw::cmd(conn, "PTTL", &[&key]).await;
    (exists == 1, fields, pttl)
}

/// How many `INCR`s the server ran (`INFO commandstats`).
async fn incr_calls(conn: &C) -> u64 {
    let info: String = raw::cmd(conn, "INFO", &["commandstats"]).await;
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_incr:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// `id`'s description in `state`, which must have one.
#[track_caller]
fn info<'a>(state: &'a LockState, id: &str) -> &'a HolderInfo {
    state
        .holder_info(id)
        .unwrap_or_else(|| panic!("no description of {id} in {state:?}"))
}

/// The description names this process, with the label, acquired by the server's clock
/// before the snapshot.
#[track_caller]
fn assert_this_process(info: &HolderInfo, state: &LockState, label: Option<&str>) {
    assert_eq!(info.pid(), std::process::id());
    let exe = std::env::current_exe().unwrap();
    assert_eq!(
        info.program(),
        exe.file_name().unwrap().to_string_lossy(),
        "the executable's file name"
    );
    assert_eq!(info.label(), label);
    if cfg!(target_os = "linux") {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        assert_eq!(info.host(), host.trim_end());
        let started = info.process_started_at().expect("read on Linux");
        assert!(started <= SystemTime::now(), "{started:?}");
        assert!(
            started > SystemTime::now() - Duration::from_secs(86_400),
            "this test process started within a day: {started:?}"
        );
    }
    let acquired = info.acquired_at();
    assert!(acquired <= state.server_time(), "{acquired:?}");
    assert!(acquired + Duration::from_secs(10) > state.server_time());
}

#[tokio::test]
async fn a_writer_is_described_by_script_and_by_the_fast_path_until_it_releases() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = described(&conn, "desc");
    // The first write runs lock.lua, the next ones (the fence key seen) the fast path;
    // the first two after the server's script cache was flushed (NOSCRIPT inside the
    // pipeline: the attempt's and the description's, then the description's alone).
    for attempt in ["script, flushed", "fast path, flushed", "fast path"] {
        if attempt.ends_with("flushed") {
            let () = raw::cmd(&conn, "SCRIPT", &["FLUSH"]).await;
        }
        let incrs = incr_calls(&conn).await;
        let guard = mx.write().key("w").await.unwrap();
        // The fast path is the one that sends INCR (no script of a write does).
        let fast = incr_calls(&conn).await > incrs;
        assert_eq!(fast, attempt.starts_with("fast"), "{attempt}");
        let state = mx.inspect("w").await.unwrap();
        assert_this_process(info(&state, guard.id()), &state, Some("billing"));
        let (exists, fields, pttl) = holders_key(&conn, "desc:w").await;
        assert!(exists && fields == 1, "{attempt}");
        assert!(
            pttl > 0 && pttl <= TTL.as_millis() as i64,
            "{attempt}: {pttl}"
        );
        let id = guard.id().to_owned();
        guard.unlock().await.unwrap();
        assert_eq!(
            holders_key(&conn, "desc:w").await,
            (false, 0, -2),
            "{attempt}"
        );
        assert_eq!(mx.inspect("w").await.unwrap().holder_info(&id), None);
    }
}

#[tokio::test]
async fn readers_are_described_each_and_leave_one_by_one() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = described(&conn, "desc");
    let first = mx.read().key("r").await.unwrap();
    let second = mx.read().key("r").await.unwrap();
    let state = mx.inspect("r").await.unwrap();
    for reader in [&first, &second] {
        assert_this_process(info(&state, reader.id()), &state, Some("billing"));
    }
    assert_eq!(holders_key(&conn, "desc:r").await.1, 2);
    let second_id = second.id().to_owned();
    second.unlock().await.unwrap();
    let state = mx.inspect("r").await.unwrap();
    assert!(state.holder_info(first.id()).is_some());
    assert!(state.holder_info(&second_id).is_none());
    assert_eq!(holders_key(&conn, "desc:r").await.1, 1);
    first.unlock().await.unwrap();
    assert_eq!(holders_key(&conn, "desc:r").await, (false, 0, -2));
}

#[tokio::test]
async fn a_permit_and_every_key_of_a_set_are_described() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let sem = Semaphore::builder(conn.clone(), "pool", 2)
        .ttl(TTL)
        .describe_holder(true)
        .build()
        .unwrap();
    let permit = sem.acquire().await.unwrap();
    let state = sem.inspect("").await.unwrap();
    assert_this_process(info(&state, permit.id()), &state, None);
    permit.unlock().await.unwrap();
    assert_eq!(holders_key(&conn, "pool").await, (false, 0, -2));

    let mx = described(&conn, "desc");
    let set = mx.lock_all().write(["a"]).read(["b"]).await.unwrap();
    for key in ["a", "b"] {
        let state = mx.inspect(key).await.unwrap();
        assert_this_process(info(&state, set.id()), &state, Some("billing"));
    }
    set.unlock().await.unwrap();
    for lock in ["desc:a", "desc:b"] {
        assert_eq!(holders_key(&conn, lock).await, (false, 0, -2), "{lock}");
    }
}

#[tokio::test]
async fn renewals_keep_the_description_and_expiry_takes_it_with_the_lock() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let proxy = Proxy::start(server.port()).await;
    let cut_conn = redis::Client::open(proxy.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let ttl = Duration::from_millis(300);
    let mx = RwMutex::builder(cut_conn, "short")
        .ttl(ttl)
        .describe_holder(true)
        .build()
        .unwrap();
    let guard = mx.write().key("k").await.unwrap();
    // Four TTLs: the renewals keep the description with the lock.
    tokio::time::sleep(ttl * 4).await;
    let (exists, fields, pttl) = holders_key(&conn, "short:k").await;
    assert!(exists && fields == 1 && pttl > 0, "{pttl}");
    assert!(!guard.is_cancelled());
    // Cut off: nothing renews, and both expire together.
    proxy.set(Fault::Blackhole);
    assert!(
        eventually(|| async {
            let lock: i64 = raw::cmd(&conn, "EXISTS", &["short:k"]).await;
            lock == 0
        })
        .await
    );
    let left: i64 = raw::cmd(&conn, "PTTL", &["short:k:holders"]).await;
    assert!(
        left == -2 || left <= 50,
        "the description outlived its lock by {left} ms"
    );
    assert!(eventually(|| async { !holders_key(&conn, "short:k").await.0 }).await);
    drop(guard);
}

#[tokio::test]
async fn force_unlock_removes_every_description() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = described(&conn, "desc");
    let _first = mx.read().key("f").await.unwrap();
    let _second = mx.read().key("f").await.unwrap();
    assert_eq!(holders_key(&conn, "desc:f").await.1, 2);
    assert!(mx.force_unlock("f").await.unwrap());
    assert_eq!(holders_key(&conn, "desc:f").await, (false, 0, -2));
}

#[tokio::test]
async fn a_killed_holders_description_goes_with_its_permit() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let url = server.url();
    let mut worker = LoneWorker::spawn(
        "described",
        &[
            ("FW_LOCK_URL", &url),
            ("FW_MUTEX", "killed"),
            ("FW_PERMITS", "1"),
            ("FW_TTL_MS", "500"),
            ("FW_HOLD_MS", "600000"),
            ("FW_NOTIFY", "0"),
            ("FW_DESCRIBE", "1"),
        ],
    )
    .await;
    let id = worker.wait_for("ACQUIRED").await.id().to_string();
    let sem = Semaphore::new(conn.clone(), "killed", 1);
    let state = sem.inspect("").await.unwrap();
    let described = info(&state, &id);
    assert_eq!(described.program(), "fault_worker");
    assert_ne!(described.pid(), std::process::id());
    assert_eq!(described.label(), None);
    worker.kill().await;
    assert!(
        eventually(|| async { !holders_key(&conn, "killed").await.0 }).await,
        "the description outlived its dead holder"
    );
    assert!(sem.inspect("").await.unwrap().holders().is_empty());
}

#[tokio::test]
async fn a_handle_that_does_not_describe_leaves_no_holders_key() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::new(conn.clone(), "plain");
    let sem = Semaphore::new(conn.clone(), "plainpool", 2);
    let writer = mx.write().key("w").await.unwrap();
    let reader = mx.read().key("r").await.unwrap();
    let set = mx.lock_all().write(["a"]).read(["b"]).await.unwrap();
    let permit = sem.acquire().await.unwrap();
    let keys: Vec<String> = raw::cmd(&conn, "KEYS", &["*:holders"]).await;
    assert!(keys.is_empty(), "{keys:?}");
    let state = mx.inspect("w").await.unwrap();
    assert_eq!(state.holder_info(writer.id()), None);
    drop((writer, reader, set, permit));
}

#[tokio::test]
async fn a_label_with_a_control_character_or_too_long_is_refused_at_build() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    for label in ["a\tb".to_owned(), "line\n".to_owned(), "x".repeat(257)] {
        let built = RwMutex::builder(conn.clone(), "m")
            .holder_label(&*label)
            .build();
        assert!(
            matches!(built, Err(Error::InvalidOptions(ref why)) if why.contains("holder label")),
            "{label:?}"
        );
    }
    assert!(RwMutex::builder(conn, "m")
        .holder_label("x".repeat(256))
        .build()
        .is_ok());
}
