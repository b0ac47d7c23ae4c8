//! The counting semaphore: never more than N holders (and N do hold), the last permit
//! to one client only, permits freed by the server clock when a holder dies or its clock
//! disagrees, each caller's own count, refresh and loss, typed errors for keys and
//! options it cannot use, growing fencing tokens, and waiting by notification, timeout
//! and cancel.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::lone_worker::LoneWorker;
use crate::common::raw::subscribers;
use crate::common::wrong_type::assert_wrong_type;
use crate::common::{
    at_once, eventually, join_within, on_a_stopped_clock, raw, RedisServer, LIVENESS,
};
use rand::RngExt;
use redis::aio::MultiplexedConnection;
use redismutex::{CancelReason, Error, Permit, RwMutex, Semaphore};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

type Sem = Semaphore<MultiplexedConnection>;

fn semaphore(conn: &MultiplexedConnection, name: &str, permits: u32, ttl: Duration) -> Sem {
    Semaphore::builder(conn.clone(), name, permits)
        .ttl(ttl)
        .build()
        .unwrap()
}

fn fair_semaphore(conn: &MultiplexedConnection, name: &str, permits: u32, ttl: Duration) -> Sem {
    Semaphore::builder(conn.clone(), name, permits)
        .ttl(ttl)
        .fair(true)
        .build()
        .unwrap()
}

fn ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap()
}

/// The deadline (server ms) of permit `id` in the semaphore at `key`, if it is there.
async fn deadline(conn: &MultiplexedConnection, key: &str, id: &str) -> Option<i64> {
    let score: Option<f64> = raw::cmd(conn, "ZSCORE", &[key, id]).await;
    score.map(|score| score as i64)
}

async fn zcard(conn: &MultiplexedConnection, key: &str) -> i64 {
    raw::cmd(conn, "ZCARD", &[key]).await
}

/// The ids holding permits of the semaphore at `key`, sorted.
async fn holders(conn: &MultiplexedConnection, key: &str) -> Vec<String> {
    let mut ids: Vec<String> = raw::cmd(conn, "ZRANGE", &[key, "0", "-1"]).await;
    ids.sort();
    ids
}

