//! Read or write, and what a request asks for.

/// How a lock is held, as [`LockState::mode`](crate::LockState::mode) reports it: shared
/// (read, as a [`ReadGuard`](crate::ReadGuard) holds it) or exclusive (write, as a
/// [`WriteGuard`](crate::WriteGuard) holds it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Shared: any number of readers together, no writer. The reader's id is a member of
    /// the Redis set at the lock key.
    Read,
    /// Exclusive: one writer, no readers. The lock key is a Redis string holding the
    /// writer's id.
    Write,
}

/// What one request takes: a write lock, a read lock, or one of a semaphore's permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The exclusive lock (`lua/lock.lua`).
    Write,
    /// A shared lock (`lua/rlock.lua`).
    Read,
    /// One permit of a semaphore that admits this many holders (`lua/semaphore.lua`).
    Permit(u32),
    /// A shared lock that at most one reader holds at a time and that can become the
    /// write lock (`lua/upgradable.lua`, `lua/upgrade.lua`).
    Upgradable,
}

impl Kind {
    /// The name of the kind in the metrics' `kind` label and the request's span.
    pub(crate) const fn label(self) -> &'static str {
        match self {
            Kind::Write => "write",
            Kind::Read => "read",
            Kind::Permit(_) => "permit",
            Kind::Upgradable => "upgradable",
        }
    }

    /// The mode a guard of this kind reports, and in which this process's queue of
    /// waiters wakes it: a permit is woken as a writer is, one per release.
    pub(crate) fn mode(self) -> Mode {
        match self {
            Kind::Read | Kind::Upgradable => Mode::Read,
            Kind::Write | Kind::Permit(_) => Mode::Write,
        }
    }
}
