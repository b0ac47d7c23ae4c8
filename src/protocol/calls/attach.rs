//! The attach call: one `attach.lua` that moves a hold from its old id to a new one on
//! every key of a lease at once, after checking that the old id still holds each key in
//! its form ([`Holder`]), and renews each key with the new holder's TTL.

use redis::aio::ConnectionLike;
use redis::{Cmd, Value};

use super::{Call, Holder};
use crate::error::Error;
use crate::protocol::describe::Describe;
use crate::protocol::id::Id;
use crate::protocol::keys::Keys;
use crate::protocol::lua::SCRIPTS;
use crate::protocol::replies::unexpected;

/// One key of an attach: the new hold's call (its keys, the new id and this handle's TTL)
/// and the form the old id holds the key in (a writer, a reader or a permit).
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttachPart<'a> {
    pub(crate) call: &'a Call,
    pub(crate) holder: Holder,
}

/// What one `attach.lua` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attached {
    /// Every key held the old id in its form and now holds the new id, renewed.
    Moved,
    /// The key at this index (0-based, in the parts' order) was the first that the old
    /// id did not hold in its form (missing, another holder's, another type, or a
    /// permit whose deadline had passed): nothing changed.
    NotHeld(usize),
}

/// Runs `attach.lua`: when `old` holds every key of `parts` in its part's form, moves
/// each to the parts' shared new id with their TTL (in milliseconds), in one step.
/// `parts` is not empty, and its calls share one id and TTL.
pub(crate) async fn attach<C: ConnectionLike>(
    conn: &mut C,
    parts: &[AttachPart<'_>],
    old: &Id,
) -> Result<Attached, Error> {
    let Some(first) = parts.first() else {
        return Ok(Attached::Moved);
    };
    let call = first.call;
    let key = call.keys.lock();
    let modes: String = parts.iter().map(|part| mode(part.holder)).collect();
    let keys: Vec<&Keys> = parts.iter().map(|part| &part.call.keys).collect();
    // A describing handle's description of the new id, in the same request.
    let describe = call.describe(&keys);
    let then = describe.as_ref().and_then(Describe::then);
    let fill = |cmd: &mut Cmd| {
        for keys in &keys {
            cmd.arg(keys.lock());
        }
        for keys in &keys {
            cmd.arg(keys.holders());
        }
        cmd.arg(old).arg(call.id).arg(call.ttl_ms).arg(&modes);
    };
    let reply: Value = SCRIPTS
        .attach
        .run_then(conn, &call.keys, 2 * parts.len(), fill, then.as_ref())
        .await
        .map_err(|err| Error::redis(key, err))?;
    parse(&reply, parts.len(), key)
}

/// The script's character for what the old id holds: `w`, `r` or `p` (an upgradable
/// reader is never attached; it would be checked as a reader).
fn mode(holder: Holder) -> char {
    match holder {
        Holder::Writer => 'w',
        Holder::Reader | Holder::Upgradable => 'r',
        Holder::Permit => 'p',
    }
}

/// The reply of `attach.lua` for `n` keys, the first of which is `key`: `1`, or
/// `{0, i}` with `i` the 1-based index of the first key not held.
fn parse(reply: &Value, n: usize, key: &str) -> Result<Attached, Error> {
    match reply {
        Value::Int(1) => Ok(Attached::Moved),
        Value::Array(items) => match items.as_slice() {
            [Value::Int(0), Value::Int(at)] => usize::try_from(*at)
                .ok()
                .and_then(|at| at.checked_sub(1))
                .filter(|at| *at < n)
                .map(Attached::NotHeld)
                .ok_or_else(|| unexpected(reply, key)),
            _ => Err(unexpected(reply, key)),
        },
        _ => Err(unexpected(reply, key)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reply_is_one_or_the_first_key_not_held() {
        let parse = |reply| parse(&reply, 2, "k");
        assert_eq!(parse(Value::Int(1)).unwrap(), Attached::Moved);
        let not_held = |at| Value::Array(vec![Value::Int(0), Value::Int(at)]);
        assert_eq!(parse(not_held(1)).unwrap(), Attached::NotHeld(0));
        assert_eq!(parse(not_held(2)).unwrap(), Attached::NotHeld(1));
        for bad in [
            not_held(0),
            not_held(3),
            Value::Int(0),
            Value::Nil,
            Value::Array(vec![]),
        ] {
            assert!(matches!(parse(bad), Err(Error::Redis { .. })));
        }
        let holders = [Holder::Writer, Holder::Reader, Holder::Permit];
        assert_eq!(holders.map(mode), ['w', 'r', 'p']);
    }
}
