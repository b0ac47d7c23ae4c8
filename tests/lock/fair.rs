//! Fair mode, for the read-write mutex and the semaphore: waiters are served in arrival
//! order (measured as the largest overtaking) and readers queued together share, a
//! queued writer keeps later readers out, a waiter that gives up leaves the queue at once,
//! a dead one holds the others up for about one TTL only, tries never overtake the queue,
//! plain and Go clients barge without breaking exclusion or the fair waiters' order, and
//! the queue keys leave nothing behind.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common;
use crate::common::go_peer::GoPeer;
use crate::common::lone_worker::LoneWorker;
use crate::common::proxy::{Fault, Proxy};
use crate::common::referee::Referee;
use crate::common::{eventually, join_within, raw, RedisServer, LIVENESS};
use redis::aio::MultiplexedConnection;
use redis::Script;
use redismutex::{Error, Permit, ReadGuard, RwMutex, Semaphore, WriteGuard};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

type C = MultiplexedConnection;

/// How long each waiter of a line holds what it got.
const HOLD: Duration = Duration::from_millis(5);

/// What a waiter waits for.
#[derive(Clone)]
enum Want {
    Write(RwMutex<C>),
    Read(RwMutex<C>),
    Permit(Semaphore<C>),
}

/// What a waiter got.
enum Held {
    Write(WriteGuard),
    Read(ReadGuard),
    Permit(Permit),
}

impl Held {
    /// Whether it was still held when released.
    async fn unlock(self) -> bool {
        match self {
            Held::Write(guard) => guard.unlock().await.unwrap(),
            Held::Read(guard) => guard.unlock().await.unwrap(),
            Held::Permit(permit) => permit.unlock().await.unwrap(),
        }
    }
}

impl Want {
    async fn acquire(
        &self,
        timeout: Option<Duration>,
        parent: Option<CancellationToken>,
    ) -> Result<Held, Error> {
        macro_rules! with_options {
            ($request:expr) => {{
                let mut request = $request;
                if let Some(timeout) = timeout {
                    request = request.timeout(timeout);
                }
                if let Some(parent) = parent {
                    request = request.parent(parent);
                }
                request.await
            }};
        }
        match self {
            Want::Write(mx) => with_options!(mx.write()).map(Held::Write),
            Want::Read(mx) => with_options!(mx.read()).map(Held::Read),
            Want::Permit(sem) => with_options!(sem.acquire()).map(Held::Permit),
        }
    }

    async fn try_acquire(&self) -> Result<Option<Held>, Error> {
        match self {
            Want::Write(mx) => mx.try_write().await.map(|got| got.map(Held::Write)),
            Want::Read(mx) => mx.try_read().await.map(|got| got.map(Held::Read)),
            Want::Permit(sem) => sem.try_acquire().await.map(|got| got.map(Held::Permit)),
        }
    }
}

/// A mutex named `name` with the given TTL, in fair mode when `fair`, waking its waiters through
/// `server`'s notifications when given, else polling.
fn fair_mutex(
    conn: &C,
    name: &str,
    ttl: Duration,
    fair: bool,
    notify: Option<&RedisServer>,
) -> RwMutex<C> {
    let mut builder = RwMutex::builder(conn.clone(), name).ttl(ttl).fair(fair);
    if let Some(server) = notify {
        builder = builder.notifier(server.client());
    }
    builder.build().unwrap()
}

/// A semaphore, as [`fair_mutex`] makes a mutex.
fn fair_semaphore(
    conn: &C,
    name: &str,
    permits: u32,
    ttl: Duration,
    fair: bool,
    notify: Option<&RedisServer>,
) -> Semaphore<C> {
    let mut builder = Semaphore::builder(conn.clone(), name, permits)
        .ttl(ttl)
        .fair(fair);
    if let Some(server) = notify {
        builder = builder.notifier(server.client());
    }
    builder.build().unwrap()
}

/// How many wait in the fair queue of `key`.
async fn queued(conn: &C, key: &str) -> i64 {
    raw::cmd(conn, "ZCARD", &[&format!("{key}:queue")]).await
}

/// Waits until `n` wait in the fair queue of `key`; fails the test after [`LIVENESS`].
async fn wait_queued(conn: &C, key: &str, n: i64) {
    let reached = eventually(|| async { queued(conn, key).await == n }).await;
    assert!(
        reached,
        "{key}: {} queued, not {n}",
        queued(conn, key).await
    );
}

