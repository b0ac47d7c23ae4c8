//! What `status` shows of one snapshot: the [`Status`] of the lock key, made from the
//! `LockState` that `snapshot.rs` read (its holders, TTLs, intent, fence, queue and the
//! server time), or from the crate's refusal of the key. Reads nothing itself.

use redismutex::{LockState, Mode};

use super::described;
use super::millis;
use super::queue;
use super::semaphore;
use super::snapshot::{Refusal, Snapshot};
use super::{Part, Status};

/// The status of the lock key `key` that `snapshot` shows; `permits` is `--permits`.
pub(super) fn status(key: &str, snapshot: &Snapshot, permits: Option<u32>) -> Status {
    match snapshot {
        Snapshot::Lock(state) => lock(key, state),
        Snapshot::Semaphore(state) => semaphore(key, state, permits),
        Snapshot::Refused(refusal) => refused(key, refusal),
    }
}

/// A read-write lock's key: free, write-locked or read-locked.
fn lock(key: &str, state: &LockState) -> Status {
    let mut status = common(key, state);
    match state.mode() {
        None => {}
        Some(Mode::Write) => {
            status.state = "write";
            status.kind = Some("string".to_owned());
            status.writer = state.holders().first().cloned();
            let pttl = status.pttl_ms;
            status.described = described::of(state, state.holders(), |_| pttl);
        }
        Some(Mode::Read) => {
            status.state = "read";
            status.kind = Some("set".to_owned());
            status.readers = state.holders().to_vec();
            status.reader_count = status.readers.len();
            let pttl = status.pttl_ms;
            status.described = described::of(state, &status.readers, |_| pttl);
        }
    }
    status
}

/// A semaphore's key: its holders, expired or not; or `foreign` when its members or
/// scores are not a semaphore's; free when the key does not exist.
fn semaphore(key: &str, state: &LockState, permits: Option<u32>) -> Status {
    let mut status = common(key, state);
    if state.permit_deadlines().is_empty() {
        return status;
    }
    status.kind = Some("zset".to_owned());
    match semaphore::holders(state, permits) {
        Ok(holders) => {
            let ids: Vec<String> = holders.holders.iter().map(|h| h.id.clone()).collect();
            status.described = described::of(state, &ids, |id| {
                let holder = holders.holders.iter().find(|h| h.id == id)?;
                Some(holder.remaining_ms)
            });
            status.state = "semaphore";
            status.semaphore = Some(holders);
        }
        Err(note) => (status.state, status.note) = ("foreign", Some(note)),
    }
    status
}

/// What every snapshot shows, whatever the lock key holds: its PTTL, the intent, the
/// fence, the queue and the server time; the key as free.
fn common(key: &str, state: &LockState) -> Status {
    let intent_key = format!("{key}:lock-intent");
    let fence_key = format!("{key}:fence");
    let waiting = state.waiting_writer().map(str::to_owned);
    let token = state.last_fencing_token();
    Status {
        key: key.to_owned(),
        state: "free",
        kind: Some("none".to_owned()),
        writer: None,
        readers: Vec::new(),
        reader_count: 0,
        pttl_ms: millis::pttl(state, key),
        intent: part(state, intent_key, waiting),
        fence: part(state, fence_key, token.map(|token| token.to_string())),
        server_time_ms: Some(millis::since_epoch(state.server_time())),
        last_fencing_token: token,
        described: Vec::new(),
        semaphore: None,
        queue: queue::of(key, state),
        note: None,
    }
}

/// The string key `key` of the lock holding `value`, if the snapshot saw it exist.
fn part(state: &LockState, key: String, value: Option<String>) -> Option<Part> {
    let pttl_ms = millis::pttl(state, &key)?;
    Some(Part {
        key,
        kind: "string".to_owned(),
        value,
        pttl_ms,
    })
}

/// A key the crate refuses: `foreign`, with the lock key's type when known and why; the
/// rest was not read.
fn refused(key: &str, refusal: &Refusal) -> Status {
    Status {
        key: key.to_owned(),
        state: "foreign",
        kind: refusal.lock_type.clone(),
        writer: None,
        readers: Vec::new(),
        reader_count: 0,
        pttl_ms: None,
        intent: None,
        fence: None,
        server_time_ms: None,
        last_fencing_token: None,
        described: Vec::new(),
        semaphore: None,
        queue: None,
        note: refusal.why.clone(),
    }
}
