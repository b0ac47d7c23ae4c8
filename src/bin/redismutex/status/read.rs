//! The Redis reads of `status`, each a command that changes nothing: `TIME`, `TYPE`,
//! `PTTL`, `GET`, `SMEMBERS`, and a sorted set's `ZCARD`, `ZCOUNT`, `ZRANGE ... WITHSCORES` and
//! `ZSCORE`.

use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Value};

/// How many members of a sorted set (a semaphore's holders, a queue's waiters) are read
/// and listed at most; the counts are always whole.
pub(super) const LISTED: usize = 1000;

/// The server clock (`TIME`) in milliseconds, as the scripts read it (`now_ms` in
/// `lua/base.lua`): every deadline score is compared with it.
pub(super) async fn server_time_ms(conn: &mut MultiplexedConnection) -> RedisResult<i64> {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(conn).await?;
    Ok(secs.saturating_mul(1000).saturating_add(micros / 1000))
}

/// The Redis `TYPE` of `key` (`none` when it does not exist) and its PTTL in milliseconds
/// (-1: no TTL, -2: no key).
pub(super) async fn kind_and_pttl(
    conn: &mut MultiplexedConnection,
    key: &str,
) -> RedisResult<(String, i64)> {
    let (kind, pttl): (Value, i64) = redis::pipe()
        .cmd("TYPE")
        .arg(key)
        .cmd("PTTL")
        .arg(key)
        .query_async(conn)
        .await?;
    Ok((text(kind).unwrap_or_else(|| "unknown".to_owned()), pttl))
}

/// The value of `key` as text (lossily decoded), or `None` when it is absent or not a
/// string.
pub(super) async fn get(
    conn: &mut MultiplexedConnection,
    key: &str,
) -> RedisResult<Option<String>> {
    let value: Value = redis::cmd("GET").arg(key).query_async(conn).await?;
    Ok(text(value))
}

/// The members of the set `key`, each lossily decoded, sorted.
pub(super) async fn members(
    conn: &mut MultiplexedConnection,
    key: &str,
) -> RedisResult<Vec<String>> {
    let members: Vec<Vec<u8>> = redis::cmd("SMEMBERS").arg(key).query_async(conn).await?;
    let mut members: Vec<String> = members
        .iter()
        .map(|member| String::from_utf8_lossy(member).into_owned())
        .collect();
    members.sort();
    Ok(members)
}

/// A sorted set as read in one transaction (`MULTI`/`EXEC`, reads only).
#[derive(Debug)]
pub(super) struct Zset {
    /// How many members it has (`ZCARD`).
    pub(super) card: usize,
    /// How many of them score above the given time (`ZCOUNT key (now +inf`): deadlines
    /// not yet passed, as the scripts count them (they drop scores `<= now`).
    pub(super) after: usize,
    /// Its first [`LISTED`] members by score, each with its score when that is an integer
    /// (the scripts write only integers; `None` for another score, such as `1.5` or
    /// `inf`).
    pub(super) entries: Vec<(String, Option<i64>)>,
}

/// Reads the sorted set `key`, counting the scores above `now`. `None` when `key` is not
/// a sorted set (any more: it may change type after `TYPE` was read).
pub(super) async fn zset(
    conn: &mut MultiplexedConnection,
    key: &str,
    now: i64,
) -> RedisResult<Option<Zset>> {
    let last = isize::try_from(LISTED).unwrap_or(isize::MAX) - 1;
    let replies: Vec<RedisResult<Value>> = redis::pipe()
        .atomic()
        .ignore_errors()
        .cmd("ZCARD")
        .arg(key)
        .cmd("ZCOUNT")
        .arg(key)
        .arg(format!("({now}"))
        .arg("+inf")
        .cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(last)
        .arg("WITHSCORES")
        .query_async(conn)
        .await?;
    let mut replies = replies.into_iter();
    let (Some(Ok(card)), Some(Ok(after)), Some(Ok(range))) =
        (replies.next(), replies.next(), replies.next())
    else {
        return Ok(None);
    };
    let count = |value: Value| match value {
        Value::Int(n) => usize::try_from(n).ok(),
        _ => None,
    };
    let (Some(card), Some(after)) = (count(card), count(after)) else {
        return Ok(None);
    };
    Ok(Some(Zset {
        card,
        after,
        entries: pairs(range),
    }))
}

