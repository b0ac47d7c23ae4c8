//! The blocking mutex from plain threads: waiting woken by the release, timeouts, shared
//! readers, refresh past the TTL, drop releasing at once, guarded pipelines, downgrade,
//! upgradable reads.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use redismutex::Error;

use crate::fixture::{eventually, exists, mutex, pttl, raw, RedisServer, LIVENESS};

#[test]
fn a_waiting_writer_is_woken_by_the_release_not_by_its_fallback_timer() {
    let server = RedisServer::start();
    // A 20 s TTL: the fallback timer of a waiter is at least 10 s away.
    let mx = mutex(&server, "jobs", Duration::from_secs(20));
    let held = mx.write("nightly").unwrap();
    let (started, took) = (mpsc::channel(), mpsc::channel());
    let waiter = {
        let mx = mx.clone();
        std::thread::spawn(move || {
            started.0.send(()).unwrap();
            let guard = mx.write("nightly").unwrap();
            took.0.send(Instant::now()).unwrap();
            guard.fencing_token()
        })
    };
    started.1.recv().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        took.1.try_recv().is_err(),
        "the waiter got in while the lock was held"
    );
    let released = Instant::now();
    let first = held.fencing_token();
    held.unlock().unwrap();
    let acquired = took.1.recv_timeout(LIVENESS).expect("the waiter acquired");
    let woken_in = acquired.duration_since(released);
    assert!(
        woken_in < Duration::from_secs(2),
        "woken after {woken_in:?}: polled, not woken"
    );
    assert!(
        waiter.join().unwrap() > first,
        "the later holder's token is larger"
    );
}

#[test]
fn a_timed_wait_gives_timeout_and_leaves_the_lock_to_its_holder() {
    let server = RedisServer::start();
    let mx = mutex(&server, "jobs", Duration::from_secs(4));
    let held = mx.write("").unwrap();
    let started = Instant::now();
    let err = mx
        .write_timeout("", Duration::from_millis(300))
        .unwrap_err();
    assert!(matches!(err, Error::Timeout), "{err:?}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(started.elapsed() < LIVENESS);
    assert!(matches!(
        mx.read_timeout("", Duration::from_millis(100)).unwrap_err(),
        Error::Timeout
    ));
    assert!(mx.try_write("").unwrap().is_none());
    assert!(mx.try_read("").unwrap().is_none());
    assert!(!held.is_cancelled());
    assert!(held.unlock().unwrap(), "still held by its holder");
}

#[test]
fn readers_share_the_lock_and_keep_writers_out() {
    let server = RedisServer::start();
    let mx = mutex(&server, "cache", Duration::from_secs(4));
    let a = mx.read("users").unwrap();
    let b = mx
        .try_read("users")
        .unwrap()
        .expect("a second reader gets in");
    assert_ne!(a.id(), b.id());
    assert!(
        mx.try_write("users").unwrap().is_none(),
        "a writer is kept out"
    );
    let state = mx.inspect("users").unwrap();
    assert_eq!(state.holders().len(), 2);
    drop(a);
    assert!(b.unlock().unwrap());
    assert!(
        mx.try_write("users").unwrap().is_some(),
        "free once both left"
    );
}

#[test]
fn a_guard_is_refreshed_past_its_ttl_by_the_background_thread() {
    let server = RedisServer::start();
    let mut conn = raw(&server);
    // Long enough for a refresh to be late on a loaded machine and still in time.
    let ttl = Duration::from_secs(1);
    let mx = mutex(&server, "jobs", ttl);
    let guard = mx.write("long").unwrap();
    // Four TTLs on a thread that does nothing for the guard: eight refreshes are due.
    std::thread::sleep(ttl * 4);
    assert!(!guard.is_cancelled(), "{:?}", guard.cancel_reason());
    assert!(guard.refreshes() >= 5, "{} refreshes", guard.refreshes());
    assert!(pttl(&mut conn, "jobs:long") > 0, "the key is still held");
    assert!(guard.valid_until() > Instant::now());
    let held: String = redis::cmd("GET").arg("jobs:long").query(&mut conn).unwrap();
    assert_eq!(held, guard.id());
    assert!(guard.unlock().unwrap());
    assert!(!exists(&mut conn, "jobs:long"));
}

#[test]
fn dropping_a_guard_returns_at_once_and_the_background_thread_releases_it() {
    let server = RedisServer::start();
    let mut conn = raw(&server);
    let mx = mutex(&server, "jobs", Duration::from_secs(30));
    let guard = mx.write("dropped").unwrap();
    let token = guard.cancellation_token().clone();
    let started = Instant::now();
    drop(guard);
    let took = started.elapsed();
    assert!(took < Duration::from_millis(100), "drop took {took:?}");
    assert!(token.is_cancelled(), "the cancellation token fired on drop");
    assert!(
        eventually(|| !exists(&mut conn, "jobs:dropped")),
        "released well before its 30 s TTL"
    );
}

#[test]
fn the_last_drop_of_a_handle_finishes_the_releases_in_flight() {
    let server = RedisServer::start();
    let mut conn = raw(&server);
    let mx = mutex(&server, "jobs", Duration::from_secs(30));
    let (a, b) = (mx.write("a").unwrap(), mx.read("b").unwrap());
    // The server holds every write for 300 ms: the releases are in flight that long.
    let () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(300)
        .arg("WRITE")
        .query(&mut conn)
        .unwrap();
    drop(a);
    drop(b);
    let started = Instant::now();
    drop(mx);
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "the last drop returned after {:?}, before the releases were answered",
        started.elapsed()
    );
    // No wait: a program that exits now leaves no lock behind.
    assert!(!exists(&mut conn, "jobs:a"));
    assert!(!exists(&mut conn, "jobs:b"));
}

