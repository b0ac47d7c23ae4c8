//! What must hold in every state the checker reaches (`always`), and what must be
//! reachable at all (`sometimes`: a property that holds because nothing happens proves
//! nothing). Properties about a history (tokens, overtaking, order, refused writes) are
//! recorded as the steps run, in [`Seen`].

use stateright::Property;

use super::client::{Mode, Package, Phase, Place};
use super::step::{at_key, set_keys};
use super::{Config, Protocol, State};
use crate::scripts::exec;
use crate::scripts::lock_all::{self, SetKey, TakeAll};
use crate::scripts::Reply;
use crate::store::{Id, Key, Store, Text};

/// What the run has seen: the largest token granted so far on each lock and the last
/// writer's of lock 0, the history properties it broke (bits), and what it reached that
/// a state does not show.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Seen {
    pub last_token: [u64; 2],
    pub last_writer: u64,
    pub violated: u16,
    pub reached: u16,
}

impl Seen {
    /// A token was granted that is not larger than every earlier one.
    pub const TOKEN_NOT_LARGER: u16 = 1;
    /// A new reader got in while a waiting writer's intent was on the server.
    pub const OVERTAKEN: u16 = 2;
    /// Fair mode: a grant went past an earlier waiter that it had to wait for.
    pub const OUT_OF_ORDER: u16 = 4;
    /// exec.lua refused (not held) and yet changed the data.
    pub const REFUSED_EXEC_RAN: u16 = 8;
    /// proclaim.lua wrote a record for an id that did not hold the lock as the writer.
    pub const RECORD_WITHOUT_LOCK: u16 = 16;
    /// leader.lua named as the leader an id whose record is not of its current term.
    pub const STALE_LEADER: u16 = 32;
    /// exec.lua ran the commands of a guard older than the last writer's.
    pub const STALE_EXEC_RAN: u16 = 64;
    /// A writer was granted between an upgradable read and its upgrade: while an
    /// unfired upgradable guard held, or (seen at the upgrade) after the read's token.
    pub const WRITER_BETWEEN: u16 = 128;
    /// A set's attempt left its id at some keys of the set and not at others: granted,
    /// it is not at every key as its mode says; blocked, it is at a key it was not at.
    pub const PARTIAL_SET: u16 = 256;
    /// An attach was granted though the lease's id did not hold every key in its mode,
    /// or left that id holding something, or gave the new id other than what it held;
    /// or a refused attach changed the keys.
    pub const ATTACH_REVIVED: u16 = 512;
    /// A lease was attached a second time.
    pub const ATTACHED_TWICE: u16 = 1024;
    /// A release by a lease took a hold of another id.
    pub const LEASE_FREED_OTHER: u16 = 2048;

    /// Reached: exec.lua refused a guard.
    pub const EXEC_REFUSED: u16 = 1;
    /// Reached: leader.lua named a leader.
    pub const LEADER_READ: u16 = 2;
    /// Reached: an upgradable read became the write lock.
    pub const UPGRADED: u16 = 4;
    /// Reached: an upgradable reader was refused while another held.
    pub const UPGRADER_KEPT_OUT: u16 = 8;
    /// Reached: a writer was refused while an upgradable reader held.
    pub const WRITER_KEPT_OUT: u16 = 16;
    /// Reached: a set's attempt was blocked and left its intent on a write key.
    pub const SET_INTENT: u16 = 32;
    /// Reached: a lease was attached.
    pub const ATTACHED: u16 = 64;
    /// Reached: a second attach of a lease was refused.
    pub const SECOND_ATTACH_REFUSED: u16 = 128;
    /// Reached: a release by a lease released its hold.
    pub const RELEASED_BY_LEASE: u16 = 256;
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
    let l = c.clients[i].lock;
    token_granted(s, i, l, mode == Mode::Write, token);
    let new_reader = matches!(mode, Mode::Read | Mode::Upgradable)
        && before.sismember(Key::Lock.on(l), id) != Ok(true);
    if new_reader {
        reader_granted(c, s, before, i, l);
    }
    if c.fair && !resent && out_of_order(c, s, before, i, mode) {
        s.seen.violated |= Seen::OUT_OF_ORDER;
    }
}

