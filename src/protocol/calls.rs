//! The typed calls of the scripts: one [`Call`] per lease says whose lock it is, and each
//! function here sends one script (by `EVALSHA`, see [`lua`](super::lua)) with the
//! arguments its header in `lua/` lists.

use std::sync::Arc;

use redis::aio::ConnectionLike;
use redis::Cmd;

use super::id::Id;
use super::keys::Keys;
use super::lua::SCRIPTS;
pub(crate) use super::node_order::NodeOrder;
use super::replies::{Attempt, Downgraded, Unlocked};
use super::topology::Topology;
use crate::error::Error;

/// What every script call of one lease sends: its keys, its id, its TTL and fence
/// retention in milliseconds, and whether it queues.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub(crate) keys: Keys,
    /// 32 lowercase hex characters ([`Id::new`]).
    pub(crate) id: Id,
    /// The TTL in whole milliseconds: the `PX`/`PEXPIRE` of the lock key.
    pub(crate) ttl_ms: u64,
    /// The fence retention in whole milliseconds: the `PX` of the fence key.
    pub(crate) fence_ms: u64,
    /// Whether the request waits in the fair queue, decided once per request.
    pub(crate) queue: Queueing,
    /// The order of the lease's calls on each node of a quorum.
    pub(crate) node_order: NodeOrder,
}

impl Call {
    /// The call, to be shared by the tasks of a quorum round: its node order is made
    /// first, so that every clone of it, in this round and the next, shares it.
    pub(crate) fn shared(&self) -> Arc<Call> {
        self.node_order.share();
        Arc::new(self.clone())
    }
}

/// Whether a request joins the fair queue when blocked (`lua/shared.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Queueing {
    /// Not fair: no queue.
    Off,
    /// Fair, and waits: join the queue, or keep its place in it.
    Wait,
    /// Fair, one attempt: take the lock only if nobody waits ahead; never queue.
    Try,
}

impl Queueing {
    /// The queueing of a request on a mutex that is `fair` or not, which `waits` or makes
    /// one attempt.
    pub(crate) fn new(fair: bool, waits: bool) -> Self {
        match (fair, waits) {
            (false, _) => Self::Off,
            (true, true) => Self::Wait,
            (true, false) => Self::Try,
        }
    }

    /// Whether the lock is fair: its waiters are served in the order of the queue.
    pub(crate) fn is_fair(self) -> bool {
        self != Self::Off
    }

    /// Adds the queue keys after the other keys of a fair request.
    fn keys(self, cmd: &mut Cmd, keys: &Keys) {
        if let (Some(queue), true) = (keys.queue(), self.is_fair()) {
            cmd.arg(queue.order).arg(queue.deadline);
        }
    }

    /// How many keys a request has with `plain` keys of its own.
    fn numkeys(self, plain: usize) -> usize {
        if self.is_fair() {
            plain + 2
        } else {
            plain
        }
    }

    /// The queue operation the scripts take as their last argument.
    fn op(self) -> Option<&'static str> {
        match self {
            Self::Off => None,
            Self::Wait => Some("wait"),
            Self::Try => Some("try"),
        }
    }

    /// Adds the clock-floor flag and the queue operation as the script's last arguments;
    /// the flag is left out when nothing follows it and it is off.
    fn args(self, cmd: &mut Cmd, clock_floor: bool) {
        if clock_floor || self.is_fair() {
            cmd.arg(flag(clock_floor));
        }
        if let Some(op) = self.op() {
            cmd.arg(op);
        }
    }
}

/// The kind of one acquire attempt: which script it sends, or the write fast path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttemptKind {
    /// The write fast path, no script ([`fast_lock`](super::fast::fast_lock)).
    FastWrite,
    /// `lock.lua`, setting the lock intent if blocked when `set_intent`.
    Write { set_intent: bool },
    /// `rlock.lua`; with `fence_checked` (never when fair) the fence key is taken as the
    /// counter without reading it first.
    Read { fence_checked: bool },
    /// `semaphore.lua`, admitting this many holders.
    Permit(u32),
}

/// What an id holds at a lock key, as `unlock.lua` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// A writer's id, the string at the lock key.
    Write,
    /// A reader's id, in the set at the lock key.
    Read,
    /// A permit's id, in the sorted set at the semaphore key.
    Permit,
}

impl Hold {
    fn arg(self) -> &'static str {
        match self {
            Hold::Write => "w",
            Hold::Read => "r",
            Hold::Permit => "p",
        }
    }
}

