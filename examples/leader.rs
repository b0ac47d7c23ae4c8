//! Leader election: three candidates share a job; one leads at a time, each leader's
//! writes carry its term and run only while it still leads, and an observer follows
//! every change of leader.
//!
//! Run with `cargo run --example leader`. With `REDIS_URL` unset it starts a throwaway
//! `redis-server` (`$REDIS_SERVER`, else the one on PATH); with it set, it uses that
//! server, and keys starting with `redismutex-leader`. Its first line of output says
//! which, and why.

#[path = "../tests/common/server.rs"]
#[allow(dead_code, unreachable_pub)]
mod server;

#[path = "support/which_server.rs"]
mod which_server;

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redismutex::{Election, Leadership};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The election's name; its record is `redismutex-leader:leader`.
const NAME: &str = "redismutex-leader";
/// Where each leader writes its work: the last term written and how many writes.
const DATA: &str = "redismutex-leader-data";

/// One term of leader work: three writes, each run only while this candidate leads,
/// then a resignation; or an end as soon as the lead is lost.
async fn lead(leadership: Leadership, name: &str) -> Result<(), BoxError> {
    let term = leadership.fencing_token();
    for _ in 0..3 {
        let mut pipe = redis::pipe();
        pipe.hset(DATA, "term", term)
            .ignore()
            .hincr(DATA, "writes", 1);
        tokio::select! {
            () = leadership.cancelled() => {
                println!("{name} lost the lead in term {term}");
                return Ok(());
            }
            written = leadership.guard().exec::<(u64,)>(&pipe) => {
                println!("{name} wrote in term {term} (writes: {})", written?.0);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "{name} resigns: was it leading? {}",
        leadership.resign().await?
    );
    Ok(())
}

/// A candidate: campaigns, leads one term, and stops.
async fn candidate(
    conn: MultiplexedConnection,
    client: redis::Client,
    name: &str,
) -> Result<(), BoxError> {
    let election = Election::builder(conn, NAME).notifier(client).build()?;
    let leadership = election
        .campaign(format!("{name} at 10.0.0.{}", name.len()))
        .await?;
    println!("{name} leads in term {}", leadership.fencing_token());
    lead(leadership, name).await
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let (_server, url) = which_server::choose().map_err(BoxError::from)?;
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    conn.del::<_, ()>(DATA).await?;

    let watcher = Election::builder(conn.clone(), NAME)
        .notifier(client.clone())
        .build()?;
    let mut leader = watcher.observe().await?;
    let observer = tokio::spawn(async move {
        let mut terms = Vec::new();
        while leader.changed().await.is_ok() {
            if let Some(now) = &*leader.borrow_and_update() {
                println!(
                    "observer: {} leads in term {}",
                    now.value, now.fencing_token
                );
                terms.push(now.fencing_token);
            }
        }
        terms
    });

    let mut candidates = Vec::new();
    for name in ["a", "bb", "ccc"] {
        let (conn, client) = (
            client.get_multiplexed_async_connection().await?,
            client.clone(),
        );
        candidates.push(tokio::spawn(
            async move { candidate(conn, client, name).await },
        ));
    }
    for task in candidates {
        task.await??;
    }
    let writes: u64 = conn.hget(DATA, "writes").await?;
    if writes != 9 {
        return Err(format!("{writes} writes, not 3 per leader").into());
    }
    if watcher.leader().await?.is_some() {
        return Err("someone still leads".into());
    }
    observer.abort();
    println!("three terms, 9 writes, nobody leads now");
    Ok(())
}