#[tokio::test]
async fn never_more_than_n_hold_permits_at_once_and_n_do() {
    const N: usize = 3;
    const TASKS: usize = 24;
    const ROUNDS: usize = 6;
    let server = RedisServer::start();
    let mut conns = Vec::new();
    for _ in 0..3 {
        conns.push(server.conn().await);
    }
    let check = server.conn().await;
    // Counted in this process and, independently, on Redis: a referee counter that each
    // holder increments after acquiring and decrements before releasing.
    let inside = Arc::new(AtomicUsize::new(0));
    let most_inside = Arc::new(AtomicUsize::new(0));
    let most_on_redis = Arc::new(AtomicI64::new(0));
    let most_holders = Arc::new(AtomicI64::new(0));
    let mut tasks = JoinSet::new();
    for task in 0..TASKS {
        // A handle per task, on three connections; half wait by notification, half poll.
        let conn = conns[task % 3].clone();
        let mut builder = Semaphore::builder(conn.clone(), "pool", N as u32);
        if task % 2 == 0 {
            builder = builder.notifier(server.client());
        }
        let sem = builder.build().unwrap();
        let (inside, most_inside) = (Arc::clone(&inside), Arc::clone(&most_inside));
        let (most_on_redis, most_holders) = (Arc::clone(&most_on_redis), Arc::clone(&most_holders));
        tasks.spawn(async move {
            for _ in 0..ROUNDS {
                let permit = sem.acquire().await.unwrap();
                most_inside.fetch_max(inside.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                let on_redis: i64 = raw::cmd(&conn, "INCR", &["referee:inside"]).await;
                most_on_redis.fetch_max(on_redis, Ordering::SeqCst);
                most_holders.fetch_max(zcard(&conn, "pool").await, Ordering::SeqCst);
                let work = rand::rng().random_range(2..=6);
                tokio::time::sleep(Duration::from_millis(work)).await;
                assert!(!permit.is_cancelled(), "{:?}", permit.cancel_reason());
                raw::cmd::<i64>(&conn, "DECR", &["referee:inside"]).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                assert!(permit.unlock().await.unwrap(), "held to the end");
            }
        });
    }
    join_within(&mut tasks, Duration::from_secs(60), "every task finishes").await;
    let (in_process, on_redis, holders) = (
        most_inside.load(Ordering::SeqCst),
        most_on_redis.load(Ordering::SeqCst),
        most_holders.load(Ordering::SeqCst),
    );
    println!(
        "most inside at once: {in_process} here, {on_redis} on the referee, {holders} in the set"
    );
    assert!(
        in_process <= N,
        "{in_process} holders at once, more than {N}"
    );
    assert!(on_redis <= N as i64, "the referee saw {on_redis} at once");
    assert!(holders <= N as i64, "the sorted set held {holders} ids");
    assert_eq!(
        in_process, N,
        "N permits were never all in use: the test proved nothing"
    );
    assert_eq!(zcard(&check, "pool").await, 0, "every permit was returned");
}

/// Rounds of `CONTENDERS` concurrent `try_acquire`s on separate connections for the
/// last free permit (one of two is pinned); the number of winners of each round.
async fn race_for_the_last_permit(fair: bool) -> Vec<usize> {
    const CONTENDERS: usize = 8;
    const ROUNDS: usize = 200;
    let server = RedisServer::start();
    let pin_conn = server.conn().await;
    let made = |conn: &MultiplexedConnection| {
        Semaphore::builder(conn.clone(), "last", 2)
            .fair(fair)
            .build()
            .unwrap()
    };
    let _pinned = made(&pin_conn).acquire().await.unwrap();
    let mut contenders = Vec::new();
    for i in 0..CONTENDERS {
        if i % 2 == 0 {
            contenders.push(made(&server.conn().await));
        } else {
            let conn = contenders[i - 1].connection().clone();
            contenders.push(made(&conn));
        }
    }
    let mut winners = Vec::new();
    for _ in 0..ROUNDS {
        let mut tries = JoinSet::new();
        for sem in &contenders {
            let sem = sem.clone();
            tries.spawn(async move { sem.try_acquire().await.unwrap() });
        }
        let mut won: Vec<Permit> = Vec::new();
        while let Some(tried) = tries.join_next().await {
            won.extend(tried.unwrap());
        }
        winners.push(won.len());
        for permit in won {
            assert!(permit.unlock().await.unwrap());
        }
    }
    winners
}

/// The classic Redis recipe for a fair semaphore (a ZADD, then a ZRANK check, then a
/// ZREM when over the limit, in separate commands) lets two clients take the last
/// permit at once; here the count and the take are one script, so exactly one does.
#[tokio::test]
async fn racing_tries_give_the_last_permit_to_exactly_one_client_plain_and_fair() {
    for fair in [false, true] {
        let winners = race_for_the_last_permit(fair).await;
        let most = winners.iter().max().copied().unwrap_or(0);
        assert!(
            most <= 1,
            "fair {fair}: {most} clients took the last permit in one round"
        );
        assert!(
            winners.iter().all(|&n| n == 1),
            "fair {fair}: a round where the free permit went to nobody: {winners:?}"
        );
    }
}

/// A holder in another process, SIGKILLed, cannot return its permit: the permit frees
/// when its deadline passes by the server's clock (another holder keeps the semaphore key
/// itself alive), and never while the holder lives and refreshes.
#[tokio::test]
async fn a_killed_holders_permit_frees_by_its_ttl_and_never_while_it_refreshes() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_secs(1);
    let sem = semaphore(&conn, "pool", 2, ttl);
    let staying = sem.acquire().await.unwrap();
    let url = server.url();
    let mut worker = LoneWorker::spawn(
        "holder",
        &[
            ("FW_LOCK_URL", &url),
            ("FW_MUTEX", "pool"),
            ("FW_PERMITS", "2"),
            ("FW_TTL_MS", "1000"),
            ("FW_HOLD_MS", "600000"),
            ("FW_NOTIFY", "0"),
        ],
    )
    .await;
    let acquired = worker.wait_for("ACQUIRED").await;
    let id = acquired.id().to_string();
    let mut both = vec![id.clone(), staying.id().to_string()];
    both.sort();

    // Three TTLs while it lives: it refreshes, so nobody else gets in.
    let alive_until = Instant::now() + ttl * 3;
    while Instant::now() < alive_until {
        let taken = sem.try_acquire().await.unwrap();
        assert!(
            taken.is_none(),
            "got the permit of a live, refreshing holder"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(holders(&conn, "pool").await, both);

    worker.kill().await;
    // Whatever it sent before dying is processed: its deadline is final now.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let dead_deadline = deadline(&conn, "pool", &id)
        .await
        .expect("the dead holder's permit stays until its deadline");
    let permit = sem
        .acquire()
        .timeout(ttl + LIVENESS)
        .await
        .expect("the permit frees by the TTL");
    let acquired_at = deadline(&conn, "pool", permit.id()).await.unwrap() - ms(ttl);
    assert!(
        acquired_at >= dead_deadline,
        "acquired at {acquired_at} (server ms), before the dead holder's deadline {dead_deadline}"
    );
    let mut now_held = vec![permit.id().to_string(), staying.id().to_string()];
    now_held.sort();
    assert_eq!(holders(&conn, "pool").await, now_held);
    assert!(!staying.is_cancelled(), "{:?}", staying.cancel_reason());
    assert!(permit.unlock().await.unwrap());
    assert!(staying.unlock().await.unwrap());
}

/// A holder whose clock stands still never refreshes and never sees its permit expire;
/// the server's clock still frees it after the TTL (while another holder keeps the
/// semaphore key alive), so no client's clock decides expiry.
#[tokio::test]
async fn a_holder_whose_clock_stands_still_loses_its_permit_by_the_server_clock() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_secs(1);
    let refreshing = semaphore(&conn, "clock", 2, ttl).acquire().await.unwrap();

    let (held_tx, held_rx) = oneshot::channel::<String>();
    let (ask_tx, ask_rx) = oneshot::channel::<()>();
    let (view_tx, view_rx) = oneshot::channel::<(bool, bool)>();
    let url = server.url();
    let stopped = on_a_stopped_clock(move || async move {
        let conn = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let permit = semaphore(&conn, "clock", 2, ttl).acquire().await.unwrap();
        held_tx.send(permit.id().to_string()).unwrap();
        let _ = ask_rx.await;
        // Its own view, by its own clock, after the server freed the permit.
        let valid = tokio::time::Instant::now() < permit.valid_until();
        let _ = view_tx.send((permit.is_cancelled(), valid));
    });
    let stopped_id = at_once(held_rx).await.unwrap();
    let stopped_deadline = deadline(&conn, "clock", &stopped_id).await.unwrap();
    let other = semaphore(&server.conn().await, "clock", 2, ttl);
    assert!(other.try_acquire().await.unwrap().is_none(), "2 of 2 held");

    let permit = other
        .acquire()
        .timeout(ttl + LIVENESS)
        .await
        .expect("the stopped holder's permit frees by the server clock");
    let acquired_at = deadline(&conn, "clock", permit.id()).await.unwrap() - ms(ttl);
    assert!(
        acquired_at >= stopped_deadline,
        "{acquired_at} < {stopped_deadline}"
    );
    assert_eq!(
        deadline(&conn, "clock", &stopped_id).await,
        None,
        "the server dropped the stopped holder"
    );
    ask_tx.send(()).unwrap();
    let (cancelled, valid) = at_once(view_rx).await.unwrap();
    assert!(
        !cancelled && valid,
        "by its own clock the stopped holder still holds: its clock did not decide"
    );
    stopped.join().unwrap();
    assert!(
        !refreshing.is_cancelled(),
        "{:?}",
        refreshing.cancel_reason()
    );
    assert_eq!(
        holders(&conn, "clock").await,
        {
            let mut ids = vec![refreshing.id().to_string(), permit.id().to_string()];
            ids.sort();
            ids
        },
        "only the stopped holder's permit went"
    );
}

/// A holder whose clock runs fast refreshes as often as its clock says, yet every
/// deadline in Redis is the server's TIME plus the TTL, never more: its clock extends
/// nothing. Jumping hours ahead only makes it give the permit up itself (Expired), the
/// safe side.
#[tokio::test]
async fn a_holder_whose_clock_runs_fast_never_extends_its_permit_past_server_time_plus_ttl() {
    const STEPS: usize = 20;
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_secs(2);

    let (held_tx, mut held_rx) = mpsc::unbounded_channel::<(String, Vec<i64>)>();
    let (jump_tx, jump_rx) = oneshot::channel::<()>();
    let (reason_tx, reason_rx) = oneshot::channel::<Option<CancelReason>>();
    let url = server.url();
    let fast = on_a_stopped_clock(move || async move {
        let conn = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let permit = semaphore(&conn, "clock", 1, ttl).acquire().await.unwrap();
        let id = permit.id().to_string();
        // How far each deadline in Redis is past the server's TIME, after each refresh.
        let mut margins = Vec::new();
        for _ in 0..STEPS {
            let before = permit.valid_until();
            // Half a TTL passes on this clock (none on the others): a refresh is due.
            tokio::time::advance(ttl / 2).await;
            let mut spins = 0;
            while permit.valid_until() == before {
                assert!(!permit.is_cancelled(), "{:?}", permit.cancel_reason());
                spins += 1;
                assert!(spins < 5000, "no refresh in 5 s");
                std::thread::sleep(Duration::from_millis(1));
                tokio::task::yield_now().await;
            }
            let deadline = deadline(&conn, "clock", &id).await.unwrap();
            margins.push(deadline - raw::server_ms(&conn).await);
        }
        held_tx.send((id, margins)).unwrap();
        let _ = jump_rx.await;
        tokio::time::advance(Duration::from_secs(3 * 3600)).await;
        let mut spins = 0;
        while !permit.cancellation_token().is_cancelled() && spins < 5000 {
            spins += 1;
            std::thread::sleep(Duration::from_millis(1));
            tokio::task::yield_now().await;
        }
        let _ = reason_tx.send(permit.cancel_reason());
        // Its release after expiring goes out before the runtime ends.
        for _ in 0..200 {
            std::thread::sleep(Duration::from_millis(1));
            tokio::task::yield_now().await;
        }
        drop(permit);
    });
    let (id, margins) = tokio::time::timeout(Duration::from_secs(30), held_rx.recv())
        .await
        .expect("the fast holder refreshed")
        .unwrap();
    println!("deadline - server TIME after each refresh (ms): {margins:?}");
    let ttl_ms = ms(ttl);
    for (step, margin) in margins.iter().enumerate() {
        assert!(
            (1..=ttl_ms).contains(margin),
            "after {} s on the fast clock the deadline was {margin} ms past the server's TIME",
            (step + 1) as f64 * ttl.as_secs_f64() / 2.0
        );
    }
    // Its clock is STEPS / 2 TTLs ahead; the server still counts its permit.
    let other = semaphore(&server.conn().await, "clock", 1, ttl);
    assert!(other.try_acquire().await.unwrap().is_none());
    assert!(deadline(&conn, "clock", &id).await.is_some());

    jump_tx.send(()).unwrap();
    let reason = at_once(reason_rx).await.unwrap();
    assert_eq!(
        reason,
        Some(CancelReason::Expired),
        "hours on its clock: it gives up"
    );
    fast.join().unwrap();
    let permit = at_once(other.acquire()).await.unwrap();
    assert!(permit.unlock().await.unwrap());
}

#[tokio::test]
async fn each_caller_admits_by_its_own_count_and_lowering_it_revokes_no_permit() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_millis(500);
    let three = semaphore(&server.conn().await, "pool", 3, ttl);
    let two = semaphore(&server.conn().await, "pool", 2, ttl);
    let five = semaphore(&server.conn().await, "pool", 5, ttl);

    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(three.acquire().await.unwrap());
    }
    assert!(three.try_acquire().await.unwrap().is_none());
    assert!(
        two.try_acquire().await.unwrap().is_none(),
        "3 held, 2 allowed"
    );
    let fourth = five
        .try_acquire()
        .await
        .unwrap()
        .expect("3 held, 5 allowed: in at once");
    assert!(
        three.try_acquire().await.unwrap().is_none(),
        "4 held, 3 allowed"
    );
    assert!(two.try_acquire().await.unwrap().is_none());

    // Two TTLs later nobody's permit was revoked: all are still refreshed.
    tokio::time::sleep(ttl * 2).await;
    let now = raw::server_ms(&conn).await;
    for permit in held.iter().chain([&fourth]) {
        assert!(!permit.is_cancelled(), "{:?}", permit.cancel_reason());
        let deadline = deadline(&conn, "pool", permit.id()).await;
        assert!(deadline.is_some_and(|d| d > now), "{deadline:?} <= {now}");
    }
    assert_eq!(zcard(&conn, "pool").await, 4);

    assert!(fourth.unlock().await.unwrap());
    assert!(two.try_acquire().await.unwrap().is_none(), "3 held");
    assert!(held.pop().unwrap().unlock().await.unwrap());
    assert!(two.try_acquire().await.unwrap().is_none(), "2 held");
    assert!(held.pop().unwrap().unlock().await.unwrap());
    let by_two = two.try_acquire().await.unwrap().expect("1 held, 2 allowed");
    assert!(two.try_acquire().await.unwrap().is_none(), "2 held again");
    assert!(!held[0].is_cancelled());
    assert!(by_two.unlock().await.unwrap());
}