#[test]
fn a_guard_outlives_its_handle_and_is_still_refreshed() {
    let server = RedisServer::start();
    let mut conn = raw(&server);
    let ttl = Duration::from_secs(1);
    let guard = mutex(&server, "jobs", ttl).write("orphan").unwrap();
    std::thread::sleep(ttl * 3);
    assert!(!guard.is_cancelled(), "{:?}", guard.cancel_reason());
    assert!(exists(&mut conn, "jobs:orphan"));
    drop(guard);
    // The guard was the last of its handle: its drop finished the release.
    assert!(!exists(&mut conn, "jobs:orphan"));
}

#[test]
fn guarded_pipelines_run_while_held_and_a_reader_cannot_write() {
    let server = RedisServer::start();
    let mut conn = raw(&server);
    let mx = mutex(&server, "cache", Duration::from_secs(4));
    let writer = mx.write("users:42").unwrap();
    let mut pipe = redis::pipe();
    pipe.set("data:users:42", "ada")
        .ignore()
        .incr("data:users:42:version", 1);
    let (version,): (i64,) = writer.exec(&pipe).unwrap();
    assert_eq!(version, 1);
    let reader = writer.downgrade().unwrap();
    let mut read = redis::pipe();
    read.get("data:users:42");
    let (body,): (String,) = reader.exec(&read).unwrap();
    assert_eq!(body, "ada");
    let err = reader.exec::<()>(&pipe).unwrap_err();
    assert!(matches!(err, Error::InvalidPipeline { .. }), "{err:?}");
    let version: i64 = redis::cmd("GET")
        .arg("data:users:42:version")
        .query(&mut conn)
        .unwrap();
    assert_eq!(version, 1, "the refused pipeline ran nothing");
    assert!(reader.unlock().unwrap());
}

#[test]
fn a_lost_lock_fires_the_cancellation_token_and_exec_is_refused() {
    let server = RedisServer::start();
    let mut conn = raw(&server);
    // A refresh every second finds the loss; the deadline is a second after that.
    let ttl = Duration::from_secs(2);
    let mx = mutex(&server, "jobs", ttl);
    let guard = mx.write("lost").unwrap();
    let _: i64 = redis::cmd("DEL").arg("jobs:lost").query(&mut conn).unwrap();
    assert!(
        eventually(|| guard.is_cancelled()),
        "the next refresh found it gone"
    );
    assert_eq!(guard.cancel_reason(), Some(redismutex::CancelReason::Lost));
    let mut pipe = redis::pipe();
    pipe.set("data", "late");
    assert!(matches!(
        guard.exec::<()>(&pipe),
        Err(Error::NotHeld { .. })
    ));
    assert!(!exists(&mut conn, "data"));
    assert!(!guard.unlock().unwrap(), "it had been lost");
}

