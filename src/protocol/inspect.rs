//! Reading the whole state of one lock key at once: `inspect.lua`, and its reply read into
//! a [`LockState`].

use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::Value;

use super::keys::Keys;
use super::lua::SCRIPTS;
use super::replies::{refusal, unexpected};
use crate::error::Error;
use crate::lock_state::LockState;
use crate::mode::Mode;

/// What kind of handle's key is read: it decides which types the lock key may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// A read-write lock's: a writer's string or a readers' set.
    Lock,
    /// A semaphore's: a sorted set of permits.
    Semaphore,
}

impl Form {
    fn arg(self) -> &'static str {
        match self {
            Self::Lock => "lock",
            Self::Semaphore => "semaphore",
        }
    }
}

/// Runs `inspect.lua` on the lock's `keys`, which must include the fair queue's
/// ([`Keys::queue`]), and reads its reply: one snapshot, nothing written.
pub(crate) async fn inspect<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    form: Form,
) -> Result<LockState, Error> {
    let key = keys.lock();
    let Some(queue) = keys.queue() else {
        return Err(unexpected(&Value::Nil, key));
    };
    let reply: Value = SCRIPTS
        .inspect
        .run(conn, keys, 5, |cmd| {
            cmd.arg(key)
                .arg(keys.intent())
                .arg(keys.fence())
                .arg(queue.order)
                .arg(queue.deadline)
                .arg(form.arg());
        })
        .await
        .map_err(|err| Error::redis(key, err))?;
    parse(reply, key)
}

/// Reads the reply of `inspect.lua` for the lock key `key`.
fn parse(reply: Value, key: &str) -> Result<LockState, Error> {
    let Value::Array(items) = &reply else {
        return Err(unexpected(&reply, key));
    };
    if let Some(refused) = refusal(items) {
        return Err(refused);
    }
    let bad = || unexpected(&reply, key);
    let [lock_type, pttl, intent, fence, holders, queue] = items.as_slice() else {
        return Err(bad());
    };
    let (Some(lock_type), Value::Int(pttl), Value::Int(intent), Value::Int(fence)) =
        (text(lock_type), pttl, intent, fence)
    else {
        return Err(bad());
    };
    let (Some(mut holders), Some(queue)) = (texts(holders), texts(queue)) else {
        return Err(bad());
    };
    let mode = match lock_type.as_str() {
        "none" => None,
        "string" => Some(Mode::Write),
        "set" => Some(Mode::Read),
        // A semaphore whose every permit ran out is free.
        "zset" => (!holders.is_empty()).then_some(Mode::Read),
        _ => return Err(bad()),
    };
    if lock_type == "set" {
        holders.sort_unstable();
    }
    let ttl = match mode {
        None => None,
        Some(_) => Some(Duration::from_millis(
            u64::try_from(*pttl).map_err(|_| bad())?,
        )),
    };
    Ok(LockState {
        mode,
        holders,
        ttl,
        writer_waiting: *intent == 1,
        last_fencing_token: u64::try_from(*fence).ok().filter(|token| *token > 0),
        queue,
    })
}

/// A reply as text: a bulk string, lossily decoded.
fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        _ => None,
    }
}

/// An array reply as texts; `None` when it is not an array of bulk strings.
fn texts(value: &Value) -> Option<Vec<String>> {
    match value {
        Value::Array(items) => items.iter().map(text).collect(),
        // RESP3 gives a set as a set.
        Value::Set(items) => items.iter().map(text).collect(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn reply(kind: &str, pttl: i64, intent: i64, fence: i64, holders: &[&str]) -> Value {
        let holders = holders.iter().map(|h| bulk(h)).collect();
        let queue = vec![bulk("w:b"), bulk("r:a")];
        Value::Array(vec![
            bulk(kind),
            Value::Int(pttl),
            Value::Int(intent),
            Value::Int(fence),
            Value::Array(holders),
            Value::Array(queue),
        ])
    }

    #[test]
    fn replies_parse_into_states_and_refusals_into_typed_errors() {
        let free = parse(reply("none", -2, 0, 0, &[]), "k").unwrap();
        assert_eq!(
            (free.mode(), free.ttl(), free.last_fencing_token()),
            (None, None, None)
        );
        assert_eq!(free.queue(), ["w:b", "r:a"], "in the order stored");
        let readers = parse(reply("set", 1500, 1, 7, &["b", "a"]), "k").unwrap();
        assert_eq!(readers.mode(), Some(Mode::Read));
        assert_eq!(readers.holders(), ["a", "b"], "sorted");
        assert_eq!(readers.ttl(), Some(Duration::from_millis(1500)));
        assert!(readers.writer_waiting());
        assert_eq!(readers.last_fencing_token(), Some(7));
        let permits = parse(reply("zset", 900, 0, 3, &["b", "a"]), "k").unwrap();
        assert_eq!(permits.holders(), ["b", "a"], "by deadline, as sent");
        assert_eq!(
            (permits.mode(), permits.permits_in_use()),
            (Some(Mode::Read), 2)
        );
        let run_out = parse(reply("zset", 900, 0, 3, &[]), "k").unwrap();
        assert_eq!((run_out.mode(), run_out.ttl()), (None, None));
        let writer = parse(reply("string", 10, 0, 1, &["w"]), "k").unwrap();
        assert_eq!(writer.mode(), Some(Mode::Write));
        let refused = Value::Array(vec![bulk("wrongtype"), bulk("k:fence"), bulk("hash")]);
        assert!(matches!(
            parse(refused, "k"),
            Err(Error::WrongType { key, found }) if key == "k:fence" && found == "hash"
        ));
        let refused = Value::Array(vec![bulk("noexpiry"), bulk("k")]);
        assert!(matches!(parse(refused, "k"), Err(Error::NoExpiry { key }) if key == "k"));
        for bad in [
            Value::Nil,
            Value::Int(1),
            Value::Array(vec![]),
            reply("hash", 10, 0, 0, &[]),
            reply("string", -1, 0, 0, &["w"]),
            Value::Array(vec![bulk("none"), Value::Int(-2)]),
        ] {
            assert!(matches!(parse(bad, "k"), Err(Error::Redis { key, .. }) if key == "k"));
        }
    }
}
