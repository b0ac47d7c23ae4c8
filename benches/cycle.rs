//! Uncontended lock cycles (acquire + release) against a harness-started redis-server.

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
