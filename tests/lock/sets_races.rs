//! `lock_all` and `try_lock_all` under contention, on one real server: many tasks taking
//! overlapping sets in opposite orders beside single-key readers and writers, checked by
//! a referee (no overlap, no lost update, no deadlock); two waiting sets whose intents
//! could keep each other out; a waiting set woken by a writer's release; a set's keys
//! renewed together in one batch; and `unlock`'s answer once a key was taken over.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::either::Either;
use crate::common::events::now_us;
use crate::common::referee::Referee;
use crate::common::{eventually, join_within, raw, RedisServer, LIVENESS};
use rand::seq::SliceRandom;
use rand::RngExt;
use redis::aio::MultiplexedConnection;
use redismutex::{CancelReason, Error, Mode, MultiGuard, RwMutex};
use tokio::task::JoinSet;

/// Long enough that no lock expires in a test unless it says so; its fallback timer
/// (half of it) is past [`LIVENESS`], so only a release message wakes a waiter in time.
const TTL: Duration = Duration::from_secs(30);

/// A mutex named `bank` on its own connection to `server`, with `ttl`, the lock intent on
/// and release notifications.
async fn notified(server: &RedisServer, ttl: Duration) -> RwMutex<MultiplexedConnection> {
    RwMutex::builder(server.conn().await, "bank")
        .ttl(ttl)
        .lock_intent(true)
        .notifier(server.client())
        .build()
        .unwrap()
}

/// The keys the contention test's tasks pick from.
const KEYS: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
/// How many tasks contend, of four kinds in turn: waiting sets, tried sets, single
/// writers, single readers.
const TASKS: usize = 16;
/// How long the tasks keep taking sections.
const RUN: Duration = Duration::from_secs(3);
/// How long a single lock's acquire may wait before it gives up (counted, not a
/// failure); a waiting set waits up to [`LIVENESS`].
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// The pause between a task's sections, in ms (uniform).
const THINK_MS: (u64, u64) = (5, 30);

