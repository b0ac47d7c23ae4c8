//! The referee: a second, never-faulted `redis-server` on which lock holders register
//! while they act, so that overlapping critical sections, lost updates and stale
//! fenced writes are counted by an observer the faults cannot touch.
//!
//! Used by the fault tests (to read the [`Report`]) and by `examples/fault_worker.rs`
//! (to register and write), which includes this file with `#[path]`.
//!
//! Keys on the referee, for a lock key `k`:
//! - `inside:k` hash worker → `r`/`w`: who is between the check and `leave` now
//! - `counter:k` the counter writers increment with a non-atomic read-modify-write
//! - `writes:k` writer sections that completed their increment
//! - `fence:k` the largest fencing token accepted, `fence_holder:k` the lock id that
//!   wrote it
//! - `wtoken:k` the fencing token of the last writer that entered
//! - `keys` every `k` seen; `violations`, `violation_log`, `token_order`,
//!   `token_order_log`, `sections`, `accepted`, `stale_rejected`, `stale_accepted`,
//!   `stale_accepted_log` totals

use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Script};

/// A writer enters while anyone is inside, or a reader while a writer is: a violation.
/// A holder whose fencing token is not above the last writer's that entered: a token
/// order violation (tokens must follow the order the lock passed between holders).
const ENTER: &str = r#"
local last_writer = redis.call('GET', KEYS[2]) or '0'
if tonumber(ARGV[5]) <= tonumber(last_writer) then
    redis.call('INCR', 'token_order')
    redis.call('RPUSH', 'token_order_log', ARGV[4] .. ' ' .. ARGV[3] .. ' ' .. ARGV[2] .. '/'
        .. ARGV[1] .. ' token ' .. ARGV[5] .. ' not above writer token ' .. last_writer)
end
if ARGV[1] == 'w' then
    redis.call('SET', KEYS[2], ARGV[5])
end
local inside = redis.call('HGETALL', KEYS[1])
local others = {}
local clash = false
for i = 1, #inside, 2 do
    if inside[i] ~= ARGV[2] then
        others[#others + 1] = inside[i] .. '/' .. inside[i + 1]
        if ARGV[1] == 'w' or inside[i + 1] == 'w' then
            clash = true
        end
    end
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[1])
redis.call('SADD', 'keys', ARGV[3])
if clash then
    redis.call('INCR', 'violations')
    redis.call('RPUSH', 'violation_log', ARGV[4] .. ' ' .. ARGV[3] .. ' ' .. ARGV[2] .. '/' .. ARGV[1]
        .. ' entered while inside: ' .. table.concat(others, ','))
    return 1
end
return 0
"#;

const LEAVE: &str = r#"
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('INCR', 'sections')
return 0
"#;

/// Removes a dead worker's registrations everywhere.
const EVICT: &str = r#"
local n = 0
for _, key in ipairs(redis.call('SMEMBERS', 'keys')) do
    n = n + redis.call('HDEL', 'inside:' .. key, ARGV[1])
end
return n
"#;

/// Sets the counter to the value a writer computed, and counts the writer's section.
const COMMIT: &str = r#"
redis.call('SET', KEYS[1], ARGV[1])
redis.call('INCR', KEYS[2])
return 0
"#;

/// Accepts a token only if it is at least the largest accepted for the key. A token
/// equal to the largest, written by another acquisition (another lock id), is accepted
/// as the rule says, but counted as a stale write accepted: two acquisitions shared a
/// token, so the resource could not order them.
const FENCED: &str = r#"
local token = tonumber(ARGV[1])
local max = tonumber(redis.call('GET', KEYS[1]) or '-1')
if token >= max then
    local holder = redis.call('GET', KEYS[3])
    if token == max and holder and holder ~= ARGV[2] then
        redis.call('INCR', 'stale_accepted')
        redis.call('RPUSH', 'stale_accepted_log', ARGV[3] .. ' token ' .. ARGV[1]
            .. ' of id ' .. ARGV[2] .. ' equals the token id ' .. holder .. ' wrote')
    end
    redis.call('SET', KEYS[3], ARGV[2])
    redis.call('SET', KEYS[1], ARGV[1])
    redis.call('INCR', 'accepted')
    return 1
end
redis.call('INCR', 'stale_rejected')
return 0
"#;

/// A connection to the referee server.
#[derive(Clone)]
pub struct Referee {
    conn: MultiplexedConnection,
}

impl std::fmt::Debug for Referee {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Referee").finish_non_exhaustive()
    }
}