#[test]
fn an_upgradable_reader_shares_with_readers_and_upgrades_once_they_leave() {
    let server = RedisServer::start();
    let mx = mutex(&server, "cache", Duration::from_secs(4));
    let upgradable = mx.upgradable_read("users").unwrap();
    let reader = mx.try_read("users").unwrap().expect("a reader shares it");
    assert!(mx.try_write("users").unwrap().is_none());
    assert!(mx.try_upgradable_read("users").unwrap().is_none());
    let upgradable = match upgradable.try_upgrade().unwrap() {
        Ok(_) => panic!("upgraded beside a reader"),
        Err(upgradable) => upgradable,
    };
    let token = upgradable.fencing_token();
    // The reader leaves from another thread while the upgrade waits.
    let leaving = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        reader.unlock()
    });
    let writer = upgradable.upgrade().unwrap();
    assert!(leaving.join().unwrap().unwrap());
    assert!(writer.fencing_token() > token);
    assert!(mx.try_read("users").unwrap().is_none());
    let reader = writer.downgrade().unwrap();
    assert!(reader.unlock().unwrap());
    let upgradable = mx.upgradable_read("users").unwrap();
    let reader = upgradable.downgrade().unwrap();
    assert!(mx.try_upgradable_read("users").unwrap().is_some());
    drop(reader);
}

#[test]
fn a_set_is_taken_whole_from_a_plain_thread_and_released_by_drop() {
    let server = RedisServer::start();
    let mx = mutex(&server, "bank", Duration::from_secs(4));
    let mut conn = raw(&server);
    let held = mx.write("b").unwrap();
    assert!(mx.try_lock_all(&["a", "b"], &["rates"]).unwrap().is_none());
    assert!(!exists(&mut conn, "bank:a"), "a blocked set took a key");
    let timed_out = mx.lock_all_timeout(&["a", "b"], &[], Duration::from_millis(200));
    assert!(matches!(timed_out, Err(Error::Timeout)), "{timed_out:?}");
    drop(held);
    let set = mx.lock_all(&["a", "b"], &["rates"]).unwrap();
    assert!(set.fencing_token("a").is_some() && set.fencing_token("rates").is_some());
    assert_eq!(
        set.lock_keys().collect::<Vec<_>>(),
        ["bank:a", "bank:b", "bank:rates"]
    );
    let mut pipe = redis::pipe();
    pipe.cmd("INCR").arg("data");
    let (one,): (i64,) = set.exec(&pipe).unwrap();
    assert_eq!(one, 1);
    drop(set);
    assert!(eventually(
        || !exists(&mut conn, "bank:a") && !exists(&mut conn, "bank:rates")
    ));
    let set = mx
        .try_lock_all(&["a"], &["b"])
        .unwrap()
        .expect("free after the drop");
    assert!(set.unlock().unwrap());
}

#[test]
fn a_detached_lock_attaches_on_another_blocking_handle_and_is_refreshed_there() {
    let server = RedisServer::start();
    let mut conn = raw(&server);
    let here = mutex(&server, "jobs", LIVENESS);
    let ttl = Duration::from_millis(400);
    let there = mutex(&server, "jobs", ttl);
    let guard = here.write("nightly").unwrap();
    let cancel = guard.cancellation_token().clone();
    let text = guard.detach().to_string();
    assert!(cancel.is_cancelled());
    assert!(exists(&mut conn, "jobs:nightly"), "held until its TTL");
    let lease: redismutex::Lease = text.parse().unwrap();
    let attached = there.attach_write(&lease).unwrap();
    assert_ne!(attached.id(), lease.id());
    std::thread::sleep(ttl * 3);
    assert!(!attached.is_cancelled(), "{:?}", attached.cancel_reason());
    assert!(pttl(&mut conn, "jobs:nightly") > 0);
    assert!(!there.release(&lease).unwrap(), "the old id holds nothing");
    let again = there.attach_write(&lease).unwrap_err();
    assert!(matches!(again, Error::NotHeld { .. }), "{again}");
    let read = here.read("report").unwrap().detach();
    assert!(there.renew(&read).unwrap());
    assert!(there.release(&read).unwrap());
    assert!(attached.unlock().unwrap());
    assert!(!exists(&mut conn, "jobs:nightly"));
}

#[test]
fn the_blocking_builder_describes_holders_and_the_release_removes_it() {
    let server = RedisServer::start();
    let mx = redismutex::blocking::RwMutex::builder(server.client(), "described")
        .holder_label("nightly")
        .build()
        .unwrap();
    let held = mx.write("job").unwrap();
    let state = mx.inspect("job").unwrap();
    let info = state.holder_info(held.id()).expect("described");
    assert_eq!(
        (info.pid(), info.label()),
        (std::process::id(), Some("nightly"))
    );
    let mut conn = raw(&server);
    assert!(exists(&mut conn, "described:job:holders"));
    held.unlock().unwrap();
    assert!(!exists(&mut conn, "described:job:holders"));
    let plain = mutex(&server, "plain", Duration::from_secs(4));
    let _held = plain.write("job").unwrap();
    assert!(!exists(&mut conn, "plain:job:holders"), "off by default");
}
