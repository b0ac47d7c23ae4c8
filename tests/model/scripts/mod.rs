//! Each script of `lua/` as one atomic step on a [`Store`], taking exactly the script's
//! decisions, in the script's order: what it checks, what it writes, what it replies.
//! One file per script (or per pair that share a job); `shared.rs` holds the functions
//! of `lua/shared.lua` and `lua/base.lua`. The Go package's four scripts, as
//! `tests/common/go_peer.rs` runs them, are in `go.rs`.
//!
//! A script that changes under `lua/` changes here in the same commit (`docs/model.md`):
//! the differential test (`differential/`) fails until the two agree again.

pub mod attach;
pub mod describe;
pub mod downgrade;
pub mod election;
pub mod exec;
pub mod force;
pub mod go;
pub mod inspect;
pub mod lock;
pub mod lock_all;
pub mod quorum;
pub mod refresh;
pub mod rlock;
pub mod semaphore;
pub mod shared;
pub mod unlock;
pub mod upgradable;
pub mod upgrade;

use crate::store::Key;

/// A script's error reply (a table the crate turns into a typed error).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// `{"wrongtype", key, type}`: `found` is the key's TYPE, "non-integer string" or
    /// "exhausted counter".
    WrongType { key: Key, found: String },
    /// `{"noexpiry", key}`.
    NoExpiry { key: Key },
    /// `{"unchecked"}` (rlock.lua's counting path).
    Unchecked,
    /// `{"reader"}` (upgrade.lua): a reader, but not the upgradable one.
    Reader,
}

impl Refusal {
    pub fn wrongtype(key: Key, found: &str) -> Refusal {
        Refusal::WrongType {
            key,
            found: found.to_owned(),
        }
    }
}

/// What a script replies.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reply {
    /// A fencing token: the lock or permit was granted. `clock`: the script read the
    /// clock (TIME) to floor it, so a real server's token may be larger, by at most the
    /// time its call took.
    Token { token: u64, clock: bool },
    /// `-1 - wait`: blocked, with `wait` ms (a PTTL, or a time until a deadline).
    Blocked { wait: i64 },
    /// lock_all.lua: `{t1, ..., tn}`, each token and whether the script read the clock
    /// to floor it (as [`Reply::Token`]'s `clock`).
    Tokens(Vec<(u64, bool)>),
    /// lock_all.lua: `{"blocked", i, pttl}`: key `index` (1-based) is the first that
    /// blocks, for `wait` ms.
    BlockedAt { index: usize, wait: i64 },
    /// Any other integer reply, exact.
    Int(i64),
    /// renew.lua: one integer per key (the server clock after them is not compared).
    Renewed(Vec<i64>),
    /// An error reply.
    Refused(Refusal),
    /// exec.lua: `{1, r1, ..., rn}` (every command ran; each reply an integer here).
    Ran(Vec<i64>),
    /// exec.lua: `{0, i}`: the i-th lock key (1-based) is not held, nothing ran.
    NotHeld(usize),
    /// exec.lua: `{2, i, err}`: the i-th command failed (1-based).
    Failed { command: usize },
    /// leader.lua: `{holder, pttl, record}` (`None` for "").
    Leader {
        holder: Option<crate::store::Text>,
        pttl: i64,
        record: Option<crate::store::Text>,
    },
    /// inspect.lua's reply.
    Inspected(Box<inspect::Inspection>),
    /// A Go script's nil reply (acquired).
    Nil,
    /// The script raised an error (a command failed with `redis.call`).
    ScriptError,
}

impl From<Refusal> for Reply {
    fn from(r: Refusal) -> Reply {
        Reply::Refused(r)
    }
}

/// `-1 - pttl` replies: blocked for `wait` ms.
pub fn blocked(wait: i64) -> Reply {
    Reply::Blocked { wait }
}
