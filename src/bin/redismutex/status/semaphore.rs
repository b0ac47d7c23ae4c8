//! A semaphore key (`lua/semaphore.lua`): a sorted set of holder ids, each scored by its
//! deadline, the server time in milliseconds when its permit runs out unless refreshed.
//! The permit count is each caller's own and is not stored in Redis: `--permits` says it.

use redis::aio::MultiplexedConnection;
use redis::RedisResult;
use serde::Serialize;

use super::member::{is_id, preview};
use super::read::{self, Zset};

/// The holders of a semaphore key, by the server clock.
#[derive(Debug, Serialize)]
pub(super) struct Holders {
    /// How many holders the key has (`ZCARD`), expired or not.
    pub(super) holder_count: usize,
    /// The permits in use: holders whose deadline is after the server time.
    pub(super) in_use: usize,
    /// Holders whose deadline has passed but that are still in the key: the next acquire
    /// removes them, and they count for nothing.
    pub(super) expired: usize,
    /// The permit count given with `--permits` (Redis does not store it).
    pub(super) permits: Option<u32>,
    /// The holders by deadline, first to run out first (at most [`read::LISTED`]).
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

/// Reads the sorted set at `key` as a semaphore at server time `now`: its holders, or
/// why it is not a semaphore (a member that is no permit id, a score that is no
/// deadline, or a key that stopped being a sorted set).
pub(super) async fn read(
    conn: &mut MultiplexedConnection,
    key: &str,
    now: i64,
    permits: Option<u32>,
) -> RedisResult<Result<Holders, String>> {
    Ok(match read::zset(conn, key, now).await? {
        Some(zset) => holders(zset, now, permits),
        None => Err("it stopped being a sorted set while read".to_owned()),
    })
}

/// The holders in `zset` at server time `now`, or why it is not a semaphore.
fn holders(zset: Zset, now: i64, permits: Option<u32>) -> Result<Holders, String> {
    let mut holders = Vec::with_capacity(zset.entries.len());
    for (id, score) in zset.entries {
        if !is_id(&id) {
            return Err(format!(
                "a sorted set whose member {} is not a permit id",
                preview(&id)
            ));
        }
        let Some(score) = score else {
            return Err(format!(
                "a sorted set whose score of {id} is not a deadline (a whole number)"
            ));
        };
        let remaining_ms = score.saturating_sub(now);
        holders.push(Holder {
            id,
            score,
            remaining_ms,
            expired: remaining_ms <= 0,
        });
    }
    Ok(Holders {
        holder_count: zset.card,
        in_use: zset.after,
        expired: zset.card.saturating_sub(zset.after),
        permits,
        holders,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0123456789abcdef0123456789abcdef";
    const B: &str = "fedcba9876543210fedcba9876543210";

    fn zset(entries: &[(&str, Option<i64>)], after: usize) -> Zset {
        Zset {
            card: entries.len(),
            after,
            entries: entries.iter().map(|&(m, s)| (m.to_owned(), s)).collect(),
        }
    }

    #[test]
    fn holders_past_their_deadline_are_expired_and_not_in_use() {
        let now = 1_000_000;
        let held = holders(
            zset(&[(A, Some(now)), (B, Some(now + 2500))], 1),
            now,
            Some(3),
        );
        let held = held.unwrap();
        assert_eq!((held.holder_count, held.in_use, held.expired), (2, 1, 1));
        assert_eq!(held.permits, Some(3));
        let seen: Vec<(&str, i64, bool)> = held
            .holders
            .iter()
            .map(|h| (h.id.as_str(), h.remaining_ms, h.expired))
            .collect();
        assert_eq!(
            seen,
            [(A, 0, true), (B, 2500, false)],
            "a deadline of now is gone"
        );
    }

    #[test]
    fn garbage_members_or_scores_are_no_semaphore() {
        let err = holders(zset(&[(A, Some(1)), ("alice", Some(2))], 2), 0, None).unwrap_err();
        assert!(err.contains("\"alice\" is not a permit id"), "{err}");
        let err = holders(zset(&[(A, None)], 1), 0, None).unwrap_err();
        assert!(err.contains("not a deadline"), "{err}");
    }
}
