//! Uncontended lock cycles (acquire + release) against a harness-started redis-server,
//! next to a baseline: the same two round trips done with plain redis-rs commands
//! (`SET key id NX PX ttl`, then `DEL key`), so results read as a ratio to it.

#[path = "../tests/common/server.rs"]
#[allow(dead_code, unreachable_pub)]
mod server;

use criterion::{criterion_group, criterion_main, Criterion};
use redismutex::RwMutex;

fn cycles(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let server = server::RedisServer::start();
    let mx = runtime.block_on(async { RwMutex::new(server.conn().await, "bench") });

    let mut group = c.benchmark_group("cycle");
    let conn = runtime.block_on(server.conn());
    group.bench_function("baseline_set_nx_del", |b| {
        b.to_async(&runtime).iter(|| {
            let mut conn = conn.clone();
            async move {
                let set: Option<String> = redis::cmd("SET")
                    .arg("bench-baseline")
                    .arg("0123456789abcdef0123456789abcdef")
                    .arg("NX")
                    .arg("PX")
                    .arg(4000)
                    .query_async(&mut conn)
                    .await
                    .expect("SET NX");
                assert!(set.is_some());
                let deleted: i64 = redis::cmd("DEL")
                    .arg("bench-baseline")
                    .query_async(&mut conn)
                    .await
                    .expect("DEL");
                assert_eq!(deleted, 1);
            }
        })
    });
    group.bench_function("write", |b| {
        b.to_async(&runtime).iter(|| async {
            let guard = mx.write().await.expect("write");
            assert!(guard.unlock().await.expect("unlock"));
        })
    });
    group.bench_function("read", |b| {
        b.to_async(&runtime).iter(|| async {
            let guard = mx.read().await.expect("read");
            assert!(guard.unlock().await.expect("unlock"));
        })
    });
    group.bench_function("try_write", |b| {
        b.to_async(&runtime).iter(|| async {
            let guard = mx.try_write().await.expect("try_write").expect("free");
            assert!(guard.unlock().await.expect("unlock"));
        })
    });
    group.finish();
}

criterion_group!(benches, cycles);
criterion_main!(benches);
