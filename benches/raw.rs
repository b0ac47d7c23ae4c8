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

/// Takes one of `ARGV[3]` permits of the sorted-set semaphore `KEYS[1]` for `ARGV[1]`,
/// expiring holders by the server clock: the raw semaphore acquire.
pub static SEMAPHORE_ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000) \
         redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) \
         if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end \
         redis.call('ZADD', KEYS[1], now + ARGV[2], ARGV[1]) \
         redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1",
    )
});

/// One raw semaphore cycle on a semaphore with a free permit: [`SEMAPHORE_ACQUIRE`], then
/// `ZREM`.
pub async fn raw_semaphore_cycle(
    conn: &mut impl redis::aio::ConnectionLike,
    key: &str,
    id: &str,
    ttl_ms: u64,
    permits: u32,
) {
    let acquired: i64 = SEMAPHORE_ACQUIRE
        .key(key)
        .arg(id)
        .arg(ttl_ms)
        .arg(permits)
        .invoke_async(conn)
        .await
        .expect("semaphore acquire script");
    assert_eq!(acquired, 1, "no permit of {key} was free");
    let removed: i64 = redis::cmd("ZREM")
        .arg(key)
        .arg(id)
        .query_async(conn)
        .await
        .expect("ZREM");
    assert_eq!(removed, 1, "{id} held no permit of {key}");
}