/// What one contention task takes next: its keys in the order it names them, each with
/// its mode.
type Pick = Vec<(&'static str, Mode)>;

/// Task `task`'s next set: tasks 0 and 4 write `a` and `b`, named in opposite orders;
/// the others 2 to 4 of [`KEYS`] shuffled, each read or written at random.
fn pick_set(task: usize) -> Pick {
    match task {
        0 => vec![("a", Mode::Write), ("b", Mode::Write)],
        4 => vec![("b", Mode::Write), ("a", Mode::Write)],
        _ => {
            let mut rng = rand::rng();
            let mut keys = KEYS.to_vec();
            keys.shuffle(&mut rng);
            keys.truncate(rng.random_range(2..=4));
            keys.into_iter()
                .map(|key| {
                    let mode = match rng.random_bool(0.5) {
                        true => Mode::Write,
                        false => Mode::Read,
                    };
                    (key, mode)
                })
                .collect()
        }
    }
}

/// What every contention task counted.
#[derive(Default)]
struct Counts {
    /// Sections run to the end, every kind.
    sections: AtomicU64,
    /// Keys held in those sections (the referee counts a section per key).
    keys: AtomicU64,
    /// Entries the referee found overlapping a conflicting holder.
    clashes: AtomicU64,
    /// Acquires that timed out (waiting sets and single locks) or found a key held
    /// (tried sets).
    missed: AtomicU64,
    /// Waiting sets that gave up after [`LIVENESS`]: starved by the others.
    sets_timed_out: AtomicU64,
}

/// One section on `held` (key, mode, fencing token): enters the referee on every key,
/// writers do a non-atomic read-modify-write of the key's counter, then leaves.
async fn section(referee: &Referee, who: &str, held: &[(&str, Mode, u64)], counts: &Counts) {
    for &(key, mode, token) in held {
        let mode = if mode == Mode::Write { "w" } else { "r" };
        if referee
            .enter(key, mode, who, token, now_us())
            .await
            .unwrap()
        {
            counts.clashes.fetch_add(1, Ordering::SeqCst);
        }
    }
    for &(key, mode, _) in held {
        if mode == Mode::Write {
            let value = referee.counter(key).await.unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
            referee.commit(key, value + 1).await.unwrap();
        } else {
            referee.counter(key).await.unwrap();
        }
    }
    for &(key, _, _) in held {
        referee.leave(key, who).await.unwrap();
    }
    counts.sections.fetch_add(1, Ordering::SeqCst);
    counts.keys.fetch_add(held.len() as u64, Ordering::SeqCst);
}

/// A set's keys, modes and tokens, as [`section`] takes them.
fn held_by(set: &MultiGuard) -> Vec<(&str, Mode, u64)> {
    set.keys()
        .map(|key| (key, set.mode(key).unwrap(), set.fencing_token(key).unwrap()))
        .collect()
}

/// Contention task `task` until [`RUN`] has passed, and past it (at most [`LIVENESS`]
/// more) until it has completed a section: a single reader may miss every attempt while
/// the others' intents keep readers out (by design), but not once they have stopped. Its
/// sections completed.
async fn contend(
    task: usize,
    mx: RwMutex<MultiplexedConnection>,
    referee: Referee,
    counts: Arc<Counts>,
) -> u64 {
    let who = format!("task{task}");
    let until = Instant::now() + RUN;
    let mut done = 0;
    while Instant::now() < until || (done == 0 && Instant::now() < until + LIVENESS) {
        let ran = match task % 4 {
            0 | 1 => {
                let pick = pick_set(task);
                let writes = pick.iter().filter(|(_, m)| *m == Mode::Write);
                let reads = pick.iter().filter(|(_, m)| *m == Mode::Read);
                let (writes, reads): (Vec<_>, Vec<_>) = (
                    writes.map(|(k, _)| *k).collect(),
                    reads.map(|(k, _)| *k).collect(),
                );
                let set = if task.is_multiple_of(4) {
                    let waited = mx
                        .lock_all()
                        .write(writes)
                        .read(reads)
                        .timeout(LIVENESS)
                        .await;
                    match waited {
                        Ok(set) => Some(set),
                        Err(Error::Timeout) => {
                            counts.sets_timed_out.fetch_add(1, Ordering::SeqCst);
                            None
                        }
                        Err(err) => panic!("{who}: {err}"),
                    }
                } else {
                    mx.try_lock_all().write(writes).read(reads).await.unwrap()
                };
                match set {
                    Some(set) => {
                        assert_eq!(set.keys().count(), pick.len());
                        section(&referee, &who, &held_by(&set), &counts).await;
                        assert!(set.unlock().await.unwrap(), "{who}: a key was lost");
                        true
                    }
                    None => false,
                }
            }
            kind => {
                let key = KEYS[rand::rng().random_range(0..KEYS.len())];
                let taken = if kind == 2 {
                    let write = mx.write().key(key).timeout(ACQUIRE_TIMEOUT);
                    write.await.map(Either::from)
                } else {
                    let read = mx.read().key(key).timeout(ACQUIRE_TIMEOUT);
                    read.await.map(Either::from)
                };
                match taken {
                    Ok(guard) => {
                        let held = [(key, guard.mode(), guard.fencing_token())];
                        section(&referee, &who, &held, &counts).await;
                        assert!(guard.unlock().await.unwrap(), "{who}: {key} was lost");
                        true
                    }
                    Err(Error::Timeout) => false,
                    Err(err) => panic!("{who}: {err}"),
                }
            }
        };
        if ran {
            done += 1;
        } else {
            counts.missed.fetch_add(1, Ordering::SeqCst);
        }
        // Time between sections, as a service has: without it the tried sets and the
        // single locks, which take whatever is free the moment it is, leave a waiting
        // set of four keys hardly a moment with all four free.
        let think = rand::rng().random_range(THINK_MS.0..=THINK_MS.1);
        tokio::time::sleep(Duration::from_millis(think)).await;
    }
    done
}

/// Sixteen tasks for 3 s on six keys: waiting sets (with the intent) and tried sets of
/// 2 to 4 keys in random orders (two of them writing `a` and `b` named in opposite
/// orders), single writers and single readers. The referee sees no two writers, and no
/// writer beside a reader, on any key at any moment, and no lost update; no holder
/// enters with a token below the last writer's; every task finishes within the run plus
/// a generous bound (no deadlock) and completed sections; nothing is left in Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_sets_in_opposite_orders_never_overlap_and_never_deadlock() {
    let server = RedisServer::start();
    let referee_server = RedisServer::start();
    let referee = Referee::connect(&referee_server.url()).await.unwrap();
    let conn = server.conn().await;
    let counts = Arc::new(Counts::default());

    let mut tasks = JoinSet::new();
    for task in 0..TASKS {
        let mx = notified(&server, Duration::from_secs(5)).await;
        let (referee, counts) = (referee.clone(), Arc::clone(&counts));
        tasks.spawn(async move { (task, contend(task, mx, referee, counts).await) });
    }
    let started = Instant::now();
    let mut progress = vec![0; TASKS];
    while let Some(joined) = tokio::time::timeout(RUN + LIVENESS * 3, tasks.join_next())
        .await
        .expect("a task is stuck: a deadlock")
    {
        let (task, done) = joined.unwrap();
        progress[task] = done;
    }
    let took = started.elapsed();
    let report = referee.report().await.unwrap();
    println!(
        "sets races: {} sections ({} key sections, {} writes) in {took:?}, {} acquires missed ({} waiting sets timed out), per task {progress:?}",
        counts.sections.load(Ordering::SeqCst),
        report.sections,
        report.writes,
        counts.missed.load(Ordering::SeqCst),
        counts.sets_timed_out.load(Ordering::SeqCst),
    );
    assert_eq!(counts.clashes.load(Ordering::SeqCst), 0);
    assert_eq!(report.violations, 0, "{:?}", report.violation_log);
    assert_eq!(report.lost_updates, 0);
    assert_eq!(report.token_order, 0, "{:?}", report.token_order_log);
    assert_eq!(report.sections, counts.keys.load(Ordering::SeqCst));
    for (task, done) in progress.iter().enumerate() {
        assert!(*done > 0, "task {task} never completed a section");
    }
    let left: Vec<String> = raw::cmd(&conn, "KEYS", &["bank:*"]).await;
    let left: Vec<_> = left.iter().filter(|k| !k.ends_with(":fence")).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A reader holds `a`. Set one writes `a` and reads `b`; set two writes `b` and reads
/// `a`; both wait with the lock intent on. The first sets its intent on `a`; the second,
/// kept out of its read key `a` by that intent, sets none on `b` (so neither keeps the
/// other out for ever). The reader's release wakes the first; its release the second:
/// both complete.
#[tokio::test]
async fn two_sets_writing_each_others_read_key_both_complete() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = notified(&server, TTL).await;
    let reader = mx.read().key("a").await.unwrap();

    let first = tokio::spawn({
        let mx = mx.clone();
        async move {
            let set = mx.lock_all().write(["a"]).read(["b"]).await.unwrap();
            let token = set.fencing_token("a").unwrap();
            assert!(set.unlock().await.unwrap());
            token
        }
    });
    let intent_a = eventually(|| async { raw::exists(&conn, "bank:a:lock-intent").await }).await;
    assert!(intent_a, "the first set set no intent on its write key");
    let second = tokio::spawn({
        let mx = mx.clone();
        async move {
            let set = mx.lock_all().write(["b"]).read(["a"]).await.unwrap();
            let token = set.fencing_token("a").unwrap();
            assert!(set.unlock().await.unwrap());
            token
        }
    });
    // The second set is kept out by the first's intent: it takes nothing, sets no
    // intent of its own on b, and waits.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!second.is_finished(), "the second set went past an intent");
    assert!(!first.is_finished());
    assert!(!raw::exists(&conn, "bank:b").await, "b was taken in part");
    assert!(
        !raw::exists(&conn, "bank:b:lock-intent").await,
        "both sets keep an intent: each keeps the other out"
    );
    assert_eq!(raw::members(&conn, "bank:a").await, [reader.id()]);

    assert!(reader.unlock().await.unwrap());
    let first_token = tokio::time::timeout(LIVENESS, first)
        .await
        .expect("the first set is woken by the reader's release")
        .unwrap();
    let second_token = tokio::time::timeout(LIVENESS, second)
        .await
        .expect("the second set is woken by the first's release")
        .unwrap();
    assert!(second_token > first_token, "a's tokens follow the order");
    for key in [
        "bank:a",
        "bank:b",
        "bank:a:lock-intent",
        "bank:b:lock-intent",
    ] {
        assert!(!raw::exists(&conn, key).await, "{key} left behind");
    }
}

