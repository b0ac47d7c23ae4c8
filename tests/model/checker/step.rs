//! What each action does: the script it runs (`crate::scripts`) and what the client
//! makes of the reply, as the crate (or the Go package) does; and what the run records
//! for the properties (`properties::Seen`).

use super::client::{Mode, Package, Phase, Place};
use super::leases;
use super::properties::{self, Seen};
use super::{fresh_id, Action, Config, State};
use crate::scripts::exec::Command;
use crate::scripts::lock::Take;
use crate::scripts::lock_all::{self, SetKey, TakeAll};
use crate::scripts::refresh::Hint;
use crate::scripts::shared::{CLOCK_TOKENS, MAX_TOKEN};
use crate::scripts::unlock::{Extra, Kind};
use crate::scripts::upgrade::Op;
use crate::scripts::{self, go, Reply};
use crate::store::{Id, Key, Member, Store, Text};

/// Applies `action` to `s`.
pub fn apply(c: &Config, s: &mut State, action: &Action) {
    match *action {
        Action::Take {
            client,
            mode,
            counting,
        } => take(c, s, client, mode, Attempt::wait(counting, false)),
        Action::Late {
            client,
            mode,
            counting,
        } => take(c, s, client, mode, Attempt::wait(counting, true)),
        Action::Try { client, mode } => take(c, s, client, mode, Attempt::Try),
        Action::Fast(i) => fast(c, s, i),
        Action::Mint(i) => mint(c, s, i),
        Action::Observe => observe(s),
        Action::GiveUp(i) => give_up(c, s, i),
        Action::Renew(i) => renew(c, s, i),
        Action::Release(i) => {
            if let Phase::Holding { mode, id, .. } = s.clients[i] {
                let l = c.clients[i].lock;
                match c.clients[i].package {
                    // A set's keys one by one (pipelined: no step comes between here).
                    Package::Rust if matches!(mode, Mode::Set { .. }) => {
                        for k in set_keys(mode) {
                            let kind = if k.write { Kind::Writer } else { Kind::Reader };
                            s.store.on_lock(k.lock, |st| {
                                scripts::unlock::unlock_described(
                                    st,
                                    id,
                                    kind,
                                    Extra::None,
                                    c.describe,
                                )
                            });
                        }
                    }
                    Package::Rust => {
                        s.store.on_lock(l, |st| {
                            let extra = released(mode);
                            scripts::unlock::unlock_described(st, id, kind(mode), extra, c.describe)
                        });
                    }
                    Package::Go => {
                        s.store.on_lock(l, |st| go::unlock(st, id));
                    }
                }
                s.clients[i] = Phase::Idle;
            }
        }
        Action::Exec(i) => exec(s, i),
        Action::Proclaim(i) => proclaim(c, s, i),
        Action::Downgrade(i) => downgrade(c, s, i),
        Action::Upgrade { client, wait } => upgrade(c, s, client, wait),
        Action::Plain(i) => plain(c, s, i),
        Action::Detach(i) => {
            if let Phase::Holding {
                mode, id, token, ..
            } = s.clients[i]
            {
                s.clients[i] = Phase::Leased {
                    mode,
                    id,
                    token,
                    attached: false,
                };
            }
        }
        Action::Attach { client, lease } => leases::attach(c, s, client, lease),
        Action::ReleaseLease(i) => leases::release(c, s, i),
        Action::Tick => {
            s.store.advance(1);
            s.time_left -= 1;
            fire_due(s);
        }
        Action::Drift => {
            s.store.advance(1);
            s.skew += 1;
            s.time_left -= 1;
        }
        // A restart takes a tick at least: the server is down meanwhile.
        Action::Restart => {
            s.store.keys.clear();
            s.store.advance(1);
            fire_due(s);
        }
        Action::ClockForward => {
            s.store.advance(c.ttl);
            s.skew += c.ttl;
        }
        Action::ClockBack => {
            let back = s.store.clock_us - c.ttl * 1000;
            s.store.set_clock_us(back);
            s.skew -= c.ttl;
        }
        Action::Force => {
            scripts::force::force_unlock(&mut s.store);
        }
    }
}

