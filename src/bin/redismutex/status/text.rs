//! `status` on one server as text: the key's state and holders, what the holders recorded
//! of themselves (a table, `described.rs`), its fair queue, the lock intent and the last
//! fencing token, one line each (holders and waiters indented below); for a key the crate
//! refuses, the one line that says why.

use super::described;
use super::member::{preview, shown};
use super::queue::{Queue, Waiter};
use super::semaphore::Holders;
use super::{Part, Status};

/// The whole report on one server.
pub(super) fn status(status: &Status) -> String {
    let mut out = state(status);
    if status.refused() {
        return out;
    }
    out.push_str(&described::table(&status.described));
    out.push_str(&queue(status.queue.as_ref()));
    out.push_str(&match &status.intent {
        None => "intent: none\n".to_owned(),
        Some(part) => format!(
            "intent: {} ({}, {})\n",
            part.value.as_deref().map_or_else(|| "-".to_owned(), shown),
            part.kind,
            ms(part.pttl_ms)
        ),
    });
    out.push_str(&fence(status.fence.as_ref(), status.last_fencing_token));
    out
}

/// The first line (the key's state), and a line per reader or holder.
fn state(status: &Status) -> String {
    let pttl = status.pttl_ms.map(ms).unwrap_or_default();
    let key = &status.key;
    match (status.state, &status.semaphore) {
        ("free", _) => format!("{key}: free\n"),
        ("write", _) => format!(
            "{key}: write-locked by {} ({pttl})\n",
            status
                .writer
                .as_deref()
                .map_or_else(|| "?".to_owned(), shown)
        ),
        ("read", _) => {
            let mut out = format!(
                "{key}: read-locked by {} reader(s) ({pttl})\n",
                status.reader_count
            );
            for reader in &status.readers {
                out.push_str(&format!("  reader {}\n", shown(reader)));
            }
            out
        }
        ("semaphore", Some(holders)) => semaphore(key, holders, &pttl),
        _ => foreign(status),
    }
}

/// A key the crate does not use as a lock: what the lock key holds, when known, and why.
fn foreign(status: &Status) -> String {
    let key = &status.key;
    let what = match &status.kind {
        Some(kind) => format!("holds a {kind}, not a lock"),
        None => "not usable as a lock".to_owned(),
    };
    match &status.note {
        None => format!("{key}: {what} (left untouched)\n"),
        Some(note) => format!("{key}: {what} (left untouched): {note}\n"),
    }
}

/// A semaphore: the permits in use, then each holder with its deadline.
fn semaphore(key: &str, held: &Holders, pttl: &str) -> String {
    let mut out = format!(
        "{key}: semaphore, in use: {}, expired: {} ({pttl})\n",
        in_use(held),
        held.expired
    );
    for holder in &held.holders {
        out.push_str(&format!(
            "  holder {} {} (score {})\n",
            holder.id,
            deadline(holder.remaining_ms),
            holder.score
        ));
    }
    out.push_str(&unlisted(held.holder_count, held.holders.len(), "holder"));
    out
}

/// The permits in use: `N`, or `N of M` when the permit count is known (`--permits`).
pub(super) fn in_use(held: &Holders) -> String {
    match held.permits {
        Some(permits) => format!("{} of {permits}", held.in_use),
        None => held.in_use.to_string(),
    }
}

/// When a deadline `remaining_ms` away is: `deadline in N ms`, or `expired N ms ago, not
/// yet removed`.
pub(super) fn deadline(remaining_ms: i64) -> String {
    if remaining_ms > 0 {
        format!("deadline in {remaining_ms} ms")
    } else {
        format!(
            "expired {} ms ago, not yet removed",
            remaining_ms.saturating_neg()
        )
    }
}

/// A line for the `total - listed` members left out, if any.
fn unlisted(total: usize, listed: usize, what: &str) -> String {
    match total.saturating_sub(listed) {
        0 => String::new(),
        more => format!("  ... {more} more {what}(s), not listed\n"),
    }
}

/// The fair queue: `queue: none`, or its waiters in order.
fn queue(queue: Option<&Queue>) -> String {
    let Some(queue) = queue else {
        return "queue: none\n".to_owned();
    };
    let mut out = format!(
        "queue: {} waiter(s), the first is next ({})\n",
        queue.waiter_count,
        ms(queue.pttl_ms)
    );
    for waiter in &queue.waiters {
        out.push_str(&format!("  {}\n", self::waiter(waiter)));
    }
    out.push_str(&unlisted(queue.waiter_count, queue.waiters.len(), "waiter"));
    out
}

/// One waiter: `1. writer <id> deadline in N ms (ticket T, score S)`.
fn waiter(waiter: &Waiter) -> String {
    let who = match &waiter.id {
        Some(id) => format!("{} {id}", waiter.kind),
        None => format!("unknown {}", preview(&waiter.member)),
    };
    let when = waiter
        .remaining_ms
        .map_or_else(|| "no deadline".to_owned(), deadline);
    let ticket = waiter.ticket.map_or("?".to_owned(), |t| t.to_string());
    let score = waiter.deadline.map_or("?".to_owned(), |s| s.to_string());
    format!(
        "{}. {who} {when} (ticket {ticket}, score {score})",
        waiter.position
    )
}

/// The fencing counter: `last fencing token: N (PTTL ...)`, or `none`.
fn fence(fence: Option<&Part>, token: Option<u64>) -> String {
    match (fence, token) {
        (Some(part), Some(token)) => {
            format!("last fencing token: {token} ({})\n", ms(part.pttl_ms))
        }
        _ => "last fencing token: none\n".to_owned(),
    }
}

/// A PTTL as text: `PTTL 3512 ms`, `no TTL` (-1), or `no key` (-2).
pub(super) fn ms(pttl: i64) -> String {
    match pttl {
        -2 => "no key".to_owned(),
        ..0 => "no TTL".to_owned(),
        _ => format!("PTTL {pttl} ms"),
    }
}
