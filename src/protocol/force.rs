//! The forced release (`lua/force_unlock.lua`): every holder of a lock removed at once,
//! whoever they are, and its reply read.

use redis::aio::ConnectionLike;
use redis::Value;

use super::calls::Call;
use super::lua::SCRIPTS;
use super::replies::{parse_attempt, unexpected, Unlocked};
use super::topology::Topology;
use crate::error::Error;

/// Runs `force_unlock.lua` on the call's lock key: deletes it when it is a writer's
/// string, a readers' set or a semaphore's sorted set, raises the fence counter by one
/// and sets the granted key to it (when there is a counter: the mark quorum mode's
/// refresh reads, see [`calls::retake`](super::calls::retake)), deletes the holders'
/// descriptions (`<lock key>:holders`, whoever wrote them), keeps the lock intent and the fair queue,
/// and publishes the call's id on the release channel (by `SPUBLISH` in the lock key's
/// slot on a cluster). `held` when something was held (a
/// semaphore: a permit whose deadline had not passed); `published` when waiters were
/// told. A key of another type is [`Error::WrongType`], one without a TTL
/// [`Error::NoExpiry`]; neither is changed.
pub(crate) async fn force_unlock<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    topology: Topology,
) -> Result<Unlocked, Error> {
    let keys = &call.keys;
    let granted = keys.granted();
    let reply: Value = SCRIPTS
        .force_unlock
        .run(conn, keys, 4, |cmd| {
            cmd.arg(keys.lock())
                .arg(keys.fence())
                .arg(granted)
                .arg(keys.holders())
                .arg(keys.channel())
                .arg(call.id)
                .arg(if topology.sharded() { "1" } else { "0" });
        })
        .await
        .map_err(|err| Error::redis(keys.lock(), err))?;
    parse_forced(reply, keys.lock())
}

/// Reads the reply of `force_unlock.lua` for the lock key `key`: two bits, as
/// `unlock.lua`'s, or a refusal.
fn parse_forced(reply: Value, key: &str) -> Result<Unlocked, Error> {
    match reply {
        Value::Int(bits @ 0..=3) => Ok(Unlocked::from_reply(bits)),
        Value::Array(_) => match parse_attempt(reply.clone(), key) {
            Err(err) => Err(err),
            Ok(_) => Err(unexpected(&reply, key)),
        },
        other => Err(unexpected(&other, key)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn forced_replies_are_two_bits_or_a_refusal() {
        let parse = |reply| parse_forced(reply, "k");
        assert_eq!(
            parse(Value::Int(3)).unwrap(),
            Unlocked {
                held: true,
                published: true
            }
        );
        assert_eq!(
            parse(Value::Int(2)).unwrap(),
            Unlocked {
                held: false,
                published: true
            }
        );
        assert_eq!(parse(Value::Int(0)).unwrap(), Unlocked::from_reply(0));
        match parse(Value::Array(vec![
            bulk("wrongtype"),
            bulk("k"),
            bulk("hash"),
        ])) {
            Err(Error::WrongType { key, found }) => assert_eq!((&*key, &*found), ("k", "hash")),
            other => panic!("{other:?}"),
        }
        match parse(Value::Array(vec![bulk("noexpiry"), bulk("k")])) {
            Err(Error::NoExpiry { key }) => assert_eq!(key, "k"),
            other => panic!("{other:?}"),
        }
        for bad in [
            Value::Nil,
            Value::Int(4),
            Value::Int(-1),
            Value::Array(vec![]),
            Value::Array(vec![bulk("unchecked")]),
        ] {
            match parse(bad) {
                Err(Error::Redis { key, .. }) => assert_eq!(key, "k"),
                other => panic!("{other:?}"),
            }
        }
    }
}