pub fn kind(mode: Mode) -> Kind {
    match mode {
        Mode::Write => Kind::Writer,
        Mode::Read => Kind::Reader,
        Mode::Permit => Kind::Permit,
        Mode::Upgradable | Mode::Upgrading => Kind::Upgradable,
        // A set releases each key as its mode says (`set_keys`).
        Mode::Set { .. } => Kind::Writer,
    }
}

/// The keys of a set ([`Mode::Set`]): lock 0, then lock 1, each as `writes` says. (Any
/// other mode: none.)
pub fn set_keys(mode: Mode) -> Vec<SetKey> {
    let Mode::Set { writes } = mode else {
        return Vec::new();
    };
    (0..2)
        .map(|lock| SetKey {
            lock,
            write: writes & (1 << lock) != 0,
        })
        .collect()
}

/// Whether `id` is at lock `k.lock`'s key as `k` says (the writer's string, or a member
/// of the readers' set); `either`: as either.
pub fn at_key(st: &Store, k: SetKey, id: Id, either: bool) -> bool {
    let lock = Key::Lock.on(k.lock);
    let writer = st.get_is(lock, &Text::Id(id));
    let reader = st.sismember(lock, id) == Ok(true);
    if either {
        writer || reader
    } else if k.write {
        writer
    } else {
        reader
    }
}

/// The optional keys a holder's release passes: an upgradable reader's "u" release
/// passes the intent (which its `upgrade()` may have set) and the upgrader key.
fn released(mode: Mode) -> Extra {
    if mode.upgradable() {
        Extra::Intent
    } else {
        Extra::None
    }
}

/// Tokens fire at their deadline on the clients' clock (the liveness timer).
fn fire_due(s: &mut State) {
    let now = s.client_now();
    for phase in &mut s.clients {
        if let Phase::Holding {
            deadline, fired, ..
        } = phase
        {
            if now >= *deadline {
                *fired = true;
            }
        }
    }
}

/// Client `i`'s TTL.
fn ttl_of(c: &Config, i: usize) -> i64 {
    match c.clients[i].package {
        Package::Rust => c.ttl,
        Package::Go => c.go_ttl.unwrap_or(c.ttl),
    }
}

/// How a client attempts.
#[derive(Clone, Copy)]
enum Attempt {
    /// A waiting acquisition (`write`, `read`, `acquire`); `counting`: rlock.lua's
    /// counting path; `late`: the reply comes too late to be used.
    Wait { counting: bool, late: bool },
    /// One attempt (`try_*`).
    Try,
}

impl Attempt {
    fn wait(counting: bool, late: bool) -> Attempt {
        Attempt::Wait { counting, late }
    }
}

