//! Checks over a fault run's log that need no server: tokens in the order the lock
//! passed between holders, and guards whose spans overlap. Both scale to a long run's
//! log (one pass, one sort).

use std::collections::{BTreeMap, HashMap};

use crate::common::events::Event;
use crate::common::record::{FaultKind, FaultRecord};

/// The acquisitions whose token breaks the order the lock passed in: per key, in the
/// order of the `ACQUIRED` events, a writer's token must be above every earlier token,
/// and a reader's above the last writer's (readers that share the lock need no order
/// among themselves). A holder prints `ACQUIRED` as soon as its acquire returns, so
/// the print order is the acquisition order unless a worker stalls for about a TTL
/// between the two.
pub fn out_of_order(events: &[Event]) -> Vec<String> {
    let mut seen: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut out = Vec::new();
    for e in events.iter().filter(|e| e.is("ACQUIRED")) {
        let (max, last_writer) = seen.entry(e.key().to_string()).or_default();
        let mode = e.field(0);
        let token = e.token();
        let floor = if mode == "w" { *max } else { *last_writer };
        if token <= floor {
            out.push(format!(
                "{} {} {}/{mode} token {token} not above {floor} (largest before {max}, \
                 last writer {last_writer})",
                e.us,
                e.key(),
                e.worker
            ));
        }
        *max = (*max).max(token);
        if mode == "w" {
            *last_writer = token;
        }
    }
    out
}

/// One acquisition and how much the fence counter grew for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenStep {
    /// When its `ACQUIRED` was printed.
    pub us: u64,
    pub token: u64,
    /// Its token less the next smaller token acquired on its key.
    pub step: u64,
}

/// How much the fence counter grew for each acquisition printed after `from_us`: per
/// key, its token less the next smaller token acquired on that key (tokens are unique
/// per key, so their order is the order they were minted in, whatever order they were
/// printed in). A key's first acquisition has none. With every acquisition a writer's,
/// a step of 1 is a token minted as `last + 1`, one of more a token from the clock.
pub fn token_steps(events: &[Event], from_us: u64) -> Vec<TokenStep> {
    let mut by_key: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.is("ACQUIRED")) {
        by_key.entry(e.key()).or_default().push((e.token(), e.us));
    }
    let mut steps = Vec::new();
    for acquired in by_key.values_mut() {
        acquired.sort_unstable();
        for pair in acquired.windows(2) {
            let ((last, _), (token, us)) = (pair[0], pair[1]);
            if us > from_us {
                let step = token - last;
                steps.push(TokenStep { us, token, step });
            }
        }
    }
    steps
}

/// The acquisitions made while another guard on the same key (one of the two a writer)
/// still believed it held the lock: between that guard's `ACQUIRED` and its `FIRED`
/// (by its own unlock, which prints before the release is sent, or by a loss). A token
/// fires `Lost` only before its validity deadline, and `Expired` at it, while the keys
/// on the server (on a majority, in quorum mode) outlive that deadline by the drift
/// margin: so with a sound lock no acquisition falls inside another guard's span. A
/// worker SIGKILLed prints no `FIRED`: its span ends at the kill. (A worker frozen
/// prints its `FIRED` late: callers discount those.) One sweep per key over the
/// acquisitions in time order, so it takes a long run's log.
pub fn guard_overlaps(events: &[Event], faults: &[FaultRecord]) -> Vec<String> {
    let mut spans = spans(events, faults);
    spans.sort_by(|a, b| (a.held.key(), a.held.us).cmp(&(b.held.key(), b.held.us)));
    let mut out = Vec::new();
    let mut active: Vec<&Span> = Vec::new();
    for (i, span) in spans.iter().enumerate() {
        let other = span.held;
        if i > 0 && spans[i - 1].held.key() != other.key() {
            active.clear();
        }
        active.retain(|held| held.end_us > other.us);
        for held in &active {
            let writer = held.held.field(0) == "w" || other.field(0) == "w";
            if writer && held.held.token() != other.token() && held.held.us < other.us {
                out.push(overlap_line(held, other));
            }
        }
        if span.end_us > other.us {
            active.push(span);
        }
    }
    out
}

