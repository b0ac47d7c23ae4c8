//! What a pipeline may hold: replies parsed as the pipeline parses them, a command that
//! fails halfway, empty and huge pipelines, commands whose keys move, and what is refused
//! before anything runs. Never a panic.

use std::time::Duration;

use crate::common::{self, raw, RedisServer};
use redis::aio::MultiplexedConnection;
use redismutex::{Error, WriteGuard};

const TTL: Duration = Duration::from_secs(30);

async fn held(conn: &MultiplexedConnection) -> WriteGuard {
    common::mutex(conn, "entry", TTL).write().await.unwrap()
}

#[tokio::test]
async fn replies_parse_as_the_pipeline_would_parse_them() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let guard = held(&conn).await;
    let mut pipe = redis::pipe();
    pipe.set("a", "1")
        .ignore()
        .incr("b", 5)
        .get("a")
        .get("missing")
        .hset("h", "f", "v")
        .ignore()
        .hgetall("h");
    type Replies = (
        i64,
        String,
        Option<String>,
        std::collections::HashMap<String, String>,
    );
    let (b, a, missing, hash): Replies = guard.exec(&pipe).await.unwrap();
    assert_eq!((b, a.as_str(), missing), (5, "1", None));
    assert_eq!(hash.get("f").map(String::as_str), Some("v"));
    // The same pipeline sent bare parses to the same values.
    let bare: Replies = pipe.query_async(&mut conn.clone()).await.unwrap();
    assert_eq!((bare.0, bare.1, bare.2, bare.3), (10, a, None, hash));
    // An atomic pipeline (a transaction when sent bare) too.
    pipe.atomic();
    let (b, ..): Replies = guard.exec(&pipe).await.unwrap();
    assert_eq!(b, 15);
    // Replies that do not parse as asked: the commands ran, the error says so.
    let mut incr = redis::pipe();
    incr.incr("b", 1);
    let unparsed = guard.exec::<(Vec<String>, i64)>(&incr).await;
    assert!(
        matches!(&unparsed, Err(Error::Redis { key, .. }) if key == "entry"),
        "{unparsed:?}"
    );
    assert_eq!(raw::get(&conn, "b").await.as_deref(), Some("16"));
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn a_command_that_fails_says_how_many_ran_before_it_and_their_writes_stay() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let guard = held(&conn).await;
    let _: i64 = raw::cmd(&conn, "HSET", &["a-hash", "f", "v"]).await;
    let mut pipe = redis::pipe();
    pipe.set("first", "1")
        .set("second", "2")
        .incr("a-hash", 1)
        .set("fourth", "4");
    let failed = guard.exec::<()>(&pipe).await;
    let Err(Error::CommandFailed {
        key, ran, source, ..
    }) = &failed
    else {
        panic!("{failed:?}");
    };
    assert_eq!((key.as_str(), *ran), ("entry", 2));
    assert_eq!(source.code(), Some("WRONGTYPE"), "{source}");
    assert!(failed
        .as_ref()
        .unwrap_err()
        .to_string()
        .contains("command 3"));
    assert_eq!(raw::get(&conn, "first").await.as_deref(), Some("1"));
    assert_eq!(raw::get(&conn, "second").await.as_deref(), Some("2"));
    assert!(
        !raw::exists(&conn, "fourth").await,
        "nothing after the failure ran"
    );
    assert_eq!(
        raw::key_type(&conn, "a-hash").await,
        "hash",
        "the hash is untouched"
    );
    // Wrong arity fails the same way, as the first command: nothing ran.
    let mut arity = redis::pipe();
    arity.cmd("SET").arg("only-a-key");
    let failed = guard.exec::<()>(&arity).await;
    assert!(
        matches!(failed, Err(Error::CommandFailed { ran: 0, .. })),
        "{failed:?}"
    );
    assert!(
        !guard.is_cancelled(),
        "a failed command does not end the lock"
    );
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn an_empty_pipeline_checks_the_lock_and_runs_nothing() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let guard = held(&conn).await;
    let (): () = guard.exec(&redis::pipe()).await.unwrap();
    let replies: Vec<redis::Value> = guard.exec(&redis::pipe()).await.unwrap();
    assert!(replies.is_empty());
    let _: () = raw::cmd(&conn, "DEL", &["entry"]).await;
    let refused = guard.exec::<()>(&redis::pipe()).await;
    assert!(matches!(refused, Err(Error::NotHeld { .. })), "{refused:?}");
}

