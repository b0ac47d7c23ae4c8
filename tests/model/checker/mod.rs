//! The protocol as a state machine for the model checker (`stateright`): clients of both
//! packages taking the scripts' steps (`crate::scripts`) on one server's keys, time
//! passing, and the faults whose absence the guarantees assume. `properties.rs` says what
//! must hold; `runs.rs` checks each configuration breadth-first to a stated depth.

#![allow(dead_code)]

pub mod client;
mod ids;
mod leases;
pub mod properties;
mod runs;
mod step;

use client::{Mode, Package, Phase};
use stateright::{Model, Property};

use crate::store::{Id, Store};

/// The model's clock starts here (ms), so that TIME in microseconds is 10^15: tokens
/// read off the clock are then as large as the server's.
pub const START: i64 = 1_000_000_000_000;

/// One client's package and what it may ask for.
#[derive(Clone, Debug)]
pub struct ClientSpec {
    pub package: Package,
    pub modes: Vec<Mode>,
    /// The lock (0 or 1: `Key::on`) its single-key steps take; a set ([`Mode::Set`])
    /// takes both. Lock 1 has no queue, upgrader or data: its clients read and write
    /// only, not fair, not by the fast path.
    pub lock: usize,
}

/// A configuration of the model: who takes part, the TTL and margins, what may happen.
#[derive(Clone, Debug)]
pub struct Config {
    pub clients: Vec<ClientSpec>,
    /// The TTL in ticks (the model's ms).
    pub ttl: i64,
    /// The validity margin in ticks: a guard's deadline is `ttl - margin` after the
    /// request was sent (the crate's 1 % drift margin, at least one tick).
    pub margin: i64,
    /// The fence key's retention (PX) in ticks.
    pub retention: i64,
    /// Writers set the lock intent when blocked (`Builder::lock_intent`).
    pub intent: bool,
    /// Fair mode (`Builder::fair`): requests name the queue and wait in it.
    pub fair: bool,
    /// The semaphore's permits (when a client asks for [`Mode::Permit`]).
    pub permits: i64,
    /// Holders may run guarded writes (`exec`) and the writer may proclaim an
    /// election's record.
    pub exec: bool,
    /// Idle clients may also make single attempts (`try_*`).
    pub tries: bool,
    /// Writers may take the write fast path (`SET NX`, then `INCR` of the fence, two
    /// steps), as the crate's do when the lock is not fair and the fence key was seen.
    pub fast: bool,
    /// An attempt's reply may come too late to be used (`Phase::Waiting::late`).
    pub late: bool,
    /// How many ticks in all the server's clock may gain on the clients' (the drift the
    /// margin must cover; `margin` in every run but the one that shows why).
    pub drift: i64,
    /// A seeded bug of the model (`crate::bugs`), for the runs that show each property
    /// can fail.
    pub bug: Option<crate::bugs::Bug>,
    /// Rust clients describe their holders (`Builder::describe_holder`): `describe.lua`
    /// after each attempt (in the same step: the same request), renewals keep the
    /// descriptions, releases delete them.
    pub describe: bool,
    /// The Go clients' TTL in ticks, when it is not `ttl` (a stated precondition: the
    /// same TTL for both packages).
    pub go_ttl: Option<i64>,
    /// Holders may detach (a lease: `Phase::Leased`), other clients attach a lease's
    /// text, and its holder release the hold by it (Rust's write, read, permit and set
    /// guards; not upgradable ones, which have no detach).
    pub leases: bool,
    /// Ticks the clock may advance in all.
    pub horizon: i64,
    /// Faults that break a stated precondition (none in a normal run).
    pub faults: Faults,
}

/// The preconditions a run may break, each an action of its own.
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    /// The server restarts without persistence: every key is gone.
    pub restart: bool,
    /// The server's clock jumps forward by a TTL (keys expire early for the clients).
    pub clock_forward: bool,
    /// The server's clock goes back by a TTL.
    pub clock_back: bool,
    /// An operator forces a release (`force_unlock`).
    pub force: bool,
}