/// A guard from its `ACQUIRED` to its end.
struct Span<'a> {
    held: &'a Event,
    end_us: u64,
    how: String,
}

/// Every guard's span: each worker runs one section at a time (on one key, or on each
/// key of a set), so its next `FIRED` on a key after an `ACQUIRED` of that key ends that
/// guard, unless the worker was SIGKILLed first. A guard with neither (the worker
/// stopped) has no end and is left out.
fn spans<'a>(events: &'a [Event], faults: &[FaultRecord]) -> Vec<Span<'a>> {
    let mut open: HashMap<(&str, &str), &Event> = HashMap::new();
    let mut ended: Vec<(&Event, Option<&Event>)> = Vec::new();
    for e in events {
        if e.is("ACQUIRED") {
            if let Some(held) = open.insert((&e.worker, e.key()), e) {
                ended.push((held, None));
            }
        } else if e.is("FIRED") {
            let at = (e.worker.as_str(), e.key());
            let same = open.get(&at).is_some_and(|held| held.token() == e.token());
            if same {
                let held = open.remove(&at).expect("an open guard");
                ended.push((held, Some(e)));
            }
        }
    }
    ended.extend(open.into_values().map(|held| (held, None)));
    let mut out = Vec::new();
    for (held, fired) in ended {
        let killed = faults
            .iter()
            .filter(|f| {
                f.kind == FaultKind::KillWorker && f.hits(&held.worker) && f.start_us > held.us
            })
            .map(|f| f.start_us)
            .min();
        let (end_us, how) = match (fired, killed) {
            (Some(fired), Some(kill)) if kill < fired.us => (kill, "killed".to_string()),
            (Some(fired), _) => (fired.us, fired.last().to_string()),
            (None, Some(kill)) => (kill, "killed".to_string()),
            (None, None) => continue,
        };
        out.push(Span { held, end_us, how });
    }
    out
}

/// `<us> <key> <worker>/<mode> token T acquired while <worker>/<mode> token T held it ...`.
fn overlap_line(held: &Span, other: &Event) -> String {
    let (key, token, worker) = (held.held.key(), held.held.token(), &held.held.worker);
    format!(
        "{} {key} {}/{} token {} acquired while {worker}/{} token {token} held it \
         (acquired {:.1} ms before, ended by {} {:.1} ms after)",
        other.us,
        other.worker,
        other.field(0),
        other.token(),
        held.held.field(0),
        (other.us - held.held.us) as f64 / 1000.0,
        held.how,
        (held.end_us - other.us) as f64 / 1000.0,
    )
}

/// Whether a line of [`QuorumReport::out_of_order`] or
/// [`QuorumReport::guard_overlaps`] (`<us> <key> ...`, naming workers as
/// `<worker>/<mode>`) involves a worker frozen (SIGSTOP) within two TTLs before it or
/// a TTL after: a frozen worker prints its `ACQUIRED` or `FIRED` late, so its span or
/// its place in the order is not what the log shows.
pub fn explained_by_worker_freeze(line: &str, faults: &[FaultRecord], ttl_ms: u64) -> bool {
    let at: u64 = line
        .split_whitespace()
        .next()
        .and_then(|us| us.parse().ok())
        .unwrap_or(0);
    let workers: Vec<&str> = line
        .split_whitespace()
        .filter_map(|word| word.split_once('/').map(|(worker, _)| worker))
        .collect();
    let ttl_us = ttl_ms * 1000;
    faults.iter().any(|f| {
        f.kind == FaultKind::FreezeWorker
            && workers.iter().any(|worker| f.hits(worker))
            && f.start_us <= at + ttl_us
            && f.end_us + 2 * ttl_us >= at
    })
}
