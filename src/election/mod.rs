//! Leader election on a lock: [`Election`], its requests ([`Campaign`]), the
//! [`Leadership`] a candidate gets, and the observer task behind
//! [`Election::observe`].

mod campaign;
mod leadership;
mod observer;

use std::fmt;
use std::time::Duration;

use tokio::sync::watch;

pub use campaign::{Campaign, TryCampaign};
use leadership::Keeping;
pub use leadership::Leadership;

use crate::builder::Builder;
use crate::engine::Deployment;
use crate::error::Error;
use crate::leader::Leader;
use crate::mutex::RwMutex;

/// Leader election among the processes that share a name: at most one candidate leads at
/// a time, and everyone can ask who does and follow the changes.
///
/// The leader is the writer of the election's lock: its lock key is the name (as
/// [`RwMutex::write`] on the same name takes it, so a Go client of the original package
/// sees it held; `{name}` with [`hash_tag_keys`](Builder::hash_tag_keys)), kept by a background renewal every `ttl / 2` like any guard's, and its
/// term is the lock's [fencing token](crate::WriteGuard::fencing_token), strictly larger for
/// every new leader. Beside the lock key, the record `<lock key>:leader` holds the leader's
/// term, id and the value it published, written only while the lock holds that id
/// (`lua/proclaim.lua`) and believed only while it still does: a reader checks both in
/// one step (`lua/leader.lua`). The [election guide](crate::guide::election) shows the
/// pattern and what it guarantees.
///
/// An election is made over the same deployments as a [`RwMutex`]: one server (or a
/// primary with replicas), a Redis Cluster (the name needs a hash tag, as for a mutex),
/// a [`Quorum`](crate::Quorum) (the record is written to and read from a majority of the
/// nodes), or a primary under Redis Sentinel. [`observe`](Self::observe) needs a
/// [notifier](Builder::notifier). Clones share the connection and the options.
///
/// # Examples
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use redismutex::Election;
///
/// let client = redis::Client::open("redis://127.0.0.1/")?;
/// let conn = client.get_multiplexed_async_connection().await?;
/// let election = Election::builder(conn, "scheduler").notifier(client).build()?;
///
/// let leadership = election.campaign("host-a:8080").await?;
/// let term = leadership.fencing_token();
/// tokio::select! {
///     () = leadership.cancelled() => { /* lost the lead: stop at once */ }
///     () = async { /* lead, sending `term` with every write */ } => {}
/// }
/// leadership.resign().await?;
/// # Ok(())
/// # }
/// ```
pub struct Election<C> {
    mutex: RwMutex<C>,
}

impl<C: Deployment> Election<C> {
    /// An election named `name` over `conn` with a 4 s TTL and no notifier.
    ///
    /// This cannot fail: a name [`Builder::build`] would refuse (as for a mutex) is
    /// reported by every request as [`Error::InvalidOptions`]. Use
    /// [`builder`](Self::builder) to check it up front or to set other options.
    pub fn new(conn: C, name: impl Into<String>) -> Self {
        Self {
            mutex: RwMutex::new(conn, name),
        }
    }

    /// A [`Builder`] for an election named `name`, starting from the defaults of
    /// [`new`](Self::new). The options that speak of "the lock" apply to the leader's
    /// lock: `ttl`, `fence_retention` (which also bounds how long the record outlives the
    /// last leader), `max_hold` (a cap on one leadership), `task_tracker`, `notifier`,
    /// `hash_tag_keys`, `cluster`, `fair` (candidates lead in the order they came),
    /// `replicas` (an acquisition and each record write wait for replicas) and
    /// `name_label`.
    pub fn builder(conn: C, name: impl Into<String>) -> Builder<C, Election<C>> {
        Builder::of(conn, name.into())
    }

    /// Waits until this candidate leads, then publishes `value` (what it tells the others
    /// about itself: an address, a name) as the leader's, and returns its
    /// [`Leadership`]. Await the returned [`Campaign`], after setting its options if
    /// needed; its errors and cancel safety are there.
    pub fn campaign(&self, value: impl Into<String>) -> Campaign<C> {
        Campaign::new(self.mutex.write(), value.into(), self.keeping())
    }

