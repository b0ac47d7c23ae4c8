//! What must hold in every state the checker reaches (`always`), and what must be
//! reachable at all (`sometimes`: a property that holds because nothing happens proves
//! nothing). Properties about a history (tokens, overtaking, order, refused writes) are
//! recorded as the steps run, in [`Seen`].

use stateright::Property;

use super::client::{Mode, Package, Phase, Place};
use super::{Config, Protocol, State};
use crate::scripts::exec;
use crate::store::{Id, Key, Store, Text};

/// What the run has seen: the largest token granted so far and the last writer's, the
/// history properties it broke (bits), and what it reached that a state does not show.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Seen {
    pub last_token: u64,
    pub last_writer: u64,
    pub violated: u8,
    pub reached: u8,
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
    /// exec.lua ran the commands of a guard older than the last writer's.
    pub const STALE_EXEC_RAN: u8 = 64;
    /// A writer was granted between an upgradable read and its upgrade: while an
    /// unfired upgradable guard held, or (seen at the upgrade) after the read's token.
    pub const WRITER_BETWEEN: u8 = 128;

    /// Reached: exec.lua refused a guard.
    pub const EXEC_REFUSED: u8 = 1;
    /// Reached: leader.lua named a leader.
    pub const LEADER_READ: u8 = 2;
    /// Reached: an upgradable read became the write lock.
    pub const UPGRADED: u8 = 4;
    /// Reached: an upgradable reader was refused while another held.
    pub const UPGRADER_KEPT_OUT: u8 = 8;
    /// Reached: a writer was refused while an upgradable reader held.
    pub const WRITER_KEPT_OUT: u8 = 16;
}

/// Records what a grant to client `i` (`mode`, `id`, `token`; 0 for Go) breaks, given
/// the keys `before` the script ran. `resent`: the server held the lock under this id
/// already (a grant whose reply came late, the fast path's lock): taking it again
/// passes nobody.
#[allow(clippy::too_many_arguments)]
pub fn granted(
    c: &Config,
    s: &mut State,
    before: &Store,
    i: usize,
    mode: Mode,
    id: Id,
    token: u64,
    resent: bool,
) {
    if token > 0 {
        if token <= s.seen.last_token {
            s.seen.violated |= Seen::TOKEN_NOT_LARGER;
        }
        s.seen.last_token = token;
        if mode == Mode::Write {
            s.seen.last_writer = token;
        }
    }
    if mode == Mode::Write
        && s.clients
            .iter()
            .enumerate()
            .any(|(u, p)| u != i && p.live().is_some_and(|(m, _)| m.upgradable()))
    {
        s.seen.violated |= Seen::WRITER_BETWEEN;
    }
    let new_reader = matches!(mode, Mode::Read | Mode::Upgradable)
        && before.sismember(Key::Lock, id) != Ok(true);
    for (w, phase) in s.clients.iter().enumerate() {
        // A waiting writer, or an upgradable reader whose `upgrade()` waits.
        let wid = match *phase {
            Phase::Waiting {
                mode: Mode::Write,
                id,
                ..
            }
            | Phase::Holding {
                mode: Mode::Upgrading,
                id,
                ..
            } => id,
            _ => continue,
        };
        let intent = match c.clients[w].package {
            Package::Rust => Text::Id(wid),
            Package::Go => Text::Int(1),
        };
        if w != i && new_reader && before.get_is(Key::Intent, &intent) {
            s.seen.violated |= Seen::OVERTAKEN;
        }
    }
    if c.fair && !resent && out_of_order(c, s, before, i, mode) {
        s.seen.violated |= Seen::OUT_OF_ORDER;
    }
}

/// Whether a grant of `mode` to client `i` passes an earlier waiter it had to wait for:
/// a waiter whose place has not lapsed and arrived before `i`'s (any, when `i` has no
/// place: it counts as last), that is a writer or waits behind one, or, for a permit,
/// whom the free permits cannot all serve first.
fn out_of_order(c: &Config, s: &State, before: &Store, i: usize, mode: Mode) -> bool {
    let live = |p: Place| p.until > before.now;
    let mine = s.clients[i].place().filter(|&p| live(p)).map(|p| p.arrival);
    let earlier: Vec<Mode> = s
        .clients
        .iter()
        .enumerate()
        .filter(|&(w, _)| w != i)
        .filter_map(|(_, p)| match *p {
            Phase::Waiting {
                mode,
                place: Some(place),
                ..
            } if live(place) && mine.is_none_or(|m| place.arrival < m) => Some(mode),
            _ => None,
        })
        .collect();
    match mode {
        Mode::Permit => {
            let held = before.zcount_after(Key::Lock, before.now_ms()).unwrap_or(0);
            !earlier.is_empty() && held + earlier.len() as i64 >= c.permits
        }
        _ => earlier
            .iter()
            .any(|&w| w == Mode::Write || mode == Mode::Write),
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
    let readers = live.iter().filter(|g| g.1.reads()).count();
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
            Mode::Upgradable | Mode::Upgrading => {
                s.store.sismember(Key::Lock, id) == Ok(true)
                    && s.store.get_is(Key::Upgrader, &Text::Id(id))
            }
        })
}

