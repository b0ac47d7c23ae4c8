//! `lua/proclaim.lua` and `lua/leader.lua` (an election's record) run directly, over every
//! state of the lock key `scripts.rs` knows and a record key of another type.

use crate::common::{raw, scripts, RedisServer};
use crate::scripts::{set_state, state, FENCE_MS, ID_A, ID_B, STATES};
use redis::aio::MultiplexedConnection;
use redis::Value;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

/// `proclaim.lua` for `ID_A` on the lock key `key`, writing `record`.
async fn proclaim(conn: &MultiplexedConnection, key: &str, record: &str) -> Value {
    scripts::script("proclaim.lua")
        .key(key)
        .key(format!("{key}:leader"))
        .arg(ID_A)
        .arg(record)
        .arg(FENCE_MS)
        .arg("0")
        .invoke_async(&mut conn.clone())
        .await
        .unwrap()
}

/// `leader.lua` on the lock key `key`.
async fn leader(conn: &MultiplexedConnection, key: &str) -> Value {
    scripts::script("leader.lua")
        .key(key)
        .key(format!("{key}:leader"))
        .invoke_async(&mut conn.clone())
        .await
        .unwrap()
}

#[tokio::test]
async fn proclaim_writes_the_record_only_for_the_writer_holding_the_lock() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let record = format!("7:{ID_A}:host:1");
    // By state of `set_state`: the reply, and whether the record is written.
    let expected = [
        (Value::Int(3), true),  // our writer: written and published
        (Value::Int(0), false), // another writer
        (Value::Int(0), false), // free
        (Value::Int(0), false), // readers, us among them: a reader leads nobody
        (Value::Int(0), false), // readers without us
        (Value::Int(0), false), // our live permit
        (Value::Int(0), false), // permits
        (
            Value::Array(vec![bulk("wrongtype"), bulk("k7"), bulk("hash")]),
            false,
        ),
        (Value::Int(3), true), // our id with no TTL: ours, as exec.lua takes it
    ];
    for (n, (reply, written)) in expected.into_iter().enumerate().take(STATES) {
        let key = format!("k{n}");
        set_state(&conn, &key, n).await;
        let before = state(&conn, &key).await;
        assert_eq!(proclaim(&conn, &key, &record).await, reply, "state {n}");
        assert_eq!(
            state(&conn, &key).await,
            before,
            "state {n}: the lock key is untouched"
        );
        let stored = raw::get(&conn, &format!("{key}:leader")).await;
        assert_eq!(stored.is_some(), written, "state {n}");
        if written {
            assert_eq!(stored.unwrap(), record);
            let pttl = raw::pttl(&conn, &format!("{key}:leader")).await;
            assert!(
                pttl > (FENCE_MS - 60_000) as i64,
                "the record lives a retention: {pttl}"
            );
        }
    }
    // A record key of another type is refused, and left as it is.
    raw::cmd::<()>(&conn, "SET", &["held", ID_A, "PX", "60000"]).await;
    raw::cmd::<i64>(&conn, "LPUSH", &["held:leader", "x"]).await;
    assert_eq!(
        proclaim(&conn, "held", &record).await,
        Value::Array(vec![bulk("wrongtype"), bulk("held:leader"), bulk("list")])
    );
    assert_eq!(raw::key_type(&conn, "held:leader").await, "list");
}

#[tokio::test]
async fn leader_reads_the_holder_the_pttl_and_the_record_and_writes_nothing() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let reply = |holder: &str, pttl_set: bool, record: &str| {
        (holder.to_owned(), pttl_set, record.to_owned())
    };
    let read = |value: Value| match value {
        Value::Array(items) => match items.as_slice() {
            [Value::BulkString(holder), Value::Int(pttl), Value::BulkString(record)] => (
                String::from_utf8(holder.clone()).unwrap(),
                *pttl > 0,
                String::from_utf8(record.clone()).unwrap(),
            ),
            _ => panic!("{items:?}"),
        },
        other => panic!("{other:?}"),
    };
    set_state(&conn, "w", 0).await;
    raw::cmd::<()>(&conn, "SET", &["w:leader", "rec", "PX", "60000"]).await;
    assert_eq!(read(leader(&conn, "w").await), reply(ID_A, true, "rec"));
    set_state(&conn, "b", 1).await;
    assert_eq!(read(leader(&conn, "b").await), reply(ID_B, true, ""));
    assert_eq!(read(leader(&conn, "free").await), reply("", false, ""));
    for (n, key) in [(3, "r"), (5, "p")] {
        set_state(&conn, key, n).await;
        assert_eq!(
            read(leader(&conn, key).await),
            reply("", true, ""),
            "state {n}"
        );
    }
    set_state(&conn, "h", 7).await;
    assert_eq!(
        leader(&conn, "h").await,
        Value::Array(vec![bulk("wrongtype"), bulk("h"), bulk("hash")])
    );
    set_state(&conn, "n", 8).await;
    assert_eq!(
        leader(&conn, "n").await,
        Value::Array(vec![bulk("noexpiry"), bulk("n")])
    );
    raw::cmd::<i64>(&conn, "SADD", &["w2:leader", "x"]).await;
    set_state(&conn, "w2", 0).await;
    assert_eq!(
        leader(&conn, "w2").await,
        Value::Array(vec![bulk("wrongtype"), bulk("w2:leader"), bulk("set")])
    );
    let changes: String = raw::cmd(&conn, "INFO", &["persistence"]).await;
    let before = changes.clone();
    let _ = leader(&conn, "w").await;
    let after: String = raw::cmd(&conn, "INFO", &["persistence"]).await;
    let dirty = |info: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix("rdb_changes_since_last_save:"))
            .unwrap()
            .trim()
            .to_owned()
    };
    assert_eq!(dirty(&before), dirty(&after), "leader.lua writes nothing");
}