/// A state: the server's keys, each client, and what the run has seen (`Seen`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub store: Store,
    pub clients: Vec<Phase>,
    /// How far the server's clock is ahead of the clients' (ms): the clock faults.
    pub skew: i64,
    /// Ticks left to pass.
    pub time_left: i64,
    pub seen: properties::Seen,
}

impl State {
    /// The clients' clock (ms).
    pub fn client_now(&self) -> i64 {
        self.store.now - self.skew
    }
}

/// One step of the run.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// A client that is idle or waiting attempts `mode`; `counting`: rlock.lua's
    /// counting path.
    Take {
        client: usize,
        mode: Mode,
        counting: bool,
    },
    /// An idle client makes one attempt (`try_write`, `try_read`, `try_acquire`): no
    /// intent, and in fair mode "try" (it does not join the queue); blocked, it stays idle.
    Try {
        client: usize,
        mode: Mode,
    },
    /// As `Take`, but the reply comes too late to be used: a grant stays on the server
    /// under the client's id, and the client waits on.
    Late {
        client: usize,
        mode: Mode,
        counting: bool,
    },
    /// A writer's fast path, first step: `SET lock id NX PX ttl`.
    Fast(usize),
    /// The fast path's second step: `SET fence 1 NX PX`, `INCR fence`.
    Mint(usize),
    /// A waiting client gives up (unlock.lua with its intent and queue place).
    GiveUp(usize),
    /// An observer reads who leads (leader.lua).
    Observe,
    /// A holder's renewal (renew.lua; Go's refresh).
    Renew(usize),
    /// A holder releases (unlock.lua; Go's unlock).
    Release(usize),
    /// A holder's guarded write (exec.lua, one INCR).
    Exec(usize),
    /// A writer proclaims its election record (proclaim.lua).
    Proclaim(usize),
    /// A writer downgrades (downgrade.lua).
    Downgrade(usize),
    /// An upgradable reader upgrades (upgrade.lua, "wait": `upgrade()`; "try":
    /// `try_upgrade()`). Offered to a fired guard too: a request sent before its token
    /// fired may run after.
    Upgrade {
        client: usize,
        wait: bool,
    },
    /// An upgradable reader becomes a plain reader (upgrade.lua, "plain").
    Plain(usize),
    /// A holder detaches its guard (sends nothing): it holds the lease's text.
    Detach(usize),
    /// An idle client attaches the lease whose text client `lease` holds (attach.lua,
    /// with a fresh id).
    Attach {
        client: usize,
        lease: usize,
    },
    /// The holder of a lease's text releases the hold by it (unlock.lua with the
    /// lease's id, per key).
    ReleaseLease(usize),
    /// One tick passes; tokens whose deadline passed fire.
    Tick,
    /// One tick passes on the server's clock only (drift within the margin).
    Drift,
    /// Faults.
    Restart,
    ClockForward,
    ClockBack,
    Force,
}

/// The model of one configuration.
#[derive(Clone, Debug)]
pub struct Protocol {
    pub config: Config,
}

