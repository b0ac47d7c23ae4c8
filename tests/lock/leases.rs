//! Leases: a guard's hold detached as a `Lease`, its text form, and the hold attached,
//! released or renewed by another handle, in this process and in another one (this test
//! binary run again, `child_attaches_a_lease`).

use std::future::IntoFuture;
use std::process::Stdio;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redismutex::{CancelReason, Error, Lease, RwMutex, Semaphore, MAX_SET_KEYS};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::common;
use crate::common::{eventually, raw, RedisServer, LIVENESS};

/// The short TTL of the handles that attach: a refresh every 200 ms.
const TTL: Duration = Duration::from_millis(400);

fn mutex(conn: &MultiplexedConnection, ttl: Duration) -> RwMutex<MultiplexedConnection> {
    common::mutex(conn, "job", ttl)
}

fn semaphore(conn: &MultiplexedConnection, ttl: Duration) -> Semaphore<MultiplexedConnection> {
    Semaphore::builder(conn.clone(), "pool", 2)
        .ttl(ttl)
        .build()
        .expect("valid options")
}

/// The reason of an `InvalidLease`, with the key it names; panics on anything else.
fn invalid(result: Result<impl std::fmt::Debug, Error>) -> (Option<String>, String) {
    match result {
        Err(Error::InvalidLease { key, reason, .. }) => (key, reason),
        other => panic!("expected InvalidLease, got {other:?}"),
    }
}

#[test]
fn the_text_round_trips_and_the_parser_refuses_every_fault() {
    let id = "0123456789abcdef0123456789abcdef";
    let hex = |key: &str| hex::encode(key.as_bytes());
    let text = format!(
        "redismutex-lease:1:{id}:w:42:{},r:7:{}",
        hex("{a}:1"),
        hex("{a}:2")
    );
    let lease: Lease = text.parse().unwrap();
    assert_eq!(lease.to_string(), text, "round trip, exactly");
    assert_eq!(lease.id(), id);
    assert_eq!(lease.lock_keys().collect::<Vec<_>>(), ["{a}:1", "{a}:2"]);
    assert_eq!(lease.fencing_token("{a}:2"), Some(7));
    assert_eq!(lease.mode("{a}:1"), Some(redismutex::Mode::Write));
    assert_eq!(lease.mode("{a}:2"), Some(redismutex::Mode::Read));
    assert_eq!(lease.mode("{a}:3"), None);
    assert!(!lease.is_permit());
    let permit: Lease = format!("redismutex-lease:1:{id}:p:3:{}", hex("pool"))
        .parse()
        .unwrap();
    assert!(permit.is_permit());
    assert_eq!(permit.mode("pool"), None);
    assert_eq!(text.parse::<Lease>().unwrap(), lease);

    let good = hex("job");
    for (bad, key, says) in [
        (String::new(), None, "empty"),
        (
            format!("redismutex-lease:2:{id}:w:1:{good}"),
            None,
            "version \"2\"",
        ),
        (
            format!("redismutex-lease:1:{}:w:1:{good}", &id[1..]),
            None,
            "id",
        ),
        (
            format!("redismutex-lease:1:{}:w:1:{good}", id.to_uppercase()),
            None,
            "id",
        ),
        (format!("redismutex-lease:1:{id}:w:1:6a6fzz"), None, "hex"),
        (format!("redismutex-lease:1:{id}:w:1:6A6F62"), None, "hex"),
        (format!("redismutex-lease:1:{id}:q:1:{good}"), None, "mode"),
        (format!("redismutex-lease:1:{id}:w:x:{good}"), None, "token"),
        (format!("redismutex-lease:1:{id}"), None, "no lock key"),
        (
            format!("redismutex-lease:1:{id}:w:1:{good},r:2:{good}"),
            Some("job"),
            "twice",
        ),
        (
            format!("redismutex-lease:1:{id}:w:1:{}", hex("job:fence")),
            Some("job:fence"),
            "fence",
        ),
    ] {
        let (named, reason) = invalid(bad.parse::<Lease>());
        assert_eq!(named.as_deref(), key, "{bad}");
        assert!(reason.contains(says), "{bad}: {reason}");
    }
    let (_, reason) = invalid(format!("redismutex-lease:2:{id}:w:1:{good}").parse::<Lease>());
    assert_eq!(
        reason,
        "format version \"2\" is not known to this release; it reads version 1"
    );
    let many: Vec<String> = (0..=MAX_SET_KEYS)
        .map(|n| format!("w:1:{}", hex(&format!("k{n}"))))
        .collect();
    let (_, reason) =
        invalid(format!("redismutex-lease:1:{id}:{}", many.join(",")).parse::<Lease>());
    assert!(reason.contains("at most 1000"), "{reason}");
}

