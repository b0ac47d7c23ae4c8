//! One node's view as the cells of the side-by-side table of a quorum's `status`: a row
//! per field, in Redis terms, `-` where the field does not apply.

use super::described;
use super::member::{preview, shown};
use super::queue::{Queue, Waiter};
use super::semaphore::Holders;
use super::table::Row;
use super::text::in_use;
use super::Status;

/// What a node shows: its status, or why it did not answer.
pub(super) type Column<'a> = Result<&'a Status, &'a str>;

/// A row of the table: its label, and the cell a node's status gives it.
type Field = (&'static str, fn(&Status) -> Vec<String>);

/// The rows of the table for `columns`, one per node; an `error` row only when a node
/// did not answer.
pub(super) fn rows(columns: &[Column<'_>]) -> Vec<Row> {
    let fields: [Field; 10] = [
        ("state", state),
        ("writer", |s| one(s.writer.as_deref().map(shown))),
        ("readers", |s| {
            many(s.readers.iter().map(|r| shown(r)).collect())
        }),
        ("holders", holders),
        ("described", |s| many(described::lines(&s.described))),
        ("in use", |s| one(s.semaphore.as_ref().map(in_use_cell))),
        ("queue", |s| s.queue.as_ref().map_or_else(dash, queue)),
        ("intent", |s| {
            one(s
                .intent
                .as_ref()
                .and_then(|i| i.value.as_deref().map(shown)))
        }),
        ("last fencing token", fence),
        ("PTTL", |s| one(s.pttl_ms.map(pttl))),
    ];
    let mut rows: Vec<Row> = fields
        .into_iter()
        .map(|(label, cell)| Row {
            label,
            cells: columns
                .iter()
                .map(|column| match column {
                    Ok(status) => cell(status),
                    Err(_) if label == "state" => vec!["unreachable".to_owned()],
                    Err(_) => dash(),
                })
                .collect(),
        })
        .collect();
    if columns.iter().any(Result::is_err) {
        rows.push(Row {
            label: "error",
            cells: columns
                .iter()
                .map(|column| one(column.err().map(str::to_owned)))
                .collect(),
        });
    }
    rows
}

/// A cell of one `-`.
fn dash() -> Vec<String> {
    vec!["-".to_owned()]
}

/// A cell of `value`, or `-`.
fn one(value: Option<String>) -> Vec<String> {
    value.map_or_else(dash, |value| vec![value])
}

/// A cell of a line per value, or `-` for none.
fn many(values: Vec<String>) -> Vec<String> {
    if values.is_empty() {
        dash()
    } else {
        values
    }
}

/// `write`, `read`, `free`, `semaphore`, or `foreign (<type>)` (`foreign` when the lock
/// key's type is not known).
fn state(status: &Status) -> Vec<String> {
    match (status.state, &status.kind) {
        ("foreign", Some(kind)) => vec![format!("foreign ({kind})")],
        (state, _) => vec![state.to_owned()],
    }
}

/// A semaphore's holders, each `<id> (N ms)` or `<id> (expired)`.
fn holders(status: &Status) -> Vec<String> {
    let Some(held) = &status.semaphore else {
        return dash();
    };
    many(
        held.holders
            .iter()
            .map(|holder| format!("{} ({})", holder.id, left(holder.remaining_ms)))
            .collect(),
    )
}

/// The permits in use, `2 of 3`, with the expired holders not yet removed.
fn in_use_cell(held: &Holders) -> String {
    let used = in_use(held);
    match held.expired {
        0 => used.to_owned(),
        expired => format!("{used}, {expired} expired"),
    }
}

/// The queue's waiters in order, each `1. writer <id> (N ms)`.
fn queue(queue: &Queue) -> Vec<String> {
    many(queue.waiters.iter().map(waiter).collect())
}

/// One waiter: `1. writer <id> (N ms)`.
fn waiter(waiter: &Waiter) -> String {
    let who = match &waiter.id {
        Some(id) => format!("{} {id}", waiter.kind),
        None => format!("unknown {}", preview(&waiter.member)),
    };
    let when = waiter.remaining_ms.map_or("no deadline".to_owned(), left);
    format!("{}. {who} ({when})", waiter.position)
}

/// The last fencing token, or `-`.
fn fence(status: &Status) -> Vec<String> {
    one(status.last_fencing_token.map(|token| token.to_string()))
}

/// The time left before a deadline: `N ms`, or `expired`.
fn left(remaining_ms: i64) -> String {
    if remaining_ms > 0 {
        format!("{remaining_ms} ms")
    } else {
        "expired".to_owned()
    }
}

/// A PTTL: `N ms`.
fn pttl(pttl: i64) -> String {
    format!("{pttl} ms")
}