/// What the referee saw over a run.
#[derive(Debug, Clone, Default)]
pub struct RefereeReport {
    /// Critical sections that reached `leave`.
    pub sections: u64,
    /// Writer sections that completed their increment.
    pub writes: u64,
    /// Entries that overlapped a conflicting holder.
    pub violations: u64,
    /// The description of each violation: `<us> <key> <worker>/<mode> entered while inside: ...`.
    pub violation_log: Vec<String>,
    /// Writer sections completed minus the final counter values, summed over keys.
    pub lost_updates: i64,
    /// Fenced writes accepted.
    pub accepted: u64,
    /// Fenced writes rejected because a larger token had been accepted.
    pub stale_rejected: u64,
    /// Fenced writes accepted with the token another acquisition had already written.
    pub stale_accepted: u64,
    /// The description of each: `<key> token T of id A equals the token id B wrote`.
    pub stale_accepted_log: Vec<String>,
    /// Holders that entered with a fencing token not above the last writer's.
    pub token_order: u64,
    /// The description of each: `<us> <key> <worker>/<mode> token T not above ...`.
    pub token_order_log: Vec<String>,
}

impl Referee {
    pub async fn connect(url: &str) -> RedisResult<Self> {
        let conn = redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await?;
        Ok(Self { conn })
    }

    /// Registers `worker` inside `key` in `mode` (`r`/`w`) with fencing token `token` at
    /// wall-clock `us`; true when that overlapped a conflicting holder.
    pub async fn enter(
        &self,
        key: &str,
        mode: &str,
        worker: &str,
        token: u64,
        us: u64,
    ) -> RedisResult<bool> {
        let clash: i64 = Script::new(ENTER)
            .key(format!("inside:{key}"))
            .key(format!("wtoken:{key}"))
            .arg(mode)
            .arg(worker)
            .arg(key)
            .arg(us)
            .arg(token)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(clash == 1)
    }

    pub async fn leave(&self, key: &str, worker: &str) -> RedisResult<()> {
        Script::new(LEAVE)
            .key(format!("inside:{key}"))
            .arg(worker)
            .invoke_async(&mut self.conn.clone())
            .await
    }

    /// Removes the registrations of a worker that was killed; how many there were.
    pub async fn evict(&self, worker: &str) -> RedisResult<u64> {
        Script::new(EVICT)
            .arg(worker)
            .invoke_async(&mut self.conn.clone())
            .await
    }

    /// The counter of `key` (0 when unset).
    pub async fn counter(&self, key: &str) -> RedisResult<i64> {
        let value: Option<i64> = redis::cmd("GET")
            .arg(format!("counter:{key}"))
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(value.unwrap_or(0))
    }

    /// Stores `value` as the counter of `key` and counts one completed writer section.
    pub async fn commit(&self, key: &str, value: i64) -> RedisResult<()> {
        Script::new(COMMIT)
            .key(format!("counter:{key}"))
            .key(format!("writes:{key}"))
            .arg(value)
            .invoke_async(&mut self.conn.clone())
            .await
    }

    /// A write fenced by `token`, made by the holder of lock id `holder`: true when
    /// accepted.
    pub async fn fenced(&self, key: &str, token: u64, holder: &str) -> RedisResult<bool> {
        let accepted: i64 = Script::new(FENCED)
            .key(format!("fence:{key}"))
            .key(format!("accepted:{key}"))
            .key(format!("fence_holder:{key}"))
            .arg(token)
            .arg(holder)
            .arg(key)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(accepted == 1)
    }

    /// Reads everything the referee counted.
    pub async fn report(&self) -> RedisResult<RefereeReport> {
        let mut conn = self.conn.clone();
        let total = |name: &'static str| {
            let mut conn = conn.clone();
            async move {
                let value: Option<u64> = redis::cmd("GET").arg(name).query_async(&mut conn).await?;
                RedisResult::Ok(value.unwrap_or(0))
            }
        };
        let mut report = RefereeReport {
            sections: total("sections").await?,
            violations: total("violations").await?,
            accepted: total("accepted").await?,
            stale_rejected: total("stale_rejected").await?,
            token_order: total("token_order").await?,
            stale_accepted: total("stale_accepted").await?,
            ..RefereeReport::default()
        };
        report.violation_log = redis::cmd("LRANGE")
            .arg("violation_log")
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await?;
        report.stale_accepted_log = redis::cmd("LRANGE")
            .arg("stale_accepted_log")
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await?;
        report.token_order_log = redis::cmd("LRANGE")
            .arg("token_order_log")
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await?;
        let keys: Vec<String> = redis::cmd("SMEMBERS")
            .arg("keys")
            .query_async(&mut conn)
            .await?;
        for key in keys {
            let writes: Option<i64> = redis::cmd("GET")
                .arg(format!("writes:{key}"))
                .query_async(&mut conn)
                .await?;
            let writes = writes.unwrap_or(0);
            report.writes += u64::try_from(writes).unwrap_or(0);
            report.lost_updates += writes - self.counter(&key).await?;
        }
        Ok(report)
    }
}