#[tokio::test]
async fn refresh_keeps_a_permit_for_several_ttls_with_deadlines_from_the_server_clock() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_millis(400);
    let permit = semaphore(&conn, "lease", 2, ttl).acquire().await.unwrap();
    let first = deadline(&conn, "lease", permit.id()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await; // five TTLs
    assert!(!permit.is_cancelled(), "{:?}", permit.cancel_reason());
    let now = raw::server_ms(&conn).await;
    let last = deadline(&conn, "lease", permit.id()).await.unwrap();
    assert!(last > first, "the deadline moved");
    assert!(
        (1..=ms(ttl)).contains(&(last - now)),
        "the deadline is the server's TIME + TTL at the last refresh: {last} - {now}"
    );
    let pttl = raw::pttl(&conn, "lease").await;
    assert!(
        (1..=ms(ttl)).contains(&pttl),
        "the key's PTTL follows: {pttl}"
    );
    assert!(permit.unlock().await.unwrap());
    assert!(!raw::exists(&conn, "lease").await);
}

#[tokio::test]
async fn a_permit_removed_by_hand_is_lost_and_its_unlock_reports_false() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let sem = semaphore(&conn, "lease", 2, Duration::from_millis(400));
    let permit = sem.acquire().await.unwrap();
    let other = sem.acquire().await.unwrap();
    assert_eq!(permit.cancel_reason(), None);
    raw::cmd::<i64>(&conn, "ZREM", &["lease", permit.id()]).await;
    tokio::time::timeout(LIVENESS, permit.cancelled())
        .await
        .unwrap();
    assert_eq!(permit.cancel_reason(), Some(CancelReason::Lost));
    assert!(
        !permit.unlock().await.unwrap(),
        "a lost permit reports false"
    );
    assert!(!other.is_cancelled(), "the other permit was not touched");
    assert!(other.unlock().await.unwrap());
}