#[tokio::test]
async fn huge_pipelines_run_whole_and_one_command_past_the_limit_is_refused() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    // 20,000 commands in one script can take longer than redis-rs's default response
    // timeout (500 ms) on a loaded machine; the test is about what runs, not how fast.
    conn.set_response_timeout(Duration::from_secs(10));
    let guard = held(&conn).await;
    // 20,000 commands in one step.
    let mut many = redis::pipe();
    for n in 0..20_000 {
        many.cmd("SET").arg(format!("k{n}")).arg(n).ignore();
    }
    many.cmd("DBSIZE");
    let (size,): (i64,) = guard.exec(&many).await.unwrap();
    assert_eq!(size, 20_002, "20,000 keys, the lock key and its fence key");
    // One command of 7,000 arguments, the most a guarded command may have.
    let mut wide = redis::pipe();
    let rpush = wide.cmd("RPUSH").arg("wide");
    for n in 0..6_998 {
        rpush.arg(n);
    }
    let (len,): (i64,) = guard.exec(&wide).await.unwrap();
    assert_eq!(len, 6_998);
    let mut wider = wide.clone();
    wider.clear();
    let rpush = wider.cmd("RPUSH").arg("wider");
    for n in 0..6_999 {
        rpush.arg(n);
    }
    let refused = guard.exec::<(i64,)>(&wider).await;
    assert!(
        matches!(&refused, Err(Error::InvalidPipeline { reason, .. }) if reason.contains("7000")),
        "{refused:?}"
    );
    assert!(!raw::exists(&conn, "wider").await);
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn commands_whose_keys_move_or_have_subcommands_run_with_their_keys_found() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let guard = held(&conn).await;
    let mut pipe = redis::pipe();
    pipe.zadd("z1", "a", 1)
        .ignore()
        .zadd("z2", "b", 2)
        .ignore()
        .cmd("ZUNIONSTORE")
        .arg("zu")
        .arg(2)
        .arg("z1")
        .arg("z2")
        .cmd("OBJECT")
        .arg("ENCODING")
        .arg("zu")
        .cmd("OBJECT")
        .arg("HELP")
        .ignore()
        .cmd("MSET")
        .arg("m1")
        .arg("x")
        .arg("m2")
        .arg("y")
        .ignore()
        // Names in any case, as Redis takes them.
        .cmd("exists")
        .arg("m1")
        .arg("m2")
        .arg("nope");
    let (union, encoding, exists): (i64, String, i64) = guard.exec(&pipe).await.unwrap();
    assert_eq!((union, exists), (2, 2));
    // listpack from Redis 7.0, ziplist before.
    assert!(
        ["listpack", "ziplist"].contains(&encoding.as_str()),
        "{encoding}"
    );
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn what_cannot_run_as_one_guarded_step_is_refused_before_anything_runs() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let guard = held(&conn).await;
    let refused = |pipe: redis::Pipeline, why: &'static str| {
        let guard = &guard;
        async move {
            let result = guard.exec::<redis::Value>(&pipe).await;
            match result {
                Err(Error::InvalidPipeline { key, reason, .. }) => {
                    assert_eq!(key, "entry");
                    assert!(reason.contains(why), "{reason:?} lacks {why:?}");
                }
                other => panic!("{why}: {other:?}"),
            }
        }
    };
    let mut unknown = redis::pipe();
    unknown.set("ran", 1).cmd("NOSUCHCOMMAND").arg("x");
    refused(unknown, "not a command this server knows").await;
    let mut multi = redis::pipe();
    multi.set("ran", 1).cmd("MULTI");
    refused(multi, "cannot run inside a script").await;
    // A subcommand that cannot run in a script (from Redis 7 the flag is the
    // subcommand's, not the container's), in either case, after a write that would run.
    for config in ["GET", "get"] {
        let mut pipe = redis::pipe();
        pipe.set("ran", 1)
            .cmd("CONFIG")
            .arg(config)
            .arg("maxmemory");
        refused(pipe, "cannot run inside a script").await;
    }
    let mut client = redis::pipe();
    client.set("ran", 1).cmd("CLIENT").arg("LIST");
    refused(client, "cannot run inside a script").await;
    let mut own = redis::pipe();
    own.set("ran", 1).del("entry");
    refused(own, "a key of the lock itself").await;
    let mut fence = redis::pipe();
    fence.set("entry:fence", 1);
    refused(fence, "a key of the lock itself").await;
    let mut empty = redis::pipe();
    empty.add_command(redis::Cmd::new());
    refused(empty, "is empty").await;
    assert!(!raw::exists(&conn, "ran").await, "nothing ran");
    assert!(!guard.is_cancelled());
    // The lock itself is untouched and still ours.
    let (): () = guard.exec(&redis::pipe()).await.unwrap();
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn integer_replies_pass_through_a_lua_number_exact_only_up_to_2_pow_53() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let guard = held(&conn).await;
    let mut pipe = redis::pipe();
    pipe.set("small", (1_i64 << 53) - 1)
        .ignore()
        .incr("small", 0)
        .set("big", (1_i64 << 53) + 1)
        .ignore()
        .incr("big", 0)
        .get("big");
    let (small, big, text): (i64, i64, String) = guard.exec(&pipe).await.unwrap();
    assert_eq!(small, (1 << 53) - 1, "exact below 2^53");
    assert_eq!(
        big,
        1 << 53,
        "an integer reply above 2^53 is rounded by Lua"
    );
    assert_eq!(
        text,
        ((1_i64 << 53) + 1).to_string(),
        "a string reply is exact"
    );
    guard.unlock().await.unwrap();
}