impl Model for Protocol {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let mut store = Store::at(START);
        store.bug = self.config.bug;
        vec![State {
            store,
            clients: vec![Phase::Idle; self.config.clients.len()],
            skew: 0,
            time_left: self.config.horizon,
            seen: properties::Seen::default(),
        }]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        let c = &self.config;
        for (i, phase) in s.clients.iter().enumerate() {
            let spec = &c.clients[i];
            let rust = spec.package == Package::Rust;
            match phase {
                Phase::Idle => {
                    for &mode in &spec.modes {
                        self.takes(i, mode, out);
                        if rust && c.tries {
                            out.push(Action::Try { client: i, mode });
                        }
                    }
                }
                Phase::Waiting { mode, .. } => {
                    self.takes(i, *mode, out);
                    out.push(Action::GiveUp(i));
                }
                Phase::Minting { .. } => out.push(Action::Mint(i)),
                Phase::Leased { mode, .. } => {
                    out.push(Action::ReleaseLease(i));
                    for (j, other) in s.clients.iter().enumerate() {
                        let attacher = &c.clients[j];
                        // A guard of the attacher's lock (a set's: of both).
                        let fits = matches!(mode, Mode::Set { .. }) || attacher.lock == spec.lock;
                        if *other == Phase::Idle && attacher.package == Package::Rust && fits {
                            out.push(Action::Attach {
                                client: j,
                                lease: i,
                            });
                        }
                    }
                }
                Phase::Holding {
                    mode: Mode::Set { .. },
                    fired,
                    ..
                } => {
                    if !fired {
                        out.push(Action::Renew(i));
                    }
                    if c.leases {
                        out.push(Action::Detach(i));
                    }
                    out.push(Action::Release(i));
                }
                Phase::Holding { mode, fired, .. } => {
                    if !fired {
                        out.push(Action::Renew(i));
                        if *mode == Mode::Write && rust && spec.modes.contains(&Mode::Read) {
                            out.push(Action::Downgrade(i));
                        }
                        if *mode == Mode::Upgradable {
                            out.push(Action::Plain(i));
                        }
                    }
                    // `upgrade()` attempts again while it waits; `try_upgrade()` is
                    // made by a guard that does not wait yet.
                    if mode.upgradable() {
                        out.push(Action::Upgrade {
                            client: i,
                            wait: true,
                        });
                    }
                    if *mode == Mode::Upgradable {
                        out.push(Action::Upgrade {
                            client: i,
                            wait: false,
                        });
                    }
                    // A guarded write or a record may be sent before the token fires
                    // and run after: offered to fired guards too.
                    if c.exec && rust {
                        out.push(Action::Exec(i));
                        if *mode == Mode::Write {
                            out.push(Action::Proclaim(i));
                        }
                    }
                    // Detached as it is (a fired guard too); upgradable guards have no
                    // detach.
                    if c.leases && rust && !mode.upgradable() {
                        out.push(Action::Detach(i));
                    }
                    out.push(Action::Release(i));
                }
            }
        }
        if c.exec && s.store.exists(crate::store::Key::Record) {
            out.push(Action::Observe);
        }
        if s.time_left > 0 {
            out.push(Action::Tick);
            if (0..c.drift).contains(&s.skew) {
                out.push(Action::Drift);
            }
        }
        let f = c.faults;
        if f.restart && !s.store.keys.is_empty() {
            out.push(Action::Restart);
        }
        let jumped = !(0..=c.drift).contains(&s.skew);
        if f.clock_forward && !jumped {
            out.push(Action::ClockForward);
        }
        if f.clock_back && !jumped {
            out.push(Action::ClockBack);
        }
        if f.force && s.store.exists(crate::store::Key::Lock) {
            out.push(Action::Force);
        }
    }

    fn next_state(&self, s: &State, action: Action) -> Option<State> {
        let mut next = s.clone();
        step::apply(&self.config, &mut next, &action);
        let mut clients = std::mem::take(&mut next.clients);
        ids::canonical(&mut clients, &mut next.store);
        step::rank_places(&mut clients);
        next.clients = clients;
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties::all(self)
    }
}

impl Protocol {
    /// The attempts of client `client` at `mode`: the checked one, rlock.lua's counting
    /// path (not fair), each also with a late reply (`Config::late`), and a writer's fast
    /// path (`Config::fast`, not fair).
    fn takes(&self, client: usize, mode: Mode, out: &mut Vec<Action>) {
        let c = &self.config;
        let rust = c.clients[client].package == Package::Rust;
        let countings: &[bool] = if rust && mode == Mode::Read && !c.fair {
            &[false, true]
        } else {
            &[false]
        };
        for &counting in countings {
            out.push(Action::Take {
                client,
                mode,
                counting,
            });
            if c.late && rust {
                out.push(Action::Late {
                    client,
                    mode,
                    counting,
                });
            }
        }
        if c.fast && rust && mode == Mode::Write && !c.fair {
            out.push(Action::Fast(client));
        }
    }
}

/// The first id no client or key uses: a fresh random id, up to renaming (`ids.rs`:
/// the ids of a state are 0, 1, … in order of first appearance).
pub fn fresh_id(s: &State) -> Id {
    ids::in_use(&s.clients, &s.store)
}
