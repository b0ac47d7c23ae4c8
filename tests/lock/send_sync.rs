//! Static checks that the public types and futures are Send/Sync as promised.

use std::future::IntoFuture;

use redis::aio::{ConnectionManager, MultiplexedConnection};
use redismutex::{
    Acquire, AcquireFuture, Builder, Campaign, CancelReason, Election, Error, Guard, Leader,
    Leadership, Mode, Notifier, Permit, Quorum, ReadGuard, Refusal, RwMutex, Semaphore, TryAcquire,
    TryAcquireFuture, TryCampaign, UpgradableReadGuard, WriteGuard,
};

fn send_sync<T: Send + Sync>() {}
fn send<T: Send>(_: &T) {}
fn static_lifetime<T: 'static>(_: &T) {}

/// Every [`Guard`] is `Send + Sync + 'static` by the trait's bounds; this checks that the
/// four kinds implement it.
fn guard<G: Guard>() {
    send_sync::<G>();
}

#[test]
fn public_types_are_send_and_sync() {
    send_sync::<WriteGuard>();
    send_sync::<ReadGuard>();
    guard::<WriteGuard>();
    guard::<ReadGuard>();
    guard::<Permit>();
    guard::<UpgradableReadGuard>();
    send_sync::<Acquire<MultiplexedConnection, UpgradableReadGuard>>();
    send_sync::<TryAcquire<ConnectionManager, UpgradableReadGuard>>();
    send_sync::<Error>();
    send_sync::<Mode>();
    send_sync::<CancelReason>();
    send_sync::<Refusal>();
    send_sync::<RwMutex<MultiplexedConnection>>();
    send_sync::<RwMutex<ConnectionManager>>();
    send_sync::<Builder<MultiplexedConnection>>();
    send_sync::<Acquire<MultiplexedConnection, WriteGuard>>();
    send_sync::<Acquire<MultiplexedConnection, ReadGuard>>();
    send_sync::<TryAcquire<ConnectionManager, WriteGuard>>();
    send_sync::<TryAcquire<ConnectionManager, ReadGuard>>();
    send_sync::<Permit>();
    send_sync::<Semaphore<MultiplexedConnection>>();
    send_sync::<Builder<MultiplexedConnection, Semaphore<MultiplexedConnection>>>();
    send_sync::<Acquire<MultiplexedConnection, Permit>>();
    send_sync::<TryAcquire<ConnectionManager, Permit>>();
    send_sync::<Quorum<MultiplexedConnection>>();
    send_sync::<RwMutex<Quorum<MultiplexedConnection>>>();
    send_sync::<Builder<Quorum<ConnectionManager>>>();
    send_sync::<Acquire<Quorum<MultiplexedConnection>, WriteGuard>>();
    send_sync::<Acquire<Quorum<MultiplexedConnection>, ReadGuard>>();
    send_sync::<TryAcquire<Quorum<MultiplexedConnection>, WriteGuard>>();
    send_sync::<TryAcquire<Quorum<MultiplexedConnection>, ReadGuard>>();
    send_sync::<Notifier>();
    send_sync::<Election<MultiplexedConnection>>();
    send_sync::<Election<Quorum<MultiplexedConnection>>>();
    send_sync::<Builder<MultiplexedConnection, Election<MultiplexedConnection>>>();
    send_sync::<Campaign<MultiplexedConnection>>();
    send_sync::<TryCampaign<MultiplexedConnection>>();
    send_sync::<TryCampaign<Quorum<MultiplexedConnection>>>();
    send_sync::<Leadership>();
    send_sync::<Leader>();
    send_sync::<redismutex::Lease>();
}