/// A set that set its intent on its write key `a` (a reader holds `a`) and is then kept
/// out of its read key `b` by a waiting writer's intent removes its own intent at its
/// next attempt, so the writer's wait and its own never keep each other out; then all
/// complete in turn.
#[tokio::test]
async fn a_set_blocked_by_another_waiters_intent_removes_its_own() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = notified(&server, TTL).await;
    let holding_a = mx.read().key("a").await.unwrap();
    let leaving_a = mx.read().key("a").await.unwrap();
    let holding_b = mx.read().key("b").await.unwrap();

    let set = tokio::spawn({
        let mx = mx.clone();
        async move {
            let set = mx.lock_all().write(["a"]).read(["b"]).await.unwrap();
            assert!(set.unlock().await.unwrap());
        }
    });
    assert!(eventually(|| async { raw::exists(&conn, "bank:a:lock-intent").await }).await);
    let writer = tokio::spawn({
        let mx = mx.clone();
        async move {
            let writer = mx.write().key("b").await.unwrap();
            assert!(writer.unlock().await.unwrap());
        }
    });
    assert!(eventually(|| async { raw::exists(&conn, "bank:b:lock-intent").await }).await);
    // A release on a wakes the set: a is still held, and the writer's intent keeps it out
    // of b, so it removes its intent on a.
    assert!(leaving_a.unlock().await.unwrap());
    let removed = eventually(|| async { !raw::exists(&conn, "bank:a:lock-intent").await }).await;
    assert!(
        removed,
        "the set kept its intent while another's kept it out"
    );
    assert!(!set.is_finished());

    assert!(holding_b.unlock().await.unwrap());
    tokio::time::timeout(LIVENESS, writer)
        .await
        .expect("the writer goes in once b's reader left")
        .unwrap();
    assert!(holding_a.unlock().await.unwrap());
    tokio::time::timeout(LIVENESS, set)
        .await
        .expect("the set goes in once a's readers left")
        .unwrap();
}

