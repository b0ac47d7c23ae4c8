//! Static checks that the public types and futures are Send/Sync as promised.

use std::future::IntoFuture;

use redis::aio::{ConnectionManager, MultiplexedConnection};
use redismutex::{
    Acquire, Builder, Campaign, CancelReason, Election, Error, Guard, Leader, Leadership, Mode,
    Notifier, Permit, Quorum, Refusal, RwMutex, Semaphore, TryAcquire,
};

fn send_sync<T: Send + Sync>() {}
fn send<T: Send>(_: &T) {}
fn static_lifetime<T: 'static>(_: &T) {}

#[test]
fn public_types_are_send_and_sync() {
    send_sync::<Guard>();
    send_sync::<Error>();
    send_sync::<Mode>();
    send_sync::<CancelReason>();
    send_sync::<Refusal>();
    send_sync::<RwMutex<MultiplexedConnection>>();
    send_sync::<RwMutex<ConnectionManager>>();
    send_sync::<Builder<MultiplexedConnection>>();
    send_sync::<Acquire<MultiplexedConnection>>();
    send_sync::<TryAcquire<ConnectionManager>>();
    send_sync::<Permit>();
    send_sync::<Semaphore<MultiplexedConnection>>();
    send_sync::<Builder<MultiplexedConnection, Semaphore<MultiplexedConnection>>>();
    send_sync::<Acquire<MultiplexedConnection, Permit>>();
    send_sync::<TryAcquire<ConnectionManager, Permit>>();
    send_sync::<Quorum<MultiplexedConnection>>();
    send_sync::<RwMutex<Quorum<MultiplexedConnection>>>();
    send_sync::<Builder<Quorum<ConnectionManager>>>();
    send_sync::<Acquire<Quorum<MultiplexedConnection>>>();
    send_sync::<Notifier>();
    send_sync::<Election<MultiplexedConnection>>();
    send_sync::<Election<Quorum<MultiplexedConnection>>>();
    send_sync::<Builder<MultiplexedConnection, Election<MultiplexedConnection>>>();
    send_sync::<Campaign<MultiplexedConnection>>();
    send_sync::<Leadership>();
    send_sync::<Leader>();
}

#[allow(dead_code, clippy::let_underscore_future)]
fn election_futures_are_send_and_static(
    election: Election<Quorum<MultiplexedConnection>>,
    leadership: Leadership,
) {
    let campaign = election.campaign("v").into_future();
    send(&campaign);
    static_lifetime(&campaign);
    send(&election.try_campaign("v"));
    send(&election.leader());
    send(&election.observe());
    send(&leadership.proclaim("v"));
    send(&leadership.resign());
}

#[allow(dead_code, clippy::let_underscore_future)]
fn quorum_futures_are_send_and_static(mx: RwMutex<Quorum<MultiplexedConnection>>) {
    let write = mx.write().into_future();
    send(&write);
    static_lifetime(&write);
    let try_read = mx.try_read().into_future();
    send(&try_read);
    static_lifetime(&try_read);
}

#[allow(dead_code, clippy::let_underscore_future)]
fn futures_are_send_and_static(mx: RwMutex<MultiplexedConnection>, guard: Guard, other: Guard) {
    let write = mx.write().into_future();
    send(&write);
    static_lifetime(&write);
    let try_read = mx.try_read().into_future();
    send(&try_read);
    static_lifetime(&try_read);
    send(&guard.cancelled());
    send(&guard.unlock());
    let downgrade = other.downgrade();
    send(&downgrade);
    static_lifetime(&downgrade);
}

#[allow(dead_code, clippy::let_underscore_future)]
fn permit_futures_are_send_and_static(sem: Semaphore<MultiplexedConnection>, permit: Permit) {
    let acquire = sem.acquire().into_future();
    send(&acquire);
    static_lifetime(&acquire);
    let try_acquire = sem.try_acquire().into_future();
    send(&try_acquire);
    static_lifetime(&try_acquire);
    send(&permit.cancelled());
    send(&permit.unlock());
}

#[allow(dead_code, clippy::let_underscore_future)]
fn inspect_futures_are_send(
    mx: RwMutex<MultiplexedConnection>,
    quorum: RwMutex<Quorum<ConnectionManager>>,
    sem: Semaphore<ConnectionManager>,
) {
    send_sync::<redismutex::LockState>();
    send(&mx.inspect("42"));
    send(&quorum.inspect("42"));
    send(&sem.inspect(""));
}