#[tokio::test]
async fn a_detached_lock_stays_held_its_refresher_stops_and_it_attaches_under_a_new_id() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let here = mutex(&conn, Duration::from_secs(1));
    let guard = here.write().key("1").await.unwrap();
    let (old, token) = (guard.id().to_owned(), guard.fencing_token());
    let cancel = guard.cancellation_token().clone();
    let lease = guard.detach();
    assert!(cancel.is_cancelled(), "detach fires the token");
    assert_eq!(
        (lease.id(), lease.fencing_token("job:1")),
        (&*old, Some(token))
    );
    assert_eq!(
        raw::get(&conn, "job:1").await.as_deref(),
        Some(&*old),
        "still held"
    );
    // Past the moment a renewal was due (ttl/2), none came: one would have set the
    // PTTL back near 1,000 ms.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let pttl = raw::pttl(&conn, "job:1").await;
    assert!((1..=420).contains(&pttl), "the PTTL falls: {pttl} ms");

    let there = mutex(&conn, TTL);
    let text = lease.to_string();
    let guard = there.attach_write(&text.parse().unwrap()).await.unwrap();
    assert_ne!(guard.id(), old);
    assert_eq!(guard.fencing_token(), token, "the lease's token");
    assert_eq!(raw::get(&conn, "job:1").await.as_deref(), Some(guard.id()));
    // Refreshed here past several TTLs.
    tokio::time::sleep(TTL * 4).await;
    assert!(!guard.is_cancelled(), "{:?}", guard.cancel_reason());
    assert!(guard.refreshes() >= 5, "{} refreshes", guard.refreshes());
    assert_eq!(raw::get(&conn, "job:1").await.as_deref(), Some(guard.id()));
    // A guarded write runs under the attached hold, as under one taken here.
    let mut pipe = redis::pipe();
    pipe.set("data:1", "v").get("data:1");
    let ((), value): ((), String) = guard.exec(&pipe).await.unwrap();
    assert_eq!(value, "v");
    assert!(guard.unlock().await.unwrap());
    assert!(!raw::exists(&conn, "job:1").await);
}

#[tokio::test]
async fn a_reader_a_set_and_a_permit_attach_in_their_modes() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (here, there) = (mutex(&conn, LIVENESS), mutex(&conn, TTL));

    let reader = here.read().key("r").await.unwrap();
    let other = here.read().key("r").await.unwrap();
    let old = reader.id().to_owned();
    let attached = there.attach_read(&reader.detach()).await.unwrap();
    let mut members = raw::members(&conn, "job:r").await;
    members.sort();
    let mut expected = vec![attached.id().to_owned(), other.id().to_owned()];
    expected.sort();
    assert_eq!(members, expected, "the old reader {old} replaced");

    let set = here.lock_all().write(["a"]).read(["b"]).await.unwrap();
    let tokens = (set.fencing_token("a"), set.fencing_token("b"));
    let old = set.id().to_owned();
    let attached_set = there.attach_all(&set.detach()).await.unwrap();
    assert_ne!(attached_set.id(), old);
    assert_eq!(
        raw::get(&conn, "job:a").await.as_deref(),
        Some(attached_set.id())
    );
    assert_eq!(raw::members(&conn, "job:b").await, [attached_set.id()]);
    let got = (
        attached_set.fencing_token("job:a"),
        attached_set.fencing_token("job:b"),
    );
    assert_eq!(got, tokens);

    let (sem_here, sem_there) = (semaphore(&conn, LIVENESS), semaphore(&conn, TTL));
    let permit = sem_here.acquire().await.unwrap();
    let old = permit.id().to_owned();
    let attached_permit = sem_there.attach(&permit.detach()).await.unwrap();
    let score: Option<f64> = raw::cmd(&conn, "ZSCORE", &["pool", &old]).await;
    assert_eq!(score, None, "the old permit is gone");
    let score: Option<f64> = raw::cmd(&conn, "ZSCORE", &["pool", attached_permit.id()]).await;
    assert!(score.is_some());

    tokio::time::sleep(TTL * 3).await;
    assert!(!attached.is_cancelled() && !attached_set.is_cancelled());
    assert!(!attached_permit.is_cancelled());
    assert!(attached.unlock().await.unwrap());
    assert!(attached_set.unlock().await.unwrap());
    assert!(attached_permit.unlock().await.unwrap());
    assert!(other.unlock().await.unwrap());
}

