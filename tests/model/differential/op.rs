//! One step of a differential sequence ([`Op`]), the random sequences of them
//! ([`sequence`]), and each step taken on the model ([`Op::on_model`]).

use proptest::prelude::*;

use crate::scripts::attach::{Mode, Part};
use crate::scripts::exec::Command;
use crate::scripts::lock::Take;
use crate::scripts::lock_all::{SetKey, TakeAll};
use crate::scripts::refresh::Hint;
use crate::scripts::shared::MAX_TOKEN;
use crate::scripts::unlock::{Extra, Kind};
use crate::scripts::{
    attach, describe, downgrade, election, exec, force, go, inspect, lock, lock_all, quorum,
    refresh, rlock, semaphore, unlock, upgradable, upgrade, Reply,
};
use crate::store::{Entry, Id, Key, Store, Text, Val};

/// A token argument (fence.lua, retake.lua) relative to the fence counter's value when
/// the step runs: so a shrunk sequence keeps its meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rel {
    /// One below the counter (at least 1).
    Below,
    /// The counter (at least 1).
    Equal,
    /// One above the counter.
    Above,
}

impl Rel {
    /// The token for the fence counter in `s` (0 when absent or not a counter), within
    /// 1 ..= 2^53 - 2.
    pub fn resolve(self, s: &Store) -> u64 {
        let base = match s.get(Key::Fence) {
            Ok(Some(Text::Int(n))) => *n,
            _ => 0,
        };
        let token = match self {
            Rel::Below => base.saturating_sub(1),
            Rel::Equal => base,
            Rel::Above => base + 1,
        };
        token.clamp(1, MAX_TOKEN - 1)
    }
}

/// One step: a script called with these arguments (ids are [`crate::store::id_text`],
/// times in ms), time passing, a restart, or a hostile write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// lock.lua; `intent` is ARGV[3].
    Lock { take: Take, intent: bool },
    /// rlock.lua; `counting` (ARGV[4]) only when not fair.
    RLock { take: Take, counting: bool },
    /// semaphore.lua with `permits`.
    Semaphore { take: Take, permits: i64 },
    /// unlock.lua (a [`Kind::Upgradable`] release with [`Extra::Intent`], as the crate
    /// sends it: KEYS lock, intent, upgrader); with the holders key last and ARGV[5] "1"
    /// when `described`.
    Unlock {
        id: Id,
        kind: Kind,
        extra: Extra,
        described: bool,
    },
    /// upgradable.lua (`take.fair` is `None`).
    Upgradable { take: Take },
    /// upgrade.lua with ARGV[4] `op` (`take.fair` is `None`).
    Upgrade { take: Take, op: upgrade::Op },
    /// refresh.lua.
    Refresh { id: Id, ttl: i64 },
    /// renew.lua with the lock key once per `(id, hint)` (and the upgrader key once per
    /// `u` after them); each letter a capital, with the holders key, when `described`.
    Renew {
        ids: Vec<(Id, Hint)>,
        ttl: i64,
        described: bool,
    },
    /// describe.lua on the lock keys of `locks` (0 or 1: [`Key::on`]).
    Describe { id: Id, ttl: i64, locks: Vec<usize> },
    /// exec.lua with the lock keys of `locks` (0 or 1: [`Key::on`]) and `commands` on
    /// [`Key::Data`].
    Exec {
        id: Id,
        locks: Vec<usize>,
        commands: Vec<Command>,
    },
    /// lock_all.lua.
    LockAll { take: TakeAll },
    /// attach.lua: the hold of `old` on the lock keys of `parts` (lock 0 or 1, [`Key::on`],
    /// each in its mode) taken over by `new`, with the TTL `ttl`.
    Attach {
        old: Id,
        new: Id,
        ttl: i64,
        parts: Vec<Part>,
    },
    /// A step of one lock key (lock.lua or rlock.lua not fair, unlock.lua's "w" or "r"
    /// with or without the intent, renew.lua with `w` and `r`) on lock 1's keys
    /// (`Store::on_lock`), so that single lockers meet the sets of `LockAll`.
    OnLock1(Box<Op>),
    /// force_unlock.lua.
    ForceUnlock,
    /// leader.lua.
    Leader,
    /// proclaim.lua with the record `token:id:v<value>` and PX `px`.
    Proclaim {
        id: Id,
        token: u64,
        value: u8,
        px: i64,
    },
    /// downgrade.lua.
    Downgrade { id: Id, ttl: i64 },
    /// fence.lua.
    Fence { token: Rel, retention: i64 },
    /// retake.lua.
    Retake {
        id: Id,
        ttl: i64,
        writer: bool,
        token: Rel,
        retention: i64,
    },
    /// Go's write lock.
    GoWrite { id: Id, ttl: i64, intent: bool },
    /// Go's read lock.
    GoRead { id: Id, ttl: i64 },
    /// Go's refresh.
    GoRefresh { id: Id, ttl: i64 },
    /// Go's unlock.
    GoUnlock { id: Id },
    /// `ms` pass: every key's PTTL and every time-valued score less `ms`.
    Advance { ms: i64 },
    /// A restart without persistence: every key gone.
    Restart,
    /// Hostile: `PERSIST key`.
    Persist { key: Key },
    /// Hostile: a hash at `key` (PX [`HOSTILE_PX`]).
    Hash { key: Key },
    /// inspect.lua, as a lock's (`semaphore` false) or a semaphore's.
    Inspect { semaphore: bool },
    /// Hostile: the string "junk" at `key` (PX [`HOSTILE_PX`]).
    Junk { key: Key },
    /// Hostile: 2^53 - 1 (an exhausted counter), or one below it, at `key` (PX
    /// [`HOSTILE_PX`]).
    Exhausted { key: Key, below: bool },
}

