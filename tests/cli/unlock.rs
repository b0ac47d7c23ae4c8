//! `redismutex unlock --force`, run as a real process against throwaway
//! `redis-server`s: refused without `--force`; a `lock` run forced out (it exits with the
//! lost-lock code); a lock of `--key`, readers and a semaphore released; a free lock
//! (exit 1); a key that is not a lock and one with no TTL left untouched (69); a bad key
//! (2); and over three nodes, with one of them down.
#![cfg(feature = "cli")]

use std::time::Duration;

use crate::common::cli_run::{self, finish, Run};
use crate::common::{self, raw, RedisServer};
use redis::aio::MultiplexedConnection;
use redismutex::{RwMutex, Semaphore};

const TTL: Duration = Duration::from_secs(30);

async fn setup() -> (RedisServer, String, MultiplexedConnection) {
    let server = RedisServer::start();
    let (url, conn) = (server.url(), server.conn().await);
    (server, url, conn)
}

/// `redismutex --url URL... ARGS...` run to its end.
async fn run(urls: &[&str], args: &[&str]) -> Run {
    finish(cli_run::spawn(urls, args)).await
}

#[tokio::test]
async fn without_force_it_refuses_saying_why_and_the_lock_stays() {
    let (_server, url, conn) = setup().await;
    let guard = common::mutex(&conn, "jobs", TTL).write().await.unwrap();
    let out = run(&[&url], &["unlock", "jobs"]).await;
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("--force"), "{out:?}");
    assert!(out.stderr.contains("\"jobs\""), "{out:?}");
    assert_eq!(out.stdout, "");
    assert_eq!(raw::get(&conn, "jobs").await.as_deref(), Some(guard.id()));
    assert!(!guard.is_cancelled());
}

#[tokio::test]
async fn a_lock_run_is_forced_out_and_exits_with_the_lost_code() {
    let (_server, url, conn) = setup().await;
    let (holder, key, id) = cli_run::hold(&[&url], &["--ttl", "1s"]).await;
    assert_eq!(raw::get(&conn, &key).await.as_deref(), Some(id.as_str()));
    let fence = raw::stored_token(&conn, "jobs:fence").await;

    let out = run(&[&url], &["unlock", "jobs", "--force"]).await;
    assert_eq!((out.code, out.stderr.as_str()), (Some(0), ""), "{out:?}");
    assert_eq!(out.stdout, "jobs: released by force\n");
    assert!(!raw::exists(&conn, "jobs").await);
    assert_eq!(raw::stored_token(&conn, "jobs:fence").await, fence + 1);
    let held = finish(holder).await;
    assert_eq!(
        held.code,
        Some(70),
        "its next refresh found the lock gone: {held:?}"
    );
}

#[tokio::test]
async fn a_keyed_lock_readers_and_a_semaphore_are_released_and_a_free_lock_exits_1() {
    let (_server, url, conn) = setup().await;
    let mx = common::mutex(&conn, "jobs", TTL);
    let _writer = mx.write().key("7").await.unwrap();
    let out = run(&[&url], &["unlock", "jobs", "--key", "7", "--force"]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "jobs:7: released by force\n");
    assert!(!raw::exists(&conn, "jobs:7").await);

    let _readers = (mx.read().await.unwrap(), mx.read().await.unwrap());
    let out = run(&[&url], &["unlock", "--force", "jobs"]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!raw::exists(&conn, "jobs").await);

    let sem = Semaphore::builder(conn.clone(), "exports", 3)
        .ttl(TTL)
        .build()
        .unwrap();
    let _permit = sem.acquire().await.unwrap();
    let out = run(&[&url], &["unlock", "exports", "--force"]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!raw::exists(&conn, "exports").await);

    let out = run(&[&url], &["unlock", "exports", "--force"]).await;
    assert_eq!((out.code, out.stderr.as_str()), (Some(1), ""), "{out:?}");
    assert_eq!(out.stdout, "exports: nothing was held\n");
}

#[tokio::test]
async fn a_key_that_is_not_a_lock_is_left_untouched_and_a_bad_key_is_a_usage_error() {
    let (_server, url, conn) = setup().await;
    let _: i64 = raw::cmd(&conn, "HSET", &["jobs", "field", "value"]).await;
    let _: i64 = raw::cmd(&conn, "PEXPIRE", &["jobs", "60000"]).await;
    let out = run(&[&url], &["unlock", "jobs", "--force"]).await;
    assert_eq!(out.code, Some(69), "{out:?}");
    assert!(
        out.stderr.contains("lock key \"jobs\"") && out.stderr.contains("hash"),
        "{out:?}"
    );
    assert_eq!(raw::key_type(&conn, "jobs").await, "hash");

    let _: () = raw::cmd(&conn, "SET", &["jobs:config", "data"]).await;
    let out = run(&[&url], &["unlock", "jobs", "--key", "config", "--force"]).await;
    assert_eq!(out.code, Some(69), "{out:?}");
    assert!(
        out.stderr.contains("TTL") || out.stderr.contains("expir"),
        "{out:?}"
    );
    assert_eq!(
        raw::get(&conn, "jobs:config").await.as_deref(),
        Some("data")
    );

    let out = run(&[&url], &["unlock", "jobs", "--key", "x:fence", "--force"]).await;
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("jobs:x:fence"), "{out:?}");
}

#[tokio::test]
async fn over_three_nodes_every_node_is_cleared_even_with_one_down() {
    let mut servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let mut conns = Vec::new();
    for server in &servers {
        conns.push(server.conn().await);
    }
    let quorum = redismutex::Quorum::new(conns.clone()).unwrap();
    let mx = RwMutex::builder(quorum, "jobs").ttl(TTL).build().unwrap();
    let guard = mx.write().await.unwrap();
    let out = run(&urls, &["unlock", "jobs", "--force"]).await;
    assert_eq!((out.code, out.stderr.as_str()), (Some(0), ""), "{out:?}");
    for conn in &conns {
        assert!(!raw::exists(conn, "jobs").await);
    }
    drop(guard);

    let _again = mx.write().await.unwrap();
    servers[2].stop();
    let out = run(&urls, &["unlock", "jobs", "--force"]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    for conn in &conns[..2] {
        assert!(!raw::exists(conn, "jobs").await);
    }
    servers[1].stop();
    let out = run(&urls, &["unlock", "jobs", "--force"]).await;
    assert_eq!(out.code, Some(69), "fewer than a majority answer: {out:?}");
    assert!(out.stderr.contains("quorum of 3 nodes"), "{out:?}");
}
