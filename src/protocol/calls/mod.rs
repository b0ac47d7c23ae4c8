//! The typed calls of the scripts: one [`Call`] per lease says whose lock it is, and the
//! types its calls take; each sender sends one script (by `EVALSHA`, see
//! [`lua`](super::lua)) with the arguments its header in `lua/` lists. The senders live
//! by job, re-exported here: acquiring (`acquire.rs`, with the write fast path of
//! `fast.rs`), attaching a lease's hold under a new id (`attach.rs`), keeping
//! (`keep.rs`) and releasing (`release.rs`).

mod acquire;
mod attach;
mod fast;
mod keep;
mod release;
mod set;

use std::sync::Arc;

use redis::Cmd;

pub(crate) use self::acquire::{attempt, raise_fence};
pub(crate) use self::attach::{attach, AttachPart, Attached};
pub(crate) use self::keep::{refresh, renew, retake, Renewed};
pub(crate) use self::release::{downgrade, plain, unlock, upgrade};
pub(crate) use self::set::{lock_all, SetPart};
use super::describe::Describe;
use super::id::Id;
use super::keys::Keys;
pub(crate) use super::node_order::NodeOrder;

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
    /// The holder's description (`lua/describe.lua`'s ARGV[3], made once per handle)
    /// when the handle describes its holders: each attempt is followed by
    /// `describe.lua` in the same request, renewals keep the holders key, and a release
    /// deletes the id's field. `None` when it does not.
    pub(crate) describe: Option<Arc<String>>,
}

impl Call {
    /// The `describe.lua` call that follows an attempt of this call on `keys` (its own
    /// lock's, or a set's), when the handle describes its holders.
    pub(crate) fn describe<'a>(&'a self, keys: &'a [&'a Keys]) -> Option<Describe<'a>> {
        self.describe.as_deref().map(|text| Describe {
            keys,
            id: self.id,
            ttl_ms: self.ttl_ms,
            text,
        })
    }

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
    /// The write fast path, no script ([`fast_lock`](fast::fast_lock)).
    FastWrite,
    /// `lock.lua`, setting the lock intent if blocked when `set_intent`.
    Write { set_intent: bool },
    /// `rlock.lua`; with `fence_checked` (never when fair) the fence key is taken as the
    /// counter without reading it first.
    Read { fence_checked: bool },
    /// `semaphore.lua`, admitting this many holders.
    Permit(u32),
    /// `upgradable.lua`: a read lock that at most one reader holds at a time and that
    /// `upgrade.lua` can turn into the write lock.
    Upgradable,
}

/// What an id holds at a lock key, as `unlock.lua` and `retake.lua` take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Holder {
    /// A writer's id, the string at the lock key.
    Writer,
    /// A reader's id, in the set at the lock key.
    Reader,
    /// A permit's id, in the sorted set at the semaphore key.
    Permit,
    /// An upgradable reader's id, in the set at the lock key and at its upgrader key
    /// (`unlock.lua` removes both). Never taken back by `retake.lua`, which would make it
    /// a plain reader on that node: over a quorum it is held while a majority of the
    /// nodes its attempt took still hold it.
    Upgradable,
}

impl Holder {
    /// The script argument: `"w"`, `"r"`, `"p"` or `"u"`.
    fn arg(self) -> &'static str {
        match self {
            Holder::Writer => "w",
            Holder::Reader => "r",
            Holder::Permit => "p",
            Holder::Upgradable => "u",
        }
    }
}

impl From<AttemptKind> for Holder {
    /// What an attempt of `kind` holds when it takes the lock.
    fn from(kind: AttemptKind) -> Self {
        match kind {
            AttemptKind::Read { .. } => Holder::Reader,
            AttemptKind::Permit(_) => Holder::Permit,
            AttemptKind::Upgradable => Holder::Upgradable,
            AttemptKind::FastWrite | AttemptKind::Write { .. } => Holder::Writer,
        }
    }
}

/// How a refresh may take the lock back on a node of a quorum that lost it (the key
/// expired there, or the node restarted empty): in the form the id holds, only while the
/// guard is valid and its token has not fired, and only on a node whose fence counter is
/// not past the guard's fencing token ([`retake`]).
#[derive(Debug, Clone)]
pub(crate) struct Retake {
    /// What the id holds: `retake.lua` takes it back as the writer for
    /// [`Holder::Writer`], as a reader for [`Holder::Reader`]; a permit and an
    /// upgradable reader ([`Holder::Upgradable`], while it is one) are never taken back.
    pub(crate) holder: Holder,
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
    /// The id is the lock's upgradable reader (or its upgrade may be in flight):
    /// `renew.lua` renews its upgrader key with it.
    pub(crate) upgradable: bool,
    /// How a backend over several nodes may take the lock back on a node that lost it.
    pub(crate) retake: Option<Retake>,
}

/// What an `upgrade.lua` call asks of an upgradable reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UpgradeOp {
    /// Upgrade, keeping new readers out with the lock intent while others still read.
    Wait,
    /// Upgrade only if no other reader is left; set nothing otherwise.
    Try,
    /// Give up the right to upgrade: stay a plain reader.
    Plain,
}

impl UpgradeOp {
    /// The script argument: `"wait"`, `"try"` or `"plain"`.
    fn arg(self) -> &'static str {
        match self {
            UpgradeOp::Wait => "wait",
            UpgradeOp::Try => "try",
            UpgradeOp::Plain => "plain",
        }
    }
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

/// Adds what `upgradable.lua` and `upgrade.lua` both start with: the lock, intent, fence
/// and upgrader keys, then the id, the TTL and the fence retention.
fn upgrader_args(cmd: &mut Cmd, call: &Call) {
    let keys = &call.keys;
    cmd.arg(keys.lock())
        .arg(keys.intent())
        .arg(keys.fence())
        .arg(keys.upgrader())
        .arg(call.id)
        .arg(call.ttl_ms)
        .arg(call.fence_ms);
}

/// A script's flag argument: `"1"` when `on`, else `"0"`.
fn flag(on: bool) -> &'static str {
    if on {
        "1"
    } else {
        "0"
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
            describe: None,
        }
    }

    #[test]
    fn an_attempt_holds_what_its_kind_takes_and_scripts_read_it_so() {
        for (kind, holder) in [
            (AttemptKind::FastWrite, Holder::Writer),
            (AttemptKind::Write { set_intent: true }, Holder::Writer),
            (AttemptKind::Write { set_intent: false }, Holder::Writer),
            (
                AttemptKind::Read {
                    fence_checked: true,
                },
                Holder::Reader,
            ),
            (
                AttemptKind::Read {
                    fence_checked: false,
                },
                Holder::Reader,
            ),
            (AttemptKind::Permit(3), Holder::Permit),
            (AttemptKind::Upgradable, Holder::Upgradable),
        ] {
            assert_eq!(Holder::from(kind), holder, "{kind:?}");
        }
        // `unlock.lua` and `retake.lua` read "w", "r" and "p"; `unlock.lua` "u" too.
        let holders = [
            Holder::Writer,
            Holder::Reader,
            Holder::Permit,
            Holder::Upgradable,
        ];
        assert_eq!(holders.map(Holder::arg), ["w", "r", "p", "u"]);
        let ops = [UpgradeOp::Wait, UpgradeOp::Try, UpgradeOp::Plain];
        assert_eq!(ops.map(UpgradeOp::arg), ["wait", "try", "plain"]);
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