/// The score of each of `members` in the sorted set `key` (`ZSCORE`, one pipeline; works
/// on every Redis from 5.0, unlike `ZMSCORE`): `None` for a member it does not hold, a
/// score that is not an integer, or a key that is not a sorted set.
pub(super) async fn scores(
    conn: &mut MultiplexedConnection,
    key: &str,
    members: &[String],
) -> RedisResult<Vec<Option<i64>>> {
    if members.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for member in members {
        pipe.cmd("ZSCORE").arg(key).arg(member);
    }
    let replies: Vec<RedisResult<Value>> = pipe.query_async(conn).await?;
    Ok(replies
        .into_iter()
        .map(|reply| reply.ok().and_then(score))
        .collect())
}

/// The member-score pairs of a `ZRANGE ... WITHSCORES` reply: a flat array (RESP2) or an
/// array of pairs (RESP3).
fn pairs(range: Value) -> Vec<(String, Option<i64>)> {
    let Value::Array(items) = range else {
        return Vec::new();
    };
    if items.iter().all(|item| matches!(item, Value::Array(_))) {
        return items
            .into_iter()
            .filter_map(|pair| match pair {
                Value::Array(pair) => {
                    let mut pair = pair.into_iter();
                    let member = text(pair.next()?)?;
                    Some((member, pair.next().and_then(score)))
                }
                _ => None,
            })
            .collect();
    }
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut items = items.into_iter();
    while let (Some(member), Some(value)) = (items.next(), items.next()) {
        if let Some(member) = text(member) {
            out.push((member, score(value)));
        }
    }
    out
}

/// A reply as text: a bulk or simple string, lossily decoded.
fn text(value: Value) -> Option<String> {
    match value {
        Value::SimpleString(text) => Some(text),
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        Value::Okay => Some("OK".to_owned()),
        _ => None,
    }
}

/// A score as an integer: `None` unless it is a whole number a Lua script can hold
/// exactly (below 2^53 in magnitude).
fn score(value: Value) -> Option<i64> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    let score = match value {
        Value::Double(score) => score,
        Value::Int(score) => return Some(score),
        other => text(other)?.parse::<f64>().ok()?,
    };
    let whole = score.is_finite() && score.fract() == 0.0 && score.abs() < EXACT;
    whole.then_some(score as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn scores_are_whole_numbers_or_none() {
        assert_eq!(score(bulk("1718000000123")), Some(1_718_000_000_123));
        assert_eq!(score(bulk("-5")), Some(-5));
        assert_eq!(score(Value::Double(7.0)), Some(7));
        for odd in ["1.5", "inf", "-inf", "nan", "abc", "", "1e300"] {
            assert_eq!(score(bulk(odd)), None, "{odd}");
        }
        assert_eq!(score(Value::Nil), None);
    }

    #[test]
    fn pairs_come_flat_or_nested_and_garbage_is_skipped() {
        let flat = Value::Array(vec![bulk("a"), bulk("1"), bulk("b"), bulk("x")]);
        assert_eq!(
            pairs(flat),
            [("a".to_owned(), Some(1)), ("b".to_owned(), None)]
        );
        let nested = Value::Array(vec![Value::Array(vec![bulk("a"), Value::Double(2.0)])]);
        assert_eq!(pairs(nested), [("a".to_owned(), Some(2))]);
        let odd = Value::Array(vec![bulk("a")]);
        assert!(pairs(odd).is_empty(), "a member without its score");
        assert!(pairs(Value::Nil).is_empty());
        let binary = Value::Array(vec![Value::BulkString(vec![0xff, 0]), bulk("3")]);
        assert_eq!(pairs(binary), [("\u{fffd}\0".to_owned(), Some(3))]);
    }
}
