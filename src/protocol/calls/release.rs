//! The calls that end or change what an id holds: `unlock.lua`, which removes the id (and
//! what an acquire that did not finish left), and `downgrade.lua`, which turns a write
//! lock into a read lock.

use redis::aio::ConnectionLike;

use super::{flag, Call, Holder, Leftovers};
use crate::error::Error;
use crate::protocol::lua::SCRIPTS;
use crate::protocol::replies::{Downgraded, Unlocked};
use crate::protocol::topology::Topology;

/// Runs `unlock.lua`: remove the call's id (held as `holder`) from the lock, delete the
/// lock intent too when the leftovers name it and it holds the id, leave the fair queue
/// when they name it (and the lock has one), and publish on the release channel when the
/// lock may now be taken (by `SPUBLISH` in the lock key's slot on a cluster).
pub(crate) async fn unlock<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    topology: Topology,
    holder: Holder,
    leftovers: Leftovers,
) -> Result<Unlocked, Error> {
    let keys = &call.keys;
    let queue = keys.queue().filter(|_| leftovers.queue_place);
    let numkeys = match (queue, leftovers.intent) {
        (Some(_), _) => 4,
        (None, true) => 2,
        (None, false) => 1,
    };
    let reply: i64 = SCRIPTS
        .unlock
        .run(conn, keys, numkeys, |cmd| {
            cmd.arg(keys.lock());
            // Leaving the queue passes the intent too: it is deleted only if it holds the id.
            if numkeys > 1 {
                cmd.arg(keys.intent());
            }
            if let Some(queue) = queue {
                cmd.arg(queue.order).arg(queue.deadline);
            }
            cmd.arg(call.id)
                .arg(keys.channel())
                .arg(holder.arg())
                .arg(flag(topology.sharded()));
        })
        .await
        .map_err(|err| Error::redis(keys.lock(), err))?;
    Ok(Unlocked::from_reply(reply))
}

/// Runs `downgrade.lua`: turn the write lock the call's id holds into a read lock held by
/// it with the call's TTL, in one step, and publish the id on the release channel (by
/// `SPUBLISH` on a cluster) so waiting readers look again.
pub(crate) async fn downgrade<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    topology: Topology,
) -> Result<Downgraded, Error> {
    let keys = &call.keys;
    let reply: i64 = SCRIPTS
        .downgrade
        .run(conn, keys, 1, |cmd| {
            cmd.arg(keys.lock())
                .arg(call.id)
                .arg(call.ttl_ms)
                .arg(keys.channel())
                .arg(flag(topology.sharded()));
        })
        .await
        .map_err(|err| Error::redis(keys.lock(), err))?;
    Ok(Downgraded::from_reply(reply))
}
