//! What a fault run records as it goes, for the report: each fault injected (what, at
//! whom, from when to when) and the locks seen held, with their expiry on the server.

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::RedisResult;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    KillWorker,
    FreezeWorker,
    /// The lock server SIGSTOPped for less than ttl/2.
    PauseServer,
    /// The lock server SIGSTOPped for more than the TTL.
    PauseServerLong,
    KillServer,
    Blackhole,
    Delay,
    Reset,
    ClientKill,
    /// Quorum mode: one node's proxy blackholes every connection (a partition).
    PartitionNode,
    /// Quorum mode: one node's proxy delays every chunk past the per-node bound.
    SlowNode,
    /// Quorum mode: one node's proxy resets every connection, again and again.
    CutNode,
    /// Quorum mode: one node's `redis-server` SIGSTOPped for less than ttl/2.
    FreezeNode,
    /// Quorum mode: one node's `redis-server` SIGSTOPped for more than the TTL.
    FreezeNodeLong,
    /// Quorum mode: one node's `redis-server` SIGKILLed, kept down past the TTL (at least
    /// TTL + 200 ms), and started again empty on the same port: the delayed restart of
    /// quorum mode's preconditions.
    RestartNodeEmpty,
    /// Quorum mode: one node's `redis-server` (run with `appendonly yes` and `appendfsync
    /// always`) SIGKILLed and started again at once from its append-only file: the
    /// durable restart of quorum mode's preconditions.
    RestartNodeAof,
    /// Cluster mode: a master's `redis-server` SIGKILLed; from the kill until its replica
    /// has taken over and it is back as that replica's replica (`cluster_fleet.rs`).
    KillMaster,
    /// Cluster mode: a master's `redis-server` SIGSTOPped for at most half the cluster's
    /// node timeout, too short for a failover.
    FreezeMaster,
    /// A lock key deleted on the lock server (`DEL`, by the harness, not through the
    /// worker's proxy) while its holder's guard is still valid, as a failover that lost
    /// the key or an operator would; aimed at that holder.
    DeleteLockKey,
    /// The lock server's wall clock jumped forward (its keys expire early).
    ClockForward,
    /// The lock server's wall clock jumped back (its keys live longer).
    ClockBack,
    /// The lock server's wall clock ran fast for a while.
    ClockFast,
    /// One worker's veth pair to the lock server's network namespace with the server's
    /// end set down (`tests/faults/harness/netns.rs`).
    NetnsDown,
    /// One worker's traffic to and from the lock server dropped by blackhole routes in
    /// both namespaces.
    NetnsDrop,
    /// One worker's veth pair slowed by `tbf` at both ends.
    NetnsSlow,
}

/// Whom a fault was aimed at.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    Worker(String),
    /// The lock server, so every worker.
    Server,
    /// Node `n` of a quorum (every worker talks to it).
    Node(usize),
}

#[derive(Debug, Clone)]
pub struct FaultRecord {
    pub kind: FaultKind,
    pub target: Target,
    pub start_us: u64,
    pub end_us: u64,
}

impl FaultRecord {
    /// Whether the fault was aimed at `worker` (a fault of the server hits everyone).
    pub fn hits(&self, worker: &str) -> bool {
        match &self.target {
            Target::Server | Target::Node(_) => true,
            Target::Worker(name) => name == worker,
        }
    }
}

/// A lock id seen in a lock key, and when that key expires on the server.
#[derive(Debug, Clone)]
pub struct HeldLock {
    pub key: String,
    pub id: String,
    /// When it was read (µs since the epoch).
    pub read_us: u64,
    /// The key's `PEXPIRETIME`, in µs since the epoch: when the server drops it.
    pub expiry_us: u64,
}

/// `{key, pexpiretime, id...}` for each lock key that exists. `PEXPIRETIME` came in Redis
/// 7.0; before it (an error reply), the server clock's ms read first, plus `PTTL` read
/// after: the same or up to 1 ms earlier, never later.
pub const HELD: &str = r#"
local function expiry(key)
    local at = redis.pcall('PEXPIRETIME', key)
    if type(at) == 'number' then
        return at
    end
    local now = redis.call('TIME')
    local ttl = redis.call('PTTL', key)
    if ttl < 0 then
        return ttl
    end
    return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + ttl
end
local out = {}
for _, key in ipairs(KEYS) do
    local kind = redis.call('TYPE', key)['ok']
    if kind == 'string' or kind == 'set' then
        local row = {key, expiry(key)}
        local ids = kind == 'string' and {redis.call('GET', key)} or redis.call('SMEMBERS', key)
        for _, id in ipairs(ids) do row[#row + 1] = id end
        out[#out + 1] = row
    end
end
return out
"#;

impl HeldLock {
    /// Who holds `<mutex>:k0` .. `<mutex>:k<keys-1>` now (one script: one instant).
    pub async fn read(conn: &MultiplexedConnection, mutex: &str, keys: u64) -> Vec<HeldLock> {
        let names: Vec<String> = (0..keys).map(|k| format!("{mutex}:k{k}")).collect();
        Self::try_read(&mut conn.clone(), &names)
            .await
            .expect("read the lock keys")
    }

    /// Who holds each of the lock keys `names` now, in one script (so the keys must
    /// share a slot on a cluster), over any connection. Sent as `EVAL`, never
    /// `EVALSHA`, which the quorum fleet counts as the workers' requests.
    pub async fn try_read<C: ConnectionLike + Send>(
        conn: &mut C,
        names: &[String],
    ) -> RedisResult<Vec<HeldLock>> {
        let read_us = super::events::now_us();
        let rows: Vec<Vec<String>> = redis::cmd("EVAL")
            .arg(HELD)
            .arg(names.len())
            .arg(names)
            .query_async(conn)
            .await?;
        Ok(Self::from_rows(rows, read_us))
    }

    /// Who holds lock key `key` now, over any connection: one key is one slot, so a
    /// cluster connection will do. Sent as `EVAL`, which needs no script cache.
    pub async fn read_key<C: redis::aio::ConnectionLike>(
        conn: &mut C,
        key: &str,
    ) -> redis::RedisResult<Vec<HeldLock>> {
        let read_us = super::events::now_us();
        let rows = redis::cmd("EVAL")
            .arg(HELD)
            .arg(1)
            .arg(key)
            .query_async(conn)
            .await?;
        Ok(Self::from_rows(rows, read_us))
    }

    /// The locks in the rows of the `HELD` script, read at `read_us`.
    pub fn from_rows(rows: Vec<Vec<String>>, read_us: u64) -> Vec<HeldLock> {
        let mut held = Vec::new();
        for row in rows {
            let expiry_ms: u64 = row[1].parse().expect("PEXPIRETIME");
            for id in &row[2..] {
                held.push(HeldLock {
                    key: row[0].clone(),
                    id: id.clone(),
                    read_us,
                    expiry_us: expiry_ms * 1000,
                });
            }
        }
        held
    }
}