/// The largest overtaking in `order`, the arrival numbers of the waiters in the order
/// they acquired: for each waiter, how many whose turn came later (by `turn` of their
/// arrival number) acquired before it; the largest of those counts.
fn overtaking(order: &[usize], turn: impl Fn(usize) -> usize) -> usize {
    order
        .iter()
        .enumerate()
        .map(|(at, &waiter)| {
            order[..at]
                .iter()
                .filter(|&&earlier| turn(earlier) > turn(waiter))
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// What a line of waiters did: who acquired in which order, and which of them never
/// saw their whole turn inside at once.
#[derive(Debug)]
struct Lineup {
    order: Vec<usize>,
    apart: Vec<usize>,
}

/// Lines `waiters` up on `key` one by one while `blockers` hold it (in fair mode each
/// has taken its place in the queue in Redis before the next arrives), then releases the
/// blockers. Waiter `i` shares its turn with those of the same `turns[i]` (readers queued
/// together): each holds until all of its turn have acquired, or for [`LIVENESS`] at
/// most, then [`HOLD`] more.
async fn line_up(
    conn: &C,
    key: &str,
    fair: bool,
    waiters: Vec<Want>,
    turns: Vec<usize>,
    blockers: Vec<Held>,
) -> Lineup {
    let turns = Arc::new(turns);
    let in_turn: Arc<Vec<AtomicUsize>> =
        Arc::new(turns.iter().map(|_| AtomicUsize::new(0)).collect());
    let order = Arc::new(Mutex::new(Vec::new()));
    let apart = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = JoinSet::new();
    for (i, want) in waiters.into_iter().enumerate() {
        let (turns, in_turn) = (Arc::clone(&turns), Arc::clone(&in_turn));
        let (order, apart) = (Arc::clone(&order), Arc::clone(&apart));
        tasks.spawn(async move {
            let held = want.acquire(None, None).await.unwrap();
            order.lock().unwrap().push(i);
            let turn = turns[i];
            let size = turns.iter().filter(|&&t| t == turn).count();
            in_turn[turn].fetch_add(1, Ordering::SeqCst);
            let together =
                eventually(|| async { in_turn[turn].load(Ordering::SeqCst) == size }).await;
            if !together {
                apart.lock().unwrap().push(i);
            }
            tokio::time::sleep(HOLD).await;
            assert!(held.unlock().await, "waiter {i} held to the end");
        });
        if fair {
            wait_queued(conn, key, i as i64 + 1).await;
        } else {
            // No queue in Redis to watch: arrivals spaced by far more than a round trip.
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }
    for blocker in blockers {
        assert!(blocker.unlock().await);
    }
    join_within(&mut tasks, Duration::from_secs(60), "every waiter acquires").await;
    let order = order.lock().unwrap().clone();
    let apart = apart.lock().unwrap().clone();
    Lineup { order, apart }
}

const WAITERS: usize = 12;
const LINE_TTL: Duration = Duration::from_secs(2);

/// Three connections to `server`.
async fn three_conns(server: &RedisServer) -> Vec<C> {
    let mut conns = Vec::new();
    for _ in 0..3 {
        conns.push(server.conn().await);
    }
    conns
}

/// [`WAITERS`] writers, each with a handle of its own on one of three connections,
/// lined up behind a writer.
async fn writers_line(fair: bool, notify: bool) -> Vec<usize> {
    let server = RedisServer::start();
    let conns = three_conns(&server).await;
    let notifier = notify.then_some(&server);
    let made = |i: usize| fair_mutex(&conns[i % 3], "line", LINE_TTL, fair, notifier);
    let holder = made(0).write().await.unwrap();
    let waiters = (0..WAITERS).map(|i| Want::Write(made(i))).collect();
    let turns = (0..WAITERS).collect();
    let lineup = line_up(
        &conns[0],
        "line",
        fair,
        waiters,
        turns,
        vec![Held::Write(holder)],
    )
    .await;
    lineup.order
}

#[tokio::test]
async fn fair_writers_acquire_in_arrival_order_with_no_overtaking() {
    for notify in [true, false] {
        let order = writers_line(true, notify).await;
        let most = overtaking(&order, |i| i);
        println!("fair writers, notify {notify}: largest overtaking {most}, order {order:?}");
        assert_eq!(most, 0, "notify {notify}: {order:?}");
    }
    // The measure sees unfairness: plain waiters that poll take the lock in the order
    // their polls happen to come.
    let order = writers_line(false, false).await;
    let most = overtaking(&order, |i| i);
    println!("plain writers, polling: largest overtaking {most}, order {order:?}");
    assert!(
        most > 0,
        "plain writers kept their arrival order: {order:?}"
    );
}

/// [`WAITERS`] semaphore waiters of 2 permits, one of which stays pinned, so that one
/// permit goes round: it must go in arrival order.
async fn permits_line(fair: bool, notify: bool) -> Vec<usize> {
    let server = RedisServer::start();
    let conns = three_conns(&server).await;
    let notifier = notify.then_some(&server);
    let made = |i: usize| fair_semaphore(&conns[i % 3], "line", 2, LINE_TTL, fair, notifier);
    let _pinned = made(0).acquire().await.unwrap();
    let blocker = made(1).acquire().await.unwrap();
    let waiters = (0..WAITERS).map(|i| Want::Permit(made(i))).collect();
    let turns = (0..WAITERS).collect();
    let lineup = line_up(
        &conns[0],
        "line",
        fair,
        waiters,
        turns,
        vec![Held::Permit(blocker)],
    )
    .await;
    lineup.order
}

#[tokio::test]
async fn fair_permits_go_in_arrival_order_with_no_overtaking() {
    for notify in [false, true] {
        let order = permits_line(true, notify).await;
        let most = overtaking(&order, |i| i);
        println!("fair permits, notify {notify}: largest overtaking {most}, order {order:?}");
        assert_eq!(most, 0, "notify {notify}: {order:?}");
    }
    let order = permits_line(false, false).await;
    let most = overtaking(&order, |i| i);
    println!("plain permits, polling: largest overtaking {most}, order {order:?}");
    assert!(
        most > 0,
        "plain permit waiters kept their arrival order: {order:?}"
    );
}

/// Writers and readers in this arrival order; readers between two writers share a turn.
const MIX: [char; WAITERS] = ['w', 'r', 'r', 'r', 'w', 'r', 'r', 'w', 'w', 'r', 'r', 'r'];

/// The turn of each waiter of [`MIX`]: each writer its own, consecutive readers one.
fn mix_turns() -> Vec<usize> {
    let mut turns = Vec::new();
    let mut turn = 0;
    for (i, kind) in MIX.iter().enumerate() {
        if i > 0 && (*kind == 'w' || MIX[i - 1] == 'w') {
            turn += 1;
        }
        turns.push(turn);
    }
    turns
}

async fn mixed_line(fair: bool) -> Lineup {
    let server = RedisServer::start();
    let conns = three_conns(&server).await;
    let made = |i: usize| fair_mutex(&conns[i % 3], "line", LINE_TTL, fair, Some(&server));
    let holder = made(0).write().await.unwrap();
    let waiters = MIX
        .iter()
        .enumerate()
        .map(|(i, kind)| match kind {
            'w' => Want::Write(made(i)),
            _ => Want::Read(made(i)),
        })
        .collect();
    line_up(
        &conns[0],
        "line",
        fair,
        waiters,
        mix_turns(),
        vec![Held::Write(holder)],
    )
    .await
}

#[tokio::test]
async fn fair_readers_queued_together_hold_together_and_no_turn_is_overtaken() {
    let turns = mix_turns();
    assert_eq!(turns, vec![0, 1, 1, 1, 2, 3, 3, 4, 5, 6, 6, 6]);
    let lineup = mixed_line(true).await;
    let most = overtaking(&lineup.order, |i| turns[i]);
    println!("fair mix: largest overtaking of a turn {most}, {lineup:?}");
    assert_eq!(most, 0, "{lineup:?}");
    assert!(
        lineup.apart.is_empty(),
        "readers queued together did not all hold at once: {lineup:?}"
    );
    // Without fair mode (and without the lock intent) readers pass waiting writers.
    let plain = mixed_line(false).await;
    let most = overtaking(&plain.order, |i| turns[i]);
    println!("plain mix: largest overtaking of a turn {most}, {plain:?}");
    assert!(
        most > 0,
        "plain readers never passed a waiting writer: {plain:?}"
    );
}

/// Without the lock intent, a fair writer queued behind readers still keeps later
/// readers out: they queue behind it and get in only after its turn.
#[tokio::test]
async fn a_queued_writer_keeps_later_readers_out_until_its_turn() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_secs(4);
    let readers = fair_mutex(&conn, "feed", ttl, true, None);
    let first = readers.read().await.unwrap();
    let second = readers.read().await.unwrap();

    let writer = tokio::spawn({
        let mx = fair_mutex(&server.conn().await, "feed", ttl, true, None);
        async move { mx.write().await.map(|guard| (Instant::now(), guard)) }
    });
    wait_queued(&conn, "feed", 1).await;
    let late = tokio::spawn({
        let mx = fair_mutex(&server.conn().await, "feed", ttl, true, None);
        async move { mx.read().await.map(|guard| (Instant::now(), guard)) }
    });
    wait_queued(&conn, "feed", 2).await;
    assert!(
        readers.try_read().await.unwrap().is_none(),
        "a try does not pass the writer"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !late.is_finished(),
        "a later reader joined the readers ahead of the writer"
    );

    assert!(first.unlock().await.unwrap());
    assert!(second.unlock().await.unwrap());
    let (written, writer) = tokio::time::timeout(LIVENESS, writer)
        .await
        .expect("the writer's turn came")
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!late.is_finished(), "a reader got in while the writer held");
    assert!(writer.unlock().await.unwrap());
    let (read, reader) = tokio::time::timeout(LIVENESS, late)
        .await
        .expect("the reader's turn came")
        .unwrap()
        .unwrap();
    assert!(read > written);
    assert!(reader.unlock().await.unwrap());
    assert!(!raw::exists(&conn, "feed:queue").await);
}

#[derive(Debug, Clone, Copy)]
enum GiveUp {
    Timeout,
    ParentCancelled,
    Dropped,
}

/// With `holder` holding `key`, `first` queues, then `second` behind it; `first` gives
/// up `how`. It leaves the queue at once, and `second` gets the lock right after the
/// holder's release. With a 30 s TTL nothing but the leave explains that.
async fn give_up(conn: &C, key: &str, holder: Held, first: Want, second: Want, how: GiveUp) {
    let parent = CancellationToken::new();
    let timeout = matches!(how, GiveUp::Timeout).then_some(Duration::from_secs(2));
    let first = tokio::spawn({
        let parent = parent.clone();
        async move { first.acquire(timeout, Some(parent)).await.map(|_| ()) }
    });
    wait_queued(conn, key, 1).await;
    let second: JoinHandle<Held> =
        tokio::spawn(async move { second.acquire(None, None).await.unwrap() });
    wait_queued(conn, key, 2).await;

    match how {
        GiveUp::Timeout => {
            let result = tokio::time::timeout(LIVENESS, first)
                .await
                .unwrap()
                .unwrap();
            assert!(matches!(result, Err(Error::Timeout)), "{result:?}");
        }
        GiveUp::ParentCancelled => {
            parent.cancel();
            let result = tokio::time::timeout(LIVENESS, first)
                .await
                .unwrap()
                .unwrap();
            assert!(matches!(result, Err(Error::Cancelled)), "{result:?}");
        }
        GiveUp::Dropped => {
            first.abort();
            assert!(first.await.unwrap_err().is_cancelled());
        }
    }
    let deadlines = format!("{key}:queue-deadline");
    let left = eventually(|| async {
        queued(conn, key).await == 1 && raw::cmd::<i64>(conn, "ZCARD", &[&deadlines]).await == 1
    })
    .await;
    assert!(left, "{how:?}: the waiter that gave up is still queued");

    assert!(holder.unlock().await);
    let got = tokio::time::timeout(LIVENESS, second)
        .await
        .unwrap_or_else(|_| panic!("{how:?}: the waiter behind was held up"))
        .unwrap();
    assert!(got.unlock().await);
    assert!(!raw::exists(conn, &format!("{key}:queue")).await);
}

#[tokio::test]
async fn a_fair_writer_that_gives_up_leaves_the_queue_at_once() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_secs(30);
    for how in [GiveUp::Timeout, GiveUp::ParentCancelled, GiveUp::Dropped] {
        let made = |conn: &C| fair_mutex(conn, "line", ttl, true, Some(&server));
        let holder = made(&conn).write().await.unwrap();
        let first = Want::Write(made(&server.conn().await));
        let second = Want::Write(made(&server.conn().await));
        give_up(&conn, "line", Held::Write(holder), first, second, how).await;
    }
}

#[tokio::test]
async fn a_fair_permit_waiter_that_gives_up_leaves_the_queue_at_once() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_secs(30);
    for how in [GiveUp::Timeout, GiveUp::ParentCancelled, GiveUp::Dropped] {
        // Polling here: the waiter behind notices the free permit by itself.
        let made = |conn: &C| fair_semaphore(conn, "line", 1, ttl, true, None);
        let holder = made(&conn).acquire().await.unwrap();
        let first = Want::Permit(made(&server.conn().await));
        let second = Want::Permit(made(&server.conn().await));
        give_up(&conn, "line", Held::Permit(holder), first, second, how).await;
    }
}

