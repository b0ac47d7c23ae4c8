//! The order of one lease's calls on each node of a quorum, the tokens each node minted
//! for it, and the form it holds.

use std::sync::{Arc, Mutex, OnceLock};

use tokio_util::sync::CancellationToken;

/// The order of one lease's calls on each node of a quorum: a call to a node starts once
/// the lease's previous call there has ended (answered, failed, or dropped at its bound).
/// A call can be two requests (`EVALSHA`, then `EVAL` after `NOSCRIPT`), sent from
/// different tasks, so the order of a connection alone does not keep, for example, a
/// failed attempt's release from overtaking the next attempt under the same id.
///
/// It also keeps the largest token each node minted for the lease (its attempts' replies,
/// read also after the round was decided): a node that answered after the majority may
/// have minted a token larger than the guard's, and a refresh may still take the lock
/// back there ([`Retake`](super::calls::Retake)).
///
/// And it keeps a token for the form the lease holds the lock in ([`NodeOrder::form`]):
/// a release, a downgrade or a refresh that found the lock lost cancels it before its
/// own calls take their turns, which stops the calls that take nodes on the lease's
/// behalf in the background (a top-up of a bare majority) in their next turn.
///
/// Nothing is allocated until [`Call::shared`](super::calls::Call::shared) is called (by
/// the quorum backend), so a lease on one server pays nothing for it.
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeOrder(OnceLock<Arc<Mutex<PerNode>>>);

/// One lease's turns on each node, the largest token each minted for it, and its form.
#[derive(Debug, Default)]
struct PerNode {
    turns: Vec<Turn>,
    minted: Vec<u64>,
    form: CancellationToken,
}

/// One lease's turn on one node.
type Turn = Arc<tokio::sync::Mutex<()>>;

impl NodeOrder {
    /// Makes the shared state now, so that every clone from here on shares it.
    pub(crate) fn share(&self) {
        self.0.get_or_init(Arc::default);
    }

    /// Whether the shared state was made: never on one server.
    #[cfg(test)]
    pub(crate) fn is_shared(&self) -> bool {
        self.0.get().is_some()
    }

    fn nodes(&self) -> std::sync::MutexGuard<'_, PerNode> {
        crate::util::lock(self.0.get_or_init(Arc::default))
    }

    /// Waits for the lease's turn on node `node` (first come, first served); the turn
    /// lasts while the call runs. Each call that takes turns must come from
    /// [`Call::shared`](super::calls::Call::shared).
    pub(crate) async fn turn(&self, node: usize) -> tokio::sync::OwnedMutexGuard<()> {
        let turn = {
            let mut nodes = self.nodes();
            if nodes.turns.len() <= node {
                nodes.turns.resize_with(node + 1, Arc::default);
            }
            Arc::clone(&nodes.turns[node])
        };
        turn.lock_owned().await
    }

    /// Node `node` minted `token` for the lease.
    pub(crate) fn minted(&self, node: usize, token: u64) {
        let mut nodes = self.nodes();
        if nodes.minted.len() <= node {
            nodes.minted.resize(node + 1, 0);
        }
        nodes.minted[node] = nodes.minted[node].max(token);
    }

    /// The largest token node `node` minted for the lease; 0 when none is known.
    pub(crate) fn largest_minted(&self, node: usize) -> u64 {
        self.0.get().map_or(0, |nodes| {
            let nodes = crate::util::lock(nodes);
            nodes.minted.get(node).copied().unwrap_or(0)
        })
    }

    /// The token of the form the lease holds the lock in now: cancelled by
    /// [`NodeOrder::change_form`].
    pub(crate) fn form(&self) -> CancellationToken {
        self.nodes().form.clone()
    }

    /// The lease is released, downgraded, or found lost: the token of its form fires, and
    /// the next form has a token of its own. Called before the call's requests take their
    /// turns on the nodes, so that a call that takes a node on the form's behalf, checking
    /// the token in its turn, either runs before them or sends nothing.
    pub(crate) fn change_form(&self) {
        let old = std::mem::take(&mut self.nodes().form);
        old.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_of_form_fires_the_old_token_only() {
        let order = NodeOrder::default();
        order.share();
        let clone = order.clone();
        let first = clone.form();
        order.change_form();
        assert!(first.is_cancelled(), "a clone shares the form");
        assert!(!order.form().is_cancelled(), "the new form's token is live");
        order.minted(2, 7);
        order.minted(2, 5);
        assert_eq!((clone.largest_minted(2), clone.largest_minted(0)), (7, 0));
    }
}
