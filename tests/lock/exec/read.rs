//! `ReadGuard::exec`: a reader's pipeline runs read commands while the lock is held, and
//! one holding any command the server flags `write` (the command's or, for a container
//! command from Redis 7, its subcommand's flags) is refused before anything is sent.

use std::time::Duration;

use crate::common::{self, raw, RedisServer};
use redis::aio::MultiplexedConnection;
use redismutex::{Error, ReadGuard};

const TTL: Duration = Duration::from_secs(30);

async fn reader(conn: &MultiplexedConnection) -> ReadGuard {
    common::mutex(conn, "entry", TTL).read().await.unwrap()
}

/// How many times the server ran a script by `EVALSHA` or `EVAL`.
async fn scripts_run(conn: &MultiplexedConnection) -> u64 {
    raw::calls(conn, "evalsha").await.0 + raw::calls(conn, "eval").await.0
}

#[tokio::test]
async fn a_reader_reads_in_one_step_with_the_check() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    raw::cmd::<()>(&conn, "SET", &["data", "v1"]).await;
    raw::cmd::<i64>(&conn, "HSET", &["meta", "version", "7"]).await;
    raw::cmd::<String>(&conn, "XADD", &["events", "1-1", "f", "v"]).await;
    let guard = reader(&conn).await;
    let other = common::mutex(&conn, "entry", TTL).read().await.unwrap();
    let mut pipe = redis::pipe();
    pipe.get("data")
        .hget("meta", "version")
        .exists("data")
        .cmd("XLEN")
        .arg("events")
        .cmd("XINFO")
        .arg("STREAM")
        .arg("events")
        .ignore();
    let (data, version, exists, len): (String, i64, bool, i64) = guard.exec(&pipe).await.unwrap();
    assert_eq!((data.as_str(), version, exists, len), ("v1", 7, true, 1));
    // Another reader of the same lock reads too.
    let (data,): (String,) = other.exec(redis::pipe().get("data")).await.unwrap();
    assert_eq!(data, "v1");
    other.unlock().await.unwrap();
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn every_write_is_refused_before_anything_is_sent() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    raw::cmd::<()>(&conn, "SET", &["data", "v1"]).await;
    raw::cmd::<String>(&conn, "XADD", &["events", "1-1", "f", "v"]).await;
    let guard = reader(&conn).await;
    let writes: [(&str, redis::Pipeline); 7] = [
        ("set", redis::pipe().set("data", "v2").clone()),
        ("del", redis::pipe().del("data").clone()),
        ("incr", redis::pipe().incr("counter", 1).clone()),
        ("expire", redis::pipe().expire("data", 10).clone()),
        (
            "xgroup",
            redis::pipe()
                .cmd("XGROUP")
                .arg("CREATE")
                .arg("events")
                .arg("g")
                .arg("0")
                .clone(),
        ),
        // Flagged write for its STORE form, whatever the arguments: SORT_RO reads.
        ("sort", redis::pipe().cmd("SORT").arg("list").clone()),
        // A read first: the whole pipeline is refused, the read included.
        ("set", redis::pipe().get("data").set("data", "v3").clone()),
    ];
    for (name, pipe) in writes {
        let gets = raw::calls(&conn, "get").await.0;
        let scripts = scripts_run(&conn).await;
        let err = guard.exec::<redis::Value>(&pipe).await.unwrap_err();
        let Error::InvalidPipeline { key, reason, .. } = &err else {
            panic!("{name}: {err:?}");
        };
        assert_eq!(key, "entry");
        assert!(
            reason.to_lowercase().contains(name) && reason.contains("write"),
            "{name}: the reason names the command and why: {reason}"
        );
        assert_eq!(scripts_run(&conn).await, scripts, "{name}: no script ran");
        assert_eq!(
            raw::calls(&conn, "get").await.0,
            gets,
            "{name}: nothing ran"
        );
    }
    assert_eq!(raw::get(&conn, "data").await.as_deref(), Some("v1"));
    assert!(!raw::exists(&conn, "counter").await);
    assert_eq!(raw::pttl(&conn, "data").await, -1);
    let groups: Vec<redis::Value> = raw::cmd(&conn, "XINFO", &["GROUPS", "events"]).await;
    assert!(groups.is_empty(), "no group was made");
    // The guard still holds its lock, and reads go on.
    assert!(!guard.is_cancelled());
    let (data,): (String,) = guard.exec(redis::pipe().get("data")).await.unwrap();
    assert_eq!(data, "v1");
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn a_write_guard_and_a_permit_still_write() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let writer = common::mutex(&conn, "entry", TTL).write().await.unwrap();
    let () = writer
        .exec(redis::pipe().set("data", "w").ignore())
        .await
        .unwrap();
    let reader = writer.downgrade().await.unwrap();
    let err = reader
        .exec::<()>(redis::pipe().set("data", "r").ignore())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidPipeline { .. }), "{err:?}");
    reader.unlock().await.unwrap();
    let permit = redismutex::Semaphore::new(conn.clone(), "pool", 2)
        .acquire()
        .await
        .unwrap();
    let () = permit
        .exec(redis::pipe().set("data", "p").ignore())
        .await
        .unwrap();
    assert_eq!(raw::get(&conn, "data").await.as_deref(), Some("p"));
    permit.unlock().await.unwrap();
}