/// How a refresh may take the lock back on a node of a quorum that lost it (the key
/// expired there, or the node restarted empty): in the form the id holds, only while the
/// guard is valid and its token has not fired, and only on a node whose fence counter is
/// not past the guard's fencing token ([`retake`]).
#[derive(Debug, Clone)]
pub(crate) struct Retake {
    /// What the id holds: `retake.lua` takes it back as the writer for [`Hold::Write`],
    /// as a reader for [`Hold::Read`]; a permit is never taken back.
    pub(crate) hold: Hold,
    /// The guard's validity deadline: no node is taken back from then on.
    pub(crate) until: tokio::time::Instant,
    /// The guard's token: no node is taken back once it has fired.
    pub(crate) live: tokio_util::sync::CancellationToken,
    /// The guard's fencing token: no node whose fence counter is larger (a forced
    /// release raised it, or another holder minted there since) is taken back, unless
    /// that node minted the larger token for this lease itself
    /// ([`NodeOrder::largest_minted`]).
    pub(crate) fencing_token: u64,
    /// The lease's form when the renewal was made ([`NodeOrder::form`]), read before
    /// whether a downgrade is in flight: a release or a downgrade that began since has
    /// fired it, and no node is taken back in the old form.
    pub(crate) form: tokio_util::sync::CancellationToken,
}

/// One lease's part of a batched renewal ([`renew`]).
#[derive(Debug, Clone)]
pub(crate) struct Renewal<'a> {
    pub(crate) call: &'a Call,
    /// The id holds the lock as a writer (as far as the lease knows): `renew.lua` reads
    /// the key with `GET` first.
    pub(crate) writer: bool,
    /// How a backend over several nodes may take the lock back on a node that lost it.
    pub(crate) retake: Option<Retake>,
}

/// What a release removes besides the id at the lock key: what an acquire that did not
/// finish may have left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Leftovers {
    /// The lock intent, if it holds this id.
    pub(crate) intent: bool,
    /// This id's place in the fair queue, if the lock has one.
    pub(crate) queue_place: bool,
}

impl Leftovers {
    /// Nothing besides the id: the release of a held lock.
    pub(crate) const NONE: Self = Self {
        intent: false,
        queue_place: false,
    };
}

fn flag(on: bool) -> &'static str {
    if on {
        "1"
    } else {
        "0"
    }
}

/// Sends an attempt of `kind` for `call` by script, or by the fast path for
/// [`AttemptKind::FastWrite`].
pub(crate) async fn attempt<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    topology: Topology,
    kind: AttemptKind,
) -> Result<Attempt, Error> {
    match kind {
        AttemptKind::FastWrite => super::fast::fast_lock(conn, call).await,
        AttemptKind::Write { set_intent } => lock(conn, call, topology, set_intent).await,
        AttemptKind::Read { fence_checked } => rlock(conn, call, topology, fence_checked).await,
        AttemptKind::Permit(permits) => semaphore(conn, call, topology, permits).await,
    }
}

/// Runs `lock.lua`: take the write lock under the call's id and mint a fencing token
/// (floored at the server clock on a cluster), setting the lock intent on failure when
/// `set_intent`; in the queue as the call says.
async fn lock<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    topology: Topology,
    set_intent: bool,
) -> Result<Attempt, Error> {
    let (keys, queue) = (&call.keys, call.queue);
    SCRIPTS
        .lock
        .attempt(conn, keys, queue.numkeys(3), |cmd| {
            cmd.arg(keys.lock()).arg(keys.intent()).arg(keys.fence());
            queue.keys(cmd, keys);
            cmd.arg(call.id)
                .arg(call.ttl_ms)
                .arg(flag(set_intent))
                .arg(call.fence_ms);
            // The flag is sent only when set (or when fair): a client that has not
            // authenticated may send at most 10 arguments, and must get NOAUTH, not a
            // protocol error.
            queue.args(cmd, topology.clock_floor());
        })
        .await
}

/// Runs `rlock.lua`: add the call's id to the readers of the lock and mint a fencing
/// token (floored at the server clock on a cluster); with `fence_checked` (never when
/// fair), the fence key is taken as the counter without reading it first.
async fn rlock<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    topology: Topology,
    fence_checked: bool,
) -> Result<Attempt, Error> {
    let (keys, queue) = (&call.keys, call.queue);
    let counting = fence_checked && !queue.is_fair();
    SCRIPTS
        .rlock
        .attempt(conn, keys, queue.numkeys(3), |cmd| {
            cmd.arg(keys.lock()).arg(keys.intent()).arg(keys.fence());
            queue.keys(cmd, keys);
            cmd.arg(call.id)
                .arg(call.ttl_ms)
                .arg(call.fence_ms)
                .arg(flag(counting));
            queue.args(cmd, topology.clock_floor());
        })
        .await
}

