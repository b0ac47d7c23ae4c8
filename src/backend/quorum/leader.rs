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

/// The leader that at least `needed` of the reads name, with the earliest expiry among
/// those; no leader (and no expiry) when none is named that often.
fn agreed(answers: &Answers<LeaderRead>, needed: usize) -> LeaderRead {
    let reads: Vec<&LeaderRead> = answers
        .iter()
        .flatten()
        .filter_map(|answer| match answer {
            Answer::Reply(read) => Some(read),
            _ => None,
        })
        .collect();
    let naming = |leader: &Leader| -> Vec<&LeaderRead> {
        reads
            .iter()
            .copied()
            .filter(|read| read.leader.as_ref() == Some(leader))
            .collect()
    };
    let winner = reads
        .iter()
        .filter_map(|read| read.leader.as_ref())
        .find(|leader| naming(leader).len() >= needed);
    match winner {
        Some(leader) => LeaderRead {
            expires_in: naming(leader)
                .iter()
                .filter_map(|read| read.expires_in)
                .min(),
            leader: Some(leader.clone()),
        },
        None => LeaderRead {
            leader: None,
            expires_in: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn read(leader: Option<(&str, u64)>, ms: u64) -> Option<Answer<LeaderRead>> {
        Some(Answer::Reply(LeaderRead {
            leader: leader.map(|(value, fencing_token)| Leader {
                value: value.to_owned(),
                fencing_token,
            }),
            expires_in: Some(Duration::from_millis(ms)),
        }))
    }

    #[test]
    fn the_leader_is_the_one_a_majority_names_with_the_earliest_expiry() {
        let a = Some(("a", 5));
        let both = agreed(&vec![read(a, 900), read(a, 700), read(None, 0)], 2);
        assert_eq!(both.leader.unwrap().value, "a");
        assert_eq!(both.expires_in, Some(Duration::from_millis(700)));
        // A term or value a minority names is no leader.
        let split = agreed(
            &vec![read(a, 900), read(Some(("a", 6)), 900), read(None, 0)],
            2,
        );
        assert_eq!((split.leader, split.expires_in), (None, None));
        let silent = agreed(&vec![read(a, 900), Some(Answer::Silent), None], 2);
        assert_eq!(silent.leader, None);
    }
}
