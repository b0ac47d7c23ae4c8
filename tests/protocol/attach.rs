//! `attach.lua` run directly (as the crate sends it, `tests/common/scripts.rs`): a lease's
//! hold taken over by a new id, every key or none; and out of memory, where the first
//! write is refused with nothing changed or every key moves.

use std::collections::BTreeSet;

use crate::common::{raw, scripts, RedisServer};
use redis::aio::MultiplexedConnection;
use redis::Value;

const OLD: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const NEW: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const OTHER: &str = "cccccccccccccccccccccccccccccccc";

/// attach.lua moving `OLD`'s hold of `keys` (each in its character of `modes`) to `NEW`
/// with a TTL of `ttl` ms; KEYS are the lock keys, then their holders hashes.
async fn attach(
    conn: &MultiplexedConnection,
    keys: &[&str],
    modes: &str,
    ttl: u64,
) -> redis::RedisResult<Value> {
    let script = scripts::script("attach.lua");
    let mut invocation = script.prepare_invoke();
    for key in keys {
        invocation.key(*key);
    }
    for key in keys {
        invocation.key(format!("{key}:holders"));
    }
    invocation
        .arg(OLD)
        .arg(NEW)
        .arg(ttl)
        .arg(modes)
        .invoke_async(&mut conn.clone())
        .await
}

fn not_held(i: i64) -> Value {
    Value::Array(vec![Value::Int(0), Value::Int(i)])
}

async fn set_of(conn: &MultiplexedConnection, key: &str) -> BTreeSet<String> {
    raw::members(conn, key).await.into_iter().collect()
}

/// `OLD` writes `w`, reads `r` beside `OTHER`, holds a permit of `p`, each for 1 s, and
/// is described at `w` and `r` (so is `OTHER` at `r`).
async fn hold(conn: &MultiplexedConnection) {
    let deadline = (raw::server_ms(conn).await + 1000).to_string();
    raw::cmd::<()>(conn, "SET", &["w", OLD, "PX", "1000"]).await;
    raw::cmd::<()>(conn, "SADD", &["r", OLD, OTHER]).await;
    raw::cmd::<()>(conn, "ZADD", &["p", &deadline, OLD]).await;
    raw::cmd::<()>(conn, "HSET", &["w:holders", OLD, "d"]).await;
    raw::cmd::<()>(conn, "HSET", &["r:holders", OLD, "d", OTHER, "d"]).await;
    for key in ["r", "p", "w:holders", "r:holders"] {
        raw::cmd::<()>(conn, "PEXPIRE", &[key, "1000"]).await;
    }
}

#[tokio::test]
async fn a_hold_moves_to_the_new_id_every_key_or_none() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    hold(&conn).await;
    // A key not held in its mode (the third: no such mode) refuses the whole hold.
    let refused = attach(&conn, &["w", "r", "p"], "wrx", 5000).await.unwrap();
    assert_eq!(refused, not_held(3));
    let refused = attach(&conn, &["w", "r", "p"], "wwp", 5000).await.unwrap();
    assert_eq!(refused, not_held(2));
    assert_eq!(raw::get(&conn, "w").await.as_deref(), Some(OLD));
    assert!(set_of(&conn, "r").await.contains(OLD));

    let moved = attach(&conn, &["w", "r", "p"], "wrp", 5000).await.unwrap();
    assert_eq!(moved, Value::Int(1));
    assert_eq!(raw::get(&conn, "w").await.as_deref(), Some(NEW));
    assert_eq!(
        set_of(&conn, "r").await,
        BTreeSet::from([NEW.into(), OTHER.into()])
    );
    for key in ["w", "r", "p"] {
        let pttl = raw::pttl(&conn, key).await;
        assert!((4000..=5000).contains(&pttl), "{key}: PTTL {pttl}");
    }
    let permits: Vec<(String, f64)> =
        raw::cmd(&conn, "ZRANGE", &["p", "0", "-1", "WITHSCORES"]).await;
    let now = raw::server_ms(&conn).await as f64;
    assert_eq!(permits.len(), 1);
    assert_eq!(permits[0].0, NEW);
    assert!((now + 4000.0..=now + 5000.0).contains(&permits[0].1));
    // The old id's descriptions are gone; another reader's stays.
    assert!(!raw::exists(&conn, "w:holders").await);
    let described: Vec<String> = raw::cmd(&conn, "HKEYS", &["r:holders"]).await;
    assert_eq!(described, [OTHER]);

    // Attached once: the old id holds nothing now.
    let again = attach(&conn, &["w", "r", "p"], "wrp", 5000).await.unwrap();
    assert_eq!(again, not_held(1));
    let again = attach(&conn, &["r"], "r", 5000).await.unwrap();
    assert_eq!(again, not_held(1));
}

