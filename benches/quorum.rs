//! The uncontended write cycle over a quorum of three independent `redis-server`s
//! (started by the test harness on loopback), next to the same cycle on one of them
//! alone, each beside its raw redis-rs baseline, all in one run, so results read as
//! ratios: "over the quorum X × one server, Y × the raw quorum cycle".
//!
//! `quorum_uncontended`, one task, one key:
//! - `single_raw`: on the first node alone, `SET key id NX PX ttl`, then a
//!   compare-and-delete script sent as EVALSHA (as `uncontended/raw` in `cycle.rs`);
//! - `single_write`: `write()` + `unlock()` on a mutex over the first node alone;
//! - `quorum_raw`: the same Redis work a quorum lock needs, with no library (`raw.rs`):
//!   on all three nodes at once, `SET key id NX PX ttl` + `INCR key:fence` pipelined,
//!   decided at a majority; then `SET key:fence <largest token> PX <24 h>` on all three,
//!   decided at a majority; then the compare-and-delete script on all three, waiting for
//!   every node; each node's call bounded by ttl/10, as the library's;
//! - `quorum_write`: `write()` + `unlock()` on a mutex over the [`Quorum`] of the three
//!   (`lock.lua`, then `fence.lua`, then `unlock.lua`, each on every node).
//!
//! `cargo bench --bench quorum -- --test` runs every benchmark once.

#[path = "../tests/common/server.rs"]
#[allow(dead_code, unreachable_pub)]
mod server;

#[path = "raw.rs"]
#[allow(dead_code, unreachable_pub)]
mod raw;

use criterion::{criterion_group, criterion_main, Criterion};
use raw::{raw_cycle, raw_id, raw_quorum_cycle};
use redis::aio::MultiplexedConnection;
use redismutex::{Deployment, Quorum, RwMutex};
use server::RedisServer;
use tokio::runtime::Runtime;

/// The nodes of the quorum.
const NODES: usize = 3;
/// The PX of raw locks, the library's default TTL.
const TTL_MS: u64 = 4000;
/// The PX of the raw fence counter, the library's default fence retention (24 h).
const FENCE_MS: u64 = 24 * 3600 * 1000;

async fn write_cycle<C: Deployment>(mx: &RwMutex<C>, key: &str) {
    let guard = mx.write().key(key).await.expect("write");
    assert!(guard.unlock().await.expect("unlock"));
}

fn quorum_uncontended(c: &mut Criterion) {
    let runtime = Runtime::new().expect("tokio runtime");
    let servers: Vec<RedisServer> = (0..NODES).map(|_| RedisServer::start()).collect();
    let nodes: Vec<MultiplexedConnection> = runtime.block_on(async {
        let mut nodes = Vec::new();
        for server in &servers {
            nodes.push(server.conn().await);
        }
        nodes
    });
    let single = RwMutex::new(nodes[0].clone(), "bench-single");
    let quorum = RwMutex::new(Quorum::new(nodes.clone()).expect("quorum"), "bench-quorum");
    let id = raw_id(0);

    let mut group = c.benchmark_group("quorum_uncontended");
    group.bench_function("single_raw", |b| {
        b.to_async(&runtime).iter(|| {
            let (mut conn, id) = (nodes[0].clone(), &id);
            async move { raw_cycle(&mut conn, "bench-raw:single", id, TTL_MS).await }
        })
    });
    group.bench_function("single_write", |b| {
        b.to_async(&runtime).iter(|| write_cycle(&single, "one"))
    });
    group.bench_function("quorum_raw", |b| {
        b.to_async(&runtime).iter(|| {
            let (nodes, id) = (&nodes, &id);
            async move { raw_quorum_cycle(nodes, "bench-raw:quorum", id, TTL_MS, FENCE_MS).await }
        })
    });
    group.bench_function("quorum_write", |b| {
        b.to_async(&runtime).iter(|| write_cycle(&quorum, "one"))
    });
    group.finish();
}

criterion_group!(benches, quorum_uncontended);
criterion_main!(benches);