fn take(c: &Config, s: &mut State, i: usize, mode: Mode, attempt: Attempt) {
    if let Mode::Set { .. } = mode {
        return take_set(c, s, i, mode, attempt);
    }
    let id = s.clients[i].id().unwrap_or_else(|| fresh_id(s));
    let before = s.store.clone();
    let l = c.clients[i].lock;
    let waits = matches!(attempt, Attempt::Wait { .. });
    let t = Take {
        id,
        ttl: c.ttl,
        retention: c.retention,
        floor: false,
        fair: c.fair.then_some(waits),
    };
    let ttl = ttl_of(c, i);
    let package = c.clients[i].package;
    let reply = s.store.on_lock(l, |st| match (package, mode) {
        (Package::Rust, Mode::Write) => scripts::lock::lock(st, t, c.intent && waits),
        (Package::Rust, Mode::Read) => {
            let counting = matches!(attempt, Attempt::Wait { counting: true, .. });
            scripts::rlock::rlock(st, t, counting)
        }
        (_, Mode::Permit) => scripts::semaphore::semaphore(st, t, c.permits),
        (Package::Rust, Mode::Upgradable | Mode::Upgrading) => {
            scripts::upgradable::upgradable(st, t)
        }
        (Package::Go, Mode::Write) => go::write(st, id, ttl, true),
        (Package::Go, _) => go::read(st, id, ttl),
        (Package::Rust, Mode::Set { .. }) => unreachable!("a set: take_set"),
    });
    // A describing handle's describe.lua, in the same request.
    if c.describe && package == Package::Rust {
        s.store
            .on_lock(l, |st| scripts::describe::describe(st, &[0], id, c.ttl));
    }
    // Blocked (Go's blocked write replies the PTTL).
    if matches!(reply, Reply::Blocked { .. } | Reply::Int(_)) {
        let upgradable_holds = s
            .clients
            .iter()
            .any(|p| p.live().is_some_and(|(m, _)| m.upgradable()));
        if upgradable_holds && mode == Mode::Upgradable {
            s.seen.reached |= Seen::UPGRADER_KEPT_OUT;
        }
        if upgradable_holds && mode == Mode::Write {
            s.seen.reached |= Seen::WRITER_KEPT_OUT;
        }
    }
    let token = match reply {
        Reply::Token { token, .. } => Some(token),
        Reply::Nil => Some(0),
        _ => None,
    };
    let (late, place) = match s.clients[i] {
        Phase::Waiting { late, place, .. } => (late, place),
        _ => (false, None),
    };
    if let Some(token) = token {
        properties::granted(c, s, &before, i, mode, id, token, late);
        if matches!(attempt, Attempt::Wait { late: true, .. }) {
            // Granted on the server, unseen here: the queue place is gone with it.
            s.clients[i] = Phase::Waiting {
                mode,
                id,
                late: true,
                place: None,
            };
            return;
        }
        s.clients[i] = Phase::Holding {
            mode,
            id,
            token,
            deadline: s.client_now() + ttl - c.margin,
            fired: false,
        };
        return;
    }
    s.clients[i] = if waits {
        let place = c.fair.then(|| {
            let lapsed = place.is_none_or(|p| p.until <= before.now);
            let arrival = if lapsed {
                u8::MAX
            } else {
                place.map_or(u8::MAX, |p| p.arrival)
            };
            Place {
                arrival,
                until: s.store.now + c.ttl,
            }
        });
        Phase::Waiting {
            mode,
            id,
            late,
            place,
        }
    } else {
        Phase::Idle
    };
}

/// A set's attempt (lock_all.lua; `lock_all()` waiting with the configured intent, or
/// `try_lock_all()` with none): granted, it holds every key; blocked, it waits (or, a
/// single attempt, goes back to idle). Either way the set's id must be at every key of
/// the set, as its mode says, or at none that it was not at before (all or nothing).
fn take_set(c: &Config, s: &mut State, i: usize, mode: Mode, attempt: Attempt) {
    let id = s.clients[i].id().unwrap_or_else(|| fresh_id(s));
    let before = s.store.clone();
    let waits = matches!(attempt, Attempt::Wait { .. });
    let t = TakeAll {
        id,
        ttl: c.ttl,
        retention: c.retention,
        keys: set_keys(mode),
        intent: c.intent && waits,
        floor: false,
    };
    let reply = lock_all::lock_all(&mut s.store, &t);
    if c.describe {
        scripts::describe::describe(&mut s.store, &[0, 1], id, c.ttl);
    }
    if let Reply::Tokens(tokens) = &reply {
        if !t.keys.iter().all(|&k| at_key(&s.store, k, id, false)) {
            s.seen.violated |= Seen::PARTIAL_SET;
        }
        let tokens: Vec<u64> = tokens.iter().map(|&(token, _)| token).collect();
        properties::granted_set(c, s, &before, i, &t.keys, id, &tokens);
        s.clients[i] = Phase::Holding {
            mode,
            id,
            token: 0,
            deadline: s.client_now() + c.ttl - c.margin,
            fired: false,
        };
        return;
    }
    let taken = |k: &SetKey| at_key(&s.store, *k, id, true) && !at_key(&before, *k, id, true);
    if t.keys.iter().any(taken) {
        s.seen.violated |= Seen::PARTIAL_SET;
    }
    if let Reply::BlockedAt { .. } = reply {
        if t.keys
            .iter()
            .any(|k| k.write && s.store.get_is(Key::Intent.on(k.lock), &Text::Id(id)))
        {
            s.seen.reached |= Seen::SET_INTENT;
        }
    }
    s.clients[i] = if waits {
        Phase::waiting(mode, id)
    } else {
        Phase::Idle
    };
}

