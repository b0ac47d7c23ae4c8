//! What the scripts answer, read into types.

use std::time::Duration;

use redis::{ErrorKind, RedisError, Value};

use crate::error::Error;

/// The smallest token minted from the server clock: microseconds since 2001-09-09. A
/// counter below it was (re)created since the last mint from the clock.
pub(crate) const CLOCK_TOKEN_MIN: i64 = 1_000_000_000_000_000;
/// The largest token: 2^53 - 1, the largest integer a Lua number (and a JSON number)
/// holds exactly. A counter there is exhausted: the scripts refuse to count past it.
pub(crate) const TOKEN_MAX: u64 = (1 << 53) - 1;

/// The reply to one acquire attempt: of `lock.lua`, `rlock.lua` or `semaphore.lua` when
/// the keys are usable, or of the write fast path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The lock is held under our id, with this fencing token.
    Acquired(u64),
    /// Somebody else holds it (or, for readers, a writer waits; or the fair queue has
    /// others ahead); the PTTL of what blocks.
    Blocked(Duration),
    /// `rlock.lua` took the fence key for a counter and it was not one: nothing was
    /// taken; the checked script says what it is.
    Unchecked,
    /// The write fast path took the lock key but got no usable token (the fence key was
    /// absent, or not a token): the lock key holds our id and `lock.lua` mints one.
    TakenWithoutToken,
    /// The write fast path found the lock key taken: `lock.lua` says why.
    Busy,
}

/// Whether an id held the lock when `unlock.lua` removed it, and whether waiters were
/// told: bits 1 and 2 of its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unlocked {
    /// The id held the lock (or a permit) and was removed.
    pub(crate) held: bool,
    /// Waiters were told on the release channel: the lock became free, a permit was
    /// returned, or the id's own intent was deleted (or its queue place left).
    pub(crate) published: bool,
}

impl Unlocked {
    pub(crate) fn from_reply(reply: i64) -> Self {
        Self {
            held: reply & 1 == 1,
            published: reply & 2 == 2,
        }
    }
}

/// Whether `downgrade.lua` turned a writer's lock into a reader's, and whether waiters
/// were told: bits 1 and 2 of its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Downgraded {
    /// The id now holds the lock as a reader, with a PTTL of at least the TTL.
    pub(crate) held: bool,
    /// The writer's key became a readers' set just now, and that was published.
    pub(crate) published: bool,
}

impl Downgraded {
    pub(crate) fn from_reply(reply: i64) -> Self {
        let Unlocked { held, published } = Unlocked::from_reply(reply);
        Self { held, published }
    }
}

/// The reply to one `upgrade.lua` call that upgrades ("wait" or "try").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Upgraded {
    /// The id now holds the lock as its writer, with this fencing token.
    Write(u64),
    /// Other readers still hold the lock; the PTTL of the readers' set.
    Blocked(Duration),
    /// The id does not hold the lock (any more): nothing was changed.
    NotHeld,
    /// The id is one of the readers, but not the upgradable one (its upgrader key was
    /// lost, and another took it): nothing was changed.
    Reader,
}

impl Upgraded {
    /// The reply of `upgrade.lua` for `key`: a token, `-1 - pttl`, `0`, or a refusal.
    pub(crate) fn parse(reply: Value, key: &str) -> Result<Self, Error> {
        if reply == Value::Int(0) {
            return Ok(Self::NotHeld);
        }
        if let Value::Array(items) = &reply {
            if let [Value::BulkString(only)] = items.as_slice() {
                if only.as_slice() == b"reader" {
                    return Ok(Self::Reader);
                }
            }
        }
        match parse_attempt(reply, key)? {
            Attempt::Acquired(token) => Ok(Self::Write(token)),
            Attempt::Blocked(pttl) => Ok(Self::Blocked(pttl)),
            other => Err(unexpected(&Value::SimpleString(format!("{other:?}")), key)),
        }
    }
}

/// The reply to one attempt of `lock_all.lua` when its keys are usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SetAttempt {
    /// Every key of the set is held under our id: one fencing token per key, in the
    /// set's order.
    Acquired(Vec<u64>),
    /// Nothing was taken: the key at this index (0-based, in the set's order) is the first
    /// that others hold (or, for a read key, that another waiter's intent keeps readers
    /// out of); the PTTL of what blocks it.
    Blocked { at: usize, pttl: Duration },
}

impl SetAttempt {
    /// The reply of `lock_all.lua` for a set of `n` keys, the first of which is `key`:
    /// `n` tokens, `{"blocked", i, pttl}`, or a refusal (see the script's header).
    pub(crate) fn parse(reply: Value, n: usize, key: &str) -> Result<Self, Error> {
        let Value::Array(items) = &reply else {
            return Err(unexpected(&reply, key));
        };
        if let [Value::BulkString(word), Value::Int(at), Value::Int(pttl)] = items.as_slice() {
            if word.as_slice() == b"blocked" {
                let at = usize::try_from(*at).ok().and_then(|at| at.checked_sub(1));
                let pttl = u64::try_from(*pttl).ok();
                return match (at, pttl) {
                    (Some(at), Some(pttl)) if at < n => Ok(Self::Blocked {
                        at,
                        pttl: Duration::from_millis(pttl),
                    }),
                    _ => Err(unexpected(&reply, key)),
                };
            }
        }
        if let Some(err) = refusal(items) {
            return Err(err);
        }
        let tokens: Option<Vec<u64>> = items
            .iter()
            .map(|item| match item {
                Value::Int(token) if *token > 0 => Some(token.unsigned_abs()),
                _ => None,
            })
            .collect();
        match tokens {
            Some(tokens) if tokens.len() == n => Ok(Self::Acquired(tokens)),
            _ => Err(unexpected(&reply, key)),
        }
    }
}

