//! The backend on one redis-rs connection, [`Direct`]: to one Redis server (or a primary
//! with replicas), a Redis Cluster, or one node of a quorum. These differ only in their
//! [`Topology`], which sets what the scripts are told and whether the write fast path
//! may run.

use std::fmt;
use std::sync::Arc;

use redis::aio::ConnectionLike;
use redis::Pipeline;

use tokio::time::Instant;

use super::clock_watch::ClockWatch;
use super::{Backend, Renewals};
use crate::error::Error;
use crate::lock_state::LockState;
use crate::notify::hub::Hub;
use crate::protocol::acks::{Acked, Acks};
use crate::protocol::calls::{
    self, AttachPart, Attached, AttemptKind, Call, Holder, Leftovers, Renewal, Retake, SetPart,
    UpgradeOp,
};
use crate::protocol::command_keys::CommandKeys;
use crate::protocol::exec::{Access, Executed, Guarded};
use crate::protocol::force;
use crate::protocol::id::Id;
use crate::protocol::inspect::{self, Form};
use crate::protocol::keys::Keys;
use crate::protocol::leader::{self, LeaderRead};
use crate::protocol::replies::{Attempt, Downgraded, SetAttempt, Unlocked, Upgraded};
use crate::protocol::slot::hash_tag;
use crate::protocol::topology::Topology;

/// A backend on one redis-rs connection `C`, to the keys' [`Topology`]:
///
/// - [`Topology::Server`], one server (or a primary with replicas): every call is one
///   script (or the write fast path's pipeline) on a clone of the connection, bounded by
///   the connection's response timeout and by the callers; releases are published by
///   `PUBLISH`.
/// - [`Topology::Cluster`], a Redis Cluster: every call is one script on the node that
///   serves the lock key's slot (all keys of a lock carry one hash tag); every token is
///   floored at the server clock, since a failover can lose the fence key's last
///   increments, so there is no write fast path; releases are published by `SPUBLISH` in
///   the slot (by `PUBLISH` where the node has no `SPUBLISH`: the scripts decide). redis-rs's cluster client has no response timeout of its own and retries
///   through a failover: the callers' bounds end a call there.
/// - [`Topology::QuorumNode`], one node of a quorum: a single server whose tokens are
///   floored at its clock; the quorum backend (`quorum/`) sends each call to every node
///   and counts the replies.
pub(crate) struct Direct<C> {
    conn: C,
    topology: Topology,
    hub: Option<Arc<Hub>>,
    /// How many replicas must acknowledge an acquire or a renewal, if any must.
    acks: Option<Acks>,
    /// Where the keys of the commands that guarded pipelines send are.
    command_keys: CommandKeys,
    /// The server's clock as the renewals saw it.
    clock: ClockWatch,
}

impl<C> Direct<C> {
    /// The backend on `conn` to keys that live as `topology` says, whose waiters wait on
    /// `hub` when there is one.
    pub(crate) fn new(conn: C, topology: Topology, hub: Option<Arc<Hub>>) -> Self {
        Self {
            conn,
            topology,
            hub,
            acks: None,
            command_keys: CommandKeys::default(),
            clock: ClockWatch::default(),
        }
    }

    /// The backend whose acquires and renewals count only once `acks` says the
    /// replicas have them (`WAIT` on the same connection, after the writes).
    pub(crate) fn acknowledged(mut self, acks: Option<Acks>) -> Self {
        self.acks = acks;
        self
    }
}

impl<C: Clone> Direct<C> {
    /// A clone of the connection, for a call that is not one of [`Backend`]'s.
    pub(crate) fn connection(&self) -> C {
        self.conn.clone()
    }
}

impl<C: ConnectionLike + Clone> Direct<C> {
    /// One `retake.lua`, on this backend as node `at` of a quorum: takes the lock back for
    /// `call`'s lease as `holder` (a writer or a reader), under `token` or a larger token
    /// this node minted for the lease
    /// ([`NodeOrder::largest_minted`](crate::protocol::node_order::NodeOrder::largest_minted)).
    /// True when the node holds the lock for the lease now; an error when the request
    /// fails or the node refuses the script (a key of the wrong type).
    pub(crate) async fn retake(
        &self,
        at: usize,
        call: &Call,
        holder: Holder,
        token: u64,
    ) -> Result<bool, Error> {
        let token = token.max(call.node_order.largest_minted(at));
        calls::retake(&mut self.conn.clone(), call, holder, token).await
    }
}