/// Runs `semaphore.lua`: take one of `permits` permits under the call's id and mint a
/// fencing token (floored at the server clock on a cluster).
async fn semaphore<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    topology: Topology,
    permits: u32,
) -> Result<Attempt, Error> {
    let (keys, queue) = (&call.keys, call.queue);
    SCRIPTS
        .semaphore
        .attempt(conn, keys, queue.numkeys(2), |cmd| {
            cmd.arg(keys.lock()).arg(keys.fence());
            queue.keys(cmd, keys);
            cmd.arg(call.id)
                .arg(call.ttl_ms)
                .arg(permits)
                .arg(call.fence_ms)
                .arg(flag(topology.clock_floor()));
            if let Some(op) = queue.op() {
                cmd.arg(op);
            }
        })
        .await
}

/// Runs `refresh.lua`: true when the call's id still holds the lock key, whose TTL is now
/// at least the call's.
pub(crate) async fn refresh<C: ConnectionLike>(conn: &mut C, call: &Call) -> Result<bool, Error> {
    let key = call.keys.lock();
    let held: i64 = SCRIPTS
        .refresh
        .run(conn, &call.keys, 1, |cmd| {
            cmd.arg(key).arg(call.id).arg(call.ttl_ms);
        })
        .await
        .map_err(|err| Error::redis(key, err))?;
    Ok(held == 1)
}

/// What one `renew.lua` reported: whether each call's id still holds its lock key, in
/// the batch's order, and the server's clock when it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Renewed {
    pub(crate) held: Vec<bool>,
    /// The server's `TIME` in microseconds.
    pub(crate) server_us: u64,
}

/// Runs `renew.lua`: whether each call's id still holds its lock key, in `batch`'s order;
/// those that do now have a TTL of at least the calls' (every call of one batch has the
/// same TTL: the batches come from one mutex's refresher). On a cluster every lock key of
/// the batch must share a slot. A failed request fails the whole batch, named after its
/// first key. (A batch of one is `renew.lua` too, not the Go package's `refresh.lua`: it
/// does the same to the key, and reports the server's clock.)
pub(crate) async fn renew<C: ConnectionLike>(
    conn: &mut C,
    batch: &[Renewal<'_>],
) -> Result<Renewed, Error> {
    let Some(first) = batch.first() else {
        return Ok(Renewed {
            held: Vec::new(),
            server_us: 0,
        });
    };
    let key = first.call.keys.lock();
    let writers: String = batch
        .iter()
        .map(|item| if item.writer { 'w' } else { '-' })
        .collect();
    let mut held: Vec<i64> = SCRIPTS
        .renew
        // Sized for one key: a batch's command grows as it is filled.
        .run(conn, &first.call.keys, batch.len(), |cmd| {
            for item in batch {
                cmd.arg(item.call.keys.lock());
            }
            cmd.arg(first.call.ttl_ms).arg(&writers);
            for item in batch {
                cmd.arg(item.call.id);
            }
        })
        .await
        .map_err(|err| Error::redis(key, err))?;
    let server_us = match held.pop().map(u64::try_from) {
        Some(Ok(us)) if held.len() == batch.len() => us,
        _ => {
            let reply = redis::Value::SimpleString(format!("{held:?}"));
            return Err(super::replies::unexpected(&reply, key));
        }
    };
    Ok(Renewed {
        held: held.into_iter().map(|held| held == 1).collect(),
        server_us,
    })
}

/// Runs `unlock.lua`: remove the call's id (held as `hold`) from the lock, delete the
/// lock intent too when the leftovers name it and it holds the id, leave the fair queue
/// when they name it (and the lock has one), and publish on the release channel when the
/// lock may now be taken (by `SPUBLISH` in the lock key's slot on a cluster).
pub(crate) async fn unlock<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    topology: Topology,
    hold: Hold,
    leftovers: Leftovers,
) -> Result<Unlocked, Error> {
    let keys = &call.keys;
    let queue = keys.queue().filter(|_| leftovers.queue_place);
    let numkeys = match (queue, leftovers.intent) {
        (Some(_), _) => 4,
        (None, true) => 2,
        (None, false) => 1,
    };
    let reply: i64 = SCRIPTS
        .unlock
        .run(conn, keys, numkeys, |cmd| {
            cmd.arg(keys.lock());
            // Leaving the queue passes the intent too: it is deleted only if it holds the id.
            if numkeys > 1 {
                cmd.arg(keys.intent());
            }
            if let Some(queue) = queue {
                cmd.arg(queue.order).arg(queue.deadline);
            }
            cmd.arg(call.id)
                .arg(keys.channel())
                .arg(hold.arg())
                .arg(flag(topology.sharded()));
        })
        .await
        .map_err(|err| Error::redis(keys.lock(), err))?;
    Ok(Unlocked::from_reply(reply))
}

