//! A fair queue (`lua/shared.lua`; fair mode in the guide
//! `redismutex::guide::semaphore`), of a lock or a semaphore alike: `<lock key>:queue`,
//! the waiters `<kind>:<id>` scored by arrival ticket, and `<lock key>:queue-deadline`,
//! the same members scored by the server time in milliseconds by which each must attempt
//! again or lose its place.

use redis::aio::MultiplexedConnection;
use redis::RedisResult;
use serde::Serialize;

use super::member;
use super::read::{self, LISTED};

/// The fair queue of a lock key, when either of its keys exists.
#[derive(Debug, Serialize)]
pub(super) struct Queue {
    /// `<lock key>:queue`.
    pub(super) key: String,
    /// Its Redis `TYPE` (`none` when absent).
    #[serde(rename = "type")]
    pub(super) kind: String,
    /// Its PTTL in milliseconds (-1: no TTL, -2: absent).
    pub(super) pttl_ms: i64,
    /// `<lock key>:queue-deadline`.
    pub(super) deadline_key: String,
    /// Its Redis `TYPE` (`none` when absent).
    pub(super) deadline_type: String,
    /// Its PTTL in milliseconds (-1: no TTL, -2: absent).
    pub(super) deadline_pttl_ms: i64,
    /// `waiting` (waiters queued), `empty`, or `foreign`: a key holds another type than a
    /// sorted set (fair requests refuse it; left untouched).
    pub(super) state: &'static str,
    /// How many waiters `<lock key>:queue` holds (`ZCARD`), expired or not.
    pub(super) waiter_count: usize,
    /// The waiters in order, the next first (at most [`LISTED`]).
    pub(super) waiters: Vec<Waiter>,
}

/// One waiter of the queue.
#[derive(Debug, Serialize)]
pub(super) struct Waiter {
    /// Its place, from 1: the first is served next.
    pub(super) position: usize,
    /// The member as stored: `<kind>:<id>`.
    pub(super) member: String,
    /// `writer`, `reader`, `permit`, or `unknown` for a member the crate does not write.
    pub(super) kind: &'static str,
    /// Its request id (none for an `unknown` member).
    pub(super) id: Option<String>,
    /// Its score in `<lock key>:queue`: its arrival ticket (none when not whole).
    pub(super) ticket: Option<i64>,
    /// Its score in `<lock key>:queue-deadline`: the server time in milliseconds by
    /// which it must attempt again (none when it has no whole score there).
    pub(super) deadline: Option<i64>,
    /// `deadline` minus the server time: the milliseconds left, 0 or less once expired.
    pub(super) remaining_ms: Option<i64>,
    /// Whether the deadline has passed: the waiter stopped attempting and the next fair
    /// request drops it.
    pub(super) expired: bool,
}

/// Reads the fair queue of `lock` at server time `now`: `None` when neither of its keys
/// exists (no fair waiter).
pub(super) async fn read(
    conn: &mut MultiplexedConnection,
    lock: &str,
    now: i64,
) -> RedisResult<Option<Queue>> {
    let (key, deadline_key) = (format!("{lock}:queue"), format!("{lock}:queue-deadline"));
    let (kind, pttl_ms) = read::kind_and_pttl(conn, &key).await?;
    let (deadline_type, deadline_pttl_ms) = read::kind_and_pttl(conn, &deadline_key).await?;
    if kind == "none" && deadline_type == "none" {
        return Ok(None);
    }
    let mut queue = Queue {
        key,
        kind,
        pttl_ms,
        deadline_key,
        deadline_type,
        deadline_pttl_ms,
        state: "empty",
        waiter_count: 0,
        waiters: Vec::new(),
    };
    let sorted = |kind: &str| kind == "zset" || kind == "none";
    if !sorted(&queue.kind) || !sorted(&queue.deadline_type) {
        queue.state = "foreign";
        return Ok(Some(queue));
    }
    if queue.kind == "zset" {
        let Some(order) = read::zset(conn, &queue.key, now).await? else {
            queue.state = "foreign";
            return Ok(Some(queue));
        };
        let members: Vec<String> = order.entries.iter().map(|(m, _)| m.clone()).collect();
        let deadlines = read::scores(conn, &queue.deadline_key, &members).await?;
        queue.waiter_count = order.card;
        queue.waiters = waiters(order.entries, deadlines, now);
    }
    if queue.waiter_count > 0 {
        queue.state = "waiting";
    }
    Ok(Some(queue))
}

/// The waiters of `order` (member and ticket, in queue order) with their `deadlines`, at
/// server time `now`.
fn waiters(
    order: Vec<(String, Option<i64>)>,
    deadlines: Vec<Option<i64>>,
    now: i64,
) -> Vec<Waiter> {
    let deadlines = deadlines.into_iter().chain(std::iter::repeat(None));
    (1..)
        .zip(order.into_iter().zip(deadlines))
        .take(LISTED)
        .map(|(position, ((member, ticket), deadline))| {
            let (kind, id) = member::waiter(&member);
            let id = id.map(str::to_owned);
            let remaining_ms = deadline.map(|deadline| deadline.saturating_sub(now));
            Waiter {
                position,
                kind,
                id,
                ticket,
                deadline,
                remaining_ms,
                expired: remaining_ms.is_some_and(|ms| ms <= 0),
                member,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn waiters_keep_the_queue_order_and_flag_what_is_odd() {
        let order = vec![
            (format!("w:{ID}"), Some(1)),
            (format!("p:{ID}"), Some(2)),
            ("junk".to_owned(), None),
        ];
        let now = 5000;
        let got = waiters(order, vec![Some(9000), Some(5000)], now);
        let seen: Vec<_> = got
            .iter()
            .map(|w| (w.position, w.kind, w.ticket, w.remaining_ms, w.expired))
            .collect();
        assert_eq!(
            seen,
            [
                (1, "writer", Some(1), Some(4000), false),
                (2, "permit", Some(2), Some(0), true),
                (3, "unknown", None, None, false),
            ]
        );
        assert_eq!(got[0].id.as_deref(), Some(ID));
        assert_eq!(
            (got[2].id.as_deref(), got[2].member.as_str()),
            (None, "junk")
        );
    }
}