/// The PX (ms) of a hostile value.
pub const HOSTILE_PX: i64 = 3000;

/// The lock TTLs (ms) a step takes, multiples of 500 ms like every time here.
const TTLS: [i64; 3] = [1000, 2000, 3000];
/// The fence retentions (ms).
const RETENTIONS: [i64; 2] = [4000, 10000];

/// Ids 0 ..= 3, the lower ones more often, so that a release or a refresh more often
/// names a holder.
fn id() -> impl Strategy<Value = Id> {
    prop_oneof![4 => Just(0u8), 3 => Just(1u8), 2 => Just(2u8), 1 => Just(3u8)]
}

fn ttl() -> impl Strategy<Value = i64> {
    prop::sample::select(TTLS.to_vec())
}

fn retention() -> impl Strategy<Value = i64> {
    prop::sample::select(RETENTIONS.to_vec())
}

/// A take's request; `fair`: of a sequence on a fair mutex or semaphore, whose requests
/// are mostly fair (a waiting one joins the queue), else mostly not.
fn take(fair: bool) -> impl Strategy<Value = Take> {
    let fair = if fair {
        prop_oneof![1 => Just(None), 6 => Just(Some(true)), 2 => Just(Some(false))].boxed()
    } else {
        prop_oneof![2 => Just(None), 1 => Just(Some(true)), 1 => Just(Some(false))].boxed()
    };
    (id(), ttl(), retention(), any::<bool>(), fair).prop_map(|(id, ttl, retention, floor, fair)| {
        Take {
            id,
            ttl,
            retention,
            floor,
            fair,
        }
    })
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Writer),
        Just(Kind::Reader),
        Just(Kind::Permit),
        Just(Kind::Upgradable)
    ]
}

fn extra() -> impl Strategy<Value = Extra> {
    prop_oneof![3 => Just(Extra::None), 1 => Just(Extra::Intent), 1 => Just(Extra::Queue)]
}

fn rel() -> impl Strategy<Value = Rel> {
    prop_oneof![Just(Rel::Below), Just(Rel::Equal), Just(Rel::Above)]
}

/// A key for a hostile step: the keys the scripts refuse most often named more often.
fn any_key() -> impl Strategy<Value = Key> {
    prop_oneof![
        4 => Just(Key::Lock),
        2 => Just(Key::Intent),
        2 => Just(Key::Fence),
        2 => Just(Key::Upgrader),
        2 => prop::sample::select(vec![Key::Lock1, Key::Intent1, Key::Fence1]),
        1 => prop::sample::select(Key::ALL.to_vec()),
    ]
}

/// A key for a hostile string: the fence keys, and a holders key (which describe.lua
/// then leaves as it is).
fn fence_key() -> impl Strategy<Value = Key> {
    prop_oneof![
        4 => Just(Key::Fence),
        4 => Just(Key::Granted),
        2 => Just(Key::Fence1),
        1 => Just(Key::Holders),
    ]
}

fn lock_op(fair: bool) -> impl Strategy<Value = Op> {
    (take(fair), any::<bool>()).prop_map(|(take, intent)| Op::Lock { take, intent })
}