#[tokio::test]
async fn a_lease_attaches_once_and_a_stale_expired_or_forced_one_is_not_held() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (here, a, b) = (mutex(&conn, LIVENESS), mutex(&conn, TTL), mutex(&conn, TTL));
    let lease = here.write().key("1").await.unwrap().detach();
    let (first, second) = tokio::join!(a.attach_write(&lease), b.attach_write(&lease));
    let (won, lost) = match (first, second) {
        (Ok(won), Err(lost)) | (Err(lost), Ok(won)) => (won, lost),
        other => panic!("exactly one attach wins: {other:?}"),
    };
    assert!(
        matches!(lost, Error::NotHeld { ref key, .. } if key == "job:1"),
        "{lost}"
    );
    let stale = a.attach_write(&lease).await.unwrap_err();
    assert!(matches!(stale, Error::NotHeld { .. }), "{stale}");
    assert!(!won.is_cancelled(), "the stale attach changed nothing");

    let short = mutex(&conn, Duration::from_millis(100));
    let expired = short.write().key("2").await.unwrap().detach();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let err = a.attach_write(&expired).await.unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "expired: {err}");

    let forced = here.write().key("3").await.unwrap().detach();
    assert!(here.force_unlock("3").await.unwrap());
    let err = a.attach_write(&forced).await.unwrap_err();
    assert!(
        matches!(err, Error::NotHeld { .. }),
        "force-released: {err}"
    );

    // A guard whose token fired (its refresher released the lock) still detaches.
    let cancelled = here.write().key("4").await.unwrap();
    cancelled.cancellation_token().cancel();
    assert!(eventually(|| async { !raw::exists(&conn, "job:4").await }).await);
    let err = a.attach_write(&cancelled.detach()).await.unwrap_err();
    assert!(
        matches!(err, Error::NotHeld { .. }),
        "cancelled first: {err}"
    );
    assert!(won.unlock().await.unwrap());
}

#[tokio::test]
async fn a_lease_of_the_wrong_mode_or_shape_is_refused_before_anything_is_sent() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = mutex(&conn, LIVENESS);
    let sem = semaphore(&conn, LIVENESS);
    let write = mx.write().key("w").await.unwrap().detach();
    let read = mx.read().key("r").await.unwrap().detach();
    let set = mx.lock_all().write(["s1", "s2"]).await.unwrap().detach();
    let permit = sem.acquire().await.unwrap().detach();

    assert_eq!(
        invalid(mx.attach_write(&read).await).0.as_deref(),
        Some("job:r")
    );
    assert_eq!(
        invalid(mx.attach_read(&write).await).0.as_deref(),
        Some("job:w")
    );
    assert!(invalid(mx.attach_write(&set).await)
        .1
        .contains("attach_all"));
    assert_eq!(
        invalid(mx.attach_all(&permit).await).0.as_deref(),
        Some("pool")
    );
    assert_eq!(
        invalid(mx.release(&permit).await).0.as_deref(),
        Some("pool")
    );
    assert_eq!(
        invalid(sem.attach(&write).await).0.as_deref(),
        Some("job:w")
    );
    assert_eq!(invalid(sem.renew(&read).await).0.as_deref(), Some("job:r"));
    // Nothing moved: each lease still attaches in its own mode.
    assert!(mx
        .attach_write(&write)
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap());
    assert!(mx.attach_read(&read).await.unwrap().unlock().await.unwrap());
    assert!(mx.attach_all(&set).await.unwrap().unlock().await.unwrap());
    assert!(sem.attach(&permit).await.unwrap().unlock().await.unwrap());
}

