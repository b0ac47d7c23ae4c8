//! A peer that speaks the Go `redismutex` package's protocol, as its scripts behave:
//! the same keys, values and commands a Go service sends, so tests can check that Go
//! and Rust services share one lock. (The Lua here is written for these tests from that
//! description; it is not the Go package's source.)
//!
//! - write lock: `SET key id PX ttl NX`; on failure, with intent on, `SET intent 1 PX
//!   ttl`, and reply the lock key's PTTL; on success `DEL intent` and reply nil.
//! - read lock: when the key is a string, reply its PTTL; when the intent exists, reply
//!   the intent's PTTL; else `SADD key id`, `PEXPIRE key ttl` and reply nil.
//! - refresh: 0 unless the key is a string equal to id or a set holding id; else
//!   `PEXPIRE key ttl`.
//! - unlock: delete the string if it equals id, or remove id from the set (deleting it
//!   when empty).

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::Script;

/// Go's write lock (KEYS: lock, intent; ARGV: id, ttl ms, intent "1"/"0").
pub const WRITE: &str = r#"
local ok = redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX')
if ok then
    redis.call('DEL', KEYS[2])
    return nil
end
if ARGV[3] == '1' then
    redis.call('SET', KEYS[2], 1, 'PX', ARGV[2])
end
return redis.call('PTTL', KEYS[1])
"#;

/// Go's read lock (KEYS: lock, intent; ARGV: id, ttl ms).
pub const READ: &str = r#"
if redis.call('TYPE', KEYS[1])['ok'] == 'string' then
    return redis.call('PTTL', KEYS[1])
end
if redis.call('EXISTS', KEYS[2]) == 1 then
    return redis.call('PTTL', KEYS[2])
end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return nil
"#;

/// Go's refresh (KEYS: lock; ARGV: id, ttl ms).
pub const REFRESH: &str = r#"
local kind = redis.call('TYPE', KEYS[1])['ok']
local mine = (kind == 'string' and redis.call('GET', KEYS[1]) == ARGV[1])
    or (kind == 'set' and redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1)
if not mine then
    return 0
end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
"#;

/// Go's unlock (KEYS: lock; ARGV: id).
pub const UNLOCK: &str = r#"
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'string' and redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('DEL', KEYS[1])
elseif kind == 'set' and redis.call('SREM', KEYS[1], ARGV[1]) == 1 then
    if redis.call('SCARD', KEYS[1]) == 0 then
        redis.call('DEL', KEYS[1])
    end
end
return 1
"#;

/// A Go-protocol client on its own connection (a plain one, or a cluster connection),
/// with a Go-style random id per lock.
#[derive(Clone)]
pub struct GoPeer<C = MultiplexedConnection> {
    conn: C,
    ttl_ms: u64,
}

impl GoPeer {
    /// A fresh lock id as the Go package makes them: 16 random bytes as 32 hex chars.
    pub fn new_id() -> String {
        hex::encode(rand::random::<[u8; 16]>())
    }
}

impl<C: ConnectionLike + Clone + Send + Sync> GoPeer<C> {
    pub fn new(conn: C, ttl_ms: u64) -> Self {
        Self { conn, ttl_ms }
    }

    fn intent(key: &str) -> String {
        format!("{key}:lock-intent")
    }

    /// One write attempt: `None` when acquired, else the blocker's PTTL in ms.
    pub async fn write(&self, key: &str, id: &str, intent: bool) -> Option<i64> {
        Script::new(WRITE)
            .key(key)
            .key(Self::intent(key))
            .arg(id)
            .arg(self.ttl_ms)
            .arg(if intent { 1 } else { 0 })
            .invoke_async(&mut self.conn.clone())
            .await
            .expect("go write lock")
    }

    /// One read attempt: `None` when acquired, else the blocker's PTTL in ms.
    pub async fn read(&self, key: &str, id: &str) -> Option<i64> {
        Script::new(READ)
            .key(key)
            .key(Self::intent(key))
            .arg(id)
            .arg(self.ttl_ms)
            .invoke_async(&mut self.conn.clone())
            .await
            .expect("go read lock")
    }

    /// 1 when `id` still held the lock and its TTL was reset, else 0.
    pub async fn refresh(&self, key: &str, id: &str) -> i64 {
        Script::new(REFRESH)
            .key(key)
            .arg(id)
            .arg(self.ttl_ms)
            .invoke_async(&mut self.conn.clone())
            .await
            .expect("go refresh")
    }

    pub async fn unlock(&self, key: &str, id: &str) {
        let _: i64 = Script::new(UNLOCK)
            .key(key)
            .arg(id)
            .invoke_async(&mut self.conn.clone())
            .await
            .expect("go unlock");
    }
}
