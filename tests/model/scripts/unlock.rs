//! `lua/unlock.lua`: release one holder; optionally its intent and its place in the fair
//! queue; publish when the lock may now be taken.

use super::Reply;
use crate::bugs::Bug;
use crate::store::{Id, Key, Member, Store, Text};

/// What the id is: ARGV[3].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// "w": a writer's id.
    Writer,
    /// "r": a reader's id.
    Reader,
    /// "p": a permit's id.
    Permit,
    /// "u": an upgradable reader's id, removed as a reader's; KEYS[3] is then the
    /// upgrader key (the crate passes KEYS[2], the intent, with it: [`Extra::Intent`]),
    /// deleted when it holds the id.
    Upgradable,
}

impl Kind {
    /// ARGV[3], and the queue member's prefix.
    pub fn letter(self) -> u8 {
        match self {
            Kind::Writer => b'w',
            Kind::Reader => b'r',
            Kind::Permit => b'p',
            Kind::Upgradable => b'u',
        }
    }
}

/// Which optional keys the call passes: KEYS[2] (the intent), and KEYS[3], KEYS[4]
/// (the fair queue; the intent is passed with them). [`Kind::Upgradable`] passes
/// KEYS[3], the upgrader key, with [`Extra::Intent`] (and never the queue).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Extra {
    /// KEYS[1] only (a holder's release).
    None,
    /// KEYS[2] too: a waiting writer that gives up after setting its intent.
    Intent,
    /// KEYS[2..4]: a fair waiter that gives up.
    Queue,
}

/// unlock.lua, with the holders key (ARGV[5] "1") when `described`: the id's
/// description goes, held or not. Publishing always succeeds here (a number of
/// receivers).
pub fn unlock_described(s: &mut Store, id: Id, kind: Kind, extra: Extra, described: bool) -> Reply {
    if described && !s.has(Bug::UnlockKeepsDescription) {
        let _ = s.hdel(Key::Holders, id);
    }
    let me = Text::Id(id);
    let mut released = 0;
    let mut freed = false;
    match kind {
        Kind::Writer => {
            if s.get_is(Key::Lock, &me)
                || (s.has(Bug::UnlockIgnoresId) && s.type_of(Key::Lock) == "string")
            {
                s.del(Key::Lock);
                released = 1;
                freed = true;
            }
        }
        Kind::Permit => {
            if let Ok(Some(deadline)) = s.zscore(Key::Lock, Member::Id(id)) {
                let _ = s.zrem(Key::Lock, Member::Id(id));
                if deadline > s.now_ms() {
                    released = 1;
                }
                freed = true;
            }
        }
        Kind::Reader | Kind::Upgradable => {
            // One reader left may be an upgradable reader waiting for the others.
            if s.srem(Key::Lock, id) == Ok(1) {
                released = 1;
                freed = s.scard(Key::Lock).is_ok_and(|n| n <= 1);
            }
            if kind == Kind::Upgradable && s.get_is(Key::Upgrader, &me) {
                s.del(Key::Upgrader);
                freed = true;
            }
        }
    }
    if extra != Extra::None && s.get_is(Key::Intent, &me) {
        s.del(Key::Intent);
        freed = true;
    }
    if extra == Extra::Queue {
        let member = Member::Queued(kind.letter(), id);
        if s.zrem(Key::Queue, member) == Ok(1) {
            freed = true;
        }
        let _ = s.zrem(Key::QueueDeadline, member);
    }
    Reply::Int(if freed { released + 2 } else { released })
}
