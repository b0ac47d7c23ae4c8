//! Lock cycles on a Redis Cluster (three masters with a replica each, started by the
//! test harness), each next to its raw redis-rs baseline on the same cluster and next to
//! the same pair on one `redis-server`, all in one run, so results read as ratios:
//! "on the cluster X × raw, on one node Y × raw".
//!
//! On a cluster the mutex takes every write lock by its `lock.lua` script (the write
//! fast path is off and tokens are floored at the clock) and releases by `unlock.lua`
//! with `SPUBLISH`. The raw write cycle is, everywhere, `SET key id NX PX ttl`, then a
//! compare-and-delete script sent as EVALSHA (`redis::Script`).
//!
//! - `cluster_tasks32`: 32 tasks on their own keys sharing one connection; one
//!   iteration is one write cycle (acquire + release) per task, as `tasks32` in
//!   `cycle.rs`. `raw` and `write` share one `ClusterConnection` and use keys tagged
//!   `{0}`..`{31}`, spread over all three masters; `fenced` is the fenced floor there,
//!   the least Redis work a fenced, notifying cycle needs (`SET NX PX` and `INCR
//!   <key>:fence` pipelined, then a compare-delete-`SPUBLISH` script); `single_raw`,
//!   `single_fenced` (with `PUBLISH`) and `single_write` the same on one server over one
//!   `MultiplexedConnection`.
//! - `cluster_handoff`: A holds key K and B waits for it on its own connection (B's
//!   mutex has a notifier); A releases; measured from A's release returning to B's
//!   acquire returning, as `handoff` in `cycle.rs`. `raw` is the floor: B waits on a
//!   sharded subscription (`SSUBSCRIBE K:released` on a RESP3 cluster connection with a
//!   push sender) and retries `SET NX` when woken; A releases with a
//!   compare-delete-`SPUBLISH` script. `write`: B's mutex has `Notifier::cluster`.
//!   `single_raw` (`SUBSCRIBE`, `PUBLISH`) and `single_write` (`Notifier::new`) are the
//!   same on one server.
//!
//! `cargo bench --features cluster --bench cluster -- --test` runs every benchmark once.

#[path = "../tests/common/server.rs"]
#[allow(dead_code, unreachable_pub)]
mod server;

#[path = "../tests/common/blocking.rs"]
#[allow(dead_code, unreachable_pub)]
mod blocking;

#[path = "../tests/common/cluster.rs"]
#[allow(dead_code, unreachable_pub)]
mod cluster;

#[path = "raw.rs"]
#[allow(dead_code, unreachable_pub)]
mod raw;

use std::collections::BTreeSet;
use std::pin::Pin;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, SamplingMode};
use futures_util::{stream, Stream, StreamExt};
use raw::{
    raw_cycle, raw_fenced_cycle, raw_id, raw_release, raw_set, RELEASE, RELEASE_PUBLISH,
    RELEASE_SPUBLISH,
};
use redis::aio::ConnectionLike;
use redis::cluster::{ClusterClient, ClusterConfig};
use redis::{PushKind, Script};
use redismutex::{Notifier, RwMutex};
use tokio::runtime::Runtime;
use tokio::sync::Mutex;
use tokio::task::JoinSet;

/// Tasks sharing one connection in `cluster_tasks32`.
const TASKS: usize = 32;
/// The PX of raw locks, the library's default TTL.
const TTL_MS: u64 = 4000;
/// How long B waits, blocked, before A releases in `cluster_handoff` (not counted).
const BLOCKED: Duration = Duration::from_millis(5);
/// The name of the mutexes in `cluster_tasks32`.
const TASKS_NAME: &str = "bench-tasks32";

/// A connection the mutex and the raw baseline both run on.
trait Conn: ConnectionLike + Clone + Send + Sync + 'static {}
impl<C: ConnectionLike + Clone + Send + Sync + 'static> Conn for C {}

type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// One wake-up per release message on the raw waiter's subscription.
type Wakeups = Pin<Box<dyn Stream<Item = ()> + Send>>;

