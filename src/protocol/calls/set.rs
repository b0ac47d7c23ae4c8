//! The acquire call of a set of locks: one `lock_all.lua` that takes read and write locks
//! on several lock keys under one id, all or none.

use redis::aio::ConnectionLike;

use super::{flag, Call};
use crate::error::Error;
use crate::mode::Mode;
use crate::protocol::describe::Describe;
use crate::protocol::keys::Keys;
use crate::protocol::lua::SCRIPTS;
use crate::protocol::replies::SetAttempt;
use crate::protocol::topology::Topology;

/// One key of a set: its lock's call (the set's id, TTL and fence retention) and the mode
/// the set takes it in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SetPart<'a> {
    pub(crate) call: &'a Call,
    pub(crate) mode: Mode,
}

/// Runs `lock_all.lua`: take every key of `parts` under their shared id, each in its
/// mode, and mint a fencing token per key (floored at the server clock on a cluster);
/// when a holder blocks, set the lock intent on the write keys when `set_intent`; a
/// describing handle's `describe.lua` of every key follows in the same request.
/// `parts` is not empty, and its calls share one id, TTL and fence retention.
pub(crate) async fn lock_all<C: ConnectionLike>(
    conn: &mut C,
    parts: &[SetPart<'_>],
    topology: Topology,
    set_intent: bool,
) -> Result<SetAttempt, Error> {
    let Some(first) = parts.first() else {
        return Ok(SetAttempt::Acquired(Vec::new()));
    };
    let call = first.call;
    let modes: String = parts
        .iter()
        .map(|part| match part.mode {
            Mode::Write => 'w',
            Mode::Read => 'r',
        })
        .collect();
    // A describing handle describes every key of the set, in the same request.
    let keys: Vec<&Keys> = match call.describe {
        Some(_) => parts.iter().map(|part| &part.call.keys).collect(),
        None => Vec::new(),
    };
    let describe = call.describe(&keys);
    let reply: redis::Value = SCRIPTS
        .lock_all
        .run_then(
            conn,
            &call.keys,
            3 * parts.len(),
            |cmd| {
                for part in parts {
                    let keys = &part.call.keys;
                    cmd.arg(keys.lock()).arg(keys.intent()).arg(keys.fence());
                }
                cmd.arg(call.id)
                    .arg(call.ttl_ms)
                    .arg(call.fence_ms)
                    .arg(&modes)
                    .arg(flag(set_intent))
                    .arg(flag(topology.clock_floor()));
            },
            describe.as_ref().and_then(Describe::then).as_ref(),
        )
        .await
        .map_err(|err| Error::redis(call.keys.lock(), err))?;
    SetAttempt::parse(reply, parts.len(), call.keys.lock())
}
