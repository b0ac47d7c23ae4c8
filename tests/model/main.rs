//! The protocol, modelled and checked (`docs/model.md`).
//!
//! - `store`: one server's keyspace for one lock key (and a second lock key's lock,
//!   intent and fence, for the sets of `lock_all.lua`), on an abstract clock.
//! - `scripts`: each script of `lua/` (and the Go package's four) as one atomic step on
//!   it, with exactly the script's decisions.
//! - `checker`: clients of every kind taking those steps, time passing, pauses and faults;
//!   the protocol's properties checked exhaustively (breadth-first, `stateright`) to a
//!   stated depth.
//! - `differential`: random sequences of operations (`proptest`) run on the model and on a
//!   real `redis-server` through the scripts of `lua/`; replies and keys must agree after
//!   every step.
//! - `mutants`: seeded bugs in copies of `lua/`, each of which the differential test must
//!   catch.
//!
//! `cargo test --test model` runs them all.

// The model's items are public to one another, not to a user.
#![allow(unreachable_pub)]

mod bugs;
mod checker;
mod differential;
mod history;
mod mutants;
mod scripts;
mod store;