/// Raw key `n`, tagged so that on the cluster it shares the slot of the mutex's key `n`.
fn raw_key(n: usize) -> String {
    format!("bench-raw:{{{n}}}")
}

async fn write_cycle<C: Conn>(mx: &RwMutex<C>, key: &str) {
    let guard = mx.write().key(key).await.expect("write");
    assert!(guard.unlock().await.expect("unlock"));
}

/// Runs `iters` raw cycles in each of [`TASKS`] tasks on their own keys, concurrently:
/// [`raw_cycle`], or with `fenced` the fenced floor's [`raw_fenced_cycle`] releasing with
/// that script.
async fn raw_tasks<C: Conn>(conn: &C, fenced: Option<&'static Script>, iters: u64) -> Duration {
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for task in 0..TASKS {
        let mut conn = conn.clone();
        tasks.spawn(async move {
            let (key, id) = (raw_key(task), raw_id(task));
            for _ in 0..iters {
                match fenced {
                    Some(release) => {
                        raw_fenced_cycle(&mut conn, release, &key, &id, TTL_MS).await;
                    }
                    None => raw_cycle(&mut conn, &key, &id, TTL_MS).await,
                }
            }
        });
    }
    tasks.join_all().await;
    start.elapsed()
}

/// Runs `iters` write cycles in each of [`TASKS`] tasks on their own keys, concurrently.
async fn mutex_tasks<C: Conn>(mx: &RwMutex<C>, iters: u64) -> Duration {
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for task in 0..TASKS {
        let mx = mx.clone();
        tasks.spawn(async move {
            let key = task.to_string();
            for _ in 0..iters {
                write_cycle(&mx, &key).await;
            }
        });
    }
    tasks.join_all().await;
    start.elapsed()
}

/// `<prefix>raw`, `<prefix>fenced` and `<prefix>write` of `cluster_tasks32`, on `mx`'s
/// connection; `release` is the fenced cycle's release (`SPUBLISH` on the cluster).
fn bench_tasks<C: Conn>(
    group: &mut Group<'_>,
    runtime: &Runtime,
    prefix: &str,
    mx: &RwMutex<C>,
    release: &'static Script,
) {
    let conn = mx.connection().clone();
    group.bench_function(format!("{prefix}raw"), |b| {
        b.to_async(runtime)
            .iter_custom(|iters| raw_tasks(&conn, None, iters))
    });
    group.bench_function(format!("{prefix}fenced"), |b| {
        b.to_async(runtime)
            .iter_custom(|iters| raw_tasks(&conn, Some(release), iters))
    });
    group.bench_function(format!("{prefix}write"), |b| {
        b.to_async(runtime)
            .iter_custom(|iters| mutex_tasks(mx, iters))
    });
}

/// Panics unless the lock keys of [`TASKS_NAME`] (and so the raw keys) reach every master.
fn assert_spread(cluster: &cluster::Cluster) {
    let masters = cluster.masters();
    let reached: BTreeSet<u16> = (0..TASKS)
        .map(|n| cluster::slot(&format!("{TASKS_NAME}:{{{n}}}")))
        .filter_map(|slot| masters.iter().find(|master| master.serves(slot)))
        .map(|master| master.port)
        .collect();
    assert_eq!(reached.len(), masters.len(), "keys on {reached:?} only");
}

fn cluster_tasks32(
    c: &mut Criterion,
    runtime: &Runtime,
    cluster: &cluster::Cluster,
    server: &server::RedisServer,
) {
    assert_spread(cluster);
    let on_cluster = RwMutex::builder(runtime.block_on(cluster.conn()), TASKS_NAME)
        .hash_tag_keys(true)
        .build()
        .expect("cluster mutex");
    let on_server = RwMutex::new(runtime.block_on(server.conn()), TASKS_NAME);
    let mut group = c.benchmark_group("cluster_tasks32");
    bench_tasks(&mut group, runtime, "", &on_cluster, &RELEASE_SPUBLISH);
    bench_tasks(&mut group, runtime, "single_", &on_server, &RELEASE_PUBLISH);
    group.finish();
}

