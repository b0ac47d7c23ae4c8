//! The calls that end or change what an id holds: `unlock.lua`, which removes the id (and
//! what an acquire that did not finish left), `downgrade.lua`, which turns a write lock
//! into a read lock, and `upgrade.lua`, which turns an upgradable read lock into the
//! write lock (or a plain read lock).

use redis::aio::ConnectionLike;

use super::{flag, upgrader_args, Call, Holder, Leftovers, UpgradeOp};
use crate::error::Error;
use crate::protocol::lua::SCRIPTS;
use crate::protocol::replies::{Downgraded, Unlocked, Upgraded};
use crate::protocol::topology::Topology;

/// Runs `unlock.lua`: remove the call's id (held as `holder`) from the lock, delete the
/// lock intent too when the leftovers name it and it holds the id, leave the fair queue
/// when they name it (and the lock has one), and publish on the release channel when the
/// lock may now be taken (by `SPUBLISH` in the lock key's slot on a cluster). A
/// describing handle's call deletes the id's description too.
pub(crate) async fn unlock<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    topology: Topology,
    holder: Holder,
    leftovers: Leftovers,
) -> Result<Unlocked, Error> {
    let keys = &call.keys;
    let queue = keys.queue().filter(|_| leftovers.queue_place);
    let upgradable = holder == Holder::Upgradable;
    let numkeys = match (queue, leftovers.intent, upgradable) {
        (Some(_), _, _) => 4,
        // An upgradable reader passes its intent (an upgrade that waited may have set
        // it) and its upgrader key.
        (None, _, true) => 3,
        (None, true, false) => 2,
        (None, false, false) => 1,
    };
    let described = call.describe.is_some();
    let reply: i64 = SCRIPTS
        .unlock
        .run(conn, keys, numkeys + usize::from(described), |cmd| {
            cmd.arg(keys.lock());
            // Leaving the queue passes the intent too: it is deleted only if it holds the id.
            if numkeys > 1 {
                cmd.arg(keys.intent());
            }
            if let Some(queue) = queue {
                cmd.arg(queue.order).arg(queue.deadline);
            } else if upgradable {
                cmd.arg(keys.upgrader());
            }
            // The holders key comes last, flagged by ARGV[5].
            if described {
                cmd.arg(keys.holders());
            }
            cmd.arg(call.id)
                .arg(keys.channel())
                .arg(holder.arg())
                .arg(flag(topology.sharded()));
            if described {
                cmd.arg(flag(true));
            }
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

/// Runs `upgrade.lua` with [`UpgradeOp::Wait`] or [`UpgradeOp::Try`]: turn the call's
/// upgradable read lock into the write lock once no other reader is left, minting a
/// fencing token (floored at the server clock on a cluster); with `Wait`, set the lock
/// intent while others still read.
pub(crate) async fn upgrade<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    topology: Topology,
    op: UpgradeOp,
) -> Result<Upgraded, Error> {
    let reply = run_upgrade(conn, call, topology, op).await?;
    Upgraded::parse(reply, call.keys.lock())
}

/// Runs `upgrade.lua` with [`UpgradeOp::Plain`]: the call's upgradable reader stays a
/// plain reader (its upgrader key is deleted and that published). True when the id is
/// still one of the readers.
pub(crate) async fn plain<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    topology: Topology,
) -> Result<bool, Error> {
    let reply = run_upgrade(conn, call, topology, UpgradeOp::Plain).await?;
    match Upgraded::parse(reply, call.keys.lock())? {
        Upgraded::NotHeld => Ok(false),
        // "plain" answers 1 when the id is a reader.
        Upgraded::Write(1) => Ok(true),
        other => Err(crate::protocol::replies::unexpected(
            &redis::Value::SimpleString(format!("{other:?}")),
            call.keys.lock(),
        )),
    }
}

/// One `upgrade.lua` call of `op`, its reply unread.
async fn run_upgrade<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    topology: Topology,
    op: UpgradeOp,
) -> Result<redis::Value, Error> {
    let keys = &call.keys;
    SCRIPTS
        .upgrade
        .run(conn, keys, 4, |cmd| {
            upgrader_args(cmd, call);
            cmd.arg(op.arg())
                .arg(keys.channel())
                .arg(flag(topology.sharded()))
                .arg(flag(topology.clock_floor()));
        })
        .await
        .map_err(|err| Error::redis(keys.lock(), err))
}
