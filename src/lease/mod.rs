//! One lock's lease in Redis and what keeps it: its keys, id and timing, its downgrade
//! state (in which form its id is after a downgrade), its liveness (deadline and cancel
//! reason), the refresh task, the reentrancy registry, and a hold's portable form
//! ([`Lease`], `portable.rs`). It reaches Redis only through
//! a [`Backend`], and knows no guard, request or handle.

pub(crate) mod acquisition;
pub(crate) mod any;
mod downgrade_state;
pub(crate) mod liveness;
pub(crate) mod portable;
pub(crate) mod refresher;
pub(crate) mod registry;
mod upgrade_state;

use std::sync::Arc;
use std::time::Duration;

use redis::{Pipeline, Value};

pub(crate) use any::AnyLease;
pub(crate) use downgrade_state::DowngradeState;
pub use portable::Lease;
pub(crate) use upgrade_state::UpgradeState;

use self::liveness::Liveness;
use crate::backend::Backend;
use crate::error::Error;
use crate::mode::{Kind, Mode};
use crate::protocol::calls::{AttemptKind, Call, Holder, Leftovers, Renewal, Retake, UpgradeOp};
use crate::protocol::exec::{Access, Executed};
use crate::protocol::keys::Keys;
use crate::protocol::replies::{Attempt, Upgraded};

/// The keys, id, kind and TTL of one lock (or permit), with the backend that reaches it.
#[derive(Debug)]
pub(crate) struct HeldLease<B> {
    pub(crate) backend: Arc<B>,
    /// What every script call of the lease sends.
    pub(crate) call: Call,
    /// What the request took. A write lock may since have been downgraded:
    /// `downgrade_state` says which form the release must remove.
    pub(crate) kind: Kind,
    pub(crate) downgrade_state: DowngradeState,
    /// For [`Kind::Upgradable`]: whether the id is still the upgradable reader, a plain
    /// reader, or the writer after an upgrade (whose downgrade `downgrade_state` follows).
    pub(crate) upgrade_state: UpgradeState,
}

impl<B> HeldLease<B> {
    /// A lease of `kind` for `call`.
    pub(crate) fn new(backend: Arc<B>, call: Call, kind: Kind) -> Self {
        Self {
            backend,
            call,
            kind,
            downgrade_state: DowngradeState::default(),
            upgrade_state: UpgradeState::default(),
        }
    }

    /// How long the lock lives in Redis without a refresh: the call's TTL in whole
    /// milliseconds, the `PX` its scripts set.
    pub(crate) fn ttl(&self) -> Duration {
        Duration::from_millis(self.call.ttl_ms)
    }

    /// The lock key.
    pub(crate) fn key(&self) -> &str {
        self.call.keys.lock()
    }

    /// The lease's id: 32 lowercase hex characters.
    pub(crate) fn id(&self) -> &str {
        self.call.id.as_str()
    }

    /// How long after an acquire or refresh request was sent the lock is surely still
    /// held: the TTL minus Redlock's drift margin (1% of the TTL + 2 ms).
    pub(crate) fn validity(&self) -> Duration {
        let ttl = self.ttl();
        ttl.saturating_sub(crate::drift::margin(ttl))
    }

    /// What this lease's id holds at the lock key when it holds it in `mode`.
    fn holder_as(&self, mode: Mode) -> Holder {
        match (self.kind, mode) {
            (Kind::Permit(_), _) => Holder::Permit,
            (_, Mode::Write) => Holder::Writer,
            (_, Mode::Read) => Holder::Reader,
        }
    }

    /// This hold's part of a portable [`Lease`], with `fencing_token`: its id and its
    /// lock key, held in the form its mode says now.
    pub(crate) fn portable(&self, fencing_token: u64) -> (crate::protocol::id::Id, portable::Part) {
        let part = portable::Part {
            key: self.key().to_owned(),
            holder: self.holder_as(self.mode()),
            fencing_token,
        };
        (self.call.id, part)
    }

    /// The mode the lease took the lock in, or [`Mode::Write`] once an upgradable
    /// reader's upgrade succeeded: what a downgrade turns into a reader.
    pub(crate) fn acquired_mode(&self) -> Mode {
        if self.upgrade_state.upgraded() {
            Mode::Write
        } else {
            self.kind.mode()
        }
    }

    /// The mode the lock is held in now: [`acquired_mode`](Self::acquired_mode), or
    /// [`Mode::Read`] after a downgrade.
    pub(crate) fn mode(&self) -> Mode {
        self.downgrade_state.mode(self.acquired_mode())
    }
}