fn rlock_op(fair: bool) -> impl Strategy<Value = Op> {
    (take(fair), any::<bool>()).prop_map(|(take, counting)| Op::RLock {
        take,
        // The crate never sends both: fair requests take the checked path.
        counting: counting && take.fair.is_none(),
    })
}

fn semaphore_op(fair: bool) -> impl Strategy<Value = Op> {
    (take(fair), 1..=3i64).prop_map(|(take, permits)| Op::Semaphore { take, permits })
}

fn unlock_op(kind: BoxedStrategy<Kind>) -> impl Strategy<Value = Op> {
    (id(), kind, extra(), any::<bool>()).prop_map(|(id, kind, extra, described)| Op::Unlock {
        id,
        kind,
        described,
        // The crate sends an upgradable reader's release with the intent and the
        // upgrader key, never the queue.
        extra: if kind == Kind::Upgradable {
            Extra::Intent
        } else {
            extra
        },
    })
}

/// upgradable.lua: never fair (the crate refuses upgradable reads on fair mutexes).
fn upgradable_op() -> impl Strategy<Value = Op> {
    take(false).prop_map(|take| Op::Upgradable {
        take: Take { fair: None, ..take },
    })
}

fn upgrade_op() -> impl Strategy<Value = Op> {
    let op = prop_oneof![
        3 => Just(upgrade::Op::Wait),
        2 => Just(upgrade::Op::Try),
        2 => Just(upgrade::Op::Plain),
    ];
    (take(false), op).prop_map(|(take, op)| Op::Upgrade {
        take: Take { fair: None, ..take },
        op,
    })
}

fn refresh_op() -> impl Strategy<Value = Op> {
    (id(), ttl()).prop_map(|(id, ttl)| Op::Refresh { id, ttl })
}

fn renew_op() -> impl Strategy<Value = Op> {
    let hint = prop_oneof![
        2 => Just(Hint::Writer),
        2 => Just(Hint::Reader),
        1 => Just(Hint::Upgradable),
    ];
    (
        prop::collection::vec((id(), hint), 1..=3),
        ttl(),
        any::<bool>(),
    )
        .prop_map(|(ids, ttl, described)| Op::Renew {
            ids,
            ttl,
            described,
        })
}

/// describe.lua, after a take of one lock or of a set.
fn describe_op() -> impl Strategy<Value = Op> {
    (id(), ttl(), locks()).prop_map(|(id, ttl, locks)| Op::Describe { id, ttl, locks })
}

/// The lock keys of a set or an `exec`: lock 0, lock 1, or both in either order.
fn locks() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![
        6 => Just(vec![0]),
        1 => Just(vec![1]),
        2 => Just(vec![0, 1]),
        2 => Just(vec![1, 0]),
    ]
}

fn exec_op() -> impl Strategy<Value = Op> {
    let command = prop_oneof![3 => Just(Command::Incr), 1 => Just(Command::Fail)];
    (id(), locks(), prop::collection::vec(command, 0..=2)).prop_map(|(id, locks, commands)| {
        Op::Exec {
            id,
            locks,
            commands,
        }
    })
}

/// lock_all.lua: a set of one or both locks, in either order, each read or written.
fn lock_all_op() -> impl Strategy<Value = Op> {
    let set = prop_oneof![
        1 => Just(vec![0]),
        1 => Just(vec![1]),
        3 => Just(vec![0, 1]),
        3 => Just(vec![1, 0]),
    ];
    let modes = prop::collection::vec(prop_oneof![3 => Just(true), 2 => Just(false)], 2);
    (
        (id(), ttl(), retention()),
        set,
        modes,
        prop_oneof![2 => Just(true), 1 => Just(false)],
        any::<bool>(),
    )
        .prop_map(
            |((id, ttl, retention), set, modes, intent, floor)| Op::LockAll {
                take: TakeAll {
                    id,
                    ttl,
                    retention,
                    keys: set
                        .into_iter()
                        .zip(modes)
                        .map(|(lock, write)| SetKey { lock, write })
                        .collect(),
                    intent,
                    floor,
                },
            },
        )
}

