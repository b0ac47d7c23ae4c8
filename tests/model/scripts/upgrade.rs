//! `lua/upgrade.lua`: turn the upgradable read lock an id holds into the write lock held
//! by the same id once it is the only reader ("wait", "try"), or give up the right to
//! upgrade and stay a reader ("plain").

use super::lock::Take;
use super::shared::{at_least_the_clock, fence_last, lock_intent};
use super::{blocked, Refusal, Reply};
use crate::bugs::Bug;
use crate::store::{Key, Store, Text};

/// ARGV[4].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// "wait": upgrade, and while other readers remain set the lock intent.
    Wait,
    /// "try": upgrade only if no other reader remains, setting nothing.
    Try,
    /// "plain": stay a plain reader; the upgrader key is deleted.
    Plain,
}

impl Op {
    /// ARGV[4]'s text.
    pub fn arg(self) -> &'static str {
        match self {
            Op::Wait => "wait",
            Op::Try => "try",
            Op::Plain => "plain",
        }
    }
}

/// upgrade.lua with `t.id`, `t.ttl`, `t.retention`, `t.floor` (`t.fair` is not read).
/// Publishing always succeeds here.
pub fn upgrade(s: &mut Store, t: Take, op: Op) -> Reply {
    run(s, t, op).unwrap_or_else(Reply::from)
}

fn run(s: &mut Store, t: Take, op: Op) -> Result<Reply, Refusal> {
    let me = Text::Id(t.id);
    // The lock: a string (GET answers), or a set or a foreign type (GET fails).
    let holder = s.get(Key::Lock).map(|h| h.cloned());
    let mut resent = holder == Ok(Some(me.clone()));
    if s.has(Bug::UpgradeTakesAFreeLock) && holder == Ok(None) {
        resent = true;
    }
    match holder {
        Err(_) => {
            let found = s.type_of(Key::Lock);
            if found != "set" {
                return Err(Refusal::wrongtype(Key::Lock, found));
            }
            if s.sismember(Key::Lock, t.id) != Ok(true) {
                return Ok(Reply::Int(0));
            }
        }
        Ok(_) if !resent || op == Op::Plain => return Ok(Reply::Int(0)),
        Ok(_) => {}
    }
    let pttl = s.pttl(Key::Lock);
    if pttl == -1 {
        return Err(Refusal::NoExpiry { key: Key::Lock });
    }
    let (upgrader, _) = lock_intent(s, Key::Upgrader)?;
    let ours = upgrader.as_ref() == Some(&me);
    if op == Op::Plain {
        if ours {
            s.del(Key::Upgrader);
        }
        return Ok(Reply::Int(1));
    }
    if !resent && !ours {
        // A reader, no longer the upgradable one: `{"reader"}`.
        return Err(Refusal::Reader);
    }
    let (intent, _) = lock_intent(s, Key::Intent)?;
    let last = fence_last(s, Key::Fence)?;
    if resent || s.scard(Key::Lock) == Ok(1) {
        let (token, clock) = at_least_the_clock(s, last + 1, t.floor);
        s.del(Key::Lock);
        s.set(Key::Lock, me.clone(), Some(t.ttl));
        if ours {
            s.del(Key::Upgrader);
        }
        if intent.as_ref() == Some(&me) {
            s.del(Key::Intent);
        }
        s.set(Key::Fence, Text::Int(token), Some(t.retention));
        return Ok(Reply::Token { token, clock });
    }
    if op == Op::Wait {
        match intent {
            None => s.set(Key::Intent, me, Some(t.ttl)),
            Some(i) if i == me => {
                s.pexpire(Key::Intent, t.ttl);
            }
            Some(_) => {}
        }
    }
    Ok(blocked(pttl))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripts::refresh::{renew, Hint};
    use crate::scripts::{rlock, upgradable};

    fn take(id: u8) -> Take {
        Take {
            id,
            ttl: 3000,
            retention: 10_000,
            floor: false,
            fair: None,
        }
    }

    /// A known limit of the protocol, not a property: a reader that leaves without
    /// releasing (a crash, a partition) stays a member of the readers' set until the
    /// set expires, and the upgradable reader's own renewals keep the set alive, so a
    /// waiting upgrade never finishes while it renews (a waiting writer is not held up
    /// so: nobody renews the set once the live readers have left). Its `upgrade()`
    /// waits until it gives up; releasing the upgradable read frees the key.
    #[test]
    fn a_departed_readers_id_keeps_an_upgrade_waiting_while_the_upgrader_renews() {
        let mut s = Store::at(1_000_000_000_000);
        assert!(matches!(
            rlock::rlock(&mut s, take(1), false),
            Reply::Token { .. }
        ));
        assert!(matches!(
            upgradable::upgradable(&mut s, take(2)),
            Reply::Token { .. }
        ));
        // Reader 1 is gone; the upgradable reader renews every TTL/3 for ten TTLs.
        for _ in 0..30 {
            s.advance(1000);
            assert_eq!(
                renew(&mut s, &[(2, Hint::Upgradable)], 3000),
                Reply::Renewed(vec![1])
            );
            assert!(matches!(
                upgrade(&mut s, take(2), Op::Wait),
                Reply::Blocked { .. }
            ));
        }
        assert_eq!(s.scard(Key::Lock), Ok(2));
        // Without its renewals the set (and the departed id) goes within a TTL; the
        // upgradable read goes with it.
        s.advance(3000);
        assert_eq!(upgrade(&mut s, take(2), Op::Wait), Reply::Int(0));
    }
}
