//! Keeping and ending a lock held over a quorum: refresh, release and downgrade, each
//! sent to every node and counted. A refresh that kept a majority tops up the nodes that
//! did not hold it (`top_up.rs`); a release, a downgrade and a refresh that found the
//! lock lost change the lease's form first, which stops the top-ups of the old one.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::round::{no_quorum, Answer, Tally};
use super::top_up::{NodeStates, Take, TopUp};
use super::Majority;
use crate::backend::direct::Direct;
use crate::backend::Backend;
use crate::error::Error;
use crate::protocol::calls::{self, Call, Holder, Leftovers, Renewal, Retake};
use crate::protocol::replies::{Downgraded, Unlocked};

impl<C> Majority<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Refreshes the lock on every node, taking it back (as `retake` says) on a node that
    /// lost it; an `upgradable` reader's upgrader key is renewed with its hold on each
    /// node where it still holds it (`renew.lua`). `Ok(true)` once a majority holds it;
    /// `Ok(false)` once a majority definitely does not (the key is gone there and cannot
    /// be taken back, or is someone else's), after queueing the id's release on every
    /// node (a lost guard sends no release of its own, and the nodes that still hold the
    /// id would keep it until its TTL); else [`Error::NoQuorum`], and the caller tries
    /// again until the guard's deadline.
    pub(super) async fn refresh_all(
        &self,
        call: &Call,
        retake: Option<Retake>,
        upgradable: bool,
    ) -> Result<bool, Error> {
        let shared = call.shared();
        let states = NodeStates::new(self.conns.len());
        let kept = self
            .round(
                &shared,
                self.node_bound(call),
                |at, node| {
                    let (call, retake) = (Arc::clone(&shared), retake.clone());
                    let states = Arc::clone(&states);
                    Some(async move {
                        let held = refresh_node(at, &node, &call, retake, upgradable).await;
                        states.record(at, held.as_ref().ok().copied());
                        held
                    })
                },
                |answers| Tally::of(answers, |held| *held).settled(),
            )
            .await;
        let tally = Tally::of(&kept, |held| *held);
        if tally.won() {
            if let Some(retake) = retake {
                let next_renewal = Instant::now() + Duration::from_millis(call.ttl_ms) / 2;
                let top_up = TopUp {
                    take: Take::Back(retake.holder),
                    token: retake.fencing_token,
                    until: retake.until.min(next_renewal),
                    form: retake.form,
                    live: Some(retake.live),
                };
                self.top_up(&shared, &states, top_up);
            }
            Ok(true)
        } else if tally.refused() {
            shared.node_order.change_form();
            let holder = retake.map_or(Holder::Writer, |retake| retake.holder);
            self.send(
                &shared,
                self.node_bound(call),
                |_, node| {
                    let call = Arc::clone(&shared);
                    Some(async move { release_node(&node, &call, holder, Leftovers::NONE).await })
                },
                |_| {},
            )
            .await;
            Ok(false)
        } else {
            Err(no_quorum(call.keys.lock(), kept))
        }
    }

    /// Removes the id from every node, held as `holder` or, on a node where it is not
    /// found so, as the other of writer and reader (a downgrade that did not reach every
    /// node leaves both forms). Returns once a majority has said whether it held the lock
    /// (the other nodes' releases go on in the background): `held` when a majority held
    /// it; `published` when a node that answered told its waiters. [`Error::NoQuorum`]
    /// when neither a majority held it nor a majority did not: an outage is not a loss.
    pub(super) async fn release_all(
        &self,
        call: &Call,
        holder: Holder,
        leftovers: Leftovers,
    ) -> Result<Unlocked, Error> {
        let shared = call.shared();
        shared.node_order.change_form();
        let released = self
            .round(
                &shared,
                self.node_bound(call),
                |_, node| {
                    let call = Arc::clone(&shared);
                    Some(async move { release_node(&node, &call, holder, leftovers).await })
                },
                |answers| Tally::of(answers, |unlocked| unlocked.held).settled(),
            )
            .await;
        let tally = Tally::of(&released, |unlocked| unlocked.held);
        if !tally.won() && !tally.refused() {
            return Err(no_quorum(call.keys.lock(), released));
        }
        Ok(Unlocked {
            held: tally.won(),
            published: released
                .iter()
                .flatten()
                .any(|answer| matches!(answer, Answer::Reply(unlocked) if unlocked.published)),
        })
    }

    /// Downgrades the id's write lock to a read lock on every node. `held` once a
    /// majority holds it as a reader, not `held` once a majority definitely does not;
    /// else [`Error::NoQuorum`].
    pub(super) async fn downgrade_all(&self, call: &Call) -> Result<Downgraded, Error> {
        let shared = call.shared();
        shared.node_order.change_form();
        let turned = self
            .round(
                &shared,
                self.node_bound(call),
                |_, node| {
                    let call = Arc::clone(&shared);
                    Some(async move { node.downgrade(&call).await })
                },
                |answers| Tally::of(answers, |done: &Downgraded| done.held).settled(),
            )
            .await;
        let tally = Tally::of(&turned, |done| done.held);
        if !tally.won() && !tally.refused() {
            return Err(no_quorum(call.keys.lock(), turned));
        }
        Ok(Downgraded {
            held: tally.won(),
            published: turned
                .iter()
                .flatten()
                .any(|answer| matches!(answer, Answer::Reply(done) if done.published)),
        })
    }
}