impl<B: Backend> HeldLease<B> {
    /// One acquire attempt under this lease's id.
    pub(crate) async fn attempt(&self, kind: AttemptKind) -> Result<Attempt, Error> {
        self.backend.attempt(&self.call, kind).await
    }

    /// This lease's part of a batched renewal, for the lock whose liveness is `liveness`
    /// and whose fencing token is `fencing_token`. On a backend that retakes (a quorum), a
    /// node that lost the lock may take it back before the validity deadline and while
    /// the guard's token has not fired, in the form the id holds (not while a downgrade
    /// is in flight, nor for a permit), if its fence counter is not past `fencing_token`.
    pub(crate) fn renewal(&self, liveness: &Liveness, fencing_token: u64) -> Renewal<'_> {
        // The form first: a downgrade that begins after this read fires it, and one that
        // began before shows as in flight below.
        let form = self.backend.retakes().then(|| self.call.node_order.form());
        let upgradable = self.kind == Kind::Upgradable;
        let acquired = self.acquired_mode();
        let settled = self.downgrade_state.settled(acquired);
        // While the id is (or may still be) the upgradable reader, its holder says so: a
        // quorum takes no node back for it (see `Holder::Upgradable`).
        let upgrader = upgradable && self.upgrade_state.renews_upgrader();
        let retake = match (self.kind, settled, form) {
            (_, _, None) | (Kind::Permit(_), _, _) | (_, None, _) => None,
            (_, Some(mode), Some(form)) => Some(Retake {
                holder: if upgrader {
                    Holder::Upgradable
                } else {
                    self.holder_as(mode)
                },
                until: liveness.deadline(),
                live: liveness.token().clone(),
                fencing_token,
                form,
            }),
        };
        Renewal {
            call: &self.call,
            writer: acquired == Mode::Write && settled == Some(Mode::Write),
            upgradable: upgrader,
            retake,
        }
    }

    /// Turns this writer's lock into a read lock held by the same id, in one step; waiters
    /// here and elsewhere are told. False when the id did not hold the lock as a writer
    /// (nor already as a reader), or when the release has begun (nothing is sent then).
    pub(crate) async fn downgrade(&self) -> Result<bool, Error> {
        if !self.downgrade_state.sending() {
            return Ok(false);
        }
        let downgraded = self.backend.downgrade(&self.call).await?;
        self.downgrade_state.answered(downgraded.held);
        if downgraded.published {
            self.released_here();
        }
        Ok(downgraded.held)
    }

    /// One upgrade of this upgradable reader's lock into the write lock (`op` says
    /// whether it sets the lock intent while others read): what it found, or `None`
    /// when nothing was sent (the release has begun, or the id went plain). A reply
    /// that does not come leaves the upgrade in flight: renewals and the release then
    /// take the id in either form.
    pub(crate) async fn upgrade(&self, op: UpgradeOp) -> Result<Option<Upgraded>, Error> {
        if !self.upgrade_state.sending() {
            return Ok(None);
        }
        let reply = self.backend.upgrade(&self.call, op).await;
        match &reply {
            Ok(found) => self
                .upgrade_state
                .answered(matches!(found, Upgraded::Write(_))),
            Err(err) if err.changed_nothing() => self.upgrade_state.answered(false),
            Err(_) => {}
        }
        reply.map(Some)
    }

    /// This upgradable reader gives up the right to upgrade and stays a plain reader;
    /// waiters here and elsewhere are told (another upgradable reader may go in). False
    /// when the id is no longer one of the readers.
    pub(crate) async fn plain(&self) -> Result<bool, Error> {
        let reader = self.backend.plain(&self.call).await?;
        if reader {
            self.upgrade_state.plain();
            self.released_here();
        }
        Ok(reader)
    }

    /// Runs `pipe`'s commands only while this id holds the lock, in one step with that
    /// check: their replies, or `None` when the id did not hold it (nothing ran). With
    /// [`Access::Read`], writes are refused before anything is sent.
    pub(crate) async fn exec(
        &self,
        pipe: &Pipeline,
        access: Access,
    ) -> Result<Option<Vec<Value>>, Error> {
        Ok(
            match self.backend.exec(&self.call, &[], pipe, access).await? {
                Executed::Ran(replies) => Some(replies),
                Executed::NotHeld(_) => None,
            },
        )
    }

    /// Runs `pipe`'s commands only while this id holds this lock and every lock of `also`
    /// (the other keys of its set), in one step with that check: their replies, or which
    /// lock was not held (nothing ran then).
    pub(crate) async fn exec_set(
        &self,
        also: &[Keys],
        pipe: &Pipeline,
        access: Access,
    ) -> Result<Executed, Error> {
        self.backend.exec(&self.call, also, pipe, access).await
    }

    /// Writes an election's `record` beside the lock key only
    /// while this id holds the lock as its writer: false when it did not hold it.
    pub(crate) async fn proclaim(&self, record: &str) -> Result<bool, Error> {
        self.backend.proclaim(&self.call, record).await
    }

    /// Removes this id from the lock key, and the `leftovers` of an unfinished acquire;
    /// waiters here and elsewhere are told when that frees the lock. True when the id
    /// held the lock.
    ///
    /// After a downgrade whose reply was never read, the id may be a writer's or a
    /// reader's: it is removed as a writer's and, if that finds nothing, as a reader's.
    ///
    /// Waits at most one TTL for the reply ([`Error::Timeout`] after that): by then
    /// anything this id could have left in Redis has expired, since refresh has stopped.
    pub(crate) async fn release(&self, leftovers: Leftovers) -> Result<bool, Error> {
        let holders = self.releasing();
        let unlock = async {
            let (mut held, mut published) = (false, false);
            for &holder in holders {
                let found = self.backend.release(&self.call, holder, leftovers).await?;
                held = found.held;
                published |= found.published;
                if held {
                    break;
                }
            }
            Ok((held, published))
        };
        let (held, published) = tokio::time::timeout(self.ttl(), unlock)
            .await
            .unwrap_or(Err(Error::Timeout))?;
        if published {
            self.released_here();
        }
        Ok(held)
    }

    /// The release begins: the forms to remove the id as, in order (the release stops
    /// at the first that finds it). An upgradable reader's are its upgrade state's, and
    /// once upgraded its downgrade state's, as a writer's are. On a backend over several
    /// nodes (a quorum), an upgradable reader whose upgrade is unanswered is released as
    /// the upgradable reader only: each node falls back to the writer's form where that
    /// finds nothing, so one round removes the id in either form from every node (an
    /// upgrade may have turned some nodes and not others).
    fn releasing(&self) -> &'static [Holder] {
        let acquired = match self.kind {
            Kind::Permit(_) => return &[Holder::Permit],
            Kind::Upgradable => match self.upgrade_state.releasing() {
                Some([Holder::Writer, Holder::Upgradable]) if self.backend.retakes() => {
                    return &[Holder::Upgradable]
                }
                Some(holders) => return holders,
                None => Mode::Write,
            },
            kind => kind.mode(),
        };
        match self.downgrade_state.releasing(acquired) {
            [Mode::Write] => &[Holder::Writer],
            [Mode::Write, Mode::Read] => &[Holder::Writer, Holder::Reader],
            _ => &[Holder::Reader],
        }
    }

    /// This process published a release of the lock: its own waiters are woken now.
    fn released_here(&self) {
        if let Some(hub) = self.backend.hub() {
            hub.released(self.call.keys.lock(), &self.call.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::calls::Queueing;
    use crate::protocol::id::Id;
    use crate::protocol::keys::Keys;

    fn lease(ttl_ms: u64) -> HeldLease<()> {
        let call = Call {
            keys: Keys::new("k", false),
            id: Id::new(),
            ttl_ms,
            fence_ms: ttl_ms,
            queue: Queueing::Off,
            node_order: Default::default(),
            describe: None,
        };
        HeldLease::new(Arc::new(()), call, Kind::Write)
    }

    #[test]
    fn validity_is_the_ttl_minus_the_redlock_drift_margin() {
        // 4 s - (40 ms + 2 ms), 400 ms - (4 ms + 2 ms), 10 ms - (0.1 ms + 2 ms)
        assert_eq!(lease(4000).validity(), Duration::from_millis(3958));
        assert_eq!(lease(400).validity(), Duration::from_millis(394));
        assert_eq!(lease(10).validity(), Duration::from_micros(7900));
    }

    #[test]
    fn a_permit_is_released_as_a_permit_whatever_its_mode() {
        let mut permit = lease(400);
        permit.kind = Kind::Permit(3);
        assert_eq!(permit.holder_as(Mode::Write), Holder::Permit);
        let write = lease(400);
        assert_eq!(write.holder_as(Mode::Write), Holder::Writer);
        assert_eq!(write.holder_as(Mode::Read), Holder::Reader);
    }
}
