//! [`Engine::attach`](super::Engine::attach): a [`Lease`]'s hold moved to a fresh id in
//! one backend call (`lua/attach.lua`), renewed with this handle's TTL, and each of its
//! locks handed to the refresher; and the checks of a lease against what it is given to
//! ([`Fit`]), which release and renew by lease share.

use std::sync::Arc;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Shared;
use crate::backend::Backend;
use crate::error::Error;
use crate::lease::acquisition::Acquisition;
use crate::lease::portable::{Lease, Part};
use crate::lease::refresher::Refresher;
use crate::lease::HeldLease;
use crate::mode::Kind;
use crate::protocol::calls::{AttachPart, Attached, Call, Holder, NodeOrder, Queueing};
use crate::protocol::id::Id;
use crate::protocol::keys::Keys;
use crate::protocol::slot::slot;
use crate::settings::Settings;

/// What a lease is given to, which its shape must fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    /// One key held by a writer ([`RwMutex::attach_write`](crate::RwMutex::attach_write)).
    Write,
    /// One key held by a reader ([`RwMutex::attach_read`](crate::RwMutex::attach_read)).
    Read,
    /// A mutex's keys, each held by a writer or a reader: a set's lease, or a single
    /// guard's ([`RwMutex::attach_all`](crate::RwMutex::attach_all), and a mutex's
    /// release and renew by lease).
    Locks,
    /// One semaphore permit ([`Semaphore::attach`](crate::Semaphore::attach), and a
    /// semaphore's release and renew by lease).
    Permit,
}

/// One key of a checked lease: its keys (the lock key checked), the form the lease's id
/// holds it in, the kind of lock a guard of it holds, and its fencing token.
#[derive(Debug)]
pub(crate) struct LeaseKey {
    pub(crate) keys: Keys,
    pub(crate) holder: Holder,
    pub(crate) kind: Kind,
    pub(crate) fencing_token: u64,
}

/// One checked attach, as a handle gives it to its engine.
#[derive(Debug)]
pub(crate) struct CheckedAttach<'a> {
    pub(crate) settings: &'a Settings,
    /// The lease's id, whose hold moves.
    pub(crate) old: Id,
    /// The fresh id the hold moves to.
    pub(crate) id: Id,
    /// Every key of the hold, in its order; not empty.
    pub(crate) keys: Vec<LeaseKey>,
    /// The parent of each lock's token (a set's token), if any.
    pub(crate) parent: Option<CancellationToken>,
}

/// Moves the hold `request` names to its fresh id through `refresher`'s backend, bounded
/// by the validity of this handle's TTL, and hands each lock to `refresher`, which keeps
/// it from the attach's send time on: one acquisition per key, in the lease's order.
/// [`Error::NotHeld`] naming the first key the old id no longer held (nothing moved).
pub(super) async fn on<B: Backend>(
    refresher: &Refresher<B>,
    request: CheckedAttach<'_>,
) -> Result<Vec<Acquisition>, Error> {
    let CheckedAttach {
        settings,
        old,
        id,
        keys,
        parent,
    } = request;
    let leases: Vec<(Arc<HeldLease<B>>, Holder, u64)> = keys
        .into_iter()
        .map(|key| {
            let call = Call {
                keys: key.keys,
                id,
                ttl_ms: settings.ttl_ms(),
                fence_ms: settings.fence_ms(),
                queue: Queueing::Off,
                node_order: NodeOrder::default(),
                // A describing handle writes its own description in the attach's request.
                describe: settings.holder.clone(),
            };
            let lease = HeldLease::new(Arc::clone(refresher.backend()), call, key.kind);
            (Arc::new(lease), key.holder, key.fencing_token)
        })
        .collect();
    let Some((first, ..)) = leases.first() else {
        return Ok(Vec::new());
    };
    let parts: Vec<AttachPart<'_>> = leases
        .iter()
        .map(|(lease, holder, _)| AttachPart {
            call: &lease.call,
            holder: *holder,
        })
        .collect();
    let sent = Instant::now();
    let attach = refresher.backend().attach(&parts, &old);
    let attached = tokio::time::timeout(first.validity(), attach)
        .await
        .unwrap_or(Err(Error::Timeout))?;
    drop(parts);
    if let Attached::NotHeld(at) = attached {
        let key = leases.get(at).unwrap_or(&leases[0]).0.key().to_owned();
        return Err(Error::NotHeld { key });
    }
    Ok(leases
        .into_iter()
        .map(|(lease, _, fencing_token)| {
            let mode = lease.kind.mode();
            let kept = refresher.keep(lease, sent, fencing_token, parent.clone());
            Acquisition {
                liveness: kept.liveness_ref(),
                lease: kept,
                mode,
                fencing_token,
            }
        })
        .collect())
}