#[tokio::test]
async fn a_deadline_past_in_redis_makes_the_refresh_report_lost_not_revive_it() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let sem = semaphore(&conn, "lease", 2, Duration::from_secs(1));
    let permit = sem.acquire().await.unwrap();
    let past = (raw::server_ms(&conn).await - 1000).to_string();
    raw::cmd::<i64>(&conn, "ZADD", &["lease", "XX", &past, permit.id()]).await;
    tokio::time::timeout(LIVENESS, permit.cancelled())
        .await
        .unwrap();
    assert_eq!(permit.cancel_reason(), Some(CancelReason::Lost));
    assert_eq!(
        deadline(&conn, "lease", permit.id()).await,
        None,
        "the refresh removed the run-out permit instead of reviving it"
    );
    assert!(!permit.unlock().await.unwrap());
}

#[tokio::test]
async fn unlocking_a_permit_whose_deadline_passed_reports_false_and_removes_it() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    // A 30 s TTL: no refresh comes first.
    let sem = semaphore(&conn, "lease", 2, Duration::from_secs(30));
    let permit = sem.acquire().await.unwrap();
    let other = sem.acquire().await.unwrap();
    let past = (raw::server_ms(&conn).await - 1).to_string();
    raw::cmd::<i64>(&conn, "ZADD", &["lease", "XX", &past, permit.id()]).await;
    assert!(!permit.unlock().await.unwrap(), "it had run out");
    assert_eq!(holders(&conn, "lease").await, vec![other.id().to_string()]);
    assert!(
        other.unlock().await.unwrap(),
        "an unexpired permit reports true"
    );
    assert!(!raw::exists(&conn, "lease").await);
}

