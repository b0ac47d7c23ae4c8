//! Topping up a lock held on a bare majority. An acquire or a refresh is decided once a
//! majority holds the lock; a node that refused it then was most often taken for a moment
//! by another candidate's attempt under way, which lets it go a round trip later. A lock
//! held on a bare majority is one node's fault away from another holder: a node whose
//! clock jumps forward expires its key early, and that node with the free one is a
//! majority for someone else (the Redlock clock-jump case, Kleppmann, "How to do
//! distributed locking"). So an acquire's second round offers the lock to each node that
//! refused it in the first because another request had it there, before raising its
//! counter ([`raise_or_take`]); and each node still without it is tried again in the
//! background (`retake.lua`, in the lease's turn on the node; an upgradable reader's
//! acquire by `upgradable.lua` again, an upgrade that won by `upgrade.lua` again, see
//! [`Take`]), a millisecond later and
//! backing off while it refuses, until it holds the lock, or the next renewal is due, or
//! the lease changes form (released, downgraded, lost, a failed attempt:
//! [`NodeOrder::form`]), or the guard's token fires. A node that fails or gives no
//! answer in time is left to the renewals.
//!
//! [`NodeOrder::form`]: crate::protocol::node_order::NodeOrder::form

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Majority;
use crate::backend::direct::Direct;
use crate::backend::Backend;
use crate::error::Error;
use crate::protocol::calls::{self, AttemptKind, Call, Holder, UpgradeOp};
use crate::protocol::replies::{Attempt, Upgraded};
use crate::spawner::Spawner;

/// The first pause before a node is tried again: about the round trip in which another
/// candidate's attempt that found the lock held lets the node go. The pauses double from
/// there (with jitter) up to an eighth of the TTL, the refresher's retry period.
const FIRST_PAUSE: Duration = Duration::from_millis(1);

/// Which nodes hold the lock for the lease after one round, as their answers come in
/// (also after the round was decided), and after a top-up took them.
#[derive(Debug)]
pub(super) struct NodeStates(Box<[AtomicU8]>);

/// No answer yet, or none within the bound.
const UNKNOWN: u8 = 0;
const HELD: u8 = 1;
/// The node answered that it does not hold the lock for the lease: another request has
/// it there, for a moment or for good.
const NOT_HELD: u8 = 2;
/// The node's request failed: it is down, or refuses (a wrong type); not topped up.
const FAILED: u8 = 3;

impl NodeStates {
    /// Nothing known yet of `nodes` nodes.
    pub(super) fn new(nodes: usize) -> Arc<Self> {
        Arc::new(Self((0..nodes).map(|_| AtomicU8::new(UNKNOWN)).collect()))
    }

    /// Node `at` answered that it holds the lock for the lease (`Some(true)`), or not
    /// (`Some(false)`), or its request failed (`None`).
    pub(super) fn record(&self, at: usize, held: Option<bool>) {
        let state = match held {
            Some(true) => HELD,
            Some(false) => NOT_HELD,
            None => FAILED,
        };
        if let Some(node) = self.0.get(at) {
            node.store(state, Ordering::Release);
        }
    }

    fn state(&self, at: usize) -> u8 {
        self.0
            .get(at)
            .map_or(FAILED, |node| node.load(Ordering::Acquire))
    }

    /// The nodes to top up: those that said no, and those still in flight (looked at
    /// again in their turn); not those that failed.
    pub(super) fn missing(&self) -> Vec<usize> {
        (0..self.0.len())
            .filter(|&at| matches!(self.state(at), NOT_HELD | UNKNOWN))
            .collect()
    }
}

/// What a top-up sends to a node missing from a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Take {
    /// `retake.lua`, taking the lock back as this holder (a writer or a reader; nothing
    /// for another holder, see [`takes_back`]).
    Back(Holder),
    /// `upgradable.lua`: an upgradable reader's acquire, sent again to a node that
    /// refused it. Not `retake.lua`, which would make the id a plain reader there,
    /// without its upgrader key; the script checks all an acquire checks, and mints a
    /// token of its own.
    Upgradable,
    /// `upgrade.lua` "wait": an upgrade that won a majority, completed on a node where
    /// other readers kept it out for a moment (and where it keeps new readers out with
    /// the lock intent while they leave).
    Upgrade,
}

/// How the nodes missing from a round are taken: as `take` says, with the guard's token
/// (or a larger one the node minted for the lease), until `until`, while `form` (the
/// lease's form when the round began) and `live` (the guard's token, once there is a
/// guard) have not fired.
#[derive(Debug, Clone)]
pub(super) struct TopUp {
    pub(super) take: Take,
    pub(super) token: u64,
    pub(super) until: Instant,
    pub(super) form: CancellationToken,
    pub(super) live: Option<CancellationToken>,
}

impl TopUp {
    /// No node is to be taken any more on this form's behalf.
    fn stopped(&self) -> bool {
        self.form.is_cancelled()
            || self
                .live
                .as_ref()
                .is_some_and(CancellationToken::is_cancelled)
            || Instant::now() >= self.until
    }
}