impl<C> Backend for Direct<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn attempt(&self, call: &Call, kind: AttemptKind) -> Result<Attempt, Error> {
        let kind = match kind {
            // The fast path's token would not be floored at the clock.
            AttemptKind::FastWrite if !self.fast_path() => AttemptKind::Write { set_intent: false },
            other => other,
        };
        let Some(acks) = self.acks else {
            return calls::attempt(&mut self.conn.clone(), call, self.topology, kind).await;
        };
        let mut conn = Acked::new(self.conn.clone(), acks);
        let attempt = calls::attempt(&mut conn, call, self.topology, kind).await?;
        if let Attempt::Acquired(_) = &attempt {
            // Not acknowledged: the engine releases the lock, or attempts again.
            conn.acknowledged(call.keys.lock())?;
        }
        Ok(attempt)
    }

    async fn attempt_set(
        &self,
        parts: &[SetPart<'_>],
        set_intent: bool,
    ) -> Result<SetAttempt, Error> {
        let topology = self.topology;
        let Some(acks) = self.acks else {
            let mut conn = self.conn.clone();
            return calls::lock_all(&mut conn, parts, topology, set_intent).await;
        };
        let mut conn = Acked::new(self.conn.clone(), acks);
        let attempt = calls::lock_all(&mut conn, parts, topology, set_intent).await?;
        if let (SetAttempt::Acquired(_), Some(first)) = (&attempt, parts.first()) {
            // Not acknowledged: the engine releases the set, or attempts again.
            conn.acknowledged(first.call.keys.lock())?;
        }
        Ok(attempt)
    }

    /// One `attach.lua`; with replica acknowledgement, its `WAIT` in the same request
    /// ([`Error::NotReplicated`] when too few acknowledged a hold that moved).
    async fn attach(&self, parts: &[AttachPart<'_>], old: &Id) -> Result<Attached, Error> {
        let Some(acks) = self.acks else {
            return calls::attach(&mut self.conn.clone(), parts, old).await;
        };
        let mut conn = Acked::new(self.conn.clone(), acks);
        let attached = calls::attach(&mut conn, parts, old).await?;
        if let (Attached::Moved, Some(first)) = (attached, parts.first()) {
            conn.acknowledged(first.call.keys.lock())?;
        }
        Ok(attached)
    }

    async fn refresh(&self, call: &Call, _retake: Option<Retake>) -> Result<bool, Error> {
        let Some(acks) = self.acks else {
            return calls::refresh(&mut self.conn.clone(), call).await;
        };
        let mut conn = Acked::new(self.conn.clone(), acks);
        let held = calls::refresh(&mut conn, call).await?;
        if held {
            conn.acknowledged(call.keys.lock())?;
        }
        Ok(held)
    }

    /// One `renew.lua` for the whole batch: its items share a [`batch_tag`], so on a
    /// cluster their lock keys share a hash tag, and so a slot.
    ///
    /// [`batch_tag`]: Backend::batch_tag
    async fn renew(&self, batch: &[Renewal<'_>]) -> Renewals {
        debug_assert!(
            batch
                .windows(2)
                .all(|pair| { self.batch_tag(pair[0].call) == self.batch_tag(pair[1].call) }),
            "a batch of renewals mixes batch tags"
        );
        let sent = Instant::now();
        let Some(acks) = self.acks else {
            let renewed = calls::renew(&mut self.conn.clone(), batch).await;
            return self.watched(sent, batch, renewed);
        };
        let mut conn = Acked::new(self.conn.clone(), acks);
        let renewed = self.watched(sent, batch, calls::renew(&mut conn, batch).await);
        let key = batch.first().map_or("", |item| item.call.keys.lock());
        Renewals {
            results: unacknowledged(batch.iter(), renewed.results, conn.acknowledged(key)),
            ..renewed
        }
    }

    fn batch_tag<'c>(&self, call: &'c Call) -> Option<&'c str> {
        if self.topology.sharded() {
            hash_tag(call.keys.lock())
        } else {
            None
        }
    }

    async fn release(
        &self,
        call: &Call,
        holder: Holder,
        leftovers: Leftovers,
    ) -> Result<Unlocked, Error> {
        let mut conn = self.conn.clone();
        calls::unlock(&mut conn, call, self.topology, holder, leftovers).await
    }

    async fn downgrade(&self, call: &Call) -> Result<Downgraded, Error> {
        calls::downgrade(&mut self.conn.clone(), call, self.topology).await
    }

    async fn upgrade(&self, call: &Call, op: UpgradeOp) -> Result<Upgraded, Error> {
        calls::upgrade(&mut self.conn.clone(), call, self.topology, op).await
    }

    async fn plain(&self, call: &Call) -> Result<bool, Error> {
        calls::plain(&mut self.conn.clone(), call, self.topology).await
    }

    /// One `force_unlock.lua`; never waits for replicas (the release of a lock is not
    /// acknowledged either).
    async fn force_unlock(&self, call: &Call) -> Result<Unlocked, Error> {
        force::force_unlock(&mut self.conn.clone(), call, self.topology).await
    }

    /// Finds the keys of `pipe`'s commands (on a cluster, all in the lock key's slot, or
    /// nothing is sent), then one `exec.lua`; with replica acknowledgement, its `WAIT` in
    /// the same request.
    async fn exec(
        &self,
        call: &Call,
        also: &[Keys],
        pipe: &Pipeline,
        access: Access,
    ) -> Result<Executed, Error> {
        let mut conn = self.conn.clone();
        let sharded = self.topology.sharded();
        let keys = &self.command_keys;
        let locks: Vec<&Keys> = std::iter::once(&call.keys).chain(also).collect();
        let guarded = Guarded::new(&mut conn, keys, &locks, pipe, sharded, access).await?;
        let Some(acks) = self.acks else {
            return guarded.run(&mut conn, call, also).await;
        };
        let mut conn = Acked::new(conn, acks);
        let executed = guarded.run(&mut conn, call, also).await?;
        if let Executed::Ran(_) = &executed {
            conn.acknowledged(call.keys.lock())?;
        }
        Ok(executed)
    }

    /// One `inspect.lua`, a read: no replica acknowledges it.
    async fn inspect(&self, keys: &Keys, form: Form) -> Result<LockState, Error> {
        inspect::inspect(&mut self.conn.clone(), keys, form).await
    }

    /// One `proclaim.lua`; with replica acknowledgement, its `WAIT` in the same request
    /// ([`Error::NotReplicated`] when too few acknowledged a record that was written).
    async fn proclaim(&self, call: &Call, record: &str) -> Result<bool, Error> {
        let conn = self.conn.clone();
        let Some(acks) = self.acks else {
            return leader::proclaim(&mut { conn }, call, record, self.topology).await;
        };
        let mut conn = Acked::new(conn, acks);
        let written = leader::proclaim(&mut conn, call, record, self.topology).await?;
        if written {
            conn.acknowledged(call.keys.lock())?;
        }
        Ok(written)
    }

    /// One `leader.lua`, a read: no replica acknowledges it.
    async fn leader(&self, call: &Call) -> Result<LeaderRead, Error> {
        leader::read(&mut self.conn.clone(), &call.keys).await
    }

    fn hub(&self) -> Option<&Arc<Hub>> {
        self.hub.as_ref()
    }

    fn fast_path(&self) -> bool {
        !self.topology.clock_floor()
    }
}