/// Records what a set's grant to client `i` (`keys`, `id`, a token per key) breaks, as
/// [`granted`] does for each key.
#[allow(clippy::too_many_arguments)]
pub fn granted_set(
    c: &Config,
    s: &mut State,
    before: &Store,
    i: usize,
    keys: &[SetKey],
    id: Id,
    tokens: &[u64],
) {
    for (k, &token) in keys.iter().zip(tokens) {
        token_granted(s, i, k.lock, k.write, token);
        if !k.write && before.sismember(Key::Lock.on(k.lock), id) != Ok(true) {
            reader_granted(c, s, before, i, k.lock);
        }
    }
}

/// A token (0 for Go: none) granted to client `i` on lock `l`, as its writer when
/// `write`.
fn token_granted(s: &mut State, i: usize, l: usize, write: bool, token: u64) {
    if token > 0 {
        if token <= s.seen.last_token[l] {
            s.seen.violated |= Seen::TOKEN_NOT_LARGER;
        }
        s.seen.last_token[l] = token;
        if write && l == 0 {
            s.seen.last_writer = token;
        }
    }
    // Upgradable readers are lock 0's.
    if write
        && l == 0
        && s.clients
            .iter()
            .enumerate()
            .any(|(u, p)| u != i && p.live().is_some_and(|(m, _)| m.upgradable()))
    {
        s.seen.violated |= Seen::WRITER_BETWEEN;
    }
}

/// Client `i` became a new reader of lock `l`: no waiting writer's intent (another
/// client's) may have been on the server.
fn reader_granted(c: &Config, s: &mut State, before: &Store, i: usize, l: usize) {
    for (w, phase) in s.clients.iter().enumerate() {
        // A waiting writer of lock `l` (a set that writes it too), or an upgradable
        // reader whose `upgrade()` waits.
        let wid = match *phase {
            Phase::Waiting { mode, id, .. } if mode.on(c.clients[w].lock, l) == Some(true) => id,
            Phase::Holding {
                mode: Mode::Upgrading,
                id,
                ..
            } if l == 0 => id,
            _ => continue,
        };
        let intent = match c.clients[w].package {
            Package::Rust => Text::Id(wid),
            Package::Go => Text::Int(1),
        };
        if w != i && before.get_is(Key::Intent.on(l), &intent) {
            s.seen.violated |= Seen::OVERTAKEN;
        }
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

/// The guards whose token has not fired: (package, mode, id, lock).
fn live(m: &Protocol, s: &State) -> Vec<(Package, Mode, Id, usize)> {
    s.clients
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let spec = &m.config.clients[i];
            p.live()
                .map(|(mode, id)| (spec.package, mode, id, spec.lock))
        })
        .collect()
}

/// On each lock: no two writers, and no writer beside a reader, while both guards are
/// unfired (a set's guard counts on each of its keys); no more permits than the
/// semaphore has.
fn exclusion(m: &Protocol, s: &State) -> bool {
    let live = live(m, s);
    let permits = live.iter().filter(|g| g.1 == Mode::Permit).count() as i64;
    let each_lock = (0..2).all(|l| {
        let on = |write| {
            live.iter()
                .filter(|g| g.1.on(g.3, l) == Some(write))
                .count()
        };
        let (writers, readers) = (on(true), on(false));
        writers == 0 || (writers == 1 && readers == 0)
    });
    each_lock && permits <= m.config.permits
}