/// A step of one lock key on lock 1 ([`Op::OnLock1`]).
fn on_lock1_op() -> impl Strategy<Value = Op> {
    let unlock = (
        id(),
        prop_oneof![Just(Kind::Writer), Just(Kind::Reader)],
        prop_oneof![Just(Extra::None), Just(Extra::Intent)],
        any::<bool>(),
    )
        .prop_map(|(id, kind, extra, described)| Op::Unlock {
            id,
            kind,
            extra,
            described,
        });
    let hint = prop_oneof![Just(Hint::Writer), Just(Hint::Reader)];
    let renew = (
        prop::collection::vec((id(), hint), 1..=2),
        ttl(),
        any::<bool>(),
    )
        .prop_map(|(ids, ttl, described)| Op::Renew {
            ids,
            ttl,
            described,
        });
    let step = prop_oneof![
        4 => lock_op(false),
        3 => rlock_op(false),
        3 => unlock,
        1 => renew,
    ];
    step.prop_map(|op| {
        let op = match op {
            Op::Lock { take, intent } => Op::Lock {
                take: Take { fair: None, ..take },
                intent,
            },
            Op::RLock { take, counting } => Op::RLock {
                take: Take { fair: None, ..take },
                counting,
            },
            other => other,
        };
        Op::OnLock1(Box::new(op))
    })
}

/// attach.lua on one lock key or both in either order, each in a mode of `modes`; the
/// new id is any other, 4 (which no other step uses: a fresh id) most often.
fn attach_op(modes: Vec<Mode>, locks: BoxedStrategy<Vec<usize>>) -> impl Strategy<Value = Op> {
    let mode = prop::sample::select(modes);
    (id(), 0..=4u8, ttl(), locks, prop::collection::vec(mode, 2)).prop_map(
        |(old, new, ttl, locks, modes)| Op::Attach {
            old,
            new: if new == old { 4 } else { new },
            ttl,
            parts: locks.into_iter().zip(modes).collect(),
        },
    )
}

/// A lock's attach: its keys written or read, on lock 0, lock 1 or both.
fn lock_attach_op() -> impl Strategy<Value = Op> {
    attach_op(vec![Mode::Writer, Mode::Reader], locks().boxed())
}

/// A semaphore's attach: lock 0's permit.
fn permit_attach_op() -> impl Strategy<Value = Op> {
    attach_op(vec![Mode::Permit], Just(vec![0]).boxed())
}

/// Any attach: each key in any mode.
fn any_attach_op() -> impl Strategy<Value = Op> {
    attach_op(
        vec![Mode::Writer, Mode::Reader, Mode::Permit],
        locks().boxed(),
    )
}

fn advance_op() -> impl Strategy<Value = Op> {
    (1..=12i64).prop_map(|n| Op::Advance { ms: n * 500 })
}

/// A short step of time (500 to 1,500 ms): permits of different TTLs then run out one
/// by one while their key lives on.
fn short_advance_op() -> impl Strategy<Value = Op> {
    (1..=3i64).prop_map(|n| Op::Advance { ms: n * 500 })
}

/// The hostile steps, which reach the scripts' refusals.
fn hostile_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        any_key().prop_map(|key| Op::Persist { key }),
        // Never at a holders key, where a hash is the protocol's own type.
        any_key()
            .prop_filter("a holders key", |k| !matches!(
                k,
                Key::Holders | Key::Holders1
            ))
            .prop_map(|key| Op::Hash { key }),
        fence_key().prop_map(|key| Op::Junk { key }),
        prop::sample::select(vec![Key::Holders, Key::Holders1]).prop_map(|key| Op::Junk { key }),
        (fence_key(), any::<bool>()).prop_map(|(key, below)| Op::Exhausted { key, below }),
    ]
}

