//! What the blocking API does where it must not block, and with a server that is gone:
//! inside a Tokio runtime, a server that is down at build, one that dies or freezes under
//! a request. Each ends in an error within a bound, never a hang.

use std::time::{Duration, Instant};

use redismutex::blocking::RwMutex;
use redismutex::Error;

use crate::fixture::{eventually, exists, mutex, raw, RedisServer, LIVENESS};

#[test]
fn inside_a_tokio_runtime_every_blocking_call_is_refused_with_nothing_sent() {
    let server = RedisServer::start();
    let mut conn = raw(&server);
    let mx = mutex(&server, "jobs", Duration::from_secs(30));
    let guard = mx.write("held").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let err = mx.write("other").unwrap_err();
        assert!(matches!(err, Error::InRuntime), "{err:?}");
        assert!(
            err.to_string().contains("redismutex::RwMutex"),
            "the message names the async API: {err}"
        );
        assert!(matches!(mx.try_read("other"), Err(Error::InRuntime)));
        assert!(matches!(mx.inspect("held"), Err(Error::InRuntime)));
        let build = RwMutex::builder(server.client(), "jobs").build();
        assert!(matches!(build, Err(Error::InRuntime)));
        let spawned = tokio::task::spawn_blocking({
            let mx = mx.clone();
            move || matches!(mx.try_write("other"), Err(Error::InRuntime))
        });
        assert!(
            spawned.await.unwrap(),
            "a spawn_blocking task has a runtime context too"
        );
        // Dropping a guard inside the runtime hands its release over without blocking.
        let started = Instant::now();
        drop(guard);
        assert!(started.elapsed() < Duration::from_millis(100));
    });
    assert!(!exists(&mut conn, "jobs:other"), "nothing was sent");
    assert!(
        eventually(|| !exists(&mut conn, "jobs:held")),
        "the dropped guard was released"
    );
}

#[test]
fn a_server_that_is_down_is_an_error_at_build_within_seconds() {
    // Port 1 (tcpmux): a privileged port no test server can take, where nothing listens.
    let client = redis::Client::open("redis://127.0.0.1:1/").unwrap();
    let started = Instant::now();
    let err = RwMutex::builder(client, "jobs").build().unwrap_err();
    assert!(matches!(err, Error::Redis { .. }), "{err:?}");
    assert!(started.elapsed() < LIVENESS, "took {:?}", started.elapsed());
}

#[test]
fn a_server_that_dies_or_freezes_gives_errors_not_hangs() {
    let mut server = RedisServer::start();
    let mx = mutex(&server, "jobs", Duration::from_secs(4));
    drop(mx.write("warm").unwrap());
    server.pause();
    let started = Instant::now();
    let err = mx.try_write("frozen").unwrap_err();
    assert!(started.elapsed() < LIVENESS, "took {:?}", started.elapsed());
    assert!(
        matches!(err, Error::Redis { .. } | Error::Timeout),
        "{err:?}"
    );
    server.resume();
    server.stop();
    let started = Instant::now();
    let err = mx.write("dead").unwrap_err();
    assert!(started.elapsed() < LIVENESS, "took {:?}", started.elapsed());
    assert!(matches!(err, Error::Redis { .. }), "{err:?}");
    drop(mx);
}

#[test]
fn the_last_drop_waits_a_bounded_time_for_a_release_the_server_never_answers() {
    let server = RedisServer::start();
    let mx = mutex(&server, "jobs", Duration::from_secs(30));
    let guard = mx.write("stuck").unwrap();
    server.pause();
    drop(guard); // its release is in flight to a frozen server
    let started = Instant::now();
    drop(mx);
    let took = started.elapsed();
    server.resume();
    // The release fails by the response timeout (500 ms), and the wait is at most 5 s.
    assert!(took < Duration::from_secs(7), "the last drop took {took:?}");
    assert!(
        took >= Duration::from_millis(300),
        "the last drop returned after {took:?}, before the release could end"
    );
}
