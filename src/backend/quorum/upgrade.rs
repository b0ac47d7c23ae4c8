//! An upgradable reader over a quorum: its upgrade into the writer, and its turn into a
//! plain reader, each `upgrade.lua` sent to every node and counted.
//!
//! An upgrade is decided as an acquire is (`attempt.rs`): won once a majority of the nodes
//! turned the readers' set into the id's string, each minting a token; then every node's
//! fence counter is raised to the largest, and a majority confirms; a node that other
//! readers kept out is upgraded in the background once they leave it (`top_up.rs`,
//! [`Take::Upgrade`]). An upgrade that does not win gives nothing back: a node that did
//! upgrade keeps the id as its writer's string, which keeps everyone else out of that node
//! (the upgradable read kept writers out already), and which the next upgrade finds done
//! (`upgrade.lua` answers a resent upgrade with a new token). The id is then a reader on
//! some nodes and the writer on others, and the lease copes with both forms: its renewals
//! count a node holding the id's string as held (`renew.lua` finds the id in either form),
//! and its release removes the id from each node as the upgradable reader and, where that
//! finds nothing, as the writer (`keep.rs`).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::round::{no_quorum, replies, Answer, Answers, Tally};
use super::top_up::{NodeStates, Take, TopUp};
use super::Majority;
use crate::backend::Backend;
use crate::error::Error;
use crate::protocol::calls::{self, Call, UpgradeOp};
use crate::protocol::replies::Upgraded;

impl<C> Majority<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// One upgrade of `call`'s upgradable reader on every node (`op`: whether a node
    /// where others still read sets the lock intent). `Write(token)` once a majority
    /// holds the id as its writer and a majority's counters are at `token`, the largest
    /// they minted; otherwise `Reader` when a majority says the id is a reader there but
    /// no longer the upgradable one, `NotHeld` when a majority says the id is not the
    /// upgradable reader there (gone, or a reader only), `Blocked(pttl)` when a majority
    /// answered and a node found other readers (the shortest PTTL of their sets); else
    /// the error of [`no_quorum`].
    pub(super) async fn upgrade_all(&self, call: &Call, op: UpgradeOp) -> Result<Upgraded, Error> {
        let shared = call.shared();
        // The lease's form changes: a retake of the upgradable reader's form computed
        // before stops (none is made for it, see `refresh_node`).
        shared.node_order.change_form();
        let form = shared.node_order.form();
        let states = NodeStates::new(self.conns.len());
        let bound = self.node_bound(call);
        let turned = self
            .round(
                &shared,
                bound,
                |at, node| {
                    let (call, states) = (Arc::clone(&shared), Arc::clone(&states));
                    Some(async move {
                        let turned = node.upgrade(&call, op).await;
                        // Recorded also after the round is decided: a later retake of
                        // the writer on this node goes up to the token it minted, and a
                        // node other readers kept out is topped up.
                        if let Ok(Upgraded::Write(token)) = turned {
                            call.node_order.minted(at, token);
                        }
                        states.record(at, top_up_state(&turned));
                        turned
                    })
                },
                |answers| Tally::of(answers, upgraded).decided(),
            )
            .await;
        let tally = Tally::of(&turned, upgraded);
        if !tally.won() {
            return not_won(call, turned, tally);
        }
        // The second round, as an acquire's: every node's counter goes up to the token,
        // so that any later majority shares a node whose counter is past it.
        let token = largest_token(&turned);
        let raised = self
            .round(
                &shared,
                bound,
                |_, node| {
                    let call = Arc::clone(&shared);
                    Some(async move {
                        calls::raise_fence(&mut node.connection(), &call, token).await
                    })
                },
                |answers| Tally::of(answers, |()| true).decided(),
            )
            .await;
        if Tally::of(&raised, |()| true).won() {
            // The writer's token is `token` on every node, though the lease's renewals
            // still name the upgradable read's (smaller) token: recorded as minted for
            // each node, a retake of the writer there is bounded by `token`, so a node
            // whose granted token the second round raised to it is taken back as ours.
            for at in 0..self.conns.len() {
                shared.node_order.minted(at, token);
            }
            // A node where other readers kept the upgrade out (most often a reader whose
            // release has not reached it yet) is upgraded in the background, as an
            // acquire's missing nodes are taken: until the first renewal is due, or the
            // lease changes form (released, downgraded).
            let top_up = TopUp {
                take: Take::Upgrade,
                token,
                until: Instant::now() + Duration::from_millis(call.ttl_ms) / 2,
                form,
                live: None,
            };
            self.top_up(&shared, &states, top_up);
            return Ok(Upgraded::Write(token));
        }
        Err(no_quorum(call.keys.lock(), raised))
    }

    /// `call`'s upgradable reader stays a plain reader on every node (`upgrade.lua`'s
    /// "plain"). True once a majority says the id is one of the readers there, false
    /// once a majority says it is not (a node where an earlier upgrade that did not win
    /// left the id's string says not: the id holds that node as the writer, until its
    /// release); else [`Error::NoQuorum`].
    pub(super) async fn plain_all(&self, call: &Call) -> Result<bool, Error> {
        let shared = call.shared();
        // The lease's form changes: the acquire's top-up, which would make a node's id the
        // upgradable reader again, stops.
        shared.node_order.change_form();
        let read = self
            .round(
                &shared,
                self.node_bound(call),
                |_, node| {
                    let call = Arc::clone(&shared);
                    Some(async move { node.plain(&call).await })
                },
                |answers| Tally::of(answers, |reader: &bool| *reader).settled(),
            )
            .await;
        let tally = Tally::of(&read, |reader| *reader);
        if tally.won() {
            Ok(true)
        } else if tally.refused() {
            Ok(false)
        } else {
            Err(no_quorum(call.keys.lock(), read))
        }
    }
}