/// Atomically, on the server: the first waiter of the queue of `key`, its deadline, the
/// server's time in ms, and whether `key` (the lock or semaphore) exists.
const PEEK: &str = r#"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
local deadline = first and redis.call('ZSCORE', KEYS[3], first)
return {first or '', deadline and tonumber(deadline) or 0, now, redis.call('EXISTS', KEYS[1])}
"#;

#[derive(Debug)]
struct Peek {
    first: String,
    deadline: i64,
    now: i64,
    exists: bool,
}

async fn peek(conn: &C, key: &str) -> Peek {
    let (first, deadline, now, exists): (String, i64, i64, i64) = Script::new(PEEK)
        .key(key)
        .key(format!("{key}:queue"))
        .key(format!("{key}:queue-deadline"))
        .invoke_async(&mut conn.clone())
        .await
        .unwrap();
    Peek {
        first,
        deadline,
        now,
        exists: exists == 1,
    }
}

/// Checks, right after the release of `key`, that the dead waiter first in its queue
/// was still there with its deadline ahead, and that while it stays first with its
/// deadline ahead nobody takes the free lock; watches for `bound` at most. Returns that
/// deadline (server ms).
async fn stalled_behind(conn: &C, key: &str, bound: Duration) -> i64 {
    let watched = Instant::now();
    let at_release = peek(conn, key).await;
    assert!(
        !at_release.first.is_empty() && at_release.deadline > at_release.now,
        "the dead waiter was gone before the release: {at_release:?}"
    );
    assert!(
        !at_release.exists,
        "taken past the dead waiter: {at_release:?}"
    );
    while watched.elapsed() < bound {
        let now = peek(conn, key).await;
        if now.first != at_release.first || now.deadline <= now.now {
            break;
        }
        assert!(
            !now.exists,
            "taken while the dead waiter was first: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    at_release.deadline
}

/// A fair writer whose process is killed while it waits keeps its place until its
/// deadline (its last attempt + TTL): with a 1 s TTL the writer behind it gets the lock
/// within TTL + 2 s of the release, after being held up at first.
#[tokio::test]
async fn a_killed_fair_waiter_holds_the_queue_up_for_about_one_ttl_only() {
    let server = RedisServer::start();
    let referee = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_secs(1);
    let key = "line:k0";
    let made = |conn: &C| fair_mutex(conn, "line", ttl, true, Some(&server));
    let holder = made(&conn).write().key("k0").await.unwrap();
    let (url, referee_url) = (server.url(), referee.url());
    let mut worker = LoneWorker::spawn(
        "dead",
        &[
            ("FW_LOCK_URL", &url),
            ("FW_REFEREE_URL", &referee_url),
            ("FW_MUTEX", "line"),
            ("FW_FAIR", "1"),
            ("FW_NOTIFY", "0"),
            ("FW_TTL_MS", "1000"),
            ("FW_HOLD_MS", "600000"),
            ("FW_ACQUIRE_TIMEOUT_MS", "600000"),
        ],
    )
    .await;
    wait_queued(&conn, key, 1).await;
    let behind = tokio::spawn({
        let mx = made(&server.conn().await);
        async move {
            let guard = mx.write().key("k0").await.unwrap();
            (Instant::now(), guard)
        }
    });
    wait_queued(&conn, key, 2).await;

    worker.kill().await;
    assert!(holder.unlock().await.unwrap());
    let released = Instant::now();
    stalled_behind(&conn, key, ttl + Duration::from_secs(2)).await;
    let (acquired, guard) = tokio::time::timeout_at(released + ttl + LIVENESS, behind)
        .await
        .expect("the queue moves on")
        .unwrap();
    let waited = acquired - released;
    println!("the writer behind the killed one waited {waited:?} after the release");
    assert!(waited <= ttl + Duration::from_secs(2), "{waited:?}");
    assert!(
        worker.log.count(|e| e.is("ACQUIRED")) == 0,
        "the killed waiter never held"
    );
    assert!(guard.unlock().await.unwrap());
}

/// A fair permit waiter cut off by its proxy (its attempts and its clean-up never reach
/// Redis) keeps its place until its deadline: the waiter behind it gets the permit within
/// TTL + 2 s of the release, and by the server's clock not before that deadline.
#[tokio::test]
async fn a_cut_off_fair_permit_waiter_holds_the_queue_up_for_about_one_ttl_only() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_secs(1);
    let proxy = Proxy::start(server.port()).await;
    let cut_conn = redis::Client::open(proxy.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let holder = fair_semaphore(&conn, "line", 1, ttl, true, None)
        .acquire()
        .await
        .unwrap();
    let cut = fair_semaphore(&cut_conn, "line", 1, ttl, true, None);
    let cut_off = tokio::spawn(async move { cut.acquire().await.map(|_| ()) });
    wait_queued(&conn, "line", 1).await;
    let behind = tokio::spawn({
        let sem = fair_semaphore(&server.conn().await, "line", 1, ttl, true, Some(&server));
        async move { sem.acquire().await.unwrap() }
    });
    wait_queued(&conn, "line", 2).await;

    proxy.set(Fault::Blackhole);
    tokio::time::sleep(Duration::from_millis(100)).await; // what it sent before is in
    assert!(holder.unlock().await.unwrap());
    let released = Instant::now();
    let dead_deadline = stalled_behind(&conn, "line", ttl + Duration::from_secs(2)).await;
    let permit = tokio::time::timeout_at(released + ttl + LIVENESS, behind)
        .await
        .expect("the queue moves on")
        .unwrap();
    let waited = released.elapsed();
    println!("the permit waiter behind the cut-off one waited about {waited:?}");
    assert!(waited <= ttl + Duration::from_secs(2), "{waited:?}");
    let score: f64 = raw::cmd(&conn, "ZSCORE", &["line", permit.id()]).await;
    let acquired_at = score as i64 - i64::try_from(ttl.as_millis()).unwrap();
    assert!(
        acquired_at >= dead_deadline,
        "acquired at {acquired_at}, before the cut-off waiter's deadline {dead_deadline}"
    );
    assert!(permit.unlock().await.unwrap());
    cut_off.abort();
}

/// A fair try never passes a queued waiter, even when the lock is free: here the first
/// waiter is cut off, so it keeps its place (for its 30 s TTL) and the lock stays free.
/// Plain tries, which ignore the queue, get in at once.
#[tokio::test]
async fn fair_tries_never_overtake_a_queued_waiter_and_never_queue() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let ttl = Duration::from_secs(30);
    let proxy = Proxy::start(server.port()).await;
    let cut_conn = redis::Client::open(proxy.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();

    let fair_mx = fair_mutex(&conn, "tryw", ttl, true, None);
    let writer = fair_mx.write().await.unwrap();
    let cut_mx = fair_mutex(&cut_conn, "tryw", ttl, true, None);
    let cut_writer = tokio::spawn(async move { cut_mx.write().await.map(|_| ()) });
    wait_queued(&conn, "tryw", 1).await;

    let fair_sem = fair_semaphore(&conn, "trys", 2, ttl, true, None);
    let _one = fair_sem.acquire().await.unwrap();
    let two = fair_sem.acquire().await.unwrap();
    let cut_sem = fair_semaphore(&cut_conn, "trys", 2, ttl, true, None);
    let cut_permit = tokio::spawn(async move { cut_sem.acquire().await.map(|_| ()) });
    wait_queued(&conn, "trys", 1).await;

    proxy.set(Fault::Blackhole);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(writer.unlock().await.unwrap());
    assert!(two.unlock().await.unwrap());
    assert!(!raw::exists(&conn, "tryw").await, "the lock is free");
    let held: i64 = raw::cmd(&conn, "ZCARD", &["trys"]).await;
    assert_eq!(held, 1, "one of two permits is free");

    let fair_wants = [
        Want::Write(fair_mx.clone()),
        Want::Read(fair_mx.clone()),
        Want::Permit(fair_sem.clone()),
    ];
    for round in 0..5 {
        for want in &fair_wants {
            let got = want.try_acquire().await.unwrap();
            assert!(
                got.is_none(),
                "round {round}: a fair try overtook the queue"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(queued(&conn, "tryw").await, 1, "tries never queue");
    assert_eq!(queued(&conn, "trys").await, 1, "tries never queue");

    let plain_mx = fair_mutex(&conn, "tryw", ttl, false, None);
    let plain_sem = fair_semaphore(&conn, "trys", 2, ttl, false, None);
    for want in [Want::Write(plain_mx), Want::Permit(plain_sem)] {
        let got = want
            .try_acquire()
            .await
            .unwrap()
            .expect("a plain try ignores the queue");
        assert!(got.unlock().await);
    }
    cut_writer.abort();
    cut_permit.abort();
}

/// A plain client and a Go-protocol peer take the lock ahead of queued fair waiters
/// (barging); exclusion holds for everyone throughout, by a referee; the fair waiters
/// still acquire in their arrival order.
#[tokio::test]
async fn plain_and_go_clients_barge_yet_exclusion_and_fair_order_hold() {
    const FAIR: usize = 4;
    let server = RedisServer::start();
    let referee_server = RedisServer::start();
    let referee = Referee::connect(&referee_server.url()).await.unwrap();
    let conn = server.conn().await;
    let key = "shared";
    let us = || common::events::now_us();

    let go = GoPeer::new(server.conn().await, 60_000);
    let go_first = GoPeer::new_id();
    assert_eq!(go.write(key, &go_first, false).await, None);

    // Fair writers with a 30 s TTL, woken by notifications: a release that publishes
    // nothing (the Go client's) leaves them asleep.
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut fair = JoinSet::new();
    for i in 0..FAIR {
        let mx = fair_mutex(
            &server.conn().await,
            key,
            Duration::from_secs(30),
            true,
            Some(&server),
        );
        let (order, referee) = (Arc::clone(&order), referee.clone());
        fair.spawn(async move {
            let guard = mx.write().await.unwrap();
            let name = format!("fair{i}");
            let clash = referee
                .enter(key, "w", &name, guard.fencing_token(), us())
                .await
                .unwrap();
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(20)).await;
            referee.leave(key, &name).await.unwrap();
            assert!(!clash, "{name} entered while someone was inside");
            assert!(guard.unlock().await.unwrap());
        });
        wait_queued(&conn, key, i as i64 + 1).await;
    }

    // The Go client takes the free lock again ahead of the queue.
    go.unlock(key, &go_first).await;
    let go_again = GoPeer::new_id();
    assert_eq!(
        go.write(key, &go_again, false).await,
        None,
        "the Go client barges"
    );
    assert!(!referee.enter(key, "w", "go", 0, us()).await.unwrap());
    let plain = fair_mutex(
        &server.conn().await,
        key,
        Duration::from_secs(4),
        false,
        None,
    );
    let fair_try = fair_mutex(&conn, key, Duration::from_secs(4), true, None);
    assert!(
        plain.try_write().await.unwrap().is_none(),
        "the Go writer holds"
    );
    assert!(fair_try.try_write().await.unwrap().is_none());
    referee.leave(key, "go").await.unwrap();
    go.unlock(key, &go_again).await;

    // So does a plain client.
    let barged = plain
        .try_write()
        .await
        .unwrap()
        .expect("a plain client barges");
    assert!(!referee
        .enter(key, "w", "plain", barged.fencing_token(), us())
        .await
        .unwrap());
    assert!(
        go.write(key, &GoPeer::new_id(), false).await.is_some(),
        "the plain writer holds"
    );
    assert!(go.read(key, &GoPeer::new_id()).await.is_some());
    assert!(fair_try.try_read().await.unwrap().is_none());
    assert_eq!(
        queued(&conn, key).await,
        FAIR as i64,
        "nobody left the queue"
    );

    // Both keep barging while the fair writers go through.
    let stop = CancellationToken::new();
    let mut bargers = JoinSet::new();
    let barges = Arc::new(AtomicUsize::new(0));
    bargers.spawn({
        let (stop, referee, barges) = (stop.clone(), referee.clone(), Arc::clone(&barges));
        let plain = fair_mutex(
            &server.conn().await,
            key,
            Duration::from_secs(4),
            false,
            None,
        );
        async move {
            while !stop.is_cancelled() {
                if let Ok(guard) = plain.write().timeout(Duration::from_millis(100)).await {
                    let clash = referee
                        .enter(key, "w", "plain", guard.fencing_token(), us())
                        .await
                        .unwrap();
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    referee.leave(key, "plain").await.unwrap();
                    assert!(!clash, "the plain writer entered while someone was inside");
                    assert!(guard.unlock().await.unwrap());
                    barges.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    });
    bargers.spawn({
        let (stop, referee, barges) = (stop.clone(), referee.clone(), Arc::clone(&barges));
        let go = GoPeer::new(server.conn().await, 500);
        async move {
            while !stop.is_cancelled() {
                let id = GoPeer::new_id();
                if go.write(key, &id, false).await.is_none() {
                    let clash = referee.enter(key, "w", "go", 0, us()).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    referee.leave(key, "go").await.unwrap();
                    assert!(!clash, "the Go writer entered while someone was inside");
                    go.unlock(key, &id).await;
                    barges.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    });
    referee.leave(key, "plain").await.unwrap();
    assert!(barged.unlock().await.unwrap());
    join_within(
        &mut fair,
        Duration::from_secs(30),
        "the fair writers all acquire",
    )
    .await;
    stop.cancel();
    while let Some(done) = bargers.join_next().await {
        done.unwrap();
    }
    let order = order.lock().unwrap().clone();
    let report = referee.report().await.unwrap();
    println!(
        "fair order {order:?}; {} barges while they went through; {} sections on the referee",
        barges.load(Ordering::SeqCst),
        report.sections
    );
    assert_eq!(
        order,
        (0..FAIR).collect::<Vec<_>>(),
        "fair writers out of arrival order"
    );
    assert_eq!(report.violations, 0, "{:?}", report.violation_log);
}

/// The queue keys carry TTLs: they vanish as the last waiter leaves, and when a cut-off
/// waiter is left in them with nobody to drop it, within its TTL.
#[tokio::test]
async fn the_queue_keys_have_ttls_and_nothing_is_left_behind() {
    let server = RedisServer::start();
    let conn = server.conn().await;

    // A 30 s TTL: the keys go with the last waiter, not by their TTL.
    let long = Duration::from_secs(30);
    let holder = fair_mutex(&conn, "gone", long, true, None)
        .write()
        .await
        .unwrap();
    let waiter = tokio::spawn({
        let mx = fair_mutex(&server.conn().await, "gone", long, true, None);
        async move { mx.write().await.unwrap() }
    });
    wait_queued(&conn, "gone", 1).await;
    for key in ["gone:queue", "gone:queue-deadline"] {
        let pttl = raw::pttl(&conn, key).await;
        assert!((1..=30_000).contains(&pttl), "{key}: PTTL {pttl}");
    }
    assert!(holder.unlock().await.unwrap());
    let guard = tokio::time::timeout(LIVENESS, waiter)
        .await
        .unwrap()
        .unwrap();
    for key in ["gone:queue", "gone:queue-deadline"] {
        assert!(
            !raw::exists(&conn, key).await,
            "{key} outlived its last waiter"
        );
    }
    assert!(guard.unlock().await.unwrap());

    let ttl = Duration::from_secs(1);
    let proxy = Proxy::start(server.port()).await;
    let cut_conn = redis::Client::open(proxy.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let holder = fair_mutex(&conn, "tidy", ttl, true, None)
        .write()
        .await
        .unwrap();
    let behind = tokio::spawn({
        let mx = fair_mutex(&server.conn().await, "tidy", ttl, true, None);
        async move { mx.write().await.unwrap() }
    });
    wait_queued(&conn, "tidy", 1).await;
    let cut = fair_mutex(&cut_conn, "tidy", ttl, true, None);
    let cut_off = tokio::spawn(async move { cut.write().await.map(|_| ()) });
    wait_queued(&conn, "tidy", 2).await;
    for key in ["tidy:queue", "tidy:queue-deadline"] {
        let pttl = raw::pttl(&conn, key).await;
        assert!((1..=1000).contains(&pttl), "{key}: PTTL {pttl}");
    }

    proxy.set(Fault::Blackhole);
    assert!(holder.unlock().await.unwrap());
    let guard = tokio::time::timeout(LIVENESS, behind)
        .await
        .unwrap()
        .unwrap();
    assert!(guard.unlock().await.unwrap());
    // The cut-off waiter is still queued, and nobody attempts again to drop it.
    let gone = || async {
        let keys: Vec<String> = raw::cmd(&conn, "KEYS", &["tidy*"]).await;
        keys == vec!["tidy:fence".to_string()]
    };
    let deadline = Instant::now() + ttl + LIVENESS;
    let mut clean = false;
    while Instant::now() < deadline {
        if gone().await {
            clean = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let keys: Vec<String> = raw::cmd(&conn, "KEYS", &["*"]).await;
    assert!(clean, "left behind: {keys:?}");
    cut_off.abort();
}

/// The sorted-set commands the fair scripts run on a queue.
const QUEUE_COMMANDS: [&str; 7] = [
    "zrank",
    "zcard",
    "zrange",
    "zrangebyscore",
    "zrem",
    "zadd",
    "zscore",
];

/// How many times the server ran each of [`QUEUE_COMMANDS`] (also from scripts).
async fn queue_calls(conn: &C) -> Vec<u64> {
    let mut calls = Vec::new();
    for command in QUEUE_COMMANDS {
        calls.push(raw::calls(conn, command).await.0);
    }
    calls
}

/// With nobody queued (both queue keys absent), a fair writer's and a fair reader's
/// acquire and release run no sorted-set command: one `EXISTS` finds the queue empty.
/// (A fair semaphore's own key is a sorted set, so its cycle is not counted here.)
/// With a waiter queued, the same acquire reads the queue (the check is not vacuous).
#[tokio::test]
async fn an_uncontended_fair_cycle_runs_no_queue_command() {
    let server = RedisServer::start();
    let conn = server.conn().await;
    let mx = fair_mutex(&conn, "alone", Duration::from_secs(5), true, None);
    let before = queue_calls(&conn).await;
    let exists_before = raw::calls(&conn, "exists").await.0;
    let scard_before = raw::calls(&conn, "scard").await.0;
    for _ in 0..3 {
        assert!(mx.write().await.unwrap().unlock().await.unwrap());
        assert!(mx.read().await.unwrap().unlock().await.unwrap());
    }
    let after = queue_calls(&conn).await;
    assert_eq!(before, after, "{QUEUE_COMMANDS:?}");
    // One `EXISTS` per fair acquire (6); a reader's release counts the readers left
    // with `SCARD` (3), not the queue.
    let exists = raw::calls(&conn, "exists").await.0 - exists_before;
    assert_eq!(exists, 6, "the scripts looked at the queue");
    assert_eq!(raw::calls(&conn, "scard").await.0 - scard_before, 3);

    let holder = mx.write().await.unwrap();
    let waiter = tokio::spawn({
        let mx = fair_mutex(
            &server.conn().await,
            "alone",
            Duration::from_secs(5),
            true,
            None,
        );
        async move { mx.write().await.unwrap() }
    });
    wait_queued(&conn, "alone", 1).await;
    let queued = queue_calls(&conn).await;
    assert!(holder.unlock().await.unwrap());
    let guard = tokio::time::timeout(LIVENESS, waiter)
        .await
        .unwrap()
        .unwrap();
    let served = queue_calls(&conn).await;
    assert!(
        served
            .iter()
            .zip(&queued)
            .any(|(served, queued)| served > queued),
        "the queued waiter's acquire read its queue: {queued:?} -> {served:?}"
    );
    assert!(guard.unlock().await.unwrap());
}
