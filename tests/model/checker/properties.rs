//! What must hold in every state the checker reaches (`always`), and what must be
//! reachable at all (`sometimes`: a property that holds because nothing happens proves
//! nothing). Properties about a history (tokens, overtaking, order, refused writes) are
//! recorded as the steps run, in [`Seen`].

use stateright::Property;

use super::client::{Mode, Package, Phase};
use super::step::member;
use super::{Config, Protocol, State};
use crate::scripts::exec;
use crate::store::{Id, Key, Member, Store, Text};

/// What the run has seen: the largest token granted so far, and the history properties
/// it broke (bits).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Seen {
    pub last_token: u64,
    pub violated: u8,
}

impl Seen {
    /// A token was granted that is not larger than every earlier one.
    pub const TOKEN_NOT_LARGER: u8 = 1;
    /// A new reader got in while a waiting writer's intent was on the server.
    pub const OVERTAKEN: u8 = 2;
    /// Fair mode: a grant went past an earlier waiter that it had to wait for.
    pub const OUT_OF_ORDER: u8 = 4;
    /// exec.lua refused (not held) and yet changed the data.
    pub const REFUSED_EXEC_RAN: u8 = 8;
    /// proclaim.lua wrote a record for an id that did not hold the lock as the writer.
    pub const RECORD_WITHOUT_LOCK: u8 = 16;
    /// leader.lua named as the leader an id whose record is not of its current term.
    pub const STALE_LEADER: u8 = 32;
}

/// Records what a grant to client `i` (`mode`, `id`, `token`; 0 for Go) breaks, given
/// the keys `before` the script ran.
pub fn granted(
    c: &Config,
    s: &mut State,
    before: &Store,
    i: usize,
    mode: Mode,
    id: Id,
    token: u64,
) {
    if token > 0 {
        if token <= s.seen.last_token {
            s.seen.violated |= Seen::TOKEN_NOT_LARGER;
        }
        s.seen.last_token = token;
    }
    let new_reader = mode == Mode::Read && before.sismember(Key::Lock, id) != Ok(true);
    for (w, phase) in s.clients.iter().enumerate() {
        let Phase::Waiting {
            mode: waiting,
            id: wid,
        } = *phase
        else {
            continue;
        };
        if w == i {
            continue;
        }
        let intent = match c.clients[w].package {
            Package::Rust => Text::Id(wid),
            Package::Go => Text::Int(1),
        };
        if new_reader && waiting == Mode::Write && before.get_is(Key::Intent, &intent) {
            s.seen.violated |= Seen::OVERTAKEN;
        }
        if c.fair
            && mode != Mode::Permit
            && ahead(before, member(waiting, wid), member(mode, id))
            && (waiting == Mode::Write || mode == Mode::Write)
        {
            s.seen.violated |= Seen::OUT_OF_ORDER;
        }
    }
}

/// Whether `waiter` is queued, its deadline not passed, ahead of `me` (which counts as
/// last when it is not queued).
fn ahead(before: &Store, waiter: Member, me: Member) -> bool {
    let ticket = |m| before.zscore(Key::Queue, m).ok().flatten();
    let deadline = before.zscore(Key::QueueDeadline, waiter).ok().flatten();
    let live = deadline.is_some_and(|d| d > before.now_ms());
    match (ticket(waiter), ticket(me)) {
        (Some(w), Some(m)) => live && w < m,
        (Some(_), None) => live,
        _ => false,
    }
}

/// The guards whose token has not fired: (package, mode, id).
fn live(m: &Protocol, s: &State) -> Vec<(Package, Mode, Id)> {
    s.clients
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            p.live()
                .map(|(mode, id)| (m.config.clients[i].package, mode, id))
        })
        .collect()
}

/// No two writers, and no writer beside a reader, while both guards are unfired; no more
/// permits than the semaphore has.
fn exclusion(m: &Protocol, s: &State) -> bool {
    let live = live(m, s);
    let writers = live.iter().filter(|g| g.1 == Mode::Write).count();
    let readers = live.iter().filter(|g| g.1 == Mode::Read).count();
    let permits = live.iter().filter(|g| g.1 == Mode::Permit).count() as i64;
    (writers == 0 || (writers == 1 && readers == 0)) && permits <= m.config.permits
}

