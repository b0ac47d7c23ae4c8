//! The acquire calls: one attempt of each kind (`lock.lua`, `rlock.lua`, `semaphore.lua`,
//! `upgradable.lua`, or the write fast path), and the raise of a quorum node's fence counter to the token
//! an acquisition won (`fence.lua`).

use redis::aio::ConnectionLike;

use super::fast::fast_lock;
use super::{flag, upgrader_args, AttemptKind, Call};
use crate::error::Error;
use crate::protocol::describe::Describe;
use crate::protocol::lua::SCRIPTS;
use crate::protocol::replies::{unexpected, Attempt};
use crate::protocol::topology::Topology;

/// Sends an attempt of `kind` for `call` by script, or by the fast path for
/// [`AttemptKind::FastWrite`]; when the call describes its holder (`Call::describe`),
/// with `describe.lua` after it in the same request.
pub(crate) async fn attempt<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    topology: Topology,
    kind: AttemptKind,
) -> Result<Attempt, Error> {
    match kind {
        AttemptKind::FastWrite => fast_lock(conn, call).await,
        AttemptKind::Write { set_intent } => lock(conn, call, topology, set_intent).await,
        AttemptKind::Read { fence_checked } => rlock(conn, call, topology, fence_checked).await,
        AttemptKind::Permit(permits) => semaphore(conn, call, topology, permits).await,
        AttemptKind::Upgradable => upgradable(conn, call, topology).await,
    }
}

/// Runs `upgradable.lua`: add the call's id to the readers of the lock as its upgradable
/// reader (the upgrader key holds it) and mint a fencing token (floored at the server
/// clock on a cluster). Never fair: fair mutexes refuse upgradable reads.
async fn upgradable<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    topology: Topology,
) -> Result<Attempt, Error> {
    let keys = &call.keys;
    SCRIPTS
        .upgradable
        .attempt_then(
            conn,
            keys,
            4,
            |cmd| {
                upgrader_args(cmd, call);
                // Sent only when set: at most 10 arguments before authentication, as lock.lua.
                if topology.clock_floor() {
                    cmd.arg(flag(true));
                }
            },
            call.describe(&[keys])
                .as_ref()
                .and_then(Describe::then)
                .as_ref(),
        )
        .await
}

/// Runs `lock.lua`: take the write lock under the call's id and mint a fencing token
/// (floored at the server clock on a cluster), setting the lock intent on failure when
/// `set_intent`; in the queue as the call says.
async fn lock<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    topology: Topology,
    set_intent: bool,
) -> Result<Attempt, Error> {
    let (keys, queue) = (&call.keys, call.queue);
    SCRIPTS
        .lock
        .attempt_then(
            conn,
            keys,
            queue.numkeys(3),
            |cmd| {
                cmd.arg(keys.lock()).arg(keys.intent()).arg(keys.fence());
                queue.keys(cmd, keys);
                cmd.arg(call.id)
                    .arg(call.ttl_ms)
                    .arg(flag(set_intent))
                    .arg(call.fence_ms);
                // The flag is sent only when set (or when fair): a client that has not
                // authenticated may send at most 10 arguments, and must get NOAUTH, not a
                // protocol error.
                queue.args(cmd, topology.clock_floor());
            },
            call.describe(&[keys])
                .as_ref()
                .and_then(Describe::then)
                .as_ref(),
        )
        .await
}

/// Runs `rlock.lua`: add the call's id to the readers of the lock and mint a fencing
/// token (floored at the server clock on a cluster); with `fence_checked` (never when
/// fair), the fence key is taken as the counter without reading it first.
async fn rlock<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    topology: Topology,
    fence_checked: bool,
) -> Result<Attempt, Error> {
    let (keys, queue) = (&call.keys, call.queue);
    let counting = fence_checked && !queue.is_fair();
    SCRIPTS
        .rlock
        .attempt_then(
            conn,
            keys,
            queue.numkeys(3),
            |cmd| {
                cmd.arg(keys.lock()).arg(keys.intent()).arg(keys.fence());
                queue.keys(cmd, keys);
                cmd.arg(call.id)
                    .arg(call.ttl_ms)
                    .arg(call.fence_ms)
                    .arg(flag(counting));
                queue.args(cmd, topology.clock_floor());
            },
            call.describe(&[keys])
                .as_ref()
                .and_then(Describe::then)
                .as_ref(),
        )
        .await
}

/// Runs `semaphore.lua`: take one of `permits` permits under the call's id and mint a
/// fencing token (floored at the server clock on a cluster).
async fn semaphore<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    topology: Topology,
    permits: u32,
) -> Result<Attempt, Error> {
    let (keys, queue) = (&call.keys, call.queue);
    SCRIPTS
        .semaphore
        .attempt_then(
            conn,
            keys,
            queue.numkeys(2),
            |cmd| {
                cmd.arg(keys.lock()).arg(keys.fence());
                queue.keys(cmd, keys);
                cmd.arg(call.id)
                    .arg(call.ttl_ms)
                    .arg(permits)
                    .arg(call.fence_ms)
                    .arg(flag(topology.clock_floor()));
                if let Some(op) = queue.op() {
                    cmd.arg(op);
                }
            },
            call.describe(&[keys])
                .as_ref()
                .and_then(Describe::then)
                .as_ref(),
        )
        .await
}

/// Runs `fence.lua`: raise the fence counter of the call's lock, and its granted token,
/// to at least `token`, the largest token the nodes of a quorum minted for one
/// acquisition.
pub(crate) async fn raise_fence<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    token: u64,
) -> Result<(), Error> {
    let keys = &call.keys;
    let granted = keys.granted();
    let reply = SCRIPTS
        .fence
        .attempt(conn, keys, 2, |cmd| {
            cmd.arg(keys.fence())
                .arg(granted)
                .arg(token)
                .arg(call.fence_ms);
        })
        .await?;
    match reply {
        Attempt::Acquired(1) => Ok(()),
        other => Err(unexpected(
            &redis::Value::SimpleString(format!("{other:?}")),
            keys.lock(),
        )),
    }
}