/// Every way to take a permit of `sem`: acquire, then try_acquire.
async fn every_result(sem: &Sem) -> Vec<Result<Option<Permit>, Error>> {
    vec![
        at_once(sem.acquire()).await.map(Some),
        at_once(sem.try_acquire()).await,
    ]
}

#[tokio::test]
async fn a_semaphore_key_of_another_type_is_a_wrong_type_error_and_stays_untouched() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let plain = semaphore(&conn, "pool", 2, Duration::from_secs(4));
    let fair = fair_semaphore(&conn, "pool", 2, Duration::from_secs(4));
    let setups: [(&str, &[&str]); 4] = [
        ("string", &["SET", "pool", "a-go-writer", "PX", "60000"]),
        ("hash", &["HSET", "pool", "f", "v"]),
        ("set", &["SADD", "pool", "a-reader"]),
        ("list", &["RPUSH", "pool", "a", "b"]),
    ];
    for (kind, setup) in setups {
        raw::cmd::<i64>(&conn, "DEL", &["pool"]).await;
        raw::cmd::<redis::Value>(&conn, setup[0], &setup[1..]).await;
        let before: Vec<u8> = raw::cmd(&conn, "DUMP", &["pool"]).await;
        let pttl = raw::pttl(&conn, "pool").await;
        for sem in [&plain, &fair] {
            for result in every_result(sem).await {
                assert_wrong_type(result, "pool", kind);
            }
        }
        let after: Vec<u8> = raw::cmd(&conn, "DUMP", &["pool"]).await;
        assert_eq!(before, after, "{kind} was changed");
        let still = raw::pttl(&conn, "pool").await;
        assert!(
            still <= pttl && (still > 0) == (pttl > 0),
            "{kind}: TTL {pttl} -> {still}"
        );
        for key in ["pool:fence", "pool:queue", "pool:queue-deadline"] {
            assert!(!raw::exists(&conn, key).await, "{kind}: {key} was made");
        }
    }
    let err = plain.try_acquire().await.unwrap_err();
    assert!(
        err.to_string().contains("\"pool\""),
        "the message names the key: {err}"
    );

    // Its fence and queue keys are checked too, each named.
    raw::cmd::<i64>(&conn, "DEL", &["pool"]).await;
    let setups: [(&str, &[&str], &str); 3] = [
        ("pool:fence", &["HSET", "pool:fence", "f", "v"], "hash"),
        (
            "pool:queue",
            &["SET", "pool:queue", "x", "PX", "60000"],
            "string",
        ),
        (
            "pool:queue-deadline",
            &["RPUSH", "pool:queue-deadline", "a"],
            "list",
        ),
    ];
    for (key, setup, kind) in setups {
        raw::cmd::<redis::Value>(&conn, setup[0], &setup[1..]).await;
        let sem = if key == "pool:fence" { &plain } else { &fair };
        for result in every_result(sem).await {
            assert_wrong_type(result, key, kind);
        }
        assert_eq!(raw::key_type(&conn, key).await, kind);
        assert!(
            !raw::exists(&conn, "pool").await,
            "{key}: a permit was taken"
        );
        raw::cmd::<i64>(&conn, "DEL", &[key]).await;
    }
}

