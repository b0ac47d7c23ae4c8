//! `redismutex lock --detach`, `renew --lease` and `unlock --lease`, run as real
//! processes against a throwaway `redis-server`: a lock handed from one shell step to the
//! next, `status` naming its holder (host, pid, program, label), a renewal that keeps the
//! lease, a release that frees that hold only (exit 1 once it is gone, and a newer
//! holder untouched), a lease that does not parse (2), and over three nodes.
#![cfg(feature = "cli")]

use std::time::Duration;

use crate::common::cli_run::{self, finish, Run, BIN};
use crate::common::{self, raw, RedisServer};

/// `redismutex --url URL... ARGS...` run to its end.
async fn run(urls: &[&str], args: &[&str]) -> Run {
    finish(cli_run::spawn(urls, args)).await
}

/// The lease `lock --detach` printed: its one line.
async fn detach(urls: &[&str], args: &[&str]) -> String {
    let mut all = vec!["lock", "--detach"];
    all.extend_from_slice(args);
    let out = run(urls, &all).await;
    assert_eq!((out.code, out.stderr.as_str()), (Some(0), ""), "{out:?}");
    let lease = out.stdout.trim_end().to_owned();
    assert!(!lease.contains('\n'), "one line: {out:?}");
    lease
}

#[tokio::test]
async fn a_detached_lock_stays_held_is_named_by_status_renewed_and_released_by_its_lease() {
    let server = RedisServer::start();
    let (url, conn) = (server.url(), server.conn().await);
    let lease = detach(&[&url], &["jobs", "--ttl", "5s", "--label", "nightly"]).await;
    let parsed: redismutex::Lease = lease.parse().unwrap();
    let id = parsed.id().to_owned();
    assert_eq!(raw::get(&conn, "jobs").await.as_deref(), Some(id.as_str()));

    let out = run(&[&url], &["status", "jobs"]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let row = out
        .stdout
        .lines()
        .find(|line| line.trim_start().starts_with(&id))
        .unwrap_or_else(|| panic!("a row for {id}: {out:?}"));
    assert!(out.stdout.contains("HOLDER"), "{out:?}");
    assert!(row.contains("redismutex"), "the program: {row}");
    assert!(row.contains("nightly"), "the label: {row}");

    let json = run(&[&url], &["status", "jobs", "--json"]).await;
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let info = &value["holder_info"][0];
    assert_eq!(info["id"], id.as_str(), "{value}");
    assert_eq!(info["label"], "nightly", "{value}");
    assert_eq!(info["program"], "redismutex", "{value}");
    assert!(info["pid"].as_u64().is_some_and(|pid| pid > 0), "{value}");

    let out = run(&[&url], &["renew", "--lease", &lease, "--ttl", "60s"]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(raw::pttl(&conn, "jobs").await > 30_000, "renewed for 60 s");
    assert_eq!(raw::get(&conn, "jobs").await.as_deref(), Some(id.as_str()));

    let out = run(&[&url], &["unlock", "--lease", &lease]).await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (Some(0), "jobs: released\n"),
        "{out:?}"
    );
    assert!(!raw::exists(&conn, "jobs").await);
    assert!(
        !raw::exists(&conn, "jobs:holders").await,
        "its description left with it"
    );

    let out = run(&[&url], &["unlock", "--lease", &lease]).await;
    assert_eq!(out.code, Some(1), "gone: {out:?}");
    let out = run(&[&url], &["renew", "--lease", &lease]).await;
    assert_eq!(out.code, Some(1), "gone: {out:?}");
}

#[tokio::test]
async fn shell_steps_hand_the_lock_on_and_a_stale_lease_frees_no_newer_holder() {
    let server = RedisServer::start();
    let (url, conn) = (server.url(), server.conn().await);
    let script = format!(
        "set -e; LEASE=$('{BIN}' --url '{url}' lock --detach jobs --ttl 30s); \
         '{BIN}' --url '{url}' status jobs; \
         '{BIN}' --url '{url}' unlock --lease \"$LEASE\"; echo \"$LEASE\""
    );
    let out = tokio::time::timeout(
        common::LIVENESS,
        tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .env_remove("REDIS_URL")
            .output(),
    )
    .await
    .expect("the steps end within LIVENESS")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("write-locked by"),
        "status saw it held: {stdout}"
    );
    assert!(stdout.contains("jobs: released"), "{stdout}");
    assert!(!raw::exists(&conn, "jobs").await);

    // The lease is stale now: a newer holder is never freed by it.
    let lease = stdout.lines().last().unwrap().to_owned();
    let mx = common::mutex(&conn, "jobs", Duration::from_secs(30));
    let newer = mx.write().await.unwrap();
    let out = run(&[&url], &["unlock", "--lease", &lease]).await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(raw::get(&conn, "jobs").await.as_deref(), Some(newer.id()));
    assert!(!newer.is_cancelled());
}

#[tokio::test]
async fn a_lease_that_does_not_parse_is_a_usage_error() {
    let server = RedisServer::start();
    let url = server.url();
    for bad in ["", "nonsense", "redismutex-lease:9:00:w:1:6a6f6273"] {
        let out = run(&[&url], &["unlock", "--lease", bad]).await;
        assert_eq!(out.code, Some(2), "{bad:?}: {out:?}");
        assert!(out.stderr.contains("lease"), "{bad:?}: {out:?}");
    }
    let out = run(&[&url], &["unlock", "jobs", "--lease", "x"]).await;
    assert_eq!(out.code, Some(2), "NAME and --lease: {out:?}");
    let out = run(&[&url], &["lock", "--detach", "jobs", "--", "true"]).await;
    assert_eq!(out.code, Some(2), "--detach and a command: {out:?}");
}

#[tokio::test]
async fn over_three_nodes_a_detached_lock_is_renewed_and_released_on_each() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let mut conns = Vec::new();
    for server in &servers {
        conns.push(server.conn().await);
    }
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let lease = detach(&urls, &["jobs", "--ttl", "5s"]).await;
    let id = lease.parse::<redismutex::Lease>().unwrap().id().to_owned();
    for conn in &conns {
        assert_eq!(raw::get(conn, "jobs").await.as_deref(), Some(id.as_str()));
    }
    let out = run(&urls, &["renew", "--lease", &lease, "--ttl", "60s"]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let out = run(&urls, &["unlock", "--lease", &lease]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    for conn in &conns {
        assert!(!raw::exists(conn, "jobs").await);
    }
}
