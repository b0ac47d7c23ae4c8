//! Lock cycles (acquire + release) against a harness-started redis-server, each group
//! next to its raw redis-rs baseline so results read as a ratio to it.
//!
//! The raw write cycle is `SET key id NX PX ttl`, then a compare-and-delete script sent
//! as EVALSHA (`redis::Script`): the two round trips any Redis lock needs.
//!
//! - `uncontended`: one task, one key: `raw`, `write` (write + unlock), `read`,
//!   `fair_write` (write + unlock with fair mode on); `raw_semaphore` (a sorted-set
//!   semaphore script that expires holders by the server clock, then `ZREM`) and
//!   `permit` (`Semaphore::acquire` + unlock, 4 permits).
//! - `tasks32`: 32 tasks on their own keys sharing one connection; one iteration is one
//!   cycle per task (the time of 32 concurrent cycles): `raw`, `write`.
//! - `readers32`: 32 tasks reading one key (read + unlock), next to the raw 32-task figure
//!   and the fenced read floor (`read_floor`: one script checking the intent, adding the
//!   reader and minting a token, then one removing it, `benches/raw.rs`).
//! - `handoff`: A holds key K and B waits for it on its own connection (B's mutex has a
//!   notifier); A releases; measured from A's release returning to B's acquire returning.
//!   `raw` is the floor: B waits on a Pub/Sub subscription to `K:released` and retries
//!   `SET NX` when woken; A releases with a compare-delete-publish script. `fair_write`
//!   and `fair_permit` are the same hand-off with fair mode on (a write lock, and a
//!   semaphore of 1 permit).
//!
//! `cargo bench --bench cycle -- --test` runs every benchmark once.

#[path = "../tests/common/server.rs"]
#[allow(dead_code, unreachable_pub)]
mod server;

#[path = "raw.rs"]
#[allow(dead_code, unreachable_pub)]
mod raw;

use std::future::Future;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, SamplingMode};
use futures_util::StreamExt;
use raw::{
    raw_cycle, raw_id, raw_release, raw_semaphore_cycle, raw_set, read_floor_cycle, RELEASE,
    RELEASE_PUBLISH,
};
use redis::aio::MultiplexedConnection;
use redismutex::{Guard, RwMutex, Semaphore};
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

/// Tasks sharing one connection in `tasks32` and `readers32`.
const TASKS: usize = 32;
/// The PX of raw locks, the library's default TTL.
const TTL_MS: u64 = 4000;
/// Permits of the semaphore in `uncontended`.
const PERMITS: u32 = 4;
/// How long B waits, blocked, before A releases in `handoff` (not counted).
const BLOCKED: Duration = Duration::from_millis(5);

async fn write_cycle(mx: &RwMutex<MultiplexedConnection>, key: &str) {
    let guard = mx.write().key(key).await.expect("write");
    assert!(guard.unlock().await.expect("unlock"));
}

async fn read_cycle(mx: &RwMutex<MultiplexedConnection>, key: &str) {
    let guard = mx.read().key(key).await.expect("read");
    assert!(guard.unlock().await.expect("unlock"));
}

async fn permit_cycle(sem: &Semaphore<MultiplexedConnection>, key: &str) {
    let permit = sem.acquire().key(key).await.expect("acquire");
    assert!(permit.unlock().await.expect("unlock"));
}

/// Runs `iters` raw cycles in each of [`TASKS`] tasks concurrently: raw write cycles on
/// their own keys, or with `read_floor` fenced read-floor cycles all on one key.
async fn raw_tasks(conn: &MultiplexedConnection, iters: u64, read_floor: bool) -> Duration {
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for task in 0..TASKS {
        let mut conn = conn.clone();
        tasks.spawn(async move {
            let (key, id) = (format!("bench-raw:{task}"), raw_id(task));
            for _ in 0..iters {
                if read_floor {
                    read_floor_cycle(&mut conn, "bench-read-floor", &id, TTL_MS)
                        .await
                        .expect("read floor script")
                        .expect("read floor cycle");
                } else {
                    raw_cycle(&mut conn, &key, &id, TTL_MS).await;
                }
            }
        });
    }
    tasks.join_all().await;
    start.elapsed()
}

