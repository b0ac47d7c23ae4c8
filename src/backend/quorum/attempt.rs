//! An acquire attempt over a quorum, the Redis distlock algorithm in two rounds: every
//! node takes the lock and mints a token; then, once a majority has, every node's fence
//! counter is raised to the largest token and a majority confirms. An attempt that wins
//! no majority releases what it took, on every node that may hold it; one that wins
//! tops up the nodes that did not take the lock (`top_up.rs`).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::round::{no_quorum, replies, Answer, Answers, Tally};
use super::top_up::{raise_or_take, NodeStates, Take, TopUp};
use super::Majority;
use crate::backend::Backend;
use crate::error::Error;
use crate::protocol::calls::{AttemptKind, Call, Holder, Leftovers};
use crate::protocol::replies::Attempt;

impl<C> Majority<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// One attempt for `call` on every node. `Acquired(token)` once a majority holds the
    /// lock and a majority's counters are at `token`; `Blocked(pttl)` when a majority
    /// answered, a node refused it and no majority took it (the shortest PTTL that
    /// blocked); else the error of [`no_quorum`].
    pub(super) async fn attempt_all(
        &self,
        call: &Call,
        kind: AttemptKind,
    ) -> Result<Attempt, Error> {
        // No fast path (its token is not floored at the clock), and no counting path for
        // readers: every token is minted by script.
        let kind = match kind {
            AttemptKind::FastWrite => AttemptKind::Write { set_intent: false },
            AttemptKind::Read { .. } => AttemptKind::Read {
                fence_checked: false,
            },
            other => other,
        };
        let shared = call.shared();
        let form = shared.node_order.form();
        let states = NodeStates::new(self.conns.len());
        let bound = self.node_bound(call);
        let taken = self
            .round(
                &shared,
                bound,
                |at, node| {
                    let (call, states) = (Arc::clone(&shared), Arc::clone(&states));
                    Some(async move {
                        let taken = node.attempt(&call, kind).await;
                        // Recorded also after the round is decided: a refresh may take
                        // the lock back on this node up to its own token, and a top-up
                        // takes the nodes that did not take it.
                        if let Ok(Attempt::Acquired(token)) = taken {
                            call.node_order.minted(at, token);
                        }
                        states.record(at, taken.as_ref().ok().map(acquired));
                        taken
                    })
                },
                |answers| Tally::of(answers, acquired).decided(),
            )
            .await;
        let tally = Tally::of(&taken, acquired);
        if !tally.won() {
            self.release_attempt(&shared, kind, &taken).await;
            // Busy only when a majority answered and a node said the lock is held: with
            // fewer answers the lock may be free on the nodes that did not answer.
            return match shortest_block(&taken) {
                Some(pttl) if tally.answered() >= tally.needed() => Ok(Attempt::Blocked(pttl)),
                _ => Err(no_quorum(call.keys.lock(), taken)),
            };
        }
        // The second round raises every node's counter to the token; a node that did not
        // take the lock in the first round is offered it first, one round trip later.
        let token = largest_token(&taken);
        let raised = self
            .round(
                &shared,
                bound,
                |at, node| {
                    let (call, states) = (Arc::clone(&shared), Arc::clone(&states));
                    Some(async move { raise_or_take(at, &node, &call, &states, kind, token).await })
                },
                |answers| Tally::of(answers, |()| true).decided(),
            )
            .await;
        if Tally::of(&raised, |()| true).won() {
            let top_up = TopUp {
                take: match kind {
                    AttemptKind::Upgradable => Take::Upgradable,
                    kind => Take::Back(kind.into()),
                },
                token,
                until: Instant::now() + Duration::from_millis(call.ttl_ms) / 2,
                form,
                live: None,
            };
            self.top_up(&shared, &states, top_up);
            return Ok(Attempt::Acquired(token));
        }
        self.release_attempt(&shared, kind, &[]).await;
        Err(no_quorum(call.keys.lock(), raised))
    }

    /// Releases what a failed attempt of `kind` may have taken, on every node but those
    /// whose answer in `taken` says they hold nothing of it (a node that found the lock
    /// held by others); the lock intent, if set, stays. Each runs in the lease's turn on
    /// its node, after the attempt there and before the next attempt; this returns once
    /// each has its place, without waiting for answers, so a frozen node holds up nothing
    /// but its own calls.
    async fn release_attempt(
        &self,
        call: &Arc<Call>,
        kind: AttemptKind,
        taken: &[Option<Answer<Attempt>>],
    ) {
        // The lease holds nothing now: a top-up of an earlier attempt that won too late
        // to be valid stops.
        call.node_order.change_form();
        if let Some(hub) = self.hub() {
            hub.attempt_released(call.keys.lock(), &call.id);
        }
        let holder = Holder::from(kind);
        let (keys, id) = (call.keys.clone(), call.id);
        // A node's release may wait for the attempt there, which has a bound of its own.
        self.send(
            call,
            self.node_bound(call) * 2,
            |at, node| {
                let blocked = matches!(
                    taken.get(at),
                    Some(Some(Answer::Reply(Attempt::Blocked(_))))
                );
                let call = Arc::clone(call);
                (!blocked).then_some(async move { node.release(&call, holder, Leftovers::NONE).await })
            },
            move |unanswered| {
                tracing::debug!(key = %keys.lock(), %id, unanswered,
                    "a failed attempt's release got no answer from some nodes; what it took there expires by its TTL");
            },
        )
        .await;
    }
}

/// Whether a node's reply took the lock.
fn acquired(attempt: &Attempt) -> bool {
    matches!(attempt, Attempt::Acquired(_))
}

/// The largest token the nodes that took the lock minted.
fn largest_token(taken: &Answers<Attempt>) -> u64 {
    let tokens = replies(taken, |attempt| match attempt {
        Attempt::Acquired(token) => Some(*token),
        _ => None,
    });
    tokens.max().unwrap_or_default()
}

/// The shortest PTTL among the nodes that found the lock held by others, if any did.
fn shortest_block(taken: &Answers<Attempt>) -> Option<Duration> {
    let blocks = replies(taken, |attempt| match attempt {
        Attempt::Blocked(pttl) => Some(*pttl),
        _ => None,
    });
    blocks.min()
}
