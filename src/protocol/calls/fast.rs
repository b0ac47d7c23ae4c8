//! The write fast path: one round trip and no script.

use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, Value};

use super::Call;
use crate::error::Error;
use crate::protocol::describe::Describe;
use crate::protocol::replies::{unexpected, Attempt, CLOCK_TOKEN_MIN, TOKEN_MAX};

/// The three commands of [`fast_lock`], each sized for its arguments so that none grows
/// while it is written.
fn pipeline(call: &Call) -> Pipeline {
    let keys = &call.keys;
    let mut set = Cmd::with_capacity(6, keys.lock().len() + ID_AND_NUMBERS);
    set.arg("SET")
        .arg(keys.lock())
        .arg(call.id)
        .arg("NX")
        .arg("PX")
        .arg(call.ttl_ms);
    let mut counter = Cmd::with_capacity(6, keys.fence().len() + ID_AND_NUMBERS);
    counter
        .arg("SET")
        .arg(keys.fence())
        .arg(1)
        .arg("NX")
        .arg("PX")
        .arg(call.fence_ms);
    let mut incr = Cmd::with_capacity(2, keys.fence().len() + "INCR".len());
    incr.arg("INCR").arg(keys.fence());
    let mut pipe = Pipeline::with_capacity(3);
    pipe.add_command(set).add_command(counter).add_command(incr);
    pipe
}

/// Room for an id and the rest of a `SET` command's arguments but its key, in bytes:
/// `SET`, 32 characters, `NX`, `PX` and up to 20 digits.
const ID_AND_NUMBERS: usize = 64;

/// `SET lock id NX PX ttl`, then `SET fence 1 NX PX retention` (so a counter that is gone
/// restarts with a TTL) and `INCR fence`, in one pipeline. Only for a lock key whose
/// fence key this mutex saw hold a token, with at least half its retention left
/// ([`Fences::countable`](crate::protocol::fences::Fences::countable)): `INCR` would change an
/// integer that is not a token, and does not renew the TTL.
///
/// Taking and minting are separate commands, and still safe: the lock key is only set
/// when absent, so every earlier holder's token was minted before it (their mint
/// preceded their reply, and so their release or expiry); an `INCR` by an attempt that
/// found the lock busy only leaves a gap.
///
/// A describing handle's `describe.lua` follows in the same request (its reply is not
/// read; on `NOSCRIPT` it is sent again on its own).
///
/// Replies [`Attempt::Acquired`], [`Attempt::TakenWithoutToken`] or [`Attempt::Busy`].
pub(crate) async fn fast_lock<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
) -> Result<Attempt, Error> {
    let keys = &call.keys;
    let mut pipe = pipeline(call);
    // A describing handle's `describe.lua` comes last, in the same request.
    let lock_keys = [keys];
    let describe = call.describe(&lock_keys);
    let then = describe.as_ref().and_then(Describe::then);
    if let Some(then) = &then {
        pipe.add_command(then.command());
    }
    pipe.ignore_errors();
    // The counter's `SET NX` replies nothing of use.
    let mut replies: Vec<Value> = pipe
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(keys.lock(), err))?;
    if let (Some(then), Some(Value::ServerError(err))) = (&then, replies.get(3)) {
        if err.kind() == Some(redis::ServerErrorKind::NoScript) {
            then.resend(conn).await;
        }
    }
    replies.truncate(3);
    let Ok::<[Value; 3], _>([set, _, token]) = replies.try_into() else {
        return Err(unexpected(&Value::Nil, keys.lock()));
    };
    match set {
        Value::Okay => {}
        Value::Nil => return Ok(Attempt::Busy),
        Value::ServerError(err) => return Err(Error::redis(keys.lock(), err.into())),
        other => return Err(unexpected(&other, keys.lock())),
    }
    Ok(match token {
        Value::Int(token) if (CLOCK_TOKEN_MIN..=TOKEN_MAX as i64).contains(&token) => {
            Attempt::Acquired(token.unsigned_abs())
        }
        _ => Attempt::TakenWithoutToken,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::calls::{NodeOrder, Queueing};
    use crate::protocol::id::Id;
    use crate::protocol::keys::Keys;

    #[test]
    fn the_pipeline_sends_the_commands_as_written_out() {
        for lock in ["k", "orders:{42}", "ключ", ""] {
            let call = Call {
                keys: Keys::new(lock, false),
                id: Id::new(),
                ttl_ms: u64::MAX,
                fence_ms: 3_600_000,
                queue: Queueing::Off,
                node_order: NodeOrder::default(),
                describe: None,
            };
            let (id, fence) = (call.id.as_str(), format!("{lock}:fence"));
            let mut written = redis::pipe();
            written
                .cmd("SET")
                .arg(lock)
                .arg(id)
                .arg("NX")
                .arg("PX")
                .arg(u64::MAX)
                .cmd("SET")
                .arg(&fence)
                .arg(1)
                .arg("NX")
                .arg("PX")
                .arg(3_600_000)
                .ignore()
                .cmd("INCR")
                .arg(&fence);
            let packed = pipeline(&call).get_packed_pipeline();
            assert_eq!(packed, written.get_packed_pipeline(), "{lock}");
            let text = String::from_utf8(packed).unwrap();
            assert!(text.starts_with(&format!(
                "*6\r\n$3\r\nSET\r\n${}\r\n{lock}\r\n$32\r\n{id}\r\n",
                lock.len()
            )));
        }
    }
}