/// The fair places renumbered 0, 1, … in arrival order (a new place, numbered
/// `u8::MAX`, last); places that lapsed are dropped first.
pub fn rank_places(clients: &mut [Phase]) {
    let mut order: Vec<(u8, usize)> = clients
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.place().map(|place| (place.arrival, i)))
        .collect();
    order.sort();
    for (rank, (_, i)) in order.into_iter().enumerate() {
        if let Phase::Waiting { place: Some(p), .. } = &mut clients[i] {
            p.arrival = rank as u8;
        }
    }
}

/// `fast_lock`'s first command: `SET lock id NX PX ttl`. Busy: the counter's two
/// commands run all the same (a gap in the tokens), and the writer waits on.
fn fast(c: &Config, s: &mut State, i: usize) {
    let id = s.clients[i].id().unwrap_or_else(|| fresh_id(s));
    if s.store.exists(Key::Lock) {
        count(c, s);
        if !matches!(s.clients[i], Phase::Waiting { .. }) {
            s.clients[i] = Phase::waiting(Mode::Write, id);
        }
        return;
    }
    s.store.set(Key::Lock, Text::Id(id), Some(c.ttl));
    s.clients[i] = Phase::Minting {
        id,
        sent: s.client_now(),
    };
}

/// `SET fence 1 NX PX retention`, `INCR fence`: the counter's value after them, if it
/// is one.
fn count(c: &Config, s: &mut State) -> Option<i64> {
    if !s.store.exists(Key::Fence) {
        s.store.set(Key::Fence, Text::Int(1), Some(c.retention));
    }
    s.store.incr(Key::Fence).ok()
}

/// The fast path's second step: a token (a clock-sized count) holds; anything else is
/// `TakenWithoutToken`, and the writer waits on with the lock taken under its id (its
/// next attempt, by lock.lua, takes it as a resent request and mints a token).
fn mint(c: &Config, s: &mut State, i: usize) {
    let Phase::Minting { id, sent } = s.clients[i] else {
        return;
    };
    let before = s.store.clone();
    let token = count(c, s).filter(|&t| (CLOCK_TOKENS as i64..=MAX_TOKEN as i64).contains(&t));
    // The fast path's describe.lua, after its INCR in the same pipeline.
    if c.describe {
        scripts::describe::describe(&mut s.store, &[0], id, c.ttl);
    }
    let Some(token) = token else {
        s.clients[i] = Phase::Waiting {
            mode: Mode::Write,
            id,
            late: true,
            place: None,
        };
        return;
    };
    properties::granted(c, s, &before, i, Mode::Write, id, token as u64, true);
    s.clients[i] = Phase::Holding {
        mode: Mode::Write,
        id,
        token: token as u64,
        deadline: sent + c.ttl - c.margin,
        fired: false,
    };
    fire_due(s);
}