/// A guard whose token has not fired is held on the server (a set's: every key).
fn held(m: &Protocol, s: &State) -> bool {
    live(m, s)
        .into_iter()
        .filter(|g| g.0 == Package::Rust)
        .all(|(_, mode, id, l)| match mode {
            Mode::Write => s.store.get_is(Key::Lock.on(l), &Text::Id(id)),
            Mode::Read => s.store.sismember(Key::Lock.on(l), id) == Ok(true),
            Mode::Set { .. } => set_keys(mode)
                .into_iter()
                .all(|k| at_key(&s.store, k, id, false)),
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

/// The sets that wait: (mode, id).
fn waiting_sets(s: &State) -> Vec<(Mode, Id)> {
    s.clients
        .iter()
        .filter_map(|p| match *p {
            Phase::Waiting {
                mode: mode @ Mode::Set { .. },
                id,
                ..
            } => Some((mode, id)),
            _ => None,
        })
        .collect()
}

/// Whether nothing but the intents of `sets` keeps them out: no key of either is held
/// as it would block (a write key by anyone, a read key by a writer), and every intent
/// on a read key of either is one of theirs.
fn only_their_intents(s: &State, sets: [(Mode, Id); 2]) -> bool {
    let theirs = |t: &Text| sets.iter().any(|&(_, id)| *t == Text::Id(id));
    sets.iter().all(|&(mode, _)| {
        set_keys(mode).into_iter().all(|k| {
            let kind = s.store.type_of(Key::Lock.on(k.lock));
            let free = if k.write {
                kind == "none"
            } else {
                kind != "string"
            };
            let intent = s.store.get(Key::Intent.on(k.lock));
            let intent_ok =
                k.write || matches!(intent, Ok(None)) || matches!(intent, Ok(Some(t)) if theirs(t));
            free && intent_ok
        })
    })
}

/// Whether the intent of set `a` is on a key that set `b` reads.
fn intent_blocks_set(s: &State, a: (Mode, Id), b: (Mode, Id)) -> bool {
    set_keys(b.0)
        .into_iter()
        .any(|k| !k.write && s.store.get_is(Key::Intent.on(k.lock), &Text::Id(a.1)))
}

/// No two sets keep each other out with their intents: where two sets wait and nothing
/// but their intents keeps them out, their attempts in turn (the first's, the
/// second's, the first's again, each with the configured intent) grant one of them.
fn sets_make_way(m: &Protocol, s: &State) -> bool {
    let c = &m.config;
    let waiting = waiting_sets(s);
    for &a in &waiting {
        for &b in &waiting {
            if a.1 == b.1 || !only_their_intents(s, [a, b]) {
                continue;
            }
            let mut store = s.store.clone();
            let mut attempt = |(mode, id): (Mode, Id)| {
                let t = TakeAll {
                    id,
                    ttl: c.ttl,
                    retention: c.retention,
                    keys: set_keys(mode),
                    intent: c.intent,
                    floor: false,
                };
                matches!(lock_all::lock_all(&mut store, &t), Reply::Tokens(_))
            };
            if ![a, b, a].into_iter().any(&mut attempt) {
                return false;
            }
        }
    }
    true
}

/// Two sets wait, each with its intent on a key the other reads, and nothing else keeps
/// them out: the state [`sets_make_way`] is about.
fn sets_block_each_other(_: &Protocol, s: &State) -> bool {
    let waiting = waiting_sets(s);
    waiting.iter().any(|&a| {
        waiting.iter().any(|&b| {
            a.1 != b.1
                && only_their_intents(s, [a, b])
                && intent_blocks_set(s, a, b)
                && intent_blocks_set(s, b, a)
        })
    })
}

/// Every key the scripts wrote has a TTL.
fn every_key_expires(_: &Protocol, s: &State) -> bool {
    s.store.keys.values().all(|e| e.expires.is_some())
}

fn not_violated(bit: u16) -> impl Fn(&State) -> bool {
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
    pub const ALL_OR_NOTHING: &str = "a set's attempt takes every key of the set or none";
    pub const SETS_MAKE_WAY: &str = "no two sets keep each other out with their intents";
    pub const ATTACH: &str = "an attach never revives a lost hold";
    pub const ATTACH_ONCE: &str = "a lease attaches at most once";
    pub const LEASE_RELEASE: &str = "a release by a lease never frees another holder";
    pub const DESCRIPTIONS: &str = "descriptions leave with holds";
}

/// Every description in a holders key names an id at its lock key: the writer's string,
/// one of the readers, or a permit (run out or not: a run-out permit's description goes
/// when its entry is purged). Released, expired and forced-out holds leave none.
fn descriptions_leave_with_holds(_: &Protocol, s: &State) -> bool {
    (0..2).all(|l| {
        let lock = Key::Lock.on(l);
        s.store.holders(Key::Holders.on(l)).keys().all(|&id| {
            s.store.get_is(lock, &Text::Id(id))
                || s.store.sismember(lock, id) == Ok(true)
                || matches!(
                    s.store.zscore(lock, crate::store::Member::Id(id)),
                    Ok(Some(_))
                )
        })
    })
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
        Property::always(names::ALL_OR_NOTHING, |_, s: &State| {
            not_violated(Seen::PARTIAL_SET)(s)
        }),
        Property::always(names::SETS_MAKE_WAY, sets_make_way),
        Property::always(names::ATTACH, |_, s: &State| {
            not_violated(Seen::ATTACH_REVIVED)(s)
        }),
        Property::always(names::ATTACH_ONCE, |_, s: &State| {
            not_violated(Seen::ATTACHED_TWICE)(s)
        }),
        Property::always(names::LEASE_RELEASE, |_, s: &State| {
            not_violated(Seen::LEASE_FREED_OTHER)(s)
        }),
        Property::always(names::DESCRIPTIONS, descriptions_leave_with_holds),
    ];
    if c.leases {
        all.push(Property::sometimes(
            "a lease is attached",
            |_, s: &State| s.seen.reached & Seen::ATTACHED != 0,
        ));
        all.push(Property::sometimes(
            "a second attach of a lease is refused",
            |_, s: &State| s.seen.reached & Seen::SECOND_ATTACH_REFUSED != 0,
        ));
        all.push(Property::sometimes(
            "a hold is released by its lease",
            |_, s: &State| s.seen.reached & Seen::RELEASED_BY_LEASE != 0,
        ));
    }
    let sets = c
        .clients
        .iter()
        .filter(|s| s.modes.iter().any(|m| matches!(m, Mode::Set { .. })))
        .count();
    if sets > 0 {
        all.push(Property::sometimes("a set holds", |_, s: &State| {
            s.clients
                .iter()
                .any(|p| matches!(p.live(), Some((Mode::Set { .. }, _))))
        }));
        if c.intent {
            all.push(Property::sometimes(
                "a set waits with its intent set",
                |_, s: &State| s.seen.reached & Seen::SET_INTENT != 0,
            ));
        }
    }
    // Two sets can set intents that block each other's reads only while a third party
    // holds keys of both: with three sets (one of them that holder).
    if sets >= 3 && c.intent {
        all.push(Property::sometimes(
            "two sets wait with intents that block each other's reads",
            sets_block_each_other,
        ));
    }
    if c.describe {
        all.push(Property::sometimes(
            "a holder is described",
            |_, s: &State| {
                !s.store.holders(Key::Holders).is_empty()
                    || !s.store.holders(Key::Holders1).is_empty()
            },
        ));
        let sharing = c
            .clients
            .iter()
            .filter(|spec| spec.lock == 0)
            .filter(|spec| {
                spec.modes
                    .iter()
                    .any(|m| matches!(m, Mode::Read | Mode::Permit))
            })
            .count();
        if sharing > 1 {
            all.push(Property::sometimes(
                "two holders of one lock are described, each by its id",
                |_, s: &State| s.store.holders(Key::Holders).len() > 1,
            ));
        }
    }
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
