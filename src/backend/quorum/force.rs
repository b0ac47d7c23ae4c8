//! A forced release over a quorum: `force_unlock.lua` sent to every node, every answer
//! awaited (each bounded by the per-node bound), and counted.

use std::sync::Arc;

use super::round::{no_quorum, Answer, Tally};
use super::Majority;
use crate::backend::Backend;
use crate::error::Error;
use crate::protocol::calls::Call;
use crate::protocol::replies::Unlocked;

impl<C> Majority<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Removes every holder of the lock key on every node. Once a majority of the nodes
    /// answered: `held` when any node that answered had something held, `published`
    /// when any told its waiters. Else the refusal a majority gave (a key of another
    /// type), or [`Error::NoQuorum`]: the nodes that answered were cleared all the same.
    pub(super) async fn force_unlock_all(&self, call: &Call) -> Result<Unlocked, Error> {
        let shared = call.shared();
        let answers = self
            .round(
                &shared,
                self.node_bound(call),
                |_, node| {
                    let call = Arc::clone(&shared);
                    Some(async move { node.force_unlock(&call).await })
                },
                |answers| Tally::of(answers, |forced: &Unlocked| forced.held).pending() == 0,
            )
            .await;
        let tally = Tally::of(&answers, |forced| forced.held);
        if tally.answered() < tally.needed() {
            return Err(no_quorum(call.keys.lock(), answers));
        }
        let replies = || {
            answers.iter().flatten().filter_map(|answer| match answer {
                Answer::Reply(forced) => Some(forced),
                _ => None,
            })
        };
        Ok(Unlocked {
            held: tally.yes > 0,
            published: replies().any(|forced| forced.published),
        })
    }
}
