//! A shared-read/exclusive-write cache: readers share the lock, a writer with lock intent
//! gets in without being starved and writes the entry through `WriteGuard::exec` (only while
//! the lock is still its own), a stale writer's write is refused, a guard's cancellation
//! token stops work the moment its lock is lost, a stale entry is rebuilt once through
//! `upgradable_read` (read, find it stale, upgrade with no writer in between), and a fair
//! semaphore lets at most two cache rebuilds run at once across processes, in the order
//! they asked.
//!
//! Run with `cargo run --example cache`. With `REDIS_URL` unset it starts a throwaway
//! `redis-server` (`$REDIS_SERVER`, else the one on PATH); with it set, it uses that
//! server, and keys starting with `redismutex-example`. Its first line of output says
//! which, and why.

#[path = "../tests/common/server.rs"]
#[allow(dead_code, unreachable_pub)]
mod server;

#[path = "support/which_server.rs"]
mod which_server;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redismutex::{RwMutex, Semaphore};

const VALUE: &str = "redismutex-example-data:profile";
const VERSION: &str = "redismutex-example-data:profile:version";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let started = Instant::now();
    let (_server, url) = match which_server::choose() {
        Ok(chosen) => chosen,
        Err(err) => {
            eprintln!("{err}");
            std::process::exit(1);
        }
    };
    let client = redis::Client::open(url)?;
    let conn = client.get_multiplexed_async_connection().await?;
    let mx = RwMutex::builder(conn.clone(), "redismutex-example")
        .ttl(Duration::from_secs(1))
        .lock_intent(true)
        // Waiters are woken by each release instead of polling.
        .notifier(client.clone())
        .build()?;
    conn.clone().set::<_, _, ()>(VALUE, "v1").await?;

    // Three readers read the cached value over and over, sharing the lock.
    let mut readers = Vec::new();
    for n in 1..=3 {
        let (mx, mut conn) = (mx.clone(), conn.clone());
        readers.push(tokio::spawn(async move {
            for _ in 0..6 {
                let guard = mx.read().key("profile").await?;
                let value: String = conn.get(VALUE).await?;
                println!("{:>5} ms  reader {n} reads {value:?}", ms(started));
                tokio::time::sleep(Duration::from_millis(120)).await;
                guard.unlock().await?;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        }));
    }

    // A writer arrives while they read. Its lock intent keeps new readers out, so it
    // gets the lock as soon as the current readers finish instead of waiting forever.
    tokio::time::sleep(Duration::from_millis(300)).await;
    println!(
        "{:>5} ms  writer waits; the lock intent keeps new readers out",
        ms(started)
    );
    let guard = mx
        .write()
        .key("profile")
        .timeout(Duration::from_secs(5))
        .await?;
    println!(
        "{:>5} ms  writer holds the lock alone; updating",
        ms(started)
    );
    // The write runs only if the lock is still this guard's, checked in the same step.
    let mut pipe = redis::pipe();
    pipe.set(VALUE, "v2").ignore().incr(VERSION, 1);
    let (version,): (i64,) = guard.exec(&pipe).await?;
    println!("{:>5} ms  writer wrote v2 (version {version})", ms(started));
    tokio::time::sleep(Duration::from_millis(200)).await;
    guard.unlock().await?;
    println!("{:>5} ms  writer released; readers see v2", ms(started));
    for reader in readers {
        reader.await??;
    }

    stale_writer_is_refused(&mx, conn.clone(), started).await?;
    stop_work_on_lost_lock(&mx, conn.clone(), started).await?;
    rebuild_once_through_upgradable_reads(&mx, conn.clone(), started).await?;
    rebuilds_two_at_a_time(&client, started).await?;
    println!("{:>5} ms  done", ms(started));
    Ok(())
}

/// A writer whose lock went while it was paused (here: its key is deleted, as its expiry
/// would) writes too late: `exec` refuses its write, and the newer entry stays.
async fn stale_writer_is_refused(
    mx: &RwMutex<MultiplexedConnection>,
    mut conn: MultiplexedConnection,
    started: Instant,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let stale = mx.write().key("profile").await?;
    conn.del::<_, ()>(stale.key()).await?;
    let fresh = mx.write().key("profile").await?;
    let mut pipe = redis::pipe();
    pipe.set(VALUE, "v3").ignore();
    fresh.exec::<()>(&pipe).await?;
    println!("{:>5} ms  a new writer wrote v3", ms(started));
    let mut late = redis::pipe();
    late.set(VALUE, "stale").ignore();
    match stale.exec::<()>(&late).await {
        Err(redismutex::Error::NotHeld { .. }) => println!(
            "{:>5} ms  the stale writer's write was refused ({:?}); nothing was written",
            ms(started),
            stale.cancel_reason()
        ),
        other => return Err(format!("a stale write was not refused: {other:?}").into()),
    }
    let value: String = conn.get(VALUE).await?;
    assert_eq!(value, "v3", "the stale write overwrote the new entry");
    fresh.unlock().await?;
    drop(stale);
    Ok(())
}