impl<C> Shared<C> {
    /// Takes over the hold of `lease`, which must fit `fit`, under a fresh id: one
    /// acquisition per key, in the lease's order, each lock's token a child of `parent`.
    /// The settings, the lease's shape and its keys are checked first (nothing is sent
    /// when they fail).
    pub(crate) async fn attach(
        &self,
        lease: &Lease,
        fit: Fit,
        parent: Option<CancellationToken>,
    ) -> Result<Vec<Acquisition>, Error> {
        self.check_settings()?;
        let request = CheckedAttach {
            settings: &self.settings,
            old: lease.raw_id(),
            id: Id::new(),
            keys: self.lease_keys(lease, fit)?,
            parent,
        };
        self.engine.attach(request).await
    }

    /// The keys of `lease`, checked: its shape fits `fit` (else [`Error::InvalidLease`]
    /// naming the first key that does not), each lock key is one this handle may use
    /// ([`Error::InvalidKey`]), and on a Redis Cluster (or with hash-tagged keys) they
    /// share the first one's slot ([`Error::CrossSlot`]).
    pub(crate) fn lease_keys(&self, lease: &Lease, fit: Fit) -> Result<Vec<LeaseKey>, Error> {
        let settings = &self.settings;
        check_fit(lease, fit)?;
        let keys = lease
            .parts()
            .iter()
            .map(|part| {
                Ok(LeaseKey {
                    keys: settings.keys_of_lock(&part.key)?,
                    holder: part.holder,
                    kind: match part.holder {
                        Holder::Writer => Kind::Write,
                        Holder::Permit => Kind::Permit(settings.product.permits().unwrap_or(1)),
                        Holder::Reader | Holder::Upgradable => Kind::Read,
                    },
                    fencing_token: part.fencing_token,
                })
            })
            .collect::<Result<Vec<LeaseKey>, Error>>()?;
        let one_slot = settings.on_cluster() || settings.hash_tag_keys;
        if let (true, Some(first)) = (one_slot, keys.first()) {
            let at = |keys: &Keys| slot(keys.lock().as_bytes());
            if let Some(other) = keys.iter().find(|key| at(&key.keys) != at(&first.keys)) {
                return Err(Error::CrossSlot {
                    key: first.keys.lock().to_owned(),
                    foreign: other.keys.lock().to_owned(),
                });
            }
        }
        Ok(keys)
    }
}

/// Refuses a lease whose shape does not fit `fit`, with [`Error::InvalidLease`] naming
/// the first key at fault.
fn check_fit(lease: &Lease, fit: Fit) -> Result<(), Error> {
    let parts = lease.parts();
    let refuse = |part: &Part, reason: &str| Error::InvalidLease {
        key: Some(part.key.clone()),
        reason: reason.to_owned(),
    };
    let what = |holder| match holder {
        Holder::Writer => "a writer's",
        Holder::Permit => "a semaphore permit's",
        Holder::Reader | Holder::Upgradable => "a reader's",
    };
    if let (Some(second), Fit::Write | Fit::Read | Fit::Permit) = (parts.get(1), fit) {
        return Err(refuse(
            second,
            "it is the lease of a set of keys; attach it with attach_all",
        ));
    }
    for part in parts {
        let fits = match fit {
            Fit::Write => part.holder == Holder::Writer,
            Fit::Read => part.holder == Holder::Reader,
            Fit::Locks => matches!(part.holder, Holder::Writer | Holder::Reader),
            Fit::Permit => part.holder == Holder::Permit,
        };
        let wanted = match fit {
            Fit::Write => "a writer's lease",
            Fit::Read => "a reader's lease",
            Fit::Locks => "a lock's lease (a writer's, a reader's or a set's)",
            Fit::Permit => "a semaphore permit's lease",
        };
        if !fits {
            let reason = format!("it is {} lease, and this takes {wanted}", what(part.holder));
            return Err(refuse(part, &reason));
        }
    }
    Ok(())
}
