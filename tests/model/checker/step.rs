//! What each action does: the script it runs (`crate::scripts`) and what the client
//! makes of the reply, as the crate (or the Go package) does; and what the run records
//! for the properties (`properties::Seen`).

use super::client::{Mode, Package, Phase};
use super::properties::{self, Seen};
use super::{fresh_id, Action, Config, State};
use crate::scripts::exec::Command;
use crate::scripts::lock::Take;
use crate::scripts::unlock::{Extra, Kind};
use crate::scripts::{self, go, Reply};
use crate::store::{Id, Key, Member, Text};

/// Applies `action` to `s`.
pub fn apply(c: &Config, s: &mut State, action: &Action) {
    match *action {
        Action::Take {
            client,
            mode,
            counting,
        } => take(c, s, client, mode, Attempt::Wait { counting }),
        Action::Try { client, mode } => take(c, s, client, mode, Attempt::Try),
        Action::Observe => observe(s),
        Action::GiveUp(i) => {
            if let Phase::Waiting { mode, id } = s.clients[i] {
                if c.clients[i].package == Package::Rust {
                    let extra = if c.fair { Extra::Queue } else { Extra::Intent };
                    scripts::unlock::unlock(&mut s.store, id, kind(mode), extra);
                }
                s.clients[i] = Phase::Idle;
            }
        }
        Action::Renew(i) => renew(c, s, i),
        Action::Release(i) => {
            if let Phase::Holding { mode, id, .. } = s.clients[i] {
                match c.clients[i].package {
                    Package::Rust => {
                        scripts::unlock::unlock(&mut s.store, id, kind(mode), Extra::None);
                    }
                    Package::Go => {
                        go::unlock(&mut s.store, id);
                    }
                }
                s.clients[i] = Phase::Idle;
            }
        }
        Action::Exec(i) => exec(s, i),
        Action::Proclaim(i) => proclaim(c, s, i),
        Action::Downgrade(i) => {
            if let Phase::Holding {
                mode, id, fired, ..
            } = &mut s.clients[i]
            {
                match scripts::downgrade::downgrade(&mut s.store, *id, c.ttl) {
                    Reply::Int(1 | 3) => *mode = Mode::Read,
                    _ => *fired = true,
                }
            }
        }
        Action::Tick => {
            s.store.advance(1);
            s.time_left -= 1;
            fire_due(s);
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

fn kind(mode: Mode) -> Kind {
    match mode {
        Mode::Write => Kind::Writer,
        Mode::Read => Kind::Reader,
        Mode::Permit => Kind::Permit,
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

/// How a client attempts.
#[derive(Clone, Copy)]
enum Attempt {
    /// A waiting acquisition (`write`, `read`, `acquire`); `counting`: rlock.lua's
    /// counting path.
    Wait { counting: bool },
    /// One attempt (`try_*`).
    Try,
}

fn take(c: &Config, s: &mut State, i: usize, mode: Mode, attempt: Attempt) {
    let id = s.clients[i].id().unwrap_or_else(|| fresh_id(s));
    let before = s.store.clone();
    let waits = matches!(attempt, Attempt::Wait { .. });
    let t = Take {
        id,
        ttl: c.ttl,
        retention: c.retention,
        floor: false,
        fair: c.fair.then_some(waits),
    };
    let go_ttl = c.go_ttl.unwrap_or(c.ttl);
    let reply = match (c.clients[i].package, mode) {
        (Package::Rust, Mode::Write) => scripts::lock::lock(&mut s.store, t, c.intent && waits),
        (Package::Rust, Mode::Read) => {
            let counting = matches!(attempt, Attempt::Wait { counting: true });
            scripts::rlock::rlock(&mut s.store, t, counting)
        }
        (_, Mode::Permit) => scripts::semaphore::semaphore(&mut s.store, t, c.permits),
        (Package::Go, Mode::Write) => go::write(&mut s.store, id, go_ttl, true),
        (Package::Go, Mode::Read) => go::read(&mut s.store, id, go_ttl),
    };
    let token = match reply {
        Reply::Token { token, .. } => Some(token),
        Reply::Nil => Some(0),
        _ => None,
    };
    let Some(token) = token else {
        s.clients[i] = if waits {
            Phase::Waiting { mode, id }
        } else {
            Phase::Idle
        };
        return;
    };
    properties::granted(c, s, &before, i, mode, id, token);
    s.clients[i] = Phase::Holding {
        mode,
        id,
        token,
        deadline: s.client_now() + ttl_of(c, i) - c.margin,
        fired: false,
    };
}

fn renew(c: &Config, s: &mut State, i: usize) {
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
    let reply = match c.clients[i].package {
        Package::Rust => {
            scripts::refresh::renew(&mut s.store, &[(*id, *mode == Mode::Write)], c.ttl)
        }
        Package::Go => go::refresh(&mut s.store, *id, c.ttl),
    };
    let held = matches!(reply, Reply::Int(1)) || reply == Reply::Renewed(vec![1]);
    if held {
        *deadline = s.store.now - s.skew + c.ttl - c.margin;
    } else {
        *fired = true;
    }
}

/// Client `i`'s TTL.
fn ttl_of(c: &Config, i: usize) -> i64 {
    match c.clients[i].package {
        Package::Rust => c.ttl,
        Package::Go => c.go_ttl.unwrap_or(c.ttl),
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
    let current = s.clients.iter().any(|p| {
        matches!(*p, Phase::Holding { mode: Mode::Write, id: h, token: t, .. } if h == holder && t == token)
    });
    if !current {
        s.seen.violated |= Seen::STALE_LEADER;
    }
}

fn exec(s: &mut State, i: usize) {
    let Phase::Holding { id, .. } = s.clients[i] else {
        return;
    };
    let data = s.store.keys.get(&Key::Data).cloned();
    let reply = scripts::exec::exec(&mut s.store, id, &[Command::Incr]);
    if reply == Reply::NotHeld && s.store.keys.get(&Key::Data) != data.as_ref() {
        s.seen.violated |= Seen::REFUSED_EXEC_RAN;
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