/// Runs `iters` library cycles in each of [`TASKS`] tasks concurrently: writes on their
/// own keys, or reads on one shared key.
async fn mutex_tasks(mx: &RwMutex<MultiplexedConnection>, iters: u64, read: bool) -> Duration {
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for task in 0..TASKS {
        let mx = mx.clone();
        tasks.spawn(async move {
            let key = if read {
                "shared".to_string()
            } else {
                task.to_string()
            };
            for _ in 0..iters {
                if read {
                    read_cycle(&mx, &key).await;
                } else {
                    write_cycle(&mx, &key).await;
                }
            }
        });
    }
    tasks.join_all().await;
    start.elapsed()
}

fn bench_raw_tasks(
    group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    runtime: &Runtime,
    conn: &MultiplexedConnection,
) {
    group.bench_function("raw", |b| {
        b.to_async(runtime)
            .iter_custom(|iters| async move { raw_tasks(conn, iters, false).await })
    });
}

fn uncontended(c: &mut Criterion, runtime: &Runtime, server: &server::RedisServer) {
    let conn = runtime.block_on(server.conn());
    let mx = RwMutex::new(conn.clone(), "bench-uncontended");
    let mut group = c.benchmark_group("uncontended");
    group.bench_function("raw", |b| {
        let id = raw_id(0);
        b.to_async(runtime).iter(|| {
            let (mut conn, id) = (conn.clone(), &id);
            async move { raw_cycle(&mut conn, "bench-raw:uncontended", id, TTL_MS).await }
        })
    });
    group.bench_function("write", |b| {
        b.to_async(runtime).iter(|| write_cycle(&mx, "one"))
    });
    group.bench_function("read", |b| {
        b.to_async(runtime).iter(|| read_cycle(&mx, "one"))
    });
    let fair = RwMutex::builder(conn.clone(), "bench-uncontended-fair")
        .fair(true)
        .build()
        .expect("fair mutex");
    group.bench_function("fair_write", |b| {
        b.to_async(runtime).iter(|| write_cycle(&fair, "one"))
    });
    group.bench_function("raw_semaphore", |b| {
        let id = raw_id(0);
        b.to_async(runtime).iter(|| {
            let (mut conn, id) = (conn.clone(), &id);
            async move {
                let key = "bench-raw:semaphore";
                raw_semaphore_cycle(&mut conn, key, id, TTL_MS, PERMITS).await
            }
        })
    });
    let sem = Semaphore::new(conn.clone(), "bench-uncontended-semaphore", PERMITS);
    group.bench_function("permit", |b| {
        b.to_async(runtime).iter(|| permit_cycle(&sem, "one"))
    });
    group.finish();
}

fn tasks32(c: &mut Criterion, runtime: &Runtime, server: &server::RedisServer) {
    let conn = runtime.block_on(server.conn());
    let mx = RwMutex::new(conn.clone(), "bench-tasks32");
    let mut group = c.benchmark_group("tasks32");
    bench_raw_tasks(&mut group, runtime, &conn);
    group.bench_function("write", |b| {
        b.to_async(runtime)
            .iter_custom(|iters| mutex_tasks(&mx, iters, false))
    });
    group.finish();
}

fn readers32(c: &mut Criterion, runtime: &Runtime, server: &server::RedisServer) {
    let conn = runtime.block_on(server.conn());
    let mx = RwMutex::new(conn.clone(), "bench-readers32");
    let mut group = c.benchmark_group("readers32");
    bench_raw_tasks(&mut group, runtime, &conn);
    group.bench_function("read", |b| {
        b.to_async(runtime)
            .iter_custom(|iters| mutex_tasks(&mx, iters, true))
    });
    group.bench_function("read_floor", |b| {
        b.to_async(runtime)
            .iter_custom(|iters| raw_tasks(&conn, iters, true))
    });
    group.finish();
}

/// `iters` hand-offs: A takes the lock with `take_a` and B waits for it with `take_b`; A
/// releases (`release`) after [`BLOCKED`]. Sums the time from A's release returning to
/// B's acquire returning; B then releases.
async fn handoffs<T, FA, FB, FR>(
    iters: u64,
    take_a: impl Fn() -> FA,
    take_b: impl Fn() -> FB,
    release: impl Fn(T) -> FR,
) -> Duration
where
    FA: Future<Output = T>,
    FB: Future<Output = T>,
    FR: Future<Output = ()>,
{
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let held = take_a().await;
        let holder = async {
            tokio::time::sleep(BLOCKED).await;
            release(held).await;
            Instant::now()
        };
        let waiter = async {
            let taken = take_b().await;
            (Instant::now(), taken)
        };
        let (released, (acquired, taken)) = tokio::join!(holder, waiter);
        total += acquired.saturating_duration_since(released);
        release(taken).await;
    }
    total
}