impl<C> Direct<C> {
    /// The renewals of `batch`, sent at `sent`, as `renewed` found them; on one server
    /// (not on a Cluster, whose masters each have a clock of their own) the server time
    /// it reported goes to the clock watch, which says whether the clock jumped.
    fn watched(
        &self,
        sent: Instant,
        batch: &[Renewal<'_>],
        renewed: Result<calls::Renewed, Error>,
    ) -> Renewals {
        match renewed {
            Ok(renewed) => Renewals {
                clock: (!self.topology.sharded())
                    .then(|| self.clock.observe(sent, Instant::now(), renewed.server_us))
                    .flatten(),
                results: renewed.held.into_iter().map(Ok).collect(),
            },
            Err(err) => Renewals::of(
                batch
                    .iter()
                    .map(|item| Err(err.for_key(item.call.keys.lock())))
                    .collect(),
            ),
        }
    }
}

/// A batch's renewals once the replicas answered `acked`: when they did not acknowledge,
/// each renewal that held fails with that error, named after its own lock key; a lock
/// found lost stays lost.
fn unacknowledged<'a>(
    items: impl Iterator<Item = &'a Renewal<'a>>,
    renewed: Vec<Result<bool, Error>>,
    acked: Result<(), Error>,
) -> Vec<Result<bool, Error>> {
    let Err(err) = acked else {
        return renewed;
    };
    items
        .zip(renewed)
        .map(|(item, held)| match held {
            Ok(true) => Err(err.for_key(item.call.keys.lock())),
            other => other,
        })
        .collect()
}

impl<C> fmt::Debug for Direct<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Direct")
            .field("topology", &self.topology)
            .field("notified", &self.hub.is_some())
            .field("acks", &self.acks)
            .finish_non_exhaustive()
    }
}