/// A raw waiter's wake-ups on one server: `SUBSCRIBE channel`.
async fn wakeups(client: &redis::Client, channel: String) -> Wakeups {
    let mut pubsub = client.get_async_pubsub().await.expect("pubsub");
    pubsub.subscribe(channel).await.expect("SUBSCRIBE");
    pubsub.into_on_message().map(drop).boxed()
}

/// A raw waiter's wake-ups on the cluster: `SSUBSCRIBE channel` on a RESP3 cluster
/// connection whose push messages come through a channel; only `smessage` pushes count.
async fn sharded_wakeups(client: &ClusterClient, channel: String) -> Wakeups {
    let (sender, pushes) = tokio::sync::mpsc::unbounded_channel();
    let config = ClusterConfig::new().set_push_sender(sender);
    let mut conn = client
        .get_async_connection_with_config(config)
        .await
        .expect("cluster connection with a push sender");
    conn.ssubscribe(channel).await.expect("SSUBSCRIBE");
    // The stream keeps the connection, and so the subscription, alive.
    stream::unfold((conn, pushes), |(conn, mut pushes)| async move {
        loop {
            if pushes.recv().await?.kind == PushKind::SMessage {
                return Some(((), (conn, pushes)));
            }
        }
    })
    .boxed()
}

/// B's raw wait: `SET NX` until it succeeds, waiting for a wake-up after each failure.
async fn raw_wait(conn: &mut impl ConnectionLike, wakeups: &mut Wakeups, key: &str, id: &str) {
    while !raw_set(conn, key, id, TTL_MS).await.expect("SET NX PX") {
        // Subscribed before the first SET: the timeout only bounds a wait on a holder
        // that never publishes.
        let _ = tokio::time::timeout(Duration::from_millis(TTL_MS), wakeups.next()).await;
    }
}

/// `iters` raw hand-offs of `key` from A to B; the time from A's release (by `release`,
/// which publishes) returning to B's `SET NX` succeeding, summed.
async fn raw_handoffs<C: Conn>(
    (mut conn_a, mut conn_b): (C, C),
    wakeups: &Mutex<Wakeups>,
    release: &Script,
    key: &str,
    iters: u64,
) -> Duration {
    let mut wakeups = wakeups.lock().await;
    let (id_a, id_b) = (raw_id(1), raw_id(2));
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        assert!(raw_set(&mut conn_a, key, &id_a, TTL_MS)
            .await
            .expect("SET NX PX"));
        let holder = async {
            tokio::time::sleep(BLOCKED).await;
            raw_release(&mut conn_a, release, key, &id_a).await;
            Instant::now()
        };
        let waiter = async {
            raw_wait(&mut conn_b, &mut wakeups, key, &id_b).await;
            Instant::now()
        };
        let (released, acquired) = tokio::join!(holder, waiter);
        total += acquired.saturating_duration_since(released);
        raw_release(&mut conn_b, &RELEASE, key, &id_b).await;
    }
    total
}

/// `iters` hand-offs of key `k` from `mx_a` to `mx_b`; the time from A's unlock
/// returning to B's write returning, summed.
async fn mutex_handoffs<C: Conn>(mx_a: &RwMutex<C>, mx_b: &RwMutex<C>, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let held = mx_a.write().key("k").await.expect("A write");
        let holder = async {
            tokio::time::sleep(BLOCKED).await;
            assert!(held.unlock().await.expect("A unlock"));
            Instant::now()
        };
        let waiter = async {
            let guard = mx_b.write().key("k").await.expect("B write");
            (Instant::now(), guard)
        };
        let (released, (acquired, guard)) = tokio::join!(holder, waiter);
        total += acquired.saturating_duration_since(released);
        assert!(guard.unlock().await.expect("B unlock"));
    }
    total
}

/// The raw side of a hand-off bench: A and B on `conns`, B woken by `wakeups`.
struct RawHandoff<C> {
    conns: (C, C),
    wakeups: Mutex<Wakeups>,
    release: &'static Script,
    key: String,
}

