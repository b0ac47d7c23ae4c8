//! An attach over a quorum: `attach.lua` sent to every node, each node moving the whole
//! hold from the old id to the new one or nothing, and counted. Won once a majority
//! moved it; otherwise every node that may have moved it releases it under the new id
//! (the old id is gone there: the hold is lost on those nodes), and the answer is
//! `NotHeld` or the error of a round that reached no majority, as for an acquire.
//!
//! Each key's lease has its own node order; the attach on a node, and the release of a
//! failed attach there, run in every key's turn on that node, taken in the lease's order
//! (as a set's attempt takes them, `set.rs`), so the release never overtakes the attach.

use std::sync::Arc;

use tokio::sync::OwnedMutexGuard;

use super::round::{self, no_quorum, replies, Answer, Answers, Tally};
use super::Majority;
use crate::backend::direct::Direct;
use crate::backend::Backend;
use crate::error::Error;
use crate::protocol::calls::{AttachPart, Attached, Call, Holder, Leftovers};
use crate::protocol::id::Id;
use crate::spawner::Spawner;

/// The keys of one attach, owned, for the tasks of a round: each lease's call (shared, so
/// its node order is the lease's) and the form the old id holds the key in.
type Members = Arc<[(Arc<Call>, Holder)]>;

impl<C> Majority<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// [`Backend::attach`] on every node: `Moved` once a majority moved the whole hold;
    /// `NotHeld` (the key most nodes named first) once a majority did not hold it, after
    /// the nodes that may have moved it release it; else [`no_quorum`]'s error.
    pub(super) async fn attach_all(
        &self,
        parts: &[AttachPart<'_>],
        old: &Id,
    ) -> Result<Attached, Error> {
        let Some(first) = parts.first() else {
            return Ok(Attached::Moved);
        };
        let key = first.call.keys.lock().to_owned();
        let members: Members = parts
            .iter()
            .map(|part| (part.call.shared(), part.holder))
            .collect();
        let (spawner, bound, old) = (
            Spawner::current(self.tracker.clone()),
            self.node_bound(first.call),
            *old,
        );
        let moved = round::round(
            &spawner,
            &self.meters,
            self.nodes(),
            bound,
            |at, node| {
                let members = Arc::clone(&members);
                Some(async move { attach_on(at, &node, &members, &old).await })
            },
            |answers| Tally::of(answers, is_moved).settled(),
        )
        .await;
        let tally = Tally::of(&moved, is_moved);
        if tally.won() {
            return Ok(Attached::Moved);
        }
        self.release_attach(&members, &moved, bound * 2).await;
        if tally.refused() {
            return Ok(Attached::NotHeld(first_not_held(&moved)));
        }
        Err(no_quorum(&key, moved))
    }

    /// Releases, under the new id, what a failed attach may have moved: on every node but
    /// those that answered that the old id did not hold the hold (nothing changed
    /// there), each in every key's turn there, without waiting for answers. `bound` is
    /// the per-node bound of these releases.
    async fn release_attach(
        &self,
        members: &Members,
        moved: &Answers<Attached>,
        bound: std::time::Duration,
    ) {
        for (call, _) in members.iter() {
            call.node_order.change_form();
        }
        let spawner = Spawner::current(self.tracker.clone());
        round::send(
            &spawner,
            &self.meters,
            self.nodes(),
            bound,
            |at, node| {
                let refused = matches!(
                    moved.get(at),
                    Some(Some(Answer::Reply(Attached::NotHeld(_))))
                );
                let members = Arc::clone(members);
                (!refused).then_some(async move { release_on(at, &node, &members).await })
            },
            |unanswered| {
                tracing::debug!(
                    unanswered,
                    "a failed attach's release got no answer from some nodes; \
                     what it moved there expires by its TTL"
                );
            },
        )
        .await;
    }
}

/// Every key's turn on node `at`, taken in the lease's order; held while the guards are.
async fn turns(members: &Members, at: usize) -> Vec<OwnedMutexGuard<()>> {
    let mut turns = Vec::with_capacity(members.len());
    for (call, _) in members.iter() {
        turns.push(call.node_order.turn(at).await);
    }
    turns
}

/// One `attach.lua` on node `at`, in every key's turn there.
async fn attach_on<C>(
    at: usize,
    node: &Direct<C>,
    members: &Members,
    old: &Id,
) -> Result<Attached, Error>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    let _turns = turns(members, at).await;
    let parts: Vec<AttachPart<'_>> = members
        .iter()
        .map(|(call, holder)| AttachPart {
            call,
            holder: *holder,
        })
        .collect();
    node.attach(&parts, old).await
}

/// Releases every key on node `at` under the new id, in every key's turn there, all at
/// once. `Ok` when every release was answered.
async fn release_on<C>(at: usize, node: &Direct<C>, members: &Members) -> Result<(), Error>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    let _turns = turns(members, at).await;
    let releases = members
        .iter()
        .map(|(call, holder)| node.release(call, *holder, Leftovers::NONE));
    futures_util::future::join_all(releases)
        .await
        .into_iter()
        .try_for_each(|released| released.map(drop))
}

/// Whether a node moved the whole hold.
fn is_moved(attached: &Attached) -> bool {
    *attached == Attached::Moved
}

/// The key the nodes that refused named first most often (the first on a tie): the key
/// the answer names.
fn first_not_held(moved: &Answers<Attached>) -> usize {
    let named: Vec<usize> = replies(moved, |attached| match attached {
        Attached::NotHeld(at) => Some(*at),
        Attached::Moved => None,
    })
    .collect();
    let count = |at: &usize| named.iter().filter(|other| *other == at).count();
    named
        .iter()
        .copied()
        .max_by(|a, b| count(a).cmp(&count(b)).then(b.cmp(a)))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_attach_names_the_key_most_nodes_named() {
        let not_held = |at| Some(Answer::Reply(Attached::NotHeld(at)));
        let moved = vec![
            not_held(1),
            Some(Answer::Reply(Attached::Moved)),
            not_held(1),
            not_held(0),
        ];
        assert_eq!(first_not_held(&moved), 1);
        assert_eq!(first_not_held(&vec![not_held(2), not_held(0)]), 0);
        assert_eq!(first_not_held(&vec![None, Some(Answer::Silent)]), 0);
    }
}
