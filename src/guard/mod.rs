//! The guards: a held exclusive lock ([`WriteGuard`]), a held shared lock
//! ([`ReadGuard`]), one that can become exclusive ([`UpgradableReadGuard`]), a
//! semaphore's [`Permit`], and the [`Guard`] trait they share. Each
//! wraps one [`AnyGuard`]: an acquisition the engine returned (or, for a nested guard of a
//! reentrant mutex, another guard's), which the lease layer keeps alive.

mod any;
mod common;
mod detach;
mod downgrade;
mod exec;
mod multi;
mod nested;
mod permit;
mod proclaim;
mod read;
mod release;
#[cfg(test)]
mod sizes;
mod upgradable;
mod upgrade;
mod write;

pub(crate) use any::AnyGuard;
pub(crate) use common::guard_methods;
pub use common::Guard;
pub use multi::MultiGuard;
pub use permit::Permit;
pub(crate) use proclaim::Proclaimer;
pub use read::ReadGuard;
pub use upgradable::UpgradableReadGuard;
pub use write::WriteGuard;