/// Unlocks a write guard or a permit, which must still have been held.
async fn unlock<G: Guard>(guard: G) {
    assert!(guard.unlock().await.expect("unlock"));
}

fn handoff(c: &mut Criterion, runtime: &Runtime, server: &server::RedisServer) {
    let client = server.client();
    let (conn_a, conn_b) = runtime.block_on(async { (server.conn().await, server.conn().await) });
    let mut group = c.benchmark_group("handoff");
    // Each iteration waits BLOCKED first: few, flat samples keep the run short.
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));

    group.bench_function("raw", |b| {
        const KEY: &str = "bench-handoff:raw";
        // Shared by every iteration's future, one at a time.
        let messages = tokio::sync::Mutex::new(runtime.block_on(async {
            let mut pubsub = client.get_async_pubsub().await.expect("pubsub");
            pubsub
                .subscribe(format!("{KEY}:released"))
                .await
                .expect("SUBSCRIBE");
            pubsub.into_on_message()
        }));
        let (id_a, id_b) = (raw_id(1), raw_id(2));
        b.to_async(runtime).iter_custom(|iters| {
            let (mut conn_a, mut conn_b) = (conn_a.clone(), conn_b.clone());
            let (id_a, id_b, messages) = (&id_a, &id_b, &messages);
            async move {
                let mut messages = messages.lock().await;
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    assert!(raw_set(&mut conn_a, KEY, id_a, TTL_MS)
                        .await
                        .expect("SET NX PX"));
                    let holder = async {
                        tokio::time::sleep(BLOCKED).await;
                        raw_release(&mut conn_a, &RELEASE_PUBLISH, KEY, id_a).await;
                        Instant::now()
                    };
                    let waiter = async {
                        while !raw_set(&mut conn_b, KEY, id_b, TTL_MS)
                            .await
                            .expect("SET NX PX")
                        {
                            // Subscribed before the first SET: the timeout only
                            // bounds a wait on a holder that never publishes.
                            let _ = tokio::time::timeout(
                                Duration::from_millis(TTL_MS),
                                messages.next(),
                            )
                            .await;
                        }
                        Instant::now()
                    };
                    let (released, acquired) = tokio::join!(holder, waiter);
                    total += acquired.saturating_duration_since(released);
                    raw_release(&mut conn_b, &RELEASE, KEY, id_b).await;
                }
                total
            }
        })
    });

    let mx_a = RwMutex::new(conn_a.clone(), "bench-handoff");
    let mx_b = RwMutex::builder(conn_b.clone(), "bench-handoff")
        .notifier(client.clone())
        .build()
        .expect("mutex B");
    let fair = |conn: &MultiplexedConnection| {
        RwMutex::builder(conn.clone(), "bench-handoff-fair").fair(true)
    };
    let fair_a = fair(&conn_a).build().expect("fair mutex A");
    let fair_b = fair(&conn_b)
        .notifier(client.clone())
        .build()
        .expect("fair mutex B");
    for (name, a, b) in [("write", &mx_a, &mx_b), ("fair_write", &fair_a, &fair_b)] {
        group.bench_function(name, |bencher| {
            bencher.to_async(runtime).iter_custom(|iters| {
                let take_a = || async { a.write().key("k").await.expect("A write") };
                let take_b = || async { b.write().key("k").await.expect("B write") };
                handoffs(iters, take_a, take_b, unlock)
            })
        });
    }

    let semaphore = |conn: &MultiplexedConnection| {
        Semaphore::builder(conn.clone(), "bench-handoff-semaphore", 1).fair(true)
    };
    let sem_a = semaphore(&conn_a).build().expect("semaphore A");
    let sem_b = semaphore(&conn_b)
        .notifier(client.clone())
        .build()
        .expect("semaphore B");
    group.bench_function("fair_permit", |bencher| {
        bencher.to_async(runtime).iter_custom(|iters| {
            let take_a = || async { sem_a.acquire().key("k").await.expect("A acquire") };
            let take_b = || async { sem_b.acquire().key("k").await.expect("B acquire") };
            handoffs(iters, take_a, take_b, unlock)
        })
    });
    group.finish();
}

fn cycles(c: &mut Criterion) {
    let runtime = Runtime::new().expect("tokio runtime");
    let server = server::RedisServer::start();
    uncontended(c, &runtime, &server);
    tasks32(c, &runtime, &server);
    readers32(c, &runtime, &server);
    handoff(c, &runtime, &server);
}

criterion_group!(benches, cycles);
criterion_main!(benches);
