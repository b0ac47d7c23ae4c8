//! Feature `blocking`: the mutex and the semaphore from plain threads, without a runtime of
//! the test's own (waiting, timeouts, refresh past the TTL, drop releasing, semaphores,
//! guarded pipelines), a call from inside a Tokio runtime, a dead or frozen server, a
//! program with no tokio dependency of its own; and README's "Use it in your project",
//! built as written: the projects a stranger writes. Each test starts its own server on a free
//! loopback port (`tests/common/server.rs`).
#![cfg(feature = "blocking")]

#[path = "../common/server.rs"]
#[allow(dead_code, unreachable_pub)]
mod server;

mod fixture;
mod lock;
mod readme;
// The program `user` builds, compiled here too so that fmt and clippy see it.
#[allow(dead_code)]
mod program;
mod semaphore;
mod server_faults;
mod user;

/// The blocking handles and guards can be shared and sent between threads.
#[test]
fn the_blocking_types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<redismutex::blocking::RwMutex>();
    send_sync::<redismutex::blocking::Semaphore>();
    send_sync::<redismutex::blocking::Builder<redismutex::blocking::RwMutex>>();
    send_sync::<redismutex::blocking::Builder<redismutex::blocking::Semaphore>>();
    send_sync::<redismutex::blocking::WriteGuard>();
    send_sync::<redismutex::blocking::ReadGuard>();
    send_sync::<redismutex::blocking::Permit>();
    send_sync::<redismutex::blocking::UpgradableReadGuard>();
}