#[tokio::test]
async fn a_semaphore_or_queue_key_without_ttl_is_a_no_expiry_error_and_stays_untouched() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let plain = semaphore(&conn, "pool", 2, Duration::from_secs(4));
    let fair = fair_semaphore(&conn, "pool", 2, Duration::from_secs(4));
    let future = (raw::server_ms(&conn).await + 3_600_000).to_string();
    raw::cmd::<i64>(&conn, "ZADD", &["pool", &future, "forever"]).await;
    let before: Vec<u8> = raw::cmd(&conn, "DUMP", &["pool"]).await;
    for sem in [&plain, &fair] {
        for result in every_result(sem).await {
            assert!(
                matches!(result, Err(Error::NoExpiry { ref key, .. }) if key == "pool"),
                "{result:?}"
            );
        }
    }
    let after: Vec<u8> = raw::cmd(&conn, "DUMP", &["pool"]).await;
    assert_eq!(before, after);
    assert_eq!(raw::pttl(&conn, "pool").await, -1);
    raw::cmd::<i64>(&conn, "DEL", &["pool"]).await;

    for key in ["pool:queue", "pool:queue-deadline"] {
        raw::cmd::<i64>(&conn, "ZADD", &[key, "1", "w:someone"]).await;
        for result in every_result(&fair).await {
            assert!(
                matches!(result, Err(Error::NoExpiry { key: ref named, .. }) if named == key),
                "{key}: {result:?}"
            );
        }
        assert_eq!(raw::pttl(&conn, key).await, -1);
        assert!(!raw::exists(&conn, "pool").await);
        raw::cmd::<i64>(&conn, "DEL", &[key]).await;
    }
}