/// What a node's answer says for a top-up: upgraded (`Some(true)`), kept out by other
/// readers (`Some(false)`, to be tried again), or not to be tried (`None`: the request
/// failed, or the id is no longer the upgradable reader there).
fn top_up_state(turned: &Result<Upgraded, Error>) -> Option<bool> {
    match turned {
        Ok(Upgraded::Write(_)) => Some(true),
        Ok(Upgraded::Blocked(_)) => Some(false),
        Ok(Upgraded::NotHeld | Upgraded::Reader) | Err(_) => None,
    }
}

/// Whether a node's reply turned the id into the writer there.
fn upgraded(reply: &Upgraded) -> bool {
    matches!(reply, Upgraded::Write(_))
}

/// What an upgrade that won no majority answers, from the nodes' `turned` answers.
fn not_won(call: &Call, turned: Answers<Upgraded>, tally: Tally) -> Result<Upgraded, Error> {
    let count = |which: fn(&Upgraded) -> bool| {
        turned
            .iter()
            .flatten()
            .filter(|answer| matches!(answer, Answer::Reply(reply) if which(reply)))
            .count()
    };
    let readers = count(|reply| matches!(reply, Upgraded::Reader));
    let gone = count(|reply| matches!(reply, Upgraded::Reader | Upgraded::NotHeld));
    if readers >= tally.needed() {
        return Ok(Upgraded::Reader);
    }
    if gone >= tally.needed() {
        return Ok(Upgraded::NotHeld);
    }
    // Blocked only when a majority answered and a node found other readers: with fewer
    // answers the nodes that did not answer may be the upgradable reader's still.
    match shortest_block(&turned) {
        Some(pttl) if tally.answered() >= tally.needed() => Ok(Upgraded::Blocked(pttl)),
        _ => Err(no_quorum(call.keys.lock(), turned)),
    }
}

/// The largest token the nodes that upgraded minted.
fn largest_token(turned: &Answers<Upgraded>) -> u64 {
    let tokens = replies(turned, |upgraded| match upgraded {
        Upgraded::Write(token) => Some(*token),
        _ => None,
    });
    tokens.max().unwrap_or_default()
}

/// The shortest PTTL among the nodes where other readers kept the upgrade out.
fn shortest_block(turned: &Answers<Upgraded>) -> Option<Duration> {
    let blocks = replies(turned, |upgraded| match upgraded {
        Upgraded::Blocked(pttl) => Some(*pttl),
        _ => None,
    });
    blocks.min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::calls::Queueing;
    use crate::protocol::id::Id;
    use crate::protocol::keys::Keys;

    fn call() -> Call {
        Call {
            keys: Keys::new("k", false),
            id: Id::new(),
            ttl_ms: 1000,
            fence_ms: 1000,
            queue: Queueing::Off,
            node_order: Default::default(),
            describe: None,
        }
    }

    fn reply(upgraded: Upgraded) -> Option<Answer<Upgraded>> {
        Some(Answer::Reply(upgraded))
    }

    fn decide(turned: Answers<Upgraded>) -> Result<Upgraded, Error> {
        let tally = Tally::of(&turned, upgraded);
        not_won(&call(), turned, tally)
    }

    #[test]
    fn an_upgrade_that_wins_no_majority_says_why() {
        let blocked = |ms| reply(Upgraded::Blocked(Duration::from_millis(ms)));
        // One node upgraded, two found other readers: blocked for the shorter PTTL.
        let mixed = vec![reply(Upgraded::Write(7)), blocked(900), blocked(300)];
        assert_eq!(
            decide(mixed).unwrap(),
            Upgraded::Blocked(Duration::from_millis(300))
        );
        // A majority is no longer the upgradable reader: a reader, or gone.
        let readers = vec![reply(Upgraded::Reader), reply(Upgraded::Reader), None];
        assert_eq!(decide(readers).unwrap(), Upgraded::Reader);
        let gone = vec![
            reply(Upgraded::Reader),
            reply(Upgraded::NotHeld),
            blocked(5),
        ];
        assert_eq!(decide(gone).unwrap(), Upgraded::NotHeld);
        // Blocked on one node, the others silent: no majority answered.
        let silent = vec![blocked(5), Some(Answer::Silent), Some(Answer::Silent)];
        assert!(matches!(decide(silent), Err(Error::NoQuorum { .. })));
    }

    #[test]
    fn the_largest_minted_token_is_the_writers() {
        let turned = vec![
            reply(Upgraded::Write(4)),
            reply(Upgraded::Blocked(Duration::from_millis(1))),
            reply(Upgraded::Write(9)),
        ];
        assert_eq!(largest_token(&turned), 9);
    }
}
