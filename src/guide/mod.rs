//! The user guides, one per topic a user comes with. Each opens with when to use what it
//! describes; the API reference is on the items themselves.
//!
//! | guide | read it when you want to know |
//! | --- | --- |
//! | [`waiting`] | how a request waits and is handed the lock: notifications, polling, lock intent |
//! | [`refresh`] | how a held lock is kept, when its cancellation token fires, and how it is released |
//! | [`fencing`] | how to make the protected resource refuse a stale holder |
//! | [`guarded_writes`] | how to write data in the lock's Redis only while the lock is still yours |
//! | [`semaphore`] | how to let N holders in at once, and how to serve waiters in arrival order |
//! | [`reentrancy`] | how a task takes a lock it already holds, how a writer becomes a reader, and a reader the writer |
//! | [`multiple_keys`] | how to take read and write locks on several keys at once, all or none |
//! | [`leases`] | how to hand a held lock to another process, or release it from one that never held it |
//! | [`election`] | how to elect one leader among processes, fence its writes, and follow who leads |
//! | [`cluster`] | how to run on a Redis Cluster |
//! | [`quorum`] | how to hold a lock on a majority of independent masters (Redlock) |
//! | [`sentinel`] | how to follow a Sentinel failover, and how replica acknowledgement narrows its window |
//! | [`metrics`] | what is recorded for dashboards and traces |
//! | [`inspection`] | how a program reads who holds a lock, for how long, and who waits |
//! | [`errors`] | what each error means and what to do about it |
//! | [`guarantees`] | what the lock guarantees, under which assumptions, and where it stops |
//! | [`protocol`] | the keys, values and scripts, and sharing locks with Go services |
//! | [`command_line`] | the `redismutex` command for shell scripts and cron jobs |
//!
//! # The options, and where each is explained
//!
//! A [`Builder`](crate::Builder) (from [`RwMutex::builder`](crate::RwMutex::builder),
//! [`Semaphore::builder`](crate::Semaphore::builder) or
//! [`Election::builder`](crate::Election::builder)) takes these; its docs list the
//! defaults. [`RwMutex::new`](crate::RwMutex::new) and
//! [`Semaphore::new`](crate::Semaphore::new) take the defaults.
//!
//! | option | default | guide |
//! | --- | --- | --- |
//! | [`ttl`](crate::Builder::ttl) | 4 s | [`refresh`](refresh#the-ttl-and-redis-rss-timeouts) |
//! | [`notifier`](crate::Builder::notifier) | none: waiters poll | [`waiting`] |
//! | [`lock_intent`](crate::Builder::lock_intent) (mutex only) | off | [`waiting`](waiting#lock-intent) |
//! | [`task_tracker`](crate::Builder::task_tracker) | none | [`refresh`](refresh#release) |
//! | [`max_hold`](crate::Builder::max_hold) | no cap | [`refresh`](refresh#a-cap-on-holding) |
//! | [`fence_retention`](crate::Builder::fence_retention) | 24 h | [`fencing`](fencing#retention-bounds-the-memory) |
//! | [`fair`](crate::Builder::fair) | off | [`semaphore`](semaphore#fair-mode) |
//! | [`reentrant`](crate::Builder::reentrant) (mutex only) | off | [`reentrancy`] |
//! | [`hash_tag_keys`](crate::Builder::hash_tag_keys) | off | [`cluster`](cluster#naming-rules) |
//! | `cluster` (feature `cluster`) | on for a `ClusterConnection` | [`cluster`] |
//! | [`replicas`](crate::Builder::replicas) | off | [`sentinel`](sentinel#replica-acknowledgement) |
//! | `name_label` (feature `metrics`) | off | [`metrics`] |
//! | [`describe_holder`](crate::Builder::describe_holder) | off | [`inspection`](inspection#who-holds-it) |
//! | [`holder_label`](crate::Builder::holder_label) | none | [`inspection`](inspection#who-holds-it) |
//!
//! Each request takes [`key`](crate::Acquire::key), [`parent`](crate::Acquire::parent)
//! and, when it waits, [`timeout`](crate::Acquire::timeout): see [`waiting`].

// A guide links an item that only exists with a cargo feature through a reference
// defined here: to the item with the feature, and without it to the place that
// describes it, so that the docs build cleanly with and without the feature. The paths
// are relative to this module (where a module's outer docs resolve), not `crate::`:
// tests/layers.rs reads `crate::` in code as an import, and the guides import nothing.

#[doc = include_str!("waiting.md")]
pub mod waiting {}

#[doc = include_str!("refresh.md")]
pub mod refresh {}

#[doc = include_str!("fencing.md")]
pub mod fencing {}

#[doc = include_str!("guarded_writes.md")]
pub mod guarded_writes {}

#[doc = include_str!("semaphore.md")]
pub mod semaphore {}

#[doc = include_str!("reentrancy.md")]
pub mod reentrancy {}

#[doc = include_str!("multiple_keys.md")]
pub mod multiple_keys {}

#[doc = include_str!("leases.md")]
pub mod leases {}

#[doc = include_str!("election.md")]
pub mod election {}

#[doc = include_str!("cluster.md")]
#[cfg_attr(
    feature = "cluster",
    doc = "",
    doc = "[`Builder::cluster`]: super::Builder::cluster",
    doc = "[`Notifier::cluster`]: super::Notifier::cluster"
)]
#[cfg_attr(
    not(feature = "cluster"),
    doc = "",
    doc = "[`Builder::cluster`]: super::Builder",
    doc = "[`Notifier::cluster`]: super::Notifier"
)]
pub mod cluster {}

#[doc = include_str!("quorum.md")]
pub mod quorum {}

#[doc = include_str!("sentinel.md")]
#[cfg_attr(
    feature = "sentinel",
    doc = "",
    doc = "[`SentinelConnection`]: super::SentinelConnection",
    doc = "[`Notifier::sentinel`]: super::Notifier::sentinel"
)]
#[cfg_attr(
    not(feature = "sentinel"),
    doc = "",
    doc = "[`SentinelConnection`]: sentinel",
    doc = "[`Notifier::sentinel`]: super::Notifier"
)]
pub mod sentinel {}

#[doc = include_str!("metrics.md")]
#[cfg_attr(
    feature = "metrics",
    doc = "",
    doc = "[`describe_metrics`]: super::describe_metrics",
    doc = "[`Builder::name_label`]: super::Builder::name_label"
)]
#[cfg_attr(
    not(feature = "metrics"),
    doc = "",
    doc = "[`describe_metrics`]: metrics",
    doc = "[`Builder::name_label`]: super::Builder"
)]
pub mod metrics {}

#[doc = include_str!("inspection.md")]
pub mod inspection {}

#[doc = include_str!("errors.md")]
pub mod errors {}

#[doc = include_str!("guarantees.md")]
pub mod guarantees {}

#[doc = include_str!("protocol.md")]
pub mod protocol {}

#[doc = include_str!("command_line.md")]
pub mod command_line {}
