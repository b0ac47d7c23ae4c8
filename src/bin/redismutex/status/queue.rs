//! A fair queue (`lua/shared.lua`; fair mode in the guide
//! `redismutex::guide::semaphore`), of a lock or a semaphore alike, as the snapshot read
//! it: `<lock key>:queue`, the waiters scored by arrival ticket
//! (`LockState::queue_tickets`), and `<lock key>:queue-deadline`, the same members
//! scored by the server time in milliseconds by which each must attempt again or lose
//! its place (`LockState::queue_deadlines`). Each member comes typed from the library
//! (`QueueEntry`: a writer, a reader or a permit and its id, or one it does not know).

use std::collections::HashMap;
use std::time::SystemTime;

use redismutex::{LockState, QueueEntry};
use serde::Serialize;

use super::{millis, LISTED};

/// The fair queue of a lock key, when either of its keys exists.
#[derive(Debug, Serialize)]
pub(super) struct Queue {
    /// `<lock key>:queue`.
    pub(super) key: String,
    /// Its Redis `TYPE`: `zset`, or `none` when absent.
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    /// Its PTTL in milliseconds (-2: absent).
    pub(super) pttl_ms: i64,
    /// `<lock key>:queue-deadline`.
    pub(super) deadline_key: String,
    /// Its Redis `TYPE`: `zset`, or `none` when absent.
    pub(super) deadline_type: &'static str,
    /// Its PTTL in milliseconds (-2: absent).
    pub(super) deadline_pttl_ms: i64,
    /// `waiting` (waiters queued) or `empty`.
    pub(super) state: &'static str,
    /// How many waiters `<lock key>:queue` holds, expired or not.
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
    pub(super) ticket: Option<u64>,
    /// Its score in `<lock key>:queue-deadline`: the server time in milliseconds by
    /// which it must attempt again (none when it has no whole score there).
    pub(super) deadline: Option<i64>,
    /// `deadline` minus the server time: the milliseconds left, 0 or less once expired.
    pub(super) remaining_ms: Option<i64>,
    /// Whether the deadline has passed: the waiter stopped attempting and the next fair
    /// request drops it.
    pub(super) expired: bool,
}

/// The fair queue of the lock key `lock` in the snapshot `state`: `None` when neither of
/// its keys exists (no fair waiter).
pub(super) fn of(lock: &str, state: &LockState) -> Option<Queue> {
    let (key, deadline_key) = (format!("{lock}:queue"), format!("{lock}:queue-deadline"));
    let (pttl, deadline_pttl) = (
        millis::pttl(state, &key),
        millis::pttl(state, &deadline_key),
    );
    if pttl.is_none() && deadline_pttl.is_none() {
        return None;
    }
    let kind = |pttl: Option<i64>| if pttl.is_some() { "zset" } else { "none" };
    let tickets = state.queue_tickets();
    let now = millis::since_epoch(state.server_time());
    Some(Queue {
        key,
        kind: kind(pttl),
        pttl_ms: pttl.unwrap_or(-2),
        deadline_key,
        deadline_type: kind(deadline_pttl),
        deadline_pttl_ms: deadline_pttl.unwrap_or(-2),
        state: if tickets.is_empty() {
            "empty"
        } else {
            "waiting"
        },
        waiter_count: tickets.len(),
        waiters: waiters(tickets, state.queue_deadlines(), now),
    })
}

/// The waiters of `tickets` (member and ticket, in queue order) with their `deadlines`,
/// at server time `now` (milliseconds).
fn waiters(
    tickets: &[(QueueEntry, Option<u64>)],
    deadlines: &[(QueueEntry, Option<SystemTime>)],
    now: i64,
) -> Vec<Waiter> {
    let deadlines: HashMap<&QueueEntry, i64> = deadlines
        .iter()
        .filter_map(|(entry, deadline)| Some((entry, millis::since_epoch((*deadline)?))))
        .collect();
    (1..)
        .zip(tickets)
        .take(LISTED)
        .map(|(position, (entry, ticket))| {
            let deadline = deadlines.get(entry).copied();
            let remaining_ms = deadline.map(|deadline| deadline.saturating_sub(now));
            Waiter {
                position,
                member: entry.to_string(),
                kind: kind(entry),
                id: entry.id().map(str::to_owned),
                ticket: *ticket,
                deadline,
                remaining_ms,
                expired: remaining_ms.is_some_and(|ms| ms <= 0),
            }
        })
        .collect()
}

/// What `entry` waits for, as `status` names it: `writer`, `reader`, `permit`, or
/// `unknown` for a member the crate does not write.
fn kind(entry: &QueueEntry) -> &'static str {
    match entry {
        QueueEntry::Writer(_) => "writer",
        QueueEntry::Reader(_) => "reader",
        QueueEntry::Permit(_) => "permit",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    const ID: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn waiters_keep_the_queue_order_and_flag_what_is_odd() {
        let (writer, permit) = (
            QueueEntry::Writer(ID.to_owned()),
            QueueEntry::Permit(ID.to_owned()),
        );
        let junk = QueueEntry::Unknown("junk".to_owned());
        let tickets = [
            (writer.clone(), Some(1)),
            (permit.clone(), Some(2)),
            (junk.clone(), None),
        ];
        let at = |ms| Some(UNIX_EPOCH + Duration::from_millis(ms));
        let deadlines = [(permit, at(5000)), (writer, at(9000)), (junk, None)];
        let got = waiters(&tickets, &deadlines, 5000);
        let seen: Vec<_> = got
            .iter()
            .map(|w| {
                (
                    w.position,
                    w.kind,
                    w.ticket,
                    w.deadline,
                    w.remaining_ms,
                    w.expired,
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (1, "writer", Some(1), Some(9000), Some(4000), false),
                (2, "permit", Some(2), Some(5000), Some(0), true),
                (3, "unknown", None, None, None, false),
            ]
        );
        assert_eq!(got[0].id.as_deref(), Some(ID));
        assert_eq!(got[0].member, format!("w:{ID}"), "as stored");
        assert_eq!(
            (got[2].id.as_deref(), got[2].member.as_str()),
            (None, "junk")
        );
    }
}