#[tokio::test]
async fn release_frees_only_the_leases_hold_and_renew_keeps_its_id() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (mx, long) = (mutex(&conn, TTL), mutex(&conn, LIVENESS));
    let held = mx.write().key("1").await.unwrap().detach();
    assert!(long.release(&held).await.unwrap());
    assert!(!raw::exists(&conn, "job:1").await);
    assert!(!long.release(&held).await.unwrap(), "released already");

    // A newer holder of the key keeps it.
    let short = mutex(&conn, Duration::from_millis(100));
    let old = short.write().key("2").await.unwrap().detach();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let newer = long.write().key("2").await.unwrap();
    assert!(!long.release(&old).await.unwrap());
    assert_eq!(raw::get(&conn, "job:2").await.as_deref(), Some(newer.id()));
    assert!(!newer.is_cancelled());

    // Renew: the PTTL rises to the renewing handle's TTL, the id stays.
    let lease = mx.read().key("3").await.unwrap().detach();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(long.renew(&lease).await.unwrap());
    let pttl = raw::pttl(&conn, "job:3").await;
    assert!(pttl > 4_000, "renewed with the 5 s TTL: {pttl} ms");
    assert_eq!(raw::members(&conn, "job:3").await, [lease.id()]);
    assert!(mx
        .attach_read(&lease)
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap());
    assert!(
        !long.renew(&lease).await.unwrap(),
        "attached: the old id holds nothing"
    );
    assert!(newer.unlock().await.unwrap());

    // A permit's lease, the same way.
    let (sem, long_sem) = (semaphore(&conn, TTL), semaphore(&conn, LIVENESS));
    let permit = sem.acquire().await.unwrap().detach();
    assert!(long_sem.renew(&permit).await.unwrap());
    assert!(raw::pttl(&conn, "pool").await > 4_000);
    assert!(long_sem.release(&permit).await.unwrap());
    assert!(!long_sem.renew(&permit).await.unwrap(), "returned");
    assert!(!raw::exists(&conn, "pool").await);
}

#[tokio::test]
async fn a_live_guards_lease_attached_elsewhere_takes_the_hold_and_the_guard_finds_it_lost() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let (mx, other) = (mutex(&conn, TTL), mutex(&conn, LIVENESS));
    let guard = mx.write().key("1").await.unwrap();
    let lease = guard.lease();
    assert_eq!(lease.id(), guard.id());
    assert_eq!(lease.fencing_token("job:1"), Some(guard.fencing_token()));
    assert!(!guard.is_cancelled(), "lease() leaves the guard as it was");
    let sets = mx.lock_all().write(["2", "3"]).await.unwrap();
    assert_eq!(sets.lease().lock_keys().count(), 2);

    // The restart pattern: a later process attaches the lease it wrote down.
    let taken = other.attach_write(&lease).await.unwrap();
    assert_ne!(taken.id(), guard.id());
    tokio::time::timeout(LIVENESS, guard.cancelled())
        .await
        .expect("the old guard's next refresh finds its id gone");
    assert_eq!(guard.cancel_reason(), Some(CancelReason::Lost));
    assert_eq!(raw::get(&conn, "job:1").await.as_deref(), Some(taken.id()));
    assert!(!taken.is_cancelled());
    assert!(matches!(
        other.attach_write(&lease).await,
        Err(Error::NotHeld { .. })
    ));
    assert!(taken.unlock().await.unwrap());
}

#[tokio::test]
async fn an_attaching_handle_describes_the_new_holder() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let described = |label: &str| {
        RwMutex::builder(conn.clone(), "job")
            .ttl(LIVENESS)
            .holder_label(label)
            .build()
            .unwrap()
    };
    let (giver, taker) = (described("giver"), described("taker"));
    let lease = giver.write().key("1").await.unwrap().detach();
    let state = giver.inspect("1").await.unwrap();
    let info = state
        .holder_info(lease.id())
        .expect("the giver described itself");
    assert_eq!(info.label(), Some("giver"));

    let guard = taker.attach_write(&lease).await.unwrap();
    let state = taker.inspect("1").await.unwrap();
    assert!(
        state.holder_info(lease.id()).is_none(),
        "the old id's description went"
    );
    let info = state
        .holder_info(guard.id())
        .expect("the attach described the new holder in its request");
    assert_eq!(info.label(), Some("taker"));
    assert_eq!(info.pid(), std::process::id());
    assert!(guard.unlock().await.unwrap());
    assert!(
        !raw::exists(&conn, "job:1:holders").await,
        "gone with the hold"
    );
}

