//! Sets of keys taken in one step, against a harness-started redis-server, next to the
//! same keys taken one by one and to a raw redis-rs baseline, one task on one
//! connection, for 1, 8 and 32 write keys (group `sets_<n>`):
//!
//! - `raw`: one all-or-none script setting every key `PX`, then one compare-and-delete
//!   script over them all (`benches/raw.rs`, `raw_set_cycle`): two round trips whatever
//!   the number of keys;
//! - `lock_all`: `lock_all().write(keys).await` + `unlock()` (one `lock_all.lua`, then one
//!   `unlock.lua` a key, sent together);
//! - `sequential`: the same keys of the same mutex by `write().key(k).await` in order,
//!   then each guard's `unlock()` in order (two round trips a key).
//!
//! `cargo bench --bench sets -- --test` runs every benchmark once. `examples/perf`'s
//! `-- sets` (row 16) measures the same cycles in interleaved phases, and `-- set-limit`
//! (row 17) where one script stops being a sensible step.

#[path = "../tests/common/server.rs"]
#[allow(dead_code, unreachable_pub)]
mod server;

#[path = "raw.rs"]
#[allow(dead_code, unreachable_pub)]
mod raw;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use raw::{raw_id, raw_set_cycle};
use redis::aio::MultiplexedConnection;
use redismutex::RwMutex;
use tokio::runtime::Runtime;

/// The PX of raw locks, the library's default TTL.
const TTL_MS: u64 = 4000;
/// The numbers of keys measured.
const SIZES: [usize; 3] = [1, 8, 32];

/// The `n` keys of the group of `n`.
fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("set:{n}:{i}")).collect()
}

async fn lock_all_cycle(mx: &RwMutex<MultiplexedConnection>, keys: &[String]) {
    let guard = mx
        .lock_all()
        .write(keys.iter().cloned())
        .await
        .expect("lock_all");
    assert!(guard.unlock().await.expect("unlock"));
}

async fn sequential_cycle(mx: &RwMutex<MultiplexedConnection>, keys: &[String]) {
    let mut guards = Vec::with_capacity(keys.len());
    for key in keys {
        guards.push(mx.write().key(key.as_str()).await.expect("write"));
    }
    for guard in guards {
        assert!(guard.unlock().await.expect("unlock"));
    }
}

fn sets(c: &mut Criterion) {
    let runtime = Runtime::new().expect("tokio runtime");
    let server = server::RedisServer::start();
    let conn = runtime.block_on(server.conn());
    let mx = RwMutex::new(conn.clone(), "bench-sets");
    for n in SIZES {
        let keys = keys(n);
        let raw_keys: Vec<String> = keys.iter().map(|key| format!("bench-raw-{key}")).collect();
        let mut group = c.benchmark_group(format!("sets_{n}"));
        group
            .sample_size(20)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2));
        group.bench_function("raw", |b| {
            let id = raw_id(0);
            b.to_async(&runtime).iter(|| {
                let (mut conn, id, raw_keys) = (conn.clone(), &id, &raw_keys);
                async move {
                    let cycled = raw_set_cycle(&mut conn, raw_keys, id, TTL_MS).await;
                    assert!(
                        cycled.expect("raw set scripts"),
                        "raw set taken or not released"
                    );
                }
            })
        });
        group.bench_function("lock_all", |b| {
            b.to_async(&runtime).iter(|| lock_all_cycle(&mx, &keys))
        });
        group.bench_function("sequential", |b| {
            b.to_async(&runtime).iter(|| sequential_cycle(&mx, &keys))
        });
        group.finish();
    }
}

criterion_group!(benches, sets);
criterion_main!(benches);
