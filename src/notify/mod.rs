//! Release notifications: the public [`Notifier`], the hub that keeps this process's
//! waiters per release channel (each channel's [`Queue`](queue::Queue), a pure core that
//! decides whom a release wakes), and the connection task that keeps one subscriber
//! connection subscribed to the channels that have waiters (behind the
//! [`Listener`](subscriber::Listener) trait, so it knows no hub).

mod bounded;
mod heard;
pub(crate) mod hub;
mod keyspace;
mod link;
mod notifier;
mod queue;
#[cfg(feature = "cluster")]
mod sharded;
pub(crate) mod silence;
mod subscriber;
pub(crate) mod waiter;
pub(crate) mod watch;

pub use notifier::Notifier;
