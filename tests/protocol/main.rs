//! What goes over the wire and what is stored: the Lua scripts run directly (`attach.lua`
//! in a module of its own), the Go package's protocol both ways, fencing tokens (the
//! counter, its keys, their order), input the crate refuses, and hostile names and
//! servers.

#[path = "../common/mod.rs"]
mod common;

mod attach;
mod bad_input;
mod fencing;
mod go_compat;
mod go_sets;
mod go_upgradable;
mod hostile;
mod leader_scripts;
mod scripts;