/// Refreshes the lock on node `at` (an `upgradable` reader's upgrader key with it, when it
/// holds that too); if the id does not hold it there and `retake` allows
/// (the guard is still valid and its token has not fired), takes it back under the same
/// id, as a writer or a reader, unless the node's fence counter is past the guard's
/// fencing token (and past every token the node minted for the lease): a forced release
/// raised it, or another holder took the lock there since, and the node counts as lost.
/// The token is checked in the same poll that sends the script: a release, which fires
/// the token first, is then either sent after it (and removes it) or seen here.
///
/// An upgradable reader ([`Holder::Upgradable`]) is never taken back: `retake.lua` would
/// make it a plain reader there, without its upgrader key, and its upgrade would then be
/// refused on that node. It holds the lock while a majority holds it; a node where an
/// upgrade that did not win left the id's string counts as held (`renew.lua` finds the id
/// in either form), so such a node never counts against the reader.
async fn refresh_node<C>(
    at: usize,
    node: &Direct<C>,
    call: &Call,
    retake: Option<Retake>,
    upgradable: bool,
) -> Result<bool, Error>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    let held = if upgradable {
        let renewal = Renewal {
            call,
            writer: false,
            upgradable: true,
            retake: None,
        };
        let renewed = calls::renew(&mut node.connection(), &[renewal]).await?;
        renewed.held.first().copied().unwrap_or(false)
    } else {
        node.refresh(call, None).await?
    };
    if held {
        return Ok(true);
    }
    let (holder, token) = match retake {
        Some(Retake {
            holder: holder @ (Holder::Writer | Holder::Reader),
            until,
            live,
            fencing_token,
            form,
        }) if Instant::now() < until && !live.is_cancelled() && !form.is_cancelled() => {
            (holder, fencing_token)
        }
        _ => return Ok(false),
    };
    let taken = node.retake(at, call, holder, token).await?;
    if taken {
        tracing::debug!(key = %call.keys.lock(), id = %call.id, "lock taken back on a node that had lost it");
    }
    Ok(taken)
}

/// Releases the id on one node as `holder`, and as the other of writer and reader when
/// that finds nothing (a downgrade that did not reach every node leaves both forms); an
/// upgradable reader's as the writer, as an upgrade that won no majority, or whose reply
/// never came, may have left the id's string on the node; and a writer's as the
/// upgradable reader (a reader, with its upgrader key and intent), as an upgrade that won
/// may have left a node it kept out so.
async fn release_node<C>(
    node: &Direct<C>,
    call: &Call,
    holder: Holder,
    leftovers: Leftovers,
) -> Result<Unlocked, Error>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    let first = node.release(call, holder, leftovers).await?;
    // The intent the id set on a node goes too (only where it holds the id): an upgrade
    // that waited sets it on the nodes other readers kept it out of.
    let intent = Leftovers {
        intent: true,
        ..Leftovers::NONE
    };
    let (other, leftovers) = match holder {
        // As the upgradable reader, which removes a reader's id as a plain reader's and,
        // where they hold the id, its upgrader key and intent: an upgrade that won may
        // have left a node it kept out so (for any other writer it is a reader's release).
        Holder::Writer => (Holder::Upgradable, Leftovers::NONE),
        Holder::Reader => (Holder::Writer, Leftovers::NONE),
        Holder::Upgradable => (Holder::Writer, intent),
        Holder::Permit => return Ok(first),
    };
    if first.held {
        return Ok(first);
    }
    let second = node.release(call, other, leftovers).await?;
    Ok(Unlocked {
        held: second.held,
        published: first.published || second.published,
    })
}