/// A job that must stop the moment it no longer holds its lock.
async fn stop_work_on_lost_lock(
    mx: &RwMutex<MultiplexedConnection>,
    mut conn: MultiplexedConnection,
    started: Instant,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let guard = mx.write().key("report").await?;
    println!("{:>5} ms  job holds {}; working", ms(started), guard.key());
    let token = guard.cancellation_token().child_token();
    let job = tokio::spawn(async move {
        let mut steps = 0;
        loop {
            tokio::select! {
                () = token.cancelled() => return steps,
                () = tokio::time::sleep(Duration::from_millis(50)) => steps += 1,
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Somebody removes the lock behind the job's back (an operator, a failover...).
    conn.del::<_, ()>(guard.key()).await?;
    println!(
        "{:>5} ms  the lock key was deleted behind the job's back",
        ms(started)
    );
    let steps = job.await?;
    println!(
        "{:>5} ms  job stopped after {steps} steps: {:?}",
        ms(started),
        guard.cancel_reason()
    );
    Ok(())
}

/// Three tasks find the entry gone at once. Each reads it under an upgradable read
/// (plain readers could share the lock meanwhile); at most one holds such a read at a
/// time, so the first finds it stale, upgrades (no writer can come between its read and
/// its write) and rebuilds it, and the others find it fresh: one rebuild, not three.
async fn rebuild_once_through_upgradable_reads(
    mx: &RwMutex<MultiplexedConnection>,
    mut conn: MultiplexedConnection,
    started: Instant,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    const ENTRY: &str = "redismutex-example-data:entry";
    const REBUILDS: &str = "redismutex-example-data:entry:rebuilds";
    conn.del::<_, ()>(&[ENTRY, REBUILDS]).await?;
    let mut tasks = Vec::new();
    for n in 1..=3 {
        let mx = mx.clone();
        tasks.push(tokio::spawn(async move {
            let entry = mx.upgradable_read().key("entry").await?;
            let mut get = redis::pipe();
            get.get(ENTRY);
            let (cached,): (Option<String>,) = entry.exec(&get).await?;
            if cached.is_some() {
                println!("{:>5} ms  task {n} finds the entry fresh", ms(started));
                return entry.unlock().await.map(|_| ());
            }
            let entry = entry.upgrade().await?;
            let mut rebuild = redis::pipe();
            rebuild
                .set(ENTRY, "rebuilt")
                .ignore()
                .incr(REBUILDS, 1)
                .ignore();
            let () = entry.exec(&rebuild).await?;
            println!(
                "{:>5} ms  task {n} found it stale, upgraded and rebuilt it (token {})",
                ms(started),
                entry.fencing_token()
            );
            entry.unlock().await.map(|_| ())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let rebuilds: i64 = conn.get(REBUILDS).await?;
    println!(
        "{:>5} ms  the entry was rebuilt {rebuilds} time(s)",
        ms(started)
    );
    assert_eq!(rebuilds, 1, "an entry was rebuilt twice");
    Ok(())
}

/// Five cache rebuilds, asked for from two connections as two processes would, share a
/// fair semaphore of two permits: at most two run at once, served in the order they asked.
async fn rebuilds_two_at_a_time(
    client: &redis::Client,
    started: Instant,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut jobs = Vec::new();
    for n in 1..=5 {
        // Every rebuild has a connection of its own, as one process per rebuild would.
        let conn = client.get_multiplexed_async_connection().await?;
        let rebuilds = Semaphore::builder(conn, "redismutex-example-rebuilds", 2)
            .fair(true)
            .notifier(client.clone())
            .build()?;
        let (running, most) = (Arc::clone(&running), Arc::clone(&most));
        jobs.push(tokio::spawn(async move {
            let permit = rebuilds.acquire().timeout(Duration::from_secs(5)).await?;
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            println!("{:>5} ms  rebuild {n} runs ({now} running)", ms(started));
            tokio::time::sleep(Duration::from_millis(100)).await;
            running.fetch_sub(1, Ordering::SeqCst);
            permit.unlock().await?;
            Ok::<_, redismutex::Error>(())
        }));
        // They ask one after another, so the queue has an order to keep.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for job in jobs {
        job.await??;
    }
    let most = most.load(Ordering::SeqCst);
    println!("{:>5} ms  at most {most} rebuilds ran at once", ms(started));
    assert!(most <= 2, "the semaphore let {most} rebuilds run at once");
    Ok(())
}

fn ms(started: Instant) -> u128 {
    started.elapsed().as_millis()
}
