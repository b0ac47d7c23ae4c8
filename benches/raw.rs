//! The raw redis-rs baseline shared by `benches/cycle.rs`, `benches/cluster.rs`,
//! `benches/quorum.rs` and `examples/perf/`: what a lock costs with no library, so the
//! library's figures read as a ratio to it. On one server a raw write cycle is `SET NX
//! PX` + a compare-and-delete script; over a quorum of independent servers it is the same
//! Redis work sent to every node at once in three rounds, each bounded per node by a
//! tenth of the TTL: `SET NX PX` + `INCR <key>:fence` pipelined (decided at a majority),
//! `SET <key>:fence <largest token> PX` (decided at a majority), and the
//! compare-and-delete script (waiting for every node). A fenced read floor is one
//! script checking the intent, adding the reader and minting a token, then one removing
//! it (and publishing when the set is empty). A raw multi-key cycle is one all-or-none
//! script setting every key `PX` and one compare-and-delete script over them all.

use std::future::Future;
use std::sync::LazyLock;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Script};

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

/// One fenced write cycle on a free key, the least Redis work a fenced, notifying write
/// lock does: `SET key id NX PX ttl_ms` and `INCR key:fence` pipelined (one round trip;
/// on a cluster the key's hash tag puts both in one slot), then `release`, a
/// compare-delete-publish script ([`RELEASE_PUBLISH`], or [`RELEASE_SPUBLISH`] on a
/// cluster).
pub async fn raw_fenced_cycle(
    conn: &mut impl redis::aio::ConnectionLike,
    release: &Script,
    key: &str,
    id: &str,
    ttl_ms: u64,
) {
    let (set, _token): (Option<String>, u64) = redis::pipe()
        .cmd("SET")
        .arg(key)
        .arg(id)
        .arg("NX")
        .arg("PX")
        .arg(ttl_ms)
        .cmd("INCR")
        .arg(format!("{key}:fence"))
        .query_async(conn)
        .await
        .expect("SET NX PX + INCR");
    assert!(set.is_some(), "{key} is taken");
    raw_release(conn, release, key, id).await;
}

/// The fenced read floor's acquire: the least Redis work a fenced read lock does, in one
/// script that defines no function. KEYS: lock key, intent key, fence key; ARGV: id, TTL
/// ms. A waiting writer's intent keeps the reader out (-1); a writer's string refuses the
/// `SADD` (-2); else the reader is in the set, the set lives at least the TTL, and the
/// reply is the token, one more than the fence counter.
pub static READ_FLOOR: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end \
         if type(redis.pcall('SADD', KEYS[1], ARGV[1])) ~= 'number' then return -2 end \
         if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then \
         redis.call('PEXPIRE', KEYS[1], ARGV[2]) end \
         return redis.call('INCR', KEYS[3])",
    )
});

/// The fenced read floor's release: the reader leaves the set, and the last one out
/// publishes its id on `KEYS[1]:released`. KEYS: lock key; ARGV: id. Replies 1 when `id`
/// was a reader.
pub static READ_FLOOR_RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then return 0 end \
         if redis.call('EXISTS', KEYS[1]) == 0 then \
         redis.call('PUBLISH', KEYS[1]..':released', ARGV[1]) end return 1",
    )
});

