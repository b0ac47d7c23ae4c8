//! The calls that keep a held lock: `refresh.lua` for one lease, `renew.lua` for a batch
//! of them, and `retake.lua`, which takes the lock back on a quorum node that lost it.

use redis::aio::ConnectionLike;

use super::{Call, Holder, Renewal};
use crate::error::Error;
use crate::protocol::lua::SCRIPTS;
use crate::protocol::replies::{refusal, unexpected};

/// Runs `refresh.lua`: true when the call's id still holds the lock key, whose TTL is now
/// at least the call's.
///
/// A describing handle's call sends `renew.lua` with one key instead, which keeps the
/// holder's description with the lock (`refresh.lua` knows of none).
pub(crate) async fn refresh<C: ConnectionLike>(conn: &mut C, call: &Call) -> Result<bool, Error> {
    if call.describe.is_some() {
        let renewal = Renewal {
            call,
            writer: false,
            upgradable: false,
            retake: None,
        };
        let renewed = renew(conn, &[renewal]).await?;
        return Ok(renewed.held.first().copied().unwrap_or(false));
    }
    let key = call.keys.lock();
    let held: i64 = SCRIPTS
        .refresh
        .run(conn, &call.keys, 1, |cmd| {
            cmd.arg(key).arg(call.id).arg(call.ttl_ms);
        })
        .await
        .map_err(|err| Error::redis(key, err))?;
    Ok(held == 1)
}

/// What one `renew.lua` reported: whether each call's id still holds its lock key, in
/// the batch's order, and the server's clock when it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Renewed {
    pub(crate) held: Vec<bool>,
    /// The server's `TIME` in microseconds.
    pub(crate) server_us: u64,
}

/// Runs `renew.lua`: whether each call's id still holds its lock key, in `batch`'s order;
/// those that do now have a TTL of at least the calls' (every call of one batch has the
/// same TTL: the batches come from one mutex's refresher). On a cluster every lock key of
/// the batch must share a slot. A failed request fails the whole batch, named after its
/// first key. (A batch of one is `renew.lua` too, not the Go package's `refresh.lua`: it
/// does the same to the key, and reports the server's clock.)
pub(crate) async fn renew<C: ConnectionLike>(
    conn: &mut C,
    batch: &[Renewal<'_>],
) -> Result<Renewed, Error> {
    let Some(first) = batch.first() else {
        return Ok(Renewed {
            held: Vec::new(),
            server_us: 0,
        });
    };
    let key = first.call.keys.lock();
    // A described holder's letter is a capital: its holders key is renewed with it.
    let writers: String = batch
        .iter()
        .map(|item| {
            let letter = match (item.writer, item.upgradable) {
                (true, _) => 'w',
                (false, true) => 'u',
                (false, false) => 'r',
            };
            if item.call.describe.is_some() {
                letter.to_ascii_uppercase()
            } else {
                letter
            }
        })
        .collect();
    let others = writers
        .chars()
        .map(|c| usize::from(c.eq_ignore_ascii_case(&'u')) + usize::from(c.is_ascii_uppercase()))
        .sum::<usize>();
    let mut held: Vec<i64> = SCRIPTS
        .renew
        // Sized for one key: a batch's command grows as it is filled.
        .run(conn, &first.call.keys, batch.len() + others, |cmd| {
            for item in batch {
                cmd.arg(item.call.keys.lock());
            }
            // Each lock key's other keys, after the lock keys, in order: an upgradable
            // reader's upgrader key, then a described holder's holders key.
            for item in batch {
                if item.upgradable && !item.writer {
                    cmd.arg(item.call.keys.upgrader());
                }
                if item.call.describe.is_some() {
                    cmd.arg(item.call.keys.holders());
                }
            }
            cmd.arg(first.call.ttl_ms).arg(&writers);
            for item in batch {
                cmd.arg(item.call.id);
            }
        })
        .await
        .map_err(|err| Error::redis(key, err))?;
    let server_us = match held.pop().map(u64::try_from) {
        Some(Ok(us)) if held.len() == batch.len() => us,
        _ => {
            let reply = redis::Value::SimpleString(format!("{held:?}"));
            return Err(unexpected(&reply, key));
        }
    };
    Ok(Renewed {
        held: held.into_iter().map(|held| held == 1).collect(),
        server_us,
    })
}

/// Runs `retake.lua`: takes the lock back under the call's id, as `holder` says (a writer
/// or a reader, never a permit), on a node of a quorum that lost it, unless the node
/// granted a token larger than `token` (to another holder, or as the mark of a forced
/// release); no token is minted, the counter and the granted token are raised to `token`.
/// True when the id holds the lock there now.
pub(crate) async fn retake<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    holder: Holder,
    token: u64,
) -> Result<bool, Error> {
    let keys = &call.keys;
    let granted = keys.granted();
    let reply: redis::Value = SCRIPTS
        .retake
        .run(conn, keys, 4, |cmd| {
            cmd.arg(keys.lock())
                .arg(keys.intent())
                .arg(keys.fence())
                .arg(granted)
                .arg(call.id)
                .arg(call.ttl_ms)
                .arg(holder.arg())
                .arg(token)
                .arg(call.fence_ms);
        })
        .await
        .map_err(|err| Error::redis(keys.lock(), err))?;
    match &reply {
        redis::Value::Int(1) => Ok(true),
        redis::Value::Int(0) => Ok(false),
        redis::Value::Array(items) => {
            Err(refusal(items).unwrap_or_else(|| unexpected(&reply, keys.lock())))
        }
        _ => Err(unexpected(&reply, keys.lock())),
    }
}