impl<C> Majority<C>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Tries, in a task per node, each node of `states` that refused the lock or had not
    /// answered yet, as `top_up` says; a permit, and an upgradable reader in a renewal,
    /// are not taken back ([`takes_back`]).
    pub(super) fn top_up(&self, call: &Arc<Call>, states: &Arc<NodeStates>, top_up: TopUp) {
        if let Take::Back(holder) = top_up.take {
            if !takes_back(holder) {
                return;
            }
        }
        let missing = states.missing();
        if missing.is_empty() {
            return;
        }
        let spawner = Spawner::current(self.tracker.clone());
        let bound = self.node_bound(call);
        let longest = (Duration::from_millis(call.ttl_ms) / 8).max(FIRST_PAUSE);
        for (at, node) in self.nodes().into_iter().enumerate() {
            if !missing.contains(&at) {
                continue;
            }
            let (call, states, top_up) = (Arc::clone(call), Arc::clone(states), top_up.clone());
            spawner.spawn(async move {
                let mut pauses = ExponentialBuilder::new()
                    .with_min_delay(FIRST_PAUSE)
                    .with_max_delay(longest)
                    .with_jitter()
                    .without_max_times()
                    .build();
                loop {
                    let pause = pauses.next().unwrap_or(longest);
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        () = top_up.form.cancelled() => return,
                    }
                    let tried = tokio::time::timeout(
                        bound,
                        take_in_turn(at, &node, &call, &states, &top_up),
                    )
                    .await;
                    // Only a node that refuses is tried again: one that fails or does not
                    // answer in time is down, and the renewals take it back when it is up.
                    if !matches!(tried, Ok(Ok(false))) || top_up.stopped() {
                        return;
                    }
                }
            });
        }
    }
}

/// In the lease's turn on node `at`: true when the node holds the lock (taken now, or
/// by a call of the lease that ran before), or is not to be tried (the top-up stopped,
/// the node's last answer was a failure or none in time), false when the node refused
/// it. The top-up's state is checked in the turn, and the script sent in the same poll:
/// a release or downgrade, which changes the form before it takes its turns, then either
/// runs after the script (and undoes it) or finds nothing sent.
async fn take_in_turn<C>(
    at: usize,
    node: &Direct<C>,
    call: &Call,
    states: &NodeStates,
    top_up: &TopUp,
) -> Result<bool, Error>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    let _turn = call.node_order.turn(at).await;
    if states.state(at) != NOT_HELD || top_up.stopped() {
        return Ok(true);
    }
    let taken = match top_up.take {
        Take::Back(holder) => node.retake(at, call, holder, top_up.token).await?,
        Take::Upgradable => match node.attempt(call, AttemptKind::Upgradable).await? {
            Attempt::Acquired(token) => {
                call.node_order.minted(at, token);
                raised(node, call, top_up.token).await?
            }
            Attempt::Blocked(_) => false,
            // Not a reply of `upgradable.lua`: not tried again.
            _ => return Ok(true),
        },
        Take::Upgrade => match node.upgrade(call, UpgradeOp::Wait).await? {
            Upgraded::Write(token) => {
                call.node_order.minted(at, token);
                raised(node, call, top_up.token).await?
            }
            Upgraded::Blocked(_) => false,
            // No longer the upgradable reader there: nothing to complete.
            Upgraded::NotHeld | Upgraded::Reader => return Ok(true),
        },
    };
    if taken {
        states.record(at, Some(true));
        tracing::debug!(key = %call.keys.lock(), id = %call.id, node = at,
            "lock topped up on a node that had not taken it");
    }
    Ok(taken)
}

/// True once node `at`'s counter and granted token are raised to `token`, the guard's, as
/// `retake.lua` raises them for the nodes it takes back (`fence.lua`): the node took the
/// lock with a token of its own, which may be smaller.
async fn raised<C>(node: &Direct<C>, call: &Call, token: u64) -> Result<bool, Error>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    calls::raise_fence(&mut node.connection(), call, token).await?;
    Ok(true)
}

/// Whether `retake.lua` takes back what `holder` holds: a writer's string or a reader's
/// set member. Not a permit (`retake.lua` takes none), nor an upgradable reader, which it
/// would make a plain reader without its upgrader key (and so a reader whose upgrade that
/// node refuses): an upgradable reader holds the nodes its own attempt took, and is held
/// while a majority of them is (an acquire's top-up sends it `upgradable.lua` again,
/// [`Take::Upgradable`]).
pub(super) fn takes_back(holder: Holder) -> bool {
    matches!(holder, Holder::Writer | Holder::Reader)
}

/// An acquire's second round on node `at`, which has its turn there: a node that did not
/// take the lock in the first round because another request had it there (not one that
/// failed or gave no answer) is offered it, as a writer or a reader under the acquire's
/// `token` (`retake.lua`, which also raises its counter and granted token), as an
/// upgradable reader by its own script again (`upgradable.lua`, [`Take::Upgradable`]);
/// otherwise, or when that fails, and after an upgradable reader's, the node's counter is
/// raised to `token` (`fence.lua`).
pub(super) async fn raise_or_take<C>(
    at: usize,
    node: &Direct<C>,
    call: &Call,
    states: &NodeStates,
    kind: AttemptKind,
    token: u64,
) -> Result<(), Error>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    let holder = Holder::from(kind);
    if holder == Holder::Upgradable && states.state(at) == NOT_HELD {
        if let Ok(Attempt::Acquired(minted)) = node.attempt(call, kind).await {
            call.node_order.minted(at, minted);
            states.record(at, Some(true));
        }
    } else if takes_back(holder) && states.state(at) == NOT_HELD {
        if let Ok(true) = node.retake(at, call, holder, token).await {
            states.record(at, Some(true));
            return Ok(());
        }
    }
    calls::raise_fence(&mut node.connection(), call, token).await
}