/// One fenced read-floor cycle of reader `id` on `key`: [`READ_FLOOR`], then
/// [`READ_FLOOR_RELEASE`]; an error when the reader was refused or not released.
pub async fn read_floor_cycle(
    conn: &mut impl ConnectionLike,
    key: &str,
    id: &str,
    ttl_ms: u64,
) -> RedisResult<Result<(), String>> {
    let token: i64 = READ_FLOOR
        .key(key)
        .key(format!("{key}:lock-intent"))
        .key(format!("{key}:fence"))
        .arg(id)
        .arg(ttl_ms)
        .invoke_async(conn)
        .await?;
    if token < 1 {
        return Ok(Err(format!("the read floor on {key} replied {token}")));
    }
    let released: i64 = READ_FLOOR_RELEASE
        .key(key)
        .arg(id)
        .invoke_async(conn)
        .await?;
    if released != 1 {
        return Ok(Err(format!(
            "the read floor's release on {key} replied {released}"
        )));
    }
    Ok(Ok(()))
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

// ---------------------------------------------------------------- quorum (Redlock)

/// The raw quorum baseline's per-node bound: a tenth of the TTL, as the library's.
pub fn raw_node_bound(ttl_ms: u64) -> Duration {
    Duration::from_millis((ttl_ms / 10).max(1))
}

/// How many of `nodes` make a majority.
pub fn raw_majority(nodes: usize) -> usize {
    nodes / 2 + 1
}

/// One raw round: `call` sent to every node at once, each bounded by `bound` (an error or
/// no answer in time is a no). With `at_majority` the round ends as soon as a majority
/// said yes (`Some`) or too few nodes are left for one, as the library's acquire rounds
/// do; the calls still in flight are dropped (each was already sent, and runs). Else it
/// waits for every node. The yes answers.
pub async fn raw_round<C, T, Fut>(
    nodes: &[C],
    bound: Duration,
    call: impl Fn(C) -> Fut,
    at_majority: bool,
) -> Vec<T>
where
    C: Clone,
    Fut: Future<Output = RedisResult<Option<T>>>,
{
    let needed = raw_majority(nodes.len());
    let mut calls: FuturesUnordered<_> = nodes
        .iter()
        .map(|node| tokio::time::timeout(bound, call(node.clone())))
        .collect();
    let (mut yes, mut left) = (Vec::new(), nodes.len());
    while let Some(reply) = calls.next().await {
        left -= 1;
        if let Ok(Ok(Some(reply))) = reply {
            yes.push(reply);
        }
        if at_majority && (yes.len() >= needed || yes.len() + left < needed) {
            break;
        }
    }
    yes
}

/// Round 1 of the raw quorum acquire: on every node at once, `SET key id NX PX ttl` and
/// `INCR key:fence` in one pipeline (not a transaction: the counter is bumped even when
/// the `SET` fails), decided at a majority of `SET`s. The largest token (`INCR` reply)
/// of the nodes that took the lock, when a majority did.
pub async fn raw_quorum_lock<C: ConnectionLike + Clone>(
    nodes: &[C],
    key: &str,
    id: &str,
    ttl_ms: u64,
) -> Option<u64> {
    let fence = format!("{key}:fence");
    let fence = fence.as_str();
    let tokens = raw_round(
        nodes,
        raw_node_bound(ttl_ms),
        |mut conn| async move {
            let (set, token): (Option<String>, u64) = redis::pipe()
                .cmd("SET")
                .arg(key)
                .arg(id)
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms)
                .cmd("INCR")
                .arg(fence)
                .query_async(&mut conn)
                .await?;
            Ok(set.map(|_| token))
        },
        true,
    )
    .await;
    if tokens.len() < raw_majority(nodes.len()) {
        return None;
    }
    tokens.into_iter().max()
}

/// Round 2 of the raw quorum acquire: on every node at once, `SET key:fence token PX
/// fence_ms` (an unconditional raise: the floor of the library's conditional
/// `fence.lua`), decided at a majority. Whether a majority confirmed.
pub async fn raw_quorum_raise<C: ConnectionLike + Clone>(
    nodes: &[C],
    key: &str,
    token: u64,
    ttl_ms: u64,
    fence_ms: u64,
) -> bool {
    let fence = format!("{key}:fence");
    let fence = fence.as_str();
    let raised = raw_round(
        nodes,
        raw_node_bound(ttl_ms),
        |mut conn| async move {
            let () = redis::cmd("SET")
                .arg(fence)
                .arg(token)
                .arg("PX")
                .arg(fence_ms)
                .query_async(&mut conn)
                .await?;
            Ok(Some(()))
        },
        true,
    )
    .await;
    raised.len() >= raw_majority(nodes.len())
}

