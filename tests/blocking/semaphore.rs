//! The blocking semaphore: permits counted across threads, timeouts, returns.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use redismutex::blocking::Semaphore;
use redismutex::Error;

use crate::fixture::{eventually, RedisServer, LIVENESS};

#[test]
fn permits_are_counted_and_a_returned_one_wakes_a_waiter() {
    let server = RedisServer::start();
    let pool = Semaphore::builder(server.client(), "pool", 2)
        .build()
        .unwrap();
    let a = pool.acquire("exports").unwrap();
    let b = pool
        .try_acquire("exports")
        .unwrap()
        .expect("a second permit");
    assert!(pool.try_acquire("exports").unwrap().is_none(), "only two");
    let err = pool
        .acquire_timeout("exports", Duration::from_millis(200))
        .unwrap_err();
    assert!(matches!(err, Error::Timeout), "{err:?}");
    assert_eq!(pool.inspect("exports").unwrap().permits_in_use(), 2);
    let (took, got) = mpsc::channel();
    let waiter = {
        let pool = pool.clone();
        std::thread::spawn(move || {
            let permit = pool.acquire("exports").unwrap();
            took.send(Instant::now()).unwrap();
            permit.fencing_token()
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(got.try_recv().is_err(), "the waiter got a third permit");
    assert!(a.unlock().unwrap());
    got.recv_timeout(LIVENESS)
        .expect("the waiter got the returned permit");
    assert!(waiter.join().unwrap() > b.fencing_token());
    // `b` and the waiter's permit, dropped: their returns are handed to the background
    // thread, and both permits come free.
    drop(b);
    assert!(eventually(|| pool
        .inspect("exports")
        .unwrap()
        .permits_in_use()
        == 0));
    let (c, d) = (
        pool.try_acquire("exports").unwrap(),
        pool.try_acquire("exports").unwrap(),
    );
    assert!(c.is_some() && d.is_some());
}

#[test]
fn zero_permits_is_refused_when_built() {
    let server = RedisServer::start();
    let err = Semaphore::builder(server.client(), "pool", 0)
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::InvalidOptions(_)), "{err:?}");
}
