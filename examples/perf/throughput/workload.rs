//! What the tasks of a throughput phase do: one cycle of a workload, the library's or a
//! baseline's, and what the tasks share.

use redis::aio::MultiplexedConnection;
use redis::Value;
use redismutex::{Quorum, RwMutex};

use super::scripts::{lock_lua, unlock_lua};
use crate::locking::{check_unlocked, raw_release};
use crate::raw::{
    raw_id, raw_majority, raw_quorum_acquire, raw_quorum_release, raw_set, raw_set_cycle,
    read_floor_cycle, RELEASE, RELEASE_PUBLISH,
};
use crate::{Result, FENCE_MS, TTL_MS};

/// What the tasks of a throughput phase do, one cycle at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Workload {
    /// `SET NX PX` + compare-and-delete script, each task on its own key.
    Raw,
    /// `write().await` + `unlock()`, each task on its own key.
    Write,
    /// `read().await` + `unlock()`, all tasks on one key.
    Read,
    /// Pipelined `SET NX PX` + `INCR <key>:fence`, then compare-delete-publish.
    Fenced,
    /// Bare EVALSHA of `lua/lock.lua`, then of `lua/unlock.lua`.
    Scripts,
    /// The fenced read floor, all tasks on one key: one script checks the intent, adds
    /// the reader (refused on a writer's string), keeps the set's TTL and mints a token
    /// by `INCR`; one script removes it and publishes when the last reader goes.
    ReadFloor,
    /// The raw quorum cycle (`raw.rs`): on every node at once, pipelined `SET NX PX` +
    /// `INCR <key>:fence` (decided at a majority), `SET <key>:fence <max> PX` (decided at
    /// a majority), then the compare-and-delete script (every node); each task on its
    /// own key.
    QuorumRaw,
    /// `write().await` + `unlock()` on the quorum mutex, each task on its own key.
    QuorumWrite,
    /// `lock_all().write(keys).await` + `unlock()` on the task's `n` keys ([`set_keys`]).
    Set(usize),
    /// The same `n` keys taken one by one, `write().key(k).await` in order, then
    /// unlocked one by one in the same order.
    Sequential(usize),
    /// The raw multi-key cycle on the task's `n` keys (`raw::raw_set_cycle`): one
    /// all-or-none `SET PX` script, one compare-and-delete script over them all.
    RawSet(usize),
}

/// The `n` keys of task `task` in the set workloads: `set:<n>:<task>:<i>`, the same for
/// [`Workload::Set`] and [`Workload::Sequential`] (the raw cycle prefixes them with
/// `perf-raw-`, outside the mutex's names).
pub(crate) fn set_keys(n: usize, task: usize) -> Vec<String> {
    (0..n).map(|i| format!("set:{n}:{task}:{i}")).collect()
}

/// What every task of a throughput phase shares.
pub(crate) struct Bench {
    pub(crate) conn: MultiplexedConnection,
    pub(crate) mx: RwMutex<MultiplexedConnection>,
    /// Quorum rows: one connection per node (the first is `conn`'s server), shared by
    /// every task, and the mutex over them; empty and `None` elsewhere.
    pub(crate) nodes: Vec<MultiplexedConnection>,
    pub(crate) quorum: Option<RwMutex<Quorum<MultiplexedConnection>>>,
}