/// A waiting client gives up: unlock.lua with what its attempts left (the intent of a
/// writer that may have set it, its queue place, a grant that came late).
fn give_up(c: &Config, s: &mut State, i: usize) {
    let Phase::Waiting { mode, id, late, .. } = s.clients[i] else {
        return;
    };
    if let Mode::Set { .. } = mode {
        // The intent each write key may hold, by unlock.lua "w" with the intent.
        if c.intent {
            for k in set_keys(mode).into_iter().filter(|k| k.write) {
                s.store.on_lock(k.lock, |st| {
                    scripts::unlock::unlock_described(
                        st,
                        id,
                        Kind::Writer,
                        Extra::Intent,
                        c.describe,
                    )
                });
            }
        }
        s.clients[i] = Phase::Idle;
        return;
    }
    let l = c.clients[i].lock;
    if c.clients[i].package == Package::Rust {
        let extra = if c.fair {
            Extra::Queue
        } else if (mode == Mode::Write && c.intent) || mode.upgradable() {
            Extra::Intent
        } else {
            Extra::None
        };
        // An upgradable read sets no intent: it releases only a grant that came late.
        let sets = extra != Extra::None && !mode.upgradable();
        if sets || late {
            s.store.on_lock(l, |st| {
                scripts::unlock::unlock_described(st, id, kind(mode), extra, c.describe)
            });
        }
    }
    s.clients[i] = Phase::Idle;
}

fn renew(c: &Config, s: &mut State, i: usize) {
    let ttl = ttl_of(c, i);
    let now = s.client_now();
    let l = c.clients[i].lock;
    let package = c.clients[i].package;
    let Phase::Holding {
        mode,
        id,
        deadline,
        fired,
        ..
    } = &mut s.clients[i]
    else {
        return;
    };
    let hint = |write: bool, mode: Mode| match mode {
        _ if write => Hint::Writer,
        m if m.upgradable() => Hint::Upgradable,
        _ => Hint::Reader,
    };
    // A set's keys are renewed together (the refresher batches them, one renew.lua):
    // held while every key is.
    let held = if let Mode::Set { .. } = *mode {
        let replies: Vec<Reply> = set_keys(*mode)
            .into_iter()
            .map(|k| {
                s.store.on_lock(k.lock, |st| {
                    let ids = [(*id, hint(k.write, *mode))];
                    scripts::refresh::renew_described(st, &ids, ttl, c.describe)
                })
            })
            .collect();
        replies.iter().all(|r| *r == Reply::Renewed(vec![1]))
    } else {
        let hint = hint(*mode == Mode::Write, *mode);
        let reply = s.store.on_lock(l, |st| match package {
            Package::Rust => scripts::refresh::renew_described(st, &[(*id, hint)], ttl, c.describe),
            Package::Go => go::refresh(st, *id, ttl),
        });
        matches!(reply, Reply::Int(1)) || reply == Reply::Renewed(vec![1])
    };
    if held {
        *deadline = now + ttl - c.margin;
    } else {
        *fired = true;
    }
}

/// downgrade.lua: the guard reads from then on, its deadline moved as a renewal's.
fn downgrade(c: &Config, s: &mut State, i: usize) {
    let now = s.client_now();
    let Phase::Holding {
        mode,
        id,
        deadline,
        fired,
        ..
    } = &mut s.clients[i]
    else {
        return;
    };
    match scripts::downgrade::downgrade(&mut s.store, *id, c.ttl) {
        Reply::Int(1 | 3) => {
            *mode = Mode::Read;
            *deadline = (*deadline).max(now + c.ttl - c.margin);
        }
        _ => *fired = true,
    }
}

