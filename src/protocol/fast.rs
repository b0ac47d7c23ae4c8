//! The write fast path: one round trip and no script.

use redis::aio::ConnectionLike;
use redis::Value;

use super::calls::Call;
use super::replies::{unexpected, Attempt, CLOCK_TOKEN_MIN, TOKEN_MAX};
use crate::error::Error;

/// `SET lock id NX PX ttl`, then `SET fence 1 NX PX retention` (so a counter that is gone
/// restarts with a TTL) and `INCR fence`, in one pipeline. Only for a lock key whose
/// fence key this mutex saw hold a token, with at least half its retention left
/// ([`Fences::countable`](super::fences::Fences::countable)): `INCR` would change an
/// integer that is not a token, and does not renew the TTL.
///
/// Taking and minting are separate commands, and still safe: the lock key is only set
/// when absent, so every earlier holder's token was minted before it (their mint
/// preceded their reply, and so their release or expiry); an `INCR` by an attempt that
/// found the lock busy only leaves a gap.
///
/// Replies [`Attempt::Acquired`], [`Attempt::TakenWithoutToken`] or [`Attempt::Busy`].
pub(crate) async fn fast_lock<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
) -> Result<Attempt, Error> {
    let keys = &call.keys;
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    pipe.cmd("SET")
        .arg(&keys.lock)
        .arg(&call.id)
        .arg("NX")
        .arg("PX")
        .arg(call.ttl_ms);
    pipe.cmd("SET")
        .arg(&keys.fence)
        .arg(1)
        .arg("NX")
        .arg("PX")
        .arg(call.fence_ms)
        .ignore();
    pipe.cmd("INCR").arg(&keys.fence);
    let (set, token): (Value, Value) = pipe
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(&keys.lock, err))?;
    match set {
        Value::Okay => {}
        Value::Nil => return Ok(Attempt::Busy),
        Value::ServerError(err) => return Err(Error::redis(&keys.lock, err.into())),
        other => return Err(unexpected(&other, &keys.lock)),
    }
    Ok(match token {
        Value::Int(token) if (CLOCK_TOKEN_MIN..=TOKEN_MAX as i64).contains(&token) => {
            Attempt::Acquired(token.unsigned_abs())
        }
        _ => Attempt::TakenWithoutToken,
    })
}