/// The raw quorum release: `script` ([`RELEASE`] or [`RELEASE_PUBLISH`]) on every node at
/// once, waiting for every node (each bounded), as the library's release does. How many
/// nodes deleted the key.
pub async fn raw_quorum_release<C: ConnectionLike + Clone>(
    nodes: &[C],
    script: &Script,
    key: &str,
    id: &str,
    ttl_ms: u64,
) -> usize {
    raw_round(
        nodes,
        raw_node_bound(ttl_ms),
        |mut conn| async move {
            let released: i64 = script.key(key).arg(id).invoke_async(&mut conn).await?;
            Ok((released == 1).then_some(()))
        },
        false,
    )
    .await
    .len()
}

/// The raw quorum acquire: [`raw_quorum_lock`], then [`raw_quorum_raise`] to the largest
/// token; the token once both rounds won a majority. A lost round releases what it may
/// have taken on every node ([`RELEASE`]), as the library does.
pub async fn raw_quorum_acquire<C: ConnectionLike + Clone>(
    nodes: &[C],
    key: &str,
    id: &str,
    ttl_ms: u64,
    fence_ms: u64,
) -> Option<u64> {
    if let Some(token) = raw_quorum_lock(nodes, key, id, ttl_ms).await {
        if raw_quorum_raise(nodes, key, token, ttl_ms, fence_ms).await {
            return Some(token);
        }
    }
    raw_quorum_release(nodes, &RELEASE, key, id, ttl_ms).await;
    None
}

/// One raw quorum write cycle on a free key: [`raw_quorum_acquire`], then
/// [`raw_quorum_release`] with [`RELEASE`] (benches only: asserts that both won a
/// majority).
pub async fn raw_quorum_cycle<C: ConnectionLike + Clone>(
    nodes: &[C],
    key: &str,
    id: &str,
    ttl_ms: u64,
    fence_ms: u64,
) {
    assert!(
        raw_quorum_acquire(nodes, key, id, ttl_ms, fence_ms)
            .await
            .is_some(),
        "{key} is taken on a majority"
    );
    let released = raw_quorum_release(nodes, &RELEASE, key, id, ttl_ms).await;
    assert!(
        released >= raw_majority(nodes.len()),
        "{key} was released on {released} nodes"
    );
}

/// Sets every `KEYS[i]` to `ARGV[1]` with `PX ARGV[2]` when none of them exists, all or
/// none: the raw multi-key acquire (one script, as a multi-lock in one step takes its
/// keys, with no fence or intent). Replies 1 when taken, 0 when any key exists.
pub static ACQUIRE_ALL: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "for i=1,#KEYS do if redis.call('EXISTS',KEYS[i])==1 then return 0 end end \
         for i=1,#KEYS do redis.call('SET',KEYS[i],ARGV[1],'PX',ARGV[2]) end return 1",
    )
});

/// Deletes each `KEYS[i]` that holds `ARGV[1]`: the raw multi-key release. Replies the
/// number of keys deleted.
pub static RELEASE_ALL: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local n=0 for i=1,#KEYS do if redis.call('GET',KEYS[i])==ARGV[1] then \
         n=n+redis.call('DEL',KEYS[i]) end end return n",
    )
});

/// One raw multi-key write cycle on free `keys`: [`ACQUIRE_ALL`] with PX `ttl_ms`, then
/// [`RELEASE_ALL`]: two round trips whatever the number of keys. `Ok(false)` when a key
/// was taken or not every key was released.
pub async fn raw_set_cycle(
    conn: &mut impl ConnectionLike,
    keys: &[String],
    id: &str,
    ttl_ms: u64,
) -> RedisResult<bool> {
    let mut acquire = ACQUIRE_ALL.prepare_invoke();
    let mut release = RELEASE_ALL.prepare_invoke();
    for key in keys {
        acquire.key(key);
        release.key(key);
    }
    let taken: i64 = acquire.arg(id).arg(ttl_ms).invoke_async(conn).await?;
    if taken != 1 {
        return Ok(false);
    }
    let released: usize = release.arg(id).invoke_async(conn).await?;
    Ok(released == keys.len())
}