/// A step of a sequence on a lock (and an election, and Go's clients): no semaphore.
/// Upgradable readers only when not fair: the crate refuses them on a fair mutex.
fn lock_step(fair: bool) -> BoxedStrategy<Op> {
    let steps = prop_oneof![
        12 => lock_op(fair),
        10 => rlock_op(fair),
        10 => unlock_op(prop_oneof![Just(Kind::Writer), Just(Kind::Reader)].boxed()),
        4 => refresh_op(),
        3 => renew_op(),
        3 => describe_op(),
        4 => exec_op(),
        2 => Just(Op::ForceUnlock),
        2 => Just(Op::Leader),
        2 => Just(Op::Inspect { semaphore: false }),
        3 => (id(), 1..=3u64, 0..=2u8, retention())
            .prop_map(|(id, token, value, px)| Op::Proclaim { id, token, value, px }),
        3 => (id(), ttl()).prop_map(|(id, ttl)| Op::Downgrade { id, ttl }),
        3 => (rel(), retention()).prop_map(|(token, retention)| Op::Fence { token, retention }),
        3 => (id(), ttl(), any::<bool>(), rel(), retention()).prop_map(
            |(id, ttl, writer, token, retention)| Op::Retake { id, ttl, writer, token, retention }
        ),
        2 => (id(), ttl(), any::<bool>()).prop_map(|(id, ttl, intent)| Op::GoWrite { id, ttl, intent }),
        2 => (id(), ttl()).prop_map(|(id, ttl)| Op::GoRead { id, ttl }),
        5 => lock_attach_op(),
        1 => (id(), ttl()).prop_map(|(id, ttl)| Op::GoRefresh { id, ttl }),
        2 => id().prop_map(|id| Op::GoUnlock { id }),
        10 => advance_op(),
        1 => Just(Op::Restart),
        2 => hostile_op(),
    ];
    if fair {
        return steps.boxed();
    }
    prop_oneof![
        81 => steps,
        8 => upgradable_op(),
        10 => upgrade_op(),
        3 => unlock_op(Just(Kind::Upgradable).boxed()),
        10 => lock_all_op(),
        10 => on_lock1_op(),
    ]
    .boxed()
}

/// A step of a sequence on a semaphore.
fn semaphore_step(fair: bool) -> impl Strategy<Value = Op> {
    prop_oneof![
        16 => semaphore_op(fair),
        10 => unlock_op(Just(Kind::Permit).boxed()),
        6 => refresh_op(),
        5 => renew_op(),
        3 => (id(), ttl()).prop_map(|(id, ttl)| Op::Describe { id, ttl, locks: vec![0] }),
        4 => exec_op(),
        6 => permit_attach_op(),
        2 => Just(Op::ForceUnlock),
        2 => Just(Op::Inspect { semaphore: true }),
        6 => short_advance_op(),
        4 => advance_op(),
        1 => Just(Op::Restart),
        2 => hostile_op(),
    ]
}

/// A step of a sequence that mixes everything (the lock key's types meet).
fn any_step() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => lock_step(false),
        1 => semaphore_step(false),
        1 => unlock_op(kind().boxed()),
        1 => any_attach_op(),
    ]
}

