//! The lock key the command forms, which is the library's (`RwMutex::lock_key`):
//! `--hash-tag-keys` tags it as `Builder::hash_tag_keys` does, for `lock`, `status` and
//! `unlock` alike, on one server and on a Redis Cluster (feature `cluster`), where
//! `status` reads the tagged key on the master that serves its slot.
#![cfg(feature = "cli")]

use std::time::Duration;

use crate::common::cli_run::{self, finish, Run};
use crate::common::{raw, RedisServer};
use crate::run::{status_json, status_text};
use redismutex::{RwMutex, Semaphore};

/// The TTL of the locks the tests take: nothing expires by itself.
const TTL: Duration = Duration::from_secs(30);

/// `redismutex --url URL ARGS...` run to its end.
async fn run(url: &str, args: &[&str]) -> Run {
    finish(cli_run::spawn(&[url], args)).await
}

#[tokio::test]
async fn hash_tag_keys_tags_the_lock_key_as_the_library_does() {
    let server = RedisServer::start();
    let (url, conn) = (server.url(), server.conn().await);
    let mx = RwMutex::builder(conn.clone(), "jobs")
        .ttl(TTL)
        .hash_tag_keys(true)
        .build()
        .unwrap();
    assert_eq!(mx.lock_key("7"), "jobs:{7}");
    assert_eq!(mx.lock_key(""), "{jobs}");
    let guard = mx.write().key("7").await.unwrap();
    assert_eq!(guard.key(), mx.lock_key("7"), "the key a request takes");

    let tagged = ["--key", "7", "--hash-tag-keys"];
    let text = status_text(&[&url], "jobs", &tagged).await;
    assert!(
        text[0].starts_with(&format!("jobs:{{7}}: write-locked by {} (", guard.id())),
        "{text:?}"
    );
    let status = status_json(&[&url], "jobs", &tagged).await;
    assert_eq!(
        (&status["key"], &status["writer"], &status["fence"]["key"]),
        (
            &"jobs:{7}".into(),
            &guard.id().into(),
            &"jobs:{7}:fence".into()
        ),
        "{status}"
    );
    // Without the flag the command reads the untagged key, which nobody holds.
    let plain = status_text(&[&url], "jobs", &["--key", "7"]).await;
    assert_eq!(plain[0], "jobs:7: free");

    let out = run(
        &url,
        &[
            "lock",
            "jobs",
            "--key",
            "8",
            "--hash-tag-keys",
            "--",
            "sh",
            "-c",
        ]
        .into_iter()
        .chain(["echo $REDISMUTEX_KEY"])
        .collect::<Vec<_>>(),
    )
    .await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (Some(0), "jobs:{8}\n"),
        "{out:?}"
    );
    assert!(
        raw::exists(&conn, "jobs:{8}:fence").await,
        "the fence it left"
    );

    let out = run(
        &url,
        &["unlock", "jobs", "--key", "7", "--hash-tag-keys", "--force"],
    )
    .await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (Some(0), "jobs:{7}: released by force\n"),
        "{out:?}"
    );
    assert!(!raw::exists(&conn, "jobs:{7}").await);
    // A semaphore's key is tagged the same way, and status reads it as one.
    let pool = Semaphore::builder(conn.clone(), "pool", 2)
        .ttl(TTL)
        .hash_tag_keys(true)
        .build()
        .unwrap();
    let permit = pool.acquire().key("3").await.unwrap();
    assert_eq!(
        (pool.lock_key("3"), permit.key()),
        ("pool:{3}".to_owned(), "pool:{3}")
    );
    let status = status_json(
        &[&url],
        "pool",
        &["--key", "3", "--hash-tag-keys", "--permits", "2"],
    )
    .await;
    assert_eq!(
        (
            &status["key"],
            &status["state"],
            &status["semaphore"]["holders"][0]["id"]
        ),
        (&"pool:{3}".into(), &"semaphore".into(), &permit.id().into()),
        "{status}"
    );

    let name = ["{", "}"].concat();
    let out = run(&url, &["status", &name, "--hash-tag-keys"]).await;
    assert_eq!(out.code, Some(2), "a name no tag can be made for: {out:?}");
    assert!(out.stderr.contains("invalid options"), "{out:?}");
}

#[cfg(feature = "cluster")]
#[tokio::test]
async fn status_on_a_cluster_names_the_tagged_key_on_its_master() {
    use crate::common::cluster::{slot, Cluster};

    let cluster = Cluster::start();
    let mx = RwMutex::builder(cluster.conn().await, "orders")
        .ttl(TTL)
        .hash_tag_keys(true)
        .build()
        .unwrap();
    let guard = mx.write().key("42").await.unwrap();
    let key = mx.lock_key("42");
    assert_eq!((guard.key(), key.as_str()), ("orders:{42}", "orders:{42}"));
    let master = cluster.url(cluster.master_of_slot(slot(&key)));

    let tagged = ["--key", "42", "--hash-tag-keys"];
    let status = status_json(&[&master], "orders", &tagged).await;
    assert_eq!(
        (&status["key"], &status["state"], &status["writer"]),
        (&key.as_str().into(), &"write".into(), &guard.id().into()),
        "{status}"
    );
    assert_eq!(status["fence"]["key"], format!("{key}:fence"), "{status}");
    let text = status_text(&[&master], "orders", &tagged).await;
    assert!(
        text[0].starts_with(&format!("orders:{{42}}: write-locked by {} (", guard.id())),
        "{text:?}"
    );

    // Untagged, the command names `orders:42`, whose intent and fence keys the cluster
    // refuses to read in one script: they hash to other slots.
    let plain = cluster.url(cluster.master_of_slot(slot("orders:42")));
    let out = run(&plain, &["status", "orders", "--key", "42"]).await;
    assert_eq!(out.code, Some(69), "{out:?}");
    assert!(
        out.stderr.contains(r#"lock key "orders:42""#) && out.stderr.contains("CrossSlot"),
        "{out:?}"
    );

    let out = run(
        &master,
        &["unlock", "orders", "--force"]
            .into_iter()
            .chain(tagged)
            .collect::<Vec<_>>(),
    )
    .await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (Some(0), "orders:{42}: released by force\n"),
        "{out:?}"
    );
    let status = status_json(&[&master], "orders", &tagged).await;
    assert_eq!(status["state"], "free", "{status}");
}
