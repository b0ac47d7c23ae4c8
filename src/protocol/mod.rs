//! The protocol on the wire: the keys of a lock (their names, checks and Redis Cluster
//! slots), its ids, the Lua scripts and the typed calls that run them, their replies,
//! and the fencing-token bookkeeping that lets a writer skip a script. It knows nothing
//! of waiting, guards or handles.

pub(crate) mod acks;
pub(crate) mod calls;
pub(crate) mod check;
pub(crate) mod command_keys;
pub(crate) mod describe;
pub(crate) mod exec;
pub(crate) mod fences;
pub(crate) mod force;
pub(crate) mod id;
pub(crate) mod inspect;
pub(crate) mod keys;
pub(crate) mod leader;
pub(crate) mod lua;
pub(crate) mod node_order;
pub(crate) mod replies;
pub(crate) mod slot;
pub(crate) mod topology;
