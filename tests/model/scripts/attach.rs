//! `lua/attach.lua`: a detached hold (a lease) taken over by a new id, every lock key at
//! once or none.

use super::shared::pttl_at_least;
use super::Reply;
use crate::bugs::Bug;
use crate::store::{Id, Key, Member, Store, Text};

/// How the old id holds a lock key: its character in ARGV[4].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// `w`: the writer's string.
    Writer,
    /// `r`: a member of the readers' set.
    Reader,
    /// `p`: a permit whose deadline is after the server's clock.
    Permit,
}

impl Mode {
    /// The character.
    pub fn letter(self) -> char {
        match self {
            Mode::Writer => 'w',
            Mode::Reader => 'r',
            Mode::Permit => 'p',
        }
    }
}

/// One lock key of the hold: lock `lock` (0 or 1, [`Key::on`]) held in `mode`.
pub type Part = (usize, Mode);

/// Whether `old` holds lock 0's key in `mode`, as attach.lua's `holds` checks it (a key
/// missing or of another type does not).
pub fn holds(s: &Store, old: Id, mode: Mode) -> bool {
    match mode {
        Mode::Writer => s.get_is(Key::Lock, &Text::Id(old)),
        Mode::Reader => s.sismember(Key::Lock, old) == Ok(true),
        Mode::Permit => {
            matches!(s.zscore(Key::Lock, Member::Id(old)), Ok(Some(d)) if d > s.now_ms())
        }
    }
}

/// attach.lua with KEYS the lock keys of `parts` (then their holders keys), ARGV `old`,
/// `new`, `ttl` and the parts' modes. `Reply::Int(1)` moved, `Reply::NotHeld(i)` not.
pub fn attach(s: &mut Store, old: Id, new: Id, ttl: i64, parts: &[Part]) -> Reply {
    for (i, &(l, mode)) in parts.iter().enumerate() {
        if !s.on_lock(l, |s| holds(s, old, mode)) && !s.has(Bug::AttachUnchecked) {
            return Reply::NotHeld(i + 1);
        }
    }
    let now = s.now_ms();
    for &(l, mode) in parts {
        s.on_lock(l, |s| {
            match mode {
                Mode::Writer => s.set(Key::Lock, Text::Id(new), Some(ttl)),
                Mode::Reader => {
                    if !s.has(Bug::AttachKeepsOldId) {
                        let _ = s.srem(Key::Lock, old);
                    }
                    let _ = s.sadd(Key::Lock, new);
                    pttl_at_least(s, Key::Lock, ttl, None);
                }
                Mode::Permit => {
                    if !s.has(Bug::AttachKeepsOldId) {
                        let _ = s.zrem(Key::Lock, Member::Id(old));
                    }
                    let _ = s.zadd(Key::Lock, now + ttl, Member::Id(new));
                    pttl_at_least(s, Key::Lock, ttl, None);
                }
            }
            if !s.has(Bug::AttachKeepsOldDescription) {
                let _ = s.hdel(Key::Holders, old);
            }
        });
    }
    Reply::Int(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000_000_000_000;

    /// Lock 0 written by 1 (PX 3000), lock 1 read by 1 and 2; both described.
    fn held() -> Store {
        let mut s = Store::at(NOW);
        s.set(Key::Lock, Text::Id(1), Some(3000));
        let _ = s.sadd(Key::Lock1, 1);
        let _ = s.sadd(Key::Lock1, 2);
        s.pexpire(Key::Lock1, 3000);
        for k in [Key::Holders, Key::Holders1] {
            let _ = s.hset(k, 1, NOW);
            s.pexpire(k, 3000);
        }
        let _ = s.hset(Key::Holders1, 2, NOW);
        s
    }

    const SET: [Part; 2] = [(0, Mode::Writer), (1, Mode::Reader)];

    #[test]
    fn the_modes_are_the_scripts_characters() {
        let modes: String = [Mode::Writer, Mode::Reader, Mode::Permit]
            .map(Mode::letter)
            .iter()
            .collect();
        assert_eq!(modes, "wrp");
    }

    #[test]
    fn a_hold_moves_to_the_new_id_with_the_new_ttl() {
        let mut s = held();
        assert_eq!(attach(&mut s, 1, 5, 6000, &SET), Reply::Int(1));
        assert!(s.get_is(Key::Lock, &Text::Id(5)));
        assert_eq!(s.pttl(Key::Lock), 6000);
        assert_eq!(s.sismember(Key::Lock1, 1), Ok(false));
        assert_eq!(s.sismember(Key::Lock1, 5), Ok(true));
        assert_eq!(s.sismember(Key::Lock1, 2), Ok(true));
        assert_eq!(s.pttl(Key::Lock1), 6000);
        // The old id's descriptions go; another reader's stays.
        assert!(!s.exists(Key::Holders));
        assert_eq!(s.hdel(Key::Holders1, 2), Ok(true));
        // Attached once: the old id holds nothing now.
        assert_eq!(attach(&mut s, 1, 6, 6000, &SET), Reply::NotHeld(1));
    }

    #[test]
    fn a_key_not_held_refuses_the_whole_hold() {
        let mut s = held();
        let before = s.clone();
        let wrong = [(0, Mode::Writer), (1, Mode::Writer)];
        assert_eq!(attach(&mut s, 1, 5, 6000, &wrong), Reply::NotHeld(2));
        assert_eq!(attach(&mut s, 3, 5, 6000, &SET), Reply::NotHeld(1));
        assert_eq!(s, before);
    }

    #[test]
    fn a_permit_past_its_deadline_is_not_held() {
        let mut s = Store::at(NOW);
        let _ = s.zadd(Key::Lock, NOW + 1000, Member::Id(1));
        let _ = s.zadd(Key::Lock, NOW + 3000, Member::Id(2));
        s.pexpire(Key::Lock, 3000);
        s.advance(1000);
        let permit = [(0, Mode::Permit)];
        assert_eq!(attach(&mut s, 1, 5, 2000, &permit), Reply::NotHeld(1));
        assert_eq!(attach(&mut s, 2, 5, 4000, &permit), Reply::Int(1));
        assert_eq!(s.zscore(Key::Lock, Member::Id(5)), Ok(Some(NOW + 5000)));
        assert_eq!(s.zscore(Key::Lock, Member::Id(2)), Ok(None));
        assert_eq!(s.pttl(Key::Lock), 4000);
    }

    #[test]
    fn the_seeded_bugs_revive_or_keep_a_hold() {
        let mut s = held();
        s.bug = Some(Bug::AttachUnchecked);
        assert_eq!(attach(&mut s, 3, 5, 6000, &SET), Reply::Int(1));
        let mut s = held();
        s.bug = Some(Bug::AttachKeepsOldId);
        assert_eq!(attach(&mut s, 1, 5, 6000, &SET), Reply::Int(1));
        assert_eq!(s.sismember(Key::Lock1, 1), Ok(true));
        let mut s = held();
        s.bug = Some(Bug::AttachKeepsOldDescription);
        assert_eq!(attach(&mut s, 1, 5, 6000, &SET), Reply::Int(1));
        assert!(s.holders(Key::Holders).contains_key(&1));
    }
}