/// upgrade.lua, "wait" or "try": upgraded, the guard writes with the new token and a
/// deadline from this request; blocked, it stays the upgradable reader ("wait": waiting
/// to upgrade, its intent set unless another was); not held (0), or a reader no longer
/// the upgradable one (`{"reader"}`, whose guard the crate then releases), its token
/// fires. An upgrade must come with no writer's grant after the read's.
fn upgrade(c: &Config, s: &mut State, i: usize, wait: bool) {
    let Phase::Holding {
        mode, id, token, ..
    } = s.clients[i]
    else {
        return;
    };
    let before = s.store.clone();
    let t = Take {
        id,
        ttl: c.ttl,
        retention: c.retention,
        floor: false,
        fair: None,
    };
    let op = if wait { Op::Wait } else { Op::Try };
    match scripts::upgrade::upgrade(&mut s.store, t, op) {
        Reply::Token { token: write, .. } => {
            if s.seen.last_writer > token {
                s.seen.violated |= Seen::WRITER_BETWEEN;
            }
            s.seen.reached |= Seen::UPGRADED;
            properties::granted(c, s, &before, i, Mode::Write, id, write, false);
            s.clients[i] = Phase::Holding {
                mode: Mode::Write,
                id,
                token: write,
                deadline: s.client_now() + c.ttl - c.margin,
                fired: false,
            };
        }
        Reply::Blocked { .. } => {
            if let Phase::Holding { mode: m, .. } = &mut s.clients[i] {
                *m = if wait { Mode::Upgrading } else { mode };
            }
        }
        _ => {
            if let Phase::Holding { fired, .. } = &mut s.clients[i] {
                *fired = true;
            }
        }
    }
}

/// upgrade.lua, "plain": the guard reads on as a plain reader (its deadline as it was).
fn plain(c: &Config, s: &mut State, i: usize) {
    let Phase::Holding { id, .. } = s.clients[i] else {
        return;
    };
    let t = Take {
        id,
        ttl: c.ttl,
        retention: c.retention,
        floor: false,
        fair: None,
    };
    let reply = scripts::upgrade::upgrade(&mut s.store, t, Op::Plain);
    if let Phase::Holding { mode, fired, .. } = &mut s.clients[i] {
        if reply == Reply::Int(1) {
            *mode = Mode::Read;
        } else {
            *fired = true;
        }
    }
}

/// leader.lua: when the record names the lock's holder, that is the leader; its record
/// must be of its current term (the token of the guard it holds as the writer).
fn observe(s: &mut State) {
    let Reply::Leader {
        holder: Some(Text::Id(holder)),
        record: Some(Text::Record { token, id, .. }),
        ..
    } = scripts::election::leader(&s.store)
    else {
        return;
    };
    if id != holder {
        return;
    }
    s.seen.reached |= Seen::LEADER_READ;
    let current = s.clients.iter().any(|p| {
        matches!(*p, Phase::Holding { mode: Mode::Write, id: h, token: t, .. } if h == holder && t == token)
    });
    if !current {
        s.seen.violated |= Seen::STALE_LEADER;
    }
}

/// exec.lua with one `INCR`: refused, it changes nothing; run, its guard is not older
/// than the last writer's.
fn exec(s: &mut State, i: usize) {
    let Phase::Holding { id, token, .. } = s.clients[i] else {
        return;
    };
    let data = s.store.keys.get(&Key::Data).cloned();
    let reply = scripts::exec::exec(&mut s.store, id, &[0], &[Command::Incr]);
    match reply {
        Reply::NotHeld(_) => {
            s.seen.reached |= Seen::EXEC_REFUSED;
            if s.store.keys.get(&Key::Data) != data.as_ref() {
                s.seen.violated |= Seen::REFUSED_EXEC_RAN;
            }
        }
        _ if token < s.seen.last_writer => s.seen.violated |= Seen::STALE_EXEC_RAN,
        _ => {}
    }
    // Data outlives the lock in a real application; here it would be a key with no TTL,
    // which the no-TTL property is not about: give it one.
    s.store.pexpire(Key::Data, 1_000_000);
}

fn proclaim(c: &Config, s: &mut State, i: usize) {
    let Phase::Holding { id, token, .. } = s.clients[i] else {
        return;
    };
    let held = s.store.get_is(Key::Lock, &Text::Id(id));
    let record = Text::Record {
        token,
        id,
        value: 0,
    };
    let reply = scripts::election::proclaim(&mut s.store, id, record, c.retention);
    if reply == Reply::Int(3) && !held {
        s.seen.violated |= Seen::RECORD_WITHOUT_LOCK;
    }
}

/// The queue member of a client (fair mode).
pub fn member(mode: Mode, id: Id) -> Member {
    Member::Queued(kind(mode).letter(), id)
}
