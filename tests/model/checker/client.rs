//! What a client is doing, and what it may do next: the crate's client logic (and the Go
//! package's) around the scripts, reduced to its decisions.

use crate::store::Id;

/// What a client asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// The write lock (lock.lua; Go's write).
    Write,
    /// A read lock (rlock.lua; Go's read).
    Read,
    /// A semaphore permit (semaphore.lua).
    Permit,
    /// An upgradable read lock (upgradable.lua): a reader, and the one reader of the key
    /// that may upgrade (upgrade.lua) to the write lock.
    Upgradable,
    /// Held only: an upgradable reader whose `upgrade()` waits for the other readers to
    /// leave (its "wait" attempt was blocked, and set the intent if none was set).
    Upgrading,
    /// A set (`lock_all.lua`, Rust only): both locks, lock 0's keys first, each written
    /// when its bit of `writes` is set (bit `l` for lock `l`), else read.
    Set { writes: u8 },
}

impl Mode {
    /// A reader of the lock key's set: plain, upgradable or upgrading.
    pub fn reads(self) -> bool {
        matches!(self, Mode::Read | Mode::Upgradable | Mode::Upgrading)
    }

    /// An upgradable reader (waiting to upgrade or not).
    pub fn upgradable(self) -> bool {
        matches!(self, Mode::Upgradable | Mode::Upgrading)
    }

    /// What a client of lock `lock` (`ClientSpec::lock`; a set has both) taking this
    /// mode is to lock `l`: `Some(true)` its writer, `Some(false)` one of its readers,
    /// `None` neither (another lock, or a permit).
    pub fn on(self, lock: usize, l: usize) -> Option<bool> {
        match self {
            Mode::Set { writes } => Some(writes & (1 << l) != 0),
            _ if lock != l => None,
            Mode::Write => Some(true),
            Mode::Permit => None,
            _ => Some(false),
        }
    }
}

/// Which package the client runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Package {
    /// This crate: lock intent per the configuration, fencing tokens, a cancellation token
    /// that fires at the validity deadline unless a renewal moved it.
    Rust,
    /// The Go package's four scripts (`tests/common/go_peer.rs`): intent "1" on a blocked
    /// write, no tokens; it holds until its deadline as a Rust guard does.
    Go,
}

/// A fair waiter's place, as the checker keeps it (not as the server does): the order
/// in which the waiters first asked, and when the place lapses unless the client
/// attempts again (the server's clock, ms: its last attempt + the TTL).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Place {
    /// Its rank among the places held (0 first), renumbered after every step.
    pub arrival: u8,
    /// The server's time (ms) at which it lapses.
    pub until: i64,
}

/// A client's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Holds nothing and waits for nothing.
    Idle,
    /// Blocked; will attempt again under the same id (its intent and queue place are
    /// under that id) or give up. `late`: an attempt was granted but its reply came too
    /// late to be used, so the server holds the lock under this id (the next attempt
    /// takes it as a resent request, giving up releases it). `place`: in fair mode, its
    /// place in the queue.
    Waiting {
        mode: Mode,
        id: Id,
        late: bool,
        place: Option<Place>,
    },
    /// The write fast path between its `SET NX` (done; the lock key holds the id since
    /// `sent`, the client's time) and its `INCR` of the fence.
    Minting { id: Id, sent: i64 },
    /// Holds a guard: its fencing token (0 for Go), its validity deadline on its own
    /// clock (ms), and whether its token fired (lost, or the deadline passed).
    Holding {
        mode: Mode,
        id: Id,
        token: u64,
        deadline: i64,
        fired: bool,
    },
    /// Holds the text of a lease (`detach`): the hold of `id` in `mode` (on the client's
    /// lock, or both for a set) with its fencing token, which nobody renews. Any client
    /// may attach a copy of the text, or this one release the hold by it; `attached`:
    /// an attach of it has succeeded (a second must not).
    Leased {
        mode: Mode,
        id: Id,
        token: u64,
        attached: bool,
    },
}

impl Phase {
    /// A waiting client with nothing left on the server and no place.
    pub fn waiting(mode: Mode, id: Id) -> Phase {
        Phase::Waiting {
            mode,
            id,
            late: false,
            place: None,
        }
    }

    /// The id the client is using, if any.
    pub fn id(&self) -> Option<Id> {
        match self {
            Phase::Idle => None,
            Phase::Waiting { id, .. }
            | Phase::Minting { id, .. }
            | Phase::Holding { id, .. }
            | Phase::Leased { id, .. } => Some(*id),
        }
    }

    /// Renames the client's id.
    pub fn rename(&mut self, to: impl Fn(Id) -> Id) {
        match self {
            Phase::Idle => {}
            Phase::Waiting { id, .. }
            | Phase::Minting { id, .. }
            | Phase::Holding { id, .. }
            | Phase::Leased { id, .. } => *id = to(*id),
        }
    }

    /// A guard that has not fired: the mode and id.
    pub fn live(&self) -> Option<(Mode, Id)> {
        match *self {
            Phase::Holding {
                mode,
                id,
                fired: false,
                ..
            } => Some((mode, id)),
            _ => None,
        }
    }

    /// The fair place of a waiting client that has one.
    pub fn place(&self) -> Option<Place> {
        match *self {
            Phase::Waiting { place, .. } => place,
            _ => None,
        }
    }
}