    /// Leads now if nobody does, publishing `value`: await the returned [`TryCampaign`],
    /// after setting its options if needed, for `Some(Leadership)`, or `None` when another
    /// candidate leads. One attempt: one round trip to take the lock, one to publish. Its
    /// errors and cancel safety are on [`TryCampaign`].
    pub fn try_campaign(&self, value: impl Into<String>) -> TryCampaign<C> {
        TryCampaign::new(self.mutex.try_write(), value.into(), self.keeping())
    }

    /// Who leads now: `None` when nobody does, or when the lock is held by a writer that
    /// published no record (a Go client, or a candidate between taking the lock and
    /// publishing its value). One read that writes nothing; over a quorum, the leader a
    /// majority of the nodes names.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOptions`] as for a request, before anything is sent;
    /// [`Error::WrongType`] when the lock key or the record key holds a type the election
    /// does not use, [`Error::NoExpiry`] when the lock key has no TTL (left untouched);
    /// [`Error::NoQuorum`] when fewer than a majority of a quorum's nodes answered;
    /// [`Error::Timeout`] when no answer came within the TTL; [`Error::Refused`] and
    /// [`Error::Redis`] when the request fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn leader(&self) -> Result<Option<Leader>, Error> {
        Ok(self.mutex.shared().leader().await?.leader)
    }

    /// The leader now and every change after: a new leader, a [`proclaim`]ed value, a
    /// resignation, a leader whose lock was released by force, and one whose lease
    /// expired (it crashed or lost its connection). Changes are pushed by Pub/Sub on the
    /// record's channel `<lock key>:leader` and the lock's release channel, over subscriber
    /// connections of the observer's own, and the observer reads the leader again on each
    /// (as [`leader`](Self::leader) does), at the PTTL of the leader's lock (an expiry
    /// publishes nothing), and every TTL while nobody leads (so a message lost in transit,
    /// as while a sharded subscription moves to a Cluster's new master, delays a change by
    /// at most one TTL). A lost subscriber connection is reconnected with a backoff (10 ms
    /// doubling to 1 s) and the leader read again; while reads fail, the
    /// receiver keeps the last value read. Like any [`watch`] channel it gives the latest
    /// value: changes closer together than one read may be seen as one.
    ///
    /// The observer runs in a background task (on the [task
    /// tracker](Builder::task_tracker), if set) until every receiver is dropped.
    ///
    /// [`proclaim`]: Leadership::proclaim
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOptions`] when the election has no [notifier](Builder::notifier);
    /// the errors of [`leader`](Self::leader) for the first read.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future before it completes starts no observer.
    pub async fn observe(&self) -> Result<watch::Receiver<Option<Leader>>, Error> {
        observer::start(self.mutex.shared()).await
    }

    /// The election's name, which is its lock key (`{name}` with
    /// [`hash_tag_keys`](Builder::hash_tag_keys)); the record's key is
    /// `<lock key>:leader`.
    pub fn name(&self) -> &str {
        self.mutex.name()
    }

    /// The TTL of the leader's lock; it is renewed every `ttl / 2`.
    pub fn ttl(&self) -> Duration {
        self.mutex.ttl()
    }

    /// How a leader keeps its record alive: written again every half of the fence
    /// retention (the record's `PX`), so that it lives as long as the lock does.
    fn keeping(&self) -> Keeping {
        Keeping {
            every: self.mutex.fence_retention() / 2,
            tracker: self.mutex.shared().settings.tracker.clone(),
        }
    }
}

impl<C: Deployment> Builder<C, Election<C>> {
    /// Checks the options and makes the election.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOptions`] for the reasons [`Builder::build`] gives for a mutex.
    pub fn build(self) -> Result<Election<C>, Error> {
        let (conn, settings) = self.into_parts();
        settings.check()?;
        Ok(Election {
            mutex: RwMutex::from_shared(conn.share(settings)),
        })
    }
}

impl<C> Clone for Election<C> {
    fn clone(&self) -> Self {
        Self {
            mutex: self.mutex.clone(),
        }
    }
}

impl<C> fmt::Debug for Election<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Election")
            .field("mutex", &self.mutex)
            .finish()
    }
}