/// At most one unfired upgradable guard; it is the upgrader (`held` says its id is
/// the upgrader key's).
fn one_upgrader(m: &Protocol, s: &State) -> bool {
    live(m, s).iter().filter(|g| g.1.upgradable()).count() <= 1
}

/// An upgradable reader's `upgrade()` waits with its intent set while another reader
/// holds.
fn upgrade_waits_with_intent(_: &Protocol, s: &State) -> bool {
    s.clients.iter().any(|p| {
        matches!(*p, Phase::Holding { mode: Mode::Upgrading, id, fired: false, .. }
            if s.store.get_is(Key::Intent, &Text::Id(id)))
    }) && s.store.scard(Key::Lock).is_ok_and(|n| n > 1)
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

fn go_beside_rust(m: &Protocol, s: &State) -> bool {
    let live = live(m, s);
    live.iter().any(|g| g.0 == Package::Go) && live.iter().any(|g| g.0 == Package::Rust)
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
    pub const STALE_EXEC: &str = "no guard older than the last writer's runs an exec";
    pub const ONE_UPGRADER: &str = "at most one unfired upgradable reader";
    pub const WRITER_BETWEEN: &str = "no writer between an upgradable read and its upgrade";
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
        Property::always(names::STALE_EXEC, |_, s: &State| {
            not_violated(Seen::STALE_EXEC_RAN)(s)
        }),
        Property::always(names::ONE_UPGRADER, one_upgrader),
        Property::always(names::WRITER_BETWEEN, |_, s: &State| {
            not_violated(Seen::WRITER_BETWEEN)(s)
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
        all.push(Property::sometimes("an exec is refused", |_, s: &State| {
            s.seen.reached & Seen::EXEC_REFUSED != 0
        }));
        all.push(Property::sometimes(
            "an observer reads a leader",
            |_, s: &State| s.seen.reached & Seen::LEADER_READ != 0,
        ));
    }
    if c.clients.iter().any(|s| s.package == Package::Go) {
        all.push(Property::sometimes(
            "a Go client holds beside a Rust one",
            go_beside_rust,
        ));
    }
    if c.late {
        all.push(Property::sometimes("a grant came late", |_, s: &State| {
            s.clients
                .iter()
                .any(|p| matches!(p, Phase::Waiting { late: true, .. }))
        }));
    }
    if c.fast {
        all.push(Property::sometimes(
            "a fast path took the lock",
            |_, s: &State| s.clients.iter().any(|p| matches!(p, Phase::Minting { .. })),
        ));
    }
    if c.fair {
        all.push(Property::sometimes("a waiter is queued", |_, s: &State| {
            s.store.exists(Key::Queue)
        }));
    }
    if modes(Mode::Upgradable) {
        all.push(Property::sometimes(
            "an upgradable reader holds beside a plain reader",
            |_, s: &State| {
                holding(s, Mode::Read) > 0
                    && (holding(s, Mode::Upgradable) + holding(s, Mode::Upgrading)) > 0
            },
        ));
        all.push(Property::sometimes(
            "an upgrade waits with its intent set beside a reader",
            upgrade_waits_with_intent,
        ));
        all.push(Property::sometimes(
            "an upgradable read is upgraded",
            |_, s: &State| s.seen.reached & Seen::UPGRADED != 0,
        ));
        all.push(Property::sometimes(
            "a second upgradable reader is kept out",
            |_, s: &State| s.seen.reached & Seen::UPGRADER_KEPT_OUT != 0,
        ));
        if modes(Mode::Write) {
            all.push(Property::sometimes(
                "a writer is kept out by an upgradable reader",
                |_, s: &State| s.seen.reached & Seen::WRITER_KEPT_OUT != 0,
            ));
        }
    }
    all
}
