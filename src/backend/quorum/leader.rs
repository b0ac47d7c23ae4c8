//! An election's record over a quorum: `proclaim.lua` and `leader.lua` sent to every
//! node at once, each bounded by the per-node bound, and the answers counted.

use std::sync::Arc;

use super::round::{no_quorum, Answer, Answers, Tally};
use super::Majority;
use crate::backend::Backend;
use crate::error::Error;
use crate::leader::Leader;
use crate::protocol::calls::Call;
use crate::protocol::leader::LeaderRead;

impl<C> Majority<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Writes the record on every node where the id holds the lock: true when a majority
    /// wrote it, false when a majority said the id does not hold the lock there;
    /// otherwise the refusal a majority gave, or [`Error::NoQuorum`].
    pub(super) async fn proclaim_all(&self, call: &Call, record: &str) -> Result<bool, Error> {
        let shared = call.shared();
        let record: Arc<str> = Arc::from(record);
        let answers = self
            .round(
                &shared,
                self.node_bound(call),
                |_, node| {
                    let (call, record) = (Arc::clone(&shared), Arc::clone(&record));
                    Some(async move { node.proclaim(&call, &record).await })
                },
                |answers| Tally::of(answers, |written| *written).settled(),
            )
            .await;
        let tally = Tally::of(&answers, |written| *written);
        if tally.won() {
            return Ok(true);
        }
        if tally.refused() {
            return Ok(false);
        }
        Err(no_quorum(call.keys.lock(), answers))
    }

    /// Reads every node (each within the per-node bound): the leader a majority of the
    /// nodes names, the same value and term on each, with the earliest expiry among
    /// them; no leader when no majority agrees. [`Error::NoQuorum`] (or the refusal a
    /// majority gave) when fewer than a majority answered.
    pub(super) async fn leader_all(&self, call: &Call) -> Result<LeaderRead, Error> {
        let shared = call.shared();
        let answers = self
            .round(
                &shared,
                self.node_bound(call),
                |_, node| {
                    let call = Arc::clone(&shared);
                    Some(async move { node.leader(&call).await })
                },
                |answers| Tally::of(answers, |_: &LeaderRead| true).pending() == 0,
            )
            .await;
        let tally = Tally::of(&answers, |_| true);
        if tally.answered() < tally.needed() {
            return Err(no_quorum(call.keys.lock(), answers));
        }
        Ok(agreed(&answers, tally.needed()))
    }
}

/// The leader of the writer that holds the lock on at least `needed` of the nodes read,
/// with the earliest expiry among those nodes: the record for that writer most of the
/// nodes hold (a node that took the lock back may have none), the first such on a tie.
/// No leader (and no expiry) when no writer holds a majority, or no node holds its
/// record.
fn agreed(answers: &Answers<LeaderRead>, needed: usize) -> LeaderRead {
    let reads: Vec<&LeaderRead> = answers
        .iter()
        .flatten()
        .filter_map(|answer| match answer {
            Answer::Reply(read) => Some(read),
            _ => None,
        })
        .collect();
    let holding = |id: &str| -> Vec<&LeaderRead> {
        reads
            .iter()
            .copied()
            .filter(|read| read.holder.as_deref() == Some(id))
            .collect()
    };
    let Some(winner) = reads
        .iter()
        .filter_map(|read| read.holder.as_deref())
        .find(|id| holding(id).len() >= needed)
    else {
        return LeaderRead::default();
    };
    let records: Vec<&Leader> = reads
        .iter()
        .filter_map(|read| read.recorded.as_ref())
        .filter(|(id, _)| id == winner)
        .map(|(_, leader)| leader)
        .collect();
    let named = |leader: &Leader| records.iter().filter(|other| **other == leader).count();
    let Some(leader) = records.iter().copied().max_by_key(|leader| named(leader)) else {
        return LeaderRead::default();
    };
    LeaderRead {
        leader: Some(leader.clone()),
        expires_in: holding(winner)
            .iter()
            .filter_map(|read| read.expires_in)
            .min(),
        holder: Some(winner.to_owned()),
        recorded: None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A node's read: `holder` at the lock key for `ms`, and the record of `recorded`.
    fn read(
        holder: Option<&str>,
        recorded: Option<(&str, &str, u64)>,
        ms: u64,
    ) -> Option<Answer<LeaderRead>> {
        let recorded = recorded.map(|(id, value, fencing_token)| {
            let leader = Leader {
                value: value.to_owned(),
                fencing_token,
            };
            (id.to_owned(), leader)
        });
        Some(Answer::Reply(LeaderRead {
            leader: None,
            expires_in: holder.map(|_| Duration::from_millis(ms)),
            holder: holder.map(str::to_owned),
            recorded,
        }))
    }

    #[test]
    fn the_leader_is_the_majority_holders_with_its_record_and_the_earliest_expiry() {
        let rec = Some(("a", "v", 5));
        let both = agreed(
            &vec![
                read(Some("a"), rec, 900),
                read(Some("a"), rec, 700),
                read(None, None, 0),
            ],
            2,
        );
        assert_eq!(both.leader.unwrap().value, "v");
        assert_eq!(both.expires_in, Some(Duration::from_millis(700)));
        // A node that took the lock back without the record still counts as holding it.
        let retaken = agreed(
            &vec![
                read(Some("a"), rec, 900),
                read(Some("a"), None, 800),
                Some(Answer::Silent),
            ],
            2,
        );
        assert_eq!(retaken.leader.unwrap().fencing_token, 5);
        assert_eq!(retaken.expires_in, Some(Duration::from_millis(800)));
        // The record most holders' nodes have wins (a proclaim that reached a minority).
        let newer = Some(("a", "w", 5));
        let split = agreed(
            &vec![
                read(Some("a"), rec, 900),
                read(Some("a"), newer, 900),
                read(Some("a"), newer, 900),
            ],
            2,
        );
        assert_eq!(split.leader.unwrap().value, "w");
        // No writer on a majority, or no record for it: nobody leads.
        let minority = agreed(
            &vec![
                read(Some("a"), rec, 900),
                read(Some("b"), None, 900),
                read(None, rec, 0),
            ],
            2,
        );
        assert_eq!((minority.leader, minority.expires_in), (None, None));
        let unrecorded = agreed(
            &vec![
                read(Some("a"), None, 900),
                read(Some("a"), Some(("b", "x", 4)), 900),
                None,
            ],
            2,
        );
        assert_eq!(unrecorded.leader, None);
    }
}
