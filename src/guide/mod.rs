//! The user guides, one per topic a user comes with. Each opens with when to use what it
//! describes; the API reference is on the items themselves.
//!
//! | guide | read it when you want to know |
//! | --- | --- |
//! | [`waiting`] | how a request waits and is handed the lock: notifications, polling, lock intent |
//! | [`refresh`] | how a held lock is kept, when its token fires, and how it is released |
//! | [`fencing`] | how to make the protected resource refuse a stale holder |
//! | [`semaphore`] | how to let N holders in at once, and how to serve waiters in arrival order |
//! | [`reentrancy`] | how a task takes a lock it already holds, and how a writer becomes a reader |
//! | [`cluster`] | how to run on a Redis Cluster |
//! | [`quorum`] | how to hold a lock on a majority of independent masters (Redlock) |
//! | [`sentinel`] | how to follow a Sentinel failover, and how replica acknowledgement narrows its window |
//! | [`metrics`] | what is recorded for dashboards and traces |
//! | [`errors`] | what each error means and what to do about it |
//! | [`guarantees`] | what the lock guarantees, under which assumptions, and where it stops |
//! | [`protocol`] | the keys, values and scripts, and sharing locks with Go services |
//! | [`command_line`] | the `redismutex` command for shell scripts and cron jobs |

#[doc = include_str!("waiting.md")]
pub mod waiting {}

#[doc = include_str!("refresh.md")]
pub mod refresh {}

#[doc = include_str!("fencing.md")]
pub mod fencing {}

#[doc = include_str!("semaphore.md")]
pub mod semaphore {}

#[doc = include_str!("reentrancy.md")]
pub mod reentrancy {}

#[doc = include_str!("cluster.md")]
pub mod cluster {}

#[doc = include_str!("quorum.md")]
pub mod quorum {}

#[doc = include_str!("sentinel.md")]
pub mod sentinel {}

#[doc = include_str!("metrics.md")]
pub mod metrics {}

#[doc = include_str!("errors.md")]
pub mod errors {}

#[doc = include_str!("guarantees.md")]
pub mod guarantees {}

#[doc = include_str!("protocol.md")]
pub mod protocol {}

#[doc = include_str!("command_line.md")]
pub mod command_line {}
