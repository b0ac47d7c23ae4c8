//! A semaphore key (`lua/semaphore.lua`) as the snapshot read it: a sorted set of holder
//! ids, each scored by its deadline, the server time in milliseconds when its permit
//! runs out unless refreshed (`LockState::permit_deadlines`). The permit count is each
//! caller's own and is not stored in Redis: `--permits` says it.

use std::time::SystemTime;

use redismutex::LockState;
use serde::Serialize;

use super::member::{is_id, preview};
use super::{millis, LISTED};

/// The holders of a semaphore key, by the server clock.
#[derive(Debug, Serialize)]
pub(super) struct Holders {
    /// How many holders the key has, expired or not.
    pub(super) holder_count: usize,
    /// The permits in use: holders whose deadline is after the server time.
    pub(super) in_use: usize,
    /// Holders whose deadline has passed but that are still in the key: the next acquire
    /// removes them, and they count for nothing.
    pub(super) expired: usize,
    /// The permit count given with `--permits` (Redis does not store it).
    pub(super) permits: Option<u32>,
    /// The holders by deadline, first to run out first (at most [`LISTED`]).
    pub(super) holders: Vec<Holder>,
}

/// One holder of a permit.
#[derive(Debug, Serialize)]
pub(super) struct Holder {
    /// Its permit id.
    pub(super) id: String,
    /// Its deadline (its score): the server time in milliseconds when the permit runs
    /// out unless refreshed.
    pub(super) score: i64,
    /// `score` minus the server time: the milliseconds left, 0 or less once expired.
    pub(super) remaining_ms: i64,
    /// Whether the deadline has passed (`score <= ` the server time, as the scripts
    /// decide): the permit is gone, though the id is not yet removed.
    pub(super) expired: bool,
}

/// The holders of the semaphore key in the snapshot `state`, or why it is not a
/// semaphore (a member that is no permit id, or a score that is no deadline).
pub(super) fn holders(state: &LockState, permits: Option<u32>) -> Result<Holders, String> {
    let now = millis::since_epoch(state.server_time());
    let holders = list(state.permit_deadlines(), now)?;
    let holder_count = state.permit_deadlines().len();
    let in_use = state.permits_in_use();
    Ok(Holders {
        holder_count,
        in_use,
        expired: holder_count.saturating_sub(in_use),
        permits,
        holders,
    })
}

/// The first [`LISTED`] of `entries` (each id and its deadline, by deadline) as holders
/// at server time `now` (milliseconds), or why they are not a semaphore's.
fn list(entries: &[(String, Option<SystemTime>)], now: i64) -> Result<Vec<Holder>, String> {
    let mut holders = Vec::with_capacity(entries.len().min(LISTED));
    for (id, deadline) in entries {
        if !is_id(id) {
            return Err(format!(
                "a sorted set whose member {} is not a permit id",
                preview(id)
            ));
        }
        let Some(deadline) = deadline else {
            return Err(format!(
                "a sorted set whose score of {id} is not a deadline (a whole number)"
            ));
        };
        if holders.len() < LISTED {
            let score = millis::since_epoch(*deadline);
            let remaining_ms = score.saturating_sub(now);
            holders.push(Holder {
                id: id.clone(),
                score,
                remaining_ms,
                expired: remaining_ms <= 0,
            });
        }
    }
    Ok(holders)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    const A: &str = "0123456789abcdef0123456789abcdef";
    const B: &str = "fedcba9876543210fedcba9876543210";

    fn at(ms: u64) -> Option<SystemTime> {
        Some(UNIX_EPOCH + Duration::from_millis(ms))
    }

    #[test]
    fn holders_past_their_deadline_are_expired() {
        let now = 1_000_000;
        let held = list(
            &[(A.to_owned(), at(now)), (B.to_owned(), at(now + 2500))],
            1_000_000,
        )
        .unwrap();
        let seen: Vec<(&str, i64, i64, bool)> = held
            .iter()
            .map(|h| (h.id.as_str(), h.score, h.remaining_ms, h.expired))
            .collect();
        assert_eq!(
            seen,
            [(A, 1_000_000, 0, true), (B, 1_002_500, 2500, false)],
            "a deadline of now is gone"
        );
    }

    #[test]
    fn garbage_members_or_scores_are_no_semaphore() {
        let err = list(&[(A.to_owned(), at(1)), ("alice".to_owned(), at(2))], 0).unwrap_err();
        assert!(err.contains("\"alice\" is not a permit id"), "{err}");
        let err = list(&[(A.to_owned(), None)], 0).unwrap_err();
        assert!(err.contains("not a deadline"), "{err}");
    }
}