#[tokio::test]
async fn zero_permits_and_names_of_queue_keys_are_refused_before_anything_is_sent() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let err = Semaphore::builder(conn.clone(), "pool", 0)
        .build()
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidOptions(ref m) if m.contains("\"pool\"") && m.contains("0 permits")),
        "{err}"
    );
    // `new` cannot fail: every acquire reports it, at once.
    for result in every_result(&Semaphore::new(conn.clone(), "pool", 0)).await {
        assert!(
            matches!(result, Err(Error::InvalidOptions(_))),
            "{result:?}"
        );
    }

    for name in [
        "pool:queue",
        "pool:queue-deadline",
        "pool:fence",
        "pool:lock-intent",
    ] {
        let err = Semaphore::builder(conn.clone(), name, 2)
            .build()
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidOptions(ref m) if m.contains(name)),
            "{name}: {err}"
        );
        for result in every_result(&Semaphore::new(conn.clone(), name, 2)).await {
            assert!(
                matches!(result, Err(Error::InvalidOptions(_))),
                "{name}: {result:?}"
            );
        }
        let err = RwMutex::builder(conn.clone(), name)
            .fair(true)
            .build()
            .unwrap_err();
        assert!(matches!(err, Error::InvalidOptions(_)), "{name}: {err}");
    }
    let sem = fair_semaphore(&conn, "pool", 2, Duration::from_secs(4));
    for (key, lock_key) in [
        ("queue", "pool:queue"),
        ("x:queue-deadline", "pool:x:queue-deadline"),
    ] {
        for result in [
            at_once(sem.acquire().key(key)).await.map(Some),
            at_once(sem.try_acquire().key(key)).await,
        ] {
            assert!(
                matches!(result, Err(Error::InvalidKey { key: ref named, .. }) if named == lock_key),
                "{key}: {result:?}"
            );
        }
    }
    let dbsize: i64 = raw::cmd(&conn, "DBSIZE", &[]).await;
    assert_eq!(dbsize, 0, "nothing was sent");
}

#[tokio::test]
async fn fencing_tokens_of_permits_strictly_increase() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_secs(4);
    let plain = semaphore(&server.conn().await, "pool", 3, ttl);
    let fair = fair_semaphore(&server.conn().await, "pool", 3, ttl);
    let mut tokens = Vec::new();
    let mut held = VecDeque::new();
    for i in 0..30 {
        if held.len() == 3 {
            let permit: Permit = held.pop_front().unwrap();
            assert!(permit.unlock().await.unwrap());
        }
        let sem = if i % 3 == 0 { &fair } else { &plain };
        let permit = sem.acquire().await.unwrap();
        tokens.push(permit.fencing_token());
        held.push_back(permit);
    }
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "not strictly increasing: {tokens:?}"
    );
    let last = *tokens.last().unwrap();
    assert_eq!(raw::stored_token(&conn, "pool:fence").await, last);
    // The counter lost (expired, or a server that restarted empty): still larger.
    raw::cmd::<i64>(&conn, "DEL", &["pool:fence"]).await;
    let next = plain.try_acquire().await.unwrap();
    assert!(next.is_none(), "3 held");
    assert!(held.pop_front().unwrap().unlock().await.unwrap());
    let next = plain.acquire().await.unwrap();
    assert!(
        next.fencing_token() > last,
        "{} <= {last}",
        next.fencing_token()
    );
}