/// The futures of a lease's operations are `Send`, on one connection and over a quorum.
#[allow(dead_code, clippy::let_underscore_future)]
fn lease_futures_are_send(
    mx: RwMutex<MultiplexedConnection>,
    quorum: RwMutex<Quorum<MultiplexedConnection>>,
    sem: Semaphore<MultiplexedConnection>,
    lease: redismutex::Lease,
) {
    send(&mx.attach_write(&lease));
    send(&mx.attach_read(&lease));
    send(&mx.attach_all(&lease));
    send(&mx.release(&lease));
    send(&mx.renew(&lease));
    send(&quorum.attach_write(&lease));
    send(&quorum.attach_all(&lease));
    send(&quorum.release(&lease));
    send(&quorum.renew(&lease));
    send(&sem.attach(&lease));
    send(&sem.release(&lease));
    send(&sem.renew(&lease));
}

/// The futures the requests give are `Send` (not `Sync`: boxed `dyn Future + Send`).
#[allow(dead_code)]
fn request_futures_are_send_and_static(
    write: AcquireFuture<WriteGuard>,
    read: AcquireFuture<ReadGuard>,
    try_write: TryAcquireFuture<WriteGuard>,
    try_read: TryAcquireFuture<ReadGuard>,
    permit: AcquireFuture<Permit>,
    try_permit: TryAcquireFuture<Permit>,
) {
    send(&write);
    static_lifetime(&write);
    send(&read);
    static_lifetime(&read);
    send(&try_write);
    static_lifetime(&try_write);
    send(&try_read);
    static_lifetime(&try_read);
    send(&permit);
    static_lifetime(&permit);
    send(&try_permit);
    static_lifetime(&try_permit);
}

#[allow(dead_code, clippy::let_underscore_future)]
fn election_futures_are_send_and_static(
    election: Election<Quorum<MultiplexedConnection>>,
    leadership: Leadership,
) {
    let campaign = election.campaign("v").into_future();
    send(&campaign);
    static_lifetime(&campaign);
    let try_campaign = election.try_campaign("v").into_future();
    send(&try_campaign);
    static_lifetime(&try_campaign);
    send(&election.leader());
    send(&election.observe());
    send(&leadership.proclaim("v"));
    send(&leadership.cancelled());
    let guard: &WriteGuard = leadership.guard();
    send(&guard.cancelled());
    send(&leadership.resign());
}

#[allow(dead_code, clippy::let_underscore_future)]
fn quorum_futures_are_send_and_static(mx: RwMutex<Quorum<MultiplexedConnection>>) {
    let write = mx.write().into_future();
    send(&write);
    static_lifetime(&write);
    let read = mx.read().into_future();
    send(&read);
    static_lifetime(&read);
    let try_write = mx.try_write().into_future();
    send(&try_write);
    static_lifetime(&try_write);
    let try_read = mx.try_read().into_future();
    send(&try_read);
    static_lifetime(&try_read);
}

#[allow(dead_code, clippy::let_underscore_future)]
fn futures_are_send_and_static(
    mx: RwMutex<MultiplexedConnection>,
    writer: WriteGuard,
    other: WriteGuard,
    reader: ReadGuard,
) {
    let write = mx.write().into_future();
    send(&write);
    static_lifetime(&write);
    let read = mx.read().into_future();
    send(&read);
    static_lifetime(&read);
    let try_write = mx.try_write().into_future();
    send(&try_write);
    static_lifetime(&try_write);
    let try_read = mx.try_read().into_future();
    send(&try_read);
    static_lifetime(&try_read);
    send(&writer.cancelled());
    send(&writer.exec::<()>(&redis::pipe()));
    send(&reader.cancelled());
    send(&reader.exec::<()>(&redis::pipe()));
    send(&reader.unlock());
    send(&writer.unlock());
    let downgrade = other.downgrade();
    send(&downgrade);
    static_lifetime(&downgrade);
}

/// The trait's futures are `Send` for any guard, so generic code can spawn them.
#[allow(dead_code, clippy::let_underscore_future)]
fn guard_futures_are_send<G: Guard>(guard: G) {
    send(&Guard::cancelled(&guard));
    send(&Guard::unlock(guard));
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