#[tokio::test]
async fn detach_fires_the_token_as_detached_and_a_nested_guard_sees_it() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = RwMutex::builder(conn.clone(), "job")
        .ttl(LIVENESS)
        .reentrant(true)
        .build()
        .unwrap();
    let outer = mx.write().key("1").await.unwrap();
    let nested = mx.read().key("1").await.unwrap();
    assert_eq!(nested.id(), outer.id());
    let nested_lease = mx.read().key("1").await.unwrap().detach();
    assert_eq!(
        nested_lease.id(),
        outer.id(),
        "a nested guard's lease is the outer hold's"
    );
    assert!(!outer.is_cancelled(), "the outer guard keeps its hold");
    let lease = outer.detach();
    assert_eq!(nested.cancel_reason(), Some(CancelReason::Detached));
    assert_eq!(raw::get(&conn, "job:1").await.as_deref(), Some(lease.id()));
    // The registry forgot the outer guard: a new write is a lock of its own, and waits.
    let waited = tokio::time::timeout(Duration::from_millis(200), mx.write().key("1")).await;
    assert!(waited.is_err(), "the detached lock is still held in Redis");
    assert!(mx.release(&lease).await.unwrap());
    drop(nested);
}

/// The variable that makes [`child_attaches_a_lease`] the other process of a test:
/// `<redis url> <mode> <lease text>`.
const CHILD: &str = "REDISMUTEX_LEASE_CHILD";

#[tokio::test]
async fn a_lease_crosses_to_another_process_which_keeps_it_past_several_ttls() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = mutex(&conn, LIVENESS);
    let sem = semaphore(&conn, LIVENESS);
    let leases = [
        ("w", mx.write().key("w").await.unwrap().detach()),
        ("r", mx.read().key("r").await.unwrap().detach()),
        (
            "all",
            mx.lock_all()
                .write(["a"])
                .read(["b"])
                .await
                .unwrap()
                .detach(),
        ),
        ("p", sem.acquire().await.unwrap().detach()),
    ];
    let children = leases.iter().map(|(mode, lease)| {
        let spec = format!("{} {mode} {lease}", server.url());
        async move { (mode, lease, run_child(&spec).await) }
    });
    for (mode, lease, lines) in futures_util::future::join_all(children).await {
        let attached = lines
            .iter()
            .find_map(|line| line.strip_prefix("ATTACHED "))
            .unwrap_or_else(|| panic!("{mode}: {lines:?}"));
        assert_ne!(attached, lease.id(), "{mode}");
        let held = lines.iter().find_map(|line| line.strip_prefix("HELD "));
        let refreshes: u64 = held
            .unwrap_or_else(|| panic!("{mode}: {lines:?}"))
            .parse()
            .unwrap();
        assert!(
            refreshes >= 5,
            "{mode}: {refreshes} refreshes in the other process"
        );
        assert!(
            lines.iter().any(|line| line == "UNLOCKED true"),
            "{mode}: {lines:?}"
        );
        // The old id is gone: the lease no longer releases anything.
        let released = match *mode {
            "p" => sem.release(lease).await,
            _ => mx.release(lease).await,
        };
        assert!(!released.unwrap(), "{mode}");
    }
    for key in ["job:w", "job:r", "job:a", "job:b", "pool"] {
        assert!(
            !raw::exists(&conn, key).await,
            "{key} released by the other process"
        );
    }
}