/// With a 30 s TTL a notified waiter's fallback timer is 15 s: only the release's
/// notification can wake it within 5 s.
#[tokio::test]
async fn a_release_wakes_a_notified_waiter_long_before_its_fallback_timer() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_secs(30);
    for fair in [false, true] {
        let holder = semaphore(&server.conn().await, "pool", 1, ttl);
        let held = holder.acquire().await.unwrap();
        let waiter = Semaphore::builder(conn.clone(), "pool", 1)
            .ttl(ttl)
            .fair(fair)
            .notifier(server.client())
            .build()
            .unwrap();
        let waiting = tokio::spawn(async move { waiter.acquire().await });
        assert!(eventually(|| async { subscribers(&conn, "pool:released").await == 1 }).await);
        tokio::time::sleep(Duration::from_millis(200)).await; // it sleeps now
        assert!(!waiting.is_finished());

        let released = Instant::now();
        assert!(held.unlock().await.unwrap());
        let permit = tokio::time::timeout(LIVENESS, waiting)
            .await
            .unwrap_or_else(|_| panic!("fair {fair}: not woken by the release"))
            .unwrap()
            .unwrap();
        println!(
            "fair {fair}: acquired {:?} after the release",
            released.elapsed()
        );
        assert!(permit.unlock().await.unwrap());
        assert!(eventually(|| async { subscribers(&conn, "pool:released").await == 0 }).await);
    }
}

#[tokio::test]
async fn timeout_and_parent_cancel_end_a_wait_and_leave_nothing_in_redis() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_secs(30);
    let held = semaphore(&conn, "pool", 1, ttl).acquire().await.unwrap();
    let only_the_holder = || async { holders(&conn, "pool").await == vec![held.id().to_string()] };
    let queue_gone = || async {
        !raw::exists(&conn, "pool:queue").await && !raw::exists(&conn, "pool:queue-deadline").await
    };
    for fair in [false, true] {
        let sem = Semaphore::builder(conn.clone(), "pool", 1)
            .ttl(ttl)
            .fair(fair)
            .build()
            .unwrap();
        let result = sem.acquire().timeout(Duration::from_millis(300)).await;
        assert!(
            matches!(result, Err(Error::Timeout)),
            "fair {fair}: {result:?}"
        );
        assert!(eventually(only_the_holder).await, "fair {fair}");
        assert!(
            eventually(queue_gone).await,
            "fair {fair}: the timed-out waiter stayed queued"
        );

        let parent = CancellationToken::new();
        let waiting = tokio::spawn({
            let (sem, parent) = (sem.clone(), parent.clone());
            async move { sem.acquire().parent(parent).await }
        });
        if fair {
            let queued = || async { zcard(&conn, "pool:queue").await == 1 };
            assert!(eventually(queued).await, "the fair waiter queues");
        } else {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        parent.cancel();
        let result = at_once(waiting).await.unwrap();
        assert!(
            matches!(result, Err(Error::Cancelled)),
            "fair {fair}: {result:?}"
        );
        assert!(eventually(only_the_holder).await, "fair {fair}");
        assert!(
            eventually(queue_gone).await,
            "fair {fair}: the cancelled waiter stayed queued"
        );
    }
    let keys: Vec<String> = raw::cmd(&conn, "KEYS", &["*"]).await;
    let mut keys = keys;
    keys.sort();
    assert_eq!(keys, vec!["pool".to_string(), "pool:fence".to_string()]);
    assert!(held.unlock().await.unwrap());
}
