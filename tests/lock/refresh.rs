//! The refresher: the task each mutex runs on each runtime that renews every lock its
//! guards hold, in batches, until the guard goes. For one guard (`guard.rs`) it keeps
//! the lock past many TTLs, notices a lock lost or taken over, fires the token by the
//! validity deadline when it cannot renew in time, and never shortens a TTL or touches a
//! foreign key; as a task (`refresher.rs`) it renews many guards with few scripts and
//! gives each its own outcome, releases what a cancelled token leaves, keeps each
//! runtime's guards apart, and ends when nothing is held.

mod guard;
mod refresher;
