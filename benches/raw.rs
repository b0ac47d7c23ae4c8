//! The raw redis-rs baseline shared by `benches/cycle.rs`, `benches/cluster.rs` and
//! `examples/perf.rs`: what a lock costs with no library, so the library's figures read
//! as a ratio to it.

use std::sync::LazyLock;

use redis::Script;

/// Deletes `KEYS[1]` when it holds `ARGV[1]`: the raw release.
pub static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET',KEYS[1])==ARGV[1] then return redis.call('DEL',KEYS[1]) end return 0",
    )
});

/// Deletes `KEYS[1]` when it holds `ARGV[1]`, then publishes `ARGV[1]` on
/// `KEYS[1]:released`: the raw release that wakes raw waiters.
pub static RELEASE_PUBLISH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET',KEYS[1])==ARGV[1] then redis.call('DEL',KEYS[1]) \
         redis.call('PUBLISH',KEYS[1]..':released',ARGV[1]) return 1 end return 0",
    )
});

/// As [`RELEASE_PUBLISH`], by `SPUBLISH`: the raw release on a Redis Cluster, where
/// `KEYS[1]:released` shares the key's slot when the key has a hash tag.
pub static RELEASE_SPUBLISH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET',KEYS[1])==ARGV[1] then redis.call('DEL',KEYS[1]) \
         redis.call('SPUBLISH',KEYS[1]..':released',ARGV[1]) return 1 end return 0",
    )
});

/// A 32-hex-character lock id, like the library's.
pub fn raw_id(n: usize) -> String {
    format!("{n:032x}")
}

/// `SET key id NX PX ttl_ms`: whether it was set.
pub async fn raw_set(
    conn: &mut impl redis::aio::ConnectionLike,
    key: &str,
    id: &str,
    ttl_ms: u64,
) -> redis::RedisResult<bool> {
    let set: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(id)
        .arg("NX")
        .arg("PX")
        .arg(ttl_ms)
        .query_async(conn)
        .await?;
    Ok(set.is_some())
}

/// Releases `key` with `script`, asserting that `id` held it (benches only: a failed
/// release is a broken measurement).
pub async fn raw_release(
    conn: &mut impl redis::aio::ConnectionLike,
    script: &Script,
    key: &str,
    id: &str,
) {
    let released: i64 = script
        .key(key)
        .arg(id)
        .invoke_async(conn)
        .await
        .expect("release script");
    assert_eq!(released, 1, "{key} was not held by {id}");
}

/// One raw write cycle on a free key: `SET NX PX ttl_ms`, then the compare-and-delete
/// [`RELEASE`].
pub async fn raw_cycle(
    conn: &mut impl redis::aio::ConnectionLike,
    key: &str,
    id: &str,
    ttl_ms: u64,
) {
    assert!(
        raw_set(conn, key, id, ttl_ms).await.expect("SET NX PX"),
        "{key} is taken"
    );
    raw_release(conn, &RELEASE, key, id).await;
}