impl Workload {
    /// One cycle of task `task` on its connection `conn`: an error if it could not take
    /// or give back its lock.
    pub(crate) async fn cycle(
        self,
        bench: &Bench,
        conn: &mut MultiplexedConnection,
        task: usize,
    ) -> Result<()> {
        let id = raw_id(task);
        match self {
            Self::Raw => raw_cycle(conn, &format!("perf-raw:{task}"), &id).await,
            Self::Write => {
                let guard = bench.mx.write().key(task.to_string()).await?;
                check_unlocked(guard).await
            }
            Self::Read => {
                let guard = bench.mx.read().key("shared").await?;
                check_unlocked(guard).await
            }
            Self::Fenced => fenced_cycle(conn, &format!("perf-fenced:{task}"), &id).await,
            Self::Scripts => scripts_cycle(conn, &format!("perf-scripts:{task}"), &id).await,
            Self::ReadFloor => Ok(read_floor_cycle(conn, "perf-read-floor", &id, TTL_MS).await??),
            Self::QuorumRaw => {
                quorum_raw_cycle(&bench.nodes, &format!("perf-qraw:{task}"), &id).await
            }
            Self::QuorumWrite => {
                let quorum = bench.quorum.as_ref().ok_or("no quorum mutex")?;
                let guard = quorum.write().key(task.to_string()).await?;
                check_unlocked(guard).await
            }
            Self::Set(n) => {
                let guard = bench.mx.lock_all().write(set_keys(n, task)).await?;
                if !guard.unlock().await? {
                    return Err("unlock found a key of the set gone".into());
                }
                Ok(())
            }
            Self::Sequential(n) => {
                let mut guards = Vec::with_capacity(n);
                for key in set_keys(n, task) {
                    guards.push(bench.mx.write().key(key).await?);
                }
                for guard in guards {
                    check_unlocked(guard).await?;
                }
                Ok(())
            }
            Self::RawSet(n) => {
                let keys: Vec<String> = set_keys(n, task)
                    .into_iter()
                    .map(|key| format!("perf-raw-{key}"))
                    .collect();
                if !raw_set_cycle(conn, &keys, &id, TTL_MS).await? {
                    return Err(format!("raw set of {n} keys: taken or not released").into());
                }
                Ok(())
            }
        }
    }
}

/// [`Workload::Raw`]'s cycle on `key` as `id`.
async fn raw_cycle(conn: &mut MultiplexedConnection, key: &str, id: &str) -> Result<()> {
    if !raw_set(conn, key, id, TTL_MS).await? {
        return Err(format!("{key} is taken").into());
    }
    raw_release(conn, &RELEASE, key, id).await
}

/// [`Workload::Fenced`]'s cycle on `key` as `id`.
async fn fenced_cycle(conn: &mut MultiplexedConnection, key: &str, id: &str) -> Result<()> {
    let (set, _token): (Option<String>, u64) = redis::pipe()
        .cmd("SET")
        .arg(key)
        .arg(id)
        .arg("NX")
        .arg("PX")
        .arg(TTL_MS)
        .cmd("INCR")
        .arg(format!("{key}:fence"))
        .query_async(conn)
        .await?;
    if set.is_none() {
        return Err(format!("{key} is taken").into());
    }
    raw_release(conn, &RELEASE_PUBLISH, key, id).await
}

/// [`Workload::Scripts`]'s cycle on `key` as `id`.
async fn scripts_cycle(conn: &mut MultiplexedConnection, key: &str, id: &str) -> Result<()> {
    let reply: Value = lock_lua(key, id).invoke_async(conn).await?;
    // A positive integer is the token: acquired.
    let acquired = matches!(reply, Value::Int(token) if token > 0);
    if !acquired {
        return Err(format!("lock.lua on {key}: {reply:?}").into());
    }
    let released: i64 = unlock_lua(key, id).invoke_async(conn).await?;
    if released & 1 != 1 {
        return Err(format!("unlock.lua on {key} replied {released}").into());
    }
    Ok(())
}

/// [`Workload::QuorumRaw`]'s cycle on `key` as `id`, over `nodes`.
async fn quorum_raw_cycle(nodes: &[MultiplexedConnection], key: &str, id: &str) -> Result<()> {
    if raw_quorum_acquire(nodes, key, id, TTL_MS, FENCE_MS)
        .await
        .is_none()
    {
        return Err(format!("{key} is taken on a majority").into());
    }
    let released = raw_quorum_release(nodes, &RELEASE, key, id, TTL_MS).await;
    if released < raw_majority(nodes.len()) {
        return Err(format!("{key} was released on {released} nodes").into());
    }
    Ok(())
}
