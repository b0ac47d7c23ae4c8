//! Leases: a detached hold taken over by another client (attach.lua), or released by
//! the holder of its text (unlock.lua with the lease's id); and what each must keep,
//! checked against the keys before and after the step, not against the scripts' model.

use std::collections::BTreeSet;

use super::client::{Mode, Phase};
use super::properties::Seen;
use super::step::{kind, set_keys};
use super::{fresh_id, Config, State};
use crate::scripts::attach::{self, Part};
use crate::scripts::unlock::{self, Extra};
use crate::scripts::{self, Reply};
use crate::store::{Id, Key, Member, Store, Text};

/// The lock keys of a lease of `mode` taken on lock `lock` (a set's: both), each with
/// its mode in attach.lua.
pub fn parts(mode: Mode, lock: usize) -> Vec<Part> {
    match mode {
        Mode::Set { .. } => set_keys(mode)
            .into_iter()
            .map(|k| {
                let m = if k.write {
                    attach::Mode::Writer
                } else {
                    attach::Mode::Reader
                };
                (k.lock, m)
            })
            .collect(),
        Mode::Write => vec![(lock, attach::Mode::Writer)],
        Mode::Permit => vec![(lock, attach::Mode::Permit)],
        _ => vec![(lock, attach::Mode::Reader)],
    }
}

/// What `id` holds, as (lock, form): `'w'` the writer's string, `'r'` a member of the
/// readers' set, `'p'` a permit whose deadline is after the server's clock.
fn holdings(st: &Store, id: Id) -> BTreeSet<(usize, char)> {
    entries(st)
        .into_iter()
        .filter(|&(_, _, holder)| holder == id)
        .map(|(l, form, _)| (l, form))
        .collect()
}

/// Every hold on either lock key: (lock, form as [`holdings`] says, id).
fn entries(st: &Store) -> BTreeSet<(usize, char, Id)> {
    let mut all = BTreeSet::new();
    for l in 0..2 {
        let key = Key::Lock.on(l);
        if let Ok(Some(Text::Id(id))) = st.get(key) {
            all.insert((l, 'w', *id));
        }
        if let Some(crate::store::Entry {
            val: crate::store::Val::Set(ids),
            ..
        }) = st.keys.get(&key)
        {
            all.extend(ids.iter().map(|&id| (l, 'r', id)));
        }
        if let Ok(z) = st.zset(key) {
            for (m, deadline) in z {
                if let Member::Id(id) = m {
                    if deadline > st.now_ms() {
                        all.insert((l, 'p', id));
                    }
                }
            }
        }
    }
    all
}

/// The form of `part` in [`holdings`].
fn form((l, mode): Part) -> (usize, char) {
    (l, mode.letter())
}

/// Client `j` attaches the lease whose text client `i` holds, under a fresh id. An
/// attach never revives a lost hold: granted only when the lease's id held every key
/// in its mode, after which that id holds nothing and the new id exactly what it held
/// (the guard takes the lease's token); refused, nothing changed. A lease attaches at
/// most once.
pub fn attach(c: &Config, s: &mut State, j: usize, i: usize) {
    let Phase::Leased {
        mode,
        id: old,
        token,
        attached,
    } = s.clients[i]
    else {
        return;
    };
    let new = fresh_id(s);
    let parts = parts(mode, c.clients[i].lock);
    let before = s.store.clone();
    let reply = attach::attach(&mut s.store, old, new, c.ttl, &parts);
    let held: BTreeSet<(usize, char)> = holdings(&before, old);
    if reply != Reply::Int(1) {
        if s.store != before {
            s.seen.violated |= Seen::ATTACH_REVIVED;
        }
        if attached {
            s.seen.reached |= Seen::SECOND_ATTACH_REFUSED;
        }
        describe(c, s, new, &parts);
        return;
    }
    let every_key = parts.iter().all(|&p| held.contains(&form(p)));
    if !every_key || !holdings(&s.store, old).is_empty() || holdings(&s.store, new) != held {
        s.seen.violated |= Seen::ATTACH_REVIVED;
    }
    describe(c, s, new, &parts);
    if attached {
        s.seen.violated |= Seen::ATTACHED_TWICE;
    }
    s.seen.reached |= Seen::ATTACHED;
    if let Phase::Leased { attached, .. } = &mut s.clients[i] {
        *attached = true;
    }
    s.clients[j] = Phase::Holding {
        mode,
        id: new,
        token,
        deadline: s.client_now() + c.ttl - c.margin,
        fired: false,
    };
}

/// A describing handle's describe.lua after its attach.lua, in the same request (so in
/// the same step), whatever the attach replied: the new id's description on each key it
/// now holds (none when refused), and a semaphore's run-out permits' descriptions go.
fn describe(c: &Config, s: &mut State, new: Id, parts: &[Part]) {
    if c.describe {
        let locks: Vec<usize> = parts.iter().map(|&(l, _)| l).collect();
        scripts::describe::describe(&mut s.store, &locks, new, c.ttl);
    }
}

/// Client `i` releases the hold by the lease whose text it holds (unlock.lua with the
/// lease's id for each key, as its mode says, and the holders key: the crate deletes
/// the id's description whoever wrote it), and drops the text. Only the lease's own
/// id leaves: every other holder holds as before.
pub fn release(c: &Config, s: &mut State, i: usize) {
    let Phase::Leased { mode, id, .. } = s.clients[i] else {
        return;
    };
    let before = entries(&s.store);
    let mut released = false;
    for (l, part) in parts(mode, c.clients[i].lock) {
        let kind = match part {
            attach::Mode::Writer => kind(Mode::Write),
            attach::Mode::Reader => kind(Mode::Read),
            attach::Mode::Permit => kind(Mode::Permit),
        };
        let reply = s.store.on_lock(l, |st| {
            unlock::unlock_described(st, id, kind, Extra::None, true)
        });
        released |= matches!(reply, Reply::Int(n) if n & 1 == 1);
    }
    let after = entries(&s.store);
    if before.iter().any(|e| e.2 != id && !after.contains(e)) {
        s.seen.violated |= Seen::LEASE_FREED_OTHER;
    }
    if released {
        s.seen.reached |= Seen::RELEASED_BY_LEASE;
    }
    s.clients[i] = Phase::Idle;
}
