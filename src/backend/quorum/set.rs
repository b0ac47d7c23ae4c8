//! A set's acquire attempt over a quorum ([`RwMutex::lock_all`](crate::RwMutex::lock_all)):
//! the majority rule of `attempt.rs` applied to the whole set, each node taking every key
//! of it in one `lock_all.lua` or none. Round 1 sends the set to every node; it is won
//! once a majority took the whole set. Round 2 raises each key's fence counter on every
//! node to the largest token any node minted for that key, and a majority must confirm
//! every key. An attempt that wins no majority releases what it took, key by key, on
//! every node that may hold it.
//!
//! A node that did not take the set is not topped up here: once the set is held, each key
//! is a lease of its own, which the refresher renews, and its renewal takes the key back
//! on a node that lacks it (`retake.lua`, per key) once the node lets it.
//!
//! # One set, several leases
//!
//! Each key's [`Call`] has its own [`NodeOrder`](crate::protocol::node_order::NodeOrder),
//! which keeps that lease's calls to a node in order. A set's attempt on a node is one
//! script for all its leases, so it runs in every key's turn on that node, taken one key
//! after the other in the set's order; so do its second round and the releases of a failed
//! attempt. A failed attempt's release therefore waits, on a slow node, until the attempt
//! there has ended (answered, failed, or dropped at the per-node bound), and cannot
//! overtake it. This cannot deadlock: the calls that take several turns are a set's own,
//! and take them in the same order; every other call (a renewal, a retake, the wait's
//! clean-up) takes one lease's turn alone, and waits for nothing while it holds it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;

use super::round::{self, no_quorum, replies, Answer, Answers, Tally};
use super::Majority;
use crate::backend::direct::Direct;
use crate::backend::Backend;
use crate::error::Error;
use crate::mode::Mode;
use crate::protocol::calls::{self, Call, Holder, Leftovers, SetPart};
use crate::protocol::replies::SetAttempt;
use crate::spawner::Spawner;

/// One key of a set, owned, for the tasks of a round: its lease's call (shared, so its
/// node order is the lease's) and the mode the set takes it in.
#[derive(Debug)]
struct Member {
    call: Arc<Call>,
    mode: Mode,
}

impl Member {
    /// What the id holds at the key once the set took it.
    fn holder(&self) -> Holder {
        match self.mode {
            Mode::Write => Holder::Writer,
            Mode::Read => Holder::Reader,
        }
    }
}

/// The keys of a set, in the set's order.
type Members = Arc<[Member]>;

impl<C> Majority<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// One attempt of the set `parts` on every node, each node taking every key or none
    /// (`lock_all.lua`, with the intents of `set_intent`). `Acquired(tokens)` once a
    /// majority took the whole set and, for every key, a majority's counters are at its
    /// token (the largest any node minted for it); `Blocked { at, pttl }` when a majority
    /// answered, a node found the set blocked and no majority took it (the shortest PTTL
    /// any node reported, and the index of the key it reported it for); else the error of
    /// [`no_quorum`], named after the first key.
    pub(super) async fn attempt_set_all(
        &self,
        parts: &[SetPart<'_>],
        set_intent: bool,
    ) -> Result<SetAttempt, Error> {
        let Some(first) = parts.first() else {
            return Ok(SetAttempt::Acquired(Vec::new()));
        };
        let key = first.call.keys.lock();
        let set: Members = parts
            .iter()
            .map(|part| Member {
                call: part.call.shared(),
                mode: part.mode,
            })
            .collect();
        let spawner = Spawner::current(self.tracker.clone());
        let bound = self.node_bound(first.call);
        let taken = round::round(
            &spawner,
            &self.meters,
            self.nodes(),
            bound,
            |at, node| {
                let set = Arc::clone(&set);
                Some(async move {
                    let _turns = turns(&set, at).await;
                    let parts: Vec<SetPart<'_>> = set
                        .iter()
                        .map(|member| SetPart {
                            call: &member.call,
                            mode: member.mode,
                        })
                        .collect();
                    let taken = node.attempt_set(&parts, set_intent).await;
                    // Recorded also after the round is decided: a renewal may take a key
                    // back on this node up to the token the node minted for it.
                    if let Ok(SetAttempt::Acquired(tokens)) = &taken {
                        for (member, token) in set.iter().zip(tokens) {
                            member.call.node_order.minted(at, *token);
                        }
                    }
                    taken
                })
            },
            |answers| Tally::of(answers, acquired).decided(),
        )
        .await;
        let tally = Tally::of(&taken, acquired);
        if !tally.won() {
            self.release_set(&set, &taken, bound).await;
            // Blocked only when a majority answered and a node found a key held: with
            // fewer answers the set may be free on the nodes that did not answer.
            return match shortest_block(&taken) {
                Some((at, pttl)) if tally.answered() >= tally.needed() => {
                    Ok(SetAttempt::Blocked { at, pttl })
                }
                _ => Err(no_quorum(key, taken)),
            };
        }
        let tokens: Arc<[u64]> = largest_tokens(&taken, set.len()).into();
        let raised = round::round(
            &spawner,
            &self.meters,
            self.nodes(),
            bound,
            |at, node| {
                let (set, tokens) = (Arc::clone(&set), Arc::clone(&tokens));
                Some(async move { raise_set(at, &node, &set, &tokens).await })
            },
            |answers| Tally::of(answers, |()| true).decided(),
        )
        .await;
        if Tally::of(&raised, |()| true).won() {
            return Ok(SetAttempt::Acquired(tokens.to_vec()));
        }
        self.release_set(&set, &[], bound).await;
        Err(no_quorum(key, raised))
    }

    /// Releases what a failed attempt of `set` may have taken, every key on every node
    /// but those whose answer in `taken` says the set was blocked there (and so nothing
    /// was taken); the intents a blocked node set stay, for the set's wait to renew or
    /// remove. Each node's releases run in every key's turn there, after the attempt, and
    /// this returns once each has its place, without waiting for answers, so a frozen
    /// node holds up nothing but its own calls. `bound` is the per-node bound.
    async fn release_set(
        &self,
        set: &Members,
        taken: &[Option<Answer<SetAttempt>>],
        bound: Duration,
    ) {
        // No key is held for the set now (as `release_attempt` does for one lease).
        for member in set.iter() {
            member.call.node_order.change_form();
        }
        let spawner = Spawner::current(self.tracker.clone());
        let key = set.first().map(|member| member.call.keys.lock().to_owned());
        let id = set.first().map(|member| member.call.id);
        round::send(
            &spawner,
            &self.meters,
            self.nodes(),
            // A node's releases may wait for the attempt there, which has a bound of its own.
            bound * 2,
            |at, node| {
                let blocked = matches!(
                    taken.get(at),
                    Some(Some(Answer::Reply(SetAttempt::Blocked { .. })))
                );
                let set = Arc::clone(set);
                (!blocked).then_some(async move { release_on(at, &node, &set).await })
            },
            move |unanswered| {
                tracing::debug!(key = ?key, id = ?id, unanswered,
                    "a failed set attempt's release got no answer from some nodes; what it took there expires by its TTL");
            },
        )
        .await;
    }
}