/// A writer holds `b`; a set writing `a` (free) and reading `b` waits without taking `a`,
/// with its intent on `a`; the writer's release wakes it (with a 30 s TTL only the message
/// can, in time), and it then holds both keys with tokens above the writer's.
#[tokio::test]
async fn a_waiting_set_is_woken_by_the_release_of_a_writer_of_its_second_key() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = notified(&server, TTL).await;
    let writer = mx.write().key("b").await.unwrap();
    let writer_token = writer.fencing_token();

    let waiting = tokio::spawn({
        let mx = mx.clone();
        async move { mx.lock_all().write(["a"]).read(["b"]).await }
    });
    assert!(eventually(|| async { raw::exists(&conn, "bank:a:lock-intent").await }).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "taken beside a writer");
    assert!(!raw::exists(&conn, "bank:a").await, "a was taken alone");
    assert_eq!(
        raw::get(&conn, "bank:b").await.as_deref(),
        Some(writer.id())
    );

    let released = Instant::now();
    assert!(writer.unlock().await.unwrap());
    let set = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("woken by the writer's release")
        .unwrap()
        .unwrap();
    println!("woken {:?} after the release", released.elapsed());
    assert_eq!(raw::get(&conn, "bank:a").await.as_deref(), Some(set.id()));
    assert_eq!(raw::members(&conn, "bank:b").await, [set.id()]);
    assert!(set.fencing_token("b").unwrap() > writer_token);
    assert!(!raw::exists(&conn, "bank:a:lock-intent").await);
    assert!(set.unlock().await.unwrap());
}