/// An error for a reply no script of this crate gives.
pub(crate) fn unexpected(reply: &Value, key: &str) -> Error {
    let err = RedisError::from((
        ErrorKind::UnexpectedReturnType,
        "unexpected reply from a redismutex script",
        format!("{reply:?}"),
    ));
    Error::redis(key, err)
}

/// Reads the reply of an acquiring script for the lock key `key`.
pub(crate) fn parse_attempt(reply: Value, key: &str) -> Result<Attempt, Error> {
    let items = match &reply {
        Value::Int(token) if *token > 0 => return Ok(Attempt::Acquired(token.unsigned_abs())),
        Value::Int(blocked) => {
            // -1 - pttl
            let pttl = u64::try_from(-1 - *blocked).map_err(|_| unexpected(&reply, key))?;
            return Ok(Attempt::Blocked(Duration::from_millis(pttl)));
        }
        Value::Array(items) => items,
        _ => return Err(unexpected(&reply, key)),
    };
    if let [Value::BulkString(only)] = items.as_slice() {
        if only.as_slice() == b"unchecked" {
            return Ok(Attempt::Unchecked);
        }
    }
    Err(refusal(items).unwrap_or_else(|| unexpected(&reply, key)))
}

/// The typed error of a script's refusal, the array `{"wrongtype", key, type}` or
/// `{"noexpiry", key}` (`items`); `None` for any other array.
pub(crate) fn refusal(items: &[Value]) -> Option<Error> {
    let text = |i: usize| match items.get(i) {
        Some(Value::BulkString(bytes)) => Some(String::from_utf8_lossy(bytes).into_owned()),
        _ => None,
    };
    match text(0).as_deref()? {
        "wrongtype" => Some(Error::WrongType {
            key: text(1)?,
            found: text(2)?,
        }),
        "noexpiry" => Some(Error::NoExpiry { key: text(1)? }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn replies_parse_into_attempts_and_typed_errors() {
        let parse = |reply| parse_attempt(reply, "k");
        assert_eq!(parse(Value::Int(7)).unwrap(), Attempt::Acquired(7));
        assert_eq!(
            parse(Value::Int(-1501)).unwrap(),
            Attempt::Blocked(Duration::from_millis(1500))
        );
        assert_eq!(
            parse(Value::Int(-1)).unwrap(),
            Attempt::Blocked(Duration::ZERO)
        );
        assert_eq!(
            parse(Value::Array(vec![bulk("unchecked")])).unwrap(),
            Attempt::Unchecked
        );
        match parse(Value::Array(vec![
            bulk("wrongtype"),
            bulk("k"),
            bulk("hash"),
        ])) {
            Err(Error::WrongType { key, found }) => {
                assert_eq!((key.as_str(), found.as_str()), ("k", "hash"))
            }
            other => panic!("{other:?}"),
        }
        match parse(Value::Array(vec![bulk("noexpiry"), bulk("k:lock-intent")])) {
            Err(Error::NoExpiry { key }) => assert_eq!(key, "k:lock-intent"),
            other => panic!("{other:?}"),
        }
        for bad in [
            Value::Nil,
            Value::Int(0),
            Value::Array(vec![]),
            Value::Array(vec![bulk("blocked")]),
            Value::Array(vec![bulk("acquired"), Value::Int(3)]),
            Value::Array(vec![bulk("unchecked"), Value::Int(3)]),
            Value::Array(vec![bulk("wrongtype"), bulk("k")]),
        ] {
            match parse(bad) {
                Err(Error::Redis { key, .. }) => assert_eq!(key, "k"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn set_replies_parse_into_tokens_a_blocking_key_and_typed_errors() {
        let parse = |reply, n| SetAttempt::parse(reply, n, "k");
        assert_eq!(
            parse(Value::Array(vec![Value::Int(7), Value::Int(9)]), 2).unwrap(),
            SetAttempt::Acquired(vec![7, 9])
        );
        let blocked = Value::Array(vec![bulk("blocked"), Value::Int(2), Value::Int(1500)]);
        assert_eq!(
            parse(blocked, 2).unwrap(),
            SetAttempt::Blocked {
                at: 1,
                pttl: Duration::from_millis(1500)
            }
        );
        match parse(Value::Array(vec![bulk("noexpiry"), bulk("k2")]), 2) {
            Err(Error::NoExpiry { key }) => assert_eq!(key, "k2"),
            other => panic!("{other:?}"),
        }
        for (bad, n) in [
            (Value::Int(7), 1),
            (Value::Array(vec![Value::Int(7)]), 2),
            (Value::Array(vec![Value::Int(7), Value::Int(0)]), 2),
            (
                Value::Array(vec![bulk("blocked"), Value::Int(3), Value::Int(1)]),
                2,
            ),
            (
                Value::Array(vec![bulk("blocked"), Value::Int(0), Value::Int(1)]),
                2,
            ),
            (
                Value::Array(vec![bulk("blocked"), Value::Int(1), Value::Int(-1)]),
                2,
            ),
        ] {
            match parse(bad, n) {
                Err(Error::Redis { key, .. }) => assert_eq!(key, "k"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn unlock_and_downgrade_replies_are_two_bits() {
        assert_eq!(
            Unlocked::from_reply(3),
            Unlocked {
                held: true,
                published: true
            }
        );
        assert_eq!(
            Downgraded::from_reply(2),
            Downgraded {
                held: false,
                published: true
            }
        );
        assert_eq!(Unlocked::from_reply(0), Unlocked::from_reply(4));
    }
}