/// A guard whose token has not fired is held on the server.
fn held(m: &Protocol, s: &State) -> bool {
    live(m, s)
        .into_iter()
        .filter(|g| g.0 == Package::Rust)
        .all(|(_, mode, id)| match mode {
            Mode::Write => s.store.get_is(Key::Lock, &Text::Id(id)),
            Mode::Read => s.store.sismember(Key::Lock, id) == Ok(true),
            Mode::Permit => exec::holds(&s.store, id),
        })
}

/// Every key the scripts wrote has a TTL.
fn every_key_expires(_: &Protocol, s: &State) -> bool {
    s.store.keys.values().all(|e| e.expires.is_some())
}

fn not_violated(bit: u8) -> impl Fn(&State) -> bool {
    move |s| s.seen.violated & bit == 0
}

fn holding(s: &State, mode: Mode) -> usize {
    s.clients
        .iter()
        .filter(|p| matches!(p.live(), Some((m, _)) if m == mode))
        .count()
}

fn waiting_writer_with_intent(_: &Protocol, s: &State) -> bool {
    s.clients.iter().any(|p| {
        matches!(
            p,
            Phase::Waiting {
                mode: Mode::Write,
                ..
            }
        )
    }) && s.store.exists(Key::Intent)
        && s.store.exists(Key::Lock)
}

/// The properties' names, for the runs that expect one to fail.
pub mod names {
    pub const EXCLUSION: &str =
        "exclusion: no writer beside another holder, permits within the count";
    pub const HELD: &str = "an unfired guard is held on the server";
    pub const TOKENS: &str = "fencing tokens strictly increase";
    pub const INTENT: &str = "a waiting writer's intent is not overtaken by a new reader";
    pub const FAIR: &str = "fair mode grants in arrival order";
    pub const TTL: &str = "every key has a TTL";
    pub const EXEC: &str = "a refused exec changes nothing";
    pub const RECORD: &str = "a record is written only by the lock's writer";
    pub const LEADER: &str = "the leader an observer reads is the holder, with its current term";
}

/// The properties of `m`'s configuration: every `always`, and the `sometimes` that show
/// the configuration reaches what the `always` speak of.
pub fn all(m: &Protocol) -> Vec<Property<Protocol>> {
    let c = &m.config;
    let modes = |mode| c.clients.iter().any(|s| s.modes.contains(&mode));
    let mut all = vec![
        Property::always(names::EXCLUSION, exclusion),
        Property::always(names::HELD, held),
        Property::always(names::TOKENS, |_, s: &State| {
            not_violated(Seen::TOKEN_NOT_LARGER)(s)
        }),
        Property::always(names::INTENT, |_, s: &State| {
            not_violated(Seen::OVERTAKEN)(s)
        }),
        Property::always(names::FAIR, |_, s: &State| {
            not_violated(Seen::OUT_OF_ORDER)(s)
        }),
        Property::always(names::TTL, every_key_expires),
        Property::always(names::EXEC, |_, s: &State| {
            not_violated(Seen::REFUSED_EXEC_RAN)(s)
        }),
        Property::always(names::RECORD, |_, s: &State| {
            not_violated(Seen::RECORD_WITHOUT_LOCK)(s)
        }),
        Property::always(names::LEADER, |_, s: &State| {
            not_violated(Seen::STALE_LEADER)(s)
        }),
    ];
    if modes(Mode::Write) {
        all.push(Property::sometimes("a writer holds", |_, s: &State| {
            holding(s, Mode::Write) > 0
        }));
    }
    if modes(Mode::Read) {
        all.push(Property::sometimes("two readers share", |_, s: &State| {
            holding(s, Mode::Read) > 1
        }));
    }
    if modes(Mode::Write) && modes(Mode::Read) && c.intent {
        all.push(Property::sometimes(
            "a writer waits with its intent set",
            waiting_writer_with_intent,
        ));
    }
    if modes(Mode::Permit) {
        all.push(Property::sometimes(
            "every permit is taken",
            |m: &Protocol, s: &State| holding(s, Mode::Permit) as i64 == m.config.permits,
        ));
    }
    if c.exec {
        all.push(Property::sometimes(
            "an observer reads a leader",
            |_, s: &State| {
                s.store.exists(Key::Record)
                    && s.clients.iter().any(|p| {
                        matches!(
                            p,
                            Phase::Holding {
                                mode: Mode::Write,
                                ..
                            }
                        )
                    })
            },
        ));
    }
    if c.fair {
        all.push(Property::sometimes("a waiter is queued", |_, s: &State| {
            s.store.exists(Key::Queue)
        }));
    }
    all
}