/// A random sequence of `len` steps: on a lock, on a fair lock, on a semaphore (fair or
/// not), or mixed.
pub fn sequence(len: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<Op>> {
    prop_oneof![
        4 => prop::collection::vec(lock_step(false), len.clone()),
        2 => prop::collection::vec(lock_step(true), len.clone()),
        2 => prop::collection::vec(semaphore_step(false), len.clone()),
        1 => prop::collection::vec(semaphore_step(true), len.clone()),
        2 => prop::collection::vec(any_step(), len),
    ]
}

impl Op {
    /// The step's kind: its variant's name.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Lock { .. } => "Lock",
            Op::RLock { .. } => "RLock",
            Op::Semaphore { .. } => "Semaphore",
            Op::Unlock {
                kind: Kind::Upgradable,
                ..
            } => "UnlockUpgradable",
            Op::Unlock { .. } => "Unlock",
            Op::Upgradable { .. } => "Upgradable",
            Op::Upgrade { op, .. } => match op {
                upgrade::Op::Wait => "UpgradeWait",
                upgrade::Op::Try => "UpgradeTry",
                upgrade::Op::Plain => "UpgradePlain",
            },
            Op::Refresh { .. } => "Refresh",
            Op::Renew { ids, .. } if ids.iter().any(|&(_, h)| h == Hint::Upgradable) => {
                "RenewUpgradable"
            }
            Op::Renew { .. } => "Renew",
            Op::Describe { locks, .. } if locks.len() > 1 => "DescribeAll",
            Op::Describe { .. } => "Describe",
            Op::Exec { locks, .. } if locks.len() > 1 => "ExecAll",
            Op::Exec { .. } => "Exec",
            Op::LockAll { .. } => "LockAll",
            Op::Attach { parts, .. } => match parts[..] {
                [(_, Mode::Writer)] => "AttachWrite",
                [(_, Mode::Reader)] => "AttachRead",
                [(_, Mode::Permit)] => "AttachPermit",
                _ => "AttachAll",
            },
            Op::OnLock1(op) => match **op {
                Op::Lock { .. } => "Lock@1",
                Op::RLock { .. } => "RLock@1",
                Op::Unlock { .. } => "Unlock@1",
                _ => "Renew@1",
            },
            Op::ForceUnlock => "ForceUnlock",
            Op::Leader => "Leader",
            Op::Inspect { .. } => "Inspect",
            Op::Proclaim { .. } => "Proclaim",
            Op::Downgrade { .. } => "Downgrade",
            Op::Fence { .. } => "Fence",
            Op::Retake { .. } => "Retake",
            Op::GoWrite { .. } => "GoWrite",
            Op::GoRead { .. } => "GoRead",
            Op::GoRefresh { .. } => "GoRefresh",
            Op::GoUnlock { .. } => "GoUnlock",
            Op::Advance { .. } => "Advance",
            Op::Restart => "Restart",
            Op::Persist { .. } => "Persist",
            Op::Hash { .. } => "Hash",
            Op::Junk { .. } => "Junk",
            Op::Exhausted { .. } => "Exhausted",
        }
    }

    /// The step taken on the model: its reply (`None` for the steps that are no script).
    pub fn on_model(&self, s: &mut Store) -> Option<Reply> {
        Some(match self {
            Op::Lock { take, intent } => lock::lock(s, *take, *intent),
            Op::RLock { take, counting } => rlock::rlock(s, *take, *counting),
            Op::Semaphore { take, permits } => semaphore::semaphore(s, *take, *permits),
            Op::Unlock {
                id,
                kind,
                extra,
                described,
            } => unlock::unlock_described(s, *id, *kind, *extra, *described),
            Op::Upgradable { take } => upgradable::upgradable(s, *take),
            Op::Upgrade { take, op } => upgrade::upgrade(s, *take, *op),
            Op::Refresh { id, ttl } => refresh::refresh(s, *id, *ttl),
            Op::Renew {
                ids,
                ttl,
                described,
            } => refresh::renew_described(s, ids, *ttl, *described),
            Op::Describe { id, ttl, locks } => describe::describe(s, locks, *id, *ttl),
            Op::Exec {
                id,
                locks,
                commands,
            } => exec::exec(s, *id, locks, commands),
            Op::LockAll { take } => lock_all::lock_all(s, take),
            Op::Attach {
                old,
                new,
                ttl,
                parts,
            } => attach::attach(s, *old, *new, *ttl, parts),
            Op::OnLock1(op) => return s.on_lock(1, |s| op.on_model(s)),
            Op::ForceUnlock => force::force_unlock(s),
            Op::Leader => election::leader(s),
            Op::Inspect { semaphore } => inspect::inspect(s, *semaphore),
            Op::Proclaim {
                id,
                token,
                value,
                px,
            } => election::proclaim(s, *id, record(*token, *id, *value), *px),
            Op::Downgrade { id, ttl } => downgrade::downgrade(s, *id, *ttl),
            Op::Fence { token, retention } => quorum::fence(s, token.resolve(s), *retention),
            Op::Retake {
                id,
                ttl,
                writer,
                token,
                retention,
            } => {
                let token = token.resolve(s);
                quorum::retake(s, *id, *ttl, *writer, token, *retention)
            }
            Op::GoWrite { id, ttl, intent } => go::write(s, *id, *ttl, *intent),
            Op::GoRead { id, ttl } => go::read(s, *id, *ttl),
            Op::GoRefresh { id, ttl } => go::refresh(s, *id, *ttl),
            Op::GoUnlock { id } => go::unlock(s, *id),
            Op::Advance { ms } => {
                s.shift(*ms);
                return None;
            }
            Op::Restart => {
                s.keys.clear();
                return None;
            }
            Op::Persist { key } => {
                s.persist(*key);
                return None;
            }
            Op::Hash { key } => {
                let expires = Some(s.now + HOSTILE_PX);
                s.keys.insert(
                    *key,
                    Entry {
                        val: Val::Hash,
                        expires,
                    },
                );
                return None;
            }
            Op::Junk { key } => {
                s.set(*key, Text::Junk, Some(HOSTILE_PX));
                return None;
            }
            Op::Exhausted { key, below } => {
                s.set(*key, Text::Int(exhausted(*below)), Some(HOSTILE_PX));
                return None;
            }
        })
    }
}

/// An election's record.
pub fn record(token: u64, id: Id, value: u8) -> Text {
    Text::Record { token, id, value }
}

/// 2^53 - 1, or one below it.
pub fn exhausted(below: bool) -> u64 {
    MAX_TOKEN - u64::from(below)
}