/// Runs `downgrade.lua`: turn the write lock the call's id holds into a read lock held by
/// it with the call's TTL, in one step, and publish the id on the release channel (by
/// `SPUBLISH` on a cluster) so waiting readers look again.
pub(crate) async fn downgrade<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    topology: Topology,
) -> Result<Downgraded, Error> {
    let keys = &call.keys;
    let reply: i64 = SCRIPTS
        .downgrade
        .run(conn, keys, 1, |cmd| {
            cmd.arg(keys.lock())
                .arg(call.id)
                .arg(call.ttl_ms)
                .arg(keys.channel())
                .arg(flag(topology.sharded()));
        })
        .await
        .map_err(|err| Error::redis(keys.lock(), err))?;
    Ok(Downgraded::from_reply(reply))
}

/// Runs `fence.lua`: raise the fence counter of the call's lock, and its granted token,
/// to at least `token`, the largest token the nodes of a quorum minted for one
/// acquisition.
pub(crate) async fn raise_fence<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    token: u64,
) -> Result<(), Error> {
    let keys = &call.keys;
    let granted = keys.granted();
    let reply = SCRIPTS
        .fence
        .attempt(conn, keys, 2, |cmd| {
            cmd.arg(keys.fence())
                .arg(granted)
                .arg(token)
                .arg(call.fence_ms);
        })
        .await?;
    match reply {
        Attempt::Acquired(1) => Ok(()),
        other => Err(super::replies::unexpected(
            &redis::Value::SimpleString(format!("{other:?}")),
            keys.lock(),
        )),
    }
}

/// Runs `retake.lua`: takes the lock back under the call's id, as `hold` says (a writer
/// or a reader, never a permit), on a node of a quorum that lost it, unless the node
/// granted a token larger than `token` (to another holder, or as the mark of a forced
/// release); no token is minted, the counter and the granted token are raised to `token`.
/// True when the id holds the lock there now.
pub(crate) async fn retake<C: ConnectionLike>(
    conn: &mut C,
    call: &Call,
    hold: Hold,
    token: u64,
) -> Result<bool, Error> {
    let keys = &call.keys;
    let granted = keys.granted();
    let reply: redis::Value = SCRIPTS
        .retake
        .run(conn, keys, 4, |cmd| {
            cmd.arg(keys.lock())
                .arg(keys.intent())
                .arg(keys.fence())
                .arg(granted)
                .arg(call.id)
                .arg(call.ttl_ms)
                .arg(hold.arg())
                .arg(token)
                .arg(call.fence_ms);
        })
        .await
        .map_err(|err| Error::redis(keys.lock(), err))?;
    match &reply {
        redis::Value::Int(1) => Ok(true),
        redis::Value::Int(0) => Ok(false),
        redis::Value::Array(items) => Err(super::replies::refusal(items)
            .unwrap_or_else(|| super::replies::unexpected(&reply, keys.lock()))),
        _ => Err(super::replies::unexpected(&reply, keys.lock())),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn call() -> Call {
        Call {
            keys: Keys::new("k", false),
            id: Id::new(),
            ttl_ms: 1000,
            fence_ms: 1000,
            queue: Queueing::Off,
            node_order: NodeOrder::default(),
        }
    }

    #[tokio::test]
    async fn the_calls_of_one_lease_to_one_node_take_turns_across_rounds() {
        let lease = call();
        assert!(!lease.node_order.is_shared(), "nothing made on one server");
        let (first, second) = (lease.shared(), lease.shared());
        let held = first.node_order.turn(1).await;
        let waiting = tokio::spawn(async move { second.node_order.turn(1).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            !waiting.is_finished(),
            "the second call waits for the first"
        );
        // Another node's turn is free.
        let _other = tokio::time::timeout(Duration::from_secs(1), first.node_order.turn(0))
            .await
            .unwrap();
        drop(held);
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .unwrap()
            .unwrap();
        // Another lease's turns are its own.
        let _free =
            tokio::time::timeout(Duration::from_secs(1), call().shared().node_order.turn(1))
                .await
                .unwrap();
    }
}