/// A set of three keys with a 400 ms TTL held for 2.4 s (six TTLs): every key keeps its
/// holder and a PTTL within the TTL throughout, `refreshes()` grows, and each renewal
/// period costs the server about one script (`renew.lua` over the three keys), not one
/// per key.
#[tokio::test]
async fn a_set_is_renewed_on_every_key_in_one_batch() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_millis(400);
    let mx = notified(&server, ttl).await;
    let set = mx.lock_all().write(["a", "b"]).read(["c"]).await.unwrap();
    let scripts =
        || async { raw::calls(&conn, "evalsha").await.0 + raw::calls(&conn, "eval").await.0 };
    let (sent_before, renewed_before) = (scripts().await, set.refreshes());

    let until = Instant::now() + ttl * 6;
    let mut checks = 0;
    while Instant::now() < until {
        for key in ["bank:a", "bank:b"] {
            assert_eq!(
                raw::get(&conn, key).await.as_deref(),
                Some(set.id()),
                "{key}"
            );
        }
        assert_eq!(raw::members(&conn, "bank:c").await, [set.id()]);
        for key in ["bank:a", "bank:b", "bank:c"] {
            let pttl = raw::pttl(&conn, key).await;
            assert!(pttl > 0 && pttl <= 400, "{key}: {pttl}");
        }
        assert!(!set.is_cancelled(), "{:?}", set.cancel_reason());
        checks += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (sent, renewed) = (
        scripts().await - sent_before,
        set.refreshes() - renewed_before,
    );
    println!("{checks} checks; {renewed} renewals, {sent} scripts sent");
    // Every 200 ms over 2.4 s: about 12.
    assert!(renewed >= 8, "renewed only {renewed} times");
    // One script per renewal (a first EVALSHA the server does not know yet is followed
    // by an EVAL: 2 more); one per key would be 3 × renewed.
    assert!(
        sent <= renewed + 2,
        "{sent} scripts for {renewed} renewals of 3 keys: not one batch per renewal"
    );
    assert!(set.unlock().await.unwrap());
}

/// `unlock` answers true when every key is still held. A key taken over by another
/// holder (`SET` with a new value) is found gone by the next renewal (400 ms TTL): the
/// token fires as `Lost` naming that key, the other keys are released, the key taken over
/// is left to its new holder, and `unlock` answers false.
#[tokio::test]
async fn unlock_says_whether_every_key_was_held_and_a_key_taken_over_is_named() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_millis(400);
    let mx = notified(&server, ttl).await;

    let set = mx.lock_all().write(["a", "b"]).read(["c"]).await.unwrap();
    assert!(!set.is_cancelled());
    assert!(set.unlock().await.unwrap(), "every key was held");
    for key in ["bank:a", "bank:b", "bank:c"] {
        assert!(!raw::exists(&conn, key).await, "{key} left behind");
    }

    let set = mx.lock_all().write(["a", "b"]).read(["c"]).await.unwrap();
    let _: () = raw::cmd(&conn, "SET", &["bank:b", "other", "PX", "30000"]).await;
    tokio::time::timeout(LIVENESS, set.cancelled())
        .await
        .expect("the renewal finds b taken over");
    assert_eq!(set.cancel_reason(), Some(CancelReason::Lost));
    assert_eq!(set.lost_key(), Some("b"));
    let released = eventually(|| async {
        !raw::exists(&conn, "bank:a").await && !raw::exists(&conn, "bank:c").await
    })
    .await;
    assert!(released, "the keys still held were not released");
    assert!(
        !set.unlock().await.unwrap(),
        "unlock said every key was held"
    );
    assert_eq!(
        raw::get(&conn, "bank:b").await.as_deref(),
        Some("other"),
        "the new holder's key was touched"
    );
}

/// Eight tasks, half naming `a` and `b` in one order and half in the other, each taking
/// the pair to write 25 times in a row, waiting: all 200 sets are taken and released,
/// each task finishing within 10 s (no deadlock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_keys_named_in_opposite_orders_by_many_waiting_sets_never_deadlock() {
    let server = RedisServer::start();
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = JoinSet::new();
    for task in 0..8 {
        let mx = notified(&server, Duration::from_secs(5)).await;
        let done = Arc::clone(&done);
        tasks.spawn(async move {
            let keys = if task % 2 == 0 {
                ["a", "b"]
            } else {
                ["b", "a"]
            };
            for _ in 0..25 {
                let set = mx.lock_all().write(keys).await.unwrap();
                assert_eq!(set.keys().collect::<Vec<_>>(), keys);
                assert!(set.unlock().await.unwrap());
                done.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    join_within(&mut tasks, LIVENESS * 2, "a set is stuck: a deadlock").await;
    assert_eq!(done.load(Ordering::SeqCst), 200);
}