#[tokio::test]
async fn a_permit_past_its_deadline_and_keys_of_other_types_are_not_held() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let past = (raw::server_ms(&conn).await - 1).to_string();
    raw::cmd::<()>(&conn, "ZADD", &["p", &past, OLD]).await;
    raw::cmd::<()>(&conn, "PEXPIRE", &["p", "1000"]).await;
    raw::cmd::<()>(&conn, "SET", &["s", OLD, "PX", "1000"]).await;
    raw::cmd::<()>(&conn, "SADD", &["t", OLD]).await;
    raw::cmd::<()>(&conn, "PEXPIRE", &["t", "1000"]).await;
    // A string holder's id read as a reader's or a permit's, a set's as a writer's.
    for (key, mode) in [
        ("p", "p"),
        ("s", "r"),
        ("s", "p"),
        ("t", "w"),
        ("none", "w"),
    ] {
        let reply = attach(&conn, &[key], mode, 5000).await.unwrap();
        assert_eq!(reply, not_held(1), "{key} as {mode}");
    }
    // A holders key of another type does not fail an attach that moved the hold.
    raw::cmd::<()>(&conn, "SET", &["s:holders", "junk", "PX", "1000"]).await;
    assert_eq!(
        attach(&conn, &["s"], "w", 5000).await.unwrap(),
        Value::Int(1)
    );
    assert_eq!(raw::get(&conn, "s:holders").await.as_deref(), Some("junk"));
}

/// Out of memory (maxmemory with noeviction), Redis refuses a script's first write that
/// may grow memory and lets every write after it through: a hold whose first key is
/// written (`SET`) is refused with nothing changed; one whose first key is read or a
/// permit starts with a removal (`SREM`, `ZREM`) and moves whole.
#[tokio::test]
async fn out_of_memory_refuses_an_attach_whole_or_lets_it_move_whole() {
    let server = RedisServer::start_with(&["--maxmemory-policy", "noeviction"]);
    let conn = server.conn().await;
    hold(&conn).await;
    raw::cmd::<()>(&conn, "PEXPIRE", &["w", "60000"]).await;
    raw::cmd::<()>(&conn, "PEXPIRE", &["r", "60000"]).await;
    raw::cmd::<()>(&conn, "SET", &["filler", &"x".repeat(2 << 20)]).await;
    raw::cmd::<()>(&conn, "CONFIG", &["SET", "maxmemory", "1mb"]).await;

    let refused = attach(&conn, &["w", "r"], "wr", 5000).await.unwrap_err();
    assert!(crate::scripts::out_of_memory(&refused), "{refused}");
    assert_eq!(raw::get(&conn, "w").await.as_deref(), Some(OLD));
    assert!(set_of(&conn, "r").await.contains(OLD));
    assert!(raw::exists(&conn, "w:holders").await);

    let moved = attach(&conn, &["r", "w"], "rw", 5000).await.unwrap();
    assert_eq!(moved, Value::Int(1));
    assert_eq!(raw::get(&conn, "w").await.as_deref(), Some(NEW));
    assert_eq!(
        set_of(&conn, "r").await,
        BTreeSet::from([NEW.into(), OTHER.into()])
    );
}