fn bench_raw_handoff<C: Conn>(
    group: &mut Group<'_>,
    runtime: &Runtime,
    name: &str,
    raw: &RawHandoff<C>,
) {
    group.bench_function(name, |b| {
        b.to_async(runtime).iter_custom(|iters| {
            let conns = raw.conns.clone();
            raw_handoffs(conns, &raw.wakeups, raw.release, &raw.key, iters)
        })
    });
}

fn bench_mutex_handoff<C: Conn>(
    group: &mut Group<'_>,
    runtime: &Runtime,
    name: &str,
    (mx_a, mx_b): &(RwMutex<C>, RwMutex<C>),
) {
    group.bench_function(name, |b| {
        b.to_async(runtime)
            .iter_custom(|iters| mutex_handoffs(mx_a, mx_b, iters))
    });
}

/// `raw` and `write` of `cluster_handoff`: the raw key shares the slot of the mutex's.
fn cluster_pair(group: &mut Group<'_>, runtime: &Runtime, cluster: &cluster::Cluster) {
    let client = cluster.client();
    let (conn_a, conn_b) = runtime.block_on(async { (cluster.conn().await, cluster.conn().await) });
    let key = "bench-handoff-raw:{k}".to_string();
    let raw = RawHandoff {
        conns: (conn_a.clone(), conn_b.clone()),
        wakeups: Mutex::new(runtime.block_on(sharded_wakeups(&client, format!("{key}:released")))),
        release: &RELEASE_SPUBLISH,
        key,
    };
    bench_raw_handoff(group, runtime, "raw", &raw);
    let build = |conn, notifier: Option<Notifier>| {
        let builder = RwMutex::builder(conn, "bench-handoff").hash_tag_keys(true);
        let builder = match notifier {
            Some(notifier) => builder.notifier(notifier),
            None => builder,
        };
        builder.build().expect("cluster mutex")
    };
    let mutexes = (
        build(conn_a, None),
        build(conn_b, Some(Notifier::cluster(client))),
    );
    bench_mutex_handoff(group, runtime, "write", &mutexes);
}

/// `single_raw` and `single_write` of `cluster_handoff`, as `handoff` in `cycle.rs`.
fn single_pair(group: &mut Group<'_>, runtime: &Runtime, server: &server::RedisServer) {
    let client = server.client();
    let (conn_a, conn_b) = runtime.block_on(async { (server.conn().await, server.conn().await) });
    let key = "bench-handoff-raw".to_string();
    let raw = RawHandoff {
        conns: (conn_a.clone(), conn_b.clone()),
        wakeups: Mutex::new(runtime.block_on(wakeups(&client, format!("{key}:released")))),
        release: &RELEASE_PUBLISH,
        key,
    };
    bench_raw_handoff(group, runtime, "single_raw", &raw);
    let mx_b = RwMutex::builder(conn_b, "bench-handoff")
        .notifier(Notifier::new(client))
        .build()
        .expect("mutex B");
    let mutexes = (RwMutex::new(conn_a, "bench-handoff"), mx_b);
    bench_mutex_handoff(group, runtime, "single_write", &mutexes);
}

fn cluster_handoff(
    c: &mut Criterion,
    runtime: &Runtime,
    cluster: &cluster::Cluster,
    server: &server::RedisServer,
) {
    let mut group = c.benchmark_group("cluster_handoff");
    // Each iteration waits BLOCKED first: few, flat samples keep the run short.
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    cluster_pair(&mut group, runtime, cluster);
    single_pair(&mut group, runtime, server);
    group.finish();
}

fn cycles(c: &mut Criterion) {
    let runtime = Runtime::new().expect("tokio runtime");
    let cluster = cluster::Cluster::start();
    let server = server::RedisServer::start();
    cluster_tasks32(c, &runtime, &cluster, &server);
    cluster_handoff(c, &runtime, &cluster, &server);
}

criterion_group!(benches, cycles);
criterion_main!(benches);