/// Every key's turn on node `at`, taken in the set's order (see the module docs); the
/// turns last while the guards are held.
async fn turns(set: &[Member], at: usize) -> Vec<OwnedMutexGuard<()>> {
    let mut turns = Vec::with_capacity(set.len());
    for member in set {
        turns.push(member.call.node_order.turn(at).await);
    }
    turns
}

/// Round 2 on node `at`, in the set's turns there: every key's fence counter raised to its
/// token (`tokens`, in the set's order), all at once. `Ok` when every key's was.
async fn raise_set<C>(
    at: usize,
    node: &Direct<C>,
    set: &[Member],
    tokens: &[u64],
) -> Result<(), Error>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    let _turns = turns(set, at).await;
    let raises = set.iter().zip(tokens).map(|(member, token)| {
        let mut conn = node.connection();
        async move { calls::raise_fence(&mut conn, &member.call, *token).await }
    });
    first_error(futures_util::future::join_all(raises).await)
}

/// Releases every key of `set` on node `at`, in the set's turns there, each as its mode
/// holds it, all at once. `Ok` when every release was answered.
async fn release_on<C>(at: usize, node: &Direct<C>, set: &[Member]) -> Result<(), Error>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    let _turns = turns(set, at).await;
    let releases = set
        .iter()
        .map(|member| node.release(&member.call, member.holder(), Leftovers::NONE));
    let released = futures_util::future::join_all(releases).await;
    first_error(
        released
            .into_iter()
            .map(|unlocked| unlocked.map(drop))
            .collect(),
    )
}

/// `Ok` when every result is, else the first error. Every call ran to its end before.
fn first_error(results: Vec<Result<(), Error>>) -> Result<(), Error> {
    results.into_iter().collect()
}

/// Whether a node's reply took the whole set.
fn acquired(attempt: &SetAttempt) -> bool {
    matches!(attempt, SetAttempt::Acquired(_))
}

/// For each of the `n` keys of a set, the largest token the nodes that took it minted.
fn largest_tokens(taken: &Answers<SetAttempt>, n: usize) -> Vec<u64> {
    let mut largest = vec![0; n];
    let acquired = replies(taken, |attempt| match attempt {
        SetAttempt::Acquired(tokens) => Some(tokens),
        SetAttempt::Blocked { .. } => None,
    });
    for tokens in acquired {
        for (top, token) in largest.iter_mut().zip(tokens) {
            *top = (*top).max(*token);
        }
    }
    largest
}

/// The shortest PTTL a node that found the set blocked reported, with the index of the
/// key it blocked at, if any node did.
fn shortest_block(taken: &Answers<SetAttempt>) -> Option<(usize, Duration)> {
    let blocks = replies(taken, |attempt| match attempt {
        SetAttempt::Blocked { at, pttl } => Some((*at, *pttl)),
        SetAttempt::Acquired(_) => None,
    });
    blocks.min_by_key(|(_, pttl)| *pttl)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acquired(tokens: &[u64]) -> Option<Answer<SetAttempt>> {
        Some(Answer::Reply(SetAttempt::Acquired(tokens.to_vec())))
    }

    fn blocked(at: usize, ms: u64) -> Option<Answer<SetAttempt>> {
        Some(Answer::Reply(SetAttempt::Blocked {
            at,
            pttl: Duration::from_millis(ms),
        }))
    }

    #[test]
    fn each_key_takes_the_largest_token_any_node_minted_for_it() {
        let taken = vec![
            acquired(&[5, 90]),
            Some(Answer::Silent),
            acquired(&[7, 80]),
            blocked(1, 10),
            None,
        ];
        assert_eq!(largest_tokens(&taken, 2), [7, 90]);
        assert_eq!(largest_tokens(&vec![None, blocked(0, 1)], 2), [0, 0]);
    }

    #[test]
    fn a_blocked_set_reports_the_shortest_pttl_and_its_key() {
        let taken = vec![blocked(2, 300), acquired(&[1, 2, 3]), blocked(0, 40), None];
        assert_eq!(shortest_block(&taken), Some((0, Duration::from_millis(40))));
        assert_eq!(shortest_block(&vec![acquired(&[1]), None]), None);
    }
}
