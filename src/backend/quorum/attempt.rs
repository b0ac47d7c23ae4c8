//! An acquire attempt over a quorum, the Redis distlock algorithm in two rounds: every
//! node takes the lock and mints a token; then, once a majority has, every node's fence
//! counter is raised to the largest token and a majority confirms. An attempt that wins
//! no majority releases what it took, on every node that may hold it.

use super::round::{no_quorum, round, Answer, Answers, Tally};
use super::Majority;
use crate::backend::Backend;
use crate::error::Error;
use crate::protocol::calls::{self, Ask, Call, Hold, Leftovers};
use crate::protocol::replies::Attempt;

impl<C> Majority<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// One attempt for `call` on every node. `Acquired(token)` once a majority holds the
    /// lock and a majority's counters are at `token`; `Blocked(pttl)` when a node refused
    /// it and no majority took it (the shortest PTTL that blocked); else the error of
    /// [`no_quorum`].
    pub(super) async fn attempt_all(&self, call: &Call, ask: Ask) -> Result<Attempt, Error> {
        // No fast path (its token is not floored at the clock), and no counting path for
        // readers: every token is minted by script.
        let ask = match ask {
            Ask::FastWrite => Ask::Write { set_intent: false },
            Ask::Read { .. } => Ask::Read {
                fence_checked: false,
            },
            other => other,
        };
        let bound = self.node_bound(call);
        let taken = round(
            &self.nodes,
            bound,
            |node| node.attempt(call, ask),
            |answers| Tally::of(answers, acquired).decided(),
        )
        .await;
        if !Tally::of(&taken, acquired).won() {
            self.release_attempt(call, ask, &taken).await;
            return match shortest_block(&taken) {
                Some(pttl) => Ok(Attempt::Blocked(pttl)),
                None => Err(no_quorum(&call.keys.lock, taken)),
            };
        }
        let token = taken
            .iter()
            .flatten()
            .filter_map(|answer| match answer {
                Answer::Reply(Attempt::Acquired(token)) => Some(*token),
                _ => None,
            })
            .max()
            .unwrap_or_default();
        let raised = round(
            &self.nodes,
            bound,
            |node| {
                let mut conn = node.connection();
                async move { calls::raise_fence(&mut conn, call, token).await }
            },
            |answers| Tally::of(answers, |()| true).decided(),
        )
        .await;
        if Tally::of(&raised, |()| true).won() {
            return Ok(Attempt::Acquired(token));
        }
        self.release_attempt(call, ask, &[]).await;
        Err(no_quorum(&call.keys.lock, raised))
    }

    /// Releases what a failed attempt `ask` may have taken, on every node but those
    /// whose answer in `taken` says they hold nothing of it (a node that found the lock
    /// held by others); the lock intent, if set, stays. Each release is sent after the
    /// attempt on the node's connection, so it runs after an attempt still in flight.
    async fn release_attempt(&self, call: &Call, ask: Ask, taken: &[Option<Answer<Attempt>>]) {
        let hold = match ask {
            Ask::Read { .. } => Hold::Read,
            Ask::Permit(_) => Hold::Permit,
            Ask::FastWrite | Ask::Write { .. } => Hold::Write,
        };
        let bound = self.node_bound(call);
        let blocked = |at: usize| {
            matches!(
                taken.get(at),
                Some(Some(Answer::Reply(Attempt::Blocked(_))))
            )
        };
        let nodes: Vec<_> = (0..self.nodes.len()).filter(|&at| !blocked(at)).collect();
        let released = round(
            &nodes,
            bound,
            |&at| self.nodes[at].release(call, hold, Leftovers::NONE),
            |_| false,
        )
        .await;
        let failed = released
            .iter()
            .filter(|answer| !matches!(answer, Some(Answer::Reply(_))))
            .count();
        if failed > 0 {
            tracing::debug!(key = %call.keys.lock, id = %call.id, failed,
                "a failed attempt's release got no answer from some nodes; what it took there expires by its TTL");
        }
    }
}

/// Whether a node's reply took the lock.
fn acquired(attempt: &Attempt) -> bool {
    matches!(attempt, Attempt::Acquired(_))
}

/// The shortest PTTL among the nodes that found the lock held by others, if any did.
fn shortest_block(taken: &Answers<Attempt>) -> Option<std::time::Duration> {
    taken
        .iter()
        .flatten()
        .filter_map(|answer| match answer {
            Answer::Reply(Attempt::Blocked(pttl)) => Some(*pttl),
            _ => None,
        })
        .min()
}
