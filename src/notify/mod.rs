//! Release notifications: the public [`Notifier`], the hub that queues this process's
//! waiters per release channel, and the connection task that keeps one subscriber
//! connection subscribed to the channels that have waiters (behind the
//! [`Listener`](subscriber::Listener) trait, so it knows no hub).

pub(crate) mod hub;
mod link;
mod notifier;
#[cfg(feature = "cluster")]
mod sharded;
pub(crate) mod silence;
mod subscriber;
pub(crate) mod waiter;
pub(crate) mod watch;

pub use notifier::Notifier;