/// Runs this test binary again as [`child_attaches_a_lease`] with `spec`, and gives the
/// lines it printed.
async fn run_child(spec: &str) -> Vec<String> {
    let exe = std::env::current_exe().unwrap();
    let mut child = tokio::process::Command::new(exe)
        .args([
            "leases::child_attaches_a_lease",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD, spec)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut lines = Vec::new();
    let read = async {
        while let Some(line) = out.next_line().await.unwrap() {
            lines.push(line);
        }
    };
    tokio::time::timeout(LIVENESS * 2, read)
        .await
        .expect("the child ends");
    let status = child.wait().await.unwrap();
    assert!(status.success(), "{spec}: {status} {lines:?}");
    lines
}

/// The other process of [`a_lease_crosses_to_another_process_which_keeps_it_past_several_ttls`]:
/// attaches the lease it is given with a 400 ms TTL, holds it for 5 TTLs while this
/// process's refresher renews it, checks it was never cancelled, and unlocks it. Run
/// alone (without its variable), it does nothing.
#[tokio::test]
#[ignore = "the other process of a_lease_crosses_to_another_process_which_keeps_it_past_several_ttls"]
async fn child_attaches_a_lease() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let mut words = spec.splitn(3, ' ');
    let (url, mode, text) = (
        words.next().unwrap(),
        words.next().unwrap(),
        words.next().unwrap(),
    );
    let lease: Lease = text.parse().unwrap();
    let conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let (mx, sem) = (mutex(&conn, TTL), semaphore(&conn, TTL));
    let guard: Box<dyn HeldHere> = match mode {
        "w" => Box::new(mx.attach_write(&lease).await.unwrap()),
        "r" => Box::new(mx.attach_read(&lease).await.unwrap()),
        "all" => Box::new(mx.attach_all(&lease).await.unwrap()),
        _ => Box::new(sem.attach(&lease).await.unwrap()),
    };
    println!("ATTACHED {}", guard.held_id());
    tokio::time::sleep(TTL * 5).await;
    assert!(!guard.is_gone(), "the attached hold was lost");
    println!("HELD {}", guard.held_refreshes());
    println!("UNLOCKED {}", guard.release().await);
}

/// What the child needs of whichever guard it attached.
trait HeldHere: Send {
    fn held_id(&self) -> String;
    fn held_refreshes(&self) -> u64;
    fn is_gone(&self) -> bool;
    fn release(
        self: Box<Self>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>>;
}

macro_rules! held_here {
    ($($guard:ty),*) => {$(
        impl HeldHere for $guard {
            fn held_id(&self) -> String {
                self.id().to_owned()
            }
            fn held_refreshes(&self) -> u64 {
                self.refreshes()
            }
            fn is_gone(&self) -> bool {
                self.is_cancelled()
            }
            fn release(self: Box<Self>) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
                Box::pin(async move { self.unlock().await.unwrap() })
            }
        }
    )*};
}

held_here!(
    redismutex::WriteGuard,
    redismutex::ReadGuard,
    redismutex::MultiGuard,
    redismutex::Permit
);

#[tokio::test]
async fn eventually_the_detached_hold_expires_when_nobody_attaches_it() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = mutex(&conn, Duration::from_millis(200));
    let lease = mx.write().key("1").await.unwrap().detach();
    assert!(raw::exists(&conn, "job:1").await);
    assert!(eventually(|| async { !raw::exists(&conn, "job:1").await }).await);
    let err = mx.attach_write(&lease).await.unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "{err}");
}

#[tokio::test]
async fn a_release_by_lease_wakes_the_waiters_here_and_elsewhere() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    // A 20 s TTL: a waiter's fallback timer is 10 s away, so only the release wakes it.
    let notified = |conn: &MultiplexedConnection| {
        RwMutex::builder(conn.clone(), "job")
            .ttl(Duration::from_secs(20))
            .notifier(server.client())
            .build()
            .unwrap()
    };
    let (mx, other) = (notified(&conn), notified(&server.conn().await));
    let lease = mx.write().key("1").await.unwrap().detach();
    let here = tokio::spawn(mx.write().key("1").into_future());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!here.is_finished(), "the detached lock is held");
    assert!(other.release(&lease).await.unwrap());
    let woken = tokio::time::timeout(Duration::from_secs(2), here).await;
    let guard = woken.expect("woken by the release").unwrap().unwrap();
    assert!(guard.unlock().await.unwrap());
}
